"""Noise mechanisms as shared primitives (MATH §4): each module samples, evaluates its log-density and
moments, states its privacy curve and calibrates its scale. The trainer, the federated simulator and
the accountant all use these, never a second copy. :mod:`.harmonizer` calibrates each client's
mechanism to a common target (UDP-FL); it sits a layer above (it calls the accountants), so it is
loaded on first use, and importing a mechanism never loads the calibration code."""

from .._lazy import lazy_attributes
from . import clip_laplace, clip_laplace_analyzer, echo, gaussian, laplace, randomized_response, staircase

__all__ = ["clip_laplace", "clip_laplace_analyzer", "echo", "gaussian", "harmonizer", "laplace", "randomized_response",
           "staircase"]

__getattr__, __dir__ = lazy_attributes(__name__, {"harmonizer": "harmonizer"})
