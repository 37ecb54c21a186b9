"""GSPA as a federated system: shuffled SGD with personalized Gaussian noise (seed 003; MATH §3.3, §6).

Chen, Cao, Ge, "A Generalized Shuffle Framework for Privacy Amplification" (GSPA, seed 003), Alg. 3 "SGD
with GSPA": n clients, client i holds m records and a budget (ε_i, δ_i). In every epoch the clients are
visited in a random order without replacement (a fresh permutation per epoch); client i computes the mean
of its m per-example gradients, each clipped to L2 norm C (:func:`jaxpriv.train.clipping.split_clipped_grad_sum`),
adds N(0, σ_i² I) (:func:`jaxpriv.train.noise.add_noise`) with

    σ_i = (2C/m) √(2 log(1.25/δ_i)) / ε_i      (classical calibration, Dwork & Roth Thm A.1, ε_i ≤ 1)

(:func:`jaxpriv.mechanisms.gaussian.classical_sigma`, which raises for ε_i > 1; ``calibration="analytic"``
uses :func:`jaxpriv.mechanisms.gaussian.analytic_sigma`, valid for every ε_i), and the model steps by
−η(g̃_i + b_i). The paper clips the *mean* gradient to C, whose sensitivity is 2C, not 2C/m; clipping every
example to C makes the mean's sensitivity to replacing one record exactly 2C/m, so the σ_i above is
correct. ``unit="client"`` calibrates to Δ = 2C instead (any change of the client's whole data).

Two runners share one :func:`local_update`: :func:`shuffled_sgd` is Alg. 3 itself (sequential, each
client starts from the previous client's model), and :func:`build` gives the simulator configuration
(each round every client reports its perturbed step from the same global model, the shuffler permutes
the reports and the server adds them: the sum does not depend on the order, so the shuffle is implicit).

Accounting (:func:`accounting`): the paper's √T·μ (:func:`jaxpriv.shuffle.gspa_mu_composed`,
an approximation, not a bound) converted with :func:`jaxpriv.fdp.gdp_epsilon`, and the exact personalized
clone accountant (:func:`jaxpriv.shuffle.personalized_epsilon`, ``model="gspa"`` with the local δ_i) for
one epoch, composed over T epochs by the better of basic composition (ε₀ at δ/T per epoch: Tε₀, δ) and
advanced composition (Dwork, Rothblum, Vadhan 2010; Dwork & Roth 2014 Thm 3.20: ε₀ at δ/(2T) per epoch,
ε = ε₀√(2T log(2/δ)) + Tε₀(e^{ε₀} − 1), total δ/2 + δ/2). Both are valid (ε, δ) bounds for the
T-fold adaptive composition, so their minimum is too. Premise of both shuffle accountants: every
client's report is an (ε_i, δ_i)-LDP randomizer of its input; with ``unit="record"`` (the paper's
calibration, MATH §6.4) it is (ε_i, δ_i)-DP only with respect to one record of the client, so the shuffle numbers
are the paper's model, not a proven guarantee; with ``unit="client"`` the premise holds. The sequential
Alg. 3 is adaptive inside an epoch (client i sees the model after the earlier clients), which the
non-adaptive shuffle theorem does not cover either; the parallel configuration (:func:`build`) is the
one the shuffle model describes.

Mean and frequency estimation (Alg. 1-2, seed 003 Fig. 3): :func:`mean_experiment` and
:func:`frequency_experiment` run :mod:`jaxpriv.shuffle.estimators` with personalized budgets and the
:data:`ESTIMATORS` baselines over seeds (random assignments of the budgets) and batched trials, and report
empirical and exact MSE; :func:`estimation_accounting` gives each one's central ε (exact clone sum and
the paper's μ).
"""

from __future__ import annotations

import math
import os
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from .. import events, fdp
from .._numerics import check_array, float64
from ..mechanisms import gaussian
from ..mechanisms._common import round_to
from ..shuffle import bounds, personalized
from ..train import noise
from ..train.clipping import split_clipped_grad_sum
from .partition import ClientData
from .simulator import Aggregator, LocalResult, mean_aggregator

__all__ = ["CALIBRATIONS", "UNITS", "client_sigmas", "local_update", "shuffle_aggregator", "build",
           "shuffled_sgd", "ShuffledResult", "Accounting", "accounting", "advanced_composition", "ESTIMATORS",
           "EstimationResult", "mean_experiment", "frequency_experiment", "EstimationAccounting",
           "estimation_accounting", "reproduce"]

CALIBRATIONS = ("classical", "analytic")
UNITS = ("record", "client")


def _check_clip_m(clip, batch_size):
    clip = float(check_array("clip", clip, 0.0, np.inf, lo_open=True))
    if isinstance(batch_size, bool):
        raise ValueError(f"batch_size must be an integer ≥ 1, got {batch_size!r}")
    m = int(check_array("batch_size", batch_size, 1.0, np.inf, integer=True))
    return clip, m


def client_sigmas(local_epsilons, local_deltas, clip, batch_size, calibration: str = "classical",
                  unit: str = "record"):
    """Per-client Gaussian noise std σ_i of GSPA's shuffled SGD (seed 003 Alg. 3 line 7; MATH §6).

    σ_i = Δ √(2 log(1.25/δ_i)) / ε_i with Δ = 2C/m (``unit="record"``) or 2C (``unit="client"``),
    from :func:`jaxpriv.mechanisms.gaussian.classical_sigma` (ε_i ≤ 1, raises beyond) or the exact
    :func:`jaxpriv.mechanisms.gaussian.analytic_sigma` (``calibration="analytic"``, any ε_i > 0).

    Args:
      local_epsilons: ε_i > 0 per client (1-D).
      local_deltas: δ_i ∈ (0, 1), per client or one shared value.
      clip: per-example L2 clip norm C > 0.
      batch_size: m, the records per client (integer ≥ 1); the mean divides by m.
      calibration: ``"classical"`` or ``"analytic"``.
      unit: ``"record"`` or ``"client"`` (see the module docstring).

    Returns:
      float64 array of σ_i, the shape of ``local_epsilons``.

    Example:
      >>> round(float(client_sigmas([1.0], 1e-5, clip=1.0, batch_size=2)[0]), 6)  # Δ = 2C/m = 1
      4.844805
    """
    if calibration not in CALIBRATIONS:
        raise ValueError(f"calibration must be one of {CALIBRATIONS}, got {calibration!r}")
    if unit not in UNITS:
        raise ValueError(f"unit must be one of {UNITS}, got {unit!r}")
    clip, m = _check_clip_m(clip, batch_size)
    eps = np.asarray(check_array("local_epsilons", local_epsilons, 0.0, np.inf, lo_open=True), np.float64)
    if eps.ndim != 1:
        raise ValueError(f"local_epsilons must be 1-D (one per client), got shape {eps.shape}")
    sensitivity = 2.0 * clip / (m if unit == "record" else 1)
    calibrate = gaussian.classical_sigma if calibration == "classical" else gaussian.analytic_sigma
    return np.asarray(calibrate(eps, local_deltas, sensitivity), np.float64).reshape(eps.shape)


def local_update(loss_fn, graphdef, clip, learning_rate, batch_size, *, rest=None):
    """GSPA's client step as a :class:`~jaxpriv.federated.simulator.LocalUpdate` (seed 003 Alg. 3 lines 7-13).

    ``client_state`` is the client's σ_i (a scalar, kept unchanged). The update is
    −η (Σ_j clip_C(∇ℓ(w, x_j)) / m + N(0, σ_i² I)), the clipped sum over the client's real records
    divided by the fixed m (never by the realised count, so the sensitivity stays 2C/m).

    Args:
      loss_fn: per-example loss ``(model, x, y, key) → (B,)``.
      graphdef: the model's GraphDef (``nnx.split(model, nnx.Param, ...)``).
      clip: C > 0. learning_rate: η > 0. batch_size: m ≥ 1.
      rest: the non-Param state of the split (``None`` when empty).

    Returns:
      a LocalUpdate with metrics ``{"loss": mean loss of the client's records}``.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> from flax import nnx
      >>> from jaxpriv.train.dpsgd import cross_entropy_loss
      >>> model = nnx.Linear(4, 3, rngs=nnx.Rngs(0))
      >>> graphdef, params, rest = nnx.split(model, nnx.Param, ...)
      >>> step = local_update(cross_entropy_loss, graphdef, 1.0, 0.1, 8, rest=rest)
      >>> data = ClientData(jnp.ones((8, 4)), jnp.zeros(8, jnp.int32), jnp.ones(8, bool), jnp.int32(8))
      >>> res = step(params, jnp.float32(0.0), data, jax.random.key(0))  # σ = 0: the clipped mean step
      >>> bool(jnp.sqrt(sum(jnp.sum(v ** 2) for v in jax.tree.leaves(res.update))) <= 0.1 + 1e-6)
      True
    """
    clip, m = _check_clip_m(clip, batch_size)
    lr = float(check_array("learning_rate", learning_rate, 0.0, np.inf, lo_open=True))

    def update(global_params, sigma, data: ClientData, key):
        out = split_clipped_grad_sum(loss_fn, graphdef, global_params, rest, data.x, data.y, clip_norm=clip,
                                     mask=data.mask, method="vmap")
        # σ_i is calibrated on the mean (sensitivity 2C/m, client_sigmas), so its noise goes on the mean;
        # σ_i = 0 (the non-private baseline) adds none
        mean = jax.tree.map(lambda g: g / m, out.grads)
        step = jax.tree.map(lambda v: -lr * v, noise.add_noise(key, mean, events.Gaussian(sigma)))
        return LocalResult(step, sigma, {"loss": out.loss})

    return update


def shuffle_aggregator() -> Aggregator:
    """The shuffler + server of the parallel configuration: the sum of the participants' reports.

    The shuffler hands the server the multiset of reports in a uniformly random order; the server adds
    them (one epoch of Alg. 3 adds n/m steps), and a sum does not depend on the order, so no permutation
    is materialised (seed 003 Alg. 3; MATH §6). It is :func:`~jaxpriv.federated.simulator.mean_aggregator`
    with the fixed denominator 1.

    Returns:
      :class:`~jaxpriv.federated.simulator.Aggregator`.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> agg = shuffle_aggregator()
      >>> c = lambda u: agg.contribute({"w": jnp.float32(u)}, ClientData(None, None, None, jnp.int32(5)))
      >>> float(agg.finalize(jax.tree.map(jnp.add, c(1.0), c(2.0)), jax.random.key(0))["w"])
      3.0
    """
    return mean_aggregator("uniform", denominator=1.0)


def build(model, loss_fn, local_epsilons, local_deltas, *, clip, learning_rate, batch_size,
          calibration: str = "classical", unit: str = "record"):
    """The simulator configuration of GSPA: ``(local_update, aggregator, client_state)`` for
    :func:`jaxpriv.federated.simulator.run` (``client_state`` = the σ_i of :func:`client_sigmas` in float32,
    rounded up: the noise the traced σ_i draws is never below the calibrated one).

    Args: as :func:`client_sigmas` and :func:`local_update`; ``model`` is the Flax NNX model.

    Returns:
      ``(LocalUpdate, Aggregator, np.ndarray σ)``.

    Example:
      >>> from flax import nnx
      >>> from jaxpriv.train.dpsgd import cross_entropy_loss
      >>> local, agg, sig = build(nnx.Linear(4, 3, rngs=nnx.Rngs(0)), cross_entropy_loss, [0.5, 1.0], 1e-5,
      ...                         clip=1.0, learning_rate=0.1, batch_size=10)
      >>> [round(float(v), 3) for v in sig]
      [1.938, 0.969]
    """
    graphdef, _, rest = nnx.split(model, nnx.Param, ...)
    sig = client_sigmas(local_epsilons, local_deltas, clip, batch_size, calibration, unit)
    local = local_update(loss_fn, graphdef, clip, learning_rate, batch_size, rest=rest)
    return local, shuffle_aggregator(), round_to(sig, np.float32)


class ShuffledResult(NamedTuple):
    """Outcome of :func:`shuffled_sgd`: final parameters, each epoch's client order and test accuracy."""

    params: Any
    orders: list
    accuracies: list


def shuffled_sgd(model, local, clients: ClientData, sigmas, *, epochs: int, seed: int = 0, test_data=None):
    """GSPA Alg. 3 itself: each epoch visits the clients in a fresh random order, sequentially.

    Epoch t draws a uniform permutation π_t of the clients (``jax.random.permutation`` of
    ``fold_in(key(seed), t)``); client π_t(i) applies ``local`` to the model left by π_t(i−1) with the
    key ``fold_in(fold_in(key(seed), t), π_t(i))``. ``model`` is updated in place at the end.

    Args:
      model: Flax NNX model. local: :func:`local_update`. clients: stacked ClientData (C clients).
      sigmas: (C,) noise std per client (≥ 0; used in float32, rounded up). epochs: T ≥ 1. seed: integer ≥ 0.
      test_data: Dataset or (x, y) for the test accuracy after every epoch, or None.

    Returns:
      :class:`ShuffledResult`.

    Example:
      >>> import numpy as np
      >>> from jaxpriv.federated import partition
      >>> from jaxpriv.train import data, dpsgd
      >>> d = data.load("digits", seed=0)
      >>> clients = partition.stack(d.x_train, d.y_train, partition.iid(d.y_train, 20, seed=0))
      >>> model = dpsgd.MLP(64, (32,), 10, rngs=nnx.Rngs(0))
      >>> local, _, sig = build(model, dpsgd.cross_entropy_loss, np.ones(20), 1e-5, clip=1.0,
      ...                       learning_rate=0.5, batch_size=72)
      >>> res = shuffled_sgd(model, local, clients, sig, epochs=3, test_data=d)
      >>> res.accuracies[-1] > 0.3, sorted(res.orders[0].tolist()) == list(range(20))
      (True, True)
    """
    from ..train.dpsgd import make_evaluator, padded_test_set
    from .simulator import as_test_arrays, check_clients

    c = check_clients(clients)
    epochs = int(check_array("epochs", epochs, 1.0, np.inf, integer=True))
    seed = int(check_array("seed", seed, 0.0, np.inf, integer=True))
    sig = round_to(check_array("sigmas", sigmas, 0.0, np.inf), np.float32)  # never below the given σ_i
    if sig.shape != (c,):
        raise ValueError(f"sigmas must have shape ({c},) (one per client), got {sig.shape}")
    test = as_test_arrays(test_data)
    graphdef, params, rest = nnx.split(model, nnx.Param, ...)
    stacked = jax.tree.map(jnp.asarray, clients)
    sig = jnp.asarray(sig)

    @jax.jit
    def epoch(params, key):
        order = jax.random.permutation(key, c)

        def visit(p, k):
            data = jax.tree.map(lambda a: a[k], stacked)
            res = local(p, sig[k], data, jax.random.fold_in(key, k))
            return jax.tree.map(lambda w, u: (w + u).astype(w.dtype), p, res.update), None

        return jax.lax.scan(visit, params, order)[0], order

    base = jax.random.key(seed)
    if test is not None:
        evaluate = make_evaluator(graphdef, 512)
        test_arrays = padded_test_set(test, 512)
    orders, accuracies = [], []
    for t in range(epochs):
        params, order = epoch(params, jax.random.fold_in(base, t))
        orders.append(np.asarray(order))
        if test is not None:
            accuracies.append(float(evaluate(params, rest, *test_arrays)[0]))
    nnx.update(model, params)
    return ShuffledResult(params, orders, accuracies)


# --------------------------------------------------------------------------------------------------
# accounting
# --------------------------------------------------------------------------------------------------


def advanced_composition(epsilon, delta_prime, rounds):
    """ε of the T-fold adaptive composition of (ε₀, δ₀)-DP mechanisms, at total δ = Tδ₀ + δ'.

    ε = ε₀ √(2T log(1/δ')) + T ε₀ (e^{ε₀} − 1)  (Dwork, Rothblum, Vadhan 2010; Dwork & Roth 2014, Thm 3.20).

    Args:
      epsilon: ε₀ ≥ 0 (array). delta_prime: δ' ∈ (0, 1). rounds: T ≥ 1 (integer).

    Returns:
      float64 array of ε (``inf`` where ε₀ is).

    Example:
      >>> round(float(advanced_composition(0.1, 1e-6, 100)), 4)
      6.3082
    """
    with float64():
        e = np.asarray(check_array("epsilon", epsilon, 0.0, np.inf, allow_inf=True), np.float64)
        dp = float(check_array("delta_prime", delta_prime, 0.0, 1.0, lo_open=True, hi_open=True))
        t = float(check_array("rounds", rounds, 1.0, np.inf, integer=True))
        with np.errstate(invalid="ignore", over="ignore"):
            out = e * math.sqrt(2.0 * t * math.log(1.0 / dp)) + t * e * np.expm1(e)
        return np.where(np.isinf(e), np.inf, out)


class Accounting(NamedTuple):
    """Result of :func:`accounting` (central guarantees after T epochs at total δ).

    Attributes:
      mu: the paper's per-epoch μ; mu_composed: √T·μ; epsilon_gdp: ε of √T·μ-GDP at δ (approximate).
      epsilon_basic: T·ε₀(δ/T) by the exact clone sum; epsilon_advanced: advanced composition of
      ε₀(δ/(2T)) at δ' = δ/2; epsilon_exact: the smaller of the two (a valid bound; per user when asked).
    """

    mu: float
    mu_composed: float
    epsilon_gdp: float
    epsilon_basic: Any
    epsilon_advanced: Any
    epsilon_exact: Any


def accounting(local_epsilons, local_deltas, rounds, delta, per_user: bool = False) -> Accounting:
    """GSPA's central privacy after T shuffled epochs: the paper's √T·μ and the exact clone accountant.

    Per epoch, the exact ε₀(δ₀) is :func:`jaxpriv.shuffle.personalized_epsilon` (``model="gspa"``, clone
    probabilities 2(1−δ_i)/(1+e^{ε_i}), MATH §3.1); composed by basic composition at δ₀ = δ/T and by
    advanced composition at δ₀ = δ/(2T), δ' = δ/2 (:func:`advanced_composition`); the smaller is
    reported. ε₀ is ``inf`` when δ₀ ≤ the target's own δ_t: the exact route needs δ > T·max δ_i.
    The μ route is GSPA Thm 5 (seed 003): √T·μ (:func:`jaxpriv.shuffle.gspa_mu_composed`) → ε by
    :func:`jaxpriv.fdp.gdp_epsilon` (an approximation, MATH §3.3).

    Args:
      local_epsilons: 1-D ε_i ≥ 0 (n ≥ 2). local_deltas: δ_i ∈ [0, 1), per client or shared.
      rounds: T ≥ 1 (integer). delta: total δ ∈ (0, 1). per_user: per-user ε (arrays) or the worst case.

    Returns:
      :class:`Accounting`.

    Example:
      >>> import numpy as np
      >>> acc = accounting(np.ones(1000), 0.0, rounds=10, delta=1e-6)
      >>> round(acc.mu_composed, 4), bool(acc.epsilon_exact < acc.epsilon_gdp)
      (0.2728, False)
    """
    eps = np.asarray(check_array("local_epsilons", local_epsilons, 0.0, np.inf), np.float64)
    if eps.ndim != 1 or eps.size < 2:
        raise ValueError(f"local_epsilons must be a 1-D array of at least 2 budgets, got shape {eps.shape}")
    deltas = np.broadcast_to(np.asarray(check_array("local_deltas", local_deltas, 0.0, 1.0, hi_open=True),
                                        np.float64), eps.shape)
    t = int(check_array("rounds", rounds, 1.0, np.inf, integer=True))
    delta = float(check_array("delta", delta, 0.0, 1.0, lo_open=True, hi_open=True))
    mu = float(bounds.gspa_mu(eps, deltas))
    mu_t = float(bounds.gspa_mu_composed(eps, t, deltas))
    eps_gdp = float(fdp.gdp_epsilon(mu_t, delta))
    one = lambda d0: np.asarray(personalized.personalized_epsilon(eps, d0, "gspa", deltas, per_user), np.float64)
    basic = t * one(delta / t)
    adv = advanced_composition(one(delta / (2 * t)), delta / 2, t)
    exact = np.minimum(basic, adv)
    if not per_user:
        basic, adv, exact = float(basic), float(adv), float(exact)
    return Accounting(mu, mu_t, eps_gdp, basic, adv, exact)


# --------------------------------------------------------------------------------------------------
# mean and frequency estimation (Alg. 1-2): utility against baselines, and their central ε
# --------------------------------------------------------------------------------------------------

#: The estimators compared: each user at its own ε_i (GSPA), everyone at min ε_i (the only common budget
#: that meets every user's), everyone at the mean ε_i (the same total budget spread evenly; it exceeds
#: the conservative users' budgets, a reference point, not an admissible mechanism).
ESTIMATORS = ("personalized", "minimum", "uniform_mean")


def _estimator_budgets(eps):
    return {"personalized": eps, "minimum": np.full_like(eps, eps.min()), "uniform_mean": np.full_like(eps, eps.mean())}


def _check_budgets(local_epsilons, n=None):
    eps = np.asarray(check_array("local_epsilons", local_epsilons, 0.0, np.inf, lo_open=True), np.float64)
    if eps.ndim != 1 or eps.size < 2 or (n is not None and eps.size != n):
        want = f"{n}" if n is not None else "at least 2"
        raise ValueError(f"local_epsilons must be a 1-D array of {want} per-user budgets, got shape {eps.shape}")
    return eps


def _check_seeds(seeds):
    try:
        seeds = tuple(seeds)
    except TypeError:
        raise ValueError(f"seeds must be a sequence of integers ≥ 0, got {seeds!r}") from None
    if not seeds:
        raise ValueError("seeds must hold at least one seed")
    return tuple(int(check_array("seeds", s, 0.0, np.inf, integer=True)) for s in seeds)


class EstimationResult(NamedTuple):
    """Outcome of :func:`mean_experiment` / :func:`frequency_experiment`; arrays are (estimator, seed).

    Attributes:
      estimators: :data:`ESTIMATORS`, the row order. truth: mean(x), the quantity estimated.
      mse: empirical mean squared error over the seed's trials. mae: empirical mean absolute error (the
      paper's Figure 3 metric). mse_exact: Var[z] + (E[z] − truth)² from the estimator's exact moments
      given the seed's assignment of budgets to users.
    """

    estimators: tuple
    truth: float
    mse: np.ndarray
    mae: np.ndarray
    mse_exact: np.ndarray


def _experiment(run, x, eps, seeds, trials, permute):
    """Each seed s: budgets assigned to users by the permutation default_rng(s) (if ``permute``), then
    ``trials`` runs of each estimator with the key key(s) (the same key for every estimator: common
    random numbers make the comparison sharper); ``run(key, x, budgets, trials)`` → Estimate."""
    seeds = _check_seeds(seeds)
    if np.ndim(trials) != 0:
        raise ValueError(f"trials must be an integer ≥ 1, got shape {np.shape(trials)}")
    trials = int(check_array("trials", trials, 1.0, np.inf, integer=True))
    if not isinstance(permute, (bool, np.bool_)):
        raise ValueError(f"permute must be a bool, got {permute!r}")
    truth = float(np.mean(x))
    budgets = _estimator_budgets(eps)
    shape = (len(ESTIMATORS), len(seeds))
    mse, mae, exact = np.empty(shape), np.empty(shape), np.empty(shape)
    for j, s in enumerate(seeds):
        order = np.random.default_rng(s).permutation(x.size) if permute else np.arange(x.size)
        for i, name in enumerate(ESTIMATORS):
            est = run(jax.random.key(s), x, budgets[name][order], trials)
            err = np.asarray(est.estimate, np.float64) - truth
            mse[i, j], mae[i, j] = np.mean(err**2), np.mean(np.abs(err))
            exact[i, j] = float(est.variance) + (float(est.expectation) - truth) ** 2
    return EstimationResult(ESTIMATORS, truth, mse, mae, exact)


def mean_experiment(x, local_epsilons, *, sensitivity=1.0, seeds=(0, 1, 2), trials=1000,
                    permute: bool = True) -> EstimationResult:
    """GSPA's mean-estimation experiment (seed 003 §"Mean Estimation", Fig. 3a-b; MATH §3.3): the MSE of
    Alg. 1 with personalized budgets against the :data:`ESTIMATORS` baselines.

    Every estimator is :func:`jaxpriv.shuffle.estimators.mean_estimation` (y_i = x_i + Lap(Δ/ε_i),
    shuffled, averaged; exact MSE (2Δ²/n²) Σ_i 1/ε_i²) run ``trials`` times per seed, with the budgets
    the estimator gives the users. Budgets enter the mean's MSE only through Σ 1/ε_i², so the
    assignment (``permute``) changes only the randomness.

    Args:
      x: the users' values, 1-D (n ≥ 2), inside an interval of length ``sensitivity``.
      local_epsilons: ε_i > 0, one per user (1-D, length n).
      sensitivity: Δ > 0, the width of the value domain.
      seeds: integers ≥ 0; seed s assigns the budgets to the users by the permutation
        ``numpy.random.default_rng(s)`` (the paper's random division into groups) and keys the noise
        with ``jax.random.key(s)``.
      trials: runs per seed and estimator (integer ≥ 1; the paper uses 1 000), batched.
      permute: False keeps ``local_epsilons`` attached to the users as given.

    Returns:
      :class:`EstimationResult`.

    Example:
      >>> import numpy as np
      >>> x = np.linspace(0.0, 1.0, 1000)
      >>> eps = np.repeat([0.1, 0.5, 1.0], [540, 370, 90])  # conservative / moderate / liberal
      >>> res = mean_experiment(x, eps, seeds=(0,), trials=500)
      >>> [round(float(v), 4) for v in res.mse_exact[:, 0]]  # personalized, minimum, uniform_mean
      [0.1111, 0.2, 0.0185]
    """
    xs = np.asarray(check_array("x", x), np.float64)
    if xs.ndim != 1 or xs.size < 2:
        raise ValueError(f"x must be a 1-D array of at least 2 users' values, got shape {xs.shape}")
    eps = _check_budgets(local_epsilons, xs.size)
    from ..shuffle import estimators

    run = lambda key, x_, e, t: estimators.mean_estimation(key, x_, e, sensitivity, trials=t)
    return _experiment(run, xs, eps, seeds, trials, permute)


def frequency_experiment(x, local_epsilons, *, seeds=(0, 1, 2), trials=1000, permute: bool = True) -> EstimationResult:
    """GSPA's frequency-estimation experiment (seed 003 §"Frequency estimation", Fig. 3c-d; MATH §3.3):
    the MSE of Alg. 2 for the density c = mean(x) of binary data, personalized against the baselines.

    Every estimator is :func:`jaxpriv.shuffle.estimators.frequency_estimation` (binary randomized
    response at ε_i, z = (A − B)/(n − 2B)). With personalized budgets E[z] = Σ w_i x_i / Σ w_i,
    w_i = tanh(ε_i/2): unbiased only on average over the random assignment of budgets to users, so
    ``mse_exact`` adds each assignment's squared bias (``permute=False`` with budgets tied to the data
    shows the bias the paper's "E(z) = c" omits).

    Args:
      x: binary values in {0, 1}, 1-D (n ≥ 2).
      local_epsilons, seeds, trials, permute: as :func:`mean_experiment`.

    Returns:
      :class:`EstimationResult`.

    Example:
      >>> import numpy as np
      >>> x = (np.arange(1000) % 10 < 7).astype(int)  # density c = 0.7
      >>> eps = np.repeat([0.1, 0.5, 1.0], [540, 370, 90])
      >>> res = frequency_experiment(x, eps, seeds=(0,), trials=500)
      >>> res.truth, bool(res.mse_exact[1, 0] > 5 * res.mse_exact[0, 0] > 5 * res.mse_exact[2, 0])
      (0.7, True)
    """
    xs = np.asarray(check_array("x", x, 0.0, 1.0, integer=True), np.float64)
    if xs.ndim != 1 or xs.size < 2:
        raise ValueError(f"x must be a 1-D array of at least 2 users' bits, got shape {xs.shape}")
    eps = _check_budgets(local_epsilons, xs.size)
    from ..shuffle import estimators

    run = lambda key, x_, e, t: estimators.frequency_estimation(key, x_.astype(np.int32), e, trials=t)
    return _experiment(run, xs, eps, seeds, trials, permute)


class EstimationAccounting(NamedTuple):
    """Result of :func:`estimation_accounting`; arrays are indexed like ``estimators``.

    Attributes:
      estimators: :data:`ESTIMATORS`. mu: the paper's μ (Thm 3/4). epsilon_gdp: ε of μ-GDP at δ
      (approximate). epsilon_exact: the exact clone-sum ε valid for every user (worst case).
      epsilon_exact_min: the smallest per-user exact ε (the most conservative user's).
    """

    estimators: tuple
    mu: np.ndarray
    epsilon_gdp: np.ndarray
    epsilon_exact: np.ndarray
    epsilon_exact_min: np.ndarray


def estimation_accounting(local_epsilons, delta=1e-6) -> EstimationAccounting:
    """Central privacy of one shuffled round of Alg. 1 / Alg. 2 for each of the :data:`ESTIMATORS`.

    Both algorithms' reports are pure ε_i-LDP (Laplace at Δ/ε_i, randomized response at ε_i), so both
    get the same numbers: the paper's μ = √(2 / (Σ_i 1/(1+e^{ε_i}) − max_i 1/(1+e^{ε_i}))) (GSPA Thm 3-4,
    :func:`jaxpriv.shuffle.gspa_mu`; an approximation) converted by :func:`jaxpriv.fdp.gdp_epsilon`, and
    the exact personalized clone sum (:func:`jaxpriv.shuffle.personalized_epsilon`, ``model="gspa"``,
    MATH §3.1), worst case and per user. The two uniform baselines are the same sum with equal budgets,
    i.e. the strong-clone sum :func:`jaxpriv.shuffle.clones_epsilon` (``clones="strong"``, one batched
    call; it equals ``personalized_epsilon`` on the constant vector to ~1e-10), where every user's ε is
    the worst case. Premise (MATH §3.1, FMT23 erratum): the strong-clone / GSPA model covers binary
    randomized response (Alg. 2); for Laplace reports (Alg. 1) it is the paper's model, not a proven
    bound.

    Args:
      local_epsilons: ε_i > 0, 1-D (n ≥ 2). delta: central δ ∈ (0, 1).

    Returns:
      :class:`EstimationAccounting`.

    Example:
      >>> import numpy as np
      >>> acc = estimation_accounting(np.repeat([0.1, 0.5, 1.0], [540, 370, 90]), 1e-6)
      >>> [round(float(v), 4) for v in acc.epsilon_exact]  # personalized, minimum, uniform_mean
      [0.1169, 0.0099, 0.0383]
      >>> round(float(acc.epsilon_exact_min[0]), 4), [round(float(v), 3) for v in acc.epsilon_gdp]
      (0.0106, [0.267, 0.25, 0.268])
    """
    eps = _check_budgets(local_epsilons)
    delta = check_array("delta", delta, 0.0, 1.0, lo_open=True, hi_open=True)
    if delta.ndim != 0:
        raise ValueError(f"delta must be a scalar in (0, 1), got shape {delta.shape}")
    delta = float(delta)
    budgets = _estimator_budgets(eps)
    stacked = np.stack([budgets[name] for name in ESTIMATORS])
    mu = np.asarray(bounds.gspa_mu(stacked), np.float64)
    eps_gdp = np.asarray(fdp.gdp_epsilon(mu, delta), np.float64)
    from ..shuffle import clones_epsilon

    uniform = np.asarray(clones_epsilon(stacked[1:, 0], eps.size, delta, "strong"), np.float64)
    exact = np.concatenate([[float(personalized.personalized_epsilon(eps, delta, "gspa"))], uniform])
    lowest = np.concatenate([[float(np.min(personalized.personalized_epsilon(eps, delta, "gspa", per_user=True)))],
                             uniform])
    return EstimationAccounting(ESTIMATORS, mu, eps_gdp, exact, lowest)


# --------------------------------------------------------------------------------------------------
# reproduce
# --------------------------------------------------------------------------------------------------


def _bounds_table(ns, eps0, delta):
    import warnings

    from ..shuffle import clones_epsilon

    rows = []
    for n in ns:
        mu = float(bounds.gspa_mu(np.full(n, eps0)))
        with warnings.catch_warnings():  # a closed form outside its validity region is inf: the table says
            warnings.simplefilter("ignore", RuntimeWarning)  # n/a and why, the figure leaves the point out
            closed = float(bounds.fmt22_closed_form(eps0, n, delta)), float(bounds.erlingsson19(eps0, n, delta))
        rows.append({
            "n": n,
            "gspa_mu_eps": float(fdp.gdp_epsilon(mu, delta)),
            "exact_clone": float(personalized.personalized_epsilon(np.full(n, eps0), delta, "gspa")),
            "fmt22_exact": float(clones_epsilon(eps0, n, delta, "fmt22")),
            "fmt22_closed": closed[0],
            "erlingsson19": closed[1],
        })
    return rows


_LEVELS = (0.54, 0.37, 0.09), (0.1, 0.5, 1.0)  # seed 003: f_c, f_m, f_l (Acquisti 2005) and ε_C, ε_M, ε_L


#: footnote ¹ of the estimation tables: one ε column serves both algorithms, but it is proven for one only
_STRONG_CLONE_NOTE = (
    "¹ The exact ε columns are the strong-clone (GSPA-model) clone sum, one number per budget vector for both "
    "algorithms. It is a bound for Alg. 2 (binary randomized response); for Alg. 1 (mean estimation, Laplace "
    "reports) it rests on the strong-clone premise, which is not proven for Laplace reports (MATH §3.1, FMT23 "
    "erratum): the paper's model, not a guarantee, for the mean rows.")
_INK_MAX = 16  # digits' pixels are ink counts in {0, …, 16} (UCI optdigits: 4×4 blocks of a 32×32 bitmap)


def _estimation_data():
    """Digits (all 1797 records): the centre pixel's raw ink count divided by 16 (the public domain
    {0, …, 16}, fixed by the data's format rather than read off the data, so Δ = 1) for the mean, and the
    bit "label < 7" (density ≈ 0.70, the paper's c) for frequencies. Records in ``data.load("digits",
    seed=0)``'s order (train, then test); the raw counts, not its standardised features."""
    from ..train import data

    x, y = data.read_table("digits")
    train, test = data.stratified_split(y, 0.2, 0)  # load("digits", seed=0)'s split
    order = np.concatenate([train, test])
    pixel = x[order, 36] / _INK_MAX
    assert np.all((pixel >= 0.0) & (pixel <= 1.0)), "digits' ink counts left {0, …, 16}"
    return pixel, (y[order] < 7).astype(np.int32)


def _level_budgets(n, f_c, eps_c):
    """The paper's rule: a fraction f_c of the users at ε_C, f_l = 0.09 at ε_L = 1, the rest at ε_M = 0.5
    (exact proportions, :func:`jaxpriv.shuffle.budgets.budgets`; the experiments assign them at random)."""
    from ..shuffle.budgets import budgets

    (_, _, f_l), (_, e_m, e_l) = _LEVELS
    return budgets(f"levels:{eps_c}@{f_c},{e_m}@{1 - f_c - f_l},{e_l}@{f_l}", n)


def _estimation_row(x_mean, x_freq, eps, seeds, trials, delta):
    """MSE / MAE of both experiments (mean over seeds) and the central ε of each estimator."""
    mean = mean_experiment(x_mean, eps, seeds=seeds, trials=trials)
    freq = frequency_experiment(x_freq, eps, seeds=seeds, trials=trials)
    row = {"n": int(eps.size)}
    for task, res in (("mean", mean), ("freq", freq)):
        for field in ("mse", "mse_exact", "mae"):
            row[f"{task}_{field}"] = [float(v) for v in getattr(res, field).mean(axis=1)]
    acc = estimation_accounting(eps, delta)
    for field in ("mu", "epsilon_gdp", "epsilon_exact", "epsilon_exact_min"):
        row[field] = [float(v) for v in getattr(acc, field)]
    return row


_ESTIMATOR_LABELS = {"personalized": "personalized (GSPA)", "minimum": "all at min ε_i",
                     "uniform_mean": "all at mean ε_i"}
_SWEEP_LABELS = {"f_c": "fraction of conservative users f_c", "eps_c": "conservative budget ε_C", "n": "n"}


def plot_estimation(rows, path: str, title: str) -> str:
    """MSE of mean and frequency estimation (rows: the estimation sweeps of :func:`reproduce`, each with
    ``sweep``, the swept value and ``{task}_mse`` / ``{task}_mse_exact`` per :data:`ESTIMATORS`): one column
    per sweep, lines the exact MSE, dots the empirical one; one legend below the panels."""
    from matplotlib.figure import Figure

    columns = [c for c in _SWEEP_LABELS if any(r["sweep"] == c for r in rows)]
    fig = Figure(figsize=(4.4 * len(columns), 7.4), layout="constrained")
    ax = fig.subplots(2, len(columns), squeeze=False)
    for col, sweep in enumerate(columns):
        sub = [r for r in rows if r["sweep"] == sweep]
        xs = [r["n" if sweep == "n" else sweep] for r in sub]
        for r_i, (task, name) in enumerate((("mean", "mean (pixel ink)"), ("freq", "frequency (label < 7)"))):
            for i, est in enumerate(ESTIMATORS):
                line, = ax[r_i, col].semilogy(xs, [r[f"{task}_mse_exact"][i] for r in sub], label=_ESTIMATOR_LABELS[est])
                ax[r_i, col].semilogy(xs, [r[f"{task}_mse"][i] for r in sub], "o", color=line.get_color(), ms=4)
            ax[r_i, col].set(xlabel=_SWEEP_LABELS[sweep], ylabel="MSE", title=name)
            if sweep == "n":
                ax[r_i, col].set_xscale("log")
    fig.legend(*ax[0, 0].get_legend_handles_labels(), loc="outside lower center", ncols=len(ESTIMATORS), fontsize=8)
    fig.suptitle(title, fontsize=10)
    fig.savefig(path, dpi=100)
    return path


def _estimation(quick, seeds, out_dir, delta=1e-6):
    """Mean and frequency estimation (Fig. 3 of seed 003) on digits: sweeps of f_c, ε_C and n, named budget
    scenarios, the figure, table lines and numbers. Quick: fewer sweep points, no n sweep, one scenario."""
    from ..budgets import scenario
    from ..shuffle import estimators

    x_mean, x_freq = _estimation_data()
    trials = 1000  # the paper's repetitions
    (f_c0, _, _), (eps_c0, _, _) = _LEVELS
    sweeps = {
        "f_c": (0.01, 0.25, 0.5) if quick else (0.01, 0.1, 0.2, 0.3, 0.4, 0.5),
        "eps_c": (0.05, 0.1, 0.5) if quick else (0.05, 0.1, 0.2, 0.3, 0.4, 0.5),
        "n": () if quick else (100, 300, 1000, x_mean.size),
    }
    cache, rows = {}, []
    for sweep, values in sweeps.items():
        for v in values:
            f_c, eps_c, n = (v if sweep == "f_c" else f_c0), (v if sweep == "eps_c" else eps_c0), \
                (v if sweep == "n" else x_mean.size)
            if (f_c, eps_c, n) not in cache:
                cache[f_c, eps_c, n] = _estimation_row(x_mean[:n], x_freq[:n], _level_budgets(n, f_c, eps_c),
                                                       seeds, trials, delta)
            rows.append({"sweep": sweep, "f_c": f_c, "eps_c": eps_c, **cache[f_c, eps_c, n]})
    scen = []
    for name in ("ThreeLevels",) if quick else ("ThreeLevels", "MixGauss2", "BoundedPareto"):
        row = _estimation_row(x_mean, x_freq, scenario(name, x_mean.size, seed=0), seeds, trials, delta)
        scen.append({"scenario": name, **row})
    # budgets tied to the data: the conservative users are the ones with x_i = 1 (Thm 4's "E(z) = c" fails)
    eps = _level_budgets(x_freq.size, f_c0, eps_c0)
    tied = eps[np.argsort(np.argsort(-x_freq, kind="stable"), kind="stable")]
    tied_mean = float(estimators.frequency_estimation(jax.random.key(0), x_freq, tied).expectation)

    path = plot_estimation(rows, os.path.join(out_dir, "gspa_estimation.png"),
                           f"GSPA Alg. 1-2 on digits (n = {x_mean.size} unless swept): lines exact MSE, dots "
                           f"{trials} trials")

    three = lambda v, f: " / ".join(format(u, f) for u in v)
    md = ["", f"Mean / frequency estimation on digits (Alg. 1-2; δ = {delta:g}; {trials} trials × {len(seeds)} "
          "seed(s); budgets: f_c at ε_C, 0.09 at 1, the rest at 0.5, assigned at random). MSE and central ε for "
          "personalized / all at min ε_i / all at mean ε_i (the last exceeds the conservative users' budgets).", "",
          "| sweep | f_c | ε_C | n | mean MSE | freq. MSE | exact ε (worst)¹ | exact ε, most conservative user¹ | "
          "GSPA μ→ε |", "|---|---|---|---|---|---|---|---|---|"]
    md += [f"| {r['sweep']} | {r['f_c']:g} | {r['eps_c']:g} | {r['n']} | {three(r['mean_mse'], '.2e')} | "
           f"{three(r['freq_mse'], '.2e')} | {three(r['epsilon_exact'], '.4f')} | "
           f"{three(r['epsilon_exact_min'][:1], '.4f')} | {three(r['epsilon_gdp'], '.3f')} |" for r in rows]
    md += ["", "| scenario (jaxpriv.budgets) | n | mean MSE | freq. MSE | exact ε (worst)¹ | exact ε, most "
           "conservative user¹ | GSPA μ→ε |", "|---|---|---|---|---|---|---|"]
    md += [f"| {r['scenario']} | {r['n']} | {three(r['mean_mse'], '.2e')} | {three(r['freq_mse'], '.2e')} | "
           f"{three(r['epsilon_exact'], '.4f')} | {r['epsilon_exact_min'][0]:.4f} | {three(r['epsilon_gdp'], '.3f')} |"
           for r in scen]
    md += ["", f"Budgets tied to the data (conservative users = those with label < 7): E[z] = {tied_mean:.4f} "
           f"against c = {float(np.mean(x_freq)):.4f}.", "", _STRONG_CLONE_NOTE]
    default = cache[f_c0, eps_c0, x_mean.size]
    fc = [r for r in rows if r["sweep"] == "f_c"]
    join = lambda v, f: " / ".join(format(u, f) for u in v)
    # Thm 4's E(z) = c is a statement on average over the random assignment of the budgets to the users
    assigned = [float(estimators.frequency_estimation(jax.random.key(0), x_freq,
                                                      np.random.default_rng(k).permutation(eps)).expectation)
                for k in range(20)]
    linear = {sweep: {task: _r2([r[sweep] for r in rows if r["sweep"] == sweep],
                                [r[f"{task}_mae"][0] for r in rows if r["sweep"] == sweep]) for task in ("mean", "freq")}
              for sweep in ("f_c", "eps_c")}
    slope = {sweep: {task: float(np.polyfit([r[sweep] for r in rows if r["sweep"] == sweep],
                                            [r[f"{task}_mae"][0] for r in rows if r["sweep"] == sweep], 1)[0])
                     for task in ("mean", "freq")} for sweep in ("f_c", "eps_c")}
    why = [
        f"Estimation: digits (n = {x_mean.size}: the centre pixel's ink count / 16 and the bit label < 7) replaces "
        "the paper's 10 000 synthetic records; we report MSE with its exact value (the paper plots MAE, which is in "
        "systems.json).",
        f"The mean's MSE (2/n²) Σ 1/ε_i² is exactly linear in f_c ({fc[0]['mean_mse_exact'][0]:.2e} at f_c = "
        f"{fc[0]['f_c']:g} to {fc[-1]['mean_mse_exact'][0]:.2e} at {fc[-1]['f_c']:g}); the paper's MAE (∝ its "
        "square root) is not, and the error falls like 1/ε_C², not linearly, as ε_C grows.",
        f"Personalized budgets beat all-at-min ε_i (mean MSE {default['mean_mse'][0]:.2e} vs "
        f"{default['mean_mse'][1]:.2e}, frequency {default['freq_mse'][0]:.2e} vs {default['freq_mse'][1]:.2e}) and "
        f"lose to all-at-mean ε_i, which breaks the conservative users' budgets ({default['mean_mse'][2]:.2e} / "
        f"{default['freq_mse'][2]:.2e}).",
        f"The paper's μ barely separates the three (μ→ε {join(default['epsilon_gdp'], '.3f')}); the exact clone sum "
        f"does ({join(default['epsilon_exact'], '.4f')}; for Alg. 1 only under the strong-clone premise, see ¹). "
        f"μ→ε even exceeds the all-at-min baseline's local ε = {eps_c0:g}.",
        f"Alg. 2's E(z) = c holds on average over random assignments of the budgets ({np.mean(assigned):.4f} "
        f"against c = {float(np.mean(x_freq)):.4f}); tied to the data, E[z] = {tied_mean:.4f}.",
    ]
    return {"figure": path, "md": md, "why": why,
            "ours": {"rows": rows, "scenarios": scen, "tied_expectation": tied_mean, "density": float(np.mean(x_freq)),
                     "random_assignment_expectation": assigned, "mae_linear_r2": linear, "mae_slope": slope}}


def _r2(x, y) -> float:
    """R² of the least-squares line through (x, y)."""
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    fit = np.polyval(np.polyfit(x, y, 1), x)
    total = float(np.sum((y - y.mean()) ** 2))
    return 1.0 - float(np.sum((y - fit) ** 2)) / total if total > 0 else 1.0


def reproduce(quick: bool = True, out_dir: str = ".", seeds=(0, 1, 2)) -> dict:
    """Regenerate GSPA's headline results: bound comparison over n, the E-APES Eq. 14 / TV figure, a
    small shuffled-SGD accuracy run on digits (personalized ε_i ~ U(0.5, 1), δ_i = 1e-6, with its
    non-private twin, and the paper's Figure 4 pair: constant ε₀ = 0.5 against U(0.01, 2)), the mean /
    frequency estimation experiments (Fig. 3: MSE against f_c, ε_C and n, personalized against the
    :data:`ESTIMATORS` baselines, with each one's central ε by :func:`estimation_accounting`), and the
    papers' privacy claims on their own budget tables at n = 10⁴ (E-APES: μ-GDP below APES Theorem 4;
    GSPA: at least 33% below the existing closed forms).

    Args:
      quick: fewer n values, epochs, sweep points and seeds (well under a minute). out_dir: where the
        PNGs go.
      seeds: integers ≥ 0, seeds of the accuracy runs and of the estimation experiments (quick: the first).

    Returns:
      dict with ``title, paper, ours, headlines, why_different, figures, table_markdown``: ``headlines``
      are the E-APES (seed 001) and GSPA (seed 003) rows of the headline table (:mod:`jaxpriv.reproduce`),
      ``why_different`` a list of short reasons.
    """
    import warnings

    from ..reproduce import claim, compare
    from ..shuffle import clones_epsilon, multinomial
    from ..shuffle.budgets import budgets
    from ..train import data, dpsgd
    from . import partition

    seeds = _check_seeds(seeds)
    os.makedirs(out_dir, exist_ok=True)
    seeds = seeds[:1] if quick else seeds
    ns = [100, 1000, 10_000] if quick else [100, 300, 1000, 3000, 10_000, 100_000]
    table = _bounds_table(ns, 0.5, 1e-6)
    tv_ns = [50, 100, 1000, 3000] if quick else [50, 100, 300, 1000, 3000, 10_000]
    tv = []
    for n in tv_ns:
        p = multinomial.clone_probabilities(np.full(n - 1, 0.1), 1.0 / n)
        tv.append((n, float(multinomial.gspa_eq14(p)), float(multinomial.lattice_gaussian_tv(p))))
    fig_bounds = plot_bounds(ns, table, tv, os.path.join(out_dir, "gspa_bounds.png"))

    # Shuffled SGD (Alg. 3) on digits: the main run (ε_i ~ U(0.5, 1), classical σ_i), its non-private twin,
    # and the paper's Figure 4 pair (constant ε₀ = 0.5 against U(0.01, 2); analytic σ_i: ε_i > 1 occurs).
    d = data.load("digits", seed=0)
    n_clients, epochs = 10, (8 if quick else 20)
    m = int(np.ceil(d.n_train / n_clients))
    rng = np.random.default_rng(0)
    local_eps = rng.uniform(0.5, 1.0, n_clients)
    runs = {"gspa": (local_eps, "classical", 1.0), "non_private": (local_eps, "classical", 0.0),
            "constant_0.5": (np.full(n_clients, 0.5), "analytic", 1.0),
            "uniform_0.01_2": (budgets("uniform:0.01,2", n_clients), "analytic", 1.0)}
    acc, sigmas = {name: [] for name in runs}, {}
    for s in seeds:
        clients = partition.stack(d.x_train, d.y_train, partition.iid(d.y_train, n_clients, seed=s))
        for name, (eps_i, calibration, scale) in runs.items():
            model = dpsgd.MLP(64, (16,), 10, rngs=nnx.Rngs(s))
            local, _, sig = build(model, dpsgd.cross_entropy_loss, eps_i, 1e-6, clip=1.0, learning_rate=0.5,
                                  batch_size=m, calibration=calibration)
            sigmas[name] = sig * scale
            res = shuffled_sgd(model, local, clients, sig * scale, epochs=epochs, seed=s, test_data=d)
            acc[name].append(res.accuracies[-1])
    mean_acc = {name: float(np.mean(v)) for name, v in acc.items()}
    dim = 64 * 16 + 16 + 16 * 10 + 10  # the MLP's weights
    noise_norm = float(np.mean(sigmas["gspa"])) * math.sqrt(dim)  # per step, against a clipped mean of norm ≤ C = 1
    acct = accounting(local_eps, 1e-6, epochs, 1e-3)
    md = ["| n | GSPA μ→ε | exact clone | FMT22 exact | FMT22 closed | Erlingsson19 |", "|---|---|---|---|---|---|"]
    closed = lambda x: f"{x:.4f}" if math.isfinite(x) else "n/a"  # noqa: E731
    md += [f"| {r['n']} | {r['gspa_mu_eps']:.4f} | {r['exact_clone']:.4f} | {r['fmt22_exact']:.4f} | "
           f"{closed(r['fmt22_closed'])} | {closed(r['erlingsson19'])} |" for r in table]
    if any(not math.isfinite(r[key]) for r in table for key in ("fmt22_closed", "erlingsson19")):
        md += ["", "n/a: outside the closed form's validity region (FMT22: ε₀ ≤ log(n / (16 log(2/δ))); "
               "Erlingsson et al.: ε₀ ≤ 1/2, n ≥ 1000, δ ≤ 1/100)."]
    md += ["", "| n | Eq. 14 | TV bound |", "|---|---|---|"] + [f"| {n} | {a:.4f} | {b:.4f} |" for n, a, b in tv]
    md += ["", f"Shuffled SGD on digits ({n_clients} clients of m = {m} records, {epochs} epochs, δ_i = 1e-6, "
           f"{len(seeds)} seed(s)):", "", "| local budgets ε_i | σ_i calibration | test accuracy |", "|---|---|---|",
           f"| U(0.5, 1) | classical | {mean_acc['gspa']:.3f} |",
           f"| U(0.5, 1), no noise (non-private) | — | {mean_acc['non_private']:.3f} |",
           f"| constant 0.5 | analytic | {mean_acc['constant_0.5']:.3f} |",
           f"| U(0.01, 2) | analytic | {mean_acc['uniform_0.01_2']:.3f} |", "",
           f"Central ε of the U(0.5, 1) run at δ = 1e-3: √T·μ → {acct.epsilon_gdp:.3f} (approx.), exact clone + "
           f"composition {acct.epsilon_exact:.3f}."]
    est = _estimation(quick, seeds, out_dir)
    md += est["md"]
    # Many rounds (MATH §3.1, §7): √T·μ beside the exact pair composed by PLD, at uniform ε₀ = 1, n = 10⁴.
    from ..reproduce.rounds import rounds_report

    many_rounds = [1, 10, 100, 1000]
    rounds_path = os.path.join(out_dir, "gspa_epsilon_vs_rounds.png")
    lines, composed = rounds_report(np.ones(10_000), 1e-6, many_rounds, rounds_path,
                                    "GSPA setting (uniform ε₀ = 1, n = 10⁴, δ = 1e-6): central ε vs rounds")
    md += ["", "Central ε after T rounds, uniform ε₀ = 1, n = 10⁴ (the APES-model row is FMT22's clones, valid for "
           "any ε₀-LDP randomizer; the GSPA row the strong clones of the FMT23 class):", "", *lines]

    # The papers' privacy claims, on the papers' own budget tables (n = 10⁴).
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # closed forms outside validity: inf, a lost comparison
        e_apes = {}  # E-APES Table 3, δ = 1/n: μ→ε against [LZXCL23] = APES Theorem 4
        for name, spec in (("Uniform 1", "uniform:0.05,1"), ("Uniform 2", "uniform:0.01,2"),
                           ("Gauss 1", "gauss:0.5,0.2,clip=0.05,1"), ("Gauss 2", "gauss:1,0.2,clip=0.01,2"),
                           ("Gauss 3", "gauss:1,0.5,clip=0.01,2")):
            eps_i = budgets(spec, 10_000)
            e_apes[name] = (float(fdp.gdp_epsilon(float(bounds.gspa_mu(eps_i)), 1e-4)),
                            float(bounds.apes_theorem4(eps_i, 1e-4)[0]))
        reduction = {}  # GSPA Table 2, δ = 1e-4: 1 − μ→ε / the best of [Liu23], [FMT22], [Erlingsson19]
        for name, spec in (("Unif 1", "uniform:0.01,1"), ("Unif 2", "uniform:0.01,2"), ("Constant", "levels:0.5@1"),
                           ("Mixed", "levels:0.5@0.5,0.01@0.5")):
            eps_i = budgets(spec, 10_000)
            top = float(eps_i.max())
            ours_eps = float(fdp.gdp_epsilon(float(bounds.gspa_mu(eps_i)), 1e-4))
            best = min(float(bounds.apes_theorem4(eps_i, 1e-4)[0]), float(bounds.fmt22_closed_form(top, 10_000, 1e-4)),
                       float(bounds.erlingsson19(top, 10_000, 1e-4)))
            reduction[name] = {"gspa_mu_epsilon": ours_eps, "best_existing_closed_form": best,
                               "reduction": 1.0 - ours_eps / best}
        # where the claim is tightest (one budget for all), the exact strong-clone bound (a bound, not an approx.)
        reduction["Constant"]["exact_strong_clones"] = float(clones_epsilon(0.5, 10_000, 1e-4, clones="strong"))

    eq14_50 = next(v for n, v, _ in tv if n == 50)
    tv_50 = next(t for n, _, t in tv if n == 50)
    non_private = 100 * mean_acc["non_private"]
    acc_why = (f"digits, {n_clients} clients × {m} records, {epochs} epochs (paper: MNIST, 100 × 600, 50): "
               f"noise norm ≈{noise_norm:.1f} per step vs a clipped gradient ≤ 1")
    est_o = est["ours"]
    c = est_o["density"]
    headlines = [
        compare("E-APES (seed 001)", "Eq. 14 '‖P̃ − Q̃‖_TV' at ε₀ = 0.1, δ₀ = 1/n (n not stated)", 0.0206, eq14_50,
                ours_text=f"{eq14_50:.4f} at n = 50; proven TV bound there {tv_50:.4f}",
                why="Eq. 14 at n = 50 is not 0.0206 (the papers do not state n)"),
        compare("E-APES (seed 001)", "shuffled-SGD test accuracy on MNIST, ~50 epochs", 96.78, 100 * mean_acc["gspa"],
                kind="points", why=acc_why, stand_in="digits", ours_text=f"{100 * mean_acc['gspa']:.2f}% (non-private {non_private:.2f}%)"),
        claim("E-APES (seed 001)", "μ-GDP bound below [LZXCL23] (APES Thm 4) for every Table 3 budget law",
              "below in all scenarios", all(g < a for g, a in e_apes.values()),
              ", ".join(f"{k} {g:.3f} vs {a:.3f}" for k, (g, a) in e_apes.items()) + " (n = 10⁴, δ = 1e-4)",
              why="APES Theorem 4 is tighter for some budget law"),
        compare("GSPA (seed 003)", "shuffled-SGD test accuracy on MNIST, ~50 epochs", 96.78, 100 * mean_acc["gspa"],
                kind="points", why=acc_why, stand_in="digits", ours_text=f"{100 * mean_acc['gspa']:.2f}% (non-private {non_private:.2f}%)"),
        compare("GSPA (seed 003)", "test accuracy, constant ε₀ = 0.5 (Fig. 4)", 94.8, 100 * mean_acc["constant_0.5"],
                kind="points", why=acc_why, stand_in="digits"),
        compare("GSPA (seed 003)", "test accuracy, ε_i ~ U(0.01, 2) (Fig. 4)", 93.5, 100 * mean_acc["uniform_0.01_2"],
                kind="points", why=acc_why, stand_in="digits"),
        claim("GSPA (seed 003)", "constant ε₀ = 0.5 more accurate than U(0.01, 2)", "94.8% > 93.5%",
              mean_acc["constant_0.5"] > mean_acc["uniform_0.01_2"],
              f"{100 * mean_acc['constant_0.5']:.1f}% vs {100 * mean_acc['uniform_0.01_2']:.1f}%",
              why="U(0.01, 2)'s larger budgets outweigh its noisiest clients here", stand_in="digits"),
        claim("GSPA (seed 003)", "privacy loss at least 33% below existing bounds (Table 2 laws, n = 10⁴)", "≥ 33%",
              min(r["reduction"] for r in reduction.values()) >= 0.33,
              "reduction " + ", ".join(f"{k} {r['reduction']:.0%}" for k, r in reduction.items()),
              why="μ→ε is less than 33% below the best closed form for some law"),
        claim("GSPA (seed 003)", "estimation error grows linearly with f_c (Fig. 3; MAE, R² ≥ 0.99)", "linear",
              all(v >= 0.99 for v in est_o["mae_linear_r2"]["f_c"].values())
              and all(v > 0 for v in est_o["mae_slope"]["f_c"].values()),
              "R² mean {mean:.3f}, frequency {freq:.3f}".format(**est_o["mae_linear_r2"]["f_c"]),
              why="MAE ∝ √MSE, and the mean's MSE (2/n²) Σ 1/ε_i² is linear in f_c: the MAE is concave"),
        claim("GSPA (seed 003)", "estimation error falls linearly as ε_C grows (Fig. 3; MAE, R² ≥ 0.99)", "linear",
              all(v >= 0.99 for v in est_o["mae_linear_r2"]["eps_c"].values())
              and all(v < 0 for v in est_o["mae_slope"]["eps_c"].values()),
              "R² mean {mean:.3f}, frequency {freq:.3f}".format(**est_o["mae_linear_r2"]["eps_c"]),
              why="the error falls like 1/ε_C (MAE) or 1/ε_C² (MSE), not linearly"),
        compare("GSPA (seed 003)", "E[z] of Alg. 2 (Thm 4: unbiased, E[z] = c)", c,
                float(np.mean(est_o["random_assignment_expectation"])),
                paper_text=f"c = {c:.4f}", why="budgets tied to the data",
                ours_text=f"{np.mean(est_o['random_assignment_expectation']):.4f} (random budgets); "
                          f"{est_o['tied_expectation']:.4f} tied to the data"),
    ]
    return {
        "title": "GSPA (seed 003) and E-APES (seed 001): shuffled personalized Gaussian SGD",
        "paper": "E-APES: Eq. 14 '‖P̃ − Q̃‖_TV' = 0.0206 at ε₀ = 0.1, δ₀ = 1/n; 96.78% on MNIST after ~50 epochs; "
                 "bound below [LZXCL23]. GSPA: Alg. 3 'approximately satisfies √T·μ-GDP'; 96.78% on MNIST; 94.8% "
                 "(constant ε₀ = 0.5) against 93.5% (U(0.01, 2)); 'at least 33%' less privacy loss; mean/frequency "
                 "estimation (Fig. 3, n = 10 000 synthetic records, 1 000 repetitions, MAE plotted, no numbers): "
                 "utility linear in f_c and in ε_C, and Thm 4 'z is an unbiased estimator of c'.",
        "ours": {"bounds": table, "eq14_tv": tv, "accuracy": acc, "sigma_mean": {k: float(np.mean(v)) for k, v in
                                                                                  sigmas.items()},
                 "accuracy_gspa": acc["gspa"], "accuracy_non_private": acc["non_private"],
                 "epsilon_gdp": acct.epsilon_gdp,
                 "epsilon_after_rounds": {"rounds": many_rounds,
                                          **{name: row["epsilon"].tolist() for name, row in composed.items()}},
                 "epsilon_exact": acct.epsilon_exact, "estimation": est["ours"],
                 "e_apes_table3_gspa_vs_apes_theorem4": e_apes, "gspa_table2_reduction": reduction},
        "headlines": headlines,
        "why_different": [
            f"Eq. 14 gives the papers' 0.0206 at n = 50 (they do not state n), but it is a quarter-box sup, not a "
            f"TV distance: the proven TV bound there is {tv_50:.4f}, and that is what the GDP approximation needs.",
            f"Accuracy, data: digits (1,437 training records, 8×8) replaces MNIST (60,000, 28×28); the same model "
            f"reaches {non_private:.1f}% without noise here, the ceiling of this setting.",
            f"Accuracy, noise: σ_i = (2C/m)√(2 ln(1.25/δ_i))/ε_i falls with the client's size m; with {n_clients} "
            f"clients of m = {m} (paper: 100 of 600) the mean σ_i is {np.mean(sigmas['gspa']):.3f} per coordinate, "
            f"a noise norm of ≈{noise_norm:.1f} on the {dim} weights against a clipped mean gradient of norm ≤ C = 1.",
            f"Accuracy, steps: {n_clients} clients × {epochs} epochs = {n_clients * epochs} noisy steps (paper: "
            "100 × 50 = 5,000); the full run's 20 epochs average more of the noise away than quick mode's 8.",
            "Figure 4's pair runs with analytic σ_i (the classical formula holds only for ε_i ≤ 1); U(0.01, 2) "
            "gives its most conservative clients a σ_i several times the others'.",
            "√T·μ drops a Berry–Esseen term (an approximation, not a bound); the exact clone sum with composition "
            "is a bound (and needs δ > T·max δ_i). The 33% claim is against the closed forms: for the constant law "
            f"the exact strong-clone bound is {reduction['Constant']['exact_strong_clones']:.4f}, against μ→ε "
            f"{reduction['Constant']['gspa_mu_epsilon']:.4f}.",
            "Per-example clipping makes σ_i's 2C/m sensitivity correct; the shuffle accountants assume each report "
            "is LDP (record-level calibration is the paper's model).",
            *est["why"],
        ],
        "figures": [fig_bounds, est["figure"], rounds_path],
        "table_markdown": "\n".join(md),
    }


def plot_bounds(ns, table, tv, path: str) -> str:
    """Left: central ε of one round against n at ε₀ = 0.5 (rows of ``_bounds_table``); right: the papers'
    Eq. 14 against the proven TV bound τ at ε₀ = 0.1, δ₀ = 1/n (``tv``: (n, Eq. 14, τ) triples). Legends
    below the axes."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(10, 4.8), layout="constrained")
    ax = fig.subplots(1, 2)
    for key, label in [("gspa_mu_eps", "GSPA μ-GDP (approx.)"), ("exact_clone", "exact strong clones"),
                       ("fmt22_exact", "FMT22 exact"), ("fmt22_closed", "FMT22 closed form"),
                       ("erlingsson19", "Erlingsson+19")]:
        values = np.asarray([r[key] for r in table], dtype=np.float64)
        finite = np.isfinite(values)  # closed forms outside their validity: inf, left out
        ax[0].loglog(np.asarray(ns)[finite], values[finite], marker="o", label=label)
    ax[0].set(xlabel="n", ylabel="central ε (δ = 1e-6)", title="ε₀ = 0.5, one round")
    ax[0].grid(True, which="both", alpha=0.3)
    ax[0].legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.15), ncols=3)
    ax[1].loglog([r[0] for r in tv], [r[1] for r in tv], marker="o", label="papers' Eq. 14 (not a TV)")
    ax[1].loglog([r[0] for r in tv], [r[2] for r in tv], marker="s", label="proven TV bound τ")
    ax[1].set(xlabel="n", ylabel="distance", title="ε₀ = 0.1, δ₀ = 1/n")
    ax[1].grid(True, which="both", alpha=0.3)
    ax[1].legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.15), ncols=2)
    fig.savefig(path, dpi=100)
    return path
