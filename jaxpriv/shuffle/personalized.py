"""Exact shuffle amplification for personalized local budgets (MATH §3.1 "Personalized", §3.2).

The clone reduction of :mod:`jaxpriv.shuffle.clones` with heterogeneous clone probabilities: the target
t answers binary randomized response at its ε_t (q_t = e^{ε_t}/(1+e^{ε_t})), every other user i is,
independently, a clone of x⁰ w.p. c_i/2, of x¹ w.p. c_i/2, and uninformative otherwise, so the clone
count C is Poisson-binomial(c_i, i ≠ t). δ(ε) = Σ_C Pr[C] Σ_a max(0, P_C(a) − e^ε Q_C(a)) is the same sum
as in the uniform case with Pr[C] from :mod:`jaxpriv.shuffle.poisson_binomial` (window + dropped mass
added to δ + that module's error estimate added to the rounding allowance).

Models (``model``):

* ``"gspa"`` (GSPA / E-APES: randomizers attached to shuffled positions, the FMT23 "stronger clones"
  class): c_i = 2(1−δ_i)/(1+e^{ε_i}); the target's own δ_t adds on top: δ_total(ε) = δ_t +
  (1−δ_t)·δ_pure(ε). With equal budgets and δ_i = 0 this is ``clones_epsilon(ε₀, n, δ, "strong")``.
* ``"apes"`` (APES / Echo of Neighbors, seed 000, pure ε_i-LDP): user i ≠ t becomes a clone with
  probability c_i = p̄_i = Σ_j p_ij / n, p_ij the echo probabilities of MATH §3.2, and the target
  answers RR at ε* = max_j ε_j. The clone count is C ~ Poisson-binomial(p̄_i, i ≠ t). The paper's
  display writes |T| ~ Σ_{i≠t} Σ_j Bern(p_ij/n) instead; this is why that is not the law of C
  (proof sketch):

  1. Users randomize independently, so C = Σ_{i≠t} 1[user i's report is a clone], a sum of independent
     indicators, one per user: whatever each indicator's probability, C is Poisson-binomial.
  2. The clone reduction (FMT22 Thm 3.1; MATH §3.1) needs each other user's output law written as one
     mixture μ_i = c_i/2·ρ + c_i/2·ρ' + (1 − c_i)·γ_i with ρ, ρ' the target's two (degraded) output
     laws. Lemma 5 (Eq. 4) gives exactly that, with weights averaged over the target's unknown budget
     index j (budgets are shuffled): μ_i = (1/n) Σ_j [p_ij/2·ρ + p_ij/2·ρ' + (1 − p_ij)·γ_i], i.e.
     c_i = p̄_i. Each (i, j) term is valid because p_ij ≤ μ_i/μ_j pointwise (Lemma 4).
  3. One report is one draw from μ_i: the component j is chosen once, so the n events "component j,
     echo" are mutually exclusive and user i contributes a clone with probability Σ_j p_ij/n = p̄_i,
     never more than one. Σ_j Bern(p_ij/n) would treat them as n independent coins — n reports per
     user, up to n(n − 1) clones in all — which is the law of no quantity in the mechanism.

  Both laws have the mean S of Theorem 4; the literal one has the larger variance (Σ_j p_ij/n(1 − p_ij/n)
  ≥ p̄_i(1 − p̄_i)) and, measured, gives a larger ε (the per-user ε is 0.98× and 0.97× the literal
  law's at n = 60, ε_i ~ U(0.05, 1), δ = 1e-3 and 1e-4): the per-user law is the smaller of the two, and
  the correct one; ``tests/test_shuffle_personalized.py`` pins both against an exact
  mpmath Poisson-binomial). The target's degraded RR (Lemma 3) is taken at ε* = max ε_j, as in the
  paper's proof of Theorem 4 (the budgets are shuffled, so its report may carry any of them). With
  equal budgets p̄_i = e^{−ε₀} and this is ``clones_epsilon(ε₀, n, δ, "fmt22")``. p̄_i is computed in
  O(n log n) (sorted prefix sums as in :func:`jaxpriv.shuffle.bounds.apes_echo_sum`) and rounded down
  by its summation error bound (fewer clones: the safe side).

Worst case vs per user (``per_user``):

* ``per_user=False``: one central ε valid for every user: the target gets the largest ε_t (and the
  largest δ_t), and C = Poisson-binomial of all users except the one with the largest c_i (MATH §3.1:
  stochastically smallest of all leave-one-out counts; δ_C decreases in C, and RR at a larger ε
  dominates, so this δ(ε) bounds every target's).
* ``per_user=True``: ε_t^c for each user t from its own q_t and C over the others; users with equal
  (ε_t, δ_t, c_t) share one computation.

Binning (continuous budgets). When there are more than ``max_groups`` distinct clone probabilities
(or distinct target budgets), values are rounded to a geometric grid of ratio 1 + ``grid_rtol``
(default 1e-3) on the safe side: every c_i **down** to exp(h·⌊log c_i / h⌋), h = log1p(grid_rtol) (a
stochastically smaller C, hence a larger δ), and the target's ε_t and δ_t **up** to exp(h·⌈log x / h⌉).
The leave-one-out law of target t removes t's own (rounded-down) c̃_t from the binned multiset, which
is exactly {c̃_i : i ≠ t}. Binned results are ≥ the exact ones and, at grid_rtol = 1e-3, within
~0.1% of them.
"""

from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np

from .._batching import power_of_two, row_bucket
from .._numerics import as_output, check_array, float64
from ..mechanisms.echo import echo_row_sums
from . import clones as _clones
from .poisson_binomial import leave_one_out_windows

__all__ = ["personalized_epsilon", "clone_probabilities", "MODELS"]

MODELS = {
    "gspa": "GSPA / E-APES: c_i = 2(1−δ_i)/(1+e^{ε_i}), target RR at its own ε_t, δ_total = δ_t + (1−δ_t)δ",
    "apes": "APES / EoN: c_i = Σ_j p_ij / n (echo probabilities), target RR at ε* = max ε_j, pure LDP",
}

_EPS = float(np.finfo(np.float64).eps)
_ROW_CHUNK = 64


def _round_down(x, h):
    with np.errstate(divide="ignore"):
        return np.where(x > 0, np.exp(np.floor(np.log(x) / h) * h), 0.0)


def _round_up(x, h):
    with np.errstate(divide="ignore"):
        return np.where(x > 0, np.exp(np.ceil(np.log(x) / h) * h), 0.0)


def _apes_clone_probabilities(eps):
    """p̄_i = Σ_j p_ij / n for every user, O(n log n), rounded down by its summation error bound."""
    n = eps.size
    order = np.argsort(eps, kind="stable")
    with float64():
        rows = np.asarray(echo_row_sums(jnp.asarray(eps[order])))
    out = np.empty(n)
    out[order] = rows / n * (1.0 - (2.0 * n + 32.0) * _EPS)
    return np.minimum(out, 1.0)


def clone_probabilities(local_epsilons, model: str, local_deltas=None, *, grid_rtol: float = 1e-3,
                        max_groups: int = 512):
    """Each user's clone probability c_i under ``model`` and the target's worst budget ε* = max ε_i
    (validated inputs; see the module docstring). With more than ``max_groups`` distinct values, every
    c_i is rounded **down** to the geometric grid of ratio 1 + ``grid_rtol`` (fewer clones: the safe side).

    Example:
      >>> import numpy as np
      >>> c, eps_star = clone_probabilities(np.array([1.0, 2.0]), "gspa")
      >>> bool(np.allclose(c, 2 / (1 + np.exp([1.0, 2.0])))), float(eps_star)
      (True, 2.0)
    """
    eps, _, deltas = _validate(local_epsilons, 0.5, model, local_deltas)
    return _clone_probabilities(eps, model, deltas, grid_rtol, max_groups)


def _clone_probabilities(eps, model, deltas, grid_rtol, max_groups):
    if model == "gspa":
        c = np.minimum(_clones.gspa_clone_probabilities(eps, deltas), 1.0)
    else:
        c = _apes_clone_probabilities(eps)
    if np.unique(c).size > max_groups:
        c = _round_down(c, math.log1p(grid_rtol))
    return c, float(eps.max())


def _validate(local_epsilons, delta, model, local_deltas):
    if model not in MODELS:
        raise ValueError(f"model must be one of {sorted(MODELS)}, got {model!r}")
    eps = np.asarray(check_array("local_epsilons", local_epsilons, 0.0, np.inf, lo_open=(model == "apes")))
    if eps.ndim != 1 or eps.size < 2:
        raise ValueError(f"local_epsilons must be a 1-D array of at least 2 per-user budgets, got shape {eps.shape}")
    d = np.asarray(check_array("delta", delta, 0.0, 1.0, lo_open=True, hi_open=True))
    if d.ndim != 0:
        raise ValueError(f"delta must be a scalar in (0, 1), got shape {d.shape}")
    if local_deltas is None:
        deltas = np.zeros_like(eps)
    else:
        if model != "gspa":
            raise ValueError("local_deltas is only defined for model='gspa' (APES/EoN budgets are pure ε-LDP)")
        deltas = np.asarray(check_array("local_deltas", local_deltas, 0.0, 1.0, hi_open=True))
        if deltas.shape != eps.shape:
            raise ValueError(f"local_deltas must have the shape of local_epsilons {eps.shape}, got {deltas.shape}")
    return eps, float(d), deltas


def personalized_epsilon(local_epsilons, delta, model: str = "gspa", local_deltas=None, per_user: bool = False,
                         *, grid_rtol: float = 1e-3, max_groups: int = 512):
    """Central ε of shuffled reports with personalized local budgets by the exact clone sum (MATH §3.1).

    See the module docstring for the two models, the worst-case/per-user choice and the binning.

    Args:
      local_epsilons: 1-D per-user budgets ε_i (≥ 0 for ``"gspa"``, > 0 for ``"apes"``), n ≥ 2.
      delta: target central δ ∈ (0, 1) (scalar).
      model: ``"gspa"`` (default) or ``"apes"``.
      local_deltas: ``"gspa"`` only: per-user δ_i ∈ [0, 1), same shape as ``local_epsilons``.
      per_user: False → one ε valid for every user; True → ε_t^c per user (shape (n,)).
      grid_rtol: relative step of the safe-side rounding grid used when distinct values exceed
        ``max_groups`` (see the module docstring).

    Returns:
      float64: a 0-d array (``per_user=False``) or an (n,) array. ``inf`` where δ ≤ δ_t (the target's own
      local δ already exceeds the budget); 0 where δ(0) ≤ δ. Conservative: the δ of each result is ≤
      ``delta`` up to the ~1e-10 relative allowance policy of :mod:`jaxpriv.shuffle.clones`.

    Example:
      >>> import numpy as np
      >>> from jaxpriv.shuffle import clones_epsilon
      >>> a = personalized_epsilon(np.ones(1000), 1e-6)
      >>> b = clones_epsilon(1.0, 1000, 1e-6, clones="strong")
      >>> bool(abs(a - b) < 1e-9 * b)
      True
    """
    eps, delta, deltas = _validate(local_epsilons, delta, model, local_deltas)
    if not (grid_rtol > 0 and math.isfinite(grid_rtol)):
        raise ValueError(f"grid_rtol must lie in (0, inf), got {grid_rtol!r}")
    if not (isinstance(max_groups, (int, np.integer)) and max_groups >= 1):
        raise ValueError(f"max_groups must be an integer ≥ 1, got {max_groups!r}")
    n = eps.size
    h = math.log1p(grid_rtol)
    c, _ = _clone_probabilities(eps, model, deltas, grid_rtol, max_groups)
    if model == "gspa":
        t_eps, t_delta = eps.copy(), deltas.copy()
    else:
        t_eps, t_delta = np.full(n, eps.max()), np.zeros(n)
    if per_user and np.unique(np.stack([t_eps, t_delta]), axis=1).shape[1] > max_groups:
        t_eps, t_delta = _round_up(t_eps, h), np.minimum(_round_up(t_delta, h), deltas.max(initial=0.0))
        t_delta = np.maximum(t_delta, deltas)  # never below the user's own δ_t (round_up ≥ x up to ulps)

    if per_user:
        keys = np.stack([t_eps, t_delta, c], axis=1)
        rows, inverse = np.unique(keys, axis=0, return_inverse=True)
        inverse = inverse.reshape(-1)
        # The worst case (exact max ε_t, max δ_t) is valid for every user too: each user gets the smaller
        # of two valid bounds, so per-user results never exceed the worst case even after binning.
        rows = np.concatenate([rows, [[eps.max() if model == "gspa" else t_eps.max(), deltas.max(), c.max()]]])
    else:
        rows = np.array([[t_eps.max(), t_delta.max(), c.max()]])
        inverse = None

    gp, gm = np.unique(c, return_counts=True)
    gm = gm.astype(np.float64)
    # The leave-one-out law depends on the row only through its removed c: one window per distinct c
    # (many (ε_t, δ_t) bins share a c bin), expanded back to the rows.
    c_rows, c_inv = np.unique(rows[:, 2], return_inverse=True)
    c_inv = c_inv.reshape(-1)
    logpmf, lo, top, dropped, rel = leave_one_out_windows(gp[gp > 0], gm[gp > 0], c_rows)
    logpmf, top, dropped, rel = logpmf[c_inv], top[c_inv], dropped[c_inv], rel[c_inv]

    # Pure-part target δ' = (δ − δ_t)/(1 − δ_t), rounded down; δ' ≤ 0 → inf.
    target = (delta - rows[:, 1]) / (1.0 - rows[:, 1]) * (1.0 - 4.0 * _EPS)
    out = np.full(rows.shape[0], np.inf)
    live = target > 0
    zero = live & (rows[:, 0] == 0.0)
    out[zero] = 0.0
    todo = np.flatnonzero(live & ~zero)
    # Static shapes in powers of two (rows from MIN_ROWS up to _ROW_CHUNK; the window, padded with impossible
    # counts above ``top``), so that sweeps over budgets and n reuse a few compiled programs.
    width = power_of_two(logpmf.shape[1])
    logpmf = np.pad(logpmf, ((0, 0), (0, width - logpmf.shape[1])), constant_values=-np.inf)
    rel = np.pad(rel, ((0, 0), (0, width - rel.shape[1])))
    for start in range(0, todo.size, _ROW_CHUNK):
        idx = todo[start:start + _ROW_CHUNK]
        pad = row_bucket(idx.size, _ROW_CHUNK) - idx.size
        take = np.concatenate([idx, np.full(pad, idx[0])])
        res = _clones.pmf_epsilon(rows[take, 0], np.full(take.size, float(lo)), top[take], logpmf[take],
                                  dropped[take], np.minimum(target[take], 1.0 - 1e-16), w_rel_err=rel[take])
        out[idx] = np.asarray(res)[:idx.size]
    if per_user:
        return as_output(np.minimum(out[:-1][inverse], out[-1]))
    return as_output(np.asarray(out[0]))
