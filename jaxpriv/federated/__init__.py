"""Federated learning simulation (MATH §6; federated learning is a vmap over clients).

:mod:`~jaxpriv.federated.partition` splits a dataset into per-client datasets (IID, Dirichlet label skew,
McMahan shards) and stacks them into fixed-shape padded arrays; :mod:`~jaxpriv.federated.simulator` runs
FedAvg / FedProx with the clients as a vmapped (and device-sharded) axis, with the local update and the
server's aggregation as pluggable pure functions; :mod:`~jaxpriv.federated.rpdp_accounting` is rPDP-FL's
per-record budget accountant with its baselines (SCF curve fit, Minimum, Dropout, PrivacyFree).

The seeds' systems are configurations of the simulator: :mod:`~jaxpriv.federated.apes` (APES / S-APES),
:mod:`~jaxpriv.federated.gspa` (GSPA shuffled SGD), :mod:`~jaxpriv.federated.rpdp` (rPDP-FL) and
:mod:`~jaxpriv.federated.udpfl` (UDP-FL). Their papers' tables and figures are regenerated from them
by the reproduction layer above the library, :mod:`jaxpriv.reproduce` (``jaxpriv reproduce``).
"""

from . import apes, gspa, partition, rpdp, rpdp_accounting, simulator, udpfl
from .partition import ClientData, Partition
from .rpdp_accounting import (
    BudgetAccountant,
    SCFApproximateFit,
    dropout_rates,
    minimum_rates,
    privacy_free_rates,
    scf_fit,
    scf_sampling_rate,
)
from .simulator import (
    Aggregator,
    FederatedResult,
    LocalResult,
    LocalUpdate,
    RoundHook,
    RoundRecord,
    ServerState,
    default_chunk_size,
    fedavg_local_sgd,
    make_round,
    mean_aggregator,
    round_keys,
    run,
)

__all__ = ["partition", "simulator", "apes", "gspa", "rpdp", "udpfl", "rpdp_accounting", "BudgetAccountant",
           "SCFApproximateFit", "scf_fit", "scf_sampling_rate", "minimum_rates", "dropout_rates",
           "privacy_free_rates", "ClientData", "Partition", "Aggregator", "FederatedResult", "LocalResult",
           "LocalUpdate", "RoundHook", "RoundRecord", "ServerState", "default_chunk_size",
           "fedavg_local_sgd", "make_round", "mean_aggregator", "round_keys", "run"]
