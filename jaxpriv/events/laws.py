"""Dominating pairs as privacy-loss laws: what the PLD accountant discretises (MATH §7.1-7.2).

A :class:`LossLaw` describes the privacy loss L = log(P/Q) of one dominating pair (P, Q): a continuous
part, given by its cumulative masses ``masses(ℓ)`` = (P(L ≤ ℓ), Q(L ≤ ℓ), P(L > ℓ), Q(L > ℓ)) (heads and
tails both, so that either side of an interval's mass can be computed without cancellation), and atoms
(loss, P-mass, Q-mass; a loss of +inf has Q-mass 0). All functions are jnp kernels of one setting's float64
scalars (the accountant vmaps them over a batch), traced inside the PLD accountant's jitted programs.

Pairs (sensitivity 1):

* Gaussian σ: P = N(1, σ²), Q = N(0, σ²); L ~ N(1/(2σ²), 1/σ²) under P and N(−1/(2σ²), 1/σ²) under Q.
* Laplace b: P = Lap(1, b), Q = Lap(0, b); atoms ±1/b (P-masses ½ and ½e^{−1/b}) and a continuous part
  on (−1/b, 1/b) with P(L ≤ ℓ) = ½ e^{ℓ/2 − 1/(2b)}.
* Randomized response (k-ary) and the staircase mechanism: three atoms each.
* Poisson subsampling with rate q of a pair (A, B) (Zhu, Dong & Wang 2022; MATH §7.2): remove direction
  (qA + (1−q)B, B) with loss g(L) = log(1 − q + q e^{L}); add direction (B, qA + (1−q)B) with loss −g(L).
  g is increasing, so both laws follow from A's and B's laws of L at g⁻¹(ℓ) = log((e^ℓ − 1 + q)/q).

The four base pairs are symmetric (the two directions have the same law); subsampling is not, so a
law is always built from the inner event's *remove* pair and then transformed for either direction. The
direction is data (a traced flag ``add``), so both directions run in one compiled program.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import math

import jax
import jax.numpy as jnp

from ..mechanisms import randomized_response, staircase

__all__ = ["LossLaw", "gaussian", "laplace", "atoms_only", "randomized_response_law", "staircase_law",
           "poisson_sampled", "mixture"]

#: loss values within this many standard deviations (Gaussian parts) bound the continuous support that is
#: represented on the grid; the mass outside (Φ(−10) ≈ 8e-24 per step) is not lost: the pessimistic grid
#: moves it to +inf or up to the lowest node, the optimistic one drops it.
SUPPORT_SDS = 10.0
_SQRT_HALF = math.sqrt(0.5)


@dataclasses.dataclass(frozen=True)
class LossLaw:
    """The privacy-loss law of one direction of a dominating pair (one setting's scalars).

    ``masses(ℓ)`` → (P(L ≤ ℓ), Q(L ≤ ℓ), P(L > ℓ), Q(L > ℓ)) of the continuous part, for an array ℓ;
    ``support`` = (lo, hi), scalars outside which the continuous part has negligible mass;
    ``atoms`` = (loss, p_mass, q_mass) of shape (A,). ``masses`` is None for atoms only.
    ``lower_atoms`` = (loss, p_mass), when given, replaces the atoms on the optimistic grid: a law known
    only between a dominated and a dominating discrete law (a composed PLD nested in client sampling).
    """

    masses: Callable | None
    support: tuple
    atoms: tuple
    lower_atoms: tuple | None = None


def no_atoms(like):
    """The empty ``atoms`` triple of a :class:`LossLaw` with no atoms, in the dtype of ``like`` (also used by
    :mod:`.shuffled`)."""
    empty = jnp.zeros((0,), jnp.result_type(like))
    return empty, empty, empty


def gaussian(sigma) -> LossLaw:
    """The Gaussian pair's law (symmetric)."""
    m, s = 0.5 / sigma**2, 1.0 / sigma

    def masses(loss):
        # Φ(x) and Φ(−x) from one erfc of |x|/√2 (erfc(−z) = 2 − erfc(z) is exact enough above 1): the
        # function is long and costly, so it runs once, over both arguments
        x = jnp.stack([loss - m, loss + m]) / s
        small = 0.5 * jax.lax.erfc(jnp.abs(x) * _SQRT_HALF)  # Φ(−|x|)
        big = 1.0 - small  # Φ(|x|) ≥ ½: no cancellation worth speaking of
        head = jnp.where(x < 0, small, big)
        tail = jnp.where(x < 0, big, small)
        return head[0], head[1], tail[0], tail[1]

    spread = 0.5 / sigma**2 + SUPPORT_SDS / sigma
    return LossLaw(masses, (-spread, spread), no_atoms(sigma))


def laplace(scale) -> LossLaw:
    """The Laplace pair's law (symmetric): atoms at ±1/b and a continuous part between them."""
    c = 1.0 / scale

    def masses(loss):
        x = jnp.clip(loss, -c, c)
        return (0.5 * jnp.exp(-c) * jnp.expm1((x + c) / 2.0), -0.5 * jnp.expm1(-(x + c) / 2.0),
                -0.5 * jnp.expm1((x - c) / 2.0), 0.5 * jnp.exp(-c) * jnp.expm1((c - x) / 2.0))

    half_e = 0.5 * jnp.exp(-c)
    half = 0.5 * jnp.ones_like(c)
    atoms = (jnp.stack([c, -c]), jnp.stack([half, half_e]), jnp.stack([half_e, half]))
    return LossLaw(masses, (-c, c), atoms)


def atoms_only(losses, p_masses) -> LossLaw:
    """A finite pair given by its loss atoms (shape (A,)) and their P-masses; Q-mass = P-mass·e^{−loss}."""
    q_masses = jnp.where(jnp.isposinf(losses), 0.0, p_masses * jnp.exp(-jnp.where(jnp.isposinf(losses), 0.0, losses)))
    finite = jnp.where(jnp.isfinite(losses), losses, 0.0)
    return LossLaw(None, (finite.min(-1), finite.max(-1)), (losses, p_masses, q_masses))


def randomized_response_law(epsilon, k: int) -> LossLaw:
    """k-ary randomized response between two inputs: losses ε, −ε, 0 with P-masses p, q, (k−2)q,
    q = 1/(e^ε + k − 1), p = e^ε q (MATH §4.3)."""
    log_q, log_p = randomized_response.log_report_probabilities(epsilon, k)
    q, p = jnp.exp(log_q), jnp.exp(log_p)
    losses = jnp.stack([epsilon, -epsilon, jnp.zeros_like(epsilon)])
    return atoms_only(losses, jnp.stack([p, q, (k - 2) * q]))


def staircase_law(epsilon, gamma) -> LossLaw:
    """The staircase mechanism at its worst shift (MATH §4.2): three atoms."""
    losses, masses = staircase.privacy_loss_atoms(epsilon, gamma)
    return atoms_only(losses, masses)


def _log_one_minus_q_plus_q_exp(q, loss):
    """g(ℓ) = log(1 − q + q e^ℓ): log1p(q·expm1(ℓ)) while |q·expm1(ℓ)| ≤ ½ (exact for small q or ℓ), a
    log-sum-exp of log(1 − q) and log q + ℓ beyond (no overflow for large ℓ, no cancellation as q → 1)."""
    x = q * jnp.expm1(jnp.minimum(loss, 30.0))
    near = jnp.log1p(jnp.clip(x, -0.5, 0.5))
    far = jnp.logaddexp(jnp.log1p(-q), jnp.log(q) + loss)
    return jnp.where(jnp.abs(x) <= 0.5, near, far)


def _inverse(q, loss):
    """g⁻¹(ℓ) = log((e^ℓ − 1 + q)/q) for ℓ > log(1 − q), −inf at or below it. With x = (1 − q)e^{−ℓ} < ½
    it is ℓ + log1p(−x) − log q (exact as q → 1 and for very negative ℓ); nearer the edge,
    log(expm1(ℓ) + q) − log q."""
    x = (1.0 - q) * jnp.exp(-jnp.minimum(loss, 700.0))
    far = loss + jnp.log1p(-jnp.minimum(x, 0.5)) - jnp.log(q)
    inside = jnp.expm1(jnp.minimum(loss, 1.0)) + q
    near = jnp.log(jnp.where(inside > 0, inside, 1.0)) - jnp.log(q)
    value = jnp.where(x < 0.5, far, near)
    return jnp.where((x < 0.5) | (inside > 0), value, -jnp.inf)


def poisson_sampled(q, law: LossLaw, add) -> LossLaw:
    """Poisson subsampling with rate q of the remove-direction pair ``law`` (MATH §7.2), in the remove
    direction, or the add direction where the (traced) flag ``add`` is true.

    Remove: (qA + (1−q)B, B), loss g(L); add: (B, qA + (1−q)B), loss −g(L), so L'' ≤ ℓ ⇔ L ≥ g⁻¹(−ℓ) (a
    continuous part: ≥ and > carry the same mass) and the heads and tails trade places."""
    g_lo = _log_one_minus_q_plus_q_exp(q, law.support[0])
    g_hi = _log_one_minus_q_plus_q_exp(q, law.support[1])
    a_loss, a_p, a_q = law.atoms
    g_atoms = _log_one_minus_q_plus_q_exp(q, a_loss)
    mixed = q * a_p + (1.0 - q) * a_q  # the atom's mass under qA + (1 − q)B
    # a loss of +inf (Q-mass 0) becomes −inf with mass 0 in the add direction
    atoms = (jnp.where(add, -g_atoms, g_atoms), jnp.where(add, a_q, mixed), jnp.where(add, mixed, a_q))
    support = (jnp.where(add, -g_hi, g_lo), jnp.where(add, -g_lo, g_hi))
    if law.masses is None:
        return LossLaw(None, support, atoms)

    def masses(loss):
        hp, hq, tp, tq = law.masses(_inverse(q, jnp.where(add, -loss, loss)))
        mix_head, mix_tail = q * hp + (1.0 - q) * hq, q * tp + (1.0 - q) * tq
        return (jnp.where(add, tq, mix_head), jnp.where(add, mix_tail, hq),
                jnp.where(add, hq, mix_tail), jnp.where(add, mix_head, tq))

    return LossLaw(masses, support, atoms)


def mixture(weight, first: LossLaw, second: LossLaw) -> LossLaw:
    """The pair that reveals which of two pairs was used — ``second`` with probability ``weight``, else
    ``first`` — in one direction: its loss is the used pair's, so every mass is the weighted sum (the
    label's law being the same under P and Q)."""
    w = weight

    def masses(loss):
        return tuple((1.0 - w) * a + w * b for a, b in zip(first.masses(loss), second.masses(loss)))

    atoms = tuple(jnp.concatenate([(1.0 - w) * a if i else a, w * b if i else b])
                  for i, (a, b) in enumerate(zip(first.atoms, second.atoms)))
    support = (jnp.minimum(first.support[0], second.support[0]), jnp.maximum(first.support[1], second.support[1]))
    return LossLaw(masses, support, atoms)
