"""Clip-Laplace mechanism CLap(f, λ, A) of APES / Echo of Neighbors (Liu et al., AAAI 2023, seed 000).

Density e^{−|z−f|/λ} / (2λS) on [−A, A] (0 outside), |f| ≤ A, with normalizer
S = 1 − ½e^{(−A+f)/λ} − ½e^{(−A−f)/λ} (seed 000, Definition 4; MATH §4.1). APES perturbs every
clipped coordinate f ∈ [−C, C] with λ_i = 2C/ε_i and A = C (Δ = 2C); Theorem 1 makes it ε_i-LDP.

Derivations used below (every one checked against quadrature in the tests). Write Y = Z − f,
x = (A+f)/λ and y = (A−f)/λ (the distances to the two ends in units of λ) and let
P(k, x) = 1 − e^{−x} Σ_{j<k} x^j/j! be the regularized lower incomplete gamma function. Y is a mixture of
a truncated exponential to the left (weight w_L = P(1, x)/2) and one to the right (w_R = P(1, y)/2);
E[T | T ≤ x] = P(2, x)/P(1, x) and E[T² | T ≤ x] = 2P(3, x)/P(1, x) for T ~ Exp(1), so

* S = (P(1, x) + P(1, y))/2,
* E[Y] = λ (P(2, y) − P(2, x)) / (2S),  E[Y²] = λ² (P(3, x) + P(3, y)) / S (all terms positive),
* Var Z = E[Y²] − E[Y]² (Y is unimodal at 0, so E[Y]² ≤ 3 Var Y: at most a factor 4 is cancelled),
* E[Z] = f + E[Y] = (2f + (λ+A)(e₁ − e₂)) / (2 − e₁ − e₂), e₁ = e^{(−A−f)/λ}, e₂ = e^{(−A+f)/λ}:
  the paper's Eq. 1 with C replaced by A (C enters only through λ). With s = A/λ and t = f/λ it is
  E[Z] = f · N/S, N = P(2, s) − (1+s) e^{−s} (sinh(t)/t − 1), which is accurate for λ ≫ A (Eq. 1 as
  printed cancels to relative error ~1e-16 (λ/A)²) and for λ ≪ A.

Sampling is the exact inverse CDF of the uniform rotated by the left mass p_L = w_L/S: for
U ~ Uniform[0, 1), U·S < w_L gives z = f + λ log1p(−2US) and otherwise z = f − λ log1p(−2(1−U)S), so that
F(z) = (p_L − U) mod 1, which is again uniform. One uniform and one log1p per sample; no cancellation
near the mode; results are clamped to [−A, A] against rounding.
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
from .._numerics import as_output, check_array, check_broadcastable, float64, is_concrete
from ._common import directed_quotient

__all__ = [
    "normalizer",
    "log_prob",
    "cdf",
    "sample",
    "mean",
    "variance",
    "local_scale",
    "worst_log_ratio",
    "neighbor_divergence",
    "echo_factors_kernel",
    "echo_probabilities",
    "calibrate",
    "CalibrationTable",
    "TABLE_PANELS",
    "calibration_table",
    "calibrate_with_table",
    "sparsify",
]

# ----------------------------------------------------------------------------------------------------
# validation
# ----------------------------------------------------------------------------------------------------


def _check_within(f, A) -> None:
    """|f| ≤ A elementwise (concrete values only)."""
    if not (is_concrete(f) and is_concrete(A)):
        return
    fa, aa = np.broadcast_arrays(np.asarray(f, dtype=np.float64), np.asarray(A, dtype=np.float64))
    bad = np.abs(fa) > aa
    if bad.any():
        raise ValueError(
            f"f must lie in [-A, A] (the output range must contain the input, A ≥ |f|), "
            f"got f={float(fa[bad].flat[0])!r} with A={float(aa[bad].flat[0])!r}"
        )


def _check_params(f, lam, A, within_dtype=None, **others):
    """Validate f (finite), λ > 0, A > 0, |f| ≤ A and the broadcast of all of them with ``others``.

    |f| ≤ A is checked after rounding both to ``within_dtype`` when given (a sampler's working dtype: a
    float32 gradient clipped to C equals float32(C), which exceeds C in float64).
    Returns the float64 arrays (f, lam, A) and the broadcast shape."""
    f_in, A_in = f, A
    if within_dtype is not None and is_concrete((f, A)):
        f_in, A_in = np.asarray(f, dtype=within_dtype), np.asarray(A, dtype=within_dtype)
    f = check_array("f", f)
    lam = check_array("lam", lam, 0.0, np.inf, lo_open=True)
    A = check_array("A", A, 0.0, np.inf, lo_open=True)
    shape = check_broadcastable(**others, f=f, lam=lam, A=A)
    _check_within(f_in, A_in)  # on the inputs: inside a caller's jit even constants become tracers
    return f, lam, A, shape


def _check_budget_array(name: str, value):
    arr = check_array(name, value, 0.0, np.inf, lo_open=True)
    if arr.ndim == 0:
        raise ValueError(f"{name} must be a 1-D array of per-user budgets ε_i > 0, got a scalar")
    return arr


# ----------------------------------------------------------------------------------------------------
# kernels (pure, dtype-generic; the public functions run them in float64 except the samplers)
# ----------------------------------------------------------------------------------------------------

_GAMMA_SERIES_TERMS = 20  # x^20 k!/(k+20)! < 1e-19 for x < 1: the series is exact to rounding
_SINHC_TERMS = 10  # Σ_{k≤10} t^{2k}/(2k+1)!, next term < 2e-20 for |t| < 1


def _reg_lower_gamma(k: int, x):
    """P(k, x) for integer k ≥ 1 and x ≥ 0, to full relative precision (no cancellation for small x)."""
    if k == 1:
        return -jnp.expm1(-x)
    small = x < 1.0
    xs = jnp.where(small, x, 0.0)
    # Below 1: e^{−x} Σ_{j≥0} x^{k+j}/(k+j)! (positive terms); Horner form of Σ_j x^j k!/(k+j)!.
    tail = jnp.ones_like(xs)
    for j in range(_GAMMA_SERIES_TERMS, 0, -1):
        tail = 1.0 + tail * xs / (k + j)
    series = jnp.exp(-xs) * xs**k / math.factorial(k) * tail
    # Above 1: the complement loses at most a factor 12 (P(3, 1) = 0.08); e^{−800} is 0 in float64,
    # so capping x keeps the polynomial finite without changing the result.
    xl = jnp.minimum(jnp.where(small, 1.0, x), 800.0)
    partial = sum(xl**j / math.factorial(j) for j in range(k))
    direct = 1.0 - jnp.exp(-xl) * partial
    return jnp.where(small, series, direct)


def _half_masses(f, lam, A):
    """(w_L, w_R): the unnormalized masses left and right of f, (1 − e^{−(A±f)/λ})/2; S = w_L + w_R."""
    return -0.5 * jnp.expm1(-(A + f) / lam), -0.5 * jnp.expm1(-(A - f) / lam)


def _normalizer(f, lam, A):
    w_left, w_right = _half_masses(f, lam, A)
    return w_left + w_right


def _log_prob(z, f, lam, A):
    inside = jnp.abs(z) <= A
    value = -jnp.abs(z - f) / lam - jnp.log(2.0 * lam) - jnp.log(_normalizer(f, lam, A))
    return jnp.where(inside, value, -jnp.inf)


def _cdf(z, f, lam, A):
    s = _normalizer(f, lam, A)
    zc = jnp.clip(z, -A, A)
    # Left of f: e^{(z−f)/λ}(1 − e^{−(z+A)/λ})/(2S); right of f: 1 − e^{−(z−f)/λ}(1 − e^{−(A−z)/λ})/(2S).
    left = jnp.exp(-jnp.abs(zc - f) / lam) * -jnp.expm1(-(zc + A) / lam) / (2.0 * s)
    right = 1.0 - jnp.exp(-jnp.abs(zc - f) / lam) * -jnp.expm1(-(A - zc) / lam) / (2.0 * s)
    value = jnp.where(zc <= f, left, right)
    return jnp.where(z < -A, 0.0, jnp.where(z > A, 1.0, value))


def _transform(u, f, lam, A):
    """Exact inverse-CDF map of U ~ Uniform[0, 1) to CLap(f, λ, A): F(z) = (p_L − U) mod 1 (module docstring)."""
    w_left, w_right = _half_masses(f, lam, A)
    s = w_left + w_right
    y = u * s
    left = y < w_left
    # x ≤ 1 − e^{−(A∓f)/λ} ≤ 1 mathematically; min(·, 1) absorbs the rounding of (1−U)·S on the right.
    x = jnp.minimum(2.0 * jnp.where(left, y, (1.0 - u) * s), 1.0)
    d = lam * jnp.log1p(-x)  # ≤ 0: the distance from f, negated
    return jnp.clip(jnp.where(left, f + d, f - d), -A, A)


def _sinhc_minus_one_scaled(s, t, gap):
    """e^{−s}(sinh(t)/t − 1) for |t| ≤ s without overflow (series below |t| = 1); gap = s − |t| ≥ 0 is
    passed in, computed as (A − |f|)/λ, because s − |t| would lose ~s ulp when f is near ±A."""
    at = jnp.abs(t)
    small = at < 1.0
    u = jnp.where(small, at, 0.0) ** 2
    acc = jnp.full_like(u, 1.0 / math.factorial(2 * _SINHC_TERMS + 1))
    for k in range(_SINHC_TERMS - 1, 0, -1):
        acc = 1.0 / math.factorial(2 * k + 1) + u * acc
    series = jnp.exp(-s) * u * acc
    tl = jnp.where(small, 1.0, at)
    direct = (jnp.exp(-gap) - jnp.exp(-tl - s)) / (2.0 * tl) - jnp.exp(-s)
    return jnp.where(small, series, direct)


def _mean_ratio(f, lam, A):
    """E[Z]/f = N/S, N = P(2, s) − (1+s)e^{−s}(sinh(t)/t − 1), s = A/λ, t = f/λ (module docstring)."""
    s, t = A / lam, f / lam
    numerator = _reg_lower_gamma(2, s) - (1.0 + s) * _sinhc_minus_one_scaled(s, t, (A - jnp.abs(f)) / lam)
    return numerator / _normalizer(f, lam, A)


@jax.jit
def _mean_kernel(f, lam, A):
    return f * _mean_ratio(f, lam, A)


@jax.jit
def _variance_kernel(f, lam, A):
    x, y = (A + f) / lam, (A - f) / lam
    s = 0.5 * (_reg_lower_gamma(1, x) + _reg_lower_gamma(1, y))
    first = (_reg_lower_gamma(2, y) - _reg_lower_gamma(2, x)) / (2.0 * s)  # E[Z − f]/λ
    second = (_reg_lower_gamma(3, x) + _reg_lower_gamma(3, y)) / s  # E[(Z − f)²]/λ²
    return lam**2 * (second - first**2)


# ----------------------------------------------------------------------------------------------------
# density, distribution function, moments
# ----------------------------------------------------------------------------------------------------


def normalizer(f, lam, A):
    """Normalizer S = 1 − ½e^{(−A+f)/λ} − ½e^{(−A−f)/λ} of CLap(f, λ, A).

    Source: Liu et al., AAAI 2023 (seed 000), Definition 4; MATH §4.1. Computed as
    (−expm1(−(A+f)/λ) − expm1(−(A−f)/λ))/2, a sum of two non-negative terms: full relative precision
    for λ ≫ A (where S ≈ A/λ) as well as for λ ≪ A.

    Args:
      f: input value(s), |f| ≤ A.
      lam: scale λ > 0.
      A: output bound A > 0 (the support is [−A, A]).

    Returns:
      float64 array of S, shape = broadcast of the arguments.

    Example:
      >>> from jaxpriv.mechanisms import clip_laplace
      >>> f"{float(clip_laplace.normalizer(0.0, 1e6, 1.0)):.12e}"  # 1 − e^{−A/λ} ≈ A/λ for λ ≫ A
      '9.999995000002e-07'
    """
    with float64():
        f, lam, A, _ = _check_params(f, lam, A)
        return as_output(jax.jit(_normalizer)(f, lam, A))


def log_prob(z, f, lam, A):
    """Log-density of CLap(f, λ, A): −|z−f|/λ − log(2λS) on [−A, A], −inf outside.

    Source: seed 000, Definition 4; MATH §4.1.

    Args:
      z: point(s) at which to evaluate (any real, ±inf allowed).
      f: input value(s), |f| ≤ A.
      lam: scale λ > 0.
      A: output bound A > 0.

    Returns:
      float64 array, shape = broadcast of the arguments.

    Example:
      >>> import numpy as np
      >>> from jaxpriv.mechanisms import clip_laplace
      >>> lp = clip_laplace.log_prob([0.5, 2.0], 0.5, 1.0, 1.0)
      >>> bool(np.isclose(lp[0], -np.log(2 * (1 - 0.5 * np.exp(-0.5) - 0.5 * np.exp(-1.5))))), float(lp[1])
      (True, -inf)
    """
    with float64():
        z = check_array("z", z, allow_inf=True)
        f, lam, A, _ = _check_params(f, lam, A, z=z)
        return as_output(jax.jit(_log_prob)(z, f, lam, A))


def cdf(z, f, lam, A):
    """Distribution function Pr[Z ≤ z] of CLap(f, λ, A) (0 below −A, 1 above A).

    For z ≤ f: e^{(z−f)/λ}(1 − e^{−(z+A)/λ})/(2S); for z > f: 1 − e^{−(z−f)/λ}(1 − e^{−(A−z)/λ})/(2S),
    each written with expm1 (integral of Definition 4 of seed 000; MATH §4.1).

    Args:
      z: point(s) (any real, ±inf allowed).
      f: input value(s), |f| ≤ A.
      lam: scale λ > 0.
      A: output bound A > 0.

    Returns:
      float64 array, shape = broadcast of the arguments.

    Example:
      >>> from jaxpriv.mechanisms import clip_laplace
      >>> [round(float(p), 6) for p in clip_laplace.cdf([-1.0, 0.0, 1.0], 0.0, 0.5, 1.0)]
      [0.0, 0.5, 1.0]
    """
    with float64():
        z = check_array("z", z, allow_inf=True)
        f, lam, A, _ = _check_params(f, lam, A, z=z)
        return as_output(jax.jit(_cdf)(z, f, lam, A))


def mean(f, lam, A):
    """Mean of CLap(f, λ, A): E[Z] = (2f + (λ+A)(e₁ − e₂)) / (2 − e₁ − e₂), e₁ = e^{(−A−f)/λ}, e₂ = e^{(−A+f)/λ}.

    Source: seed 000, Eq. 1 (stated there for A = C); MATH §4.1. The A ≠ C form is the same expression
    with A in place of C (derivation in the module docstring: C enters Eq. 1 only through λ = 2C/ε).
    Evaluated as f·N/S with N = P(2, A/λ) − (1 + A/λ)e^{−A/λ}(sinh(f/λ)/(f/λ) − 1), which keeps full
    relative precision for λ ≫ A (Eq. 1 as printed loses ~(λ/A)² ulp there) and is exactly odd in f.

    Args:
      f: input value(s), |f| ≤ A.
      lam: scale λ > 0.
      A: output bound A > 0.

    Returns:
      float64 array, shape = broadcast of the arguments.

    Example:
      >>> from jaxpriv.mechanisms import clip_laplace
      >>> round(float(clip_laplace.mean(0.5, clip_laplace.local_scale(1.0, 1.0), 1.0)), 12)
      0.107764141267
    """
    with float64():
        f, lam, A, _ = _check_params(f, lam, A)
        return as_output(_mean_kernel(f, lam, A))


def variance(f, lam, A):
    """Variance of CLap(f, λ, A).

    Var Z = λ²[(P(3, x) + P(3, y))/S − ((P(2, y) − P(2, x))/(2S))²], x = (A+f)/λ, y = (A−f)/λ,
    S = (P(1, x) + P(1, y))/2, P the regularized lower incomplete gamma function (derivation in the
    module docstring; it agrees with E[η²] in the proof of Lemma 9 of seed 000). MATH §4.1. Tends to
    2λ² for λ ≪ A and to A²/3 (uniform) for λ ≫ A. Accurate to ~1e-14 relative for A/λ ≥ 1e-100.

    Args:
      f: input value(s), |f| ≤ A.
      lam: scale λ > 0.
      A: output bound A > 0.

    Returns:
      float64 array, shape = broadcast of the arguments.

    Example:
      >>> from jaxpriv.mechanisms import clip_laplace
      >>> round(float(clip_laplace.variance(0.0, 1e-3, 1.0)), 12)  # 2λ² far from the ends
      2e-06
    """
    with float64():
        f, lam, A, _ = _check_params(f, lam, A)
        return as_output(_variance_kernel(f, lam, A))


def local_scale(epsilon, clip):
    """APES noise scale λ = 2C/ε: sensitivity Δ = 2C of a coordinate clipped to [−C, C] (A = C), rounded
    up, so a client never gets less noise than its ε asks for.

    Source: seed 000, Theorem 1 (λ = Δf/ε) and Algorithm 1 (λ_i = 2C/ε_i); MATH §4.1. Concrete inputs
    give the float64 quotient rounded up (MATH §0.1). Traced inputs (a client's ε inside a jitted round)
    give, in their own float dtype, the correctly rounded quotient moved up one ulp (≥ 2C/ε for the ε
    and C as given), NaN where ε or C is not a finite number > 0.

    Args:
      epsilon: local budget ε > 0.
      clip: clip bound C > 0.

    Returns:
      float64 array of λ, shape = broadcast of the arguments (traced: a JAX array of the inputs' dtype).

    Example:
      >>> from jaxpriv.mechanisms import clip_laplace
      >>> float(clip_laplace.local_scale(0.5, 1.0)), float(clip_laplace.local_scale(3.0, 1.0)) > 2 / 3
      (4.0, True)
    """
    if not is_concrete((epsilon, clip)):
        epsilon, clip = jnp.asarray(epsilon), jnp.asarray(clip)
        lam = 2.0 * clip / epsilon  # 2C is exact: only the division rounds, by at most half an ulp
        lam = jnp.nextafter(lam, jnp.asarray(jnp.inf, lam.dtype))
        valid = (epsilon > 0) & jnp.isfinite(epsilon) & (clip > 0) & jnp.isfinite(clip)
        return jnp.where(valid, lam, jnp.nan)
    with float64():
        epsilon = check_array("epsilon", epsilon, 0.0, np.inf, lo_open=True)
        clip = check_array("clip", clip, 0.0, np.inf, lo_open=True)
        check_broadcastable(epsilon=epsilon, clip=clip)
        return as_output(directed_quotient(2.0 * clip, epsilon, up=True))


# ----------------------------------------------------------------------------------------------------
# sampling
# ----------------------------------------------------------------------------------------------------


@functools.partial(jax.jit, static_argnames=("shape", "dtype"))
def _sample_kernel(key, f, lam, A, shape, dtype):
    # 16-bit floats have too few mantissa bits for the uniform and log1p: compute in float32, then cast.
    work = jnp.promote_types(dtype, jnp.float32)
    u = jax.random.uniform(key, shape, work)
    return _transform(u, f.astype(work), lam.astype(work), A.astype(work)).astype(dtype)


def _sample_dtype(dtype, *values):
    if dtype is None:
        return jnp.result_type(float, *values)
    dtype = jnp.dtype(dtype)
    if not jnp.issubdtype(dtype, jnp.floating):
        raise ValueError(f"dtype must be a floating-point dtype, got {dtype}")
    return dtype


def _sample_shape(shape, param_shape) -> tuple:
    if shape is None:
        return tuple(param_shape)
    try:
        shape = tuple(int(d) for d in np.atleast_1d(shape)) if np.ndim(shape) else (int(shape),)
    except (TypeError, ValueError):
        raise ValueError(f"shape must be a tuple of non-negative integers, got {shape!r}") from None
    if any(d < 0 for d in shape):
        raise ValueError(f"shape must be a tuple of non-negative integers, got {shape!r}")
    try:
        ok = np.broadcast_shapes(tuple(param_shape), shape) == shape
    except ValueError:
        ok = False
    if not ok:
        raise ValueError(f"shape {shape} must be a broadcast target of the parameters' shape {tuple(param_shape)}")
    return shape


def sample(key, f, lam, A, shape=None, dtype=None):
    """Exact samples of CLap(f, λ, A), always inside [−A, A].

    Inverse-CDF sampling (module docstring): one uniform U and one log1p per sample,
    z = f + λ log1p(−2US) when U·S < w_L, else f − λ log1p(−2(1−U)S), clamped to [−A, A] against
    rounding. Source of the distribution: seed 000, Definition 4; MATH §4.1.

    Works inside ``jit``/``vmap`` (validation runs only on concrete inputs). The dtype follows the inputs
    and the default float (float32 unless x64 is enabled); 16-bit dtypes are computed in float32.

    Args:
      key: a JAX PRNG key.
      f: input value(s), |f| ≤ A (e.g. clipped gradient coordinates).
      lam: scale λ > 0.
      A: output bound A > 0.
      shape: output shape; the parameters must broadcast to it. Default: their broadcast shape.
      dtype: output float dtype; default: the result type of the inputs and the default float.

    Returns:
      JAX array of ``shape`` and ``dtype``.

    Example:
      >>> import jax
      >>> from jaxpriv.mechanisms import clip_laplace
      >>> z = clip_laplace.sample(jax.random.key(0), 0.3, 2.0, 1.0, shape=(10_000,))
      >>> z.shape, str(z.dtype), bool((abs(z) <= 1.0).all())
      ((10000,), 'float32', True)
    """
    dtype = _sample_dtype(dtype, f, lam, A)
    if is_concrete((f, lam, A)):
        _, _, _, param_shape = _check_params(f, lam, A, within_dtype=dtype)
    else:
        param_shape = np.broadcast_shapes(np.shape(f), np.shape(lam), np.shape(A))
    shape = _sample_shape(shape, param_shape)
    f, lam, A = (jnp.asarray(v, dtype=dtype) for v in (f, lam, A))
    return _sample_kernel(key, f, lam, A, shape, jnp.dtype(dtype))


# ----------------------------------------------------------------------------------------------------
# privacy: Theorem 1 (worst log-ratio) and Lemma 4 (neighbor divergence, echo probabilities)
# ----------------------------------------------------------------------------------------------------


@functools.partial(jax.jit, static_argnames="grid")
def _worst_log_ratio_kernel(eps, clip, A, grid):
    unit = jnp.linspace(-1.0, 1.0, grid)

    def one(params):
        e, c, a = params
        lam = 2.0 * c / e
        table = _log_prob((a * unit)[None, :], (c * unit)[:, None], lam, a)  # [f, z]
        return jnp.max(jnp.max(table, axis=0) - jnp.min(table, axis=0))

    return jax.lax.map(one, (eps, clip, A))


def _check_clip_and_range(clip, A):
    clip_in, A_in = clip, A
    clip = check_array("clip", clip, 0.0, np.inf, lo_open=True)
    if A is None:
        return clip, clip
    A = check_array("A", A, 0.0, np.inf, lo_open=True)
    if is_concrete((clip_in, A_in)):
        ca, aa = np.broadcast_arrays(np.asarray(clip_in, dtype=np.float64), np.asarray(A_in, dtype=np.float64))
        if (aa < ca).any():
            raise ValueError(
                f"A must be ≥ clip (A ≥ Δ/2 with Δ = 2C, Theorem 1), got A={float(aa[aa < ca].flat[0])!r} "
                f"with clip={float(ca[aa < ca].flat[0])!r}"
            )
    return clip, A


def worst_log_ratio(epsilon, clip, A=None, grid: int = 257):
    """Numerical check of Theorem 1: sup over z ∈ [−A, A] and f, f' ∈ [−C, C] of log p(z|f)/p(z|f').

    λ = 2C/ε (Δ = 2C). Theorem 1 of seed 000 (MATH §4.1) says the supremum is ≤ ε whenever A ≥ C; it is
    attained at f = C, f' = −C, z = ±A (where it equals ε exactly), which every grid contains, so the
    grid maximum is the supremum up to rounding.

    Args:
      epsilon: local budget ε > 0.
      clip: clip bound C > 0 (inputs f ∈ [−C, C]).
      A: output bound, A ≥ C (default C).
      grid: points per axis (z and f), an integer ≥ 2; memory and time grow as grid².

    Returns:
      float64 array of the worst log-ratio, shape = broadcast of ``epsilon, clip, A``.

    Example:
      >>> from jaxpriv.mechanisms import clip_laplace
      >>> round(float(clip_laplace.worst_log_ratio(1.0, 0.5, A=2.0)), 12)
      1.0
    """
    with float64():
        epsilon = check_array("epsilon", epsilon, 0.0, np.inf, lo_open=True)
        clip, A = _check_clip_and_range(clip, A)
        if isinstance(grid, bool) or not isinstance(grid, (int, np.integer)) or grid < 2:
            raise ValueError(f"grid must be an integer ≥ 2, got {grid!r}")
        shape = check_broadcastable(epsilon=epsilon, clip=clip, A=A)
        flat = [jnp.broadcast_to(v, shape).reshape(-1) for v in (epsilon, clip, A)]
        return as_output(_worst_log_ratio_kernel(*flat, int(grid)).reshape(shape))


def echo_factors_kernel(e):
    """The four factors of p_ij = a(ε_i)·b(ε_j)·e^{−max(ε_i, ε_j)} (seed 000, Lemma 4; MATH §3.2): returns
    (a, b, f, g) with a(ε) = ε/(1−e^{−ε}), b = 1/a, f = a·e^{−ε} and g = b·e^{−ε}, elementwise (JAX, traceable).
    A kernel, like ``rdp.dpsgd_epsilon_kernel``: it does not check its input (ε > 0); its callers
    (:func:`neighbor_divergence`, :func:`echo_probabilities`, the shuffle bounds) validate first.

    The closed-form neighbor divergence (:func:`neighbor_divergence`, A = C) is log a(ε_i) + log b(ε_j) +
    max(ε_i, ε_j); the echo probabilities (:func:`echo_probabilities`), the APES echo sum of
    :func:`jaxpriv.shuffle.bounds.apes_echo_sum` and the APES clone probabilities of
    :mod:`jaxpriv.shuffle.personalized` are built from these factors.

    Example:
      >>> from jaxpriv.mechanisms import clip_laplace
      >>> a, b, f, g = (float(v) for v in clip_laplace.echo_factors_kernel(1.0))
      >>> round(a * b, 6), round(a, 4), round(f, 4), round(g, 4)
      (1.0, 1.582, 0.582, 0.2325)
    """
    one_minus = -jnp.expm1(-e)  # 1 − e^{−ε}, no cancellation for small ε
    a = e / one_minus
    b = one_minus / e
    f = e / jnp.expm1(e)  # a(ε)·e^{−ε}
    g = b * jnp.exp(-e)  # b(ε)·e^{−ε}
    return a, b, f, g


@jax.jit
def _neighbor_divergence_closed(eps_i, eps_j):
    a_i, _, _, _ = echo_factors_kernel(eps_i)
    _, b_j, _, _ = echo_factors_kernel(eps_j)
    return jnp.log(a_i) + jnp.log(b_j) + jnp.maximum(eps_i, eps_j)


@jax.jit
def _neighbor_divergence_alpha(eps_i, eps_j, clip, A):
    log_alpha = jnp.log(_normalizer(clip, 2.0 * clip / eps_j, A)) - jnp.log(_normalizer(clip, 2.0 * clip / eps_i, A))
    return log_alpha + jnp.log(eps_i / eps_j) + 0.5 * (eps_i + eps_j) + 0.5 * A / clip * jnp.abs(eps_i - eps_j)


def neighbor_divergence(eps_i, eps_j, clip=1.0, A=None):
    """Upper bound on the neighbor divergence D_N(μ_i ‖ μ_j) of Clip-Laplace randomizers (Lemma 4).

    D_N(μ_i ‖ μ_j) = sup over z and over inputs f, f' ∈ [−C, C] of log μ_i(z | f)/μ_j(z | f'), where μ_k is
    CLap(·, 2C/ε_k, A). Lemma 4 of seed 000 (MATH §3.2):

    * A = C (``A=None``): D_N ≤ log((ε_i/ε_j)·(1−e^{−ε_j})/(1−e^{−ε_i})·e^{max(ε_i, ε_j)}), evaluated with the
      factors a(ε) = ε/(1−e^{−ε}), b = 1/a of :func:`echo_factors_kernel`.
    * general A ≥ C: D_N ≤ log(α·(ε_i/ε_j)·e^{(ε_i+ε_j)/2 + A|ε_i−ε_j|/(2C)}), α = S_j/S_i with
      S_k = 1 − ½e^{ε_k(−A+C)/(2C)} − ½e^{ε_k(−A−C)/(2C)} the normalizer at f = C. At A = C it equals the
      closed form exactly. (The proof bounds |z − f'|/λ_j − |z − f|/λ_i by the triangle inequality and
      uses that S(u)e^{εu/(2C)} increases on [−C, C] when A ≥ C; tested numerically against the densities.)

    The echo probability of :func:`echo_probabilities` is p_ij = e^{−D_N(μ_j ‖ μ_i)}.

    Args:
      eps_i, eps_j: local budgets > 0 (broadcast together).
      clip: clip bound C > 0.
      A: output bound A ≥ C; ``None`` means A = C and selects the closed form.

    Returns:
      float64 array, shape = broadcast of the arguments.

    Example:
      >>> from jaxpriv.mechanisms import clip_laplace
      >>> round(float(clip_laplace.neighbor_divergence(1.0, 1.0)), 12)  # equal budgets: D_N = ε
      1.0
      >>> closed = clip_laplace.neighbor_divergence(0.5, 1.0)
      >>> bool(abs(clip_laplace.neighbor_divergence(0.5, 1.0, A=1.0) - closed) < 1e-14), round(float(closed), 9)
      (True, 0.780929804)
    """
    with float64():
        eps_i = check_array("eps_i", eps_i, 0.0, np.inf, lo_open=True)
        eps_j = check_array("eps_j", eps_j, 0.0, np.inf, lo_open=True)
        closed = A is None
        clip, A = _check_clip_and_range(clip, A)
        check_broadcastable(eps_i=eps_i, eps_j=eps_j, clip=clip, A=A)
        if closed:
            out = _neighbor_divergence_closed(eps_i, eps_j)
            return as_output(jnp.broadcast_to(out, jnp.broadcast_shapes(out.shape, clip.shape)))
        return as_output(_neighbor_divergence_alpha(eps_i, eps_j, clip, A))


@jax.jit
def _echo_matrix(e):
    a, b, _, _ = echo_factors_kernel(e)
    return a[..., :, None] * b[..., None, :] * jnp.exp(-jnp.maximum(e[..., :, None], e[..., None, :]))


def echo_probabilities(local_epsilons):
    """Echo probabilities p_ij = e^{−D_N(μ_j ‖ μ_i)} = (ε_i/ε_j)·(1−e^{−ε_j})/(1−e^{−ε_i})·e^{−max(ε_i, ε_j)}.

    p_ij ≤ inf_z μ_i(z | f)/μ_j(z | f') for all inputs, so user i's output is a mixture that contains
    user j's output on either neighboring input with probability p_ij/2 each (the "echo", seed 000,
    Step (i) of §4.3 and Lemma 4, A = C; MATH §3.2). Built from :func:`echo_factors_kernel`, as is
    :func:`jaxpriv.shuffle.bounds.apes_echo_sum`, whose S is (Σ_{i≠t} Σ_j p_ij)/n. O(n²) memory: a test
    oracle and a tool for small n; the accountant uses the O(n log n) sum.

    Args:
      local_epsilons: budgets ε_i > 0 on the last axis (n ≥ 1); leading axes are a batch.

    Returns:
      float64 array of shape ``batch + (n, n)``, entry [..., i, j] = p_ij.

    Example:
      >>> import numpy as np
      >>> from jaxpriv.mechanisms import clip_laplace
      >>> p = clip_laplace.echo_probabilities([1.0, 1.0])
      >>> bool(np.allclose(p, np.exp(-1.0), rtol=1e-15))
      True
    """
    with float64():
        eps = _check_budget_array("local_epsilons", local_epsilons)
        return as_output(_echo_matrix(eps))


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


@jax.jit
def _mixture_ratio(g, lam, weights, clip):
    """Σ_u w_u E[CLap(g, λ_u, C)]/g for a block of nodes g (N,) and budgets (B,)."""
    return jnp.sum(weights[None, :] * _mean_ratio(g[:, None], lam[None, :], clip), axis=1)


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


@jax.jit
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
      >>> from jaxpriv.mechanisms import clip_laplace
      >>> eps = np.array([0.5, 1.0, 1.0, 4.0])
      >>> lam = clip_laplace.local_scale(eps, 1.0)
      >>> m = np.mean(clip_laplace.mean(0.3, lam, 1.0))
      >>> round(float(clip_laplace.calibrate(m, eps, 1.0)), 12)
      0.3
    """
    with float64():
        if not is_concrete((local_epsilons, clip)):
            raise ValueError("local_epsilons and clip must be concrete values (not traced)")
        eps = _check_budget_array("local_epsilons", local_epsilons)
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
      >>> from jaxpriv.mechanisms import clip_laplace
      >>> eps = np.array([0.5, 1.0, 1.0, 4.0])
      >>> m = np.mean(clip_laplace.mean(0.3, clip_laplace.local_scale(eps, 1.0), 1.0))
      >>> table = clip_laplace.calibration_table(eps, 1.0)
      >>> g = clip_laplace.calibrate_with_table(m, table)
      >>> table.coeffs.shape[0] % clip_laplace.TABLE_PANELS, round(float(g), 12)
      (0, 0.3)
    """
    with float64():
        eps = _check_budget_array("local_epsilons", local_epsilons)
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


@functools.partial(jax.jit, static_argnames="b")
def _sparsify_kernel(key, values, eps, clip, b):
    dtype = values.dtype
    lam = (2.0 * clip / eps).astype(dtype)
    dummies = _sample_kernel(key, jnp.zeros((), dtype), lam[..., None], clip.astype(dtype), values.shape, dtype)
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
      >>> from jaxpriv.mechanisms import clip_laplace
      >>> v = jnp.array([0.1, -0.9, 0.2, 0.8])
      >>> out = clip_laplace.sparsify(jax.random.key(1), v, 1.0, 1.0, b=2)
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
