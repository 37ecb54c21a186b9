"""Privacy events: what a mechanism released, described once, as data (MATH §1, §3, §7).

An event is a small frozen dataclass registered as a JAX pytree. Its numbers may be arrays: one event
with array leaves describes a whole batch of settings (all numeric leaves broadcast together), so
``PoissonSampled(q_grid, Gaussian(sigma_grid))`` is a sweep and ``PoissonSampled(q_per_record, ...)`` is one
setting per record. Accountants (:mod:`jaxpriv.accounting`) interpret events; nothing else switches on
a mechanism's name. Events carry no privacy arithmetic themselves.

=====================================  ===============================================================
event                                  what was released
=====================================  ===============================================================
``Gaussian(noise_multiplier)``         f(D) + N(0, σ²Δ₂²)  (σ = noise std / L2 sensitivity)
``Laplace(scale)``                     f(D) + Lap(bΔ₁)  (b = noise scale / L1 sensitivity; pure ε = 1/b)
``Staircase(epsilon, gamma, dimension)``  staircase noise (Geng & Viswanath), MATH §4.2; ``dimension`` > 1:
                                       per-coordinate noise under an L1 bound (RDP only)
``RandomizedResponse(epsilon, k)``     k-ary randomized response
``PoissonSampled(rate, event)``        ``event`` on a Poisson sample with inclusion probability q
``ClientSampled(rate, event)``         rPDP-FL's client sampling: ``event`` (a client's whole local run)
                                       happens with probability λ (MATH §1.5)
``SelfComposed(event, count)``         ``event`` repeated T times
``Composed(events)``                   the events in sequence
``Shuffled(epsilon0, n, clones)``      n shuffled ε₀-LDP reports (MATH §3.1); personalized budgets via
                                       ``Shuffled(local_epsilons, model=...)``
=====================================  ===============================================================

dp_accounting's DpEvents convert both ways (:func:`from_dp_accounting`, :func:`to_dp_accounting`); that
package stays optional.

Example:
  >>> from jaxpriv import accounting, events
  >>> step = events.PoissonSampled(0.01, events.Gaussian(1.1))
  >>> round(float(accounting.epsilon(events.SelfComposed(step, 10_000), 1e-5, accountant="rdp")), 3)
  5.632
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Iterator, NamedTuple, Union

import jax
import numpy as np

from ._numerics import check_array, check_broadcastable, is_concrete

__all__ = [
    "Gaussian",
    "Laplace",
    "Staircase",
    "RandomizedResponse",
    "PoissonSampled",
    "ClientSampled",
    "SelfComposed",
    "Composed",
    "Shuffled",
    "Event",
    "NOISE_MECHANISMS",
    "NoiseFamily",
    "noise_family",
    "noise_mechanism",
    "sensitivity_norm",
    "validate",
    "batch_shape",
    "leaves",
    "from_dp_accounting",
    "to_dp_accounting",
]


def _event(data: tuple[str, ...], meta: tuple[str, ...] = ()):
    """Frozen dataclass + pytree registration: ``data`` fields are leaves (numbers or events), ``meta``
    fields are static (strings, small integers)."""

    def wrap(cls):
        cls = dataclasses.dataclass(frozen=True)(cls)
        return jax.tree_util.register_dataclass(cls, data_fields=list(data), meta_fields=list(meta))

    return wrap


@_event(("noise_multiplier",))
class Gaussian:
    """Gaussian mechanism, noise multiplier σ > 0 (noise standard deviation / L2 sensitivity)."""

    noise_multiplier: Any


@_event(("scale",))
class Laplace:
    """Laplace mechanism, scale b > 0 (noise scale / L1 sensitivity); pure ε = 1/b."""

    scale: Any


@_event(("epsilon", "gamma"), ("dimension",))
class Staircase:
    """Staircase mechanism with privacy ε > 0 and shape γ ∈ [0, 1] (None: the optimal γ* = 1/(1+e^{ε/2}),
    MATH §4.2). ``dimension`` d > 1 adds the noise to each of d coordinates of a query with L1
    sensitivity Δ (``staircase.rdp_l1``: RDP accountant only)."""

    epsilon: Any
    gamma: Any = None
    dimension: int = 1


@_event(("epsilon",), ("k",))
class RandomizedResponse:
    """k-ary randomized response with privacy ε > 0 (report the truth w.p. e^ε/(e^ε + k − 1))."""

    epsilon: Any
    k: int = 2


@_event(("rate", "event"))
class PoissonSampled:
    """``event`` applied to a Poisson sample: each record is included independently with probability
    q = ``rate`` ∈ [0, 1]."""

    rate: Any
    event: Any


@_event(("rate", "event"))
class ClientSampled:
    """rPDP-FL's client sampling (MATH §1.5): with probability λ = ``rate`` ∈ (0, 1] the client holding
    the record takes part and ``event`` (its whole local run, e.g. τ Poisson-sampled Gaussian steps) is
    released; otherwise nothing about the record is."""

    rate: Any
    event: Any


@_event(("event", "count"))
class SelfComposed:
    """``event`` repeated ``count`` = T ≥ 0 times (an integer)."""

    event: Any
    count: Any


@_event(("events",))
class Composed:
    """The events in sequence (a tuple; empty means nothing was released)."""

    events: tuple

    def __post_init__(self):
        object.__setattr__(self, "events", tuple(self.events))


SHUFFLE_CLONES = ("fmt22", "strong")
SHUFFLE_MODELS = ("gspa", "apes")


@_event(("epsilon0", "n", "target_epsilon"), ("clones", "model"))
class Shuffled:
    """One round of n shuffled local reports (MATH §3.1).

    Uniform budget: ``Shuffled(epsilon0, n=n, clones="fmt22" | "strong")`` — every user applies an
    ε₀-LDP randomizer (FMT22 clone probability e^{−ε₀}, or the strong clones 2/(e^{ε₀}+1)).
    Personalized budgets: ``Shuffled(local_epsilons, model="gspa" | "apes")`` with a 1-D array of one ε
    per user (its length is n; a population, not a batch). The guarantee is the worst case over users
    (the target answers at max ε_i); with ``model="gspa"``, ``target_epsilon`` (a number or an array: a
    batch) gives the guarantee of a user with that budget instead. Either way the other users' clone
    count is the Poisson-binomial of all users but the one with the largest clone probability (valid for
    every target, MATH §3.1). Only the PLD accountant interprets personalized budgets.
    """

    epsilon0: Any
    n: Any = None
    clones: str | None = None
    model: str | None = None
    target_epsilon: Any = None

    def __post_init__(self):
        if self.model is None and self.clones is None:
            object.__setattr__(self, "clones", "fmt22")
        if self.model is not None and self.model not in SHUFFLE_MODELS:
            raise ValueError(f"Shuffled model must be one of {SHUFFLE_MODELS}, got {self.model!r}")
        if self.clones is not None and self.clones not in SHUFFLE_CLONES:
            raise ValueError(f"Shuffled clones must be one of {SHUFFLE_CLONES}, got {self.clones!r}")
        if self.model is not None and self.clones is not None:
            raise ValueError("Shuffled takes either clones= (uniform ε₀) or model= (personalized budgets), not both")

    @property
    def personalized(self) -> bool:
        return self.model is not None


Event = Union[Gaussian, Laplace, Staircase, RandomizedResponse, PoissonSampled, ClientSampled, SelfComposed,
              Composed, Shuffled]
EVENT_TYPES = (Gaussian, Laplace, Staircase, RandomizedResponse, PoissonSampled, ClientSampled, SelfComposed,
               Composed, Shuffled)

# (field, display name, lo, hi, lo_open, hi_open, integer) for every numeric field: one table of ranges.
_RANGES: dict[type, tuple] = {
    Gaussian: (("noise_multiplier", "noise_multiplier sigma", 0.0, np.inf, True, False, False),),
    Laplace: (("scale", "scale b", 0.0, np.inf, True, False, False),),
    Staircase: (("epsilon", "Staircase epsilon", 0.0, np.inf, True, False, False),
                ("gamma", "Staircase gamma", 0.0, 1.0, False, False, False)),
    RandomizedResponse: (("epsilon", "RandomizedResponse epsilon", 0.0, np.inf, True, False, False),),
    PoissonSampled: (("rate", "PoissonSampled rate q", 0.0, 1.0, False, False, False),),
    ClientSampled: (("rate", "ClientSampled rate λ", 0.0, 1.0, True, False, False),),
    SelfComposed: (("count", "SelfComposed count T", 0.0, np.inf, False, False, True),),
    Shuffled: (("epsilon0", "Shuffled epsilon0", 0.0, np.inf, True, False, False),
               ("n", "Shuffled n", 2.0, np.inf, False, False, True)),
}


class NoiseFamily(NamedTuple):
    """An additive noise mechanism as a family of events in one noise parameter s (MATH §4): what every
    caller that takes a mechanism by name (the trainer, its accountant, the Harmonizer, UDP-FL's clients)
    needs to know about it, kept here so that no caller switches on the name.

    ``event(s, dimension)`` builds the event; ``parameter`` names s in messages (σ, b, ε₀); ``norm`` is the
    norm the sensitivity is measured in, hence the norm to clip in; ``noisier_when_larger`` says which way
    s moves towards more privacy (True for σ and b, False for the staircase's ε₀), so which way to round
    it safely; ``needs_dimension`` that the accounting depends on the number d of noised coordinates;
    ``description`` names s for people (reports, the command line); ``search_range`` is the interval a
    calibration searches s in (the Harmonizer's), wide enough for any target the orders can certify."""

    name: str
    event: Callable[[Any, int], Any]
    event_type: type
    parameter: str
    norm: str
    noisier_when_larger: bool
    needs_dimension: bool
    description: str
    search_range: tuple


_NOISE = {f.name: f for f in (
    NoiseFamily("gaussian", lambda s, dimension: Gaussian(s), Gaussian, "σ", "l2", True, False, "noise multiplier σ",
                (1e-4, 1e8)),
    NoiseFamily("laplace", lambda s, dimension: Laplace(s), Laplace, "b", "l1", True, False, "Laplace scale b",
                (1e-4, 1e8)),
    NoiseFamily("staircase", lambda s, dimension: Staircase(s, None, dimension), Staircase, "ε₀", "l1", False, True,
                "per-step staircase ε₀", (1e-8, 100.0)),
)}
#: The additive noise mechanisms by name (the ``mechanism`` argument of the trainer and the Harmonizer).
NOISE_MECHANISMS = tuple(_NOISE)


def noise_family(name: str) -> NoiseFamily:
    """The :class:`NoiseFamily` of the additive noise mechanism called ``name`` (one of
    :data:`NOISE_MECHANISMS`).

    Example:
      >>> from jaxpriv import events
      >>> f = events.noise_family("staircase")
      >>> f.parameter, f.norm, f.noisier_when_larger, f.needs_dimension
      ('ε₀', 'l1', False, True)
    """
    if not isinstance(name, str) or name not in _NOISE:
        raise ValueError(f"mechanism must be one of {NOISE_MECHANISMS}, got {name!r}")
    return _NOISE[name]


def noise_mechanism(name: str, parameter, dimension: int = 1):
    """The event of the additive noise mechanism called ``name``, the one place where a mechanism's name
    becomes an event (MATH §4; the trainer, its accountant and the Harmonizer all start here).

    Args:
      name: one of :data:`NOISE_MECHANISMS`: ``"gaussian"`` (``parameter`` = noise multiplier σ),
        ``"laplace"`` (scale b per unit of L1 sensitivity) or ``"staircase"`` (per-release ε₀, γ = γ*).
      parameter: the noise parameter (a number or an array: a batch of settings).
      dimension: number of noised coordinates d ≥ 1 (the staircase's per-coordinate accounting; ignored
        by the others, whose worst case is one coordinate).

    Returns:
      ``Gaussian(σ)``, ``Laplace(b)`` or ``Staircase(ε₀, None, d)``.

    Example:
      >>> from jaxpriv import events
      >>> events.noise_mechanism("laplace", 2.0)
      Laplace(scale=2.0)
      >>> events.noise_mechanism("staircase", 0.5, dimension=650)
      Staircase(epsilon=0.5, gamma=None, dimension=650)
    """
    family = noise_family(name)
    dimension = int(check_array("dimension", dimension, 1.0, np.inf, integer=True))
    return family.event(parameter, dimension)


def sensitivity_norm(event) -> str:
    """The norm in which the sensitivity of an additive noise event is measured, so the norm to clip in:
    ``"l2"`` for :class:`Gaussian`, ``"l1"`` for :class:`Laplace` and :class:`Staircase` (MATH §4, §6).

    Example:
      >>> from jaxpriv import events
      >>> events.sensitivity_norm(events.Gaussian(1.0)), events.sensitivity_norm(events.Laplace(1.0))
      ('l2', 'l1')
    """
    for family in _NOISE.values():
        if type(event) is family.event_type:
            return family.norm
    raise ValueError(f"event must be a Gaussian, Laplace or Staircase event, got {type(event).__name__}")


def children(event) -> tuple:
    """The events directly inside ``event``."""
    if isinstance(event, (PoissonSampled, ClientSampled, SelfComposed)):
        return (event.event,)
    if isinstance(event, Composed):
        return event.events
    return ()


def _walk(event) -> Iterator:
    yield event
    for child in children(event):
        yield from _walk(child)


def validate(event) -> None:
    """Check an event's structure and every concrete number; ``ValueError`` naming the parameter and its
    valid range otherwise (traced numbers pass unchecked, as everywhere in jaxpriv).

    Example:
      >>> from jaxpriv import events
      >>> events.validate(events.PoissonSampled(1.5, events.Gaussian(1.0)))
      Traceback (most recent call last):
      ...
      ValueError: PoissonSampled rate q must lie in [0.0, 1.0], got 1.5
    """
    if not isinstance(event, EVENT_TYPES):
        raise ValueError(f"event must be a jaxpriv.events event (or a dp_accounting DpEvent converted with "
                         f"events.from_dp_accounting); got {type(event).__name__}")
    for child in children(event):
        validate(child)
    if isinstance(event, RandomizedResponse) and not (isinstance(event.k, (int, np.integer)) and event.k >= 2):
        raise ValueError(f"RandomizedResponse k must be an integer in [2, inf), got {event.k!r}")
    if isinstance(event, Staircase) and not (isinstance(event.dimension, (int, np.integer)) and event.dimension >= 1):
        raise ValueError(f"Staircase dimension must be an integer in [1, inf), got {event.dimension!r}")
    if isinstance(event, Shuffled):
        if event.personalized:
            if event.n is not None:
                raise ValueError("Shuffled with personalized budgets takes n from len(local_epsilons); pass n=None")
            if is_concrete(event.epsilon0) and np.ndim(event.epsilon0) != 1:
                raise ValueError("Shuffled local_epsilons must be a 1-D array with one budget per user, "
                                 f"got shape {np.shape(event.epsilon0)}")
            if is_concrete(event.epsilon0) and np.size(event.epsilon0) < 2:
                raise ValueError("Shuffled needs at least n = 2 users (len(local_epsilons) ≥ 2)")
            check_array("Shuffled local_epsilons", event.epsilon0, 0.0, np.inf, lo_open=True)
            if event.target_epsilon is not None:
                if event.model != "gspa":
                    raise ValueError("Shuffled target_epsilon is only defined for model='gspa' (under 'apes' "
                                     "every target answers at the largest budget)")
                check_array("Shuffled target_epsilon", event.target_epsilon, 0.0, np.inf, lo_open=True)
            return
        if event.target_epsilon is not None:
            raise ValueError("Shuffled target_epsilon is only defined for personalized budgets (model='gspa')")
        if event.n is None:
            raise ValueError("Shuffled with a uniform budget needs the number of users n (an integer in [2, inf))")
    for field, name, lo, hi, lo_open, hi_open, integer in _RANGES.get(type(event), ()):
        value = getattr(event, field)
        if value is None:
            continue
        check_array(name, value, lo, hi, lo_open=lo_open, hi_open=hi_open, integer=integer)


def leaves(event) -> list:
    """The numeric leaves of ``event`` (None fields are not leaves), in pytree order.

    Example:
      >>> from jaxpriv import events
      >>> events.leaves(events.SelfComposed(events.PoissonSampled(0.01, events.Gaussian(1.1)), 100))
      [0.01, 1.1, 100]
    """
    return jax.tree_util.tree_leaves(event)


def batch_shape(event) -> tuple:
    """Broadcast shape of every numeric leaf: the batch of settings the event describes. Personalized
    ``Shuffled`` budgets are a population, not a batch, and do not count. ``ValueError`` on a mismatch.

    Example:
      >>> import numpy as np
      >>> from jaxpriv import events
      >>> events.batch_shape(events.PoissonSampled(np.ones((3, 1)), events.Gaussian(np.ones(4))))
      (3, 4)
    """
    shapes = {}
    for i, node in enumerate(_walk(event)):
        if isinstance(node, Shuffled) and node.personalized:
            if node.target_epsilon is not None:
                shapes[f"Shuffled.target_epsilon#{i}"] = node.target_epsilon
            continue
        for field, *_ in _RANGES.get(type(node), ()):
            value = getattr(node, field)
            if value is not None:
                shapes[f"{type(node).__name__}.{field}#{i}"] = value
    return check_broadcastable(**shapes) if shapes else ()


def map_numbers(event, fn: Callable[[str, Any], Any]):
    """A copy of ``event`` with every numeric field ``x`` of a batched node replaced by ``fn(name, x)``.

    Example:
      >>> from jaxpriv import events
      >>> events.map_numbers(events.PoissonSampled(0.5, events.Gaussian(2.0)), lambda name, x: 2 * x)
      PoissonSampled(rate=1.0, event=Gaussian(noise_multiplier=4.0))
    """
    if isinstance(event, Shuffled) and event.personalized:
        if event.target_epsilon is None:
            return event
        return dataclasses.replace(event, target_epsilon=fn("target_epsilon", event.target_epsilon))
    updates = {f: fn(f, getattr(event, f)) for f, *_ in _RANGES.get(type(event), ()) if getattr(event, f) is not None}
    if isinstance(event, (PoissonSampled, ClientSampled, SelfComposed)):
        updates["event"] = map_numbers(event.event, fn)
    if isinstance(event, Composed):
        updates["events"] = tuple(map_numbers(e, fn) for e in event.events)
    return dataclasses.replace(event, **updates)


# --------------------------------------------------------------------------------------------------
# dp_accounting DpEvents, both ways (matched by class name: the package stays optional)
# --------------------------------------------------------------------------------------------------


def from_dp_accounting(event):
    """Translate a dp_accounting DpEvent into a jaxpriv event (jaxpriv events pass through).

    Supported: Gaussian, Laplace, RandomizedResponse (noise_parameter p, num_buckets k: ε =
    log(1 + k(1−p)/p)), PoissonSampled, SelfComposed, Composed, NoOp. Anything else raises ``ValueError``.

    Example:
      >>> import dp_accounting
      >>> from jaxpriv import events
      >>> events.from_dp_accounting(dp_accounting.GaussianDpEvent(1.1))
      Gaussian(noise_multiplier=1.1)
    """
    if isinstance(event, EVENT_TYPES):
        return event
    name = type(event).__name__
    if name == "GaussianDpEvent":
        return Gaussian(event.noise_multiplier)
    if name == "LaplaceDpEvent":
        return Laplace(event.noise_multiplier)
    if name == "RandomizedResponseDpEvent":
        p, k = float(event.noise_parameter), int(event.num_buckets)
        if not 0.0 < p < 1.0:
            raise ValueError(f"RandomizedResponseDpEvent noise_parameter must lie in (0, 1), got {p!r}")
        return RandomizedResponse(float(np.log1p(k * (1.0 - p) / p)), k)
    if name == "PoissonSampledDpEvent":
        return PoissonSampled(event.sampling_probability, from_dp_accounting(event.event))
    if name == "SelfComposedDpEvent":
        return SelfComposed(from_dp_accounting(event.event), event.count)
    if name == "ComposedDpEvent":
        return Composed(tuple(from_dp_accounting(e) for e in event.events))
    if name == "NoOpDpEvent":
        return Composed(())
    raise ValueError(
        "event must be a jaxpriv.events event or a supported dp_accounting DpEvent (Gaussian, Laplace, "
        f"RandomizedResponse, PoissonSampled, SelfComposed, Composed, NoOp); got {name}"
    )


def to_dp_accounting(event):
    """Translate a jaxpriv event with scalar numbers into dp_accounting's DpEvents (needs that package).

    Staircase, ClientSampled and Shuffled have no DpEvent and raise ``ValueError``.

    Example:
      >>> from jaxpriv import events
      >>> events.to_dp_accounting(events.SelfComposed(events.Gaussian(2.0), 3))
      SelfComposedDpEvent(event=GaussianDpEvent(noise_multiplier=2.0), count=3)
    """
    import dp_accounting

    validate(event)
    if batch_shape(event) != ():
        raise ValueError(f"to_dp_accounting needs an event with scalar numbers, got batch shape {batch_shape(event)}")
    if isinstance(event, Gaussian):
        return dp_accounting.GaussianDpEvent(float(event.noise_multiplier))
    if isinstance(event, Laplace):
        return dp_accounting.LaplaceDpEvent(float(event.scale))
    if isinstance(event, RandomizedResponse):
        p = event.k / (np.exp(float(event.epsilon)) + event.k - 1.0)
        return dp_accounting.RandomizedResponseDpEvent(float(p), int(event.k))
    if isinstance(event, PoissonSampled):
        return dp_accounting.PoissonSampledDpEvent(float(event.rate), to_dp_accounting(event.event))
    if isinstance(event, SelfComposed):
        return dp_accounting.SelfComposedDpEvent(to_dp_accounting(event.event), int(event.count))
    if isinstance(event, Composed):
        return dp_accounting.ComposedDpEvent([to_dp_accounting(e) for e in event.events])
    raise ValueError(f"{type(event).__name__} has no dp_accounting DpEvent")
