"""The privacy plan of a DP-SGD run and the accountant that tracks it (MATH §5, §6).

Privacy is planned before training (:func:`plan_privacy`) and accounted after every epoch
(:class:`GroupAccountant`). Records are grouped by their (rate, noise multiplier); each group's ε is
the exact RDP of the Poisson-subsampled Gaussian (MATH §1.3) composed over the steps taken (§1.7) and
converted (§1.8): the group's steps are an event (:mod:`jaxpriv.events`) and the library's RDP accountant
(:func:`jaxpriv.accounting.epsilon`) reports its ε, as for every other caller. Configurations:

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
:func:`jaxpriv.calibrate.harmonizer.harmonize` (the same accounting, solved conservatively).

``"staircase"``: per-coordinate staircase noise (γ = γ*, per-step ε₀, sensitivity C) on the L1-clipped
sum. Its RDP at shift t is **concave** in t (:func:`jaxpriv.mechanisms.staircase.rdp_shift`), so the 1-D
curve is not a bound: spreading the L1 shift evenly over the model's d parameters is the worst case, and
each step is accounted with :func:`jaxpriv.mechanisms.staircase.rdp_l1` (d·ρ(C/d)), subsampled by
:func:`jaxpriv.rdp.subsampled`; a target ε calibrates ε₀ through the Harmonizer with the same curve.
"""

from __future__ import annotations

import dataclasses
import math
import warnings

import jax.numpy as jnp
import numpy as np

from .. import accounting, calibrate, events, rdp
from .._numerics import check_array, check_orders, float64
from .config import DPSGDConfig, check_config

__all__ = ["PrivacyPlan", "GroupAccountant", "AllocationAccountant", "FixedSizeAccountant", "plan_privacy"]


@dataclasses.dataclass(frozen=True)
class PrivacyPlan:
    """What the trainer runs and the accountant accounts, fixed before training.

    Records are partitioned into groups g (``group_of_record``) sharing a rate ``rate[g]``, a noise
    parameter ``noise_parameter[g]`` (the mechanism's: noise multiplier σ, Laplace scale b per unit L1
    sensitivity, or the staircase's ε₀), a clip norm ``clip[g]`` and a budget ``budget[g]`` (inf when none).
    The noise added to the clipped sum has scale ``noise_std`` = noise_parameter[g]·clip[g] for every g
    (for Laplace the scale b·C, not a std), and the sum is divided by ``expected_batch_size`` = Σ_i q_i.
    ``sigma`` is the deprecated name of ``noise_parameter`` (it held b or ε₀ for the other mechanisms).
    """

    mode: str
    steps_per_epoch: int
    total_steps: int
    group_of_record: np.ndarray
    budget: np.ndarray
    rate: np.ndarray
    noise_parameter: np.ndarray
    clip: np.ndarray
    noise_std: float
    expected_batch_size: float
    mechanism: str = "gaussian"
    dimension: int = 1
    bands: int = 1
    sampling: str = "poisson"
    steps_per_example: int = 1

    @property
    def sigma(self) -> np.ndarray:
        """Deprecated: :attr:`noise_parameter` (σ only for the Gaussian mechanism)."""
        warnings.warn("PrivacyPlan.sigma is now PrivacyPlan.noise_parameter", DeprecationWarning, stacklevel=2)
        return self.noise_parameter

    @property
    def record_rates(self) -> np.ndarray:
        return self.rate[self.group_of_record]

    @property
    def record_clip(self) -> np.ndarray:
        return self.clip[self.group_of_record]

    def noise_event(self):
        """The event of the run's one noise, per unit of the clipped sum's sensitivity ``clip[0]`` (MATH §4,
        §6): ``Gaussian(σ)``, ``Laplace(b)`` or ``Staircase(ε₀, None, d)`` at group 0's parameter. Every group
        has the same σ_g·C_g = ``noise_std``, so one noise draw serves them all. ``"bandmf"``: ``Gaussian(σ)``,
        the law of z before it is correlated (MATH §12)."""
        family = _family_name(self.mechanism)
        return events.noise_mechanism(family, float(self.noise_parameter[0]), self.dimension)

    def arrays(self) -> dict:
        return {f"plan_{k}": getattr(self, k) for k in ("group_of_record", "budget", "rate", "noise_parameter", "clip")}

    def scalars(self) -> dict:
        return {k: getattr(self, k) for k in ("mode", "steps_per_epoch", "total_steps", "noise_std", "expected_batch_size",
                                              "mechanism", "dimension", "bands", "sampling", "steps_per_example")}


def _family_name(mechanism: str) -> str:
    """The additive noise behind a trainer mechanism: BandMF's z is Gaussian (MATH §12)."""
    return "gaussian" if mechanism == "bandmf" else mechanism


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
    (calibration is conservative, MATH §5). See the module docstring for the configurations. With
    ``config.sampling == "balls_in_bins"`` the rate is 1/t (t = round(N / batch_size) steps per epoch) and
    σ is calibrated by :meth:`AllocationAccountant.noise_multiplier` (the PLD accountant, MATH §11); with
    ``"random_allocation"`` the rate is k/t, t = round(k·N / batch_size), calibrated likewise; with
    ``"fixed_size"`` the rate is b/N and σ is calibrated by :meth:`FixedSizeAccountant.noise_multiplier`
    (RDP at ``config.orders``, MATH §11.5).

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
      >>> plan.total_steps, round(float(plan.noise_parameter[0]), 4), plan.expected_batch_size
      (1000, 1.0223, 100.0)
    """
    n = int(check_array("n", n, 1.0, np.inf, integer=True))
    check_config(config, n)
    family = events.noise_family(_family_name(config.mechanism))
    if family.needs_dimension:
        if dimension is None:
            raise ValueError(f"dimension (the number of model parameters) is required for mechanism {family.name!r}")
        dimension = int(check_array("dimension", dimension, 1.0, np.inf, integer=True))
    else:
        dimension = 1
    steps_per_epoch = max(1, int(round(n / config.batch_size)))
    steps = config.epochs * steps_per_epoch
    mean_rate = config.batch_size / n
    bands = int(config.bands)
    if bands > steps:
        raise ValueError(f"bands must lie in [1, {steps}] (the run's steps), got {bands}")
    # BandMF (MATH §12.2): partition t mod b is sampled at step t, at b times the mean rate (an expected
    # batch of B records per step), and a record takes part in at most ⌈T/b⌉ of the T steps
    rate_steps = math.ceil(steps / bands)
    part_rate = mean_rate * bands
    delta, orders, clip = config.delta, config.orders, config.clip_norm
    if config.sampling != "poisson":  # check_config: Gaussian, one budget, ε or σ
        return _bounded_plan(config, n)
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
            mode, rate, sigma = f"fixed {family.parameter}", mean_rate, config.noise_multiplier
        elif family.event_type is not events.Gaussian:  # the Gaussian has its own fused calibration below
            mode, rate = f"{family.parameter} for ε", mean_rate
            sigma = _harmonized_scale_for(config.mechanism, config.epsilon, mean_rate, steps, delta, orders, dimension)
        elif config.noise_multiplier is None:
            mode, rate = "σ for ε", part_rate
            sigma = float(calibrate.noise_multiplier(config.epsilon, part_rate, rate_steps, delta, orders=orders))
            if not math.isfinite(sigma):
                raise _unattainable(f"epsilon {config.epsilon:g}")
        else:
            mode, sigma = "q for ε", config.noise_multiplier
            rate = float(calibrate.sampling_rate(config.epsilon, sigma, steps, delta, orders=orders))
            if rate <= 0:
                raise _unattainable(f"epsilon {config.epsilon:g}")
        if config.epsilon is None:
            rate = part_rate
        rate, sigmas, clips = np.array([float(rate)]), np.array([float(sigma)]), np.array([float(clip)])
        counts = counts / bands  # the expected batch: rate × the partition's size
    noise_std = float(sigmas[0] * clips[0])
    return PrivacyPlan(
        mode=mode,
        steps_per_epoch=steps_per_epoch,
        total_steps=steps,
        group_of_record=np.asarray(group, dtype=np.int64),
        budget=np.asarray(budget, dtype=np.float64),
        rate=np.asarray(rate, dtype=np.float64),
        noise_parameter=np.asarray(sigmas, dtype=np.float64),
        clip=np.asarray(clips, dtype=np.float64),
        noise_std=noise_std,
        expected_batch_size=float(np.dot(counts, rate)),
        mechanism=config.mechanism,
        dimension=dimension,
        bands=bands,
    )


def _bounded_plan(config: DPSGDConfig, n: int) -> PrivacyPlan:
    """The plan of a run whose batches are not Poisson samples (random allocation, fixed size): one group,
    Gaussian noise, σ given or calibrated by the scheme's own accountant (MATH §11)."""
    k = int(config.steps_per_example)
    if config.sampling == "fixed_size":
        per_epoch = max(1, int(round(n / config.batch_size)))
        rate, expected = float(config.batch_size) / n, float(config.batch_size)
        calibrate_sigma = lambda: FixedSizeAccountant.noise_multiplier(  # noqa: E731
            config.epsilon, int(config.batch_size), n, config.epochs * per_epoch, config.delta, orders=config.orders)
    else:  # random allocation (balls in bins: k = 1); an epoch uses every record k times
        per_epoch = max(k, int(round(k * n / config.batch_size)))
        rate = k / per_epoch
        expected = n * rate
        calibrate_sigma = lambda: AllocationAccountant.noise_multiplier(  # noqa: E731
            config.epsilon, per_epoch, config.epochs, config.delta, steps_per_example=k)
    if config.epsilon is None:
        mode, sigma = "fixed σ", float(config.noise_multiplier)
    else:
        mode, sigma = "σ for ε", calibrate_sigma()
        if not math.isfinite(sigma):
            raise _unattainable(f"epsilon {config.epsilon:g}")
    return PrivacyPlan(mode=mode, steps_per_epoch=per_epoch, total_steps=config.epochs * per_epoch,
                       group_of_record=np.zeros(n, dtype=np.int64),
                       budget=np.array([np.inf if config.epsilon is None else float(config.epsilon)]),
                       rate=np.array([rate]), noise_parameter=np.array([sigma]), clip=np.array([float(config.clip_norm)]),
                       noise_std=sigma * float(config.clip_norm), expected_batch_size=expected, sampling=config.sampling,
                       steps_per_example=k)


def _harmonized_scale_for(mechanism: str, epsilon: float, rate: float, steps: int, delta: float, orders,
                          dimension: int) -> float:
    """The Laplace scale b (per unit L1 sensitivity) or the staircase's per-step ε₀ that spends ``epsilon``
    in ``steps`` subsampled steps: UDP-FL's Harmonizer (:func:`jaxpriv.calibrate.harmonizer.harmonize`)
    solves exactly this, with the accountant :class:`GroupAccountant` asks."""
    import warnings

    from ..calibrate import harmonizer

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # an unattainable target is reported below
        b = float(harmonizer.harmonize(mechanism, epsilon, delta, q=rate, rounds=steps, orders=orders,
                                       dimension=dimension).scale)
    if not (math.isfinite(b) and b > 0):
        raise _unattainable(f"epsilon {epsilon:g}")
    # The Harmonizer solved with this very accountant (accounting.RDP at these orders, the same event), so
    # the trainer's ε at b is the one it certified; a disagreement would be a bug, not rounding.
    account = GroupAccountant([rate], [b], delta, orders=orders, mechanism=mechanism, dimension=dimension)
    spent = float(account.epsilon(steps)[0])
    if not spent <= epsilon:
        raise RuntimeError(f"the Harmonizer's {mechanism} scale {b!r} spends ε = {spent!r} > {epsilon!r} by the "
                           "trainer's accountant")
    return b


# --------------------------------------------------------------------------------------------------
# Accountant
# --------------------------------------------------------------------------------------------------


class GroupAccountant:
    """Per-group accountant of DP-SGD: group g takes T steps of its noise mechanism on a Poisson sample at
    rate q_g, the event ``SelfComposed(PoissonSampled(q_g, noise_g), T)``, whose ε the library's RDP
    accountant reports (:func:`jaxpriv.accounting.epsilon` with :class:`jaxpriv.accounting.RDP` at
    ``orders``): the trainer asks the same accountant as every other caller. All steps of a run are alike,
    so the state is the step count.

    * ``"gaussian"``: the Poisson-subsampled Gaussian, exact RDP (MATH §1.3), composed (§1.7) and converted
      (§1.8); σ_g = ``sigmas[g]`` (the clipped sum has sensitivity C_g and noise std σ_g·C_g).
    * ``"laplace"``: the Poisson-subsampled d-dimensional Laplace with L1 sensitivity 1 and scale b_g =
      ``sigmas[g]``, whose worst case is the 1-D curve (module docstring; Zhu & Wang 2019, MATH §1.2, §1.4).
    * ``"staircase"``: per-coordinate staircase noise at per-step ε₀ = ``sigmas[g]`` over d = ``dimension``
      coordinates (:func:`jaxpriv.mechanisms.staircase.rdp_l1`).
    * ``"bandmf"``: b-banded correlated Gaussian noise with cyclic Poisson sampling over b = ``bands``
      partitions at rate q_g (MATH §12.2): after T steps a record has taken part in at most ⌈T/b⌉ of them,
      and ε is that of ⌈T/b⌉ subsampled Gaussians (the event :class:`jaxpriv.events.AmplifiedBandMF`).

    Args:
      rates, sigmas: per-group q_g ∈ [0, 1] and σ_g > 0 (1-D, same length); b_g or ε₀_g as above.
      delta: δ ∈ (0, 1).
      orders: Rényi orders (default :data:`jaxpriv.rdp.DEFAULT_ORDERS`).
      steps: steps already taken (≥ 0).
      mechanism: one of :data:`jaxpriv.events.NOISE_MECHANISMS`.
      dimension: number of noised coordinates d; required for ``"staircase"``, ignored otherwise.
      bands: the partitions b of ``"bandmf"`` (1 otherwise).

    Example:
      >>> from jaxpriv.train.dpsgd import GroupAccountant
      >>> acc = GroupAccountant([0.01], [1.1], delta=1e-5, steps=10_000)
      >>> round(float(acc.epsilon()[0]), 4)
      5.632
      >>> acc.step
      PoissonSampled(rate=array([0.01]), event=Gaussian(noise_multiplier=array([1.1])))
    """

    def __init__(self, rates, sigmas, delta: float, *, orders=None, steps: int = 0, mechanism: str = "gaussian",
                 dimension: int | None = None, bands: int = 1):
        self.bands = int(check_array("bands", bands, 1.0, np.inf, integer=True))
        if mechanism != "bandmf" and self.bands != 1:
            raise ValueError(f"bands > 1 needs mechanism 'bandmf', got {mechanism!r}")
        mechanism = _family_name(mechanism)
        if events.noise_family(mechanism).needs_dimension and dimension is None:  # a 1-D curve is no bound
            raise ValueError(f"dimension (the number of noised coordinates d ≥ 1) is required for mechanism {mechanism!r}")
        self.orders = check_orders(rdp.DEFAULT_ORDERS if orders is None else orders)
        rates = np.atleast_1d(np.asarray(check_array("rates", rates, 0.0, 1.0)))
        sigmas = np.atleast_1d(np.asarray(check_array("sigmas", sigmas, 0.0, np.inf, lo_open=True)))
        if rates.ndim != 1 or rates.shape != sigmas.shape:
            raise ValueError(f"rates and sigmas must be 1-D of the same length, got {rates.shape} and {sigmas.shape}")
        self.delta = float(check_array("delta", delta, 0.0, 1.0, lo_open=True, hi_open=True))
        self.steps = int(check_array("steps", steps, 0.0, np.inf, integer=True))
        self._account_steps(events.PoissonSampled(rates, events.noise_mechanism(
            mechanism, sigmas, 1 if dimension is None else dimension)))

    def _account_steps(self, step) -> None:
        #: one step of every group, as an event
        self.step = step
        self._accountant = accounting.RDP(self.orders)
        # every step is alike: the accountant's curve of one step, composed T times, is T times it (MATH §1.7)
        self._step_curve = self._accountant.curve(self.step)

    def epsilon(self, steps: int | None = None) -> np.ndarray:
        """ε of every group after ``steps`` steps (default: the steps taken), float64 (G,): the accountant's
        ε of ``SelfComposed(step, steps)``."""
        steps = self.steps if steps is None else int(check_array("steps", steps, 0.0, np.inf, integer=True))
        participations = -(-steps // self.bands)  # ⌈steps/b⌉: all of them but for BandMF
        return self._accountant.epsilon_of_curve(participations * self._step_curve, self.delta).reshape(-1)

    def steps_within(self, budgets, limit: int) -> int:
        """Largest k ≤ ``limit`` such that every group stays within its budget after k more steps
        (ε is increasing in the number of steps: bisection on this very accountant's ε, so the reported
        ε never exceeds a budget)."""
        return _steps_within(self, budgets, limit)


def _steps_within(accountant, budgets, limit: int) -> int:
    """:meth:`GroupAccountant.steps_within` for any accountant with ``steps`` and ``epsilon(steps)``."""
    budgets = np.asarray(budgets, dtype=np.float64)
    limit = int(check_array("limit", limit, 0.0, np.inf, integer=True))
    if np.all(np.isinf(budgets)):  # no budget: every step is within it
        return limit
    within = lambda k: bool(np.all(accountant.epsilon(accountant.steps + k) <= budgets))  # noqa: E731
    if within(limit):
        return limit
    if not within(0):  # already over budget (a resumed run that was stopped)
        return 0
    lo, hi = 0, limit  # invariant: within(lo) and not within(hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if within(mid) else (lo, mid)
    return lo


class AllocationAccountant:
    """The accountant of random-allocation training (:class:`jaxpriv.train.sampling.AllocationSampler`):
    each epoch of t steps, in which every record takes part in k of them, is one round of
    ``RandomAllocation(k, t, Gaussian(σ))`` (k = 1: balls in bins), and a run of T steps is ⌈T/t⌉ rounds — a
    partial epoch releases a part of a round, a post-processing of the whole round, so it is counted whole
    (MATH §11). ε is the PLD accountant's certified upper end; the state is the step count, like
    :class:`GroupAccountant`'s.

    Args:
      steps_per_epoch: t, an integer ≥ 1.
      sigma: the noise multiplier σ > 0.
      delta: δ ∈ (0, 1).
      steps: steps already taken (≥ 0).
      steps_per_example: k, an integer in [1, t] (default 1).

    Example:
      >>> from jaxpriv.train.plan import AllocationAccountant
      >>> acc = AllocationAccountant(10, 2.0, delta=1e-5, steps=25)  # 3 rounds of one-of-10
      >>> bool(0 < acc.epsilon()[0] < 2)
      True
    """

    def __init__(self, steps_per_epoch: int, sigma: float, delta: float, *, steps: int = 0,
                 steps_per_example: int = 1):
        self.steps_per_epoch = int(check_array("steps_per_epoch", steps_per_epoch, 1.0, np.inf, integer=True))
        self.steps_per_example = int(check_array("steps_per_example", steps_per_example, 1.0,
                                                 float(self.steps_per_epoch), integer=True))
        self.sigma = float(check_array("sigma", sigma, 0.0, np.inf, lo_open=True))
        self.delta = float(check_array("delta", delta, 0.0, 1.0, lo_open=True, hi_open=True))
        self.steps = int(check_array("steps", steps, 0.0, np.inf, integer=True))
        self._by_rounds: dict[int, float] = {}

    @staticmethod
    def run_event(steps_per_epoch: int, sigma, rounds: int, steps_per_example: int = 1):
        """The event of ``rounds`` epochs of t = ``steps_per_epoch`` steps at noise σ (numbers or arrays), each
        record in k = ``steps_per_example`` steps of each epoch."""
        step = events.RandomAllocation(steps_per_example, steps_per_epoch, events.Gaussian(sigma))
        return events.SelfComposed(step, rounds)

    def event(self, rounds: int):
        """The event of ``rounds`` epochs of this run."""
        return self.run_event(self.steps_per_epoch, self.sigma, rounds, self.steps_per_example)

    @staticmethod
    def noise_multiplier(epsilon: float, steps_per_epoch: int, epochs: int, delta: float, *,
                         steps_per_example: int = 1) -> float:
        """The σ at which ``epochs`` epochs of t = ``steps_per_epoch`` steps (k = ``steps_per_example`` per
        record) spend at most ``epsilon`` at ``delta`` (:func:`jaxpriv.calibrate.calibrate` on
        :meth:`run_event` by the PLD accountant, to 0.1% of σ, on the safe side; inf where no σ in [0.2, 200]
        meets it).

        Example:
          >>> from jaxpriv.train.plan import AllocationAccountant
          >>> sigma = AllocationAccountant.noise_multiplier(4.0, 4, 4, 1e-5)
          >>> acc = AllocationAccountant(4, sigma, 1e-5, steps=16)
          >>> bool(0.99 * 4.0 < acc.epsilon()[0] <= 4.0)
          True
        """
        run = lambda s: AllocationAccountant.run_event(steps_per_epoch, s, int(epochs), steps_per_example)  # noqa: E731
        wide = (0.2, 200.0)
        with warnings.catch_warnings():  # an unattainable target is inf, reported by the caller
            warnings.simplefilter("ignore", RuntimeWarning)
            # Each PLD evaluation at a new σ builds the round's laws on the host, and a small σ costs the most
            # (σ = 0.2: seconds). So search first around Poisson subsampling's σ at rate k/t by RDP (cheap):
            # random allocation's σ lies near it [FS25]. That bracket is only a guess; its answer is kept when
            # strictly inside it (calibrate certified it), else the wide bracket decides.
            poisson = float(calibrate.noise_multiplier(epsilon, steps_per_example / steps_per_epoch,
                                                       int(epochs) * steps_per_epoch, delta))
            if math.isfinite(poisson):
                near = (max(0.6 * poisson, wide[0]), min(1.2 * poisson, wide[1]))
                sigma = float(calibrate.calibrate(run, epsilon, delta, bounds=near, accountant="pld", xtol=1e-3))
                if near[0] < sigma < near[1]:
                    return sigma
            return float(calibrate.calibrate(run, epsilon, delta, bounds=wide, accountant="pld", xtol=1e-3))

    def steps_within(self, budgets, limit: int) -> int:
        """Largest k ≤ ``limit`` such that ε stays within ``budgets`` after k more steps (as
        :meth:`GroupAccountant.steps_within`, on this accountant's ε)."""
        return _steps_within(self, budgets, limit)

    def epsilon(self, steps: int | None = None) -> np.ndarray:
        """ε after ``steps`` steps (default: the steps taken), float64 of shape (1,)."""
        steps = self.steps if steps is None else int(check_array("steps", steps, 0.0, np.inf, integer=True))
        rounds = -(-steps // self.steps_per_epoch)
        if rounds not in self._by_rounds:
            value = 0.0 if rounds == 0 else float(accounting.epsilon(self.event(rounds), self.delta, accountant="pld"))
            self._by_rounds[rounds] = value
        return np.array([self._by_rounds[rounds]])


class FixedSizeAccountant(GroupAccountant):
    """The accountant of fixed-size training (:class:`jaxpriv.train.sampling.FixedSizeSampler`): every step
    is ``SampledWithoutReplacement(b, N, Gaussian(σ))`` — a uniform b-subset of the N records — and T steps
    are its T-fold composition, whose ε the RDP accountant at ``orders`` reports (as for
    :class:`GroupAccountant`, of which this is the one-group case with another step event). Adjacency
    add/remove of one record to or from the N records (MATH §11.5: the bound at N covers both neighbours).

    Args:
      batch_size: b, an integer in [1, N].
      dataset_size: N, an integer ≥ 1.
      sigma: the noise multiplier σ > 0.
      delta: δ ∈ (0, 1).
      orders: Rényi orders (default :data:`jaxpriv.rdp.DEFAULT_ORDERS`).
      steps: steps already taken (≥ 0).

    Example:
      >>> from jaxpriv.train.plan import FixedSizeAccountant
      >>> acc = FixedSizeAccountant(64, 6400, 2.2, delta=1e-5, steps=1000)
      >>> acc.step
      SampledWithoutReplacement(batch_size=64, dataset_size=6400, event=Gaussian(noise_multiplier=2.2))
      >>> bool(0 < acc.epsilon()[0] < 10)
      True
    """

    def __init__(self, batch_size: int, dataset_size: int, sigma: float, delta: float, *, orders=None,
                 steps: int = 0):
        dataset_size = int(check_array("dataset_size", dataset_size, 1.0, np.inf, integer=True))
        batch_size = int(check_array("batch_size", batch_size, 1.0, float(dataset_size), integer=True))
        sigma = float(check_array("sigma", sigma, 0.0, np.inf, lo_open=True))
        self.bands = 1
        self.orders = check_orders(rdp.DEFAULT_ORDERS if orders is None else orders)
        self.delta = float(check_array("delta", delta, 0.0, 1.0, lo_open=True, hi_open=True))
        self.steps = int(check_array("steps", steps, 0.0, np.inf, integer=True))
        self._account_steps(events.SampledWithoutReplacement(batch_size, dataset_size, events.Gaussian(sigma)))

    @staticmethod
    def run_event(batch_size: int, dataset_size: int, sigma, steps: int):
        """The event of ``steps`` fixed-size steps at noise σ (a number or an array)."""
        return events.SelfComposed(events.SampledWithoutReplacement(batch_size, dataset_size, events.Gaussian(sigma)),
                                   steps)

    @staticmethod
    def noise_multiplier(epsilon: float, batch_size: int, dataset_size: int, steps: int, delta: float, *,
                         orders=None) -> float:
        """The σ at which ``steps`` fixed-size steps spend at most ``epsilon`` at ``delta``
        (:func:`jaxpriv.calibrate.calibrate` on :meth:`run_event` by the RDP accountant at ``orders``, to
        1e-10 of σ, on the safe side; inf where no σ in [0.1, 1000] meets it).

        Example:
          >>> from jaxpriv.train.plan import FixedSizeAccountant
          >>> sigma = FixedSizeAccountant.noise_multiplier(3.0, 64, 6400, 1000, 1e-5)
          >>> bool(0.999 * 3.0 < FixedSizeAccountant(64, 6400, sigma, 1e-5, steps=1000).epsilon()[0] <= 3.0)
          True
        """
        accountant = accounting.RDP(check_orders(rdp.DEFAULT_ORDERS if orders is None else orders))
        run = lambda s: FixedSizeAccountant.run_event(batch_size, dataset_size, s, int(steps))  # noqa: E731
        with warnings.catch_warnings():  # an unattainable target is inf, reported by the caller
            warnings.simplefilter("ignore", RuntimeWarning)
            sigma = float(calibrate.calibrate(run, epsilon, delta, bounds=(0.1, 1000.0), accountant=accountant))
        return sigma if math.isfinite(sigma) else math.inf
