"""rPDP-FL: cross-silo federated learning with record-level personalized DP (seed 004; MATH §1.5, §5, §6).

The system is a configuration of :mod:`jaxpriv.federated.simulator` (Liu, Lou, Xiong, Liu, Meng,
"Cross-silo federated learning with record-level personalized differential privacy", Alg. 3):

1. **rates** (:func:`assign_rates`): every record i gets a Poisson rate q_i from its budget ε_i. The
   product inverts the two-stage accountant exactly (:func:`jaxpriv.calibrate.sampling_rate` with
   ``rounds``/``client_rate``; never overspends). Baselines: the seed's Simulation-CurveFitting fit
   (``"scf"``, may overspend), ``"minimum"``, ``"dropout"`` and ``"privacy_free"``
   (:mod:`jaxpriv.federated.rpdp_accounting`);
2. **each round** the server samples clients with rate λ (:class:`jaxpriv.train.sampling.PoissonSampler`,
   as :func:`jaxpriv.federated.simulator.run` does), the :class:`~jaxpriv.federated.rpdp_accounting.BudgetAccountant`
   pre-checks every record and opts out (q_i := 0 for good) those that one more round would take over
   budget, and each sampled client runs τ local DP-SGD steps (:func:`dp_local_update`): Poisson-sample
   its records with their current rates (padded client, boolean mask), clip per example
   (:func:`jaxpriv.train.clipping.split_clipped_grad_sum`), add N(0, σ²C²) and divide by the client's
   expected batch size Σ_i q_i, never the realised one (:func:`jaxpriv.train.noise.add_noise`, C the
   clipped sum's sensitivity; MATH §6);
3. the server averages the updates (FedAvg, :func:`~jaxpriv.federated.simulator.mean_aggregator`) and
   the accountant charges the round.

The loop is :func:`jaxpriv.federated.simulator.run`'s: the accountant steers it through a
:class:`~jaxpriv.federated.simulator.RoundHook` (the pre-check sets the per-record rates in the client state
before each round, the update charges the round after it), so client sampling and round keys are those of
any ``run`` with the same seed (:func:`jaxpriv.federated.simulator.round_keys`).

Two choices the seed leaves open, made here and stated:

* the average is **uniform over the participating clients** (each client counts alike), not weighted by
  client size: the number of records n_k moves with one record's presence, the number of sampled
  clients does not, so the weights are data-independent post-processing of the noisy updates;
* the expected batch size Σ_i q_i is treated as public, exactly as DP-SGD's normaliser qN (MATH §6).

:func:`jaxpriv.reproduce.rpdp.reproduce` regenerates the seed's headline results on the bundled data (see
its docstring).
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from .. import calibrate, events
from .._numerics import check_array
from ..train import noise
from ..train.clipping import split_clipped_grad_sum
from . import partition as _partition
from . import rpdp_accounting as acct
from .simulator import LocalResult, RoundHook, WithNumbers, fedavg_local_sgd, mean_aggregator, run

__all__ = ["RPDPConfig", "RPDPResult", "METHODS", "dp_local_update", "assign_rates", "train"]

#: Above this many distinct budgets, :func:`assign_rates` takes :func:`jaxpriv.calibrate.sampling_rate`'s
#: table (an exactly evaluated ε(q) grid of ratio 1 + 1e-3: still ε(q_i) ≤ ε_i, and q_i at most 0.1% below
#: the root) instead of ~11 root-finding evaluations per budget: continuous budget laws give one distinct
#: budget per record, and solving 1,437 of them one by one takes ~25 s on a 2-core CPU, the table ~1 s.
_MAX_EXACT_RATES = 256

#: Rate assignments: the product (exact inversion) and the seed's baselines (§7.2) plus the SCF fit (§6.1).
METHODS = ("rpdp", "scf", "minimum", "dropout", "privacy_free")


def _int(name, value, lo):
    if isinstance(value, bool):
        raise ValueError(f"{name} must be an integer ≥ {lo}, got {value!r}")
    return int(check_array(name, value, lo, np.inf, integer=True))


def _real(name, value, lo, hi, **kw):
    arr = np.asarray(check_array(name, value, lo, hi, **kw))
    if arr.ndim != 0:
        raise ValueError(f"{name} must be a scalar, got shape {arr.shape}")
    return float(arr)


@dataclasses.dataclass(frozen=True)
class RPDPConfig:
    """Hyperparameters of an rPDP-FL run (seed 004 Alg. 3; the seed's §7.2 uses T = 15, τ = 50,
    λ = 0.8, δ = 1e-4 on MNIST).

    Attributes:
      rounds: T ≥ 1 communication rounds.
      local_steps: τ ≥ 1 local DP-SGD steps per round.
      client_rate: λ ∈ (0, 1], the probability that a client takes part in a round.
      sigma: noise multiplier σ > 0 (noise N(0, σ²C²) on each clipped sum).
      clip_norm: per-example clipping norm C > 0.
      delta: δ ∈ (0, 1) of every record's (ε_i, δ) guarantee.
      learning_rate: local SGD step size η > 0.
      accounting: ``"mechanism"`` (the seed's Theorem 1: every record still in is charged the
        client-sampled round ρ^{τ,λ}) or ``"realised"`` (only the sampled clients' records, the
        unamplified round); see :class:`~jaxpriv.federated.rpdp_accounting.BudgetAccountant`.
      scf_conversion: RDP→DP conversion the SCF baseline's fit is built on: ``"improved"`` (the authors'
        public code; its q overspends small budgets) or ``"classic"`` (the seed's Alg. 2 text).

    Example:
      >>> RPDPConfig(rounds=5, local_steps=10).client_rate
      0.8
    """

    rounds: int = 15
    local_steps: int = 50
    client_rate: float = 0.8
    sigma: float = 1.0
    clip_norm: float = 1.0
    delta: float = 1e-4
    learning_rate: float = 0.5
    accounting: str = "mechanism"
    scf_conversion: str = "improved"

    def __post_init__(self):
        _int("rounds", self.rounds, 1)
        _int("local_steps", self.local_steps, 1)
        _real("client_rate", self.client_rate, 0.0, 1.0, lo_open=True)
        _real("sigma", self.sigma, 0.0, np.inf, lo_open=True)
        _real("clip_norm", self.clip_norm, 0.0, np.inf, lo_open=True)
        _real("delta", self.delta, 0.0, 1.0, lo_open=True, hi_open=True)
        _real("learning_rate", self.learning_rate, 0.0, np.inf, lo_open=True)
        if self.accounting not in ("mechanism", "realised"):
            raise ValueError(f"accounting must be 'mechanism' or 'realised', got {self.accounting!r}")
        if self.scf_conversion not in ("classic", "improved"):
            raise ValueError(f"scf_conversion must be 'classic' or 'improved', got {self.scf_conversion!r}")


# --------------------------------------------------------------------------------------------------
# the local update
# --------------------------------------------------------------------------------------------------


def dp_local_update(loss_fn, graphdef, rest, optimizer: optax.GradientTransformation, *, local_steps: int,
                    sigma: float, clip_norm: float):
    """rPDP-FL's client update: τ DP-SGD steps with per-record Poisson rates (seed 004 Alg. 3; MATH §6).

    The client state is the client's padded per-record rates q (``(max_n,)``, 0 for padding and opted-out
    records). Step t draws β_i ~ Bernoulli(q_i) for every real record, computes the sum of the sampled
    records' gradients clipped to C (:func:`jaxpriv.train.clipping.split_clipped_grad_sum`), adds
    N(0, σ²C²) per coordinate and divides by the expected batch size Σ_i q_i
    (:func:`jaxpriv.train.noise.add_noise`); ``optimizer`` turns that into the step. The update is
    Δ = w_τ − w_global; a client none of whose records is still in (Σq = 0) returns Δ = 0 (it samples
    nothing ever).

    Args:
      loss_fn: per-example loss ``loss_fn(model, x, y, key) → (B,)`` (e.g.
        :func:`jaxpriv.train.dpsgd.cross_entropy_loss`).
      graphdef, rest: from ``nnx.split(model, nnx.Param, ...)``.
      optimizer: Optax optimizer of the local steps (re-initialised every round), e.g. ``optax.sgd(η)``.
      local_steps: τ ≥ 1.
      sigma: noise multiplier σ ≥ 0 (0: no noise, a debugging configuration only).
      clip_norm: C > 0.

    Returns:
      a :class:`~jaxpriv.federated.simulator.LocalUpdate` (a :class:`~jaxpriv.federated.protocol.WithNumbers`:
      σC, C and ``rest`` are arguments of the compiled round); metrics ``expected_batch`` (Σq) and
      ``sampled`` (mean realised batch size over the τ steps).

    Example:
      >>> import jax, jax.numpy as jnp, optax
      >>> from flax import nnx
      >>> from jaxpriv.federated.partition import ClientData
      >>> from jaxpriv.train.dpsgd import cross_entropy_loss
      >>> graphdef, params, rest = nnx.split(nnx.Linear(4, 3, rngs=nnx.Rngs(0)), nnx.Param, ...)
      >>> local = dp_local_update(cross_entropy_loss, graphdef, rest, optax.sgd(0.1), local_steps=3,
      ...                         sigma=1.0, clip_norm=1.0)
      >>> data = ClientData(jnp.ones((8, 4)), jnp.zeros(8, jnp.int32), jnp.ones(8, bool), jnp.int32(8))
      >>> out = local(params, jnp.full(8, 0.5), data, jax.random.key(0))
      >>> out.update["kernel"].shape, float(out.metrics["expected_batch"])
      ((4, 3), 4.0)
    """
    if not callable(loss_fn):
        raise ValueError(f"loss_fn must be callable, got {type(loss_fn).__name__}")
    if not isinstance(graphdef, nnx.graphlib.GraphDef):
        raise ValueError(f"graphdef must be the GraphDef of nnx.split(model, nnx.Param, ...), got "
                         f"{type(graphdef).__name__}")
    if not (hasattr(optimizer, "init") and hasattr(optimizer, "update")):
        raise ValueError(f"optimizer must be an optax.GradientTransformation, got {type(optimizer).__name__}")
    local_steps = _int("local_steps", local_steps, 1)
    sigma = _real("sigma", sigma, 0.0, np.inf)
    clip_norm = _real("clip_norm", clip_norm, 0.0, np.inf, lo_open=True)
    return WithNumbers(_dp_local_fn(loss_fn, graphdef, optimizer, local_steps, sigma > 0),
                       _dp_numbers(sigma, clip_norm, rest))


def _dp_numbers(sigma: float, clip_norm: float, rest, learning_rate: float | None = None) -> dict:
    """The numbers of :func:`dp_local_update` (arguments of the compiled round): the noise std on the clipped
    sum σC (float64 product rounded up to float32, as the noise transform rounds it: the same noise), C, the
    model's other state and (when the optimizer is the built-in SGD) η."""
    scale = noise.noise_arguments(events.Gaussian(sigma), sensitivity=clip_norm).event.noise_multiplier
    numbers = {"scale": scale, "clip": jnp.asarray(clip_norm), "rest": rest}
    if learning_rate is not None:
        numbers["learning_rate"] = jnp.asarray(learning_rate)
    return numbers


def _dp_local_fn(loss_fn, graphdef, optimizer, local_steps: int, noisy: bool):
    """rPDP-FL's client update of one structure; ``optimizer`` None: SGD at ``numbers["learning_rate"]``."""

    def local_update(numbers, global_params, q, data, key) -> LocalResult:
        rest, clip_norm = numbers["rest"], numbers["clip"]
        tx = optax.sgd(numbers["learning_rate"]) if optimizer is None else optimizer
        # σ = 0 (no noise) is structure: the noise transform then draws nothing
        event = events.Gaussian(numbers["scale"] if noisy else 0.0)
        q = jnp.where(data.mask, q, 0.0).astype(jnp.float32)
        expected = jnp.sum(q)
        denominator = jnp.where(expected > 0, expected, 1.0)  # Σq = 0: nothing is ever sampled, Δ := 0

        def step(carry, t):
            params, opt_state = carry
            sample_key, noise_key = jax.random.split(jax.random.fold_in(key, t))
            batch = data.mask & (jax.random.uniform(sample_key, q.shape) < q)  # β_i ~ Ber(q_i); q = 0 never
            clipped = split_clipped_grad_sum(loss_fn, graphdef, params, rest, data.x, data.y, clip_norm=clip_norm,
                                             mask=batch)
            # the scale is already σC on the sum (sensitivity 1)
            noisy_sum = noise.add_noise(noise_key, clipped.grads, event, normalize_by=denominator)
            updates, opt_state = tx.update(noisy_sum, opt_state, params)
            return (optax.apply_updates(params, updates), opt_state), jnp.sum(batch)

        (final, _), sizes = jax.lax.scan(step, (global_params, tx.init(global_params)), jnp.arange(local_steps))
        delta = jax.tree.map(lambda w, g: jnp.where(expected > 0, w - g, jnp.zeros_like(g)), final, global_params)
        metrics = {"expected_batch": expected, "sampled": jnp.mean(sizes.astype(jnp.float32))}
        return LocalResult(delta, q, metrics)

    return local_update


# --------------------------------------------------------------------------------------------------
# rates
# --------------------------------------------------------------------------------------------------


def _budgets(budgets) -> np.ndarray:
    arr = np.asarray(check_array("budgets", budgets, 0.0, np.inf, lo_open=True))
    if arr.ndim != 1:
        raise ValueError(f"budgets must be a 1-D array with one budget per record, got shape {arr.shape}")
    return arr


def _check_config(config) -> RPDPConfig:
    if not isinstance(config, RPDPConfig):
        raise ValueError(f"config must be an RPDPConfig, got {type(config).__name__}")
    return config


def assign_rates(method: str, budgets, config: RPDPConfig) -> np.ndarray:
    """Per-record Poisson rates q_i for one of :data:`METHODS` (seed 004 §6.1, §7.2; MATH §5).

    * ``"rpdp"``: the exact inverse of the two-stage accountant, :func:`jaxpriv.calibrate.sampling_rate`
      (ε(q_i) ≤ ε_i after T rounds, always; with more than 256 distinct budgets through its exactly
      evaluated ε(q) table, q_i at most 0.1% below the root);
    * ``"scf"``: the seed's Simulation-CurveFitting estimate (:func:`~jaxpriv.federated.rpdp_accounting.scf_fit`
      with ``config.scf_conversion``, then :func:`~jaxpriv.federated.rpdp_accounting.scf_sampling_rate`):
      an approximation that may overspend (the accountant then opts the record out early);
    * ``"minimum"`` / ``"dropout"`` / ``"privacy_free"``: the seed's baselines.

    Args:
      method: one of :data:`METHODS`.
      budgets: 1-D array of per-record budgets ε_i > 0.
      config: :class:`RPDPConfig` (σ, τ, δ, T, λ).

    Returns:
      float64 array of rates in [0, 1], one per record.

    Example:
      >>> q = assign_rates("rpdp", [0.1, 1.0, 5.0], RPDPConfig(rounds=5, local_steps=10))
      >>> bool(0 < q[0] < q[1] < q[2] <= 1)
      True
    """
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    eps = _budgets(budgets)
    c = _check_config(config)
    fl = dict(rounds=c.rounds, client_rate=c.client_rate)
    if method == "rpdp":
        return np.asarray(calibrate.sampling_rate(eps, c.sigma, c.local_steps, c.delta, progress=False,
                                                  max_exact=_MAX_EXACT_RATES, **fl), dtype=np.float64)
    if method == "scf":
        fit = acct.scf_fit(c.sigma, c.local_steps, c.delta, conversion=c.scf_conversion, **fl)
        return acct.scf_sampling_rate(eps, fit)
    if method == "minimum":
        return acct.minimum_rates(eps, c.sigma, c.local_steps, c.delta, **fl)
    if method == "dropout":
        return acct.dropout_rates(eps, c.sigma, c.local_steps, c.delta, **fl)
    return acct.privacy_free_rates(eps)


# --------------------------------------------------------------------------------------------------
# training
# --------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class RPDPResult:
    """Outcome of :func:`train`.

    Attributes:
      method: the rate assignment's name (or ``"custom"`` for given rates).
      params: the final global parameters.
      test_accuracy: final test accuracy (``None`` without test data).
      accuracies: test accuracy after each evaluated round (round index from 1 → accuracy).
      participants: each round's sampled client indices.
      rates: the initial per-record rates q_i (dataset order).
      epsilon: each record's spent ε from the accountant (``None`` for ``privacy_free``: no guarantee).
      charged_rounds: rounds charged to each record (``None`` for ``privacy_free``).
      active: fraction of records still in at each round (before it ran).
      accountant: the :class:`~jaxpriv.federated.rpdp_accounting.BudgetAccountant` (``None`` for
        ``privacy_free``).
      seconds: wall time.
    """

    method: str
    params: Any
    test_accuracy: float | None
    accuracies: dict
    participants: list
    rates: np.ndarray
    epsilon: np.ndarray | None
    charged_rounds: np.ndarray | None
    active: list
    accountant: Any
    seconds: float


def _round_parts(graphdef, rest, private: bool, local_steps: int, sigma: float, clip_norm: float,
                 learning_rate: float, width: int):
    """The local update and the aggregator. Their structure (the model, τ, private or not, the client width)
    is what the simulator compiles; σ, C, η and the model's other state are numbers
    (:class:`~jaxpriv.federated.protocol.WithNumbers`), so every method, seed, budget scenario and noise level
    on one model shape shares one compiled round (rates and data are arguments too)."""
    from ..train.dpsgd import cross_entropy_loss

    if private:
        local = WithNumbers(_dp_local_fn(cross_entropy_loss, graphdef, None, local_steps, sigma > 0),
                            _dp_numbers(sigma, clip_norm, rest, learning_rate))
    else:  # PrivacyFree: vanilla FedAvg, full-batch local gradient steps, no clipping, no noise
        local = fedavg_local_sgd(cross_entropy_loss, graphdef, optax.sgd(learning_rate), local_steps, width,
                                 rest=rest)
    return local, mean_aggregator("uniform")


def _budget_hook(accountant, rates: np.ndarray, part: _partition.Partition, active: list) -> RoundHook:
    """rPDP-FL's round control (seed 004 Alg. 3): before a round the accountant's pre-check opts out the
    records that one more round would take over budget and the round samples with the rates left (the
    client state); after it the accountant charges the round. ``active`` collects the fraction of records
    still in before each round. PrivacyFree (no accountant) keeps no client state."""

    def before(t, state):
        if accountant is None:
            active.append(float(np.mean(rates > 0)))
            return None
        accountant.precheck(t)
        current = accountant.rates
        active.append(float(np.mean(current > 0)))
        return _partition.per_client(current.astype(np.float32), part)

    def after(t, participants, server, state):
        if accountant is not None:
            accountant.update(participants.astype(np.int64))
        return {"records_in": active[-1]}, False

    return RoundHook(before, after)


def train(model: nnx.Module, x, y, part: _partition.Partition, budgets, config: RPDPConfig, *,
          method: str = "rpdp", rates=None, test_data=None, eval_every: int | None = None, seed: int = 0,
          progress: bool = False) -> RPDPResult:
    """Train ``model`` with rPDP-FL (seed 004 Alg. 3; MATH §6) or one of its baselines.

    Every round: the accountant's pre-check (records that one more round would take over budget opt out),
    Poisson client sampling with rate λ, τ local DP-SGD steps per sampled client with the records' current
    rates (:func:`dp_local_update`), a uniform FedAvg of the updates, then the accountant's update. With
    ``method="privacy_free"`` it is vanilla FedAvg (full-batch local steps, no clipping, no noise, no
    accountant). The model is updated in place.

    Args:
      model: a Flax NNX classifier (e.g. :class:`jaxpriv.train.dpsgd.MLP`).
      x, y: training features (N, ...) and int labels (N,), in the partition's record order.
      part: a :class:`~jaxpriv.federated.partition.Partition` of the N records over the clients.
      budgets: 1-D array of N budgets ε_i > 0.
      config: :class:`RPDPConfig`.
      method: one of :data:`METHODS` (rates from :func:`assign_rates`).
      rates: optional per-record rates in [0, 1] that override ``method``'s (an adversarial schedule:
        the accountant still guards every budget).
      test_data: a :class:`jaxpriv.train.data.Dataset` or ``(x_test, y_test)``, or ``None``.
      eval_every: evaluate every this many rounds (default: only after the last).
      seed: integer ≥ 0 (client sampling, record sampling and noise are functions of it).
      progress: show the simulator's progress bar (with the fraction of records still in).

    Returns:
      :class:`RPDPResult`.

    Example:
      >>> from flax import nnx
      >>> from jaxpriv.budgets import scenario
      >>> from jaxpriv.federated import partition
      >>> from jaxpriv.train import data, dpsgd
      >>> d = data.load("breast_cancer", seed=0)
      >>> part = partition.iid(d.y_train, 4, seed=0)
      >>> eps = scenario("ThreeLevels", d.n_train, seed=0)
      >>> cfg = RPDPConfig(rounds=3, local_steps=5, client_rate=1.0, delta=1e-3)
      >>> r = train(dpsgd.MLP(30, (8,), 2, rngs=nnx.Rngs(0)), d.x_train, d.y_train, part, eps, cfg, test_data=d)
      >>> bool((r.epsilon <= eps).all()), r.test_accuracy > 0.5
      (True, True)
    """
    started = time.perf_counter()
    if not isinstance(model, nnx.Module):
        raise ValueError(f"model must be a flax.nnx.Module, got {type(model).__name__}")
    if not isinstance(part, _partition.Partition):
        raise ValueError(f"part must be a Partition, got {type(part).__name__}")
    config = _check_config(config)
    eps = _budgets(budgets)
    if eps.size != part.num_records:
        raise ValueError(f"budgets must hold one budget per record ({part.num_records}), got {eps.size}")
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    seed = _int("seed", seed, 0)
    eval_every = config.rounds if eval_every is None else _int("eval_every", eval_every, 1)
    clients = _partition.stack(x, y, part)  # validates x, y against the partition
    if rates is None:
        q = assign_rates(method, eps, config)
    else:
        q = np.asarray(check_array("rates", rates, 0.0, 1.0), dtype=np.float64)
        if q.shape != eps.shape:
            raise ValueError(f"rates must have the shape of budgets {eps.shape}, got {q.shape}")
        method = "custom"
    private = method != "privacy_free"
    record_client = np.empty(part.num_records, np.int64)
    for k, idx in enumerate(part.indices):
        record_client[idx] = k
    accountant = None
    if private:
        accountant = acct.BudgetAccountant(eps, q, sigma=config.sigma, steps=config.local_steps, delta=config.delta,
                                           client_rate=config.client_rate, clients=record_client,
                                           accounting=config.accounting)
    graphdef, _, rest = nnx.split(model, nnx.Param, ...)
    local, aggregator = _round_parts(graphdef, rest, private, config.local_steps, config.sigma, config.clip_norm,
                                     config.learning_rate, int(clients.mask.shape[1]))
    active: list[float] = []
    result = run(model, local, clients, rounds=config.rounds, client_rate=config.client_rate, aggregator=aggregator,
                 test_data=test_data, eval_every=eval_every, seed=seed, progress=progress,
                 round_hook=_budget_hook(accountant, q, part, active))
    return RPDPResult(
        method=method, params=result.params, test_accuracy=result.test_accuracy,
        accuracies={r.round: r.test_accuracy for r in result.history if r.test_accuracy is not None},
        participants=result.participants, rates=q, epsilon=None if accountant is None else accountant.epsilon(),
        charged_rounds=None if accountant is None else accountant.charged_rounds, active=active,
        accountant=accountant, seconds=time.perf_counter() - started)
