"""The classic many-run audit (MATH §10.4): independent outputs of a mechanism on two neighbouring inputs,
a threshold test, and Clopper–Pearson bounds on its error rates.

If a mechanism M is (ε, δ)-DP, every test "output ≥ t" has TPR ≤ e^ε·FPR + δ (TPR = P[M(D₁) ≥ t],
FPR = P[M(D₀) ≥ t]), so with a lower confidence bound on TPR and an upper one on FPR,
ε ≥ log((TPR_lb − δ)/FPR_ub) (Kairouz, Oh & Viswanath 2015, Theorem 2.1, the hypothesis-testing form of DP;
Jagielski, Ullman & Oprea 2020, "Auditing Differentially Private Machine Learning", NeurIPS, §3). The
reverse test "output < t" bounds the other direction, ε ≥ log((TNR_lb − δ)/FNR_ub).

Multiple testing: the best threshold is a choice made from data. Without ``thresholds`` the draws are split
(seeded): the first part picks the test (threshold and direction) with the best bound on that part, and only
the second part certifies it, at the full confidence. With ``thresholds`` given, every test (two per
threshold) is certified on all draws at level (1 − confidence)/K, K the number of tests (Bonferroni), and
the best is reported. Either way P[bound > true ε] ≤ 1 − confidence.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from .._checks import check_values
from .stats import check_confidence, clopper_pearson

__all__ = ["ThresholdBound", "threshold_epsilon", "SELECTION_THRESHOLDS"]

#: thresholds tried on the selection part: this many evenly spaced quantiles of its pooled draws, and 64 more
#: in each tail (log-spaced, down to the quantile with 20 draws beyond it)
SELECTION_THRESHOLDS = 255


@dataclasses.dataclass(frozen=True)
class ThresholdBound:
    """The certified bound of the best test: ``epsilon`` (≥ 0), its ``threshold`` t and ``direction``:
    "≥" is the test "output ≥ t means D₁" (``tpr_lower`` bounds P[M(D₁) ≥ t] from below, ``fpr_upper``
    P[M(D₀) ≥ t] from above), "<" the reverse privacy direction ("output < t means D₀": ``tpr_lower``
    bounds P[M(D₀) < t], ``fpr_upper`` P[M(D₁) < t]); the draws that certified it (``draws_in``,
    ``draws_out``) and the number of tests certified together (``tests``, Bonferroni)."""

    epsilon: float
    threshold: float
    direction: str
    tpr_lower: float
    fpr_upper: float
    draws_in: int
    draws_out: int
    delta: float
    confidence: float
    tests: int

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


def _check_draws(name: str, x) -> np.ndarray:
    a = np.asarray(x)
    if a.ndim != 1:
        raise ValueError(f"{name} must be a 1-D array of outputs, got shape {a.shape}")
    if a.size < 2:
        raise ValueError(f"{name} must hold at least 2 draws, got {a.size}")
    return check_values(name, a)


def _rates(scores_in: np.ndarray, scores_out: np.ndarray, thresholds: np.ndarray):
    """Counts of draws ≥ t for each threshold: (in, out)."""
    si, so = np.sort(scores_in), np.sort(scores_out)
    at_least_in = si.size - np.searchsorted(si, thresholds, side="left")
    at_least_out = so.size - np.searchsorted(so, thresholds, side="left")
    return at_least_in, at_least_out


def _bounds(k_in, k_out, n_in: int, n_out: int, delta: float, per_test_confidence: float):
    """ε bounds of the tests "≥ t" (counts k_in, k_out of draws ≥ t) and "< t", each at joint confidence
    ``per_test_confidence`` (the TPR's lower end and the FPR's upper end of two-sided intervals)."""
    counts = np.stack([k_in, k_out, n_out - k_out, n_in - k_in])  # ≥ t: D₁, D₀; < t: D₀, D₁
    trials = np.array([n_in, n_out, n_out, n_in], dtype=np.float64)[:, None]
    lower, upper = clopper_pearson(counts, trials, per_test_confidence)  # one bisection for all four
    tpr_lo, fpr_hi, tnr_lo, fnr_hi = lower[0], upper[1], lower[2], upper[3]
    with np.errstate(divide="ignore", invalid="ignore"):
        up = np.log(np.maximum(tpr_lo - delta, 0.0) / fpr_hi)
        down = np.log(np.maximum(tnr_lo - delta, 0.0) / fnr_hi)
    up, down = (np.maximum(np.nan_to_num(v, nan=0.0, neginf=0.0), 0.0) for v in (up, down))
    return (up, tpr_lo, fpr_hi), (down, tnr_lo, fnr_hi)


def threshold_epsilon(scores_in, scores_out, *, delta: float = 0.0, confidence: float = 0.95, thresholds=None,
                      select_fraction: float = 0.5, seed: int = 0) -> ThresholdBound:
    """A lower bound on ε from independent draws of a mechanism on two neighbouring inputs (MATH §10.4).

    ε_lb = max over tests of log((TPR_lb − δ)/FPR_ub), Clopper–Pearson bounds
    (:func:`jaxpriv.audit.stats.clopper_pearson`); see the module docstring for the tests, the sources and
    how the choice of the threshold is paid for.

    Args:
      scores_in: (n₁,) outputs (or scores) on the input *with* the record, n₁ ≥ 2, finite.
      scores_out: (n₀,) outputs on the neighbouring input *without* it, n₀ ≥ 2, finite.
      delta: δ ∈ [0, 1) of the claim.
      confidence: c ∈ (0, 1).
      thresholds: None (split the draws: choose on a ``select_fraction`` part, certify on the rest) or a
        1-D array of thresholds fixed in advance (Bonferroni over 2 tests per threshold).
      select_fraction: the part of the draws that chooses the test, in (0, 1) (ignored with ``thresholds``).
      seed: seed of the split (an integer ≥ 0).

    Returns:
      :class:`ThresholdBound`.

    Example (Laplace noise of scale 1, sensitivity 1: ε = 1):
      >>> import numpy as np
      >>> from jaxpriv.audit.threshold import threshold_epsilon
      >>> rng = np.random.default_rng(0)
      >>> bound = threshold_epsilon(1 + rng.laplace(size=200_000), rng.laplace(size=200_000))
      >>> 0.8 < bound.epsilon <= 1.0
      True
    """
    s1, s0 = _check_draws("scores_in", scores_in), _check_draws("scores_out", scores_out)
    c = check_confidence(confidence)
    d = float(check_values("delta", delta, 0.0, 1.0, hi_open=True).reshape(()))
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be an integer ≥ 0, got {seed!r}")
    if thresholds is not None:
        t = np.asarray(thresholds, dtype=np.float64) if np.ndim(thresholds) else np.atleast_1d(thresholds)
        if t.ndim != 1 or t.size == 0:
            raise ValueError(f"thresholds must be a non-empty 1-D array, got shape {np.shape(thresholds)}")
        t = check_values("thresholds", t)
        tests = 2 * t.size
        return _best(s1, s0, t, d, 1.0 - (1.0 - c) / tests, c, tests)
    f = float(check_values("select_fraction", select_fraction, 0.0, 1.0, lo_open=True, hi_open=True).reshape(()))
    rng = np.random.default_rng(seed)
    s1, s0 = rng.permutation(s1), rng.permutation(s0)
    cut1, cut0 = int(round(f * s1.size)), int(round(f * s0.size))
    if not (1 <= cut1 < s1.size and 1 <= cut0 < s0.size):
        raise ValueError(f"select_fraction {f} leaves no draws to select with or to certify with "
                         f"({s1.size} and {s0.size} draws)")
    pooled = np.concatenate([s1[:cut1], s0[:cut0]])
    candidates = np.unique(pooled)
    if candidates.size > SELECTION_THRESHOLDS:  # quantiles, denser in both tails (down to ~20 draws beyond)
        tail = np.logspace(-1.0, np.log10(20.0 / pooled.size), 64) if pooled.size > 200 else np.zeros(0)
        levels = np.concatenate([np.linspace(0.0, 1.0, SELECTION_THRESHOLDS + 2)[1:-1], tail, 1.0 - tail])
        candidates = np.unique(np.quantile(pooled, np.clip(levels, 0.0, 1.0), method="inverted_cdf"))
    chosen = _best(s1[:cut1], s0[:cut0], candidates, d, c, c, 1)
    return _best(s1[cut1:], s0[cut0:], np.array([chosen.threshold]), d, c, c, 1, direction=chosen.direction)


def _best(s1, s0, thresholds, delta, per_test, confidence, tests, direction=None) -> ThresholdBound:
    k_in, k_out = _rates(s1, s0, thresholds)
    (up, tpr, fpr), (down, tnr, fnr) = _bounds(k_in, k_out, s1.size, s0.size, delta, per_test)
    if direction == "≥":
        down = np.full_like(down, -1.0)
    elif direction == "<":
        up = np.full_like(up, -1.0)
    i_up, i_down = int(np.argmax(up)), int(np.argmax(down))
    if up[i_up] >= down[i_down]:
        return ThresholdBound(float(up[i_up]), float(thresholds[i_up]), "≥", float(tpr[i_up]), float(fpr[i_up]),
                              s1.size, s0.size, delta, confidence, tests)
    return ThresholdBound(float(down[i_down]), float(thresholds[i_down]), "<", float(tnr[i_down]),
                          float(fnr[i_down]), s1.size, s0.size, delta, confidence, tests)
