"""Tests for jaxpriv.mechanisms.randomized_response (MATH §3.3, §4.3).

Oracles: mpmath for the keep probability, the pmf and the Rényi divergence (a direct sum over the k
outputs, in both directions); the exact law of the frequency estimator by enumerating every report
vector of a small population; empirical frequencies of the sampler within 5 standard errors; the
sampler's rounding checked against mpmath on the uniform's grid. One ValueError test per bad input.
"""

import itertools

import jax
import jax.numpy as jnp
import mpmath as mp
import numpy as np
import pytest

from jaxpriv.mechanisms import randomized_response as rr

mp.mp.dps = 50
KEY = jax.random.key(0)


@pytest.fixture(autouse=True)
def x64_stays_off():
    assert not jax.config.jax_enable_x64
    yield
    assert not jax.config.jax_enable_x64


def mp_pmf_row(eps, k, x):
    """The law of the report on input x, as a list of k mpf probabilities."""
    e = mp.exp(mp.mpf(eps))
    return [e / (e + k - 1) if y == x else 1 / (e + k - 1) for y in range(k)]


def mp_renyi_sum(eps, k, alpha, x=0, x2=1):
    """D_α(P_x ‖ P_x2) = log Σ_y P^α Q^{1−α} / (α − 1), summed directly."""
    a = mp.mpf(alpha)
    p, q = mp_pmf_row(eps, k, x), mp_pmf_row(eps, k, x2)
    return mp.log(mp.fsum(pi**a * qi ** (1 - a) for pi, qi in zip(p, q))) / (a - 1)


# ------------------------------------------------------------------------------------------------
# keep probability, pmf, pure ε
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("k", [2, 3, 10])
def test_keep_probability_pmf_and_pure_epsilon(k):
    eps = np.array([1e-6, 0.1, 1.0, 5.0, 40.0, 800.0])
    keep = rr.keep_probability(eps, k)
    for e, p in zip(eps, keep):
        assert p == pytest.approx(float(mp_pmf_row(e, k, 0)[0]), rel=1e-14)
    for x in range(k):
        rows = rr.pmf(np.arange(k), x, 1.3, k)
        assert rows.sum() == pytest.approx(1.0, rel=1e-14)
        np.testing.assert_allclose(rows, [float(v) for v in mp_pmf_row(1.3, k, x)], rtol=1e-14)
    # the worst log-likelihood ratio over outputs and input pairs is ε exactly (tight pure ε)
    y, x, x2 = np.meshgrid(np.arange(k), np.arange(k), np.arange(k), indexing="ij")
    ratios = rr.log_prob(y, x, 0.7, k) - rr.log_prob(y, x2, 0.7, k)
    assert ratios.max() == pytest.approx(0.7, rel=1e-14)
    # epsilon() inverts keep_probability(); keep = 1/k is ε = 0
    np.testing.assert_allclose(rr.epsilon(keep[:4], k), eps[:4], rtol=1e-9)  # keep rounds to 1 beyond
    assert float(rr.epsilon(1.0 / k, k)) == pytest.approx(0.0, abs=1e-15)  # float 1/k is ≥ the exact 1/k


@pytest.mark.parametrize("k", [2, 5])
def test_mean_and_variance_of_one_hot_report(k):
    x = np.array([0, 1, k - 1])
    eps = np.array([0.2, 1.0, 3.0])
    m, v = rr.mean(x, eps, k), rr.variance(x, eps, k)
    assert m.shape == (3, k)
    for i in range(3):
        row = [float(p) for p in mp_pmf_row(eps[i], k, x[i])]
        np.testing.assert_allclose(m[i], row, rtol=1e-14)
        np.testing.assert_allclose(v[i], [p * (1 - p) for p in row], rtol=1e-13)


# ------------------------------------------------------------------------------------------------
# RDP curve
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("k", [2, 3, 10, 1000])
def test_rdp_against_direct_sum(k):
    orders = np.array([1.0001, 1.01, 1.5, 2.0, 3.7, 16.0, 100.5, 1e4])
    eps = np.array([1e-5, 1e-3, 0.1, 1.0, 4.0, 30.0])
    got = rr.rdp(eps, orders, k)
    assert got.shape == (eps.size, orders.size)
    for i, e in enumerate(eps):
        for j, a in enumerate(orders):
            forward = mp_renyi_sum(e, k, a, 0, 1)
            assert abs(forward - mp_renyi_sum(e, k, a, 1, 0)) < mp.mpf(10) ** -40  # symmetric pair
            assert got[i, j] == pytest.approx(float(forward), rel=1e-12)


def test_rdp_properties():
    orders = np.linspace(1.01, 500.0, 400)
    curve = rr.rdp(2.0, orders, 4)
    assert np.all(np.diff(curve) >= 0) and np.all(curve <= 2.0)  # non-decreasing in α, bounded by ε
    assert rr.rdp(2.0, [1e9], 4)[0] == pytest.approx(2.0, rel=1e-8)  # → ε as α → ∞
    # more values, same ε: the two output laws share more equal mass, so the divergence shrinks
    assert np.all(rr.rdp(2.0, orders, 10) < curve)
    assert np.all(np.isfinite(rr.rdp(700.0, orders, 2)))


# ------------------------------------------------------------------------------------------------
# sampling
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("k, dtype", [(2, jnp.float32), (3, jnp.float32), (5, jnp.float64)])
def test_sample_frequencies_match_pmf(k, dtype):
    n = 60_000
    x = np.repeat(np.arange(k), n // k)
    eps = np.where(x == 0, 0.5, 2.0)  # personalized: one budget per entry
    y = np.asarray(rr.sample(jax.random.key(3), x, eps, k, dtype=dtype))
    assert y.dtype == np.int32 and y.shape == x.shape
    for v in range(k):
        for e in (0.5, 2.0):
            rows = (x == v) & (eps == e)
            if not rows.any():
                continue
            probs = np.array([float(p) for p in mp_pmf_row(e, k, v)])
            counts = np.bincount(y[rows], minlength=k)
            se = np.sqrt(rows.sum() * probs * (1 - probs))
            assert np.all(np.abs(counts - rows.sum() * probs) < 5 * se)


def test_sample_under_jit_and_deterministic():
    x = jnp.array([0, 1, 2, 1, 0] * 20)
    f = jax.jit(lambda key, xs, e: rr.sample(key, xs, e, k=3))
    first = f(KEY, x, jnp.float32(1.0))
    np.testing.assert_array_equal(first, f(KEY, x, jnp.float32(1.0)))
    np.testing.assert_array_equal(first, rr.sample(KEY, x, 1.0, 3))
    assert not np.array_equal(first, rr.sample(jax.random.key(1), x, 1.0, 3))


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
@pytest.mark.parametrize("k", [2, 3, 7])
def test_sampler_rounding_is_on_the_private_side(dtype, k):
    """The realised flip probability r = ⌈t 2^m⌉ 2^-m (u on the grid {j 2^-m}) gives a mechanism with
    ε' = log((1 − r)(k − 1)/r) ≤ max(ε, ε_min), ε_min from the largest grid point ≤ (k − 1)/k, and
    r ≤ (k − 1)/k (never an anti-informative coin); for k = 2, ε_min = 0."""
    eps = np.concatenate([np.geomspace(1e-12, 120.0, 400), [0.1, 1.0, 2.0]])
    m = jnp.finfo(dtype).nmant
    with jax.enable_x64(dtype == jnp.float64):
        t = np.asarray(rr._flip_threshold(jnp.asarray(eps, dtype), k, dtype), np.float64)
    grid = mp.mpf(2) ** m
    cap = mp.floor(mp.mpf(k - 1) / k * grid) / grid
    eps_min = mp.log((1 - cap) * (k - 1) / cap)
    assert (eps_min == 0) == (k == 2)
    for e, ti in zip(eps, t):
        r = mp.ceil(mp.mpf(float(ti)) * grid) / grid
        assert 0 < r <= mp.mpf(k - 1) / k
        eps_realised = mp.log((1 - r) * (k - 1) / r)
        assert eps_realised <= max(mp.mpf(float(e)), eps_min)


# ------------------------------------------------------------------------------------------------
# frequency estimation
# ------------------------------------------------------------------------------------------------


def enumerate_estimator(x, eps, k):
    """Exact E and Var of f̂ by summing over all k^n report vectors (numpy, independent of the module)."""
    x, eps = np.asarray(x), np.asarray(eps, np.float64)
    n = x.size
    e = np.exp(eps)
    p, q = e / (e + k - 1), 1 / (e + k - 1)
    mean, second = np.zeros(k), np.zeros(k)
    for reports in itertools.product(range(k), repeat=n):
        reports = np.asarray(reports)
        prob = np.prod(np.where(reports == x, p, q))
        counts = np.bincount(reports, minlength=k)
        f = (counts - q.sum()) / (p - q).sum()
        mean += prob * f
        second += prob * f * f
    return mean, second - mean**2


@pytest.mark.parametrize("k", [2, 3])
def test_frequency_moments_by_enumeration(k):
    x = np.array([0, 1, 1, k - 1, 0, 1, k - 1])
    eps = np.array([0.3, 0.3, 2.0, 1.0, 4.0, 0.7, 1.5])  # correlated with x: biased
    mean, var = enumerate_estimator(x, eps, k)
    got_mean, got_var = rr.frequency_moments(x, eps, k)
    np.testing.assert_allclose(got_mean, mean, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(got_var, var, rtol=1e-11)
    truth = np.bincount(x, minlength=k) / x.size
    assert np.max(np.abs(got_mean - truth)) > 0.01  # personalized budgets bias the estimator
    # equal budgets: unbiased for the plain frequencies
    np.testing.assert_allclose(rr.frequency_moments(x, 0.8, k)[0], truth, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(enumerate_estimator(x, np.full(x.size, 0.8), k)[0], truth, rtol=1e-12, atol=1e-14)


def test_estimate_frequencies_formula_and_batching():
    eps = np.array([0.5, 1.0, 2.0, 2.0])
    counts = np.array([[1, 3], [2, 2], [4, 0]])
    got = rr.estimate_frequencies(counts, eps)
    b = np.sum(1 / (1 + np.exp(eps)))
    np.testing.assert_allclose(got[:, 1], (counts[:, 1] - b) / (4 - 2 * b), rtol=1e-14)  # GSPA's z
    np.testing.assert_allclose(got.sum(axis=-1), 1.0, rtol=1e-14)
    # a scalar budget: n is each row's own total
    rows = np.array([[10, 20, 30], [1, 1, 8]])
    q = 1 / (np.exp(1.2) + 2)
    expected = (rows - rows.sum(-1, keepdims=True) * q) / (rows.sum(-1, keepdims=True) * (1 - 3 * q))
    np.testing.assert_allclose(rr.estimate_frequencies(rows, 1.2), expected, rtol=1e-13)


def test_estimate_frequencies_empirically_unbiased():
    k, n, trials = 4, 2000, 400
    rng = np.random.default_rng(5)
    x = rng.integers(0, k, n)
    eps = rng.permutation(np.repeat([0.5, 1.0, 3.0, 3.0], n // 4))
    keys = jax.random.split(jax.random.key(9), trials)
    reports = np.asarray(jax.vmap(lambda key: rr.sample(key, x, eps, k))(keys))
    counts = np.stack([np.bincount(r, minlength=k) for r in reports])
    estimates = rr.estimate_frequencies(counts, eps)
    mean, var = rr.frequency_moments(x, eps, k)
    assert np.all(np.abs(estimates.mean(axis=0) - mean) < 5 * np.sqrt(var / trials))
    assert np.all(np.abs(estimates.var(axis=0, ddof=1) - var) < 5 * var * np.sqrt(2 / (trials - 1)))


def test_same_results_with_x64_on():
    calls = [
        lambda: rr.rdp([0.3, 2.0], [1.5, 8.0], 3),
        lambda: rr.keep_probability([0.3, 2.0], 5),
        lambda: rr.frequency_moments([0, 1, 2, 2], [0.5, 1.0, 1.0, 3.0], 3),
        lambda: rr.estimate_frequencies([[3, 1], [2, 2]], [0.5, 1.0, 1.0, 3.0]),
        lambda: rr.sample(KEY, [0, 1, 2, 2] * 5, 1.0, 3),
    ]
    off = [np.asarray(c()) for c in calls]
    with jax.enable_x64(True):
        on = [np.asarray(c()) for c in calls]
        f64 = jax.jit(lambda k: rr.sample(k, jnp.zeros(8, jnp.int32), 1.0, 2, dtype=jnp.float64))(KEY)
        assert f64.dtype == jnp.int32
    for a, b in zip(off, on):
        np.testing.assert_array_equal(a, b)


def test_results_are_float64_with_x64_off():
    for value in [rr.keep_probability(1.0), rr.rdp(1.0, [2.0]), rr.pmf(0, 0, 1.0), rr.estimate_frequencies([1, 2], 1.0)]:
        assert isinstance(value, np.ndarray) and value.dtype == np.float64


# ------------------------------------------------------------------------------------------------
# bad inputs: one test each, the message names the parameter
# ------------------------------------------------------------------------------------------------

BAD = [
    ("keep_probability epsilon ≤ 0", lambda: rr.keep_probability(0.0), "epsilon"),
    ("keep_probability negative budgets", lambda: rr.keep_probability([1.0, -1.0]), "epsilon"),
    ("keep_probability empty", lambda: rr.keep_probability([]), "epsilon"),
    ("keep_probability k < 2", lambda: rr.keep_probability(1.0, k=1), "k"),
    ("keep_probability k fractional", lambda: rr.keep_probability(1.0, k=2.5), "k"),
    ("keep_probability k array", lambda: rr.keep_probability(1.0, k=[2, 3]), "k"),
    ("epsilon keep < 1/k", lambda: rr.epsilon(0.2, k=3), "keep"),
    ("epsilon keep = 1", lambda: rr.epsilon(1.0), "keep"),
    ("epsilon k < 2", lambda: rr.epsilon(0.7, k=0), "k"),
    ("sample epsilon ≤ 0", lambda: rr.sample(KEY, [0, 1], 0.0), "epsilon"),
    ("sample epsilon NaN", lambda: rr.sample(KEY, [0, 1], np.nan), "epsilon"),
    ("sample x out of range", lambda: rr.sample(KEY, [0, 2], 1.0), "x"),
    ("sample x fractional", lambda: rr.sample(KEY, [0, 0.5], 1.0), "x"),
    ("sample shapes", lambda: rr.sample(KEY, [0, 1], [1.0, 1.0, 1.0]), "epsilon"),
    ("sample k < 2", lambda: rr.sample(KEY, [0, 0], 1.0, k=1), "k"),
    ("sample int dtype", lambda: rr.sample(KEY, [0, 1], 1.0, dtype=jnp.int32), "dtype"),
    ("sample bfloat16 coin", lambda: rr.sample(KEY, [0, 1], 1.0, dtype=jnp.bfloat16), "dtype"),
    ("log_prob y out of range", lambda: rr.log_prob(3, 0, 1.0, k=3), "y"),
    ("log_prob x negative", lambda: rr.log_prob(0, -1, 1.0), "x"),
    ("log_prob epsilon ≤ 0", lambda: rr.log_prob(0, 0, -1.0), "epsilon"),
    ("log_prob shapes", lambda: rr.log_prob([0, 1], [0, 1, 1], 1.0), "shapes"),
    ("pmf k < 2", lambda: rr.pmf(0, 0, 1.0, k=1), "k"),
    ("mean epsilon ≤ 0", lambda: rr.mean(0, 0.0), "epsilon"),
    ("variance x out of range", lambda: rr.variance(5, 1.0, k=4), "x"),
    ("rdp epsilon ≤ 0", lambda: rr.rdp(0.0, [2.0]), "epsilon"),
    ("rdp orders ≤ 1", lambda: rr.rdp(1.0, [1.0]), "orders"),
    ("rdp k < 2", lambda: rr.rdp(1.0, [2.0], k=1), "k"),
    ("estimate_frequencies negative counts", lambda: rr.estimate_frequencies([-1, 3], 1.0), "counts"),
    ("estimate_frequencies fractional counts", lambda: rr.estimate_frequencies([1.5, 3], 1.0), "counts"),
    ("estimate_frequencies one value", lambda: rr.estimate_frequencies([4], 1.0), "counts"),
    ("estimate_frequencies wrong total", lambda: rr.estimate_frequencies([1, 2], [1.0, 1.0]), "counts"),
    ("estimate_frequencies empty budgets", lambda: rr.estimate_frequencies([0, 0], []), "epsilon"),
    ("estimate_frequencies negative budgets", lambda: rr.estimate_frequencies([1, 1], [1.0, -1.0]), "epsilon"),
    ("estimate_frequencies 2-D budgets", lambda: rr.estimate_frequencies([1, 1], [[1.0, 1.0]]), "epsilon"),
    ("frequency_moments x 2-D", lambda: rr.frequency_moments([[0, 1]], 1.0), "x"),
    ("frequency_moments empty x", lambda: rr.frequency_moments([], 1.0), "x"),
    ("frequency_moments budgets mismatch", lambda: rr.frequency_moments([0, 1, 1], [1.0, 2.0]), "epsilon"),
    ("frequency_moments zero budget", lambda: rr.frequency_moments([0, 1], [1.0, 0.0]), "epsilon"),
    ("frequency_moments k < 2", lambda: rr.frequency_moments([0, 1], 1.0, k=1), "k"),
]


@pytest.mark.parametrize("call, name", [(c, n) for _, c, n in BAD], ids=[i for i, _, _ in BAD])
def test_bad_input(call, name):
    with pytest.raises(ValueError, match=name):
        call()
