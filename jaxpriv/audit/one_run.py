"""Lower bounds on ε from ONE run: m canaries, each inserted with probability ½, and the auditor's guesses
of which were inserted (MATH §10.2, §10.3).

* :func:`epsilon_lower_bound` — Steinke, Nasr & Jagielski, "Privacy Auditing with One (1) Training Run",
  NeurIPS 2023, main theorem (the (ε, δ) tail bound behind their code's p-value; MATH §10.2): if the
  mechanism is (ε, δ)-DP in each canary, r guesses have v correct with probability at most
  P[Binomial(r, p_ε) ≥ v] + 2mδ · max_{1≤i≤v} (1/i) P[v − i ≤ Binomial(r, p_ε) < v],  p_ε = e^ε/(1 + e^ε).
* :func:`gdp_lower_bound` — Mahloujifar, Melis & Chaudhuri, "Auditing f-Differential Privacy in One Run",
  ICML 2025 (their main theorem and its numerical test, the recursion over the number of correct guesses,
  for the trade-off function of μ-GDP, alphabet size 2): the largest μ the guesses reject, converted to ε at
  δ (Dong, Roth & Su 2022, Corollary 2.13; :func:`jaxpriv.fdp.gdp_epsilon`).

Both are LOWER bounds: a mechanism that is (ε, δ)-DP (μ-GDP) yields a bound above ε (μ) with probability at
most 1 − confidence. Two rules keep that true here:

1. The guesses depend on the scores only: the k_in highest scores are guessed "inserted", the k_out lowest
   "not inserted", ties broken by a seeded permutation drawn before the truth is read.
2. The test statistic is fixed before the data: every candidate (k_in, k_out) of ``guesses`` is tested at
   level (1 − confidence)/K (Bonferroni over the K candidates), and the reported bound is the largest over
   candidates. For each candidate the bound is the largest grid value θ such that every grid value up to θ
   is rejected: the true parameter exceeds the bound only if the test rejects the true parameter itself.
"""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np

from .._checks import check_values
from .._numerics import float64
from .stats import binomial_pmf, check_confidence

__all__ = ["OneRunBound", "check_scores", "guess_outcome", "default_guesses", "p_value", "gdp_rejects",
           "epsilon_lower_bound", "gdp_lower_bound", "EPSILON_GRID", "MU_GRID"]

#: the ε grid of the Steinke bound (step 0.01 up to 30)
EPSILON_GRID = np.round(np.arange(0.0, 30.0 + 1e-9, 0.01), 10)
#: the μ grid of the GDP bound (step 0.005 up to 12)
MU_GRID = np.round(np.arange(0.0, 12.0 + 1e-9, 0.005), 10)


@dataclasses.dataclass(frozen=True)
class OneRunBound:
    """An audited lower bound: ``epsilon`` at ``delta`` (and ``mu`` for the GDP method), from ``canaries``
    canaries of which the best candidate made ``guesses`` guesses (``inserted_guesses`` of them "inserted"),
    ``correct`` right; ``candidates`` is the number K of guess counts tested (Bonferroni)."""

    method: str
    epsilon: float
    mu: float | None
    delta: float
    confidence: float
    canaries: int
    guesses: int
    inserted_guesses: int
    correct: int
    candidates: int

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


def check_scores(scores, inserted) -> tuple[np.ndarray, np.ndarray]:
    """``(scores, inserted)`` as float64 and bool numpy arrays, or ``ValueError``: scores 1-D, finite, at
    least 2; ``inserted`` the same length, booleans (or 0/1)."""
    s = np.asarray(scores)
    if s.ndim != 1:
        raise ValueError(f"scores must be a 1-D array (one score per canary), got shape {s.shape}")
    if s.size < 2:
        raise ValueError(f"scores must hold at least 2 canaries (m ≥ 2), got {s.size}")
    s = check_values("scores", s)
    b = np.asarray(inserted)
    if b.shape != s.shape:
        raise ValueError(f"inserted must have one entry per score, shape {s.shape}, got shape {b.shape}")
    if b.dtype != np.bool_:
        values = check_values("inserted", b, 0.0, 1.0, integer=True)
        b = values.astype(bool)
    return s, b


def _order(scores: np.ndarray, seed: int) -> np.ndarray:
    """Indices from the highest score to the lowest, ties in a seeded random order (independent of the truth)."""
    tie = np.random.default_rng(seed).permutation(scores.size)
    return np.lexsort((tie, -scores))


def guess_outcome(scores, inserted, inserted_guesses: int, excluded_guesses: int = 0, *, seed: int = 0
                  ) -> tuple[int, int]:
    """Guess the ``inserted_guesses`` highest-scored canaries "inserted" and the ``excluded_guesses``
    lowest "not inserted" (Steinke et al. 2023, Algorithm 1's guesser); return (guesses r, correct v).

    Example:
      >>> from jaxpriv.audit.one_run import guess_outcome
      >>> guess_outcome([3.0, 2.0, 1.0, 0.0], [1, 0, 1, 0], 1, 1)
      (2, 2)
    """
    s, b = check_scores(scores, inserted)
    k_in, k_out = _check_pair(inserted_guesses, excluded_guesses, s.size)
    order = _order(s, seed)
    correct = int(b[order[:k_in]].sum()) + int((~b[order[s.size - k_out:]]).sum() if k_out else 0)
    return k_in + k_out, correct


def _check_pair(k_in, k_out, m: int) -> tuple[int, int]:
    for name, k in (("inserted_guesses", k_in), ("excluded_guesses", k_out)):
        if isinstance(k, (bool, np.bool_)) or not isinstance(k, (int, np.integer)) or k < 0:
            raise ValueError(f"{name} must be an integer in [0, {m}], got {k!r}")
    if not 1 <= k_in + k_out <= m:
        raise ValueError(f"guesses (inserted_guesses + excluded_guesses) must lie in [1, {m}] (the number of "
                         f"canaries), got {k_in + k_out}")
    return int(k_in), int(k_out)


def default_guesses(m: int) -> list[tuple[int, int]]:
    """The default candidates (k_in, k_out): r = ⌈f·m⌉ for f ∈ {1%, 3%, 10%, 30%, 100%}, each split evenly
    between the two ends and, for f < 100%, also all at the top (positive guesses only).

    Example:
      >>> from jaxpriv.audit.one_run import default_guesses
      >>> default_guesses(100)
      [(1, 0), (2, 1), (3, 0), (5, 5), (10, 0), (15, 15), (30, 0), (50, 50)]
    """
    out = []
    for f in (0.01, 0.03, 0.1, 0.3, 1.0):
        r = max(1, math.ceil(f * m - 1e-9))
        out.append(((r + 1) // 2, r // 2))
        if f < 1.0:
            out.append((r, 0))
    unique = []
    for pair in out:
        if pair not in unique:
            unique.append(pair)
    return unique


def _candidates(guesses, m: int) -> list[tuple[int, int]]:
    if guesses is None:
        return default_guesses(m)
    if isinstance(guesses, (int, np.integer)) and not isinstance(guesses, (bool, np.bool_)):
        guesses = [((int(guesses) + 1) // 2, int(guesses) // 2)]
    try:
        pairs = [tuple(p) for p in guesses]
    except TypeError:
        raise ValueError(f"guesses must be None, an integer r in [1, {m}] or a sequence of (inserted, excluded) "
                         f"pairs, got {guesses!r}") from None
    if not pairs or any(len(p) != 2 for p in pairs):
        raise ValueError(f"guesses must be a non-empty sequence of (inserted, excluded) pairs, got {guesses!r}")
    return [_check_pair(k_in, k_out, m) for k_in, k_out in pairs]


def p_value(canaries: int, guesses: int, correct: int, epsilon: float, delta: float) -> float:
    """Steinke et al. (2023), main theorem (MATH §10.2): an upper bound on P[at least v of r guesses correct] for a
    mechanism that is (ε, δ)-DP in each of m canaries (each inserted with probability ½):
    P[Bin(r, p) ≥ v] + 2mδ · max_{1≤i≤v} (1/i) Σ_{j=1..i} P[Bin(r, p) = v − j], p = e^ε/(1 + e^ε).

    Example:
      >>> from jaxpriv.audit.one_run import p_value
      >>> round(p_value(1000, 100, 80, 1.0, 0.0), 6)  # P[Bin(100, 0.731) ≥ 80]
      0.071556
    """
    m, r, v = int(canaries), int(guesses), int(correct)
    if not (m >= 1 and 1 <= r <= m and 0 <= v <= r):
        raise ValueError(f"need 1 ≤ guesses ≤ canaries and 0 ≤ correct ≤ guesses, got m={m}, r={r}, v={v}")
    if not epsilon >= 0 or not 0 <= delta < 1:
        raise ValueError(f"epsilon must lie in [0, inf) and delta in [0, 1), got {epsilon!r}, {delta!r}")
    p = 1.0 / (1.0 + math.exp(-epsilon))
    pmf = binomial_pmf(r, p)
    beta = float(np.sum(pmf[v:]))
    alpha = 0.0
    if v > 0 and delta > 0:
        below = np.cumsum(pmf[v - 1::-1])  # Σ_{j=1..i} P[Bin = v − j], i = 1..v
        alpha = float(np.max(below / np.arange(1, v + 1)))
    return min(1.0, beta + 2.0 * m * delta * alpha)


def _first_accepted(rejects, grid: np.ndarray) -> float:
    """The largest grid value θ with every grid value ≤ θ rejected (0 when the first is not), by a scan
    in blocks of increasing size (``rejects(block)`` → bools)."""
    start, size = 0, 16
    best = 0.0
    while start < grid.size:
        block = grid[start:start + size]
        ok = np.asarray(rejects(block), bool)
        if not ok.all():
            first = int(np.argmin(ok))
            return float(block[first - 1]) if first > 0 else best
        best = float(block[-1])
        start, size = start + size, size * 2
    return best


def _prepare(scores, inserted, delta, confidence, guesses, seed, delta_lo_open=False):
    s, b = check_scores(scores, inserted)
    c = check_confidence(confidence)
    d = float(check_values("delta", delta, 0.0, 1.0, lo_open=delta_lo_open, hi_open=True).reshape(()))
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be an integer ≥ 0, got {seed!r}")
    pairs = _candidates(guesses, s.size)
    outcomes = [(k_in, guess_outcome(s, b, k_in, k_out, seed=seed)) for k_in, k_out in pairs]
    return s, b, c, d, pairs, outcomes


def epsilon_lower_bound(scores, inserted, *, delta: float = 0.0, confidence: float = 0.95, guesses=None,
                        seed: int = 0) -> OneRunBound:
    """A lower bound on ε from one run (Steinke, Nasr & Jagielski 2023; MATH §10.2).

    For each candidate (k_in, k_out) of ``guesses``, the guesser marks the k_in highest scores "inserted" and
    the k_out lowest "not inserted"; with v of r = k_in + k_out guesses correct, the bound is the largest ε
    on :data:`EPSILON_GRID` whose whole prefix :func:`p_value` rejects at level (1 − confidence)/K. The result
    is the maximum over the K candidates; P[result > true ε] ≤ 1 − confidence for any mechanism that is
    (ε, δ)-DP in each canary.

    Args:
      scores: (m,) canary scores, m ≥ 2, higher meaning "more likely inserted" (finite).
      inserted: (m,) bools (or 0/1): which canaries were inserted (each with probability ½, independently).
      delta: δ ∈ [0, 1) of the claim audited.
      confidence: c ∈ (0, 1).
      guesses: None (:func:`default_guesses`), an integer r (split evenly between the two ends) or a sequence
        of (k_in, k_out) pairs, each with 1 ≤ k_in + k_out ≤ m.
      seed: seed of the tie-breaking permutation (an integer ≥ 0).

    Returns:
      :class:`OneRunBound` with ``method="steinke"``.

    Example (1000 canaries, 200 guesses all correct):
      >>> import numpy as np
      >>> from jaxpriv.audit.one_run import epsilon_lower_bound
      >>> inserted = np.arange(1000) % 2 == 0
      >>> bound = epsilon_lower_bound(inserted.astype(float), inserted, guesses=[(100, 100)])
      >>> bound.correct, bound.epsilon
      (200, 4.19)
    """
    s, b, c, d, pairs, outcomes = _prepare(scores, inserted, delta, confidence, guesses, seed)
    level = (1.0 - c) / len(pairs)
    best = (-1.0, None)
    for k_in, (r, v) in outcomes:
        eps = _first_accepted(lambda block: [p_value(s.size, r, v, e, d) <= level for e in block], EPSILON_GRID)
        if eps > best[0]:
            best = (eps, (k_in, r, v))
    k_in, r, v = best[1]
    return OneRunBound("steinke", best[0], None, d, c, int(s.size), r, k_in, v, len(pairs))


@jax.jit
def _gdp_consistent(mus, m, r, v, level):
    """Mahloujifar et al.'s test for every μ of ``mus``: True where v correct of r guesses (m canaries) are
    consistent with μ-GDP at ``level`` (the recursion runs from i = v down to 0)."""
    tau = level * r / m
    norm = jax.scipy.stats.norm

    def inverse_blow_up(x):  # the inverse blow-up of G_μ: Φ(Φ⁻¹(x) − μ)
        return norm.cdf(jax.scipy.special.ndtri(jnp.clip(x, 0.0, 1.0)) - mus)

    def body(step, carry):
        r_i, h_i = carry
        i = v - 1 - step
        h_new = jnp.maximum(h_i, inverse_blow_up(r_i))
        return r_i + (i / (r - i)) * (h_new - h_i), h_new

    start = (jnp.full_like(mus, tau * v / r), jnp.full_like(mus, tau * (r - v) / r))
    r0, h0 = jax.lax.fori_loop(0, v.astype(jnp.int32), body, start)
    return r0 + h0 <= r / m


def gdp_rejects(canaries: int, guesses: int, correct: int, mu, level: float) -> np.ndarray:
    """True where ``correct`` of ``guesses`` guesses on ``canaries`` canaries reject μ-GDP at ``level``
    (Mahloujifar, Melis & Chaudhuri 2025, the one-run f-DP test with the trade-off G_μ; MATH §10.3).

    Example:
      >>> from jaxpriv.audit.one_run import gdp_rejects
      >>> gdp_rejects(1000, 100, 100, [0.5, 8.0], 0.05).tolist()
      [True, False]
    """
    m, r, v = int(canaries), int(guesses), int(correct)
    if not (m >= 1 and 1 <= r <= m and 0 <= v <= r):
        raise ValueError(f"need 1 ≤ guesses ≤ canaries and 0 ≤ correct ≤ guesses, got m={m}, r={r}, v={v}")
    mu = check_values("mu", mu, 0.0)
    level = float(check_values("level", level, 0.0, 1.0, lo_open=True, hi_open=True).reshape(()))
    flat = np.atleast_1d(mu).reshape(-1)
    size = max(16, 1 << (flat.size - 1).bit_length())
    padded = np.concatenate([flat, np.zeros(size - flat.size)])
    with float64():
        ok = _gdp_consistent(jnp.asarray(padded, jnp.float64), jnp.float64(m), jnp.float64(r), jnp.float64(v),
                             jnp.float64(level))
    return ~np.asarray(ok)[:flat.size].reshape(np.shape(mu))


def gdp_lower_bound(scores, inserted, *, delta: float = 1e-5, confidence: float = 0.95, guesses=None,
                    seed: int = 0) -> OneRunBound:
    """A lower bound on μ (Gaussian DP) and the ε it implies at δ, from one run (Mahloujifar, Melis &
    Chaudhuri 2025; MATH §10.3).

    The guesses are those of :func:`epsilon_lower_bound`; for each candidate the bound is the largest μ on
    :data:`MU_GRID` whose whole prefix :func:`gdp_rejects` rejects at level (1 − confidence)/K, and the result
    the maximum over candidates, converted to ε = :func:`jaxpriv.fdp.gdp_epsilon` (μ, δ). P[μ bound > μ] ≤
    1 − confidence for a mechanism that is μ-GDP in each canary. The ε is a lower bound on the ε of any
    μ-GDP claim; an (ε, δ) claim that is not a GDP claim (a subsampled mechanism) is compared through its μ
    only approximately, so the Steinke bound is the one to compare with such a claim.

    Args:
      scores, inserted, confidence, guesses, seed: as :func:`epsilon_lower_bound`.
      delta: δ ∈ (0, 1) at which μ is converted to ε.

    Returns:
      :class:`OneRunBound` with ``method="gdp"`` and ``mu`` set.

    Example:
      >>> import numpy as np
      >>> from jaxpriv.audit.one_run import gdp_lower_bound
      >>> inserted = np.arange(1000) % 2 == 0
      >>> bound = gdp_lower_bound(inserted.astype(float), inserted, guesses=[(100, 100)])
      >>> bound.mu, round(bound.epsilon, 2)  # 200 of 200 right; the (ε, δ) bound gives 4.19 at δ = 0
      (1.535, 7.25)
    """
    s, b, c, d, pairs, outcomes = _prepare(scores, inserted, delta, confidence, guesses, seed, delta_lo_open=True)
    level = (1.0 - c) / len(pairs)
    best = (-1.0, None)
    for k_in, (r, v) in outcomes:
        mu = _first_accepted(lambda block: gdp_rejects(s.size, r, v, block, level), MU_GRID)
        if mu > best[0]:
            best = (mu, (k_in, r, v))
    from ..fdp import gdp_epsilon

    k_in, r, v = best[1]
    eps = float(gdp_epsilon(best[0], d)) if best[0] > 0 else 0.0
    return OneRunBound("gdp", eps, best[0], d, c, int(s.size), r, k_in, v, len(pairs))
