"""UDP-FL's Harmonizer (Feng et al., seed 002, §3.3 and Appendix B, Alg. 3; MATH §5–§6): one noise scale per
client so that its own mechanism, Poisson-subsampled at rate q and composed over T rounds, meets its own
(ε, δ) target — the same RDP accounting for every mechanism.

Each client names a mechanism; the scale solved for is

* ``"gaussian"``: the noise multiplier σ (noise std / L2 sensitivity); exact subsampled RDP (MATH §1.3);
* ``"laplace"``: the scale b (noise scale / L1 sensitivity, pure ε = 1/b per step); subsampled RDP by the
  Zhu-Wang bound (:func:`jaxpriv.rdp.subsampled`, MATH §1.4);
* ``"staircase"``: the per-step ε₀ of the staircase mechanism with γ = γ*(ε₀) (MATH §4.2), subsampled
  the same way.

The T-fold curve is converted with the improved conversion (MATH §1.8). The paper's Alg. 3 tries noise
multipliers one after another with the classic conversion and its Table 3 "RDP" expressions (the
staircase one is not a Rényi divergence, see :func:`jaxpriv.mechanisms.staircase.udpfl_printed_rdp`);
here each client's rounds are an event (:mod:`jaxpriv.events`: ``SelfComposed(PoissonSampled(q,
mechanism(scale)), T)``) and every client of a mechanism is solved at once by :func:`jaxpriv.calibrate.calibrate`
with the RDP accountant — the library's one root finder and one accountant interface.
"""

from __future__ import annotations

import warnings
from typing import NamedTuple

import numpy as np

from .. import events
from .. import calibrate
from .._numerics import check_array, check_broadcastable, float64

__all__ = ["MECHANISMS", "Harmonized", "harmonize"]

MECHANISMS = events.NOISE_MECHANISMS  # the names understood by :func:`harmonize`


class Harmonized(NamedTuple):
    """Result of :func:`harmonize`: the calibrated scale per client and the ε it achieves (≤ target)."""

    scale: np.ndarray
    epsilon: np.ndarray


def _rounds_event(mechanism: str, dimension: int, q, rounds):
    """scale ↦ T rounds of the client's mechanism, Poisson-subsampled at rate q (the Harmonizer's family)."""
    return lambda scale: events.SelfComposed(
        events.PoissonSampled(q, events.noise_mechanism(mechanism, scale, dimension)), rounds)


def harmonize(mechanisms, epsilon, delta, q=1.0, rounds=1, orders=None, *, dimension=1, chunk_size=None,
              progress=None):
    """Calibrate each client's noise so that T rounds of its Poisson-subsampled mechanism are (ε, δ)-DP.

    For client i with mechanism m_i, rate q_i, T_i rounds and target (ε_i, δ_i), finds the scale s_i
    (σ for ``"gaussian"``, b for ``"laplace"``, the per-step ε₀ for ``"staircase"``, see the module
    docstring) with ε_i(s_i) ≤ ε_i, where ε_i(s) is the improved RDP → (ε, δ) conversion (MATH §1.8) of
    T_i·ρ(α; s, q_i) minimised over ``orders``, ρ being the exact subsampled-Gaussian curve (MATH §1.3)
    or the Zhu-Wang bound on the subsampled Laplace / staircase curve (MATH §1.4, §4.2). The scale is
    within 1e-10 relative of the root of ε_i(s) = ε_i (UDP-FL seed 002, Harmonizer and Alg. 3; MATH §5).
    A target below what the orders can certify gives scale ``inf`` (``0`` for staircase) with a warning.
    The scale is searched in σ, b ∈ [1e-4, 1e8] and ε₀ ∈ [1e-8, 100]: a target that even the least noisy
    end meets (ε in the hundreds) gets that end, which meets it with room to spare.

    Args:
      mechanisms: a mechanism name or an array of names, each one of :data:`MECHANISMS`.
      epsilon: target ε > 0 per client.
      delta: δ ∈ (0, 1).
      q: Poisson sampling rate in (0, 1].
      rounds: number of rounds T ≥ 1 (an integer).
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
      >>> from jaxpriv.calibrate import harmonizer
      >>> step_eps, eps = harmonizer.harmonize(["staircase"], 2.0, 1e-5, q=0.1, rounds=100,
      ...                                      orders=[2.0, 8.0, 32.0])
      >>> round(float(step_eps[0]), 4), bool(eps[0] <= 2.0)
      (0.1364, True)
    """
    from .. import accounting  # the accountants import the mechanisms' curves

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
            "rounds": check_array("rounds", rounds, 1.0, np.inf, integer=True),
            "dimension": check_array("dimension", dimension, 1.0, np.inf, integer=True),
        }
        shape = check_broadcastable(mechanisms=np.empty(names.shape), **arrays)
        flat = {k: np.broadcast_to(np.asarray(v), shape).reshape(-1) for k, v in arrays.items()}
        flat_names = np.broadcast_to(names, shape).reshape(-1)
        accountant = accounting.RDP(orders)
        scale = np.empty(flat_names.size)
        achieved = np.full(flat_names.size, np.nan)
        groups = np.stack([flat_names.astype(str), flat["dimension"].astype(np.int64).astype(str)], -1)
        for mechanism, dimension in np.unique(groups, axis=0):
            idx = np.nonzero((groups == (mechanism, dimension)).all(-1))[0]
            family = _rounds_event(mechanism, int(dimension), flat["q"][idx], flat["rounds"][idx])
            with warnings.catch_warnings():  # an unmet target is reported once, below
                warnings.simplefilter("ignore", RuntimeWarning)
                found = calibrate.calibrate(family, flat["epsilon"][idx], flat["delta"][idx],
                                            bounds=events.noise_family(mechanism).search_range, accountant=accountant,
                                            chunk_size=chunk_size, progress=progress)
            met = np.isfinite(found)
            # one more step to the safe side, so that a recomputation rounding differently stays within target
            safer = 1.0 if events.noise_family(mechanism).noisier_when_larger else -1.0
            found = found * np.exp(safer * calibrate.MARGIN)
            scale[idx] = np.where(met, found, np.inf if safer > 0 else 0.0)  # unmet: no noise level suffices
            if met.any():  # the ε reported is evaluated at the returned scale itself
                rows = idx[met]
                achieved[rows] = accounting.epsilon(
                    _rounds_event(mechanism, int(dimension), flat["q"][rows], flat["rounds"][rows])(found[met]),
                    flat["delta"][rows], accountant=accountant, chunk_size=chunk_size, progress=progress)
        if not np.all(np.isfinite(scale) & (scale > 0)):
            warnings.warn(
                "some targets are below the smallest ε these orders can certify; their scale is inf "
                "(0 for staircase) and their ε NaN (add larger orders to reach smaller ε)",
                RuntimeWarning,
                stacklevel=2,
            )
        return Harmonized(scale.reshape(shape), achieved.reshape(shape))
