"""Sampling transforms of RDP curves: rPDP-FL's client sampling and two-stage sampling (MATH §1.5), and
Poisson subsampling of any mechanism (Zhu & Wang 2019, MATH §1.4).
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

from .._numerics import (round_up, check_array, check_broadcastable, check_orders, float64, is_concrete, as_output,
                         log_expm1, log1p, kernel_jit)
from .curves import orders_array, to_epsilon_kernel
from .series import CPU_BLOCK, integer_groups, log_am1_binomial
from .program import subsampled_gaussian_kernel

__all__ = ["client_sampled", "two_stage_curve_kernel", "two_stage_epsilon_kernel", "two_stage",
           "subsampled_kernel", "subsampled"]


# ----------------------------------------------------------------------------------------------------
# rPDP-FL two-stage sampling: Poisson records inside each client, client sampling λ, T rounds
# ----------------------------------------------------------------------------------------------------


@kernel_jit  # one program per shape, not one per operation of an eager call
def _client_sampled(local, client_rate, orders):
    """log(1 − λ + λ e^{(α−1)ρ})/(α−1) for a per-client curve ρ of shape (..., K); λ broadcasts as (..., 1).

    log1p(λ·expm1(x)) keeps full precision when λ(e^x − 1) is tiny; the log-sum-exp form avoids overflow.
    """
    x = (orders - 1.0) * local
    small = x < 30.0
    near = jnp.log1p(client_rate * jnp.expm1(jnp.where(small, x, 0.0)))
    far = jnp.logaddexp(log1p(-client_rate), jnp.log(client_rate) + jnp.where(small, 30.0, x))
    return jnp.where(small, near, far) / (orders - 1.0)


def client_sampled(curve, client_rate, orders):
    """RDP of a release that happens only with probability λ: log(1 − λ + λ e^{(α−1)ρ(α)})/(α−1), for the
    curve ρ of the whole release (rPDP-FL client sampling, Lemma 6; MATH §1.5; see :func:`two_stage` for
    why it bounds both directions). ``curve`` has the orders on its last axis; λ ∈ (0, 1] broadcasts
    with the curve's leading axes.

    Example:
      >>> from jaxpriv import rdp
      >>> round(float(rdp.client_sampled(rdp.gaussian(1.0, [2.0]), 1.0, [2.0])[0]), 12)   # λ = 1: the curve itself
      1.0
    """
    with float64():
        curve = check_array("curve", curve, 0.0, np.inf, allow_inf=True, worse="up")
        client_rate = check_array("client_rate", client_rate, 0.0, 1.0, lo_open=True, worse="up")
        orders = check_orders(orders)
        return as_output(_client_sampled(curve, jnp.asarray(client_rate)[..., None], orders))


def _two_stage_of_curve(curve, steps, client_rate, rounds, orders):
    """ρ_FL from the one-step subsampled-Gaussian curve (B, K): T·log(1 − λ + λ e^{(α−1)τρ(α)})/(α−1)."""
    return rounds[:, None] * _client_sampled(curve * steps[:, None], client_rate[:, None], orders)


_two_stage_of_curve_jit = kernel_jit(_two_stage_of_curve)


def two_stage_curve_kernel(q, sigma, steps, client_rate, rounds, orders_key: tuple, tables=None):
    """ρ_FL(α) = T·log(1 − λ + λ e^{(α−1)τρ(α)})/(α−1) for flat (B,) float64 inputs → (B, K); ``tables`` as
    in :func:`subsampled_gaussian_kernel`."""
    curve = subsampled_gaussian_kernel(q, sigma, orders_key, tables)
    return _two_stage_of_curve(curve, steps, client_rate, rounds, np.asarray(orders_key))


def two_stage_epsilon_kernel(q, sigma, steps, client_rate, rounds, delta, orders_key: tuple, tables=None):
    """(ε, best order) of rPDP-FL two-stage sampling; flat (B,) float64 arrays, no validation."""
    curve = two_stage_curve_kernel(q, sigma, steps, client_rate, rounds, orders_key, tables)
    return to_epsilon_kernel(curve, np.asarray(orders_key), delta)


def two_stage(q, sigma, steps, client_rate, rounds, orders):
    """RDP of rPDP-FL's two-stage hybrid sampling: one record's curve after ``rounds`` FL rounds.

    Per round a client is sampled with probability λ (``client_rate``) and runs τ (``steps``) local
    DP-SGD steps in which the record is Poisson-sampled with rate q at noise multiplier σ:
    ρ^τ(α) = τ·ρ_PoiSG(α; q, σ), ρ^{τ,λ}(α) = log(1 − λ + λ e^{(α−1)ρ^τ(α)})/(α−1), and over T rounds
    ρ_FL(α) = T·ρ^{τ,λ}(α) (untrusted server / third parties). Source: rPDP-FL (seed 004), Lemma 6 and
    Theorem 1; MATH §1.5.

    Both directions of the Rényi divergence are covered. Client sampling makes the output M = (1−λ)P + λP'
    (P: round output without the client, P': with it). The paper bounds D_α(M‖P): e^{(α−1)D_α} is convex
    in its first argument, giving the formula above. The other direction follows because D_α is convex
    in its second argument (van Erven & Harremoës 2014, Thm 12): D_α(P‖M) ≤ λ·D_α(P‖P') ≤ λρ^τ, and
    λρ^τ ≤ ρ^{τ,λ} by Jensen (log E e^X ≥ E X). tests/test_rdp_two_stage.py also checks both directions
    numerically. The paper's "honest-but-curious server" variant λ·T·ρ^τ is
    ``two_stage(q, σ, τ, 1, λ·T, orders)``.

    Args:
      q: record sampling rate in [0, 1].
      sigma: noise multiplier σ > 0.
      steps: local steps per round τ ≥ 1 (real values allowed).
      client_rate: client sampling rate λ ∈ (0, 1].
      rounds: number of rounds T ≥ 1 (real values allowed).
      orders: 1-D array of ``K`` Rényi orders > 1.

    All of ``q, sigma, steps, client_rate, rounds`` broadcast to a shape ``S``.

    Returns:
      float64 array of shape ``S + (K,)``.

    Example:
      >>> import numpy as np
      >>> from jaxpriv import rdp
      >>> both = rdp.two_stage(0.01, 1.0, 5, 1.0, 100, [8.0])   # λ = 1: plain composition of 500 steps
      >>> bool(np.isclose(both[0], 500 * rdp.subsampled_gaussian(0.01, 1.0, [8.0])[0], rtol=1e-12))
      True
    """
    with float64():
        args = {
            "q": check_array("q", q, 0.0, 1.0, worse="up"),
            "sigma": check_array("sigma", sigma, 0.0, np.inf, lo_open=True, worse="down"),
            "steps": check_array("steps", steps, 1.0, np.inf, worse="up"),
            "client_rate": check_array("client_rate", client_rate, 0.0, 1.0, lo_open=True, worse="up"),
            "rounds": check_array("rounds", rounds, 1.0, np.inf, worse="up"),
        }
        orders = check_orders(orders)
        shape = check_broadcastable(**args)
        flat = [jnp.broadcast_to(a, shape).reshape(-1) for a in args.values()]
        key = tuple(float(a) for a in orders)
        # two programs, as dpsgd_epsilon_jit: the shared curve, then the two-stage transform
        curve = _two_stage_of_curve_jit(subsampled_gaussian_kernel(*flat[:2], key), *flat[2:], orders_array(key))
        return as_output(curve.reshape(shape + (orders.size,)))


# ----------------------------------------------------------------------------------------------------
# Poisson subsampling of any mechanism (Zhu & Wang 2019, general upper bound)
# ----------------------------------------------------------------------------------------------------


def _log_one_minus_q_plus_q_exp(q, y):
    """log(1 − q + q e^y) for q ∈ [0, 1], y ≥ 0 (inf allowed), without overflow or loss near y = 0."""
    small = y < 1.0
    near = jnp.log1p(q * jnp.expm1(jnp.where(small, y, 0.0)))
    far = jnp.logaddexp(log1p(-q), jnp.log(q) + jnp.where(small, 1.0, y))
    return jnp.where(small, near, far)


def _subsampled_block(q, base_int, base_at, orders_key: tuple):
    """(α−1)ρ(α) bound of the Poisson-subsampled mechanism; q (N,), base_int (N, n−1) = ε(2..n),
    base_at (N, K) = ε at the orders (or None), static orders → (N, K). See :func:`subsampled`."""
    orders = np.asarray(orders_key, dtype=np.float64)
    inside = (q > 0) & (q < 1)
    q_in = jnp.where(inside, q, 0.5)  # q = 0 and q = 1 are selected at the end
    log_q, log_1mq = jnp.log(q_in)[:, None], log1p(-q_in)[:, None]
    n = base_int.shape[-1] + 1
    ell = np.arange(3, n + 1, dtype=np.float64)
    # A − 1 = Σ_{ℓ≥2} C(α,ℓ) q^ℓ (1−q)^{α−ℓ} (c_ℓ e^{(ℓ−1)ε(ℓ)} − 1), c_2 = 1, c_ℓ = 3 (ℓ ≥ 3): the ℓ = 0, 1
    # terms of Zhu & Wang's sum are (1−q)^{α−1}(1 + (α−1)q) = 1 − Σ_{ℓ≥2} C(α,ℓ)q^ℓ(1−q)^{α−ℓ}, so every
    # term is ≥ 0 and tiny q keeps full relative precision (the same sum as the Gaussian's integer path).
    x = (ell - 1.0) * base_int[:, 1:]
    log_gain = jnp.concatenate(
        [
            jnp.full((q.shape[0], 2), -jnp.inf),
            log_expm1(base_int[:, :1]),
            x + jnp.log(3.0 - jnp.exp(-x)),
        ],
        axis=-1,
    )
    needed = np.unique(np.concatenate([np.floor(orders), np.ceil(orders)]))
    needed = needed[needed >= 2]
    groups = [needed[idx] for idx in integer_groups(needed)]
    # ε(ℓ) = inf makes the bound inf at every α ≥ ℓ; the sum itself gets finite gains (−inf binomials of
    # the padding slots would meet +inf gains as NaN)
    log_gain = jnp.where(jnp.isinf(log_gain) & (log_gain > 0), 0.0, log_gain)
    column = np.concatenate(groups)  # the integer order of each column of k_thm
    pick = np.zeros((n - 1, column.size))
    pick[column.astype(int) - 2, np.arange(column.size)] = 1.0
    infinite = (jnp.cumsum(jnp.isinf(base_int).astype(q.dtype), axis=-1) @ pick) > 0
    k_thm = jnp.concatenate([jax.nn.softplus(log_am1_binomial(log_q, log_1mq, log_gain, a)) for a in groups], -1)
    k_thm = jnp.where(infinite | (q[:, None] >= 1.0), jnp.inf, k_thm)
    # joint convexity of e^{(α−1)D_α}: (α−1)ρ ≤ log(1 − q + q e^{(α−1)ε(α)}), both directions, any q
    k_jc = _log_one_minus_q_plus_q_exp(q[:, None], (column - 1.0) * _mix_columns(base_int, pick))
    # column 0: α = 1, where (α−1)D_α → log P(supp Q) ≤ 0
    k_int = jnp.concatenate([jnp.zeros((q.shape[0], 1)), jnp.minimum(k_thm, k_jc)], axis=-1)
    # (α−1)D_α is convex in α: the chord between the neighbouring integer orders lies above it
    position = {1.0: 0, **{float(a): j + 1 for j, a in enumerate(column)}}
    chord = np.zeros((column.size + 1, orders.size))
    for j, a in enumerate(orders):
        lo, hi = math.floor(a), math.ceil(a)
        chord[position[float(lo)], j] += 1.0 - (a - lo)
        chord[position[float(hi)], j] += a - lo
    k = _mix_columns(k_int, chord)
    rho = round_up(k / (orders - 1.0), 4.0)  # softplus, the chord and the division: ≤ 3 ulps
    if base_at is not None:
        rho = jnp.minimum(rho, _log_one_minus_q_plus_q_exp(q[:, None], (orders - 1.0) * base_at) / (orders - 1.0))
        rho = jnp.where(q[:, None] >= 1.0, base_at, rho)  # the mechanism itself, bit for bit
    rho = jnp.where(q[:, None] <= 0.0, 0.0, rho)
    invalid = ~((q >= 0) & (q <= 1))  # traced input outside the domain: NaN, never a number
    return jnp.where(invalid[:, None], jnp.nan, rho)


def _mix_columns(x, weights: np.ndarray):
    """x @ weights for x ≥ 0 that may hold +inf and static weights ≥ 0, with inf·0 = 0: one matrix product
    instead of per-column slices (fast to compile) or a gather (whose transpose breaks grad with x64 off)."""
    infinite = jnp.isinf(x)
    finite = jnp.where(infinite, 0.0, x) @ weights
    return jnp.where(infinite.astype(x.dtype) @ (weights > 0).astype(x.dtype) > 0, jnp.inf, finite)


@functools.partial(kernel_jit, static_argnames=("orders_key",))
def subsampled_kernel(q, base_int, base_at, orders_key: tuple):
    """Flat (N,) configurations, in blocks of 128 on CPU (the binomial tables of large orders are big)."""
    n = q.shape[0]
    if jax.default_backend() != "cpu" or n <= CPU_BLOCK:
        return _subsampled_block(q, base_int, base_at, orders_key)
    pad = (-n) % CPU_BLOCK

    def blocks(x, fill):
        x = jnp.concatenate([x, jnp.full((pad,) + x.shape[1:], fill, x.dtype)])
        return x.reshape((-1, CPU_BLOCK) + x.shape[1:])

    args = (blocks(q, 0.5), blocks(base_int, 0.0), None if base_at is None else blocks(base_at, 0.0))
    rho = jax.lax.map(lambda a: _subsampled_block(*a, orders_key), args)
    return rho.reshape(-1, len(orders_key))[:n]


def _subsampled(q, base_int, base_at, orders: np.ndarray):
    """Unvalidated, broadcasting entry for internal callers: q (S_q), base_int (S_m + (n−1,)) = ε at the
    orders 2..n ≥ ⌈max orders⌉, base_at (S_m + (K,)) or None; returns S + (K,)."""
    shape = jnp.broadcast_shapes(jnp.shape(q), jnp.shape(base_int)[:-1])
    if base_at is not None:
        shape = jnp.broadcast_shapes(shape, jnp.shape(base_at)[:-1])
        base_at = jnp.broadcast_to(base_at, shape + (orders.size,)).reshape(-1, orders.size)
    flat_q = jnp.broadcast_to(q, shape).reshape(-1)
    base_int = jnp.broadcast_to(base_int, shape + base_int.shape[-1:]).reshape(-1, base_int.shape[-1])
    rho = subsampled_kernel(flat_q, base_int, base_at, tuple(float(a) for a in orders))
    return rho.reshape(shape + (orders.size,))


def subsampled(q, rdp_fn, orders):
    """Upper bound on the RDP curve of any mechanism run on a Poisson subsample (rate q).

    For integer α ≥ 2 (Zhu & Wang 2019, "Poisson Subsampled Rényi Differential Privacy", ICML, Thm 6,
    the general upper bound; MATH §1.4), with ε(·) the mechanism's RDP curve:

      (α−1)ρ(α) ≤ log( (1−q)^{α−1}(αq−q+1) + C(α,2) q² (1−q)^{α−2} e^{ε(2)}
                       + 3 Σ_{ℓ=3}^{α} C(α,ℓ) (1−q)^{α−ℓ} q^ℓ e^{(ℓ−1)ε(ℓ)} ).

    The constant 3 is the paper's (its abstract: optimal "up to an additive constant of log(3)/(α−1)";
    the sum without it is the paper's Thm 5 lower bound). It bounds both directions of the divergence.
    The bound is min'd with the joint-convexity bound (α−1)ρ(α) ≤ log(1 − q + q e^{(α−1)ε(α)}) (valid for
    both directions at every real α > 1, and equal to the base curve at q = 1).
    Fractional α: (α−1)D_α is convex in α (Hölder), so the chord of the integer-order bounds at ⌊α⌋ and
    ⌈α⌉ bounds it from above. For α ∈ (1, 2) the lower end is α = 1, where (α−1)D_α ≤ 0, which gives
    ρ(α) ≤ the bound at α = 2 (monotonicity of Rényi divergences says the same). Sums are in log space
    and written as A − 1 (all terms ≥ 0), so tiny q keeps full relative precision; q = 0 gives 0.

    Args:
      q: Poisson sampling rate in [0, 1], any shape ``S_q``.
      rdp_fn: the mechanism's RDP curve, either a callable mapping a 1-D numpy array of orders to an
        array of shape ``S_m + (len(orders),)`` (it is called at the integer orders 2…⌈max α⌉ and at
        ``orders``), or precomputed values: an array of shape ``S_m + (n − 1,)`` holding ε at the
        integer orders 2, 3, …, n with n ≥ ⌈max(orders)⌉ (then only the integer-order bound is used).
        Values must be ≥ 0 (inf allowed).
      orders: 1-D array of ``K`` Rényi orders > 1 (concrete).

    Returns:
      float64 array of shape ``broadcast(S_q, S_m) + (K,)``.

    Example:
      >>> from jaxpriv import rdp
      >>> bound = rdp.subsampled(0.01, lambda a: rdp.gaussian(2.0, a), [2.0, 8.0])
      >>> exact = rdp.subsampled_gaussian(0.01, 2.0, [2.0, 8.0])
      >>> [round(float(x), 8) for x in bound], bool((bound >= exact).all())
      ([2.84e-05, 0.00014882], True)
    """
    with float64():
        q = check_array("q", q, 0.0, 1.0, worse="up")
        orders = check_orders(orders)
        n = max(2, int(math.ceil(orders.max())))
        int_orders = np.arange(2.0, n + 1.0)
        if callable(rdp_fn):
            base_int = _check_base_curve(rdp_fn(int_orders), int_orders.size, "rdp_fn(orders)")
            base_at = _check_base_curve(rdp_fn(orders), orders.size, "rdp_fn(orders)")
        else:
            base_at = None
            base_int = _check_base_curve(rdp_fn, None, "rdp_fn")
            if base_int.shape[-1] < int_orders.size:
                raise ValueError(
                    f"rdp_fn (precomputed) must hold ε at the integer orders 2..{n} on its last axis "
                    f"(at least {int_orders.size} values), got {base_int.shape[-1]}"
                )
            base_int = base_int[..., : int_orders.size]
        check_broadcastable(q=q, rdp_fn=base_int[..., 0])
        return as_output(_subsampled(q, base_int, base_at, orders))


def _check_base_curve(values, size, name):
    """A base RDP curve: orders on the last axis (``size`` of them when given), values in [0, inf]."""
    if is_concrete(values):
        try:
            arr = np.asarray(values, dtype=np.float64)
        except (TypeError, ValueError) as err:
            raise ValueError(f"{name} must be a callable or an array of RDP values, got {values!r}") from err
        if arr.ndim == 0 or (size is not None and arr.shape[-1] != size):
            want = "a last axis of orders" if size is None else f"{size} orders on its last axis"
            raise ValueError(f"{name} must return an RDP curve with {want}, got shape {arr.shape}")
    return check_array(name, values, 0.0, np.inf, allow_inf=True)
