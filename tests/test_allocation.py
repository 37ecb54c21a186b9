"""Random allocation (events.RandomAllocation, MATH §11) against oracles written here, independent of
jaxpriv.mechanisms.allocation:

* one round of m = 1 and m = 2 steps: δ(ε) in both directions by quadrature, the last summand's
  expectation in closed form (a lognormal's call and put prices);
* several rounds: Monte Carlo of δ(ε) under Q, the product of the rounds' likelihood ratios, with a
  five-standard-error band;
* k of t > 1: every one of the C(t, k) placements enumerated in the likelihood ratio e_k(Y)/C(t, k)
  (Monte Carlo over the noise);
* the papers' claim, on our numbers: one pass of balls in bins per epoch is no less private than Poisson
  sampling at rate 1/t for DP-SGD settings of the guide (docs/guide.md);
* published values: the exact total variation of E epochs (Ertan & van Dijk 2026, Table 11) and
  dp_accounting's random-allocation accountant (pull request #414, its pinned test value).
"""

import itertools
import math

import jax
import numpy as np
import pytest
from scipy import integrate, stats

from jaxpriv import accounting
from jaxpriv import events as ev
from jaxpriv.mechanisms import allocation

NORMAL = stats.norm


def _call(k, s):
    """E[(Y − k)₊] for log Y ~ N(−s²/2, s²) (E[Y] = 1); E[Y] − k for k ≤ 0."""
    if k <= 0:
        return 1.0 - k
    return NORMAL.cdf((s * s / 2 - math.log(k)) / s) - k * NORMAL.cdf((-s * s / 2 - math.log(k)) / s)


def _put(k, s):
    """E[(k − Y)₊] for the same Y; 0 for k ≤ 0."""
    if k <= 0:
        return 0.0
    return k * NORMAL.cdf((math.log(k) + s * s / 2) / s) - NORMAL.cdf((math.log(k) - s * s / 2) / s)


def round_deltas(sigma, m, eps):
    """(remove, add) δ(ε) of one round of m ∈ {1, 2} steps by quadrature: δ_remove = E_Q[(X − e^ε)₊],
    δ_add = E_Q[(1 − e^ε X)₊], X = (Y_1 + … + Y_m)/m."""
    s = 1.0 / sigma
    if m == 1:
        return _call(math.exp(eps), s), math.exp(eps) * _put(math.exp(-eps), s)
    y = lambda z: math.exp(-s * s / 2 + s * z)  # noqa: E731
    quad = dict(limit=400, epsabs=1e-15, epsrel=1e-12)
    remove = integrate.quad(lambda z: NORMAL.pdf(z) * _call(2 * math.exp(eps) - y(z), s), -14, 14, **quad)[0] / 2
    add = integrate.quad(lambda z: NORMAL.pdf(z) * _put(2 * math.exp(-eps) - y(z), s), -14, 14, **quad)[0]
    return remove, add * math.exp(eps) / 2


def law_delta(law, eps):
    losses, masses = law
    weight = np.where(np.isinf(losses), 1.0, -np.expm1(np.minimum(eps - losses, 0.0)))
    return float(np.sum(masses * np.where(losses > eps, weight, 0.0)))


@pytest.mark.parametrize("size", [3001, 2**11 + 1])  # transform lengths 6075 = 3⁵·5² and 4320 = 2⁵·3³·5
def test_convolution_rounding_allowance_holds_at_5_smooth_lengths(size):
    """The round laws' FFT convolutions use the next 5-smooth length (MATH §11.2), whose rounding allowance
    assumes radix-3 and -5 passes as accurate as radix 2: the ℓ1 error against a direct convolution in
    extended precision (numpy's longdouble) must stay within the allowance returned, with a wide spread of
    magnitudes (a lognormal-like law)."""
    rng = np.random.default_rng(size)
    a = np.exp(-0.5 * np.linspace(-8, 8, size) ** 2) * rng.uniform(0.5, 1.5, size)
    b = np.exp(-np.linspace(0, 30, size)) * rng.uniform(0.5, 1.5, size)
    a, b = a / a.sum(), b / b.sum()
    head, tail, allowance = allocation._convolve(a, b, size)
    exact = np.convolve(a.astype(np.longdouble), b.astype(np.longdouble))
    error = float(np.abs(np.concatenate([head, tail]) - exact[: 2 * size - 1]).sum())
    assert allocation._fft_size(size) in (6075, 4320)  # mixed radix, not a power of two
    assert error <= allowance, (error, allowance)


@pytest.mark.parametrize("sigma", [0.7, 1.0, 2.0])
@pytest.mark.parametrize("m", [1, 2])
def test_one_round_brackets_quadrature(sigma, m):
    laws = allocation.round_laws(sigma, m)
    for eps in (0.1, 0.5, 1.0, 2.0):
        remove, add = round_deltas(sigma, m, eps)
        assert law_delta(laws["remove_lower"], eps) <= remove <= law_delta(laws["remove_upper"], eps)
        assert law_delta(laws["add_lower"], eps) <= add <= law_delta(laws["add_upper"], eps)
        # tight: the upper law within 1% of the truth where δ is not tiny
        assert law_delta(laws["remove_upper"], eps) <= 1.01 * remove + 1e-12
        assert law_delta(laws["add_upper"], eps) <= 1.01 * add + 1e-12


def test_round_laws_are_probability_laws():
    laws = allocation.round_laws(1.5, 16)
    for key in ("remove_upper", "add_upper"):  # dominating: all the mass, +∞ included
        assert abs(laws[key][1].sum() - 1.0) < 1e-8 and np.isposinf(laws[key][0][-1])
    for key in ("remove_lower", "add_lower"):  # dominated: at most all of it
        assert 1.0 - 1e-6 < laws[key][1].sum() <= 1.0 + 1e-12
    # the Q-mass a dominating law implies never exceeds 1 (E_P[e^{−L}] ≤ 1)
    losses, masses = laws["remove_upper"]
    finite = np.isfinite(losses)
    assert np.sum(masses[finite] * np.exp(-losses[finite])) <= 1.0 + 1e-9


def mc_deltas(sigma, t, rounds, eps, k=1, samples=200_000, seed=0):
    """Monte Carlo (remove, add) δ(ε) under Q with five-standard-error half widths: the likelihood ratio of
    a pass is e_k(Y)/C(t, k) over every placement of the k steps (k = 1: the mean of the Y's)."""
    rng = np.random.default_rng(seed)
    s = 1.0 / sigma
    ratio = np.ones(samples)
    placements = list(itertools.combinations(range(t), k))
    for _ in range(rounds):
        y = np.exp(-s * s / 2 + s * rng.standard_normal((samples, t)))
        ratio *= sum(np.prod(y[:, list(p)], axis=1) for p in placements) / len(placements)
    out = []
    for values in (np.maximum(ratio - math.exp(eps), 0.0), np.maximum(1.0 - math.exp(eps) * ratio, 0.0)):
        out.append((values.mean(), 5 * values.std() / math.sqrt(samples)))
    return out


@pytest.mark.parametrize("sigma, t, rounds, eps", [(1.5, 8, 3, 0.5), (1.0, 4, 2, 1.0), (0.5, 100, 1, 2.0)])
def test_composed_rounds_against_monte_carlo(sigma, t, rounds, eps):
    (rem, rem_hw), (add, add_hw) = mc_deltas(sigma, t, rounds, eps)
    event = ev.SelfComposed(ev.RandomAllocation(1, t, ev.Gaussian(sigma)), rounds)
    lower, upper = accounting.delta_interval(event, eps)
    assert upper >= max(rem - rem_hw, add - add_hw)  # never below the truth
    assert lower <= max(rem + rem_hw, add + add_hw)


def test_small_noise_has_a_finite_tight_upper_end():
    """σ = 0.5, t = 100 at δ = 1e-7 (Chua et al.'s and Feldman & Shenfeld's regime, σ ≤ 0.5): the remove
    direction's P-masses are computed directly (MATH §11.2), so their rounding allowance is the Q-law's ℓ1
    bound (~1e-10), not that bound times the window's largest X (1.6·10⁴ here), which was 3e-6 of P-mass at
    ∞ per round and made every ε at δ ≤ 1e-6 infinite. The interval is now finite, 0.2% wide, and below
    Poisson sampling's at rate 1/t, as the papers claim."""
    event = ev.RandomAllocation(1, 100, ev.Gaussian(0.5))
    lower, upper = accounting.epsilon_interval(event, 1e-7)
    poisson_lower, _ = accounting.epsilon_interval(ev.SelfComposed(ev.PoissonSampled(0.01, ev.Gaussian(0.5)), 100),
                                                   1e-7)
    assert np.isfinite(upper) and upper - lower < 0.01 * upper and upper < poisson_lower
    _, masses = allocation.round_laws(0.5, 100)["remove_upper"]
    assert masses[-1] < 1e-8  # the P-mass at +∞


def test_k_of_t_is_bounded_by_its_reduction_against_every_placement():
    sigma, t, k, eps = 1.5, 4, 2, 0.7
    (rem, rem_hw), (add, add_hw) = mc_deltas(sigma, t, 1, eps, k=k)
    _, upper = accounting.delta_interval(ev.RandomAllocation(k, t, ev.Gaussian(sigma)), eps)
    assert upper >= max(rem - rem_hw, add - add_hw)


def test_degenerate_allocations_are_gaussian_compositions():
    # one of one step is the Gaussian; three of three steps is three Gaussians (σ/√3)
    for event, sigma in ((ev.RandomAllocation(1, 1, ev.Gaussian(1.3)), 1.3),
                         (ev.RandomAllocation(3, 3, ev.Gaussian(2.0)), 2.0 / math.sqrt(3))):
        lower, upper = accounting.delta_interval(event, 0.5)
        exact = _call(math.exp(0.5), 1.0 / sigma)  # symmetric: both directions agree
        assert lower <= exact <= upper and upper - lower < 0.02 * exact


def test_reduction_splits_into_short_and_long_rounds():
    # 3 of 10: one round of one-of-4 and two of one-of-3
    rounds = ev.RandomAllocation(3, 10, ev.Gaussian(1.0)).pld_components(1.0)
    assert [(float(e.t), float(c)) for e, c in rounds] == [(3.0, 2.0), (4.0, 1.0)]


@pytest.mark.parametrize("q, sigma, steps", [(0.1, 2.9, 1_000)])  # the guide's table: bench/allocation.py
def test_balls_in_bins_no_less_private_than_poisson(q, sigma, steps):
    """Feldman & Shenfeld's and Chua et al.'s claim on the guide's DP-SGD settings: one pass of balls in
    bins per epoch (t = 1/q) certifies an ε at most Poisson's lower end at rate q."""
    t = round(1 / q)
    allocation_event = ev.SelfComposed(ev.RandomAllocation(1, t, ev.Gaussian(sigma)), steps // t)
    poisson_event = ev.SelfComposed(ev.PoissonSampled(q, ev.Gaussian(sigma)), steps)
    _, allocation_upper = accounting.epsilon_interval(allocation_event, 1e-5)
    poisson_lower, _ = accounting.epsilon_interval(poisson_event, 1e-5)
    assert allocation_upper < poisson_lower


def _closed_form_sigma(lam, m, epochs):
    """Ertan & van Dijk's closed-form σ for a total-variation target λ (their Corollary 3.4):
    ½·√((1 + (e^{1/σ²} − 1)/m)^E − 1) = λ, solved for σ."""
    return np.log1p(m * ((1 + 4 * lam * lam) ** (1 / epochs) - 1)) ** -0.5


def test_published_values():
    """Numbers the papers print, from their settings (all of them: bench/allocation_published.py).

    Ertan & van Dijk 2026 ("Closed-Form Noise Calibration Against Membership Inference for Random-Allocation
    DP-SGD"), Table 11: the exact total variation of E epochs of random allocation (m steps per epoch, a fresh
    allocation each epoch, their zero-out pair = add/remove of one example) by their Theorem 4.1, at the
    closed-form σ of a target λ, to 5 decimals. d_TV = δ(0) in either direction, so our certified δ(0)
    interval must hold it (conservative: upper end ≥ it) and be tight: upper end within 1% above it, except
    at σ = 0.57 where the remove side's lattice is coarse (MATH §11.2: a window reaching e^{s²/2+8s} on at most
    2²⁰ nodes) and it is 5.9% above.

    dp_accounting's random-allocation accountant (google/differential-privacy pull request #414,
    pld_privacy_accountant_test.py::test_random_allocation_basic): 10 of 100 steps, σ = 2, δ = 1e-6 →
    ε = 2.4265, its pessimistic PLD estimate (grid 1e-4) of the same reduction to ten rounds of one-of-ten
    as ours (MATH §11.3). It is an upper bound of the same quantity, so our lower end lies below it; our
    upper end is within 0.5% of it."""
    table_11 = np.array([  # (λ, m, E, σ as printed, exact d_TV)
        (0.10, 100, 10, 1.7370, 0.07885), (0.10, 500, 40, 1.5829, 0.07887), (0.20, 250, 20, 0.9752, 0.15223),
        (0.20, 500, 10, 0.6840, 0.14923), (0.35, 100, 40, 1.2003, 0.24724), (0.35, 500, 10, 0.5716, 0.22923)])
    lam, m, epochs, printed, exact = table_11.T
    sigma = _closed_form_sigma(lam, m, epochs)
    np.testing.assert_allclose(sigma, printed, atol=5e-5)  # the σ the table prints, to its 4 decimals
    event = ev.SelfComposed(ev.RandomAllocation(1, m.astype(int), ev.Gaussian(sigma)), epochs.astype(int))
    lower, upper = accounting.delta_interval(event, 0.0)
    assert np.all(upper >= exact - 5e-6) and np.all(lower <= exact + 5e-6)  # the exact values, to their rounding
    assert np.all(upper <= np.where(sigma < 0.6, 1.07, 1.01) * exact)

    lower, upper = accounting.epsilon_interval(ev.RandomAllocation(10, 100, ev.Gaussian(2.0)), 1e-6)
    assert lower <= 2.4265 and abs(upper - 2.4265) <= 0.005 * 2.4265


def test_calibrate_finds_sigma_for_allocation():
    make = lambda s: ev.SelfComposed(ev.RandomAllocation(1, 10, ev.Gaussian(s)), 5)  # noqa: E731
    from jaxpriv import calibrate

    sigma = calibrate.calibrate(make, 2.0, 1e-5, bounds=(0.5, 10.0), accountant="pld", xtol=1e-2)
    achieved = accounting.epsilon(make(float(sigma)), 1e-5, accountant="pld")
    assert 1.9 < achieved <= 2.0


@pytest.mark.parametrize("event, match", [
    (ev.RandomAllocation(5, 4, ev.Gaussian(1.0)), r"k must be at most t"),
    (ev.RandomAllocation(0, 4, ev.Gaussian(1.0)), r"RandomAllocation k .* must lie in \[1.0, inf\)"),
    (ev.RandomAllocation(1, 0, ev.Gaussian(1.0)), r"RandomAllocation t .* must lie in \[1.0, inf\)"),
    (ev.RandomAllocation(1.5, 4, ev.Gaussian(1.0)), r"RandomAllocation k .* integer"),
    (ev.RandomAllocation(1, 4.5, ev.Gaussian(1.0)), r"RandomAllocation t .* integer"),
    (ev.RandomAllocation(1, 4, ev.Laplace(1.0)), r"must be a Gaussian step"),
])
def test_bad_input(event, match):
    with pytest.raises(ValueError, match=match):
        ev.validate(event)
    with pytest.raises(ValueError, match=match):
        accounting.epsilon(event, 1e-5, accountant="pld")


def test_rdp_is_refused_with_the_reason():
    with pytest.raises(ValueError, match="RandomAllocation.*use accountant='pld'"):
        accounting.epsilon(ev.RandomAllocation(1, 4, ev.Gaussian(1.0)), 1e-5, accountant="rdp")


def test_round_laws_bad_input():
    with pytest.raises(ValueError, match="sigma must be a finite number > 0"):
        allocation.round_laws(0.0, 4)
    with pytest.raises(ValueError, match="steps must be an integer >= 1"):
        allocation.round_laws(1.0, 0)
    allocation.round_laws(4.0, 1)  # cached: True == 1 as a cache key must not bypass the check
    for steps in (2.5, float("nan"), True):  # never truncated to a whole number silently
        with pytest.raises(ValueError, match="steps must be an integer >= 1"):
            allocation.round_laws(1.0, steps)
        with pytest.raises(ValueError, match="steps must be an integer >= 1"):
            allocation.round_laws(4.0, steps)
    for sigma in (-1.0, float("inf"), float("nan")):
        with pytest.raises(ValueError, match="sigma must be a finite number > 0"):
            allocation.round_laws_of([(2.0, 4), (sigma, 4)])
    with pytest.raises(ValueError, match="steps must be an integer >= 1"):
        allocation.round_laws_of([(2.0, 4), (2.0, 4.5)])


def test_cli_epsilon_shows_both_schemes(capsys):
    from jaxpriv.cli import main

    assert main(["epsilon", "--q", "0.1", "--sigma", "2.9", "--steps", "1000", "--delta", "1e-5",
                 "--sampling", "balls_in_bins", "--json"]) == 0
    import json

    out = json.loads(capsys.readouterr().out)["sampling"]
    assert (out["steps_per_epoch"], out["epochs"]) == (10, 100)
    bins, poisson = out["balls_in_bins"], out["poisson"]
    assert bins["epsilon_pld_lower"] <= bins["epsilon_pld_upper"] < poisson["epsilon_pld_lower"]


@pytest.mark.parametrize("argv, message", [
    (["--q", "0.03", "--steps", "1000"], "needs 1/q to be an integer"),
    (["--q", "0.1", "--steps", "1005"], "multiple of t = 1/q = 10"),
])
def test_cli_sampling_bad_input(argv, message, capsys):
    from jaxpriv.cli import main

    assert main(["epsilon", "--sigma", "1.0", "--delta", "1e-5", "--sampling", "balls_in_bins", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


# --------------------------------------------------------------------------------------------------
# The trainer: balls-in-bins batches and their accountant
# --------------------------------------------------------------------------------------------------


def test_allocation_sampler_uses_every_record_once_per_epoch():
    from jaxpriv.train.sampling import AllocationSampler

    sampler = AllocationSampler(300, steps_per_epoch=5, seed=3)
    for epoch in range(2):
        seen = np.concatenate([np.asarray(b.indices)[np.asarray(b.mask)]
                               for b in (sampler.sample(epoch * 5 + j) for j in range(5))])
        assert np.array_equal(np.sort(seen), np.arange(300))
    block = sampler.sample_block(3, 4)
    for batch in block:
        alone = sampler.sample(batch.step)
        assert batch.size == alone.size and np.array_equal(np.asarray(batch.indices), np.asarray(alone.indices))
    # another epoch, another allocation
    first = [sampler.sample(j).size for j in range(5)]
    assert first != [sampler.sample(5 + j).size for j in range(5)]


def test_make_private_balls_in_bins_reports_the_allocation_epsilon():
    import optax
    from flax import nnx

    from jaxpriv.train import make_private
    from jaxpriv.train.plan import AllocationAccountant

    x = np.random.default_rng(0).normal(size=(256, 4)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.int32)
    model = nnx.Linear(4, 2, rngs=nnx.Rngs(0))
    private = make_private(model, optax.sgd(1.0), x, y, target_epsilon=4.0, delta=1e-5, batch_size=64, epochs=4,
                           sampling="balls_in_bins")
    assert private.sampling == "balls_in_bins" and private.total_steps == 16 and private.sample_rate == 0.25
    epsilon = private.run()
    assert 0.98 * 4.0 < epsilon <= 4.0  # calibrated to the target (xtol 1e-3), never above it
    event = AllocationAccountant.run_event(4, private.noise_multiplier, 4)
    assert epsilon == pytest.approx(float(accounting.epsilon(event, 1e-5, accountant="pld")), rel=1e-12)
    assert float(np.mean(np.argmax(model(x), -1) == y)) > 0.9
    # a partial epoch counts as a whole round (a part of a round is its post-processing)
    accountant = AllocationAccountant(4, private.noise_multiplier, 1e-5)
    assert accountant.epsilon(5)[0] == accountant.epsilon(8)[0] > accountant.epsilon(4)[0]


@pytest.mark.parametrize("kwargs, match", [
    (dict(sampling="shuffle", epochs=2), "sampling must be one of"),
    (dict(sampling="balls_in_bins", epochs=1.5), "epochs must be an integer"),
])
def test_make_private_sampling_bad_input(kwargs, match):
    import optax
    from flax import nnx

    from jaxpriv.train import make_private

    x, y = np.zeros((32, 2), np.float32), np.zeros(32, np.int32)
    with pytest.raises(ValueError, match=match):
        make_private(nnx.Linear(2, 2, rngs=nnx.Rngs(0)), optax.sgd(0.1), x, y, noise_multiplier=1.0, delta=1e-5,
                     batch_size=8, **kwargs)


@pytest.mark.parametrize("kwargs, match", [
    (dict(n=0, steps_per_epoch=4, seed=0), r"n must lie in \[1.0, inf\)"),
    (dict(n=10.5, steps_per_epoch=4, seed=0), "n must be an integer"),
    (dict(n=10, steps_per_epoch=0, seed=0), r"steps_per_epoch must lie in \[1.0, inf\)"),
    (dict(n=10, steps_per_epoch=2.5, seed=0), "steps_per_epoch must be an integer"),
    (dict(n=10, steps_per_epoch=2, seed=-1), "seed must lie in"),
])
def test_allocation_sampler_bad_input(kwargs, match):
    from jaxpriv.train.dpsgd import allocation_sampler
    from jaxpriv.train.sampling import AllocationSampler

    with pytest.raises(ValueError, match=match):
        AllocationSampler(**kwargs)
    with pytest.raises(ValueError, match=match):  # the trainer's sampler checks the same, before its buckets
        allocation_sampler(kwargs["n"], kwargs["steps_per_epoch"], 1, seed=kwargs["seed"], steps=10)


@pytest.mark.parametrize("steps, match", [(-1, r"steps must lie in \[0.0, inf\)"), (2.5, "steps must be an integer")])
def test_trainer_allocation_sampler_bad_steps(steps, match):
    from jaxpriv.train.dpsgd import allocation_sampler

    with pytest.raises(ValueError, match=match):
        allocation_sampler(10, 2, 1, seed=0, steps=steps)


@pytest.mark.parametrize("args, kwargs, match", [
    ((0, 1.0, 1e-5), {}, r"steps_per_epoch must lie in \[1.0, inf\)"),
    ((1.5, 1.0, 1e-5), {}, "steps_per_epoch must be an integer"),
    ((4, 0.0, 1e-5), {}, r"sigma must lie in \(0.0, inf\)"),
    ((4, 1.0, 0.0), {}, r"delta must lie in \(0.0, 1.0\)"),
    ((4, 1.0, 1.0), {}, r"delta must lie in \(0.0, 1.0\)"),
    ((4, 1.0, 1e-5), {"steps": -1}, r"steps must lie in \[0.0, inf\)"),
])
def test_allocation_accountant_bad_input(args, kwargs, match):
    from jaxpriv.train.plan import AllocationAccountant

    with pytest.raises(ValueError, match=match):
        AllocationAccountant(*args, **kwargs)


_lowered = [0]


def _count_lowered(name, seconds, **kwargs):
    if name.endswith("jaxpr_to_mlir_module_duration"):
        _lowered[0] += 1


jax.monitoring.register_event_duration_secs_listener(_count_lowered)


def test_a_second_question_with_other_numbers_lowers_no_program():
    """Programs are keyed on structure: a sampling event asked again with another σ, t, q or batch size
    (shuffled batches: their lower bound) lowers no new program (every program JAX lowers in this process is
    counted)."""
    G = ev.Gaussian
    pairs = [
        (ev.SelfComposed(ev.RandomAllocation(1, 50, G(1.1)), 20), ev.SelfComposed(ev.RandomAllocation(1, 40, G(1.4)), 20)),
        (ev.SelfComposed(ev.TruncatedPoissonSampled(0.01, 30, G(1.1), 2000), 100),
         ev.SelfComposed(ev.TruncatedPoissonSampled(0.02, 60, G(1.2), 2000), 100)),
        (ev.SelfComposed(ev.SampledWithoutReplacement(64, 6400, G(1.1)), 100),
         ev.SelfComposed(ev.SampledWithoutReplacement(32, 6400, G(1.3)), 100)),
    ]
    shuffled = (ev.SelfComposed(ev.ShuffledBatches(10, 500, G(0.9)), 3),
                ev.SelfComposed(ev.ShuffledBatches(20, 600, G(1.3)), 2))
    for (first, second), ask in [*((pair, accounting.epsilon_interval) for pair in pairs),
                                 (shuffled, accounting.epsilon_lower_bound)]:
        ask(first, 1e-5)
        before = _lowered[0]
        ask(second, 1e-5)
        assert _lowered[0] == before, (first, _lowered[0] - before)


# --------------------------------------------------------------------------------------------------
# train(): DPSGDConfig(sampling="balls_in_bins")
# --------------------------------------------------------------------------------------------------


def test_plan_of_balls_in_bins():
    """(σ calibrated to ε, and the run that spends it: tests/test_compiled_programs.py, which trains twice.)"""
    from jaxpriv.train.dpsgd import DPSGDConfig, plan_privacy

    plan = plan_privacy(DPSGDConfig(epochs=3, batch_size=100.0, noise_multiplier=1.5, sampling="balls_in_bins"),
                        n=1000)
    assert (plan.sampling, plan.steps_per_epoch, plan.total_steps, plan.mode) == ("balls_in_bins", 10, 30, "fixed σ")
    assert plan.rate[0] == 0.1 and plan.expected_batch_size == pytest.approx(100.0)
    assert plan.noise_parameter[0] == 1.5 and plan.budget[0] == np.inf and plan.scalars()["sampling"] == "balls_in_bins"


@pytest.mark.parametrize("kwargs, match", [
    (dict(sampling="shuffle"), r"sampling must be one of \('poisson', 'balls_in_bins', 'random_allocation', 'fixed_size'\), "
                              r"got 'shuffle'"),
    (dict(sampling="balls_in_bins", mechanism="laplace"), "accounted for Gaussian noise only"),
    (dict(sampling="balls_in_bins", epsilon=None, budgets=np.full(1000, 2.0)), "use sampling 'poisson'"),
    (dict(sampling="balls_in_bins", noise_multiplier=1.0), "give epsilon or noise_multiplier, not both"),
])
def test_bad_balls_in_bins_configurations(kwargs, match):
    from jaxpriv.train.dpsgd import DPSGDConfig, plan_privacy

    with pytest.raises(ValueError, match=match):
        plan_privacy(DPSGDConfig(**({"epochs": 2, "batch_size": 50.0, "epsilon": 2.0} | kwargs)), n=1000)
