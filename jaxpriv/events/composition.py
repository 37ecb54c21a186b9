"""Composition events: one event repeated, and events in sequence (MATH §1.7, §7.4).

RDP adds the curves; the PLD accountant flattens a composition into its steps and their counts
(:meth:`~jaxpriv.events.Event.pld_components`) and composes their laws by FFT.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .base import Event, Parameter, event_type

__all__ = ["SelfComposed", "Composed"]


@event_type(("event", "count"))
class SelfComposed(Event):
    """``event`` repeated ``count`` = T ≥ 0 times (an integer)."""

    event: Any
    count: Any

    PARAMETERS = (Parameter("count", "SelfComposed count T", integer=True),)
    CHILD = "event"
    DP_ACCOUNTING = ("SelfComposedDpEvent",)

    def rdp(self, orders):
        return np.asarray(self.count)[..., None] * self.event.rdp(orders)

    def pld_components(self, count):
        return self.event.pld_components(np.asarray(self.count, dtype=np.float64) * count)

    def to_dp_accounting(self, convert):
        import dp_accounting

        return dp_accounting.SelfComposedDpEvent(convert(self.event), int(self.count))

    @classmethod
    def from_dp_accounting(cls, dp_event, convert):
        return cls(convert(dp_event.event), dp_event.count)


@event_type(("events",))
class Composed(Event):
    """The events in sequence (a tuple; empty means nothing was released)."""

    events: tuple

    CHILD = "events"
    DP_ACCOUNTING = ("ComposedDpEvent", "NoOpDpEvent")

    def __post_init__(self):
        object.__setattr__(self, "events", tuple(self.events))

    def rdp(self, orders):
        return sum((e.rdp(orders) for e in self.events), np.zeros(np.size(orders)))

    def pld_components(self, count):
        return [c for e in self.events for c in e.pld_components(count)]

    def to_dp_accounting(self, convert):
        import dp_accounting

        return dp_accounting.ComposedDpEvent([convert(e) for e in self.events])

    @classmethod
    def from_dp_accounting(cls, dp_event, convert):
        return cls(tuple(convert(e) for e in getattr(dp_event, "events", ())))  # NoOp: nothing released
