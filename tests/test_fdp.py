"""Tests for jaxpriv.fdp: mpmath oracles for δ(ε), conservative inversions, implicit gradients, trade-off
properties, float64 under the default x64-off setting, jit, and one ValueError per bad argument."""

import jax
import jax.numpy as jnp
import mpmath as mp
import numpy as np
import pytest
from scipy.stats import norm

from jaxpriv import fdp
from jaxpriv._numerics import float64

mp.mp.dps = 50


# ------------------------------------------------------------------------------------------------
# mpmath oracles
# ------------------------------------------------------------------------------------------------


def mp_delta(mu, eps):
    mu, eps = mp.mpf(float(mu)), mp.mpf(float(eps))
    return mp.ncdf(-eps / mu + mu / 2) - mp.exp(eps) * mp.ncdf(-eps / mu - mu / 2)


def mp_root(fun, lo, hi, iters=200):
    """Bisection for the sign change of a monotone ``fun`` (positive at lo) in mpmath precision."""
    lo, hi = mp.mpf(lo), mp.mpf(hi)
    for _ in range(iters):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if fun(mid) > 0 else (lo, mid)
    return hi


def mp_epsilon(mu, delta):
    log_d = mp.log(mp.mpf(float(delta)))
    # Φ⁻¹(1 − δ) < 38 for δ ≥ 1e-300, so μ²/2 + 50μ brackets the root.
    return mp_root(lambda e: mp.log(mp_delta(mu, e)) - log_d, 0, mu * mu / 2 + 50 * mu)


def mp_mu(eps, delta):
    log_d = mp.log(mp.mpf(float(delta)))
    return mp_root(lambda m: log_d - mp.log(mp_delta(m, eps)), mp.mpf("1e-300"), 200)


@pytest.fixture(autouse=True)
def x64_flag_untouched():
    """No call may flip the caller's global x64 flag (the suite runs with it off by default)."""
    before = jax.config.jax_enable_x64
    yield
    assert jax.config.jax_enable_x64 == before


# ------------------------------------------------------------------------------------------------
# gdp_delta
# ------------------------------------------------------------------------------------------------


def test_gdp_delta_is_an_upper_bound_within_1e9_of_mpmath():
    # ε ≥ μ²/2 (the erfcx branch, down to δ ≈ 1e-300) as ε = μ²/2 + tμ ...
    mus, ts = np.meshgrid([1e-3, 0.027271, 0.1, 0.5, 1.0, 3.0, 10.0, 50.0], [0, 0.01, 0.3, 1, 3, 10, 19.9, 20.1, 37])
    # ... and ε < μ²/2 (the erf branch), including μ = 1e-8 where both Φ terms are ≈ ½.
    mus_b, fs = np.meshgrid([1e-8, 1e-4, 1e-2, 0.3, 1.0, 3.0, 10.0, 37.0, 60.0], [0, 1e-6, 0.1, 0.5, 0.99, 1 - 1e-6])
    gspa = [0.0989, 0.0989 * (1 + 1e-3)]
    eps = np.concatenate([(ts * mus + mus**2 / 2).ravel(), (fs * mus_b**2 / 2).ravel(), gspa])
    mus = np.concatenate([mus.ravel(), mus_b.ravel(), [0.027271, 0.027271]])
    got = np.asarray(fdp.gdp_delta(mus, eps))
    assert got.dtype == np.float64
    for mu, e, d in zip(mus, eps, got):
        ref = mp_delta(mu, e)
        rel = float(mp.mpf(float(d)) / ref - 1)
        assert rel >= 0, (mu, e)  # rounded up: never below the exact δ
        assert rel <= 1e-9, (mu, e, rel)


def test_gdp_delta_gspa_reference_point():
    # MATH §3.3: uniform GSPA μ = 0.027271 gives ε(δ = 1e-6) ≈ 0.0989.
    assert float(fdp.gdp_delta(0.027271, 0.0989)) == pytest.approx(float(mp_delta(0.027271, 0.0989)), rel=1e-12)
    assert round(float(fdp.gdp_epsilon(0.027271, 1e-6)), 4) == 0.0989


def test_gdp_delta_extremes_never_negative_or_nan():
    mu = np.array([1e-3, 1.0, 50.0, 1e4])[:, None]
    eps = np.array([0.0, 1e-12, 1.0, 40.0, 1250.0, 3200.0, 1e6, 1e12])[None, :]
    d = np.asarray(fdp.gdp_delta(mu, eps))
    assert np.all(np.isfinite(d)) and np.all((d >= 0) & (d <= 1))  # μ = 1e4: δ rounds to 1
    assert np.all(np.diff(d, axis=1) <= 0)  # decreasing in ε
    assert np.all(np.diff(d, axis=0) >= 0)  # increasing in μ
    # Tiny δ is kept (log space), not cancelled to 0: μ = 1, ε = 37.5 has δ ≈ 1.5e-301.
    assert float(fdp.gdp_delta(1.0, 37.5)) == pytest.approx(float(mp_delta(1.0, 37.5)), rel=1e-9)
    assert float(fdp.gdp_delta(50.0, 2250.0)) == pytest.approx(float(mp_delta(50.0, 2250.0)), rel=1e-9)


@pytest.mark.parametrize("mu, eps", [(0.7, 1.3), (3.0, 1.0)])  # ε ≥ μ²/2 and ε < μ²/2 branches
def test_gdp_delta_gradient_matches_closed_form_partials(mu, eps):
    with float64():
        dmu, deps = jax.grad(fdp.gdp_delta, argnums=(0, 1))(mu, eps)
    assert float(dmu) == pytest.approx(norm.pdf(mu / 2 - eps / mu), rel=1e-10)
    assert float(deps) == pytest.approx(-np.exp(eps) * norm.cdf(-eps / mu - mu / 2), rel=1e-10)


# ------------------------------------------------------------------------------------------------
# gdp_epsilon / gdp_mu
# ------------------------------------------------------------------------------------------------

MU_GRID = np.array([1e-3, 0.027271, 0.3, 1.0, 5.0, 50.0])
DELTA_GRID = np.array([1e-300, 1e-100, 1e-12, 1e-6, 1e-2, 0.3, 0.9])


def test_gdp_epsilon_conservative_and_tight_against_mpmath():
    mu, delta = np.meshgrid(MU_GRID, DELTA_GRID)
    eps = np.asarray(fdp.gdp_epsilon(mu, delta))
    assert eps.shape == mu.shape and eps.dtype == np.float64
    for m, d, e in zip(mu.ravel(), delta.ravel(), eps.ravel()):
        assert mp_delta(m, e) <= d, (m, d)  # exact δ at the returned ε meets the target
        if e > 0:
            root = mp_epsilon(m, d)
            assert root <= e <= root * (1 + 1e-9), (m, d, float(e / root - 1))
        else:
            assert mp_delta(m, 0) <= d


def test_tiny_mu_stays_conservative():
    # μ = 1e-8: the erfcx bracket cancels by ~1/μ, so the bound is looser (documented ≲ 3e-13/μ) but safe.
    for mu, delta in [(1e-8, 1e-9), (1e-8, 3.9e-9), (1e-6, 1e-7)]:
        eps = float(fdp.gdp_epsilon(mu, delta))
        assert mp_delta(mu, eps) <= delta
        assert eps <= mp_epsilon(mu, delta) * (1 + 1e-4)
    assert float(fdp.gdp_mu(0.0, 1e-300)) == pytest.approx(np.sqrt(2 * np.pi) * 1e-300, rel=1e-9)


def test_gdp_epsilon_consistent_with_gdp_delta():
    mu, delta = np.meshgrid(MU_GRID, DELTA_GRID)
    eps = np.asarray(fdp.gdp_epsilon(mu, delta))
    assert np.all(np.asarray(fdp.gdp_delta(mu, eps)) <= delta)  # same bits as the solver's predicate
    # Tight: 1e-9 less ε already exceeds the target (where ε > 0 and δ(ε) is not ill-conditioned).
    tight = (eps > 0) & (delta < 0.5)
    below = np.asarray(fdp.gdp_delta(mu, eps * (1 - 1e-9)))
    assert np.all(below[tight] > delta[tight])
    # δ(0) ≤ target ⇔ ε = 0.
    assert np.array_equal(eps == 0, np.asarray(fdp.gdp_delta(mu, 0.0)) <= delta)


def test_gdp_mu_conservative_tight_and_round_trips():
    eps, delta = np.meshgrid([0.0, 0.1, 1.0, 3.0, 10.0], [1e-12, 1e-5, 1e-2, 0.5])
    mu = np.asarray(fdp.gdp_mu(eps, delta))
    assert mu.shape == eps.shape and mu.dtype == np.float64 and np.all(mu > 0)
    assert np.all(np.asarray(fdp.gdp_delta(mu, eps)) <= delta)
    assert np.all(np.asarray(fdp.gdp_delta(mu * (1 + 1e-9), eps)) > delta)
    for e, d, m in zip(eps.ravel()[::3], delta.ravel()[::3], mu.ravel()[::3]):
        assert mp_delta(m, e) <= d
        assert float(m) == pytest.approx(float(mp_mu(e, d)), rel=1e-9)
    # Round trip μ → ε: gdp_epsilon(gdp_mu(ε, δ), δ) returns ε (ε > 0).
    back = np.asarray(fdp.gdp_epsilon(mu, delta))
    np.testing.assert_allclose(back[eps > 0], eps[eps > 0], rtol=1e-9)


def test_monotonicity():
    mus = np.geomspace(1e-2, 20, 25)
    deltas = np.geomspace(1e-15, 0.1, 25)
    assert np.all(np.diff(np.asarray(fdp.gdp_epsilon(mus, 1e-6))) > 0)
    assert np.all(np.diff(np.asarray(fdp.gdp_epsilon(1.0, deltas))) < 0)
    eps = np.linspace(0.0, 8.0, 25)
    assert np.all(np.diff(np.asarray(fdp.gdp_mu(eps, 1e-6))) > 0)
    assert np.all(np.diff(np.asarray(fdp.gdp_mu(1.0, deltas))) > 0)


def test_broadcasting_and_shapes():
    assert fdp.gdp_epsilon(1.0, 1e-5).shape == ()
    assert fdp.gdp_epsilon(np.ones((3, 1)), np.full(4, 1e-5)).shape == (3, 4)
    assert fdp.gdp_mu(np.ones((2, 1, 1)), np.full((5,), 1e-5)).shape == (2, 1, 5)
    assert fdp.gdp_delta([0.5, 1.0], 1.0).shape == (2,)
    assert fdp.gaussian_tradeoff([[0.5], [1.0]], [0.1, 0.2, 0.3]).shape == (2, 3)
    row = np.asarray(fdp.gdp_epsilon(np.array([0.5, 1.0, 2.0]), 1e-5))
    np.testing.assert_array_equal(row, [float(fdp.gdp_epsilon(m, 1e-5)) for m in (0.5, 1.0, 2.0)])


# ------------------------------------------------------------------------------------------------
# gradients (implicit function theorem) vs central differences
# ------------------------------------------------------------------------------------------------


def central_difference(fun, x, rel=1e-6):
    h = rel * x
    return (float(fun(x + h)) - float(fun(x - h))) / (2 * h)


@pytest.mark.parametrize("mu, delta", [(0.5, 1e-5), (0.027271, 1e-6), (3.0, 1e-10), (1.0, 0.2)])
def test_gdp_epsilon_gradients(mu, delta):
    with float64():
        dmu, ddelta = jax.grad(fdp.gdp_epsilon, argnums=(0, 1))(mu, delta)
    assert float(dmu) == pytest.approx(central_difference(lambda m: fdp.gdp_epsilon(m, delta), mu), rel=1e-6)
    assert float(ddelta) == pytest.approx(central_difference(lambda d: fdp.gdp_epsilon(mu, d), delta), rel=1e-6)


@pytest.mark.parametrize("eps, delta", [(1.0, 1e-5), (0.0, 1e-3), (8.0, 1e-10), (0.5, 0.3)])
def test_gdp_mu_gradients(eps, delta):
    with float64():
        deps, ddelta = jax.grad(fdp.gdp_mu, argnums=(0, 1))(eps, delta)
    if eps > 0:
        assert float(deps) == pytest.approx(central_difference(lambda e: fdp.gdp_mu(e, delta), eps), rel=1e-6)
    else:  # one-sided at the boundary ε = 0
        h = 1e-9
        forward = (float(fdp.gdp_mu(h, delta)) - float(fdp.gdp_mu(0.0, delta))) / h
        assert float(deps) == pytest.approx(forward, rel=1e-6)
    assert float(ddelta) == pytest.approx(central_difference(lambda d: fdp.gdp_mu(eps, d), delta), rel=1e-6)


def test_gradients_vmap_and_clamped_region():
    with float64():
        # ε = 0 region (δ(0) ≤ target): ε is constant there, so its gradient is 0, not NaN.
        assert jax.grad(fdp.gdp_epsilon, argnums=(0, 1))(0.1, 0.5) == (0.0, 0.0)
        jac = np.asarray(jax.jacfwd(fdp.gdp_epsilon)(jnp.array([0.5, 1.0]), 1e-5))
        grads = np.asarray(jax.vmap(jax.grad(fdp.gdp_epsilon))(jnp.array([0.5, 1.0]), jnp.array([1e-5, 1e-5])))
    np.testing.assert_allclose(np.diag(jac), grads, rtol=1e-12)
    assert jac[0, 1] == 0 and jac[1, 0] == 0


# ------------------------------------------------------------------------------------------------
# float64 with the global flag off; jit
# ------------------------------------------------------------------------------------------------


@jax.enable_x64(False)
def test_results_are_float64_with_x64_off():
    assert not jax.config.jax_enable_x64
    outs = [
        fdp.gaussian_tradeoff(1.0, 0.3),
        fdp.gdp_delta(1.0, 1.0),
        fdp.gdp_epsilon(1.0, 1e-5),
        fdp.gdp_mu(1.0, 1e-5),
        fdp.compose_gdp([0.1, 0.2]),
        fdp.group_gdp(0.1, 2),
        fdp.eps_delta_tradeoff(1.0, 1e-5, 0.3),
        fdp.chain_tradeoffs(lambda a: fdp.gaussian_tradeoff(1.0, a), lambda a: fdp.gaussian_tradeoff(1.0, a))(0.3),
        fdp.dpsgd_mu_clt(0.01, 1.0, 100),
    ]
    assert all(o.dtype == jnp.float64 for o in outs)
    # 1e-300 survives: float32 would flush it to 0.
    assert float(fdp.gdp_epsilon(1.0, 1e-300)) == pytest.approx(float(mp_epsilon(1.0, 1e-300)), rel=1e-9)


@jax.enable_x64(False)
def test_under_jit_and_grad_with_x64_off():
    # Traced inputs are float32 here (the caller's setting); the computation is still float64.
    got = jax.jit(fdp.gdp_epsilon)(0.5, 1e-5)
    assert got.dtype == jnp.float64
    assert float(got) == pytest.approx(float(fdp.gdp_epsilon(0.5, 1e-5)), rel=1e-6)
    assert float(jax.jit(fdp.gdp_mu)(1.0, 1e-5)) == pytest.approx(float(fdp.gdp_mu(1.0, 1e-5)), rel=1e-6)
    assert float(jax.jit(fdp.gdp_delta)(1.0, 1.0)) == pytest.approx(float(fdp.gdp_delta(1.0, 1.0)), rel=1e-6)
    g = jax.grad(fdp.gdp_epsilon)(0.5, 1e-5)
    assert float(g) == pytest.approx(central_difference(lambda m: fdp.gdp_epsilon(m, 1e-5), 0.5), rel=1e-5)


def test_jit_under_float64_matches_eager_exactly():
    with float64():
        mu, delta = jnp.array([0.3, 1.0, 7.0]), jnp.array([1e-8, 1e-5, 1e-2])
        np.testing.assert_array_equal(jax.jit(fdp.gdp_epsilon)(mu, delta), fdp.gdp_epsilon(mu, delta))
        np.testing.assert_array_equal(jax.jit(fdp.gdp_mu)(mu, delta), fdp.gdp_mu(mu, delta))


# ------------------------------------------------------------------------------------------------
# trade-off functions
# ------------------------------------------------------------------------------------------------

ALPHAS = np.linspace(0.0, 1.0, 201)


@pytest.mark.parametrize("mu", [0.1, 1.0, 3.0])
def test_gaussian_tradeoff_is_symmetric_convex_decreasing(mu):
    g = np.asarray(fdp.gaussian_tradeoff(mu, ALPHAS))
    assert g[0] == 1.0 and g[-1] == 0.0
    assert np.all(np.diff(g) <= 0)
    assert np.all(np.diff(g, 2) >= -1e-12)  # convex
    assert np.all(g <= 1 - ALPHAS + 1e-15)  # below the no-privacy line
    inner = ALPHAS[1:-1]
    np.testing.assert_allclose(fdp.gaussian_tradeoff(mu, fdp.gaussian_tradeoff(mu, inner)), inner, atol=1e-12)
    np.testing.assert_allclose(g, norm.cdf(norm.ppf(1 - ALPHAS) - mu), atol=1e-14)


def test_gaussian_tradeoff_mu_zero_and_tiny_alpha():
    np.testing.assert_allclose(fdp.gaussian_tradeoff(0.0, ALPHAS), 1 - ALPHAS, atol=1e-15)
    # Φ⁻¹(1 − α) for α = 1e-20 would round 1 − α to 1; −Φ⁻¹(α) does not.
    exact = mp.ncdf(-mp.sqrt(2) * mp.erfinv(2 * mp.mpf("1e-20") - 1) - 1)  # Φ(Φ⁻¹(1 − α) − 1)
    assert float(fdp.gaussian_tradeoff(1.0, 1e-20)) == pytest.approx(float(exact), rel=1e-12)


def test_eps_delta_tradeoff_matches_formula():
    eps, delta, alpha = np.meshgrid([0.0, 0.5, 2.0], [0.0, 1e-5, 0.1], ALPHAS, indexing="ij")
    direct = np.maximum.reduce([0 * alpha, 1 - delta - np.exp(eps) * alpha, np.exp(-eps) * (1 - delta - alpha)])
    np.testing.assert_allclose(fdp.eps_delta_tradeoff(eps, delta, alpha), direct, atol=1e-15)
    np.testing.assert_allclose(fdp.eps_delta_tradeoff(0.0, 0.0, ALPHAS), 1 - ALPHAS, atol=1e-15)
    # ε beyond e^ε's float range: no inf·0 = NaN at α = 0.
    np.testing.assert_array_equal(fdp.eps_delta_tradeoff(800.0, 0.0, [0.0, 0.5]), [1.0, 0.0])


def test_gdp_dominates_its_eps_delta_conversion():
    # μ-GDP ⇔ (ε, δ(ε))-DP for all ε, so G_μ ≥ f_{ε, δ(ε)} pointwise.
    mu = 1.0
    for eps in (0.0, 0.5, 2.0):
        f = fdp.eps_delta_tradeoff(eps, fdp.gdp_delta(mu, eps), ALPHAS)
        assert np.all(np.asarray(fdp.gaussian_tradeoff(mu, ALPHAS)) >= np.asarray(f) - 1e-12)


def test_chain_tradeoffs():
    # Chaining Gaussians is exact: G_b(1 − G_a(α)) = G_{a+b}(α).
    chained = fdp.chain_tradeoffs(lambda a: fdp.gaussian_tradeoff(0.4, a), lambda a: fdp.gaussian_tradeoff(1.1, a))
    np.testing.assert_allclose(chained(ALPHAS), fdp.gaussian_tradeoff(1.5, ALPHAS), atol=1e-12)
    f = lambda a: fdp.eps_delta_tradeoff(0.5, 1e-3, a)
    g = lambda a: fdp.gaussian_tradeoff(0.7, a)
    manual = np.asarray(g(1 - np.asarray(f(ALPHAS))))
    np.testing.assert_allclose(fdp.chain_tradeoffs(f, g)(ALPHAS), manual, atol=1e-15)


def test_compose_and_group():
    assert float(fdp.compose_gdp([0.3, 0.4])) == pytest.approx(0.5, rel=1e-15)
    assert float(fdp.compose_gdp(0.7)) == pytest.approx(0.7, rel=1e-15)
    mus = np.array([[0.1, 0.2, 0.3], [1.0, 2.0, 2.0]])
    np.testing.assert_allclose(fdp.compose_gdp(mus), np.sqrt((mus**2).sum(-1)), rtol=1e-15)
    np.testing.assert_allclose(fdp.compose_gdp(mus, axis=0), np.sqrt((mus**2).sum(0)), rtol=1e-15)
    assert float(fdp.compose_gdp([1e200, 1e200])) == pytest.approx(np.sqrt(2) * 1e200, rel=1e-15)  # no overflow
    assert float(fdp.compose_gdp([0.0, 0.0])) == 0.0
    # T-fold composition of μ is √T·μ (GSPA's central guarantee after T rounds).
    assert float(fdp.compose_gdp(np.full(100, 0.027271))) == pytest.approx(0.27271, rel=1e-14)
    np.testing.assert_allclose(fdp.group_gdp(0.5, [1, 2, 3]), [0.5, 1.0, 1.5])


def test_dpsgd_mu_clt_matches_formula():
    q, sigma, steps = np.meshgrid([0.0, 0.004, 0.1, 1.0], [0.5, 1.1, 10.0], [0, 1, 1000])
    expected = q * np.sqrt(steps) * np.sqrt(np.exp(sigma**-2) - 1)
    np.testing.assert_allclose(fdp.dpsgd_mu_clt(q, sigma, steps), expected, rtol=1e-14)
    # Bu et al. (2020) MNIST example: q = 256/60000, σ = 1.1, 60 epochs → μ ≈ 1.0 (their table rounds).
    mu = float(fdp.dpsgd_mu_clt(256 / 60000, 1.1, 60 * 60000 / 256))
    assert mu == pytest.approx(256 / 60000 * np.sqrt(60 * 60000 / 256) * np.sqrt(np.expm1(1 / 1.21)), rel=1e-14)
    assert float(fdp.dpsgd_mu_clt(0.01, 1e3, 1)) == pytest.approx(0.01 * np.sqrt(np.expm1(1e-6)), rel=1e-14)
    # σ = 0.05: e^{1/σ²} = e^400 fits, σ = 1e-3: μ exceeds float64 → inf on purpose; q·T = 0 → 0, not NaN.
    assert float(fdp.dpsgd_mu_clt(0.01, 0.05, 1)) == pytest.approx(0.01 * np.exp(200.0), rel=1e-13)
    np.testing.assert_array_equal(fdp.dpsgd_mu_clt([0.01, 0.0, 0.01], 1e-3, [1, 1, 0]), [np.inf, 0.0, 0.0])


# ------------------------------------------------------------------------------------------------
# bad input: one ValueError per invalid argument, naming it
# ------------------------------------------------------------------------------------------------

f_ok = lambda a: 1 - a

BAD = [
    (fdp.gaussian_tradeoff, (-0.1, 0.5), "mu"),
    (fdp.gaussian_tradeoff, (np.nan, 0.5), "mu"),
    (fdp.gaussian_tradeoff, (1.0, 1.5), "alpha"),
    (fdp.gaussian_tradeoff, (1.0, -0.1), "alpha"),
    (fdp.gaussian_tradeoff, (1.0, []), "alpha"),
    (fdp.gaussian_tradeoff, ([1.0, 2.0], [0.1, 0.2, 0.3]), "mu"),
    (fdp.gdp_delta, (0.0, 1.0), "mu"),
    (fdp.gdp_delta, (np.inf, 1.0), "mu"),
    (fdp.gdp_delta, (1.0, -1.0), "epsilon"),
    (fdp.gdp_delta, (1.0, np.nan), "epsilon"),
    (fdp.gdp_delta, ([], 1.0), "mu"),
    (fdp.gdp_delta, (np.ones(2), np.ones(3)), "epsilon"),
    (fdp.gdp_epsilon, (-1.0, 1e-5), "mu"),
    (fdp.gdp_epsilon, (1.0, 0.0), "delta"),
    (fdp.gdp_epsilon, (1.0, 1.0), "delta"),
    (fdp.gdp_epsilon, (1.0, [1e-5, np.nan]), "delta"),
    (fdp.gdp_epsilon, (np.ones(2), np.full(3, 1e-5)), "delta"),
    (fdp.gdp_mu, (-0.5, 1e-5), "epsilon"),
    (fdp.gdp_mu, (1.0, 1.5), "delta"),
    (fdp.gdp_mu, (1.0, -1e-5), "delta"),
    (fdp.gdp_mu, ([], 1e-5), "epsilon"),
    (fdp.gdp_mu, (np.ones(2), np.full(3, 1e-5)), "delta"),
    (fdp.compose_gdp, ([0.1, -0.2],), "mus"),
    (fdp.compose_gdp, ([0.1, np.nan],), "mus"),
    (fdp.compose_gdp, ([],), "mus"),
    (fdp.group_gdp, (-1.0, 2), "mu"),
    (fdp.group_gdp, (1.0, 1.5), "k"),
    (fdp.group_gdp, (1.0, 0), "k"),
    (fdp.group_gdp, (np.ones(2), [1, 2, 3]), "k"),
    (fdp.eps_delta_tradeoff, (-1.0, 0.0, 0.5), "epsilon"),
    (fdp.eps_delta_tradeoff, (1.0, 1.5, 0.5), "delta"),
    (fdp.eps_delta_tradeoff, (1.0, 0.0, 2.0), "alpha"),
    (fdp.eps_delta_tradeoff, (1.0, 0.0, []), "alpha"),
    (fdp.eps_delta_tradeoff, (np.ones(2), 0.0, np.full(3, 0.5)), "alpha"),
    (fdp.chain_tradeoffs, (0.5, f_ok), "^f "),
    (fdp.chain_tradeoffs, (f_ok, "G_1"), "^g "),
    (fdp.dpsgd_mu_clt, (1.5, 1.0, 10), "q"),
    (fdp.dpsgd_mu_clt, (-0.1, 1.0, 10), "q"),
    (fdp.dpsgd_mu_clt, (0.1, 0.0, 10), "sigma"),
    (fdp.dpsgd_mu_clt, (0.1, -1.0, 10), "sigma"),
    (fdp.dpsgd_mu_clt, (0.1, 1.0, -1), "steps"),
    (fdp.dpsgd_mu_clt, (0.1, 1.0, np.nan), "steps"),
    (fdp.dpsgd_mu_clt, (np.full(2, 0.1), 1.0, np.ones(3)), "steps"),
]


@pytest.mark.parametrize("fun, args, name", BAD, ids=[f"{f.__name__}-{n.strip('^ ')}" for f, _, n in BAD])
def test_bad_input_raises_naming_the_parameter(fun, args, name):
    with pytest.raises(ValueError, match=name):
        fun(*args)


def test_gdp_delta_has_no_hole_where_jax_erfcx_returns_zero():
    # jax.scipy.special.erfcx is 0 in float64 for arguments ≈ 26.55–26.64 (u = ε/μ − μ/2 ≈ 37.6 here)
    mp.mp.dps = 50
    for mu, eps in [(1.0, 37.6), (2.0, 73.12)]:
        ours = float(fdp.gdp_delta(mu, eps))
        m, e = mp.mpf(mu), mp.mpf(eps)
        exact = float(mp.ncdf(-e / m + m / 2) - mp.e**e * mp.ncdf(-e / m - m / 2))
        assert np.isfinite(ours) and ours >= exact and ours == pytest.approx(exact, rel=1e-9)
