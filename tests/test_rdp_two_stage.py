"""rPDP-FL two-stage sampling: the RDP curve (jaxpriv.rdp.two_stage) and per-record q calibration."""

import math

import jax
import mpmath as mp
import numpy as np
import pytest
from scipy import integrate, stats

from jaxpriv import calibrate, rdp

ORDERS = np.array([1.5, 2.0, 3.0, 8.0, 32.0])


def two_stage_direct(rho_one_step, steps, lam, rounds, alpha):
    """The client-sampling formula in 50-digit arithmetic on the same per-step ρ."""
    with mp.workdps(50):
        rho = mp.mpf(float(rho_one_step)) * steps
        lam = mp.mpf(lam)
        return float(rounds * mp.log(1 - lam + lam * mp.exp((alpha - 1) * rho)) / (alpha - 1))


def test_client_rate_one_is_plain_composition():
    got = rdp.two_stage(0.02, 1.3, 4, 1.0, 25, ORDERS)
    np.testing.assert_allclose(got, 100 * rdp.subsampled_gaussian(0.02, 1.3, ORDERS), rtol=1e-12)


@pytest.mark.parametrize("q, sigma, steps, lam, rounds", [
    (0.01, 1.0, 5, 0.1, 100),     # moderate
    (1e-5, 3.0, 1, 1e-4, 10),     # λ(e^x − 1) ≈ 1e-15: needs log1p(λ·expm1(x))
    (0.5, 0.5, 50, 0.3, 2),       # (α−1)τρ in the hundreds: needs the log-sum-exp form
])
def test_matches_direct_formula(q, sigma, steps, lam, rounds):
    got = rdp.two_stage(q, sigma, steps, lam, rounds, ORDERS)
    rho = rdp.subsampled_gaussian(q, sigma, ORDERS)
    want = [two_stage_direct(r, steps, lam, rounds, a) for r, a in zip(rho, ORDERS)]
    np.testing.assert_allclose(got, want, rtol=1e-13)


def gaussian_mixture_renyi(lam, sigma, alpha, mixture_first):
    """D_α(M‖P) or D_α(P‖M) by quadrature, M = (1−λ)N(0,σ²) + λN(1,σ²), P = N(0,σ²)."""
    def integrand(z):  # in log space: the densities underflow far out
        log_p = stats.norm.logpdf(z, 0, sigma)
        log_m = np.logaddexp(math.log1p(-lam) + log_p, math.log(lam) + stats.norm.logpdf(z, 1, sigma))
        log_a, log_b = (log_m, log_p) if mixture_first else (log_p, log_m)
        return math.exp(alpha * log_a + (1 - alpha) * log_b)
    value, _ = integrate.quad(integrand, -30 * sigma, 30 * sigma + 1, points=[0.0, 0.5, 1.0], limit=400,
                              epsabs=0, epsrel=1e-11)
    return math.log(value) / (alpha - 1)


@pytest.mark.parametrize("lam", [0.05, 0.3, 0.9])
@pytest.mark.parametrize("sigma", [0.8, 2.0])
def test_bounds_both_directions_of_client_sampling(lam, sigma):
    # q = 1, τ = 1: each round is the Gaussian mechanism; client sampling mixes it with the null output.
    bound = rdp.two_stage(1.0, sigma, 1, lam, 1, [2.0, 3.0, 6.0])
    for alpha, b in zip([2.0, 3.0, 6.0], bound):
        forward = gaussian_mixture_renyi(lam, sigma, alpha, mixture_first=True)
        backward = gaussian_mixture_renyi(lam, sigma, alpha, mixture_first=False)
        assert forward <= b * (1 + 1e-9) and backward <= b * (1 + 1e-9)
    # ...and it is never below the exact subsampled-Gaussian curve of the same mixture (both directions)
    exact = rdp.subsampled_gaussian(lam, sigma, [2.0, 3.0, 6.0])
    assert np.all(bound >= exact * (1 - 1e-12))


def test_broadcasts_and_validates():
    got = rdp.two_stage(np.array([0.01, 0.02])[:, None], 1.0, 5, np.array([0.1, 0.5, 1.0]), 10, ORDERS)
    assert got.shape == (2, 3, ORDERS.size)
    assert np.all(np.diff(got, axis=1) > 0)  # more clients sampled, more privacy loss


@pytest.mark.parametrize("kwargs, name", [
    ({"q": 1.5}, "q"), ({"sigma": 0.0}, "sigma"), ({"steps": 0.5}, "steps"),
    ({"client_rate": 0.0}, "client_rate"), ({"client_rate": 1.2}, "client_rate"), ({"rounds": 0}, "rounds"),
    ({"rounds": True}, "rounds"), ({"q": False}, "q"),
    ({"orders": [1.0]}, "orders"),
])
def test_bad_input(kwargs, name):
    args = {"q": 0.01, "sigma": 1.0, "steps": 5, "client_rate": 0.5, "rounds": 10, "orders": ORDERS} | kwargs
    with pytest.raises(ValueError, match=name):
        rdp.two_stage(**args)


def test_shapes_do_not_broadcast():
    with pytest.raises(ValueError, match="broadcast"):
        rdp.two_stage(np.ones(2) * 0.01, np.ones(3), 5, 0.5, 10, ORDERS)


# ------------------------------------------------------------------------------------------------
# per-record q
# ------------------------------------------------------------------------------------------------

FL = {"sigma": 1.0, "steps": 5, "delta": 1e-5, "rounds": 50, "client_rate": 0.5}


def fl_epsilon(q):
    orders = rdp.DEFAULT_ORDERS
    return rdp.to_epsilon(rdp.two_stage(q, FL["sigma"], FL["steps"], FL["client_rate"], FL["rounds"], orders),
                          orders, FL["delta"])[0]


def test_two_stage_rate_is_exact_and_never_overspends():
    targets = np.array([0.3, 1.0, 2.0, 4.0, 8.0])
    q = calibrate.sampling_rate(targets, **FL)
    eps = fl_epsilon(q)
    assert np.all(eps <= targets)
    assert np.all(eps >= targets * (1 - 1e-8))
    np.testing.assert_allclose(calibrate.sampling_rate(targets, sigma=1.0, steps=250, delta=1e-5),
                               calibrate.sampling_rate(targets, sigma=1.0, steps=5, delta=1e-5, rounds=50,
                                                       client_rate=1.0), rtol=1e-9)


def test_table_for_many_budgets_never_overspends_and_is_within_its_tolerance():
    targets = np.random.default_rng(0).uniform(0.5, 5.0, 1000)
    q = calibrate.sampling_rate(targets, **FL, max_exact=100, table_rtol=1e-3)
    exact = calibrate.sampling_rate(targets[:40], **FL)
    assert np.all(q[:40] <= exact) and np.all(q[:40] >= exact / (1 + 1e-3) * (1 - 1e-12))
    eps = fl_epsilon(q)
    assert np.all(eps <= targets)
    # equal budgets get equal rates
    dup = calibrate.sampling_rate(np.repeat(targets[:200], 30), **FL, max_exact=100)
    assert np.all(dup.reshape(200, 30) == dup.reshape(200, 30)[:, :1])


def test_two_stage_rate_gradient_matches_finite_difference():
    with jax.enable_x64(True):
        f = lambda lam: calibrate.sampling_rate(2.0, sigma=1.0, steps=5, delta=1e-5, rounds=50, client_rate=lam)
        g = float(jax.grad(f)(0.5))
        h = 1e-5
        fd = (float(f(0.5 + h)) - float(f(0.5 - h))) / (2 * h)
    assert g == pytest.approx(fd, rel=1e-5)


@pytest.mark.parametrize("kwargs, name", [
    ({"client_rate": 0.0}, "client_rate"), ({"rounds": 0.5}, "rounds"), ({"table_rtol": 0.0}, "table_rtol"),
    ({"table_rtol": 0.5}, "table_rtol"), ({"max_exact": 0}, "max_exact"), ({"max_exact": True}, "max_exact"),
    ({"rounds": True}, "rounds"),
])
def test_rate_bad_input(kwargs, name):
    with pytest.raises(ValueError, match=name):
        calibrate.sampling_rate(1.0, **(FL | kwargs))
