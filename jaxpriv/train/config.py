"""The configuration of a DP-SGD run (:class:`DPSGDConfig`) and its validation, with no JAX: the
command line checks a run's arguments before importing JAX."""

from __future__ import annotations

import dataclasses
import hashlib

import numpy as np

from .._checks import check_values

__all__ = ["DPSGDConfig", "check_config", "MECHANISMS", "TRAIN_MECHANISMS", "PERSONALIZATION", "LOSSES", "SAMPLINGS"]

PERSONALIZATION = ("sample", "scale")
#: Noise mechanisms of :class:`DPSGDConfig` (see :mod:`jaxpriv.train.plan` for how each is accounted): the
#: names of :data:`jaxpriv.events.NOISE_MECHANISMS`, spelled out here so that this module needs no JAX
#: (the command line checks its arguments before importing it).
MECHANISMS = ("gaussian", "laplace", "staircase")
#: What :class:`DPSGDConfig` ``mechanism`` accepts: the noise mechanisms, and ``"bandmf"`` — Gaussian noise
#: correlated across steps by a b-banded matrix factorization, with cyclic Poisson sampling (MATH §12).
TRAIN_MECHANISMS = MECHANISMS + ("bandmf",)
#: Built-in training losses of :class:`DPSGDConfig` (``loss``): softmax cross-entropy on integer class labels,
#: or the mean squared error of a regression (:func:`jaxpriv.train.dpsgd.mse_loss`).
LOSSES = ("cross_entropy", "mse")
#: How the trainers draw batches (:class:`DPSGDConfig` ``sampling``, :func:`jaxpriv.train.make_private`):
#: Poisson sampling; balls in bins — each record in one uniformly chosen step of each epoch; random
#: allocation — each record in k uniformly chosen steps of each epoch (MATH §11); fixed-size batches — a
#: uniform b-subset of the records at every step (MATH §11.5).
SAMPLINGS = ("poisson", "balls_in_bins", "random_allocation", "fixed_size")
#: The samplings whose ε is not Poisson subsampling's: Gaussian noise, one budget, ε or σ (not both).
_NON_POISSON = SAMPLINGS[1:]


@dataclasses.dataclass(frozen=True, eq=False)
class DPSGDConfig:
    """Hyper-parameters of a DP-SGD run. Give exactly one way to set the privacy:

    * ``epsilon`` (σ calibrated; with ``noise_multiplier`` too, q is calibrated instead),
    * ``noise_multiplier`` alone (ε reported, no budget),
    * ``budgets`` — one ε per training record — with ``personalization`` ``"sample"`` or ``"scale"``
      (and optionally ``noise_multiplier`` to fix σ in ``"sample"``).

    Attributes:
      epochs: number of epochs; an epoch is round(N / batch_size) steps.
      batch_size: expected batch size B = Σ_i q_i (so the mean rate is B/N); never the realised size.
      clip_norm: per-example clip norm C (the mean clip norm in ``"scale"``): L2 for ``"gaussian"``, L1 for
        ``"laplace"``.
      delta: δ of every (ε, δ) statement.
      seed: seeds the sampler, the noise and the loss function's per-step key.
      orders: Rényi orders of the accounting (default :data:`jaxpriv.rdp.DEFAULT_ORDERS`).
      microbatch_size: examples per vectorised chunk inside the clipped-gradient sum (memory bound).
      eval_batch_size: test examples per evaluation chunk.
      mechanism: ``"gaussian"`` (default) or ``"laplace"`` (L1 clipping, per-coordinate Laplace noise;
        ``noise_multiplier`` is then the Laplace scale per unit L1 sensitivity b, and per-record budgets
        are not supported), or ``"staircase"`` (L1 clipping, per-coordinate staircase noise with γ*;
        ``noise_multiplier`` is then the per-step ε₀; accounted over the model's d parameters).
      loss: ``"cross_entropy"`` (default; a classifier's logits and integer labels, evaluated by accuracy
        and cross-entropy) or ``"mse"`` (regression: per-example mean squared error over the outputs,
        evaluated by the test MSE; the reported accuracy is NaN). A ``loss_fn`` given to
        :func:`~jaxpriv.train.dpsgd.train` replaces the training loss, not the evaluation.
      bands: with ``mechanism="bandmf"``, the number of bands b of the strategy (MATH §12): the noise is
        C⁻¹z for the optimised b-banded C of the run's T steps (:func:`jaxpriv.mf.banded_strategy`), the
        records are split into b partitions sampled in turn (each at rate b·B/N in its steps, so
        ``batch_size`` × b ≤ N), and the run is accounted as ⌈T/b⌉ subsampled Gaussians
        (:class:`jaxpriv.events.AmplifiedBandMF`). 1 for every other mechanism.
      sampling: ``"poisson"`` (default: each record in each step with probability q_i) or
        ``"balls_in_bins"`` (each record in exactly one uniformly chosen step of each epoch of
        t = round(N / batch_size) steps, :class:`jaxpriv.train.sampling.AllocationSampler`; accounted as
        ``RandomAllocation(1, t, Gaussian(σ))`` per epoch by the PLD accountant's certified upper end,
        :class:`jaxpriv.train.plan.AllocationAccountant`, MATH §11). Balls in bins needs the Gaussian
        mechanism, one budget for all (no ``budgets``: per-record plans are accounted by RDP, which random
        allocation lacks) and either ``epsilon`` or ``noise_multiplier`` (q = 1/t is fixed, so it is not
        calibrated). ``"random_allocation"``: each record in exactly k = ``steps_per_example`` uniformly
        chosen steps of each epoch of t = round(k·N / batch_size) steps (so ``batch_size`` stays the expected
        batch size; an epoch uses every record k times), accounted as ``RandomAllocation(k, t, Gaussian(σ))``
        per epoch by PLD, with the same restrictions as balls in bins (k = 1 is balls in bins).
        ``"fixed_size"``: every step a uniform subset of exactly b = ``batch_size`` records (an integer),
        without replacement within a step and independently across steps
        (:class:`jaxpriv.train.sampling.FixedSizeSampler`), accounted as
        ``SampledWithoutReplacement(b, N, Gaussian(σ))`` per step by the RDP accountant at ``orders``
        (:class:`jaxpriv.train.plan.FixedSizeAccountant`, MATH §11.5). Its adjacency is add/remove of one
        record to or from the N training records: of the two neighbouring datasets the larger has N or N + 1
        records, and the bound at N (batch fraction b/N) covers both. The coupling that proves it lets the
        added record displace another in the batch, so each step's sensitivity is doubled: the step is
        dominated by ``PoissonSampled(b/N, Gaussian(σ/2))``, and fixed-size batches need about twice the σ of
        Poisson ones for the same ε. Same restrictions as balls in bins.
      steps_per_example: k of ``"random_allocation"``, an integer ≥ 1 (1 for every other sampling).
    """

    epochs: int = 30
    batch_size: float = 128.0
    clip_norm: float = 1.0
    delta: float = 1e-5
    epsilon: float | None = None
    noise_multiplier: float | None = None
    budgets: np.ndarray | None = None
    personalization: str = "sample"
    seed: int = 0
    orders: tuple | None = None
    microbatch_size: int | None = None
    eval_batch_size: int = 512
    mechanism: str = "gaussian"
    loss: str = "cross_entropy"
    bands: int = 1
    sampling: str = "poisson"
    steps_per_example: int = 1

    def to_json(self) -> dict:
        """The scalar fields as JSON values; the budgets as their count and SHA-256 (they can be long)."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "budgets"}
        out["orders"] = None if self.orders is None else [float(a) for a in self.orders]
        if self.bands == 1:  # not BandMF: the fields of a run written before ``bands`` existed (same fingerprint)
            del out["bands"]
        if self.sampling == "poisson":  # likewise for runs written before ``sampling`` existed
            del out["sampling"]
        if self.steps_per_example == 1:  # likewise for ``steps_per_example``
            del out["steps_per_example"]
        if self.budgets is not None:
            b = np.ascontiguousarray(self.budgets, dtype=np.float64)
            out["budgets"] = {"n": int(b.size), "sha256": hashlib.sha256(b.tobytes()).hexdigest()}
        return out


def check_config(config: DPSGDConfig, n: int) -> None:
    """Raise ValueError naming the first invalid field (and its valid range); ``n`` is the number of
    training records. Numpy only, so the command line runs it before importing JAX.

    Example:
      >>> check_config(DPSGDConfig(epsilon=3.0, batch_size=500.0), n=100)
      Traceback (most recent call last):
      ...
      ValueError: batch_size must lie in (0.0, 100.0], got 500.0
    """
    if not isinstance(config, DPSGDConfig):
        raise ValueError(f"config must be a DPSGDConfig, got {type(config).__name__}")
    check_values("epochs", config.epochs, 1.0, np.inf, integer=True)
    check_values("batch_size", config.batch_size, 0.0, float(n), lo_open=True)
    check_values("clip_norm", config.clip_norm, 0.0, np.inf, lo_open=True)
    check_values("delta", config.delta, 0.0, 1.0, lo_open=True, hi_open=True)
    check_values("seed", config.seed, 0.0, 2.0**32 - 1, integer=True)
    check_values("eval_batch_size", config.eval_batch_size, 1.0, np.inf, integer=True)
    if config.microbatch_size is not None:
        check_values("microbatch_size", config.microbatch_size, 1.0, np.inf, integer=True)
    if config.orders is not None:
        check_values("orders", config.orders, 1.0, np.inf, lo_open=True)
    if config.epsilon is not None:
        check_values("epsilon", config.epsilon, 0.0, np.inf, lo_open=True)
    if config.noise_multiplier is not None:
        check_values("noise_multiplier", config.noise_multiplier, 0.0, np.inf, lo_open=True)
    if config.mechanism not in TRAIN_MECHANISMS:
        raise ValueError(f"mechanism must be one of {TRAIN_MECHANISMS}, got {config.mechanism!r}")
    check_values("bands", config.bands, 1.0, np.inf, integer=True)
    if config.mechanism != "bandmf" and config.bands != 1:
        raise ValueError(f"bands > 1 needs mechanism 'bandmf', got mechanism {config.mechanism!r} with bands "
                         f"{config.bands!r}")
    if config.mechanism == "bandmf":
        check_values("batch_size × bands", float(config.batch_size) * float(config.bands), 0.0, float(n),
                     lo_open=True)
    if config.loss not in LOSSES:
        raise ValueError(f"loss must be one of {LOSSES}, got {config.loss!r}")
    if config.sampling not in SAMPLINGS:
        raise ValueError(f"sampling must be one of {SAMPLINGS}, got {config.sampling!r}")
    check_values("steps_per_example", config.steps_per_example, 1.0, np.inf, integer=True)
    if config.sampling != "random_allocation" and config.steps_per_example != 1:
        raise ValueError(f"steps_per_example > 1 needs sampling 'random_allocation', got sampling "
                         f"{config.sampling!r} with steps_per_example {config.steps_per_example!r}")
    if config.sampling in _NON_POISSON:
        name = f"sampling {config.sampling!r}"
        if config.mechanism != "gaussian":
            raise ValueError(f"{name} is accounted for Gaussian noise only (MATH §11): use mechanism 'gaussian', "
                             f"got {config.mechanism!r}")
        if config.budgets is not None:
            raise ValueError("per-record budgets are accounted by RDP on per-record Poisson rates, which "
                             f"{name} lacks: use sampling 'poisson' with budgets")
        if config.epsilon is not None and config.noise_multiplier is not None:
            fixed = ("q = b/N is fixed by the batch size" if config.sampling == "fixed_size" else
                     "q = k/t is fixed by the allocation (t steps per epoch)")
            raise ValueError(f"{name} fixes the rate ({fixed}), so only σ can be calibrated: give epsilon or "
                             "noise_multiplier, not both")
    if config.sampling == "fixed_size":
        check_values("batch_size", config.batch_size, 1.0, float(n), integer=True)
    if config.mechanism != "gaussian" and config.budgets is not None:
        raise ValueError(f"per-record budgets (IDP-SGD) are Gaussian-only: use mechanism 'gaussian', got "
                         f"{config.mechanism!r}")
    if config.mechanism != "gaussian" and config.epsilon is not None and config.noise_multiplier is not None:
        raise ValueError(f"mechanism {config.mechanism!r} calibrates the noise scale to epsilon: give epsilon or "
                         "noise_multiplier (the fixed scale), not both")
    if config.personalization not in PERSONALIZATION:
        raise ValueError(f"personalization must be one of {PERSONALIZATION}, got {config.personalization!r}")
    if config.budgets is not None:
        budgets = np.asarray(config.budgets)
        if budgets.ndim != 1 or budgets.size != n:
            raise ValueError(f"budgets must be a 1-D array with one ε per training record ({n}), got shape {budgets.shape}")
        check_values("budgets", budgets, 0.0, np.inf, lo_open=True)
        if config.epsilon is not None:
            raise ValueError("give either epsilon (one budget for all) or budgets (one per record), not both")
        if config.personalization == "scale" and config.noise_multiplier is not None:
            raise ValueError("personalization 'scale' calibrates one noise multiplier per group: leave noise_multiplier unset")
    elif config.epsilon is None and config.noise_multiplier is None:
        raise ValueError("set epsilon (a target), noise_multiplier (a fixed σ) or budgets (per-record targets)")
