"""Accountants: ε(δ) and δ(ε) of any privacy event, for a whole batch of settings (MATH §1, §7).

One interface, two interpreters of :mod:`jaxpriv.events`:

* ``"rdp"`` — Rényi DP (:mod:`.renyi`): exact curves where they exist, the improved conversion. Every
  event type; fast; looser than PLD, by a factor at small ε.
* ``"pld"`` — privacy loss distributions (:mod:`.pld`): connect-the-dots and round-down grids composed by
  FFT, giving a **certified interval** [lower, upper] for ε (or δ); the upper end is reported.
  Gaussian, Laplace, randomized response, staircase (d = 1), shuffled reports (the exact clone pair,
  uniform or personalized budgets), their Poisson subsampling, client sampling of any of these (rPDP-FL's
  two stages) and compositions.
* ``"best"`` (the default) — the smaller of the two upper bounds where both apply (both are valid upper
  bounds, so their minimum is too): exactly ``min(RDP's ε, epsilon_interval's upper end)``; the one that
  can interpret the event otherwise.

:func:`epsilon_lower_bound` and :func:`delta_lower_bound` report the PLD interval's lower end alone. They
also read the events that are lower bounds only (``events.ShuffledBatches``, the adversarial pair of
shuffled batches), which every other function here refuses: such an event is never an upper bound.

Accountants are also objects (:class:`RDP`, :class:`PLD`) carrying their options; the functions accept
either a name or an object. Results are float64 numpy arrays of the broadcast shape of the event's
numbers and ``delta``/``epsilon``.

Example:
  >>> from jaxpriv import accounting, events
  >>> dpsgd = events.SelfComposed(events.PoissonSampled(0.01, events.Gaussian(1.1)), 10_000)
  >>> round(float(accounting.epsilon(dpsgd, 1e-5, accountant="rdp")), 3)
  5.632
  >>> lower, upper = accounting.epsilon_interval(dpsgd, 1e-5)
  >>> round(float(upper), 2), bool(lower <= upper <= 1.01 * lower)
  (5.19, True)
"""

from __future__ import annotations

import dataclasses

import jax
import numpy as np

from .. import events as ev
from .. import rdp as _rdp_curves
from .._batching import map_chunked
from .._numerics import check_array, check_broadcastable, check_orders, float64, is_concrete
from . import pld as _pld
from . import renyi as _renyi

__all__ = ["RDP", "PLD", "epsilon", "delta", "epsilon_interval", "delta_interval", "epsilon_lower_bound",
           "delta_lower_bound", "delta_profile", "ACCOUNTANTS"]

ACCOUNTANTS = ("best", "pld", "rdp")


@dataclasses.dataclass(frozen=True)
class RDP:
    """The Rényi-DP accountant; ``orders`` default to :data:`jaxpriv.rdp.DEFAULT_ORDERS`.

    Example:
      >>> from jaxpriv import accounting, events
      >>> acc = accounting.RDP(orders=(2.0, 4.0, 8.0, 16.0, 32.0))
      >>> round(float(accounting.epsilon(events.Gaussian(1.0), 1e-5, accountant=acc)), 3)
      5.088
    """

    orders: tuple | None = None

    def _orders(self) -> np.ndarray:
        return check_orders(_rdp_curves.DEFAULT_ORDERS if self.orders is None else self.orders)

    def unsupported(self, event) -> str | None:
        return _renyi.supported(event)

    def epsilon(self, event, delta, *, chunk_size=None, progress=None):
        return _run_rdp(event, delta, self._orders(), "epsilon", chunk_size, progress)

    def curve(self, event) -> np.ndarray:
        """The RDP curve this accountant converts: ``event``'s ρ(α) at the orders, float64 of shape
        (the event's batch shape) + (number of orders,). RDP composes by adding curves (MATH §1.7).

        Example:
          >>> from jaxpriv import accounting, events
          >>> accounting.RDP(orders=(2.0, 3.0)).curve(events.Gaussian([1.0, 2.0]))   # α/(2σ²)
          array([[1.   , 1.5  ],
                 [0.25 , 0.375]])
        """
        event = ev.from_dp_accounting(event)
        if not is_concrete(event):
            raise ValueError("accounting.RDP.curve needs concrete numbers; inside jit use the jaxpriv.rdp curves")
        ev.validate(event)
        _check_supported(self, event)
        shape = ev.batch_shape(event)
        with float64():
            flat = ev.map_numbers(event, lambda _, x: np.broadcast_to(np.asarray(x, np.float64), shape))
            return np.asarray(_renyi.curve(flat, self._orders()), np.float64)

    def epsilon_of_curve(self, curve, delta) -> np.ndarray:
        """The accountant's conversion (MATH §1.8, improved, minimised over the orders) of RDP curves
        (orders on the last axis, e.g. a :meth:`curve` or a sum of them) at δ, float64 of the leading shape.
        :meth:`epsilon` is this conversion of :meth:`curve`; a caller that composes the same curves many
        times (a budget accountant) computes them once and converts each composition.

        Example:
          >>> from jaxpriv import accounting, events
          >>> acc = accounting.RDP()
          >>> step = acc.curve(events.PoissonSampled(0.01, events.Gaussian(1.1)))
          >>> round(float(acc.epsilon_of_curve(10_000 * step, 1e-5)), 3)
          5.632
        """
        orders = self._orders()
        with float64():
            curve = np.asarray(check_array("curve", curve, 0.0, np.inf, allow_inf=True), np.float64)
            if curve.ndim == 0 or curve.shape[-1] != orders.size:
                raise ValueError(f"curve must have the {orders.size} orders on its last axis, got shape {curve.shape}")
            delta = np.asarray(check_array("delta", delta, 0.0, 1.0, lo_open=True, hi_open=True), np.float64)
            shape = check_broadcastable(curve=np.empty(curve.shape[:-1]), delta=delta)
            rows = np.broadcast_to(curve, shape + curve.shape[-1:]).reshape(-1, orders.size)

            def convert(rows, delta):
                return (np.asarray(_rdp_curves.to_epsilon(rows, orders, delta)[0]),)

            # chunked as epsilon() chunks its settings, so the same setting gets the same bits either way
            (out,) = map_chunked(convert, [rows, np.broadcast_to(delta, shape).reshape(-1)], progress=False,
                                 shard=False)
            return out.reshape(shape)

    def delta(self, event, epsilon, *, chunk_size=None, progress=None):
        return _run_rdp(event, epsilon, self._orders(), "delta", chunk_size, progress)


@dataclasses.dataclass(frozen=True)
class PLD:
    """The PLD accountant (MATH §7).

    ``discretization`` fixes the loss grid spacing h (like-for-like comparisons; widened where a composed
    window would exceed :data:`.pld.MAX_GRID` nodes). By default h is chosen per setting from the
    spread of one step's loss (:data:`.pld.SPACING`), so that both ends of the certified interval are close
    to the h → 0 limit. ``tolerance`` (in (0, 0.1]) asks for more: settings whose certified interval is
    wider than that fraction of its upper end are recomputed on finer grids, so the reported upper bound
    is then within ``tolerance`` of the true value. Without ``discretization`` it defaults to
    :func:`epsilon_interval`'s (:data:`.pld.INTERVAL_TOLERANCE`, 1%), so that :func:`epsilon` by PLD (and so
    ``"best"``) is exactly the upper end of :func:`epsilon_interval`, never above it. Every answer is an
    upper bound whatever the options.

    Example:
      >>> from jaxpriv import accounting, events
      >>> coarse = accounting.PLD(discretization=1e-3)
      >>> round(float(accounting.epsilon(events.Gaussian(1.0), 1e-5, accountant=coarse)), 2)
      4.38
      >>> tight = accounting.PLD(tolerance=1e-4)   # certified within 0.01% of the true ε
      >>> dpsgd = events.SelfComposed(events.PoissonSampled(0.01, events.Gaussian(1.1)), 10_000)
      >>> round(float(accounting.epsilon(dpsgd, 1e-5, accountant=tight)), 3)
      5.193
    """

    discretization: float | None = None
    tolerance: float | None = None

    def __post_init__(self):
        if self.discretization is not None:
            check_array("discretization", self.discretization, 0.0, 1.0, lo_open=True)
        if self.tolerance is not None:
            check_array("tolerance", self.tolerance, 0.0, 0.1, lo_open=True)

    def unsupported(self, event) -> str | None:
        return _pld.supported(event)

    def interval(self, event, value, query: str, *, tolerance=None, chunk_size=None, progress=None):
        """(lower, upper) of ε(δ = value) or δ(ε = value), both ends from one computation; ``tolerance``
        (default: this accountant's) as in the class docstring. Events that are lower bounds only are
        refused (``ValueError``): see :func:`epsilon_lower_bound`."""
        _check_supported(self, event)
        tolerance = self.tolerance if tolerance is None else tolerance
        if tolerance is None and self.discretization is None:  # the same answer as epsilon_interval's
            tolerance = _pld.INTERVAL_TOLERANCE
        upper, low = _pld.interval(event, value, query=query, discretization=self.discretization,
                                   tolerance=tolerance, chunk_size=chunk_size, progress=progress)
        return low, upper

    def epsilon(self, event, delta, *, chunk_size=None, progress=None):
        return self.interval(event, delta, "epsilon", chunk_size=chunk_size, progress=progress)[1]

    def delta(self, event, epsilon, *, chunk_size=None, progress=None):
        return self.interval(event, epsilon, "delta", chunk_size=chunk_size, progress=progress)[1]


def _accountant(accountant):
    if isinstance(accountant, (RDP, PLD)):
        return accountant
    if accountant == "rdp":
        return RDP()
    if accountant == "pld":
        return PLD()
    if accountant == "best":
        return "best"
    raise ValueError(f"accountant must be one of {ACCOUNTANTS} or an accounting.RDP/PLD object, got {accountant!r}")


def _prepare(event, value, name: str, lo: float, hi: float, lo_open: bool, hi_open: bool):
    """Validate, broadcast the event's numbers and ``value`` to one shape, and flatten them."""
    event = ev.from_dp_accounting(event)
    if not (is_concrete(event) and is_concrete(value)):
        raise ValueError(f"accounting.{'epsilon' if name == 'delta' else 'delta'} needs concrete numbers (it "
                         "batches settings on the host); inside jit/grad use jaxpriv.dpsgd_epsilon, the "
                         "jaxpriv.rdp curves or jaxpriv.calibrate, which trace")
    ev.validate(event)
    with float64():
        value = check_array(name, value, lo, hi, lo_open=lo_open, hi_open=hi_open)
    shape = check_broadcastable(event=np.empty(ev.batch_shape(event)), **{name: value})
    flat = ev.map_numbers(event, lambda _, x: np.broadcast_to(np.asarray(x, np.float64), shape).reshape(-1))
    return flat, np.broadcast_to(np.asarray(value, np.float64), shape).reshape(-1), shape


def _check_supported(acc, event):
    reason = acc.unsupported(event)
    if reason:
        name = type(acc).__name__
        raise ValueError(f"the {name} accountant cannot interpret this event: {reason}")


def _run_rdp(flat, value, orders, query, chunk_size, progress):
    leaves, treedef = jax.tree_util.tree_flatten(flat)

    def kernel(*xs):
        event = jax.tree_util.tree_unflatten(treedef, list(xs[:-1]))
        curve = np.asarray(_renyi.curve(event, orders))
        if query == "epsilon":
            return (np.asarray(_rdp_curves.to_epsilon(curve, orders, np.asarray(xs[-1]))[0]),)
        return (np.asarray(_rdp_curves.to_delta(curve, orders, np.asarray(xs[-1]))[0]),)

    # shard=False: the RDP interpreter works eagerly on host numbers (a chunk spread over several processes'
    # devices could not be read back), and every device count then gives the same bits
    (out,) = map_chunked(kernel, [np.asarray(x, np.float64).reshape(-1) for x in leaves] + [value],
                         chunk_size=chunk_size, progress=progress, description=f"RDP {query}", shard=False)
    return out


def _query(event, value, query, accountant, chunk_size, progress):
    name, rng = ("delta", (0.0, 1.0, True, True)) if query == "epsilon" else ("epsilon", (0.0, np.inf, False, False))
    flat, value, shape = _prepare(event, value, name, *rng)
    acc = _accountant(accountant)
    with float64():
        if acc == "best":
            usable = [a for a in (RDP(), PLD()) if a.unsupported(flat) is None]
            if not usable:
                _check_supported(RDP(), flat)
            outs = [getattr(a, query)(flat, value, chunk_size=chunk_size, progress=progress) for a in usable]
            out = np.minimum.reduce(outs)
        else:
            _check_supported(acc, flat)
            out = getattr(acc, query)(flat, value, chunk_size=chunk_size, progress=progress)
    return np.asarray(out, np.float64).reshape(shape)


def epsilon(event, delta, *, accountant="best", chunk_size=None, progress=None):
    """Smallest certified ε such that ``event`` is (ε, δ)-DP under add-or-remove-one adjacency.

    Args:
      event: a :mod:`jaxpriv.events` event (or a dp_accounting DpEvent); its numbers may be arrays.
      delta: δ ∈ (0, 1), broadcast with the event's numbers.
      accountant: ``"best"`` (default: the smaller valid upper bound of RDP and PLD), ``"pld"``,
        ``"rdp"``, or an :class:`RDP` / :class:`PLD` object with options.
      chunk_size, progress: batching of large sweeps (a progress bar for long ones).

    Returns:
      float64 array of the broadcast shape (an upper bound on the true ε; ``inf`` when no finite ε holds).

    Example:
      >>> from jaxpriv import accounting, events
      >>> step = events.PoissonSampled([0.001, 0.01], events.Gaussian(1.0))
      >>> accounting.epsilon(events.SelfComposed(step, 1000), 1e-5, accountant="pld").round(3)
      array([0.149, 1.829])
    """
    return _query(event, delta, "epsilon", accountant, chunk_size, progress)


def delta(event, epsilon, *, accountant="best", chunk_size=None, progress=None):
    """Smallest certified δ such that ``event`` is (ε, δ)-DP (see :func:`epsilon`); ε ≥ 0.

    Example:
      >>> from jaxpriv import accounting, events
      >>> d = accounting.delta(events.SelfComposed(events.Gaussian(10.0), 100), 1.0, accountant="pld")
      >>> round(float(d), 5)   # exact: one Gaussian with σ = 1, δ(1) = 0.1269367; the bound is above it
      0.12694
      >>> lo, hi = accounting.delta_interval(events.SelfComposed(events.Gaussian(10.0), 100), 1.0)
      >>> bool(lo <= 0.1269367 <= hi), bool(hi / lo - 1 < 1e-4)   # certified, and 0.001% wide here
      (True, True)
    """
    return _query(event, epsilon, "delta", accountant, chunk_size, progress)


def _interval(event, value, query, discretization, tolerance, chunk_size, progress, lower_only=False):
    name, rng = ("delta", (0.0, 1.0, True, True)) if query == "epsilon" else ("epsilon", (0.0, np.inf, False, False))
    flat, value, shape = _prepare(event, value, name, *rng)
    acc = PLD(discretization, tolerance)
    if lower_only:  # the lower end alone: events that are lower bounds only are read too
        reason = ev.unsupported(flat, "pld_lower")
        if reason:
            raise ValueError(f"the PLD accountant cannot bound this event from below: {reason}")
    else:
        _check_supported(acc, flat)
    if tolerance is None and discretization is None:
        tolerance = _pld.INTERVAL_TOLERANCE
    with float64():
        upper, lower = _pld.interval(flat, value, query=query, discretization=discretization, tolerance=tolerance,
                                     chunk_size=chunk_size, progress=progress)
    if lower_only:
        return lower.reshape(shape)
    return lower.reshape(shape), upper.reshape(shape)


def epsilon_interval(event, delta, *, discretization=None, tolerance=None, chunk_size=None, progress=None):
    """Certified interval (lower, upper) for the ε of ``event`` at δ, by the PLD accountant (MATH §7).

    The true ε (of the exact dominating pairs) lies in [lower, upper]: upper from the pessimistic
    (connect-the-dots) grid, lower from the optimistic (merged) grid, both from the same composition and
    both including the FFT wrap-around and floating-point allowances.

    Args:
      event, delta: as in :func:`epsilon`.
      discretization: a fixed grid spacing h of the privacy loss (default: chosen per setting).
      tolerance: the relative width (upper − lower)/upper to reach, in (0, 0.1] (default 0.01 unless
        ``discretization`` is given); wider settings are recomputed on finer grids.

    Example:
      >>> from jaxpriv import accounting, events
      >>> lo, up = accounting.epsilon_interval(events.SelfComposed(events.Gaussian(10.0), 100), 1e-5)
      >>> exact = 4.377178   # one Gaussian with σ = 1 (closed form, MATH §2)
      >>> bool(lo <= exact <= up and up - lo < 0.01 * up)
      True
    """
    return _interval(event, delta, "epsilon", discretization, tolerance, chunk_size, progress)


def delta_interval(event, epsilon, *, discretization=None, tolerance=None, chunk_size=None, progress=None):
    """Certified interval (lower, upper) for the δ of ``event`` at ε, by the PLD accountant (see
    :func:`epsilon_interval`).

    Example:
      >>> from jaxpriv import accounting, events
      >>> lo, up = accounting.delta_interval(events.SelfComposed(events.Gaussian(10.0), 100), 1.0)
      >>> bool(lo <= 0.1269367375 <= up)   # exact: one Gaussian with σ = 1
      True
    """
    return _interval(event, epsilon, "delta", discretization, tolerance, chunk_size, progress)


def epsilon_lower_bound(event, delta, *, discretization=None, tolerance=None, chunk_size=None, progress=None):
    """A certified lower bound on the ε of ``event`` at δ: the lower end of the PLD interval (MATH §7.3).

    For an event whose law is an *adversarial pair* (``LOWER_BOUND_ONLY``: :class:`jaxpriv.events.ShuffledBatches`,
    MATH §11.7) the mechanism itself is no better: no valid accounting of it can claim a smaller ε at δ. Such
    events are read here only, never as an upper bound (:func:`epsilon` and :func:`epsilon_interval` refuse
    them). For the other events it is :func:`epsilon_interval`'s lower end: a lower bound on the ε of the
    event's dominating pair (of the mechanism itself where that pair is attained, as for the Gaussian and
    the Poisson-subsampled Gaussian).

    Args:
      event, delta, discretization, tolerance, chunk_size, progress: as in :func:`epsilon_interval`.

    Returns:
      float64 array of the broadcast shape.

    Example:
      >>> from jaxpriv import accounting, events
      >>> one_epoch = events.ShuffledBatches(10, 1000, events.Gaussian(0.5))   # 100 steps, shuffled
      >>> floor = float(accounting.epsilon_lower_bound(one_epoch, 1e-5))
      >>> poisson = events.SelfComposed(events.PoissonSampled(0.01, events.Gaussian(0.5)), 100)
      >>> bool(floor > float(accounting.epsilon(poisson, 1e-5, accountant="pld")))   # the Poisson claim is false
      True
      >>> accounting.epsilon(one_epoch, 1e-5)
      Traceback (most recent call last):
      ...
      ValueError: the RDP accountant cannot interpret this event: ShuffledBatches is a lower bound only (...
    """
    return _interval(event, delta, "epsilon", discretization, tolerance, chunk_size, progress, lower_only=True)


def delta_lower_bound(event, epsilon, *, discretization=None, tolerance=None, chunk_size=None, progress=None):
    """A certified lower bound on the δ of ``event`` at ε (see :func:`epsilon_lower_bound`).

    Example:
      >>> from jaxpriv import accounting, events
      >>> gaussian = events.Gaussian(1.0)      # exact δ(1) = 0.12693673750 (closed form, MATH §2)
      >>> bool(0.12693 < float(accounting.delta_lower_bound(gaussian, 1.0)) <= 0.12693673750)
      True
    """
    return _interval(event, epsilon, "delta", discretization, tolerance, chunk_size, progress, lower_only=True)


def delta_profile(event, epsilon) -> tuple[np.ndarray, np.ndarray]:
    """Certified (lower, upper) δ(ε) of ``event`` at many ε from one PLD composition per setting (MATH §7):
    the event's privacy profile, e.g. to build its trade-off curve (MATH §10.3). :func:`delta_interval`
    composes once per (setting, ε); this reads every ε of one composition, on the default grid (no
    tolerance refinement).

    Args:
      event: a :mod:`jaxpriv.events` event the PLD accountant interprets; its numbers may be arrays (shape S).
      epsilon: the ε grid, a 1-D array-like of values ≥ 0 (length G ≥ 1).

    Returns:
      (lower, upper): float64 arrays of shape S + (G,), lower ≤ true δ(ε) ≤ upper at every ε (add/remove
      adjacency: the worse direction).

    Example:
      >>> import numpy as np
      >>> from jaxpriv import accounting, events, fdp
      >>> lo, up = accounting.delta_profile(events.SelfComposed(events.Gaussian(10.0), 100), [0.5, 1.0])
      >>> exact = fdp.gdp_delta(1.0, np.array([0.5, 1.0]))   # one Gaussian with σ = 1
      >>> bool(np.all(lo <= exact) and np.all(exact <= up) and np.all(up - lo < 1e-3))
      True
    """
    flat, _, shape = _prepare(event, 0.0, "epsilon", 0.0, np.inf, False, False)
    with float64():
        eps = check_array("epsilon", epsilon, 0.0, np.inf)
    if eps.ndim != 1 or eps.size < 1:
        raise ValueError(f"epsilon must be a 1-D array of at least one value in [0, inf), got shape {eps.shape}")
    _check_supported(PLD(), flat)
    with float64():
        lower, upper = _pld.profile(flat, eps)
    return lower.reshape(shape + (eps.size,)), upper.reshape(shape + (eps.size,))
