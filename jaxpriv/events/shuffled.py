"""The shuffle model as an event: n shuffled local reports, and their exact dominating pair (MATH §1.6, §3.1, §7.2).

RDP: Girgis et al.'s Theorem 1 for ε₀-LDP randomizers (uniform budgets only). PLD: the exact clone pair
below, prepared on the host by :meth:`Shuffled.pld_step` as a :class:`CloneCounts` step.

One round of n shuffled reports is dominated by a pair of distributions on counts (the clone reduction
of :mod:`jaxpriv.shuffle.clones`): C other users are clones (C from the clone-count law), a of the C + 1
clone-or-target reports look like the target's x⁰, and

    P(C, a) = Pr[C]·(q b_C(a−1) + (1−q) b_C(a)),    Q(C, a) = Pr[C]·((1−q) b_C(a−1) + q b_C(a)),

b_C the Bin(C, ½) pmf, q = e^{ε_t}/(1+e^{ε_t}) the target's randomized response. The privacy loss
L(C, a) = log((q a + (1−q) b)/((1−q) a + q b)), b = C + 1 − a, depends on a/(C+1−a) only and increases
in a (so a window's lowest atom has the window's lowest loss). The pair is finite, so its PLD is exact;
composing T rounds (and b dimensions) by the PLD accountant's FFT leaves only the accountant's own
discretisation, whose direction is certified.

The law is given to the accountant as its atoms (loss, P-mass, Q-mass): the discretisation places each
atom by its own loss, at a cost linear in the number of atoms. (Cumulative masses at every grid node,
the earlier form, cost blocks × nodes gathers: 2 s of a 2.3 s PLD evaluation at n = 10⁴.)

Host side (:meth:`Shuffled.pld_step`), per distinct setting:

* **Clone-count law** from :mod:`jaxpriv.shuffle.poisson_binomial` (a Binomial for uniform ε₀, a
  leave-one-out Poisson-binomial for personalized budgets), over mean ± (13 sd + 32); the mass outside
  (a Chernoff bound) is put on the +∞ loss — the pessimistic side.
* **Blocks of C.** Consecutive counts are merged into one block at the block's *smallest* C, so that the
  largest windows stay a few hundred rows. One clone fewer is never a post-processing of one more (the
  opposite holds), so a block at its smallest C dominates its members: safe. A block spans at most
  ``max(1, ⌊BLOCK_RTOL·C_lo⌋)`` counts; ε moves by about half that ratio (≤ 5e-5 relative), and for
  n ≲ 10⁴ every block is a single count (exact).

Device side (:meth:`CloneCounts.pld_law`): for each block, the Bin(C, ½) pmf over C/2 ± √(23 C) and the
atoms a of the window (the mass outside, < e^{−46} by Hoeffding, counted on the safe side: below the
window on its lowest atom, above it on +∞).

Personalized budgets (:class:`PersonalizedShuffled`; the older ``Shuffled(local_epsilons, model=...)`` is a
deprecated spelling of it): C is the Poisson-binomial of every
user except the one with the largest clone probability (a stochastically smallest leave-one-out count,
valid for every target, MATH §3.1); the target answers at the largest budget (or at ``target_epsilon``,
GSPA model). Budgets with more than :data:`MAX_GROUPS` distinct clone probabilities are rounded down on
the geometric grid of :func:`jaxpriv.shuffle.personalized.clone_probabilities` (fewer clones: safe).
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .._batching import static_size
from .._numerics import is_concrete
from ..shuffle import bounds as _bounds
from ..shuffle import clones as _clones
from ..shuffle import personalized as _personalized
from ..shuffle.poisson_binomial import leave_one_out_windows
from . import laws
from .base import Event, Parameter, event_type

__all__ = ["Shuffled", "PersonalizedShuffled", "SHUFFLE_CLONES", "SHUFFLE_MODELS", "CloneCounts", "BLOCK_RTOL"]

#: largest relative width of a block of clone counts (merged at its smallest C; see the module docstring)
BLOCK_RTOL = 1e-4
#: Hoeffding exponent of the Bin(C, ½) window: C/2 ± √(A_LOG·C) leaves < e^{−2·A_LOG} on each side
A_LOG = 23.0


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class CloneCounts:
    """Internal PLD step: the clone pair of one round, per setting (leading axis = the batch).

    ``target_epsilon`` (B,) the target's randomized-response ε_t; ``counts`` (B, W) the blocks' clone
    counts C; ``log_weights`` (B, W) log Pr[block] (−inf for padding), already raised by its error bound;
    ``dropped`` (B,) ≥ Pr[C outside the window] (put on +∞); ``a_width`` the static length of the Bin(C, ½)
    windows."""

    target_epsilon: Any
    counts: Any
    log_weights: Any
    dropped: Any
    a_width: int = dataclasses.field(metadata=dict(static=True))

    def pld_law(self, add) -> laws.LossLaw:
        return clone_pair_law(self)

    def pld_lattice(self, size: int) -> np.ndarray:
        return np.zeros(size)

    def table_elements(self, nodes: int) -> int:
        """About how many float64 values one setting holds at once on a grid of ``nodes``: the accountant
        sizes its chunks by it."""
        return 12 * int(np.shape(self.counts)[-1]) * (self.a_width + 2) + 12 * int(nodes)


# --------------------------------------------------------------------------------------------------
# Host: clone-count laws
# --------------------------------------------------------------------------------------------------


def _count_law(groups_p, groups_m, remove):
    """(counts, log weights, dropped) of the blocked clone-count law: Poisson-binomial of the groups
    (probabilities ``groups_p`` with multiplicities ``groups_m``) minus one user of probability ``remove``."""
    keep = groups_p > 0
    if not keep.any():  # nobody can be a clone: C = 0
        return np.zeros(1), np.zeros(1), 0.0
    logpmf, lo, top, dropped, rel = leave_one_out_windows(groups_p[keep], groups_m[keep], np.array([remove]))
    counts = lo + np.arange(logpmf.shape[1], dtype=np.float64)
    valid = counts <= top[0]
    counts, logpmf, rel = counts[valid], logpmf[0][valid], rel[0][valid]
    # each Pr[C] raised by its error estimate, and by the tables' Loader/cumsum rounding (see law())
    possible = np.isfinite(logpmf)  # counts beyond the leave-one-out support have −inf (and no error estimate)
    logpmf = np.where(possible, logpmf + np.log1p(np.where(possible, rel, 0.0) + 1e-12), -np.inf)
    width = max(1, int(BLOCK_RTOL * max(counts[0], 1.0)))
    if width > 1:
        starts = np.arange(0, counts.size, width)
        logpmf = np.logaddexp.reduceat(logpmf, starts)
        counts = counts[starts]
    return counts, logpmf, float(dropped[0])


def _uniform_law(eps0: float, n: int, clones: str):
    c = math.exp(-eps0) if clones == "fmt22" else 2.0 / (math.exp(eps0) + 1.0)
    return _count_law(np.array([c]), np.array([n - 1.0]), 0.0)


def personalized_law(local_epsilons, model: str):
    """(target ε*, counts, log weights, dropped) for personalized budgets: the largest budget answers, and
    C is the Poisson-binomial of all users but the one with the largest clone probability."""
    c, target = _personalized.clone_probabilities(np.asarray(local_epsilons, np.float64), model)
    gp, gm = np.unique(c, return_counts=True)
    return (target, *_count_law(gp, gm.astype(np.float64), float(c.max())))


def _counts_step(shuffled, B: int) -> CloneCounts:
    """The :class:`CloneCounts` step of a (validated) Shuffled or PersonalizedShuffled event over a batch of B
    settings."""
    if isinstance(shuffled, PersonalizedShuffled):
        eps_star, counts, logw, dropped = personalized_law(shuffled.local_epsilons, shuffled.model)
        target = eps_star if shuffled.target_epsilon is None else shuffled.target_epsilon
        target = np.broadcast_to(np.asarray(target, np.float64), (B,))
        tables = [(counts, logw, dropped)] * B
    else:
        eps0 = np.broadcast_to(np.asarray(shuffled.epsilon0, np.float64), (B,))
        n = np.broadcast_to(np.asarray(shuffled.n, np.float64), (B,))
        keys, inverse = np.unique(np.stack([eps0, n], -1), axis=0, return_inverse=True)
        distinct = [_uniform_law(float(e), int(m), shuffled.clones) for e, m in keys]
        tables = [distinct[i] for i in inverse.reshape(-1)]
        target = eps0
    W = static_size(max(table[0].size for table in tables))
    counts = np.stack([np.pad(c, (0, W - c.size), mode="edge") for c, _, _ in tables])
    logw = np.stack([np.pad(w, (0, W - w.size), constant_values=-np.inf) for _, w, _ in tables])
    dropped = np.array([d for _, _, d in tables])
    a_width = static_size(2 * math.ceil(math.sqrt(A_LOG * max(counts.max(), 1.0))) + 4)
    return CloneCounts(jnp.asarray(target), jnp.asarray(counts), jnp.asarray(logw), jnp.asarray(dropped), a_width)


# --------------------------------------------------------------------------------------------------
# Device: the loss law (one setting's scalars and (W,) arrays; vmapped by the accountant)
# --------------------------------------------------------------------------------------------------


def _loss(eps_t, a, b):
    """L = log((q a + (1−q) b)/((1−q) a + q b)) with q = sigmoid(ε_t), for a, b ≥ 0 not both 0."""
    q, r = jax.nn.sigmoid(eps_t), jax.nn.sigmoid(-eps_t)
    return jnp.log(q * a + r * b) - jnp.log(r * a + q * b)


def _window_start(counts, a_width: int):
    """First a of each block's Bin(C, ½) window: C/2 − (a_width/2 − 1), at least 0."""
    return jnp.maximum(jnp.floor(counts / 2.0) - (a_width // 2 - 1), 0.0)


def clone_pair_law(step: CloneCounts) -> laws.LossLaw:
    """The loss law of one round's clone pair as its atoms (symmetric: Q(C, a) = P(C, C+1−a)).

    Every block's atoms a = k_lo … k_lo + a_width of its Bin(C, ½) window, with P and Q masses from the
    window's pmf; the Hoeffding mass below a window on that window's lowest atom (loss ≥ every atom it
    bounds: the safe side), the mass above the windows and the dropped counts on +∞."""
    eps_t, counts, log_w, dropped = step.target_epsilon, step.counts, step.log_weights, step.dropped
    a_width = step.a_width
    q, r = jax.nn.sigmoid(eps_t), jax.nn.sigmoid(-eps_t)
    w = jnp.exp(log_w)
    k_lo = _window_start(counts, a_width)
    k = k_lo[:, None] + jnp.arange(a_width, dtype=jnp.float64)[None, :]
    pmf = jnp.exp(_clones.log_half_pmf(k, counts[:, None]))  # (W, a_width): b_C(k_lo + i)
    k_hi = k_lo + a_width - 1
    safe = jnp.maximum(counts, 1.0)
    low = jnp.where(k_lo > 0, jnp.exp(-2.0 * (counts / 2.0 - k_lo + 1.0) ** 2 / safe), 0.0)
    high = jnp.where(k_hi < counts, jnp.exp(-2.0 * (k_hi + 1.0 - counts / 2.0) ** 2 / safe), 0.0)
    zero = jnp.zeros_like(counts)[:, None]
    before = jnp.concatenate([zero, pmf], axis=1)  # b_C(a − 1) for a = k_lo + i, i = 0 … a_width
    at = jnp.concatenate([pmf, zero], axis=1)  # b_C(a)
    a = k_lo[:, None] + jnp.arange(a_width + 1, dtype=jnp.float64)[None, :]
    c1 = counts[:, None] + 1.0
    possible = a <= c1
    a_safe = jnp.minimum(a, c1)
    loss = jnp.where(possible, _loss(eps_t, a_safe, c1 - a_safe), 0.0)
    p_mass = jnp.where(possible, w[:, None] * (q * before + r * at), 0.0)
    q_mass = jnp.where(possible, w[:, None] * (r * before + q * at), 0.0)
    # the blocks' Hoeffding mass below their windows, each on its window's lowest atom
    low_mass = w * low
    top = jnp.sum(w * high) + dropped
    inf = jnp.array([jnp.inf])
    atoms = (jnp.concatenate([loss.reshape(-1), loss[:, 0], inf]),
             jnp.concatenate([p_mass.reshape(-1), low_mass, top[None]]),
             jnp.concatenate([q_mass.reshape(-1), low_mass, jnp.zeros(1)]))
    live = w > 0
    lo = jnp.min(jnp.where(live, loss[:, 0], jnp.inf))  # a = k_lo ≤ C/2 is always possible
    k_top = jnp.minimum(k_hi, counts)
    hi = jnp.max(jnp.where(live, _loss(eps_t, k_top + 1.0, counts - k_top), -jnp.inf))
    return laws.LossLaw(None, (lo, hi), atoms)


# --------------------------------------------------------------------------------------------------
# The event
# --------------------------------------------------------------------------------------------------

SHUFFLE_CLONES = ("fmt22", "strong")
SHUFFLE_MODELS = ("gspa", "apes")


@event_type(("local_epsilons", "target_epsilon"), ("model",))
class PersonalizedShuffled(Event):
    """One round of shuffled local reports with personalized budgets (MATH §3.1): ``local_epsilons`` a 1-D array
    of one ε per user (its length is n; a population, not a batch), ``model`` "gspa" or "apes" (how a budget
    becomes a clone probability, :func:`jaxpriv.shuffle.personalized.clone_probabilities`).

    The guarantee is the worst case over users (the target answers at max ε_i); with ``model="gspa"``,
    ``target_epsilon`` (a number or an array: a batch) gives the guarantee of a user with that budget instead.
    Either way the other users' clone count is the Poisson-binomial of all users but the one with the largest
    clone probability (valid for every target, MATH §3.1). Only the PLD accountant interprets it.

    Example:
      >>> import numpy as np
      >>> from jaxpriv import events
      >>> step = events.PersonalizedShuffled(np.linspace(0.5, 1.0, 1000), model="gspa")
      >>> events.batch_shape(step), events.unsupported(step, "rdp")
      ((), "Shuffled with personalized budgets (no RDP bound is implemented for it; use accountant='pld')")
    """

    local_epsilons: Any
    model: str
    target_epsilon: Any = None

    PARAMETERS = (Parameter("local_epsilons", "PersonalizedShuffled local_epsilons", lo_open=True),
                  Parameter("target_epsilon", "PersonalizedShuffled target_epsilon", lo_open=True))

    def __post_init__(self):
        if self.model not in SHUFFLE_MODELS:
            raise ValueError(f"PersonalizedShuffled model must be one of {SHUFFLE_MODELS}, got {self.model!r}")

    def batch_numbers(self):
        """The budgets are a population, not a batch: only ``target_epsilon`` indexes settings."""
        return {} if self.target_epsilon is None else {"target_epsilon": self.target_epsilon}

    def check(self):
        if is_concrete(self.local_epsilons) and np.ndim(self.local_epsilons) != 1:
            raise ValueError("PersonalizedShuffled local_epsilons must be a 1-D array with one budget per user, "
                             f"got shape {np.shape(self.local_epsilons)}")
        if is_concrete(self.local_epsilons) and np.size(self.local_epsilons) < 2:
            raise ValueError("PersonalizedShuffled needs at least n = 2 users (len(local_epsilons) ≥ 2)")
        self.PARAMETERS[0].check(self.local_epsilons)
        if self.target_epsilon is not None and self.model != "gspa":
            raise ValueError("PersonalizedShuffled target_epsilon is only defined for model='gspa' (under 'apes' "
                             "every target answers at the largest budget)")

    def unsupported_by(self, accountant):
        if accountant == "rdp":
            return "Shuffled with personalized budgets (no RDP bound is implemented for it; use accountant='pld')"
        return super().unsupported_by(accountant)

    def pld_step(self, size, compose):
        return _counts_step(self, size)


@event_type(("epsilon0", "n", "target_epsilon"), ("clones", "model"))
class Shuffled(Event):
    """One round of n shuffled local reports (MATH §3.1).

    ``Shuffled(epsilon0, n=n, clones="fmt22" | "strong")`` — every user applies an ε₀-LDP randomizer (FMT22
    clone probability e^{−ε₀}, or the strong clones 2/(e^{ε₀}+1)).

    Deprecated: ``Shuffled(local_epsilons, model=..., target_epsilon=...)``, personalized budgets held in the
    field named ``epsilon0``; it warns and is interpreted exactly as :class:`PersonalizedShuffled`, which
    new code should use.
    """

    epsilon0: Any
    n: Any = None
    clones: str | None = None
    model: str | None = None
    target_epsilon: Any = None

    PARAMETERS = (Parameter("epsilon0", "Shuffled epsilon0", lo_open=True),
                  Parameter("n", "Shuffled n", 2.0, integer=True),
                  Parameter("target_epsilon", "Shuffled target_epsilon", lo_open=True))

    def __post_init__(self):
        if self.model is None and self.clones is None:
            object.__setattr__(self, "clones", "fmt22")
        if self.model is not None and self.model not in SHUFFLE_MODELS:
            raise ValueError(f"Shuffled model must be one of {SHUFFLE_MODELS}, got {self.model!r}")
        if self.clones is not None and self.clones not in SHUFFLE_CLONES:
            raise ValueError(f"Shuffled clones must be one of {SHUFFLE_CLONES}, got {self.clones!r}")
        if self.model is not None and self.clones is not None:
            raise ValueError("Shuffled takes either clones= (uniform ε₀) or model= (personalized budgets), not both")
        if self.model is not None:
            warnings.warn("Shuffled(local_epsilons, model=...) is deprecated: use "
                          "jaxpriv.events.PersonalizedShuffled(local_epsilons, model=...)", DeprecationWarning,
                          stacklevel=3)

    @property
    def personalized(self) -> bool:
        """True for the deprecated personalized spelling (``model=`` given)."""
        return self.model is not None

    def as_personalized(self) -> PersonalizedShuffled:
        """The :class:`PersonalizedShuffled` that the deprecated personalized spelling stands for."""
        return PersonalizedShuffled(self.epsilon0, self.model, self.target_epsilon)

    def batch_numbers(self):
        if not self.personalized:
            return super().batch_numbers()
        return self.as_personalized().batch_numbers()

    def check(self):
        if self.personalized:
            if self.n is not None:
                raise ValueError("Shuffled with personalized budgets takes n from len(local_epsilons); pass n=None")
            self.as_personalized().check()
            return
        if self.target_epsilon is not None:
            raise ValueError("Shuffled target_epsilon is only defined for personalized budgets (model='gspa')")
        if self.n is None:
            raise ValueError("Shuffled with a uniform budget needs the number of users n (an integer in [2, inf))")

    def unsupported_by(self, accountant):
        if self.personalized:
            return self.as_personalized().unsupported_by(accountant)
        return super().unsupported_by(accountant)

    def rdp(self, orders):  # Girgis et al. Theorem 1 holds for any ε₀-LDP randomizer
        # integer orders only: a fractional α takes the value at ⌈α⌉ (RDP is nondecreasing in α)
        ceil = np.ceil(np.asarray(orders, dtype=np.float64))
        ints, back = np.unique(ceil, return_inverse=True)
        return np.asarray(_bounds.girgis_rdp(self.epsilon0, self.n, ints))[..., back]

    def pld_step(self, size, compose):
        return _counts_step(self.as_personalized() if self.personalized else self, size)
