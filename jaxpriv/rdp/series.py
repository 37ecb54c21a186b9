"""The signed binomial series of the Poisson-subsampled Gaussian's A_α − 1 (MATH §1.3), shared by the grid
program (:mod:`.program`) and the refinement between orders (:mod:`.dpsgd`).

Integer α: the finite binomial sum (Mironov, Talwar, Zhang 2019, §3.3). Fractional α: two signed binomial
series of the same paper, the alternating tail of each summed by the Cohen-Villegas-Zagier acceleration (its
terms form a moment sequence, so the acceleration has a proven error bound, added on the safe side).
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

from .._numerics import EPS64, log_normal_cdf, log1p

__all__ = ["CVZ_TERMS", "CVZ_WEIGHTS", "LOG_CVZ_ERROR", "LOG_ROUNDING", "log_abs_binom", "blocked_cumsum",
           "binom_sign", "one_minus_q_pow_minus_linear", "log_binomial_row", "log_am1_binomial",
           "integer_groups", "CPU_BLOCK", "REFINE_MAX_ORDER", "log_am1_at", "subsampled_gaussian_at"]


# Cohen, Villegas, Zagier (2000), "Convergence acceleration of alternating series", Algorithm 1:
# Σ_{k≥0} (−1)^k a_k ≈ Σ_{k<n} w_k a_k, with |error| ≤ 2 a_0 / (3+√8)^n when a_k is a moment sequence.
# Both tails below are: |C(α, i)| = c·B(i−α, α+1) and E[X^i 1{X ≤ 1}] are moment sequences in i.
CVZ_TERMS = 20


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


CVZ_WEIGHTS = _cvz_weights(CVZ_TERMS)
LOG_CVZ_ERROR = math.log(2.0) - CVZ_TERMS * math.log(3.0 + math.sqrt(8.0))
LOG_ROUNDING = math.log(3 * np.finfo(np.float64).eps)


def log_abs_binom(alpha, n: int, magnitude: bool = False):
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
    return xp.concatenate([zeros, xp.cumsum(factors, axis=-1) if xp is np else blocked_cumsum(factors)], axis=-1)


def blocked_cumsum(x, block: int = 16):
    """Cumulative sum along the last axis as two small matrix products (within blocks of 16, then across
    blocks): XLA compiles jnp.cumsum into a tree of some twenty reduce-window kernels per call."""
    n = x.shape[-1]
    pad = (-n) % block
    x = jnp.concatenate([x, jnp.zeros(x.shape[:-1] + (pad,), x.dtype)], axis=-1) if pad else x
    x = x.reshape(x.shape[:-1] + (-1, block))
    within = x @ jnp.asarray(np.triu(np.ones((block, block))))
    blocks = within[..., -1] @ jnp.asarray(np.triu(np.ones((x.shape[-2],) * 2), 1))  # sums of the blocks before
    return (within + blocks[..., None]).reshape(x.shape[:-2] + (-1,))[..., :n]


def binom_sign(alpha, k):
    """Sign of C(α, k): positive up to k = ⌈α⌉, then alternating (−1)^{k−⌈α⌉} (zero at integer α)."""
    ceil_a = jnp.ceil(alpha)
    return jnp.where(k <= ceil_a, 1.0, jnp.where((k - ceil_a) % 2 == 0, 1.0, -1.0))


def one_minus_q_pow_minus_linear(q, alpha):
    """(1−q)^α − 1 + αq ≥ 0, accurate for small αq (Taylor in q) and large αq (direct)."""
    small = alpha * q < 0.5
    log_qs = jnp.log(jnp.where(small, q, 0.5))
    k = jnp.arange(2, 42, dtype=jnp.float64)
    # Σ_{k≥2} C(α,k)(−q)^k; |C(α,k) q^k| ≤ (αq)^k/k!, so 40 terms reach 1e-60 relative when αq < 0.5.
    log_abs_c = log_abs_binom(jnp.asarray(alpha), 42)[..., 2:]
    sign = binom_sign(jnp.asarray(alpha)[..., None], k) * jnp.where(k % 2 == 0, 1.0, -1.0)
    series = jnp.sum(sign * jnp.exp(log_abs_c + k * log_qs[..., None]), axis=-1)
    direct = jnp.expm1(alpha * log1p(-q)) + alpha * q
    return jnp.where(small, series, direct)


@functools.lru_cache(maxsize=None)
def log_binomial_row(alpha: int) -> np.ndarray:
    """log C(α, i) for i = 0..α, each within ~2 ulps: the binomials are exact Python integers (the
    lgamma difference loses up to α·log α ulps to cancellation, 7e-13 relative at α = 768)."""
    row, c = [0.0], 1
    for i in range(alpha):
        c = c * (alpha - i) // (i + 1)
        row.append(math.log(c))
    return np.asarray(row)


def log_am1_binomial(log_q, log_1mq, log_gain, alphas: np.ndarray):
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
        log_binom[row, 2 : alpha + 1] = log_binomial_row(int(alpha))[2:]
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


def integer_groups(orders: np.ndarray):
    """Indices of the integer orders, grouped by power of two so the padded binomial sums waste little."""
    idx = np.nonzero(orders == np.floor(orders))[0]
    buckets = np.ceil(np.log2(orders[idx])).astype(int)
    return [idx[buckets == b] for b in np.unique(buckets)]


# On CPU the (configs × orders × terms) intermediates of a large batch outgrow the caches: walking the
# batch in blocks of 128 configurations is ~1.4x faster. Accelerators get the whole batch at once.
CPU_BLOCK = 128


#: Continuous refinement searches orders up to this value (the series length is fixed at trace time).
REFINE_MAX_ORDER = 256.0

def log_am1_at(log_q, log_1mq, sigma, alpha, terms: int):
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
    tail = (k >= 0.0) & (k < CVZ_TERMS)
    k_index = jnp.clip(k, 0, CVZ_TERMS - 1).astype(jnp.int32)
    w = CVZ_WEIGHTS
    # Tail = −Σ_k (−1)^k a_k (the first tail coefficient is negative); CVZ: Σ(−1)^k a_k ≈ Σ w_k a_k.
    sign_series = jnp.where(tail, jnp.asarray(-np.sign(w))[k_index], 1.0)
    log_coef = log_abs_binom(alpha, terms) + jnp.where(tail, jnp.asarray(np.log(np.abs(w)))[k_index], 0.0)
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
        (jnp.log(one_minus_q_pow_minus_linear(q, alpha)) + phi[:, -4], 1.0),
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
    slack = jnp.logaddexp(LOG_ROUNDING + top + jnp.log(pos + neg), LOG_CVZ_ERROR + first_tail)
    # … and each term's own rounding: its log is a sum of five pieces (m log q, (m²−m)/2σ², log Φ,
    # log|C(α, i)|, (α−m) log(1−q)), each within an ulp, and four additions (half an ulp of the partial sums
    # each), so the term is off by at most 4 ulps of their magnitude (relative; its exp's own rounding is in
    # the 3 ulps above).
    coef_size = log_abs_binom(alpha, terms, magnitude=True)

    def term_size(shift, exponent, rest):
        linear, quad = shift * lq, (shift * shift - shift) / two_var
        return jnp.abs(linear) + jnp.abs(quad) + jnp.abs(exponent - linear - quad) + jnp.abs(rest) + coef_size

    sizes = (jnp.where(mask0, scaled0 * term_size(i, lower, rest0), 0.0)
             + jnp.where(mask1, scaled1 * term_size(m, upper, rest1), 0.0))
    finite = [(jnp.isfinite(v), jnp.where(jnp.isfinite(v), v, 0.0)) for v, _ in corr]  # log 0 = −inf: no term
    term_error = jnp.sum(sizes, axis=-1) + sum(jnp.where(ok, jnp.exp(v - top) * jnp.abs(v), 0.0) for ok, v in finite)
    slack = jnp.logaddexp(slack, math.log(4.0 * EPS64) + top + jnp.log(term_error))
    return jnp.where(diff > 0, jnp.logaddexp(top + jnp.log(jnp.abs(diff)), slack), slack)


def subsampled_gaussian_at(q, sigma, alpha):
    """ρ(α) of the Poisson-subsampled Gaussian with a per-config, traced order α ∈ (1, REFINE_MAX_ORDER]."""
    inside = (q > 0) & (q < 1)
    q_in = jnp.where(inside, q, 0.5)
    log_am1 = log_am1_at(jnp.log(q_in), log1p(-q_in), sigma, alpha, int(REFINE_MAX_ORDER) + 2 + CVZ_TERMS)
    rho = jax.nn.softplus(log_am1) / (alpha - 1.0)
    rho = jnp.where(q >= 1.0, alpha / (2.0 * sigma**2), rho)
    return jnp.where(q <= 0.0, 0.0, rho)
