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
from ..train.programs import Program, ProgramCache
from .protocol import WithNumbers, split_numbers
from .simulator import Aggregator, LocalResult, mean_aggregator

__all__ = ["CALIBRATIONS", "UNITS", "client_sigmas", "local_update", "shuffle_aggregator", "build",
           "shuffled_sgd", "ShuffledResult", "Accounting", "accounting", "advanced_composition", "ESTIMATORS",
           "EstimationResult", "mean_experiment", "frequency_experiment", "EstimationAccounting",
           "estimation_accounting"]

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
      a LocalUpdate (a :class:`~jaxpriv.federated.protocol.WithNumbers`: C, η, m and ``rest`` are arguments of
      the compiled round) with metrics ``{"loss": mean loss of the client's records}``.

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
    # C, η, m and the model's other state are numbers of the round (arguments), the rest its structure
    numbers = {"clip": jnp.asarray(clip), "learning_rate": jnp.asarray(lr), "m": jnp.asarray(float(m)), "rest": rest}
    return WithNumbers(_local_fn(loss_fn, graphdef), numbers)


def _local_fn(loss_fn, graphdef):
    def update(numbers, global_params, sigma, data: ClientData, key):
        lr, m = numbers["learning_rate"], numbers["m"]
        out = split_clipped_grad_sum(loss_fn, graphdef, global_params, numbers["rest"], data.x, data.y,
                                     clip_norm=numbers["clip"], mask=data.mask)
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
    local_fn, local_numbers = split_numbers(local)
    epoch = EPOCH_PROGRAMS(local_fn)  # shared by every run of the same structure: σ_i, C, η are arguments

    base = jax.random.key(seed)
    if test is not None:
        evaluate = make_evaluator(graphdef, 512)
        test_arrays = padded_test_set(test, 512)
    orders, accuracies = [], []
    for t in range(epochs):
        params, order = epoch(params, jax.random.fold_in(base, t), stacked, sig, local_numbers)
        orders.append(np.asarray(order))
        if test is not None:
            accuracies.append(float(evaluate(params, rest, *test_arrays)[0]))
    nnx.update(model, params)
    return ShuffledResult(params, orders, accuracies)


def _build_epoch(local_fn) -> Program:
    """One epoch of :func:`shuffled_sgd` (Alg. 3): ``epoch(params, key, clients, sigmas, numbers)``."""

    def epoch(params, key, stacked, sig, numbers):
        c = sig.shape[0]
        order = jax.random.permutation(key, c)

        def visit(p, k):
            data = jax.tree.map(lambda a: a[k], stacked)
            res = local_fn(numbers, p, sig[k], data, jax.random.fold_in(key, k))
            return jax.tree.map(lambda w, u: (w + u).astype(w.dtype), p, res.update), None

        return jax.lax.scan(visit, params, order)[0], order

    return Program(epoch)


#: :func:`shuffled_sgd`'s epoch programs, one per local update structure
EPOCH_PROGRAMS = ProgramCache(_build_epoch, maxsize=8)


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
