"""DP-SGD's ε for any number of settings at once: the vectorised shortcut for the most common question —
the ε of T steps of the Poisson-subsampled Gaussian — chunked and sharded over devices (MATH §1.3, §1.8).
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from .. import rdp
from .._batching import map_chunked
from .._numerics import as_output, check_array, check_broadcastable, check_orders, float64, is_concrete

__all__ = ["dpsgd_epsilon"]


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
