"""A small ledger of mechanism events answering ε or δ, and the DP-SGD sweep kernel (SPEC §1).

Events are data (in the style of dp_accounting's DpEvents): :class:`Gaussian`, :class:`Laplace`,
:class:`Staircase`, :class:`PoissonSampled`, :class:`SelfComposed`, :class:`Composed`. An
:class:`Accountant` interprets them as RDP curves on its orders, adds them up (SPEC §1.7) and converts
(SPEC §1.8). A Poisson-sampled Gaussian uses its exact curve (SPEC §1.3); any other Poisson-sampled event
uses the Zhu-Wang upper bound of :func:`jaxpriv.rdp.subsampled` (SPEC §1.4) on the inner event's curve.
dp_accounting's own DpEvents are accepted when that package is installed (Gaussian, Laplace,
PoissonSampled, SelfComposed, Composed, NoOp).

:func:`dpsgd_epsilon` is the vectorised shortcut for the most common question — the ε of T steps of
DP-SGD — evaluated for any number of (q, σ, T, δ) settings at once, chunked and sharded over devices.
"""

from __future__ import annotations

import dataclasses
from typing import Sequence, Union

import jax.numpy as jnp
import numpy as np

from . import rdp
from .mechanisms import staircase
from ._batching import map_chunked
from ._numerics import as_output, check_array, check_broadcastable, check_orders, float64, is_concrete

__all__ = [
    "Gaussian",
    "Laplace",
    "Staircase",
    "PoissonSampled",
    "SelfComposed",
    "Composed",
    "Accountant",
    "dpsgd_epsilon",
]


@dataclasses.dataclass(frozen=True)
class Gaussian:
    """Gaussian mechanism with noise multiplier σ (noise std / L2 sensitivity)."""

    noise_multiplier: float


@dataclasses.dataclass(frozen=True)
class Laplace:
    """Laplace mechanism with scale b (noise scale / L1 sensitivity; pure ε = 1/b)."""

    scale: float


@dataclasses.dataclass(frozen=True)
class Staircase:
    """Staircase mechanism with privacy ε and shape γ (None: the optimal γ* = 1/(1+e^{ε/2})), SPEC §4.2."""

    epsilon: float
    gamma: float | None = None


@dataclasses.dataclass(frozen=True)
class PoissonSampled:
    """``event`` applied to a Poisson sample of the data with inclusion probability ``rate``."""

    rate: float
    event: "Event"


@dataclasses.dataclass(frozen=True)
class SelfComposed:
    """``event`` repeated ``count`` times."""

    event: "Event"
    count: int


@dataclasses.dataclass(frozen=True)
class Composed:
    """The events in sequence."""

    events: tuple


Event = Union[Gaussian, Laplace, Staircase, PoissonSampled, SelfComposed, Composed]


def _from_dp_accounting(event):
    """Translate a dp_accounting DpEvent (matched by class name, so the package stays optional)."""
    name = type(event).__name__
    if name == "GaussianDpEvent":
        return Gaussian(event.noise_multiplier)
    if name == "LaplaceDpEvent":
        return Laplace(event.noise_multiplier)
    if name == "PoissonSampledDpEvent":
        return PoissonSampled(event.sampling_probability, _from_dp_accounting(event.event))
    if name == "SelfComposedDpEvent":
        return SelfComposed(_from_dp_accounting(event.event), event.count)
    if name == "ComposedDpEvent":
        return Composed(tuple(_from_dp_accounting(e) for e in event.events))
    if name == "NoOpDpEvent":
        return Composed(())
    if isinstance(event, (Gaussian, Laplace, Staircase, PoissonSampled, SelfComposed, Composed)):
        return event
    raise ValueError(
        f"event must be a jaxpriv.accountant event or a supported dp_accounting DpEvent "
        f"(Gaussian, Laplace, Staircase, PoissonSampled, SelfComposed, Composed, NoOp); got {name}"
    )


def _curve(event, orders: np.ndarray):
    """RDP curve of an event on ``orders`` (numpy float64, shape (K,))."""
    if isinstance(event, Gaussian):
        return np.asarray(rdp.gaussian(event.noise_multiplier, orders))
    if isinstance(event, Laplace):
        return np.asarray(rdp.laplace(event.scale, orders))
    if isinstance(event, Staircase):
        return np.asarray(staircase.rdp(event.epsilon, event.gamma, orders))
    if isinstance(event, PoissonSampled):
        inner = _from_dp_accounting(event.event)
        if isinstance(inner, Gaussian):  # exact curve
            return np.asarray(rdp.subsampled_gaussian(event.rate, inner.noise_multiplier, orders))
        return np.asarray(rdp.subsampled(event.rate, lambda a: _curve(inner, a), orders))
    if isinstance(event, SelfComposed):
        check_array("count", event.count, 0.0, np.inf, integer=True)
        return event.count * _curve(event.event, orders)
    if isinstance(event, Composed):
        return sum((_curve(e, orders) for e in event.events), np.zeros(orders.size))
    raise AssertionError(event)


class Accountant:
    """RDP ledger: compose events, then ask ε for a δ or δ for an ε.

    Example:
      >>> from jaxpriv.accountant import Accountant, Gaussian, PoissonSampled
      >>> acc = Accountant().compose(PoissonSampled(0.01, Gaussian(1.1)), count=10_000)
      >>> round(acc.epsilon(1e-5), 4)
      5.632
    """

    def __init__(self, orders: Sequence[float] | None = None):
        self.orders = check_orders(rdp.DEFAULT_ORDERS if orders is None else orders)
        self.rdp = np.zeros(self.orders.size)
        self.events: list = []

    def compose(self, event, count: int = 1) -> "Accountant":
        """Add ``count`` repetitions of ``event`` (a jaxpriv event or a dp_accounting DpEvent)."""
        check_array("count", count, 0.0, np.inf, integer=True)
        event = _from_dp_accounting(event)
        self.rdp = self.rdp + int(count) * _curve(event, self.orders)
        self.events.append((event, int(count)))
        return self

    def epsilon(self, delta: float) -> float:
        """Smallest ε with (ε, δ)-DP for the composed events (improved conversion, SPEC §1.8)."""
        return float(rdp.to_epsilon(self.rdp, self.orders, delta)[0])

    def delta(self, epsilon: float) -> float:
        """Smallest δ with (ε, δ)-DP for the composed events."""
        return float(rdp.to_delta(self.rdp, self.orders, epsilon)[0])

    def best_order(self, delta: float) -> float:
        """The Rényi order that attains :meth:`epsilon`."""
        return float(rdp.to_epsilon(self.rdp, self.orders, delta)[1])


def dpsgd_epsilon(
    q,
    sigma,
    steps,
    delta,
    *,
    orders=None,
    return_order: bool = False,
    refine: bool = False,
    chunk_size: int | None = None,
    progress: bool | None = None,
):
    """ε of T steps of DP-SGD (Poisson rate q, noise multiplier σ) at δ, for any number of settings.

    Exact RDP of the Poisson-subsampled Gaussian (SPEC §1.3) at every order, composed T times and
    converted with the improved bound (SPEC §1.8), minimised over ``orders``. Inputs broadcast together;
    large sweeps are evaluated in fixed-size chunks (bounded memory), sharded over all JAX devices, with
    a progress bar when there is more than one chunk. Inside a caller's ``jit``/``grad`` (traced inputs)
    it is evaluated directly and is differentiable.

    Args:
      q: sampling rate in [0, 1].
      sigma: noise multiplier σ > 0.
      steps: number of steps T ≥ 0 (real values allowed).
      delta: δ ∈ (0, 1).
      orders: Rényi orders (default :data:`jaxpriv.rdp.DEFAULT_ORDERS`).
      return_order: also return the optimal order.
      refine: after the grid, search the best *real* order between the grid neighbours of the best grid
        order (golden section, exact RDP at each trial order, orders up to
        :data:`jaxpriv.rdp.REFINE_MAX_ORDER`); never worse than the grid, a little slower.
      chunk_size: configurations per chunk (default 4096).
      progress: force the progress bar on or off.

    Returns:
      ε (float64, the broadcast shape), and the best order if ``return_order``.

    Example:
      >>> import jaxpriv
      >>> round(float(jaxpriv.dpsgd_epsilon(0.01, 1.1, 10_000, 1e-5)), 4)
      5.632
    """
    with float64():
        arrays = [
            check_array("q", q, 0.0, 1.0),
            check_array("sigma", sigma, 0.0, np.inf, lo_open=True),
            check_array("steps", steps, 0.0, np.inf),
            check_array("delta", delta, 0.0, 1.0, lo_open=True, hi_open=True),
        ]
        shape = check_broadcastable(q=arrays[0], sigma=arrays[1], steps=arrays[2], delta=arrays[3])
        key = tuple(float(a) for a in np.unique(check_orders(rdp.DEFAULT_ORDERS if orders is None else orders)))
        kernel = rdp._dpsgd_epsilon_refined_jit if refine else rdp._dpsgd_epsilon_jit
        if all(is_concrete(a) for a in arrays):
            # shared scalars stay scalars (expanded per chunk): a 10⁷ sweep holds only what varies
            flat = [np.asarray(a).reshape(-1) if np.size(a) == 1 else np.asarray(jnp.broadcast_to(a, shape)).reshape(-1)
                    for a in arrays]
            eps, order = map_chunked(
                lambda *xs: kernel(*xs, orders_key=key),
                flat,
                chunk_size=chunk_size,
                progress=progress,
                description="ε sweep",
            )
            eps, order = eps.reshape(shape), order.reshape(shape)
        else:
            flat_kernel = rdp._dpsgd_epsilon_refined if refine else rdp._dpsgd_epsilon_flat
            eps, order = flat_kernel(*(jnp.broadcast_to(a, shape).reshape(-1) for a in arrays), key)
            eps, order = eps.reshape(shape), order.reshape(shape)
        return as_output((eps, order)) if return_order else as_output(eps)
