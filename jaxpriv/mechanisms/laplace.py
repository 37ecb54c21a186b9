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
from .._docs import fill_doc
from .._numerics import as_output, check_array, check_broadcastable, float64, kernel_jit
from ._common import (check_sensitivity, directed_quotient, scale_doc, scale_family, scale_rdp,
                      scaled_noise, sensitivity_over_scale)

__all__ = ["sample", "log_prob", "mean", "variance", "rdp", "epsilon", "scale_for"]

_LOG2 = math.log(2.0)


@fill_doc(args=scale_doc("sample", "scale", "b"))
def sample(key, scale, shape=(), dtype=jnp.float32):
    """Draws of Laplace noise Lap(b): ``scale * jax.random.laplace(key, shape, dtype)``.

    Source: the Laplace mechanism (Dwork, McSherry, Nissim, Smith 2006; Dwork & Roth 2014, Def. 3.3);
    MATH §4.3. Works inside ``jit`` (``scale`` may then be traced).

    {args}

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


# log_prob, mean and variance: the scale family's, written once for the Gaussian and the Laplace
log_prob, mean, variance = scale_family(
    "laplace", "scale", "b", "Lap(b)", _log_prob_kernel,
    log_density_doc=("−|x|/b − log(2b)", "the Laplace density", "1.0, 1.0", "-1.69314718056"),
    variance=lambda b: 2.0 * b * b, variance_doc=("2b²", "3.0", "18.0"))
__test__ = {"log_prob": log_prob, "mean": mean, "variance": variance}  # their examples, as this module's doctests


@fill_doc(args=scale_doc("rdp", "scale", "b"))
def rdp(scale, orders, sensitivity=1.0):
    """RDP curve of the Laplace mechanism with scale b and L1 sensitivity Δ.

    ρ(α) = log( α/(2α−1)·e^{(α−1)Δ/b} + (α−1)/(2α−1)·e^{−αΔ/b} ) / (α−1).
    Source: Mironov 2017, Prop. 6 (MATH §1.2); delegates to :func:`jaxpriv.rdp.laplace` at the
    normalised scale b/Δ (rounded down, so ρ is never underestimated).

    {args}

    Example:
      >>> from jaxpriv.mechanisms import laplace
      >>> round(float(laplace.rdp(2.0, [2.0], sensitivity=2.0)[0]), 12)
      0.619123629999
    """
    return scale_rdp(_rdp.laplace, scale, orders, sensitivity, "scale")


@fill_doc(args=scale_doc("ratio", "scale", "b", result="ε"))
def epsilon(scale, sensitivity=1.0):
    """Pure ε of the Laplace mechanism: ε = Δ/b (tight: the log-density ratio at shift Δ reaches it).

    Source: Dwork & Roth 2014, Thm 3.6; MATH §1.2. Rounded up.

    {args}

    Example:
      >>> from jaxpriv.mechanisms import laplace
      >>> float(laplace.epsilon(10.0, sensitivity=1.0))
      0.1
    """
    return sensitivity_over_scale(scale, sensitivity, "scale")


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
