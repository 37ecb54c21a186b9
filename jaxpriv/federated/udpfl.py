"""UDP-FL as a federated system: per-client mechanism choice with Harmonizer-calibrated noise (seed 002;
MATH §4.2, §5, §6).

Feng et al., "UDP-FL" (seed 002), Alg. 1: every round the selected clients run τ local DP-SGD steps from
the global model — Poisson-sample their records at rate q, clip each example's gradient, add their own
mechanism's noise, step — and send their models to the server. Client k picks a mechanism m_k ∈
{gaussian, laplace, staircase} and a budget (ε_k, δ); :func:`jaxpriv.calibrate.harmonizer.harmonize`
calibrates its scale so that its T·τ subsampled steps meet the budget (:func:`scales`).

Sensitivity per mechanism (stated, and what the accounting assumes):

* gaussian: examples clipped to L2 norm C; noise N(0, (σC)²) per coordinate; the Harmonizer's exact
  subsampled-Gaussian RDP at rate q over T·τ steps.
* laplace: examples clipped to **L1** norm C (``norm="l1"``); noise Lap(bC) per coordinate; the vertex
  argument of :mod:`jaxpriv.train.dpsgd` makes the 1-D curve the d-dimensional worst case, subsampled at q.
* staircase: per-coordinate staircase noise is *not* bounded by the 1-D curve under an L1 constraint
  (its RDP is concave in the shift, :func:`jaxpriv.mechanisms.staircase.rdp_shift`). Every example is
  clipped to L1 norm C and one step's d-coordinate mechanism is accounted with d·ρ(C/d)
  (:func:`jaxpriv.mechanisms.staircase.rdp_l1`, the exact worst case over the L1 ball), subsampled at q
  by the Zhu-Wang bound and composed over T·τ steps: ``harmonize(..., dimension=d)``. The staircase
  still pays for the dimension (d·ρ(C/d) → C·ρ'(0) as d grows).

Client sampling (rate λ) is ignored by the accounting (each record may take part in every round): the
safe side. Optional shuffler accounting (:func:`shuffle_epsilon`): if every client's round report is
ε₀-LDP, Girgis et al.'s Theorem 1 RDP (:func:`jaxpriv.shuffle.girgis_rdp`) of n shuffled reports, T-fold,
converted by :func:`jaxpriv.rdp.to_epsilon`.

Server step (:func:`build`'s ``aggregation``): FedAvg's size-weighted mean (:func:`mean_aggregator`) or
mode connectivity (:func:`mode_connect_aggregator`, Alg. 1 lines 19-32): the round's client models are
gathered through the simulator's summed contributions (each client writes its update into its own row of
a (C, …) stack) and merged pairwise by polygonal chains φ_θ(p) (MATH §6, :func:`polygonal_chain`) whose
bend θ is fitted on E_{p~U(0,1)} of the loss on the server's data (:func:`fit_chain`); each pair becomes
the point with the least server loss among the chain on a grid of p and the pair's average.
Post-processing of the noisy updates, so no budget is spent — provided the server's data is public (in
:func:`jaxpriv.reproduce.udpfl.reproduce`, a held-out split of the bundled data).
"""

from __future__ import annotations

import functools
import math
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from .. import events, rdp
from .._numerics import check_array
from ..mechanisms._common import round_to
from ..calibrate import harmonizer
from ..shuffle import bounds
from ..train import noise
from ..train.clipping import split_clipped_grad_sum
from .partition import ClientData
from . import simulator
from .protocol import WithNumbers, split_numbers
from .simulator import Aggregator, LocalResult

__all__ = ["MECHANISMS", "AGGREGATIONS", "scales", "local_update", "client_state", "shuffle_epsilon",
           "polygonal_chain", "fit_chain", "mode_connect", "mean_aggregator", "mode_connect_aggregator",
           "server_loss", "Configuration", "build"]

MECHANISMS = harmonizer.MECHANISMS
_CODE = {m: i for i, m in enumerate(MECHANISMS)}
_FAMILIES = [events.noise_family(m) for m in MECHANISMS]  # by a client's mechanism code


def _num_params(params) -> int:
    return int(sum(np.size(v) for v in jax.tree.leaves(params)))


def _check_mechanisms(mechanisms) -> np.ndarray:
    names = np.asarray(mechanisms, dtype=object).reshape(-1)
    if names.size == 0:
        raise ValueError("mechanisms must name at least one mechanism")
    for name in names:
        if name not in MECHANISMS:
            raise ValueError(f"mechanisms must each be one of {MECHANISMS}, got {name!r}")
    return names


def scales(mechanisms, epsilon, delta, q, steps: int, dim: int, orders=None):
    """Each client's calibrated scale for T·τ = ``steps`` local steps (Harmonizer; seed 002 §3.3, Alg. 3).

    gaussian / laplace: ``harmonize(m, ε, δ, q, steps)`` (σ, resp. b per unit sensitivity); staircase:
    ``harmonize("staircase", ε, δ, q, steps, dimension=dim)`` — the per-coordinate ε₀, accounted with the
    d-coordinate curve d·ρ(C/d) under the L1 clip (:func:`jaxpriv.mechanisms.staircase.rdp_l1`: the 1-D
    curve is not a bound because the shifted staircase RDP is concave).

    Args:
      mechanisms: one name per client (see :data:`MECHANISMS`). epsilon: ε_k > 0 per client (or shared).
      delta: δ ∈ (0, 1). q: record sampling rate in (0, 1]. steps: T·τ ≥ 1. dim: number of model
      parameters d ≥ 1. orders: Rényi orders (default of :mod:`jaxpriv.rdp`).

    Returns:
      ``(scale, achieved ε)`` float64 arrays, one per client.

    Example:
      >>> s, e = scales(["gaussian", "laplace"], 2.0, 1e-5, 0.1, 100, 50)
      >>> bool((e <= 2.0).all()), bool(s[0] > 0 and s[1] > 0)
      (True, True)
    """
    names = _check_mechanisms(mechanisms)
    steps = int(check_array("steps", steps, 1.0, np.inf, integer=True))
    dim = int(check_array("dim", dim, 1.0, np.inf, integer=True))
    eps = np.broadcast_to(np.asarray(check_array("epsilon", epsilon, 0.0, np.inf, lo_open=True), np.float64),
                          names.shape)
    q = float(check_array("q", q, 0.0, 1.0, lo_open=True))
    return harmonizer.harmonize(names, eps, delta, q, steps, orders, dimension=dim)


def local_update(loss_fn, graphdef, learning_rate, local_steps, q, *, rest=None, mechanisms=MECHANISMS):
    """UDP-FL's client update (seed 002 Alg. 1 lines 7-14) as a :class:`~jaxpriv.federated.simulator.LocalUpdate`.

    ``client_state`` (:func:`client_state`) = ``{"mechanism": int32 index into MECHANISMS, "scale": float32
    noise parameter, "clip": float32 C_k, "slot": int32 k}``. Each of the τ steps Poisson-samples the
    client's records at rate q, clips every example to C_k (L2 for gaussian, L1 otherwise), adds the
    client's noise to the sum (N(0, scale²), Lap(scale) with scale = σC_k, bC_k, or staircase(ε₀ = scale,
    Δ = C_k), per coordinate) and divides by the expected batch q·n_k, never the realised one
    (:func:`jaxpriv.train.noise.add_noise`, one draw over the flat parameter vector). The update
    is ``{"delta": w_τ − w_global, "slot": k, "global": w_global}`` (what :func:`mean_aggregator` and
    :func:`mode_connect_aggregator` read).

    ``mechanisms`` (static) names the mechanisms the population uses: under ``jax.vmap`` a per-client
    choice is a select, so every listed mechanism's clipping and noise runs for every client; listing only
    those in use drops the rest from the program.

    Args:
      loss_fn, graphdef, rest: as :func:`jaxpriv.federated.simulator.fedavg_local_sgd`.
      learning_rate: η > 0. local_steps: τ ≥ 1. q: rate in (0, 1]. mechanisms: a non-empty subset of
      :data:`MECHANISMS` containing every client's mechanism (a client with another one gets a NaN update,
      never another mechanism's noise).

    Returns:
      the LocalUpdate (a :class:`~jaxpriv.federated.protocol.WithNumbers`: η, q and ``rest`` are arguments of
      the compiled round); metrics ``{"loss"}``.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> from jaxpriv.train.dpsgd import cross_entropy_loss
      >>> model = nnx.Linear(4, 3, rngs=nnx.Rngs(0))
      >>> graphdef, params, rest = nnx.split(model, nnx.Param, ...)
      >>> step = local_update(cross_entropy_loss, graphdef, 0.1, 2, 0.5, rest=rest)
      >>> data = ClientData(jnp.ones((8, 4)), jnp.zeros(8, jnp.int32), jnp.ones(8, bool), jnp.int32(8))
      >>> state = jax.tree.map(lambda v: v[0], client_state(["laplace"], [1.0], 1.0))
      >>> res = step(params, state, data, jax.random.key(0))
      >>> res.update["delta"]["kernel"].shape
      (4, 3)
    """
    lr = float(check_array("learning_rate", learning_rate, 0.0, np.inf, lo_open=True))
    tau = int(check_array("local_steps", local_steps, 1.0, np.inf, integer=True))
    q = float(check_array("q", q, 0.0, 1.0, lo_open=True))
    # Only the listed mechanisms are in the program. Measured on the shared 2-core CPU with per-example
    # clipping by vmap (before 5b29cde's ghost norms; 10 clients of ~144 records, τ = 2, q = 0.1; fastest of 60
    # rounds), all three listed: a round takes 2.8 ms (d = 650) / 3.7 ms (d = 1210) against 1.1 / 2.0 ms with
    # the one in use — the second clipping pass and the other
    # samplers about double the step — and compiles in 7.7-9.5 s against 4.6-6.2 s. (Drawing the noise per
    # leaf instead of once over the flat vector compiled for 34 s.) A mixed population still runs every
    # listed branch (a select under vmap); one vmapped program per mechanism group would need the simulator
    # to split the round.
    used = sorted({_CODE[m] for m in _check_mechanisms(mechanisms)})
    norms = sorted({_FAMILIES[c].norm for c in used})

    # η, q and the model's other state are numbers of the round (arguments); τ, the loss, the model and the
    # mechanisms listed are its structure
    return WithNumbers(_local_fn(loss_fn, graphdef, tau, tuple(used), tuple(norms)),
                       {"learning_rate": jnp.asarray(lr), "q": jnp.asarray(q), "rest": rest})


def _local_fn(loss_fn, graphdef, tau: int, used: tuple, norms: tuple):
    def pick(mech, values: dict):
        """values[code] for this client's code (a select when several are listed)."""
        out = values[used[-1]]
        for code in used[:-1]:
            out = jax.tree.map(lambda a, b, c=code: jnp.where(mech == c, a, b), values[code], out)
        return out

    def noise_events(scale, clip):
        """{code: (event, sensitivity)}. A noise scale (σ, b) is already σC_k / bC_k, the scale on the sum
        (client_state); the staircase's ε₀ is a privacy level, not a scale: its sampler takes Δ = C_k."""
        return {c: (_FAMILIES[c].event(scale, 1), 1.0) if _FAMILIES[c].noisier_when_larger
                # ε₀ > 0 to sample: a masked-out slot may carry 0
                else (_FAMILIES[c].event(jnp.maximum(scale, 1e-6), 1), clip) for c in used}

    def update(numbers, global_params, state, data: ClientData, key):
        lr, q, rest = numbers["learning_rate"], numbers["q"], numbers["rest"]
        mech, scale, clip = state["mechanism"], state["scale"], state["clip"]
        expected = jnp.maximum(q * data.size.astype(jnp.float32), 1e-6)
        noise_of = noise_events(scale, clip)

        def step(p, t):
            sample_key, noise_key = jax.random.split(jax.random.fold_in(key, t))
            batch = data.mask & (jax.random.uniform(sample_key, data.mask.shape) < q)
            sums = {norm: split_clipped_grad_sum(loss_fn, graphdef, p, rest, data.x, data.y, clip_norm=clip,
                                                 mask=batch, norm=norm) for norm in norms}
            clipped = pick(mech, {c: sums[_FAMILIES[c].norm] for c in used})
            # one draw over the flat parameter vector: one sampler per mechanism in the program, not per leaf
            noisy = pick(mech, {c: noise.add_noise(noise_key, clipped.grads, noise_of[c][0], sensitivity=noise_of[c][1],
                                                   normalize_by=expected, flat=True) for c in used})
            return jax.tree.map(lambda w, g: w - lr * g, p, noisy), clipped.loss

        final, losses = jax.lax.scan(step, global_params, jnp.arange(tau))
        known = jnp.any(mech == jnp.asarray(used))  # an unlisted mechanism: NaN, loud
        delta = jax.tree.map(lambda a, b: jnp.where(known, a - b, jnp.nan), final, global_params)
        return LocalResult({"delta": delta, "slot": state["slot"], "global": global_params}, state,
                           {"loss": jnp.mean(losses)})

    return update


def client_state(mechanisms, scale, clip):
    """The ``client_state`` pytree of :func:`local_update`: mechanism codes, calibrated scales, clip norms
    and each client's slot (its index, which :func:`mode_connect_aggregator` places its model by).

    Args:
      mechanisms: one name per client. scale: each client's calibrated scale per unit sensitivity
      (:func:`scales`: σ, b or the staircase's ε₀). clip: C_k > 0, one per client or shared (the L2 norm
      for gaussian, the L1 norm otherwise).

    Returns:
      dict of (C,) arrays ``mechanism`` (int32), ``scale`` (float32: σC_k and bC_k rounded up, the
      staircase's ε₀ rounded down — the safe side), ``clip`` (float32), ``slot`` (int32).

    Example:
      >>> client_state(["gaussian", "staircase"], [1.5, 0.01], 1.0)["mechanism"].tolist()
      [0, 2]
    """
    names = _check_mechanisms(mechanisms)
    exact = np.asarray(check_array("scale", scale, 0.0, np.inf, lo_open=True), np.float64).reshape(-1)
    if exact.shape != names.shape:
        raise ValueError(f"scale must have one entry per client ({names.size}), got {exact.shape}")
    clip = np.asarray(check_array("clip", clip, 0.0, np.inf, lo_open=True), np.float64)
    if clip.ndim > 1 or clip.size not in (1, names.size):
        raise ValueError(f"clip must be one number or one per client ({names.size}), got shape {clip.shape}")
    # the clipping and the staircase's Δ use this same float32 C, so C itself needs no rounding
    clip = np.broadcast_to(clip.astype(np.float32), names.shape).astype(np.float64)
    # float32 on the safe side: the scales σC and bC rounded up, the staircase's per-step ε₀ rounded down
    is_scale = np.array([events.noise_family(n).noisier_when_larger for n in names])
    scale = np.where(is_scale, round_to(exact * clip, np.float32), round_to(exact, np.float32, up=False))
    return {"mechanism": np.array([_CODE[n] for n in names], np.int32), "scale": scale,
            "clip": clip.astype(np.float32),
            "slot": np.arange(names.size, dtype=np.int32)}


def shuffle_epsilon(eps0, n, rounds, delta, orders=tuple(range(2, 65))):
    """ε after T rounds of n shuffled ε₀-LDP client reports: T × Girgis et al. Theorem 1 RDP, converted.

    Source: Girgis et al., CCS 2021, Thm 1 (:func:`jaxpriv.shuffle.girgis_rdp`, conservative constants,
    MATH §1.6), RDP composition over rounds, :func:`jaxpriv.rdp.to_epsilon` (MATH §1.8); UDP-FL (seed 002)
    §4.4.1. Valid only when each round's report is ε₀-LDP (pure) over the client's whole data.

    Args:
      eps0: ε₀ > 0. n: clients per round ≥ 2. rounds: T ≥ 1. delta: δ ∈ (0, 1). orders: integer α ≥ 2.

    Returns:
      float ε.

    Example:
      >>> bool(shuffle_epsilon(1.0, 10_000, 10, 1e-6) < 10 * 1.0)
      True
    """
    rounds = int(check_array("rounds", rounds, 1.0, np.inf, integer=True))
    rho = np.asarray(bounds.girgis_rdp(eps0, n, orders), np.float64) * rounds
    return float(rdp.to_epsilon(rho, np.asarray(orders, np.float64), delta)[0])  # (ε, best order)


# --------------------------------------------------------------------------------------------------
# mode connectivity (MATH §6)
# --------------------------------------------------------------------------------------------------


def polygonal_chain(w1, w2, theta, p):
    """φ_θ(p) = 2(pθ + (½−p)w₁) for p ≤ ½, 2((p−½)w₂ + (1−p)θ) for p > ½ (MATH §6; seed 002 Eq. 3).

    φ(0) = w₁, φ(½) = θ, φ(1) = w₂; pytrees of the same structure, p a scalar (traceable). The weights sum
    to 1, so φ commutes with a common shift: the chain of w₁ + g, w₂ + g, θ + g is φ_θ(p) + g.

    Example:
      >>> import jax.numpy as jnp
      >>> [float(polygonal_chain(jnp.float32(0), jnp.float32(4), jnp.float32(1), p)) for p in (0, .25, .5, 1)]
      [0.0, 0.5, 1.0, 4.0]
    """
    p = jnp.asarray(p, jnp.float32)

    def leaf(a, b, t):
        return jnp.where(p <= 0.5, 2.0 * (p * t + (0.5 - p) * a), 2.0 * ((p - 0.5) * b + (1.0 - p) * t))

    return jax.tree.map(leaf, w1, w2, theta)


def _fit_bend(loss, w1, w2, key, steps: int, lr: float):
    """Alg. 2's SGD on θ from the midpoint, one p̂ ~ U(0, 1) per step (traceable; vmappable over pairs)."""
    grad = jax.grad(lambda th, p: loss(polygonal_chain(w1, w2, th, p)))

    def body(th, k):
        return jax.tree.map(lambda a, b: a - lr * b, th, grad(th, jax.random.uniform(k))), None

    return jax.lax.scan(body, jax.tree.map(lambda a, b: 0.5 * (a + b), w1, w2), jax.random.split(key, steps))[0]


def _chosen_point(loss, w1, w2, theta, grid: int):
    """The candidate with the least loss among φ_θ(p), p ∈ {0, 1/(grid−1), …, 1} (p = ½ is the paper's θ)
    and the plain average (w₁ + w₂)/2 — so the choice is never worse, on the loss, than either (NaN = +∞)."""
    ps = jnp.linspace(0.0, 1.0, grid)
    points = jax.vmap(lambda p: polygonal_chain(w1, w2, theta, p))(ps)
    mid = jax.tree.map(lambda a, b: 0.5 * (a + b), w1, w2)
    cands = jax.tree.map(lambda c, m: jnp.concatenate([c, m[None]]), points, mid)
    losses = jax.vmap(loss)(cands)
    best = jnp.argmin(jnp.where(jnp.isnan(losses), jnp.inf, losses))
    return jax.tree.map(lambda c: c[best], cands)


def _merge(loss, models, present, key, steps: int, lr: float, grid: int):
    """Seed 002 Alg. 1 lines 19-32 on a (C, …) stack with a presence mask: neighbours are paired level by
    level, a present pair is replaced by its chain's chosen point, a lone present model passes up (the
    paper's odd one out), an absent pair stays absent. Returns ``(merged, any present)``; the merged model
    is exactly the only present one when there is one, zeros when there is none.

    The stack is padded with absent slots to P = 2^⌈log₂ C⌉ and the ⌈log₂ C⌉ levels are one ``lax.scan``
    of P/2 vmapped pair fits: one compiled fit instead of one per level (compilation, not the fits'
    arithmetic, dominates on CPU)."""
    c = present.shape[0]
    levels = max(1, math.ceil(math.log2(c))) if c > 1 else 0
    width = 2 ** levels
    pad = lambda v, n: jnp.concatenate([v, jnp.zeros((n,) + v.shape[1:], v.dtype)])  # noqa: E731
    models = jax.tree.map(lambda v: pad(v, width - c), models)
    present = pad(present, width - c)

    def pair(w1, w2, k):
        return _chosen_point(loss, w1, w2, _fit_bend(loss, w1, w2, k, steps, lr), grid)

    def level(carry, k):
        models, present = carry
        a, b = (jax.tree.map(lambda v, s=s: v[s::2], models) for s in (0, 1))
        pa, pb = present[0::2], present[1::2]
        joined = jax.vmap(pair)(a, b, jax.random.split(k, width // 2))
        rows = lambda m, v: m.reshape(m.shape + (1,) * (v.ndim - 1))  # noqa: E731
        merged = jax.tree.map(lambda j, x, y: jnp.where(rows(pa & pb, j), j, jnp.where(rows(pa, x), x, y)),
                              joined, a, b)
        return (jax.tree.map(lambda v: pad(v, width // 2), merged), pad(pa | pb, width // 2)), None

    if levels:
        (models, present), _ = jax.lax.scan(level, (models, present), jax.random.split(key, levels))
    return jax.tree.map(lambda v: v[0], models), present[0]


def _check_chain(steps, learning_rate, grid):
    steps = int(check_array("steps", steps, 1.0, np.inf, integer=True))
    lr = float(check_array("learning_rate", learning_rate, 0.0, np.inf, lo_open=True))
    grid = int(check_array("grid", grid, 3.0, np.inf, integer=True))
    if grid % 2 == 0:
        raise ValueError(f"grid must be an odd integer ≥ 3 (so that p = ½ is a candidate), got {grid}")
    return steps, lr, grid


def fit_chain(loss, w1, w2, *, steps: int = 50, learning_rate: float = 0.1, seed: int = 0):
    """The bend θ minimising E_{p~U(0,1)} loss(φ_θ(p)) by SGD (seed 002 Alg. 2; MATH §6).

    θ starts at the midpoint (w₁ + w₂)/2; each step draws p̂ ~ U(0, 1) and follows ∇_θ loss(φ_θ(p̂)).

    Args:
      loss: ``params → scalar`` (e.g. cross-entropy on server-side public data). w1, w2: end points.
      steps: ≥ 1. learning_rate: > 0. seed: integer ≥ 0.

    Returns:
      θ (a pytree like ``w1``).

    Example:
      >>> import jax.numpy as jnp
      >>> th = fit_chain(lambda w: jnp.sum((w - 1.0) ** 2), jnp.float32(0), jnp.float32(4), steps=200)
      >>> bool(abs(float(th) - 0.5) < 0.5)  # the bend is pulled toward the minimiser 1 from the midpoint 2
      True
    """
    steps, lr, _ = _check_chain(steps, learning_rate, 3)
    seed = int(check_array("seed", seed, 0.0, np.inf, integer=True))
    fit = jax.jit(lambda a, b, k: _fit_bend(loss, a, b, k, steps, lr))
    return fit(w1, w2, jax.random.key(seed))


def mode_connect(loss, models, *, steps: int = 50, learning_rate: float = 0.1, grid: int = 9, seed: int = 0):
    """Seed 002 Alg. 1 lines 19-32: join the models pairwise by fitted chains until one is left.

    Each pair (w_i, w_j) is replaced by the point of its chain (:func:`fit_chain`) with the least loss
    among φ_θ(p), p on a ``grid`` of [0, 1] (the paper takes p = ½, θ itself; the grid includes it), and
    the pair's average (w_i + w_j)/2; an odd model out passes to the next level. The same merge is the
    server step of :func:`mode_connect_aggregator`.

    Args:
      loss: ``params → scalar``. models: a non-empty list of parameter pytrees (one structure).
      steps, learning_rate: as :func:`fit_chain`. grid: number of p values, an odd integer ≥ 3.
      seed: integer ≥ 0 (the p̂ draws).

    Returns:
      the merged parameters.

    Example:
      >>> import jax.numpy as jnp
      >>> float(mode_connect(lambda w: jnp.sum(w ** 2), [jnp.float32(1.0)]))
      1.0
      >>> w = mode_connect(lambda w: (w - 1.0) ** 2, [jnp.float32(0.0), jnp.float32(4.0)], steps=100)
      >>> bool((w - 1.0) ** 2 < (2.0 - 1.0) ** 2)  # better than the average 2 on the loss
      True
    """
    models = list(models)
    if not models:
        raise ValueError("models must hold at least one parameter pytree")
    steps, lr, grid = _check_chain(steps, learning_rate, grid)
    seed = int(check_array("seed", seed, 0.0, np.inf, integer=True))
    stacked = jax.tree.map(lambda *v: jnp.stack(v), *models)
    merge = jax.jit(lambda m, k: _merge(loss, m, jnp.ones(len(models), bool), k, steps, lr, grid)[0])
    return merge(stacked, jax.random.key(seed))


def mean_aggregator(weighting: str = "size") -> Aggregator:
    """FedAvg's weighted mean (:func:`jaxpriv.federated.simulator.mean_aggregator`) of the ``"delta"`` of
    :func:`local_update`'s updates.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> agg = mean_aggregator("uniform")
      >>> c = lambda u: agg.contribute({"delta": {"w": jnp.float32(u)}}, ClientData(None, None, None, jnp.int32(3)))
      >>> float(agg.finalize(jax.tree.map(jnp.add, c(1.0), c(2.0)), jax.random.key(0))["w"])
      1.5
    """
    base = simulator.mean_aggregator(weighting)
    return Aggregator(functools.partial(_contribute_delta, base.contribute), base.finalize)


def _contribute_delta(contribute, update, data):
    return contribute(update["delta"], data)


def mode_connect_aggregator(loss, num_clients: int, *, steps: int = 50, learning_rate: float = 0.1,
                            grid: int = 9) -> Aggregator:
    """UDP-FL's server step with mode connectivity (seed 002 Alg. 1 lines 19-32; MATH §6) as an
    :class:`~jaxpriv.federated.simulator.Aggregator`.

    Each participant contributes its model update Δ_k in its own row k (its ``slot``) of a (C, …) stack, so
    the simulator's masked sum *is* the stack of the round's client models (w_global + Δ_k), with a
    presence row and (summed) copies of w_global; ``finalize`` merges the present models pairwise with
    fitted polygonal chains (:func:`mode_connect`'s merge on ``loss(w_global + ·)``; the chain commutes
    with the shift) and returns the merged model's delta. One participant: its Δ_k exactly; none: 0.

    Privacy: post-processing of the clients' noisy updates, so each client's accounting is unchanged —
    provided ``loss`` reads only **public** data (server-held data that is nobody's private record).
    Memory: each client's contribution is a (C, |θ|) stack (a chunk holds chunk·C·|θ| values).

    Args:
      loss: ``params → scalar`` on the server's public data (e.g. :func:`server_loss`).
      num_clients: C ≥ 1, the length of the stacked client axis (the slots are 0…C−1).
      steps, learning_rate, grid: as :func:`mode_connect`.

    Returns:
      :class:`~jaxpriv.federated.simulator.Aggregator`.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> agg = mode_connect_aggregator(lambda w: jnp.sum(w["w"] ** 2), 3)
      >>> c = lambda u, k: agg.contribute({"delta": {"w": jnp.float32(u)}, "slot": jnp.int32(k),
      ...                                  "global": {"w": jnp.float32(0)}}, None)
      >>> float(agg.finalize(c(2.0, 1), jax.random.key(0))["w"])  # one participant: its update
      2.0
    """
    if not callable(loss):
        raise ValueError(f"loss must be callable, got {type(loss).__name__}")
    c = int(check_array("num_clients", num_clients, 1.0, np.inf, integer=True))
    steps, lr, grid = _check_chain(steps, learning_rate, grid)
    loss_fn, loss_numbers = split_numbers(loss)  # the server's data: numbers of the round, not constants
    return Aggregator(_mode_contribute(c), WithNumbers(_mode_finalize(loss_fn, steps, grid),
                                                       {"learning_rate": jnp.asarray(lr), "loss": loss_numbers}))


def _mode_contribute(c: int):
    def contribute(update, data):
        del data
        one = jnp.arange(c) == update["slot"]  # a slot ≥ C (padding) is in no row
        def rows(v):  # where, not a product: a NaN update must not leak into the other rows
            return jnp.where(one.reshape((c,) + (1,) * jnp.ndim(v)), v[None], jnp.zeros((), v.dtype))

        return {"models": jax.tree.map(rows, update["delta"]), "present": one.astype(jnp.float32),
                "global": update["global"]}

    return contribute


def _mode_finalize(loss_fn, steps: int, grid: int):
    def finalize(numbers, total, key):
        count = jnp.sum(total["present"])
        # w_global, recovered from its summed copies (only the chain's loss reads it; the delta is exact)
        anchor = jax.tree.map(lambda s: s / jnp.maximum(count, 1.0).astype(s.dtype), total["global"])
        shifted = lambda d: loss_fn(numbers["loss"], jax.tree.map(jnp.add, anchor, d))  # noqa: E731
        merged, _ = _merge(shifted, total["models"], total["present"] > 0, key, steps, numbers["learning_rate"], grid)
        return merged

    return finalize


def server_loss(loss_fn, graphdef, x, y, *, rest=None):
    """``params → mean loss_fn`` over the server's (public) records ``x, y``, for :func:`mode_connect_aggregator`.

    Args:
      loss_fn: per-example loss ``(model, x, y, key) → (B,)``. graphdef, rest: from ``nnx.split(model,
      nnx.Param, ...)``. x, y: the server's records (N ≥ 1 of them).

    Returns:
      the loss function (a :class:`~jaxpriv.federated.protocol.WithNumbers`: the records are arguments of the
      compiled round, not constants).

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxpriv.train.dpsgd import cross_entropy_loss
      >>> graphdef, params, rest = nnx.split(nnx.Linear(2, 3, rngs=nnx.Rngs(0)), nnx.Param, ...)
      >>> f = server_loss(cross_entropy_loss, graphdef, jnp.ones((4, 2)), jnp.zeros(4, jnp.int32), rest=rest)
      >>> bool(f(params) > 0)
      True
    """
    x, y = jnp.asarray(x), jnp.asarray(y)
    if x.ndim == 0 or x.shape[0] == 0 or y.shape != (x.shape[0],):
        raise ValueError(f"x, y must hold N ≥ 1 records (N, ...) and N labels, got {x.shape} and {y.shape}")
    return WithNumbers(_server_loss_fn(loss_fn, graphdef), {"x": x, "y": y, "rest": rest})


def _server_loss_fn(loss_fn, graphdef):
    def server(numbers, params):
        states = () if numbers["rest"] is None else (numbers["rest"],)
        return jnp.mean(loss_fn(nnx.merge(graphdef, params, *states), numbers["x"], numbers["y"], None))

    return server


# --------------------------------------------------------------------------------------------------
# the simulator configuration
# --------------------------------------------------------------------------------------------------

AGGREGATIONS = ("mean", "mode_connect")


class Configuration(NamedTuple):
    """UDP-FL as a simulator configuration (:func:`build`): pass ``local_update``, ``aggregator`` and
    ``client_state`` to :func:`jaxpriv.federated.simulator.run`. ``scale`` is each client's calibrated scale
    per unit sensitivity and ``epsilon`` its achieved ε (float64, :func:`scales`)."""

    local_update: Callable
    aggregator: Aggregator
    client_state: dict
    scale: np.ndarray
    epsilon: np.ndarray


def _clip_per_client(clip, names: np.ndarray) -> np.ndarray:
    if isinstance(clip, dict):
        missing = sorted(set(names) - set(clip))
        if missing:
            raise ValueError(f"clip must give a norm for every mechanism in use, missing {missing}")
        clip = [clip[n] for n in names]
    return np.asarray(check_array("clip", clip, 0.0, np.inf, lo_open=True), np.float64)


def _check_server_data(server_data):
    """``(x, y)`` as arrays: N ≥ 1 finite records and N finite labels, else a ValueError naming server_data."""
    if isinstance(server_data, (str, bytes, dict)) or not hasattr(server_data, "__len__") or len(server_data) != 2:
        raise ValueError(f"server_data must be a pair (x, y) of the server's records and labels, got "
                         f"{type(server_data).__name__}" + (f" of length {len(server_data)}"
                                                            if hasattr(server_data, "__len__") else ""))
    x, y = server_data
    try:
        x, y = np.asarray(x), np.asarray(y)
    except ValueError as err:  # ragged nesting
        raise ValueError(f"server_data must be a pair of rectangular arrays (x, y): {err}") from err
    check_array("server_data's x", x)
    check_array("server_data's y", y)
    if x.ndim == 0 or y.ndim != 1 or y.shape[0] != x.shape[0]:
        raise ValueError(f"server_data must be (x, y) with x of shape (N, ...) and y of shape (N,), got "
                         f"{x.shape} and {y.shape}")
    return x, y


def build(model, loss_fn, mechanisms, epsilon, delta, *, clip, learning_rate, local_steps, q, rounds,
          aggregation: str = "mean", server_data=None, chain_steps: int = 50, chain_learning_rate: float = 0.1,
          grid: int = 9, orders=None) -> Configuration:
    """UDP-FL (seed 002 Alg. 1-3) for :func:`jaxpriv.federated.simulator.run`: each client's scale from the
    Harmonizer for its mechanism and budget over T·τ steps (:func:`scales`), its local DP-SGD
    (:func:`local_update`, compiled with only the mechanisms in use) and the server step: FedAvg's mean
    weighted by client size (``"mean"``) or mode connectivity on the server's public data
    (``"mode_connect"``, :func:`mode_connect_aggregator`). Mode connectivity is post-processing: the
    accounting (``epsilon``) is the same for both.

    Args:
      model: the Flax NNX model. loss_fn: per-example loss ``(model, x, y, key) → (B,)``.
      mechanisms: one name per client. epsilon: ε_k per client (or shared). delta: δ.
      clip: C > 0 shared, one per client, or a dict ``{mechanism: C}`` (L2 for gaussian, L1 otherwise).
      learning_rate: η. local_steps: τ. q: record sampling rate. rounds: T (the accounting's horizon).
      aggregation: ``"mean"`` or ``"mode_connect"``. server_data: ``(x, y)`` public records held by the
      server: N ≥ 1 finite records x (N, ...) that fit the model and N labels y (required by, and only read
      by, ``"mode_connect"``; validated whenever given). chain_steps, chain_learning_rate, grid:
      as :func:`mode_connect`. orders: Rényi orders of the Harmonizer.

    Returns:
      :class:`Configuration`.

    Example:
      >>> from jaxpriv.train.dpsgd import cross_entropy_loss
      >>> cfg = build(nnx.Linear(4, 3, rngs=nnx.Rngs(0)), cross_entropy_loss, ["gaussian", "laplace"], 2.0, 1e-5,
      ...             clip={"gaussian": 1.0, "laplace": 4.0}, learning_rate=0.5, local_steps=2, q=0.1, rounds=5)
      >>> cfg.client_state["clip"].tolist(), bool((cfg.epsilon <= 2.0).all())
      ([1.0, 4.0], True)
    """
    if aggregation not in AGGREGATIONS:
        raise ValueError(f"aggregation must be one of {AGGREGATIONS}, got {aggregation!r}")
    if aggregation == "mode_connect" and server_data is None:
        raise ValueError("server_data must be the server's public (x, y) records for aggregation='mode_connect'")
    names = _check_mechanisms(mechanisms)
    clips = _clip_per_client(clip, names)
    tau = int(check_array("local_steps", local_steps, 1.0, np.inf, integer=True))
    rounds = int(check_array("rounds", rounds, 1.0, np.inf, integer=True))
    graphdef, params, rest = nnx.split(model, nnx.Param, ...)
    if server_data is not None:
        x, y = _check_server_data(server_data)
        server = server_loss(loss_fn, graphdef, x, y, rest=rest)
        try:  # the records must fit the model: one abstract evaluation, no FLOPs
            jax.eval_shape(server, params)
        except (TypeError, ValueError) as err:
            raise ValueError(f"server_data's records (shape {x.shape}) do not fit the model: {err}") from err
    scale, achieved = scales(names, epsilon, delta, q, rounds * tau, _num_params(params), orders)
    local = local_update(loss_fn, graphdef, learning_rate, tau, q, rest=rest, mechanisms=sorted(set(names)))
    if aggregation == "mean":
        aggregator = mean_aggregator("size")
    else:
        aggregator = mode_connect_aggregator(server, names.size,
                                             steps=chain_steps, learning_rate=chain_learning_rate, grid=grid)
    return Configuration(local, aggregator, client_state(names, scale, clips), scale, achieved)
