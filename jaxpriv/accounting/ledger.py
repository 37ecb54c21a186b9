"""A small RDP ledger of privacy events answering ε or δ (MATH §1).

An :class:`Accountant` keeps a running RDP curve: each composed event is interpreted by the RDP
accountant of :mod:`jaxpriv.accounting` (the same curves as ``accounting.epsilon(..., accountant="rdp")``)
and the curves add up (MATH §1.7); ε and δ come from the improved conversion (MATH §1.8). For the
tighter PLD accountant or a batch of settings use :func:`jaxpriv.accounting.epsilon` directly.
dp_accounting's own DpEvents are accepted when that package is installed. The events are
:mod:`jaxpriv.events` (re-exported here under their old names).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from .. import rdp
from .._numerics import check_array, check_orders
from ..events import Composed, Event, Gaussian, Laplace, PoissonSampled, SelfComposed, Staircase, from_dp_accounting, validate

__all__ = ["Gaussian", "Laplace", "Staircase", "PoissonSampled", "SelfComposed", "Composed", "Event", "Accountant"]


class Accountant:
    """RDP ledger: compose events, then ask ε for a δ or δ for an ε.

    Example:
      >>> from jaxpriv.accounting.ledger import Accountant, Gaussian, PoissonSampled
      >>> acc = Accountant().compose(PoissonSampled(0.01, Gaussian(1.1)), count=10_000)
      >>> round(acc.epsilon(1e-5), 4)
      5.632
    """

    def __init__(self, orders: Sequence[float] | None = None):
        self.orders = check_orders(rdp.DEFAULT_ORDERS if orders is None else orders)
        self.rdp = np.zeros(self.orders.size)
        self.events: list = []

    def compose(self, event, count: int = 1) -> "Accountant":
        """Add ``count`` repetitions of ``event`` (a jaxpriv event or a dp_accounting DpEvent) with scalar
        numbers."""
        from . import renyi  # here: the accounting package loads the PLD accountant and the
        # mechanisms (0.15 s), which dpsgd_epsilon never needs

        check_array("count", count, 0.0, np.inf, integer=True)
        event = from_dp_accounting(event)
        validate(event)
        reason = renyi.supported(event)
        if reason:
            raise ValueError(f"the RDP accountant cannot interpret this event: {reason}")
        curve = np.asarray(renyi.curve(event, self.orders))
        if curve.shape != self.orders.shape:
            raise ValueError(f"Accountant.compose takes events with scalar numbers; this one describes a batch "
                             f"(curve shape {curve.shape}); use jaxpriv.accounting.epsilon for batches")
        self.rdp = self.rdp + int(count) * curve
        self.events.append((event, int(count)))
        return self

    def epsilon(self, delta: float) -> float:
        """Smallest ε with (ε, δ)-DP for the composed events (improved conversion, MATH §1.8)."""
        return float(rdp.to_epsilon(self.rdp, self.orders, delta)[0])

    def delta(self, epsilon: float) -> float:
        """Smallest δ with (ε, δ)-DP for the composed events."""
        return float(rdp.to_delta(self.rdp, self.orders, epsilon)[0])

    def best_order(self, delta: float) -> float:
        """The Rényi order that attains :meth:`epsilon`."""
        return float(rdp.to_epsilon(self.rdp, self.orders, delta)[1])
