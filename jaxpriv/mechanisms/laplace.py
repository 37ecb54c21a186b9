"""The Laplace mechanism: noise Lap(b) (density e^{−|x|/b}/(2b)) added to a query of L1 sensitivity Δ
(MATH §1.2, §3.3, §4.3).

Same interface as :mod:`jaxpriv.mechanisms.gaussian`, with the noise scale ``scale = b`` as parameter:

* ``sample(key, scale, shape=(), dtype=float32)`` — ``scale * jax.random.laplace(key, shape, dtype)``
  in one compiled kernel (as fast as ``jax.random.laplace``); ``scale`` may broadcast to ``shape``
  (one scale per user, e.g. GSPA's Lap(Δ/ε_i));
* ``log_prob(x, scale)``, ``mean(scale)``, ``variance(scale)`` (= 2b²);
* privacy: ``rdp(scale, orders, sensitivity)`` (delegates to :func:`jaxpriv.rdp.laplace`) and the
  pure guarantee ``epsilon(scale, sensitivity)`` = Δ/b;
* calibration: ``scale_for(epsilon, sensitivity)`` = Δ/ε.

Ratios are rounded to the safe side (b/Δ down, Δ/b and Δ/ε up), so float64 rounding never makes a
guarantee optimistic.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from .. import rdp as _rdp
from .._numerics import as_output, check_array, check_broadcastable, float64, kernel_jit
from ._common import check_sensitivity, directed_quotient, scaled_noise

__all__ = ["sample", "log_prob", "mean", "variance", "rdp", "epsilon", "scale_for"]

_LOG2 = math.log(2.0)


def _check_scale(scale):
    return check_array("scale", scale, 0.0, np.inf, lo_open=True)


def sample(key, scale, shape=(), dtype=jnp.float32):
    """Draws of Laplace noise Lap(b): ``scale * jax.random.laplace(key, shape, dtype)``.

    Source: the Laplace mechanism (Dwork, McSherry, Nissim, Smith 2006; Dwork & Roth 2014, Def. 3.3);
    MATH §4.3. Works inside ``jit`` (``scale`` may then be traced).

    Args:
      key: a JAX PRNG key.
      scale: b > 0; a scalar or an array broadcasting to ``shape``.
      shape: shape of the draw (tuple of non-negative ints).
      dtype: floating dtype (float32 default; bfloat16 and float64 allowed).

    Returns:
      array of ``shape`` and ``dtype``.

    Example:
      >>> import jax
      >>> from jaxpriv.mechanisms import laplace
      >>> x = laplace.sample(jax.random.key(0), 0.5, (100_000,))
      >>> x.dtype, round(float(abs(x).mean()), 2)
      (dtype('float32'), 0.5)
    """
    return scaled_noise(jax.random.laplace, key, scale, shape, dtype, "scale")


@kernel_jit
def _log_prob_kernel(x, scale):
    return -jnp.abs(x) / scale - jnp.log(scale) - _LOG2


def log_prob(x, scale):
    """Log-density of Lap(b) at x: −|x|/b − log(2b) (float64).

    Source: the Laplace density; MATH §4.

    Args:
      x: points (any shape).
      scale: b > 0, broadcasting against ``x``.

    Returns:
      float64 array of the broadcast shape.

    Example:
      >>> from jaxpriv.mechanisms import laplace
      >>> round(float(laplace.log_prob(1.0, 1.0)), 12)
      -1.69314718056
    """
    with float64():
        x = check_array("x", x)
        scale = _check_scale(scale)
        check_broadcastable(x=x, scale=scale)
        return as_output(_log_prob_kernel(x, scale))


def mean(scale):
    """Mean of Lap(b): 0, with the shape of ``scale`` (float64). MATH §4.

    Example:
      >>> from jaxpriv.mechanisms import laplace
      >>> float(laplace.mean(2.0))
      0.0
    """
    with float64():
        return as_output(jnp.zeros_like(_check_scale(scale)))


def variance(scale):
    """Variance of Lap(b): 2b² (float64). MATH §4.

    Example:
      >>> from jaxpriv.mechanisms import laplace
      >>> float(laplace.variance(3.0))
      18.0
    """
    with float64():
        scale = _check_scale(scale)
        return as_output(2.0 * scale * scale)


def rdp(scale, orders, sensitivity=1.0):
    """RDP curve of the Laplace mechanism with scale b and L1 sensitivity Δ.

    ρ(α) = log( α/(2α−1)·e^{(α−1)Δ/b} + (α−1)/(2α−1)·e^{−αΔ/b} ) / (α−1).
    Source: Mironov 2017, Prop. 6 (MATH §1.2); delegates to :func:`jaxpriv.rdp.laplace` at the
    normalised scale b/Δ (rounded down, so ρ is never underestimated).

    Args:
      scale: b > 0 (shape ``S``, broadcasting with ``sensitivity``).
      orders: 1-D array of ``K`` Rényi orders > 1.
      sensitivity: Δ > 0.

    Returns:
      float64 array of shape ``S + (K,)``.

    Example:
      >>> from jaxpriv.mechanisms import laplace
      >>> round(float(laplace.rdp(2.0, [2.0], sensitivity=2.0)[0]), 12)
      0.619123629999
    """
    with float64():
        scale = _check_scale(scale)
        sensitivity = check_sensitivity(sensitivity)
        check_broadcastable(scale=scale, sensitivity=sensitivity)
        return _rdp.laplace(directed_quotient(scale, sensitivity, up=False), orders)


def epsilon(scale, sensitivity=1.0):
    """Pure ε of the Laplace mechanism: ε = Δ/b (tight: the log-density ratio at shift Δ reaches it).

    Source: Dwork & Roth 2014, Thm 3.6; MATH §1.2. Rounded up.

    Args:
      scale: b > 0.
      sensitivity: Δ > 0, broadcasting with ``scale``.

    Returns:
      float64 array of ε.

    Example:
      >>> from jaxpriv.mechanisms import laplace
      >>> float(laplace.epsilon(10.0, sensitivity=1.0))
      0.1
    """
    with float64():
        scale = _check_scale(scale)
        sensitivity = check_sensitivity(sensitivity)
        check_broadcastable(scale=scale, sensitivity=sensitivity)
        return as_output(directed_quotient(sensitivity, scale, up=True))


def scale_for(epsilon, sensitivity=1.0):
    """Laplace scale for pure ε-DP: b = Δ/ε, rounded up (so Δ/b ≤ ε holds exactly).

    Source: Dwork & Roth 2014, Thm 3.6; GSPA Alg. 1 (Lap(Δf/ε_i)); MATH §3.3, §4.3.

    Args:
      epsilon: ε > 0.
      sensitivity: Δ > 0, broadcasting with ``epsilon``.

    Returns:
      float64 array of b.

    Example:
      >>> from jaxpriv.mechanisms import laplace
      >>> float(laplace.scale_for(0.1)), float(laplace.scale_for(0.5, sensitivity=60.0))
      (10.0, 120.0)
    """
    with float64():
        epsilon = check_array("epsilon", epsilon, 0.0, np.inf, lo_open=True)
        sensitivity = check_sensitivity(sensitivity)
        check_broadcastable(epsilon=epsilon, sensitivity=sensitivity)
        return as_output(directed_quotient(sensitivity, epsilon, up=True))
