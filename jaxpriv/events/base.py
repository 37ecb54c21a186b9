"""What every event type declares, and the generic walks over event trees (MATH §1, §7).

An event type is a frozen dataclass registered as a JAX pytree (:func:`event_type`) that derives from
:class:`Event` and declares, in its own class body and nowhere else:

* ``PARAMETERS`` — its numeric fields with their valid ranges (:class:`Parameter`); :func:`validate`,
  :func:`batch_shape` and :func:`map_numbers` read them. ``check()`` adds structural rules (static fields).
* ``CHILD`` — the field holding the events inside it (``"event"``, or ``"events"`` for a tuple), if any.
* ``rdp(orders)`` — its Rényi-DP curve (the RDP accountant; not defined: the accountant says why not);
  ``subsampled_rdp(rate, orders)`` — an exact curve of its Poisson subsampling, where one is known.
* ``pld_law(add)`` — the privacy-loss law of its dominating pair in one direction (the PLD accountant's
  device programs), ``pld_lattice`` — the lattice of its atoms, or ``pld_step`` — a step prepared on the
  host (tables) that has them; ``pld_components`` flattens compositions, ``pld_symmetric`` says whether
  both neighbouring directions have one law.
* ``unsupported_by(accountant)`` — why an accountant cannot interpret it (default: it does not declare
  that accountant's interpretation).
* ``LOWER_BOUND_ONLY`` — True for a type whose PLD law is an *adversarial* (dominated) pair, not a
  dominating one: it refuses every upper bound (``unsupported_by`` says why) and only the lower end of the
  PLD interval, :func:`jaxpriv.accounting.epsilon_lower_bound`, reads it (``ShuffledBatches``).
* ``DP_ACCOUNTING`` and ``to_dp_accounting``/``from_dp_accounting`` — its dp_accounting DpEvent, if any.
* ``NOISE_SCALE`` and ``sample_noise`` — for an additive noise of one scale, its scale field and sampler
  (the trainer's noise transform, :mod:`jaxpriv.train.noise`, draws with it).

The accountants (:mod:`jaxpriv.accounting`) walk the tree and call these; nothing switches on a type's
name, so a new event type is one class (``tests/test_events.py`` registers a toy one in the test alone).
Events carry no privacy arithmetic of their own: the declarations call the kernels of :mod:`jaxpriv.rdp`,
:mod:`jaxpriv.mechanisms` and :mod:`.laws`.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, ClassVar, Iterator

import jax
import numpy as np

from .._numerics import check_array, check_broadcastable

__all__ = ["Parameter", "Event", "event_type", "event_types", "check_at_most", "children", "walk", "validate", "unsupported",
           "leaves", "batch_shape", "map_numbers", "broadcast_numbers", "from_dp_accounting", "to_dp_accounting"]


@dataclasses.dataclass(frozen=True)
class Parameter:
    """A numeric field of an event type and its valid range (``lo``/``hi``, open ends and integrality), named
    in messages as ``name``."""

    field: str
    name: str
    lo: float = 0.0
    hi: float = np.inf
    lo_open: bool = False
    hi_open: bool = False
    integer: bool = False

    def check(self, value) -> None:
        """``ValueError`` naming the parameter and its range unless every concrete value lies in it."""
        check_array(self.name, value, self.lo, self.hi, lo_open=self.lo_open, hi_open=self.hi_open,
                    integer=self.integer)


def event_type(data: tuple[str, ...], meta: tuple[str, ...] = ()):
    """Class decorator of an event type: a frozen dataclass and a pytree whose ``data`` fields are leaves
    (numbers or events) and ``meta`` fields static (strings, small integers).

    Example:
      >>> from jaxpriv import events
      >>> @events.event_type(("noise_multiplier",))
      ... class Noisy(events.Event):
      ...     noise_multiplier: float
      ...     PARAMETERS = (events.Parameter("noise_multiplier", "Noisy sigma", lo_open=True),)
      >>> Noisy(2.0)
      Noisy(noise_multiplier=2.0)
    """

    def wrap(cls):
        if not issubclass(cls, Event):
            raise TypeError(f"an event type must derive from jaxpriv.events.Event, {cls.__name__} does not")
        declared = {p.field for p in cls.PARAMETERS} | {cls.CHILD}
        missing = [field for field in data if field not in declared]
        if missing:  # an undeclared number would escape the range checks and the batch shape
            raise TypeError(f"{cls.__name__}: data fields {missing} need a Parameter in PARAMETERS (or are CHILD)")
        cls = dataclasses.dataclass(frozen=True)(cls)
        return jax.tree_util.register_dataclass(cls, data_fields=list(data), meta_fields=list(meta))

    return wrap


def _declares(event, method: str) -> bool:
    """True when ``event``'s type defines ``method`` itself rather than inheriting :class:`Event`'s."""
    return getattr(type(event), method) is not getattr(Event, method)


class Event:
    """Base of every event type; the defaults say "not interpretable" and "no children" (see the module
    docstring for what a type declares)."""

    PARAMETERS: ClassVar[tuple[Parameter, ...]] = ()
    CHILD: ClassVar[str | None] = None
    #: the dp_accounting DpEvent class names this type converts from (the first one: to)
    DP_ACCOUNTING: ClassVar[tuple[str, ...]] = ()
    #: additive noise of one scale: the field whose value × the sensitivity is the noise scale (None: the type
    #: is not such a noise); :meth:`sample_noise` draws it
    NOISE_SCALE: ClassVar[str | None] = None
    #: True when the type's PLD law is an adversarial pair: a certified lower bound, never an upper one (its
    #: ``unsupported_by`` refuses both upper-bound accountants; ``unsupported(…, "pld_lower")`` lets it through)
    LOWER_BOUND_ONLY: ClassVar[bool] = False

    @staticmethod
    def sample_noise(key, scale, shape, dtype):
        """Draws of the noise at ``scale`` (the :data:`NOISE_SCALE` field × the sensitivity)."""
        raise NotImplementedError

    # -- structure ---------------------------------------------------------------------------------

    def children(self) -> tuple:
        """The events directly inside this one."""
        if self.CHILD is None:
            return ()
        inner = getattr(self, self.CHILD)
        return tuple(inner) if isinstance(inner, tuple) else (inner,)

    def with_children(self, kids: tuple):
        """A copy with the events inside replaced by ``kids``."""
        if self.CHILD is None:
            return self
        tupled = isinstance(getattr(self, self.CHILD), tuple)
        return dataclasses.replace(self, **{self.CHILD: tuple(kids) if tupled else kids[0]})

    def check(self) -> None:
        """Structural rules beyond the ranges of ``PARAMETERS`` (static fields, combinations)."""

    def batch_numbers(self) -> dict[str, Any]:
        """The numeric fields that index the batch of settings (``PARAMETERS`` that are set)."""
        return {p.field: getattr(self, p.field) for p in self.PARAMETERS if getattr(self, p.field) is not None}

    # -- interpretations ---------------------------------------------------------------------------

    def unsupported_by(self, accountant: str) -> str | None:
        """Why ``accountant`` ("rdp" or "pld") cannot interpret this node (its children are asked too),
        or None."""
        name = type(self).__name__
        if accountant == "rdp" and not _declares(self, "rdp"):
            return f"{name} (no RDP curve is declared for it; use accountant='pld')"
        if accountant == "pld" and not any(_declares(self, m) for m in ("pld_law", "pld_step", "pld_components")):
            return f"{name} (not yet interpretable by the PLD accountant; use accountant='rdp')"
        return None

    def rdp(self, orders):
        """The RDP curve on ``orders`` (numbers of the batch shape S, already broadcast) → S + (K,)."""
        raise NotImplementedError(type(self).__name__)

    def subsampled_rdp(self, rate, orders):
        """An exact curve of this event Poisson-subsampled at ``rate``, or None (the generic bound is used)."""
        return None

    def pld_law(self, add):
        """The loss law (:class:`.laws.LossLaw`) of one setting's traced scalars, direction ``add``."""
        raise NotImplementedError(type(self).__name__)

    def pld_lattice(self, size: int) -> np.ndarray:
        """Per setting (``size`` of them), the spacing of a lattice holding every finite atom of the law (0:
        no atoms; NaN: none shared)."""
        return np.full(size, np.nan)

    def pld_step(self, size: int, compose: Callable):
        """The step the device programs take: numbers broadcast to (``size``,); a type that needs host
        work (tables) returns its prepared step. ``compose(event, add)`` is the accountant's composed PLD."""
        return broadcast_numbers(self, size)

    def pld_symmetric(self) -> bool:
        """True when both neighbouring directions have the same loss law."""
        return all(c.pld_symmetric() for c in self.children())

    def pld_components(self, count) -> list:
        """Compositions flattened: [(step event, count)]."""
        return [(self, count)]

    def releases_nothing(self, size: int) -> np.ndarray:
        """Per setting, True where the step certainly releases nothing (e.g. a sampling rate of 0)."""
        return np.zeros(size, bool)

    def table_elements(self, nodes: int) -> int:
        """About how many float64 values one setting of the prepared step holds on a grid of ``nodes`` (0:
        no tables)."""
        return 0

    def to_dp_accounting(self, convert: Callable):
        """The dp_accounting DpEvent (``convert`` translates children)."""
        raise ValueError(f"{type(self).__name__} has no dp_accounting DpEvent")

    @classmethod
    def from_dp_accounting(cls, dp_event, convert: Callable):
        """This type from a dp_accounting DpEvent named in ``DP_ACCOUNTING``."""
        raise NotImplementedError(cls.__name__)


def check_at_most(event, small: str, large: str, rule: str) -> None:
    """For ``check()``: every parameter's range first (so that a bad value is named as such), then
    ``small`` ≤ ``large`` elementwise; ``ValueError`` quoting ``rule`` and both values otherwise. Traced
    numbers pass unchecked."""
    try:
        a, b = np.asarray(getattr(event, small), np.float64), np.asarray(getattr(event, large), np.float64)
    except TypeError:
        return
    for parameter in event.PARAMETERS:
        value = getattr(event, parameter.field)
        if value is not None:
            parameter.check(value)
    if np.any(a > b):
        raise ValueError(f"{type(event).__name__} {rule}, got {small}={getattr(event, small)}, "
                         f"{large}={getattr(event, large)}")


def event_types() -> list[type]:
    """Every event type defined so far (subclasses of :class:`Event`, recursively, registered with
    :func:`event_type`; a shared base such as :class:`.noise.ScaleNoise` is not one)."""
    found, todo = [], list(Event.__subclasses__())
    while todo:
        cls = todo.pop(0)
        if dataclasses.is_dataclass(cls):
            found.append(cls)
        todo.extend(cls.__subclasses__())
    return found


def children(event) -> tuple:
    """The events directly inside ``event``."""
    return event.children() if isinstance(event, Event) else ()


def walk(event) -> Iterator:
    """``event`` and every event inside it, depth first."""
    yield event
    for child in children(event):
        yield from walk(child)


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
    if not isinstance(event, Event):
        raise ValueError(f"event must be a jaxpriv.events event (or a dp_accounting DpEvent converted with "
                         f"events.from_dp_accounting); got {type(event).__name__}")
    for child in event.children():
        validate(child)
    event.check()
    for parameter in event.PARAMETERS:
        value = event.batch_numbers().get(parameter.field)
        if value is not None:
            parameter.check(value)


def unsupported(event, accountant: str) -> str | None:
    """The first reason, over the event tree, why ``accountant`` ("rdp" or "pld"; "pld_lower": the lower end
    of the PLD interval alone, which also reads ``LOWER_BOUND_ONLY`` types) cannot interpret ``event``; None
    when it can.

    Example:
      >>> from jaxpriv import events
      >>> events.unsupported(events.Staircase(1.0, dimension=3), "pld")
      "Staircase with dimension > 1 (its loss law is a d-fold product; use accountant='rdp')"
    """
    lower = accountant == "pld_lower"
    for node in walk(event):
        if lower and node.LOWER_BOUND_ONLY:
            continue
        reason = node.unsupported_by("pld" if lower else accountant)
        if reason:
            return reason
    return None


def leaves(event) -> list:
    """The numeric leaves of ``event`` (None fields are not leaves), in pytree order.

    Example:
      >>> from jaxpriv import events
      >>> events.leaves(events.SelfComposed(events.PoissonSampled(0.01, events.Gaussian(1.1)), 100))
      [0.01, 1.1, 100]
    """
    return jax.tree_util.tree_leaves(event)


def batch_shape(event) -> tuple:
    """Broadcast shape of every numeric leaf: the batch of settings the event describes. The personalized
    budgets of ``PersonalizedShuffled`` are a population, not a batch, and do not count. ``ValueError`` on a
    mismatch.

    Example:
      >>> import numpy as np
      >>> from jaxpriv import events
      >>> events.batch_shape(events.PoissonSampled(np.ones((3, 1)), events.Gaussian(np.ones(4))))
      (3, 4)
    """
    shapes = {f"{type(node).__name__}.{field}#{i}": value
              for i, node in enumerate(walk(event)) for field, value in node.batch_numbers().items()}
    return check_broadcastable(**shapes) if shapes else ()


def map_numbers(event, fn: Callable[[str, Any], Any]):
    """A copy of ``event`` with every batch number ``x`` (see :meth:`Event.batch_numbers`) replaced by
    ``fn(name, x)``.

    Example:
      >>> from jaxpriv import events
      >>> events.map_numbers(events.PoissonSampled(0.5, events.Gaussian(2.0)), lambda name, x: 2 * x)
      PoissonSampled(rate=1.0, event=Gaussian(noise_multiplier=4.0))
    """
    updates = {field: fn(field, value) for field, value in event.batch_numbers().items()}
    mapped = dataclasses.replace(event, **updates)
    kids = event.children()
    return mapped.with_children(tuple(map_numbers(e, fn) for e in kids)) if kids else mapped


def broadcast_numbers(event, size: int):
    """``event`` with every numeric leaf a float64 array of shape (``size``,)."""
    return jax.tree_util.tree_map(lambda x: np.broadcast_to(np.asarray(x, np.float64), (size,)), event)


# --------------------------------------------------------------------------------------------------
# dp_accounting DpEvents, both ways (matched by class name: the package stays optional)
# --------------------------------------------------------------------------------------------------


def from_dp_accounting(event):
    """Translate a dp_accounting DpEvent into a jaxpriv event (jaxpriv events pass through), by the
    ``DP_ACCOUNTING`` names the event types declare: Gaussian, Laplace, RandomizedResponse
    (noise_parameter p, num_buckets k: ε = log(1 + k(1−p)/p)), PoissonSampled, SelfComposed, Composed,
    NoOp. Anything else raises ``ValueError``.

    Example:
      >>> import dp_accounting
      >>> from jaxpriv import events
      >>> events.from_dp_accounting(dp_accounting.GaussianDpEvent(1.1))
      Gaussian(noise_multiplier=1.1)
    """
    if isinstance(event, Event):
        return event
    name = type(event).__name__
    known = {dp_name: cls for cls in event_types() for dp_name in cls.DP_ACCOUNTING}
    if name in known:
        return known[name].from_dp_accounting(event, from_dp_accounting)
    supported = ", ".join(sorted(n.removesuffix("DpEvent") for n in known))
    raise ValueError(f"event must be a jaxpriv.events event or a supported dp_accounting DpEvent ({supported}); "
                     f"got {name}")


def to_dp_accounting(event):
    """Translate a jaxpriv event with scalar numbers into dp_accounting's DpEvents (needs that package).

    Types without a DpEvent (Staircase, ClientSampled, Shuffled) raise ``ValueError``.

    Example:
      >>> from jaxpriv import events
      >>> events.to_dp_accounting(events.SelfComposed(events.Gaussian(2.0), 3))
      SelfComposedDpEvent(event=GaussianDpEvent(noise_multiplier=2.0), count=3)
    """
    validate(event)
    if batch_shape(event) != ():
        raise ValueError(f"to_dp_accounting needs an event with scalar numbers, got batch shape {batch_shape(event)}")
    return event.to_dp_accounting(to_dp_accounting)
