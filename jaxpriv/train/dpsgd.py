"""DP-SGD on Flax NNX + Optax, with the privacy accounted in the loop (MATH §5, §6).

One step (Abadi et al. 2016, with Poisson sampling as analysed by Mironov, Talwar, Zhang 2019):
Poisson-sample a batch (:mod:`jaxpriv.train.sampling`, padded to a fixed bucket with a mask), clip each
example's gradient and sum (:func:`jaxpriv.train.clipping.clipped_grad_sum`), add N(0, s²) with
s = σ·C and divide by the *expected* batch size Σ_i q_i (:func:`jaxpriv.train.noise.noise_transform` of the
plan's noise event), then apply any Optax optimizer. The step is one jitted function of arrays (the NNX graph definition is
static), compiled once per bucket size and structure (:func:`step_program`): every number of the plan — the noise
scale, the clip norm, the expected batch size — is an argument, so a second run on the same model, optimizer and
loss with another ε, σ, δ or C compiles nothing. The buckets are finer than the sampler's default
(:func:`trainer_sampler`: μ + 3σ rows instead of μ + 5σ, and in long runs about μ + 0.8σ on average), and
the batches of up to 64 steps are drawn in one call, so the host queues steps while the device runs them instead of waiting for each batch
size (measured in ``bench/dpsgd_throughput.py``: the trainer's step against the bare DP step).

The privacy plan and its accountant live in :mod:`jaxpriv.train.plan`, the built-in models and losses in
:mod:`jaxpriv.train.models`, evaluation in :mod:`jaxpriv.train.evaluate`, checkpoints in
:mod:`jaxpriv.train.checkpoint`; this module re-exports their public names.

Training stops when the budget is spent: before each epoch the accountant checks how many of the
epoch's steps keep every group within its budget, and only those are run.
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from .._numerics import check_array, derive_seeds
from .checkpoint import arrays_to_tree, leaves_to_arrays, load_checkpoint, run_fingerprint, save_checkpoint
from .config import DPSGDConfig, check_config
from .data import as_dataset
from .evaluate import make_evaluator, padded_test_set
from .models import CNN, MLP, check_labels, cross_entropy_loss, mse_loss
from .plan import AllocationAccountant, FixedSizeAccountant, GroupAccountant, PrivacyPlan, plan_privacy
from .programs import Program, ProgramCache
from .sampling import AllocationSampler, CyclicPoissonSampler, FixedSizeSampler, PoissonSampler, bucket_sizes

__all__ = [
    "DPSGDConfig",
    "PrivacyPlan",
    "GroupAccountant",
    "EpochRecord",
    "TrainResult",
    "plan_privacy",
    "train",
    "make_step",
    "step_program",
    "noise_numbers",
    "trainer_sampler",
    "sample_block_size",
    "cross_entropy_loss",
    "mse_loss",
    "make_evaluator",
    "padded_test_set",
    "as_dataset",
    "MLP",
    "CNN",
]

#: steps whose Poisson batches are drawn in one call (PoissonSampler.sample_block), at most this many
#: records' draws at once
_BLOCK, _BLOCK_RECORDS = 64, 1 << 22
#: runs of at least this many steps pad to finer buckets (:func:`trainer_sampler`): a bucket's compilation
#: costs seconds on a CPU, and the ~10–20% of step time the finer buckets save pays it back over ~10³ steps
FINE_BUCKETS_FROM = 1000


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
    used and ``compiled_steps`` the number of step programs the run used (one per bucket; a bucket traced
    twice in the run counts twice). Programs are shared by runs of the same structure
    (:func:`step_program`): ``new_programs`` counts the step programs this run traced itself (0 when an
    earlier run of the same model, optimizer and loss compiled them, whatever its ε, σ or clip norm)."""

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
    new_programs: int = 0

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
                                                 self.plan.rate, self.plan.noise_parameter, self.plan.clip, self.group_epsilon)
                ],
            },
            "history": [dataclasses.asdict(r) for r in self.history],
        }


def trainer_sampler(rates, seed: int, steps: int) -> PoissonSampler:
    """The Poisson sampler :func:`train` draws its batches with, for a run of ``steps`` steps.

    Its buckets (:func:`jaxpriv.train.sampling.bucket_sizes`) add finer sizes under the bound bucket b₀
    (μ + 5σ of the batch size at the default overflow 10⁻⁶): one at μ + 3σ, where 99.9% of steps fit, so
    a short run compiles one step program and pads 40% less than to b₀; and in runs of at least
    :data:`FINE_BUCKETS_FROM` steps also μ and μ + σ, so that a step pads to about μ + 0.8σ rows on average
    for two more compiled programs, which a long run pays back (measured in ``bench/dpsgd_throughput.py``).

    Example:
      >>> from jaxpriv.train.dpsgd import trainer_sampler
      >>> trainer_sampler([0.25] * 1024, seed=0, steps=100).buckets
      (304, 336, 672, 1024)
      >>> trainer_sampler([0.25] * 1024, seed=0, steps=5000).buckets
      (256, 272, 304, 336, 672, 1024)
    """
    below = (0, 1, 3) if steps >= FINE_BUCKETS_FROM else (3,)
    return PoissonSampler(rates, seed=seed, buckets=bucket_sizes(rates, below=below))


def allocation_sampler(n: int, steps_per_epoch: int, steps_per_example: int, seed: int,
                       steps: int) -> AllocationSampler:
    """The random-allocation sampler :func:`train` and :func:`~jaxpriv.train.make_private` draw with: a step's
    batch size has the binomial law of Poisson sampling at rate k/t, so it takes :func:`trainer_sampler`'s
    buckets at that rate (the μ + 3σ bucket first: 344 → 304 padded rows at N = 8192, B = 256, measured in
    ``bench/sampling_step.py``). MATH §11.4.

    Args:
      n: number of records, an integer ≥ 1.
      steps_per_epoch: t, an integer ≥ 1.
      steps_per_example: k, an integer in [1, t] (1: balls in bins).
      seed: the sampler's seed, an integer ≥ 0.
      steps: the run's planned steps, an integer ≥ 0 (long runs get finer buckets, as Poisson's).

    Returns:
      An :class:`~jaxpriv.train.sampling.AllocationSampler`; a ValueError names any argument out of range.

    Example:
      >>> from jaxpriv.train.dpsgd import allocation_sampler, trainer_sampler
      >>> allocation_sampler(1024, 4, 1, seed=0, steps=100).buckets == trainer_sampler([0.25] * 1024, 0, 100).buckets
      True
    """
    check_array("steps", steps, 0.0, np.inf, integer=True)
    checked = AllocationSampler(n, steps_per_epoch=steps_per_epoch, seed=seed, steps_per_example=steps_per_example)
    buckets = trainer_sampler(np.full(checked.n, checked.steps_per_example / checked.steps_per_epoch), seed,
                              steps).buckets
    return AllocationSampler(n, steps_per_epoch=steps_per_epoch, seed=seed, buckets=buckets,
                             steps_per_example=steps_per_example)


def sample_block_size(n: int) -> int:
    """How many steps' batches :func:`train` draws in one call for ``n`` records: 64, fewer when 64
    draws of n records would pass 2²² (about 20 MB on device)."""
    return max(1, min(_BLOCK, _BLOCK_RECORDS // int(n)))


def _build_step(graphdef, optimizer, loss_fn, microbatch_size, per_record: bool, norm: str, sharding) -> Program:
    """The DP-SGD step program of one structure (see :func:`step_program`)."""
    from .clipping import split_clipped_grad_sum
    from .noise import banded_noise_update, noise_update

    devices = 1 if sharding is None else int(sharding.mesh.devices.size)

    def step(params, opt_state, x, y, record_clip, indices, mask, key, rest, numbers):
        if sharding is not None and indices.shape[0] % devices == 0:  # buckets are multiples of 8
            indices, mask = (jax.lax.with_sharding_constraint(v, sharding) for v in (indices, mask))
        xb, yb = x[indices], y[indices]
        clip_norm = record_clip[indices] if per_record else numbers["clip"]
        grads = split_clipped_grad_sum(loss_fn, graphdef, params, rest, xb, yb, key=key, clip_norm=clip_norm,
                                       mask=mask, microbatch_size=microbatch_size, norm=norm).grads
        tx = optimizer
        if numbers.get("band") is not None:  # BandMF: the banded noise with σ, Δ and C's bands as arguments
            noise = optax.GradientTransformation(
                lambda p: None, lambda u, s, p=None: banded_noise_update(numbers["noise"], numbers["band"], u, s))
            tx = optax.chain(noise, optimizer)
        elif numbers["noise"] is not None:  # the noise transform with its numbers as arguments, then the optimizer
            noise = optax.GradientTransformation(lambda p: None,
                                                 lambda u, s, p=None: noise_update(numbers["noise"], u, s))
            tx = optax.chain(noise, optimizer)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state

    return Program(step)


#: the step programs, one per structure (:func:`step_program`)
STEP_PROGRAMS = ProgramCache(_build_step)


def _sharding():
    from .._batching import batch_sharding

    return batch_sharding() if jax.device_count() > 1 else None


def step_program(graphdef, optimizer, loss_fn, microbatch_size: int | None, per_record: bool, norm: str = "l2"
                 ) -> Program:
    """The jitted DP-SGD step of :func:`train` and :mod:`jaxpriv.train.private`, shared by every run of the
    same structure (:class:`jaxpriv.train.programs.ProgramCache`): compiled once per bucket size and
    structure, whatever the run's ε, σ, δ, clip norm, batch size or seed.

    ``step(params, opt_state, x, y, record_clip, indices, mask, key, rest, numbers) → (params, opt_state)``

    Keyed on (what the program bakes in): the graph definition, ``optimizer`` (by
    :func:`~jaxpriv.train.programs.structure_key`: ``optax.sgd(0.1)`` built twice is one key, ``optax.sgd(0.2)``
    another, since its learning rate is a constant of the functions it builds), ``loss_fn``, the microbatch
    size, the clipping mode (``per_record``: every example's norm gathered from ``record_clip``; else the one
    norm ``numbers["clip"]``), the norm (``"l1"``/``"l2"``) and the device layout. Shapes and dtypes (the
    bucket size, the data, the parameters' dtypes) are jit's own key. Every number is an argument:
    ``numbers = {"clip": C (a weakly typed scalar, or None with per-record norms), "noise":``
    :class:`jaxpriv.train.noise.NoiseArguments` ``or None}``; ``rest`` is the model's non-``Param`` state.

    With ``numbers["noise"]`` the step is ``optax.chain(noise, optimizer)`` — the noise transform of the
    plan's event with its numbers as arguments (:func:`jaxpriv.train.noise.noise_update`) — and
    ``opt_state`` is that chain's state; without, ``optimizer`` alone. With ``numbers["band"]`` too (a
    BandMF run: the strategy's :func:`~jaxpriv.train.noise.band_table`), the noise is the banded one
    (:func:`jaxpriv.train.noise.banded_noise_update`), its coefficients arguments like σ.

    Data parallel over every device when there are several (every process's, after
    :func:`jaxpriv.distributed.initialize`): the padded batch is sharded along its
    examples (each device clips its own examples), the clipped sums are added by one all-reduce, and the
    noise and the optimizer run replicated from the same key — the same computation as on one device (the
    compiler partitions it; only the order of the final sum differs), so the privacy analysis is unchanged.
    """
    return STEP_PROGRAMS(graphdef, optimizer, loss_fn, microbatch_size, bool(per_record), norm, _sharding())


class BoundStep:
    """A step program with its numbers bound: ``step(params, opt_state, x, y, record_clip, indices, mask,
    key)``, and ``step.lower(...)`` with the same arguments (:func:`make_step`)."""

    def __init__(self, program: Program, rest, numbers):
        self.program, self.rest, self.numbers = program, rest, numbers

    def __call__(self, params, opt_state, x, y, record_clip, indices, mask, key):
        return self.program(params, opt_state, x, y, record_clip, indices, mask, key, self.rest, self.numbers)

    def lower(self, params, opt_state, x, y, record_clip, indices, mask, key):
        return self.program.lower(params, opt_state, x, y, record_clip, indices, mask, key, self.rest, self.numbers)


def make_step(graphdef, rest, tx, loss_fn, microbatch_size: int | None, clip: float | None, norm: str = "l2"):
    """The DP-SGD step with the Optax transformation ``tx`` applied to the clipped sum (any noise must be
    inside ``tx``): :func:`step_program` keyed on ``tx`` and without noise arguments, its numbers (the clip
    norm, ``rest``) bound. Compiled per bucket, shared with every ``make_step`` of the same structure and
    ``tx`` (a ``tx`` that bakes a noise transform's numbers is keyed on them; :func:`train` passes them as
    arguments instead).

    ``clip`` is the one clip norm, or None for per-record clip norms ("scale"): then the sampled records'
    norms are gathered from ``record_clip`` and ONE clipped sum runs with per-example norms — every
    record clipped to its own C_g, per-record sensitivity C_g.

    Returns:
      :class:`BoundStep`: ``step(params, opt_state, x, y, record_clip, indices, mask, key) → (params, opt_state)``.
    """
    program = step_program(graphdef, tx, loss_fn, microbatch_size, clip is None, norm)
    return BoundStep(program, rest, {"clip": None if clip is None else jnp.asarray(float(clip)), "noise": None})


def _noise_dtype(params):
    """The dtype the noise is drawn in for these parameters (:func:`jaxpriv.train.noise.noise_arguments`)
    and whether it is one for all of them."""
    kinds = {jnp.promote_types(jnp.asarray(v).dtype, jnp.float32) for v in jax.tree_util.tree_leaves(params)}
    return (jnp.float64 if kinds == {jnp.dtype(jnp.float64)} else jnp.float32), len(kinds) <= 1


def noise_numbers(event, *, sensitivity: float, normalize_by: float, params):
    """The noise arguments of a step on ``params`` (:func:`jaxpriv.train.noise.noise_arguments` in their
    noise dtype). Float32 and float64 leaves together (x64 on) take the float32 scale rounded up, held in
    float64: never below σΔ for either (a float64 leaf then gets at most one float32 ulp more noise)."""
    from .noise import noise_arguments

    dtype, uniform = _noise_dtype(params)
    args = noise_arguments(event, sensitivity=sensitivity, normalize_by=normalize_by, dtype=dtype)
    if not uniform:
        args = args._replace(event=jax.tree_util.tree_map(lambda v: np.asarray(v, np.float64), args.event),
                             sensitivity=None if args.sensitivity is None else np.asarray(args.sensitivity, np.float64))
    return args


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
    the record's clip norm and sum, add Gaussian noise of std s = σ·C — or, with ``mechanism="laplace"`` or
    ``"staircase"``, clip in L1 norm and add Lap(b·C) or staircase noise per coordinate — through
    :func:`jaxpriv.train.noise.noise_transform` of the plan's noise event, divide by the expected batch
    size Σ_i q_i, and apply ``optimizer``. With ``mechanism="bandmf"`` (MATH §12) the records are split into
    b = ``config.bands`` partitions sampled in turn (:class:`~jaxpriv.train.sampling.CyclicPoissonSampler`)
    and the Gaussian noise is correlated by the b-banded strategy optimised for the run's steps
    (:func:`jaxpriv.train.noise.banded_noise_transform`, :func:`jaxpriv.mf.banded_strategy`; its buffer of
    b − 1 noise vectors is part of the optimizer state). With ``config.sampling == "balls_in_bins"`` each
    record takes part in one uniformly chosen step of each epoch (:class:`~jaxpriv.train.sampling.AllocationSampler`)
    and ε is that of those batches, random allocation by the PLD accountant
    (:class:`~jaxpriv.train.plan.AllocationAccountant`, MATH §11); with ``"random_allocation"`` in k of each
    epoch's t steps, likewise; with ``"fixed_size"`` every batch is a uniform subset of exactly ``batch_size``
    records (:class:`~jaxpriv.train.sampling.FixedSizeSampler`, no padding) and ε is that of
    ``SampledWithoutReplacement`` by RDP (:class:`~jaxpriv.train.plan.FixedSizeAccountant`, MATH §11.5).
    See the module docstring for the privacy configurations and the stopping rule.
    With several devices the step runs data parallel, its batch sharded over them (:func:`step_program`); after
    :func:`jaxpriv.distributed.initialize` that is every process's devices (only process 0 writes checkpoints).

    Args:
      model: a Flax NNX classifier mapping a batch of inputs to logits (or, with ``config.loss == "mse"``,
        a regression model); updated in place.
      optimizer: any Optax transformation (e.g. ``optax.sgd(0.5, momentum=0.9)``); the noise is chained
        in front of it.
      data: a :class:`jaxpriv.train.data.Dataset` (``x_train, y_train, x_test, y_test``), or a tuple of numpy
        or JAX arrays ``(x, y)`` or ``(x, y, x_test, y_test)``: examples (N, ...) and integer labels (N,)
        (regression targets (N, ...) with ``loss="mse"``). Without a test set the evaluation (the history's
        ``test_accuracy``/``test_loss``) is on the training arrays. Mismatched shapes raise ``ValueError``,
        and so do labels outside [0, C), C the model's number of outputs, with the built-in cross-entropy.
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
    from ..events import sensitivity_norm
    from .noise import noise_transform

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
        if config.loss != "mse":  # the built-in classifier loss: labels in [0, the model's classes)
            check_labels(model, data.x_train, y=data.y_train, y_test=data.y_test)
    fingerprint = run_fingerprint(config, data)
    saved = load_checkpoint(checkpoint_dir) if checkpoint_dir else None
    if saved is not None and saved[0]["fingerprint"] != fingerprint:
        raise ValueError(f"checkpoint_dir {checkpoint_dir!r} holds a different run (configuration or data differ)")

    if saved is None:
        dimension = sum(int(np.size(leaf)) for leaf in jax.tree_util.tree_leaves(nnx.state(model, nnx.Param)))
        plan = plan_privacy(config, n, dimension)
    else:
        meta, arrays = saved
        renamed = {"sigma": "noise_parameter"}  # checkpoints written before the rename
        plan = PrivacyPlan(**meta["plan"], **{renamed.get(k[len("plan_"):], k[len("plan_"):]): arrays[k]
                                              for k in arrays if k.startswith("plan_")})
    sampler_seed, noise_seed, loss_seed = derive_seeds(config.seed, 3)  # sampler, noise, loss keys
    band = plan.mechanism == "bandmf"
    if band:  # MATH §12: partitions sampled in turn, the noise correlated by the run's b-banded strategy
        own = np.where(np.arange(n) % plan.bands == 0, plan.record_rates, 0.0)  # the largest partition's draws
        buckets = trainer_sampler(own, sampler_seed, plan.total_steps).buckets  # the trainer's bucket rule
        sampler = CyclicPoissonSampler(plan.record_rates, seed=sampler_seed, bands=plan.bands, buckets=buckets)
    elif plan.sampling in ("balls_in_bins", "random_allocation"):  # MATH §11: k uniform steps of each epoch
        sampler = allocation_sampler(n, plan.steps_per_epoch, plan.steps_per_example, sampler_seed, plan.total_steps)
    elif plan.sampling == "fixed_size":  # MATH §11.5: a uniform b-subset at every step, no padding
        sampler = FixedSizeSampler(n, batch_size=int(round(plan.expected_batch_size)), seed=sampler_seed)
    else:
        sampler = trainer_sampler(plan.record_rates, sampler_seed, plan.total_steps)
    block = sample_block_size(n)
    correlated = band and plan.bands > 1  # b = 1: C = I (one band, unit columns), DP-SGD's noise itself
    if correlated:
        from .. import mf
        from .noise import banded_noise_transform

        strategy = mf.banded_strategy(plan.total_steps, bands=plan.bands)
        noise = banded_noise_transform(plan.noise_event(), strategy, seed=noise_seed, sensitivity=float(plan.clip[0]),
                                       normalize_by=plan.expected_batch_size)  # its state's layout and first key
    else:
        noise = noise_transform(plan.noise_event(), seed=noise_seed, sensitivity=float(plan.clip[0]),
                                normalize_by=plan.expected_batch_size)
    tx = optax.chain(noise, optimizer)  # the state's layout; the step takes the noise's numbers as arguments
    graphdef, params, rest = nnx.split(model, nnx.Param, ...)
    opt_state = tx.init(params)
    if plan.sampling in ("balls_in_bins", "random_allocation"):  # the ε of the batches drawn, by PLD
        accountant = AllocationAccountant(plan.steps_per_epoch, float(plan.noise_parameter[0]), config.delta,
                                          steps_per_example=plan.steps_per_example)
    elif plan.sampling == "fixed_size":  # SampledWithoutReplacement(b, N) per step, by RDP
        accountant = FixedSizeAccountant(int(round(plan.expected_batch_size)), n, float(plan.noise_parameter[0]),
                                         config.delta, orders=config.orders)
    else:
        accountant = GroupAccountant(plan.rate, plan.noise_parameter, config.delta, orders=config.orders,
                                     mechanism=plan.mechanism, dimension=plan.dimension, bands=plan.bands)
    history: list[EpochRecord] = []
    start_epoch = 0
    if saved is not None:
        params = arrays_to_tree("params_", arrays, params)
        rest = arrays_to_tree("rest_", arrays, rest)
        opt_state = arrays_to_tree("opt_", arrays, opt_state)
        accountant.steps = int(meta["steps"])
        history = [EpochRecord(**{**r, "group_epsilon": tuple(r["group_epsilon"])}) for r in meta["history"]]
        start_epoch = int(meta["epoch"])
        nnx.update(model, params, rest)

    single = np.unique(plan.clip).size == 1  # one clip norm (an argument), else per-record norms gathered in the step
    record_clip = jnp.asarray(plan.record_clip)
    norm = sensitivity_norm(plan.noise_event())  # clip in the norm the noise's sensitivity is measured in
    step = step_program(graphdef, optimizer, loss_fn, config.microbatch_size, not single, norm)
    numbers = {"clip": jnp.asarray(float(plan.clip[0])) if single else None,
               "noise": noise_numbers(plan.noise_event(), sensitivity=float(plan.clip[0]),
                                      normalize_by=plan.expected_batch_size, params=params)}
    if correlated:  # the strategy's bands are arguments too: another σ of the same run length compiles nothing
        from .noise import band_table

        numbers["band"] = jnp.asarray(band_table(strategy))
    evaluate = make_evaluator(graphdef, int(config.eval_batch_size), config.loss)
    x, y = jnp.asarray(data.x_train), jnp.asarray(data.y_train)
    test = padded_test_set(data, int(config.eval_batch_size))
    loss_key = jax.random.key(loss_seed)
    buckets: set[int] = set()
    traces_before, retraced = step.traces, 0
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
            for first in range(0, allowed, block):
                # always a whole block (one compiled draw); the steps past the epoch's are drawn again later
                for batch in sampler.sample_block(accountant.steps, block)[:allowed - first]:
                    size, traces = int(batch.indices.shape[0]), step.traces
                    params, opt_state = step(params, opt_state, x, y, record_clip, batch.indices, batch.mask,
                                             jax.random.fold_in(loss_key, batch.step), rest, numbers)
                    if size in buckets:  # a bucket this run has run before: any trace is a second program
                        retraced += step.traces - traces
                    buckets.add(size)
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
            if checkpoint_dir and jax.process_index() == 0:  # one writer in a multi-process run
                meta = {"fingerprint": fingerprint, "epoch": epoch + 1, "steps": accountant.steps,
                        "plan": plan.scalars(), "history": [dataclasses.asdict(r) for r in history],
                        "config": config.to_json()}
                save_checkpoint(checkpoint_dir, epoch + 1,
                                 {**leaves_to_arrays("params_", params), **leaves_to_arrays("rest_", rest),
                                  **leaves_to_arrays("opt_", opt_state),
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
        compiled_steps=len(buckets) + retraced,
        seconds=time.perf_counter() - started,
        new_programs=step.traces - traces_before,
    )
