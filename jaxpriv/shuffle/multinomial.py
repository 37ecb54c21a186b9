"""The exact multinomial clone pair of GSPA / E-APES and its computable Berry–Esseen bound (MATH §3.3).

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
  numerical errors (quadrature, rounding, summation, truncation) are bounded and added, so τ ≥ the
  exact TV;
* :func:`gspa_eq14` — the paper's Eq. 14 quantity (½ × ½ boxes, sup of differences), for reproduction
  only: it is **not** a total-variation distance and must not be used as τ;
and :mod:`jaxpriv.shuffle.eapes` uses τ in E-APES Theorem 3 / GSPA Theorem 2 (the unknown Berry–Esseen
constant replaced by a computed τ) and its (ε, δ) curve.

Conventions. ``p`` is always the vector of the *other* users' clone probabilities (the target
excluded: n − 1 entries for n users), each in (0, 1]. Invalid input raises ``ValueError`` naming the
parameter and its valid range; results are numpy float64.

How it is computed. The window sizes depend on the data (the Bernstein radius of p), so they are
decided on the host in numpy, together with the scalar quantities (matched Gaussian, quadrature order
from its proven error bound). The heavy W × W work runs in float64 jitted JAX kernels with *static*
shapes: the window is padded to :func:`jaxpriv._batching.static_size` (a few sizes per octave) and
masked, so a sweep over p of similar sizes reuses one compiled program. The TV bound and Eq. 14 stream
over blocks of rows (``lax.map``) and never hold a W × W array; the binomial factor is Loader's
saddle-point form shared with :mod:`jaxpriv.shuffle.clones`.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import jax.numpy as jnp
import numpy as np
from jax import lax

from .._batching import static_size
from .._numerics import check_array, float64, kernel_jit
from .clones import gspa_clone_probabilities, log_half_pmf
from .poisson_binomial import poisson_binomial_logpmf

__all__ = [
    "check_clone_probabilities",
    "LatticeLaw",
    "clone_probabilities",
    "lattice_logpmf",
    "gaussian_cell_masses",
    "lattice_gaussian_tv",
    "gspa_eq14",
]

_EPS = float(np.finfo(np.float64).eps)
_WINDOW_TAIL = 1e-40  # per-coordinate Bernstein tail mass allowed outside the 2-D window
_QUAD_ORDERS = (4, 8, 12, 16, 24, 32, 48, 64, 96, 128)
_ELEMENTS = 1 << 20  # rows × nodes × columns per block of the cell kernel (bounded temporaries)
_SQRT_2PI = math.sqrt(2.0 * math.pi)
_SQRT_HALF = math.sqrt(0.5)


# ----------------------------------------------------------------------------------------------------
# validation
# ----------------------------------------------------------------------------------------------------


def check_clone_probabilities(p) -> np.ndarray:
    """``p`` as a 1-D float64 array of clone probabilities in (0, 1]; ``ValueError`` naming ``p`` otherwise."""
    arr = np.asarray(check_array("p", p, 0.0, 1.0, lo_open=True), dtype=np.float64)
    if arr.ndim == 0:
        arr = arr[None]
    if arr.ndim != 1:
        raise ValueError(f"p must be a 1-D array of clone probabilities in (0, 1], got shape {arr.shape}")
    return arr


# ----------------------------------------------------------------------------------------------------
# clone probabilities
# ----------------------------------------------------------------------------------------------------


def clone_probabilities(local_epsilons, local_deltas=None) -> np.ndarray:
    """p_i = 2(1 − δ_i)/(1 + e^{ε_i}), the GSPA / E-APES clone probability of user i (MATH §3.1, §3.3).

    Source: GSPA (seed 003) Theorem 1 / Lemma 1 and E-APES (seed 001) Lemma 2, Eq. (9): user i's
    output is a mixture with weight (1 − δ_i)/(1 + e^{ε_i}) on each of the target's two components.
    Validates its inputs, then :func:`jaxpriv.shuffle.clones.gspa_clone_probabilities`.

    Args:
        local_epsilons: ε_i ≥ 0 (array-like).
        local_deltas: δ_i ∈ [0, 1) (array-like, broadcast against ``local_epsilons``); default 0.

    Returns:
        float64 numpy array of p_i ∈ (0, 1] (it underflows to 0 only for ε_i > 745).

    Example:
        >>> from jaxpriv.shuffle.multinomial import clone_probabilities
        >>> round(float(clone_probabilities(1.0, 1e-3)), 6)
        0.537345
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
    return gspa_clone_probabilities(eps, dl)


class LatticeLaw(NamedTuple):
    """The law of (ξ₀, ξ₁) on a square window.

    ``logpmf[i, j] = log Pr[ξ₀ = offset + i, ξ₁ = offset + j]`` (−inf off the support);
    ``outside`` is an upper bound on the mass not in the window (0 when it holds the whole support).
    """

    offset: int
    logpmf: np.ndarray
    outside: float


# ----------------------------------------------------------------------------------------------------
# JAX kernels on a padded window (static width, masked by the true size)
# ----------------------------------------------------------------------------------------------------


def _lattice_rows(rows, log_c, c_off, c_len, lo, size, width: int):
    """log Pr[ξ₀ = lo + i, ξ₁ = lo + j] for i ∈ ``rows`` (R,), j < ``width``: log Pr[C = c] + log Bin(i; c, ½),
    −inf off the count window [c_off, c_off + c_len) and outside the true ``size`` × ``size`` window."""
    cols = jnp.arange(width)
    a = lo + rows[:, None]
    c = a + (lo + cols)[None, :]
    k = c - c_off
    inside = (k >= 0) & (k < c_len) & (rows[:, None] < size) & (cols[None, :] < size)
    log_count = jnp.take(log_c, jnp.clip(k, 0, log_c.shape[0] - 1))
    a_f, c_f = a.astype(jnp.float64), jnp.where(inside, c, a).astype(jnp.float64)
    return jnp.where(inside, log_count + log_half_pmf(a_f, c_f), -jnp.inf)


def _cell_rows(rows, gauss, nodes, weights, x0, wx, y0, wy, width: int):
    """Gauss–Legendre masses of [x0 + i, x0 + i + wx] × [y0 + j, y0 + j + wy] (i ∈ ``rows``, j < ``width``).

    The inner integral is a Φ difference taken from the tail that does not cancel: Φ(−|t|) is
    ½ erfc(|t|/√2) (``ndtr`` without its erf branch). Each cell evaluates its own two edges: sharing an
    edge between neighbouring cells through shifted slices is 4× slower in XLA's CPU fusion (measured).
    """
    mean, sd, slope, s = gauss[0], gauss[1], gauss[2], gauss[3]
    u = (x0 + rows.astype(jnp.float64))[:, None] + wx / 2 * (nodes[None, :] + 1)  # (R, N)
    w = (wx / 2) * weights[None, :] * jnp.exp(-0.5 * ((u - mean) / sd) ** 2) / (sd * _SQRT_2PI)
    cm = (mean + slope * (u - mean))[:, :, None]  # conditional means
    y_lo = y0 + jnp.arange(width, dtype=jnp.float64)
    t_lo, t_hi = (y_lo - cm) / s, (y_lo + wy - cm) / s  # (R, N, width)
    tail_lo = 0.5 * lax.erfc(jnp.abs(t_lo) * _SQRT_HALF)
    tail_hi = 0.5 * lax.erfc(jnp.abs(t_hi) * _SQRT_HALF)
    # t_lo > 0: Φ(−t_lo) − Φ(−t_hi); else Φ(t_hi) − Φ(t_lo) with Φ(t_lo) = tail_lo.
    diff = jnp.where(t_lo > 0, tail_lo - tail_hi, jnp.where(t_hi > 0, 1.0 - tail_hi, tail_hi) - tail_lo)
    return jnp.sum(w[:, :, None] * diff, axis=1)


def _block_rows(order: int, width: int) -> int:
    """Rows per block: a power of two keeping rows × nodes × columns near ``_ELEMENTS``."""
    fit = max(1, _ELEMENTS // (order * width))
    return min(1 << (fit.bit_length() - 1), 1 << (width - 1).bit_length())


@functools.partial(kernel_jit, static_argnames=("width", "rows", "mode"))
def _window_kernel(log_c, c_off, c_len, lo, size, gauss, nodes, weights, x0, wx, y0, wy, *,
                   width: int, rows: int, mode: str):
    """Streams over blocks of ``rows`` rows of the padded window and returns, by ``mode``:

    * ``"cells"``: the Gaussian masses (width, width) (0 outside the true window);
    * ``"tv"``: per-row Σ_j |P − Q| and Σ_j Q, shape (2, width) (summed on the host, see the TV bound);
    * ``"eq14"``: max |P − Q| over the window.
    """
    blocks = -(-width // rows)

    def block(start):
        r = start + jnp.arange(rows)
        valid = (r[:, None] < size) & (jnp.arange(width)[None, :] < size)
        q = jnp.where(valid, _cell_rows(r, gauss, nodes, weights, x0, wx, y0, wy, width), 0.0)
        if mode == "cells":
            return q
        pk = jnp.exp(_lattice_rows(r, log_c, c_off, c_len, lo, size, width))  # 0 off the window
        if mode == "tv":
            return jnp.stack([jnp.sum(jnp.abs(pk - q), axis=1), jnp.sum(q, axis=1)])
        return jnp.max(jnp.abs(pk - q))

    out = lax.map(block, jnp.arange(blocks) * rows)
    if mode == "cells":
        return out.reshape(blocks * rows, width)[:width]
    if mode == "tv":
        return jnp.moveaxis(out, 1, 0).reshape(2, blocks * rows)[:, :width]
    return jnp.max(out)


@functools.partial(kernel_jit, static_argnames=("width",))
def _lattice_kernel(log_c, c_off, c_len, lo, size, *, width: int):
    return _lattice_rows(jnp.arange(width), log_c, c_off, c_len, lo, size, width)


# ----------------------------------------------------------------------------------------------------
# the lattice law
# ----------------------------------------------------------------------------------------------------


def _bernstein_radius(var: float, tail: float) -> float:
    """t with 2·exp(−t²/(2(var + t/3))) = tail (Bernstein, increments in [0, 1])."""
    L = math.log(2.0 / tail)
    return (2 * L / 3 + math.sqrt((2 * L / 3) ** 2 + 8 * L * var)) / 2


class _Window(NamedTuple):
    """Host-side description of the lattice window: the count log-pmf (padded to a static length with
    −inf), its first count and true length, the window's first coordinate, true size, static width and
    the bound on the mass outside it."""

    log_c: np.ndarray
    c_off: int
    c_len: int
    lo: int
    size: int
    width: int
    outside: float


def _window(p: np.ndarray, log_pmf_count=None) -> _Window:
    m = p.size
    if log_pmf_count is None:
        window = poisson_binomial_logpmf(p)
        c_off, log_c, extra = window.lo, np.asarray(window.logpmf, dtype=np.float64), window.dropped
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
    padded = np.full(static_size(log_c.size), -np.inf)
    padded[: log_c.size] = log_c
    return _Window(padded, int(c_off), int(log_c.size), int(lo), int(size), static_size(size), float(outside))


def _lattice_args(win: _Window):
    return (jnp.asarray(win.log_c), jnp.asarray(win.c_off), jnp.asarray(win.c_len), jnp.asarray(win.lo),
            jnp.asarray(win.size))


def lattice_logpmf(p, log_pmf_count=None) -> LatticeLaw:
    """Exact log-pmf of (ξ₀, ξ₁) = Σ_i MultiBern(p_i/2, p_i/2, 1 − p_i) (MATH §3.3).

    Pr[ξ₀ = a, ξ₁ = b] = Pr[C = a + b]·Bin(a; a + b, ½), C ~ Poisson-binomial(p), with log Pr[C = c]
    from :func:`jaxpriv.shuffle.poisson_binomial_logpmf` (or ``log_pmf_count``) and the binomial log-pmf
    in Loader's saddle-point form (as in :mod:`jaxpriv.shuffle.clones`; ~1e-15 absolute in the log even
    at c = 10⁵, unlike a gammaln difference), in a jitted kernel on a statically padded window.

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

    Example:
        >>> import numpy as np
        >>> from jaxpriv.shuffle.multinomial import lattice_logpmf
        >>> law = lattice_logpmf([0.5, 1.0])  # Pr[ξ₀ = 1, ξ₁ = 1] = 2·(¼·½ + ½·¼)·… = 0.25
        >>> law.offset, law.logpmf.shape, round(float(np.exp(law.logpmf[1, 1])), 6)
        (0, (3, 3), 0.25)
    """
    p = check_clone_probabilities(p)
    win = _window(p, log_pmf_count)
    with float64():
        lp = np.asarray(_lattice_kernel(*_lattice_args(win), width=win.width))
    return LatticeLaw(win.lo, lp[: win.size, : win.size], win.outside)


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
    """Φ(hi) − Φ(lo) for hi ≥ lo, from the tail that does not cancel (numpy; the degenerate case)."""
    from scipy.special import ndtr as np_ndtr

    upper = lo_arg > 0
    return np.where(upper, np_ndtr(-lo_arg) - np_ndtr(-hi_arg), np_ndtr(hi_arg) - np_ndtr(lo_arg))


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
    (A scalar host-side computation: it picks the static quadrature order of the kernel.)
    """
    if g.cond_sd <= 0:
        return math.inf
    rho = np.geomspace(1.0 + 1e-6, 1e8, 4000)
    eta = wx / 4 * (rho - 1 / rho)
    log_m = math.log(wy / (2 * math.pi * g.sd * g.cond_sd)) + eta**2 / 2 * (1 / g.sd**2 + g.slope**2 / g.cond_sd**2)
    log_err = math.log(wx / 2 * 64 / 15) + log_m - 2 * order * np.log(rho) - np.log1p(-(rho**-2.0))
    return float(np.exp(np.min(log_err)))


def _quad_order(g: _Gauss2, wx: float, wy: float, n_rect: int, budget: float) -> tuple[int, float]:
    """The smallest order in ``_QUAD_ORDERS`` whose per-rectangle bound × ``n_rect`` is ≤ ``budget``
    (else the largest), and that per-rectangle bound."""
    for order in _QUAD_ORDERS:
        per = _quad_error_bound(g, wx, wy, order)
        if per * n_rect <= budget:
            break
    return order, per


def _rounding_allowance(g: _Gauss2, wy: float, total: float, n_rect: int) -> float:
    """Rounding allowance of a sum of rectangle masses (an estimate, not a proof): ndtr is accurate to a
    few ulp (jax's float64 ndtr is within 10 ulp of scipy's, measured); a Φ difference Φ(b) − Φ(a),
    b − a = wy/s, taken from the non-cancelling tail loses at most a factor Φ(a)/(Φ(b) − Φ(a)) ≲
    1 + 1.3·s/wy in relative accuracy (Mills' ratio); the weighted sum adds ≲ N ulp."""
    rel = (64 + 64 * (1 + g.cond_sd / wy)) * _EPS
    return rel * total + 1e-300 * n_rect


def _gauss_args(g: _Gauss2, order: int):
    nodes, weights = np.polynomial.legendre.leggauss(order)
    return jnp.asarray([g.mean, g.sd, g.slope, g.cond_sd]), jnp.asarray(nodes), jnp.asarray(weights)


def _run_window(mode: str, win: _Window, g: _Gauss2, order: int, x0: float, wx: float, y0: float,
                wy: float):
    """Run :func:`_window_kernel` (float64) on the window ``win`` with the quadrature of ``order``."""
    rows = _block_rows(order, win.width)
    with float64():
        gauss, nodes, weights = _gauss_args(g, order)
        out = _window_kernel(*_lattice_args(win), gauss, nodes, weights, jnp.asarray(float(x0)), float(wx),
                             jnp.asarray(float(y0)), float(wy), width=win.width, rows=rows, mode=mode)
        return np.asarray(out)


def _cells_window(offset: int, size: int) -> _Window:
    """A window without a lattice law (cells mode reads only lo/size/width)."""
    return _Window(np.zeros(1), 0, 1, int(offset), int(size), static_size(int(size)), 0.0)


def _rect_masses(g: _Gauss2, x_lo: np.ndarray, wx: float, y_lo: np.ndarray, wy: float, budget: float):
    """Gaussian masses of [x_lo_i, x_lo_i + wx] × [y_lo_j, y_lo_j + wy] and a bound on the total error.

    ``x_lo`` and ``y_lo`` are the same-length unit-step grids x₀ + i, y₀ + j (the kernel builds them from
    x₀, y₀ on a statically padded window). The Gauss–Legendre order is the smallest in
    ``_QUAD_ORDERS`` whose per-rectangle bound times the number of rectangles is ≤ ``budget`` (else the
    largest); returns (masses, error_bound) where error_bound = (#rectangles)·(per-rectangle quadrature
    bound) + rounding allowance.
    """
    x_lo, y_lo = np.asarray(x_lo, dtype=np.float64), np.asarray(y_lo, dtype=np.float64)
    size = x_lo.size
    if y_lo.size != size or np.any(np.diff(x_lo) != 1.0) or np.any(np.diff(y_lo) != 1.0):
        raise ValueError("x_lo and y_lo must be unit-step grids of equal length")
    n_rect = size * size
    order, per = _quad_order(g, wx, wy, n_rect, budget)
    win = _cells_window(0, size)
    out = _run_window("cells", win, g, order, x_lo[0], wx, y_lo[0], wy)[:size, :size]
    return out, per * n_rect + _rounding_allowance(g, wy, float(out.sum()), n_rect)


def _degenerate_masses(p: np.ndarray, offset: int, size: int):
    """Every p_i = 1: ξ₀ + ξ₁ = n exactly and the matched Gaussian lives on the line x + y = n with
    X ~ N(n/2, n/4). That line crosses cell (x, n − x) corner to corner, so the cell gets
    Pr[X ∈ [x − ½, x + ½]]; every other cell gets 0. (O(size) numpy work.)"""
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
    mean (Σp/2, Σp/2), variances Σ(p/2)(1 − p/2) and covariance −Σp²/4 (MATH §3.3). Each mass is
    ∫ φ_X(u)·[Φ((y + ½ − E[Y|u])/s) − Φ((y − ½ − E[Y|u])/s)] du over the cell's x-interval, by a
    Gauss–Legendre rule whose order is chosen from a proven analytic error bound (see
    ``_quad_error_bound``), in a jitted kernel on a statically padded window.

    Args:
        p: 1-D array of the other users' clone probabilities p_i ∈ (0, 1].
        offset: integer centre of the first cell in each coordinate.
        size: number of cells per coordinate (≥ 1).
        budget: target bound on the summed quadrature error (the order is raised until it holds, up to
            order 128).

    Returns:
        (masses, error_bound): masses is a (size, size) array; error_bound bounds Σ_cells |error|.

    Example:
        >>> from jaxpriv.shuffle.multinomial import gaussian_cell_masses
        >>> q, err = gaussian_cell_masses([0.5, 0.7, 0.9], -10, 24)
        >>> round(float(q.sum()), 12), err < 1e-12
        (1.0, True)
    """
    p = check_clone_probabilities(p)
    if isinstance(offset, bool) or not float(offset).is_integer():
        raise ValueError(f"offset must be an integer, got {offset!r}")
    if isinstance(size, bool) or not float(size).is_integer() or size < 1:
        raise ValueError(f"size must be an integer in [1, inf), got {size!r}")
    offset, size = int(offset), int(size)
    g = _matched_gaussian(p)
    if g.cond_sd == 0.0:
        return _degenerate_masses(p, offset, size)
    edges = np.arange(offset, offset + size, dtype=np.float64) - 0.5
    return _rect_masses(g, edges, 1.0, edges, 1.0, budget)


def lattice_gaussian_tv(p, *, return_parts: bool = False):
    """Upper bound τ on the total variation between the lattice law and the discretised matched Gaussian.

    Source: E-APES (seed 001) Lemma 3 and GSPA (seed 003) Lemma 2 assert ‖P̃ − Q̃‖_TV ≤ C/√m with an
    unknown C; MATH §3.3 (a) replaces it by a number. A lattice law and a continuous Gaussian are at TV
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
    P̂ (the Poisson-binomial recursion) + (w + 64)·eps·(½Σ|P̂ − Q̂| + ΣQ̂) for the two sums (each is a
    sum of per-row sums of w terms, whose rounding error is ≤ (w − 1)·eps/2 relative in any order; the
    row sums are added pairwise on the host). Each |Q̂ − Q| enters at most twice with weight ½. The
    result is clipped to [0, 1]. (With every p_i = 1 the Gaussian is degenerate and handled exactly;
    see ``_degenerate_masses``.) P̂ and Q̂ are produced and compared block by block in one jitted kernel
    (no W × W array is stored).

    Args:
        p: 1-D array of the other users' clone probabilities p_i ∈ (0, 1].
        return_parts: also return a dict with the pieces (sum, outside masses, error allowance).

    Returns:
        τ as a numpy float64 scalar (and the parts dict when asked).

    Example:
        >>> import numpy as np
        >>> from jaxpriv.shuffle.multinomial import clone_probabilities, lattice_gaussian_tv
        >>> tau = lattice_gaussian_tv(np.full(999, clone_probabilities(1.0)))
        >>> round(float(tau), 5)
        0.00557
    """
    p = check_clone_probabilities(p)
    win = _window(p)
    g = _matched_gaussian(p)
    n_rect = win.size * win.size
    if g.cond_sd == 0.0:
        with float64():
            pk = np.exp(np.asarray(_lattice_kernel(*_lattice_args(win), width=win.width)))[: win.size, : win.size]
        q, q_err = _degenerate_masses(p, win.lo, win.size)
        abs_rows, q_rows = np.abs(pk - q).sum(axis=1), q.sum(axis=1)
    else:
        order, per = _quad_order(g, 1.0, 1.0, n_rect, 1e-13)
        edge = win.lo - 0.5
        abs_rows, q_rows = _run_window("tv", win, g, order, edge, 1.0, edge, 1.0)
        q_err = per * n_rect + _rounding_allowance(g, 1.0, float(np.sum(q_rows)), n_rect)
    body = 0.5 * float(np.sum(abs_rows))
    q_sum = float(np.sum(q_rows))
    q_out = max(0.0, 1.0 - q_sum)
    p_err = (4 * p.size + 64) * _EPS
    sum_err = (win.width + 64) * _EPS * (body + q_sum)
    err = q_err + p_err + sum_err
    tau = np.float64(min(1.0, body + 0.5 * win.outside + 0.5 * q_out + err))
    if return_parts:
        return tau, {"half_abs_sum": body, "gauss_outside": q_out, "lattice_outside": win.outside,
                     "error_allowance": err, "window": (win.lo, win.size)}
    return tau


def gspa_eq14(p):
    """The GSPA paper's Eq. 14 (E-APES Eq. 15) quantity, for reproducing its figure — NOT a TV distance.

    sup_{(k₀, k₁)} |Pr[ξ₀ = k₀, ξ₁ = k₁] − h(k₀, k₁)| with
    h(k₀, k₁) = G(k₀ + ½, k₁ + ½) − G(k₀ + ½, k₁) − G(k₀, k₁ + ½) + G(k₀, k₁), G the CDF of the matched
    Gaussian, i.e. h is the Gaussian mass of the ½ × ½ box [k₀, k₀ + ½] × [k₁, k₁ + ½]. Both the quarter
    box and the sup (instead of ½Σ) are the paper's; MATH §3.3 records that this is not a total-variation
    distance (it is neither ≥ nor ≤ the TV in general) and it must not be used as τ.

    The sup is taken over the window of :func:`lattice_logpmf` (outside it both terms are < 1e-40), in
    the same streaming kernel as :func:`lattice_gaussian_tv`.
    The paper's "p₀ = (1 − δ₀)/(1 + e^{ε₀})" is p_i/2 in this parametrisation.

    Args:
        p: 1-D array of the other users' clone probabilities p_i ∈ (0, 1].

    Returns:
        numpy float64 scalar.

    Example:
        >>> import numpy as np
        >>> from jaxpriv.shuffle.multinomial import clone_probabilities, gspa_eq14
        >>> round(float(gspa_eq14(np.full(49, clone_probabilities(0.1, 1 / 50)))), 4)  # the papers' 0.0206
        0.0206
    """
    p = check_clone_probabilities(p)
    win = _window(p)
    g = _matched_gaussian(p)
    if g.cond_sd == 0.0:
        # degenerate line x + y = n: the box [k₀, k₀+½]×[k₁, k₁+½] meets it only at a corner point (h = 0)
        with float64():
            lp = np.asarray(_lattice_kernel(*_lattice_args(win), width=win.width))
        return np.float64(np.max(np.exp(lp)))
    order, _ = _quad_order(g, 0.5, 0.5, win.size * win.size, 1e-15)
    return np.float64(_run_window("eq14", win, g, order, win.lo, 0.5, win.lo, 0.5))


# E-APES Theorem 3 moved to its own module: still importable from here.
_MOVED = ("eapes_mu", "eapes_tradeoff", "eapes_delta", "eapes_epsilon")


def __getattr__(name: str):
    if name not in _MOVED:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import warnings

    from . import eapes

    warnings.warn(f"jaxpriv.shuffle.multinomial.{name} moved to jaxpriv.shuffle.eapes.{name}", DeprecationWarning,
                  stacklevel=2)
    return getattr(eapes, name)
