"""Federated learning simulator: FedAvg / FedProx with the clients as a vmapped axis (MATH §6; federated
learning is a vmap over clients).

One round (McMahan et al. 2017, "Communication-efficient learning of deep networks from decentralized
data", Alg. 1 FederatedAveraging, with Poisson client sampling):

1. every client takes part independently with probability λ (``client_rate``): the participants are drawn
   by :class:`jaxpriv.train.sampling.PoissonSampler` over clients, padded to a fixed bucket with a mask
   (one compiled program per bucket; a sampled client is never dropped);
2. each participant k runs a :class:`LocalUpdate` — a pure function
   ``(global_params, client_state, client_data, key) → (update, client_state, metrics)`` — on its own
   padded data (:class:`jaxpriv.federated.partition.ClientData`); all participants run *one* program,
   ``jax.vmap`` over the client axis, in chunks of a fixed size (``lax.scan`` over chunks bounds memory),
   and each chunk is sharded over the devices with ``jax.sharding`` (a 1-D mesh over the client axis)
   when there are several;
3. an :class:`Aggregator` turns the updates into the global update: each client's ``contribute`` is
   summed over the participants (a masked sum, an all-reduce across devices), then ``finalize`` maps the
   sum to the global delta Δ (weighted mean: Σ n_k Δ_k / Σ n_k; a central-noise or shuffle server step
   replaces it);
4. the server applies Δ: w ← w + Δ, or with a server optimizer (FedOpt: Reddi et al. 2021, "Adaptive
   federated optimization") its step on the pseudo-gradient −Δ.

A :class:`RoundHook` lets the system steer the loop: before a round it may change the per-client state
(e.g. per-record rates after a budget pre-check), after it it sees the participants and the new server
state, adds its own metrics to the round's record and may end the run early.

The default local update, :func:`fedavg_local_sgd`, runs τ optimizer steps on minibatches of the client's
data; with ``proximal_mu`` μ > 0 it minimises the FedProx objective ℓ(w) + μ/2‖w − w_global‖² (Li et al.
2020, "Federated optimization in heterogeneous networks", Eq. 2). The systems of the seeds are
configurations: rPDP-FL (per-record Poisson sampling + DP-SGD inside :class:`LocalUpdate`, per-record rates
in ``client_state``, its budget accountant in a :class:`RoundHook`), APES / GSPA / UDP-FL (a perturbed
update from :class:`LocalUpdate`, a shuffle / calibration server step in the :class:`Aggregator`).

Determinism: everything is a function of ``seed``. Round t's key is ``fold_in(key(s), t)``, split into the
clients' key and the server's key; client k's key is ``fold_in(clients_key, k)`` with k its global index
(:func:`round_keys`), so a client's update does not depend on who else takes part, the bucket or the
chunking, and a Python loop over clients reproduces the vmapped round exactly.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import time
import types
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from .._numerics import check_array, derive_seeds
from .partition import ClientData
from ..train.programs import Program, ProgramCache
from .protocol import (Aggregator, LocalResult, LocalUpdate, RoundHook, ServerState, WithNumbers, check_int,
                       check_optimizer, fedavg_local_sgd, mean_aggregator, split_numbers)

__all__ = [
    "LocalResult",
    "LocalUpdate",
    "Aggregator",
    "ServerState",
    "RoundHook",
    "WithNumbers",
    "RoundRecord",
    "FederatedResult",
    "fedavg_local_sgd",
    "mean_aggregator",
    "make_round",
    "default_chunk_size",
    "round_keys",
    "run",
]


# --------------------------------------------------------------------------------------------------
# one round
# --------------------------------------------------------------------------------------------------


def _split_round(key) -> tuple[jax.Array, jax.Array]:
    clients_key, server_key = jax.random.split(key)
    return clients_key, server_key


def round_keys(seed: int, round_index: int) -> tuple[jax.Array, jax.Array]:
    """The PRNG keys :func:`run` uses in round ``round_index`` with ``seed``: ``(clients_key, server_key)``.

    Client k's key is ``jax.random.fold_in(clients_key, k)`` (k its index in the stacked
    :class:`~jaxpriv.federated.partition.ClientData`); the aggregator's ``finalize`` gets ``server_key``.
    Exposed so that a single client's update can be reproduced (a Python loop over clients, an audit).

    Args:
      seed: the run's seed, an integer ≥ 0.
      round_index: round t ≥ 0.

    Returns:
      ``(clients_key, server_key)``.

    Example:
      >>> import jax
      >>> clients_key, server_key = round_keys(0, 3)
      >>> jax.random.key_data(clients_key).shape
      (2,)
    """
    seed = check_int("seed", seed, 0)
    round_index = check_int("round_index", round_index, 0)
    return _split_round(jax.random.fold_in(jax.random.key(derive_seeds(seed, 2)[1]), round_index))


def _rows(valid, v):
    return valid.reshape(valid.shape + (1,) * (v.ndim - 1))


def _masked_sum(tree, valid):
    """Σ over the leading (client) axis of the entries where ``valid``; NaN-safe (where, not multiply)."""
    return jax.tree.map(lambda v: jnp.sum(jnp.where(_rows(valid, v), v, jnp.zeros((), v.dtype)), axis=0), tree)


def make_round(local_update: LocalUpdate, *, aggregator: Aggregator | None = None,
               server_optimizer: optax.GradientTransformation | None = None,
               sharding: NamedSharding | None = None) -> Callable:
    """The jitted federated round: participants' local updates, vmapped in chunks, then the server step.

    ``step(server, client_state, clients, ids, valid, key, *, chunk) -> (server, client_state, sums)``

    * ``server``: :class:`ServerState`; ``client_state``: per-client state with leading axis C, or
      ``None``; ``clients``: stacked :class:`~jaxpriv.federated.partition.ClientData` (leading axis ≥ C);
    * ``ids`` (K,) int32 client indices and ``valid`` (K,) bool — the round's participants, padded
      (padding entries: ``valid`` False; give them an index ≥ C so that they write no state); K need not
      be a multiple of the static ``chunk`` (the last chunk is padded);
    * ``key``: the round key (split as in :func:`round_keys`).

    The K slots are processed ``chunk`` at a time (``lax.scan`` over chunks, ``jax.vmap`` inside each),
    each chunk laid out over the devices of ``sharding`` (a ``NamedSharding`` of the leading axis;
    ``chunk`` must then be a multiple of the device count). ``sums`` holds ``"participants"`` and the
    participants' summed metrics. Source: McMahan et al. 2017, Alg. 1 (see the module docstring).

    Args:
      local_update: a :class:`LocalUpdate`.
      aggregator: an :class:`Aggregator` (default :func:`mean_aggregator`).
      server_optimizer: an Optax transformation applied to the pseudo-gradient −Δ, or ``None`` for
        w ← w + Δ.
      sharding: ``NamedSharding`` of the client axis across devices, or ``None``.

    Returns:
      the jitted ``step``.

    Example:
      >>> import jax, jax.numpy as jnp, numpy as np
      >>> from jaxpriv.federated.partition import ClientData
      >>> local = lambda p, s, d, k: LocalResult({"w": jnp.sum(d.x) - p["w"]}, s, {})  # move to Σx
      >>> step = make_round(local, aggregator=mean_aggregator("uniform"))
      >>> clients = ClientData(jnp.arange(6.0).reshape(3, 2), jnp.zeros((3, 2)), jnp.ones((3, 2), bool), jnp.full(3, 2))
      >>> server = ServerState({"w": jnp.float32(0.0)}, None)
      >>> server, _, sums = step(server, None, clients, jnp.arange(3), jnp.ones(3, bool), jax.random.key(0), chunk=3)
      >>> float(server.params["w"]), int(sums["participants"])  # mean of 1, 5, 9
      (5.0, 3)
    """
    aggregator = mean_aggregator() if aggregator is None else aggregator
    if not isinstance(aggregator, Aggregator):
        raise ValueError(f"aggregator must be an Aggregator, got {type(aggregator).__name__}")
    if server_optimizer is not None:
        check_optimizer("server_optimizer", server_optimizer)
    if not callable(local_update):
        raise ValueError(f"local_update must be callable, got {type(local_update).__name__}")
    parts = [split_numbers(p) for p in (local_update, aggregator.contribute, aggregator.finalize)]
    program = ROUND_PROGRAMS(*(fn for fn, _ in parts), server_optimizer, sharding)
    return BoundRound(program, tuple(numbers for _, numbers in parts))


class BoundRound:
    """A round program with its configuration's numbers bound (:func:`make_round`): call it as
    ``step(server, client_state, clients, ids, valid, key, *, chunk)``; ``program`` is the shared
    :class:`jaxpriv.train.programs.Program` and ``numbers`` what it is called with."""

    def __init__(self, program: Program, numbers):
        self.program, self.numbers = program, numbers

    def __call__(self, server, client_state, clients, ids, valid, key, *, chunk: int):
        return self.program(self.numbers, server, client_state, clients, ids, valid, key, chunk=chunk)

    def lower(self, server, client_state, clients, ids, valid, key, *, chunk: int):
        return self.program.lower(self.numbers, server, client_state, clients, ids, valid, key, chunk=chunk)


def _build_round(local_fn, contribute_fn, finalize_fn, server_optimizer, sharding) -> Program:
    """The round program of one structure: ``step(numbers, server, client_state, clients, ids, valid, key, *,
    chunk)``, ``numbers`` = the (local update's, contribute's, finalize's) numbers (:func:`make_round`)."""

    def chunk_fn(local_numbers, contribute_numbers, params, client_state, clients, clients_key, ids, valid):
        num = jax.tree.leaves(clients)[0].shape[0]
        safe = jnp.clip(ids, 0, num - 1)
        # safe is in range: a gather that clamps, without take's default NaN fill
        take = lambda tree: jax.tree.map(lambda a: jnp.take(a, safe, axis=0, mode="clip"), tree)  # noqa: E731
        data, state = take(clients), take(client_state)
        keys = jax.vmap(jax.random.fold_in, (None, 0))(clients_key, ids)
        if sharding is not None:  # lay the chunk's clients out over the devices
            data, state, keys, valid = jax.lax.with_sharding_constraint((data, state, keys, valid), sharding)
        local_update = functools.partial(local_fn, local_numbers)
        update, new_state, metrics = jax.vmap(local_update, in_axes=(None, 0, 0, 0))(params, state, data, keys)
        contribution = jax.vmap(functools.partial(contribute_fn, contribute_numbers))(update, data)
        return (_masked_sum(contribution, valid), _masked_sum(metrics, valid)), new_state

    def step(numbers, server: ServerState, client_state, clients, ids, valid, key, *, chunk: int):
        local_numbers, contribute_numbers, finalize_numbers = numbers
        clients_key, server_key = _split_round(key)
        ids = jnp.asarray(ids, jnp.int32)
        valid = jnp.asarray(valid, bool)
        extra = (-ids.shape[0]) % chunk
        if extra:  # whole chunks: padding slots never participate and write no state (id ≥ C)
            ids = jnp.concatenate([ids, jnp.full(extra, jnp.iinfo(jnp.int32).max, jnp.int32)])
            valid = jnp.concatenate([valid, jnp.zeros(extra, bool)])
        slots = ids.shape[0]
        run_chunk = lambda i, v: chunk_fn(local_numbers, contribute_numbers, server.params,  # noqa: E731
                                          client_state, clients, clients_key, i, v)
        if slots == chunk:
            (total, metric_sums), states = run_chunk(ids, valid)
        else:
            shape = (slots // chunk, chunk)
            xs = (ids.reshape(shape), valid.reshape(shape))
            (zero_total, zero_metrics), _ = jax.eval_shape(run_chunk, xs[0][0], xs[1][0])
            init = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), (zero_total, zero_metrics))

            def body(carry, x):
                sums, states = run_chunk(*x)
                return jax.tree.map(jnp.add, carry, sums), states

            (total, metric_sums), states = jax.lax.scan(body, init, xs)
            states = jax.tree.map(lambda s: s.reshape((slots,) + s.shape[2:]), states)
        if client_state is not None:  # participants only; padding ids (≥ C) are dropped
            client_state = jax.tree.map(lambda a, s: a.at[ids].set(s.astype(a.dtype), mode="drop"),
                                        client_state, states)
        delta = finalize_fn(finalize_numbers, total, server_key)
        if server_optimizer is None:
            params = jax.tree.map(lambda p, d: (p + d).astype(p.dtype), server.params, delta)
            opt_state = server.opt_state
        else:
            pseudo_grad = jax.tree.map(jnp.negative, delta)
            updates, opt_state = server_optimizer.update(pseudo_grad, server.opt_state, server.params)
            params = optax.apply_updates(server.params, updates)
        sums = {"participants": jnp.sum(valid, dtype=jnp.int32), **metric_sums}
        return ServerState(params, opt_state), client_state, sums

    return Program(step, static_argnames=("chunk",))


#: The round programs, one per structure: the local update's, contribute's and finalize's functions (a
#: :class:`~jaxpriv.federated.protocol.WithNumbers`' ``fn``, or the plain callable), the server optimizer and the
#: device layout, each by :func:`jaxpriv.train.programs.structure_key`. A system run over many seeds, methods,
#: budgets or noise levels on one model compiles its rounds once, not once per run.
ROUND_PROGRAMS = ProgramCache(_build_round, maxsize=16)


# --------------------------------------------------------------------------------------------------
# the simulation loop
# --------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class RoundRecord:
    """After a round: its index (from 1), the number of participants, the participants' mean client
    metrics (empty when nobody took part), the global model's test accuracy and mean loss (``None`` in
    rounds without evaluation), the wall time since the run started and the metrics of the run's
    :class:`RoundHook` (empty without one)."""

    round: int
    participants: int
    client_metrics: dict
    test_accuracy: float | None
    test_loss: float | None
    seconds: float
    hook_metrics: dict = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class FederatedResult:
    """Outcome of :func:`run`: the final global parameters and per-client state, the per-round history,
    each round's participants (client indices) — one entry per round run, fewer than ``rounds`` when a
    :class:`RoundHook` stopped the run —, the last test accuracy (``None`` without test data), the wall
    time, the number of compiled round programs (one per participant bucket) and the number of devices the
    client axis was laid out on."""

    params: Any
    client_state: Any
    history: list
    participants: list
    test_accuracy: float | None
    seconds: float
    compiled_rounds: int
    devices: int

    def participation_counts(self, num_clients: int) -> np.ndarray:
        """How many rounds each of the ``num_clients`` clients took part in."""
        counts = np.zeros(num_clients, dtype=np.int64)
        for ids in self.participants:
            counts[ids] += 1
        return counts


def check_clients(clients) -> int:
    """The number of clients C of a valid :class:`ClientData`; raises ValueError naming what is wrong
    (used by :func:`run` and by :mod:`jaxpriv.federated.gspa`'s shuffled SGD)."""
    if not isinstance(clients, ClientData):
        raise ValueError(f"clients must be a ClientData (see jaxpriv.federated.partition.stack), got "
                         f"{type(clients).__name__}")
    mask, size = np.asarray(clients.mask), np.asarray(clients.size)
    if mask.ndim != 2 or mask.dtype != np.bool_:
        raise ValueError(f"clients.mask must be a boolean (C, max_n) array, got {mask.dtype} shape {mask.shape}")
    c, width = mask.shape
    if c < 1:
        raise ValueError("clients must hold at least one client")
    for name, tree in (("x", clients.x), ("y", clients.y)):
        for leaf in jax.tree.leaves(tree):
            if np.ndim(leaf) < 2 or np.shape(leaf)[:2] != (c, width):
                raise ValueError(f"clients.{name} must have leading axes (C, max_n) = ({c}, {width}) like "
                                 f"clients.mask, got shape {np.shape(leaf)}")
    if size.shape != (c,) or np.any(size != mask.sum(1)):
        raise ValueError("clients.size must be the (C,) number of True entries of each row of clients.mask")
    return c


def _devices_sharding(mesh):
    """(client-axis sharding, replicated sharding, device count), or Nones on a single device."""
    if mesh is None:
        if jax.device_count() == 1:
            return None, None, 1
        from .._batching import batch_sharding

        sharding = batch_sharding()
        mesh = sharding.mesh
    elif not isinstance(mesh, Mesh):
        raise ValueError(f"mesh must be a jax.sharding.Mesh or None, got {type(mesh).__name__}")
    else:
        sharding = NamedSharding(mesh, PartitionSpec(tuple(mesh.axis_names)))
    return sharding, NamedSharding(mesh, PartitionSpec()), int(mesh.devices.size)


def _pad_clients(clients: ClientData, multiple: int) -> ClientData:
    """Empty clients (mask False, size 0) appended so that the client axis divides over the devices."""
    c = clients.mask.shape[0]
    extra = (-c) % multiple
    if extra == 0:
        return clients
    def pad(a):
        a = np.asarray(a)
        return np.concatenate([a, np.zeros((extra,) + a.shape[1:], a.dtype)])

    return jax.tree.map(pad, clients)


#: On CPU the default chunk holds this many bytes of per-client parameter copies: a cache-sized working
#: set (on a 2-core CPU, 10³ clients of a 2.4k–9.6k-parameter MLP ran 1.2–2.5× faster than in one chunk).
CPU_CHUNK_BYTES = 2**21


def default_chunk_size(params, participants: int) -> int:
    """Clients vmapped at once when :func:`run` is given no ``chunk_size``: all ``participants`` on an
    accelerator; on CPU as many as fit :data:`CPU_CHUNK_BYTES` of parameter copies (at least 16), since
    each client trains its own copy and a cache-sized chunk is faster than one pass over all of them —
    balanced, so that the fewest such chunks hold the participants with the least padding.

    Args:
      params: the global parameters (a pytree; only the leaves' sizes and dtypes are used).
      participants: slots in the round (an integer ≥ 1).

    Returns:
      the chunk size, in [1, participants].

    Example:
      >>> import jax.numpy as jnp
      >>> default_chunk_size({"w": jnp.zeros(1000)}, 10)  # on any backend: never more than the participants
      10
    """
    participants = check_int("participants", participants, 1)
    if jax.default_backend() != "cpu":
        return participants
    per_client = sum(int(np.size(v)) * np.dtype(v.dtype).itemsize for v in jax.tree.leaves(params))
    cap = max(16, CPU_CHUNK_BYTES // max(per_client, 1))
    chunks = math.ceil(participants / cap)
    return math.ceil(participants / chunks)  # equal chunks: the least padding for that many chunks


def as_test_arrays(test_data):
    """``test_data`` (None, a Dataset or a tuple (x, y)) as a namespace of numpy ``x_test``, ``y_test``, or
    None; raises ValueError on a wrong shape (used by :func:`run`, :mod:`~jaxpriv.federated.gspa` and
    :mod:`~jaxpriv.federated.rpdp`)."""
    if test_data is None:
        return None
    if isinstance(test_data, (tuple, list)) and len(test_data) == 2:
        test_data = types.SimpleNamespace(x_test=np.asarray(test_data[0]), y_test=np.asarray(test_data[1]))
    if not (hasattr(test_data, "x_test") and hasattr(test_data, "y_test")):
        raise ValueError("test_data must be a Dataset (x_test, y_test) or a tuple (x, y)")
    x, y = np.asarray(test_data.x_test), np.asarray(test_data.y_test)
    if x.ndim == 0 or x.shape[0] == 0 or y.shape != (x.shape[0],):
        raise ValueError(f"test_data must hold a non-empty x (N, ...) and labels y (N,), got {x.shape} and {y.shape}")
    return types.SimpleNamespace(x_test=x, y_test=y)


def _check_client_state(name: str, state, num_clients: int) -> None:
    for leaf in jax.tree.leaves(state):
        if np.ndim(leaf) == 0 or np.shape(leaf)[0] != num_clients:
            raise ValueError(f"{name} leaves must have the leading client axis C = {num_clients}, got shape "
                             f"{np.shape(leaf)}")


def _check_hook(hook) -> RoundHook:
    if hook is None:
        return RoundHook()
    if not isinstance(hook, RoundHook):
        raise ValueError(f"round_hook must be a RoundHook or None, got {type(hook).__name__}")
    for name, part in zip(hook._fields, hook):
        if part is not None and not callable(part):
            raise ValueError(f"round_hook.{name} must be callable or None, got {type(part).__name__}")
    return hook


def _check_after(out) -> tuple[dict, bool]:
    if not (isinstance(out, tuple) and len(out) == 2 and isinstance(out[0], dict)
            and isinstance(out[1], (bool, np.bool_))
            and all(isinstance(v, (int, float, np.number)) for v in out[0].values())):
        raise ValueError(f"round_hook.after must return a tuple (metrics: dict of numbers, stop: bool), got {out!r}")
    return out[0], bool(out[1])


def run(
    model: nnx.Module,
    local_update: LocalUpdate,
    clients: ClientData,
    *,
    rounds: int,
    client_rate: float = 1.0,
    aggregator: Aggregator | None = None,
    server_optimizer: optax.GradientTransformation | None = None,
    client_state=None,
    test_data=None,
    eval_every: int = 1,
    eval_batch_size: int = 512,
    seed: int = 0,
    chunk_size: int | None = None,
    mesh: Mesh | None = None,
    progress: bool = True,
    callback: Callable[[RoundRecord], None] | None = None,
    round_hook: RoundHook | None = None,
) -> FederatedResult:
    """Simulate federated training of ``model`` for ``rounds`` rounds (FedAvg / FedProx and any system
    built from a :class:`LocalUpdate` and an :class:`Aggregator`; see the module docstring).

    Each round: Poisson client sampling with rate λ (a fixed-shape padded bucket of participants), the
    participants' local updates vmapped over the client axis in chunks of ``chunk_size`` clients (sharded
    over the devices of ``mesh`` — by default all devices when there are several), the aggregator's
    global delta, the server step, and every ``eval_every`` rounds (and after the last) the test accuracy
    and loss of the global model; a ``round_hook`` runs before and after each round. ``model`` is updated
    in place at the end. Everything is a function of ``seed`` (see :func:`round_keys`). Runs of the same
    structure share one compiled round program (:func:`make_round`): the numbers of the system's parts are
    arguments, so another σ, clip norm, budget or rate compiles nothing.

    Args:
      model: the Flax NNX model (a classifier when ``test_data`` is given).
      local_update: a :class:`LocalUpdate`, e.g. :func:`fedavg_local_sgd` built on the same model's
        ``graphdef``.
      clients: stacked :class:`~jaxpriv.federated.partition.ClientData` (:func:`~jaxpriv.federated.partition.stack`).
      rounds: number of rounds T ≥ 1.
      client_rate: λ ∈ (0, 1], the probability that a client takes part in a round.
      aggregator: the server step (default :func:`mean_aggregator`, weighted by client size).
      server_optimizer: Optax transformation of the pseudo-gradient −Δ (``None``: w ← w + Δ).
      client_state: persistent per-client state, a pytree whose leaves have leading axis C (or ``None``).
      test_data: a :class:`jaxpriv.train.data.Dataset` or a tuple ``(x, y)`` for evaluation, or ``None``.
      eval_every: evaluate every this many rounds (integer ≥ 1).
      eval_batch_size: test examples per evaluation chunk.
      seed: integer ≥ 0.
      chunk_size: clients vmapped at once (bounds memory); default :func:`default_chunk_size` (all the
        round's participants on an accelerator, a cache-sized chunk on CPU). Rounded up to a multiple of
        the device count.
      mesh: a ``jax.sharding.Mesh`` whose devices share the client axis (default: all devices).
      progress: show a rich progress bar (:func:`jaxpriv._batching.status_bar`).
      callback: called with each :class:`RoundRecord`.
      round_hook: a :class:`RoundHook` (sets ``client_state`` before each round, adds metrics to its
        record, may stop the run after it), or ``None``.

    Returns:
      :class:`FederatedResult`.

    Example:
      >>> import optax
      >>> from flax import nnx
      >>> from jaxpriv.federated import partition, simulator
      >>> from jaxpriv.train import data, dpsgd
      >>> d = data.load("digits", seed=0)
      >>> clients = partition.stack(d.x_train, d.y_train, partition.iid(d.y_train, 10, seed=0))
      >>> model = dpsgd.MLP(64, (32,), 10, rngs=nnx.Rngs(0))
      >>> graphdef, params = nnx.split(model, nnx.Param)
      >>> local = simulator.fedavg_local_sgd(dpsgd.cross_entropy_loss, graphdef, optax.sgd(0.1), 10, 32)
      >>> result = simulator.run(model, local, clients, rounds=5, test_data=d, progress=False)
      >>> result.test_accuracy > 0.85, [r.participants for r in result.history]
      (True, [10, 10, 10, 10, 10])
    """
    if not isinstance(model, nnx.Module):
        raise ValueError(f"model must be a flax.nnx.Module, got {type(model).__name__}")
    num_clients = check_clients(clients)
    rounds = check_int("rounds", rounds, 1)
    client_rate = float(check_array("client_rate", client_rate, 0.0, 1.0, lo_open=True))
    eval_every = check_int("eval_every", eval_every, 1)
    eval_batch_size = check_int("eval_batch_size", eval_batch_size, 1)
    seed = check_int("seed", seed, 0)
    if chunk_size is not None:
        chunk_size = check_int("chunk_size", chunk_size, 1)
    if callback is not None and not callable(callback):
        raise ValueError(f"callback must be callable or None, got {type(callback).__name__}")
    hook = _check_hook(round_hook)
    _check_client_state("client_state", client_state, num_clients)
    test = as_test_arrays(test_data)
    sharding, replicated, devices = _devices_sharding(mesh)
    step = make_round(local_update, aggregator=aggregator, server_optimizer=server_optimizer, sharding=sharding)

    from ..train.dpsgd import make_evaluator, padded_test_set
    from ..train.sampling import PoissonSampler

    graphdef, params, rest = nnx.split(model, nnx.Param, ...)
    server = ServerState(params, None if server_optimizer is None else server_optimizer.init(params))
    stacked = _pad_clients(clients, devices)

    def place(state):
        return jax.tree.map(jnp.asarray, state) if replicated is None else jax.device_put(state, replicated)

    if sharding is not None:
        stacked = jax.device_put(stacked, sharding)
        server = jax.device_put(server, replicated)
    else:
        stacked = jax.tree.map(jnp.asarray, stacked)
    client_state = place(client_state)
    sampler_seed, key_seed = derive_seeds(seed, 2)
    sampler = PoissonSampler(client_rate, seed=sampler_seed, n=num_clients)
    base_key = jax.random.key(key_seed)
    if test is not None:
        evaluate = make_evaluator(graphdef, eval_batch_size)
        test_arrays = padded_test_set(test, eval_batch_size)

    history: list[RoundRecord] = []
    participants: list[np.ndarray] = []
    shapes: set = set()
    accuracy = None
    started = time.perf_counter()
    bar = None
    if progress:
        from .._batching import status_bar

        bar, task = status_bar("federated", rounds)
    try:
        for t in range(rounds):
            if hook.before is not None:
                client_state = hook.before(t, client_state)
                _check_client_state("round_hook.before's client_state", client_state, num_clients)
                client_state = place(client_state)
            batch = sampler.sample(t)
            valid = np.asarray(batch.mask)
            ids = np.where(valid, np.asarray(batch.indices), num_clients).astype(np.int32)
            chunk = default_chunk_size(params, ids.size) if chunk_size is None else min(chunk_size, ids.size)
            chunk = devices * math.ceil(chunk / devices)
            shapes.add((ids.size, chunk))
            server, client_state, sums = step(server, client_state, stacked, ids, valid,
                                              jax.random.fold_in(base_key, t), chunk=chunk)
            count = int(sums["participants"])
            participants.append(ids[valid])
            metrics = {k: float(v) / count for k, v in sums.items() if k != "participants"} if count else {}
            extra, stop = {}, False
            if hook.after is not None:
                extra, stop = _check_after(hook.after(t, participants[-1], server, client_state))
            test_accuracy = test_loss = None
            if test is not None and ((t + 1) % eval_every == 0 or t + 1 == rounds or stop):
                test_accuracy, test_loss = (float(v) for v in evaluate(server.params, rest, *test_arrays))
                accuracy = test_accuracy
            record = RoundRecord(t + 1, count, metrics, test_accuracy, test_loss, time.perf_counter() - started,
                                 extra)
            history.append(record)
            if bar is not None:
                status = ", ".join([f"{count} clients"] + [f"{k} {v:.3g}" for k, v in extra.items()]
                                   + ([f"accuracy {test_accuracy:.3f}"] if test_accuracy is not None else []))
                bar.update(task, advance=1, description=f"round {t + 1}/{rounds}", status=status)
            if callback is not None:
                callback(record)
            if stop:
                break
    finally:
        if bar is not None:
            bar.stop()
        nnx.update(model, server.params)

    return FederatedResult(
        params=server.params,
        client_state=client_state,
        history=history,
        participants=participants,
        test_accuracy=accuracy,
        seconds=time.perf_counter() - started,
        compiled_rounds=len(shapes),
        devices=devices,
    )
