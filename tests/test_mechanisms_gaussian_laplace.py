"""Tests for jaxpriv.mechanisms.gaussian and jaxpriv.mechanisms.laplace (MATH §1.1-1.2, §4.3, §6).

Oracles: the samplers against jax.random.normal/laplace bit for bit and scipy's distributions (KS test);
log-densities and moments against scipy.stats; RDP curves against an mpmath quadrature of the Rényi
divergence and the MATH §1.2 reference values; the Gaussian (ε, δ) curve, ε(δ) and both calibrations against
an mpmath evaluation / root of Balle & Wang's Thm 8; the directed quotient against exact fractions.
One ValueError test per bad input.
"""

from fractions import Fraction

import jax
import jax.numpy as jnp
import mpmath as mp
import numpy as np
import pytest
from scipy import stats

from jaxpriv import rdp as rdp_module
from jaxpriv._numerics import float64
from jaxpriv.mechanisms import _common, gaussian, laplace

mp.mp.dps = 50
KEY = jax.random.key(0)
ORDERS = np.array([1.01, 1.5, 2.0, 3.7, 16.0, 128.0])


@pytest.fixture(autouse=True)
def x64_stays_off():
    assert not jax.config.jax_enable_x64
    yield
    assert not jax.config.jax_enable_x64


# ------------------------------------------------------------------------------------------------
# mpmath oracles
# ------------------------------------------------------------------------------------------------


def mp_gaussian_delta(sigma, eps, sens=1.0):
    """Balle & Wang 2018, Thm 8: δ(ε) = Φ(Δ/(2σ) − εσ/Δ) − e^ε Φ(−Δ/(2σ) − εσ/Δ)."""
    s, e, d = mp.mpf(sigma), mp.mpf(eps), mp.mpf(sens)
    return mp.ncdf(d / (2 * s) - e * s / d) - mp.exp(e) * mp.ncdf(-d / (2 * s) - e * s / d)


def mp_renyi_quad(logpdf_p, logpdf_q, alpha, points):
    """D_α(P‖Q) = log ∫ p^α q^{1−α} / (α − 1) by tanh-sinh quadrature split at the given points."""
    a = mp.mpf(alpha)
    integrand = lambda x: mp.exp(a * logpdf_p(x) + (1 - a) * logpdf_q(x))
    return mp.log(mp.quad(integrand, [-mp.inf] + points + [mp.inf])) / (a - 1)


# ------------------------------------------------------------------------------------------------
# samplers
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("module, draw", [(gaussian, jax.random.normal), (laplace, jax.random.laplace)])
@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16])
def test_sample_is_the_scaled_jax_draw(module, draw, dtype):
    got = module.sample(KEY, 2.5, (1000,), dtype)
    assert got.dtype == dtype and got.shape == (1000,)
    # bit for bit what a compiled `draw * scale` gives (XLA may fold the scale into the draw's constants)
    fused = jax.jit(lambda k: draw(k, (1000,), dtype) * jnp.asarray(2.5, dtype))(KEY)
    np.testing.assert_array_equal(np.asarray(got, np.float32), np.asarray(fused, np.float32))
    eager = draw(KEY, (1000,), dtype) * jnp.asarray(2.5, dtype)
    np.testing.assert_allclose(np.asarray(got, np.float32), np.asarray(eager, np.float32), rtol=2 * float(jnp.finfo(dtype).eps))


@pytest.mark.parametrize("module, draw", [(gaussian, jax.random.normal), (laplace, jax.random.laplace)])
def test_sample_float64_with_x64_off(module, draw):
    got = module.sample(KEY, 0.5, (7,), jnp.float64)
    assert got.dtype == jnp.float64
    with float64():
        np.testing.assert_allclose(np.asarray(got), np.asarray(0.5 * draw(KEY, (7,), jnp.float64)), rtol=4e-16)


@pytest.mark.parametrize("module", [gaussian, laplace])
def test_sample_per_element_scale_and_jit(module):
    scales = np.array([0.1, 1.0, 10.0], np.float32)
    got = module.sample(KEY, scales, (4, 3))
    unit = module.sample(KEY, 1.0, (4, 3))
    np.testing.assert_allclose(np.asarray(got), np.asarray(unit) * scales, rtol=1e-6)
    jitted = jax.jit(lambda k, s: module.sample(k, s, (4, 3)))(KEY, jnp.asarray(scales))
    np.testing.assert_array_equal(np.asarray(jitted), np.asarray(got))


@pytest.mark.parametrize(
    "module, scale, reference",
    [(gaussian, 1.7, stats.norm(scale=1.7)), (laplace, 0.3, stats.laplace(scale=0.3))],
)
def test_sample_distribution_ks(module, scale, reference):
    draws = np.asarray(module.sample(jax.random.key(11), scale, (50_000,)), np.float64)
    assert stats.kstest(draws, reference.cdf).pvalue > 1e-4
    # the variance within 5 standard errors: Var(s²) ≈ (μ4 − σ⁴)/n
    var = reference.var()
    se = np.sqrt((reference.moment(4) - var**2) / draws.size)
    assert abs(draws.var() - var) < 5 * se


# ------------------------------------------------------------------------------------------------
# densities and moments
# ------------------------------------------------------------------------------------------------


def test_log_prob_and_moments_against_scipy():
    x = np.linspace(-5, 5, 121)
    for s in [0.01, 1.0, 7.5]:
        np.testing.assert_allclose(gaussian.log_prob(x, s), stats.norm(scale=s).logpdf(x), rtol=1e-14)
        np.testing.assert_allclose(laplace.log_prob(x, s), stats.laplace(scale=s).logpdf(x), rtol=1e-14)
        assert gaussian.variance(s) == pytest.approx(stats.norm(scale=s).var(), rel=1e-15)
        assert laplace.variance(s) == pytest.approx(stats.laplace(scale=s).var(), rel=1e-15)
        assert gaussian.mean(s) == 0.0 and laplace.mean(s) == 0.0
    out = gaussian.log_prob(np.zeros((2, 3)), np.ones(3))
    assert out.shape == (2, 3) and out.dtype == np.float64


# ------------------------------------------------------------------------------------------------
# privacy curves
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("sigma, sens", [(1.0, 1.0), (3.0, 2.0), (0.7, 0.25)])
def test_gaussian_rdp_against_quadrature(sigma, sens):
    got = gaussian.rdp(sigma, ORDERS, sensitivity=sens)
    np.testing.assert_allclose(got, rdp_module.gaussian(sigma / sens, ORDERS), rtol=1e-15)
    s, d = mp.mpf(sigma), mp.mpf(sens)
    c = -mp.log(s * mp.sqrt(2 * mp.pi))
    p = lambda x: c - x * x / (2 * s * s)
    q = lambda x: c - (x - d) ** 2 / (2 * s * s)
    for alpha, value in zip(ORDERS[:4], got[:4]):
        oracle = mp_renyi_quad(p, q, alpha, sorted([mp.mpf(0), d, alpha * d]))
        assert value == pytest.approx(float(oracle), rel=1e-12)
        assert value >= float(oracle) * (1 - 1e-15)


@pytest.mark.parametrize("scale, sens", [(1.0, 1.0), (2.0, 2.0), (0.5, 1.0), (3.0, 0.3)])
def test_laplace_rdp_against_quadrature(scale, sens):
    got = laplace.rdp(scale, ORDERS, sensitivity=sens)
    b, d = mp.mpf(scale), mp.mpf(sens)
    c = -mp.log(2 * b)
    p = lambda x: c - abs(x) / b
    q = lambda x: c - abs(x - d) / b
    for alpha, value in zip(ORDERS, got):
        oracle = mp_renyi_quad(p, q, alpha, [mp.mpf(0), d])
        assert value == pytest.approx(float(oracle), rel=1e-11)


def test_laplace_rdp_spec_references():
    # MATH §1.2 at ε = Δ/b = 1, 1, 1, 2 and α = 2, 1.5, 10, 3 (with Δ ≠ 1 to exercise the ratio)
    got = [laplace.rdp(3.0, [a], sensitivity=3.0 * e)[0] for e, a in [(1, 2.0), (1, 1.5), (1, 10.0), (2, 3.0)]]
    np.testing.assert_allclose(got, [0.619123629999, 0.512883511295, 0.928682902097, 1.744602321198], rtol=1e-11)


def test_gaussian_delta_epsilon_mu_against_balle_wang():
    for sigma, sens in [(0.5, 1.0), (1.0, 1.0), (3.7, 2.0), (20.0, 1.0)]:
        assert gaussian.mu(sigma, sens) >= sens / sigma and gaussian.mu(sigma, sens) == pytest.approx(sens / sigma, rel=1e-15)
        for eps in [0.0, 0.1, 1.0, 4.0]:
            exact = mp_gaussian_delta(sigma, eps, sens)
            got = gaussian.delta(sigma, eps, sensitivity=sens)
            assert got >= float(exact) and got == pytest.approx(float(exact), rel=1e-9)  # rounded up
        for target in [1e-3, 1e-6, 1e-10]:
            eps = float(gaussian.epsilon(sigma, target, sensitivity=sens))
            assert mp_gaussian_delta(sigma, eps, sens) <= target  # conservative side
            root = mp.findroot(lambda e: mp_gaussian_delta(sigma, e, sens) - target, eps)
            assert eps == pytest.approx(float(root), rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("eps", [1e-3, 0.1, 0.5, 1.0])
@pytest.mark.parametrize("delta", [1e-12, 1e-5, 0.1, 0.5])
def test_classical_sigma_is_valid_and_looser_than_analytic(eps, delta):
    sens = 2.0
    classical = float(gaussian.classical_sigma(eps, delta, sensitivity=sens))
    assert classical == pytest.approx(sens * np.sqrt(2 * np.log(1.25 / delta)) / eps, rel=1e-15)
    assert mp_gaussian_delta(classical, eps, sens) <= delta  # Dwork & Roth Thm A.1 holds, ε ≤ 1 included
    assert classical >= float(gaussian.analytic_sigma(eps, delta, sensitivity=sens))


@pytest.mark.parametrize("eps, delta, sens", [(0.01, 1e-5, 1.0), (1.0, 1e-5, 1.0), (8.0, 1e-9, 3.0), (50.0, 0.2, 1.0)])
def test_analytic_sigma_against_mpmath_root(eps, delta, sens):
    sigma = float(gaussian.analytic_sigma(eps, delta, sensitivity=sens))
    assert mp_gaussian_delta(sigma, eps, sens) <= delta  # conservative
    root = mp.findroot(lambda s: mp_gaussian_delta(s, eps, sens) - delta, sigma)
    assert sigma >= root and sigma == pytest.approx(float(root), rel=1e-9)


def test_analytic_sigma_vectorised_and_differentiable():
    eps = np.array([0.5, 1.0, 2.0])
    sigmas = gaussian.analytic_sigma(eps, 1e-5)
    assert sigmas.shape == (3,) and sigmas.dtype == np.float64 and np.all(np.diff(sigmas) < 0)
    grad = float(jax.grad(lambda e: gaussian.analytic_sigma(e, 1e-5))(1.0))
    h = 1e-5
    fd = (float(gaussian.analytic_sigma(1.0 + h, 1e-5)) - float(gaussian.analytic_sigma(1.0 - h, 1e-5))) / (2 * h)
    assert grad == pytest.approx(fd, rel=1e-5)


def test_laplace_epsilon_and_scale_for_are_exact_and_tight():
    eps = np.array([0.1, 0.3, 1.0, 1.7, 1e-3, 12.0])
    scales = laplace.scale_for(eps, sensitivity=60.0)
    for e, b in zip(eps, scales):
        assert Fraction(60.0) / Fraction(b) <= Fraction(e)  # Δ/b ≤ ε exactly
        assert Fraction(60.0) / Fraction(np.nextafter(b, 0)) > Fraction(e) or Fraction(b) == Fraction(60.0) / Fraction(e)
    # the log-density ratio at shift Δ reaches ε = Δ/b (pure ε is tight)
    b, sens = 2.5, 1.5
    x = np.linspace(-10, 10, 2001)
    ratio = np.max(np.abs(laplace.log_prob(x, b) - laplace.log_prob(x - sens, b)))
    assert ratio == pytest.approx(float(laplace.epsilon(b, sensitivity=sens)), rel=1e-14)
    assert float(laplace.epsilon(10.0)) == 0.1 and float(laplace.scale_for(0.5)) == 2.0


def test_directed_quotient_brackets_the_exact_quotient():
    rng = np.random.default_rng(1)
    num = np.concatenate([np.exp(rng.normal(size=3000) * 6), np.arange(1.0, 51.0)])
    den = np.concatenate([np.exp(rng.normal(size=3000) * 6), 2.0 ** rng.integers(-8, 8, 50)])
    with float64():
        up = np.asarray(_common.directed_quotient(jnp.asarray(num), jnp.asarray(den), up=True))
        down = np.asarray(jax.jit(lambda a, b: _common.directed_quotient(a, b, up=False))(num, den))
    for a, b, u, d in zip(num, den, up, down):
        exact = Fraction(a) / Fraction(b)
        assert Fraction(d) <= exact <= Fraction(u)
        assert u == d if Fraction(u) == exact else np.nextafter(d, np.inf) == u


def test_same_results_with_x64_on():
    calls = [
        lambda: gaussian.analytic_sigma([0.5, 2.0], 1e-6, 3.0),
        lambda: gaussian.epsilon(2.0, 1e-5),
        lambda: gaussian.rdp(2.0, ORDERS, 0.5),
        lambda: laplace.rdp(2.0, ORDERS, 0.5),
        lambda: laplace.scale_for([0.1, 0.7], 3.0),
    ]
    off = [np.asarray(c()) for c in calls]
    with jax.enable_x64(True):
        on = [np.asarray(c()) for c in calls]
        sample = jax.jit(lambda k: gaussian.sample(k, 2.0, (5,), jnp.float64))(KEY)
        assert sample.dtype == jnp.float64
    for a, b in zip(off, on):
        np.testing.assert_array_equal(a, b)


def test_results_are_float64_numpy_with_x64_off():
    for value in [gaussian.rdp(1.0, [2.0]), gaussian.analytic_sigma(1.0, 1e-5), laplace.scale_for(0.3), laplace.rdp(1.0, [2.0])]:
        assert isinstance(value, np.ndarray) and value.dtype == np.float64


# ------------------------------------------------------------------------------------------------
# bad inputs: one test each, the message names the parameter
# ------------------------------------------------------------------------------------------------

BAD = [
    ("gaussian.sample sigma ≤ 0", lambda: gaussian.sample(KEY, 0.0, (3,)), "sigma"),
    ("gaussian.sample sigma NaN", lambda: gaussian.sample(KEY, np.nan, (3,)), "sigma"),
    ("gaussian.sample sigma shape", lambda: gaussian.sample(KEY, np.ones(4), (3,)), "sigma"),
    ("gaussian.sample negative shape", lambda: gaussian.sample(KEY, 1.0, (-1,)), "shape"),
    ("gaussian.sample bad shape", lambda: gaussian.sample(KEY, 1.0, "abc"), "shape"),
    ("gaussian.sample int dtype", lambda: gaussian.sample(KEY, 1.0, (3,), jnp.int32), "dtype"),
    ("gaussian.log_prob sigma ≤ 0", lambda: gaussian.log_prob(0.0, -1.0), "sigma"),
    ("gaussian.log_prob x NaN", lambda: gaussian.log_prob(np.nan, 1.0), "x"),
    ("gaussian.log_prob shapes", lambda: gaussian.log_prob(np.ones(3), np.ones(4)), "shapes"),
    ("gaussian.mean sigma ≤ 0", lambda: gaussian.mean(0.0), "sigma"),
    ("gaussian.variance sigma ≤ 0", lambda: gaussian.variance(-2.0), "sigma"),
    ("gaussian.rdp sigma ≤ 0", lambda: gaussian.rdp(0.0, [2.0]), "sigma"),
    ("gaussian.rdp sensitivity ≤ 0", lambda: gaussian.rdp(1.0, [2.0], sensitivity=0.0), "sensitivity"),
    ("gaussian.rdp orders ≤ 1", lambda: gaussian.rdp(1.0, [1.0]), "orders"),
    ("gaussian.rdp shapes", lambda: gaussian.rdp(np.ones(2), [2.0], sensitivity=np.ones(3)), "shapes"),
    ("gaussian.mu sigma ≤ 0", lambda: gaussian.mu(0.0), "sigma"),
    ("gaussian.mu sensitivity ≤ 0", lambda: gaussian.mu(1.0, -1.0), "sensitivity"),
    ("gaussian.delta epsilon < 0", lambda: gaussian.delta(1.0, -0.1), "epsilon"),
    ("gaussian.delta sigma ≤ 0", lambda: gaussian.delta(0.0, 1.0), "sigma"),
    ("gaussian.epsilon delta = 0", lambda: gaussian.epsilon(1.0, 0.0), "delta"),
    ("gaussian.epsilon delta = 1", lambda: gaussian.epsilon(1.0, 1.0), "delta"),
    ("gaussian.epsilon sigma ≤ 0", lambda: gaussian.epsilon(-1.0, 1e-5), "sigma"),
    ("gaussian.delta sensitivity ≤ 0", lambda: gaussian.delta(1.0, 1.0, sensitivity=0.0), "sensitivity"),
    ("gaussian.epsilon sensitivity ≤ 0", lambda: gaussian.epsilon(1.0, 1e-5, sensitivity=-1.0), "sensitivity"),
    ("classical_sigma epsilon > 1", lambda: gaussian.classical_sigma(1.5, 1e-5), "analytic_sigma"),
    ("classical_sigma epsilon ≤ 0", lambda: gaussian.classical_sigma(0.0, 1e-5), "epsilon"),
    ("classical_sigma delta ∉ (0,1)", lambda: gaussian.classical_sigma(0.5, 1.5), "delta"),
    ("classical_sigma sensitivity ≤ 0", lambda: gaussian.classical_sigma(0.5, 1e-5, 0.0), "sensitivity"),
    ("analytic_sigma epsilon ≤ 0", lambda: gaussian.analytic_sigma(-1.0, 1e-5), "epsilon"),
    ("analytic_sigma delta = 0", lambda: gaussian.analytic_sigma(1.0, 0.0), "delta"),
    ("analytic_sigma delta empty", lambda: gaussian.analytic_sigma(1.0, []), "delta"),
    ("analytic_sigma sensitivity ≤ 0", lambda: gaussian.analytic_sigma(1.0, 1e-5, -2.0), "sensitivity"),
    ("analytic_sigma shapes", lambda: gaussian.analytic_sigma(np.ones(2), np.full(3, 1e-5)), "shapes"),
    ("laplace.sample scale ≤ 0", lambda: laplace.sample(KEY, -1.0, (3,)), "scale"),
    ("laplace.sample scale shape", lambda: laplace.sample(KEY, np.ones((2, 2)), (2,)), "scale"),
    ("laplace.sample int dtype", lambda: laplace.sample(KEY, 1.0, (3,), "int8"), "dtype"),
    ("laplace.log_prob scale ≤ 0", lambda: laplace.log_prob(1.0, 0.0), "scale"),
    ("laplace.log_prob shapes", lambda: laplace.log_prob(np.ones(2), np.ones(5)), "shapes"),
    ("laplace.mean scale ≤ 0", lambda: laplace.mean(0.0), "scale"),
    ("laplace.variance scale inf", lambda: laplace.variance(np.inf), "scale"),
    ("laplace.rdp scale ≤ 0", lambda: laplace.rdp(0.0, [2.0]), "scale"),
    ("laplace.rdp sensitivity ≤ 0", lambda: laplace.rdp(1.0, [2.0], sensitivity=-1.0), "sensitivity"),
    ("laplace.rdp orders ≤ 1", lambda: laplace.rdp(1.0, [0.5]), "orders"),
    ("laplace.epsilon scale ≤ 0", lambda: laplace.epsilon(0.0), "scale"),
    ("laplace.epsilon sensitivity ≤ 0", lambda: laplace.epsilon(1.0, 0.0), "sensitivity"),
    ("laplace.scale_for epsilon ≤ 0", lambda: laplace.scale_for(0.0), "epsilon"),
    ("laplace.scale_for negative budgets", lambda: laplace.scale_for([0.5, -0.5]), "epsilon"),
    ("laplace.scale_for empty", lambda: laplace.scale_for([]), "epsilon"),
    ("laplace.scale_for sensitivity ≤ 0", lambda: laplace.scale_for(1.0, 0.0), "sensitivity"),
    ("laplace.scale_for shapes", lambda: laplace.scale_for(np.ones(2), np.ones(3)), "shapes"),
]


@pytest.mark.parametrize("call, name", [(c, n) for _, c, n in BAD], ids=[i for i, _, _ in BAD])
def test_bad_input(call, name):
    with pytest.raises(ValueError, match=name):
        call()


def test_float32_noise_scale_is_rounded_up_not_to_nearest():
    # 0.7 rounds *down* to float32 by nearest; the sampler must use the next float32 up (never less noise)
    key = jax.random.key(3)
    got = gaussian.sample(key, 0.7, (1000,))
    up = np.nextafter(np.float32(0.7), np.float32(np.inf))
    assert float(np.float32(0.7)) < 0.7 <= float(up)
    scaled = jax.jit(lambda k, s: jax.random.normal(k, (1000,)) * s)  # compiled like the sampler
    np.testing.assert_array_equal(np.asarray(got), np.asarray(scaled(key, up)))
    assert not np.array_equal(np.asarray(got), np.asarray(scaled(key, np.float32(0.7))))


def test_the_shared_scale_family_functions_keep_their_public_parameter_names():
    """log_prob, mean and variance are written once for both families (mechanisms/_common.scale_family); each
    module's functions still take their own parameter by name, and help() shows it."""
    import inspect

    for module, name in ((gaussian, "sigma"), (laplace, "scale")):
        assert str(inspect.signature(module.log_prob)) == f"(x, {name})"
        assert str(inspect.signature(module.mean)) == str(inspect.signature(module.variance)) == f"({name})"
        assert float(module.log_prob(x=0.5, **{name: 2.0})) == float(module.log_prob(0.5, 2.0))
        assert float(module.variance(**{name: 3.0})) == float(module.variance(3.0))
        with pytest.raises(TypeError):
            module.mean(b=1.0)
        assert module.log_prob.__module__ == module.__name__ and module.variance.__name__ == "variance"
