"""Numerical plumbing shared by every kernel: the float64 policy, input validation and log-space helpers.

Two rules live here (SPEC §0.3-0.4):

* Accounting runs in float64 whatever the caller's global ``jax_enable_x64`` flag says. Public functions
  wrap their work in :func:`float64`, a scoped ``jax.enable_x64(True)``; the caller's flag is never
  flipped globally.
* Invalid input raises ``ValueError`` naming the parameter and its valid range. Validation runs once, at
  the Python boundary, on concrete values; inside a caller's ``jit``/``grad`` (tracers) it is skipped and
  the kernels compute on whatever they are given.
"""

from __future__ import annotations

import contextlib
from typing import Iterator

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import log_ndtr

__all__ = [
    "float64",
    "is_concrete",
    "check_array",
    "check_orders",
    "log_expm1",
    "log1mexp",
    "log_normal_cdf",
    "as_output",
]


@contextlib.contextmanager
def float64() -> Iterator[None]:
    """Scope float64 for the accounting path without touching the caller's global JAX setting."""
    with jax.enable_x64(True):
        yield


def is_concrete(x) -> bool:
    """True when ``x`` holds values we can inspect (not a tracer inside the caller's jit/grad)."""
    return not any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree_util.tree_leaves(x))


def _range_text(lo, hi, lo_open, hi_open) -> str:
    left = "(" if lo_open or lo == -np.inf else "["
    right = ")" if hi_open or hi == np.inf else "]"
    return f"{left}{lo}, {hi}{right}"


def check_array(
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
    """Validate ``value`` and return it as a float64 JAX array.

    Raises ``ValueError`` naming ``name`` and its valid range when ``value`` is empty, NaN, infinite
    (unless ``allow_inf``), outside the range, or not integer-valued when ``integer`` is set.
    Tracers pass through unchecked (see module docstring).
    """
    if not is_concrete(value):
        with float64():
            return jnp.asarray(value, dtype=jnp.float64)
    try:
        is_bool = np.asarray(value).dtype == np.bool_
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as err:  # strings, ragged nested lists, …
        raise ValueError(f"{name} must be a real number or an array of real numbers, got {value!r}") from err
    if is_bool:  # True would silently count as 1
        raise ValueError(f"{name} must be a real number, not a bool, got {value!r}")
    valid = f"{name} must lie in {_range_text(lo, hi, lo_open, hi_open)}"
    if arr.size == 0:
        raise ValueError(f"{name} is empty; {valid}")
    if np.isnan(arr).any():
        raise ValueError(f"{name} contains NaN; {valid}")
    if not allow_inf and np.isinf(arr).any():
        raise ValueError(f"{name} contains inf; {valid}")
    bad = (arr <= lo) if lo_open else (arr < lo)
    bad |= (arr >= hi) if hi_open else (arr > hi)
    if bad.any():
        first = float(arr[bad].flat[0])
        raise ValueError(f"{valid}, got {first!r}")
    if integer and (np.floor(arr) != arr).any():
        first = float(arr[np.floor(arr) != arr].flat[0])
        raise ValueError(f"{name} must be an integer, got {first!r}")
    with float64():
        return jnp.asarray(arr, dtype=jnp.float64)


def check_orders(orders) -> np.ndarray:
    """Validate a 1-D array of Rényi orders (each > 1, finite, non-empty) and return it as numpy float64.

    Orders stay concrete (numpy) because the kernels specialise on them: integer orders use the finite
    binomial sum and every order's series length is fixed at trace time.
    """
    if not is_concrete(orders):
        raise ValueError("orders must be concrete values (not traced); pass them as a numpy array or list")
    arr = np.asarray(orders, dtype=np.float64)
    if arr.ndim == 0:
        arr = arr[None]
    if arr.ndim != 1:
        raise ValueError(f"orders must be a 1-D array of Rényi orders in (1, inf), got shape {arr.shape}")
    check_array("orders", arr, 1.0, np.inf, lo_open=True)
    return arr


def check_broadcastable(**arrays) -> tuple:
    """Return the broadcast shape of the named arrays or raise ``ValueError`` naming the mismatch."""
    shapes = {name: np.shape(a) for name, a in arrays.items()}
    try:
        return np.broadcast_shapes(*shapes.values())
    except ValueError:
        described = ", ".join(f"{name} {shape}" for name, shape in shapes.items())
        raise ValueError(f"shapes do not broadcast together: {described}") from None


#: float64 unit roundoff: relative error allowances below are multiples of it
EPS64 = float(np.finfo(np.float64).eps)


def round_up(x, ulps: float):
    """x + |x|·ulps·eps: moves a computed value whose relative error is at most ``ulps`` float64 ulps to
    the safe (upper) side of the exact value (SPEC §0.1: floating-point error absorbed on the safe side)."""
    return x + jnp.abs(x) * (ulps * EPS64)


def log1mexp(x):
    """log(1 − e^x) for x ≤ 0, accurate near 0 and for very negative x (Mächler 2012)."""
    x = jnp.minimum(x, 0.0)
    safe_small = jnp.where(x > -0.6931471805599453, x, -1.0)
    safe_large = jnp.where(x > -0.6931471805599453, -1.0, x)
    return jnp.where(
        x > -0.6931471805599453,
        jnp.log(-jnp.expm1(safe_small)),
        jnp.log1p(-jnp.exp(safe_large)),
    )


def log_expm1(x):
    """log(e^x − 1) for x > 0, without overflow for large x or cancellation for small x."""
    small = jnp.where(x < 30.0, x, 1.0)
    return jnp.where(x < 30.0, jnp.log(jnp.expm1(small)), x + jnp.log1p(-jnp.exp(-jnp.where(x < 30.0, 30.0, x))))


def log_normal_cdf(x):
    """log Φ(x) to full float64 relative precision everywhere.

    ``jax.scipy.special.log_ndtr`` switches to an asymptotic series below x = −20 whose default 3 terms
    leave an error of up to ~4e-9 in Φ; 10 terms bring it under 1e-17 there ((2k−1)!!/x^{2k} at x = −20).
    (``erfcx`` is not a safe alternative: in float64 it returns 0 for arguments near 26.6.)
    """
    return log_ndtr(x, series_order=10)


def as_output(x):
    """Concrete results leave as numpy float64 (so the caller's arithmetic on them stays float64 even
    with ``jax_enable_x64`` off); traced results (inside the caller's jit/grad) stay JAX values."""
    if isinstance(x, tuple):
        return tuple(as_output(v) for v in x)
    return np.asarray(x) if is_concrete(x) else x


def erfcx(x):
    """Scaled complementary error function e^{x²} erfc(x), without the hole of ``jax.scipy.special.erfcx``
    (which returns 0 in float64 for x ≈ 26.55…26.64). Above x = 25 the asymptotic series
    1/(x√π) Σ_k (−1)^k (2k−1)!!/(2x²)^k is used; 9 terms leave < 1e-19 relative there."""
    from jax.scipy.special import erfcx as _jax_erfcx

    xl = jnp.maximum(x, 25.0)
    z = 1.0 / (2.0 * xl * xl)
    term, total = jnp.ones_like(xl), jnp.ones_like(xl)
    for k in range(1, 9):
        term = -term * (2 * k - 1) * z
        total = total + term
    series = total / (xl * np.sqrt(np.pi))
    return jnp.where(x > 25.0, series, _jax_erfcx(jnp.minimum(x, 25.0)))
