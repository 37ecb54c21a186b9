"""Random allocation: each example takes part in k of t steps, chosen uniformly (MATH §11).

``RandomAllocation(k, t, Gaussian(σ))`` is one pass of t steps in which every example is used in exactly k
of them, the k chosen uniformly at random and independently for each example (k = 1: "balls in bins",
one batch per step from one shuffle-and-assign pass). Each step adds Gaussian noise of multiplier σ to a
sum of per-example contributions of sensitivity 1. Several passes are ``SelfComposed(…, passes)``.

Accounting (PLD only; MATH §11):

* k = 1 (one round of m = t steps): the round's likelihood ratio is the mean of m independent lognormals;
  :mod:`jaxpriv.mechanisms.allocation` bounds its loss law from above (a mean-preserving spread) and below
  (nearest nodes, shifted) in both neighbouring directions; the accountant composes the rounds.
* k > 1: Feldman & Shenfeld's reduction (arXiv 2502.08202), used by their published accountant: k of t is
  dominated by k rounds of one-of-⌊t/k⌋ or one-of-⌈t/k⌉ — t − k⌊t/k⌋ rounds of the longer kind, the rest
  of the shorter — so the event flattens into those rounds. The lower end of its interval is then a lower
  bound for that composition, not for k of t itself.

RDP is not offered: the exact Rényi curve is known in the remove direction only.

Example:
  >>> from jaxpriv import accounting, events
  >>> epoch = events.RandomAllocation(1, 20, events.Gaussian(2.0))
  >>> lower, upper = accounting.epsilon_interval(events.SelfComposed(epoch, 3), 1e-5)
  >>> bool(0 < lower <= upper < 3.0)
  True
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..mechanisms import allocation
from .base import Event, Parameter, event_type
from .noise import check_counted_gaussian
from .sampling import ClientMixture, pack_atoms

__all__ = ["RandomAllocation"]


def _ints(x, size: int) -> np.ndarray:
    return np.broadcast_to(np.asarray(x, np.float64), (size,)).astype(np.int64)


@event_type(("k", "t", "event"))
class RandomAllocation(Event):
    """Each example in k of t steps (integers 1 ≤ k ≤ t), chosen uniformly; ``event`` the Gaussian step."""

    k: Any
    t: Any
    event: Any

    PARAMETERS = (Parameter("k", "RandomAllocation k (steps per example)", 1.0, integer=True),
                  Parameter("t", "RandomAllocation t (steps)", 1.0, integer=True))
    CHILD = "event"

    def check(self):
        check_counted_gaussian(self, "its loss law is derived for Gaussian noise", "k", "t",
                               "k must be at most t (an example takes part in k of the t steps)")

    def unsupported_by(self, accountant):
        if accountant == "rdp":
            return "RandomAllocation (its Rényi curve is known in one direction only; use accountant='pld')"
        return None

    def pld_components(self, count):
        k, t = np.asarray(self.k, np.float64), np.asarray(self.t, np.float64)
        if np.all(k == 1):
            return [(self, count)]
        short = np.floor(t / k)
        longer = t - k * short  # rounds of one-of-(short + 1)
        rounds = [(RandomAllocation(1, short, self.event), (k - longer) * count)]
        if np.any(longer > 0):
            rounds.append((RandomAllocation(1, short + 1, self.event), longer * count))
        return rounds

    def pld_step(self, size, compose):
        """One round per setting (k = 1): its four bounding laws from :func:`allocation.round_laws`,
        packed like a client mixture of rate 1."""
        sigma = np.broadcast_to(np.asarray(self.event.noise_multiplier, np.float64), (size,))
        steps = _ints(self.t, size)
        sides = {key: [] for key in ("remove_upper", "remove_lower", "add_upper", "add_lower")}
        for laws in allocation.round_laws_of(zip(sigma, steps)):  # distinct settings once, in threads
            for key in sides:
                sides[key].append(laws[key])
        width = allocation.ATOMS + 2
        return ClientMixture(np.ones(size), **{key: pack_atoms(atoms, width) for key, atoms in sides.items()})

    def pld_symmetric(self):
        return False

    def table_elements(self, nodes):
        return 8 * (allocation.ATOMS + 2) + int(nodes)
