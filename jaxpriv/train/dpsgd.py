"""DP-SGD on Flax NNX + Optax, with the privacy accounted in the loop (MATH §5, §6).

One step (Abadi et al. 2016, with Poisson sampling as analysed by Mironov, Talwar, Zhang 2019):
Poisson-sample a batch (:mod:`jaxpriv.train.sampling`, padded to a fixed bucket with a mask), clip each
example's gradient and sum (:func:`jaxpriv.train.clipping.clipped_grad_sum`), add N(0, s²) with
s = σ·C and divide by the *expected* batch size Σ_i q_i (:func:`jaxpriv.train.noise.gaussian_noise`),
then apply any Optax optimizer. The step is one jitted function of arrays (the NNX graph definition is
static), compiled once per bucket size.

Privacy is planned before training (:func:`plan_privacy`) and accounted after every epoch
(:class:`GroupAccountant`). Records are grouped by their (rate, noise multiplier); each group's ε is
the exact RDP of the Poisson-subsampled Gaussian (MATH §1.3) composed over the steps taken (§1.7) and
converted (§1.8) by the core's own kernel, :func:`jaxpriv.dpsgd_epsilon`. Configurations:

* **target ε** — σ calibrated to ε for the planned number of steps (:func:`jaxpriv.calibrate.noise_multiplier`);
  or, when σ is given too, the rate q (:func:`jaxpriv.calibrate.sampling_rate`);
* **fixed σ** — no target; ε is reported;
* **per-record budgets**, IDP-SGD (Boenisch et al. 2023, "Have it your way"; MATH §5) with exact inversion:

  - ``"sample"``: one σ for everyone, per-group rates q_g with ε_g(q_g, σ, T) = budget_g; σ is solved so
    that the mean rate Σ_i q_i / N equals the batch rate B/N (the expected batch size is unchanged).
    With σ given, σ is kept and only the q_g are calibrated (rPDP-FL's per-record rates, MATH §6).
  - ``"scale"``: one rate q = B/N for everyone and per-group noise multipliers σ_g = σ(budget_g; q, T).
    A single Gaussian noise of std s is added to the sum, so σ_g is realised through a per-group clip
    norm C_g = s/σ_g (the noise multiplier of a record is the noise std over its sensitivity); s is set
    so that the record-weighted mean clip norm equals ``clip_norm``: s = C·N / Σ_i 1/σ_i. A record with
    a larger budget gets a larger clip norm (more signal) under the same noise. The step runs ONE
    clipped pass with per-example clip norms (each sampled record's C_g gathered by index), so any
    number of distinct budgets costs the same as one.

Noise mechanism (``mechanism``): ``"gaussian"`` as above, or ``"laplace"`` — i.i.d. Lap(b·C) on every
coordinate of the sum of gradients clipped in **L1** norm to C (``norm="l1"`` in
:func:`~jaxpriv.train.clipping.clipped_grad_sum`), so the sum has L1 sensitivity C under add/remove.
The step's mechanism is the d-dimensional product Laplace with shift v, ‖v‖₁ ≤ C, whose Rényi divergence
is Σ_i f(|v_i|), f(t) = ρ_Lap(α; b·C/t) the 1-D curve at shift t. f is convex on [0, ∞) with f(0) = 0:
(α−1)f(t) = log( α/(2α−1)·e^{(α−1)t/(bC)} + (α−1)/(2α−1)·e^{−αt/(bC)} ) is a log-sum-exp of affine
functions of t with positive weights (convex), and f ≥ 0 = f(0) makes it non-decreasing on [0, ∞). So
v ↦ Σ_i f(|v_i|) is convex (a convex non-decreasing function of the convex |v_i|), and its maximum over
the L1 ball (a polytope) is at a vertex ±C·e_i: the worst case is the 1-D curve ρ_Lap(α; b)
(:func:`jaxpriv.rdp.laplace`, MATH §1.2; b is the Laplace scale per unit of L1 sensitivity, the role
σ plays for the Gaussian). T steps compose :func:`jaxpriv.rdp.subsampled` (Zhu & Wang 2019, MATH §1.4)
of that curve, converted with the improved conversion (§1.8); a target ε calibrates b with
:func:`jaxpriv.mechanisms.harmonizer.harmonize` (the same accounting, solved conservatively).

``"staircase"``: per-coordinate staircase noise (γ = γ*, per-step ε₀, sensitivity C) on the L1-clipped
sum. Its RDP at shift t is **concave** in t (:func:`jaxpriv.mechanisms.staircase.rdp_shift`), so the 1-D
curve is not a bound: spreading the L1 shift evenly over the model's d parameters is the worst case, and
each step is accounted with :func:`jaxpriv.mechanisms.staircase.rdp_l1` (d·ρ(C/d)), subsampled by
:func:`jaxpriv.rdp.subsampled`; a target ε calibrates ε₀ through the Harmonizer with the same curve.

Training stops when the budget is spent: before each epoch the accountant checks how many of the
epoch's steps keep every group within its budget, and only those are run.

Checkpoints (``checkpoint_dir``) hold the model's NNX state, the optimizer state (which carries the
noise key), the plan, the step count (the sampler is a function of (seed, step)) and the history, as
``np.savez`` arrays plus JSON metadata; a killed run resumes with the same parameters and the same ε as
an uninterrupted one. A run killed mid-epoch restarts that epoch from its checkpoint and replays the same
batches with the same noise, so the replay computes exactly what was computed before the kill.
"""

from __future__ import annotations

import dataclasses
import glob
import hashlib
import json
import math
import os
import time
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from .. import calibrate, rdp
from ..accountant import dpsgd_epsilon
from .._numerics import check_array, check_orders, float64
from .config import LOSSES, MECHANISMS, DPSGDConfig, check_config
from .sampling import PoissonSampler

__all__ = [
    "DPSGDConfig",
    "PrivacyPlan",
    "GroupAccountant",
    "EpochRecord",
    "TrainResult",
    "plan_privacy",
    "train",
    "cross_entropy_loss",
    "mse_loss",
    "make_evaluator",
    "padded_test_set",
    "plot_learning_curve",
    "MLP",
    "CNN",
]


# --------------------------------------------------------------------------------------------------
# Privacy plan
# --------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class PrivacyPlan:
    """What the trainer runs and the accountant accounts, fixed before training.

    Records are partitioned into groups g (``group_of_record``) sharing a rate ``rate[g]``, a noise
    multiplier ``sigma[g]``, a clip norm ``clip[g]`` and a budget ``budget[g]`` (inf when none). The
    noise added to the clipped sum has scale ``noise_std`` = sigma[g]·clip[g] for every g, and the sum is
    divided by ``expected_batch_size`` = Σ_i q_i. With ``mechanism == "laplace"``, ``sigma`` is the
    Laplace scale per unit L1 sensitivity b and ``noise_std`` the Laplace scale b·C (not a std).
    """

    mode: str
    steps_per_epoch: int
    total_steps: int
    group_of_record: np.ndarray
    budget: np.ndarray
    rate: np.ndarray
    sigma: np.ndarray
    clip: np.ndarray
    noise_std: float
    expected_batch_size: float
    mechanism: str = "gaussian"
    dimension: int = 1

    @property
    def record_rates(self) -> np.ndarray:
        return self.rate[self.group_of_record]

    @property
    def record_clip(self) -> np.ndarray:
        return self.clip[self.group_of_record]

    def arrays(self) -> dict:
        return {f"plan_{k}": getattr(self, k) for k in ("group_of_record", "budget", "rate", "sigma", "clip")}

    def scalars(self) -> dict:
        return {k: getattr(self, k) for k in ("mode", "steps_per_epoch", "total_steps", "noise_std", "expected_batch_size",
                                              "mechanism", "dimension")}


def _unattainable(what: str) -> ValueError:
    return ValueError(f"{what} cannot be met with these orders and steps (ε(σ → ∞) is larger); raise it or train fewer steps")


def _sample_mode_sigma(budgets, counts, mean_rate, steps, delta, orders) -> float:
    """IDP-SGD "Sample": the σ at which the per-group calibrated rates have mean Σ n_g q_g / N = B/N.

    Each q_g(σ) = :func:`jaxpriv.calibrate.sampling_rate` is exact and increasing in σ (more noise
    permits more sampling), so the mean rate is increasing in σ; the library's root finder
    (:func:`jaxpriv.calibrate.solve_monotone`, on log σ) solves it to 1e-10. The root only sets the batch
    size: privacy holds at any σ because every q_g is calibrated at the σ finally used.
    """
    weights = counts / counts.sum()

    def shortfall(log_sigma):  # > 0 while σ is too small for the mean rate
        q = calibrate.sampling_rate(budgets, math.exp(float(log_sigma[0])), steps, delta, orders=orders)
        return jnp.asarray([mean_rate - float(np.dot(weights, q))])

    with float64():
        log_sigma, found = calibrate.solve_monotone(shortfall, jnp.zeros(1), step=math.log(4.0), traced=False)
    if not bool(found[0]):
        raise _unattainable("the budgets")
    return math.exp(float(log_sigma[0]))


def plan_privacy(config: DPSGDConfig, n: int, dimension: int | None = None) -> PrivacyPlan:
    """Calibrate the run's rates, noise multipliers and clip norms before training (MATH §5, §6).

    T = epochs · round(N / batch_size) steps are planned; each group's ε at T steps is ≤ its budget
    (calibration is conservative, MATH §5). See the module docstring for the configurations.

    Args:
      config: the run's :class:`DPSGDConfig`.
      n: number of training records N ≥ 1.
      dimension: number of model parameters d (required for ``mechanism="staircase"``, whose
        per-coordinate accounting depends on it; :func:`train` passes it).

    Returns:
      :class:`PrivacyPlan`.

    Example:
      >>> from jaxpriv.train.dpsgd import DPSGDConfig, plan_privacy
      >>> plan = plan_privacy(DPSGDConfig(epochs=10, batch_size=100, epsilon=2.0, delta=1e-5), n=10_000)
      >>> plan.total_steps, round(float(plan.sigma[0]), 4), plan.expected_batch_size
      (1000, 1.0223, 100.0)
    """
    n = int(check_array("n", n, 1.0, np.inf, integer=True))
    check_config(config, n)
    if config.mechanism == "staircase":
        if dimension is None:
            raise ValueError("dimension (the number of model parameters) is required for mechanism 'staircase'")
        dimension = int(check_array("dimension", dimension, 1.0, np.inf, integer=True))
    else:
        dimension = 1
    steps_per_epoch = max(1, int(round(n / config.batch_size)))
    steps = config.epochs * steps_per_epoch
    mean_rate = config.batch_size / n
    delta, orders, clip = config.delta, config.orders, config.clip_norm
    if config.budgets is not None:
        budget, group = np.unique(np.asarray(config.budgets, dtype=np.float64), return_inverse=True)
        counts = np.bincount(group, minlength=budget.size).astype(np.float64)
        if config.personalization == "sample":
            sigma = config.noise_multiplier
            mode = "sample (σ given)" if sigma is not None else "sample"
            if sigma is None:
                sigma = _sample_mode_sigma(budget, counts, mean_rate, steps, delta, orders)
            rate = np.asarray(calibrate.sampling_rate(budget, sigma, steps, delta, orders=orders), dtype=np.float64)
            if np.any(rate <= 0):
                raise _unattainable(f"budget {budget[rate <= 0][0]:g}")
            sigmas, clips = np.full(budget.size, float(sigma)), np.full(budget.size, clip)
        else:
            mode = "scale"
            rate = np.full(budget.size, mean_rate)
            sigmas = np.asarray(calibrate.noise_multiplier(budget, mean_rate, steps, delta, orders=orders), dtype=np.float64)
            if not np.all(np.isfinite(sigmas)):
                raise _unattainable(f"budget {budget[~np.isfinite(sigmas)][0]:g}")
            noise_std = clip * n / float(np.dot(counts, 1.0 / sigmas))
            clips = noise_std / sigmas
    else:
        group = np.zeros(n, dtype=np.int64)
        counts = np.array([float(n)])
        budget = np.array([np.inf if config.epsilon is None else float(config.epsilon)])
        if config.epsilon is None:
            fixed = {"laplace": "fixed b", "staircase": "fixed ε₀"}.get(config.mechanism, "fixed σ")
            mode, rate, sigma = fixed, mean_rate, config.noise_multiplier
        elif config.mechanism in ("laplace", "staircase"):
            mode, rate = ("b for ε" if config.mechanism == "laplace" else "ε₀ for ε"), mean_rate
            sigma = _harmonized_scale_for(config.mechanism, config.epsilon, mean_rate, steps, delta, orders, dimension)
        elif config.noise_multiplier is None:
            mode, rate = "σ for ε", mean_rate
            sigma = float(calibrate.noise_multiplier(config.epsilon, mean_rate, steps, delta, orders=orders))
            if not math.isfinite(sigma):
                raise _unattainable(f"epsilon {config.epsilon:g}")
        else:
            mode, sigma = "q for ε", config.noise_multiplier
            rate = float(calibrate.sampling_rate(config.epsilon, sigma, steps, delta, orders=orders))
            if rate <= 0:
                raise _unattainable(f"epsilon {config.epsilon:g}")
        rate, sigmas, clips = np.array([float(rate)]), np.array([float(sigma)]), np.array([float(clip)])
    noise_std = float(sigmas[0] * clips[0])
    return PrivacyPlan(
        mode=mode,
        steps_per_epoch=steps_per_epoch,
        total_steps=steps,
        group_of_record=np.asarray(group, dtype=np.int64),
        budget=np.asarray(budget, dtype=np.float64),
        rate=np.asarray(rate, dtype=np.float64),
        sigma=np.asarray(sigmas, dtype=np.float64),
        clip=np.asarray(clips, dtype=np.float64),
        noise_std=noise_std,
        expected_batch_size=float(np.dot(counts, rate)),
        mechanism=config.mechanism,
        dimension=dimension,
    )


def _harmonized_scale_for(mechanism: str, epsilon: float, rate: float, steps: int, delta: float, orders,
                          dimension: int) -> float:
    """The Laplace scale b (per unit L1 sensitivity) or the staircase's per-step ε₀ that spends ``epsilon``
    in ``steps`` subsampled steps: UDP-FL's Harmonizer (:func:`jaxpriv.mechanisms.harmonizer.harmonize`)
    solves exactly this; the result is re-checked with the trainer's own accountant and moved to the safe
    side (b up, ε₀ down) if rounding disagrees."""
    import warnings

    from ..mechanisms import harmonizer

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # an unattainable target is reported below
        b = float(harmonizer.harmonize(mechanism, epsilon, delta, q=rate, rounds=steps, orders=orders,
                                       dimension=dimension).scale)
    if not (math.isfinite(b) and b > 0):
        raise _unattainable(f"epsilon {epsilon:g}")
    safer = 1.0 + 1e-12 if mechanism == "laplace" else 1.0 - 1e-12
    account = lambda scale: GroupAccountant([rate], [scale], delta, orders=orders, mechanism=mechanism,  # noqa: E731
                                            dimension=dimension)
    while account(b).epsilon(steps)[0] > epsilon:  # jit vs eager rounding: at most a step or two of 1e-12
        b *= safer
    return b


# --------------------------------------------------------------------------------------------------
# Accountant
# --------------------------------------------------------------------------------------------------


class GroupAccountant:
    """Per-group RDP accountant of DP-SGD: group g takes T steps of the Poisson-subsampled Gaussian with
    rate q_g and noise multiplier σ_g (the clipped sum has sensitivity C_g and noise std σ_g·C_g).

    ε_g = min_α [T·ρ_PoiSG(α; q_g, σ_g) + improved conversion] (MATH §1.3, §1.7, §1.8), evaluated by
    :func:`jaxpriv.dpsgd_epsilon` itself — the core's kernel, so the trainer's ε is the core's ε for the
    same events, to the last bit. All steps of a run are alike, so the state is the step count.

    With ``mechanism="laplace"`` the step is the Poisson-subsampled d-dimensional Laplace with L1
    sensitivity 1 and scale b_g = ``sigmas[g]``, whose worst case is the 1-D curve (module docstring):
    ε_g = improved conversion of T·:func:`jaxpriv.rdp.subsampled` (q_g, :func:`jaxpriv.rdp.laplace`
    (b_g)) (Zhu & Wang 2019 at integer orders, its convexity chord between them; MATH §1.2, §1.4).

    Args:
      rates, sigmas: per-group q_g ∈ [0, 1] and σ_g > 0 (1-D, same length); b_g for ``"laplace"``.
      delta: δ ∈ (0, 1).
      orders: Rényi orders (default :data:`jaxpriv.rdp.DEFAULT_ORDERS`).
      steps: steps already taken (≥ 0).
      mechanism: ``"gaussian"``, ``"laplace"`` or ``"staircase"`` (per-step ε₀ in ``sigmas``).
      dimension: number of noised coordinates d; required for ``"staircase"`` (accounted with
        d·ρ(1/d), :func:`jaxpriv.mechanisms.staircase.rdp_l1`), ignored otherwise.

    Example:
      >>> from jaxpriv.train.dpsgd import GroupAccountant
      >>> acc = GroupAccountant([0.01], [1.1], delta=1e-5, steps=10_000)
      >>> round(float(acc.epsilon()[0]), 4)
      5.632
    """

    def __init__(self, rates, sigmas, delta: float, *, orders=None, steps: int = 0, mechanism: str = "gaussian",
                 dimension: int | None = None):
        if mechanism not in MECHANISMS:
            raise ValueError(f"mechanism must be one of {MECHANISMS}, got {mechanism!r}")
        if mechanism == "staircase" and dimension is None:  # the 1-D curve is not a bound for d > 1
            raise ValueError("dimension (the number of noised coordinates d ≥ 1) is required for mechanism 'staircase'")
        dimension = int(check_array("dimension", 1 if dimension is None else dimension, 1.0, np.inf, integer=True))
        self.orders = check_orders(rdp.DEFAULT_ORDERS if orders is None else orders)
        rates = np.atleast_1d(np.asarray(check_array("rates", rates, 0.0, 1.0)))
        sigmas = np.atleast_1d(np.asarray(check_array("sigmas", sigmas, 0.0, np.inf, lo_open=True)))
        if rates.ndim != 1 or rates.shape != sigmas.shape:
            raise ValueError(f"rates and sigmas must be 1-D of the same length, got {rates.shape} and {sigmas.shape}")
        self.delta = float(check_array("delta", delta, 0.0, 1.0, lo_open=True, hi_open=True))
        self.steps = int(check_array("steps", steps, 0.0, np.inf, integer=True))
        self.rates, self.sigmas, self.mechanism = rates, sigmas, mechanism
        self._curve = None
        if mechanism == "laplace":  # one step's curve (G, K); T steps compose to T times it (MATH §1.7)
            self._curve = rdp.subsampled(rates, lambda a: rdp.laplace(sigmas, a), self.orders)
        elif mechanism == "staircase":  # per-coordinate staircase, L1 sensitivity 1 over d coordinates
            from ..mechanisms import staircase

            self._curve = rdp.subsampled(rates, lambda a: staircase.rdp_l1(sigmas, dimension, orders=a), self.orders)

    def epsilon(self, steps: int | None = None) -> np.ndarray:
        """ε of every group after ``steps`` steps (default: the steps taken), float64 (G,)."""
        steps = self.steps if steps is None else int(check_array("steps", steps, 0.0, np.inf, integer=True))
        if self._curve is not None:
            return np.asarray(rdp.to_epsilon(steps * self._curve, self.orders, self.delta)[0],
                              dtype=np.float64).reshape(-1)
        return np.asarray(dpsgd_epsilon(self.rates, self.sigmas, steps, self.delta, orders=self.orders),
                          dtype=np.float64).reshape(-1)

    def steps_within(self, budgets, limit: int) -> int:
        """Largest k ≤ ``limit`` such that every group stays within its budget after k more steps
        (ε is increasing in the number of steps: bisection on this very accountant's ε, so the reported
        ε never exceeds a budget)."""
        budgets = np.asarray(budgets, dtype=np.float64)
        limit = int(check_array("limit", limit, 0.0, np.inf, integer=True))
        within = lambda k: bool(np.all(self.epsilon(self.steps + k) <= budgets))  # noqa: E731
        if within(limit):
            return limit
        if not within(0):  # already over budget (a resumed run that was stopped)
            return 0
        lo, hi = 0, limit  # invariant: within(lo) and not within(hi)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if within(mid) else (lo, mid)
        return lo


# --------------------------------------------------------------------------------------------------
# Models and loss
# --------------------------------------------------------------------------------------------------


def cross_entropy_loss(model, inputs, labels, key=None):
    """Per-example softmax cross-entropy −log softmax(model(x))_y of an NNX classifier, in the clipping
    interface ``loss_fn(model, inputs, labels, key) → (B,)``. ``key`` is unused (no stochastic layers).

    Example:
      >>> import jax.numpy as jnp
      >>> from flax import nnx
      >>> from jaxpriv.train.dpsgd import MLP, cross_entropy_loss
      >>> model = MLP(4, (8,), 3, rngs=nnx.Rngs(0))
      >>> cross_entropy_loss(model, jnp.ones((5, 4)), jnp.zeros(5, jnp.int32)).shape
      (5,)
    """
    return optax.softmax_cross_entropy_with_integer_labels(model(inputs), labels)


def _squared_errors(outputs, targets):
    """Per-example mean squared error between outputs (B, ...) and targets (B, ...) of as many numbers."""
    batch = outputs.shape[0]
    outputs, targets = outputs.reshape(batch, -1), targets.reshape(batch, -1)
    if outputs.shape != targets.shape:
        raise ValueError(f"mse_loss: the model gives {outputs.shape[1]} output(s) per example but the targets hold "
                         f"{targets.shape[1]}; make them match (e.g. a final nnx.Linear(..., {targets.shape[1]}))")
    return jnp.mean(jnp.square(outputs - targets.astype(outputs.dtype)), axis=1)


def mse_loss(model, inputs, targets, key=None):
    """Per-example mean squared error of a regression model, in the clipping interface
    ``loss_fn(model, inputs, targets, key) → (B,)``: ℓ_i = (1/k) Σ_j (f(x_i)_j − y_ij)² over the k outputs
    (the per-example form of ``optax.squared_error`` averaged over outputs). The model's outputs and the
    targets may have any shapes with k numbers per example: ``(B,)``, ``(B, 1)`` and ``(B, k)`` all work.
    ``key`` is unused. ``DPSGDConfig(loss="mse")`` trains with it.

    Example:
      >>> import jax.numpy as jnp
      >>> from flax import nnx
      >>> from jaxpriv.train.dpsgd import mse_loss
      >>> model = nnx.Linear(3, 1, rngs=nnx.Rngs(0))
      >>> model.kernel[...], model.bias[...] = jnp.ones((3, 1)), jnp.zeros(1)
      >>> mse_loss(model, jnp.ones((2, 3)), jnp.array([3.0, 1.0])).tolist()  # outputs 3 and 3
      [0.0, 4.0]
    """
    return _squared_errors(model(inputs), targets)


class MLP(nnx.Module):
    """Multilayer perceptron with tanh activations (bounded activations suit DP-SGD's clipping: Papernot
    et al. 2021, "Tempered sigmoid activations"). Inputs of any shape are flattened.

    Example:
      >>> import jax.numpy as jnp
      >>> from flax import nnx
      >>> from jaxpriv.train.dpsgd import MLP
      >>> MLP(64, (32,), 10, rngs=nnx.Rngs(0))(jnp.ones((2, 64))).shape
      (2, 10)
    """

    def __init__(self, in_features: int, hidden: tuple = (128,), num_classes: int = 10, *, rngs: nnx.Rngs):
        sizes = (in_features,) + tuple(hidden)
        self.layers = nnx.List([nnx.Linear(a, b, rngs=rngs) for a, b in zip(sizes[:-1], sizes[1:])])
        self.head = nnx.Linear(sizes[-1], num_classes, rngs=rngs)

    def __call__(self, x):
        x = x.reshape(x.shape[0], -1)
        for layer in self.layers:
            x = jnp.tanh(layer(x))
        return self.head(x)


class CNN(nnx.Module):
    """Small convolutional network for square images (e.g. digits' 8×8): two 3×3 convolutions with tanh
    and 2×2 average pooling, then a linear head. Flat inputs are reshaped to (side, side, channels).

    Example:
      >>> import jax.numpy as jnp
      >>> from flax import nnx
      >>> from jaxpriv.train.dpsgd import CNN
      >>> CNN(8, 1, 10, rngs=nnx.Rngs(0))(jnp.ones((2, 64))).shape
      (2, 10)
    """

    def __init__(self, side: int, channels: int = 1, num_classes: int = 10, width: int = 16, *, rngs: nnx.Rngs):
        self.side, self.channels = side, channels
        self.conv1 = nnx.Conv(channels, width, kernel_size=(3, 3), rngs=rngs)
        self.conv2 = nnx.Conv(width, 2 * width, kernel_size=(3, 3), rngs=rngs)
        pooled = side // 4
        self.head = nnx.Linear(2 * width * pooled * pooled, num_classes, rngs=rngs)

    def __call__(self, x):
        x = x.reshape(x.shape[0], self.side, self.side, self.channels)
        x = nnx.avg_pool(jnp.tanh(self.conv1(x)), window_shape=(2, 2), strides=(2, 2))
        x = nnx.avg_pool(jnp.tanh(self.conv2(x)), window_shape=(2, 2), strides=(2, 2))
        return self.head(x.reshape(x.shape[0], -1))


# --------------------------------------------------------------------------------------------------
# Results
# --------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class EpochRecord:
    """After an epoch: cumulative steps, test accuracy and loss, the largest ε over records (the run's
    guarantee), the wall time since the run (or its resumption) started, and every group's ε (in the
    order of the plan's groups)."""

    epoch: int
    steps: int
    test_accuracy: float
    test_loss: float
    epsilon: float
    seconds: float
    group_epsilon: tuple = ()


@dataclasses.dataclass(frozen=True)
class TrainResult:
    """Outcome of :func:`train`. ``epsilon`` is the spent ε of the worst-off record (max over groups);
    ``group_epsilon[g]`` the spent ε of group g (see ``plan``); ``stopped`` is ``"completed"`` or
    ``"budget"`` (the next step would have exceeded a budget). ``buckets`` are the padded batch sizes
    used and ``compiled_steps`` the number of compilations of the step (one per bucket)."""

    history: list
    test_accuracy: float
    epsilon: float
    group_epsilon: np.ndarray
    delta: float
    plan: PrivacyPlan
    steps: int
    stopped: str
    buckets: tuple
    compiled_steps: int
    seconds: float

    def record_epsilon(self) -> np.ndarray:
        """Spent ε of every training record."""
        return self.group_epsilon[self.plan.group_of_record]

    def to_json(self) -> dict:
        finite = lambda x: float(x) if math.isfinite(x) else None
        return {
            "test_accuracy": self.test_accuracy,
            "epsilon": self.epsilon,
            "delta": self.delta,
            "steps": self.steps,
            "stopped": self.stopped,
            "seconds": self.seconds,
            "plan": {
                **self.plan.scalars(),
                "groups": [
                    {"budget": finite(b), "records": int(c), "rate": float(q), "noise_multiplier": float(s),
                     "clip_norm": float(cl), "epsilon": float(e)}
                    for b, c, q, s, cl, e in zip(self.plan.budget, np.bincount(self.plan.group_of_record,
                                                                                minlength=self.plan.budget.size),
                                                 self.plan.rate, self.plan.sigma, self.plan.clip, self.group_epsilon)
                ],
            },
            "history": [dataclasses.asdict(r) for r in self.history],
        }


# --------------------------------------------------------------------------------------------------
# Checkpoints
# --------------------------------------------------------------------------------------------------

_META = "latest.json"


def _is_key(x) -> bool:
    return hasattr(x, "dtype") and jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key)


def _leaves_to_arrays(prefix: str, tree) -> dict:
    """Flattened pytree leaves as numpy arrays (typed PRNG keys as their raw key data)."""
    leaves = jax.tree_util.tree_leaves(tree)
    return {f"{prefix}{i}": np.asarray(jax.random.key_data(x) if _is_key(x) else x) for i, x in enumerate(leaves)}


def _arrays_to_tree(prefix: str, arrays, template):
    """Rebuild a pytree shaped like ``template`` from saved leaves, checking every shape and dtype."""
    leaves, treedef = jax.tree_util.tree_flatten(template)
    names = sorted((k for k in arrays if k.startswith(prefix)), key=lambda k: int(k[len(prefix):]))
    if len(names) != len(leaves):
        raise ValueError(f"checkpoint does not match the model/optimizer: {len(names)} saved {prefix!r} arrays, "
                         f"{len(leaves)} expected")
    restored = []
    for name, ref in zip(names, leaves):
        value = arrays[name]
        if _is_key(ref):
            value = jax.random.wrap_key_data(value, impl=jax.random.key_impl(ref))
        elif value.shape != np.shape(ref) or value.dtype != np.asarray(ref).dtype:
            raise ValueError(f"checkpoint does not match the model/optimizer: {name} has shape {value.shape} "
                             f"{value.dtype}, expected {np.shape(ref)} {np.asarray(ref).dtype}")
        restored.append(jnp.asarray(value) if not _is_key(ref) else value)
    return jax.tree_util.tree_unflatten(treedef, restored)


def _save_checkpoint(directory: str, epoch: int, arrays: dict, meta: dict) -> None:
    """Arrays first, then the JSON that names them (atomic renames): a crash at any point leaves the
    previous checkpoint intact and readable."""
    os.makedirs(directory, exist_ok=True)
    name = f"checkpoint-{epoch:05d}.npz"
    tmp = os.path.join(directory, name + ".tmp")
    with open(tmp, "wb") as f:
        np.savez(f, **arrays)
    os.replace(tmp, os.path.join(directory, name))
    tmp = os.path.join(directory, _META + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump({**meta, "arrays": name}, f)
    os.replace(tmp, os.path.join(directory, _META))
    for old in glob.glob(os.path.join(directory, "checkpoint-*.npz")):
        if os.path.basename(old) != name:
            os.remove(old)


def _load_checkpoint(directory: str):
    path = os.path.join(directory, _META)
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as f:
        meta = json.load(f)
    with np.load(os.path.join(directory, meta["arrays"])) as stored:
        return meta, dict(stored)


def _fingerprint(config: DPSGDConfig, data) -> str:
    """Identity of a run: the configuration and the training data (a checkpoint resumes only its own run)."""
    h = hashlib.sha256(json.dumps(config.to_json(), sort_keys=True).encode())
    for a in (data.x_train, data.y_train):
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()


# --------------------------------------------------------------------------------------------------
# Trainer
# --------------------------------------------------------------------------------------------------


def derive_seeds(seed: int) -> tuple[int, int, int]:
    """Independent seeds for the sampler, the noise and the loss function's keys, from one seed (as
    :func:`train` and :mod:`jaxpriv.train.private` draw them)."""
    return tuple(int(s) for s in np.random.SeedSequence(seed).generate_state(3))


def make_step(graphdef, rest, tx, loss_fn, microbatch_size: int | None, clip: float | None, norm: str = "l2"):
    """The jitted DP-SGD step (graphdef, loss, optimizer and a single clip norm static; compiled per bucket).
    Shared by :func:`train` and :mod:`jaxpriv.train.private`.

    ``clip`` is the one clip norm, or None for per-record clip norms ("scale"): then the sampled records'
    norms are gathered from ``record_clip`` and ONE clipped sum runs with per-example norms — every
    record clipped to its own C_g, per-record sensitivity C_g.

    Data parallel over every local device when there are several: the padded batch is sharded along its
    examples (each device clips its own examples), the clipped sums are added by one all-reduce, and the
    noise and the optimizer run replicated from the same key — the same computation as on one device (the
    compiler partitions it; only the order of the final sum differs), so the privacy analysis is unchanged.
    """
    from .._batching import batch_sharding
    from .clipping import split_clipped_grad_sum

    devices = jax.device_count()
    sharding = batch_sharding() if devices > 1 else None

    def step(params, opt_state, x, y, record_clip, indices, mask, key):
        if sharding is not None and indices.shape[0] % devices == 0:  # buckets are multiples of 8
            indices, mask = (jax.lax.with_sharding_constraint(v, sharding) for v in (indices, mask))
        xb, yb = x[indices], y[indices]
        clip_norm = clip if clip is not None else record_clip[indices]
        grads = split_clipped_grad_sum(loss_fn, graphdef, params, rest, xb, yb, key=key, clip_norm=clip_norm,
                                       mask=mask, microbatch_size=microbatch_size, norm=norm).grads
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state

    return jax.jit(step)


def _check_batch_size(batch_size) -> int:
    return int(check_array("batch_size", batch_size, 1.0, np.inf, integer=True))


def make_evaluator(graphdef, batch_size: int, loss: str = "cross_entropy") -> Callable:
    """A jitted evaluation of a classifier: its test accuracy and mean softmax cross-entropy, computed
    ``batch_size`` examples at a time (a ``lax.scan`` over chunks bounds memory; padding is masked out).
    With ``loss="mse"``, of a regression model: (NaN, the mean of :func:`mse_loss` over the test set).

    ``evaluate(params, rest, x, y, mask) -> (accuracy, loss)``: ``params`` and ``rest`` are the state of
    ``nnx.split(model, nnx.Param, ...)``; ``x``, ``y``, ``mask`` are a test set padded to a multiple of
    ``batch_size`` (:func:`padded_test_set`). With n = Σ mask it returns (#{i: mask_i, argmax f(x_i) = y_i}
    / n, Σ_{i: mask_i} −log softmax(f(x_i))_{y_i} / n), as 0-d arrays. The model runs in eval mode
    (``model.eval()``: dropout off), on a copy.

    Args:
      graphdef: the model's graph definition from ``nnx.split(model, nnx.Param, ...)``.
      batch_size: examples per chunk, an integer ≥ 1 (the same as :func:`padded_test_set`'s).
      loss: ``"cross_entropy"`` (a classifier) or ``"mse"`` (a regression model), as in :class:`DPSGDConfig`.

    Returns:
      the jitted ``evaluate``.

    Example:
      >>> import numpy as np
      >>> from flax import nnx
      >>> from jaxpriv.train.dpsgd import MLP, make_evaluator, padded_test_set
      >>> graphdef, params, rest = nnx.split(MLP(4, (8,), 3, rngs=nnx.Rngs(0)), nnx.Param, ...)
      >>> x, y, mask = padded_test_set((np.ones((5, 4), np.float32), np.zeros(5, np.int32)), batch_size=2)
      >>> accuracy, loss = make_evaluator(graphdef, 2)(params, rest, x, y, mask)
      >>> float(accuracy) in (0.0, 1.0), float(loss) > 0  # five equal examples: all right or all wrong
      (True, True)
    """
    if not isinstance(graphdef, nnx.graphlib.GraphDef):
        raise ValueError(f"graphdef must be the GraphDef of nnx.split(model, nnx.Param, ...), got "
                         f"{type(graphdef).__name__}")
    batch = _check_batch_size(batch_size)
    if loss not in LOSSES:
        raise ValueError(f"loss must be one of {LOSSES}, got {loss!r}")
    regression = loss == "mse"

    @jax.jit
    def evaluate(params, rest, x, y, mask):
        model = nnx.merge(graphdef, params, rest)
        model.eval()  # dropout off, whatever the training graph says (this copy is discarded)

        def chunk(carry, xs):
            xb, yb, mb = xs
            outputs = model(xb)
            if regression:
                correct, losses = jnp.int32(0), _squared_errors(outputs, yb)
            else:
                correct = jnp.sum((jnp.argmax(outputs, -1) == yb) & mb, dtype=jnp.int32)
                losses = optax.softmax_cross_entropy_with_integer_labels(outputs, yb)
            total = jnp.sum(jnp.where(mb, losses, 0.0), dtype=jnp.float32)
            return (carry[0] + correct, carry[1] + total), None

        shape = lambda a: a.reshape((-1, batch) + a.shape[1:])  # noqa: E731
        (correct, total), _ = jax.lax.scan(chunk, (jnp.int32(0), jnp.float32(0.0)),
                                           (shape(x), shape(y), shape(mask)))
        n = jnp.sum(mask)
        accuracy = jnp.float32(jnp.nan) if regression else correct / n
        return accuracy, total / n

    return evaluate


def padded_test_set(data, batch_size: int) -> tuple[jax.Array, jax.Array, jax.Array]:
    """The test set as the arrays :func:`make_evaluator`'s ``evaluate`` takes: ``x`` and ``y`` padded with
    zeros to the next multiple of ``batch_size`` examples, and the ``mask`` that is True on the real ones
    (one compiled evaluation, whatever the test set's size).

    Args:
      data: a :class:`jaxpriv.train.data.Dataset` (its ``x_test``, ``y_test``) or a tuple ``(x, y)`` of N ≥ 1
        examples ``x`` (N, ...) and their labels ``y`` (N,) (or regression targets (N, ...)).
      batch_size: an integer ≥ 1.

    Returns:
      ``(x, y, mask)`` as JAX arrays with leading axis N rounded up to a multiple of ``batch_size``.

    Example:
      >>> import numpy as np
      >>> from jaxpriv.train.dpsgd import padded_test_set
      >>> x, y, mask = padded_test_set((np.ones((5, 4)), np.arange(5)), batch_size=4)
      >>> x.shape, y.tolist(), mask.tolist()
      ((8, 4), [0, 1, 2, 3, 4, 0, 0, 0], [True, True, True, True, True, False, False, False])
    """
    if isinstance(data, (tuple, list)):
        if len(data) != 2:
            raise ValueError(f"data must be a Dataset (x_test, y_test) or a tuple (x, y), got a sequence of "
                             f"{len(data)} items")
        x, y = data
    elif hasattr(data, "x_test") and hasattr(data, "y_test"):
        x, y = data.x_test, data.y_test
    else:
        raise ValueError(f"data must be a Dataset (x_test, y_test) or a tuple (x, y), got {type(data).__name__}")
    batch = _check_batch_size(batch_size)
    x, y = np.asarray(x), np.asarray(y)
    if x.ndim == 0 or x.shape[0] == 0 or y.ndim == 0 or y.shape[0] != x.shape[0]:
        raise ValueError(f"data must hold a non-empty x (N, ...) and labels y (N,), got shapes {x.shape} and {y.shape}")
    n = x.shape[0]
    pad = (-n) % batch
    x = np.concatenate([x, np.zeros((pad,) + x.shape[1:], x.dtype)])
    y = np.concatenate([y, np.zeros((pad,) + y.shape[1:], y.dtype)])
    return jnp.asarray(x), jnp.asarray(y), jnp.asarray(np.arange(n + pad) < n)


def _labels(name: str, y: np.ndarray, loss: str) -> np.ndarray:
    """Integer class labels (N,) as int32 for ``"cross_entropy"``; float targets (N, ...) for ``"mse"``."""
    if loss == "mse":
        return y if np.issubdtype(y.dtype, np.floating) else y.astype(np.float32)
    if y.ndim != 1:
        raise ValueError(f"{name} must hold one integer class label per example, shape (N,), for loss "
                         f"'cross_entropy', got shape {y.shape} (use loss 'mse' for regression targets)")
    if y.dtype != np.int32:
        if not (np.issubdtype(y.dtype, np.number) and np.all(np.isfinite(y)) and np.all(np.floor(y) == y)
                and np.all(y >= 0)):
            raise ValueError(f"{name} must hold integer class labels ≥ 0 for loss 'cross_entropy', got values such "
                             f"as {y.reshape(-1)[:3].tolist()} (use loss 'mse' for regression targets)")
        y = y.astype(np.int32)
    if y.size and y.min() < 0:
        raise ValueError(f"{name} must hold integer class labels ≥ 0 for loss 'cross_entropy', got {int(y.min())}")
    return y


def as_dataset(data, loss: str = "cross_entropy"):
    """``data`` as a :class:`jaxpriv.train.data.Dataset`: a Dataset, or a tuple ``(x, y)`` or
    ``(x, y, x_test, y_test)`` of numpy or JAX arrays (without a test set, the training arrays are also
    the evaluation set). Raises ValueError naming the first array with a wrong shape or labels. Also used
    by :mod:`jaxpriv.train.private`."""
    from .data import Dataset

    if loss not in LOSSES:
        raise ValueError(f"loss must be one of {LOSSES}, got {loss!r}")
    if isinstance(data, (tuple, list)):
        if len(data) not in (2, 4):
            raise ValueError(f"data must be a Dataset or a tuple (x, y) or (x, y, x_test, y_test), got a sequence "
                             f"of {len(data)} items")
        arrays = [np.asarray(a) for a in data]
        if len(arrays) == 2:
            arrays += arrays
        name = "arrays"
    elif all(hasattr(data, k) for k in ("x_train", "y_train", "x_test", "y_test")):
        arrays = [np.asarray(getattr(data, k)) for k in ("x_train", "y_train", "x_test", "y_test")]
        name = getattr(data, "name", "arrays")
    else:
        raise ValueError(f"data must be a Dataset or a tuple (x, y) or (x, y, x_test, y_test), got "
                         f"{type(data).__name__}")
    x, y, x_test, y_test = arrays
    for what, a in (("x", x), ("y", y), ("x_test", x_test), ("y_test", y_test)):
        if a.ndim == 0 or a.shape[0] == 0:
            raise ValueError(f"{what} must be an array with a leading axis of N ≥ 1 examples, got shape {a.shape}")
    for xs, ys, a, b in (("x", "y", x, y), ("x_test", "y_test", x_test, y_test)):
        if a.shape[0] != b.shape[0]:
            raise ValueError(f"{xs} and {ys} must hold the same number of examples, got {xs} of shape {a.shape} "
                             f"and {ys} of shape {b.shape}")
    if x_test.shape[1:] != x.shape[1:] or y_test.shape[1:] != y.shape[1:]:
        raise ValueError(f"the test set must have the training set's shapes per example: x {x.shape[1:]} and y "
                         f"{y.shape[1:]}, got x_test {x_test.shape[1:]} and y_test {y_test.shape[1:]}")
    y, y_test = _labels("y", y, loss), _labels("y_test", y_test, loss)
    classes = 0 if loss == "mse" else int(max(y.max(), y_test.max())) + 1
    return Dataset(name, x, y, x_test, y_test, int(getattr(data, "num_classes", classes)))


def train(
    model: nnx.Module,
    optimizer: optax.GradientTransformation,
    data,
    config: DPSGDConfig,
    *,
    loss_fn: Callable | None = None,
    progress: bool = True,
    checkpoint_dir: str | None = None,
    callback: Callable[[EpochRecord], None] | None = None,
) -> TrainResult:
    """Train ``model`` in place with DP-SGD and account its privacy after every epoch (MATH §6).

    Each step: Poisson sample with the plan's per-record rates, pad to a bucket, clip per example to
    the record's clip norm and sum, add Gaussian noise of std s = σ·C
    (:func:`jaxpriv.train.noise.gaussian_noise`) — or, with ``mechanism="laplace"``, clip in L1 norm and
    add Lap(b·C) per coordinate (:func:`jaxpriv.train.noise.laplace_noise`) — divide by the expected batch
    size Σ_i q_i, and apply ``optimizer``. See the module docstring for the privacy configurations and the stopping rule.
    With several local devices the step runs data parallel, its batch sharded over them (:func:`make_step`).

    Args:
      model: a Flax NNX classifier mapping a batch of inputs to logits (or, with ``config.loss == "mse"``,
        a regression model); updated in place.
      optimizer: any Optax transformation (e.g. ``optax.sgd(0.5, momentum=0.9)``); the noise is chained
        in front of it.
      data: a :class:`jaxpriv.train.data.Dataset` (``x_train, y_train, x_test, y_test``), or a tuple of numpy
        or JAX arrays ``(x, y)`` or ``(x, y, x_test, y_test)``: examples (N, ...) and integer labels (N,)
        (regression targets (N, ...) with ``loss="mse"``). Without a test set the evaluation (the history's
        ``test_accuracy``/``test_loss``) is on the training arrays. Mismatched shapes raise ``ValueError``.
      config: :class:`DPSGDConfig`.
      loss_fn: ``loss_fn(model, inputs, labels, key) → (B,)`` per-example losses (default
        :func:`cross_entropy_loss`, or :func:`mse_loss` with ``config.loss == "mse"``).
      progress: show a rich progress bar with the epoch, accuracy and ε.
      checkpoint_dir: save a checkpoint after every epoch here, and resume from it when it holds one of
        the same run (same configuration and data; otherwise ``ValueError``).
      callback: called with each :class:`EpochRecord` after its checkpoint is written.

    Returns:
      :class:`TrainResult`.

    Example:
      >>> import optax
      >>> from flax import nnx
      >>> from jaxpriv.train import data, dpsgd
      >>> d = data.load("breast_cancer", seed=0)
      >>> model = dpsgd.MLP(30, (16,), 2, rngs=nnx.Rngs(0))
      >>> config = dpsgd.DPSGDConfig(epochs=3, batch_size=64, epsilon=3.0, delta=1e-5)
      >>> result = dpsgd.train(model, optax.sgd(0.5), d, config, progress=False)
      >>> result.epsilon <= 3.0, result.steps, result.test_accuracy > 0.8
      (True, 21, True)

      Plain arrays work too, e.g. a regression with the mean squared error:

      >>> import numpy as np
      >>> x = np.random.default_rng(0).normal(size=(200, 3)).astype(np.float32)
      >>> y = x @ np.array([1.0, -2.0, 0.5], np.float32)
      >>> config = dpsgd.DPSGDConfig(epochs=2, batch_size=50, epsilon=8.0, loss="mse")
      >>> result = dpsgd.train(nnx.Linear(3, 1, rngs=nnx.Rngs(0)), optax.sgd(0.2), (x, y), config, progress=False)
      >>> result.steps, result.history[-1].test_loss < result.history[0].test_loss
      (8, True)
    """
    from .noise import gaussian_noise, laplace_noise, staircase_noise

    if not isinstance(config, DPSGDConfig):
        raise ValueError(f"config must be a DPSGDConfig, got {type(config).__name__}")
    data = as_dataset(data, config.loss)
    n = data.n_train
    check_config(config, n)
    if not isinstance(model, nnx.Module):
        raise ValueError(f"model must be a flax.nnx.Module, got {type(model).__name__}")
    if not (hasattr(optimizer, "init") and hasattr(optimizer, "update")):
        raise ValueError(f"optimizer must be an optax.GradientTransformation, got {type(optimizer).__name__}")
    if loss_fn is None:
        loss_fn = mse_loss if config.loss == "mse" else cross_entropy_loss
    fingerprint = _fingerprint(config, data)
    saved = _load_checkpoint(checkpoint_dir) if checkpoint_dir else None
    if saved is not None and saved[0]["fingerprint"] != fingerprint:
        raise ValueError(f"checkpoint_dir {checkpoint_dir!r} holds a different run (configuration or data differ)")

    if saved is None:
        dimension = sum(int(np.size(leaf)) for leaf in jax.tree_util.tree_leaves(nnx.state(model, nnx.Param)))
        plan = plan_privacy(config, n, dimension)
    else:
        meta, arrays = saved
        plan = PrivacyPlan(**meta["plan"], **{k[len("plan_"):]: arrays[k] for k in arrays if k.startswith("plan_")})
    sampler_seed, noise_seed, loss_seed = derive_seeds(config.seed)
    sampler = PoissonSampler(plan.record_rates, seed=sampler_seed)
    if plan.mechanism == "staircase":  # per-step ε₀ at sensitivity C (γ = γ*)
        noise = staircase_noise(float(plan.sigma[0]), None, float(plan.clip[0]), seed=noise_seed,
                                normalize_by=plan.expected_batch_size)
    else:
        add_noise = laplace_noise if plan.mechanism == "laplace" else gaussian_noise
        noise = add_noise(plan.noise_std, seed=noise_seed, normalize_by=plan.expected_batch_size)
    tx = optax.chain(noise, optimizer)
    graphdef, params, rest = nnx.split(model, nnx.Param, ...)
    opt_state = tx.init(params)
    accountant = GroupAccountant(plan.rate, plan.sigma, config.delta, orders=config.orders, mechanism=plan.mechanism,
                                 dimension=plan.dimension)
    history: list[EpochRecord] = []
    start_epoch = 0
    if saved is not None:
        params = _arrays_to_tree("params_", arrays, params)
        rest = _arrays_to_tree("rest_", arrays, rest)
        opt_state = _arrays_to_tree("opt_", arrays, opt_state)
        accountant.steps = int(meta["steps"])
        history = [EpochRecord(**{**r, "group_epsilon": tuple(r["group_epsilon"])}) for r in meta["history"]]
        start_epoch = int(meta["epoch"])
        nnx.update(model, params, rest)

    single = np.unique(plan.clip).size == 1  # one static clip norm, else per-record norms gathered in the step
    record_clip = jnp.asarray(plan.record_clip)
    norm = "l2" if plan.mechanism == "gaussian" else "l1"
    step = make_step(graphdef, rest, tx, loss_fn, config.microbatch_size, float(plan.clip[0]) if single else None,
                      norm)
    evaluate = make_evaluator(graphdef, int(config.eval_batch_size), config.loss)
    x, y = jnp.asarray(data.x_train), jnp.asarray(data.y_train)
    test = padded_test_set(data, int(config.eval_batch_size))
    loss_key = jax.random.key(loss_seed)
    buckets: set[int] = set()
    stopped = "completed"
    started = time.perf_counter()

    bar = None
    if progress:
        from .._batching import status_bar

        bar, task = status_bar("DP-SGD", plan.total_steps, completed=accountant.steps)
    try:
        for epoch in range(start_epoch, config.epochs):
            allowed = accountant.steps_within(plan.budget, plan.steps_per_epoch)
            if allowed == 0:
                stopped = "budget"
                break
            for _ in range(allowed):
                t = accountant.steps
                batch = sampler.sample(t)
                buckets.add(int(batch.indices.shape[0]))
                params, opt_state = step(params, opt_state, x, y, record_clip, batch.indices, batch.mask,
                                         jax.random.fold_in(loss_key, t))
                accountant.steps += 1
                if bar is not None:
                    bar.update(task, advance=1)
            accuracy, loss = (float(v) for v in evaluate(params, rest, *test))
            eps = accountant.epsilon()
            record = EpochRecord(epoch + 1, accountant.steps, accuracy, loss, float(eps.max()),
                                 time.perf_counter() - started, tuple(float(e) for e in eps))
            history.append(record)
            if bar is not None:
                quality = f"test MSE {loss:.4g}" if config.loss == "mse" else f"accuracy {accuracy:.3f}"
                bar.update(task, description=f"epoch {epoch + 1}/{config.epochs}",
                           status=f"{quality}  ε {record.epsilon:.3f}")
            if checkpoint_dir:
                meta = {"fingerprint": fingerprint, "epoch": epoch + 1, "steps": accountant.steps,
                        "plan": plan.scalars(), "history": [dataclasses.asdict(r) for r in history],
                        "config": config.to_json()}
                _save_checkpoint(checkpoint_dir, epoch + 1,
                                 {**_leaves_to_arrays("params_", params), **_leaves_to_arrays("rest_", rest),
                                  **_leaves_to_arrays("opt_", opt_state),
                                  **plan.arrays()}, meta)
            if callback is not None:
                callback(record)
            if allowed < plan.steps_per_epoch:
                stopped = "budget"
                break
    finally:
        if bar is not None:
            bar.stop()
        nnx.update(model, params)

    group_eps = accountant.epsilon()
    if history:
        accuracy = history[-1].test_accuracy
    else:
        accuracy = float(evaluate(params, rest, *test)[0])
    return TrainResult(
        history=history,
        test_accuracy=accuracy,
        epsilon=float(group_eps.max()),
        group_epsilon=group_eps,
        delta=config.delta,
        plan=plan,
        steps=accountant.steps,
        stopped=stopped,
        buckets=tuple(sorted(buckets)),
        compiled_steps=int(step._cache_size()),
        seconds=time.perf_counter() - started,
    )


def plot_learning_curve(history, path: str, title: str = "DP-SGD") -> str:
    """Learning curve of a run: test accuracy (left axis) and spent ε (right axis) after each epoch.

    Drawn on a bare :class:`matplotlib.figure.Figure` (Agg canvas): the caller's pyplot backend is never
    touched.

    Args:
      history: :class:`EpochRecord` list (``TrainResult.history``), non-empty.
      path: output file; the format follows the extension (``.png``, ``.pdf``, ``.svg``).
      title: figure title.

    Returns:
      ``path``.

    Example:
      >>> import os, tempfile
      >>> from jaxpriv.train.dpsgd import EpochRecord, plot_learning_curve
      >>> h = [EpochRecord(1, 10, 0.8, 0.6, 1.2, 0.1), EpochRecord(2, 20, 0.9, 0.4, 1.9, 0.2)]
      >>> path = plot_learning_curve(h, os.path.join(tempfile.mkdtemp(), "curve.png"))
      >>> os.path.getsize(path) > 0
      True
    """
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    if not history:
        raise ValueError("history is empty: nothing to plot (the run took no epoch)")
    epochs = [r.epoch for r in history]
    fig = Figure(figsize=(7.0, 4.5), layout="constrained")
    ax = fig.add_subplot()
    ax.plot(epochs, [r.test_accuracy for r in history], marker="o", color="tab:blue", label="test accuracy")
    ax.set_xlabel("epoch")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel("test accuracy", color="tab:blue")
    ax.set_ylim(0.0, 1.0)
    ax.grid(alpha=0.3)
    eps_ax = ax.twinx()
    eps_ax.plot(epochs, [r.epsilon for r in history], marker="s", color="tab:red", label="ε spent")
    eps_ax.set_ylabel("ε spent (RDP accountant)", color="tab:red")
    eps_ax.set_ylim(bottom=0.0)
    ax.set_title(title)
    fig.savefig(path, dpi=120)
    return path
