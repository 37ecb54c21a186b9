"""A small RDP ledger of privacy events answering ε or δ, and the DP-SGD sweep kernel (MATH §1).

The events are :mod:`jaxpriv.events` (re-exported here under their old names: :class:`Gaussian`,
:class:`Laplace`, :class:`Staircase`, :class:`PoissonSampled`, :class:`SelfComposed`, :class:`Composed`).
An :class:`Accountant` keeps a running RDP curve: each composed event is interpreted by the RDP
accountant of :mod:`jaxpriv.accounting` (the same curves as ``accounting.epsilon(..., accountant="rdp")``)
and the curves add up (MATH §1.7); ε and δ come from the improved conversion (MATH §1.8). For the
tighter PLD accountant or a batch of settings use :func:`jaxpriv.accounting.epsilon` directly.
dp_accounting's own DpEvents are accepted when that package is installed.

:func:`dpsgd_epsilon` is the vectorised shortcut for the most common question — the ε of T steps of
DP-SGD — evaluated for any number of (q, σ, T, δ) settings at once, chunked and sharded over devices.
"""

from __future__ import annotations

from typing import Sequence

import jax.numpy as jnp
import numpy as np

from . import rdp
from ._batching import map_chunked
from ._numerics import as_output, check_array, check_broadcastable, check_orders, float64, is_concrete
from .events import Composed, Event, Gaussian, Laplace, PoissonSampled, SelfComposed, Staircase, from_dp_accounting, validate

__all__ = [
    "Gaussian",
    "Laplace",
    "Staircase",
    "PoissonSampled",
    "SelfComposed",
    "Composed",
    "Event",
    "Accountant",
    "dpsgd_epsilon",
]


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
        """Add ``count`` repetitions of ``event`` (a jaxpriv event or a dp_accounting DpEvent) with scalar
        numbers."""
        from .accounting import renyi  # here: the accounting package loads the PLD accountant and the
        # mechanisms (0.15 s), which dpsgd_epsilon never needs

        check_array("count", count, 0.0, np.inf, integer=True)
        event = from_dp_accounting(event)
        validate(event)
        reason = renyi.supported(event)
        if reason:
            raise ValueError(f"the RDP accountant cannot interpret this event: {reason}")
        curve = np.asarray(renyi.curve(event, self.orders))
        if curve.shape != self.orders.shape:
            raise ValueError(f"Accountant.compose takes events with scalar numbers; this one describes a batch "
                             f"(curve shape {curve.shape}); use jaxpriv.accounting.epsilon for batches")
        self.rdp = self.rdp + int(count) * curve
        self.events.append((event, int(count)))
        return self

    def epsilon(self, delta: float) -> float:
        """Smallest ε with (ε, δ)-DP for the composed events (improved conversion, MATH §1.8)."""
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

    Exact RDP of the Poisson-subsampled Gaussian (MATH §1.3) at every order, composed T times and
    converted with the improved bound (MATH §1.8), minimised over ``orders``. Inputs broadcast together;
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
      chunk_size: configurations per chunk (default 256 on the CPU, 4096 on an accelerator).
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
            check_array("q", q, 0.0, 1.0, worse="up"),
            check_array("sigma", sigma, 0.0, np.inf, lo_open=True, worse="down"),
            check_array("steps", steps, 0.0, np.inf, worse="up"),
            check_array("delta", delta, 0.0, 1.0, lo_open=True, hi_open=True, worse="down"),
        ]
        shape = check_broadcastable(q=arrays[0], sigma=arrays[1], steps=arrays[2], delta=arrays[3])
        key = tuple(float(a) for a in np.unique(check_orders(rdp.DEFAULT_ORDERS if orders is None else orders)))
        kernel = rdp.dpsgd_epsilon_refined_jit if refine else rdp.dpsgd_epsilon_jit
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
            flat_kernel = rdp.dpsgd_epsilon_refined_kernel if refine else rdp.dpsgd_epsilon_kernel
            eps, order = flat_kernel(*(jnp.broadcast_to(a, shape).reshape(-1) for a in arrays), key)
            eps, order = eps.reshape(shape), order.reshape(shape)
        return as_output((eps, order)) if return_order else as_output(eps)
