"""jaxpriv.audit: Clopper–Pearson against scipy, the one-run bounds' confidence by simulation (randomized
response for the (ε, δ) bound, the Gaussian mechanism for the GDP bound), the many-run threshold bound, a
black-box audit of every noise sampler (correct: below its claim; noise × ½: above it), the claim's curve,
and a ValueError for every bad input."""

import math

import numpy as np
import pytest
import scipy.stats

from jaxpriv.audit import figures, one_run, samplers, stats, threshold


# --------------------------------------------------------------------------------------------------
# Clopper–Pearson and binomial tails against scipy
# --------------------------------------------------------------------------------------------------


def test_beta_quantile_matches_scipy():
    rng = np.random.default_rng(0)
    p = np.concatenate([rng.uniform(size=40), [1e-12, 1e-6, 0.025, 0.975, 1 - 1e-9]])
    a = np.concatenate([rng.uniform(0.5, 500.0, size=40), [1.0, 3.0, 1000.0, 0.7, 20_000.0]])
    b = np.concatenate([rng.uniform(0.5, 500.0, size=40), [2.0, 1.0, 1.0, 5.0, 1.0]])
    ours = stats.beta_quantile(p, a, b)
    assert ours.shape == p.shape
    np.testing.assert_allclose(ours, scipy.stats.beta.ppf(p, a, b), rtol=1e-9, atol=1e-14)


@pytest.mark.parametrize("confidence", [0.9, 0.95, 0.999])
def test_clopper_pearson_matches_scipy_beta_quantiles(confidence):
    n = np.array([1, 10, 10, 10, 200, 5000, 100_000])
    k = np.array([0, 0, 3, 10, 57, 4999, 12])
    lo, hi = stats.clopper_pearson(k, n, confidence)
    tail = (1 - confidence) / 2
    with np.errstate(invalid="ignore"):
        ref_lo = np.where(k == 0, 0.0, scipy.stats.beta.ppf(tail, k, n - k + 1))
        ref_hi = np.where(k == n, 1.0, scipy.stats.beta.ppf(1 - tail, k + 1, n - k))
    np.testing.assert_allclose(lo, ref_lo, rtol=1e-9, atol=1e-15)
    np.testing.assert_allclose(hi, ref_hi, rtol=1e-9, atol=1e-15)
    assert (lo <= k / n).all() and (k / n <= hi).all()


def test_binomial_tail_and_pmf_match_scipy():
    for r, p in ((1, 0.3), (100, 0.731), (5000, 0.99), (20_000, 0.5)):
        np.testing.assert_allclose(stats.binomial_pmf(r, p), scipy.stats.binom.pmf(np.arange(r + 1), r, p),
                                   rtol=1e-9, atol=1e-300)
        for v in (0, 1, r // 2, r):
            assert stats.binomial_tail(r, p, v) == pytest.approx(scipy.stats.binom.sf(v - 1, r, p), rel=1e-9,
                                                                 abs=1e-300)


def test_steinke_p_value_matches_its_formula_with_scipy():
    """The (ε, δ) tail bound of Steinke et al. (MATH §10.2) written out with scipy's binomial."""
    for m, r, v, eps, delta in ((1000, 100, 80, 1.0, 0.0), (1000, 300, 250, 1.5, 1e-5), (50, 50, 40, 0.5, 1e-3)):
        p = 1 / (1 + math.exp(-eps))
        beta = scipy.stats.binom.sf(v - 1, r, p)
        below = scipy.stats.binom.pmf(v - np.arange(1, v + 1), r, p)  # P[Bin = v − j], j = 1..v
        alpha = max(below[:i].sum() / i for i in range(1, v + 1))
        assert one_run.p_value(m, r, v, eps, delta) == pytest.approx(min(1.0, beta + 2 * m * delta * alpha),
                                                                     rel=1e-9)


# --------------------------------------------------------------------------------------------------
# One-run bounds: their confidence, by simulation
# --------------------------------------------------------------------------------------------------


def _mc_slack(level: float, runs: int) -> float:
    """Three Monte-Carlo standard errors of a fraction whose target is ``level``."""
    return 3 * math.sqrt(level * (1 - level) / runs)


def test_steinke_bound_confidence_on_randomized_response():
    """Randomized response is exactly ε-DP in each canary (MATH §4.3), so the bound may exceed ε in at most a
    fraction 1 − c of the runs. 300 simulated runs of 1000 canaries each, every canary guessed."""
    import jax

    from jaxpriv.mechanisms import randomized_response

    eps, runs, m, confidence = 1.0, 300, 1000, 0.95
    rng = np.random.default_rng(1)
    inserted = rng.random((runs, m)) < 0.5
    reports = np.asarray(randomized_response.sample(jax.random.key(1), inserted.astype(int), eps))
    bounds = np.array([one_run.epsilon_lower_bound(reports[i].astype(float), inserted[i], confidence=confidence,
                                                   guesses=[(m // 2, m // 2)], seed=i).epsilon for i in range(runs)])
    exceed = float(np.mean(bounds > eps))
    assert exceed <= (1 - confidence) + _mc_slack(1 - confidence, runs), exceed
    assert np.median(bounds) > 0.6  # and the audit is not vacuous: RR is the easiest case for it


def test_gdp_bound_confidence_on_the_gaussian_mechanism():
    """Scores N(μ·b, 1) make each canary's score exactly μ-GDP: the μ bound exceeds μ in at most 1 − c."""
    mu, runs, m, confidence = 1.0, 150, 1000, 0.9
    rng = np.random.default_rng(2)
    inserted = rng.random((runs, m)) < 0.5
    scores = mu * inserted + rng.normal(size=(runs, m))
    bounds = np.array([one_run.gdp_lower_bound(scores[i], inserted[i], confidence=confidence,
                                               guesses=[(100, 100)], seed=i).mu for i in range(runs)])
    exceed = float(np.mean(bounds > mu))
    assert exceed <= (1 - confidence) + _mc_slack(1 - confidence, runs), exceed
    assert np.median(bounds) > 0.3


def _gdp_profiles(mus, eps):
    from jaxpriv import fdp

    return np.asarray(fdp.gdp_delta(np.asarray(mus, float)[:, None], np.asarray(eps)[None, :]))


def test_the_profile_test_agrees_with_the_gdp_test_on_gdp_claims():
    """The general-f path, fed μ-GDP's exact δ(ε) on a fine ε grid (f = sup_ε f_{ε, δ(ε)} = G_μ up to the
    grid), rejects exactly the μ the closed-form G_μ path rejects."""
    mus, eps = np.arange(0.05, 3.0, 0.05), np.linspace(0.0, 16.0, 321)
    claims = _gdp_profiles(mus, eps)
    for m, r, v in ((1000, 100, 100), (1000, 200, 190), (100, 50, 45), (5000, 500, 480), (1000, 200, 100)):
        gdp = one_run.gdp_rejects(m, r, v, mus, 0.05)
        assert (one_run.profile_rejects(m, r, v, eps, claims, 0.05) == gdp).all(), (m, r, v)
    inserted = np.arange(1000) % 2 == 0
    scores = inserted + np.random.default_rng(7).normal(size=1000)
    grid = one_run.MU_GRID[1:600:4][::-1]  # μ from 2.99 down to 0.005: strongest claim last
    family = one_run.family_bound(scores, inserted, epsilons=eps, deltas=_gdp_profiles(grid, eps))
    gdp = one_run.gdp_lower_bound(scores, inserted)
    assert (family.guesses, family.correct) == (gdp.guesses, gdp.correct)
    assert grid[family.index] - 0.02 <= gdp.mu <= grid[family.index] + 0.02
    assert one_run.epsilon_lower_bound(scores, inserted, delta=1e-5, method="fdp") == gdp


def test_the_profile_test_confidence_on_randomized_response():
    """Randomized response with ε₀ has trade-off exactly f_{ε₀, 0}: the claim (ε₀, 0) is rejected, and its
    p-value is at most α, in at most a fraction 1 − c (α) of simulated runs; a claim of ε₀/2 is rejected in
    most of them."""
    import jax

    from jaxpriv.mechanisms import randomized_response

    eps0, runs, m, confidence = 1.0, 200, 1000, 0.9
    rng = np.random.default_rng(8)
    inserted = rng.random((runs, m)) < 0.5
    reports = np.asarray(randomized_response.sample(jax.random.key(8), inserted.astype(int), eps0)).astype(float)
    tests = [one_run.claim_test(reports[i], inserted[i], epsilons=[eps0], deltas=[0.0], confidence=confidence,
                                guesses=[(m // 2, m // 2)], seed=i) for i in range(runs)]
    p = np.array([t.p_value for t in tests])
    assert np.mean([t.rejected for t in tests]) <= (1 - confidence) + _mc_slack(1 - confidence, runs)
    for alpha in (0.05, 0.2, 0.5):
        assert np.mean(p <= alpha) <= alpha + _mc_slack(alpha, runs), alpha
    half = [one_run.claim_test(reports[i], inserted[i], epsilons=[eps0 / 2], deltas=[0.0], confidence=confidence,
                               guesses=[(m // 2, m // 2)], seed=i).rejected for i in range(20)]
    assert np.mean(half) > 0.8


def test_the_f_dp_refinement_is_tighter_on_gaussian_scores():
    """Same guesses, same data: the GDP test's ε (at δ) exceeds the (ε, δ) tail bound's (MMC25's point)."""
    rng = np.random.default_rng(3)
    inserted = rng.random(2000) < 0.5
    scores = 2.0 * inserted + rng.normal(size=2000)
    steinke = one_run.epsilon_lower_bound(scores, inserted, delta=1e-5, guesses=[(100, 100)])
    gdp = one_run.gdp_lower_bound(scores, inserted, delta=1e-5, guesses=[(100, 100)])
    assert (steinke.guesses, steinke.correct) == (gdp.guesses, gdp.correct)
    assert 0 < steinke.epsilon < gdp.epsilon
    assert gdp.mu <= 2.0


def test_more_correct_guesses_never_lower_the_bounds():
    m, r = 1000, 200
    eps = [one_run.epsilon_lower_bound(*_outcome(m, r, v), guesses=[(r // 2, r // 2)]).epsilon
           for v in (120, 150, 180, 200)]
    assert eps == sorted(eps) and eps[0] < eps[-1]
    rejects = one_run.gdp_rejects(m, r, 180, [0.1, 0.5, 1.0, 2.0, 4.0], 0.05)
    assert rejects.tolist() == sorted(rejects.tolist(), reverse=True)  # a prefix of small μ is rejected


def _outcome(m: int, r: int, v: int):
    """Scores and truth with exactly v of the r extreme guesses correct (half at each end)."""
    inserted = np.zeros(m, bool)
    inserted[: m // 2] = True
    scores = inserted.astype(float)
    half = r // 2
    wrong = r - v  # put wrong guesses at both ends
    top_wrong, bottom_wrong = wrong // 2, wrong - wrong // 2
    scores[m // 2: m // 2 + top_wrong] = 2.0  # not inserted, scored highest
    scores[:bottom_wrong] = -1.0  # inserted, scored lowest
    assert half >= max(top_wrong, bottom_wrong)
    return scores, inserted


# --------------------------------------------------------------------------------------------------
# The many-run threshold bound and the sampler audits
# --------------------------------------------------------------------------------------------------


def test_threshold_bound_with_fixed_thresholds_uses_bonferroni():
    rng = np.random.default_rng(4)
    s1, s0 = 1 + rng.laplace(size=100_000), rng.laplace(size=100_000)
    one = threshold.threshold_epsilon(s1, s0, thresholds=[2.0])
    many = threshold.threshold_epsilon(s1, s0, thresholds=np.linspace(-1.0, 3.0, 41))
    assert one.tests == 2 and many.tests == 82
    assert 0.8 < one.epsilon <= 1.0 and many.epsilon <= 1.0
    # the same test certified at level 0.05/82 is looser than at 0.05/2
    at_two = threshold.threshold_epsilon(s1, s0, thresholds=[2.0], confidence=1 - 0.05 / 41)
    assert at_two.epsilon < one.epsilon


def test_threshold_bound_reverse_direction():
    """D₁'s outputs never fall below 1 while D₀'s do: the test "< 1 means D₀" is the informative one."""
    rng = np.random.default_rng(5)
    bound = threshold.threshold_epsilon(1 + rng.exponential(size=50_000), rng.laplace(size=50_000))
    assert bound.direction == "<" and bound.epsilon > 5.0 and bound.fpr_upper < 1e-3


def _faulty(name: str, eps: float):
    """The sampler with the planted fault "noise × ½" (for randomized response: the flip probability of 2ε)."""
    import jax.numpy as jnp

    from jaxpriv.mechanisms import clip_laplace, gaussian, laplace, randomized_response, staircase

    s = samplers.mechanism_sampler(name, eps)
    if name == "gaussian":
        sigma = float(gaussian.analytic_sigma(eps, s.delta))
        sample = lambda key, x, n: x + 0.5 * gaussian.sample(key, sigma, (n,))  # noqa: E731
    elif name == "laplace":
        sample = lambda key, x, n: x + 0.5 * laplace.sample(key, float(laplace.scale_for(eps)), (n,))  # noqa: E731
    elif name == "staircase":
        sample = lambda key, x, n: x + 0.5 * staircase.sample(key, eps, None, (n,))  # noqa: E731
    elif name == "clip_laplace":
        sample = lambda key, x, n: clip_laplace.sample(key, x, 0.5 * 2.0 / eps, 1.0, shape=(n,))  # noqa: E731
    else:
        sample = lambda key, x, n: randomized_response.sample(key, jnp.full((n,), int(x)), 2 * eps)  # noqa: E731
    return s._replace(sample=sample)


#: draws per input of each sampler audit; the Gaussian's δ-tail needs more to resolve a far threshold
DRAWS = {"gaussian": 1_000_000, "laplace": 200_000, "staircase": 200_000, "clip_laplace": 200_000,
         "randomized_response": 100_000}


@pytest.mark.parametrize("name", samplers.MECHANISMS)
def test_sampler_audit_catches_half_noise_and_passes_the_correct_sampler(name):
    """At ε = 1, 95% confidence, seed 0: the correct sampler's certified bound stays below its claim, the
    sampler with half the noise is certified above it."""
    eps = 1.0
    good = samplers.audit_sampler(samplers.mechanism_sampler(name, eps), draws=DRAWS[name], seed=0)
    bad = samplers.audit_sampler(_faulty(name, eps), draws=DRAWS[name], seed=0)
    assert not good.violated and 0.0 <= good.epsilon_lower <= eps
    assert bad.violated and bad.epsilon_lower > eps
    assert good.epsilon_lower > 0.3  # the audit has power: a real test, not a vacuous one


# --------------------------------------------------------------------------------------------------
# The claim's curve and the figure
# --------------------------------------------------------------------------------------------------


def test_claimed_tpr_of_an_event_bounds_the_gdp_curve_from_above():
    from jaxpriv import events

    fpr = np.array([1e-4, 1e-3, 1e-2, 0.1, 0.5])
    gdp = figures.claimed_tpr(fpr, mu=0.5)
    event = figures.claimed_tpr(fpr, event=events.Gaussian(2.0), epsilons=np.linspace(0.0, 4.0, 17))
    assert (event >= gdp - 1e-9).all()
    np.testing.assert_allclose(event, gdp, atol=0.02)  # the (ε, δ) envelope of a 0.25 grid is close to G_μ


def test_plot_audit_writes_the_figure(tmp_path):
    rng = np.random.default_rng(6)
    inserted = rng.random(400) < 0.5
    scores = inserted + rng.normal(size=400)
    fpr = np.logspace(-3, 0, 30)
    path = figures.plot_audit(str(tmp_path / "audit.png"), claimed_fpr=fpr, claimed_tpr=figures.claimed_tpr(fpr, mu=1.0),
                              scores=scores, inserted=inserted, epsilon_lower=0.2, delta=1e-5)
    assert (tmp_path / "audit.png").stat().st_size > 0 and path.endswith("audit.png")


# --------------------------------------------------------------------------------------------------
# Bad input: ValueError naming the parameter and its range
# --------------------------------------------------------------------------------------------------

GOOD_SCORES, GOOD_TRUTH = np.arange(10.0), np.arange(10) % 2 == 0


@pytest.mark.parametrize("call, message", [
    (lambda: stats.clopper_pearson(3, 10, 1.0), r"confidence must lie in \(0.0, 1.0\)"),
    (lambda: stats.clopper_pearson(3, 10, 0.0), r"confidence must lie in \(0.0, 1.0\)"),
    (lambda: stats.clopper_pearson(3, 10, True), r"confidence must lie in \(0, 1\)"),
    (lambda: stats.clopper_pearson(11, 10), r"successes must lie in \[0, trials\]"),
    (lambda: stats.clopper_pearson(2.5, 10), "successes must be an integer"),
    (lambda: stats.clopper_pearson(1, 0), r"trials must lie in \[1.0, inf\)"),
    (lambda: stats.clopper_pearson([1, 2], [3, 4, 5]), "successes and trials must broadcast"),
    (lambda: stats.beta_quantile(1.5, 1.0, 1.0), r"p must lie in \[0.0, 1.0\]"),
    (lambda: stats.beta_quantile(0.5, 0.0, 1.0), r"a must lie in \(0.0, inf\)"),
    (lambda: stats.beta_quantile(0.5, 1.0, -1.0), r"b must lie in \(0.0, inf\)"),
    (lambda: one_run.epsilon_lower_bound([1.0], [True]), r"at least 2 canaries \(m ≥ 2\)"),
    (lambda: one_run.epsilon_lower_bound(GOOD_SCORES, GOOD_TRUTH[:9]), "inserted must have one entry per score"),
    (lambda: one_run.epsilon_lower_bound(GOOD_SCORES.reshape(2, 5), GOOD_TRUTH), "scores must be a 1-D array"),
    (lambda: one_run.epsilon_lower_bound(np.r_[GOOD_SCORES[:9], np.nan], GOOD_TRUTH), "scores contains NaN"),
    (lambda: one_run.epsilon_lower_bound(GOOD_SCORES, GOOD_TRUTH * 2), r"inserted must lie in \[0.0, 1.0\]"),
    (lambda: one_run.epsilon_lower_bound(GOOD_SCORES, GOOD_TRUTH, confidence=1.5), r"confidence must lie in"),
    (lambda: one_run.epsilon_lower_bound(GOOD_SCORES, GOOD_TRUTH, delta=1.0), r"delta must lie in \[0.0, 1.0\)"),
    (lambda: one_run.epsilon_lower_bound(GOOD_SCORES, GOOD_TRUTH, guesses=11), r"must lie in \[1, 10\]"),
    (lambda: one_run.epsilon_lower_bound(GOOD_SCORES, GOOD_TRUTH, guesses=[(0, 0)]), r"must lie in \[1, 10\]"),
    (lambda: one_run.epsilon_lower_bound(GOOD_SCORES, GOOD_TRUTH, guesses=[(-1, 2)]),
     r"inserted_guesses must be an integer in \[0, 10\]"),
    (lambda: one_run.epsilon_lower_bound(GOOD_SCORES, GOOD_TRUTH, guesses=[(1, 2, 3)]), "pairs"),
    (lambda: one_run.epsilon_lower_bound(GOOD_SCORES, GOOD_TRUTH, seed=-1), "seed must be an integer ≥ 0"),
    (lambda: one_run.gdp_lower_bound(GOOD_SCORES, GOOD_TRUTH, delta=0.0), r"delta must lie in \(0.0, 1.0\)"),
    (lambda: one_run.gdp_lower_bound([1.0], [False]), r"at least 2 canaries"),
    (lambda: one_run.gdp_lower_bound(GOOD_SCORES, GOOD_TRUTH, confidence=0.0), "confidence must lie in"),
    (lambda: one_run.p_value(10, 11, 3, 1.0, 0.0), "1 ≤ guesses ≤ canaries"),
    (lambda: one_run.p_value(10, 5, 3, -1.0, 0.0), r"epsilon must lie in \[0, inf\)"),
    (lambda: one_run.gdp_rejects(10, 5, 3, -0.5, 0.05), r"mu must lie in \[0.0, inf\)"),
    (lambda: one_run.gdp_rejects(10, 5, 3, 0.5, 1.0), r"level must lie in \(0.0, 1.0\)"),
    (lambda: one_run.epsilon_lower_bound(GOOD_SCORES, GOOD_TRUTH, method="gdp"), "method must be one of"),
    (lambda: one_run.profile_rejects(10, 5, 3, [-1.0], [0.0], 0.05), r"epsilons must lie in \[0.0, inf\)"),
    (lambda: one_run.profile_rejects(10, 5, 3, [800.0], [0.0], 0.05), r"epsilons must lie in \[0, 700\]"),
    (lambda: one_run.profile_rejects(10, 5, 3, [[1.0]], [0.0], 0.05), "epsilons must be a 1-D array"),
    (lambda: one_run.profile_rejects(10, 5, 3, [1.0], [1.5], 0.05), r"deltas must lie in \[0.0, 1.0\]"),
    (lambda: one_run.profile_rejects(10, 5, 3, [1.0, 2.0], [0.0], 0.05), r"deltas must have shape \(2,\)"),
    (lambda: one_run.profile_rejects(10, 5, 3, [1.0], [0.0], 0.0), r"level must lie in \(0.0, 1.0\)"),
    (lambda: one_run.profile_rejects(10, 5, 6, [1.0], [0.0], 0.05), "0 ≤ correct ≤ guesses"),
    (lambda: one_run.profile_p_value(10, 5, 3, [1.0], [[0.0], [0.1]]), "deltas must be one claim"),
    (lambda: one_run.claim_test(GOOD_SCORES, GOOD_TRUTH, epsilons=[1.0], deltas=[[0.0], [0.1]]),
     "deltas must be one claim"),
    (lambda: one_run.claim_test(GOOD_SCORES, GOOD_TRUTH, epsilons=[1.0], deltas=[0.0], confidence=1.0),
     "confidence must lie in"),
    (lambda: one_run.family_bound(GOOD_SCORES, GOOD_TRUTH[:9], epsilons=[1.0], deltas=[0.0]),
     "inserted must have one entry per score"),
    (lambda: threshold.threshold_epsilon([1.0], [0.0, 1.0]), "scores_in must hold at least 2 draws"),
    (lambda: threshold.threshold_epsilon([1.0, 2.0], [[0.0, 1.0]]), "scores_out must be a 1-D array"),
    (lambda: threshold.threshold_epsilon([1.0, np.inf], [0.0, 1.0]), "scores_in contains inf"),
    (lambda: threshold.threshold_epsilon([1.0, 2.0], [0.0, 1.0], confidence=-0.1), "confidence must lie in"),
    (lambda: threshold.threshold_epsilon([1.0, 2.0], [0.0, 1.0], delta=1.0), r"delta must lie in \[0.0, 1.0\)"),
    (lambda: threshold.threshold_epsilon([1.0, 2.0], [0.0, 1.0], select_fraction=1.0), "select_fraction must lie in"),
    (lambda: threshold.threshold_epsilon([1.0, 2.0], [0.0, 1.0], thresholds=[]), "thresholds must be a non-empty"),
    (lambda: threshold.threshold_epsilon([1.0, 2.0], [0.0, 1.0], seed=1.5), "seed must be an integer"),
    (lambda: samplers.mechanism_sampler("exponential", 1.0), "mechanism must be one of"),
    (lambda: samplers.mechanism_sampler("laplace", 0.0), r"epsilon must lie in \(0.0, inf\)"),
    (lambda: samplers.mechanism_sampler("gaussian", 1.0, delta=0.0), r"delta must lie in \(0.0, 1.0\)"),
    (lambda: samplers.audit_sampler("laplace"), "sampler must be a jaxpriv.audit.Sampler"),
    (lambda: samplers.audit_sampler(samplers.mechanism_sampler("laplace", 1.0), draws=3), r"draws must be an integer in \[4, inf\)"),
    (lambda: samplers.audit_sampler(samplers.mechanism_sampler("laplace", 1.0), confidence=2.0), "confidence must lie in"),
    (lambda: samplers.audit_sampler(samplers.mechanism_sampler("laplace", 1.0), seed=-2), "seed must be an integer ≥ 0"),
    (lambda: figures.claimed_tpr([0.1], mu=1.0, event=object()), "give exactly one claim"),
    (lambda: figures.claimed_tpr([1.1], mu=1.0), r"fpr must lie in \[0.0, 1.0\]"),
    (lambda: figures.claimed_tpr([0.1], mu=-1.0), r"mu must lie in \[0.0, inf\)"),
    (lambda: figures.empirical_roc([1.0, 2.0], [True, True]), "both inserted and not-inserted"),
    (lambda: figures.plot_audit("x.png", claimed_fpr=[0.1, 0.2], claimed_tpr=[0.3]), "same length ≥ 2"),
], ids=lambda x: x if isinstance(x, str) else "")
def test_bad_input_raises_a_value_error_naming_the_parameter(call, message):
    with pytest.raises(ValueError, match=message):
        call()
