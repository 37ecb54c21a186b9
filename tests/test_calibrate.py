"""Calibration: conservative, tight, vectorised, differentiable (MATH §5)."""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxpriv
from jaxpriv import calibrate

Q, T, DELTA = 0.01, 10_000.0, 1e-5
TARGETS = np.array([0.5, 1.0, 2.0, 4.0, 8.0])


def eps(q, sigma, steps, delta):
    return np.asarray(jaxpriv.dpsgd_epsilon(q, sigma, steps, delta))


def test_noise_multiplier_reference_value():
    # reference/README.md: dp_accounting (Brent, xtol 1e-6) gives 4.1258 on its upper-bound RDP; the
    # exact curve can only need less noise.
    sigma = float(calibrate.noise_multiplier(1.0, Q, T, DELTA))
    assert sigma == pytest.approx(4.1258, abs=2e-4)
    assert sigma <= 4.1258 + 1e-4


def test_noise_multiplier_is_conservative_and_tight():
    sigma = np.asarray(calibrate.noise_multiplier(TARGETS, Q, T, DELTA))
    achieved = eps(Q, sigma, T, DELTA)
    assert np.all(achieved <= TARGETS)
    assert np.all(achieved >= TARGETS * (1 - 1e-6))
    # a hair less noise overspends: the returned σ is at the root, not merely safe
    assert np.all(eps(Q, sigma * (1 - 1e-6), T, DELTA) > TARGETS)


def test_noise_multiplier_broadcasts():
    sigma = calibrate.noise_multiplier(TARGETS[:, None], np.array([0.001, 0.01, 0.1]), T, DELTA)
    assert sigma.shape == (5, 3)
    assert np.all(np.diff(np.asarray(sigma), axis=0) < 0)  # larger ε → less noise
    assert np.all(np.diff(np.asarray(sigma), axis=1) > 0)  # larger q → more noise


def test_tiny_target_is_met_through_the_total_variation_bound():
    # Below the conversion's floor, ε = 0 is still certified once δ ≥ √(1 − e^{−ρ}) (MATH §1.8).
    sigma = calibrate.noise_multiplier(1e-4, 1.0, T, DELTA)
    assert np.isfinite(sigma)
    assert eps(1.0, sigma, T, DELTA) <= 1e-4


def test_sampling_rate_is_conservative_and_tight():
    q = np.asarray(calibrate.sampling_rate(TARGETS, 1.0, T, DELTA))
    assert np.all((q > 0) & (q < 1))
    achieved = eps(q, 1.0, T, DELTA)
    assert np.all(achieved <= TARGETS)
    assert np.all(achieved >= TARGETS * (1 - 1e-6))


def test_sampling_rate_limits():
    q = np.asarray(calibrate.sampling_rate([1e3, 1e-4], [1.0, 1.0], 10.0, DELTA))
    assert q[0] == 1.0  # even full batches meet ε = 1000
    assert 0.0 < q[1] < 1e-3 and eps(q[1], 1.0, 10.0, DELTA) <= 1e-4


def test_steps_is_the_largest_integer():
    sigma = np.array([0.8, 1.1, 2.0])
    t = np.asarray(calibrate.steps(3.0, Q, sigma, DELTA))
    assert np.all(t == np.floor(t)) and np.all(t > 0)
    assert np.all(eps(Q, sigma, t, DELTA) <= 3.0)
    assert np.all(eps(Q, sigma, t + 1, DELTA) > 3.0)


def test_round_trip_between_calibrators():
    sigma = float(calibrate.noise_multiplier(2.0, Q, T, DELTA))
    # σ slightly above the root buys slightly more than T steps; at the root itself exactly T fit
    assert float(calibrate.steps(2.0, Q, sigma, DELTA)) >= T
    assert float(calibrate.sampling_rate(2.0, sigma, T, DELTA)) == pytest.approx(Q, rel=1e-6)


def _central_difference(f, x, h):
    return (f(x + h) - f(x - h)) / (2 * h)


def test_noise_multiplier_gradient_matches_finite_differences():
    # One jax.grad over all four arguments (one compilation), each checked by a central difference.
    base = (2.0, Q, T, DELTA)
    steps_fd = (1e-4, 1e-7, 2.0, 1e-9)
    with jax.enable_x64(True):
        grads = jax.grad(calibrate.noise_multiplier, argnums=(0, 1, 2, 3))(*map(jnp.float64, base))
    for i, (grad, h) in enumerate(zip(grads, steps_fd)):
        shifted = lambda x: np.asarray(calibrate.noise_multiplier(*base[:i], x, *base[i + 1 :]))
        assert float(grad) == pytest.approx(float(_central_difference(shifted, base[i], h)), rel=2e-4), i


def test_sampling_rate_gradient_matches_finite_differences():
    with jax.enable_x64(True):
        grad = float(jax.grad(lambda e: calibrate.sampling_rate(e, 1.0, T, DELTA))(jnp.float64(2.0)))
    fd = float(_central_difference(lambda e: np.asarray(calibrate.sampling_rate(e, 1.0, T, DELTA)), 2.0, 1e-4))
    assert grad == pytest.approx(fd, rel=2e-4)


def test_global_x64_flag_untouched():
    before = jax.config.jax_enable_x64
    sigma = calibrate.noise_multiplier(1.0, Q, T, DELTA)
    assert jax.config.jax_enable_x64 == before
    assert sigma.dtype == np.float64


BAD = [
    (calibrate.noise_multiplier, dict(target_epsilon=0.0, q=Q, steps=T, delta=DELTA), "target_epsilon"),
    (calibrate.noise_multiplier, dict(target_epsilon=np.nan, q=Q, steps=T, delta=DELTA), "target_epsilon"),
    (calibrate.noise_multiplier, dict(target_epsilon=1.0, q=0.0, steps=T, delta=DELTA), "q"),
    (calibrate.noise_multiplier, dict(target_epsilon=1.0, q=1.5, steps=T, delta=DELTA), "q"),
    (calibrate.noise_multiplier, dict(target_epsilon=1.0, q=Q, steps=0.5, delta=DELTA), "steps"),
    (calibrate.noise_multiplier, dict(target_epsilon=1.0, q=Q, steps=-1.0, delta=DELTA), "steps"),
    (calibrate.noise_multiplier, dict(target_epsilon=1.0, q=Q, steps=T, delta=0.0), "delta"),
    (calibrate.noise_multiplier, dict(target_epsilon=1.0, q=Q, steps=T, delta=1.0), "delta"),
    (calibrate.noise_multiplier, dict(target_epsilon=[1.0, 2.0], q=[Q, Q, Q], steps=T, delta=DELTA), "shapes"),
    (calibrate.noise_multiplier, dict(target_epsilon=[], q=Q, steps=T, delta=DELTA), "target_epsilon"),
    (calibrate.sampling_rate, dict(target_epsilon=-1.0, sigma=1.0, steps=T, delta=DELTA), "target_epsilon"),
    (calibrate.sampling_rate, dict(target_epsilon=1.0, sigma=0.0, steps=T, delta=DELTA), "sigma"),
    (calibrate.sampling_rate, dict(target_epsilon=1.0, sigma=np.inf, steps=T, delta=DELTA), "sigma"),
    (calibrate.sampling_rate, dict(target_epsilon=1.0, sigma=1.0, steps=0.0, delta=DELTA), "steps"),
    (calibrate.sampling_rate, dict(target_epsilon=1.0, sigma=1.0, steps=T, delta=-0.1), "delta"),
    (calibrate.steps, dict(target_epsilon=0.0, q=Q, sigma=1.0, delta=DELTA), "target_epsilon"),
    (calibrate.steps, dict(target_epsilon=1.0, q=-0.1, sigma=1.0, delta=DELTA), "q"),
    (calibrate.steps, dict(target_epsilon=1.0, q=Q, sigma=-1.0, delta=DELTA), "sigma"),
    (calibrate.steps, dict(target_epsilon=1.0, q=Q, sigma=1.0, delta=2.0), "delta"),
    (calibrate.noise_multiplier, dict(target_epsilon=1.0, q=Q, steps=T, delta=DELTA, orders=[0.5, 2.0]), "orders"),
]


@pytest.mark.parametrize("fn,kwargs,name", BAD, ids=[f"{f.__name__}-{n}-{i}" for i, (f, _, n) in enumerate(BAD)])
def test_bad_input_raises_value_error_naming_the_parameter(fn, kwargs, name):
    with pytest.raises(ValueError, match=name):
        fn(**kwargs)


# --------------------------------------------------------------------------------------------------
# many targets sharing (q, T, δ): one table, one more ε evaluation per target
# --------------------------------------------------------------------------------------------------


def test_sigma_table_is_safe_and_within_its_ratio_of_the_exact_roots():
    targets = np.geomspace(1.0, 2.0, 300)
    table = np.asarray(calibrate.noise_multiplier(targets, 0.01, 1000, 1e-5, max_exact=100, table_rtol=1e-3))
    exact = np.asarray(calibrate.noise_multiplier(targets, 0.01, 1000, 1e-5))
    achieved = np.asarray(jaxpriv.dpsgd_epsilon(0.01, table, 1000, 1e-5))
    assert (achieved <= targets).all()  # never overspends
    relative = table / exact - 1
    assert (relative >= -1e-12).all() and (relative <= 1e-3).all()  # at or above the root, within the ratio
    assert np.median(relative) < 1e-6  # the interpolated step lands next to the root in most cases
    # the end targets are solved exactly (the same solver, compiled for another batch size: ulps apart)
    np.testing.assert_allclose(table[[0, -1]], exact[[0, -1]], rtol=1e-12)
    # repeated targets share their σ
    again = np.asarray(calibrate.noise_multiplier(np.repeat(targets, 2), 0.01, 1000, 1e-5, max_exact=100))
    np.testing.assert_array_equal(again[::2], table)


@pytest.mark.parametrize("kwargs, message", [({"max_exact": 0}, "max_exact must be an integer in [1, inf)"),
                                             ({"table_rtol": 0.5}, "table_rtol must lie in (0, 0.1]")])
def test_sigma_table_options_are_checked(kwargs, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        calibrate.noise_multiplier(1.0, 0.01, 1000, 1e-5, **kwargs)
