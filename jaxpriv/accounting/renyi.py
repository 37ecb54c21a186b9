"""The RDP accountant: an event's Rényi-DP curve on a grid of orders, then the improved conversion (MATH §1).

The curve is what the event tree declares (:meth:`jaxpriv.events.Event.rdp`): the exact curves of
:mod:`jaxpriv.rdp` and the mechanisms for the noise events; for Poisson sampling the exact subsampled
curve its inner event declares (the Gaussian's, MATH §1.3), else the Zhu-Wang bound on its inner curve
(MATH §1.4); client sampling the rPDP-FL transform (MATH §1.5); a uniform shuffle Girgis et al.'s Theorem 1
(MATH §1.6); compositions add curves (MATH §1.7). ε and δ come from the improved conversion, minimised
over the orders (MATH §1.8).
"""

from __future__ import annotations

import numpy as np

from .. import events as ev

__all__ = ["curve", "supported"]


def supported(event) -> str | None:
    """None when the RDP accountant can interpret ``event``; otherwise the reason."""
    return ev.unsupported(event, "rdp")


def curve(event, orders: np.ndarray):
    """RDP curve of ``event`` (numbers of the batch shape S, already broadcast) on ``orders`` → S + (K,)."""
    return event.rdp(orders)
