"""UDP-FL's Harmonizer (Feng et al., seed 002, §3.3 and Appendix B, Alg. 3; SPEC §5–§6): one noise scale per
client so that its own mechanism, Poisson-subsampled at rate q and composed over T rounds, meets its own
(ε, δ) target — the same RDP accounting for every mechanism.

Each client names a mechanism; the scale solved for is

* ``"gaussian"``: the noise multiplier σ (noise std / L2 sensitivity); exact subsampled RDP (SPEC §1.3);
* ``"laplace"``: the scale b (noise scale / L1 sensitivity, pure ε = 1/b per step); subsampled RDP by the
  Zhu-Wang bound (:func:`jaxpriv.rdp.subsampled`, SPEC §1.4);
* ``"staircase"``: the per-step ε₀ of the staircase mechanism with γ = γ*(ε₀) (SPEC §4.2), subsampled
  the same way.

The T-fold curve is converted with the improved conversion (SPEC §1.8). The paper's Alg. 3 tries noise
multipliers one after another with the classic conversion and its Table 3 "RDP" expressions (the
staircase one is not a Rényi divergence, see :func:`jaxpriv.mechanisms.staircase.udpfl_printed_rdp`);
here every client is solved at once by the conservative root finder of :mod:`jaxpriv.calibrate`.
"""

from __future__ import annotations

import functools
import math
import warnings
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .. import calibrate, rdp
from .._numerics import check_array, check_broadcastable, float64
from . import staircase

__all__ = ["MECHANISMS", "Harmonized", "harmonize"]

#: Mechanism names understood by :func:`harmonize`.
MECHANISMS = ("gaussian", "laplace", "staircase")


class Harmonized(NamedTuple):
    """Result of :func:`harmonize`: the calibrated scale per client and the ε it achieves (≤ target)."""

    scale: np.ndarray
    epsilon: np.ndarray


def _staircase_curve(scale, dimension, orders):
    """Per-coordinate staircase on a ``dimension``-d query of L1 sensitivity 1 (1-D when d = 1)."""
    gamma = staircase._optimal_gamma(scale)
    one = staircase._rdp(scale, gamma, orders)
    spread = dimension[:, None] * staircase._rdp(
        scale, gamma, orders, staircase._loss_plus_mass_at(scale, gamma, 1.0 / dimension))
    return jnp.where(dimension[:, None] == 1.0, one, spread)


def _step_curve(mechanism: str, scale, q, dimension, orders_key: tuple):
    """RDP curve of one round: (B,) scale, q and dimension → (B, K)."""
    orders = np.asarray(orders_key)
    if mechanism == "gaussian":
        return rdp.subsampled_gaussian_kernel(q, scale, orders_key)
    if mechanism == "laplace":
        base = lambda a: rdp.laplace_kernel(scale[:, None], a)
    else:
        base = lambda a: _staircase_curve(scale, dimension, a)
    integers = np.arange(2.0, max(2, math.ceil(orders.max())) + 1.0)
    return rdp.subsampled_kernel(q, base(integers), base(orders), orders_key)


def _epsilon(mechanism: str, scale, q, rounds, delta, dimension, orders_key: tuple):
    rho = _step_curve(mechanism, scale, q, dimension, orders_key) * rounds[:, None]
    return rdp.to_epsilon_kernel(rho, np.asarray(orders_key), delta)[0]


@functools.partial(jax.jit, static_argnums=(0, 6))
def _solve(mechanism: str, target, q, rounds, delta, dimension, orders_key: tuple):
    """(scale, ε(scale)) per client: ε(scale) ≤ target, the scale within 1e-10 (relative) of the root."""
    sign = -1.0 if mechanism == "staircase" else 1.0  # search in ±log(scale) so that larger is safer

    def gap(x):
        eps = _epsilon(mechanism, jnp.exp(sign * x), q, rounds, delta, dimension, orders_key)
        g = jnp.log(eps) - jnp.log(target)
        return jnp.where(jnp.isnan(g), jnp.inf, g)  # a NaN is never taken for the safe side

    x, found = calibrate.solve_monotone(gap, jnp.zeros_like(target))
    scale = jnp.exp(sign * (x + calibrate.MARGIN))
    # the ε reported is evaluated at the returned scale itself (after the margin), not taken from the loop
    eps = _epsilon(mechanism, jnp.where(found, scale, 1.0), q, rounds, delta, dimension, orders_key)
    return jnp.stack([jnp.where(found, scale, jnp.inf if sign > 0 else 0.0), jnp.where(found, eps, jnp.nan)], -1)


def harmonize(mechanisms, epsilon, delta, q=1.0, rounds=1, orders=None, *, dimension=1, chunk_size=None,
              progress=None):
    """Calibrate each client's noise so that T rounds of its Poisson-subsampled mechanism are (ε, δ)-DP.

    For client i with mechanism m_i, rate q_i, T_i rounds and target (ε_i, δ_i), finds the scale s_i
    (σ for ``"gaussian"``, b for ``"laplace"``, the per-step ε₀ for ``"staircase"``, see the module
    docstring) with ε_i(s_i) ≤ ε_i, where ε_i(s) is the improved RDP → (ε, δ) conversion (SPEC §1.8) of
    T_i·ρ(α; s, q_i) minimised over ``orders``, ρ being the exact subsampled-Gaussian curve (SPEC §1.3)
    or the Zhu-Wang bound on the subsampled Laplace / staircase curve (SPEC §1.4, §4.2). The scale is
    within 1e-10 relative of the root of ε_i(s) = ε_i (UDP-FL seed 002, Harmonizer and Alg. 3; SPEC §5).
    A target below what the orders can certify gives scale ``inf`` (``0`` for staircase) with a warning.

    Args:
      mechanisms: a mechanism name or an array of names, each one of :data:`MECHANISMS`.
      epsilon: target ε > 0 per client.
      delta: δ ∈ (0, 1).
      q: Poisson sampling rate in (0, 1].
      rounds: number of rounds T ≥ 1.
      orders: Rényi orders (default :data:`jaxpriv.rdp.DEFAULT_ORDERS`).
      dimension: for ``"staircase"``, the number d ≥ 1 of coordinates noised per round with L1
        sensitivity 1: the curve is then d·ρ(1/d) (:func:`jaxpriv.mechanisms.staircase.rdp_l1`; the 1-D
        curve is not a bound for d > 1). Ignored by the other mechanisms (their worst case is 1-D).
      chunk_size, progress: batching of many clients (see :mod:`jaxpriv._batching`).

    All of ``mechanisms, epsilon, delta, q, rounds, dimension`` broadcast together.

    Returns:
      :class:`Harmonized` ``(scale, epsilon)``: float64 arrays of the broadcast shape, the calibrated
      scale and the ε it achieves.

    Example:
      >>> from jaxpriv.mechanisms import harmonizer
      >>> step_eps, eps = harmonizer.harmonize(["staircase"], 2.0, 1e-5, q=0.1, rounds=100,
      ...                                      orders=[2.0, 8.0, 32.0])
      >>> round(float(step_eps[0]), 4), bool(eps[0] <= 2.0)
      (0.1364, True)
    """
    names = np.asarray(mechanisms, dtype=object)
    flat_names = names.reshape(-1)
    if flat_names.size == 0:
        raise ValueError(f"mechanisms is empty; each must be one of {MECHANISMS}")
    for name in flat_names:
        if name not in MECHANISMS:
            raise ValueError(f"mechanisms must each be one of {MECHANISMS}, got {name!r}")
    with float64():
        arrays = {
            "epsilon": check_array("epsilon", epsilon, 0.0, np.inf, lo_open=True),
            "delta": check_array("delta", delta, 0.0, 1.0, lo_open=True, hi_open=True),
            "q": check_array("q", q, 0.0, 1.0, lo_open=True),
            "rounds": check_array("rounds", rounds, 1.0, np.inf),
            "dimension": check_array("dimension", dimension, 1.0, np.inf, integer=True),
        }
        shape = check_broadcastable(mechanisms=np.empty(names.shape), **arrays)
        flat = {k: np.broadcast_to(np.asarray(v), shape).reshape(-1) for k, v in arrays.items()}
        flat_names = np.broadcast_to(names, shape).reshape(-1)
        key = calibrate.orders_key(orders)
        scale = np.empty(flat_names.size)
        achieved = np.empty(flat_names.size)
        for mechanism in MECHANISMS:
            idx = np.nonzero(flat_names == mechanism)[0]
            if idx.size == 0:
                continue
            inputs = [flat[k][idx] for k in ("epsilon", "q", "rounds", "delta", "dimension")]
            solved = calibrate.run_batched(
                lambda *xs, m=mechanism: _solve(m, *xs, key), (idx.size, 2), inputs, chunk_size, progress,
                f"harmonizing {mechanism}",
            )
            scale[idx], achieved[idx] = solved[:, 0], solved[:, 1]
        if not np.all(np.isfinite(scale) & (scale > 0)):
            warnings.warn(
                "some targets are below the smallest ε these orders can certify; their scale is inf "
                "(0 for staircase) and their ε NaN (add larger orders to reach smaller ε)",
                RuntimeWarning,
                stacklevel=2,
            )
        return Harmonized(scale.reshape(shape), achieved.reshape(shape))
