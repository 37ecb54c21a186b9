"""Noise mechanisms as shared primitives (MATH §4): each module samples, evaluates its log-density and
moments, states its privacy curve and calibrates its scale. The trainer, the federated simulator and
the accountant all use these, never a second copy. :mod:`.harmonizer` calibrates each client's
mechanism to a common target (UDP-FL)."""

from . import clip_laplace, gaussian, harmonizer, laplace, randomized_response, staircase

__all__ = ["clip_laplace", "gaussian", "harmonizer", "laplace", "randomized_response", "staircase"]
