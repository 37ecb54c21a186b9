"""Rényi-DP curves in closed form, their composition and their conversion to (ε, δ) (MATH §1.1-1.2, §1.7-1.8).

The default order grids, the Gaussian and Laplace curves, :func:`compose`, :func:`to_epsilon` and
:func:`to_delta`. Every curve is conservative (MATH §0.1): its floating-point error is bounded and added
upward.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

from .._docs import fill_doc
from .._numerics import (round_up, check_array, check_broadcastable, check_orders, float64, is_concrete, as_output,
                         log1mexp, log1p, kernel_jit)

__all__ = ["DP_ACCOUNTING_ORDERS", "DEFAULT_ORDERS", "gaussian_kernel", "gaussian", "laplace_kernel",
           "laplace", "orders_array", "compose", "to_epsilon_kernel", "to_epsilon_both_kernel", "to_epsilon",
           "to_delta"]

#: dp_accounting's 156 default orders (1.1…10.9 step 0.1, 11…63, 128, 256, 512, 1024).
DP_ACCOUNTING_ORDERS = np.concatenate(
    [np.round(1 + np.arange(1, 100) / 10.0, 10), np.arange(11, 64), [128.0, 256.0, 512.0, 1024.0]]
).astype(np.float64)

#: Default grid: dp_accounting's orders (so no result is worse than dp_accounting's on the same event)
#: plus orders near 1 (large-ε regimes) and between/after its powers of two (small-ε regimes).
DEFAULT_ORDERS = np.unique(
    np.concatenate(
        [
            DP_ACCOUNTING_ORDERS,
            [1.01, 1.02, 1.03, 1.05, 1.07],
            [80.0, 96.0, 192.0, 384.0, 768.0],
        ]
    )
)


# ----------------------------------------------------------------------------------------------------
# Gaussian and Laplace (closed forms)
# ----------------------------------------------------------------------------------------------------

#: the Args/Returns of a one-parameter closed-form curve (``{name}``: its parameter)
_CURVE_DOC = """
    Args:
      {name}
      orders: 1-D array of ``K`` Rényi orders, each > 1.

    Returns:
      float64 array of shape ``S + (K,)``."""


def _closed_form(kernel, name: str, value, orders):
    """``kernel(value, orders)`` on S + (K,) after validating the parameter ``name`` (> 0; a narrower float is
    read at its smaller end: the larger ρ) and the orders."""
    with float64():
        value = check_array(name, value, 0.0, np.inf, lo_open=True, worse="down")
        orders = jnp.asarray(check_orders(orders))
        return as_output(kernel(value[..., None], orders))



@kernel_jit  # one program per shape, not one per operation of an eager call (issue 29)
def gaussian_kernel(sigma, orders):
    return round_up(orders / (2.0 * sigma**2), 3.0)  # two roundings: ≤ 1.5 ulps


@fill_doc(args=_CURVE_DOC.format(name="sigma: noise multiplier σ > 0 (array, any shape ``S``)."))
def gaussian(sigma, orders):
    """RDP curve of the Gaussian mechanism with noise multiplier σ (sensitivity 1): ρ(α) = α / (2σ²).

    Source: Mironov 2017, "Rényi Differential Privacy", Prop. 7 (MATH §1.1).

    {args}

    Example:
      >>> from jaxpriv import rdp
      >>> [round(float(r), 6) for r in rdp.gaussian(2.0, [2, 8.5])]
      [0.25, 1.0625]
    """
    return _closed_form(gaussian_kernel, "sigma", sigma, orders)


_EXPM1_MINUS_ID_TERMS = 18  # Taylor terms of e^y − 1 − y for |y| < 1: truncation ≤ 2/20! ≈ 1e-18 relative


def _expm1_minus_identity(y):
    """e^y − 1 − y ≥ 0 to a few ulps relative: Taylor series for |y| < 1 (expm1(y) − y cancels there),
    ``expm1(y) − y`` elsewhere (its two parts then differ by a factor ≥ e − 2, so at most ~3 ulps lost)."""
    small = jnp.abs(y) < 1.0
    ys = jnp.where(small, y, 0.0)
    series = jnp.zeros_like(ys)
    for k in range(_EXPM1_MINUS_ID_TERMS + 1, 1, -1):  # Horner: y²(1/2! + y(1/3! + y(…)))
        series = series * ys + 1.0 / math.factorial(k)
    yl = jnp.where(small, 1.0, y)
    return jnp.where(small, series * ys * ys, jnp.expm1(yl) - yl)


@kernel_jit  # ~100 eager operations (two 18-term series) otherwise, each compiled per shape
def laplace_kernel(b, orders):
    # ρ(α) = log( α/(2α−1) e^{(α−1)/b} + (α−1)/(2α−1) e^{−α/b} ) / (α−1), with x = α−1:
    # * x/b < 1: the argument of the log is 1 + m, m = [(1+x) E(x/b) + x E(−(1+x)/b)] / (1+2x) with
    #   E(y) = e^y − 1 − y (the linear parts of the two exponentials cancel exactly), a sum of non-negative
    #   terms: no cancellation near α = 1 nor for large b, where ρ ≈ α/(2b²) is tiny;
    # * x/b ≥ 1: (α−1)ρ = x/b − log1p(x/(1+x)) + log1p(x/(1+x) e^{−(1+2x)/b}), with x/b − log1p(…) ≥ 1 − log 2.
    # Both are within ~8 ulps; the result is rounded up by 16 (MATH §0.1).
    x = orders - 1.0
    small = x / b < 1.0
    xs = jnp.where(small, x, 1.0)
    m = ((1.0 + xs) * _expm1_minus_identity(xs / b) + xs * _expm1_minus_identity(-(1.0 + xs) / b)) / (1.0 + 2.0 * xs)
    near_one = jnp.log1p(m) / xs
    xl = jnp.where(small, 1.0, x)
    ratio = xl / (1.0 + xl)
    far = (xl / b - jnp.log1p(ratio) + jnp.log1p(ratio * jnp.exp(-(1.0 + 2.0 * xl) / b))) / xl
    return round_up(jnp.where(small, near_one, far), 16.0)


@fill_doc(args=_CURVE_DOC.format(name="b: Laplace scale b > 0 (array, any shape ``S``)."))
def laplace(b, orders):
    """RDP curve of the Laplace mechanism with scale b (sensitivity 1, so pure ε = 1/b).

    ρ(α) = log( α/(2α−1)·e^{(α−1)/b} + (α−1)/(2α−1)·e^{−α/b} ) / (α−1), α > 1.
    Source: Mironov 2017, Prop. 6 (MATH §1.2). Computed without cancellation near α = 1.

    {args}

    Example:
      >>> from jaxpriv import rdp
      >>> round(float(rdp.laplace(1.0, [2.0])[0]), 12)
      0.619123629999
    """
    return _closed_form(laplace_kernel, "b", b, orders)


@functools.lru_cache(maxsize=64)
def orders_array(orders_key: tuple):
    """The orders as a float64 device array, made once (the programs below take them as a runtime argument)."""
    with jax.enable_x64(True), jax.ensure_compile_time_eval():
        return jax.device_put(np.asarray(orders_key, dtype=np.float64))


# ----------------------------------------------------------------------------------------------------
# Composition and conversion
# ----------------------------------------------------------------------------------------------------


def compose(*curves, counts=None):
    """RDP of a composition: curves add order by order (MATH §1.7; Mironov 2017, Prop. 1).

    Args:
      *curves: RDP curves on the same orders (broadcastable arrays, last axis = orders).
      counts: optional repetition count (≥ 0) per curve; heterogeneous steps add their curves.

    Returns:
      Σ_i counts_i · curves_i (float64).

    Example:
      >>> from jaxpriv import rdp
      >>> g = rdp.gaussian(1.0, [2.0, 4.0])
      >>> [round(float(x), 12) for x in rdp.compose(g, g, counts=[3, 1])]
      [4.0, 8.0]
    """
    if not curves:
        raise ValueError("compose needs at least one curve")
    with float64():
        if counts is None:
            counts = [1] * len(curves)
        if len(counts) != len(curves):
            raise ValueError(f"counts must have one entry per curve ({len(curves)}), got {len(counts)}")
        total = 0.0
        checked = {}
        for i, (curve, count) in enumerate(zip(curves, counts)):
            checked[f"curves[{i}]"] = check_array(f"curves[{i}]", curve, 0.0, np.inf, allow_inf=True)
            checked[f"counts[{i}]"] = check_array(f"counts[{i}]", count, 0.0, np.inf)
        check_broadcastable(**{k: v for k, v in checked.items() if k.startswith("curves")})
        for i in range(len(curves)):
            total = total + checked[f"counts[{i}]"] * checked[f"curves[{i}]"]
        return as_output(jnp.asarray(total))


def _epsilon_per_order(rdp, orders, log_delta, conversion: str):
    if conversion == "classic":  # Mironov 2017, Prop. 3
        eps = rdp - log_delta / (orders - 1.0)
    else:  # Balle et al. 2020, Thm 21 / Canonne, Kamath, Steinke 2020, Prop. 12
        eps = rdp + log1p(-1.0 / orders) - (log_delta + jnp.log(orders)) / (orders - 1.0)
    return jnp.where(jnp.isnan(eps), jnp.inf, eps)


def to_epsilon_kernel(rdp, orders, delta, conversion="improved"):
    """Unvalidated kernel: (ε, best order) with rdp (..., K), delta broadcastable to rdp[..., 0]."""
    if conversion == "classic":  # the classic half of the both-ways program: its answers bit for bit
        return to_epsilon_both_kernel(rdp, orders, delta)[2:]
    orders = jnp.asarray(orders)
    log_delta = jnp.log(delta)[..., None]
    return _minimised(_epsilon_per_order(rdp, orders, log_delta, conversion), rdp, orders, delta)


def to_epsilon_both_kernel(rdp, orders, delta):
    """Unvalidated kernel: ``(ε, order, ε_classic, order_classic)``, :func:`to_epsilon_kernel`'s answers by
    the improved and by the classic conversion, for the compilation cost of about one: the two per-order ε
    are stacked and minimised by one reduction, and the curve's checks are made once (DP-SGD's program on a
    2-core CPU: the classic conversion as a second to_epsilon_kernel added ~0.45 s of XLA compilation to its
    ~1.6 s, stacked ~0.03 s).

    The classic ε(α) = ρ(α) − log δ/(α−1) reads ρ through a select that changes no valid value (a curve is
    ≥ 0 or +inf; a negative ρ, only from an invalid traced input, gives a NaN ε either way): where ρ is a
    product in the same program (T·ρ₁, a composition), XLA's CPU code would otherwise contract the product
    and the subtraction into one fused multiply-add, one rounding instead of two, and the classic ε would
    differ from to_epsilon's in the last bit in ~10-20% of settings. The improved conversion keeps whatever
    the caller's program makes of it (DP-SGD's single program has always contracted it)."""
    orders = jnp.asarray(orders)
    log_delta = jnp.log(delta)[..., None]
    not_a_product = jnp.where(rdp >= 0.0, rdp, jnp.nan)
    eps = jnp.stack([_epsilon_per_order(rdp, orders, log_delta, "improved"),
                     _epsilon_per_order(not_a_product, orders, log_delta, "classic")])
    (eps, eps_classic), (best, best_classic) = _minimised(eps, rdp, orders, delta)
    return eps, best, eps_classic, best_classic


def _minimised(eps, rdp, orders, delta):
    """(ε, best order) from the per-order ε (..., K) of the curve ``rdp`` (its trailing shape): the minimum
    over the orders, 0 where the total-variation bound already gives δ, NaN for an invalid δ or curve."""
    eps_min = jnp.min(eps, axis=-1)
    best = _argmin_value(eps, eps_min, orders)
    # Bretagnolle-Huber: TV ≤ √(1 − e^{−KL}) ≤ √(1 − e^{−ρ(α)}), so δ ≥ that makes the pair (0, δ)-DP.
    kl_ok = jnp.any(delta[..., None] ** 2 + jnp.expm1(-rdp) > 0, axis=-1)
    eps_min = jnp.where(kl_ok, 0.0, jnp.maximum(eps_min, 0.0))
    # Traced input outside the domain (validation only sees concrete values): NaN, never a number.
    invalid = ~((delta > 0) & (delta < 1)) | jnp.any(jnp.isnan(rdp) | (rdp < 0), axis=-1)
    return jnp.where(invalid, jnp.nan, eps_min), best


def _argmin_value(values, minimum, orders):
    """The order attaining the minimum (the smallest such order), without argmin: XLA's argmin
    reduction carries a default-dtype init value that fails to compile under jit with x64 off."""
    return jnp.min(jnp.where(values == minimum[..., None], orders, jnp.inf), axis=-1)


def _to_log_delta(rdp, orders, epsilon):
    orders = jnp.asarray(orders)
    eps = epsilon[..., None]
    log_delta = (orders - 1.0) * (rdp - eps + log1p(-1.0 / orders)) - jnp.log(orders)
    log_delta = jnp.where(jnp.isnan(log_delta), jnp.inf, log_delta)
    kl_bound = 0.5 * log1mexp(-rdp)  # δ ≤ TV ≤ √(1 − e^{−ρ}) at any ε ≥ 0
    kl_bound = jnp.where(rdp > 0, kl_bound, jnp.where(rdp == 0, -jnp.inf, jnp.inf))  # NaN never helps
    log_delta = jnp.minimum(log_delta, kl_bound)
    value = jnp.min(log_delta, axis=-1)
    best = _argmin_value(log_delta, value, orders)
    invalid = ~(epsilon >= 0) | jnp.any(jnp.isnan(rdp) | (rdp < 0), axis=-1)
    return jnp.where(invalid, jnp.nan, jnp.minimum(value, 0.0)), best


# One compiled program per call shape, orders a runtime argument: evaluated op by op instead, a first call
# compiled some thirty one-operation programs (0.1 s each).
_to_epsilon_jit = kernel_jit(to_epsilon_kernel, static_argnames=("conversion",))


@kernel_jit
def _to_delta_jit(rdp, orders, epsilon):
    log_delta, best = _to_log_delta(rdp, orders, epsilon)
    return jnp.exp(log_delta), best


def _check_curve(rdp, orders):
    orders = check_orders(orders)
    if is_concrete(rdp):
        rdp_np = np.asarray(rdp, dtype=np.float64)
        if rdp_np.ndim == 0 or rdp_np.shape[-1] != orders.size:
            raise ValueError(
                f"rdp must have the orders on its last axis: got shape {rdp_np.shape} for {orders.size} orders"
            )
    rdp = check_array("rdp", rdp, 0.0, np.inf, allow_inf=True, worse="up")
    return rdp, orders


def to_epsilon(rdp, orders, delta, conversion: str = "improved"):
    """Smallest ε over the orders such that an RDP curve implies (ε, δ)-DP.

    Improved conversion (default; Balle, Barthe, Gaboardi, Hsu, Sato 2020, Thm 21; Canonne, Kamath,
    Steinke 2020, Prop. 12): ε(α) = ρ(α) + log1p(−1/α) − (log δ + log α)/(α−1).
    Classic (Mironov 2017, Prop. 3): ε(α) = ρ(α) + log(1/δ)/(α−1). ε = max(0, min_α ε(α)); ε = 0 as soon
    as δ ≥ √(1 − e^{−ρ(α)}) for some α (a total-variation bound, as dp_accounting does). MATH §1.8.

    Args:
      rdp: curve of shape ``S + (K,)`` (≥ 0, inf allowed).
      orders: the ``K`` orders (> 1).
      delta: δ ∈ (0, 1), broadcastable to ``S``.
      conversion: ``"improved"`` or ``"classic"``.

    Returns:
      ``(epsilon, best_order)``, each of shape ``S``.

    Example:
      >>> from jaxpriv import rdp
      >>> orders = rdp.DEFAULT_ORDERS
      >>> eps, order = rdp.to_epsilon(rdp.gaussian(1.0, orders) * 10, orders, 1e-5)
      >>> round(float(eps), 4), float(order)
      (19.0536, 2.5)
    """
    if conversion not in ("improved", "classic"):
        raise ValueError(f"conversion must be 'improved' or 'classic', got {conversion!r}")
    with float64():
        rdp, orders = _check_curve(rdp, orders)
        delta = check_array("delta", delta, 0.0, 1.0, lo_open=True, hi_open=True, worse="down")
        check_broadcastable(rdp=rdp[..., 0], delta=delta)
        return as_output(_to_epsilon_jit(rdp, orders_array(tuple(float(a) for a in orders)), delta, conversion))


def to_delta(rdp, orders, epsilon):
    """Smallest δ over the orders such that an RDP curve implies (ε, δ)-DP.

    log δ(α) = (α−1)(ρ(α) − ε + log1p(−1/α)) − log α (the improved conversion solved for δ; Canonne,
    Kamath, Steinke 2020, Prop. 12), also bounded by √(1 − e^{−ρ(α)}); clipped to 1. MATH §1.8.

    Args:
      rdp: curve of shape ``S + (K,)``.
      orders: the ``K`` orders (> 1).
      epsilon: ε ≥ 0, broadcastable to ``S``.

    Returns:
      ``(delta, best_order)``, each of shape ``S``.

    Example:
      >>> from jaxpriv import rdp
      >>> orders = rdp.DEFAULT_ORDERS
      >>> d, _ = rdp.to_delta(rdp.gaussian(1.0, orders) * 10, orders, 19.0536)
      >>> float(d) <= 1e-5
      True
    """
    with float64():
        rdp, orders = _check_curve(rdp, orders)
        epsilon = check_array("epsilon", epsilon, 0.0, np.inf, worse="down")
        check_broadcastable(rdp=rdp[..., 0], epsilon=epsilon)
        return as_output(_to_delta_jit(rdp, orders_array(tuple(float(a) for a in orders)), epsilon))
