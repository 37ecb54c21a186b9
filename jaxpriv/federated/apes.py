"""APES and S-APES (Liu et al., "Echo of Neighbors", AAAI 2023, seed 000) as configurations of the simulator.

One round (seed 000, Alg. 1-2; MATH §6 "APES / S-APES"), every user taking part (the paper's Alg. 1 loops
over all n users, and the analyzer's calibration needs the round's ε multiset):

1. **local update** — user i runs FedProx from the global model (:func:`~jaxpriv.federated.simulator.
   fedavg_local_sgd` with ``proximal_mu``; seed 000 §3.2 "Convergence Analysis" uses the FedProx objective)
   and flattens its update Δ_i to a d-vector;
2. **clip** every coordinate to [−C, C] (Alg. 1 "Clip(g_i, −C, C)");
3. **perturb** every coordinate with CLap(Δ_ik, λ_i = 2C/ε_i, A = C) (:func:`jaxpriv.mechanisms.clip_laplace.
   sample`, Theorem 1: ε_i-LDP per coordinate). S-APES then keeps the b largest |values| and replaces the
   other d − b by fresh CLap(0, λ_i, C) dummies (:func:`~jaxpriv.mechanisms.clip_laplace_analyzer.sparsify`, Alg. 2,
   λ_i = 2C/ε_i per MATH §4.1);
4. **shuffle** — the shuffler permutes the n values of each dimension with its own permutation and, with a
   separate permutation, the multiset {ε_i} (:func:`shuffle`);
5. **analyze** — per dimension the mean of the shuffled values, calibrated with
   :func:`~jaxpriv.mechanisms.clip_laplace_analyzer.calibrate` (Eq. 1 inverted for the ε multiset) (:func:`analyze`);
   the global model moves by the calibrated mean update.

Inside :func:`jaxpriv.federated.simulator.run` the shuffle is not materialised: the analyzer only forms the
per-dimension mean, which is invariant under any per-dimension permutation, so the simulator's masked sum
over clients equals the mean of :func:`shuffle`'s output exactly (up to float summation order). The explicit
:func:`shuffle` / :func:`analyze` pair is the reference pipeline (tests check that the simulated round equals
it, and that :func:`analyze` depends on its input only through the shuffled multisets).

Baselines (seed 000 §5.1; "all the baseline frameworks exploit the classic Laplace mechanism"): ``nonprivate``
(FedProx, no clipping, no noise), ``ldp_min`` (every user clipped and Laplace-perturbed at min_i ε_i),
``pldp`` (each user Laplace at its own ε_i, no shuffle), ``unis`` (the same reports as PLDP, shuffled; the
paper's accuracies of PLDP and UniS are identical, Table 3). The Laplace mean is unbiased: no calibration.

Accounting (:func:`account`; all numbers from :mod:`jaxpriv.shuffle`, none re-derived here):

* **dimension level, one round** (ε^c, δ^c) of one dimension's shuffled release:
  APES / S-APES — the exact numeric clone sum of the APES/EoN model,
  :func:`jaxpriv.shuffle.personalized_epsilon` (``model="apes"``, worst case over target users) at δ_s; this is
  the number of the paper's Table 3 (MATH §3.2). Theorem 4's closed form (:func:`jaxpriv.shuffle.apes_theorem4`)
  is reported beside it. S-APES has the same dimension-level ε^c: each user's report in a dimension is a
  mixture of CLap(f, λ_i, C) laws with f ∈ [−C, C] (kept value or dummy), and both the ε_i-LDP ratio and the
  echo bound p_ij ≤ inf μ_i/μ_j hold for every such mixture.
  UniS — FMT22's numeric clone sum at ε₀ = max_i ε_i (:func:`jaxpriv.shuffle.clones_epsilon`, MATH §3.1); like
  the paper (Table 3, footnote 1) we label it an approximation: the users' Laplace randomizers differ, and
  the clone reduction assumes one common randomizer. The paper's Eq. 2 closed form
  (:func:`jaxpriv.shuffle.fmt22_closed_form`) is reported beside it. PLDP — no amplification: ε^c = max_i ε_i
  (δ^c = 0). LDP-Min — ε^c = min_i ε_i.
* **user level** — a user's round is k releases of (ε^c, δ^c): k = d for APES and the baselines (all d
  dimensions), k = 2b for S-APES (Proposition 1, :func:`jaxpriv.shuffle.sapes_proposition1`, as MATH §3.2
  specifies it; a caveat: the selection of the b kept dimensions depends on all d perturbed values, and the
  paper's 2b count is its own claim, not re-proved here — the d-release value is reported as
  ``conservative_total_epsilon``).
* **over rounds** — all T·k releases of a run are composed at once, as the better of basic composition
  (Σ ε, Σ δ) and the advanced composition theorem (Dwork, Rothblum, Vadhan 2010) with slack δ'; the advanced
  one is :func:`~jaxpriv.shuffle.sapes_proposition1` with b = ⌈T·k/2⌉ (its 2b releases; k odd rounds up: one
  release more, the safe side). Taking the smaller ε with the larger δ of two valid (ε, δ) pairs is valid.
  With δ' = δ_s and k = d this is how the paper's APES ε^{uc} = 57.6 of Table 3 arises (δ^{uc} = d·δ^c =
  3.6e-5 with δ^c of Theorem 4).
* **local** — user i's coordinates are each ε_i-LDP per round; its whole update is d·ε_i-LDP per round
  (basic composition; S-APES included: the sparsified vector is post-processing of the d perturbed
  coordinates plus data-independent dummies — the paper's ε^{ul} = b·ε_i is not claimed here), T·d·ε_i
  over T rounds (:func:`local_spent`).
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx
from jax.flatten_util import ravel_pytree

from .. import events
from .._numerics import check_array
from ..mechanisms import clip_laplace, clip_laplace_analyzer
from ..shuffle import (
    apes_theorem4,
    clones_epsilon,
    fmt22_closed_form,
    personalized_epsilon,
    sapes_proposition1,
)
from ..train import noise
from . import partition, simulator
from .partition import ClientData
from .protocol import WithNumbers, split_numbers
from .simulator import Aggregator, LocalResult

__all__ = [
    "SYSTEMS",
    "Configuration",
    "Privacy",
    "used_epsilons",
    "configure",
    "shuffle",
    "analyze",
    "account",
    "local_spent",
    "train",
]

#: system → (local randomizer, description)
SYSTEMS = {
    "apes": "APES: Clip-Laplace per coordinate at ε_i, shuffle, calibrate (seed 000 Alg. 1)",
    "sapes": "S-APES: APES + post-sparsification to b dimensions (seed 000 Alg. 2)",
    "nonprivate": "Non-Private: FedProx, no clipping, no noise",
    "ldp_min": "LDP-Min: every user Laplace at min_i ε_i",
    "pldp": "PLDP: each user Laplace at its own ε_i, no shuffle (central ε = max ε_i)",
    "unis": "UniS: PLDP's reports shuffled, FMT22 bound at ε₀ = max ε_i",
}
_MECHANISM = {"apes": "clip_laplace", "sapes": "clip_laplace", "nonprivate": None, "ldp_min": "laplace",
              "pldp": "laplace", "unis": "laplace"}


def _check_system(system) -> str:
    if system not in SYSTEMS:
        raise ValueError(f"system must be one of {sorted(SYSTEMS)}, got {system!r}")
    return system


def _check_budgets(local_epsilons) -> np.ndarray:
    eps = np.asarray(check_array("local_epsilons", local_epsilons, 0.0, np.inf, lo_open=True), dtype=np.float64)
    if eps.ndim != 1 or eps.size < 2:
        raise ValueError(f"local_epsilons must be a 1-D array of at least 2 per-user budgets, got shape {eps.shape}")
    return eps


def _check_clip(clip) -> float:
    c = check_array("clip", clip, 0.0, np.inf, lo_open=True)
    if c.ndim != 0:
        raise ValueError(f"clip must be a scalar C > 0, got shape {c.shape}")
    return float(c)


def _check_b(system: str, b, d: int):
    if system != "sapes":
        if b is not None:
            raise ValueError(f"b (uploaded dimensions) applies to system='sapes' only, got b={b!r} for {system!r}")
        return None
    if isinstance(b, bool) or not isinstance(b, (int, np.integer)) or not 1 <= b <= d:
        raise ValueError(f"b must be an integer in [1, d] = [1, {d}] for system='sapes', got {b!r}")
    return int(b)


def used_epsilons(system: str, local_epsilons) -> np.ndarray:
    """The per-coordinate local ε each user's randomizer actually runs at, per round.

    ε_i for APES, S-APES, PLDP and UniS; min_j ε_j for every user under LDP-Min; ``inf`` (no noise) for
    Non-Private. Source: seed 000 §5.1 (baselines); MATH §6.

    Args:
      system: a key of :data:`SYSTEMS`.
      local_epsilons: 1-D per-user budgets ε_i > 0 (n ≥ 2).

    Returns:
      float64 array of shape (n,).

    Example:
      >>> used_epsilons("ldp_min", [0.5, 1.0, 0.2]).tolist()
      [0.2, 0.2, 0.2]
    """
    system = _check_system(system)
    eps = _check_budgets(local_epsilons)
    if system == "nonprivate":
        return np.full_like(eps, np.inf)
    if system == "ldp_min":
        return np.full_like(eps, eps.min())
    return eps.copy()


class Configuration(NamedTuple):
    """A system as a simulator configuration: pass ``local_update``, ``aggregator`` and ``client_state`` to
    :func:`jaxpriv.federated.simulator.run` (with ``client_rate=1``). ``client_state`` holds each client's ε
    as used by its randomizer (:func:`used_epsilons`, float32); ``dimension`` is d."""

    system: str
    local_update: Any
    aggregator: Aggregator
    client_state: np.ndarray
    dimension: int
    clip: float
    b: int | None


def _perturb(mechanism, key, flat, eps, clip, b):
    """One user's report: its clipped update perturbed at ε (and S-APES-sparsified when b is set)."""
    if mechanism is None:
        return flat
    g = jnp.clip(flat, -clip, clip)
    noise_key, sparse_key = jax.random.split(key)
    lam = clip_laplace.local_scale(eps.astype(flat.dtype), jnp.asarray(clip, flat.dtype))  # Δ = 2C, rounded up
    if mechanism == "laplace":  # λ is already the scale on the coordinate (sensitivity 1)
        return noise.add_noise(noise_key, g, events.Laplace(lam), flat=True)
    z = clip_laplace.sample(noise_key, g, lam, jnp.asarray(clip, g.dtype))
    if b is not None:
        z = clip_laplace_analyzer.sparsify(sparse_key, z, eps.astype(z.dtype), clip, b)
    return z


def _calibrated(mean, table, mechanism):
    """The analyzer's estimate of the clean mean from the per-dimension mean of the shuffled reports
    (``table``: :func:`jaxpriv.mechanisms.clip_laplace_analyzer.calibration_table` of the ε multiset and C)."""
    if mechanism != "clip_laplace":
        return mean  # the Laplace mean is unbiased; Non-Private has nothing to undo
    return clip_laplace_analyzer.calibrate_with_table(mean, table).astype(mean.dtype)


def configure(system: str, params, base_update, local_epsilons, clip: float, *, b: int | None = None) -> Configuration:
    """Build APES, S-APES or a baseline as a :mod:`~jaxpriv.federated.simulator` configuration.

    The local update wraps ``base_update`` (the FedProx client, e.g. :func:`~jaxpriv.federated.simulator.
    fedavg_local_sgd` with ``proximal_mu`` > 0): its update Δ_i is flattened, clipped per coordinate to
    [−C, C] and perturbed — CLap(Δ_ik, 2C/ε_i, C) (APES; S-APES then :func:`~jaxpriv.mechanisms.clip_laplace.
    sparsify` to b dimensions) or Δ_ik + Lap(2C/ε_i) (LDP-Min at min ε, PLDP, UniS); Non-Private sends Δ_i as
    is. The aggregator averages each dimension over the n users (each user counts alike, seed 000 Alg. 1)
    and, for Clip-Laplace, calibrates with the ε multiset (module docstring). Sources: seed 000 Alg. 1-2,
    §5.1; MATH §4.1, §6.

    Args:
      system: a key of :data:`SYSTEMS`.
      params: the global model's ``nnx.Param`` state (a template for the flattening).
      base_update: a :class:`~jaxpriv.federated.simulator.LocalUpdate` returning the client's update Δ_i.
      local_epsilons: 1-D per-user budgets ε_i > 0, one per client (n ≥ 2), in client order.
      clip: C > 0, the per-coordinate clip bound of the update.
      b: S-APES only: uploaded dimensions, an integer in [1, d].

    Returns:
      :class:`Configuration`.

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxpriv.federated.simulator import LocalResult
      >>> params = {"w": jnp.zeros(4)}
      >>> base = lambda p, s, d, k: LocalResult({"w": jnp.full(4, 0.3)}, s, {})
      >>> cfg = configure("apes", params, base, [0.5, 1.0], clip=0.1)
      >>> cfg.dimension, cfg.client_state.tolist()
      (4, [0.5, 1.0])
    """
    system = _check_system(system)
    if not callable(base_update):
        raise ValueError(f"base_update must be a LocalUpdate (callable), got {type(base_update).__name__}")
    eps = _check_budgets(local_epsilons)
    clip = _check_clip(clip)
    flat0, unravel = ravel_pytree(params)
    d = int(flat0.size)
    if d < 1:
        raise ValueError("params must hold at least one parameter")
    b = _check_b(system, b, d)
    mechanism = _MECHANISM[system]
    used = used_epsilons(system, eps)
    n = eps.size
    state = used.astype(np.float32) if mechanism is not None else np.ones(n, np.float32)

    # The structure (the base update's, the mechanism, b, the parameters' layout) in the functions; C, n, the
    # base update's numbers and the analyzer's table of the ε multiset as numbers: another budget profile or C
    # compiles nothing (a table of more panels than the padded size, a new shape, once)
    base_fn, base_numbers = split_numbers(base_update)
    clip_arg = jnp.asarray(clip)
    local = WithNumbers(_local_fn(base_fn, mechanism, b), {"base": base_numbers, "clip": clip_arg})
    # what the shuffled ε list holds (a concrete multiset: the table is built once, on the host)
    table = clip_laplace_analyzer.calibration_table(used, clip) if mechanism == "clip_laplace" else None
    finalize = WithNumbers(_finalize_fn(mechanism, unravel), {"n": jnp.asarray(float(n)), "table": table})
    return Configuration(system, local, Aggregator(_contribute, finalize), state, d, clip, b)


def _local_fn(base_fn, mechanism, b):
    def local_update(numbers, global_params, eps_i, data: ClientData, key) -> LocalResult:
        base_key, noise_key = jax.random.split(key)
        result = base_fn(numbers["base"], global_params, None, data, base_key)
        flat, _ = ravel_pytree(result.update)
        return LocalResult(_perturb(mechanism, noise_key, flat, eps_i, numbers["clip"], b), eps_i, result.metrics)

    return local_update


def _contribute(report, data: ClientData):
    del data
    return report


def _finalize_fn(mechanism, unravel):
    def finalize(numbers, total, key):
        del key
        mean = total / numbers["n"]  # every user takes part (client_rate = 1): the paper's (1/n) Σ_i
        return unravel(_calibrated(mean, numbers["table"], mechanism))

    return finalize


def shuffle(key, reports, local_epsilons):
    """The shuffler: an independent uniform permutation of the n values of each dimension, and a separate
    one of the ε list (seed 000 Alg. 1 "Shuffling Process"; MATH §6).

    Args:
      key: a JAX PRNG key.
      reports: (n, d) array, row i = user i's perturbed report.
      local_epsilons: (n,) budgets sent alongside.

    Returns:
      (shuffled_reports (n, d), shuffled_epsilons (n,)): column k of the first is a permutation π_k of
      column k of ``reports``; the π_k and the ε permutation are independent.

    Example:
      >>> import jax, numpy as np
      >>> r = np.arange(8.0).reshape(4, 2)
      >>> s, e = shuffle(jax.random.key(0), r, [1.0, 2.0, 3.0, 4.0])
      >>> sorted(np.asarray(s)[:, 1].tolist()), sorted(np.asarray(e).tolist())
      ([1.0, 3.0, 5.0, 7.0], [1.0, 2.0, 3.0, 4.0])
    """
    reports = np.asarray(reports)
    if reports.ndim != 2 or reports.shape[0] < 1:
        raise ValueError(f"reports must be an (n, d) array with n ≥ 1, got shape {reports.shape}")
    eps = np.asarray(local_epsilons)
    if eps.shape != reports.shape[:1]:
        raise ValueError(f"local_epsilons must have shape (n,) = {reports.shape[:1]}, got {eps.shape}")
    dim_key, eps_key = jax.random.split(key)
    n, d = reports.shape
    # one uniform permutation per column (argsort of i.i.d. uniforms); applied as indices so that the
    # values keep their dtype (the ε list feeds the float64 calibration)
    order = np.asarray(jnp.argsort(jax.random.uniform(dim_key, (n, d)), axis=0))
    return np.take_along_axis(reports, order, axis=0), eps[np.asarray(jax.random.permutation(eps_key, n))]


def analyze(shuffled_reports, shuffled_epsilons, clip: float, mechanism: str = "clip_laplace"):
    """The analyzer: per-dimension mean of the shuffled reports, calibrated for Clip-Laplace.

    ĝ_k = calibrate((1/n) Σ_i z̃_ik, {ε_i}, C) (seed 000 Alg. 1 "Analyzing Process", Eq. 1; MATH §4.1);
    ``mechanism="laplace"`` returns the plain mean (unbiased), ``"none"`` too. It uses its inputs only through
    the multiset of each column and the multiset of ε's.

    Args:
      shuffled_reports: (n, d) array.
      shuffled_epsilons: (n,) budgets (the shuffled list; only the multiset matters).
      clip: C > 0.
      mechanism: ``"clip_laplace"``, ``"laplace"`` or ``"none"``.

    Returns:
      (d,) array of the calibrated mean (float64 for Clip-Laplace).

    Example:
      >>> import numpy as np
      >>> analyze(np.array([[0.1], [0.3]]), [1.0, 1.0], 1.0, "laplace").tolist()
      [0.2]
    """
    if mechanism not in ("clip_laplace", "laplace", "none"):
        raise ValueError(f"mechanism must be 'clip_laplace', 'laplace' or 'none', got {mechanism!r}")
    reports = np.asarray(shuffled_reports, dtype=np.float64)
    if reports.ndim != 2 or reports.shape[0] < 1:
        raise ValueError(f"shuffled_reports must be an (n, d) array with n ≥ 1, got shape {reports.shape}")
    eps = np.asarray(shuffled_epsilons, dtype=np.float64)
    if eps.shape != reports.shape[:1]:
        raise ValueError(f"shuffled_epsilons must have shape (n,) = {reports.shape[:1]}, got {eps.shape}")
    clip = _check_clip(clip)
    mean = reports.mean(axis=0)
    if mechanism == "clip_laplace":
        return np.asarray(clip_laplace_analyzer.calibrate(mean, eps, clip))
    return mean


class Privacy(NamedTuple):
    """Accounting of one system (module docstring). ``epsilon_c, delta_c``: one dimension, one round (the
    engine's numeric value); ``theorem_epsilon, theorem_delta``: the closed form beside it (APES Theorem 4,
    UniS Eq. 2 = FMT22 closed form; NaN where none); ``round_epsilon, round_delta``: one user, one round
    (``releases`` = k releases); ``total_epsilon, total_delta``: one user, ``rounds`` rounds;
    ``conservative_total_epsilon``: the same with k = d for S-APES (= ``total_epsilon`` otherwise);
    ``local_user_epsilon``: (n,) local ε of each user's whole run, T·d·ε_i (:func:`local_spent`)."""

    system: str
    epsilon_c: float
    delta_c: float
    theorem_epsilon: float
    theorem_delta: float
    releases: int
    round_epsilon: float
    round_delta: float
    rounds: int
    total_epsilon: float
    total_delta: float
    conservative_total_epsilon: float
    local_user_epsilon: np.ndarray


def _compose(eps_c: float, delta_c: float, k: int, delta_prime: float) -> tuple[float, float]:
    """k releases of (ε^c, δ^c): the better of basic composition and advanced composition (slack δ')."""
    if not math.isfinite(eps_c):
        return math.inf, math.inf
    basic = (k * eps_c, k * delta_c)
    adv_eps, adv_delta = (float(v) for v in sapes_proposition1(eps_c, delta_c, -(-k // 2), delta_prime))
    if adv_eps < basic[0]:
        return adv_eps, max(adv_delta, basic[1])
    return basic


def local_spent(local_epsilons, dimension: int, rounds_taken: int | np.ndarray):
    """Each user's local ε over a run: rounds_taken · d · ε_i (basic composition of d coordinates per round,
    each ε_i-LDP by Theorem 1 of seed 000; MATH §4.1).

    Args:
      local_epsilons: (n,) per-coordinate ε the users' randomizers ran at (:func:`used_epsilons`).
      dimension: d ≥ 1.
      rounds_taken: rounds each user took part in (scalar or (n,)), integers ≥ 0.

    Returns:
      float64 (n,) array.

    Example:
      >>> local_spent([0.5, 1.0], 10, 3).tolist()
      [15.0, 30.0]
    """
    eps = np.asarray(check_array("local_epsilons", local_epsilons, 0.0, np.inf, lo_open=True, allow_inf=True))
    d = int(check_array("dimension", dimension, 1.0, np.inf, integer=True))
    t = np.asarray(check_array("rounds_taken", rounds_taken, 0.0, np.inf, integer=True))
    return np.asarray(t * d * eps, dtype=np.float64)


def account(system: str, local_epsilons, dimension: int, rounds: int = 1, *, b: int | None = None,
            delta_s: float = 1e-8, delta_prime: float | None = None) -> Privacy:
    """Privacy of a run of ``system`` with n = len(local_epsilons) users, all taking part in every round.

    See the module docstring for every number and the compositions used (seed 000 Theorem 4, Proposition 1,
    Table 3; MATH §3.1-3.2).

    Args:
      system: a key of :data:`SYSTEMS`.
      local_epsilons: 1-D per-user budgets ε_i > 0 (n ≥ 2).
      dimension: d, the number of model parameters (integer ≥ 1).
      rounds: T ≥ 1.
      b: S-APES only: uploaded dimensions in [1, d].
      delta_s: δ_s ∈ (0, 1), the shuffle δ of one dimension (the paper: 1e-8).
      delta_prime: advanced-composition slack δ' ∈ (0, 1) (default δ_s).

    Returns:
      :class:`Privacy`.

    Example:
      >>> p = account("pldp", [0.5, 1.0], dimension=10, rounds=2)
      >>> p.epsilon_c, p.round_epsilon, p.total_epsilon
      (1.0, 10.0, 20.0)
    """
    system = _check_system(system)
    eps = _check_budgets(local_epsilons)
    d = int(check_array("dimension", dimension, 1.0, np.inf, integer=True))
    if isinstance(rounds, bool):
        raise ValueError(f"rounds must be an integer ≥ 1, got {rounds!r}")
    rounds = int(check_array("rounds", rounds, 1.0, np.inf, integer=True))
    b = _check_b(system, b, d)
    ds = check_array("delta_s", delta_s, 0.0, 1.0, lo_open=True, hi_open=True)
    dp = ds if delta_prime is None else check_array("delta_prime", delta_prime, 0.0, 1.0, lo_open=True, hi_open=True)
    if ds.ndim or dp.ndim:
        raise ValueError("delta_s and delta_prime must be scalars")
    ds, dp = float(ds), float(dp)
    used = used_epsilons(system, eps)
    n = eps.size
    nan = math.nan
    if system in ("apes", "sapes"):
        eps_c, delta_c = float(personalized_epsilon(eps, ds, model="apes")), ds
        th_eps, th_delta = (float(v) for v in apes_theorem4(eps, ds))
    elif system == "unis":
        eps_c, delta_c = float(clones_epsilon(float(eps.max()), n, ds, clones="fmt22")), ds
        th_eps, th_delta = float(fmt22_closed_form(float(eps.max()), n, ds)), ds
    elif system == "pldp":
        eps_c, delta_c, th_eps, th_delta = float(eps.max()), 0.0, nan, nan
    elif system == "ldp_min":
        eps_c, delta_c, th_eps, th_delta = float(eps.min()), 0.0, nan, nan
    else:
        eps_c, delta_c, th_eps, th_delta = math.inf, 1.0, nan, nan
    k = 2 * b if system == "sapes" else d
    round_eps, round_delta = _compose(eps_c, delta_c, k, dp)
    total_eps, total_delta = _compose(eps_c, delta_c, rounds * k, dp)
    conservative = _compose(eps_c, delta_c, rounds * d, dp)[0] if system == "sapes" else total_eps
    spent = local_spent(used, d, rounds)
    return Privacy(system, eps_c, delta_c, th_eps, th_delta, k, round_eps, round_delta, rounds, total_eps,
                   total_delta, conservative, spent)


# --------------------------------------------------------------------------------------------------
# training on the bundled data
# --------------------------------------------------------------------------------------------------


def train(system: str, dataset, local_epsilons, *, rounds: int, clip: float = 0.05, b: int | None = None,
          local_lr: float = 1.0, local_steps: int = 1, proximal_mu: float = 0.01, server_lr: float = 1.0,
          hidden: tuple = (), seed: int = 0, progress: bool = False):
    """Train a classifier on ``dataset`` with ``system``: one client per budget, an IID partition of the
    training set, FedProx local training (full-batch SGD, ``local_steps`` steps of rate ``local_lr``,
    proximal μ), every client in every round, the server adding ``server_lr`` × the aggregated update.

    Args:
      system: a key of :data:`SYSTEMS`.
      dataset: a :class:`jaxpriv.train.data.Dataset`.
      local_epsilons: 1-D budgets ε_i > 0, one per client (2 ≤ n ≤ training records).
      rounds: T ≥ 1.
      clip: C > 0 (per-coordinate bound of a client's update).
      b: S-APES uploaded dimensions.
      local_lr, local_steps, proximal_mu: the FedProx client (:func:`~jaxpriv.federated.simulator.fedavg_local_sgd`).
      server_lr: > 0.
      hidden: hidden widths of the :class:`jaxpriv.train.dpsgd.MLP` (``()``: logistic regression, as the paper).
      seed: integer ≥ 0 (model init, partition, noise).
      progress: show the simulator's progress bar.

    Returns:
      (:class:`jaxpriv.federated.simulator.FederatedResult`, :class:`Configuration`).

    Example:
      >>> from jaxpriv.train import data
      >>> d = data.load("digits")
      >>> res, cfg = train("nonprivate", d, [1.0] * 20, rounds=3)
      >>> cfg.dimension, len(res.history)
      (650, 3)
    """
    from ..train import dpsgd

    system = _check_system(system)
    eps = _check_budgets(local_epsilons)
    if eps.size > len(dataset.y_train):
        raise ValueError(f"local_epsilons must have at most one budget per training record "
                         f"({len(dataset.y_train)}), got {eps.size}")
    lr = float(check_array("server_lr", server_lr, 0.0, np.inf, lo_open=True))
    model = dpsgd.MLP(int(np.prod(dataset.x_train.shape[1:])), tuple(hidden), int(dataset.num_classes),
                      rngs=nnx.Rngs(seed))
    graphdef, params = nnx.split(model, nnx.Param)
    part = partition.iid(dataset.y_train, eps.size, seed=seed)
    clients = partition.stack(dataset.x_train, dataset.y_train, part)
    width = int(np.asarray(clients.mask).shape[1])
    base = simulator.fedavg_local_sgd(dpsgd.cross_entropy_loss, graphdef, optax.sgd(local_lr), local_steps,
                                      batch_size=width, proximal_mu=proximal_mu)
    cfg = configure(system, params, base, eps, clip, b=b)
    result = simulator.run(model, cfg.local_update, clients, rounds=rounds, client_rate=1.0,
                           aggregator=cfg.aggregator, client_state=cfg.client_state,
                           server_optimizer=None if lr == 1.0 else optax.sgd(lr), test_data=dataset,
                           seed=seed, progress=progress)
    return result, cfg
