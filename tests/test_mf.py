"""Correlated noise by banded matrix factorization (issue 32, MATH §12): the strategies, the noise transform
and the AmplifiedBandMF event, each against an independent oracle.

Kept fast: every strategy here has n = 16 (one compiled optimiser, shared by every b: the band is a runtime
mask) except the noise law's n = 6; the PLD accountant is asked a few settings at once.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from jaxpriv import accounting, calibrate, events, mf
from jaxpriv.train import noise

N = 16
BANDS = (1, 2, 4, N)


@pytest.fixture(scope="module")
def strategies():
    return {b: mf.banded_strategy(N, bands=b, cache=False) for b in BANDS}


def _numpy_error(C):
    """The objective by a general dense solve (numpy's LU, not a triangular solve): ‖A C⁻¹‖_F² max_j ‖c_j‖²."""
    A = np.tril(np.ones(C.shape))
    X = np.linalg.solve(C.T, A.T)  # (A C⁻¹)ᵀ
    return float(np.sum(X ** 2) * np.max(np.sum(C ** 2, axis=0)))


# --------------------------------------------------------------------------------------------------
# The objective and the strategies
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 2, 7, 64])
def test_the_identity_costs_n_n_plus_1_over_2(n):
    assert mf.expected_error(np.eye(n)) == n * (n + 1) / 2
    assert mf.expected_error(3.0 * np.eye(n)) == pytest.approx(n * (n + 1) / 2, rel=1e-14)  # scale-invariant


def test_expected_error_matches_a_dense_numpy_solve():
    rng = np.random.default_rng(0)
    for bands in (1, 3, 9):
        C = np.tril(rng.normal(size=(9, 9))) * (np.subtract.outer(np.arange(9), np.arange(9)) < bands)
        C[np.diag_indices(9)] = 1.0 + rng.random(9)
        assert mf.expected_error(C) == pytest.approx(_numpy_error(C), rel=1e-10)


def test_the_banded_objective_equals_the_dense_one():
    """The optimiser's O(n²·b) objective (block forward substitution over the b diagonals, n padded to a
    multiple of b) against the dense numpy solve, for random bands, n not a multiple of b included."""
    from jaxpriv._numerics import float64
    from jaxpriv.mf import _banded

    rng = np.random.default_rng(2)
    with float64():
        for n, bands in ((10, 4), (7, 7)):  # padded to 12; one block
            _, valid, lags, columns, inside = _banded.layout(n, bands)
            D = rng.normal(size=valid.shape) + 3.0 * (np.arange(bands) == 0)[:, None]
            D = _banded.normalised(jnp.asarray(D), jnp.asarray(valid), n)
            C = _banded.dense(D, n)
            np.testing.assert_allclose(mf.column_norms(C), 1.0, rtol=0, atol=1e-12)
            value = float(_banded.inverse_error(D, lags, columns, inside, n))
            assert value == pytest.approx(_numpy_error(C), rel=1e-12)


def test_the_toeplitz_strategy_is_a_worse_banded_one_and_a_local_minimum(strategies):
    C = mf.banded_toeplitz_strategy(N, bands=4)
    c = C[:4, 0]
    assert mf.bands_of(C) == 4 and np.linalg.norm(c) == pytest.approx(1.0, abs=1e-12)
    for k in range(4):
        np.testing.assert_array_equal(np.diag(C, -k), c[k])
    err = mf.expected_error(C)
    assert mf.expected_error(strategies[4]) * (1 - 1e-9) <= err < N * (N + 1) / 2
    rng = np.random.default_rng(3)
    for _ in range(5):  # no small move of the 4 coefficients (renormalised) lowers the objective
        step = 1e-4 * rng.normal(size=4)
        for sign in (1.0, -1.0):
            moved = (c + sign * step) / np.linalg.norm(c + sign * step)
            assert mf.expected_error(sum(np.diag(np.full(N - k, moved[k]), -k) for k in range(4))) >= err * (1 - 1e-9)
    np.testing.assert_array_equal(mf.banded_toeplitz_strategy(N, bands=1), np.eye(N))
    with pytest.raises(ValueError, match=r"bands must be an integer in \[1, 16\], got 17"):
        mf.banded_toeplitz_strategy(N, bands=17)
    with pytest.raises(ValueError, match=r"n must be an integer"):
        mf.banded_toeplitz_strategy(16.0, bands=2)


def test_strategies_are_banded_with_unit_columns(strategies):
    i, j = np.indices((N, N))
    for b, C in strategies.items():
        assert C.shape == (N, N) and C.dtype == np.float64
        assert np.all(C[(i - j < 0) | (i - j >= b)] == 0.0)
        assert mf.bands_of(C) == b
        np.testing.assert_allclose(mf.column_norms(C), 1.0, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(strategies[1], np.eye(N))  # b = 1: the identity exactly, DP-SGD


def test_more_bands_beat_the_identity_and_never_lose(strategies):
    errors = {b: mf.expected_error(C) for b, C in strategies.items()}
    identity = N * (N + 1) / 2
    assert errors[1] == identity
    assert errors[2] < 0.7 * identity
    assert identity > errors[2] > errors[4] > errors[N]
    # the full factorization is at least as good as the square-root one it starts from (Fichtenberger et al.)
    r = np.cumprod(np.r_[1.0, (2 * np.arange(1, N) - 1) / (2 * np.arange(1, N))])
    root = sum(np.diag(np.full(N - k, r[k]), -k) for k in range(N))
    assert errors[N] <= mf.expected_error(root) + 1e-9


def test_the_optimum_is_a_local_minimum(strategies):
    """No small step along random directions inside the band (columns renormalised) lowers the objective."""
    rng = np.random.default_rng(1)
    i, j = np.indices((N, N))
    for b in (2, 4):
        C = strategies[b]
        base = mf.expected_error(C)
        band = (i - j >= 0) & (i - j < b)
        for _ in range(5):
            step = 1e-4 * rng.normal(size=(N, N)) * band
            for sign in (1.0, -1.0):
                moved = C + sign * step
                assert mf.expected_error(moved / mf.column_norms(moved)) >= base * (1 - 1e-9)


@pytest.mark.parametrize("kwargs, match", [
    (dict(n=0, bands=1), r"n must be an integer in \[1, "),
    (dict(n=8, bands=0), r"bands must be an integer in \[1, 8\], got 0"),
    (dict(n=8, bands=9), r"bands must be an integer in \[1, 8\], got 9"),
    (dict(n=8, bands=2.0), r"bands must be an integer in \[1, 8\], got 2.0"),
    (dict(n=8.0, bands=2), r"n must be an integer"),
    (dict(n=8, bands=True), r"bands must be an integer"),
])
def test_bad_strategy_arguments(kwargs, match):
    n = kwargs.pop("n")
    with pytest.raises(ValueError, match=match):
        mf.banded_strategy(n, **kwargs)


@pytest.mark.parametrize("C, match", [
    (np.ones((2, 3)), "square"), (np.triu(np.ones((3, 3))), "lower triangular"),
    (np.diag([1.0, 0.0, 1.0]), "nonzero diagonal"), (np.full((2, 2), np.nan), "finite"),
])
def test_bad_matrices(C, match):
    with pytest.raises(ValueError, match=match):
        mf.expected_error(C)


def test_strategies_are_cached_on_disk_by_n_and_bands(strategies, tmp_path, monkeypatch):
    monkeypatch.setenv("JAXPRIV_CACHE_DIR", str(tmp_path))
    first = mf.banded_strategy(N, bands=4)
    files = list((tmp_path / "mf").glob("banded_n16_b4_*.npy"))
    assert len(files) == 1
    np.testing.assert_array_equal(np.load(files[0]), first)
    np.save(files[0], 2.0 * first)  # not unit columns any more: recomputed, not trusted
    np.testing.assert_array_equal(mf.banded_strategy(N, bands=4), first)
    np.testing.assert_array_equal(np.load(files[0]), first)
    np.save(files[0], 0.5 * np.eye(N) + 0.0)  # a stale file of the right shape is checked as well
    np.testing.assert_array_equal(mf.banded_strategy(N, bands=4), first)
    monkeypatch.setenv("JAXPRIV_CACHE_DIR", "")  # empty: no cache
    assert mf.strategy_cache_dir() is None


# --------------------------------------------------------------------------------------------------
# The noise transform
# --------------------------------------------------------------------------------------------------


def test_one_band_is_dp_sgds_noise_bit_for_bit(strategies):
    params = {"a": jnp.zeros(5), "b": jnp.zeros((2, 3))}
    grads = {"a": jnp.ones(5), "b": jnp.full((2, 3), -2.0)}
    kwargs = dict(seed=7, sensitivity=0.5, normalize_by=4.0)
    band = noise.banded_noise_transform(events.Gaussian(1.3), strategies[1], **kwargs)
    dpsgd = noise.noise_transform(events.Gaussian(1.3), **kwargs)
    s1, s2 = band.init(params), dpsgd.init(params)
    step1, step2 = jax.jit(band.update), jax.jit(dpsgd.update)  # two programs, not one per primitive
    for _ in range(4):
        o1, s1 = step1(grads, s1)
        o2, s2 = step2(grads, s2)
        for name in params:
            np.testing.assert_array_equal(o1[name], o2[name])
    assert [a.shape for a in s1.buffer] == [(0, 5), (0, 2, 3)]  # (b − 1) × each leaf: nothing for DP-SGD


def test_the_noise_has_covariance_sigma_squared_inverse_ctc():
    """x = C⁻¹z, z ~ N(0, σ²I): Cov(x) = σ²(CᵀC)⁻¹. 20,000 draws of the 6-step sequence (one scalar parameter).

    Tolerance: with mean known (0), the sample covariance S_ij = Σ_k x_ki x_kj / m has standard error
    √((Σ_ii Σ_jj + Σ_ij²)/m); every one of the 21 distinct entries must lie within 5 standard errors
    (a Gaussian tail of 6e-7 each, 1.2e-5 for all by the union bound; the draws are seeded)."""
    n, bands, sigma, m = 6, 3, 1.5, 20_000
    C = mf.banded_strategy(n, bands=bands, cache=False)

    def run(key):
        tx = noise.banded_noise_transform(events.Gaussian(sigma), C, seed=key)
        state, out = tx.init(jnp.zeros(())), []
        for _ in range(n):
            x, state = tx.update(jnp.zeros(()), state)
            out.append(x)
        return jnp.stack(out)

    X = np.asarray(jax.jit(jax.vmap(run))(jax.random.split(jax.random.key(1), m)), np.float64)
    expected = sigma ** 2 * np.linalg.inv(C.T @ C)
    sample = X.T @ X / m
    se = np.sqrt((np.outer(np.diag(expected), np.diag(expected)) + expected ** 2) / m)
    assert np.all(np.abs(sample - expected) <= 5 * se), np.abs(sample - expected) / se
    # and not the independent noise of DP-SGD: the strategy's correlations are resolved
    assert np.abs(sample[1, 0] / se[1, 0]) > 10
    # C x is white: the recursion solved C x = z row by row
    W = X @ C.T
    np.testing.assert_allclose(W.T @ W / m, sigma ** 2 * np.eye(n), atol=5 * np.sqrt(2 * sigma ** 4 / m))


def test_steps_past_the_strategy_are_nan():
    tx = noise.banded_noise_transform(events.Gaussian(1.0), mf.banded_strategy(3, bands=1), seed=0)
    state = tx.init(jnp.zeros(2))
    for _ in range(3):
        out, state = tx.update(jnp.ones(2), state)
        assert np.all(np.isfinite(out))
    out, _ = tx.update(jnp.ones(2), state)
    assert np.all(np.isnan(out))


@pytest.mark.parametrize("event, C, match", [
    (events.Gaussian(1.0), 2.0 * np.eye(3), "largest column norm must be at most 1"),
    (events.Gaussian(1.0), np.triu(np.ones((3, 3))) / 3, "lower triangular"),
    (events.Laplace(1.0), np.eye(3), "event must be events.Gaussian"),
    (events.Gaussian(-1.0), np.eye(3), "noise_multiplier"),
])
def test_bad_noise_arguments(event, C, match):
    with pytest.raises(ValueError, match=match):
        noise.banded_noise_transform(event, C, seed=0)


# --------------------------------------------------------------------------------------------------
# Accounting: AmplifiedBandMF
# --------------------------------------------------------------------------------------------------

SIGMA, Q, STEPS, DELTA = np.array([0.9, 1.5]), 0.05, 120, 1e-5


def _dpsgd(sigma, q, steps):
    return events.SelfComposed(events.PoissonSampled(q, events.Gaussian(sigma)), steps)


# the PLD case is the composition the next-but-one test asks (q = 0.3, two subsampled Gaussians), so that the
# two share the PLD accountant's compiled programs
@pytest.mark.parametrize("accountant, q, steps", [("rdp", Q, STEPS), ("pld", 0.3, 2)])
def test_one_band_is_the_dp_sgd_event(accountant, q, steps):
    band = events.AmplifiedBandMF(noise_multiplier=SIGMA, sampling_rate=q, steps=steps, bands=1)
    np.testing.assert_array_equal(accounting.epsilon(band, DELTA, accountant=accountant),
                                  accounting.epsilon(_dpsgd(SIGMA, q, steps), DELTA, accountant=accountant))


def test_b_bands_are_ceil_n_over_b_dp_sgd_steps():
    for bands, count in ((4, 30), (7, 18), (120, 1)):
        band = events.AmplifiedBandMF(SIGMA, Q, STEPS, bands)
        np.testing.assert_array_equal(accounting.epsilon(band, DELTA, accountant="rdp"),
                                      accounting.epsilon(_dpsgd(SIGMA, Q, count), DELTA, accountant="rdp"))
    assert events.AmplifiedBandMF(1.0, Q, STEPS, 7).participations() == 18.0


def _hockey_stick_exact(sigma, q, epsilon):
    """δ(ε) of the b-banded mechanism itself, by 2-D quadrature (numpy/scipy only): n = 4 steps, b = 2 bands,
    a record of partition 0 takes part at steps 0 and 2, each with probability q, contributing the columns
    c₀, c₂ (unit norm, disjoint supports rows {0, 1} and {2, 3}, so orthonormal). Projected on them, the
    output is N(s, σ²I₂) with s ∈ {0, 1}² the participations (independent Bernoulli(q)), against N(0, σ²I₂)
    without the record. Both directions; the larger δ."""
    grid = np.linspace(-12 * sigma, 1 + 12 * sigma, 4001)
    h = grid[1] - grid[0]
    weights = np.full(grid.size, h)
    weights[[0, -1]] = h / 2
    phi0 = stats.norm.pdf(grid, 0.0, sigma)
    mix = (1 - q) * phi0 + q * stats.norm.pdf(grid, 1.0, sigma)
    P, Qd = np.outer(mix, mix), np.outer(phi0, phi0)
    w = np.outer(weights, weights)
    remove = np.sum(np.maximum(P - np.exp(epsilon) * Qd, 0) * w)
    add = np.sum(np.maximum(Qd - np.exp(epsilon) * P, 0) * w)
    return max(remove, add)


def test_the_pld_bounds_the_mechanisms_own_privacy_profile():
    """The theorem's reduction checked on the mechanism itself (n = 4, b = 2, with the optimised strategy's
    column structure): at the exact δ(ε₀) of the output law, the accountant's certified ε interval contains
    ε₀, and its upper end is within 1% of it (unit column norms: the reduction is tight). Asked as ε(δ), the
    query of the DP-SGD test above, so the two share their compiled programs."""
    C = mf.banded_strategy(4, bands=2, cache=False)
    assert C[:, 0] @ C[:, 2] == 0 and np.allclose(mf.column_norms(C), 1)  # the disjoint supports used
    sigma, q, eps = SIGMA, 0.3, np.array([0.5, 1.0])
    exact = np.array([_hockey_stick_exact(s, q, e) for s, e in zip(sigma, eps)])
    upper, lower = accounting.epsilon_interval(events.AmplifiedBandMF(sigma, q, 4, 2), exact)
    assert np.all(lower <= eps * (1 + 1e-6)) and np.all(eps <= upper * (1 + 1e-6)), (lower, eps, upper)
    np.testing.assert_allclose(upper, eps, rtol=1e-2)


def test_calibrate_solves_for_its_noise_multiplier():
    sigma = calibrate.calibrate(lambda s: events.AmplifiedBandMF(s, Q, STEPS, 4), 2.0, DELTA, bounds=(0.3, 50.0),
                                accountant="rdp")
    dpsgd = calibrate.calibrate(lambda s: _dpsgd(s, Q, 30), 2.0, DELTA, bounds=(0.3, 50.0), accountant="rdp")
    assert float(sigma) == float(dpsgd)  # ⌈120/4⌉ = 30 DP-SGD steps
    assert float(accounting.epsilon(events.AmplifiedBandMF(sigma, Q, STEPS, 4), DELTA, accountant="rdp")) <= 2.0


@pytest.mark.parametrize("kwargs, match", [
    (dict(bands=0), r"AmplifiedBandMF bands b must lie in \[1.0, inf\), got 0.0"),
    (dict(bands=121), r"AmplifiedBandMF bands b must lie in \[1, steps n\], got b = 121.0 with n = 120.0"),
    (dict(bands=2.5), r"AmplifiedBandMF bands b must be an integer"),
    (dict(steps=10.5, bands=2), r"AmplifiedBandMF steps n must be an integer"),
    (dict(sampling_rate=1.5), r"AmplifiedBandMF sampling_rate q must lie in \[0.0, 1.0\], got 1.5"),
    (dict(sampling_rate=-0.1), r"AmplifiedBandMF sampling_rate q must lie in \[0.0, 1.0\]"),
    (dict(noise_multiplier=0.0), r"AmplifiedBandMF noise_multiplier sigma must lie in \(0.0, inf\), got 0.0"),
    (dict(bands=np.array([2, 200])), r"AmplifiedBandMF bands b must lie in \[1, steps n\], got b = 200.0"),
])
def test_bad_event_arguments(kwargs, match):
    numbers = dict(noise_multiplier=1.0, sampling_rate=Q, steps=STEPS, bands=4) | kwargs
    with pytest.raises(ValueError, match=match):
        accounting.epsilon(events.AmplifiedBandMF(**numbers), DELTA, accountant="rdp")


def test_the_dp_accounting_conversion_is_the_dominating_event():
    import dp_accounting

    assert events.to_dp_accounting(events.AmplifiedBandMF(1.0, 0.1, 10, 3)) == dp_accounting.SelfComposedDpEvent(
        dp_accounting.PoissonSampledDpEvent(0.1, dp_accounting.GaussianDpEvent(1.0)), 4)

