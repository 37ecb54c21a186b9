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

import jax
import jax.numpy as jnp
import numpy as np

from .._docs import fill_doc
from .._numerics import as_output, check_array, check_broadcastable, float64, is_concrete, kernel_jit
from ._common import directed_quotient

#: the Args/Returns of the distribution's functions of (f, λ, A), with an optional first argument
_ARGS = """
    Args:{first}
      f: input value(s), |f| ≤ A.
      lam: scale λ > 0.
      A: output bound A > 0.

    Returns:
      float64 array, shape = broadcast of the arguments."""
_POINTS = "\n      z: point(s) at which to evaluate (any real, ±inf allowed)."

__all__ = [
    "normalizer",
    "log_prob",
    "cdf",
    "sample",
    "mean",
    "variance",
    "local_scale",
    "worst_log_ratio",
    "normalizer_kernel",
    "mean_ratio_kernel",
    "sample_kernel",
    "check_clip_and_range",
    "check_budgets",
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


def check_budgets(name: str, value):
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


def normalizer_kernel(f, lam, A):
    w_left, w_right = _half_masses(f, lam, A)
    return w_left + w_right


def _log_prob(z, f, lam, A):
    inside = jnp.abs(z) <= A
    value = -jnp.abs(z - f) / lam - jnp.log(2.0 * lam) - jnp.log(normalizer_kernel(f, lam, A))
    return jnp.where(inside, value, -jnp.inf)


def _cdf(z, f, lam, A):
    s = normalizer_kernel(f, lam, A)
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


def mean_ratio_kernel(f, lam, A):
    """E[Z]/f = N/S, N = P(2, s) − (1+s)e^{−s}(sinh(t)/t − 1), s = A/λ, t = f/λ (module docstring)."""
    s, t = A / lam, f / lam
    numerator = _reg_lower_gamma(2, s) - (1.0 + s) * _sinhc_minus_one_scaled(s, t, (A - jnp.abs(f)) / lam)
    return numerator / normalizer_kernel(f, lam, A)


@kernel_jit
def _mean_kernel(f, lam, A):
    return f * mean_ratio_kernel(f, lam, A)


@kernel_jit
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
        return as_output(kernel_jit(normalizer_kernel)(f, lam, A))


@fill_doc(args=_ARGS.format(first=_POINTS))
def log_prob(z, f, lam, A):
    """Log-density of CLap(f, λ, A): −|z−f|/λ − log(2λS) on [−A, A], −inf outside.

    Source: seed 000, Definition 4; MATH §4.1.

    {args}

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
        return as_output(kernel_jit(_log_prob)(z, f, lam, A))


@fill_doc(args=_ARGS.format(first=_POINTS))
def cdf(z, f, lam, A):
    """Distribution function Pr[Z ≤ z] of CLap(f, λ, A) (0 below −A, 1 above A).

    For z ≤ f: e^{(z−f)/λ}(1 − e^{−(z+A)/λ})/(2S); for z > f: 1 − e^{−(z−f)/λ}(1 − e^{−(A−z)/λ})/(2S),
    each written with expm1 (integral of Definition 4 of seed 000; MATH §4.1).

    {args}

    Example:
      >>> from jaxpriv.mechanisms import clip_laplace
      >>> [round(float(p), 6) for p in clip_laplace.cdf([-1.0, 0.0, 1.0], 0.0, 0.5, 1.0)]
      [0.0, 0.5, 1.0]
    """
    with float64():
        z = check_array("z", z, allow_inf=True)
        f, lam, A, _ = _check_params(f, lam, A, z=z)
        return as_output(kernel_jit(_cdf)(z, f, lam, A))


@fill_doc(args=_ARGS.format(first=""))
def mean(f, lam, A):
    """Mean of CLap(f, λ, A): E[Z] = (2f + (λ+A)(e₁ − e₂)) / (2 − e₁ − e₂), e₁ = e^{(−A−f)/λ}, e₂ = e^{(−A+f)/λ}.

    Source: seed 000, Eq. 1 (stated there for A = C); MATH §4.1. The A ≠ C form is the same expression
    with A in place of C (derivation in the module docstring: C enters Eq. 1 only through λ = 2C/ε).
    Evaluated as f·N/S with N = P(2, A/λ) − (1 + A/λ)e^{−A/λ}(sinh(f/λ)/(f/λ) − 1), which keeps full
    relative precision for λ ≫ A (Eq. 1 as printed loses ~(λ/A)² ulp there) and is exactly odd in f.

    {args}

    Example:
      >>> from jaxpriv.mechanisms import clip_laplace
      >>> round(float(clip_laplace.mean(0.5, clip_laplace.local_scale(1.0, 1.0), 1.0)), 12)
      0.107764141267
    """
    with float64():
        f, lam, A, _ = _check_params(f, lam, A)
        return as_output(_mean_kernel(f, lam, A))


@fill_doc(args=_ARGS.format(first=""))
def variance(f, lam, A):
    """Variance of CLap(f, λ, A).

    Var Z = λ²[(P(3, x) + P(3, y))/S − ((P(2, y) − P(2, x))/(2S))²], x = (A+f)/λ, y = (A−f)/λ,
    S = (P(1, x) + P(1, y))/2, P the regularized lower incomplete gamma function (derivation in the
    module docstring; it agrees with E[η²] in the proof of Lemma 9 of seed 000). MATH §4.1. Tends to
    2λ² for λ ≪ A and to A²/3 (uniform) for λ ≫ A. Accurate to ~1e-14 relative for A/λ ≥ 1e-100.

    {args}

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


@functools.partial(kernel_jit, static_argnames=("shape", "dtype"))
def sample_kernel(key, f, lam, A, shape, dtype):
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
    return sample_kernel(key, f, lam, A, shape, jnp.dtype(dtype))


# ----------------------------------------------------------------------------------------------------
# privacy: Theorem 1 (worst log-ratio) and Lemma 4 (neighbor divergence, echo probabilities)
# ----------------------------------------------------------------------------------------------------


@functools.partial(kernel_jit, static_argnames="grid")
def _worst_log_ratio_kernel(eps, clip, A, grid):
    unit = jnp.linspace(-1.0, 1.0, grid)

    def one(params):
        e, c, a = params
        lam = 2.0 * c / e
        table = _log_prob((a * unit)[None, :], (c * unit)[:, None], lam, a)  # [f, z]
        return jnp.max(jnp.max(table, axis=0) - jnp.min(table, axis=0))

    return jax.lax.map(one, (eps, clip, A))


def check_clip_and_range(clip, A):
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
        clip, A = check_clip_and_range(clip, A)
        if isinstance(grid, bool) or not isinstance(grid, (int, np.integer)) or grid < 2:
            raise ValueError(f"grid must be an integer ≥ 2, got {grid!r}")
        shape = check_broadcastable(epsilon=epsilon, clip=clip, A=A)
        flat = [jnp.broadcast_to(v, shape).reshape(-1) for v in (epsilon, clip, A)]
        return as_output(_worst_log_ratio_kernel(*flat, int(grid)).reshape(shape))


# Names that moved out with their concepts (echo of neighbors; APES's analyzer): still importable from here.
_MOVED = {**{name: "echo" for name in ("neighbor_divergence", "echo_factors_kernel", "echo_probabilities")},
          **{name: "clip_laplace_analyzer" for name in ("calibrate", "CalibrationTable", "TABLE_PANELS",
                                                        "calibration_table", "calibrate_with_table", "sparsify")}}


def __getattr__(name: str):
    if name not in _MOVED:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    home = f"jaxpriv.mechanisms.{_MOVED[name]}"
    warnings.warn(f"jaxpriv.mechanisms.clip_laplace.{name} moved to {home}.{name}", DeprecationWarning, stacklevel=2)
    return getattr(importlib.import_module(home), name)
