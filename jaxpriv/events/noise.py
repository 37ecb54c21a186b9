"""The noise mechanisms as events: Gaussian, Laplace, Staircase, RandomizedResponse (MATH §1.1-1.2, §4, §7.1).

Each class is the one home of its mechanism's accounting: parameters and ranges, RDP curve, PLD loss law
and lattice, dp_accounting mapping, and (Gaussian, Laplace) its scale field and sampler. :class:`NoiseFamily` adds what callers that take an additive mechanism
by name (the trainer, the Harmonizer, UDP-FL's clients) need: its noise parameter, clipping norm and
search range.
"""

from __future__ import annotations

from typing import Any, Callable, ClassVar, NamedTuple

import numpy as np

from .. import rdp as rdp_curves
from .._numerics import check_array
from ..mechanisms import gaussian, laplace, randomized_response, staircase
from . import laws
from .base import Event, Parameter, check_at_most, event_type

__all__ = ["ScaleNoise", "Gaussian", "Laplace", "Staircase", "RandomizedResponse", "NOISE_MECHANISMS", "NoiseFamily",
           "noise_family", "noise_mechanism", "sensitivity_norm", "require_gaussian", "check_counted_gaussian"]


def _full(x, size: int) -> np.ndarray:
    return np.broadcast_to(np.asarray(x, np.float64), (size,)).copy()


class ScaleNoise(Event):
    """Base of an additive noise of one scale (Gaussian, Laplace): its RDP curve and loss law are functions of
    the :data:`NOISE_SCALE` field alone, and its dp_accounting DpEvent takes that number as
    ``noise_multiplier``. A subclass declares the field, ``PARAMETERS``, ``DP_ACCOUNTING``, ``NOISE_SCALE``,
    ``sample_noise``, ``CURVE`` (the unit-sensitivity RDP curve), ``LAW`` (the loss law) and its lattice."""

    #: the RDP curve of the scale, ``CURVE(scale, orders)`` (a kernel of :mod:`jaxpriv.rdp`)
    CURVE: ClassVar[Callable]
    #: the loss law of the scale, ``LAW(scale)`` (a kernel of :mod:`.laws`)
    LAW: ClassVar[Callable]

    def noise_scale(self):
        """The value of the :data:`NOISE_SCALE` field."""
        return getattr(self, self.NOISE_SCALE)

    def rdp(self, orders):
        return self.CURVE(self.noise_scale(), orders)

    def pld_law(self, add):
        return self.LAW(self.noise_scale())

    def to_dp_accounting(self, convert):
        import dp_accounting

        return getattr(dp_accounting, self.DP_ACCOUNTING[0])(float(self.noise_scale()))

    @classmethod
    def from_dp_accounting(cls, dp_event, convert):
        return cls(dp_event.noise_multiplier)


@event_type(("noise_multiplier",))
class Gaussian(ScaleNoise):
    """Gaussian mechanism, noise multiplier σ > 0 (noise standard deviation / L2 sensitivity)."""

    noise_multiplier: Any

    PARAMETERS = (Parameter("noise_multiplier", "noise_multiplier sigma", lo_open=True),)
    DP_ACCOUNTING = ("GaussianDpEvent",)
    NOISE_SCALE = "noise_multiplier"
    sample_noise = staticmethod(gaussian.sample)
    CURVE = staticmethod(rdp_curves.gaussian)  # Mironov 2017, Prop. 7
    LAW = staticmethod(laws.gaussian)

    def subsampled_rdp(self, rate, orders):  # the exact series (MATH §1.3)
        return rdp_curves.subsampled_gaussian(rate, self.noise_multiplier, orders)

    def pld_lattice(self, size):
        return np.zeros(size)


def require_gaussian(owner: str, event, why: str) -> None:
    """``ValueError`` unless ``event`` (inside an ``owner`` event) is a Gaussian step; ``why`` says why."""
    if not isinstance(event, Gaussian):
        raise ValueError(f"{owner} event must be a Gaussian step ({why}), got {type(event).__name__}")


def check_counted_gaussian(scheme, why: str, small: str, large: str, rule: str) -> None:
    """``check()`` of a sampling scheme of a Gaussian step counted by two integers (a batch of b of n records,
    k of t steps): its ``event`` is Gaussian (``why``), then :func:`.base.check_at_most` (``small`` ≤ ``large``)."""
    require_gaussian(type(scheme).__name__, scheme.event, why)
    check_at_most(scheme, small, large, rule)


@event_type(("scale",))
class Laplace(ScaleNoise):
    """Laplace mechanism, scale b > 0 (noise scale / L1 sensitivity); pure ε = 1/b."""

    scale: Any

    PARAMETERS = (Parameter("scale", "scale b", lo_open=True),)
    DP_ACCOUNTING = ("LaplaceDpEvent",)
    NOISE_SCALE = "scale"
    sample_noise = staticmethod(laplace.sample)
    CURVE = staticmethod(rdp_curves.laplace)  # Mironov 2017, Prop. 6
    LAW = staticmethod(laws.laplace)

    def pld_lattice(self, size):
        return 1.0 / _full(self.scale, size)


@event_type(("epsilon", "gamma"), ("dimension",))
class Staircase(Event):
    """Staircase mechanism with privacy ε > 0 and shape γ ∈ [0, 1] (None: the optimal γ* = 1/(1+e^{ε/2}),
    MATH §4.2). ``dimension`` d > 1 adds the noise to each of d coordinates of a query with L1
    sensitivity Δ (``staircase.rdp_l1``: RDP accountant only)."""

    epsilon: Any
    gamma: Any = None
    dimension: int = 1

    PARAMETERS = (Parameter("epsilon", "Staircase epsilon", lo_open=True),
                  Parameter("gamma", "Staircase gamma", 0.0, 1.0))

    def check(self):
        if not (isinstance(self.dimension, (int, np.integer)) and self.dimension >= 1):
            raise ValueError(f"Staircase dimension must be an integer in [1, inf), got {self.dimension!r}")

    def unsupported_by(self, accountant):
        if accountant == "pld" and self.dimension > 1:
            return "Staircase with dimension > 1 (its loss law is a d-fold product; use accountant='rdp')"
        return super().unsupported_by(accountant)

    def rdp(self, orders):
        if self.dimension > 1:
            return staircase.rdp_l1(self.epsilon, self.dimension, self.gamma, orders)
        return staircase.rdp(self.epsilon, self.gamma, orders)

    def pld_law(self, add):
        gamma = staircase.optimal_gamma(self.epsilon) if self.gamma is None else self.gamma
        return laws.staircase_law(self.epsilon, gamma)

    def pld_lattice(self, size):
        return _full(self.epsilon, size)


@event_type(("epsilon",), ("k",))
class RandomizedResponse(Event):
    """k-ary randomized response with privacy ε > 0 (report the truth w.p. e^ε/(e^ε + k − 1))."""

    epsilon: Any
    k: int = 2

    PARAMETERS = (Parameter("epsilon", "RandomizedResponse epsilon", lo_open=True),)
    DP_ACCOUNTING = ("RandomizedResponseDpEvent",)

    def check(self):
        if not (isinstance(self.k, (int, np.integer)) and self.k >= 2):
            raise ValueError(f"RandomizedResponse k must be an integer in [2, inf), got {self.k!r}")

    def rdp(self, orders):
        return randomized_response.rdp(self.epsilon, orders, self.k)

    def pld_law(self, add):
        return laws.randomized_response_law(self.epsilon, self.k)

    def pld_lattice(self, size):
        return _full(self.epsilon, size)

    def to_dp_accounting(self, convert):
        import dp_accounting

        p = self.k / (np.exp(float(self.epsilon)) + self.k - 1.0)
        return dp_accounting.RandomizedResponseDpEvent(float(p), int(self.k))

    @classmethod
    def from_dp_accounting(cls, dp_event, convert):
        p, k = float(dp_event.noise_parameter), int(dp_event.num_buckets)
        if not 0.0 < p < 1.0:
            raise ValueError(f"RandomizedResponseDpEvent noise_parameter must lie in (0, 1), got {p!r}")
        return cls(float(np.log1p(k * (1.0 - p) / p)), k)


# --------------------------------------------------------------------------------------------------
# Additive noise by name
# --------------------------------------------------------------------------------------------------


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
