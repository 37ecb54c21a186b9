"""Tests for jaxpriv.shuffle.estimators: GSPA's Alg. 1 (mean) and Alg. 2 (frequency) (MATH §3.3).

Oracles: the exact expectation and variance of z by enumerating every report vector of a small
population (numpy, written here); the closed-form moments computed in the test; many independent trials
within 5 standard errors (mean and variance); a single run recomputed by hand from the mechanism
samplers with the same keys. One ValueError test per bad input.
"""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxpriv.mechanisms import laplace
from jaxpriv.mechanisms import randomized_response as rr
from jaxpriv.shuffle import estimators

KEY = jax.random.key(0)


@pytest.fixture(autouse=True)
def x64_stays_off():
    assert not jax.config.jax_enable_x64
    yield
    assert not jax.config.jax_enable_x64


def check_trials(estimate, expectation, variance):
    """Sample mean within 5 SE of E[z]; sample variance within 5 SE of Var z (z ≈ normal: SE(s²) = Var·√(2/(T−1)))."""
    trials = estimate.size
    assert abs(estimate.mean() - expectation) < 5 * np.sqrt(variance / trials)
    assert abs(estimate.var(ddof=1) - variance) < 5 * variance * np.sqrt(2 / (trials - 1))


# ------------------------------------------------------------------------------------------------
# Alg. 1: mean estimation
# ------------------------------------------------------------------------------------------------


def test_mean_estimation_moments_and_trials():
    rng = np.random.default_rng(0)
    n = 1000
    x = np.clip(rng.normal(50, 15, n), 20, 80)  # the paper's synthetic data, Δf = 60
    eps = rng.choice([0.1, 0.5, 1.0], size=n, p=[0.54, 0.37, 0.09])  # conservative / moderate / liberal
    est = estimators.mean_estimation(KEY, x, eps, sensitivity=60.0, trials=2000)
    assert est.estimate.shape == (2000,) and est.estimate.dtype == np.float64
    assert est.expectation == pytest.approx(x.mean(), rel=1e-14)
    assert est.variance == pytest.approx(2 * 60.0**2 * np.sum(1 / eps**2) / n**2, rel=1e-13)
    check_trials(est.estimate, est.expectation, est.variance)


def test_mean_estimation_single_run_is_the_algorithm():
    x = np.array([0.0, 0.25, 1.0, 0.5])
    eps = np.array([0.5, 1.0, 2.0, 4.0])
    est = estimators.mean_estimation(KEY, x, eps, sensitivity=1.0)
    assert est.estimate.shape == ()
    noise_key, _ = jax.random.split(KEY)
    noise = np.asarray(laplace.sample(noise_key, 1.0 / eps, (4,), jnp.float64))
    assert float(est.estimate) == pytest.approx(np.mean(x + noise), rel=1e-14)
    again = estimators.mean_estimation(KEY, x, eps, sensitivity=1.0)
    assert float(again.estimate) == float(est.estimate)  # deterministic in the key


# ------------------------------------------------------------------------------------------------
# Alg. 2: frequency estimation
# ------------------------------------------------------------------------------------------------


def enumerate_z(x, eps):
    """E[z] and Var[z] of z = (A − B)/(n − 2B) over all 2^n report vectors (numpy loop)."""
    n = x.size
    keep = np.exp(eps) / (1 + np.exp(eps))
    b = np.sum(1 / (1 + np.exp(eps)))
    mean = second = 0.0
    for y in itertools.product([0, 1], repeat=n):
        y = np.asarray(y)
        prob = np.prod(np.where(y == x, keep, 1 - keep))
        z = (y.sum() - b) / (n - 2 * b)
        mean += prob * z
        second += prob * z * z
    return mean, second - mean**2


@pytest.mark.parametrize("correlated", [False, True])
def test_frequency_moments_by_enumeration(correlated):
    x = np.array([1, 0, 1, 1, 0, 1, 0, 1, 1, 0])
    eps = np.where(x == 1, 2.0, 0.3) if correlated else np.array([0.3, 2.0, 0.3, 1.0, 1.0, 2.0, 0.5, 0.5, 1.5, 1.5])
    mean, var = enumerate_z(x, eps)
    est = estimators.frequency_estimation(KEY, x, eps)
    assert est.expectation == pytest.approx(mean, rel=1e-12)
    assert est.variance == pytest.approx(var, rel=1e-11)
    w = np.tanh(eps / 2)
    assert est.expectation == pytest.approx(np.sum(w * x) / np.sum(w), rel=1e-13)  # the derivation
    if correlated:  # budgets tied to the data: z is biased for c = mean(x)
        assert abs(est.expectation - x.mean()) > 0.1


def test_frequency_estimation_uniform_budget_is_unbiased():
    x = (np.arange(5000) < 3500).astype(int)  # c = 0.7
    est = estimators.frequency_estimation(KEY, x, 0.8, trials=2000)
    assert est.expectation == pytest.approx(0.7, rel=1e-13)
    q = 1 / (1 + np.exp(0.8))
    assert est.variance == pytest.approx(5000 * q * (1 - q) / (5000 * (1 - 2 * q)) ** 2, rel=1e-12)
    check_trials(est.estimate, est.expectation, est.variance)


def test_frequency_estimation_personalized_trials_match_exact_moments():
    rng = np.random.default_rng(1)
    n = 3000
    x = (rng.random(n) < 0.7).astype(int)
    eps = np.where(x == 1, rng.choice([0.5, 2.0], n), 0.5)  # correlated with the data
    est = estimators.frequency_estimation(jax.random.key(4), x, eps, trials=2000)
    check_trials(est.estimate, est.expectation, est.variance)
    # the bias is real: the trials' mean is many standard errors away from c
    assert abs(est.estimate.mean() - x.mean()) > 10 * np.sqrt(est.variance / 2000)


def test_frequency_estimation_single_run_is_the_algorithm():
    x = np.array([1, 0, 1, 1, 0, 1])
    eps = np.array([0.5, 1.0, 2.0, 0.5, 1.0, 2.0])
    est = estimators.frequency_estimation(KEY, x, eps)
    rr_key, _ = jax.random.split(KEY)
    with jax.enable_x64(True):
        reports = np.asarray(rr.sample(rr_key, x, eps, k=2, dtype=jnp.float64))
    b = np.sum(1 / (1 + np.exp(eps)))
    assert float(est.estimate) == pytest.approx((reports.sum() - b) / (6 - 2 * b), rel=1e-14)


def test_same_results_with_x64_on():
    x, eps = np.array([1, 0, 1, 1]), np.array([0.5, 1.0, 2.0, 0.5])
    off = estimators.frequency_estimation(KEY, x, eps, trials=3)
    off_mean = estimators.mean_estimation(KEY, x / 2.0, eps, trials=3)
    with jax.enable_x64(True):
        on = estimators.frequency_estimation(KEY, x, eps, trials=3)
        on_mean = estimators.mean_estimation(KEY, x / 2.0, eps, trials=3)
    for a, b in zip(off + off_mean, on + on_mean):
        np.testing.assert_array_equal(a, b)


# ------------------------------------------------------------------------------------------------
# bad inputs: one test each, the message names the parameter
# ------------------------------------------------------------------------------------------------

X = np.array([0.0, 0.5, 1.0])
BITS = np.array([0, 1, 1])
BAD = [
    ("mean x 2-D", lambda: estimators.mean_estimation(KEY, X[None], 1.0), "x"),
    ("mean x empty", lambda: estimators.mean_estimation(KEY, [], 1.0), "x"),
    ("mean x NaN", lambda: estimators.mean_estimation(KEY, [0.0, np.nan], 1.0), "x"),
    ("mean x spread > Δ", lambda: estimators.mean_estimation(KEY, X, 1.0, sensitivity=0.5), "sensitivity"),
    ("mean epsilon empty", lambda: estimators.mean_estimation(KEY, X, []), "epsilon"),
    ("mean epsilon negative", lambda: estimators.mean_estimation(KEY, X, [1.0, -1.0, 1.0]), "epsilon"),
    ("mean epsilon zero", lambda: estimators.mean_estimation(KEY, X, 0.0), "epsilon"),
    ("mean epsilon length", lambda: estimators.mean_estimation(KEY, X, [1.0, 1.0]), "epsilon"),
    ("mean sensitivity ≤ 0", lambda: estimators.mean_estimation(KEY, X, 1.0, sensitivity=0.0), "sensitivity"),
    ("mean sensitivity array", lambda: estimators.mean_estimation(KEY, X, 1.0, sensitivity=[1.0, 2.0]), "sensitivity"),
    ("mean trials 0", lambda: estimators.mean_estimation(KEY, X, 1.0, trials=0), "trials"),
    ("mean trials fractional", lambda: estimators.mean_estimation(KEY, X, 1.0, trials=2.5), "trials"),
    ("frequency x non-binary", lambda: estimators.frequency_estimation(KEY, [0, 2, 1], 1.0), "x"),
    ("frequency x fractional", lambda: estimators.frequency_estimation(KEY, [0, 0.5], 1.0), "x"),
    ("frequency x empty", lambda: estimators.frequency_estimation(KEY, [], 1.0), "x"),
    ("frequency epsilon empty", lambda: estimators.frequency_estimation(KEY, BITS, []), "epsilon"),
    ("frequency epsilon negative", lambda: estimators.frequency_estimation(KEY, BITS, -1.0), "epsilon"),
    ("frequency epsilon inf", lambda: estimators.frequency_estimation(KEY, BITS, np.inf), "epsilon"),
    ("frequency epsilon length", lambda: estimators.frequency_estimation(KEY, BITS, np.ones(4)), "epsilon"),
    ("frequency trials array", lambda: estimators.frequency_estimation(KEY, BITS, 1.0, trials=[3]), "trials"),
]


@pytest.mark.parametrize("call, name", [(c, n) for _, c, n in BAD], ids=[i for i, _, _ in BAD])
def test_bad_input(call, name):
    with pytest.raises(ValueError, match=name):
        call()
