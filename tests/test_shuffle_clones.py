"""Tests for jaxpriv.shuffle.clones: a full numpy/scipy sum over every C as the oracle, a brute-force
check of the threshold formula, the public reference values, monotonicity, conservativeness of ε(δ), the
window's added mass, float64 with x64 off, and one ValueError per bad argument."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from jaxpriv._numerics import float64
from jaxpriv.shuffle import clones as clones_module
from jaxpriv.shuffle import clones_delta, clones_epsilon


@pytest.fixture(autouse=True)
def x64_flag_untouched():
    before = jax.config.jax_enable_x64
    yield
    assert jax.config.jax_enable_x64 == before


# ------------------------------------------------------------------------------------------------
# Oracles: plain numpy/scipy, every C, no window
# ------------------------------------------------------------------------------------------------


def clone_probability(eps0, clones):
    return np.exp(-eps0) if clones == "fmt22" else 2.0 / (np.exp(eps0) + 1.0)


def oracle_delta(eps0, n, eps, clones="fmt22"):
    """Σ_{C=0}^{n−1} Pr[C] (α Pr[B_C ≥ a*−1] − β Pr[B_C ≥ a*]) with scipy.stats.binom pmf/sf.

    α = q − e^ε(1−q) and β = e^ε q − (1−q) are written with expm1 so that the oracle itself does not
    cancel when ε is close to ε₀."""
    if eps >= eps0:
        return 0.0
    alpha = np.exp(eps) * np.expm1(eps0 - eps) / (1.0 + np.exp(eps0))
    beta = np.expm1(eps + eps0) / (1.0 + np.exp(eps0))
    t = beta / alpha
    c = np.arange(n)
    a_star = np.floor(t * (c + 1) / (1 + t)) + 1
    inner = alpha * stats.binom.sf(a_star - 2, c, 0.5) - beta * stats.binom.sf(a_star - 1, c, 0.5)
    return float(np.sum(stats.binom.pmf(c, n - 1, clone_probability(eps0, clones)) * inner))


def brute_force_delta(eps0, n, eps, clones="fmt22"):
    """Both directions of Σ_C Pr[C] Σ_a max(0, P_C(a) − e^ε Q_C(a)), with no threshold formula."""
    q = np.exp(eps0) / (1.0 + np.exp(eps0))
    c = clone_probability(eps0, clones)
    pq = qp = 0.0
    for count in range(n):
        a = np.arange(count + 2)
        b, b_prev = stats.binom.pmf(a, count, 0.5), stats.binom.pmf(a - 1, count, 0.5)
        p_c, q_c = q * b_prev + (1 - q) * b, (1 - q) * b_prev + q * b
        w = stats.binom.pmf(count, n - 1, c)
        pq += w * np.maximum(0.0, p_c - np.exp(eps) * q_c).sum()
        qp += w * np.maximum(0.0, q_c - np.exp(eps) * p_c).sum()
    return pq, qp


# Configurations with δ from ~1e-4 down to ~1e-32, n up to 5000 (the window truncates C above n ≈ 900).
ORACLE_CASES = [
    (0.1, 5000, 0.002), (0.1, 5000, 0.01),
    (0.5, 700, 0.05), (0.5, 5000, 0.03), (0.5, 5000, 0.08),
    (1.0, 300, 0.2), (1.0, 2000, 0.12), (1.0, 5000, 0.15), (1.0, 5000, 0.2),
    (2.0, 1000, 0.5), (2.0, 5000, 0.3), (2.0, 5000, 0.45),
    (4.0, 3000, 1.0), (4.0, 5000, 2.5), (4.0, 700, 3.9999),
]
# Far below any practical δ the window's conservative dropped-mass term (< 1e-36) dominates.
TINY_CASES = [(0.1, 5000, 0.02), (1.0, 5000, 0.3), (2.0, 5000, 0.9)]


@pytest.mark.parametrize("clones", ["fmt22", "strong"])
def test_delta_matches_full_scipy_sum_to_1e9(clones):
    eps0, n, eps = (np.array(col) for col in zip(*ORACLE_CASES))
    got = clones_delta(eps0, n, eps, clones)  # one batch: n differs per element
    want = np.array([oracle_delta(*case, clones) for case in ORACLE_CASES])
    assert np.all(want > 0)
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=0)


@pytest.mark.parametrize("clones", ["fmt22", "strong"])
def test_tiny_delta_is_an_upper_bound_within_1e36(clones):
    eps0, n, eps = (np.array(col) for col in zip(*TINY_CASES))
    got = clones_delta(eps0, n, eps, clones)
    want = np.array([oracle_delta(*case, clones) for case in TINY_CASES])
    assert np.all(got >= want * (1 - 1e-9)) and np.all(got - want <= 1e-36)


@pytest.mark.parametrize("eps0,n,eps", [(1.0, 2, 0.2), (1.0, 3, 0.0), (1.0, 60, 0.3), (2.0, 150, 0.5),
                                        (0.5, 100, 0.05), (3.0, 120, 1.0)])
@pytest.mark.parametrize("clones", ["fmt22", "strong"])
def test_threshold_formula_matches_brute_force_and_the_pair_is_symmetric(eps0, n, eps, clones):
    pq, qp = brute_force_delta(eps0, n, eps, clones)
    assert qp == pytest.approx(pq, rel=1e-12)  # Q_C is P_C mirrored: one direction is the whole δ
    assert float(clones_delta(eps0, n, eps, clones)) == pytest.approx(pq, rel=1e-9)


# ------------------------------------------------------------------------------------------------
# Reference values (shared/reference/README.md)
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("eps0,n,delta,want", [(1.0, 1_000, 1e-8, 0.230556), (1.0, 10_000, 1e-8, 0.068880),
                                               (0.5, 10_000, 1e-6, 0.020401)])
def test_reference_values(eps0, n, delta, want):
    assert round(float(clones_epsilon(eps0, n, delta)), 6) == want


# ------------------------------------------------------------------------------------------------
# Monotonicity and the two clone models
# ------------------------------------------------------------------------------------------------


def test_delta_is_decreasing_in_epsilon():
    eps = np.linspace(0.0, 1.0, 201)
    d = clones_delta(1.0, 2000, eps)
    assert d[0] > 0 and d[-1] == 0.0
    assert np.all(np.diff(d) <= 0)
    assert np.all(np.diff(d[d > 1e-300]) < 0)


def test_epsilon_is_decreasing_in_n_and_increasing_in_eps0():
    ns = np.array([100, 300, 1_000, 3_000, 10_000, 30_000])
    by_n = clones_epsilon(1.0, ns, 1e-6)
    assert np.all(np.diff(by_n) < 0)
    eps0 = np.array([0.1, 0.3, 1.0, 2.0, 4.0, 8.0])
    by_eps0 = clones_epsilon(eps0, 10_000, 1e-6)
    assert np.all(np.diff(by_eps0) > 0)
    assert np.all(by_eps0 < eps0)


def test_strong_clones_give_no_larger_epsilon_than_fmt22():
    eps0 = np.array([0.1, 0.5, 1.0, 2.0, 4.0])[:, None]
    n = np.array([100, 1_000, 10_000])[None, :]
    strong, fmt22 = clones_epsilon(eps0, n, 1e-7, "strong"), clones_epsilon(eps0, n, 1e-7, "fmt22")
    assert np.all(strong <= fmt22)
    assert np.all(strong[:, 1:] < fmt22[:, 1:])  # strictly better once there are clones to hide among


# ------------------------------------------------------------------------------------------------
# ε(δ): conservative, tight, limits
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("clones", ["fmt22", "strong"])
def test_epsilon_is_conservative_and_tight(clones):
    eps0 = np.array([0.2, 0.5, 1.0, 1.0, 2.0, 4.0, 8.0])
    n = np.array([5_000, 10_000, 1_000, 100_000, 3_000, 20_000, 50_000])
    delta = np.array([1e-6, 1e-9, 1e-8, 1e-5, 1e-12, 1e-7, 1e-10])
    eps = clones_epsilon(eps0, n, delta, clones)
    assert np.all((eps > 0) & (eps < eps0))
    assert np.all(clones_delta(eps0, n, eps, clones) <= delta)
    assert np.all(clones_delta(eps0, n, eps * (1 - 1e-6), clones) > delta)


def test_epsilon_limits():
    # δ(0) ≤ target → 0; otherwise 0 < ε < ε₀, and δ = 0 from ε₀ on.
    d0 = float(clones_delta(1.0, 2, 0.0))
    assert float(clones_epsilon(1.0, 2, d0 * (1 + 1e-9))) == 0.0
    assert 0.0 < float(clones_epsilon(1.0, 2, d0 * (1 - 1e-6))) < 1.0
    assert float(clones_epsilon(1e-6, 1_000, 1e-6)) == 0.0
    np.testing.assert_array_equal(clones_delta(1.0, 1_000, [1.0, 1.5, 50.0]), 0.0)
    eps = float(clones_epsilon(30.0, 1_000, 1e-6))  # almost no clones: ε stays just below ε₀
    assert 29.9 < eps < 30.0 and float(clones_delta(30.0, 1_000, eps)) <= 1e-6


def test_batch_and_broadcasting_match_single_calls():
    eps0 = np.array([0.5, 1.0, 2.0])[:, None]
    n = np.array([2, 50, 4_000])[None, :]
    batch = clones_epsilon(eps0, n, 1e-6)
    assert batch.shape == (3, 3)
    single = np.array([[float(clones_epsilon(float(a), int(b), 1e-6)) for b in n[0]] for a in eps0[:, 0]])
    np.testing.assert_allclose(batch, single, rtol=1e-9)  # both within the root finder's 1e-10


# ------------------------------------------------------------------------------------------------
# The window over C: its dropped mass is added (tiny, but present)
# ------------------------------------------------------------------------------------------------


def test_window_dropped_mass_is_added_and_tiny():
    eps0, n = 1.0, 5_000
    window, anchor = clones_module._sizes(n)
    assert window < n  # the window really truncates C here
    with float64():
        _, _, _, dropped = clones_module._window(jnp.asarray([eps0]), jnp.asarray([float(n)]), window, "fmt22")
    assert 0.0 < float(dropped[0]) < 1e-36
    for eps in [0.05, 0.15, 0.3, 0.5]:
        assert float(clones_delta(eps0, n, eps)) >= oracle_delta(eps0, n, eps) - 1e-15


# ------------------------------------------------------------------------------------------------
# float64 with the global flag off
# ------------------------------------------------------------------------------------------------


@jax.enable_x64(False)
def test_results_are_float64_with_x64_off():
    assert not jax.config.jax_enable_x64
    d = clones_delta(1.0, 10_000, 0.35)
    e = clones_epsilon(1.0, 10_000, 1e-40)
    assert isinstance(d, np.ndarray) and d.dtype == np.float64 and e.dtype == np.float64
    assert 0.0 < float(d) < 1e-40  # float32 would flush it to 0
    assert float(clones_delta(1.0, 10_000, e)) <= 1e-40
    # traced ε₀ and δ (n stays concrete) inside the caller's jit: still computed in float64
    jitted = jax.jit(lambda e0, d: clones_epsilon(e0, 1_000, d))(1.0, 1e-8)
    assert jitted.dtype == jnp.float64
    assert float(jitted) == pytest.approx(0.230556, abs=1e-6)


# ------------------------------------------------------------------------------------------------
# Bad input: one ValueError per argument, naming it
# ------------------------------------------------------------------------------------------------

BAD = [
    (clones_delta, dict(eps0=1.0, n=1, epsilon=0.1), "n"),
    (clones_delta, dict(eps0=1.0, n=100.5, epsilon=0.1), "n"),
    (clones_epsilon, dict(eps0=1.0, n=np.nan, delta=1e-6), "n"),
    (clones_delta, dict(eps0=0.0, n=100, epsilon=0.1), "eps0"),
    (clones_delta, dict(eps0=-1.0, n=100, epsilon=0.1), "eps0"),
    (clones_epsilon, dict(eps0=np.inf, n=100, delta=1e-6), "eps0"),
    (clones_epsilon, dict(eps0=np.nan, n=100, delta=1e-6), "eps0"),
    (clones_epsilon, dict(eps0=1.0, n=100, delta=0.0), "delta"),
    (clones_epsilon, dict(eps0=1.0, n=100, delta=1.0), "delta"),
    (clones_epsilon, dict(eps0=1.0, n=100, delta=-1e-6), "delta"),
    (clones_delta, dict(eps0=1.0, n=100, epsilon=-0.1), "epsilon"),
    (clones_delta, dict(eps0=1.0, n=100, epsilon=np.nan), "epsilon"),
    (clones_delta, dict(eps0=1.0, n=100, epsilon=0.1, clones="strongest"), "clones"),
    (clones_epsilon, dict(eps0=1.0, n=100, delta=1e-6, clones="FMT22"), "clones"),
    (clones_delta, dict(eps0=[1.0, 2.0], n=[100, 200, 300], epsilon=0.1), "shapes"),
    (clones_epsilon, dict(eps0=[], n=100, delta=1e-6), "eps0"),
]


@pytest.mark.parametrize("fn,kwargs,name", BAD, ids=[f"{f.__name__}-{n}-{i}" for i, (f, _, n) in enumerate(BAD)])
def test_bad_input_raises_value_error_naming_the_parameter(fn, kwargs, name):
    with pytest.raises(ValueError, match=name):
        fn(**kwargs)


def test_traced_n_is_rejected():
    with pytest.raises(ValueError, match="n must be concrete"):
        jax.jit(lambda n: clones_delta(1.0, n, 0.1))(100)


def test_a_batch_of_mixed_n_equals_single_calls():
    """A batch gives what single calls give, to the documented accuracy (~1e-10 relative, MATH §0.1): a
    group of ≥ 16 rows is summed over the window its own n needs (its root finds run as one batch, so the
    last bits may differ), smaller groups share the largest of their windows (one compiled program)."""
    n = np.array([100.0, 3000.0, 100.0, 2.0e5, 3000.0, 50.0] * 4 + [700.0] * 16)
    eps0 = np.linspace(0.5, 2.0, n.size)
    batch = np.asarray(clones_epsilon(eps0, n, 1e-7))
    single = np.array([float(clones_epsilon(e, m, 1e-7)) for e, m in zip(eps0, n)])
    np.testing.assert_allclose(batch, single, rtol=1e-10, atol=0)
