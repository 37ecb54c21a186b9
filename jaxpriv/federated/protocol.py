"""What a federated system plugs into :func:`jaxpriv.federated.simulator.run`, and the defaults (MATH §6).

The extension points: a :class:`LocalUpdate` (one client's work in a round, ``(global_params, client_state,
client_data, key) → LocalResult``), an :class:`Aggregator` (the server's sum-then-finalize step), the
:class:`ServerState` it sees and a :class:`RoundHook` (the system's own bookkeeping before and after each
round). The defaults: :func:`fedavg_local_sgd` (FedAvg / FedProx local SGD) and :func:`mean_aggregator`.
The simulator's module docstring describes the round they fit into; it re-exports every name here.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable, NamedTuple, Protocol

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from .._numerics import check_array
from .partition import ClientData

__all__ = ["LocalResult", "LocalUpdate", "Aggregator", "ServerState", "RoundHook", "WithNumbers", "split_numbers",
           "fedavg_local_sgd", "mean_aggregator", "WEIGHTINGS", "check_int", "check_optimizer"]


# --------------------------------------------------------------------------------------------------
# extension points
# --------------------------------------------------------------------------------------------------


class LocalResult(NamedTuple):
    """What a :class:`LocalUpdate` returns for one client.

    Attributes:
      update: the client's update Δ_k = w_k − w_global, a pytree like the global parameters (a system
        may return any pytree its :class:`Aggregator` understands, e.g. a perturbed clipped update).
      state: the client's new persistent state (``client_state`` in, same structure out; ``None`` when
        the system keeps none). Only participants' states are written back.
      metrics: dict of scalars (e.g. ``{"loss": ...}``), averaged over the participants per round.
    """

    update: Any
    state: Any
    metrics: dict


class LocalUpdate(Protocol):
    """A client's local training: a pure, traceable function of arrays (it runs under ``jax.vmap``).

    ``local_update(global_params, client_state, data, key) -> LocalResult``

    * ``global_params``: the global model's ``nnx.Param`` state (shared by all clients, not mapped);
    * ``client_state``: this client's slice of the persistent per-client state (``None`` if none) —
      where a system keeps per-record sampling rates (:func:`jaxpriv.federated.partition.per_client`),
      control variates, budgets spent, …;
    * ``data``: this client's :class:`~jaxpriv.federated.partition.ClientData` slice (``x`` (max_n, ...),
      ``y``, ``mask`` (max_n,), ``size`` ());
    * ``key``: this client's PRNG key for the round (see :func:`jaxpriv.federated.simulator.round_keys`).

    It must not depend on other clients and must give a finite result for an empty client (``size`` 0)
    and for the masked-out padding it may be called on (its result is then discarded).
    """

    def __call__(self, global_params, client_state, data: ClientData, key) -> LocalResult: ...


@dataclasses.dataclass(frozen=True, eq=False)
class WithNumbers:
    """A function and the numbers it runs with: ``WithNumbers(fn, numbers)(*args) == fn(numbers, *args)``.

    The systems build their :class:`LocalUpdate` and :class:`Aggregator` parts so: ``fn`` holds the
    structure (the model's graph definition, the loss, the local step count, the mechanism…; built the same
    for the same structure) and ``numbers`` (a pytree) every number of the configuration (σ, clip norms,
    sampling rates, learning rates, the non-``Param`` model state). The simulator keys its compiled round on
    ``fn`` and passes ``numbers`` into it as an argument (:func:`jaxpriv.federated.simulator.make_round`), so
    a second run of a system with other privacy numbers compiles nothing (DESIGN: programs are keyed on
    structure, never on numbers). A plain callable works everywhere a ``WithNumbers`` does (it is then its
    own structure, numbers it closes over included; a ``WithNumbers`` held by a plain closure is keyed by its
    function and its numbers' values).

    Example:
      >>> part = WithNumbers(lambda numbers, x: x * numbers["scale"], {"scale": 2.0})
      >>> part(3.0)
      6.0
    """

    fn: Callable
    numbers: Any

    def __post_init__(self):
        if not callable(self.fn):
            raise ValueError(f"fn must be callable, got {type(self.fn).__name__}")

    def __call__(self, *args):
        return self.fn(self.numbers, *args)

    def __repr__(self) -> str:
        return f"WithNumbers({getattr(self.fn, '__qualname__', self.fn)!r}, {self.numbers!r})"


def _apply_plain(f, numbers, *args):
    del numbers
    return f(*args)


def split_numbers(part) -> tuple[Callable, Any]:
    """``(fn, numbers)`` with ``fn(numbers, *args) == part(*args)``: a :class:`WithNumbers`' own parts, or for a
    plain callable a function that ignores its (``None``) numbers."""
    if isinstance(part, WithNumbers):
        return part.fn, part.numbers
    return functools.partial(_apply_plain, part), None


class Aggregator(NamedTuple):
    """How the server turns the participants' updates into the global delta (a pluggable server step).

    Attributes:
      contribute: ``(update, data) -> pytree``: one client's contribution, from its update and its
        :class:`~jaxpriv.federated.partition.ClientData` slice; the simulator sums it over the round's
        participants (a masked sum, chunk by chunk and across devices, so memory stays bounded).
      finalize: ``(total, key) -> delta``: the global delta from the summed contributions and the
        server's PRNG key (for central noise). It is called in every round, also when nobody took part
        (``total`` is then zero): a private aggregator must still release its noise, so that an empty
        round is indistinguishable from a non-empty one.
    """

    contribute: Callable[[Any, ClientData], Any]
    finalize: Callable[[Any, jax.Array], Any]


class ServerState(NamedTuple):
    """The server's state between rounds: the global parameters and the server optimizer's state
    (``None`` without a server optimizer)."""

    params: Any
    opt_state: Any


class RoundHook(NamedTuple):
    """Per-round control of :func:`run` by the system it configures: the pre-check and update of budgets,
    metrics, an early stop (rPDP-FL's per-record budget accountant, seed 004 Alg. 3, is one:
    :func:`jaxpriv.federated.rpdp.train`). Both parts run on the host between the jitted rounds.

    Attributes:
      before: ``(round_index, client_state) -> client_state``, or ``None``: called before round t
        (0-based) with the current per-client state; the round runs on what it returns (a pytree whose
        leaves have the leading client axis C, or ``None``), e.g. the per-record rates with the records
        that opt out set to 0.
      after: ``(round_index, participants, server, client_state) -> (metrics, stop)``, or ``None``: called
        after the server step with the round's participants (a numpy array of client indices), the new
        :class:`ServerState` and the per-client state; ``metrics`` (a dict of numbers, e.g. ``{}``) becomes
        the round's ``hook_metrics`` (:class:`jaxpriv.federated.simulator.RoundRecord`), and ``stop=True``
        makes this round the last (it is evaluated as the last round is).

    Example:
      >>> import jax.numpy as jnp, optax
      >>> from flax import nnx
      >>> from jaxpriv.federated.partition import ClientData
      >>> from jaxpriv.federated.simulator import run
      >>> from jaxpriv.train.dpsgd import cross_entropy_loss
      >>> clients = ClientData(jnp.ones((4, 8, 3)), jnp.zeros((4, 8), jnp.int32), jnp.ones((4, 8), bool),
      ...                      jnp.full(4, 8))
      >>> model = nnx.Linear(3, 2, rngs=nnx.Rngs(0))
      >>> local = fedavg_local_sgd(cross_entropy_loss, nnx.split(model, nnx.Param)[0], optax.sgd(0.1), 2, 8)
      >>> hook = RoundHook(after=lambda t, ids, server, state: ({"clients": ids.size}, t == 1))  # stop after 2
      >>> [r.hook_metrics for r in run(model, local, clients, rounds=5, round_hook=hook, progress=False).history]
      [{'clients': 4}, {'clients': 4}]
    """

    before: Callable[[int, Any], Any] | None = None
    after: Callable[[int, np.ndarray, ServerState, Any], tuple[dict, bool]] | None = None


# --------------------------------------------------------------------------------------------------
# default local update and aggregator
# --------------------------------------------------------------------------------------------------


def check_optimizer(name: str, tx) -> None:
    """ValueError naming ``name`` unless ``tx`` is an Optax ``GradientTransformation`` (has init/update)."""
    if not (hasattr(tx, "init") and hasattr(tx, "update")):
        raise ValueError(f"{name} must be an optax.GradientTransformation, got {type(tx).__name__}")


def check_int(name: str, value, lo: float) -> int:
    """``value`` as an int ≥ ``lo``; a ValueError naming ``name`` and its range otherwise (bools included)."""
    if isinstance(value, bool):
        raise ValueError(f"{name} must be an integer ≥ {lo:g}, got {value!r}")
    return int(check_array(name, value, lo, np.inf, integer=True))


def _masked_mean(values, mask):
    """Mean of ``values`` over ``mask`` (0 when the mask is empty, never 0/0)."""
    count = jnp.sum(mask).astype(values.dtype)
    return jnp.sum(jnp.where(mask, values, jnp.zeros((), values.dtype))) / jnp.maximum(count, 1)


def _sq_distance(a, b):
    return sum(jnp.sum(jnp.square(x - y)) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)))


def fedavg_local_sgd(loss_fn: Callable, graphdef, optimizer: optax.GradientTransformation, local_steps: int,
                     batch_size: int, proximal_mu: float = 0.0, *, rest=None) -> LocalUpdate:
    """FedAvg's client update (McMahan et al. 2017, Alg. 1 ClientUpdate), FedProx's when μ > 0.

    Starting from the global parameters w_g with a fresh ``optimizer`` state, the client takes τ =
    ``local_steps`` steps; step t draws a batch of min(B, n_k) of its n_k records uniformly without
    replacement (B = ``batch_size``) and follows the gradient of

        F(w) = mean_{i ∈ batch} ℓ_i(w) + μ/2 ‖w − w_g‖²

    (μ = ``proximal_mu``; FedProx, Li et al. 2020, MLSys, Eq. 2 and Alg. 2; μ = 0 is FedAvg). It returns
    Δ = w_τ − w_g. With B ≥ the padded client size every step uses all the client's records (full-batch
    gradient descent; no randomness). An empty client returns Δ = 0 (for a plain optimizer).

    Args:
      loss_fn: ``loss_fn(model, inputs, labels, key) → (B,)`` per-example losses, e.g.
        :func:`jaxpriv.train.dpsgd.cross_entropy_loss` (the clipping interface of
        :mod:`jaxpriv.train.clipping`); ``key`` is a fresh key per step.
      graphdef: the model's graph definition from ``nnx.split(model, nnx.Param, ...)`` (static).
      optimizer: the client's Optax optimizer (e.g. ``optax.sgd(0.1)``), re-initialised every round.
      local_steps: τ, an integer ≥ 1.
      batch_size: B, an integer ≥ 1.
      proximal_mu: μ ≥ 0.
      rest: the non-``Param`` state from the same ``nnx.split`` (omit when it is empty).

    Returns:
      a :class:`LocalUpdate` (a :class:`WithNumbers`: μ and ``rest`` are arguments of the compiled round, the
      rest its structure); its metrics are ``{"loss": mean batch loss over the τ steps}`` (without the
      proximal term).

    Example:
      >>> import jax, jax.numpy as jnp, optax
      >>> from flax import nnx
      >>> from jaxpriv.federated.partition import ClientData
      >>> from jaxpriv.train.dpsgd import cross_entropy_loss
      >>> model = nnx.Linear(4, 3, rngs=nnx.Rngs(0))
      >>> graphdef, params = nnx.split(model, nnx.Param)
      >>> local = fedavg_local_sgd(cross_entropy_loss, graphdef, optax.sgd(0.1), local_steps=5, batch_size=8)
      >>> data = ClientData(jnp.ones((8, 4)), jnp.zeros(8, jnp.int32), jnp.ones(8, bool), jnp.int32(8))
      >>> delta, state, metrics = local(params, None, data, jax.random.key(0))
      >>> delta["kernel"].shape, float(metrics["loss"]) > 0
      ((4, 3), True)
    """
    if not callable(loss_fn):
        raise ValueError(f"loss_fn must be callable, got {type(loss_fn).__name__}")
    if not isinstance(graphdef, nnx.graphlib.GraphDef):
        raise ValueError(f"graphdef must be the GraphDef of nnx.split(model, nnx.Param, ...), got "
                         f"{type(graphdef).__name__}")
    check_optimizer("optimizer", optimizer)
    local_steps = check_int("local_steps", local_steps, 1)
    batch_size = check_int("batch_size", batch_size, 1)
    mu = float(check_array("proximal_mu", proximal_mu, 0.0, np.inf))
    # the structure in the function, the numbers (μ, the model's other state) as the round's arguments
    fn = _fedavg_local_sgd(loss_fn, graphdef, optimizer, local_steps, batch_size, mu > 0)
    return WithNumbers(fn, {"proximal_mu": jnp.asarray(mu), "rest": rest})


def _fedavg_local_sgd(loss_fn, graphdef, optimizer, local_steps: int, batch_size: int, proximal: bool):
    def local_update(numbers, global_params, client_state, data: ClientData, key) -> LocalResult:
        mu, rest = numbers["proximal_mu"], numbers["rest"]
        states = () if rest is None else (rest,)
        width = data.mask.shape[0]
        size = jnp.sum(data.mask)

        def step(carry, t):
            params, opt_state = carry
            batch_key, loss_key = jax.random.split(jax.random.fold_in(key, t))
            if batch_size >= width:  # static: every record, every step
                xb, yb, mb = data.x, data.y, data.mask
            else:
                # B records without replacement: the B smallest uniform scores among the real records
                # (padding scores 2 > any uniform, so it is picked only when the client has < B records).
                score = jnp.where(data.mask, jax.random.uniform(batch_key, (width,)), 2.0)
                _, idx = jax.lax.top_k(-score, batch_size)
                # top_k's indices are in [0, width): a gather that clamps, without take's default NaN fill
                take = lambda v: jnp.take(v, idx, axis=0, mode="clip")  # noqa: E731
                xb, yb = jax.tree.map(take, data.x), jax.tree.map(take, data.y)
                mb = jnp.arange(batch_size) < size

            def objective(p):
                model = nnx.merge(graphdef, p, *states)
                loss = _masked_mean(loss_fn(model, xb, yb, loss_key), mb)
                if proximal:
                    return loss + 0.5 * mu * _sq_distance(p, global_params), loss
                return loss, loss

            (_, loss), grads = jax.value_and_grad(objective, has_aux=True)(params)
            updates, opt_state = optimizer.update(grads, opt_state, params)
            return (optax.apply_updates(params, updates), opt_state), loss

        init = (global_params, optimizer.init(global_params))
        (params, _), losses = jax.lax.scan(step, init, jnp.arange(local_steps))
        delta = jax.tree.map(jnp.subtract, params, global_params)
        return LocalResult(delta, client_state, {"loss": jnp.mean(losses)})

    return local_update


WEIGHTINGS = ("size", "uniform")


def mean_aggregator(weighting: str = "size", denominator: float | None = None) -> Aggregator:
    """FedAvg's server step: the weighted mean of the participants' updates (McMahan et al. 2017, Alg. 1).

    Δ = Σ_k w_k Δ_k / Σ_k w_k over the participants, w_k = n_k (``"size"``: each record counts alike) or
    w_k = 1 (``"uniform"``: each client counts alike). With ``denominator`` D the sum is divided by D
    instead of the realised Σ w_k — the fixed-denominator estimator of DP-FedAvg (McMahan et al. 2018,
    "Learning differentially private recurrent language models", §2: D = the expected total weight λ·Σw),
    whose sensitivity does not depend on who took part. A round without participants gives Δ = 0.

    Args:
      weighting: ``"size"`` or ``"uniform"``.
      denominator: ``None`` (the realised total weight) or a fixed D > 0.

    Returns:
      :class:`Aggregator`.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> from jaxpriv.federated.partition import ClientData
      >>> agg = mean_aggregator("size")
      >>> one = lambda u, n: agg.contribute({"w": jnp.float32(u)}, ClientData(None, None, None, jnp.int32(n)))
      >>> total = jax.tree.map(jnp.add, one(1.0, 3), one(5.0, 1))  # (3·1 + 1·5) / 4
      >>> float(agg.finalize(total, jax.random.key(0))["w"])
      2.0
    """
    if weighting not in WEIGHTINGS:
        raise ValueError(f"weighting must be one of {WEIGHTINGS}, got {weighting!r}")
    fixed = None if denominator is None else float(check_array("denominator", denominator, 0.0, np.inf, lo_open=True))
    # D is a number of the round (an argument), whether there is one is its structure
    return Aggregator(_mean_contribute(weighting), WithNumbers(_mean_finalize(fixed is None),
                                                               None if fixed is None else np.float32(fixed)))


def _mean_contribute(weighting: str):
    def contribute(update, data: ClientData):
        weight = jnp.asarray(data.size, jnp.float32) if weighting == "size" else jnp.float32(1.0)
        return {"sum": jax.tree.map(lambda u: u * weight.astype(u.dtype), update), "weight": weight}

    return contribute


def _mean_finalize(realised: bool):
    def finalize(fixed, total, key):
        del key
        if realised:
            den = jnp.where(total["weight"] > 0, total["weight"], 1.0)
        else:
            den = jnp.asarray(fixed, jnp.float32)
        return jax.tree.map(lambda s: s / den.astype(s.dtype), total["sum"])

    return finalize
