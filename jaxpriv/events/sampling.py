"""Sampling events: Poisson subsampling and rPDP-FL's client sampling (MATH §1.3-1.5, §7.2).

``PoissonSampled(q, inner)``: ``inner`` on a Poisson sample of rate q. RDP: the exact curve the inner
event declares (the Gaussian's series), else Zhu-Wang's bound on its curve (MATH §1.4); PLD: the
subsampled pair of :func:`.laws.poisson_sampled`, in both neighbouring directions.

``ClientSampled(λ, inner)``: with probability λ the client holding the record takes part and its whole
local run ``inner`` (e.g. τ Poisson-sampled Gaussian steps) is released; otherwise nothing is released,
with or without the record. For a dominating pair (P, Q) of the local run, the round is dominated by

    (λP + (1−λ)⊥, λQ + (1−λ)⊥)

in either neighbouring direction ((P, Q) being that direction's pair of the run): its privacy loss is
the run's loss with probability λ and exactly 0 otherwise. So the round's PLD is λ·(the run's composed
PLD) + (1−λ)·(an atom at 0) — the mixture whose Rényi divergence is rPDP-FL's Lemma 6,
log(1 − λ + λ e^{(α−1)ρ(α)})/(α−1).

The run's PLD is itself composed on the accountant's grid (host side, by the ``compose`` the PLD
accountant passes to :meth:`ClientSampled.pld_step`), twice, so that the nested step keeps the certified interval:

* **dominating** (pessimistic grid): the composed connect-the-dots pmf, negatives clipped, with every
  mass it may miss moved up to the +∞ loss — the wrapped-around and truncated tails (Chernoff), and the
  FFT's rounding (‖err‖₁ ≤ √N‖err‖₂). Moving mass up, or adding mass, only raises δ(ε) after any further
  composition (δ is a positive functional, increasing in the loss).
* **dominated** (optimistic grid): the composed merged pmf (:mod:`jaxpriv.accounting.pld_grid`), moved up by the Bernstein
  shift c of its offsets (Pr[ΣF < c] ≤ η), with the top r = η + tails + rounding (the FFT's, and 2Nu for the
  running sums that find the top) of its mass removed. Its tail
  masses then lie below the true loss's at every ℓ, which is what a lower bound on δ(ε) needs, after any
  further composition too.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from .. import rdp as rdp_curves
from .._batching import static_size
from . import laws
from .base import Event, Parameter, event_type, map_numbers, walk

__all__ = ["PoissonSampled", "ClientSampled", "ClientMixture", "pack_atoms"]

#: settings whose local runs are composed at once (bounds the host memory of their composed PLDs)
NESTED_CHUNK = 64


def _rate(event, size: int) -> np.ndarray:
    return np.broadcast_to(np.asarray(event.rate, np.float64), (size,))


@event_type(("rate", "event"))
class PoissonSampled(Event):
    """``event`` applied to a Poisson sample: each record is included independently with probability
    q = ``rate`` ∈ [0, 1]."""

    rate: Any
    event: Any

    PARAMETERS = (Parameter("rate", "PoissonSampled rate q", 0.0, 1.0),)
    CHILD = "event"
    DP_ACCOUNTING = ("PoissonSampledDpEvent",)

    def unsupported_by(self, accountant):
        if accountant == "pld" and any(isinstance(e, ClientSampled) for e in walk(self.event)):
            return "ClientSampled inside PoissonSampled (client sampling is the outer stage; use accountant='rdp')"
        return super().unsupported_by(accountant)

    def rdp(self, orders):
        exact = self.event.subsampled_rdp(self.rate, orders)
        return exact if exact is not None else rdp_curves.subsampled(self.rate, self.event.rdp, orders)

    def pld_law(self, add):  # the inner pair is taken in the remove direction, then subsampled either way
        return laws.poisson_sampled(self.rate, self.event.pld_law(False), add)

    def pld_lattice(self, size):
        inner = self.event.pld_lattice(size)
        return np.where((inner == 0) | (_rate(self, size) == 1.0), inner, np.nan)

    def pld_step(self, size, compose):
        return PoissonSampled(_rate(self, size), self.event.pld_step(size, compose))

    def pld_symmetric(self):
        return False

    def releases_nothing(self, size):
        return (_rate(self, size) == 0.0) | self.event.releases_nothing(size)

    def table_elements(self, nodes):
        return self.event.table_elements(nodes)

    def to_dp_accounting(self, convert):
        import dp_accounting

        return dp_accounting.PoissonSampledDpEvent(float(self.rate), convert(self.event))

    @classmethod
    def from_dp_accounting(cls, dp_event, convert):
        return cls(dp_event.sampling_probability, convert(dp_event.event))


@event_type(("rate", "event"))
class ClientSampled(Event):
    """rPDP-FL's client sampling (MATH §1.5): with probability λ = ``rate`` ∈ (0, 1] the client holding
    the record takes part and ``event`` (its whole local run, e.g. τ Poisson-sampled Gaussian steps) is
    released; otherwise nothing about the record is."""

    rate: Any
    event: Any

    PARAMETERS = (Parameter("rate", "ClientSampled rate λ", 0.0, 1.0, lo_open=True),)
    CHILD = "event"

    def rdp(self, orders):
        return rdp_curves.client_sampled(self.event.rdp(orders), self.rate, orders)

    def pld_step(self, size, compose: Callable):
        """The local run composed on the host by ``compose(run, add)`` (the PLD accountant's), both ways
        and both directions, mixed with the atom at 0 (:class:`ClientMixture`)."""
        run = map_numbers(self.event, lambda _, x: np.broadcast_to(np.asarray(x, np.float64), (size,)))
        sides = {key: [] for key in ("remove_upper", "remove_lower", "add_upper", "add_lower")}
        for s in range(0, size, NESTED_CHUNK):
            part = map_numbers(run, lambda _, x, s=s: x[s:s + NESTED_CHUNK])
            remove = compose(part, False)
            add = remove if run.pld_symmetric() else compose(part, True)
            for name, lists in (("remove", remove), ("add", add)):
                sides[f"{name}_upper"] += lists[0]
                sides[f"{name}_lower"] += lists[1]
        width = static_size(max(loss.size for atoms in sides.values() for loss, _ in atoms))  # one shape for all
        return ClientMixture(_rate(self, size), **{key: pack_atoms(atoms, width) for key, atoms in sides.items()})


def pack_atoms(atoms: list, width: int) -> tuple:
    """Per-setting (losses, masses) atom lists → two (B, width) arrays, padded with atoms of loss 0, mass 0."""
    losses = np.stack([np.pad(loss, (0, width - loss.size)) for loss, _ in atoms])
    masses = np.stack([np.pad(mass, (0, width - mass.size)) for _, mass in atoms])
    return losses, masses


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class ClientMixture:
    """Internal PLD step: a client-sampled local run, its composed PLD prepared on the host (also a round of
    random allocation, with rate 1: :mod:`.allocation`).

    ``rate`` (B,) the client rate λ; per direction ("remove", "add"): ``*_upper`` = (losses, P-masses) of
    shape (B, A) of the dominating composed PLD (+∞ included as a loss), ``*_lower`` the same for the
    dominated one. Padding atoms have loss 0 and mass 0."""

    rate: Any
    remove_upper: Any
    remove_lower: Any
    add_upper: Any
    add_lower: Any


    def pld_law(self, add) -> laws.LossLaw:
        """The mixture λ·(run) + (1 − λ)·(loss 0) of one setting, in the remove direction, or the add
        direction where the (traced) flag ``add`` is true."""
        pick = lambda remove, add_side: tuple(jnp.where(add, a, r) for r, a in zip(remove, add_side))  # noqa: E731
        upper, lower = pick(self.remove_upper, self.add_upper), pick(self.remove_lower, self.add_lower)
        lam = self.rate
        zero, rest = jnp.zeros((1,)), (1.0 - lam) * jnp.ones((1,))
        mixed = laws.atoms_only(jnp.concatenate([upper[0], zero]), jnp.concatenate([lam * upper[1], rest]))
        lower_atoms = (jnp.concatenate([lower[0], zero]), jnp.concatenate([lam * lower[1], rest]))
        return dataclasses.replace(mixed, lower_atoms=lower_atoms)

    def pld_lattice(self, size):
        return np.full(size, np.nan)

    def table_elements(self, nodes: int) -> int:
        """About how many float64 values one setting holds at once (its atoms and their placement on a
        grid of ``nodes``): the accountant sizes its chunks by it."""
        atoms = max(int(side[0].shape[-1]) for side in (self.remove_upper, self.remove_lower, self.add_upper,
                                                         self.add_lower))
        return 8 * atoms + int(nodes)
