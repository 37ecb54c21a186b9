"""Lower bounds on ε from ONE run: m canaries, each inserted with probability ½, and the auditor's guesses
of which were inserted (MATH §10.2, §10.3).

* :func:`epsilon_lower_bound` — Steinke, Nasr & Jagielski, "Privacy Auditing with One (1) Training Run",
  NeurIPS 2023, their (ε, δ) tail bound (the one behind their code's p-value; theorem number unconfirmed, MATH
  §10.2): if the
  mechanism is (ε, δ)-DP in each canary, r guesses have v correct with probability at most
  P[Binomial(r, p_ε) ≥ v] + 2mδ · max_{1≤i≤v} (1/i) P[v − i ≤ Binomial(r, p_ε) < v],  p_ε = e^ε/(1 + e^ε).
* :func:`gdp_lower_bound` — Mahloujifar, Melis & Chaudhuri, "Auditing f-Differential Privacy in One Run",
  ICML 2025 (Theorem 3.1 and the numerical test of Algorithm 3 / Theorem 3.2, the recursion over the number
  of correct guesses, for the trade-off function of μ-GDP, alphabet size 2): the largest μ the guesses
  reject, converted to ε at δ (Dong, Roth & Su 2022, Corollary 2.13; :func:`jaxpriv.fdp.gdp_epsilon`).
* :func:`claim_test`, :func:`family_bound` — the same test for any claim given by its privacy profile
  (δ_i at ε_i: f = max_i f_{ε_i, δ_i}; MATH §10.3): one claim's p-value, and the strongest claims of an
  ordered family that one run rejects (:mod:`.training` uses the DP-SGD family (q, T, σ')).

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
from .._numerics import float64, kernel_jit
from .stats import binomial_pmf, check_confidence

__all__ = ["OneRunBound", "ClaimTest", "FamilyBound", "check_scores", "guess_outcome", "default_guesses", "p_value",
           "gdp_rejects", "profile_rejects", "profile_p_value", "epsilon_lower_bound", "gdp_lower_bound",
           "claim_test", "family_bound", "EPSILON_GRID", "MU_GRID"]

#: the ε grid of the Steinke bound (step 0.01 up to 30)
EPSILON_GRID = np.round(np.arange(0.0, 30.0 + 1e-9, 0.01), 10)
#: the μ grid of the GDP bound (step 0.005 up to 12)
MU_GRID = np.round(np.arange(0.0, 12.0 + 1e-9, 0.005), 10)


@dataclasses.dataclass(frozen=True)
class _Best:
    """The best of the ``candidates`` guess counts of a one-run test: ``guesses`` guesses on ``canaries``
    canaries, ``inserted_guesses`` of them "inserted", ``correct`` right."""

    confidence: float
    canaries: int
    guesses: int
    inserted_guesses: int
    correct: int
    candidates: int

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class OneRunBound(_Best):
    """An audited lower bound: ``epsilon`` at ``delta`` (and ``mu`` for the GDP method), from ``canaries``
    canaries of which the best candidate made ``guesses`` guesses (``inserted_guesses`` of them "inserted"),
    ``correct`` right; ``candidates`` is the number K of guess counts tested (Bonferroni)."""

    method: str
    epsilon: float
    mu: float | None
    delta: float


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
    m, r, v = _check_outcome(canaries, guesses, correct)
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
                        seed: int = 0, method: str = "one_run") -> OneRunBound:
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
      method: ``"one_run"`` (this bound) or ``"fdp"`` (:func:`gdp_lower_bound`'s ε at δ, which needs δ > 0).

    Returns:
      :class:`OneRunBound` with ``method="steinke"`` (or ``"gdp"``).

    Example (1000 canaries, 200 guesses all correct):
      >>> import numpy as np
      >>> from jaxpriv.audit.one_run import epsilon_lower_bound
      >>> inserted = np.arange(1000) % 2 == 0
      >>> bound = epsilon_lower_bound(inserted.astype(float), inserted, guesses=[(100, 100)])
      >>> bound.correct, bound.epsilon
      (200, 4.19)
    """
    if method == "fdp":
        return gdp_lower_bound(scores, inserted, delta=delta, confidence=confidence, guesses=guesses, seed=seed)
    if method != "one_run":
        raise ValueError(f"method must be one of ('one_run', 'fdp'), got {method!r}")
    s, b, c, d, pairs, outcomes = _prepare(scores, inserted, delta, confidence, guesses, seed)
    level = (1.0 - c) / len(pairs)
    best = (-1.0, None)
    for k_in, (r, v) in outcomes:
        eps = _first_accepted(lambda block: [p_value(s.size, r, v, e, d) <= level for e in block], EPSILON_GRID)
        if eps > best[0]:
            best = (eps, (k_in, r, v))
    k_in, r, v = best[1]
    return OneRunBound(confidence=c, canaries=int(s.size), guesses=r, inserted_guesses=k_in, correct=v,
                       candidates=len(pairs), method="steinke", epsilon=best[0], mu=None, delta=d)


@kernel_jit
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
    m, r, v = _check_outcome(canaries, guesses, correct)
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
    return OneRunBound(confidence=c, canaries=int(s.size), guesses=r, inserted_guesses=k_in, correct=v,
                       candidates=len(pairs), method="gdp", epsilon=eps, mu=best[0], delta=d)


# --------------------------------------------------------------------------------------------------
# Any claim given by its privacy profile δ(ε): the f-DP test for f = sup_i f_{ε_i, δ_i} (MATH §10.3)
# --------------------------------------------------------------------------------------------------


@kernel_jit
def _profile_consistent(eps, deltas, tau, m, r, v):
    """Mahloujifar et al.'s recursion for B claims at once: ``deltas`` (B, G) the claims' δ at the ε of
    ``eps`` (G,), ``tau`` (B,) their levels; True where v correct of r guesses (m canaries) are consistent.
    The inverse blow-up of f = max_i f_{ε_i, δ_i} is max(0, max_i max((y − δ_i)e^{−ε_i}, 1 − δ_i − e^{ε_i}(1 − y)))
    (MATH §10.3)."""
    grow, shrink = jnp.exp(eps)[None, :], jnp.exp(-eps)[None, :]

    def inverse_blow_up(y):
        y = jnp.clip(y, 0.0, 1.0)[:, None]
        lines = jnp.maximum((y - deltas) * shrink, 1.0 - deltas - grow * (1.0 - y))
        return jnp.clip(jnp.max(lines, axis=-1), 0.0, 1.0)

    def body(step, carry):
        r_i, h_i = carry
        i = v - 1 - step
        h_new = jnp.maximum(h_i, inverse_blow_up(r_i))
        return r_i + (i / (r - i)) * (h_new - h_i), h_new

    r0, h0 = jax.lax.fori_loop(0, v.astype(jnp.int32), body, (tau * v / m, tau * (r - v) / m))
    return r0 + h0 <= r / m


def _check_outcome(canaries, guesses, correct) -> tuple[int, int, int]:
    m, r, v = int(canaries), int(guesses), int(correct)
    if not (m >= 1 and 1 <= r <= m and 0 <= v <= r):
        raise ValueError(f"need 1 ≤ guesses ≤ canaries and 0 ≤ correct ≤ guesses, got m={m}, r={r}, v={v}")
    return m, r, v


def _check_profile(epsilons, deltas) -> tuple[np.ndarray, np.ndarray]:
    """(ε (G,), δ (K, G)) as float64, or ValueError naming the argument and its range."""
    e = check_values("epsilons", epsilons, 0.0)
    if e.ndim != 1 or e.size < 1:
        raise ValueError(f"epsilons must be a 1-D array of at least one value in [0, inf), got shape {e.shape}")
    if (e > 700.0).any():
        raise ValueError(f"epsilons must lie in [0, 700] (e^ε must stay finite), got max {e.max()!r}")
    d = check_values("deltas", deltas, 0.0, 1.0)
    if d.ndim not in (1, 2) or d.shape[-1] != e.size:
        raise ValueError(f"deltas must have shape ({e.size},) or (K, {e.size}) (one δ per ε of epsilons), got "
                         f"shape {d.shape}")
    return e, np.atleast_2d(d)


def _profile_run(eps, deltas, tau, m, r, v) -> np.ndarray:
    """:func:`_profile_consistent` on padded shapes (a short ladder of compiled programs): padding lines are
    (ε = 0, δ = 1), vacuous; padding rows are vacuous claims."""
    G, B = eps.size, deltas.shape[0]
    g, b = max(16, 1 << (G - 1).bit_length()), max(8, 1 << (B - 1).bit_length())
    e = np.concatenate([eps, np.zeros(g - G)])
    d = np.ones((b, g))
    d[:B, :G] = deltas
    t = np.concatenate([np.broadcast_to(tau, (B,)), np.full(b - B, 0.5)])
    with float64():
        ok = _profile_consistent(jnp.asarray(e, jnp.float64), jnp.asarray(d, jnp.float64),
                                 jnp.asarray(t, jnp.float64), jnp.float64(m), jnp.float64(r), jnp.float64(v))
    return np.asarray(ok)[:B]


def profile_rejects(canaries: int, guesses: int, correct: int, epsilons, deltas, level: float) -> np.ndarray:
    """True where ``correct`` of ``guesses`` guesses on ``canaries`` canaries reject, at ``level``, the claim
    "the mechanism is (ε_i, δ_i)-DP for every i" (each row of ``deltas`` one claim): Mahloujifar, Melis &
    Chaudhuri (2025), Algorithm 3 with Theorem 3.2, for the trade-off f = max_i f_{ε_i, δ_i} (MATH §10.3).

    Args:
      canaries, guesses, correct: m ≥ 1, 1 ≤ r ≤ m, 0 ≤ v ≤ r.
      epsilons: (G,) values in [0, 700].
      deltas: (G,) or (K, G) values in [0, 1]: the claims' δ(ε_i) (upper bounds: a claim with larger δ is weaker).
      level: τ ∈ (0, 1).

    Returns:
      bool numpy array of shape (K,) (or () for a 1-D ``deltas``).

    Example (the μ = 1 GDP profile on a fine ε grid; compare :func:`gdp_rejects`):
      >>> import numpy as np
      >>> from jaxpriv import fdp
      >>> from jaxpriv.audit.one_run import profile_rejects
      >>> eps = np.linspace(0.0, 12.0, 241)
      >>> claims = np.stack([fdp.gdp_delta(mu, eps) for mu in (0.5, 8.0)])
      >>> profile_rejects(1000, 100, 100, eps, claims, 0.05).tolist()
      [True, False]
    """
    m, r, v = _check_outcome(canaries, guesses, correct)
    e, d = _check_profile(epsilons, deltas)
    tau = float(check_values("level", level, 0.0, 1.0, lo_open=True, hi_open=True).reshape(()))
    out = ~_profile_run(e, d, np.full(d.shape[0], tau), m, r, v)
    return out if np.ndim(deltas) == 2 else out[0]


#: the levels scanned by :func:`profile_p_value`: 64 log-spaced points from 1e-16 to 1, then 64 between the
#: two that bracket the p-value (a resolution of ~1.8%)
_TAU_COARSE = np.logspace(-16.0, 0.0, 64)


def _first_rejected(rejects: np.ndarray, grid: np.ndarray) -> int:
    """Index of the smallest grid value from which every larger one rejects (grid.size when the last does not)."""
    accepted = np.flatnonzero(~rejects)
    return 0 if accepted.size == 0 else int(accepted[-1]) + 1


def profile_p_value(canaries: int, guesses: int, correct: int, epsilons, deltas) -> float:
    """The p-value of one claim (a 1-D privacy profile, as :func:`profile_rejects`): the smallest level τ at
    which the outcome rejects it, on a grid and rounded up to it (1 when even τ → 1 does not reject).

    The test's statistic is monotone in τ (Mahloujifar et al. 2025, Lemma A.5: r_0 + h_0 increases with τ),
    so the rejected levels are an interval up to 1; the scan keeps the smallest grid level from which every
    larger one rejects.

    Example:
      >>> import numpy as np
      >>> from jaxpriv import fdp
      >>> from jaxpriv.audit.one_run import profile_p_value, profile_rejects
      >>> eps = np.linspace(0.0, 12.0, 241)
      >>> claim = fdp.gdp_delta(1.0, eps)
      >>> p = profile_p_value(1000, 100, 95, eps, claim)
      >>> bool(profile_rejects(1000, 100, 95, eps, claim, min(1.001 * p, 0.999))), round(p, 3)
      (True, 0.283)
    """
    m, r, v = _check_outcome(canaries, guesses, correct)
    e, d = _check_profile(epsilons, deltas)
    if d.shape[0] != 1:
        raise ValueError(f"deltas must be one claim (shape ({e.size},)), got shape {np.shape(deltas)}")
    grid = _TAU_COARSE
    j = _first_rejected(~_profile_run(e, np.repeat(d, grid.size, 0), grid, m, r, v), grid)
    if j == grid.size:
        return 1.0
    if j == 0:
        return float(grid[0])
    fine = np.logspace(np.log10(grid[j - 1]), np.log10(grid[j]), 64)
    k = _first_rejected(~_profile_run(e, np.repeat(d, fine.size, 0), fine, m, r, v), fine)
    return float(fine[min(k, fine.size - 1)])


@dataclasses.dataclass(frozen=True)
class ClaimTest(_Best):
    """The one-run f-DP test of one claim: ``p_value`` (Bonferroni over the candidate guess counts:
    K·min_k p_k, at most 1) and ``rejected`` (p_value ≤ 1 − confidence); the candidate is the one with the
    smallest p-value."""

    p_value: float
    rejected: bool


def claim_test(scores, inserted, *, epsilons, deltas, confidence: float = 0.95, guesses=None,
               seed: int = 0) -> ClaimTest:
    """Test one claim, given by its privacy profile (δ_i at ε_i: the claim is f-DP for f = max_i f_{ε_i, δ_i}),
    against one run's canaries (Mahloujifar, Melis & Chaudhuri 2025; MATH §10.3): its p-value and whether it
    is rejected at 1 − confidence.

    The guesses are those of :func:`epsilon_lower_bound`; each candidate's p-value is
    :func:`profile_p_value`, and the claim's is K times the smallest (Bonferroni). If the mechanism satisfies
    the claim, P[p_value ≤ α] ≤ α for every α.

    Args:
      scores, inserted, confidence, guesses, seed: as :func:`epsilon_lower_bound`.
      epsilons: (G,) values in [0, 700]; deltas: (G,) values in [0, 1] (e.g. the claim's
        :func:`jaxpriv.accounting.delta_profile` upper end).

    Returns:
      :class:`ClaimTest`.

    Example (200 of 200 guesses right rejects 1-GDP; the profile is its exact δ(ε)):
      >>> import numpy as np
      >>> from jaxpriv import fdp
      >>> from jaxpriv.audit.one_run import claim_test
      >>> inserted = np.arange(1000) % 2 == 0
      >>> eps = np.linspace(0.0, 12.0, 241)
      >>> test = claim_test(inserted.astype(float), inserted, epsilons=eps, deltas=fdp.gdp_delta(1.0, eps),
      ...                   guesses=[(100, 100)])
      >>> test.rejected, round(test.p_value, 5)
      (True, 0.00051)
    """
    s, b, c, _, pairs, outcomes = _prepare(scores, inserted, 0.0, confidence, guesses, seed)
    e, d = _check_profile(epsilons, deltas)
    if d.shape[0] != 1:
        raise ValueError(f"deltas must be one claim (shape ({e.size},)), got shape {np.shape(deltas)}")
    best = (2.0, None)
    for k_in, (r, v) in outcomes:
        p = profile_p_value(s.size, r, v, e, d[0])
        if p < best[0]:
            best = (p, (k_in, r, v))
    k_in, r, v = best[1]
    p = min(1.0, len(pairs) * best[0])
    return ClaimTest(confidence=c, canaries=int(s.size), guesses=r, inserted_guesses=k_in, correct=v,
                     candidates=len(pairs), p_value=p, rejected=bool(p <= 1.0 - c))


@dataclasses.dataclass(frozen=True)
class FamilyBound(_Best):
    """The one-run f-DP bound over an ordered family of ``claims`` claims (row 0 the weakest): ``index`` is the
    smallest j such that claims j, …, K − 1 are all rejected (K when the strongest is not), for the best
    candidate guess count."""

    index: int
    claims: int


def family_bound(scores, inserted, *, epsilons, deltas, confidence: float = 0.95, guesses=None,
                 seed: int = 0) -> FamilyBound:
    """The strongest claims of an ordered family that one run rejects (MATH §10.3).

    ``deltas`` (K, G) holds K claims' privacy profiles at ``epsilons``, ordered from the weakest (row 0) to
    the strongest (row K − 1: every row's δ(ε) at most the previous row's). For each candidate guess count
    the claims are tested at level (1 − confidence)/K_c (Bonferroni over the K_c candidates) and the bound
    is the longest run of rejected claims from the strong end; the result is the best candidate's. If the
    mechanism satisfies claim j, P[index ≤ j] ≤ 1 − confidence: the family's claims at and above the
    returned index are rejected at that confidence.

    Example (μ-GDP claims, μ from 4 down to 0.25; 200 of 200 right rejects μ ≤ 1.5, as :func:`gdp_lower_bound`):
      >>> import numpy as np
      >>> from jaxpriv import fdp
      >>> from jaxpriv.audit.one_run import family_bound
      >>> inserted = np.arange(1000) % 2 == 0
      >>> eps, mus = np.linspace(0.0, 16.0, 321), np.arange(4.0, 0.0, -0.25)
      >>> bound = family_bound(inserted.astype(float), inserted, epsilons=eps,
      ...                      deltas=np.stack([fdp.gdp_delta(mu, eps) for mu in mus]), guesses=[(100, 100)])
      >>> float(mus[bound.index])
      1.5
    """
    s, b, c, _, pairs, outcomes = _prepare(scores, inserted, 0.0, confidence, guesses, seed)
    e, d = _check_profile(epsilons, deltas)
    level = (1.0 - c) / len(pairs)
    best = (d.shape[0] + 1, None)
    for k_in, (r, v) in outcomes:
        j = _first_rejected(~_profile_run(e, d, np.full(d.shape[0], level), s.size, r, v), np.arange(d.shape[0]))
        if j < best[0]:
            best = (j, (k_in, r, v))
    k_in, r, v = best[1]
    return FamilyBound(confidence=c, canaries=int(s.size), guesses=r, inserted_guesses=k_in, correct=v,
                       candidates=len(pairs), index=best[0], claims=d.shape[0])
