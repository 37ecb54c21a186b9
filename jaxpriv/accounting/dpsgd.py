"""DP-SGD's ε for any number of settings at once: the vectorised shortcut for the most common question —
the ε of T steps of the Poisson-subsampled Gaussian — chunked and sharded over devices (MATH §1.3, §1.8).
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from .. import rdp
from .._batching import map_chunked
from .._numerics import as_output, check_array, check_broadcastable, check_orders, float64, is_concrete

__all__ = ["dpsgd_epsilon", "dpsgd_epsilon_conversions"]


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
        arrays = []
        for name, value in zip(_RANGES, (q, sigma, steps, delta)):  # checked here: a float32 warning names the caller
            arrays.append(check_array(name, value, **_RANGES[name]))
        shape, key = _shape_and_key(arrays, orders)
        if refine:
            eps, order = _evaluate(rdp.dpsgd_epsilon_refined_jit, rdp.dpsgd_epsilon_refined_kernel, arrays, shape, key,
                                   chunk_size, progress)
        else:
            eps, order = _evaluate(rdp.dpsgd_epsilon_jit, rdp.dpsgd_epsilon_kernel, arrays, shape, key, chunk_size,
                                   progress)
        return as_output((eps, order)) if return_order else as_output(eps)


def dpsgd_epsilon_conversions(
    q,
    sigma,
    steps,
    delta,
    *,
    orders=None,
    refine: bool = False,
    chunk_size: int | None = None,
    progress: bool | None = None,
):
    """ε of T steps of DP-SGD by both RDP-to-(ε, δ) conversions, from one curve in one compiled program.

    The exact RDP curve of the Poisson-subsampled Gaussian (MATH §1.3), composed T times (MATH §1.7), is
    converted twice (MATH §1.8): with the improved bound (Balle, Barthe, Gaboardi, Hsu, Sato 2020, Thm 21;
    Canonne, Kamath, Steinke 2020, Prop. 12), ε(α) = ρ(α) + log1p(−1/α) − (log δ + log α)/(α−1), as
    :func:`dpsgd_epsilon` does, and with the classic one (Mironov 2017, Prop. 3), ε(α) = ρ(α) + log(1/δ)/(α−1),
    each minimised over ``orders``. Bit for bit the same numbers as :func:`dpsgd_epsilon` (``return_order=True``)
    and as :func:`jaxpriv.rdp.to_epsilon` (``conversion="classic"``) of the composed curve, for one
    compilation instead of one per function (the curve is computed once). (For a batch, to_epsilon's own last
    bit depends on δ's shape: with one scalar δ it divides log δ by α−1, with a δ per setting XLA multiplies
    by 1/(α−1) in a fused multiply-add, as this function's chunked program does; a single setting's ε equals
    to_epsilon's with its scalar δ.) Inputs, validation, chunking and traced inputs as in :func:`dpsgd_epsilon`.

    Args:
      q: sampling rate in [0, 1].
      sigma: noise multiplier σ > 0.
      steps: number of steps T ≥ 0 (real values allowed).
      delta: δ ∈ (0, 1).
      orders: Rényi orders (default :data:`jaxpriv.rdp.DEFAULT_ORDERS`).
      refine: also search the best real order for the improved conversion, as :func:`dpsgd_epsilon` does
        (the classic ε stays on the grid).
      chunk_size: configurations per chunk (default 256 on the CPU, 4096 on an accelerator).
      progress: force the progress bar on or off.

    Returns:
      ``(epsilon, best_order, epsilon_classic, best_order_classic)``, float64 arrays of the broadcast shape.

    Example:
      >>> from jaxpriv.accounting.dpsgd import dpsgd_epsilon_conversions
      >>> eps, order, eps_classic, order_classic = dpsgd_epsilon_conversions(0.01, 1.1, 10_000, 1e-5)
      >>> round(float(eps), 4), float(order), round(float(eps_classic), 4), float(order_classic)
      (5.632, 4.7, 6.2787, 4.9)
    """
    if not isinstance(refine, (bool, np.bool_)):
        raise ValueError(f"refine must be True or False, got {refine!r}")
    with float64():
        arrays = []
        for name, value in zip(_RANGES, (q, sigma, steps, delta)):  # checked here: a float32 warning names the caller
            arrays.append(check_array(name, value, **_RANGES[name]))
        shape, key = _shape_and_key(arrays, orders)
        iterations = rdp.REFINE_ITERATIONS if refine else 0
        return as_output(_evaluate(
            lambda *xs, orders_key: rdp.dpsgd_conversions_jit(*xs, orders_key, iterations),
            lambda *xs: rdp.dpsgd_conversions_kernel(*xs, iterations), arrays, shape, key, chunk_size, progress))


#: The inputs' ranges (:func:`jaxpriv._numerics.check_array`'s arguments after the name and the value).
_RANGES = {
    "q": dict(lo=0.0, hi=1.0, worse="up"),
    "sigma": dict(lo=0.0, hi=np.inf, lo_open=True, worse="down"),
    "steps": dict(lo=0.0, hi=np.inf, worse="up"),
    "delta": dict(lo=0.0, hi=1.0, lo_open=True, hi_open=True, worse="down"),
}


def _shape_and_key(arrays, orders):
    """The checked inputs' broadcast shape and the sorted, validated orders as a key."""
    shape = check_broadcastable(**dict(zip(_RANGES, arrays)))
    key = tuple(float(a) for a in np.unique(check_orders(rdp.DEFAULT_ORDERS if orders is None else orders)))
    return shape, key


def _evaluate(jitted, flat_kernel, arrays, shape, key, chunk_size, progress) -> tuple:
    """``jitted`` over the settings in padded chunks (concrete inputs) or ``flat_kernel`` on them flattened
    (traced inputs, inside the caller's program); its outputs reshaped to the broadcast ``shape``."""
    if all(is_concrete(a) for a in arrays):
        # shared scalars stay scalars (expanded per chunk): a 10⁷ sweep holds only what varies. Broadcast by
        # numpy: jnp's eager broadcast_to compiled a one-operation program per input shape.
        flat = [np.asarray(a).reshape(-1) if np.size(a) == 1 else np.broadcast_to(np.asarray(a), shape).reshape(-1)
                for a in arrays]
        outputs = map_chunked(
            lambda *xs: jitted(*xs, orders_key=key),
            flat,
            chunk_size=chunk_size,
            progress=progress,
            description="ε sweep",
        )
    else:
        outputs = flat_kernel(*(jnp.broadcast_to(a, shape).reshape(-1) for a in arrays), key)
    return tuple(out.reshape(shape) for out in outputs)
