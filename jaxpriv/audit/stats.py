"""Binomial confidence bounds for privacy audits (MATH §10.1): Clopper–Pearson intervals from a beta quantile
computed by bisection on the regularised incomplete beta function, and exact binomial tails.

Everything here runs on the host's concrete numbers (an audit reads counts after an experiment); the beta
quantile is one jitted float64 bisection (:func:`beta_quantile`, 64 halvings of [0, 1]: exact to the
float64 resolution of ``jax.scipy.special.betainc``), compiled once per padded length.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from .._checks import check_values
from .._numerics import float64, kernel_jit

__all__ = ["beta_quantile", "clopper_pearson", "binomial_pmf", "binomial_tail", "check_confidence"]

#: halvings of [0, 1] in the bisection: 2^-64 is below float64's resolution near 0 (betainc's own)
_HALVINGS = 64


def check_confidence(confidence) -> float:
    """The confidence level as a float in (0, 1), else ``ValueError`` naming it and its range."""
    if isinstance(confidence, (bool, np.bool_)):
        raise ValueError(f"confidence must lie in (0, 1), got {confidence!r}")
    return float(check_values("confidence", confidence, 0.0, 1.0, lo_open=True, hi_open=True).reshape(()))


@kernel_jit
def _bisect(p, a, b):
    """x with I_x(a, b) = p (elementwise, float64): bisection keeps I_lo ≤ p ≤ I_hi."""

    def body(_, bounds):
        lo, hi = bounds
        mid = 0.5 * (lo + hi)
        low = jax.scipy.special.betainc(a, b, mid) < p
        return jnp.where(low, mid, lo), jnp.where(low, hi, mid)

    lo, hi = jax.lax.fori_loop(0, _HALVINGS, body, (jnp.zeros_like(p), jnp.ones_like(p)))
    return 0.5 * (lo + hi)


def _ladder(n: int) -> int:
    """Pad lengths to powers of two (at least 8): one compiled bisection per rung, not per length."""
    return max(8, 1 << (max(n, 1) - 1).bit_length())


def beta_quantile(p, a, b) -> np.ndarray:
    """The p-quantile of Beta(a, b): the x ∈ [0, 1] with I_x(a, b) = p, I the regularised incomplete beta
    function (``jax.scipy.special.betainc``), by bisection in float64.

    Source: the definition of the quantile; I_x(a, b) is increasing in x, so bisection converges to it
    (MATH §10.1). Arrays broadcast.

    Args:
      p: probabilities in [0, 1] (array-like).
      a, b: shape parameters > 0 (array-like).

    Returns:
      float64 numpy array of the broadcast shape.

    Example:
      >>> from jaxpriv.audit.stats import beta_quantile
      >>> round(float(beta_quantile(0.5, 2.0, 2.0)), 12), round(float(beta_quantile(0.05, 1.0, 1.0)), 12)
      (0.5, 0.05)
    """
    p = check_values("p", p, 0.0, 1.0)
    a = check_values("a", a, 0.0, lo_open=True)
    b = check_values("b", b, 0.0, lo_open=True)
    try:
        shape = np.broadcast_shapes(p.shape, a.shape, b.shape)
    except ValueError:
        raise ValueError(f"p, a and b must broadcast together, got shapes {p.shape}, {a.shape}, {b.shape}") from None
    flat = [np.broadcast_to(v, shape).reshape(-1) for v in (p, a, b)]
    n = flat[0].size
    size = _ladder(n)
    padded = [np.concatenate([v, np.full(size - n, fill)]) for v, fill in zip(flat, (0.5, 1.0, 1.0))]
    with float64():
        x = np.asarray(_bisect(*(jnp.asarray(v, jnp.float64) for v in padded)))
    x = x[:n]
    x = np.where(flat[0] == 0.0, 0.0, np.where(flat[0] == 1.0, 1.0, x))
    return x.reshape(shape)


def _counts(successes, trials):
    trials = check_values("trials", trials, 1.0, integer=True)
    successes = check_values("successes", successes, 0.0, integer=True)
    try:
        shape = np.broadcast_shapes(successes.shape, trials.shape)
    except ValueError:
        raise ValueError(f"successes and trials must broadcast together, got shapes {successes.shape} and "
                         f"{trials.shape}") from None
    k, n = (np.broadcast_to(v, shape) for v in (successes, trials))
    if (k > n).any():
        first = int(np.flatnonzero((k > n).reshape(-1))[0])
        raise ValueError(f"successes must lie in [0, trials], got {k.reshape(-1)[first]:g} successes of "
                         f"{n.reshape(-1)[first]:g} trials")
    return k, n


def clopper_pearson(successes, trials, confidence: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """The Clopper–Pearson ("exact") two-sided interval for a binomial proportion.

    lower = B((1 − c)/2; k, n − k + 1) (0 when k = 0), upper = B((1 + c)/2; k + 1, n − k) (1 when k = n),
    B(·; a, b) the beta quantile (:func:`beta_quantile`). Source: Clopper & Pearson (1934), Biometrika 26(4);
    MATH §10.1. Each end is a one-sided bound at level (1 + c)/2, so P[p < lower] ≤ (1 − c)/2 and
    P[p > upper] ≤ (1 − c)/2, and the interval covers p with probability ≥ c (conservative: the binomial is
    discrete). An audit that needs a lower bound on one rate *and* an upper bound on another at joint level
    c takes one end of each interval (a union bound).

    Args:
      successes: counts k ∈ {0, …, n} (array-like, integers).
      trials: counts n ≥ 1 (array-like, integers), broadcast with ``successes``.
      confidence: c ∈ (0, 1).

    Returns:
      (lower, upper): float64 numpy arrays of the broadcast shape.

    Example:
      >>> from jaxpriv.audit.stats import clopper_pearson
      >>> lo, hi = clopper_pearson(5, 10, 0.95)
      >>> round(float(lo), 4), round(float(hi), 4)
      (0.1871, 0.8129)
    """
    c = check_confidence(confidence)
    k, n = _counts(successes, trials)
    tail = (1.0 - c) / 2.0
    # both ends in one bisection: [lower ends; upper ends]
    p = np.concatenate([np.full(k.size, tail), np.full(k.size, 1.0 - tail)])
    a = np.concatenate([np.maximum(k, 1.0).reshape(-1), (k + 1.0).reshape(-1)])
    b = np.concatenate([(n - k + 1.0).reshape(-1), np.maximum(n - k, 1.0).reshape(-1)])
    lower, upper = np.split(beta_quantile(p, a, b), 2)
    return np.where(k == 0, 0.0, lower.reshape(k.shape)), np.where(k == n, 1.0, upper.reshape(k.shape))


def binomial_pmf(trials: int, p: float) -> np.ndarray:
    """P[Binomial(n, p) = j] for j = 0, …, n, float64 (log-gamma form, exact to rounding)."""
    j = np.arange(trials + 1, dtype=np.float64)
    if p <= 0.0 or p >= 1.0:
        pmf = np.zeros(trials + 1)
        pmf[0 if p <= 0.0 else trials] = 1.0
        return pmf
    steps = np.log(trials - j[1:] + 1.0) - np.log(j[1:])  # log C(n, j) = Σ_{i ≤ j} log((n − i + 1)/i)
    log_choose = np.concatenate([[0.0], np.cumsum(steps)])
    return np.exp(log_choose + j * math.log(p) + (trials - j) * math.log1p(-p))


def binomial_tail(trials: int, p: float, at_least: int) -> float:
    """P[Binomial(n, p) ≥ k] (float64; 1 for k ≤ 0, 0 for k > n).

    Example:
      >>> from jaxpriv.audit.stats import binomial_tail
      >>> abs(binomial_tail(10, 0.5, 8) - (45 + 10 + 1) / 1024) < 1e-15
      True
    """
    if at_least <= 0:
        return 1.0
    if at_least > trials:
        return 0.0
    return float(min(1.0, np.sum(binomial_pmf(trials, p)[at_least:])))
