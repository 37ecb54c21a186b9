"""DP-SGD's ε from RDP as one program: T steps of the Poisson-subsampled Gaussian, on the order grid and
refined between its orders (MATH §1.3, §1.8).
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

from .._numerics import log1p, kernel_jit
from .curves import orders_array, to_epsilon_both_kernel, to_epsilon_kernel
from .series import REFINE_MAX_ORDER, subsampled_gaussian_at
from .program import curve_tables, exact_curve, subsampled_gaussian_kernel

__all__ = ["REFINE_ITERATIONS", "dpsgd_epsilon_kernel", "dpsgd_epsilon_jit", "dpsgd_epsilon_refined_kernel",
           "dpsgd_epsilon_refined_jit", "dpsgd_conversions_kernel", "dpsgd_conversions_jit"]


# ----------------------------------------------------------------------------------------------------
# DP-SGD: T steps of the Poisson-subsampled Gaussian, as one kernel
# ----------------------------------------------------------------------------------------------------


def dpsgd_epsilon_kernel(q, sigma, steps, delta, orders_key: tuple, conversion: str = "improved", tables=None):
    """(ε, best order) of T-fold Poisson-subsampled Gaussian; flat (B,) float64 arrays, no validation;
    ``tables`` as in :func:`subsampled_gaussian_kernel`."""
    orders = np.asarray(orders_key)
    curve = subsampled_gaussian_kernel(q, sigma, orders_key, tables) * steps[:, None]
    return to_epsilon_kernel(curve, orders, delta, conversion)


@functools.partial(kernel_jit, static_argnames=("conversion",), saved=True)
def _dpsgd_epsilon_program(q, sigma, steps, delta, tables, orders, conversion: str = "improved"):
    return to_epsilon_kernel(exact_curve(q, sigma, tables) * steps[:, None], orders, delta, conversion)


def dpsgd_epsilon_jit(q, sigma, steps, delta, orders_key: tuple, conversion: str = "improved"):
    """:func:`dpsgd_epsilon_kernel` as one compiled program whose order tables and orders are runtime
    arguments (grids of the same shape share it). The curve and the conversion are one program rather than
    the curve's own plus a conversion's: the conversion alone compiles into 12-16 kernels (~0.3 s, its
    reductions over the orders split in two each), and a first answer is 10% cheaper fused."""
    return _dpsgd_epsilon_program(q, sigma, steps, delta, curve_tables(orders_key), orders_array(tuple(orders_key)),
                                  conversion)


_GOLDEN = (math.sqrt(5.0) - 1.0) / 2.0

#: Golden-section steps of the search between grid orders (``refine``): the bracket shrinks by 0.618⁴⁸ ≈ 1e-10.
REFINE_ITERATIONS = 48


def _refine(q, sigma, steps, delta, eps_grid, best, orders, iterations: int):
    """The golden-section search after the grid (see :func:`dpsgd_epsilon_refined_kernel`); ``orders`` the
    sorted grid (an array: a runtime argument of its own program)."""
    position = jnp.searchsorted(orders, best)
    lo = jnp.concatenate([jnp.maximum(1.0 + 1e-6, orders[:1] / 2 + 0.5), orders])[position]
    hi = jnp.concatenate([orders[1:], orders[-1:]])[position]
    hi = jnp.minimum(hi, REFINE_MAX_ORDER)
    lo = jnp.minimum(lo, hi)
    log_delta = jnp.log(delta)

    def eps_at(alpha):
        rho = steps * subsampled_gaussian_at(q, sigma, alpha)
        e = rho + log1p(-1.0 / alpha) - (log_delta + jnp.log(alpha)) / (alpha - 1.0)
        return jnp.where(jnp.isnan(e), jnp.inf, e)

    def step(k, state):  # steps 0 and 1 evaluate the two start points: one copy of ε(α) in the program
        a, b, c, d, fc, fd = state
        left = fc <= fd  # the minimum lies in [a, d]
        a_new, b_new = jnp.where(left, a, c), jnp.where(left, d, b)
        c_new = jnp.where(left, b_new - _GOLDEN * (b_new - a_new), d)
        d_new = jnp.where(left, c, a_new + _GOLDEN * (b_new - a_new))
        search = k >= 2
        f = eps_at(jnp.where(search, jnp.where(left, c_new, d_new), jnp.where(k == 0, c, d)))
        fc_new, fd_new = jnp.where(left, f, fd), jnp.where(left, fc, f)
        pick = lambda new, old: jnp.where(search, new, old)  # noqa: E731
        return (pick(a_new, a), pick(b_new, b), pick(c_new, c), pick(d_new, d),
                jnp.where(search, fc_new, jnp.where(k == 0, f, fc)), jnp.where(search, fd_new, jnp.where(k == 1, f, fd)))

    c0, d0 = hi - _GOLDEN * (hi - lo), lo + _GOLDEN * (hi - lo)
    _, _, c, d, fc, fd = jax.lax.fori_loop(0, iterations + 2, step, (lo, hi, c0, d0, c0, d0))
    alpha = jnp.where(fc <= fd, c, d)
    eps_ref = jnp.maximum(jnp.minimum(fc, fd), 0.0)
    use = (best <= REFINE_MAX_ORDER) & (eps_ref < eps_grid)
    return jnp.where(use, eps_ref, eps_grid), jnp.where(use, alpha, best)


_refine_jit = kernel_jit(_refine, static_argnames=("iterations",))


def dpsgd_epsilon_refined_kernel(q, sigma, steps, delta, orders_key: tuple, iterations: int = REFINE_ITERATIONS):
    """Grid ε, then a golden-section search for the best real order between the grid neighbours of the
    best grid order (ε(α) is quasi-convex in α, MATH §1.8). Never worse than the grid: the smaller wins."""
    eps_grid, best = dpsgd_epsilon_kernel(q, sigma, steps, delta, orders_key)
    return _refine(q, sigma, steps, delta, eps_grid, best, jnp.asarray(np.asarray(orders_key)), iterations)


def dpsgd_epsilon_refined_jit(q, sigma, steps, delta, orders_key: tuple, iterations: int = REFINE_ITERATIONS):
    """:func:`dpsgd_epsilon_refined_kernel` as the grid's two programs (:func:`dpsgd_epsilon_jit`) and the
    search's own: the curve is not compiled a second time."""
    eps_grid, best = dpsgd_epsilon_jit(q, sigma, steps, delta, orders_key)
    return _refine_jit(q, sigma, steps, delta, eps_grid, best, orders_array(tuple(orders_key)), iterations)


# ----------------------------------------------------------------------------------------------------
# Both conversions of one curve, as one program
# ----------------------------------------------------------------------------------------------------


def _conversions(curve, q, sigma, steps, delta, orders, iterations: int):
    """(ε, best order) by the improved conversion (refined when ``iterations``), then by the classic one, of
    ``curve`` (T times the single step's curve): :func:`jaxpriv.rdp.to_epsilon_both_kernel`, whose classic ε is
    not contracted with that product (bit for bit :func:`jaxpriv.rdp.to_epsilon`'s)."""
    eps, best, eps_classic, best_classic = to_epsilon_both_kernel(curve, orders, delta)
    if iterations:
        eps, best = _refine(q, sigma, steps, delta, eps, best, orders, iterations)
    return eps, best, eps_classic, best_classic


def dpsgd_conversions_kernel(q, sigma, steps, delta, orders_key: tuple, iterations: int = 0):
    """(ε, best order) of T-fold Poisson-subsampled Gaussian by the improved conversion (with the
    golden-section search of :func:`dpsgd_epsilon_refined_kernel` when ``iterations`` > 0) and by the classic
    one, from one curve: ``(eps, order, eps_classic, order_classic)``; flat (B,) float64 arrays, no
    validation. Each pair is the one :func:`dpsgd_epsilon_kernel` (or the refined kernel) and
    :func:`jaxpriv.rdp.to_epsilon` of the composed curve give (bit for bit as its own program,
    :func:`dpsgd_conversions_jit`; inside a caller's program, to XLA's rounding of that program)."""
    orders = np.asarray(orders_key)
    curve = subsampled_gaussian_kernel(q, sigma, orders_key) * steps[:, None]
    return _conversions(curve, q, sigma, steps, delta, jnp.asarray(orders), iterations)


@functools.partial(kernel_jit, static_argnames=("iterations",), saved=True)
def _dpsgd_conversions_program(q, sigma, steps, delta, tables, orders, iterations: int = 0):
    return _conversions(exact_curve(q, sigma, tables) * steps[:, None], q, sigma, steps, delta, orders, iterations)


def dpsgd_conversions_jit(q, sigma, steps, delta, orders_key: tuple, iterations: int = 0):
    """:func:`dpsgd_conversions_kernel` as one compiled program (order tables and orders runtime arguments,
    as :func:`dpsgd_epsilon_jit`): the curve, both conversions and the search in one, where the improved
    ε, the search and the classic ε through the public functions are three to five programs (the curve
    compiled twice), and the classic conversion adds ~0.03 s to its compilation."""
    return _dpsgd_conversions_program(q, sigma, steps, delta, curve_tables(orders_key),
                                      orders_array(tuple(orders_key)), iterations)
