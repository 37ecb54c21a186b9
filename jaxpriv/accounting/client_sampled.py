"""rPDP-FL's client sampling as a PLD step (MATH §1.5, §7.2).

``ClientSampled(λ, inner)``: with probability λ the client holding the record takes part and its whole
local run ``inner`` (e.g. τ Poisson-sampled Gaussian steps) is released; otherwise nothing is released,
with or without the record. For a dominating pair (P, Q) of the local run, the round is dominated by

    (λP + (1−λ)⊥, λQ + (1−λ)⊥)

in either neighbouring direction ((P, Q) being that direction's pair of the run): its privacy loss is
the run's loss with probability λ and exactly 0 otherwise. So the round's PLD is λ·(the run's composed
PLD) + (1−λ)·(an atom at 0) — the mixture whose Rényi divergence is rPDP-FL's Lemma 6,
log(1 − λ + λ e^{(α−1)ρ(α)})/(α−1).

The run's PLD is itself composed on the accountant's grid (host side, :func:`jaxpriv.accounting.pld`'s
``_composed_pmfs``), twice, so that the nested step keeps the certified interval:

* **dominating** (pessimistic grid): the composed connect-the-dots pmf, negatives clipped, with every
  mass it may miss moved up to the +∞ loss — the wrapped-around and truncated tails (Chernoff), and the
  FFT's rounding (‖err‖₁ ≤ √N‖err‖₂). Moving mass up, or adding mass, only raises δ(ε) after any further
  composition (δ is a positive functional, increasing in the loss).
* **dominated** (optimistic grid): the composed merged pmf (:mod:`.pld_grid`), moved up by the Bernstein
  shift c of its offsets (Pr[ΣF < c] ≤ η), with the top r = η + tails + rounding (the FFT's, and 2Nu for the
  running sums that find the top) of its mass removed. Its tail
  masses then lie below the true loss's at every ℓ, which is what a lower bound on δ(ε) needs, after any
  further composition too.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp

from . import pairs

__all__ = ["ClientMixture", "law", "elements"]


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class ClientMixture:
    """Internal PLD step: a client-sampled local run, its composed PLD prepared on the host.

    ``rate`` (B,) the client rate λ; per direction ("remove", "add"): ``*_upper`` = (losses, P-masses) of
    shape (B, A) of the dominating composed PLD (+∞ included as a loss), ``*_lower`` the same for the
    dominated one. Padding atoms have loss 0 and mass 0."""

    rate: Any
    remove_upper: Any
    remove_lower: Any
    add_upper: Any
    add_lower: Any


def law(step: ClientMixture, add) -> pairs.LossLaw:
    """The mixture λ·(run) + (1 − λ)·(loss 0) of one setting, in the remove direction, or the add direction
    where the (traced) flag ``add`` is true."""
    pick = lambda remove, add_side: tuple(jnp.where(add, a, r) for r, a in zip(remove, add_side))  # noqa: E731
    upper, lower = pick(step.remove_upper, step.add_upper), pick(step.remove_lower, step.add_lower)
    lam = step.rate
    zero = jnp.zeros((1,))
    losses = jnp.concatenate([upper[0], zero])
    masses = jnp.concatenate([lam * upper[1], (1.0 - lam) * jnp.ones((1,))])
    mixed = pairs.atoms_only(losses, masses)
    lower_atoms = (jnp.concatenate([lower[0], zero]), jnp.concatenate([lam * lower[1], (1.0 - lam) * jnp.ones((1,))]))
    return dataclasses.replace(mixed, lower_atoms=lower_atoms)


def elements(step, nodes: int) -> int:
    """About how many float64 values one setting of ``step`` holds at once (its atoms and their
    placement on a grid of ``nodes``): the accountant sizes its chunks by it."""
    if isinstance(step, ClientMixture):
        atoms = max(int(side[0].shape[-1]) for side in (step.remove_upper, step.remove_lower, step.add_upper,
                                                         step.add_lower))
        return 8 * atoms + int(nodes)
    return 0
