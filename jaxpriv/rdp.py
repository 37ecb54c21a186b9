"""Rényi differential privacy curves and their conversion to (ε, δ) (MATH §1).

A *curve* is the array ρ(α) of Rényi-DP guarantees at a 1-D array of orders α (shape ``S + (K,)`` for
parameters broadcast to shape ``S`` and ``K`` orders). Curves of a composition add order by order
(:func:`compose`); :func:`to_epsilon` and :func:`to_delta` turn a curve into an (ε, δ) statement.

The Poisson-subsampled Gaussian is computed exactly at every order:

* integer α by the finite binomial sum (Mironov, Talwar, Zhang 2019, §3.3, Eq. for integer α);
* fractional α by the two signed binomial series of the same paper, with the alternating tail of each
  series summed by the Cohen-Villegas-Zagier acceleration (its terms form a moment sequence, so the
  acceleration has a proven error bound, which is added on the safe side).

Both paths compute A_α − 1 rather than A_α: the curve is ρ = log1p(A_α − 1)/(α − 1), which keeps full
relative precision when q is tiny and A_α is within 1e-15 of 1.

Every curve is *conservative* (MATH §0.1): its floating-point error is bounded and added upward, so a
returned value is never below the exact one, and is typically a few ulps above it (``gaussian(1.0, [2.0])``
is 1.0000000000000007, not 1.0); round before comparing for equality.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import logsumexp

from ._batching import map_chunked
from ._numerics import (
    EPS64,
    round_up,
    check_array,
    check_broadcastable,
    check_orders,
    float64,
    is_concrete,
    as_output,
    log_expm1,
    log_normal_cdf,
    log1mexp,
    log1p,
)

__all__ = [
    "DEFAULT_ORDERS",
    "DP_ACCOUNTING_ORDERS",
    "gaussian",
    "laplace",
    "subsampled_gaussian",
    "subsampled",
    "two_stage",
    "client_sampled",
    "compose",
    "to_epsilon",
    "to_delta",
]

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


def _gaussian_rdp(sigma, orders):
    return round_up(orders / (2.0 * sigma**2), 3.0)  # two roundings: ≤ 1.5 ulps


def gaussian(sigma, orders):
    """RDP curve of the Gaussian mechanism with noise multiplier σ (sensitivity 1): ρ(α) = α / (2σ²).

    Source: Mironov 2017, "Rényi Differential Privacy", Prop. 7 (MATH §1.1).

    Args:
      sigma: noise multiplier σ > 0 (array, any shape ``S``).
      orders: 1-D array of ``K`` Rényi orders, each > 1.

    Returns:
      float64 array of shape ``S + (K,)``.

    Example:
      >>> from jaxpriv import rdp
      >>> [round(float(r), 6) for r in rdp.gaussian(2.0, [2, 8.5])]
      [0.25, 1.0625]
    """
    with float64():
        sigma = check_array("sigma", sigma, 0.0, np.inf, lo_open=True, worse="down")
        orders = jnp.asarray(check_orders(orders))
        return as_output(_gaussian_rdp(sigma[..., None], orders))


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


def laplace(b, orders):
    """RDP curve of the Laplace mechanism with scale b (sensitivity 1, so pure ε = 1/b).

    ρ(α) = log( α/(2α−1)·e^{(α−1)/b} + (α−1)/(2α−1)·e^{−α/b} ) / (α−1), α > 1.
    Source: Mironov 2017, Prop. 6 (MATH §1.2). Computed without cancellation near α = 1.

    Args:
      b: Laplace scale b > 0 (array, any shape ``S``).
      orders: 1-D array of ``K`` Rényi orders, each > 1.

    Returns:
      float64 array of shape ``S + (K,)``.

    Example:
      >>> from jaxpriv import rdp
      >>> round(float(rdp.laplace(1.0, [2.0])[0]), 12)
      0.619123629999
    """
    with float64():
        b = check_array("b", b, 0.0, np.inf, lo_open=True, worse="down")
        orders = jnp.asarray(check_orders(orders))
        return as_output(laplace_kernel(b[..., None], orders))


# ----------------------------------------------------------------------------------------------------
# Poisson-subsampled Gaussian (exact)
# ----------------------------------------------------------------------------------------------------

# Cohen, Villegas, Zagier (2000), "Convergence acceleration of alternating series", Algorithm 1:
# Σ_{k≥0} (−1)^k a_k ≈ Σ_{k<n} w_k a_k, with |error| ≤ 2 a_0 / (3+√8)^n when a_k is a moment sequence.
# Both tails below are: |C(α, i)| = c·B(i−α, α+1) and E[X^i 1{X ≤ 1}] are moment sequences in i.
_CVZ_TERMS = 20


def _cvz_weights(n: int) -> np.ndarray:
    d = (3.0 + math.sqrt(8.0)) ** n
    d = (d + 1.0 / d) / 2.0
    b, c = -1.0, -d
    weights = []
    for k in range(n):
        c = b - c
        weights.append(c / d)
        b = (k + n) * (k - n) * b / ((k + 0.5) * (k + 1.0))
    return np.asarray(weights)


_CVZ_WEIGHTS = _cvz_weights(_CVZ_TERMS)
_LOG_CVZ_ERROR = math.log(2.0) - _CVZ_TERMS * math.log(3.0 + math.sqrt(8.0))
_LOG_ROUNDING = math.log(3 * np.finfo(np.float64).eps)


def _log_abs_binom(alpha, n: int, magnitude: bool = False):
    """log|C(α, i)| for i = 0..n−1 on a new last axis; exact zeros (−inf) past an integer α.
    ``magnitude=True``: instead the sum of the absolute values of the logs it adds up (its rounding scale).

    Works on numpy (concrete orders: a compile-time table) and on JAX arrays (traced orders).
    """
    xp = np if isinstance(alpha, np.ndarray) else jnp
    i = xp.arange(n, dtype=np.float64)
    with np.errstate(divide="ignore"):
        up, down = xp.log(xp.abs(alpha[..., None] - i[:-1])), xp.log(i[1:])
    if magnitude:
        factors = xp.where(xp.isfinite(up), xp.abs(up), 0.0) + down
    else:
        factors = up - down
    zeros = xp.zeros(alpha.shape + (1,))
    return xp.concatenate([zeros, xp.cumsum(factors, axis=-1) if xp is np else _cumsum(factors)], axis=-1)


def _cumsum(x, block: int = 16):
    """Cumulative sum along the last axis as two small matrix products (within blocks of 16, then across
    blocks): XLA compiles jnp.cumsum into a tree of some twenty reduce-window kernels per call."""
    n = x.shape[-1]
    pad = (-n) % block
    x = jnp.concatenate([x, jnp.zeros(x.shape[:-1] + (pad,), x.dtype)], axis=-1) if pad else x
    x = x.reshape(x.shape[:-1] + (-1, block))
    within = x @ jnp.asarray(np.triu(np.ones((block, block))))
    blocks = within[..., -1] @ jnp.asarray(np.triu(np.ones((x.shape[-2],) * 2), 1))  # sums of the blocks before
    return (within + blocks[..., None]).reshape(x.shape[:-2] + (-1,))[..., :n]


def _binom_sign(alpha, k):
    """Sign of C(α, k): positive up to k = ⌈α⌉, then alternating (−1)^{k−⌈α⌉} (zero at integer α)."""
    ceil_a = jnp.ceil(alpha)
    return jnp.where(k <= ceil_a, 1.0, jnp.where((k - ceil_a) % 2 == 0, 1.0, -1.0))


def _one_minus_q_pow_minus_linear(q, alpha):
    """(1−q)^α − 1 + αq ≥ 0, accurate for small αq (Taylor in q) and large αq (direct)."""
    small = alpha * q < 0.5
    log_qs = jnp.log(jnp.where(small, q, 0.5))
    k = jnp.arange(2, 42, dtype=jnp.float64)
    # Σ_{k≥2} C(α,k)(−q)^k; |C(α,k) q^k| ≤ (αq)^k/k!, so 40 terms reach 1e-60 relative when αq < 0.5.
    log_abs_c = _log_abs_binom(jnp.asarray(alpha), 42)[..., 2:]
    sign = _binom_sign(jnp.asarray(alpha)[..., None], k) * jnp.where(k % 2 == 0, 1.0, -1.0)
    series = jnp.sum(sign * jnp.exp(log_abs_c + k * log_qs[..., None]), axis=-1)
    direct = jnp.expm1(alpha * log1p(-q)) + alpha * q
    return jnp.where(small, series, direct)


@functools.lru_cache(maxsize=None)
def _log_binomial_row(alpha: int) -> np.ndarray:
    """log C(α, i) for i = 0..α, each within ~2 ulps: the binomials are exact Python integers (the
    lgamma difference loses up to α·log α ulps to cancellation, 7e-13 relative at α = 768)."""
    row, c = [0.0], 1
    for i in range(alpha):
        c = c * (alpha - i) // (i + 1)
        row.append(math.log(c))
    return np.asarray(row)


def _log_am1_binomial(log_q, log_1mq, log_gain, alphas: np.ndarray):
    """log(A_α − 1) at integer orders: Σ_{i≥2} C(α,i) q^i (1−q)^{α−i} expm1((i²−i)/(2σ²)).

    Every term is non-negative, so the sum has no cancellation. ``log_gain`` is the per-config table
    log expm1((i²−i)/(2σ²)) (shape (N, I)); ``alphas`` (concrete) fixes the binomial table at trace time.
    """
    terms = int(alphas.max()) + 1
    i = np.arange(terms, dtype=np.float64)[None, :]
    valid = (i >= 2) & (i <= alphas[:, None])
    rest = np.where(valid, alphas[:, None] - i, 0.0)
    log_binom = np.full(valid.shape, -np.inf)
    for row, alpha in enumerate(alphas.astype(int)):
        log_binom[row, 2 : alpha + 1] = _log_binomial_row(int(alpha))[2:]
    parts = (log_binom, i * log_q[..., None], rest * log_1mq[..., None], log_gain[:, None, :terms])
    log_terms = sum(parts)
    # log-sum-exp by hand, so that the one exp of the terms also gives their weights.
    top = jnp.max(log_terms, axis=-1, keepdims=True)
    top = jnp.where(jnp.isfinite(top), top, 0.0)
    scaled = jnp.exp(log_terms - top)
    total = jnp.sum(scaled, axis=-1)
    # Each log-term carries an absolute rounding error of a few ulps of the magnitudes it is summed from; to
    # first order the log-sum's error is the weight-averaged term error, so adding 8 ulps of the weighted
    # magnitude moves the result to the safe side (MATH §0.1).
    gain_size = jnp.abs(jnp.where(jnp.isfinite(log_gain), log_gain, 0.0))[:, None, :terms]  # per config only
    magnitude = (np.where(valid, np.abs(log_binom), 0.0) + 1.0 + i * jnp.abs(log_q[..., None])
                 + rest * jnp.abs(log_1mq[..., None]) + gain_size)
    positive = total > 0  # all terms 0 (σ → ∞): A_α − 1 = 0, log = −inf, no allowance
    safe_total = jnp.where(positive, total, 1.0)
    weighted = jnp.where(positive, jnp.sum(jnp.where(valid, scaled * magnitude, 0.0), axis=-1) / safe_total, 0.0)
    return top[..., 0] + jnp.log(total) + 8.0 * EPS64 * weighted


def _integer_groups(orders: np.ndarray):
    """Indices of the integer orders, grouped by power of two so the padded binomial sums waste little."""
    idx = np.nonzero(orders == np.floor(orders))[0]
    buckets = np.ceil(np.log2(orders[idx])).astype(int)
    return [idx[buckets == b] for b in np.unique(buckets)]


# On CPU the (configs × orders × terms) intermediates of a large batch outgrow the caches: walking the
# batch in blocks of 128 configurations is ~1.4x faster. Accelerators get the whole batch at once.
_CPU_BLOCK = 128


# ----------------------------------------------------------------------------------------------------
# The subsampled-Gaussian curve as one small program (MATH §1.3)
# ----------------------------------------------------------------------------------------------------
#
# At every order A_α − 1 is a signed sum of terms ±exp(coef + E(s) + t·log(1−q)):
# * integer α (all signs +): coef = log C(α, i) (exact), E(i) = i log q + log expm1((i² − i)/(2σ²)), t = α − i;
# * fractional α, part 0: coef = log|C(α, i)| (+ log|w_k| in the CVZ tail), E(i) = the lower exponent
#   i log q + (i² − i)/(2σ²) + log Φ((z0 − i)/σ), t = α − i;
# * fractional α, part 1: the same coefficient at j, E(m) = the upper exponent at m = α − j = f + r
#   (f = α − ⌊α⌋, r = ⌊α⌋ − j) with log Φ((m − z0)/σ), t = j;
# plus, for fractional α, the four corrections of :func:`_log_am1_at`.
# E depends on the configuration only through (q, σ), so it is tabulated once per configuration: the
# integer table over i = 0, 1, …; the lower table over i; one upper row per distinct fractional part f,
# over r = −21, −20, … . Each order's terms read a *prefix* of one table row (i = 0…α; i = 0…⌊α⌋+21;
# r = −21…⌊α⌋), so they are whole aligned slabs of _SLAB table entries: every order of every grid is a
# list of chunks (order, slab, _SLAB coefficients), walked by two loops whose bodies do not depend on the
# grid (the largest term per order, then the exps and their sums). What depends only on the orders
# (coefficients, signs, t, each chunk's order and slab) is computed on the host from the concrete orders
# and enters the program as runtime arrays: the program does not grow with the grid, none of it is a
# constant, and grids of similar shape share one compiled program (their sizes are rounded up by
# :func:`_bucket`). log Φ and log expm1 have one call site each, over the whole table.
#
# The arithmetic of each term, of the corrections and of the error allowances (MATH §0.1) is that of
# :func:`_log_am1_at` and :func:`_log_am1_binomial`, which evaluate one order at a time: 3 ulps of
# Σ|terms| for the rounding of a signed sum and 4 ulps of each term's size (the magnitudes its log is
# summed from) for the term's own, plus the CVZ truncation bound (fractional orders); 8 ulps of the
# weighted size (integer orders). The values agree with theirs up to the order of the additions: within
# ~1e-13 relative, except where the signed sum cancels to ~1e-9 of its terms (α → 1, σ ≥ 50), where both
# are the exact value plus part of the same allowance (MATH §1.3's stated accuracy is unchanged).

_SLAB = 32  # terms per chunk: one row of a ⌊α⌋ ≤ 10 series (the default grid's fractional orders)
_TAIL_START = _CVZ_TERMS + 1  # upper rows start at r = −21: the last CVZ tail term of part 1


class _CurvePlan(NamedTuple):
    """The order-dependent data of the subsampled-Gaussian program (see the comment above)."""

    chunk_slot: np.ndarray  # (C,) int32, sorted: the order slot each chunk of terms belongs to
    chunk_slab: np.ndarray  # (C,) int32: the table slab (of _SLAB entries) it reads
    coef: np.ndarray  # (C, _SLAB) log|coefficient| of each term
    coef_size: np.ndarray  # (C, _SLAB) the rounding scale of coef (sum of the magnitudes it is built from)
    sign: np.ndarray  # (C, _SLAB) +1 or −1; 0 where the slot holds no term
    rest: np.ndarray  # (C, _SLAB) t: the term's power of (1 − q)
    int_shift: np.ndarray  # (I,) i = 0, 1, … of the integer table
    phi_shift: np.ndarray  # (P + 4,) shifts of the lower and upper tables; then 0, 1 (lower) and 0, 1 (upper)
    phi_sign: np.ndarray  # (P + 4,) −1: lower, log Φ((z0 − s)/σ); +1: upper, log Φ((s − z0)/σ)
    slab_shift: np.ndarray  # (S, _SLAB) the shift s of each table entry (I + P of them, in slabs)
    slab_quad: np.ndarray  # (S, _SLAB) 1 where the entry holds (s² − s)/(2σ²) (lower, upper), 0 (integer)
    frac_alpha: np.ndarray  # (KF,) fractional orders (slots 0 … KF − 1)
    frac_log_c: np.ndarray  # (KF, 40) log|C(α, k)|, k = 2…41: the series of (1 − q)^α − 1 + αq
    frac_c_sign: np.ndarray  # (KF, 40) the sign of C(α, k)(−q)^k
    chunk_allow: np.ndarray  # (C, 2) the term's rounding allowance is (a + b·size) ulps: (3, 4) fractional, (0, 8) integer
    tail_row: np.ndarray  # (KF, 2) int32: table row of the first CVZ tail term of parts 0 and 1
    tail_coef: np.ndarray  # (KF, 2) its coefficient
    tail_rest: np.ndarray  # (KF, 2) its power of (1 − q)
    slot_alpha: np.ndarray  # (KF + KI,) the order of each slot (integer orders after the fractional ones)
    perm: np.ndarray  # (K,) int32: the slot of each requested order


def _bucket(n: int) -> int:
    """A static size ≥ n: a power of two up to 16, then one of 8 sizes per octave. Grids whose sizes round
    to the same buckets share one compiled program."""
    n = max(int(n), 1)
    if n <= 16:
        return 1 << (n - 1).bit_length()
    grain = 1 << (n.bit_length() - 4)
    return -(-n // grain) * grain


def _slabs(rows: int) -> int:
    return -(-rows // _SLAB)


@functools.lru_cache(maxsize=64)
def _curve_plan(orders_key: tuple) -> _CurvePlan:
    """The host-side tables of :func:`_curve_block` for a grid of orders (concrete, any order, repeats allowed)."""
    orders = np.asarray(orders_key, dtype=np.float64)
    is_int = orders == np.floor(orders)
    fracs, ints = np.unique(orders[~is_int]), np.unique(orders[is_int])
    kf, ki = _bucket(fracs.size), _bucket(ints.size)
    slot_alpha = np.concatenate([fracs, np.full(kf - fracs.size, 1.5), ints, np.full(ki - ints.size, 2.0)])
    perm = np.where(is_int, kf + np.searchsorted(ints, orders), np.searchsorted(fracs, orders)).astype(np.int32)

    # Table rows: the integer table (i = 0 … max α), the lower table (i = 0 … max⌊α⌋ + 21), one upper row per
    # fractional part f (r = −21 … the largest ⌊α⌋ with that f); each padded to whole slabs.
    int_slabs = _bucket(_slabs(int(ints.max()) + 1 if ints.size else 1))
    floors = np.floor(fracs)
    parts, part_index = np.unique(fracs - floors, return_inverse=True)
    low_rows = _SLAB * _slabs(int(floors.max(initial=0.0)) + 1 + _TAIL_START)
    row_slabs = [_slabs(int(floors[part_index == p].max()) + 1 + _TAIL_START) for p in range(parts.size)]
    row_start = int_slabs + _slabs(low_rows) + np.concatenate([[0], np.cumsum(row_slabs)]).astype(int)
    frac_slabs = _slabs(low_rows) + int(sum(row_slabs))
    shifts = [np.arange(low_rows, dtype=np.float64)]
    shifts += [parts[p] + (np.arange(_SLAB * row_slabs[p], dtype=np.float64) - _TAIL_START) for p in range(parts.size)]
    pad_rows = _SLAB * (_bucket(frac_slabs) - frac_slabs)
    # the corrections' four log Φ values last: lower at s = 0, 1 (Φ(z0/σ), Φ((z0 − 1)/σ)), upper at s = 0, 1
    phi_shift = np.concatenate(shifts + [np.zeros(pad_rows), [0.0, 1.0, 0.0, 1.0]])
    phi_sign = np.concatenate([-np.ones(low_rows), np.ones(phi_shift.size - low_rows - 4), [-1.0, -1.0, 1.0, 1.0]])

    w = _CVZ_WEIGHTS
    tail_coef, tail_sign = np.log(np.abs(w)), -np.sign(w)
    slots, slabs, coef, size, sign, rest = [], [], [], [], [], []
    first_tail = np.zeros((kf, 2), dtype=np.int32)

    def add(slot, first_slab, n_rows, fill):
        """Chunks of one order reading ``n_rows`` table entries from ``first_slab`` on; ``fill`` sets the terms."""
        n = _slabs(n_rows)
        c, s, g, t = (np.zeros(n * _SLAB) for _ in range(4))
        fill(np.arange(n * _SLAB), c, s, g, t)
        start = len(slots)
        slots.extend([slot] * n)
        slabs.extend(range(first_slab, first_slab + n))
        for dest, src in ((coef, c), (size, s), (sign, g), (rest, t)):
            dest.extend(src.reshape(n, _SLAB))
        return start * _SLAB

    for k, alpha in enumerate(fracs):
        c = int(floors[k])
        n = c + 1 + _TAIL_START  # terms i (part 0) or j (part 1) = 0 … ⌊α⌋ + 21
        log_c = _log_abs_binom(np.asarray([alpha]), n)[0]
        log_size = _log_abs_binom(np.asarray([alpha]), n, magnitude=True)[0]
        tail = np.arange(n) >= c + 2  # past ⌈α⌉ = c + 1: the alternating tail, k = i − c − 2
        term_coef = log_c + np.where(tail, tail_coef[np.clip(np.arange(n) - c - 2, 0, _CVZ_TERMS - 1)], 0.0)
        term_sign = np.where(tail, tail_sign[np.clip(np.arange(n) - c - 2, 0, _CVZ_TERMS - 1)], 1.0)

        def part0(i, cf, sz, sg, t, alpha=alpha, n=n):  # row i of the lower table: term i (from i = 2)
            on = (i >= 2) & (i < n)
            ii = np.where(on, i, 0)
            cf[on], sz[on], sg[on] = term_coef[ii[on]], log_size[ii[on]], term_sign[ii[on]]
            t[on] = alpha - i[on]

        def part1(p, cf, sz, sg, t, n=n, c=c):  # row p of the upper row (r = p − 21): term j = c − r
            j = c + _TAIL_START - p
            on = (j >= 0) & (j < n)
            cf[on], sz[on], sg[on] = term_coef[j[on]], log_size[j[on]], term_sign[j[on]]
            t[on] = j[on]

        base0 = add(k, int_slabs, n, part0)
        base1 = add(k, row_start[part_index[k]], n, part1)
        first_tail[k] = (base0 + c + 2, base1 + _TAIL_START - 2)  # i = c + 2; j = c + 2, i.e. r = −2

    for k, alpha in enumerate(ints):
        a = int(alpha)
        log_binom = _log_binomial_row(a)

        def whole(i, cf, sz, sg, t, a=a, log_binom=log_binom):
            on = (i >= 2) & (i <= a)
            cf[on] = log_binom[i[on]]
            sz[on] = np.abs(log_binom[i[on]]) + 1.0
            sg[on] = 1.0
            t[on] = a - i[on]

        add(kf + k, 0, a + 1, whole)

    n_frac_chunks = sum(1 for slot in slots if slot < kf)
    pad = _bucket(len(slots)) - len(slots)  # empty chunks (no terms) of the last slot
    slots.extend([kf + ki - 1] * pad)
    slabs.extend([0] * pad)
    for dest in (coef, size, sign, rest):
        dest.extend(np.zeros((pad, _SLAB)))
    allow = np.zeros((len(slots), 2))
    allow[:n_frac_chunks] = (3.0, 4.0)  # as in _log_am1_at: 3 ulps of each term for the sum, 4 of its size
    allow[n_frac_chunks : len(slots) - pad] = (0.0, 8.0)  # as in _log_am1_binomial: 8 ulps of its size
    flat_coef, flat_rest = np.asarray(coef).reshape(-1), np.asarray(rest).reshape(-1)
    tail_row = np.asarray(slabs)[first_tail // _SLAB] * _SLAB + first_tail % _SLAB

    frac_alpha = slot_alpha[:kf]
    k = np.arange(2, 42, dtype=np.float64)
    return _CurvePlan(
        chunk_slot=np.asarray(slots, np.int32),
        chunk_slab=np.asarray(slabs, np.int32),
        coef=np.asarray(coef),
        coef_size=np.asarray(size),
        sign=np.asarray(sign),
        rest=np.asarray(rest),
        int_shift=np.arange(_SLAB * int_slabs, dtype=np.float64),
        phi_shift=phi_shift,
        phi_sign=phi_sign,
        slab_shift=np.concatenate([np.arange(_SLAB * int_slabs, dtype=np.float64), phi_shift[:-4]]).reshape(-1, _SLAB),
        slab_quad=np.concatenate([np.zeros(_SLAB * int_slabs), np.ones(phi_shift.size - 4)]).reshape(-1, _SLAB),
        frac_alpha=frac_alpha,
        frac_log_c=_log_abs_binom(frac_alpha, 42)[:, 2:],
        frac_c_sign=np.where(k <= np.ceil(frac_alpha)[:, None], 1.0,
                             np.where((k - np.ceil(frac_alpha)[:, None]) % 2 == 0, 1.0, -1.0))
        * np.where(k % 2 == 0, 1.0, -1.0),
        chunk_allow=allow,
        tail_row=tail_row.astype(np.int32),
        tail_coef=flat_coef[first_tail],
        tail_rest=flat_rest[first_tail],
        slot_alpha=slot_alpha,
        perm=perm,
    )


@functools.lru_cache(maxsize=64)
def _curve_plan_arrays(orders_key: tuple) -> _CurvePlan:
    """:func:`_curve_plan` as device arrays (float64), made once per grid: no transfer per call. Concrete even
    when first asked for inside a trace (then they enter that program as constants)."""
    with jax.enable_x64(True), jax.ensure_compile_time_eval():  # device_put: no copy program (jnp.asarray has one)
        return _CurvePlan(*(jax.device_put(np.asarray(x)) for x in _curve_plan(orders_key)))


def _log_expm1_positive(x):
    """log(e^x − 1) for x ≥ 0 (−inf at 0), one branch: x + log(1 − e^{−x}). Its error is within ~3 ulps of
    max(x, |result|) + 1, inside the integer sum's allowance (8 ulps of each term's magnitude, which counts
    |result| and 1); :func:`jaxpriv._numerics.log_expm1` evaluates two branches (4 transcendentals)."""
    return x + jnp.log(-jnp.expm1(-x))


def _materialise(x):
    """``x`` (rows, N) unchanged, but computed once into memory. The table has several readers (the two loops,
    the corrections' rows, the first CVZ tail terms), and XLA fuses an elementwise producer into each
    reader that can take it, even an expensive one once it is itself a fusion: log Φ would be compiled and
    evaluated more than once (into a gather of all terms: once per term, 10x slower). XLA never fuses a
    scatter into a reader, so writing the rows through an identity scatter pins them down; an optimization
    barrier does not, XLA's CPU pipeline removes it before fusion."""
    rows = jnp.arange(x.shape[0])
    return jnp.zeros_like(x).at[rows].set(x, unique_indices=True, indices_are_sorted=True)


def _curve_config(q, sigma):
    """Per-configuration scalars (5, N): log q, log(1 − q), z0 = σ² log((1 − q)/q) + ½, 2σ², q (again, from
    its log, as the corrections of _log_am1_at take it); 0 < q < 1 (q = 0 and q = 1 are exact limits,
    selected at the end)."""
    q_in = jnp.where((q > 0) & (q < 1), q, 0.5)
    log_q, log_1mq = jnp.log(q_in), log1p(-q_in)
    return jnp.stack([log_q, log_1mq, sigma**2 * (log_1mq - log_q) + 0.5, 2.0 * sigma**2, jnp.exp(log_q)])


def _curve_table(cfg, sigma, plan: _CurvePlan):
    """The per-configuration table of E (configurations last; see the comment above :data:`_SLAB`): the
    integer rows i log q + log expm1((i² − i)/(2σ²)), then the lower and upper rows s log q + (s² − s)/(2σ²)
    + log Φ(∓(s − z0)/σ), whose last two (upper, s = 0 and 1) serve the corrections. Each transcendental is
    evaluated once per entry."""
    log_q, z0, two_var = cfg[0], cfg[2], cfg[3]
    i, s = plan.int_shift[:, None], plan.phi_shift[:, None]
    integer = i * log_q + _log_expm1_positive((i * i - i) / two_var)
    log_phi = log_normal_cdf(plan.phi_sign[:, None] * ((s - z0) / sigma))
    exponent = s[:-4] * log_q + (s[:-4] * s[:-4] - s[:-4]) / two_var + log_phi[:-4]
    return _materialise(jnp.concatenate([integer, exponent, log_phi[-4:]]))


#: None: loops over the chunks on the CPU, all chunks at once elsewhere; True/False forces one (tests)
_CURVE_LOOPS = None


def _chunk_terms(entry, coef, sign, rest, log_1mq):
    """The log of each term of chunks (..., _SLAB): coefficient + table entry + t·log(1 − q); −inf off the
    terms. ``entry`` (..., _SLAB, N)."""
    return jnp.where((sign != 0)[..., None], coef[..., None] + entry + rest[..., None] * log_1mq, -jnp.inf)


def _chunk_sums(terms, entry, top, shift, quad_on, coef_size, sign, rest, allow, log_q, log_1mq, two_var):
    """Σ e over the positive and the negative terms of chunks (..., _SLAB), and Σ e·(a + b·size), with
    e = exp(term − top) → (..., 3, N). A term's size, the scale of its rounding: the magnitudes its log is
    summed from (coefficient, s log q, (s² − s)/(2σ²), log Φ or log expm1, t log(1 − q))."""
    e = jnp.exp(terms - top[..., None, :])
    s = shift[..., None]
    linear = s * log_q
    quad = quad_on[..., None] * ((s * s - s) / two_var)
    rest_part = jnp.where(jnp.isfinite(entry), entry - linear - quad, 0.0)
    size = (coef_size[..., None] + jnp.abs(linear) + jnp.abs(quad) + jnp.abs(rest_part)
            + jnp.abs(rest)[..., None] * jnp.abs(log_1mq))
    weight = allow[..., 0][..., None, None] + allow[..., 1][..., None, None] * size
    return jnp.stack([jnp.sum(jnp.where(sign[..., None] > 0, e, 0.0), axis=-2),
                      jnp.sum(jnp.where(sign[..., None] < 0, e, 0.0), axis=-2), jnp.sum(e * weight, axis=-2)], axis=-2)


def _max_rows(x):
    """The largest of the rows of one chunk (_SLAB, N) → (N,), pairwise (its value does not depend on the
    order). XLA's reduction kernel costs a few µs per call on a narrow batch, more than the work, and this
    runs once per chunk."""
    while x.shape[0] > 1:
        half = x.shape[0] // 2
        x = jnp.maximum(x[:half], x[half:])
    return x[0]


def _curve_block(q, sigma, plan: _CurvePlan):
    """ρ at the plan's slots → (K, N) for configurations q, σ of shape (N,) (configurations last). See the
    comment above :data:`_SLAB`; the arithmetic of each term, the corrections and the error allowances are
    those of :func:`_log_am1_at` and :func:`_log_am1_binomial`.

    The terms are visited one chunk (_SLAB terms × N configurations) at a time, in two loops: the largest
    term of each order, then the exps and their sums, each accumulated into its order's row (chunks are
    sorted by order, so each row sums its chunks in order). A chunk reads its table slab by a dynamic index,
    a contiguous block: on the CPU a gather of all chunks at once costs XLA 2-4 ns per term for the indexing
    alone (more than the exp), and its (chunks, _SLAB, N) intermediates outgrow the caches. An accelerator
    does take all chunks at once (gathers, segment reductions; the same values, bit for bit, on the CPU):
    there a loop step costs more than its work."""
    kf, ks, n = plan.frac_alpha.shape[0], plan.slot_alpha.shape[0], q.shape[0]
    cfg = _curve_config(q, sigma)
    log_q, log_1mq, two_var, q_back = cfg[0], cfg[1], cfg[3], cfg[4]
    table = _curve_table(cfg, sigma, plan)
    slabs = table[:-4].reshape(-1, _SLAB, n)

    chunks = (plan.chunk_slab, plan.chunk_slot, plan.coef, plan.coef_size, plan.sign, plan.rest, plan.chunk_allow)
    looped = _CURVE_LOOPS if _CURVE_LOOPS is not None else jax.default_backend() == "cpu"

    def chunk(k):  # chunk k: its data, the table entries it reads, and the log of each of its terms
        slab, slot, coef, coef_size, sign, rest, allow = (jax.lax.dynamic_index_in_dim(x, k, keepdims=False) for x in chunks)
        entry = jax.lax.dynamic_index_in_dim(slabs, slab, keepdims=False)
        return slab, slot, coef_size, sign, rest, allow, entry, _chunk_terms(entry, coef, sign, rest, log_1mq)

    if looped:
        def largest(k, top):
            _, slot, *_, terms = chunk(k)
            row = jax.lax.dynamic_index_in_dim(top, slot, keepdims=False)
            return jax.lax.dynamic_update_index_in_dim(top, jnp.maximum(row, _max_rows(terms)), slot, 0)

        top = jax.lax.fori_loop(0, plan.chunk_slot.shape[0], largest, jnp.full((ks, n), -jnp.inf))
    else:  # all chunks at once (an accelerator: gathers are cheap there, and a loop's steps are not)
        entries = slabs[plan.chunk_slab]
        terms = _chunk_terms(entries, plan.coef, plan.sign, plan.rest, log_1mq)
        top = jax.ops.segment_max(jnp.max(terms, axis=-2), plan.chunk_slot, num_segments=ks, indices_are_sorted=True)

    # corrections of the fractional orders (KF, N): [(1−q)^α − 1 + αq] Φ(z0/σ) ≥ 0, αq[(1−q)^{α−1} − 1]
    # Φ((z0−1)/σ) ≤ 0 (part 0); −(1−αq) Φ(−z0/σ), −αq Φ((1−z0)/σ) (part 1)
    alpha = plan.frac_alpha[:, None]
    small = alpha * q_back < 0.5
    log_qs = jnp.log(jnp.where(small, q_back, 0.5))
    k = jnp.arange(2, 42, dtype=jnp.float64)[:, None]
    series = jnp.sum(plan.frac_c_sign[..., None] * jnp.exp(plan.frac_log_c[..., None] + k * log_qs[:, None, :]), axis=1)
    direct = jnp.expm1(alpha * log1p(-q_back)) + alpha * q_back
    log_a = jnp.log(alpha)
    corr = [  # the table's last four rows: log Φ(z0/σ), log Φ((z0 − 1)/σ), log Φ(−z0/σ), log Φ((1 − z0)/σ)
        (jnp.log(jnp.where(small, series, direct)) + table[-4], 1.0),
        (log_a + log_q + jnp.log(-jnp.expm1((alpha - 1.0) * log_1mq)) + table[-3], -1.0),
        (jnp.log(jnp.abs(1.0 - alpha * q_back)) + table[-2], -jnp.sign(1.0 - alpha * q_back)),
        (log_a + log_q + table[-1], -1.0),
    ]

    # per-order log-sum-exp, relative to the largest term (or correction)
    top_f = top[:kf]
    for value, _ in corr:
        top_f = jnp.maximum(top_f, value)
    top = jnp.concatenate([top_f, top[kf:]])
    top = jnp.where(jnp.isfinite(top), top, 0.0)

    def sums(slab, coef_size, sign, rest, allow, entry, terms, top_row):
        return _chunk_sums(terms, entry, top_row, plan.slab_shift[slab], plan.slab_quad[slab], coef_size, sign, rest,
                           allow, log_q, log_1mq, two_var)

    if looped:
        def add(k, acc):  # adds chunk k's sums to its order's row
            slab, slot, coef_size, sign, rest, allow, entry, terms = chunk(k)
            row = jax.lax.dynamic_index_in_dim(acc, slot, keepdims=False)
            top_row = jax.lax.dynamic_index_in_dim(top, slot, keepdims=False)
            return jax.lax.dynamic_update_index_in_dim(
                acc, row + sums(slab, coef_size, sign, rest, allow, entry, terms, top_row), slot, 0)

        sums = jax.lax.fori_loop(0, plan.chunk_slot.shape[0], add, jnp.zeros((ks, 3, n)))
    else:
        sums = sums(plan.chunk_slab, plan.coef_size, plan.sign, plan.rest, plan.chunk_allow, entries, terms,
                    top[plan.chunk_slot])
        sums = jax.ops.segment_sum(sums, plan.chunk_slot, num_segments=ks, indices_are_sorted=True)

    # fractional orders: the signed sum and its upward slack (as in _log_am1_at): 3 ulps of Σ|terms| for
    # the rounding of the sum, 4 ulps of each term's size for its own rounding, and the CVZ truncation bound
    top_f = top[:kf]
    pos, neg, allowance = sums[:kf, 0], sums[:kf, 1], sums[:kf, 2]
    for value, sgn in corr:
        term = jnp.exp(value - top_f)
        pos = pos + jnp.where(sgn > 0, term, 0.0)
        neg = neg + jnp.where(sgn < 0, term, 0.0)
        allowance = allowance + term * (3.0 + 4.0 * jnp.where(jnp.isfinite(value), jnp.abs(value), 0.0))
    diff = pos - neg
    first = (plan.tail_coef[..., None] + table[plan.tail_row]
             + plan.tail_rest[..., None] * log_1mq)  # the first term of each CVZ tail: (KF, 2, N)
    first_tail = jnp.logaddexp(first[:, 0], first[:, 1]) - float(np.log(np.abs(_CVZ_WEIGHTS[0])))
    slack = jnp.logaddexp(math.log(EPS64) + top_f + jnp.log(allowance), _LOG_CVZ_ERROR + first_tail)
    log_am1_f = jnp.where(diff > 0, jnp.logaddexp(top_f + jnp.log(jnp.abs(diff)), slack), slack)

    # integer orders: all terms ≥ 0, 8 ulps of the weighted magnitude added (as in _log_am1_binomial)
    total = sums[kf:, 0]
    positive = total > 0  # all terms 0 (σ → ∞): A_α − 1 = 0, log = −inf, no allowance
    weighted = jnp.where(positive, sums[kf:, 2] / jnp.where(positive, total, 1.0), 0.0)
    log_am1_i = top[kf:] + jnp.log(total) + EPS64 * weighted

    orders = plan.slot_alpha[:, None]
    rho = jax.nn.softplus(jnp.concatenate([log_am1_f, log_am1_i])) / (orders - 1.0)
    rho = round_up(rho, 4.0)  # softplus and the division by α − 1: ≤ 2 ulps
    rho = jnp.where(q >= 1.0, _gaussian_rdp(sigma, orders), rho)
    rho = jnp.where(q <= 0.0, 0.0, rho)
    invalid = ~((q >= 0) & (q <= 1) & (sigma > 0))  # traced input outside the domain: NaN, not a number
    return jnp.where(invalid, jnp.nan, rho)[plan.perm]


def _curve_rows(q, sigma, plan: _CurvePlan):
    """(N,) configurations → (N, K)."""
    return _curve_block(q, sigma, plan).T


@jax.custom_jvp
def _curve(q, sigma, plan: _CurvePlan):
    return _curve_rows(q, sigma, plan)


@_curve.defjvp
def _curve_jvp(primals, tangents):
    # Each row depends only on its own (q, σ): two forward passes with unit tangents give ∂ρ/∂q and ∂ρ/∂σ,
    # and the tangent is their combination. Its transpose (for grad) is a product, never the transpose of
    # a gather: that is a scatter built in the default dtype, which fails with x64 off outside our scope.
    q, sigma, plan = primals
    dq, dsigma, _ = tangents
    f = functools.partial(_curve_rows, plan=plan)
    one, zero = jnp.ones_like(q), jnp.zeros_like(q)
    rho, by_q = jax.jvp(f, (q, sigma), (one, zero))
    _, by_sigma = jax.jvp(f, (q, sigma), (zero, one))
    return rho, by_q * dq[:, None] + by_sigma * dsigma[:, None]


_curve_jit = jax.jit(_curve)


def curve_tables(orders_key: tuple):
    """The order-dependent tables of :func:`subsampled_gaussian_kernel` for ``orders_key`` (a pytree of
    float64 and int32 device arrays, made once per grid). A program of the caller's own that traces the
    kernels (a root finder, a sweep) can take them as an argument and pass them on as ``tables=``: they
    then stay runtime data of that program instead of ~0.5 MB of constants compiled into it."""
    return _curve_plan_arrays(tuple(orders_key))


def subsampled_gaussian_kernel(q, sigma, orders_key: tuple, tables=None):
    """ρ(α) of the Poisson-subsampled Gaussian; q, σ of shape (N,) and static orders → (N, K).

    One compiled program serves every grid whose sizes round to the same buckets (:func:`_curve_plan`):
    the orders enter as runtime tables (``tables``: :func:`curve_tables`, looked up when not given).
    Inside a caller's trace it is inlined there."""
    return _curve_jit(q, sigma, curve_tables(orders_key) if tables is None else tables)


def _subsampled_gaussian(q, sigma, orders: np.ndarray):
    """Unvalidated, broadcasting entry for internal callers (q, sigma float64 arrays; orders numpy).
    Concrete numbers run in padded chunks (:func:`jaxpriv._batching.map_chunked`: a few compiled sizes
    whatever the number of settings); traced ones go straight into the caller's program."""
    shape = jnp.broadcast_shapes(jnp.shape(q), jnp.shape(sigma))
    key = tuple(float(a) for a in orders)
    if is_concrete((q, sigma)):
        flat = [np.broadcast_to(np.asarray(x, np.float64), shape).reshape(-1) for x in (q, sigma)]
        (rho,) = map_chunked(lambda q, s: (subsampled_gaussian_kernel(q, s, key),), flat, progress=False,
                             shard=False)
        return rho.reshape(shape + (orders.size,))
    q = jnp.broadcast_to(q, shape).reshape(-1)
    sigma = jnp.broadcast_to(sigma, shape).reshape(-1)
    return subsampled_gaussian_kernel(q, sigma, key).reshape(shape + (orders.size,))


def subsampled_gaussian(q, sigma, orders):
    """Exact RDP curve of the Poisson-subsampled Gaussian mechanism (sampling rate q, noise multiplier σ).

    ρ(α) = log A_α / (α−1), A_α = E_{z∼N(0,σ²)}[(1 − q + q e^{(2z−1)/(2σ²)})^α]
    (Mironov, Talwar, Zhang 2019, "Rényi DP of the Sampled Gaussian Mechanism", §3.3; MATH §1.3).
    Integer orders use the finite binomial sum; fractional orders the signed two-part series (exact, with
    a proven upper bound on the neglected tail added, ≲ 1e-18 relative). q = 1 gives the Gaussian curve,
    q = 0 gives 0. Finite for q ∈ [0, 1], σ > 0 and orders up to 10⁴ and beyond.

    Args:
      q: Poisson sampling rate in [0, 1]; broadcasts with ``sigma`` to shape ``S``.
      sigma: noise multiplier σ > 0.
      orders: 1-D array of ``K`` Rényi orders > 1 (concrete values).

    Returns:
      float64 array of shape ``S + (K,)``.

    Example:
      >>> from jaxpriv import rdp
      >>> round(float(rdp.subsampled_gaussian(0.01, 1.1, [4.7])[0]), 12)
      0.000317788072
    """
    with float64():
        q = check_array("q", q, 0.0, 1.0, worse="up")
        sigma = check_array("sigma", sigma, 0.0, np.inf, lo_open=True, worse="down")
        check_broadcastable(q=q, sigma=sigma)
        return as_output(_subsampled_gaussian(q, sigma, check_orders(orders)))


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
    orders = jnp.asarray(orders)
    log_delta = jnp.log(delta)[..., None]
    eps = _epsilon_per_order(rdp, orders, log_delta, conversion)
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
_to_epsilon_jit = jax.jit(to_epsilon_kernel, static_argnames=("conversion",))


@jax.jit
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
        return as_output(_to_epsilon_jit(rdp, _orders_array(tuple(float(a) for a in orders)), delta, conversion))


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
        return as_output(_to_delta_jit(rdp, _orders_array(tuple(float(a) for a in orders)), epsilon))


# ----------------------------------------------------------------------------------------------------
# DP-SGD: T steps of the Poisson-subsampled Gaussian, as one kernel
# ----------------------------------------------------------------------------------------------------


def dpsgd_epsilon_kernel(q, sigma, steps, delta, orders_key: tuple, conversion: str = "improved", tables=None):
    """(ε, best order) of T-fold Poisson-subsampled Gaussian; flat (B,) float64 arrays, no validation;
    ``tables`` as in :func:`subsampled_gaussian_kernel`."""
    orders = np.asarray(orders_key)
    curve = subsampled_gaussian_kernel(q, sigma, orders_key, tables) * steps[:, None]
    return to_epsilon_kernel(curve, orders, delta, conversion)


@functools.lru_cache(maxsize=64)
def _orders_array(orders_key: tuple):
    """The orders as a float64 device array, made once (the programs below take them as a runtime argument)."""
    with jax.enable_x64(True), jax.ensure_compile_time_eval():
        return jax.device_put(np.asarray(orders_key, dtype=np.float64))


@functools.partial(jax.jit, static_argnames=("conversion",))
def _dpsgd_epsilon_program(q, sigma, steps, delta, tables, orders, conversion: str = "improved"):
    return to_epsilon_kernel(_curve(q, sigma, tables) * steps[:, None], orders, delta, conversion)


def dpsgd_epsilon_jit(q, sigma, steps, delta, orders_key: tuple, conversion: str = "improved"):
    """:func:`dpsgd_epsilon_kernel` as one compiled program whose order tables and orders are runtime
    arguments (grids of the same shape share it). The curve and the conversion are one program rather than
    the curve's own plus a conversion's: the conversion alone compiles into 12-16 kernels (~0.3 s, its
    reductions over the orders split in two each), and a first answer is 10% cheaper fused."""
    return _dpsgd_epsilon_program(q, sigma, steps, delta, curve_tables(orders_key), _orders_array(tuple(orders_key)),
                                  conversion)


# ----------------------------------------------------------------------------------------------------
# rPDP-FL two-stage sampling: Poisson records inside each client, client sampling λ, T rounds
# ----------------------------------------------------------------------------------------------------


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


_two_stage_of_curve_jit = jax.jit(_two_stage_of_curve)


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
        curve = _two_stage_of_curve_jit(subsampled_gaussian_kernel(*flat[:2], key), *flat[2:], _orders_array(key))
        return as_output(curve.reshape(shape + (orders.size,)))

#: Continuous refinement searches orders up to this value (the series length is fixed at trace time).
REFINE_MAX_ORDER = 256.0
_GOLDEN = (math.sqrt(5.0) - 1.0) / 2.0


def _log_am1_at(log_q, log_1mq, sigma, alpha, terms: int):
    """log(A_α − 1) by the signed series of Mironov-Talwar-Zhang (2019), §3.3, with one traced order per
    configuration (all (B,); α ≤ terms − 22). The reference arithmetic for one order at a time, which the
    grid kernel (:func:`_curve_block`) follows term by term.

    The Gaussian integral is split at z₀ = σ² log(1/q − 1) + ½. Each part is a binomial series whose
    coefficients are positive up to i = ⌈α⌉ (the "head") and alternate after it (the "tail", summed by CVZ
    acceleration, its error bound added upward). Subtracting E[1 + αq(e^u − 1)] = 1 analytically (it
    cancels the i = 0, 1 terms of the first series; the four corrections below) leaves A_α − 1 as a sum
    of O(q²) pieces, so tiny q keeps full relative precision.

    Part 0 (z ≤ z0), term i: C(α,i) (1−q)^{α−i} q^i e^{(i²−i)/(2σ²)} Φ((z0 − i)/σ).
    Part 1 (z > z0), term j: C(α,j) q^{α−j} (1−q)^j e^{(m²−m)/(2σ²)} Φ((m − z0)/σ), m = α − j.

    The (1−q)^{α−m} factor is added as (α − m)·log(1−q): written as m (log q − log(1−q)) + α log(1−q)
    instead, two large pieces would cancel (q → 1) and their rounding would dominate A_α − 1. Each series
    is one contiguous row i = 0 … terms − 1 (head i ≤ ⌈α⌉, tail ⌈α⌉ < i ≤ ⌈α⌉ + 20, the rest masked), and
    one log Φ call serves both rows and the corrections: no gathers, and a small program (each log Φ call
    site is a large fusion)."""
    a, ceil_a = alpha[:, None], jnp.ceil(alpha)[:, None]
    i = jnp.arange(terms, dtype=jnp.float64)[None, :]
    k = i - ceil_a - 1.0  # position in the CVZ tail
    tail = (k >= 0.0) & (k < _CVZ_TERMS)
    k_index = jnp.clip(k, 0, _CVZ_TERMS - 1).astype(jnp.int32)
    w = _CVZ_WEIGHTS
    # Tail = −Σ_k (−1)^k a_k (the first tail coefficient is negative); CVZ: Σ(−1)^k a_k ≈ Σ w_k a_k.
    sign_series = jnp.where(tail, jnp.asarray(-np.sign(w))[k_index], 1.0)
    log_coef = _log_abs_binom(alpha, terms) + jnp.where(tail, jnp.asarray(np.log(np.abs(w)))[k_index], 0.0)
    mask1 = (i <= ceil_a) | tail
    mask0 = mask1 & (i >= 2.0)  # part 0 starts at i = 2: i = 0, 1 are folded into the corrections
    # log Φ at the lower shifts i, the upper shifts α − i and the corrections' four arguments, in one call
    z0 = sigma**2 * (log_1mq - log_q) + 0.5
    zc, sc, m = z0[:, None], sigma[:, None], a - i
    args = jnp.concatenate([-((i - zc) / sc), (m - zc) / sc,
                            jnp.stack([z0 / sigma, (z0 - 1.0) / sigma, -z0 / sigma, (1.0 - z0) / sigma], axis=1)], 1)
    phi = log_normal_cdf(args)
    lq, two_var = log_q[:, None], (2.0 * sigma**2)[:, None]
    lower = i * lq + (i * i - i) / two_var + phi[:, :terms]
    upper = m * lq + (m * m - m) / two_var + phi[:, terms : 2 * terms]
    # the (1−q)^{α−m} factors: m = i in part 0 and m = α − i in part 1 (α − m = i exactly)
    rest0, rest1 = (a - i) * log_1mq[:, None], i * log_1mq[:, None]
    series0 = jnp.where(mask0, log_coef + lower + rest0, -jnp.inf)
    series1 = jnp.where(mask1, log_coef + upper + rest1, -jnp.inf)

    q = jnp.exp(log_q)
    log_a = jnp.log(alpha)
    corr = [
        (jnp.log(_one_minus_q_pow_minus_linear(q, alpha)) + phi[:, -4], 1.0),
        (log_a + log_q + jnp.log(-jnp.expm1((alpha - 1.0) * log_1mq)) + phi[:, -3], -1.0),
        (jnp.log(jnp.abs(1.0 - alpha * q)) + phi[:, -2], -jnp.sign(1.0 - alpha * q)),
        (log_a + log_q + phi[:, -1], -1.0),
    ]
    top = jnp.maximum(jnp.max(series0, axis=-1), jnp.max(series1, axis=-1))
    for value, _ in corr:
        top = jnp.maximum(top, value)
    top = jnp.where(jnp.isfinite(top), top, 0.0)
    scaled0, scaled1 = jnp.exp(series0 - top[:, None]), jnp.exp(series1 - top[:, None])
    scaled = scaled0 + scaled1
    pos = jnp.sum(jnp.where(sign_series > 0, scaled, 0.0), axis=-1)
    neg = jnp.sum(jnp.where(sign_series < 0, scaled, 0.0), axis=-1)
    for value, sgn in corr:
        term = jnp.exp(value - top)
        pos = pos + jnp.where(sgn > 0, term, 0.0)
        neg = neg + jnp.where(sgn < 0, term, 0.0)
    diff = pos - neg
    # Upward slack: rounding of the signed sum (3 ulps of Σ|terms|; the largest error seen is 1.4 ulp) and the
    # CVZ truncation bound 2 a_0 / (3+√8)^n of each tail (a_0 its first term, picked by a maximum: a gather's
    # transpose breaks gradients with x64 off) …
    first = lambda series: jnp.max(jnp.where(k == 0.0, series, -jnp.inf), axis=-1)  # noqa: E731
    first_tail = jnp.logaddexp(first(series0), first(series1)) - float(np.log(np.abs(w[0])))
    slack = jnp.logaddexp(_LOG_ROUNDING + top + jnp.log(pos + neg), _LOG_CVZ_ERROR + first_tail)
    # … and each term's own rounding: its log is a sum of five pieces (m log q, (m²−m)/2σ², log Φ,
    # log|C(α, i)|, (α−m) log(1−q)), each within an ulp, and four additions (half an ulp of the partial sums
    # each), so the term is off by at most 4 ulps of their magnitude (relative; its exp's own rounding is in
    # the 3 ulps above).
    coef_size = _log_abs_binom(alpha, terms, magnitude=True)

    def term_size(shift, exponent, rest):
        linear, quad = shift * lq, (shift * shift - shift) / two_var
        return jnp.abs(linear) + jnp.abs(quad) + jnp.abs(exponent - linear - quad) + jnp.abs(rest) + coef_size

    sizes = (jnp.where(mask0, scaled0 * term_size(i, lower, rest0), 0.0)
             + jnp.where(mask1, scaled1 * term_size(m, upper, rest1), 0.0))
    finite = [(jnp.isfinite(v), jnp.where(jnp.isfinite(v), v, 0.0)) for v, _ in corr]  # log 0 = −inf: no term
    term_error = jnp.sum(sizes, axis=-1) + sum(jnp.where(ok, jnp.exp(v - top) * jnp.abs(v), 0.0) for ok, v in finite)
    slack = jnp.logaddexp(slack, math.log(4.0 * EPS64) + top + jnp.log(term_error))
    return jnp.where(diff > 0, jnp.logaddexp(top + jnp.log(jnp.abs(diff)), slack), slack)


def _subsampled_gaussian_at(q, sigma, alpha):
    """ρ(α) of the Poisson-subsampled Gaussian with a per-config, traced order α ∈ (1, REFINE_MAX_ORDER]."""
    inside = (q > 0) & (q < 1)
    q_in = jnp.where(inside, q, 0.5)
    log_am1 = _log_am1_at(jnp.log(q_in), log1p(-q_in), sigma, alpha, int(REFINE_MAX_ORDER) + 2 + _CVZ_TERMS)
    rho = jax.nn.softplus(log_am1) / (alpha - 1.0)
    rho = jnp.where(q >= 1.0, alpha / (2.0 * sigma**2), rho)
    return jnp.where(q <= 0.0, 0.0, rho)


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
        rho = steps * _subsampled_gaussian_at(q, sigma, alpha)
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


_refine_jit = jax.jit(_refine, static_argnames=("iterations",))


def dpsgd_epsilon_refined_kernel(q, sigma, steps, delta, orders_key: tuple, iterations: int = 48):
    """Grid ε, then a golden-section search for the best real order between the grid neighbours of the
    best grid order (ε(α) is quasi-convex in α, MATH §1.8). Never worse than the grid: the smaller wins."""
    eps_grid, best = dpsgd_epsilon_kernel(q, sigma, steps, delta, orders_key)
    return _refine(q, sigma, steps, delta, eps_grid, best, jnp.asarray(np.asarray(orders_key)), iterations)


def dpsgd_epsilon_refined_jit(q, sigma, steps, delta, orders_key: tuple, iterations: int = 48):
    """:func:`dpsgd_epsilon_refined_kernel` as the grid's two programs (:func:`dpsgd_epsilon_jit`) and the
    search's own: the curve is not compiled a second time."""
    eps_grid, best = dpsgd_epsilon_jit(q, sigma, steps, delta, orders_key)
    return _refine_jit(q, sigma, steps, delta, eps_grid, best, _orders_array(tuple(orders_key)), iterations)


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
    groups = [needed[idx] for idx in _integer_groups(needed)]
    # ε(ℓ) = inf makes the bound inf at every α ≥ ℓ; the sum itself gets finite gains (−inf binomials of
    # the padding slots would meet +inf gains as NaN)
    log_gain = jnp.where(jnp.isinf(log_gain) & (log_gain > 0), 0.0, log_gain)
    column = np.concatenate(groups)  # the integer order of each column of k_thm
    pick = np.zeros((n - 1, column.size))
    pick[column.astype(int) - 2, np.arange(column.size)] = 1.0
    infinite = (jnp.cumsum(jnp.isinf(base_int).astype(q.dtype), axis=-1) @ pick) > 0
    k_thm = jnp.concatenate([jax.nn.softplus(_log_am1_binomial(log_q, log_1mq, log_gain, a)) for a in groups], -1)
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


@functools.partial(jax.jit, static_argnames=("orders_key",))
def subsampled_kernel(q, base_int, base_at, orders_key: tuple):
    """Flat (N,) configurations, in blocks of 128 on CPU (the binomial tables of large orders are big)."""
    n = q.shape[0]
    if jax.default_backend() != "cpu" or n <= _CPU_BLOCK:
        return _subsampled_block(q, base_int, base_at, orders_key)
    pad = (-n) % _CPU_BLOCK

    def blocks(x, fill):
        x = jnp.concatenate([x, jnp.full((pad,) + x.shape[1:], fill, x.dtype)])
        return x.reshape((-1, _CPU_BLOCK) + x.shape[1:])

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
