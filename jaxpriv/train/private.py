"""DP-SGD for your own Flax NNX model, Optax optimizer and arrays, in a few lines (:func:`make_private`;
MATH §6.1, accounted by §1.3, §1.7, §1.8).

The counterpart of Opacus's ``PrivacyEngine.make_private`` / ``make_private_with_epsilon``: give the
model, the optimizer, the training arrays and the privacy settings; get back a :class:`PrivateTrainer`
whose :meth:`~PrivateTrainer.step` runs one jitted DP-SGD step and whose accountant reports the ε spent
so far. Nothing new is computed here: the step is the trainer's own (:mod:`jaxpriv.train.dpsgd`), built
from the same primitives — Poisson sampling (:class:`jaxpriv.train.sampling.PoissonSampler`), per-example
clipping (:func:`jaxpriv.train.clipping.split_clipped_grad_sum`), Gaussian noise
(:func:`jaxpriv.train.noise.noise_transform`) — and the accountant is
:class:`jaxpriv.train.dpsgd.GroupAccountant` (the core's :func:`jaxpriv.dpsgd_epsilon`).

The schedule follows TensorFlow Privacy's / Opacus's convention (:func:`jaxpriv.schedule.sampling_and_steps`):
q = B/N and T = ⌈E·N/B⌉ steps for E epochs. For a whole training loop with per-epoch evaluation,
checkpoints and per-record budgets, use :func:`jaxpriv.train.dpsgd.train` instead.
"""

from __future__ import annotations

import math
import warnings
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from .._checks import check_scalar
from .config import LOSSES, SAMPLINGS

__all__ = ["PrivateTrainer", "make_private", "SAMPLINGS"]


class PrivateTrainer:
    """A model made private by :func:`make_private`: its DP-SGD step and its accountant.

    Attributes:
      model: the user's model, updated in place after every step.
      sample_rate: Poisson sampling rate q = B/N (random allocation: k/t, t steps per epoch; fixed size: b/N).
      sampling: one of :data:`jaxpriv.train.config.SAMPLINGS`.
      noise_multiplier: σ (calibrated to ``target_epsilon``, or as given): the noise std on the clipped
        sum is σ·``max_grad_norm``.
      max_grad_norm: per-example L2 clip norm C.
      delta: δ of the reported ε.
      target_epsilon: the budget (None with a fixed ``noise_multiplier``).
      total_steps: T = ⌈E·N/B⌉, the steps planned for ``epochs``; with a target ε, :meth:`step` refuses to
        go beyond them (ε would exceed the target).
      accountant: the :class:`jaxpriv.train.dpsgd.GroupAccountant` (one group: rate q, noise σ); for
        balls in bins and random allocation the :class:`jaxpriv.train.plan.AllocationAccountant`; for
        fixed-size batches the :class:`jaxpriv.train.plan.FixedSizeAccountant`.
    """

    def __init__(self, model, tx, x, y, loss_fn, *, sample_rate, noise_multiplier, max_grad_norm, delta,
                 target_epsilon, total_steps, seed, microbatch_size, steps_per_epoch=None, sampling=None,
                 steps_per_example=1):
        from .._numerics import derive_seeds
        from .dpsgd import (GroupAccountant, allocation_sampler, noise_numbers, sample_block_size, step_program,
                            trainer_sampler)
        from .plan import AllocationAccountant, FixedSizeAccountant
        from .sampling import FixedSizeSampler

        self.model = model
        self.sample_rate, self.noise_multiplier = float(sample_rate), float(noise_multiplier)
        self.max_grad_norm, self.delta = float(max_grad_norm), float(delta)
        self.target_epsilon, self.total_steps = target_epsilon, int(total_steps)
        sampler_seed, noise_seed, loss_seed = derive_seeds(seed, 3)
        n = int(np.shape(x)[0])
        if sampling is None:  # the callers of before ``sampling``: steps_per_epoch meant balls in bins
            sampling = "poisson" if steps_per_epoch is None else "balls_in_bins"
        self.sampling = sampling
        batch = n * self.sample_rate  # the expected batch size B = qN
        if sampling == "poisson":
            self.accountant = GroupAccountant([self.sample_rate], [self.noise_multiplier], self.delta)
            # train()'s sampler: its buckets, and the batches of a block of steps drawn at once
            self._sampler = trainer_sampler(np.full(n, self.sample_rate), sampler_seed, self.total_steps)
        elif sampling == "fixed_size":
            batch = round(batch)
            self.accountant = FixedSizeAccountant(batch, n, self.noise_multiplier, self.delta)
            self._sampler = FixedSizeSampler(n, batch_size=batch, seed=sampler_seed)
        else:
            self.accountant = AllocationAccountant(steps_per_epoch, self.noise_multiplier, self.delta,
                                                   steps_per_example=steps_per_example)
            self._sampler = allocation_sampler(n, steps_per_epoch, steps_per_example, sampler_seed, self.total_steps)
        self._block, self._batches = sample_block_size(n), []
        from .. import events
        from .noise import noise_transform

        # N(0, σ²C²): σ times the clipped sum's sensitivity C, over the expected batch size B
        event = events.Gaussian(self.noise_multiplier)
        noise = noise_transform(event, sensitivity=self.max_grad_norm, seed=noise_seed, normalize_by=batch)
        self._tx = optax.chain(noise, tx)  # the state's layout; the step takes the noise's numbers as arguments
        graphdef, self._params, self._rest = nnx.split(model, nnx.Param, ...)
        self._opt_state = self._tx.init(self._params)
        # train()'s step program, shared with every trainer (and train() run) of the same model, optimizer and
        # loss: σ, C, q and the seed are arguments, so another target ε compiles nothing
        self._step = step_program(graphdef, tx, loss_fn, microbatch_size, False, "l2")
        self._numbers = {"clip": jnp.asarray(self.max_grad_norm),
                         "noise": noise_numbers(event, sensitivity=self.max_grad_norm, normalize_by=batch,
                                                params=self._params)}
        self._x, self._y = jnp.asarray(x), jnp.asarray(y)
        self._loss_key = jax.random.key(loss_seed)

    @property
    def steps(self) -> int:
        """Steps taken so far."""
        return self.accountant.steps

    def epsilon(self) -> float:
        """ε spent so far at ``delta``: Poisson sampling, exact RDP of the subsampled Gaussian (improved
        conversion); random allocation, the PLD accountant's certified upper end (MATH §11); fixed-size
        batches, RDP of ``SampledWithoutReplacement`` (MATH §11.5)."""
        return float(self.accountant.epsilon()[0])

    def step(self) -> None:
        """One DP-SGD step: draw a batch (Poisson at rate q, or the chosen ``sampling``), clip every example's gradient to
        ``max_grad_norm`` and sum, add N(0, (σC)²), divide by the expected batch size B, apply the
        optimizer; then update ``model`` and count the step. Raises ``RuntimeError`` when a target ε is
        set and the planned ``total_steps`` are done."""
        t = self.accountant.steps
        if self.target_epsilon is not None and t >= self.total_steps:
            raise RuntimeError(f"the privacy budget is spent: the {self.total_steps} planned steps are done "
                               f"(ε = {self.epsilon():.4g} ≤ target {self.target_epsilon:g} at δ = {self.delta:g}); "
                               "another step would exceed the target")
        if not self._batches or self._batches[0].step != t:
            self._batches = self._sampler.sample_block(t, self._block)
        batch = self._batches.pop(0)
        self._params, self._opt_state = self._step(self._params, self._opt_state, self._x, self._y, None,
                                                   batch.indices, batch.mask, jax.random.fold_in(self._loss_key, t),
                                                   self._rest, self._numbers)
        self.accountant.steps += 1
        nnx.update(self.model, self._params)

    def run(self, steps: int | None = None) -> float:
        """Take ``steps`` steps (default: all the planned steps not taken yet) and return the ε spent.

        ``steps`` is an integer ≥ 0, at most the remaining planned steps when a target ε is set."""
        remaining = max(self.total_steps - self.steps, 0)
        if steps is None:
            steps = remaining
        hi = remaining if self.target_epsilon is not None else np.inf
        steps = int(check_scalar("steps", steps, 0.0, hi, integer=True))
        for _ in range(steps):
            self.step()
        return self.epsilon()

    def __repr__(self) -> str:
        target = "" if self.target_epsilon is None else f", target_epsilon={self.target_epsilon:g}"
        return (f"PrivateTrainer(sample_rate={self.sample_rate:.6g}, noise_multiplier={self.noise_multiplier:.6g}, "
                f"max_grad_norm={self.max_grad_norm:g}, steps={self.steps}/{self.total_steps}, "
                f"delta={self.delta:g}{target})")


def _arrays(x, y, loss) -> tuple[np.ndarray, np.ndarray]:
    """The training arrays, checked: a built-in loss converts labels as :func:`jaxpriv.train.dpsgd.train`
    does; a custom loss gets them as they are (only the shapes are checked)."""
    from .dpsgd import as_dataset

    if isinstance(loss, str):
        data = as_dataset((x, y), loss)
        return data.x_train, data.y_train
    x, y = np.asarray(x), np.asarray(y)
    for name, a in (("x", x), ("y", y)):
        if a.ndim == 0 or a.shape[0] == 0:
            raise ValueError(f"{name} must be an array with a leading axis of N ≥ 1 examples, got shape {a.shape}")
    if x.shape[0] != y.shape[0]:
        raise ValueError(f"x and y must hold the same number of examples, got x of shape {x.shape} and y of shape "
                         f"{y.shape}")
    return x, y


def make_private(
    model: nnx.Module,
    optimizer: optax.GradientTransformation,
    x,
    y,
    *,
    batch_size: float,
    epochs: float,
    delta: float,
    target_epsilon: float | None = None,
    noise_multiplier: float | None = None,
    max_grad_norm: float = 1.0,
    loss: str | Callable = "cross_entropy",
    seed: int = 0,
    microbatch_size: int | None = None,
    sampling: str = "poisson",
    steps_per_example: int = 1,
) -> PrivateTrainer:
    """Make DP-SGD training of ``model`` on ``(x, y)`` with ``optimizer``: a :class:`PrivateTrainer`.

    Like Opacus's ``make_private_with_epsilon`` (give ``target_epsilon``: σ is calibrated so that the
    planned T steps spend at most ε, :func:`jaxpriv.calibrate.noise_multiplier`) or ``make_private``
    (give ``noise_multiplier``: ε is only reported). Schedule: q = B/N, T = ⌈E·N/B⌉
    (:func:`jaxpriv.schedule.sampling_and_steps`, TensorFlow Privacy's and Opacus's convention). Each
    step is DP-SGD with Poisson sampling (Abadi et al. 2016; Mironov, Talwar, Zhang 2019; MATH §6.1), the same jitted
    step as :func:`jaxpriv.train.dpsgd.train`; the ε reported is that trainer's accountant's.

    Args:
      model: a Flax NNX model (no ``nnx.BatchNorm``: gradients must be per example); updated in place.
      optimizer: any Optax transformation; the noise is chained in front of it.
      x: training examples, a numpy or JAX array (N, ...), N ≥ 1.
      y: labels (N,) (integer classes in [0, C) for ``"cross_entropy"``, C the model's number of outputs:
        checked, :func:`~jaxpriv.train.models.check_labels`), regression targets (N, ...) for ``"mse"``.
      batch_size: expected batch size B in (0, N] (Poisson sampling: the realised size varies).
      epochs: number of epochs E > 0 (fractional allowed); sets the planned steps T.
      delta: δ in (0, 1) of the (ε, δ) guarantee (take δ < 1/N).
      target_epsilon: the budget ε > 0 (σ calibrated); give this or ``noise_multiplier``, not both.
      noise_multiplier: a fixed σ > 0.
      max_grad_norm: per-example L2 clip norm C > 0.
      loss: ``"cross_entropy"`` (:func:`~jaxpriv.train.dpsgd.cross_entropy_loss`, a classifier's logits),
        ``"mse"`` (:func:`~jaxpriv.train.dpsgd.mse_loss`, regression) or a callable
        ``loss(model, x, y, key) → (B,)`` of per-example losses.
      seed: integer in [0, 2³² − 1]; seeds the sampler, the noise and the loss's per-step key.
      microbatch_size: examples per vectorised chunk of the clipped sum (bounds memory), or None.
      sampling: ``"poisson"`` (each example in each step with probability q = B/N), ``"balls_in_bins"``
        (each example in exactly one uniformly chosen step of each epoch of t = round(N/B) steps; whole
        epochs only; accounted by PLD as random allocation, MATH §11, so calibration takes seconds),
        ``"random_allocation"`` (each example in exactly k = ``steps_per_example`` uniformly chosen steps of
        each epoch of t = round(k·N/B) steps, so B stays the expected batch size; whole epochs only;
        ``RandomAllocation(k, t, ·)`` by PLD) or ``"fixed_size"`` (every step a uniform subset of exactly B
        examples, B an integer; ``SampledWithoutReplacement(B, N, ·)`` by RDP, add/remove adjacency on the N
        examples, which doubles each step's sensitivity in the bound, MATH §11.5; T = ⌈E·N/B⌉ as for Poisson).
      steps_per_example: k of ``"random_allocation"``, an integer ≥ 1 (1 for every other sampling).

    Returns:
      :class:`PrivateTrainer`: ``step()``, ``run(steps=None)``, ``epsilon()``, ``noise_multiplier``,
      ``total_steps``, ``accountant``.

    Example:
      >>> import numpy as np, optax
      >>> from flax import nnx
      >>> from jaxpriv.train import make_private
      >>> x = np.random.default_rng(0).normal(size=(256, 4)).astype(np.float32)
      >>> y = (x[:, 0] > 0).astype(np.int32)
      >>> model = nnx.Linear(4, 2, rngs=nnx.Rngs(0))
      >>> private = make_private(model, optax.sgd(1.0), x, y, target_epsilon=4.0, delta=1e-5, batch_size=64,
      ...                        epochs=4)
      >>> private.total_steps, round(private.noise_multiplier, 4)  # T = 4 · 256 / 64, σ calibrated to ε = 4
      (16, 1.5707)
      >>> epsilon = private.run()  # the 16 planned steps (or call private.step() in your own loop)
      >>> private.steps, epsilon <= 4.0, float(np.mean(np.argmax(model(x), -1) == y)) > 0.9
      (16, True, True)
    """
    from .. import calibrate
    from ..schedule import sampling_and_steps
    from .dpsgd import cross_entropy_loss, mse_loss

    if not isinstance(model, nnx.Module):
        raise ValueError(f"model must be a flax.nnx.Module, got {type(model).__name__}")
    if not (hasattr(optimizer, "init") and hasattr(optimizer, "update")):
        raise ValueError(f"optimizer must be an optax.GradientTransformation, got {type(optimizer).__name__}")
    if not (callable(loss) or loss in LOSSES):
        raise ValueError(f"loss must be one of {LOSSES} or a callable loss(model, x, y, key) → (B,), got {loss!r}")
    if sampling not in SAMPLINGS:
        raise ValueError(f"sampling must be one of {SAMPLINGS}, got {sampling!r}")
    x, y = _arrays(x, y, loss)
    if loss == "cross_entropy":
        from .models import check_labels

        check_labels(model, x, y=y)  # labels in [0, the model's classes)
    n = int(x.shape[0])
    q, total = sampling_and_steps(n, batch_size, epochs)
    steps_per_example = int(check_scalar("steps_per_example", steps_per_example, 1.0, np.inf, integer=True))
    if sampling != "random_allocation" and steps_per_example != 1:
        raise ValueError(f"steps_per_example > 1 needs sampling 'random_allocation', got sampling {sampling!r}")
    per_epoch = None
    if sampling in ("balls_in_bins", "random_allocation"):
        epochs = check_scalar("epochs", epochs, 1.0, np.inf, integer=True)  # whole epochs: whole rounds
        per_epoch = max(steps_per_example, round(steps_per_example * n / batch_size))
        q, total = steps_per_example / per_epoch, int(epochs) * per_epoch
    elif sampling == "fixed_size":
        batch_size = int(check_scalar("batch_size", batch_size, 1.0, float(n), integer=True))
        q = batch_size / n
    delta = check_scalar("delta", delta, 0.0, 1.0, lo_open=True, hi_open=True)
    max_grad_norm = check_scalar("max_grad_norm", max_grad_norm, 0.0, np.inf, lo_open=True)
    seed = int(check_scalar("seed", seed, 0.0, 2.0**32 - 1, integer=True))
    if microbatch_size is not None:
        microbatch_size = int(check_scalar("microbatch_size", microbatch_size, 1.0, np.inf, integer=True))
    if (target_epsilon is None) == (noise_multiplier is None):
        raise ValueError("give exactly one of target_epsilon (σ is calibrated to it) and noise_multiplier (a fixed σ)")
    if target_epsilon is not None:
        target_epsilon = check_scalar("target_epsilon", target_epsilon, 0.0, np.inf, lo_open=True)
        with warnings.catch_warnings():  # an unattainable target is reported below
            warnings.simplefilter("ignore", RuntimeWarning)
            from .plan import AllocationAccountant, FixedSizeAccountant

            if sampling == "poisson":
                sigma = float(calibrate.noise_multiplier(target_epsilon, q, total, delta))
            elif sampling == "fixed_size":
                sigma = FixedSizeAccountant.noise_multiplier(target_epsilon, batch_size, n, total, delta)
            else:
                sigma = AllocationAccountant.noise_multiplier(target_epsilon, per_epoch, int(epochs), delta,
                                                              steps_per_example=steps_per_example)
        if not math.isfinite(sigma):
            raise ValueError(f"target_epsilon {target_epsilon:g} cannot be met in {total} steps at q = {q:.6g} "
                             f"and δ = {delta:g} (ε(σ → ∞) is larger); raise it, or train fewer epochs")
    else:
        sigma = check_scalar("noise_multiplier", noise_multiplier, 0.0, np.inf, lo_open=True)
    if isinstance(loss, str):
        loss = mse_loss if loss == "mse" else cross_entropy_loss
    return PrivateTrainer(model, optimizer, x, y, loss, sample_rate=q, noise_multiplier=sigma,
                          max_grad_norm=max_grad_norm, delta=delta, target_epsilon=target_epsilon, total_steps=total,
                          seed=seed, microbatch_size=microbatch_size, steps_per_epoch=per_epoch, sampling=sampling,
                          steps_per_example=steps_per_example)
