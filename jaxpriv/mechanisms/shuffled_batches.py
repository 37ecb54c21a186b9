"""Shuffled fixed-size batches: the loss laws of an adversarial pair, a *lower* bound only (MATH §11.7).

One epoch of DP-SGD with shuffling cuts a random permutation of the n records into T = ⌊n/b⌋ batches of b
(the n − bT left over sit the epoch out), and each step adds N(0, σ²) to its batch's clipped sum.
Chua, Ghazi, Kamath, Kumar, Manurangsi, Sinha & Zhang (ICML 2024, arXiv 2403.17673; multi-epoch:
NeurIPS 2024, arXiv 2411.04205) exhibit a pair of neighbouring datasets for which the epoch's outputs,
once the known offsets are subtracted, are the mixtures of Gaussians on R^T

    P = (1/T) Σ_t N(2e_t, σ²I)  (the example x present),   Q = (1/T) Σ_t N(e_t, σ²I)  (x replaced by ⊥),

(γ = bT/n of the time; otherwise x and ⊥ are left out alike and both outputs are N(0, σ²I)). Any
post-processing of the outputs gives a pair that the true pair dominates, so its hockey-stick divergence is
a **lower** bound on the mechanism's δ(ε). The statistic is the papers': M = max_t x_t, whose CDFs are
closed forms,

    F_P(c) = γ Φ((c − 2)/σ) Φ(c/σ)^{T−1} + (1 − γ) Φ(c/σ)^T,   F_Q likewise with c − 1;

M is cut into fine slices (another post-processing), and the slices are merged by loss into at most ATOMS
atoms (merging outcomes is a post-processing too). Every mass is computed in log space with a bound on its
relative rounding; each atom's P-mass is rounded down and its loss down by that bound, slices whose bound
is not small are dropped, so the computed pair stays dominated by the true one in floating point.

Nothing here bounds the epoch from above: this module gives no upper law.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from .allocation import merge_down

__all__ = ["epoch_laws"]

_U = float(np.finfo(np.float64).eps)
#: the slices of M stop where at most this much of either law lies beyond (both ends are slices too)
_TAIL = 1e-30
#: slice width in units of σ: the loss of M moves by at most ~1/σ per unit of M/σ, so ~_WIDTH per slice
_WIDTH = 1e-3
_MIN_SLICES, _MAX_SLICES = 1 << 12, 1 << 18
#: a slice whose masses' relative rounding bound exceeds this is dropped (its loss is not known)
_DROP = 1e-3


def _log_cdf(c, shift, steps: int, used: float):
    """log F and log S = log(1 − F) of F(c) = Pr[max_t x_t/σ ≤ c], one coordinate shifted by ``shift`` (in
    σ) with probability ``used`` and none otherwise, each with a bound on its absolute rounding. Both are
    computed from the same logarithms A = log Pr[max ≤ c | component], each to a few ulps relative (log_ndtr
    is relative-accurate in both tails), so that F is accurate where it is small and S where F is near 1."""
    from scipy import special  # here, not at import: see jaxpriv.mechanisms.allocation

    head, rest = special.log_ndtr(c - shift), special.log_ndtr(c)
    parts = [(used, head + (steps - 1) * rest, 8 * _U * (np.abs(head) + (steps - 1) * np.abs(rest)))]
    if used < 1.0:
        parts.append((1.0 - used, steps * rest, 8 * _U * steps * np.abs(rest)))
    with np.errstate(divide="ignore"):
        log_f = [math.log(w) + a for w, a, _ in parts]
        log_s = [math.log(w) + np.log(-np.expm1(a)) for w, a, _ in parts]
        # the relative rounding of 1 − e^A is |ΔA|/(e^{−A} − 1)
        err_s = [e / np.expm1(-a) + 2 * _U for _, a, e in parts]
    err_f = [e + 2 * _U * np.abs(lf) for (_, _, e), lf in zip(parts, log_f)]
    if len(parts) == 1:
        return log_f[0], err_f[0], log_s[0], err_s[0]
    lf, ls = np.logaddexp(*log_f), np.logaddexp(*log_s)
    return (lf, np.maximum(*err_f) + 4 * _U * (1 + np.abs(lf)), ls, np.maximum(*err_s) + 4 * _U * (1 + np.abs(ls)))


def _slices(log_f, err_f, log_s, err_s):
    """Log masses of the slices (−∞, c_0], (c_0, c_1], …, (c_K, ∞) from log F and log S at the cuts — each
    slice from F where F ≤ 1/2 at its top, from S beyond — and a bound on each one's relative rounding (inf
    where a slice is too thin to resolve)."""

    def difference(big, small, err_big, err_small):  # e^{big} − e^{small}, log and relative rounding
        d = big - small
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            log_mass = big + np.log(-np.expm1(-d))
            # e^{big}(1 − e^{−d}): a rounding r of d moves 1 − e^{−d} by r/(e^d − 1) relative
            rel = err_big + (err_big + err_small + 2 * _U * np.abs(d)) / np.expm1(d) + 4 * _U
        return log_mass, np.where(d > 0, rel, np.inf)

    from_f = difference(log_f[1:], log_f[:-1], err_f[1:], err_f[:-1])
    from_s = difference(log_s[:-1], log_s[1:], err_s[:-1], err_s[1:])
    use_f = log_f[1:] <= math.log(0.5)
    log_mass = np.concatenate([[log_f[0]], np.where(use_f, from_f[0], from_s[0]), [log_s[-1]]])
    rel = np.concatenate([[err_f[0] + 2 * _U], np.where(use_f, from_f[1], from_s[1]), [err_s[-1] + 2 * _U]])
    return log_mass, np.where(np.isfinite(log_mass), rel, np.inf)


def _dominated(log_num, log_den, rel):
    """Atoms (loss, mass) of the pair whose slice masses are e^{log_num} (the atoms' measure) and
    e^{log_den}: masses rounded down and losses down by the rounding bound ``rel``, unresolved slices
    dropped, then merged into ATOMS atoms (a post-processing) and rounded down once more."""
    keep = (rel < _DROP) & np.isfinite(log_num) & np.isfinite(log_den)
    shrink = np.log1p(-rel[keep])
    losses = log_num[keep] - log_den[keep] + shrink - np.log1p(rel[keep])
    masses = np.exp(log_num[keep] + shrink)
    merged, mass = merge_down(losses, masses, 0.0)
    # the merge's sums (of at most n positive terms: n ulps relative) and logarithms, downward
    n = losses.size
    return merged - _U * (4 * n + 64 * (1.0 + np.abs(merged))), mass * (1.0 - 2 * _U * n)


@functools.lru_cache(maxsize=64)
def epoch_laws(sigma: float, steps: int, used: float = 1.0) -> dict:
    """The dominated privacy-loss laws of one shuffled epoch's adversarial pair (module docstring): T =
    ``steps`` batches, noise multiplier σ, the example in a batch with probability γ = ``used`` ∈ (0, 1].
    ``{"remove_lower": (losses, P-masses), "add_lower": (losses, Q-masses)}`` (the pairs (P, Q) and
    (Q, P)), each at most ATOMS atoms with total mass ≤ 1: any composition of them has a δ(ε) below the
    mechanism's. There is no upper law.

    Example:
      >>> import numpy as np
      >>> from jaxpriv.mechanisms import shuffled_batches
      >>> losses, masses = shuffled_batches.epoch_laws(1.0, 1)["remove_lower"]   # T = 1: N(2, 1) vs N(1, 1)
      >>> bool(abs(np.sum(masses * losses) - 0.5) < 1e-3)   # its mean loss, KL = 1/(2σ²), from below
      True
    """
    sigma, steps, used = float(sigma), int(steps), float(used)
    if not sigma > 0 or not math.isfinite(sigma):
        raise ValueError(f"sigma must be a finite number > 0, got {sigma}")
    if steps < 1:
        raise ValueError(f"steps must be an integer >= 1, got {steps}")
    if not 0.0 < used <= 1.0:
        raise ValueError(f"used must lie in (0.0, 1.0], got {used}")
    from scipy import special

    s = 1.0 / sigma
    # the cuts, in units of σ: from where both CDFs are below _TAIL to where both tails are
    low = special.ndtri(math.exp(math.log(_TAIL) / steps))
    high = max(2.0 * s - special.ndtri(_TAIL / 2), -special.ndtri(_TAIL / (2 * steps)))
    count = int(np.clip((high - low) / (_WIDTH * sigma), _MIN_SLICES, _MAX_SLICES))
    cuts = np.linspace(low, high, count)
    log_p, log_q = (_slices(*_log_cdf(cuts, shift, steps, used)) for shift in (2.0 * s, s))
    rel = np.maximum(log_p[1], log_q[1])
    return {"remove_lower": _dominated(log_p[0], log_q[0], rel), "add_lower": _dominated(log_q[0], log_p[0], rel)}
