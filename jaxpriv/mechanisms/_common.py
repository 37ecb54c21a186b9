"""Plumbing shared by the mechanism modules: safe-side rounding of a quotient, validated scaled sampling."""

from __future__ import annotations

import contextlib
import functools

import jax
import jax.numpy as jnp
import numpy as np

from .._numerics import check_array, float64, is_concrete, kernel_jit



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
