"""APES's analyzer for Clip-Laplace reports (seed 000, §4.3; MATH §4.1): the server inverts the mean of the
users' Clip-Laplace mixture to an unbiased estimate of each coordinate (:func:`calibrate`, or a table
made once per budget population, :func:`calibration_table`), and S-APES sparsifies each user's report to
b coordinates (:func:`sparsify`).
"""

from __future__ import annotations

import functools
import math
import warnings
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .._batching import map_chunked
from .._numerics import as_output, check_array, float64, is_concrete, kernel_jit
from .clip_laplace import check_budgets, mean_ratio_kernel, sample_kernel

__all__ = ["calibrate", "CalibrationTable", "TABLE_PANELS", "calibration_table", "calibrate_with_table", "sparsify"]

# ----------------------------------------------------------------------------------------------------
# analyzer calibration
# ----------------------------------------------------------------------------------------------------
#
# The mixture mean M(g) = Σ_u w_u E[CLap(g, λ_u, C)] over the distinct budgets u is one odd, increasing,
# analytic function of g, the same for every dimension. It is tabulated once as g·h(g) with the even
# h = M(g)/g (so that M keeps full relative precision near g = 0), interpolated by Chebyshev polynomials
# on panels of [0, C], and each dimension is inverted by safeguarded Newton on its panel's polynomial.
# Cost: (#distinct budgets) × (#nodes) exact evaluations plus O(d) work, instead of n × d per iteration.
#
# Panels: E[CLap(g, λ, C)] has poles where S = 1 − e^{−s}cosh(g/λ) vanishes (s = C/λ), nearest at
# g = ±(C + δ), δ = λ log(1 + √(1 − e^{−2s})) (≈ λ log 2 for λ ≪ C). Breakpoints C − C/2^k
# (k = 0..K−1) with C/2^{K−1} ≤ δ_min keep every pole at ≥ 3 half-widths from each panel's centre, so the
# degree-24 interpolant converges like (3 + √8)^{−24} ≈ 5e-19.

_CHEB_DEGREE = 24
_CHEB_NODES = np.cos(np.pi * np.arange(_CHEB_DEGREE + 1) / _CHEB_DEGREE)  # x_j = cos(πj/p): 1 … −1


def _cheb_matrix(p: int) -> np.ndarray:
    """Values at x_j = cos(πj/p) → Chebyshev coefficients (DCT-I)."""
    j = np.arange(p + 1)
    weights = np.where((j == 0) | (j == p), 0.5, 1.0)
    mat = (2.0 / p) * np.cos(np.pi * np.outer(j, j) / p) * weights[None, :]
    mat[0] *= 0.5
    mat[p] *= 0.5
    return mat


_CHEB_MATRIX = _cheb_matrix(_CHEB_DEGREE)
_NODE_BLOCK = 1 << 22  # nodes × budgets evaluated per call (bounded memory)
_INVERT_CHUNK = 1 << 16  # dimensions per call
_NEWTON_TOL = 1e-13  # last Newton step in the panel coordinate x ∈ [−1, 1]; convergence is quadratic
_NEWTON_MAX = 60


def _panel_breaks(lam: np.ndarray, clip: float) -> np.ndarray:
    s = clip / lam
    delta = float(np.min(lam * np.log1p(np.sqrt(-np.expm1(-2.0 * s)))))
    panels = 1 if delta >= clip else int(math.ceil(math.log2(clip / delta))) + 1
    breaks = clip - clip * np.exp2(-np.arange(panels, dtype=np.float64))
    return np.append(breaks, clip)


@kernel_jit
def _mixture_ratio(g, lam, weights, clip):
    """Σ_u w_u E[CLap(g, λ_u, C)]/g for a block of nodes g (N,) and budgets (B,)."""
    return jnp.sum(weights[None, :] * mean_ratio_kernel(g[:, None], lam[None, :], clip), axis=1)


def _mixture_table(g: np.ndarray, lam: np.ndarray, weights: np.ndarray, clip: float) -> np.ndarray:
    block = max(1, _NODE_BLOCK // g.size)
    block = min(block, 1 << max(0, (lam.size - 1).bit_length()))  # one compiled shape per power of two
    total = np.zeros(g.size)
    for start in range(0, lam.size, block):
        lam_b = np.ones(block)
        w_b = np.zeros(block)  # padding contributes weight 0
        stop = min(start + block, lam.size)
        lam_b[: stop - start], w_b[: stop - start] = lam[start:stop], weights[start:stop]
        total += np.asarray(_mixture_ratio(jnp.asarray(g), jnp.asarray(lam_b), jnp.asarray(w_b), clip))
    return total


def _chebyshev(coeffs, x):
    """Σ_k c_k T_k(x) and its derivative Σ_k k c_k U_{k−1}(x), both by Clenshaw (coefficients on the last axis)."""
    p = coeffs.shape[-1] - 1
    b1 = b2 = jnp.zeros_like(x)
    for k in range(p, 0, -1):
        b1, b2 = coeffs[..., k] + 2.0 * x * b1 - b2, b1
    value = coeffs[..., 0] + x * b1 - b2
    d1 = d2 = jnp.zeros_like(x)
    for k in range(p - 1, -1, -1):
        d1, d2 = (k + 1) * coeffs[..., k + 1] + 2.0 * x * d1 - d2, d1
    return value, d1


@kernel_jit
def _invert_kernel(m, coeffs, breaks, ends, panels=None):
    """g with M(g) = m; ``panels``: the number of real panels of a padded table (None: all of them)."""
    target = jnp.abs(m)
    padded = panels is not None
    if not padded:
        panels = coeffs.shape[0]
    k = jnp.clip(jnp.searchsorted(ends, target, side="right") - 1, 0, panels - 1)
    c = coeffs[k]
    half = 0.5 * (breaks[k + 1] - breaks[k])
    mid = 0.5 * (breaks[k + 1] + breaks[k])
    e_lo, e_hi = ends[k], ends[k + 1]
    x0 = jnp.clip(-1.0 + 2.0 * (target - e_lo) / (e_hi - e_lo), -1.0, 1.0)

    def body(state):
        x, lo, hi, _, n = state
        h, dh = _chebyshev(c, x)
        g = mid + half * x
        gap = g * h - target  # M(g) − m on the panel polynomial, increasing in x
        slope = half * h + g * dh
        lo = jnp.where(gap <= 0, x, lo)
        hi = jnp.where(gap >= 0, x, hi)
        newton = x - gap / jnp.where(slope > 0, slope, 1.0)
        # Inclusive: at the root the step is 0 and x itself is an end of the bracket.
        ok = (slope > 0) & (newton >= lo) & (newton <= hi)
        x_new = jnp.where(ok, newton, 0.5 * (lo + hi))
        return x_new, lo, hi, jnp.abs(x_new - x), n + 1

    def unfinished(state):
        *_, step, n = state
        return (n < _NEWTON_MAX) & jnp.any(step > _NEWTON_TOL)

    ones = jnp.ones_like(x0)
    state = (x0, -ones, ones, jnp.full_like(x0, jnp.inf), 0)
    x, *_ = jax.lax.while_loop(unfinished, body, state)
    last = panels if padded else -1  # a padded table's last real end
    g = jnp.where(target >= ends[last], breaks[last], mid + half * x)
    return jnp.sign(m) * g


def _mixture_inverse(local_epsilons: np.ndarray, clip: float):
    """Chebyshev panels of h(g) = M(g)/g on [0, C]: (coefficients (K, p+1), breakpoints (K+1,), M at them)."""
    budgets, counts = np.unique(local_epsilons, return_counts=True)
    lam = 2.0 * clip / budgets
    weights = counts / counts.sum()
    breaks = _panel_breaks(lam, clip)
    mid, half = 0.5 * (breaks[1:] + breaks[:-1]), 0.5 * (breaks[1:] - breaks[:-1])
    nodes = mid[:, None] + half[:, None] * _CHEB_NODES[None, :]  # (K, p+1); column p is the left end
    values = _mixture_table(nodes.reshape(-1), lam, weights, clip).reshape(nodes.shape)
    coeffs = values @ _CHEB_MATRIX.T
    h_ends = np.append(values[:, -1], values[-1, 0])
    return coeffs, breaks, breaks * h_ends


def calibrate(observed_mean, local_epsilons, clip):
    """Analyzer calibration of APES: the g ∈ [−C, C] whose mixture mean matches the observed mean.

    Solves (1/n) Σ_i E[CLap(g, λ_i, C)] = m, λ_i = 2C/ε_i, for every dimension's observed mean m of the
    shuffled values (seed 000, §3.2 "Analyzing Process" with Eq. 1; MATH §4.1). The left side is odd and
    increasing in g; where |m| exceeds its value at g = C, g is clipped to ±C and one ``RuntimeWarning``
    reports how many dimensions were clipped.

    The mixture mean is the same function for every dimension, so it is evaluated exactly (float64, distinct
    budgets grouped with their counts) at the nodes of a piecewise Chebyshev interpolant whose panels are
    graded toward ±C by the distance of the nearest pole (error ~1e-16 relative); each dimension is then
    solved by bracketed Newton on its panel's polynomial. Cost: (#distinct budgets)·O(10²) mean evaluations
    plus O(d), chunked over dimensions; not n·d.

    Conditioning: every E[CLap(g, λ, C)] has zero slope at g = ±C (at f = A the score sign(Z − f)/λ is
    constant, so d E[Z]/df = Cov(Z, sign(Z − f))/λ = 0), hence M(±C) − M(g) ∝ (C − |g|)² and an m known to
    rounding determines g only to ~ulp·C²/(C − |g|), at worst ~√ulp·C ≈ 1e-8·C at ±C. The residual
    M(g) − m is at rounding level everywhere and g is accurate to ~1e-13·C in the interior.

    Args:
      observed_mean: per-dimension mean m of the shuffled values, any shape (float32 is fine; the work
        is float64). May be traced (then no warning is emitted).
      local_epsilons: the multiset of budgets {ε_i}, a 1-D array of n ≥ 1 values > 0 (concrete).
      clip: clip bound C > 0 (a scalar, concrete); A = C.

    Returns:
      float64 array of g, the shape of ``observed_mean``.

    Example:
      >>> import numpy as np
      >>> from jaxpriv.mechanisms import clip_laplace, clip_laplace_analyzer
      >>> eps = np.array([0.5, 1.0, 1.0, 4.0])
      >>> lam = clip_laplace.local_scale(eps, 1.0)
      >>> m = np.mean(clip_laplace.mean(0.3, lam, 1.0))
      >>> round(float(clip_laplace_analyzer.calibrate(m, eps, 1.0)), 12)
      0.3
    """
    with float64():
        if not is_concrete((local_epsilons, clip)):
            raise ValueError("local_epsilons and clip must be concrete values (not traced)")
        eps = check_budgets("local_epsilons", local_epsilons)
        if eps.ndim != 1:
            raise ValueError(f"local_epsilons must be a 1-D array of the n users' budgets, got shape {eps.shape}")
        if check_array("clip", clip, 0.0, np.inf, lo_open=True).ndim != 0:
            raise ValueError(f"clip must be a scalar C > 0, got shape {np.shape(clip)}")
        m = check_array("observed_mean", observed_mean)
        with jax.ensure_compile_time_eval():  # the table is concrete even inside a caller's jit
            table = _mixture_inverse(np.asarray(local_epsilons, dtype=np.float64), float(clip))
        coeffs, breaks, ends = (jnp.asarray(a) for a in table)
        if not is_concrete(m):
            return _invert_kernel(m.reshape(-1), coeffs, breaks, ends).reshape(m.shape)
        flat = np.asarray(m).reshape(-1)
        (g,) = map_chunked(
            lambda x: (_invert_kernel(x, coeffs, breaks, ends),), [flat], chunk_size=_INVERT_CHUNK, progress=False
        )
        clipped = int(np.count_nonzero(np.abs(flat) > table[2][-1]))
        if clipped:
            warnings.warn(
                f"calibrate: {clipped} of {flat.size} dimensions have |observed mean| above the largest attainable "
                f"mixture mean {float(table[2][-1])!r} (at g = ±C); g is clipped to ±C there",
                RuntimeWarning,
                stacklevel=2,
            )
        return as_output(g.reshape(np.shape(m)))


class CalibrationTable(NamedTuple):
    """:func:`calibrate`'s interpolant of the mixture mean for one ε multiset and C, as arguments of a compiled
    program (:func:`calibration_table`): the float64 coefficients (K, p+1), breakpoints (K+1,) and mixture
    means at them (K+1,) as their bits (uint32 pairs, so that they pass into ``jit`` unchanged whatever
    ``jax_enable_x64`` says), padded to a multiple of :data:`TABLE_PANELS` panels (fewer shapes, fewer
    programs), and the number K of real panels."""

    coeffs: Any
    breaks: Any
    ends: Any
    panels: Any


#: calibration tables are padded to a multiple of this many panels (a table has ~log2 of C over the smallest
#: pole distance of them, 5–40)
TABLE_PANELS = 16


def _bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a, np.float64).view(np.uint32).reshape(a.shape + (2,))


def calibration_table(local_epsilons, clip) -> CalibrationTable:
    """The table :func:`calibrate` inverts the mixture mean with (concrete ε multiset and C, computed on the
    host), for :func:`calibrate_with_table` inside a compiled program whose budgets are arguments.

    Example:
      >>> import numpy as np
      >>> from jaxpriv.mechanisms import clip_laplace, clip_laplace_analyzer
      >>> eps = np.array([0.5, 1.0, 1.0, 4.0])
      >>> m = np.mean(clip_laplace.mean(0.3, clip_laplace.local_scale(eps, 1.0), 1.0))
      >>> table = clip_laplace_analyzer.calibration_table(eps, 1.0)
      >>> g = clip_laplace_analyzer.calibrate_with_table(m, table)
      >>> table.coeffs.shape[0] % clip_laplace_analyzer.TABLE_PANELS, round(float(g), 12)
      (0, 0.3)
    """
    with float64():
        eps = check_budgets("local_epsilons", local_epsilons)
        if eps.ndim != 1:
            raise ValueError(f"local_epsilons must be a 1-D array of the n users' budgets, got shape {eps.shape}")
        if check_array("clip", clip, 0.0, np.inf, lo_open=True).ndim != 0:
            raise ValueError(f"clip must be a scalar C > 0, got shape {np.shape(clip)}")
        coeffs, breaks, ends = _mixture_inverse(np.asarray(local_epsilons, dtype=np.float64), float(clip))
    k = coeffs.shape[0]
    extra = (-k) % TABLE_PANELS
    # padding: zero panels past the last breakpoint, ends at +inf (never found by the search)
    coeffs = np.concatenate([coeffs, np.zeros((extra,) + coeffs.shape[1:])])
    breaks = np.concatenate([breaks, np.full(extra, breaks[-1])])
    ends = np.concatenate([ends, np.full(extra, np.inf)])
    return CalibrationTable(_bits(coeffs), _bits(breaks), _bits(ends), np.int32(k))


def calibrate_with_table(observed_mean, table: CalibrationTable):
    """:func:`calibrate` with the table of :func:`calibration_table` (possibly traced: the budgets and C are
    then numbers of the caller's program, not constants); the same g, bit for bit. No warning is emitted.

    Returns:
      float64 array of g, the shape of ``observed_mean``.
    """
    with float64():
        m = check_array("observed_mean", observed_mean)
        coeffs, breaks, ends = (jax.lax.bitcast_convert_type(jnp.asarray(b), jnp.float64)
                                for b in (table.coeffs, table.breaks, table.ends))
        return _invert_kernel(m.reshape(-1), coeffs, breaks, ends, jnp.asarray(table.panels)).reshape(m.shape)


# ----------------------------------------------------------------------------------------------------
# S-APES post-sparsification
# ----------------------------------------------------------------------------------------------------


@functools.partial(kernel_jit, static_argnames="b")
def _sparsify_kernel(key, values, eps, clip, b):
    dtype = values.dtype
    lam = (2.0 * clip / eps).astype(dtype)
    dummies = sample_kernel(key, jnp.zeros((), dtype), lam[..., None], clip.astype(dtype), values.shape, dtype)
    _, top = jax.lax.top_k(jnp.abs(values), b)

    def keep_mask(indices):
        return jnp.zeros(values.shape[-1], bool).at[indices].set(True)

    mask = keep_mask(top) if values.ndim == 1 else jax.vmap(keep_mask)(top.reshape(-1, b)).reshape(values.shape)
    return jnp.where(mask, values, dummies)


def sparsify(key, values, local_epsilon, clip, b: int):
    """S-APES post-sparsification: keep the b largest |values|, replace the rest by fresh CLap(0, λ, C) dummies.

    Source: seed 000, Algorithm 2 and §3.3 (MATH §4.1). The user first perturbs all d coordinates with
    CLap(g_k, λ, C), λ = 2C/ε_i; the selection runs on the perturbed values (post-processing, so it costs
    no privacy), and the d − b padding values are CLap(0, λ, C) so that every shuffled dimension keeps n
    reports. MATH §4.1: the paper's "dΔf/ε" scale conflicts with its Table 3; λ = 2C/ε_i per dimension.

    Vectorised over leading axes of ``values`` (users) and usable under ``jax.vmap``/``jit`` (validation
    runs on concrete inputs only; ``b`` must be a Python integer). Ties are broken toward the lower index.

    Args:
      key: a JAX PRNG key.
      values: perturbed coordinates, shape (..., d), each in [−C, C]; the dtype is kept.
      local_epsilon: the user's budget ε_i > 0, broadcast against ``values.shape[:-1]``.
      clip: clip bound C > 0 (a scalar).
      b: number of kept coordinates, an integer in [1, d].

    Returns:
      array of the shape and dtype of ``values``.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> from jaxpriv.mechanisms import clip_laplace, clip_laplace_analyzer
      >>> v = jnp.array([0.1, -0.9, 0.2, 0.8])
      >>> out = clip_laplace_analyzer.sparsify(jax.random.key(1), v, 1.0, 1.0, b=2)
      >>> bool(out[1] == v[1]), bool(out[3] == v[3]), bool((abs(out) <= 1.0).all())  # the two largest |v| stay
      (True, True, True)
    """
    values = jnp.asarray(values)
    if values.ndim < 1:
        raise ValueError("values must have a last axis of d ≥ 1 coordinates, got a scalar")
    if not jnp.issubdtype(values.dtype, jnp.floating):
        values = values.astype(jnp.result_type(float))
    d = values.shape[-1]
    if isinstance(b, bool) or not isinstance(b, (int, np.integer)) or not 1 <= b <= d:
        raise ValueError(f"b must be an integer in [1, d] = [1, {d}], got {b!r}")
    if is_concrete((values, local_epsilon, clip)):
        check_array("values", values)
        eps_c = check_array("local_epsilon", local_epsilon, 0.0, np.inf, lo_open=True)
        clip_c = check_array("clip", clip, 0.0, np.inf, lo_open=True)
        if clip_c.ndim != 0:
            raise ValueError(f"clip must be a scalar C > 0, got shape {clip_c.shape}")
        try:
            ok = np.broadcast_shapes(eps_c.shape, values.shape[:-1]) == values.shape[:-1]
        except ValueError:
            ok = False
        if not ok:
            raise ValueError(
                f"local_epsilon of shape {eps_c.shape} must broadcast to the users' shape {values.shape[:-1]} "
                f"(values shape {values.shape} without its last axis)"
            )
        worst = float(np.max(np.abs(np.asarray(values, dtype=np.float64))))
        bound = float(jnp.asarray(float(clip_c), values.dtype))  # samples clamped to C in the values' dtype
        if worst > bound:
            raise ValueError(f"values must lie in [-clip, clip] = [-{bound}, {bound}], got {worst!r}")
    eps = jnp.broadcast_to(jnp.asarray(local_epsilon, values.dtype), values.shape[:-1])
    return _sparsify_kernel(key, values, eps, jnp.asarray(clip, values.dtype), int(b))
