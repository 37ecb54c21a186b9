"""Black-box audits of the noise samplers (MATH §10.5): draw many outputs of a mechanism on two neighbouring
inputs, run the many-run threshold audit (:func:`jaxpriv.audit.threshold.threshold_epsilon`) and compare the
certified lower bound with the ε the library claims for that sampler.

Every mechanism of :mod:`jaxpriv.mechanisms` is a shift (or flip) family whose likelihood ratio is monotone in
the output, so a threshold on the output is the optimal test (Neyman–Pearson) and the output itself is the
score. The neighbouring inputs are those at the sensitivity's two ends:

==================== ===================================================== ==========================
mechanism            sampler (``jaxpriv.mechanisms``)                       inputs x₀, x₁; claimed ε
==================== ===================================================== ==========================
gaussian             x + ``gaussian.sample(σ)``, σ = ``analytic_sigma(ε, δ)`` 0, 1; ε at δ
laplace              x + ``laplace.sample(b)``, b = ``scale_for(ε)``          0, 1; ε
staircase            x + ``staircase.sample(ε, γ*)``, Δ = 1                   0, 1; ε
clip_laplace         ``clip_laplace.sample(x, λ = 2C/ε, A = C)``, C = 1       −1, 1; ε (seed 000, Thm 1)
randomized_response  ``randomized_response.sample(x, ε)``, k = 2              0, 1; ε
==================== ===================================================== ==========================
"""

from __future__ import annotations

import dataclasses
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .._checks import check_values
from .stats import check_confidence
from .threshold import ThresholdBound, threshold_epsilon

__all__ = ["MECHANISMS", "Sampler", "SamplerAudit", "mechanism_sampler", "audit_sampler"]

MECHANISMS = ("gaussian", "laplace", "staircase", "clip_laplace", "randomized_response")


class Sampler(NamedTuple):
    """A mechanism to audit: ``sample(key, x, n) → (n,)`` outputs on input x, the neighbouring inputs
    ``x0`` (without the record) and ``x1`` (with it), and the claim (``claimed_epsilon`` at ``delta``)."""

    name: str
    sample: Callable
    x0: float
    x1: float
    claimed_epsilon: float
    delta: float


@dataclasses.dataclass(frozen=True)
class SamplerAudit:
    """The audit of one sampler: its claim and the certified lower bound (``bound.epsilon``);
    ``violated`` when the lower bound exceeds the claim."""

    name: str
    claimed_epsilon: float
    delta: float
    draws: int
    bound: ThresholdBound

    @property
    def epsilon_lower(self) -> float:
        return self.bound.epsilon

    @property
    def violated(self) -> bool:
        return self.bound.epsilon > self.claimed_epsilon


def mechanism_sampler(mechanism: str, epsilon: float, *, delta: float = 1e-5) -> Sampler:
    """The library's sampler of ``mechanism`` calibrated to ``epsilon`` (the module docstring's table).

    Args:
      mechanism: one of :data:`MECHANISMS`.
      epsilon: the claimed ε > 0.
      delta: δ ∈ (0, 1) of the Gaussian's claim (the others are pure ε-DP: their δ is 0).

    Returns:
      :class:`Sampler`.

    Example:
      >>> from jaxpriv.audit.samplers import mechanism_sampler
      >>> s = mechanism_sampler("laplace", 1.0)
      >>> s.x0, s.x1, s.claimed_epsilon, s.delta
      (0.0, 1.0, 1.0, 0.0)
    """
    from ..mechanisms import clip_laplace, gaussian, laplace, randomized_response, staircase

    if mechanism not in MECHANISMS:
        raise ValueError(f"mechanism must be one of {MECHANISMS}, got {mechanism!r}")
    eps = float(check_values("epsilon", epsilon, 0.0, lo_open=True).reshape(()))
    d = float(check_values("delta", delta, 0.0, 1.0, lo_open=True, hi_open=True).reshape(()))
    if mechanism == "gaussian":
        sigma = float(gaussian.analytic_sigma(eps, d))
        return Sampler(mechanism, lambda key, x, n: x + gaussian.sample(key, sigma, (n,)), 0.0, 1.0, eps, d)
    if mechanism == "laplace":
        b = float(laplace.scale_for(eps))
        return Sampler(mechanism, lambda key, x, n: x + laplace.sample(key, b, (n,)), 0.0, 1.0, eps, 0.0)
    if mechanism == "staircase":
        return Sampler(mechanism, lambda key, x, n: x + staircase.sample(key, eps, None, (n,)), 0.0, 1.0, eps, 0.0)
    if mechanism == "clip_laplace":
        return Sampler(mechanism, lambda key, x, n: clip_laplace.sample(key, x, 2.0 / eps, 1.0, shape=(n,)),
                       -1.0, 1.0, eps, 0.0)
    return Sampler(mechanism, lambda key, x, n: randomized_response.sample(key, jnp.full((n,), int(x)), eps),
                   0.0, 1.0, eps, 0.0)


def audit_sampler(sampler: Sampler, *, draws: int = 200_000, confidence: float = 0.95, seed: int = 0
                  ) -> SamplerAudit:
    """Audit a sampler against its claim: ``draws`` outputs on each neighbouring input, the split threshold
    audit (:func:`jaxpriv.audit.threshold.threshold_epsilon` at the claim's δ; MATH §10.4, §10.5).

    A correct sampler's bound exceeds its claim with probability at most 1 − confidence; a sampler whose
    noise is too small (or whose flip probability is too low) is caught once ``draws`` resolve the rates
    at the optimal threshold.

    Args:
      sampler: a :class:`Sampler` (:func:`mechanism_sampler`, or your own).
      draws: outputs per input, an integer ≥ 4.
      confidence: c ∈ (0, 1).
      seed: an integer ≥ 0 (the draws' keys and the split).

    Returns:
      :class:`SamplerAudit`.

    Example:
      >>> from jaxpriv.audit.samplers import audit_sampler, mechanism_sampler
      >>> audit = audit_sampler(mechanism_sampler("randomized_response", 1.0), draws=20_000)
      >>> 0.8 < audit.epsilon_lower <= 1.0, audit.violated
      (True, False)
    """
    if not isinstance(sampler, Sampler):
        raise ValueError(f"sampler must be a jaxpriv.audit.Sampler, got {type(sampler).__name__}")
    if isinstance(draws, (bool, np.bool_)) or not isinstance(draws, (int, np.integer)) or draws < 4:
        raise ValueError(f"draws must be an integer in [4, inf), got {draws!r}")
    c = check_confidence(confidence)
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be an integer ≥ 0, got {seed!r}")
    k0, k1 = jax.random.split(jax.random.key(int(seed)))
    out1 = np.asarray(sampler.sample(k1, sampler.x1, int(draws)), dtype=np.float64)
    out0 = np.asarray(sampler.sample(k0, sampler.x0, int(draws)), dtype=np.float64)
    if out1.shape != (draws,) or out0.shape != (draws,):
        raise ValueError(f"sampler.sample(key, x, n) must return n = {draws} outputs, got shapes {out1.shape} "
                         f"and {out0.shape}")
    if sampler.x1 < sampler.x0:  # the score grows with the input
        out1, out0 = -out1, -out0
    bound = threshold_epsilon(out1, out0, delta=sampler.delta, confidence=c, seed=int(seed))
    return SamplerAudit(sampler.name, float(sampler.claimed_epsilon), float(sampler.delta), int(draws), bound)
