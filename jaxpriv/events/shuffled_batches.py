"""Shuffled fixed-size batches: a certified **lower** bound on their ε, never an upper one (MATH §11.7).

``ShuffledBatches(b, n, Gaussian(σ))`` is one epoch of the batches most pipelines draw: a fresh random
permutation of the n records cut into T = ⌊n/b⌋ batches of b (the n − bT left over sit the epoch out), each
step adding Gaussian noise of multiplier σ to its batch's sum of clipped contributions. Reshuffled epochs
compose: ``SelfComposed(ShuffledBatches(…), epochs)``.

No tight upper bound on this mechanism's ε is known (the papers below, and MATH §11.7, say what is). The
event carries instead the *adversarial pair* of Chua, Ghazi, Kamath, Kumar, Manurangsi, Sinha & Zhang ("How
Private are DP-SGD Implementations?", ICML 2024, arXiv 2403.17673; multi-epoch: "Scalable DP-SGD: Shuffling
vs. Poisson Subsampling", NeurIPS 2024, arXiv 2411.04205): two neighbouring datasets (one record replaced by
a record whose every gradient is 0) whose outputs, seen through the largest coordinate of each epoch,
already differ by this much. Its PLD is dominated by the true pair's, so:

* :func:`jaxpriv.accounting.epsilon_lower_bound` / ``delta_lower_bound`` give a certified lower bound:
  no valid accounting of shuffled batches can claim a smaller ε at that δ;
* :func:`jaxpriv.accounting.epsilon`, ``delta``, ``epsilon_interval`` and ``delta_interval`` refuse it
  (``ValueError`` saying why), whatever the accountant: it is never an upper bound.

The lower bound does not depend on b beyond T and the fraction γ = bT/n of records used per epoch.

Example:
  >>> from jaxpriv import accounting, events
  >>> shuffled = events.SelfComposed(events.ShuffledBatches(100, 1000, events.Gaussian(0.6)), 5)
  >>> poisson = events.SelfComposed(events.PoissonSampled(0.1, events.Gaussian(0.6)), 50)
  >>> floor = float(accounting.epsilon_lower_bound(shuffled, 1e-5))   # shuffling is at least this bad
  >>> bool(floor > float(accounting.epsilon(poisson, 1e-5)))          # above the Poisson claim
  True
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..mechanisms import allocation, shuffled_batches
from .base import Event, event_type
from .bounded_batches import batch_parameters
from .noise import check_counted_gaussian
from .sampling import ClientMixture, pack_atoms

__all__ = ["ShuffledBatches"]

#: why no upper-bound accountant reads the event
REFUSAL = ("ShuffledBatches is a lower bound only (the adversarial pair of Chua et al. 2024): it is never an "
           "upper bound on the ε of shuffled batches; ask accounting.epsilon_lower_bound for it, and for a "
           "certified ε draw the batches by Poisson sampling or balls in bins (RandomAllocation)")


@event_type(("batch_size", "dataset_size", "event"))
class ShuffledBatches(Event):
    """One epoch of shuffled batches: a random permutation of n = ``dataset_size`` records cut into
    ⌊n/b⌋ batches of b = ``batch_size`` (1 ≤ b ≤ n, integers); ``event`` the Gaussian step. A lower bound
    only (module docstring)."""

    batch_size: Any
    dataset_size: Any
    event: Any

    PARAMETERS = batch_parameters("ShuffledBatches")
    CHILD = "event"
    LOWER_BOUND_ONLY = True

    def check(self):
        check_counted_gaussian(self, "its adversarial pair is derived for Gaussian noise", "batch_size",
                               "dataset_size", "batch_size b must be at most dataset_size n")

    def unsupported_by(self, accountant):
        return REFUSAL

    def pld_step(self, size, compose):
        """Per setting, the two dominated laws of :func:`shuffled_batches.epoch_laws` (T = ⌊n/b⌋ steps,
        γ = bT/n), packed like a client mixture of rate 1. Its upper sides repeat the lower laws: they only
        place the accountant's grid, and no upper end is ever reported for this type."""
        sigma = np.broadcast_to(np.asarray(self.event.noise_multiplier, np.float64), (size,))
        b = np.broadcast_to(np.asarray(self.batch_size, np.float64), (size,))
        n = np.broadcast_to(np.asarray(self.dataset_size, np.float64), (size,))
        steps = np.floor(n / b)
        sides = {"remove": [], "add": []}
        for s, t, used in zip(sigma, steps, steps * b / n):
            laws = shuffled_batches.epoch_laws(float(s), int(t), float(used))
            sides["remove"].append(laws["remove_lower"])
            sides["add"].append(laws["add_lower"])
        # RandomAllocation's width (its laws carry a +∞ atom more): both then share the compiled programs
        remove, add = (pack_atoms(sides[key], allocation.ATOMS + 2) for key in ("remove", "add"))
        return ClientMixture(np.ones(size), remove_upper=remove, remove_lower=remove, add_upper=add, add_lower=add)

    def pld_symmetric(self):
        return False

    def table_elements(self, nodes):
        return 8 * (allocation.ATOMS + 2) + int(nodes)
