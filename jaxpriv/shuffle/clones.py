"""Exact privacy amplification by shuffling through the clone reduction (MATH §3.1).

Feldman, McMillan & Talwar ("Hiding among the clones", FOCS 2021; arXiv:2012.12803) reduce the shuffle of
n ε₀-DP local reports to a pair of distributions over counts. Every other user independently becomes a
clone of the target's input x⁰ with probability c/2, of x¹ with probability c/2, and is uninformative
otherwise; the target answers binary randomized response, "0" with probability q = e^{ε₀}/(1+e^{ε₀}) under
x⁰. With C ~ Bin(n−1, c) clones, A | C ~ Bin(C, ½) and b_C the pmf of Bin(C, ½), the dominating pair is

    P_C(a) = q b_C(a−1) + (1−q) b_C(a),    Q_C(a) = (1−q) b_C(a−1) + q b_C(a),

    δ(ε) = Σ_C Pr[C] Σ_a max(0, P_C(a) − e^ε Q_C(a)).

Q_C is P_C mirrored (Q_C(a) = P_C(C+1−a)), so the pair is symmetric and this one direction is the whole
hockey-stick divergence. P_C/Q_C increases in a, so with α = q − e^ε(1−q), β = e^ε q − (1−q) and
t = β/α the positive part is a ≥ a*(C) = ⌊t(C+1)/(1+t)⌋ + 1 and the inner sum is a difference of two
binomial tails, α Pr[B_C ≥ a*−1] − β Pr[B_C ≥ a*] = α b_C(a*−1) − (e^ε − 1) Pr[B_C ≥ a*]. δ = 0 once
e^ε ≥ e^{ε₀} (α ≤ 0). ε(δ) is a monotone root find.

How the sum is evaluated (float64, log-scaled, O(window) per ε):

* **Window over C.** Only C within ±(6.5·√(n−1) + 32) of its mean (at least ±13 standard deviations of
  Bin(n−1, c) for any c) is summed; the window has a static size taken from the largest n of a batch and
  is masked per element by its own n. The dropped mass of C, bounded above by the Chernoff bound
  exp(−(n−1)·KL), times δ_C ≤ δ_0 = α (δ_C decreases in C: one more clone is a post-processing), is
  **added** to δ (MATH §0.1). It is below 1e-36 by construction (Hoeffding at 13 sd_max): present, and
  invisible at any practical δ; only for δ ≲ 1e-30 can it dominate, and δ is then an upper bound with
  absolute slack < 1e-36.
* **Tails along the threshold path.** a*(C+1) − a*(C) ∈ {0, 1} (because ½ ≤ t/(1+t) < 1), and
  Pr[B_{C+1} ≥ k] = Pr[B_C ≥ k] + ½ b_C(k−1), so L_C = Pr[B_C ≥ a*(C)] changes along the window by
  +½ b_C(a*−1) (threshold kept) or −½ b_C(a*) (threshold moved). All L_C follow from one reverse cumulative
  sum anchored at the top of the window, where L is summed directly term by term (⌈√(23 n)⌉ terms
  suffice: the neglected remainder is < e^{−46} relative by Hoeffding, and neglecting it lowers L, which
  raises δ: the safe side).
* **Binomial pmfs** come from Loader's saddle-point form (Loader 2000, "Fast and accurate computation of
  binomial probabilities", as in R's ``dbinom``): Stirling-series errors and the deviance term
  x log(x/m) + m − x computed without cancellation, so log b_C(k) keeps ~1e-15 absolute accuracy at
  n = 10⁷ (``lgamma`` differences would lose ~1e-8 there).
* **Rounding** is absorbed on the safe side: δ is raised by an a-posteriori allowance for the floating-
  point error of the cancelling difference α b − (e^ε−1) L (2e-12…1e-10 relative; ten times the largest
  error measured against 40-200-digit mpmath sums), so the returned δ lies within ~1e-10 relative above
  the exact value.

At n = 10⁶ on a 2-core CPU, after a ~1 s compilation, ε(δ) takes ~10 ms and δ(ε) ~1 ms; a vectorised
numpy/scipy sum over every C takes ~0.7 s per δ and ~20 s per ε with brentq (``bench/shuffle.py``).
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

from .._batching import map_chunked, power_of_two, static_size
from .._numerics import (as_output, check_array, check_broadcastable, float64, is_concrete, log1mexp, log_expm1,
                         solve_monotone, kernel_jit)

__all__ = ["clones_delta", "clones_epsilon", "CLONES", "gspa_clone_probabilities"]

#: Clone probability models: name → description.
CLONES = {
    "fmt22": "c = e^{-ε₀} (Feldman, McMillan, Talwar 2021/22, 'Hiding among the clones'): any ε₀-DP randomizer",
    "strong": "c = 2/(e^{ε₀}+1) (FMT23 'stronger clones' / GSPA Lemma 1): the restricted class of the FMT23 erratum",
}

_EPS = float(np.finfo(np.float64).eps)


def gspa_clone_probabilities(local_epsilons, local_deltas=0.0) -> np.ndarray:
    """p_i = 2(1 − δ_i)/(1 + e^{ε_i}), the GSPA / E-APES clone probability of an (ε_i, δ_i)-LDP user (GSPA,
    seed 003, Theorem 1 / Lemma 1; E-APES, seed 001, Lemma 2, Eq. 9; MATH §3.1, §3.3): user i's output
    is a mixture with weight (1 − δ_i)/(1 + e^{ε_i}) on each of the target's two components. Evaluated
    as 2(1 − δ_i)·expit(−ε_i), which neither overflows nor cancels, then lowered by 4 ulps so that it is
    never above the exact value (fewer clones: the safe side for every bound built on it); numpy, no
    validation (ε_i ≥ 0, δ_i ∈ [0, 1)). The one implementation behind
    :func:`jaxpriv.shuffle.multinomial.clone_probabilities` and the GSPA model of
    :mod:`jaxpriv.shuffle.personalized`.

    Example:
      >>> from jaxpriv.shuffle.clones import gspa_clone_probabilities
      >>> round(float(gspa_clone_probabilities(1.0, 1e-3)), 6)
      0.537345
    """
    from scipy.special import expit  # here, not at import: see jaxpriv.mechanisms.allocation

    value = 2.0 * (1.0 - np.asarray(local_deltas, np.float64)) * expit(-np.asarray(local_epsilons, np.float64))
    return value * (1.0 - 4.0 * _EPS)  # expit, the product and 1 − δ err by ≤ 1 ulp each


_LOG_2PI = math.log(2.0 * math.pi)
_LOG2 = math.log(2.0)
# stirlerr(x) = log(x!) − log(√(2πx) (x/e)^x) for x = 0…15 (mpmath, 20 digits; stirlerr(0) is unused).
_STIRLERR_SMALL = np.array([
    0.0,
    0.08106146679532725822, 0.041340695955409294094, 0.027677925684998339149, 0.020790672103765093112,
    0.016644691189821192163, 0.013876128823070747999, 0.011896709945891770095, 0.010411265261972096497,
    0.0092554621827127329177, 0.0083305634333628712565, 0.007573675487951840795, 0.0069428401072095298657,
    0.0064089941880042070684, 0.0059513701127588477356, 0.005554733551962801371,
])
_BD0_TERMS = 10  # |v| < 0.1: the series remainder is < 2·0.1^21 relative
_WINDOW_SDS = 6.5  # half-width of the C window in units of √(n−1) = 2·sd_max (sd_max = √((n−1)/4))
_WINDOW_MARGIN = 32
_ANCHOR_LOG_REMAINDER = 23.0  # K = √(23 (n−1)): Hoeffding remainder exp(−2K²/C) ≤ e^{−46}
_ELEMENT_BUDGET = 1 << 21  # (configurations × (window + anchor)) per chunk: ~16 MiB per float64 array
_ROUNDING = 16 * float(np.finfo(np.float64).eps) / 2  # 16 × the unit roundoff: the margin of the allowance
_XTOL_MARGIN = 1e-9  # relative headroom on ε after the root find (a separately compiled δ may differ by ulps)


# --------------------------------------------------------------------------------------------------
# Binomial log-pmf (Loader 2000)
# --------------------------------------------------------------------------------------------------


def _stirlerr(x):
    """log(x!) − log(√(2πx)(x/e)^x) for integer-valued x ≥ 1: table below 16, 5-term series above
    (next term 691/(360360 x¹¹) < 2e-16 at x = 16)."""
    table = jnp.take(jnp.asarray(_STIRLERR_SMALL), jnp.clip(x, 0, 15).astype(jnp.int32), mode="clip")
    xl = jnp.maximum(x, 16.0)
    x2 = xl * xl
    series = (1.0 / 12 - (1.0 / 360 - (1.0 / 1260 - (1.0 / 1680 - 1.0 / (1188 * x2)) / x2) / x2) / x2) / xl
    return jnp.where(x < 16, table, series)


def _bd0(x, m):
    """Deviance x log(x/m) + m − x ≥ 0 (x ≥ 0, m > 0) without cancellation near x = m (Loader 2000)."""
    d = x - m
    s = x + m
    near = jnp.abs(d) < 0.1 * s
    v = jnp.where(near, d / jnp.where(near, s, 1.0), 0.0)
    v2 = v * v
    series = d * v
    term = 2.0 * x * v
    for j in range(1, _BD0_TERMS + 1):
        term = term * v2
        series = series + term / (2 * j + 1)
    positive = x > 0
    xs = jnp.where(positive & ~near, x, 1.0)
    ms = jnp.where(positive & ~near, m, 1.0)
    direct = jnp.where(positive, xs * jnp.log(xs / ms) + ms - xs, m)
    return jnp.where(near, series, direct)


def _log_binom_pmf(x, size, log_p, log_q):
    """log Pr[Bin(size, p) = x] for integer-valued 0 ≤ x ≤ size (−inf outside), q = 1 − p given in log."""
    p, q = jnp.exp(log_p), jnp.exp(log_q)
    inner = (x > 0) & (x < size)
    xs = jnp.where(inner, x, 1.0)
    ns = jnp.where(inner, size, 2.0)
    lc = (_stirlerr(ns) - _stirlerr(xs) - _stirlerr(ns - xs)
          - _bd0(xs, ns * p) - _bd0(ns - xs, ns * q))
    lf = _LOG_2PI + jnp.log(xs) + jnp.log1p(-xs / ns)
    edge = jnp.where(x == 0, size * log_q, size * log_p)  # x = 0 or x = size (size = 0 gives 0)
    out = jnp.where(inner, lc - 0.5 * lf, edge)
    return jnp.where((x < 0) | (x > size), -jnp.inf, out)


def log_half_pmf(x, size):
    """log Pr[Bin(size, 1/2) = x] (−inf outside 0 ≤ x ≤ size); also the E-APES lattice's kernel
    (:mod:`jaxpriv.shuffle.multinomial`) and the shuffled pair's law (:mod:`jaxpriv.events.shuffled`)."""
    return _log_binom_pmf(x, size, -_LOG2, -_LOG2)


# --------------------------------------------------------------------------------------------------
# Static sizes
# --------------------------------------------------------------------------------------------------


def _sizes(n_max: float) -> tuple[int, int]:
    """(window W over C, anchor terms K) for the largest n of a batch."""
    big_n = int(n_max) - 1
    window = 2 * math.ceil(_WINDOW_SDS * math.sqrt(big_n)) + 2 * _WINDOW_MARGIN + 1
    anchor = math.ceil(math.sqrt(_ANCHOR_LOG_REMAINDER * big_n)) + _WINDOW_MARGIN
    return min(static_size(window), static_size(big_n + 1)), min(static_size(anchor), static_size(big_n // 2 + 2))


def _chunk(window: int, anchor: int) -> int:
    return max(1, min(4096, _ELEMENT_BUDGET // (window + anchor)))


# --------------------------------------------------------------------------------------------------
# Kernels (float64, no validation; shapes (B,))
# --------------------------------------------------------------------------------------------------


def _log_clone_probability(eps0, clones: str):
    """(log c, log(1 − c)) of the clone probability model."""
    if clones == "fmt22":
        return -eps0, log1mexp(-eps0)
    # strong: c = 2/(e^{ε₀}+1), 1 − c = (1 − e^{−ε₀})/(1 + e^{−ε₀})
    return _LOG2 - jax.nn.softplus(eps0), log1mexp(-eps0) - jax.nn.softplus(-eps0)


def _window(eps0, n, window: int, clones: str):
    """The C window: values (B, W), mask, log Pr[C] and an upper bound on Pr[C outside the window]."""
    big_n = n - 1.0
    log_c, log_1mc = _log_clone_probability(eps0, clones)
    mean_c, mean_1mc = big_n * jnp.exp(log_c), big_n * jnp.exp(log_1mc)
    lo = jnp.clip(jnp.floor(mean_c) - window // 2, 0.0, jnp.maximum(big_n - (window - 1), 0.0))
    values = lo[:, None] + jnp.arange(window, dtype=jnp.float64)[None, :]
    valid = values <= big_n[:, None]
    log_w = jnp.where(valid, _log_binom_pmf(values, big_n[:, None], log_c[:, None], log_1mc[:, None]), -jnp.inf)

    def chernoff(x):  # Pr[C ≤ x] (x ≤ mean) or Pr[C ≥ x] (x ≥ mean) ≤ exp(−(n−1) KL(x/(n−1) ‖ c))
        xs = jnp.clip(x, 0.0, big_n)
        return jnp.exp(-(_bd0(xs, mean_c) + _bd0(big_n - xs, mean_1mc)))

    below, above = lo - 1.0, lo + window
    lower = jnp.where(lo > 0, jnp.where(below <= mean_c, chernoff(below), 1.0), 0.0)
    upper = jnp.where(above <= big_n, jnp.where(above >= mean_c, chernoff(above), 1.0), 0.0)
    return values, valid, log_w, lower + upper


def _log_delta(eps0, eps, values, valid, log_w, dropped, anchor: int, w_rel_err=None):
    """log δ(ε) of the clone pair summed over the window (see the module docstring); −inf once ε ≥ ε₀.

    ``log_w`` may be any (sub-normalised) log pmf of C over the window ``values`` (``valid`` a contiguous
    prefix of each row); ``dropped`` bounds Pr[C outside the window] and is added times δ_0 = α. An
    optional ``w_rel_err`` (same shape) bounds the relative error of each Pr[C]; its effect is added to
    the rounding allowance (on the safe side)."""
    active = eps < eps0
    e = jnp.where(active, eps, 0.0)
    log_alpha = e + log_expm1(jnp.where(active, eps0 - e, 1.0)) - jax.nn.softplus(eps0)
    em1 = jnp.expm1(e)
    theta = jnp.exp(log_expm1(e + eps0) - jax.nn.softplus(e) - log_expm1(eps0))  # t/(1+t) ∈ [½, 1)

    # Threshold path: k(C) − 1 = ⌊θ(C+1)⌋ ∈ [0, C]; log b_C(k−1) and log b_C(k).
    below = jnp.minimum(jnp.floor(theta[:, None] * (values + 1.0)), values)
    log_bm = jnp.where(valid, log_half_pmf(below, values), -jnp.inf)
    log_b = log_bm + jnp.log((values - below) / (below + 1.0))
    scale = jnp.max(log_bm, axis=1)  # b_C(k−1) ≥ b_C(k) since k−1 ≥ C/2
    bm, b = jnp.exp(log_bm - scale[:, None]), jnp.exp(log_b - scale[:, None])

    # L_C − L_{C+1} for each step inside the window, then L_C = L_top + Σ_{C' ≥ C} (L_C' − L_{C'+1}).
    kept = below[:, 1:] == below[:, :-1]
    step_down = jnp.where(kept, -0.5 * bm[:, :-1], 0.5 * b[:, :-1])
    step_down = jnp.where(valid[:, 1:], step_down, 0.0)
    rest = jnp.cumsum(step_down[:, ::-1], axis=1)[:, ::-1]
    rest = jnp.concatenate([rest, jnp.zeros_like(rest[:, :1])], axis=1)

    # Anchor: L at the top of the window, summed directly (K terms from its threshold).
    big_n = values[:, 0] + jnp.sum(valid, axis=1) - 1.0  # top C of the window
    top_below = jnp.minimum(jnp.floor(theta * (big_n + 1.0)), big_n)
    a = top_below[:, None] + 1.0 + jnp.arange(anchor, dtype=jnp.float64)[None, :]
    log_terms = log_half_pmf(a, big_n[:, None])
    top = jnp.sum(jnp.exp(log_terms - scale[:, None]), axis=1)

    tail = top[:, None] + rest  # L_C / e^scale
    alpha_bm = jnp.exp(log_alpha)[:, None] * bm
    per_c = alpha_bm - em1[:, None] * tail
    per_c = jnp.where(valid, jnp.maximum(per_c, 0.0), 0.0)
    weights = jnp.exp(log_w - jnp.max(log_w, axis=1)[:, None])
    total = jnp.sum(weights * per_c, axis=1)

    # Rounding allowance, added on the safe side (MATH §0.1). δ_C = α b − (e^ε−1) L cancels, so its error
    # scales with the magnitudes α b + (e^ε−1) L that enter it. Every b carries a relative error of about
    # u·(|log b| + c) (Loader's terms are O(|log b|) before they cancel) and the tree-shaped cumulative
    # sums about u per level. ρ_C below is 16× that estimate. Against mpmath sums (40-200 digits; n = 3·10³
    # …10⁷, ε₀ = 0.05…8, δ = 1e-60…1e-5) the error before the allowance was ≤ 1.6e-11 relative and at most
    # 1/10 of the allowance, which itself is 2e-12…9e-11 relative.
    levels = math.log2(values.shape[1] + anchor)
    rho = _ROUNDING * (jnp.abs(jnp.where(valid, log_bm, 0.0)) + 2.0 * levels + 32.0)
    size = alpha_bm + em1[:, None] * (top[:, None] + jnp.abs(tail))
    if w_rel_err is not None:  # a pmf computed elsewhere: its own error bound, relative to each Pr[C]
        rho = rho + jnp.where(valid, w_rel_err * (1.0 + rho), 0.0)
    allowance = jnp.sum(jnp.where(valid, weights * rho * size, 0.0), axis=1)

    log_window = scale + jnp.max(log_w, axis=1) + jnp.log(total + allowance)
    log_total = jnp.logaddexp(log_window, log_alpha + jnp.log(dropped))
    return jnp.where(active, jnp.minimum(log_total, 0.0), -jnp.inf)


@functools.partial(kernel_jit, xla_defaults=True, static_argnames=("window", "anchor", "clones"))
def _delta_kernel(eps0, n, eps, *, window: int, anchor: int, clones: str):
    values, valid, log_w, dropped = _window(eps0, n, window, clones)
    return jnp.exp(_log_delta(eps0, eps, values, valid, log_w, dropped, anchor))


def _start(eps0, n, delta):
    """A starting ε for the root find: a third of the FMT22 closed form (Thm 3.1), at most ε₀/2."""
    e0 = jnp.exp(jnp.minimum(eps0, 700.0))
    closed = jnp.log1p(jnp.tanh(eps0 / 2) * (8 * jnp.sqrt(e0 * jnp.log(4 / delta) / n) + 8 * e0 / n))
    guess = jnp.minimum(closed / 3.0, eps0 / 2.0)
    return jnp.log(jnp.where(jnp.isfinite(guess) & (guess > 0), guess, eps0 / 2.0))


def _solve_epsilon(eps0, delta, start, values, valid, log_w, dropped, anchor: int, w_rel_err=None):
    """Smallest ε with δ(ε) ≤ δ for the clone pair over a given window of C (root find on log ε)."""
    log_target = jnp.log(delta)
    zero_ok = _log_delta(eps0, jnp.zeros_like(eps0), values, valid, log_w, dropped, anchor,
                         w_rel_err) <= log_target

    def gap(log_eps):  # > 0 while ε is too small; clamped (δ = 0 above ε₀ would give −inf)
        log_d = _log_delta(eps0, jnp.exp(log_eps), values, valid, log_w, dropped, anchor, w_rel_err)
        g = jnp.maximum(log_d - log_target, -60.0)
        return jnp.where(zero_ok, log_eps - (start - 1.0), g)  # trivial root for the ε = 0 answers

    log_eps, found = solve_monotone(gap, start)
    eps = jnp.minimum(jnp.exp(log_eps) * (1.0 + _XTOL_MARGIN), eps0)  # δ(ε₀) = 0: ε₀ is always safe
    return jnp.where(zero_ok, 0.0, jnp.where(found, eps, eps0))


@functools.partial(kernel_jit, xla_defaults=True, static_argnames=("window", "anchor", "clones"))
def _epsilon_kernel(eps0, n, delta, *, window: int, anchor: int, clones: str):
    values, valid, log_w, dropped = _window(eps0, n, window, clones)
    return _solve_epsilon(eps0, delta, _start(eps0, n, delta), values, valid, log_w, dropped, anchor)


# --------------------------------------------------------------------------------------------------
# Arbitrary clone-count laws over a window (used by :mod:`jaxpriv.shuffle.personalized`)
# --------------------------------------------------------------------------------------------------


def _pmf_window(lo, top, log_pmf):
    values = lo[:, None] + jnp.arange(log_pmf.shape[1], dtype=jnp.float64)[None, :]
    valid = values <= top[:, None]
    return values, valid, jnp.where(valid, log_pmf, -jnp.inf)


@functools.partial(kernel_jit, xla_defaults=True, static_argnames=("anchor",))
def _pmf_delta_kernel(eps0, lo, top, log_pmf, w_rel_err, dropped, eps, *, anchor: int):
    values, valid, log_w = _pmf_window(lo, top, log_pmf)
    return jnp.exp(_log_delta(eps0, eps, values, valid, log_w, dropped, anchor, w_rel_err))


@functools.partial(kernel_jit, xla_defaults=True, static_argnames=("anchor",))
def _pmf_epsilon_kernel(eps0, lo, top, log_pmf, w_rel_err, dropped, delta, *, anchor: int):
    values, valid, log_w = _pmf_window(lo, top, log_pmf)
    mean = jnp.sum(jnp.exp(log_w) * values, axis=1)
    n_like = jnp.maximum(mean * jnp.exp(jnp.minimum(eps0, 700.0)), 2.0)  # the FMT22 n with the same E[C]
    start = _start(eps0, n_like, delta)
    return _solve_epsilon(eps0, delta, start, values, valid, log_w, dropped, anchor, w_rel_err)


def pmf_sizes(top_max: int) -> int:
    """Static anchor length for windows whose largest C is ``top_max`` (a power of two: few compilations)."""
    anchor = min(math.ceil(math.sqrt(_ANCHOR_LOG_REMAINDER * max(top_max, 1))) + _WINDOW_MARGIN, top_max // 2 + 2)
    return power_of_two(max(anchor, 64))


def pmf_delta(eps0, lo, top, log_pmf, dropped, epsilon, w_rel_err=None):
    """δ(ε) of the clone pair (target RR at ε₀) for an arbitrary law of the clone count C (float64 arrays).

    Row b: Pr[C = lo_b + j] = exp(log_pmf[b, j]) for lo_b + j ≤ top_b; ``dropped[b]`` ≥ Pr[C outside
    [lo_b, top_b]] is added times δ_0 (MATH §0.1); ``w_rel_err`` bounds the relative error of each pmf
    value and is absorbed into the allowance. No validation (internal; callers validate)."""
    with float64():
        anchor = pmf_sizes(int(np.max(top)))
        args = [jnp.asarray(a, dtype=jnp.float64) for a in (eps0, lo, top, log_pmf,
                np.zeros_like(log_pmf) if w_rel_err is None else w_rel_err, dropped, epsilon)]
        return as_output(_pmf_delta_kernel(*args, anchor=anchor))


def pmf_epsilon(eps0, lo, top, log_pmf, dropped, delta, w_rel_err=None):
    """Smallest ε with :func:`pmf_delta` (ε) ≤ δ, per row (same conventions as :func:`clones_epsilon`)."""
    with float64():
        anchor = pmf_sizes(int(np.max(top)))
        args = [jnp.asarray(a, dtype=jnp.float64) for a in (eps0, lo, top, log_pmf,
                np.zeros_like(log_pmf) if w_rel_err is None else w_rel_err, dropped, delta)]
        return as_output(_pmf_epsilon_kernel(*args, anchor=anchor))


# --------------------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------------------


def _validated(eps0, n, third_name, third, third_range, clones):
    if clones not in CLONES:
        raise ValueError(f"clones must be one of {sorted(CLONES)}, got {clones!r}")
    if not is_concrete(n):
        raise ValueError("n must be concrete (it fixes the static size of the summation window), not traced")
    lo, hi, lo_open, hi_open = third_range
    arrays = {
        "eps0": check_array("eps0", eps0, 0.0, np.inf, lo_open=True, worse="up"),
        "n": check_array("n", n, 2.0, np.inf, integer=True),
        third_name: check_array(third_name, third, lo, hi, lo_open=lo_open, hi_open=hi_open, worse="down"),
    }
    shape = check_broadcastable(**arrays)
    n_max = float(np.max(np.asarray(n, dtype=np.float64)))  # n is concrete (checked above)
    return shape, [jnp.broadcast_to(a, shape) for a in arrays.values()], n_max


def _run(make_kernel, shape, arrays, n_max, chunk_size, progress, what):
    """Evaluate ``make_kernel(window, anchor)`` on the flattened batch. Concrete inputs are grouped by the
    window their own n needs, so a small n in a large batch does not pay for a large one's window; groups
    too small to batch (< 16 rows, run row by row) share one program at the largest of their windows,
    because compiling a window's program (~1 s) costs more than summing a few rows over a wider window
    (milliseconds; the wider sum is as exact). Traced inputs share the largest n's window."""
    if not all(is_concrete(a) for a in arrays):
        window, anchor = _sizes(n_max)
        return as_output(make_kernel(window, anchor)(*(a.reshape(-1) for a in arrays)).reshape(shape))
    flat = [np.asarray(a, dtype=np.float64).reshape(-1) for a in arrays]
    distinct, inverse = np.unique(flat[1], return_inverse=True)
    sizes = np.array([_sizes(float(m)) for m in distinct])[inverse.reshape(-1)]
    _, group, count = np.unique(sizes, axis=0, return_inverse=True, return_counts=True)
    small = count[group.reshape(-1)] < 16
    if small.sum() > 1:
        sizes[small] = sizes[small].max(axis=0)
    out = np.empty(flat[0].size)
    for window, anchor in np.unique(sizes, axis=0):
        rows = np.flatnonzero((sizes[:, 0] == window) & (sizes[:, 1] == anchor))
        kernel = make_kernel(int(window), int(anchor))
        # A group smaller than the 16-row program runs row by row, as single calls would: padding 3 rows to
        # 16 would cost 16 rows' work (each row sums a window of thousands of terms).
        (out[rows],) = map_chunked(lambda *xs: (kernel(*xs),), [x[rows] for x in flat],
                                   chunk_size=chunk_size or _chunk(int(window), int(anchor)), progress=progress,
                                   description=what, alone_below=16)
    return as_output(out.reshape(shape))


def clones_delta(eps0, n, epsilon, clones: str = "fmt22", *, chunk_size=None, progress=None):
    """Exact δ(ε) of n shuffled ε₀-DP local reports by the clone dominating pair (MATH §3.1).

    δ(ε) = Σ_C Pr[C] Σ_a max(0, P_C(a) − e^ε Q_C(a)), C ~ Bin(n−1, c), with P_C, Q_C the count laws of the
    module docstring (Feldman, McMillan & Talwar, "Hiding among the clones", FOCS 2021, §4 and App. E;
    the inner sum is a difference of Bin(C, ½) tails at a*(C) = ⌊t(C+1)/(1+t)⌋ + 1,
    t = (e^ε q − (1−q))/(q − e^ε(1−q)), q = e^{ε₀}/(1+e^{ε₀})). δ = 0 for ε ≥ ε₀.

    Clone probability ``clones``:

    * ``"fmt22"`` — c = e^{−ε₀} (FMT21/22, Thm 3.1 and the numerical bound of its App. E): valid for every
      sequence of (adaptive) ε₀-DP local randomizers.
    * ``"strong"`` — c = 2/(e^{ε₀}+1) (Feldman, McMillan & Talwar, "Stronger privacy amplification by
      shuffling", SODA 2023; GSPA Lemma 1 with δ_i = 0). Its erratum (arXiv:2208.04591, errata to Lemma
      3.5 / Thms 3.1-3.2) restricts this to the class of ε₀-DP randomizers R that decompose, for every pair
      of inputs x⁰, x¹, as R(x⁰) = e^{ε₀}/(e^{ε₀}+1)·Q⁰ + 1/(e^{ε₀}+1)·Q¹, R(x¹) = 1/(e^{ε₀}+1)·Q⁰ +
      e^{ε₀}/(e^{ε₀}+1)·Q¹ and R(x) = 1/(e^{ε₀}+1)·(Q⁰ + Q¹) + (e^{ε₀}−1)/(e^{ε₀}+1)·LO(x) for every x,
      with the same Q⁰, Q¹ — binary randomized response is the canonical member. For a general ε₀-DP
      randomizer use ``"fmt22"``.

    Conservative (MATH §0.1): C is summed over a window of ≥ 13 standard deviations and the dropped mass
    (Chernoff bound, < 1e-36) is added, and so is an allowance for floating-point error (≤ 1e-10
    relative); every other approximation errs upward. Exact to ~1e-10 relative.

    Args:
      eps0: local privacy ε₀ > 0 (finite).
      n: number of users, an integer ≥ 2 (concrete: it sizes the summation window).
      epsilon: central ε ≥ 0.
      clones: ``"fmt22"`` (default) or ``"strong"``.
      chunk_size, progress: batching of large sweeps (see :mod:`jaxpriv._batching`).

    ``eps0, n, epsilon`` broadcast together; the result (float64) has their shape.

    Example:
      >>> from jaxpriv.shuffle import clones_delta
      >>> float(clones_delta(1.0, 10_000, 0.06889)) < 1e-8 < float(clones_delta(1.0, 10_000, 0.06887))
      True
    """
    with float64():
        shape, arrays, n_max = _validated(eps0, n, "epsilon", epsilon, (0.0, np.inf, False, False), clones)
        kernel = lambda w, a: functools.partial(_delta_kernel, window=w, anchor=a, clones=clones)  # noqa: E731
        return _run(kernel, shape, arrays, n_max, chunk_size, progress, "shuffle δ(ε)")


def clones_epsilon(eps0, n, delta, clones: str = "fmt22", *, chunk_size=None, progress=None):
    """Smallest ε ≥ 0 with :func:`clones_delta` (ε) ≤ δ: the exact shuffle amplification bound (MATH §3.1).

    A monotone root find on log ε (bracketing, then Illinois regula falsi safeguarded by bisection; see
    :func:`jaxpriv.calibrate.solve_monotone`) with the window of C computed once per configuration.
    Conservative: the returned ε is on the safe side of the root (δ(ε) ≤ δ), within ~1e-9 relative of
    it; 0 when already δ(0) ≤ δ; never above ε₀ (δ(ε₀) = 0). Reference values (FMT22 clones):
    n = 10³, ε₀ = 1, δ = 1e-8 → 0.230556; n = 10⁴ → 0.068880 (the APES paper's "UniS");
    n = 10⁴, ε₀ = 0.5, δ = 1e-6 → 0.020401.

    Args:
      eps0: local privacy ε₀ > 0 (finite).
      n: number of users, an integer ≥ 2 (concrete).
      delta: target δ ∈ (0, 1).
      clones: ``"fmt22"`` (default, any ε₀-DP randomizer) or ``"strong"`` (the restricted class of the
        FMT23 erratum; see :func:`clones_delta`).
      chunk_size, progress: batching of large sweeps.

    ``eps0, n, delta`` broadcast together; the result (float64) has their shape.

    Example:
      >>> from jaxpriv.shuffle import clones_epsilon
      >>> round(float(clones_epsilon(1.0, 10_000, 1e-8)), 6)
      0.06888
    """
    with float64():
        shape, arrays, n_max = _validated(eps0, n, "delta", delta, (0.0, 1.0, True, True), clones)
        kernel = lambda w, a: functools.partial(_epsilon_kernel, window=w, anchor=a, clones=clones)  # noqa: E731
        return _run(kernel, shape, arrays, n_max, chunk_size, progress, "shuffle ε(δ)")
