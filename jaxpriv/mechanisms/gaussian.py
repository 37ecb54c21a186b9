"""The Gaussian mechanism: noise N(0, σ²) added to a query of L2 sensitivity Δ (MATH §1.1, §4.3, §6).

Every mechanism module of :mod:`jaxpriv.mechanisms` has the same interface; here with the noise standard
deviation ``sigma`` as the mechanism's parameter (``sigma = σ``, not the noise multiplier σ/Δ):

* ``sample(key, sigma, shape=(), dtype=float32)`` — noise draws (float32 by default, for training; a
  64-bit ``dtype`` is honoured whatever the caller's ``jax_enable_x64``). It *is*
  ``sigma * jax.random.normal(key, shape, dtype)`` in one compiled kernel, so it costs what
  ``jax.random.normal`` costs. ``sigma`` may be an array broadcasting to ``shape``.
* ``log_prob(x, sigma)`` — log-density of the noise at x; ``mean(sigma)``, ``variance(sigma)``.
* privacy curves: ``rdp(sigma, orders, sensitivity)`` (delegates to :func:`jaxpriv.rdp.gaussian`),
  the exact (ε, δ) curve ``delta(sigma, epsilon, sensitivity)`` and its inverse
  ``epsilon(sigma, delta, sensitivity)`` (the mechanism is exactly μ-GDP with μ = Δ/σ: ``mu``);
* calibration: ``classical_sigma`` (Dwork & Roth, ε ≤ 1) and ``analytic_sigma`` (Balle & Wang 2018).

Accounting results are float64 numpy arrays whatever the global x64 flag; ratios such as Δ/σ are rounded
to the safe side (:func:`directed_quotient`), so no float64 rounding makes a guarantee optimistic.
Floating-point *samplers* are not exactly the mechanisms they sample (Mironov 2012): the guarantees
here are those of the real-valued mechanism.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from .. import fdp
from .. import rdp as _rdp
from .._docs import fill_doc
from .._numerics import as_output, check_array, check_broadcastable, float64, is_concrete, kernel_jit
from ._common import (check_sensitivity, directed_quotient, scale_doc, scale_family,
                      scale_rdp, scaled_noise, sensitivity_over_scale)

__all__ = [
    "sample",
    "log_prob",
    "mean",
    "variance",
    "rdp",
    "mu",
    "delta",
    "epsilon",
    "classical_sigma",
    "analytic_sigma",
]

_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)


# ----------------------------------------------------------------------------------------------------
# Sampling and moments
# ----------------------------------------------------------------------------------------------------


@fill_doc(args=scale_doc("sample", "sigma", "standard deviation σ"))
def sample(key, sigma, shape=(), dtype=jnp.float32):
    """Draws of Gaussian noise N(0, σ²): ``sigma * jax.random.normal(key, shape, dtype)``.

    Source: the Gaussian mechanism (Dwork & Roth 2014, Def. A.1); MATH §4.3, §6 (DP-SGD adds
    N(0, σ²C²) to the clipped gradient sum). Works inside ``jit`` (``sigma`` may then be traced).

    {args}

    Example:
      >>> import jax
      >>> from jaxpriv.mechanisms import gaussian
      >>> x = gaussian.sample(jax.random.key(0), 2.0, (100_000,))
      >>> x.dtype, round(float(x.std()), 1)
      (dtype('float32'), 2.0)
    """
    return scaled_noise(jax.random.normal, key, sigma, shape, dtype, "sigma")


@kernel_jit
def _log_prob_kernel(x, sigma):
    z = x / sigma
    return -0.5 * z * z - jnp.log(sigma) - _LOG_SQRT_2PI


# log_prob, mean and variance: the scale family's, written once for the Gaussian and the Laplace
log_prob, mean, variance = scale_family(
    "gaussian", "sigma", "σ", "N(0, σ²)", _log_prob_kernel,
    log_density_doc=("−x²/(2σ²) − log σ − ½ log 2π", "the normal density", "0.0, 1.0", "-0.918938533205"),
    variance=lambda s: s * s, variance_doc=("σ²", "3.0", "9.0"))
__test__ = {"log_prob": log_prob, "mean": mean, "variance": variance}  # their examples, as this module's doctests


# ----------------------------------------------------------------------------------------------------
# Privacy curves
# ----------------------------------------------------------------------------------------------------


@fill_doc(args=scale_doc("rdp", "sigma", "noise standard deviation σ"))
def rdp(sigma, orders, sensitivity=1.0):
    """RDP curve of the Gaussian mechanism with noise σ and L2 sensitivity Δ: ρ(α) = αΔ²/(2σ²).

    Source: Mironov 2017, Prop. 7 (MATH §1.1); delegates to :func:`jaxpriv.rdp.gaussian` with the noise
    multiplier σ/Δ (rounded down, so ρ is never underestimated).

    {args}

    Example:
      >>> from jaxpriv.mechanisms import gaussian
      >>> [round(float(r), 12) for r in gaussian.rdp(4.0, [2.0, 8.0], sensitivity=2.0)]
      [0.25, 1.0]
    """
    return scale_rdp(_rdp.gaussian, sigma, orders, sensitivity, "sigma", worse="down")


def _mu(sigma, sensitivity):
    return directed_quotient(sensitivity, sigma, up=True)


@fill_doc(args=scale_doc("ratio", "sigma", "σ", result="μ"))
def mu(sigma, sensitivity=1.0):
    """GDP parameter of the Gaussian mechanism: it is exactly μ-GDP with μ = Δ/σ (rounded up).

    Source: Dong, Roth & Su 2022, Thm 2.7 (the trade-off between N(0, σ²) and N(Δ, σ²) is G_{Δ/σ});
    MATH §2.

    {args}

    Example:
      >>> from jaxpriv.mechanisms import gaussian
      >>> float(gaussian.mu(4.0, sensitivity=2.0))
      0.5
    """
    return sensitivity_over_scale(sigma, sensitivity, "sigma", worse="down")


def delta(sigma, epsilon, sensitivity=1.0):
    """Exact δ(ε) of the Gaussian mechanism: δ = Φ(Δ/(2σ) − εσ/Δ) − e^ε Φ(−Δ/(2σ) − εσ/Δ).

    Source: Balle & Wang 2018, "Improving the Gaussian mechanism for differential privacy", Thm 8
    (necessary and sufficient); equal to the μ-GDP curve with μ = Δ/σ (MATH §2). Computed by
    :func:`jaxpriv.fdp.gdp_delta` (rounded up by its error bound).

    Args:
      sigma: σ > 0.
      epsilon: ε ≥ 0.
      sensitivity: Δ > 0. All three broadcast together.

    Returns:
      float64 array of δ.

    Example:
      >>> from jaxpriv.mechanisms import gaussian
      >>> float(gaussian.delta(3.730632, 1.0)) <= 1e-5
      True
    """
    with float64():
        sigma = check_array("sigma", sigma, 0.0, np.inf, lo_open=True, worse="down")
        epsilon = check_array("epsilon", epsilon, 0.0, np.inf, worse="down")
        sensitivity = check_sensitivity(sensitivity)
        check_broadcastable(sigma=sigma, epsilon=epsilon, sensitivity=sensitivity)
        return fdp.gdp_delta(_mu(sigma, sensitivity), epsilon)


def epsilon(sigma, delta, sensitivity=1.0):
    """Smallest ε such that the Gaussian mechanism is (ε, δ)-DP (exact curve, conservative root).

    Source: inverts Balle & Wang 2018, Thm 8, via :func:`jaxpriv.fdp.gdp_epsilon` at μ = Δ/σ (the
    returned ε satisfies δ(ε) ≤ ``delta``); MATH §2.

    Args:
      sigma: σ > 0.
      delta: δ ∈ (0, 1).
      sensitivity: Δ > 0. All three broadcast together.

    Returns:
      float64 array of ε ≥ 0.

    Example:
      >>> from jaxpriv.mechanisms import gaussian
      >>> round(float(gaussian.epsilon(3.730632, 1e-5)), 5)
      1.0
    """
    with float64():
        sigma = check_array("sigma", sigma, 0.0, np.inf, lo_open=True, worse="down")
        delta = check_array("delta", delta, 0.0, 1.0, lo_open=True, hi_open=True, worse="down")
        sensitivity = check_sensitivity(sensitivity)
        check_broadcastable(sigma=sigma, delta=delta, sensitivity=sensitivity)
        return fdp.gdp_epsilon(_mu(sigma, sensitivity), delta)


# ----------------------------------------------------------------------------------------------------
# Calibration
# ----------------------------------------------------------------------------------------------------


def _check_eps_delta(epsilon, delta, sensitivity):
    epsilon = check_array("epsilon", epsilon, 0.0, np.inf, lo_open=True, worse="down")
    delta = check_array("delta", delta, 0.0, 1.0, lo_open=True, hi_open=True, worse="down")
    sensitivity = check_sensitivity(sensitivity)
    check_broadcastable(epsilon=epsilon, delta=delta, sensitivity=sensitivity)
    return epsilon, delta, sensitivity


def classical_sigma(epsilon, delta, sensitivity=1.0):
    """Classical Gaussian calibration σ = Δ √(2 log(1.25/δ)) / ε, valid for ε ≤ 1.

    Source: Dwork & Roth 2014, "The Algorithmic Foundations of DP", Thm A.1 (stated for ε < 1; at
    ε = 1 it still holds, as the exact curve of :func:`delta` confirms); used by GSPA's shuffled SGD,
    MATH §6. It is looser than :func:`analytic_sigma` everywhere and invalid beyond ε = 1.

    Args:
      epsilon: ε ∈ (0, 1].
      delta: δ ∈ (0, 1).
      sensitivity: Δ > 0. All three broadcast together.

    Returns:
      float64 array of σ.

    Raises:
      ValueError: for ε > 1 (use :func:`analytic_sigma`), and for any parameter outside its range.

    Example:
      >>> from jaxpriv.mechanisms import gaussian
      >>> round(float(gaussian.classical_sigma(1.0, 1e-5)), 6)
      4.844805
    """
    with float64():
        if is_concrete(epsilon) and np.any(np.asarray(epsilon, dtype=np.float64) > 1.0):
            raise ValueError(
                f"epsilon must lie in (0, 1] for the classical Gaussian calibration (Dwork & Roth, Thm A.1), "
                f"got {float(np.max(epsilon))!r}; use analytic_sigma for larger epsilon"
            )
        epsilon, delta, sensitivity = _check_eps_delta(epsilon, delta, sensitivity)
        # Rounding needs no care here: the theorem's own slack (a tail bound) dwarfs a few ulp.
        return as_output(sensitivity * jnp.sqrt(2.0 * jnp.log(1.25 / delta)) / epsilon)


def analytic_sigma(epsilon, delta, sensitivity=1.0):
    """Smallest σ for which the Gaussian mechanism is (ε, δ)-DP: the analytic Gaussian mechanism.

    Source: Balle & Wang 2018, Thm 8 and Alg. 1 (calibrate on the exact δ(ε) curve); here
    σ = Δ/μ* with μ* = :func:`jaxpriv.fdp.gdp_mu` (ε, δ), the largest μ whose GDP curve meets δ at ε,
    found by a conservative monotone root find (MATH §2, §5). The quotient is rounded up, so
    ``delta(analytic_sigma(ε, δ), ε) ≤ δ``; σ is within ~1e-11 relative of the exact root. Valid for
    every ε > 0 (unlike :func:`classical_sigma`); differentiable (implicit function theorem).

    Args:
      epsilon: ε > 0.
      delta: δ ∈ (0, 1).
      sensitivity: Δ > 0. All three broadcast together.

    Returns:
      float64 array of σ.

    Example:
      >>> from jaxpriv.mechanisms import gaussian
      >>> round(float(gaussian.analytic_sigma(1.0, 1e-5)), 6)
      3.730632
    """
    with float64():
        epsilon, delta, sensitivity = _check_eps_delta(epsilon, delta, sensitivity)
        mu_star = jnp.asarray(fdp.gdp_mu(epsilon, delta))
        return as_output(directed_quotient(sensitivity, mu_star, up=True))
