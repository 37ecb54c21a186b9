"""The float64 primitives the RDP kernels are built from (MATH §0.1: every rounding error bounded and added
upward, which needs each primitive within a few ulps): log1p and log(1 − e^x), against numpy and mpmath."""

import jax
import jax.numpy as jnp
import mpmath as mp
import numpy as np

from jaxpriv._numerics import float64, log1mexp, log1p

EPS64 = np.finfo(np.float64).eps


def _ulps(got, want):
    return np.abs(got - want) / np.maximum(np.abs(want), np.finfo(np.float64).tiny) / EPS64


def test_log1p_is_within_two_ulps_including_where_xlas_is_not():
    """XLA's float64 log1p is off by up to 120 ulps on (−0.4143, −0.3603) (log(1 − q) at q ≈ 0.4, the
    conversion's log1p(−1/α) at α ≈ 2.5); numpy's log1p is correctly rounded to within an ulp."""
    rng = np.random.default_rng(0)
    x = np.concatenate([np.linspace(-0.999, 3.0, 200_001), rng.uniform(-0.45, -0.3, 100_000),
                        -np.logspace(-300, -1, 2_000), np.logspace(-300, 300, 2_000)])
    with float64():
        got = np.asarray(jax.jit(log1p)(jnp.asarray(x)))
    assert _ulps(got, np.log1p(x)).max() <= 2.0


def test_log1mexp_is_within_two_and_a_half_ulps():
    x = -np.concatenate([np.logspace(-12, 2.5, 3_000), np.linspace(0.3, 1.2, 3_000)])  # the patched range too
    with float64():
        got = np.asarray(jax.jit(log1mexp)(jnp.asarray(x)))
    with mp.workdps(200):  # 1 − e^x for x down to −316
        want = np.array([float(mp.log(-mp.expm1(mp.mpf(float(v))))) for v in x])
    assert _ulps(got, want).max() <= 2.5


def test_log_normal_cdf_is_log_ndtr_above_minus_20_and_within_an_ulp_below():
    """Above −20 the value is jax's log_ndtr(x, series_order=10) bit for bit (the curves' exactness tests pin
    values that cancel to 1e-9, so a last-bit change there moves them); below, its 10-term asymptotic
    series evaluated by Horner's rule, within about an ulp of mpmath."""
    from jax.scipy.special import log_ndtr

    from jaxpriv._numerics import log_normal_cdf

    above = np.concatenate([np.linspace(-19.999, 40.0, 100_001), [-1.0, 0.0, 1.0, 8.0, 8.000001]])
    below = -np.logspace(np.log10(20.0), 5, 2_000)
    with float64():
        ours = jax.jit(log_normal_cdf)
        np.testing.assert_array_equal(np.asarray(ours(jnp.asarray(above))),
                                      np.asarray(jax.jit(lambda x: log_ndtr(x, series_order=10))(jnp.asarray(above))))
        got = np.asarray(ours(jnp.asarray(below)))
        grad = np.asarray(jax.jit(jax.vmap(jax.grad(log_normal_cdf)))(jnp.asarray(np.r_[above[::997], below[::97]])))
    with mp.workdps(40):
        want = np.array([float(mp.log(mp.ncdf(mp.mpf(float(v))))) for v in below])
    assert _ulps(got, want).max() <= 1.5
    assert np.all(np.isfinite(grad)) and np.all(grad >= 0)
