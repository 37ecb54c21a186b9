"""Central ε of many shuffle rounds, three ways side by side (MATH §3, §7).

Calibration-layer code: it composes the shuffle kernels' rounds with the accountants, so it lives above
:mod:`jaxpriv.accounting` (its old home ``jaxpriv.shuffle.rounds`` is a deprecated alias).

Each round of APES/S-APES, GSPA, E-APES or UDP-FL releases one shuffled report per user (per uploaded
dimension for S-APES). The seeds compose rounds with loose tools; jaxpriv has the exact one-round
dominating pair (:mod:`jaxpriv.shuffle.clones`, MATH §3.1), whose privacy loss distribution is finite,
so T rounds × b dimensions compose by the PLD accountant (:mod:`jaxpriv.accounting`) with no slack but
its certified discretisation:

* :func:`rounds_epsilon` — the PLD-composed exact pair (GSPA or APES/EoN clone model; worst-case user or
  one ε per user).
* :func:`rounds_summary` — every composition we have at each T: the exact pair by PLD (both models),
  Girgis et al.'s RDP (uniform ε₀ = max ε_i, the tool UDP-FL uses), S-APES Proposition 1 (advanced
  composition over 2bT releases of the exact one-round ε) and GSPA's √(bT)·μ (an approximation).

Example:
  >>> import numpy as np
  >>> from jaxpriv.calibrate.shuffle_rounds import rounds_epsilon
  >>> eps = np.linspace(0.05, 1.0, 10_000)
  >>> one, hundred = rounds_epsilon(eps, 1e-8, [1, 100], model="apes")
  >>> round(float(one), 3), bool(hundred < 100 * one)
  (0.057, True)
"""

from __future__ import annotations

import numpy as np

from .. import accounting, fdp
from .. import events as ev
from .._numerics import check_array, float64
from ..shuffle import bounds, personalized

__all__ = ["rounds_epsilon", "rounds_summary", "MAX_TARGETS"]

#: per-user accounting evaluates at most this many target budgets (each user's rounded up to the next)
MAX_TARGETS = 128


def _check(local_epsilons, delta, rounds, dims, model):
    if model not in personalized.MODELS:
        raise ValueError(f"model must be one of {sorted(personalized.MODELS)}, got {model!r}")
    eps = np.asarray(check_array("local_epsilons", local_epsilons, 0.0, np.inf, lo_open=True))
    if eps.ndim != 1 or eps.size < 2:
        raise ValueError(f"local_epsilons must be a 1-D array of at least n = 2 per-user budgets, got shape {eps.shape}")
    check_array("delta", delta, 0.0, 1.0, lo_open=True, hi_open=True)
    if np.ndim(delta) != 0:
        raise ValueError(f"delta must be a scalar in (0, 1), got shape {np.shape(delta)}")
    rounds = np.asarray(check_array("rounds", rounds, 1.0, np.inf, integer=True), np.float64)
    if rounds.ndim > 1:
        raise ValueError(f"rounds must be an integer or a 1-D array of integers ≥ 1, got shape {rounds.shape}")
    dims = float(check_array("dims", dims, 1.0, np.inf, integer=True))
    if np.ndim(dims) != 0:
        raise ValueError("dims must be a single integer ≥ 1")
    return eps, float(delta), rounds, dims


def rounds_epsilon(local_epsilons, delta, rounds, *, dims: int = 1, model: str = "gspa", per_user: bool = False,
                   max_targets: int = MAX_TARGETS, progress=None):
    """Central ε after ``rounds`` × ``dims`` shuffled releases, by the PLD-composed exact clone pair.

    Each release is one round of :class:`jaxpriv.events.PersonalizedShuffled` with these budgets (the
    clone reduction, MATH §3.1; GSPA/E-APES or APES/EoN model), and the T·b releases compose by the PLD
    accountant (MATH §7): the upper end of its certified interval is returned.

    Worst case (``per_user=False``): the target answers at max ε_i, and the clone count is the
    Poisson-binomial of every user but the one with the largest clone probability (valid for every
    target). Per user (``per_user=True``, GSPA model): user t's own ε_t with that same clone count. At
    most ``max_targets`` target budgets are evaluated: with more distinct budgets, each user's is rounded
    **up** to the next point of a geometric grid over [min ε, max ε] (RR at a larger ε dominates), so a
    per-user value is never below the user's exact one. Under the APES model every target answers at
    max ε_j, so every user gets the worst case.

    Args:
      local_epsilons: 1-D per-user budgets ε_i > 0 (n ≥ 2).
      delta: central δ ∈ (0, 1).
      rounds: number of rounds T, an integer ≥ 1, or a 1-D array of them.
      dims: releases per round (S-APES's b uploaded dimensions), an integer ≥ 1.
      model: ``"gspa"`` (default) or ``"apes"``.
      per_user: one ε for every user (False) or one per user (True, shape (n,) per T).
      max_targets: most target budgets evaluated for ``per_user`` (≥ 1).
      progress: a progress bar for long runs (None: when there are many chunks).

    Returns:
      float64 array: shape of ``rounds`` (worst case) or that shape + (n,) (per user).

    Example:
      >>> import numpy as np
      >>> eps = np.random.default_rng(0).uniform(0.5, 1.0, 100)
      >>> worst = rounds_epsilon(eps, 1e-6, 10)
      >>> mine = rounds_epsilon(eps, 1e-6, 10, per_user=True, max_targets=4, progress=False)
      >>> mine.shape, bool(mine.max() <= worst * (1 + 1e-9)), bool(mine.min() < worst)
      ((100,), True, True)
    """
    eps, delta, rounds, dims = _check(local_epsilons, delta, rounds, dims, model)
    if not (isinstance(max_targets, (int, np.integer)) and max_targets >= 1):
        raise ValueError(f"max_targets must be an integer in [1, inf), got {max_targets!r}")
    releases = rounds * dims
    if not per_user or model == "apes":
        step = ev.PersonalizedShuffled(eps, model=model)
        out = accounting.epsilon(ev.SelfComposed(step, releases), delta, accountant="pld", progress=progress)
        return np.broadcast_to(out[..., None], out.shape + (eps.size,)).copy() if per_user else out
    targets = np.unique(eps)
    if targets.size > max_targets:
        targets = np.geomspace(targets[0], targets[-1], max_targets)
        targets[-1] = eps.max()  # the grid's ends are the exact extremes
    index = np.minimum(np.searchsorted(targets, eps, side="left"), targets.size - 1)  # next grid point ≥ ε_t
    step = ev.PersonalizedShuffled(eps, model="gspa", target_epsilon=targets.reshape((-1,) + (1,) * rounds.ndim))
    values = accounting.epsilon(ev.SelfComposed(step, releases), delta, accountant="pld", progress=progress)
    return np.moveaxis(values[index], 0, -1)


def rounds_summary(local_epsilons, delta, rounds, *, dims: int = 1) -> dict:
    """Central ε after each T in ``rounds`` (× ``dims`` releases per round) by every composition we have.

    Returns ``{name: {"epsilon": array over rounds, "kind": "bound" | "approximation", "note": str}}``:

    * ``"exact pair by PLD, GSPA"`` and ``"exact pair by PLD, APES"`` — :func:`rounds_epsilon`;
    * ``"Girgis RDP, ε₀ = max"`` — Theorem 1's RDP curve of one round (uniform ε₀ = max ε_i, valid
      for any ε₀-LDP randomizer) composed T·b times, improved conversion (the tool UDP-FL uses);
    * ``"S-APES Prop. 1"`` — advanced composition over 2bT releases (the paper's
      Proposition 1 with b·T dimensions) of the exact one-round APES-model ε at δ^c, with the budget
      split δ' = δ/2, δ^c = δ/(4bT) so that δ' + 2bT·δ^c = δ;
    * ``"GSPA √(bT)·μ"`` — GSPA's μ-GDP composed, converted at δ (not a bound).

    Example:
      >>> import numpy as np
      >>> rows = rounds_summary(np.ones(1000), 1e-6, [1, 10])
      >>> rows["exact pair by PLD, GSPA"]["epsilon"].shape, rows["GSPA √(bT)·μ"]["kind"]
      ((2,), 'approximation')
    """
    eps, delta, rounds, dims = _check(local_epsilons, delta, rounds, dims, "gspa")
    rounds = np.atleast_1d(rounds)
    n, top = eps.size, float(eps.max())
    rows = {}
    for model in ("gspa", "apes"):
        rows[f"exact pair by PLD, {model.upper()}"] = dict(
            epsilon=np.asarray(rounds_epsilon(eps, delta, rounds, dims=dims, model=model)), kind="bound",
            note="the exact one-round clone pair composed by the PLD accountant (worst-case user)")
    girgis = ev.SelfComposed(ev.Shuffled(top, n=n), rounds * dims)
    rows["Girgis RDP, ε₀ = max"] = dict(
        epsilon=np.asarray(accounting.epsilon(girgis, delta, accountant="rdp")), kind="bound",
        note="Theorem 1's RDP curve at the largest budget, composed (UDP-FL's accountant)")
    releases = rounds * dims
    delta_c = delta / (4.0 * releases)
    with float64():
        eps_c = np.array([float(personalized.personalized_epsilon(eps, d, model="apes")) for d in delta_c])
        eps_uc, _ = bounds.sapes_proposition1(eps_c, delta_c, releases, delta / 2.0)
    rows["S-APES Prop. 1"] = dict(
        epsilon=np.asarray(eps_uc), kind="bound",
        note="advanced composition over 2bT releases of the exact one-round APES ε (δ' = δ/2)")
    mu = np.asarray(bounds.gspa_mu_composed(eps, releases))
    rows["GSPA √(bT)·μ"] = dict(
        epsilon=np.asarray(fdp.gdp_epsilon(mu, delta)), kind="approximation",
        note="GSPA's μ-GDP composed (Berry-Esseen term dropped by the paper: not a bound)")
    return rows
