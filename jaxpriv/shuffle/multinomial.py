"""The exact multinomial clone pair of GSPA / E-APES and its computable Berry–Esseen bound (SPEC §3.3).

In the GSPA / E-APES model (seeds 001 and 003) every other user i becomes a clone of the target's x⁰
with probability p_i/2, of x¹ with probability p_i/2, and is uninformative otherwise, where
p_i = 2(1 − δ_i)/(1 + e^{ε_i}). The clone counts are

    (ξ₀, ξ₁) ~ Σ_i MultiBern(p_i/2, p_i/2, 1 − p_i),

and because each clone is x⁰ or x¹ with probability ½ independently of everything else, the 2-D law
factorises as Pr[ξ₀ = a, ξ₁ = c − a] = Pr[C = c]·Bin(a; c, ½) with C = ξ₀ + ξ₁ ~ Poisson-binomial(p).

This module provides

* :func:`clone_probabilities` — p_i from (ε_i, δ_i);
* :func:`lattice_logpmf` — the exact 2-D log-pmf of (ξ₀, ξ₁) on a window that carries all but a stated
  (≤ 1e-40) mass;
* :func:`lattice_gaussian_tv` — an *upper bound* τ on the true total-variation distance between that
  lattice law and the matched Gaussian (E-APES Lemma 3 / GSPA Lemma 2) discretised to unit cells;
  numerical errors (quadrature, rounding, truncation) are bounded and added, so τ ≥ the exact TV;
* :func:`gspa_eq14` — the paper's Eq. 14 quantity (½ × ½ boxes, sup of differences), for reproduction
  only: it is **not** a total-variation distance and must not be used as τ;
* :func:`eapes_tradeoff`, :func:`eapes_delta`, :func:`eapes_epsilon` — E-APES Theorem 3 / GSPA
  Theorem 2 with the unknown Berry–Esseen constant replaced by a computed τ, and its (ε, δ) curve.

Conventions. ``p`` is always the vector of the *other* users' clone probabilities (the target
excluded: n − 1 entries for n users), each in (0, 1]. Everything is float64 numpy/scipy (the windows
have data-dependent shapes, so nothing here is jit-compiled); results are numpy float64. Invalid input
raises ``ValueError`` naming the parameter and its valid range.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from scipy.special import expit, ndtr, ndtri
from scipy.stats import binom

from .._numerics import check_array
from .. import fdp
from .poisson_binomial import poisson_binomial_logpmf

__all__ = [
    "LatticeLaw",
    "clone_probabilities",
    "lattice_logpmf",
    "gaussian_cell_masses",
    "lattice_gaussian_tv",
    "gspa_eq14",
    "eapes_mu",
    "eapes_tradeoff",
    "eapes_delta",
    "eapes_epsilon",
]

_EPS = float(np.finfo(np.float64).eps)
_WINDOW_TAIL = 1e-40  # per-coordinate Bernstein tail mass allowed outside the 2-D window
_QUAD_ORDERS = (4, 8, 12, 16, 24, 32, 48, 64, 96, 128)


# ----------------------------------------------------------------------------------------------------
# validation
# ----------------------------------------------------------------------------------------------------


def _check_p(p) -> np.ndarray:
    arr = np.asarray(check_array("p", p, 0.0, 1.0, lo_open=True), dtype=np.float64)
    if arr.ndim == 0:
        arr = arr[None]
    if arr.ndim != 1:
        raise ValueError(f"p must be a 1-D array of clone probabilities in (0, 1], got shape {arr.shape}")
    return arr


def _check_tau(tau) -> np.ndarray:
    return np.asarray(check_array("tau", tau, 0.0, 1.0), dtype=np.float64)


def _check_delta_max(delta_max) -> np.ndarray:
    return np.asarray(check_array("delta_max", delta_max, 0.0, 1.0, hi_open=True), dtype=np.float64)


# ----------------------------------------------------------------------------------------------------
# clone probabilities and the lattice law
# ----------------------------------------------------------------------------------------------------


def clone_probabilities(local_epsilons, local_deltas=None) -> np.ndarray:
    """p_i = 2(1 − δ_i)/(1 + e^{ε_i}), the GSPA / E-APES clone probability of user i (SPEC §3.1, §3.3).

    Source: GSPA (seed 003) Theorem 1 / Lemma 1 and E-APES (seed 001) Lemma 2, Eq. (9): user i's
    output is a mixture with weight (1 − δ_i)/(1 + e^{ε_i}) on each of the target's two components.
    Evaluated as 2(1 − δ_i)·expit(−ε_i), which neither overflows nor cancels.

    Args:
        local_epsilons: ε_i ≥ 0 (array-like).
        local_deltas: δ_i ∈ [0, 1) (array-like, broadcast against ``local_epsilons``); default 0.

    Returns:
        float64 numpy array of p_i ∈ (0, 1] (it underflows to 0 only for ε_i > 745).
    """
    eps = np.asarray(check_array("local_epsilons", local_epsilons, 0.0), dtype=np.float64)
    if local_deltas is None:
        dl = np.zeros_like(eps)
    else:
        dl = np.asarray(check_array("local_deltas", local_deltas, 0.0, 1.0, hi_open=True), dtype=np.float64)
    try:
        eps, dl = np.broadcast_arrays(eps, dl)
    except ValueError:
        raise ValueError(
            f"shapes do not broadcast together: local_epsilons {eps.shape}, local_deltas {dl.shape}"
        ) from None
    return 2.0 * (1.0 - dl) * expit(-eps)


class LatticeLaw(NamedTuple):
    """The law of (ξ₀, ξ₁) on a square window.

    ``logpmf[i, j] = log Pr[ξ₀ = offset + i, ξ₁ = offset + j]`` (−inf off the support);
    ``outside`` is an upper bound on the mass not in the window (0 when it holds the whole support).
    """

    offset: int
    logpmf: np.ndarray
    outside: float


def _bernstein_radius(var: float, tail: float) -> float:
    """t with 2·exp(−t²/(2(var + t/3))) = tail (Bernstein, increments in [0, 1])."""
    L = math.log(2.0 / tail)
    return (2 * L / 3 + math.sqrt((2 * L / 3) ** 2 + 8 * L * var)) / 2


def lattice_logpmf(p, log_pmf_count=None) -> LatticeLaw:
    """Exact log-pmf of (ξ₀, ξ₁) = Σ_i MultiBern(p_i/2, p_i/2, 1 − p_i) (SPEC §3.3).

    Pr[ξ₀ = a, ξ₁ = b] = Pr[C = a + b]·Bin(a; a + b, ½), C ~ Poisson-binomial(p), with log Pr[C = c]
    from :func:`jaxpriv.shuffle.poisson_binomial_logpmf` (or ``log_pmf_count``) and the binomial log-pmf from
    ``scipy.stats.binom.logpmf`` (accurate to a few ulp even at c = 10⁴, unlike a gammaln difference).

    Window: ξ₀ and ξ₁ each range over [mean − t, mean + t] ∩ [0, c_max] with t the Bernstein radius
    for tail mass 1e-40 (mean = Σp_i/2, var = Σ(p_i/2)(1 − p_i/2)); for small n this is the whole
    support [0, n]² (then ``outside`` = 0). Otherwise ``outside`` ≤ 2·1e-40 + the trimmed C mass.

    Args:
        p: 1-D array of the other users' clone probabilities p_i ∈ (0, 1] (non-empty).
        log_pmf_count: optional precomputed 1-D array with log Pr[C = c] for c = 0, 1, …, len − 1
            (for example from a faster Poisson-binomial routine); its missing mass, 1 − Σ exp, is
            added to ``outside``.

    Returns:
        :class:`LatticeLaw` (offset, logpmf, outside).
    """
    p = _check_p(p)
    m = p.size
    extra = 0.0
    if log_pmf_count is None:
        window = poisson_binomial_logpmf(p)
        c_off, log_c, extra = window.lo, window.logpmf, window.dropped
    else:
        log_c = np.asarray(log_pmf_count, dtype=np.float64)
        if log_c.ndim != 1 or log_c.size == 0 or log_c.size > m + 1 or np.isnan(log_c).any() or (log_c > 1e-12).any():
            raise ValueError(
                f"log_pmf_count must be a 1-D array of log-probabilities (≤ 0) of length 1 … {m + 1}, "
                f"got shape {log_c.shape}"
            )
        c_off = 0
        extra = max(0.0, 1.0 - float(np.exp(log_c).sum()))
    c_max = c_off + log_c.size - 1

    mean = p.sum() / 2
    var = float(np.sum(p / 2 * (1 - p / 2)))
    t = _bernstein_radius(var, _WINDOW_TAIL)
    lo = max(0, math.floor(mean - t))
    hi = min(c_max, math.ceil(mean + t))
    outside = extra
    if lo > 0 or hi < c_max:
        outside += 2 * _WINDOW_TAIL
    size = hi - lo + 1
    x = np.arange(lo, hi + 1)
    a = x[:, None]
    c = a + x[None, :]
    inside = (c >= c_off) & (c <= c_max)
    cc = np.where(inside, c, c_off)
    with np.errstate(divide="ignore"):
        lp = log_c[cc - c_off] + binom.logpmf(a, cc, 0.5)
    lp = np.where(inside, lp, -np.inf)
    return LatticeLaw(lo, lp.reshape(size, size), float(outside))


# ----------------------------------------------------------------------------------------------------
# Gaussian masses of axis-aligned rectangles, with a proven quadrature error bound
# ----------------------------------------------------------------------------------------------------


class _Gauss2(NamedTuple):
    mean: float  # both coordinates
    sd: float  # marginal sd of each coordinate
    slope: float  # E[Y | X = u] = mean + slope·(u − mean)
    cond_sd: float  # sd of Y | X


def _matched_gaussian(p: np.ndarray) -> _Gauss2:
    """Mean Σp/2, Var = Σ(p/2)(1 − p/2), Cov = −Σp²/4 (E-APES Theorem 2's Σ).

    The conditional variance Var(Y|X) = (Var − |Cov|)(Var + |Cov|)/Var with Var − |Cov| = Σp(1 − p)/2,
    written so that it does not cancel when every p_i is close to 1.
    """
    var = float(np.sum(p / 2 * (1 - p / 2)))
    cov = -float(np.sum(p * p)) / 4
    gap = float(np.sum(p * (1 - p))) / 2
    cond_var = gap * (var - cov) / var
    return _Gauss2(float(p.sum()) / 2, math.sqrt(var), cov / var, math.sqrt(cond_var))


def _phi_diff(lo_arg, hi_arg):
    """Φ(hi) − Φ(lo) for hi ≥ lo, from the tail that does not cancel."""
    upper = lo_arg > 0
    return np.where(upper, ndtr(-lo_arg) - ndtr(-hi_arg), ndtr(hi_arg) - ndtr(lo_arg))


def _quad_error_bound(g: _Gauss2, wx: float, wy: float, order: int) -> float:
    """Bound on |exact − Gauss–Legendre| for ONE rectangle mass (outer width wx, inner width wy).

    The rectangle mass is ∫_{x₀}^{x₀+wx} f(u) du with f(u) = φ_σ(u − m)·[Φ((y₁ − m(u))/s) − Φ((y₀ − m(u))/s)],
    an entire function. Trefethen (Approximation Theory and Approximation Practice, Thm 19.3, stated there
    for n + 1 nodes; also Fungrim "Gaussian quadrature"): if f∘(affine map of [−1, 1]) is analytic in the
    Bernstein ellipse E_ρ with |f| ≤ M there, the N-point Gauss rule errs by
    ≤ (64/15)·M·ρ^{−2N}/(1 − ρ^{−2}), times the Jacobian wx/2. On E_ρ, |Im u| ≤ η = (wx/4)(ρ − 1/ρ);
    |φ(w)| ≤ e^{(Im w)²/2}/√(2π), and the Φ difference is an integral of φ along a real segment of length
    wy/s at imaginary part −slope·Im(u)/s, so
    M ≤ wy/(2π σ s)·exp(η²/2·(1/σ² + slope²/s²)). The bound is minimised over ρ on a grid.
    """
    if g.cond_sd <= 0:
        return math.inf
    rho = np.geomspace(1.0 + 1e-6, 1e8, 4000)
    eta = wx / 4 * (rho - 1 / rho)
    log_m = math.log(wy / (2 * math.pi * g.sd * g.cond_sd)) + eta**2 / 2 * (1 / g.sd**2 + g.slope**2 / g.cond_sd**2)
    log_err = math.log(wx / 2 * 64 / 15) + log_m - 2 * order * np.log(rho) - np.log1p(-(rho**-2.0))
    return float(np.exp(np.min(log_err)))


def _rect_masses(g: _Gauss2, x_lo: np.ndarray, wx: float, y_lo: np.ndarray, wy: float, budget: float):
    """Gaussian masses of [x_lo_i, x_lo_i + wx] × [y_lo_j, y_lo_j + wy] and a bound on the total error.

    The Gauss–Legendre order is the smallest in ``_QUAD_ORDERS`` whose per-rectangle bound times the
    number of rectangles is ≤ ``budget`` (else the largest); returns (masses, error_bound) where
    error_bound = (#rectangles)·(per-rectangle quadrature bound) + rounding allowance.
    """
    n_rect = x_lo.size * y_lo.size
    for order in _QUAD_ORDERS:
        per = _quad_error_bound(g, wx, wy, order)
        if per * n_rect <= budget:
            break
    nodes, weights = np.polynomial.legendre.leggauss(order)
    out = np.empty((x_lo.size, y_lo.size))
    s = g.cond_sd
    chunk = max(1, int(4_000_000 // max(1, order * y_lo.size)))
    for start in range(0, x_lo.size, chunk):
        xs = x_lo[start : start + chunk]
        u = xs[:, None] + wx / 2 * (nodes[None, :] + 1)  # (cx, order)
        w = (wx / 2) * weights[None, :] * np.exp(-0.5 * ((u - g.mean) / g.sd) ** 2) / (g.sd * math.sqrt(2 * math.pi))
        cm = g.mean + g.slope * (u - g.mean)  # conditional means
        lo_arg = (y_lo[None, None, :] - cm[:, :, None]) / s
        hi_arg = (y_lo[None, None, :] + wy - cm[:, :, None]) / s
        out[start : start + chunk] = np.einsum("ig,igj->ij", w, _phi_diff(lo_arg, hi_arg))
    # Rounding allowance (an estimate, not a proof): ndtr is accurate to a few ulp; a Φ difference
    # Φ(b) − Φ(a), b − a = wy/s, taken from the non-cancelling tail loses at most a factor
    # Φ(a)/(Φ(b) − Φ(a)) ≲ 1 + 1.3·s/wy in relative accuracy (Mills' ratio); the weighted sum adds ≲ N ulp.
    rel = (64 + 64 * (1 + s / wy)) * _EPS
    fp = rel * float(out.sum()) + 1e-300 * n_rect
    return out, per * n_rect + fp


def _degenerate_masses(p: np.ndarray, offset: int, size: int):
    """Every p_i = 1: ξ₀ + ξ₁ = n exactly and the matched Gaussian lives on the line x + y = n with
    X ~ N(n/2, n/4). That line crosses cell (x, n − x) corner to corner, so the cell gets
    Pr[X ∈ [x − ½, x + ½]]; every other cell gets 0."""
    m = p.size
    mean, sd = m / 2, math.sqrt(m / 4)
    x = np.arange(offset, offset + size)
    q = np.zeros((size, size))
    y = m - x
    ok = (y >= offset) & (y < offset + size)
    q[x[ok] - offset, y[ok] - offset] = _phi_diff((x[ok] - 0.5 - mean) / sd, (x[ok] + 0.5 - mean) / sd)
    return q, 64 * _EPS


def gaussian_cell_masses(p, offset: int, size: int, budget: float = 1e-13):
    """Masses of the matched Gaussian (E-APES Lemma 3) on the unit cells centred on the lattice window.

    Cell (i, j) = [offset + i − ½, offset + i + ½] × [offset + j − ½, offset + j + ½]. The Gaussian has
    mean (Σp/2, Σp/2), variances Σ(p/2)(1 − p/2) and covariance −Σp²/4. Each mass is
    ∫ φ_X(u)·[Φ((y + ½ − E[Y|u])/s) − Φ((y − ½ − E[Y|u])/s)] du over the cell's x-interval, by a
    Gauss–Legendre rule whose order is chosen from a proven analytic error bound (see
    ``_quad_error_bound``).

    Returns:
        (masses, error_bound): masses is a (size, size) array; error_bound bounds Σ_cells |error|.
    """
    p = _check_p(p)
    g = _matched_gaussian(p)
    if g.cond_sd == 0.0:
        return _degenerate_masses(p, offset, size)
    edges = np.arange(offset, offset + size, dtype=np.float64) - 0.5
    return _rect_masses(g, edges, 1.0, edges, 1.0, budget)


def lattice_gaussian_tv(p, *, return_parts: bool = False):
    """Upper bound τ on the total variation between the lattice law and the discretised matched Gaussian.

    Source: E-APES (seed 001) Lemma 3 and GSPA (seed 003) Lemma 2 assert ‖P̃ − Q̃‖_TV ≤ C/√m with an
    unknown C; SPEC §3.3 (a) replaces it by a number. A lattice law and a continuous Gaussian are at TV
    distance 1, so the Gaussian is first discretised: every lattice point k ∈ ℤ² receives the Gaussian
    mass Q_k of its unit cell [k₀ ± ½] × [k₁ ± ½] (the cells tile ℝ²). Discretising is post-processing,
    so T(P_d, Q_d) ≥ T(N(μ₀, Σ), N(μ₁, Σ)) = G_μ and the proof of Theorem 3 goes through with
    τ = TV(P̃, Q̃_d) (the shift by (1, 0) or (0, 1) and the swap of coordinates leave it unchanged).

    Quantity:  TV = ½ Σ_{k ∈ ℤ²} |P(k) − Q_k|
                  = ½ Σ_{k ∈ supp P} |P(k) − Q_k| + ½ (Gaussian mass outside all support cells).

    Computed on the window W of :func:`lattice_logpmf` as the upper bound

        τ = ½ Σ_{k∈W} |P̂(k) − Q̂_k| + ½ P_out + ½ max(0, 1 − Σ_{k∈W} Q̂_k) + E,

    using |P(k) − Q_k| ≤ P(k) + Q_k off W; P_out = ``LatticeLaw.outside`` (a proven tail bound) and
    E = (quadrature bound + rounding allowance of the cell masses) + (4m + 64)·eps for the rounding of
    P̂ (the Poisson-binomial recursion). Each |Q̂ − Q| enters at most twice with weight ½. The result is
    clipped to [0, 1]. (With every p_i = 1 the Gaussian is degenerate and handled exactly; see
    ``_degenerate_masses``.)

    Args:
        p: 1-D array of the other users' clone probabilities p_i ∈ (0, 1].
        return_parts: also return a dict with the pieces (sum, outside masses, error allowance).

    Returns:
        τ as a numpy float64 scalar (and the parts dict when asked).
    """
    p = _check_p(p)
    law = lattice_logpmf(p)
    size = law.logpmf.shape[0]
    q, q_err = gaussian_cell_masses(p, law.offset, size)
    pk = np.exp(law.logpmf)
    body = 0.5 * float(np.abs(pk - q).sum())
    q_out = max(0.0, 1.0 - float(q.sum()))
    p_err = (4 * p.size + 64) * _EPS
    err = q_err + p_err
    tau = min(1.0, body + 0.5 * law.outside + 0.5 * q_out + err)
    tau = np.float64(tau)
    if return_parts:
        return tau, {"half_abs_sum": body, "gauss_outside": q_out, "lattice_outside": law.outside,
                     "error_allowance": err, "window": (law.offset, size)}
    return tau


def gspa_eq14(p):
    """The GSPA paper's Eq. 14 (E-APES Eq. 15) quantity, for reproducing its figure — NOT a TV distance.

    sup_{(k₀, k₁)} |Pr[ξ₀ = k₀, ξ₁ = k₁] − h(k₀, k₁)| with
    h(k₀, k₁) = G(k₀ + ½, k₁ + ½) − G(k₀ + ½, k₁) − G(k₀, k₁ + ½) + G(k₀, k₁), G the CDF of the matched
    Gaussian, i.e. h is the Gaussian mass of the ½ × ½ box [k₀, k₀ + ½] × [k₁, k₁ + ½]. Both the quarter
    box and the sup (instead of ½Σ) are the paper's; SPEC §3.3 records that this is not a total-variation
    distance (it is neither ≥ nor ≤ the TV in general) and it must not be used as τ.

    The sup is taken over the window of :func:`lattice_logpmf` (outside it both terms are < 1e-40).
    The paper's "p₀ = (1 − δ₀)/(1 + e^{ε₀})" is p_i/2 in this parametrisation.

    Args:
        p: 1-D array of the other users' clone probabilities p_i ∈ (0, 1].

    Returns:
        numpy float64 scalar.
    """
    p = _check_p(p)
    law = lattice_logpmf(p)
    g = _matched_gaussian(p)
    size = law.logpmf.shape[0]
    corners = np.arange(law.offset, law.offset + size, dtype=np.float64)
    if g.cond_sd == 0.0:
        # degenerate line x + y = n: the box [k₀, k₀+½]×[k₁, k₁+½] meets it only at a corner point
        h = np.zeros((size, size))
    else:
        h, _ = _rect_masses(g, corners, 0.5, corners, 0.5, 1e-15)
    return np.float64(np.max(np.abs(np.exp(law.logpmf) - h)))


# ----------------------------------------------------------------------------------------------------
# E-APES Theorem 3 with a computed τ
# ----------------------------------------------------------------------------------------------------


def eapes_mu(p) -> np.float64:
    """μ = 2/√(Σ_i p_i) (E-APES Theorem 2 / GSPA Lemma 3: T(N(μ₀, Σ), N(μ₁, Σ)) = G_μ).

    Equal to SPEC §3.3's √(2/Σ(1 − δ_i)/(1 + e^{ε_i})) over the other users.
    """
    p = _check_p(p)
    return np.float64(2.0 / math.sqrt(float(p.sum())))


def eapes_tradeoff(alpha, p, tau, delta_max):
    """E-APES Theorem 3 (GSPA Theorem 2) trade-off lower bound with a computed τ (SPEC §3.3).

    T(α) ≥ δ_max(1 − α) + (1 − δ_max)·max(0, G_μ(min(α + τ, 1)) − τ),  μ = 2/√(Σ p_i),

    clipped to [0, 1 − α]. G_μ(α) = Φ(Φ⁻¹(1 − α) − μ) (:func:`jaxpriv.fdp.gaussian_tradeoff`). τ should
    be :func:`lattice_gaussian_tv` (a Berry–Esseen constant or the Eq. 14 number is not a valid τ).
    This is the paper's formula as stated; see :func:`eapes_delta` for the (ε, δ) curve used for
    accounting, which treats δ_max more conservatively.

    Args:
        alpha: type-I error α ∈ [0, 1] (array-like).
        p: 1-D array of the other users' clone probabilities p_i ∈ (0, 1].
        tau: τ ∈ [0, 1] (array-like, broadcast against ``alpha``).
        delta_max: max_i δ_i ∈ [0, 1) (array-like, broadcast).

    Returns:
        float64 numpy array of the lower bound on the type-II error, non-increasing in α.
    """
    alpha = np.asarray(check_array("alpha", alpha, 0.0, 1.0), dtype=np.float64)
    mu = eapes_mu(p)
    tau = _check_tau(tau)
    dm = _check_delta_max(delta_max)
    try:
        alpha, tau, dm = np.broadcast_arrays(alpha, tau, dm)
    except ValueError:
        raise ValueError(f"shapes do not broadcast together: alpha {alpha.shape}, tau {tau.shape}, "
                         f"delta_max {dm.shape}") from None
    shifted = np.minimum(alpha + tau, 1.0)
    g = np.asarray(fdp.gaussian_tradeoff(mu, shifted), dtype=np.float64)
    val = dm * (1 - alpha) + (1 - dm) * np.maximum(g - tau, 0.0)
    return np.clip(val, 0.0, 1.0 - alpha)


def _pure_delta_upper(mu: float, tau: np.ndarray, eps: np.ndarray) -> np.ndarray:
    """U(ε) ≥ sup_{α∈[0,1]} [1 − g(α) − e^ε α] for g(α) = max(0, G_μ(min(α + τ, 1)) − τ).

    See :func:`eapes_delta` for the derivation. Rounded up.
    """
    eps = np.asarray(eps, dtype=np.float64)
    gd = np.asarray(fdp.gdp_delta(mu, eps), dtype=np.float64)
    with np.errstate(over="ignore"):
        a_branch = gd + (1 + np.exp(eps)) * tau * (1 + 4 * _EPS)
    b_star = ndtr(-eps / mu - mu / 2)
    g_tau = np.asarray(fdp.gaussian_tradeoff(mu, tau), dtype=np.float64) * (1 - 8 * _EPS)
    b_branch = 1 + tau - g_tau
    u = np.where(b_star >= tau * (1 - 1e-9), a_branch, b_branch)
    return np.minimum(u * (1 + 4 * _EPS), 1.0)


def eapes_delta(p, tau, delta_max, epsilon):
    """δ(ε) implied by E-APES Theorem 3 with a computed τ — a rigorous upper bound (SPEC §3.3, §3.1).

    Accounting (conservative in δ_max): the target's δ_max mass is treated as fully revealing,
    δ(ε) = δ_max + (1 − δ_max)·δ_g(ε) (the SPEC §3.1 rule δ_t + (1 − δ_t)·δ_pure). This dominates the
    conversion of :func:`eapes_tradeoff`'s mixture: for f = δ_m(1 − α) + (1 − δ_m)g,
    sup_α[1 − f(α) − e^ε α] = sup_α[(1 − δ_m)(1 − g(α)) − (e^ε − δ_m)α] ≤ (1 − δ_m)δ_g(ε), since
    e^ε − δ_m ≥ (1 − δ_m)e^ε for ε ≥ 0.

    Pure part. g(α) = max(0, G_μ(α + τ) − τ) (G_μ := 0 beyond 1) is symmetric in the two neighbours
    (swap ξ₀ ↔ ξ₁), so f-DP ⇒ (ε, δ_g(ε))-DP with δ_g(ε) = sup_{α∈[0,1]} [1 − g(α) − e^ε α]
    (Dong, Roth & Su 2022, Prop. 2.12). Since 1 − max(0, x) ≤ 1 − x, substituting b = α + τ,
        δ_g(ε) ≤ (1 + e^ε)τ + sup_{b ≥ τ} [1 − G_μ(b) − e^ε b].
    The bracket is concave in b with maximiser b* = Φ(−ε/μ − μ/2) (where −G_μ'(b) = e^ε), and its
    value at b* is δ_μ(ε) = gdp_delta(μ, ε). Hence
        δ_g(ε) ≤ U(ε) = (1 + e^ε)τ + δ_μ(ε)      if b* ≥ τ,
                        1 + τ − G_μ(τ)            if b* < τ (the bracket peaks at b = τ),
    capped at 1. U is continuous and non-increasing (dU/dε = e^ε(τ − b*) ≤ 0 on the first branch, the
    second is constant), so ε(δ) is a monotone root find, and δ(ε) never falls below the floor
    δ_max + (1 − δ_max)(1 + τ − G_μ(τ)). In particular δ(ε) ≥ δ_μ(ε) (pure GDP) always, and
    δ(ε) ≤ δ_max + (1 − δ_max)(δ_μ(ε) + (1 + e^ε)τ). The first branch is used unless the computed b* is
    below τ(1 − 1e-9), so a rounding of b* cannot select the smaller branch wrongly; δ_μ is the
    rounded-up ``gdp_delta`` and the other terms are rounded up by a few ulp.

    Args:
        p: 1-D array of the other users' clone probabilities p_i ∈ (0, 1].
        tau: τ ∈ [0, 1], normally :func:`lattice_gaussian_tv` (array-like).
        delta_max: max_i δ_i ∈ [0, 1) (array-like).
        epsilon: ε ≥ 0 (array-like); all broadcast together.

    Returns:
        float64 numpy array of δ ∈ [0, 1].
    """
    mu = float(eapes_mu(p))
    tau = _check_tau(tau)
    dm = _check_delta_max(delta_max)
    eps = np.asarray(check_array("epsilon", epsilon, 0.0), dtype=np.float64)
    try:
        tau, dm, eps = np.broadcast_arrays(tau, dm, eps)
    except ValueError:
        raise ValueError(f"shapes do not broadcast together: tau {tau.shape}, delta_max {dm.shape}, "
                         f"epsilon {eps.shape}") from None
    pure = _pure_delta_upper(mu, tau, eps)
    return np.minimum(dm + (1 - dm) * pure * (1 + 2 * _EPS), 1.0)


def eapes_epsilon(p, tau, delta_max, delta):
    """Smallest ε (up to bisection tolerance, rounded up) with :func:`eapes_delta` ≤ δ.

    δ(ε) is non-increasing (see :func:`eapes_delta`), so ε is found by 200 bisection steps on
    [0, ε_hi], ε_hi = max(0, μ(z + 10⁻⁶(1 + |z|) − μ/2)), z = −Φ⁻¹(τ) (there b* < τ, i.e. δ has reached
    its floor; for τ = 0 the ``fdp.gdp_epsilon`` bracket for δ' = (δ − δ_max)/(1 − δ_max)); the upper
    end, which satisfies δ(ε) ≤ δ, is returned. Returns ``inf`` when δ is below the floor
    δ_max + (1 − δ_max)(1 + τ − G_μ(τ)) (no finite ε is certified), and 0 when δ(0) ≤ δ. With τ = 0 this
    is ``fdp.gdp_epsilon`` after removing δ_max.

    Args:
        p: 1-D array of the other users' clone probabilities p_i ∈ (0, 1].
        tau: τ ∈ [0, 1] (array-like).
        delta_max: max_i δ_i ∈ [0, 1) (array-like).
        delta: target δ ∈ (0, 1) (array-like); all broadcast together.

    Returns:
        float64 numpy array of ε ≥ 0 (or inf).
    """
    mu = float(eapes_mu(p))
    tau = _check_tau(tau)
    dm = _check_delta_max(delta_max)
    delta = np.asarray(check_array("delta", delta, 0.0, 1.0, lo_open=True, hi_open=True), dtype=np.float64)
    try:
        tau, dm, delta = np.broadcast_arrays(tau, dm, delta)
    except ValueError:
        raise ValueError(f"shapes do not broadcast together: tau {tau.shape}, delta_max {dm.shape}, "
                         f"delta {delta.shape}") from None
    tau, dm, delta = (np.array(v, dtype=np.float64) for v in (tau, dm, delta))

    def dfun(e):
        return np.minimum(dm + (1 - dm) * _pure_delta_upper(mu, tau, e) * (1 + 2 * _EPS), 1.0)

    pos = tau > 0
    with np.errstate(divide="ignore"):
        z = -ndtri(np.where(pos, tau, 0.5))
    # τ > 0: at ε_hi the maximiser b* = Φ(−ε/μ − μ/2) is safely below τ, so δ(ε_hi) is the floor.
    hi_floor = np.maximum(mu * (z + 1e-6 * (1 + np.abs(z)) - mu / 2), 0.0)
    # τ = 0: the fdp bracket for the pure target δ' = (δ − δ_max)/(1 − δ_max) (δ_μ(ε_hi) < δ').
    target = (delta - dm) / (1 - dm)
    safe_target = np.clip(target, 1e-300, 0.5)
    hi_gdp = mu * mu / 2 + mu * (1.0 - ndtri(safe_target))
    hi = np.where(pos, hi_floor, hi_gdp)
    ok_hi = dfun(hi) <= delta
    for _ in range(30):  # only τ = 0 rounding stragglers can need this
        grow = ~ok_hi & ~pos & (target > 0)
        if not grow.any():
            break
        hi = np.where(grow, 2 * hi + 1e-3, hi)
        ok_hi = dfun(hi) <= delta
    lo = np.zeros_like(hi)
    zero_ok = dfun(lo) <= delta
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        good = dfun(mid) <= delta
        hi = np.where(good, mid, hi)
        lo = np.where(good, lo, mid)
    out = np.where(zero_ok, 0.0, hi)
    return np.where(ok_hi, out, np.inf)
