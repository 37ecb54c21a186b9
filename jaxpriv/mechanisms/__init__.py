"""Noise mechanisms as shared primitives (MATH §4): each module samples, evaluates its log-density and
moments, states its privacy curve and calibrates its scale. The trainer, the federated simulator and
the accountant all use these, never a second copy. (UDP-FL's Harmonizer, which calibrates each client's
mechanism to a common target, is calibration code: :mod:`jaxpriv.calibrate.harmonizer`; the old name
``jaxpriv.mechanisms.harmonizer`` is a deprecated alias.)"""

from . import clip_laplace, clip_laplace_analyzer, echo, gaussian, laplace, randomized_response, staircase

__all__ = ["clip_laplace", "clip_laplace_analyzer", "echo", "gaussian", "laplace", "randomized_response", "staircase"]
