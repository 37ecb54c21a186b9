"""Randomized response: binary and k-ary (generalised RR), with personalized budgets (MATH §3.1, §3.3, §4.3).

k-RR with budget ε reports the true value x ∈ {0, …, k−1} with probability p = e^ε/(e^ε + k − 1) and
each other value with probability q = 1/(e^ε + k − 1) (Kairouz, Oh, Viswanath 2014/2016; Wang et al.
2017, "GRR"); k = 2 is Warner's binary randomized response (keep with probability e^ε/(1 + e^ε)).

The interface follows the other mechanism modules, with the true value(s) ``x`` in place of a shape
(RR is not additive noise) and ``k`` a Python int ≥ 2:

* ``sample(key, x, epsilon, k=2)`` — int32 reports of ``x``'s shape; ``epsilon`` may be one budget per
  entry (personalized RR, GSPA Alg. 2);
* ``log_prob(y, x, epsilon, k)`` / ``pmf(...)`` — Pr[report y | input x];
* ``mean(x, epsilon, k)`` / ``variance(x, epsilon, k)`` — moments of the one-hot report 1{Y = v},
  v = 0…k−1, on a new last axis (for k = 2, ``[..., 1]`` is E[Y] and Var[Y]);
* privacy: ``epsilon(keep, k)`` — the exact pure ε of RR with keep probability ``keep``;
  ``rdp(epsilon, orders, k)`` — the exact Rényi divergence between the output laws of two inputs;
* calibration: ``keep_probability(epsilon, k)``;
* shuffle-model frequency estimation: ``estimate_frequencies(counts, epsilon)`` and the estimator's
  exact moments ``frequency_moments(x, epsilon, k)``.

Sampling compares a uniform of the chosen ``dtype`` with the flip probability rounded up, so rounding can
only make flips more likely (a smaller keep probability, hence a smaller ε; :func:`sample` states the
resolution floor).
"""

from __future__ import annotations

import contextlib
import functools
import math
from fractions import Fraction

import jax
import jax.numpy as jnp
import numpy as np

from .._numerics import as_output, check_array, check_broadcastable, check_orders, float64, is_concrete, kernel_jit
from .._numerics import log1mexp, log_expm1
from ._common import check_float_dtype

__all__ = [
    "keep_probability",
    "epsilon",
    "sample",
    "log_prob",
    "pmf",
    "mean",
    "variance",
    "rdp",
    "estimate_frequencies",
    "frequency_moments",
    "log_report_probabilities",
]


# ----------------------------------------------------------------------------------------------------
# Validation and the two log-probabilities
# ----------------------------------------------------------------------------------------------------


def _check_k(k) -> int:
    if np.ndim(k) != 0:
        raise ValueError(f"k must be a single integer ≥ 2 (the number of values), got shape {np.shape(k)}")
    check_array("k", k, 2.0, np.inf, integer=True)
    return int(k)  # from the input: inside a caller's jit the checked copy is a tracer


def _check_epsilon(epsilon):
    return check_array("epsilon", epsilon, 0.0, np.inf, lo_open=True)


def _check_values(name: str, x, k: int):
    return check_array(name, x, 0.0, k - 1.0, integer=True)


def _check_fits(epsilon, shape, what: str):
    try:
        fits = np.broadcast_shapes(np.shape(epsilon), shape) == tuple(shape)
    except ValueError:
        fits = False
    if not fits:
        raise ValueError(f"epsilon of shape {np.shape(epsilon)} does not broadcast to the shape of {what} {tuple(shape)}")


def _log_q(eps, k: int):
    """log q = −log(e^ε + k − 1), without overflow for large ε."""
    return -(eps + jnp.log1p((k - 1) * jnp.exp(-eps)))


def _log_p(eps, k: int):
    """log p = log e^ε/(e^ε + k − 1) = −log1p((k − 1) e^{−ε})."""
    return -jnp.log1p((k - 1) * jnp.exp(-eps))


def log_report_probabilities(epsilon, k: int):
    """(log q, log p) of k-RR: the log-probability of each other value, q = 1/(e^ε + k − 1), and of the
    true value, p = e^ε q, without overflow for large ε: the accountants' kernel. ε > 0 of any shape, k an
    integer ≥ 2; float64 out.

    Example:
      >>> import numpy as np
      >>> from jaxpriv.mechanisms import randomized_response as rr
      >>> log_q, log_p = rr.log_report_probabilities(np.log(3.0), 2)
      >>> round(float(np.exp(log_q)), 6), round(float(np.exp(log_p)), 6)
      (0.25, 0.75)
    """
    with float64():
        k, epsilon = _check_k(k), _check_epsilon(epsilon)
        return as_output((_log_q(epsilon, k), _log_p(epsilon, k)))


# ----------------------------------------------------------------------------------------------------
# Calibration and the pure-ε guarantee
# ----------------------------------------------------------------------------------------------------


def keep_probability(epsilon, k=2):
    """Probability that k-RR reports the true value: p = e^ε/(e^ε + k − 1) (float64).

    Source: Kairouz, Oh, Viswanath 2016 ("Extremal mechanisms for local DP"), k-RR; GSPA Alg. 2 and
    MATH §3.1 for k = 2 (q_t = e^ε/(1 + e^ε)). The calibration helper of RR: ε ↦ its parameter.

    Args:
      epsilon: ε > 0 (any shape).
      k: number of values, an integer ≥ 2.

    Returns:
      float64 array of p.

    Example:
      >>> from jaxpriv.mechanisms import randomized_response as rr
      >>> round(float(rr.keep_probability(1.0)), 12), round(float(rr.keep_probability(1.0, k=4)), 12)
      (0.73105857863, 0.475366886419)
    """
    with float64():
        eps = _check_epsilon(epsilon)
        return as_output(jnp.exp(_log_p(eps, _check_k(k))))


def epsilon(keep, k=2):
    """Exact pure ε of k-RR with keep probability p ≥ 1/k: ε = log( p(k−1)/(1−p) ).

    The likelihood ratio Pr[y | x]/Pr[y | x'] takes the values p/q, 1 and q/p, so the tight pure ε is
    log(p/q) with q = (1−p)/(k−1) (Kairouz, Oh, Viswanath 2016; MATH §4.3). Inverse of
    :func:`keep_probability`. p = 1/k gives 0.

    Args:
      keep: keep probability p ∈ [1/k, 1).
      k: integer ≥ 2.

    Returns:
      float64 array of ε.

    Example:
      >>> from jaxpriv.mechanisms import randomized_response as rr
      >>> round(float(rr.epsilon(rr.keep_probability(0.7, k=5), k=5)), 12)
      0.7
    """
    with float64():
        k = _check_k(k)
        p = check_array("keep", keep, 1.0 / k, 1.0, hi_open=True)
        return as_output(jnp.maximum(jnp.log(p) + math.log(k - 1) - jnp.log1p(-p), 0.0))


# ----------------------------------------------------------------------------------------------------
# Sampling, pmf and moments
# ----------------------------------------------------------------------------------------------------


def _flip_threshold(eps, k: int, dtype):
    """The coin's threshold t: flip when u < t, u a uniform of ``dtype`` on the grid {j 2^-m}
    (m = mantissa bits), so the realised flip probability is r = ⌈t 2^m⌉ 2^-m.

    t is the exact flip probability 1 − p = a/(1 + a), a = (k − 1)e^{−ε}, rounded up by 8 eps (more than
    its few-ulp evaluation error), at least the smallest normal (r ≥ 2^-m: never "always keep"), and at
    most c = ⌊(k−1)/k · 2^m⌋ 2^-m, the largest grid point ≤ (k−1)/k. Hence r ∈ [1 − p, (k−1)/k] — the
    sampled mechanism is ε'-DP with ε' ≤ ε — unless 1 − p > c, which happens only for
    ε < ε_min = log((1 − c)(k − 1)/c) (0 when (k−1)/k is on the grid, e.g. k = 2, 4; ≈ k²/(k−1)·2^-m
    otherwise, 5.4e-7 for k = 3 in float32), where r = c and ε' = ε_min."""
    finfo = jnp.finfo(dtype)
    cap = math.floor((k - 1) / k * 2**finfo.nmant) / 2**finfo.nmant  # exact in float64 and in dtype
    if Fraction(cap) > Fraction(k - 1, k):  # float64 rounding of (k − 1)/k pushed the floor up
        cap -= 2.0**-finfo.nmant
    a = (k - 1) * jnp.exp(-eps.astype(dtype))
    t = jnp.maximum(a / (1 + a) * (1 + 8 * finfo.eps), finfo.tiny)
    return jnp.minimum(t, jnp.asarray(cap, dtype))


@functools.partial(kernel_jit, static_argnames=("k", "dtype"))
def _sample_kernel(key, x, eps, k: int, dtype):
    flip_key, other_key = jax.random.split(key)
    flip = jax.random.uniform(flip_key, x.shape, dtype) < _flip_threshold(eps, k, dtype)
    if k == 2:
        other = 1 - x
    else:  # uniformly one of the k − 1 other values
        other = (x + 1 + jax.random.randint(other_key, x.shape, 0, k - 1, jnp.int32)) % k
    return jnp.where(flip, other, x)


def sample(key, x, epsilon, k=2, dtype=jnp.float32):
    """Randomized-response reports of the true values ``x``.

    Each entry is kept with probability e^ε/(e^ε + k − 1), otherwise replaced by one of the k − 1 other
    values uniformly. Source: Warner 1965 (k = 2); Kairouz, Oh, Viswanath 2016 (k-RR); GSPA Alg. 2
    lines 2–6 (MATH §3.3). Works inside ``jit``.

    Floating point: the coin is a uniform of ``dtype`` (float32: resolution 2^-23; float64: 2^-52)
    compared with the flip probability rounded *up*, so the sampled mechanism is ε'-DP with ε' ≤ ε
    (for k = 2 always; for other k once ε exceeds a resolution floor ≈ k²/(k−1)·2^-m, below which
    ε' is that floor; see ``_flip_threshold``). It is more private than intended (less accurate) once
    the flip probability nears the resolution (ε ≳ 15 in float32, ≳ 35 in float64). A 64-bit
    ``dtype`` inside a caller's ``jit`` needs ``jax_enable_x64`` on there.

    Args:
      key: a JAX PRNG key.
      x: true values, integers in {0, …, k−1} (any shape).
      epsilon: ε > 0, a scalar or one budget per entry (broadcasting to ``x``'s shape).
      k: number of values, an integer ≥ 2.
      dtype: dtype of the uniform coin, float32 (default) or float64.

    Returns:
      int32 array of ``x``'s shape.

    Example:
      >>> import jax, numpy as np
      >>> from jaxpriv.mechanisms import randomized_response as rr
      >>> y = rr.sample(jax.random.key(0), np.ones(100_000, int), 1.0)
      >>> y.dtype, round(float(y.mean()), 2)  # keep probability 0.731
      (dtype('int32'), 0.73)
    """
    k = _check_k(k)
    dtype = check_float_dtype(dtype)
    if dtype not in (jnp.dtype(jnp.float32), jnp.dtype(jnp.float64)):
        raise ValueError(f"dtype must be float32 or float64 (the coin's resolution), got {dtype}")
    if is_concrete(x):
        _check_values("x", x, k)
    if is_concrete(epsilon):
        _check_epsilon(epsilon)
    _check_fits(epsilon, np.shape(x), "x")
    with float64() if dtype.itemsize == 8 else contextlib.nullcontext():
        x = jnp.asarray(x).astype(jnp.int32)
        eps = jnp.broadcast_to(jnp.asarray(epsilon, dtype), x.shape)
        return _sample_kernel(key, x, eps, k, dtype)


def log_prob(y, x, epsilon, k=2):
    """log Pr[report y | input x] of k-RR: log p if y = x, log q otherwise (float64).

    p = e^ε/(e^ε + k − 1), q = 1/(e^ε + k − 1), both in log space (no overflow for large ε).
    Source: Kairouz, Oh, Viswanath 2016; MATH §4.3.

    Args:
      y: reports, integers in {0, …, k−1}.
      x: inputs, integers in {0, …, k−1}.
      epsilon: ε > 0. ``y``, ``x`` and ``epsilon`` broadcast together.
      k: integer ≥ 2.

    Returns:
      float64 array of the broadcast shape.

    Example:
      >>> from jaxpriv.mechanisms import randomized_response as rr
      >>> round(float(rr.log_prob(1, 1, 2.0) - rr.log_prob(0, 1, 2.0)), 12)  # log(p/q) = ε
      2.0
    """
    with float64():
        k = _check_k(k)
        y, x = _check_values("y", y, k), _check_values("x", x, k)
        eps = _check_epsilon(epsilon)
        check_broadcastable(y=y, x=x, epsilon=eps)
        return as_output(jnp.where(y == x, _log_p(eps, k), _log_q(eps, k)))


def pmf(y, x, epsilon, k=2):
    """Pr[report y | input x] of k-RR: p if y = x, q otherwise (float64). See :func:`log_prob`.

    Example:
      >>> from jaxpriv.mechanisms import randomized_response as rr
      >>> [round(float(v), 6) for v in rr.pmf([0, 1, 2], 0, 1.0, k=3)]
      [0.576117, 0.211942, 0.211942]
    """
    with float64():
        return as_output(jnp.exp(jnp.asarray(log_prob(y, x, epsilon, k))))


def _indicator_means(x, eps, k: int):
    """E[1{Y = v}] on a new last axis: p for v = x, q otherwise."""
    hit = x[..., None] == jnp.arange(k)
    return jnp.where(hit, jnp.exp(_log_p(eps, k))[..., None], jnp.exp(_log_q(eps, k))[..., None])


def mean(x, epsilon, k=2):
    """Mean of the one-hot report (1{Y = v})_{v<k}: p at v = x, q elsewhere (float64, shape S + (k,)).

    For k = 2, ``[..., 1]`` is E[Y] = q + x(p − q). Source: the pmf (MATH §4.3).

    Args:
      x: inputs in {0, …, k−1} (shape broadcasting with ``epsilon`` to ``S``).
      epsilon: ε > 0.
      k: integer ≥ 2.

    Returns:
      float64 array of shape ``S + (k,)``.

    Example:
      >>> from jaxpriv.mechanisms import randomized_response as rr
      >>> [round(float(v), 6) for v in rr.mean(1, 1.0)]
      [0.268941, 0.731059]
    """
    with float64():
        k = _check_k(k)
        x, eps = _check_values("x", x, k), _check_epsilon(epsilon)
        shape = check_broadcastable(x=x, epsilon=eps)
        return as_output(_indicator_means(jnp.broadcast_to(x, shape), jnp.broadcast_to(eps, shape), k))


def variance(x, epsilon, k=2):
    """Variance of the one-hot report: m(1 − m) with m = :func:`mean` (float64, shape S + (k,)).

    Example:
      >>> from jaxpriv.mechanisms import randomized_response as rr
      >>> [round(float(v), 6) for v in rr.variance(1, 1.0)]
      [0.196612, 0.196612]
    """
    with float64():
        m = jnp.asarray(mean(x, epsilon, k))
        return as_output(m * (1.0 - m))


# ----------------------------------------------------------------------------------------------------
# RDP curve
# ----------------------------------------------------------------------------------------------------


@kernel_jit
def _rdp_kernel(eps, orders, k):
    # D_α(P‖Q) for the output laws of two inputs x ≠ x':
    #   Σ_y P^α Q^{1−α} = q(e^{αε} + e^{−(α−1)ε} + k − 2), q = 1/(e^ε + k − 1),
    # and  [that sum] − 1 = m = (1 − e^{−(α−1)ε})(e^{αε} − 1)/(e^ε + k − 1)  (a product: no cancellation),
    # so ρ = log1p(m)/(α − 1) with log m assembled in log space (no overflow at large αε).
    log_m = log1mexp(-(orders - 1.0) * eps) + log_expm1(orders * eps) + _log_q(eps, k)
    return jax.nn.softplus(log_m) / (orders - 1.0)


def rdp(epsilon, orders, k=2):
    """Exact RDP curve of k-RR: the Rényi divergence between its output laws on two different inputs.

    ρ(α) = log( (e^{αε} + e^{−(α−1)ε} + k − 2) / (e^ε + k − 1) ) / (α − 1), for α > 1.

    Derivation: with P = law of the report on x and Q on x' ≠ x, P(x) = Q(x') = p = e^ε q,
    P(x') = Q(x) = q and P = Q = q on the other k − 2 values; Σ_y P(y)^α Q(y)^{1−α} =
    q(e^{αε} + e^{(1−α)ε} + k − 2). The pair is symmetric, so D_α(P‖Q) = D_α(Q‖P), and every pair of
    distinct inputs gives the same law pair: this is the tight RDP of the mechanism (Rényi 1961's
    definition; Mironov 2017, Def. 3; MATH §4.3). ρ(α) → ε as α → ∞. Computed as log1p of the factored
    excess (see the kernel), accurate near α = 1 and free of overflow.

    Args:
      epsilon: ε > 0 (shape ``S``).
      orders: 1-D array of ``K`` Rényi orders > 1.
      k: integer ≥ 2.

    Returns:
      float64 array of shape ``S + (K,)``.

    Example:
      >>> from jaxpriv.mechanisms import randomized_response as rr
      >>> round(float(rr.rdp(1.0, [2.0])[0]), 12)  # log((e² + e⁻¹)/(e + 1))
      0.735325664056
    """
    with float64():
        k = _check_k(k)
        eps = _check_epsilon(epsilon)
        orders = jnp.asarray(check_orders(orders))
        return as_output(_rdp_kernel(eps[..., None], orders, k))


# ----------------------------------------------------------------------------------------------------
# Frequency estimation from shuffled reports
# ----------------------------------------------------------------------------------------------------


def _check_population(epsilon):
    """Budgets: a scalar (every user) or one per user (1-D)."""
    eps = _check_epsilon(epsilon)
    if eps.ndim > 1:
        raise ValueError(f"epsilon must be a scalar or a 1-D array of per-user budgets, got shape {eps.shape}")
    return eps


@functools.partial(kernel_jit, static_argnames=("k",))
def _estimate_kernel(counts, n, sum_q, k: int):
    # Σ_i (p_i − q_i) = Σ_i (1 − k q_i) = n − k Σ q_i.
    return (counts - sum_q[..., None]) / (n - k * sum_q)[..., None]


def estimate_frequencies(counts, epsilon):
    """Frequency estimates from the value counts of shuffled k-RR reports with personalized budgets.

    f̂_v = (C_v − Σ_i q_i) / Σ_i (p_i − q_i) = (C_v − Σ_i q_i) / (n − k Σ_i q_i), q_i = 1/(e^{ε_i} + k − 1).

    For k = 2 and v = 1 this is GSPA's Alg. 2 estimator z = (A − B)/(n − 2B), B = Σ_i 1/(1 + e^{ε_i})
    (seed 003; MATH §3.3). It needs only the multiset of budgets, not which report came from which user,
    so it works on shuffled reports. Derivation: E[C_v] = Σ_i q_i + Σ_i w_i 1{x_i = v} with
    w_i = p_i − q_i, hence E[f̂_v] = Σ_i w_i 1{x_i = v} / Σ_i w_i — the w-weighted frequency of v.
    It is unbiased for the plain frequency (1/n) Σ_i 1{x_i = v} when all budgets are equal, or in
    expectation over a uniformly random assignment of the budgets to the users; with budgets correlated
    with the data it is biased (the paper's "E(z) = c" needs that caveat). Exact moments:
    :func:`frequency_moments`. The estimates sum to 1 and may fall outside [0, 1].

    Args:
      counts: report counts C_v ≥ 0 on the last axis (k = its length ≥ 2; leading axes are a batch,
        e.g. trials).
      epsilon: budgets ε_i > 0: a 1-D array with one entry per user (then every row of ``counts`` must
        sum to its length n), or a scalar shared by all users (n = each row's sum).

    Returns:
      float64 array of f̂ with the shape of ``counts``.

    Example:
      >>> from jaxpriv.mechanisms import randomized_response as rr
      >>> [round(float(f), 6) for f in rr.estimate_frequencies([300, 700], [1.0] * 1000)]
      [0.067209, 0.932791]
    """
    with float64():
        raw_counts = counts
        counts = check_array("counts", counts, 0.0, np.inf, integer=True)
        if counts.ndim == 0 or counts.shape[-1] < 2:
            raise ValueError(f"counts must hold k ≥ 2 value counts on its last axis, got shape {counts.shape}")
        k = counts.shape[-1]
        eps = _check_population(epsilon)
        totals = jnp.sum(counts, axis=-1)
        if eps.ndim == 1 and is_concrete(raw_counts):
            sums = np.sum(np.asarray(raw_counts, dtype=np.float64), axis=-1)
            if np.any(sums != eps.shape[0]):
                raise ValueError(
                    f"counts must sum to the number of budgets n = {eps.shape[0]} on its last axis, "
                    f"got sums {np.unique(sums)[:5].tolist()}"
                )
        if eps.ndim == 1:
            sum_q = jnp.broadcast_to(jnp.sum(jnp.exp(_log_q(eps, k))), totals.shape)
        else:
            sum_q = totals * jnp.exp(_log_q(eps, k))
        return as_output(_estimate_kernel(counts, totals, sum_q, k))


@functools.partial(kernel_jit, static_argnames=("k",))
def _moments_kernel(x, eps, k: int):
    q = jnp.exp(_log_q(eps, k))
    w = q * jnp.expm1(eps)  # p − q, without cancellation
    hit = x[:, None] == jnp.arange(k)
    total_w = jnp.sum(w)
    expectation = jnp.sum(jnp.where(hit, w[:, None], 0.0), axis=0) / total_w
    pi = q[:, None] + jnp.where(hit, w[:, None], 0.0)  # Pr[Y_i = v]
    variance = jnp.sum(pi * (1.0 - pi), axis=0) / total_w**2
    return expectation, variance


def frequency_moments(x, epsilon, k=2):
    """Exact mean and variance of :func:`estimate_frequencies` given the true values and the budgets.

    E[f̂_v] = Σ_i w_i 1{x_i = v} / W and Var[f̂_v] = Σ_i π_iv(1 − π_iv) / W², with w_i = p_i − q_i,
    W = Σ_i w_i and π_iv = Pr[Y_i = v] = q_i + w_i 1{x_i = v} (the reports are independent and the
    denominator n − kΣq_i = W is not random; shuffling does not change counts). For k = 2 the variance
    of z is Σ_i e^{ε_i}/(1 + e^{ε_i})² / (n − 2B)². Derivation in :func:`estimate_frequencies`;
    source: GSPA Alg. 2 (seed 003), MATH §3.3.

    Args:
      x: true values, a 1-D array of integers in {0, …, k−1} (n ≥ 1 users).
      epsilon: budgets ε_i > 0, a scalar or one per user.
      k: integer ≥ 2.

    Returns:
      ``(expectation, variance)``, float64 arrays of shape ``(k,)``.

    Example:
      >>> from jaxpriv.mechanisms import randomized_response as rr
      >>> e, v = rr.frequency_moments([0, 1, 1, 1], [0.5, 0.5, 2.0, 2.0])
      >>> [round(float(t), 6) for t in e]  # not (0.25, 0.75): budgets correlate with the data
      [0.121667, 0.878333]
    """
    with float64():
        k = _check_k(k)
        x = _check_values("x", x, k)
        if x.ndim != 1:
            raise ValueError(f"x must be a 1-D array of the users' values, got shape {x.shape}")
        eps = _check_population(epsilon)
        _check_fits(eps, x.shape, "x")
        return as_output(_moments_kernel(x.astype(jnp.int32), jnp.broadcast_to(eps, x.shape), k))
