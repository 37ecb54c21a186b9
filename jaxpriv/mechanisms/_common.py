"""Plumbing shared by the mechanism modules: safe-side rounding of a quotient, validated scaled sampling, and
the public functions of a *scale family* — zero-mean noise s·Z of one scale s > 0 (the Gaussian's σ, the
Laplace's b) — written once for both: log-density, moments, the RDP curve at sensitivity Δ, Δ/s."""

from __future__ import annotations

import contextlib
import functools
import inspect

import jax
import jax.numpy as jnp
import numpy as np

from .._numerics import as_output, check_array, check_broadcastable, float64, is_concrete, kernel_jit



def _split_product(a):
    c = 134217729.0 * a  # 2^27 + 1: Veltkamp's split into two 26-bit halves
    hi = c - (c - a)
    return hi, a - hi


def directed_quotient(num, den, *, up: bool):
    """num/den (den > 0, float64) rounded up (``up``) or down: the adjacent float on that side of the
    exact quotient when the division is inexact, the exact quotient otherwise.

    The sign of the residual q·den − num is exact: Dekker's error-free product gives q·den = p + e
    exactly, and p − num is exact by Sterbenz's lemma because p is within an ulp of num.
    """
    q = num / den
    # The nudge is a constant for differentiation (nextafter has no derivative; the slope is num/den's).
    qs, num, den = (jax.lax.stop_gradient(v) for v in (q, num, den))
    p = qs * den
    qh, ql = _split_product(qs)
    dh, dl = _split_product(den)
    e = ((qh * dh - p) + qh * dl + ql * dh) + ql * dl
    residual = (p - num) + e  # sign of q·den − num
    wrong_side = residual < 0 if up else residual > 0
    step = jnp.nextafter(qs, jnp.inf if up else -jnp.inf) - qs  # one ulp, exact
    return q + jnp.where(wrong_side, step, 0.0)


@functools.partial(kernel_jit, static_argnames=("draw", "shape", "dtype"))
def _scaled_kernel(key, scale, draw, shape, dtype):
    return draw(key, shape, dtype) * jnp.asarray(scale).astype(dtype)


def check_float_dtype(dtype):
    """``dtype`` as a numpy dtype; raises ValueError unless it is a floating-point dtype."""
    try:
        dtype = jnp.dtype(dtype)
    except TypeError:
        raise ValueError(f"dtype must be a floating-point dtype, got {dtype!r}") from None
    if not jnp.issubdtype(dtype, jnp.floating):
        raise ValueError(f"dtype must be a floating-point dtype, got {dtype}")
    return dtype


def scaled_noise(draw, key, scale, shape, dtype, name: str):
    """``scale * draw(key, shape, dtype)`` after validating ``scale`` (> 0, broadcasting to ``shape``),
    ``shape`` and ``dtype``. A 64-bit dtype is sampled in a scoped x64 context (eagerly; inside a
    caller's ``jit`` it needs ``jax_enable_x64`` on there, because the scope ends before lowering)."""
    try:
        shape = tuple(int(s) for s in ((shape,) if np.ndim(shape) == 0 else shape))
    except (TypeError, ValueError):
        raise ValueError(f"shape must be a tuple of non-negative integers, got {shape!r}") from None
    if any(s < 0 for s in shape):
        raise ValueError(f"shape must be a tuple of non-negative integers, got {shape!r}")
    dtype = check_float_dtype(dtype)
    if is_concrete(scale):
        check_array(name, scale, 0.0, np.inf, lo_open=True)
    try:
        fits = np.broadcast_shapes(np.shape(scale), shape) == shape
    except ValueError:
        fits = False
    if not fits:
        raise ValueError(f"{name} of shape {np.shape(scale)} does not broadcast to the sample shape {shape}")
    if is_concrete(scale) and dtype in (np.float32, np.float16):  # bfloat16 samplers draw in float32
        scale = round_to(scale, dtype)
    with float64() if dtype.itemsize == 8 else contextlib.nullcontext():
        return _scaled_kernel(key, scale, draw, shape, dtype)


def round_to(value, dtype, up: bool = True) -> np.ndarray:
    """``value`` in ``dtype``, rounded up (or down with ``up=False``) instead of to nearest, so that a noise
    scale cast to float32 for sampling is never below the calibrated one (MATH §0: the safe side)."""
    exact = np.asarray(value, dtype=np.float64)
    cast = exact.astype(dtype)
    wrong = cast.astype(np.float64) < exact if up else cast.astype(np.float64) > exact
    return np.where(wrong, np.nextafter(cast, np.asarray(np.inf if up else -np.inf, dtype)), cast).astype(dtype)


def check_sensitivity(sensitivity):
    """Validated sensitivity Δ > 0 as float64 (a narrower float is read at the end of its rounding interval
    that makes privacy worse, the larger)."""
    return check_array("sensitivity", sensitivity, 0.0, np.inf, lo_open=True, worse="up")


# ----------------------------------------------------------------------------------------------------
# Scale families: the Gaussian (s = σ) and the Laplace (s = b) modules' parallel functions
# ----------------------------------------------------------------------------------------------------

#: docstring sections of a scale family's functions (``{scale}``: the parameter's name, ``{symbol}``: its
#: letter), filled by :func:`jaxpriv._docs.fill_doc`
SCALE_DOCS = {
    "sample": """
        Args:
          key: a JAX PRNG key (``jax.random.key`` or a legacy ``PRNGKey``).
          {scale}: {symbol} > 0; a scalar or an array broadcasting to ``shape``.
          shape: shape of the draw (tuple of non-negative ints).
          dtype: floating dtype of the draw (float32 default; bfloat16 and float64 allowed).

        Returns:
          array of ``shape`` and ``dtype``.""",
    "rdp": """
        Args:
          {scale}: {symbol} > 0 (shape ``S``, broadcasting with ``sensitivity``).
          orders: 1-D array of ``K`` Rényi orders > 1.
          sensitivity: Δ > 0.

        Returns:
          float64 array of shape ``S + (K,)``.""",
    "ratio": """
        Args:
          {scale}: {symbol} > 0.
          sensitivity: Δ > 0, broadcasting with ``{scale}``.

        Returns:
          float64 array of {result}.""",
}

_LOG_PROB_DOC = """Log-density of {law} at x: {formula} (float64).

    Source: {source}; MATH §4 (each mechanism exposes its log-density).

    Args:
      x: points (any shape).
      {scale}: {symbol} > 0, broadcasting against ``x``.

    Returns:
      float64 array of the broadcast shape.

    Example:
      >>> from jaxpriv.mechanisms import {module}
      >>> round(float({module}.log_prob({example})), 12)
      {value}
    """

_MOMENT_DOC = """{what} of the noise {law}: {formula}, with the shape of ``{scale}`` (float64). MATH §4.

    Example:
      >>> from jaxpriv.mechanisms import {module}
      >>> float({module}.{name}({example}))
      {value}
    """


def scale_doc(section: str, scale: str, symbol: str, **fields) -> str:
    """The ``section`` of :data:`SCALE_DOCS` for the scale parameter ``scale`` (letter ``symbol``)."""
    return SCALE_DOCS[section].format(scale=scale, symbol=symbol, **fields)


def scale_family(module: str, scale: str, symbol: str, law: str, log_density, log_density_doc: tuple,
                 variance, variance_doc: tuple):
    """The public ``log_prob(x, s)``, ``mean(s)`` and ``variance(s)`` of the zero-mean noise family ``law`` of
    scale ``scale`` in :mod:`jaxpriv.mechanisms`.``module``: ``log_density(x, s)`` is its jitted log-density
    (``log_density_doc``: its formula, source, an example's arguments and value) and ``variance(s)`` its
    variance (``variance_doc``: the formula, an example's argument and value). The module lists the three in
    its ``__test__`` so that their examples run as its doctests."""

    # The public parameter is named ``scale`` ("sigma", "scale"): keyword calls and help() see that name.
    named = inspect.Parameter.POSITIONAL_OR_KEYWORD
    two = inspect.Signature([inspect.Parameter("x", named), inspect.Parameter(scale, named)])
    one = inspect.Signature([inspect.Parameter(scale, named)])

    def log_prob(*args, **kwargs):
        x, s = two.bind(*args, **kwargs).args
        return scale_log_prob(log_density, x, s, scale)

    def mean(*args, **kwargs):
        (s,) = one.bind(*args, **kwargs).args
        return scale_moment(jnp.zeros_like, s, scale)

    def variance_(*args, **kwargs):
        (s,) = one.bind(*args, **kwargs).args
        return scale_moment(variance, s, scale)

    log_prob.__signature__, mean.__signature__, variance_.__signature__ = two, one, one
    formula, source, example, value = log_density_doc
    log_prob.__doc__ = _LOG_PROB_DOC.format(law=law, formula=formula, source=source, scale=scale, symbol=symbol,
                                            module=module, example=example, value=value)
    mean.__doc__ = _MOMENT_DOC.format(what="Mean", law=law, formula="0", scale=scale, module=module,
                                      name="mean", example="3.0", value="0.0")
    formula, example, value = variance_doc
    variance_.__doc__ = _MOMENT_DOC.format(what="Variance", law=law, formula=formula, scale=scale, module=module,
                                           name="variance", example=example, value=value)
    functions = (log_prob, mean, variance_)
    for fn, name in zip(functions, ("log_prob", "mean", "variance")):
        fn.__name__ = fn.__qualname__ = name
        fn.__module__ = f"jaxpriv.mechanisms.{module}"
    return functions


def check_scale(name: str, value, worse: str | None = None):
    """Validated scale s > 0 as float64 (``worse``: as in :func:`jaxpriv._numerics.check_array`)."""
    return check_array(name, value, 0.0, np.inf, lo_open=True, worse=worse)


def scale_log_prob(kernel, x, scale, name: str):
    """``kernel(x, s)`` (the family's log-density) after validating x, the scale ``name`` and their shapes."""
    with float64():
        x = check_array("x", x)
        scale = check_scale(name, scale)
        check_broadcastable(**{"x": x, name: scale})
        return as_output(kernel(x, scale))


def scale_moment(moment, scale, name: str):
    """``moment(s)`` (a moment of the family as a function of its scale) after validating the scale."""
    with float64():
        return as_output(moment(check_scale(name, scale)))


def _scale_and_sensitivity(scale, sensitivity, name: str, worse):
    scale = check_scale(name, scale, worse)
    sensitivity = check_sensitivity(sensitivity)
    check_broadcastable(**{name: scale, "sensitivity": sensitivity})
    return scale, sensitivity


def scale_rdp(curve, scale, orders, sensitivity, name: str, worse: str | None = None):
    """The family's RDP curve at sensitivity Δ: ``curve(s/Δ, orders)`` (the unit-sensitivity curve of
    :mod:`jaxpriv.rdp`), s/Δ rounded down so that ρ is never underestimated."""
    with float64():
        scale, sensitivity = _scale_and_sensitivity(scale, sensitivity, name, worse)
        return curve(directed_quotient(scale, sensitivity, up=False), orders)


def sensitivity_over_scale(scale, sensitivity, name: str, worse: str | None = None):
    """Δ/s rounded up (the Gaussian's μ, the Laplace's pure ε), after validating both."""
    with float64():
        scale, sensitivity = _scale_and_sensitivity(scale, sensitivity, name, worse)
        return as_output(directed_quotient(sensitivity, scale, up=True))
