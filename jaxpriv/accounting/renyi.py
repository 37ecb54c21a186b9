"""The RDP accountant: an event's Rényi-DP curve on a grid of orders, then the improved conversion (MATH §1).

Each event maps to the exact curve of :mod:`jaxpriv.rdp` and the mechanisms: Gaussian, Laplace,
staircase (``dimension`` > 1: ``staircase.rdp_l1``), randomized response; a Poisson-sampled Gaussian
uses the exact subsampled curve (MATH §1.3), any other Poisson-sampled event the Zhu-Wang bound on its
inner curve (MATH §1.4); client sampling the rPDP-FL transform (MATH §1.5); a uniform shuffle Girgis et
al.'s Theorem 1 (MATH §1.6); compositions add curves (MATH §1.7). ε and δ come from the improved
conversion, minimised over the orders (MATH §1.8).
"""

from __future__ import annotations

import numpy as np

from .. import events as ev
from .. import rdp
from ..mechanisms import randomized_response, staircase

__all__ = ["curve", "supported"]


def supported(event) -> str | None:
    """None when the RDP accountant can interpret ``event``; otherwise the reason."""
    if isinstance(event, ev.Shuffled) and event.personalized:
        return "Shuffled with personalized budgets (no RDP bound is implemented for it; use accountant='pld')"
    reasons = [r for r in map(supported, ev.children(event)) if r]
    return reasons[0] if reasons else None


def curve(event, orders: np.ndarray):
    """RDP curve of ``event`` (numbers of the batch shape S, already broadcast) on ``orders`` → S + (K,)."""
    if isinstance(event, ev.Gaussian):
        return rdp.gaussian(event.noise_multiplier, orders)
    if isinstance(event, ev.Laplace):
        return rdp.laplace(event.scale, orders)
    if isinstance(event, ev.Staircase):
        if event.dimension > 1:
            return staircase.rdp_l1(event.epsilon, event.dimension, event.gamma, orders)
        return staircase.rdp(event.epsilon, event.gamma, orders)
    if isinstance(event, ev.RandomizedResponse):
        return randomized_response.rdp(event.epsilon, orders, event.k)
    if isinstance(event, ev.PoissonSampled):
        if isinstance(event.event, ev.Gaussian):  # the exact curve
            return rdp.subsampled_gaussian(event.rate, event.event.noise_multiplier, orders)
        return rdp.subsampled(event.rate, lambda a: curve(event.event, a), orders)
    if isinstance(event, ev.ClientSampled):
        return rdp.client_sampled(curve(event.event, orders), event.rate, orders)
    if isinstance(event, ev.SelfComposed):
        return np.asarray(event.count)[..., None] * curve(event.event, orders)
    if isinstance(event, ev.Composed):
        return sum((curve(e, orders) for e in event.events), np.zeros(np.size(orders)))
    if isinstance(event, ev.Shuffled):  # Girgis et al. Theorem 1 holds for any ε₀-LDP randomizer
        from ..shuffle import bounds

        # integer orders only: a fractional α takes the value at ⌈α⌉ (RDP is nondecreasing in α)
        ceil = np.ceil(np.asarray(orders, dtype=np.float64))
        ints, back = np.unique(ceil, return_inverse=True)
        return np.asarray(bounds.girgis_rdp(event.epsilon0, event.n, ints))[..., back]
    raise AssertionError(event)
