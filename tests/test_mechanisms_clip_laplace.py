"""Tests for jaxpriv.mechanisms.clip_laplace (MATH §4.1, §3.2).

Oracles: mpmath quadrature of the density (normalizer, cdf, mean, variance), the paper's printed
formulas evaluated directly in numpy (Eq. 1, E[η²] of Lemma 9, Lemma 4, p_ij), brute-force numpy
density ratios on grids (Theorem 1, Lemma 4, p_ij ≤ inf μ_i/μ_j), Kolmogorov–Smirnov tests of the
sampler against the exact cdf (2·10⁵ samples per case), apes_echo_sum for the echo matrix's row sums,
and exact mixture means of known g for the calibration. One ValueError test per bad input.
"""

import warnings

import jax
import jax.numpy as jnp
import mpmath as mp
import numpy as np
import pytest
from scipy import stats

from jaxpriv._numerics import float64
from jaxpriv.mechanisms import clip_laplace as clap
from jaxpriv.mechanisms import clip_laplace_analyzer as analyzer
from jaxpriv.mechanisms import echo
from jaxpriv.shuffle import bounds

KS_SAMPLES = 200_000
KS_MIN_P = 1e-3


@pytest.fixture(autouse=True)
def x64_flag_untouched():
    """No call may flip the caller's global x64 flag (the suite runs with it off)."""
    assert not jax.config.jax_enable_x64
    yield
    assert not jax.config.jax_enable_x64


# ------------------------------------------------------------------------------------------------
# oracles
# ------------------------------------------------------------------------------------------------


def mp_moments(f, lam, A, dps=30):
    """(S, E[Z], Var Z) by tanh-sinh quadrature of e^{−|z−f|/λ} on [−A, A], split at the kink f and
    at ±40λ around it (where the integrand has fallen by e^{−40})."""
    with mp.workdps(dps):
        f, lam, A = mp.mpf(float(f)), mp.mpf(float(lam)), mp.mpf(float(A))
        pts = sorted({-A, max(-A, f - 40 * lam), f, min(A, f + 40 * lam), A})
        w = lambda z: mp.exp(-abs(z - f) / lam)
        mass = mp.quad(w, pts)
        m1 = mp.quad(lambda z: z * w(z), pts) / mass
        var = mp.quad(lambda z: (z - m1) ** 2 * w(z), pts) / mass
        return mass / (2 * lam), m1, var


def mp_cdf(z, f, lam, A, dps=30):
    with mp.workdps(dps):
        z, f, lam, A = (mp.mpf(float(v)) for v in (z, f, lam, A))
        w = lambda t: mp.exp(-abs(t - f) / lam)
        pts = lambda lo, hi: sorted({lo, hi} | ({f} if lo < f < hi else set()))
        return mp.quad(w, pts(-A, z)) / mp.quad(w, pts(-A, A))


def np_log_density(z, f, lam, A):
    """Definition 4 of seed 000 as printed (numpy)."""
    s = 1 - 0.5 * np.exp((-A + f) / lam) - 0.5 * np.exp((-A - f) / lam)
    return -np.abs(z - f) / lam - np.log(2 * lam * s)


def eq1_mean(g, lam, C):
    """Seed 000, Eq. 1 as printed."""
    e1, e2 = np.exp((-C - g) / lam), np.exp((-C + g) / lam)
    return ((C + lam) * (e1 - e2) + 2 * g) / (2 - e1 - e2)


def echo_matrix(e):
    ei, ej = e[:, None], e[None, :]
    return (ei / ej) * (1 - np.exp(-ej)) / (1 - np.exp(-ei)) * np.exp(-np.maximum(ei, ej))


def sup_log_ratio(eps_i, eps_j, C, A, grid=401):
    """sup over z ∈ [−A, A], f, f' ∈ [−C, C] of log μ_i(z|f)/μ_j(z|f') on a grid (numpy)."""
    z = np.linspace(-A, A, grid)[:, None]
    f = np.linspace(-C, C, grid)[None, :]
    li = np_log_density(z, f, 2 * C / eps_i, A)
    lj = np_log_density(z, f, 2 * C / eps_j, A)
    return float(np.max(li.max(axis=1) - lj.min(axis=1)))


# ------------------------------------------------------------------------------------------------
# density, normalizer, cdf, moments
# ------------------------------------------------------------------------------------------------

SPREAD = [
    (A, lam, frac)
    for A in (1.0, 2.5)
    for lam in (1e-4, 1e-2, 0.3, 1.0, 7.0, 1e3, 1e6)
    for frac in (-1.0, -0.999999, -0.5, 1e-7, 0.3, 0.9, 1.0)
]


def test_normalizer_mean_variance_match_quadrature():
    f = np.array([frac * A for A, _, frac in SPREAD])
    lam = np.array([lam for _, lam, _ in SPREAD])
    A = np.array([A for A, _, _ in SPREAD])
    got_s, got_m, got_v = clap.normalizer(f, lam, A), clap.mean(f, lam, A), clap.variance(f, lam, A)
    for k in range(len(SPREAD)):
        s, m1, var = mp_moments(f[k], lam[k], A[k])
        assert got_s[k] == pytest.approx(float(s), rel=1e-13)
        assert got_m[k] == pytest.approx(float(m1), rel=1e-10)
        assert got_v[k] == pytest.approx(float(var), rel=1e-10)


def test_mean_is_zero_at_zero_and_odd_in_f():
    lam = np.array([1e-4, 0.5, 3.0, 1e5])
    assert np.all(clap.mean(0.0, lam, 1.0) == 0.0)
    f = np.linspace(-1, 1, 41)
    np.testing.assert_array_equal(clap.mean(f, 0.7, 1.0), -clap.mean(-f, 0.7, 1.0))


def test_mean_is_eq1_and_its_a_not_c_generalisation():
    # Where Eq. 1 as printed is well conditioned (λ ~ A), it agrees; for A ≠ C, C → A in Eq. 1.
    f = np.linspace(-1.0, 1.0, 21)
    for lam, A in [(0.5, 1.0), (2.0, 1.0), (1.0, 3.0)]:
        np.testing.assert_allclose(clap.mean(f, lam, A), eq1_mean(f, lam, A), rtol=1e-12, atol=1e-15)


def test_variance_matches_lemma9_second_moment():
    # Lemma 9 (seed 000): E[(Z − g)²] = ((λ² − (g+C+λ)²)e^{(−C−g)/λ} + (λ² − (−g+C+λ)²)e^{(−C+g)/λ})/(2S) + 2λ².
    g, C = np.linspace(-1.0, 1.0, 11), 1.0
    for lam in (0.2, 1.0, 4.0):
        s = 1 - 0.5 * np.exp((-C + g) / lam) - 0.5 * np.exp((-C - g) / lam)
        second = ((lam**2 - (g + C + lam) ** 2) * np.exp((-C - g) / lam)
                  + (lam**2 - (-g + C + lam) ** 2) * np.exp((-C + g) / lam)) / (2 * s) + 2 * lam**2
        got = clap.variance(g, lam, C) + (clap.mean(g, lam, C) - g) ** 2
        np.testing.assert_allclose(got, second, rtol=1e-12)


def test_moment_limits():
    assert clap.variance(0.0, 1e-3, 1.0) == pytest.approx(2e-6, rel=1e-12)  # untruncated Laplace
    assert clap.variance(0.7, 1e9, 1.0) == pytest.approx(1 / 3, rel=1e-8)  # uniform on [−1, 1]
    assert clap.mean(0.7, 1e9, 1.0) == pytest.approx(0.7 * (3 - 0.7**2) / 6e9, rel=1e-8)  # f(3A² − f²)/(6Aλ)
    assert clap.mean(1.0, 1e-6, 1.0) == pytest.approx(1.0 - 1e-6, rel=1e-14)  # A − λ at the end


def test_log_prob_matches_definition_and_integrates_to_one():
    z = np.linspace(-1.5, 1.5, 61)
    for f, lam, A in [(0.3, 0.5, 1.0), (-1.0, 2.0, 1.0), (0.0, 0.05, 2.0)]:
        got = clap.log_prob(z, f, lam, A)
        inside = np.abs(z) <= A
        np.testing.assert_allclose(got[inside], np_log_density(z[inside], f, lam, A), rtol=1e-13)
        assert np.all(got[~inside] == -np.inf)
        # Gauss–Legendre on each smooth piece [−A, f] and [f, A] (exact to rounding for these exponentials)
        x, w = np.polynomial.legendre.leggauss(100)  # numpy's nodes lose accuracy for n ≳ 150
        total = 0.0
        for lo, hi in [(-A, f), (f, A)]:
            if hi > lo:
                nodes = 0.5 * (lo + hi) + 0.5 * (hi - lo) * x
                total += 0.5 * (hi - lo) * np.sum(w * np.exp(clap.log_prob(nodes, f, lam, A)))
        assert total == pytest.approx(1.0, abs=1e-13)


def test_cdf_matches_quadrature_and_limits():
    for f, lam, A in [(0.3, 0.5, 1.0), (1.0, 0.05, 1.0), (-0.2, 1e3, 1.0), (0.5, 0.01, 2.0)]:
        z = np.clip([-A, -0.7 * A, f - 0.01, f, f + 1e-3, 0.95 * A, A], -A, A)
        got = clap.cdf(z, f, lam, A)
        want = np.array([float(mp_cdf(v, f, lam, A)) for v in z])
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15)
    np.testing.assert_array_equal(clap.cdf([-np.inf, -1.5, 1.5, np.inf], 0.2, 0.5, 1.0), [0.0, 0.0, 1.0, 1.0])
    grid = np.linspace(-1, 1, 2001)
    assert np.all(np.diff(clap.cdf(grid, 0.4, 0.3, 1.0)) >= 0)


def test_results_are_float64_numpy_with_x64_off():
    for out in (clap.mean(0.1, 1.0, 1.0), clap.variance([0.1], 1.0, 1.0), clap.cdf(0.0, 0.1, 1.0, 1.0),
                clap.log_prob(0.0, 0.1, 1.0, 1.0), clap.normalizer(0.1, 1.0, 1.0), clap.local_scale(1.0, 1.0),
                echo.echo_probabilities([1.0, 2.0]), echo.neighbor_divergence(1.0, 2.0)):
        assert isinstance(out, np.ndarray) and out.dtype == np.float64


def test_broadcasting_over_parameters_and_batch_dims():
    f = np.linspace(-0.5, 0.5, 3)[:, None, None]
    lam = np.array([0.1, 1.0, 10.0, 100.0])[None, :, None]
    A = np.array([0.5, 2.0])
    out = clap.mean(f, lam, A)
    assert out.shape == (3, 4, 2)
    assert out[2, 1, 1] == pytest.approx(float(clap.mean(0.5, 1.0, 2.0)), rel=1e-15)


def test_local_scale():
    np.testing.assert_allclose(clap.local_scale([0.5, 1.0, 8.0], 0.1), [0.4, 0.2, 0.025], rtol=1e-15)


def test_local_scale_is_never_below_2c_over_epsilon():
    from fractions import Fraction

    rng = np.random.default_rng(0)
    eps, clip = rng.uniform(0.01, 20.0, 300), rng.uniform(0.01, 5.0, 300)
    exact = [2 * Fraction(c) / Fraction(e) for e, c in zip(eps, clip)]
    lam = clap.local_scale(eps, clip)  # concrete: float64, rounded up
    assert all(Fraction(v) >= x for v, x in zip(lam, exact))
    assert np.max(np.abs(lam / (2 * clip / eps) - 1)) <= 2.3e-16  # at most one ulp above
    # traced (a client's ε inside a jitted float32 round): its own dtype, still never below
    e32, c32 = eps.astype(np.float32), clip.astype(np.float32)
    lam32 = np.asarray(jax.jit(clap.local_scale)(e32, c32))
    assert lam32.dtype == np.float32
    assert all(Fraction(float(v)) >= 2 * Fraction(float(c)) / Fraction(float(e)) for v, e, c in zip(lam32, e32, c32))
    bad = np.asarray(jax.jit(clap.local_scale)(np.float32([0.0, -1.0, 1.0, np.inf, np.nan, 1.0]),
                                               np.float32([1.0, 1.0, 0.0, 1.0, 1.0, np.inf])))
    assert np.all(np.isnan(bad))


# ------------------------------------------------------------------------------------------------
# sampling
# ------------------------------------------------------------------------------------------------

KS_CASES = [
    (0.3, 2.0, 1.0),  # mild truncation
    (0.99, 0.01, 1.0),  # strongly truncated at the right end
    (1.0, 0.05, 1.0),  # f on the boundary: no mass to the right
    (-1.0, 1e3, 1.0),  # λ ≫ A: nearly uniform
    (0.0, 1e-4, 1.0),  # λ ≪ A: untruncated Laplace
    (0.5, 0.2, 3.0),  # A > C
]


@pytest.mark.parametrize("f, lam, A", KS_CASES)
def test_sample_float32_passes_ks_against_exact_cdf(f, lam, A):
    z = clap.sample(jax.random.key(11), f, lam, A, shape=(KS_SAMPLES,))
    assert z.dtype == jnp.float32
    z = np.asarray(z, dtype=np.float64)
    assert np.all(np.abs(z) <= A)
    assert stats.kstest(z, lambda x: clap.cdf(x, f, lam, A)).pvalue > KS_MIN_P


@pytest.mark.parametrize("f, lam, A", KS_CASES[:3])
def test_sample_float64_passes_ks_against_exact_cdf(f, lam, A):
    with float64():
        z = clap.sample(jax.random.key(12), f, lam, A, shape=(KS_SAMPLES,))
        assert z.dtype == jnp.float64
        z = np.asarray(z)
    assert np.all(np.abs(z) <= A)
    assert stats.kstest(z, lambda x: clap.cdf(x, f, lam, A)).pvalue > KS_MIN_P


def test_sample_with_per_element_inputs():
    f = np.array([-1.0, -0.2, 0.5, 1.0], dtype=np.float32)
    z = np.asarray(clap.sample(jax.random.key(3), f, 0.3, 1.0, shape=(KS_SAMPLES, 4)), dtype=np.float64)
    for k in range(4):
        assert stats.kstest(z[:, k], lambda x: clap.cdf(x, f[k], 0.3, 1.0)).pvalue > KS_MIN_P


def test_transform_is_the_rotated_inverse_cdf_and_hits_the_ends():
    """F(T(U)) = (p_L − U) mod 1 (on the circle) on a dense float64 grid; U at p_L gives the ends ±A."""
    with float64():
        for f, lam, A in [(0.3, 0.5, 1.0), (1.0, 0.05, 1.0), (-1.0, 2.0, 1.0), (0.2, 1e4, 1.0), (0.0, 1e-3, 2.0)]:
            w_left, w_right = (float(w) for w in clap._half_masses(f, lam, A))
            p_left = w_left / (w_left + w_right)
            near = [np.nextafter(p_left, 0.0), p_left, np.nextafter(p_left, 1.0)]
            u = np.concatenate([np.linspace(0.0, 1.0, 4001)[:-1], near])
            u = u[(u >= 0.0) & (u < 1.0)]
            z = np.asarray(clap._transform(jnp.asarray(u), f, lam, A))
            assert np.all(np.abs(z) <= A)
            gap = np.abs(np.asarray(clap.cdf(z, f, lam, A)) - np.mod(p_left - u, 1.0))
            np.testing.assert_array_less(np.minimum(gap, 1.0 - gap), 1e-12)
            tails = min(np.exp(-(A + f) / lam), np.exp(-(A - f) / lam))
            if tails > 1e-3:  # both ends carry mass: the rotation's seam at p_L maps to ±A
                seam = np.asarray(clap._transform(jnp.asarray(near), f, lam, A))
                np.testing.assert_allclose(np.abs(seam), A, rtol=1e-9)
            start = float(clap._transform(jnp.asarray(0.0), f, lam, A))
            assert start == pytest.approx(f if p_left > 0 else A, rel=1e-12)


@pytest.mark.parametrize("f, lam", [(1.0, 1e-30), (-1.0, 1e-30), (1.0, 1e30), (0.0, 1e30), (-1.0, 1e-3)])
def test_sample_extremes_stay_in_range_without_nan(f, lam):
    z = np.asarray(clap.sample(jax.random.key(5), f, lam, 1.0, shape=(100_000,)))
    assert np.all(np.isfinite(z)) and np.all(np.abs(z) <= 1.0)
    if lam > 1.0:  # nearly uniform: both ends are approached
        assert z.min() < -0.999 and z.max() > 0.999
    if lam < 1e-20:  # a point mass at f up to rounding
        np.testing.assert_allclose(z, f, atol=1e-6)


def test_sample_dtype_follows_inputs():
    key = jax.random.key(0)
    assert clap.sample(key, 0.0, 1.0, 1.0, shape=(8,)).dtype == jnp.float32
    assert clap.sample(key, jnp.zeros(8, jnp.bfloat16), 1.0, 1.0).dtype == jnp.bfloat16
    assert clap.sample(key, 0.0, 1.0, 1.0, shape=(8,), dtype=jnp.float16).dtype == jnp.float16
    with float64():
        assert clap.sample(key, 0.0, 1.0, 1.0, shape=(8,)).dtype == jnp.float64


def test_sample_shapes_broadcast():
    key = jax.random.key(0)
    f = np.zeros((3, 1))
    assert clap.sample(key, f, np.ones(4), 1.0).shape == (3, 4)
    assert clap.sample(key, f, np.ones(4), 1.0, shape=(2, 3, 4)).shape == (2, 3, 4)
    assert clap.sample(key, 0.0, 1.0, 1.0, shape=7).shape == (7,)


def test_sample_under_jit_and_vmap():
    keys = jax.random.split(jax.random.key(2), 4)
    f = jnp.linspace(-1.0, 1.0, 4)
    jitted = jax.jit(lambda k, x: clap.sample(k, x, 0.5, 1.0, shape=(1000,)))
    out = jax.vmap(jitted)(keys, f)
    assert out.shape == (4, 1000) and out.dtype == jnp.float32
    assert bool(jnp.all(jnp.abs(out) <= 1.0))
    np.testing.assert_array_equal(out[1], clap.sample(keys[1], float(f[1]), 0.5, 1.0, shape=(1000,)))


# ------------------------------------------------------------------------------------------------
# privacy: Theorem 1, Lemma 4, echo probabilities
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("epsilon, clip, A", [(0.01, 1.0, 1.0), (0.5, 0.1, 0.1), (1.0, 1.0, 3.0), (5.0, 2.0, 2.5),
                                              (20.0, 1.0, 1.0)])
def test_theorem1_worst_log_ratio_is_epsilon(epsilon, clip, A):
    got = float(clap.worst_log_ratio(epsilon, clip, A=A))
    assert got <= epsilon * (1 + 1e-13)
    assert got >= epsilon * (1 - 1e-13)  # attained at f = C, f' = −C, z = A
    # independent check: random triples (z, f, f') never exceed ε
    rng = np.random.default_rng(0)
    z, f, fp = rng.uniform(-A, A, 10**5), rng.uniform(-clip, clip, 10**5), rng.uniform(-clip, clip, 10**5)
    lam = 2 * clip / epsilon
    assert np.max(np_log_density(z, f, lam, A) - np_log_density(z, fp, lam, A)) <= epsilon * (1 + 1e-13)


def test_worst_log_ratio_broadcasts_and_default_a_is_clip():
    out = clap.worst_log_ratio(np.array([0.1, 1.0, 4.0]), 1.0, grid=33)
    np.testing.assert_allclose(out, [0.1, 1.0, 4.0], rtol=1e-13)
    assert out.shape == (3,)


BUDGET_PAIRS = [(1.0, 1.0), (0.5, 2.0), (2.0, 0.5), (0.1, 5.0), (5.0, 0.1), (1.0, 3.0), (0.3, 0.9)]


@pytest.mark.parametrize("eps_i, eps_j", BUDGET_PAIRS)
def test_lemma4_closed_form_matches_direct_formula_and_alpha_form_at_a_equal_c(eps_i, eps_j):
    direct = np.log(eps_i / eps_j * (1 - np.exp(-eps_j)) / (1 - np.exp(-eps_i)) * np.exp(max(eps_i, eps_j)))
    closed = float(echo.neighbor_divergence(eps_i, eps_j, clip=0.3))
    assert closed == pytest.approx(direct, rel=1e-14)
    assert float(echo.neighbor_divergence(eps_i, eps_j, clip=0.3, A=0.3)) == pytest.approx(closed, rel=1e-14)


@pytest.mark.parametrize("eps_i, eps_j", BUDGET_PAIRS)
@pytest.mark.parametrize("A", [1.0, 1.7, 4.0])
def test_lemma4_bounds_the_true_density_ratio(eps_i, eps_j, A):
    bound = float(echo.neighbor_divergence(eps_i, eps_j, clip=1.0, A=A))
    # direct α-form as printed in Lemma 4
    s = lambda e: 1 - 0.5 * np.exp(e * (-A + 1) / 2) - 0.5 * np.exp(e * (-A - 1) / 2)
    direct = np.log(s(eps_j) / s(eps_i) * eps_i / eps_j * np.exp((eps_i + eps_j) / 2 + A * abs(eps_i - eps_j) / 2))
    assert bound == pytest.approx(direct, rel=1e-13)
    true = sup_log_ratio(eps_i, eps_j, 1.0, A)
    assert true <= bound * (1 + 1e-13)
    if A == 1.0 and eps_i <= eps_j:  # tight for A = C in this direction
        assert true == pytest.approx(bound, rel=1e-12)


def test_echo_probabilities_match_formula_divergence_and_density_ratios():
    eps = np.array([0.05, 0.3, 1.0, 1.0, 2.5, 6.0])
    p = echo.echo_probabilities(eps)
    np.testing.assert_allclose(p, echo_matrix(eps), rtol=1e-13)
    np.testing.assert_allclose(p, np.exp(-echo.neighbor_divergence(eps[None, :], eps[:, None])), rtol=1e-13)
    # p_ij ≤ inf_{z, f, f'} μ_i(z | f)/μ_j(z | f'): user i's output contains user j's echo
    for i in range(eps.size):
        for j in range(eps.size):
            inf_ratio = -sup_log_ratio(eps[j], eps[i], 1.0, 1.0, grid=201)
            assert np.log(p[i, j]) <= inf_ratio + 1e-12


def test_echo_probabilities_row_sums_are_apes_echo_sum():
    rng = np.random.default_rng(4)
    eps = rng.uniform(0.05, 3.0, 300)
    p = echo.echo_probabilities(eps)
    rows = p.sum(axis=1)
    n = eps.size
    for target in (0, 17, n - 1):
        expected = (rows.sum() - rows[target]) / n
        assert float(bounds.apes_echo_sum(eps, target=target)) == pytest.approx(expected, rel=1e-12)
    assert float(bounds.apes_echo_sum(eps)) == pytest.approx((rows.sum() - rows.max()) / n, rel=1e-12)


def test_echo_probabilities_batch():
    eps = np.array([[0.5, 1.0, 2.0], [1.0, 1.0, 1.0]])
    p = echo.echo_probabilities(eps)
    assert p.shape == (2, 3, 3)
    np.testing.assert_allclose(p[1], np.exp(-1.0), rtol=1e-15)


# ------------------------------------------------------------------------------------------------
# calibration
# ------------------------------------------------------------------------------------------------


def exact_mixture_mean(g, eps, clip):
    lam = 2 * clip / np.asarray(eps)
    return np.mean(eq1_mean(np.asarray(g)[..., None], lam, clip), axis=-1)


def check_recovery(got, g, m, clip, mixture_mean):
    """Interior (|g| ≤ C(1 − 1e-4)): forward error ≤ 1e-10·C. Everywhere, ±C included: the residual M(ĝ) − m at
    rounding level and a forward error ≤ 1e-7·C: the mixture mean has zero slope at ±C, so an m rounded by
    δm fixes g only to √(δm/|M''|) ≈ √ulp·C there (see calibrate's docstring)."""
    interior = np.abs(g) <= clip * (1 - 1e-4)
    np.testing.assert_allclose(got[interior], g[interior], rtol=0, atol=1e-10 * clip)
    np.testing.assert_allclose(got, g, rtol=0, atol=1e-7 * clip)
    # atol: Eq. 1 as printed cancels to an absolute error of a few ulp(C) near g = 0
    np.testing.assert_allclose(mixture_mean(got), m, rtol=1e-12, atol=1e-15 * clip)


def test_calibrate_recovers_g_from_exact_mixture_means():
    rng = np.random.default_rng(0)
    eps = np.concatenate([rng.uniform(0.05, 10.0, 400), np.full(100, 1.0)])  # duplicates are grouped
    clip = 0.5
    g = np.concatenate([rng.uniform(-clip, clip, 2000), [-clip, 0.0, clip, 1e-9, -0.4999999]])
    m = exact_mixture_mean(g, eps, clip)  # Eq. 1 as printed, numpy
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # m at g = ±C may exceed M(±C) by rounding
        got = analyzer.calibrate(m, eps, clip)
    check_recovery(got, g, m, clip, lambda x: exact_mixture_mean(x, eps, clip))


def test_calibrate_extreme_budgets_against_exact_mean():
    # ε from 1e-3 (λ = 2000 C) to 1e3 (λ = 0.002 C): M from the closed-form mean (quadrature-tested above),
    # where Eq. 1 as printed would lose ~(λ/C)² ulp.
    eps = np.geomspace(1e-3, 1e3, 50)
    lam = clap.local_scale(eps, 1.0)
    mixture_mean = lambda x: np.mean(clap.mean(x[:, None], lam[None, :], 1.0), axis=1)
    g = np.concatenate([np.linspace(-1.0, 1.0, 401), 1.0 - np.geomspace(1e-8, 1e-1, 30)])
    m = mixture_mean(g)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        got = analyzer.calibrate(m, eps, 1.0)
    check_recovery(got, g, m, 1.0, mixture_mean)


def test_calibrate_interpolant_matches_exact_mixture_everywhere():
    eps = np.geomspace(1e-2, 3e2, 40)
    with float64():
        coeffs, breaks, _ = analyzer._mixture_inverse(eps, 1.0)
        rng = np.random.default_rng(1)
        for k in range(coeffs.shape[0]):
            x = rng.uniform(-1, 1, 20)
            g = 0.5 * (breaks[k] + breaks[k + 1]) + 0.5 * (breaks[k + 1] - breaks[k]) * x
            h, _ = analyzer._chebyshev(jnp.asarray(coeffs[k])[None, :], jnp.asarray(x))
            exact = np.mean(clap.mean(g[:, None], 2.0 / eps[None, :], 1.0), axis=1)
            np.testing.assert_allclose(g * np.asarray(h), exact, rtol=1e-14, atol=1e-300)


def test_calibrate_is_odd_shape_preserving_and_accepts_float32():
    eps = np.array([0.3, 1.0, 2.0, 8.0])
    m = np.linspace(-0.3, 0.3, 24).reshape(2, 3, 4)
    got = analyzer.calibrate(m, eps, 1.0)
    assert got.shape == (2, 3, 4) and got.dtype == np.float64
    np.testing.assert_array_equal(analyzer.calibrate(-m, eps, 1.0), -got)
    m32 = m.astype(np.float32)
    np.testing.assert_array_equal(analyzer.calibrate(m32, eps, 1.0), analyzer.calibrate(m32.astype(np.float64), eps, 1.0))
    np.testing.assert_allclose(exact_mixture_mean(analyzer.calibrate(m32, eps, 1.0), eps, 1.0), m32, rtol=1e-13)


def test_calibrate_clips_outside_the_attainable_range_with_one_warning():
    eps = np.array([0.5, 1.0, 4.0])
    top = float(exact_mixture_mean(1.0, eps, 1.0))
    m = np.array([0.0, 0.5 * top, top + 0.01, -top - 0.01, 10.0, -0.2])
    with pytest.warns(RuntimeWarning, match="3 of 6 dimensions") as record:
        got = analyzer.calibrate(m, eps, 1.0)
    assert len(record) == 1
    assert np.all(np.isfinite(got))
    np.testing.assert_array_equal(got[[2, 3, 4]], [1.0, -1.0, 1.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        analyzer.calibrate(m[[0, 1, 5]], eps, 1.0)  # nothing clipped: no warning


def test_calibrate_traced_observed_mean_matches_concrete():
    eps = np.array([0.5, 1.0, 4.0])
    m = np.array([-0.2, 0.0, 0.1])
    traced = jax.jit(lambda x: analyzer.calibrate(x, eps, 1.0))(jnp.asarray(m, jnp.float32))
    np.testing.assert_allclose(np.asarray(traced), analyzer.calibrate(m.astype(np.float32), eps, 1.0), rtol=1e-15)


def test_calibrate_million_dimensions_ten_thousand_budgets():
    # the benchmark's scale (timings live in bench/mechanisms.py): bounded, finite and increasing in m
    rng = np.random.default_rng(0)
    eps = rng.uniform(0.05, 10.0, 10_000)
    m = np.sort(rng.uniform(-0.5, 0.5, 1_000_000)).astype(np.float32)
    g = analyzer.calibrate(m, eps, 1.0)
    assert np.all(np.abs(g) <= 1.0) and np.all(np.isfinite(g))
    assert np.all(np.diff(g) >= 0)


# ------------------------------------------------------------------------------------------------
# S-APES post-sparsification
# ------------------------------------------------------------------------------------------------


def test_sparsify_keeps_top_b_and_pads_with_fresh_dummies():
    d, b, eps, clip = 50, 7, 1.0, 1.0
    values = clap.sample(jax.random.key(7), jnp.linspace(-0.5, 0.5, d), clap.local_scale(eps, clip), clip)
    out = np.asarray(analyzer.sparsify(jax.random.key(8), values, eps, clip, b))
    values = np.asarray(values)
    top = np.argsort(-np.abs(values), kind="stable")[:b]
    rest = np.setdiff1d(np.arange(d), top)
    np.testing.assert_array_equal(out[top], values[top])
    assert np.all(out[rest] != values[rest])
    assert out.dtype == np.float32 and np.all(np.abs(out) <= clip)


def test_sparsify_dummies_follow_clip_laplace_at_zero():
    d, b, eps, clip = KS_SAMPLES + 10, 10, 0.7, 0.3
    values = jnp.full((d,), 0.01, jnp.float32).at[:b].set(0.29)  # the first b are the largest
    out = np.asarray(analyzer.sparsify(jax.random.key(9), values, eps, clip, b), dtype=np.float64)
    np.testing.assert_array_equal(out[:b], np.float32(0.29))
    dummies = out[b:]
    lam = float(clap.local_scale(eps, clip))
    assert stats.kstest(dummies, lambda x: clap.cdf(x, 0.0, lam, clip)).pvalue > KS_MIN_P


def test_sparsify_vmaps_over_users_and_batches():
    n, d, b = 5, 30, 4
    keys = jax.random.split(jax.random.key(0), n)
    values = jax.random.uniform(jax.random.key(1), (n, d), minval=-1.0, maxval=1.0)
    eps = jnp.linspace(0.5, 2.0, n)
    mapped = jax.vmap(lambda k, v, e: analyzer.sparsify(k, v, e, 1.0, b))(keys, values, eps)
    for u in range(n):
        np.testing.assert_array_equal(mapped[u], analyzer.sparsify(keys[u], values[u], float(eps[u]), 1.0, b))
    batched = np.asarray(analyzer.sparsify(jax.random.key(3), values, eps, 1.0, b))
    assert batched.shape == (n, d)
    for u in range(n):
        top = np.argsort(-np.abs(np.asarray(values[u])))[:b]
        np.testing.assert_array_equal(batched[u, top], np.asarray(values[u])[top])
    assert np.sum(batched == np.asarray(values)) == n * b


def test_sparsify_accepts_samples_clamped_to_clip_in_float32():
    clip = 0.3  # float32(0.3) > 0.3: inputs clipped or samples clamped to the float32 bound are valid
    clap.sample(jax.random.key(4), jnp.full(64, clip), 1e-3, clip)  # f = float32(C) is accepted
    values = jnp.linspace(-clip, clip, 64, dtype=jnp.float32)
    assert bool(values[-1] == jnp.float32(clip)) and float(values[-1]) > clip
    out = analyzer.sparsify(jax.random.key(5), values, 1.0, clip, 8)
    assert out.shape == (64,) and bool(jnp.all(jnp.abs(out) <= jnp.float32(clip)))


def test_sparsify_b_equal_d_keeps_everything():
    v = jnp.array([0.1, -0.2, 0.3])
    np.testing.assert_array_equal(analyzer.sparsify(jax.random.key(0), v, 1.0, 1.0, 3), v)


# ------------------------------------------------------------------------------------------------
# bad inputs: one ValueError per argument, naming it
# ------------------------------------------------------------------------------------------------

KEY = jax.random.key(0)

BAD_INPUTS = [
    ("lam", lambda: clap.mean(0.0, 0.0, 1.0)),
    ("lam", lambda: clap.variance(0.0, -1.0, 1.0)),
    ("lam", lambda: clap.sample(KEY, 0.0, 0.0, 1.0, shape=(3,))),
    ("A", lambda: clap.normalizer(0.0, 1.0, 0.0)),
    ("f must lie in", lambda: clap.mean(1.5, 1.0, 1.0)),
    ("f must lie in", lambda: clap.sample(KEY, np.array([0.0, -2.0]), 1.0, 1.0)),
    ("f", lambda: clap.cdf(0.0, np.nan, 1.0, 1.0)),
    ("z", lambda: clap.log_prob(np.nan, 0.0, 1.0, 1.0)),
    ("shapes do not broadcast", lambda: clap.log_prob(np.zeros(3), np.zeros(2), 1.0, 1.0)),
    ("shape", lambda: clap.sample(KEY, np.zeros(3), 1.0, 1.0, shape=(5,))),
    ("shape", lambda: clap.sample(KEY, 0.0, 1.0, 1.0, shape=(-1,))),
    ("dtype", lambda: clap.sample(KEY, 0.0, 1.0, 1.0, shape=(2,), dtype=jnp.int32)),
    ("epsilon", lambda: clap.local_scale(0.0, 1.0)),
    ("clip", lambda: clap.local_scale(1.0, -1.0)),
    ("epsilon", lambda: clap.worst_log_ratio(-1.0, 1.0)),
    ("A must be ≥ clip", lambda: clap.worst_log_ratio(1.0, 1.0, A=0.5)),
    ("grid", lambda: clap.worst_log_ratio(1.0, 1.0, grid=1)),
    ("eps_i", lambda: echo.neighbor_divergence(0.0, 1.0)),
    ("eps_j", lambda: echo.neighbor_divergence(1.0, -2.0)),
    ("A must be ≥ clip", lambda: echo.neighbor_divergence(1.0, 1.0, clip=1.0, A=0.9)),
    ("clip", lambda: echo.neighbor_divergence(1.0, 1.0, clip=0.0)),
    ("local_epsilons", lambda: echo.echo_probabilities([])),
    ("local_epsilons", lambda: echo.echo_probabilities([1.0, 0.0])),
    ("local_epsilons", lambda: echo.echo_probabilities(1.0)),
    ("local_epsilons", lambda: analyzer.calibrate([0.1], [], 1.0)),
    ("local_epsilons", lambda: analyzer.calibrate([0.1], [1.0, -1.0], 1.0)),
    ("local_epsilons", lambda: analyzer.calibrate([0.1], np.ones((2, 2)), 1.0)),
    ("clip", lambda: analyzer.calibrate([0.1], [1.0], 0.0)),
    ("clip", lambda: analyzer.calibrate([0.1], [1.0], [1.0, 2.0])),
    ("observed_mean", lambda: analyzer.calibrate([np.nan], [1.0], 1.0)),
    ("observed_mean", lambda: analyzer.calibrate([], [1.0], 1.0)),
    ("b must be an integer in", lambda: analyzer.sparsify(KEY, jnp.zeros(4), 1.0, 1.0, 0)),
    ("b must be an integer in", lambda: analyzer.sparsify(KEY, jnp.zeros(4), 1.0, 1.0, 5)),
    ("b must be an integer in", lambda: analyzer.sparsify(KEY, jnp.zeros(4), 1.0, 1.0, 2.5)),
    ("local_epsilon", lambda: analyzer.sparsify(KEY, jnp.zeros(4), 0.0, 1.0, 2)),
    ("local_epsilon", lambda: analyzer.sparsify(KEY, jnp.zeros((3, 4)), jnp.ones(2), 1.0, 2)),
    ("clip", lambda: analyzer.sparsify(KEY, jnp.zeros(4), 1.0, -1.0, 2)),
    ("values must lie in", lambda: analyzer.sparsify(KEY, jnp.array([0.0, 2.0]), 1.0, 1.0, 1)),
    ("values must have a last axis", lambda: analyzer.sparsify(KEY, 0.5, 1.0, 1.0, 1)),
]


@pytest.mark.parametrize("name, call", BAD_INPUTS, ids=[f"{k}-{name}" for k, (name, _) in enumerate(BAD_INPUTS)])
def test_bad_input_raises_value_error_naming_the_parameter(name, call):
    with pytest.raises(ValueError, match=name):
        call()


@pytest.mark.parametrize("eps, clip, match", [
    (np.array([[0.5, 1.0]]), 1.0, "local_epsilons must be a 1-D"),
    (np.array([0.5, -1.0]), 1.0, "local_epsilons"),
    (np.array([0.5, np.nan]), 1.0, "local_epsilons"),
    (np.array([0.5, 1.0]), 0.0, "clip"),
    (np.array([0.5, 1.0]), np.array([1.0, 2.0]), "clip must be a scalar"),
])
def test_calibration_table_bad_input(eps, clip, match):
    with pytest.raises(ValueError, match=match):
        analyzer.calibration_table(eps, clip)


def test_calibrate_with_table_bad_input_and_same_g_as_calibrate():
    eps = np.array([0.5, 1.0, 1.0, 4.0])
    table = analyzer.calibration_table(eps, 1.0)
    with pytest.raises(ValueError, match="observed_mean"):
        analyzer.calibrate_with_table(np.array([0.01, np.nan]), table)
    m = np.array([-0.01, 0.0, 0.004])
    np.testing.assert_array_equal(analyzer.calibrate_with_table(m, table), analyzer.calibrate(m, eps, 1.0))
