"""White-box canaries in one DP-SGD run (MATH §10.6): the trainer itself (:func:`jaxpriv.train.dpsgd.train`,
its sampler, clipping, noise and accountant, unmodified) trains on the data plus the inserted canaries, and
the one-run bounds (:mod:`jaxpriv.audit.one_run`) turn the canaries' scores into lower bounds on ε.

* Gradient canaries (Dirac canaries; Steinke, Nasr & Jagielski 2023, §6; Andrew et al. 2024): the model is
  wrapped (:class:`CanaryModel`) with a block of m parameters that the model's forward pass never reads.
  Canary j is a training record whose loss is −‖g‖·w[c_j], so its gradient is a Dirac of norm ``dirac_norm``
  in its own coordinate c_j (m distinct coordinates); the trainer clips it (to C) and adds its noise to it
  like every other gradient. Score: the coordinate's total update w_final[c_j] − w_init[c_j].
* Input canaries: held-out examples with a wrong label (uniform among the others). Score: −loss of the
  final model on the canary.

Each canary is inserted with probability ½, independently (seeded). A record's features carry two extra
columns (the Dirac norm, 0 for ordinary records, and the coordinate) that :class:`CanaryModel` drops before
the model sees the input, and :func:`canary_loss` reads to give a Dirac canary its loss.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
from flax import nnx

from .._checks import check_values
from .one_run import ClaimTest, FamilyBound, OneRunBound, claim_test, epsilon_lower_bound, family_bound, gdp_lower_bound
from .stats import check_confidence

__all__ = ["CanaryModel", "canary_loss", "CanarySet", "KindAudit", "NoiseBound", "TrainingAudit", "make_canaries",
           "claim_profiles", "audit_training", "PROFILE_EPSILONS"]

#: the ε grid of the claims' privacy profiles (MATH §10.3): 0, then 255 log-spaced from 0.005 to 40 (a step of
#: 3.6%: a claim's envelope f = max_i f_{ε_i, δ(ε_i)} is as fine at ε = 0.1 as at ε = 10)
PROFILE_EPSILONS = np.concatenate([[0.0], np.geomspace(0.005, 40.0, 255)])
#: the claim family's noise multipliers, as multiples of the run's σ: 16 log-spaced from 1/8 to 64 (a step of
#: ×1.52), then 15 between the two that bracket the bound (×1.03)
_COARSE = np.geomspace(0.125, 64.0, 16)


class CanaryModel(nnx.Module):
    """A classifier with a block of ``canaries`` unused parameters (``canary``, zeros) that gradient
    canaries write to; it reads the first ``features`` columns of its input (the rest are canary tags).

    Example:
      >>> import jax.numpy as jnp
      >>> from flax import nnx
      >>> from jaxpriv.train.models import MLP
      >>> model = CanaryModel(MLP(4, (8,), 3, rngs=nnx.Rngs(0)), features=4, canaries=5)
      >>> model(jnp.ones((2, 6))).shape, model.canary.shape
      ((2, 3), (5,))
    """

    def __init__(self, model, features: int, canaries: int):
        import jax.numpy as jnp

        self.model = model
        self.features = int(features)
        self.canary = nnx.Param(jnp.zeros((max(int(canaries), 1),), jnp.float32))

    def __call__(self, x):
        return self.model(x[:, :self.features])


def canary_loss(model, inputs, labels, key=None):
    """Per-example loss of :class:`CanaryModel` in the trainer's interface ``(model, x, y, key) → (B,)``:
    the cross-entropy of the wrapped model, except for a Dirac canary (column −2 holds its norm g > 0,
    column −1 its coordinate c): −g·w[c], whose gradient is −g·e_c in the canary block.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> from flax import nnx
      >>> from jaxpriv.train.models import MLP
      >>> model = CanaryModel(MLP(2, (4,), 2, rngs=nnx.Rngs(0)), features=2, canaries=3)
      >>> x = jnp.array([[0.0, 0.0, 10.0, 2.0]])
      >>> grads = nnx.grad(lambda m: canary_loss(m, x, jnp.zeros(1, jnp.int32)).sum())(model)
      >>> grads["canary"][...].tolist()
      [0.0, 0.0, -10.0]
    """
    import jax.numpy as jnp

    from ..train.models import cross_entropy_loss

    norm = inputs[:, -2]
    coordinate = inputs[:, -1].astype(jnp.int32)
    base = cross_entropy_loss(model, inputs, labels, key)
    dirac = -norm * model.canary[...][coordinate]
    return jnp.where(norm > 0, dirac.astype(base.dtype), base)


@dataclasses.dataclass(frozen=True)
class CanarySet:
    """The canaries of one run: the augmented training set (``x``, ``y``; canaries first), which gradient
    and input canaries were inserted, the input canaries' examples, and the column layout."""

    x: np.ndarray
    y: np.ndarray
    gradient_inserted: np.ndarray
    input_inserted: np.ndarray
    input_x: np.ndarray
    input_y: np.ndarray
    features: int


def make_canaries(x_train, y_train, x_held, y_held, num_classes: int, *, canaries: int, input_canaries: int,
                  dirac_norm: float, seed: int) -> CanarySet:
    """Draw the canaries and their inclusion bits (each ½, independently; ``seed``), and build the training
    set: inserted gradient canaries, then inserted input canaries, then the data, each row with two tag
    columns (Dirac norm, coordinate). Input canaries are held-out examples (cycled) with a uniformly drawn
    wrong label.

    Example:
      >>> import numpy as np
      >>> from jaxpriv.audit.training import make_canaries
      >>> x, y = np.zeros((6, 2), np.float32), np.arange(6) % 3
      >>> c = make_canaries(x, y, x, y, 3, canaries=4, input_canaries=2, dirac_norm=10.0, seed=0)
      >>> c.x.shape[1], int(c.gradient_inserted.sum() + c.input_inserted.sum() + 6) == c.x.shape[0]
      (4, True)
    """
    rng = np.random.default_rng(seed)
    gradient_inserted = rng.random(canaries) < 0.5
    input_inserted = rng.random(input_canaries) < 0.5
    features = int(np.prod(x_train.shape[1:]))
    take = np.arange(input_canaries) % max(len(x_held), 1)
    input_x = np.asarray(x_held, np.float32).reshape(len(x_held), -1)[take]
    shift = rng.integers(1, num_classes, size=input_canaries) if num_classes > 1 else np.zeros(input_canaries, int)
    input_y = ((np.asarray(y_held)[take] + shift) % num_classes).astype(np.int32)
    rows, labels = [], []
    g = np.flatnonzero(gradient_inserted)
    dirac = np.zeros((g.size, features + 2), np.float32)
    dirac[:, features], dirac[:, features + 1] = dirac_norm, g
    rows.append(dirac)
    labels.append(np.zeros(g.size, np.int32))
    i = np.flatnonzero(input_inserted)
    rows.append(np.concatenate([input_x[i], np.zeros((i.size, 2), np.float32)], axis=1))
    labels.append(input_y[i])
    data = np.asarray(x_train, np.float32).reshape(len(x_train), -1)
    rows.append(np.concatenate([data, np.zeros((len(data), 2), np.float32)], axis=1))
    labels.append(np.asarray(y_train, np.int32))
    return CanarySet(np.concatenate(rows), np.concatenate(labels), gradient_inserted, input_inserted, input_x,
                     input_y, features)


@dataclasses.dataclass(frozen=True)
class NoiseBound:
    """The one-run f-DP audit against the family of DP-SGD claims with the run's rate and steps and any noise
    multiplier σ' (MATH §10.6): every claim with σ' ≥ ``sigma`` is rejected at the confidence (``inf`` when
    none is), so the run's noise-multiplier equivalent is below ``sigma``; ``epsilon`` is the lower end of the
    certified ε at δ of DP-SGD with ``sigma`` (0 when none is rejected): a lower bound on the run's ε if its
    privacy curve is a DP-SGD curve with these q and T. ``family`` is the bound on the finer grid."""

    sigma: float
    epsilon: float
    family: FamilyBound

    def to_json(self) -> dict:
        return {"sigma": self.sigma, "epsilon": self.epsilon, "family": self.family.to_json()}


@dataclasses.dataclass(frozen=True)
class KindAudit:
    """One kind of canary ("gradient" or "input"): scores, inclusion bits, both one-run bounds, and (when
    asked) the f-DP test of the trainer's own claim (``claim``) and the noise-multiplier bound (``noise``)."""

    kind: str
    scores: np.ndarray
    inserted: np.ndarray
    steinke: OneRunBound
    gdp: OneRunBound
    claim: ClaimTest | None = None
    noise: NoiseBound | None = None

    def to_json(self) -> dict:
        out = {"kind": self.kind, "canaries": int(self.scores.size), "inserted": int(self.inserted.sum()),
               "steinke": self.steinke.to_json(), "gdp": self.gdp.to_json()}
        if self.claim is not None:
            out["claim"], out["noise"] = self.claim.to_json(), self.noise.to_json()
        return out


@dataclasses.dataclass(frozen=True)
class TrainingAudit:
    """The audit of one run: the trainer's claim (``claimed_epsilon`` at ``delta``; ``claimed_mu`` when the
    run is exactly Gaussian DP, i.e. every record in every step: μ = √T/σ), the audits of each canary
    kind, and the run (``result``, a :class:`jaxpriv.train.dpsgd.TrainResult`)."""

    claimed_epsilon: float
    claimed_mu: float | None
    delta: float
    confidence: float
    kinds: tuple
    result: object
    plan_rate: float
    plan_sigma: float

    @property
    def epsilon_lower(self) -> float:
        """The largest audited ε lower bound of the (ε, δ) method (Steinke et al.) over the canary kinds."""
        return max(k.steinke.epsilon for k in self.kinds)

    @property
    def gdp_epsilon_lower(self) -> float:
        """The largest ε implied by the audited μ lower bounds (valid against a GDP claim)."""
        return max(k.gdp.epsilon for k in self.kinds)

    @property
    def claim_p_value(self) -> float | None:
        """The smallest p-value of the trainer's own claim (its accountant's privacy profile) over the canary
        kinds, times their number (Bonferroni); None when the f-DP claim audit was not asked."""
        tests = [k.claim for k in self.kinds if k.claim is not None]
        return min(1.0, len(tests) * min(t.p_value for t in tests)) if tests else None

    def kind(self, name: str) -> KindAudit:
        for k in self.kinds:
            if k.kind == name:
                return k
        raise KeyError(name)

    def to_json(self) -> dict:
        return {"claimed_epsilon": self.claimed_epsilon, "claimed_mu": self.claimed_mu, "delta": self.delta,
                "confidence": self.confidence, "epsilon_lower": self.epsilon_lower,
                "gdp_epsilon_lower": self.gdp_epsilon_lower, "gap": self.claimed_epsilon - self.epsilon_lower,
                "rate": self.plan_rate, "noise_multiplier": self.plan_sigma, "steps": self.result.steps,
                "test_accuracy": self.result.test_accuracy, "claim_p_value": self.claim_p_value,
                "kinds": [k.to_json() for k in self.kinds]}


def _integer(name: str, value, lo: int) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value < lo:
        raise ValueError(f"{name} must be an integer in [{lo}, inf), got {value!r}")
    return int(value)


def audit_training(data, *, epsilon: float, delta: float = 1e-5, canaries: int = 1000, input_canaries: int = 0,
                   epochs: int = 5, batch_size: float | None = None, clip_norm: float = 1.0, lr: float = 0.5,
                   hidden: int = 32, dirac_norm: float = 100.0, confidence: float = 0.95, guesses=None,
                   seed: int = 0, fdp_claim: bool = True) -> TrainingAudit:
    """Train once with DP-SGD on ``data`` plus canaries and audit the run's claimed ε (MATH §10.6).

    The run is :func:`jaxpriv.train.dpsgd.train` of a :class:`CanaryModel` around an MLP (tanh, one hidden
    layer of ``hidden``), ``optax.sgd(lr)``, loss :func:`canary_loss`, and ``DPSGDConfig(epochs, batch_size,
    clip_norm, delta, epsilon, seed)``: σ is calibrated to ``epsilon`` by the trainer's own plan, and the
    claimed ε is the trainer's accountant's. Scores and bounds: the module docstring and
    :func:`jaxpriv.audit.one_run.epsilon_lower_bound` / :func:`~jaxpriv.audit.one_run.gdp_lower_bound`.

    Args:
      data: a :class:`jaxpriv.train.data.Dataset` (its test split supplies the input canaries) or a bundled
        dataset's name ("digits", "breast_cancer").
      epsilon: the target ε > 0 of the run.
      delta: δ ∈ (0, 1).
      canaries: number m of gradient canaries, an integer ≥ 2 (or 0 with ``input_canaries`` ≥ 2).
      input_canaries: number of input canaries, an integer ≥ 2 (or 0).
      epochs: epochs, an integer ≥ 1.
      batch_size: the expected batch size; None for the whole training set (q = 1: every record in every
        step, so the run is exactly √T/σ-GDP).
      clip_norm: C > 0.
      lr: SGD learning rate > 0.
      hidden: hidden width, an integer ≥ 1.
      dirac_norm: the Dirac canaries' gradient norm g > 0 (clipped to C by correct code).
      confidence: c ∈ (0, 1).
      guesses: None (the default candidates of :func:`jaxpriv.audit.one_run.default_guesses`, for each kind)
        or a sequence of (f_in, f_out) fractions in [0, 1]: for m canaries of a kind, the candidate guesses
        round(f_in·m) highest "inserted" and round(f_out·m) lowest "not inserted" (fixed before the run).
      seed: seeds the canaries, the model, the sampler and the noise (integer ≥ 0).
      fdp_claim: also test the trainer's own claim with the one-run f-DP test (its privacy profile from
        :func:`claim_profiles`: a p-value) and bound its noise-multiplier equivalent (:class:`NoiseBound`);
        a few PLD compositions when q < 1, closed forms when q = 1.

    Returns:
      :class:`TrainingAudit`.

    Example (a small run; the bounds are far below the claim):
      >>> from jaxpriv.audit.training import audit_training
      >>> audit = audit_training("breast_cancer", epsilon=2.0, canaries=50, epochs=1, batch_size=64.0)
      >>> audit.claimed_epsilon <= 2.0, audit.epsilon_lower <= audit.claimed_epsilon
      (True, True)
    """
    import jax
    import optax

    from ..train import data as datasets
    from ..train.dpsgd import MLP, DPSGDConfig, train

    if isinstance(data, str):
        data = datasets.load(data, seed=0)
    if not all(hasattr(data, k) for k in ("x_train", "y_train", "x_test", "y_test", "num_classes")):
        raise ValueError(f"data must be a jaxpriv.train.data.Dataset or a bundled dataset's name, got "
                         f"{type(data).__name__}")
    canaries = _integer("canaries", canaries, 0)
    input_canaries = _integer("input_canaries", input_canaries, 0)
    for name, m in (("canaries", canaries), ("input_canaries", input_canaries)):
        if m == 1:
            raise ValueError(f"{name} must be 0 or an integer in [2, inf) (a one-run bound needs m ≥ 2), got 1")
    if canaries == 0 and input_canaries == 0:
        raise ValueError("canaries and input_canaries are both 0: give at least 2 canaries of one kind")
    hidden = _integer("hidden", hidden, 1)
    seed = _integer("seed", seed, 0)
    c = check_confidence(confidence)
    fractions = _fractions(guesses)
    if not isinstance(fdp_claim, (bool, np.bool_)):
        raise ValueError(f"fdp_claim must be True or False, got {fdp_claim!r}")
    dirac_norm = float(check_values("dirac_norm", dirac_norm, 0.0, lo_open=True).reshape(()))
    lr = float(check_values("lr", lr, 0.0, lo_open=True).reshape(()))

    canary_set = make_canaries(data.x_train, data.y_train, data.x_test, data.y_test, int(data.num_classes),
                               canaries=canaries, input_canaries=input_canaries, dirac_norm=dirac_norm, seed=seed)
    n = canary_set.x.shape[0]
    config = DPSGDConfig(epochs=epochs, batch_size=float(n) if batch_size is None else batch_size,
                         clip_norm=clip_norm, delta=delta, epsilon=epsilon, seed=seed)
    x_test = np.concatenate([np.asarray(data.x_test, np.float32).reshape(len(data.x_test), -1),
                             np.zeros((len(data.x_test), 2), np.float32)], axis=1)
    model = CanaryModel(MLP(canary_set.features, (hidden,), int(data.num_classes), rngs=nnx.Rngs(seed)),
                        canary_set.features, canaries)
    before = np.asarray(model.canary[...]).copy()
    result = train(model, optax.sgd(lr), (canary_set.x, canary_set.y, x_test, np.asarray(data.y_test)), config,
                   loss_fn=canary_loss, progress=False)

    plan = result.plan
    rate, sigma = float(plan.rate[0]), float(plan.noise_parameter[0])
    family = _Family(rate, int(result.steps), sigma, float(delta)) if fdp_claim else None
    kinds = []
    if canaries:
        scores = np.asarray(model.canary[...], np.float64)[:canaries] - before[:canaries]
        kinds.append(_kind("gradient", scores, canary_set.gradient_inserted, delta, c, fractions, seed, family))
    if input_canaries:
        from ..train.models import cross_entropy_loss

        x = np.concatenate([canary_set.input_x, np.zeros((input_canaries, 2), np.float32)], axis=1)
        losses = cross_entropy_loss(model, jax.numpy.asarray(x), jax.numpy.asarray(canary_set.input_y))
        kinds.append(_kind("input", -np.asarray(losses, np.float64), canary_set.input_inserted, delta, c,
                           fractions, seed, family))
    mu = math.sqrt(result.steps) / sigma if rate == 1.0 else None
    return TrainingAudit(float(result.epsilon), mu, float(delta), c, tuple(kinds), result, rate, sigma)


def _fractions(guesses):
    if guesses is None:
        return None
    try:
        pairs = [tuple(float(f) for f in pair) for pair in guesses]
    except (TypeError, ValueError):
        raise ValueError(f"guesses must be None or a sequence of (f_in, f_out) fractions in [0, 1], got "
                         f"{guesses!r}") from None
    if not pairs or any(len(p) != 2 or not all(0.0 <= f <= 1.0 for f in p) or sum(p) > 1.0 for p in pairs):
        raise ValueError(f"guesses must be a non-empty sequence of (f_in, f_out) fractions in [0, 1] with "
                         f"f_in + f_out ≤ 1, got {guesses!r}")
    return pairs


def _kind(kind, scores, inserted, delta, confidence, fractions, seed, family) -> KindAudit:
    m = scores.size
    guesses = None if fractions is None else [(int(round(a * m)), int(round(b * m))) for a, b in fractions]
    steinke = epsilon_lower_bound(scores, inserted, delta=delta, confidence=confidence, guesses=guesses, seed=seed)
    gdp = gdp_lower_bound(scores, inserted, delta=delta, confidence=confidence, guesses=guesses, seed=seed)
    if family is None:
        return KindAudit(kind, scores, inserted, steinke, gdp)
    common = dict(epsilons=PROFILE_EPSILONS, confidence=confidence, guesses=guesses, seed=seed)
    claim = claim_test(scores, inserted, deltas=family.claim, **common)
    return KindAudit(kind, scores, inserted, steinke, gdp, claim, family.noise_bound(scores, inserted, common))


def claim_profiles(rate: float, steps: int, sigmas) -> tuple[np.ndarray, np.ndarray]:
    """(lower, upper) δ(ε) at :data:`PROFILE_EPSILONS` of DP-SGD with Poisson rate ``rate``, ``steps`` steps and
    each noise multiplier of ``sigmas`` (K,): arrays (K, G). q = 1 is exactly √T/σ-GDP (MATH §2.1, closed
    form, both ends equal); q < 1 is the PLD accountant's certified profile
    (:func:`jaxpriv.accounting.delta_profile`) of the event the trainer accounts.

    Example:
      >>> import numpy as np
      >>> from jaxpriv.audit.training import claim_profiles
      >>> lo, up = claim_profiles(1.0, 4, [2.0, 4.0])   # μ = 1 and 0.5
      >>> up.shape, bool((up[1] <= up[0]).all()), bool((lo == up).all())
      ((2, 256), True, True)
    """
    sig = np.asarray(sigmas, np.float64).reshape(-1)
    if rate == 1.0:
        from ..fdp import gdp_delta

        up = np.asarray(gdp_delta(math.sqrt(steps) / sig[:, None], PROFILE_EPSILONS[None, :]), np.float64)
        return up, up
    from .. import accounting, events

    event = events.SelfComposed(events.PoissonSampled(rate, events.Gaussian(sig)), steps)
    return accounting.delta_profile(event, PROFILE_EPSILONS)


class _Family:
    """The DP-SGD claims (q, T, σ') of one run: the run's own claim's profile and the coarse grid's, computed
    once for every canary kind."""

    def __init__(self, rate, steps, sigma, delta):
        self.rate, self.steps, self.sigma, self.delta = rate, steps, sigma, delta
        self.coarse = sigma * _COARSE
        _, up = claim_profiles(rate, steps, np.concatenate([[sigma], self.coarse]))
        self.claim, self.coarse_profiles = up[0], up[1:]

    def noise_bound(self, scores, inserted, common) -> NoiseBound:
        """The coarse grid's bound, refined between the two σ' that bracket it (the claims are nested and the
        test is monotone in the claim, so the refined grid may depend on the coarse outcome; MATH §10.6)."""
        bound = family_bound(scores, inserted, deltas=self.coarse_profiles, **common)
        j = bound.index
        if j == self.coarse.size:
            return NoiseBound(math.inf, 0.0, bound)
        sigma = float(self.coarse[j])
        if j > 0:
            fine = np.geomspace(self.coarse[j - 1], self.coarse[j], 17)[1:-1]
            fine_bound = family_bound(scores, inserted, deltas=claim_profiles(self.rate, self.steps, fine)[1],
                                      **common)
            if fine_bound.index < fine.size:
                sigma, bound = float(fine[fine_bound.index]), fine_bound
        return NoiseBound(sigma, self._epsilon_lower(sigma), bound)

    def _epsilon_lower(self, sigma) -> float:
        """The lower end of DP-SGD (q, T, σ)'s ε at δ: the largest ε of a grid where the certified lower δ(ε)
        still exceeds δ (the true ε(δ) is above it), refined once within the bracketing step."""
        if self.rate == 1.0:
            from ..fdp import gdp_epsilon

            return float(gdp_epsilon(math.sqrt(self.steps) / sigma, self.delta))
        lo = claim_profiles(self.rate, self.steps, [sigma])[0][0]
        above = np.flatnonzero(lo > self.delta)
        if above.size == 0:
            return 0.0
        j = int(above[-1])
        if j + 1 == PROFILE_EPSILONS.size:
            return float(PROFILE_EPSILONS[j])
        from .. import accounting, events

        fine = np.linspace(PROFILE_EPSILONS[j], PROFILE_EPSILONS[j + 1], 33)
        event = events.SelfComposed(events.PoissonSampled(self.rate, events.Gaussian(sigma)), self.steps)
        lo_fine = accounting.delta_profile(event, fine)[0]
        return float(fine[np.flatnonzero(lo_fine > self.delta)[-1]])
