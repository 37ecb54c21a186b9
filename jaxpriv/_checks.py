"""Validation of concrete numbers with numpy only: a ``ValueError`` that names the parameter and its valid
range (MATH §0.4). :func:`jaxpriv._numerics.check_array` adds the tracer rule and the JAX conversion."""

from __future__ import annotations

import numpy as np

__all__ = ["check_scalar", "check_values", "in_range", "range_text"]


def in_range(xp, v, lo, hi, *, lo_open=False, hi_open=False, integer=False, allow_inf=False):
    """Elementwise: ``v`` (an array of module ``xp``, numpy or jax.numpy) lies in the range, is not NaN,
    is finite unless ``allow_inf``, and is an integer when ``integer`` is set."""
    ok = (v > lo) if lo_open else (v >= lo)
    ok &= (v < hi) if hi_open else (v <= hi)
    ok = ok if allow_inf else ok & xp.isfinite(v)
    return ok & (xp.floor(v) == v) if integer else ok


def range_text(lo, hi, lo_open, hi_open) -> str:
    left = "(" if lo_open or lo == -np.inf else "["
    right = ")" if hi_open or hi == np.inf else "]"
    return f"{left}{lo}, {hi}{right}"


def check_values(
    name: str,
    value,
    lo: float = -np.inf,
    hi: float = np.inf,
    *,
    lo_open: bool = False,
    hi_open: bool = False,
    integer: bool = False,
    allow_inf: bool = False,
):
    """Validate ``value`` and return it as a float64 numpy array (no JAX: the command line checks its
    arguments with it before importing JAX).

    Raises ``ValueError`` naming ``name`` and its valid range when ``value`` is empty, NaN, infinite
    (unless ``allow_inf``), outside the range, or not integer-valued when ``integer`` is set.

    Example:
      >>> check_values("sampling rate q", 1.5, 0.0, 1.0)
      Traceback (most recent call last):
      ...
      ValueError: sampling rate q must lie in [0.0, 1.0], got 1.5
    """
    try:
        is_bool = np.asarray(value).dtype == np.bool_
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as err:  # strings, ragged nested lists, …
        raise ValueError(f"{name} must be a real number or an array of real numbers, got {value!r}") from err
    if is_bool:  # True would silently count as 1
        raise ValueError(f"{name} must be a real number, not a bool, got {value!r}")
    valid = f"{name} must lie in {range_text(lo, hi, lo_open, hi_open)}"
    if arr.size == 0:
        raise ValueError(f"{name} is empty; {valid}")
    if np.isnan(arr).any():
        raise ValueError(f"{name} contains NaN; {valid}")
    if not allow_inf and np.isinf(arr).any():
        raise ValueError(f"{name} contains inf; {valid}")
    bad = ~in_range(np, arr, lo, hi, lo_open=lo_open, hi_open=hi_open, allow_inf=True)
    if bad.any():
        first = float(arr[bad].flat[0])
        raise ValueError(f"{valid}, got {first!r}")
    if integer and (np.floor(arr) != arr).any():
        first = float(arr[np.floor(arr) != arr].flat[0])
        raise ValueError(f"{name} must be an integer, got {first!r}")
    return arr


def check_scalar(name: str, value, lo: float, hi: float, **rules) -> float:
    """:func:`check_values` for a parameter that must be one number (not an array): returns it as a float."""
    if np.ndim(value) != 0:
        raise ValueError(f"{name} must be a single number, got an array of shape {np.shape(value)}")
    return float(check_values(name, value, lo, hi, **rules))
