"""Tests for jaxpriv.rdp.subsampled (MATH §1.4): the Zhu-Wang general upper bound for Poisson subsampling
of any mechanism, against an mpmath evaluation of the same sum, above the exact subsampled Gaussian,
above exact Rényi divergences of subsampled pairs (Laplace by quadrature, random discrete pairs by
summation), its limits, broadcasting, and one ValueError per bad argument.
"""

import functools
import math

import jax
import mpmath as mp
import numpy as np
import pytest
from scipy import integrate

from jaxpriv import rdp

ORDERS = np.array([1.5, 2.0, 3.0, 4.5, 10.0, 33.3, 64.0, 256.0])
INT_ORDERS = np.array([2.0, 3.0, 4.0, 8.0, 16.0, 32.0])


@pytest.fixture(autouse=True)
def x64_stays_off():
    assert not jax.config.jax_enable_x64
    yield
    assert not jax.config.jax_enable_x64


def laplace_fn(b):
    return lambda a: rdp.laplace(b, a)


# ------------------------------------------------------------------------------------------------
# Oracle: the same bound evaluated directly in mpmath (no A − 1 rewriting, 50 digits)
# ------------------------------------------------------------------------------------------------


def mp_laplace(b, alpha):
    b, a = mp.mpf(b), mp.mpf(alpha)
    return mp.log(a / (2 * a - 1) * mp.exp((a - 1) / b) + (a - 1) / (2 * a - 1) * mp.exp(-a / b)) / (a - 1)


def mp_bound_k(q, eps, alpha):
    """(α−1)ρ(α) at an integer α: min(Zhu-Wang Thm 6 sum, joint-convexity bound), written as printed."""
    q, a = mp.mpf(q), int(alpha)
    terms = [(1 - q) ** (a - 1) * (a * q - q + 1), mp.binomial(a, 2) * q**2 * (1 - q) ** (a - 2) * mp.exp(eps(2))]
    terms += [3 * mp.binomial(a, l) * (1 - q) ** (a - l) * q**l * mp.exp((l - 1) * eps(l)) for l in range(3, a + 1)]
    thm6 = mp.log(mp.fsum(terms)) if q < 1 else mp.inf
    joint = mp.log(1 - q + q * mp.exp((a - 1) * eps(a)))
    return min(thm6, joint)


def mp_bound(q, eps, alpha):
    """ρ(α): integer orders directly; fractional ones by the chord of (α−1)ρ between ⌊α⌋ and ⌈α⌉ (with
    0 at α = 1), then min with the joint-convexity bound at α itself."""
    with mp.workdps(50):
        lo, hi = math.floor(alpha), math.ceil(alpha)
        if lo == hi:
            k = mp_bound_k(q, eps, lo)
        else:
            k_lo = mp.mpf(0) if lo == 1 else mp_bound_k(q, eps, lo)
            k = (hi - mp.mpf(alpha)) * k_lo + (mp.mpf(alpha) - lo) * mp_bound_k(q, eps, hi)
            a = mp.mpf(alpha)
            k = min(k, mp.log(1 - q + q * mp.exp((a - 1) * eps(a))))
        return float(k / (mp.mpf(alpha) - 1))


ORACLE_CASES = [(q, b) for q in (1e-6, 1e-3, 0.05, 0.5, 0.99) for b in (0.5, 2.0, 20.0)]


@functools.lru_cache(maxsize=None)
def jaxpriv_laplace_grid():
    q = np.array(sorted({c[0] for c in ORACLE_CASES}))[:, None]
    b = np.array(sorted({c[1] for c in ORACLE_CASES}))
    return q[:, 0], b, np.asarray(rdp.subsampled(q, laplace_fn(b), ORDERS))


@pytest.mark.parametrize("q,b", ORACLE_CASES)
def test_laplace_bound_matches_mpmath_evaluation_of_the_same_sum(q, b):
    qs, bs, grid = jaxpriv_laplace_grid()
    got = grid[list(qs).index(q), list(bs).index(b)]
    eps = lambda l: mp_laplace(b, l)
    want = np.array([mp_bound(q, eps, a) for a in ORDERS])
    np.testing.assert_allclose(got, want, rtol=1e-11, atol=0)


def test_gaussian_bound_matches_mpmath_evaluation_of_the_same_sum():
    q, sigma = 0.02, 1.3
    got = np.asarray(rdp.subsampled(q, lambda a: rdp.gaussian(sigma, a), ORDERS))
    eps = lambda l: mp.mpf(l) / (2 * mp.mpf(sigma) ** 2)
    want = np.array([mp_bound(q, eps, a) for a in ORDERS])
    np.testing.assert_allclose(got, want, rtol=1e-11, atol=0)


# ------------------------------------------------------------------------------------------------
# Upper bound of exact subsampled curves
# ------------------------------------------------------------------------------------------------


def test_above_the_exact_subsampled_gaussian_at_every_order():
    q = np.array([1e-4, 1e-3, 0.01, 0.1, 0.5, 0.9])[:, None]
    sigma = np.array([0.7, 1.0, 2.0, 5.0])
    orders = rdp.DEFAULT_ORDERS
    bound = np.asarray(rdp.subsampled(q, lambda a: rdp.gaussian(sigma, a), orders))
    exact = np.asarray(rdp.subsampled_gaussian(q, sigma, orders))
    assert bound.shape == exact.shape == (6, 4, orders.size)
    assert np.all(bound >= exact * (1 - 1e-12))


def test_close_to_the_exact_subsampled_gaussian_at_small_q():
    """At α = 2 the bound is the exact value; at small q the factor 3 on the ℓ ≥ 3 terms costs < 2%."""
    sigma = np.array([1.0, 2.0])
    bound = np.asarray(rdp.subsampled(1e-4, lambda a: rdp.gaussian(sigma, a), INT_ORDERS))
    exact = np.asarray(rdp.subsampled_gaussian(1e-4, sigma, INT_ORDERS))
    np.testing.assert_allclose(bound[:, 0], exact[:, 0], rtol=1e-12)
    assert np.all(bound / exact <= 1.02), bound / exact


def mixture_divergences(q, b, alpha):
    """Exact D_α(μ‖P) and D_α(P‖μ) for P = Lap(0, b), μ = (1−q)P + q·Lap(1, b), by quadrature split at
    the densities' kinks 0 and 1: a valid lower bound on the subsampled Laplace RDP at α."""

    def log_p(x):
        return -abs(x) / b - math.log(2 * b)

    def log_mu(x):
        return np.logaddexp(math.log1p(-q) + log_p(x), math.log(q) - abs(x - 1) / b - math.log(2 * b))

    out = []
    for log_num, log_den in ((log_mu, log_p), (log_p, log_mu)):
        f = lambda x: math.exp(alpha * log_num(x) + (1 - alpha) * log_den(x))
        total = sum(
            integrate.quad(f, lo, hi, epsabs=0, epsrel=1e-13, limit=200)[0]
            for lo, hi in ((-np.inf, 0.0), (0.0, 1.0), (1.0, np.inf))
        )
        out.append(math.log(total) / (alpha - 1))
    return out


@pytest.mark.parametrize("q,b", [(0.01, 1.0), (0.1, 0.5), (0.1, 3.0), (0.5, 1.0), (0.9, 2.0)])
def test_laplace_bound_above_exact_divergences_of_the_subsampled_pair(q, b):
    orders = np.array([1.5, 2.0, 3.0, 5.5, 8.0, 16.0])
    bound = np.asarray(rdp.subsampled(q, laplace_fn(b), orders))
    lower = np.array([max(mixture_divergences(q, b, a)) for a in orders])
    assert np.all(bound >= lower * (1 - 1e-10)), (bound, lower)
    # and not vacuous: at α = 2 the lower bound is exact up to the TV-free worst case; within 5×
    assert bound[1] <= 5 * lower[1]


def discrete_divergence(p, q, alpha, rate=None):
    """D_α(p‖q) of discrete distributions (rows, renormalised) at 30 digits, or, given ``rate``, the larger
    of the two directions between p and the mixture (1 − rate)p + rate·q formed at 30 digits: the bound is
    attained at α = 2, and rows summing to 1 ± 1e-16, a float64 mixture or log(1 + 1e-7) would lose the
    digits the comparison needs."""
    with mp.workdps(30):
        out = np.empty((len(p), len(alpha)))
        for i, (pi, qi) in enumerate(zip(p, q)):
            pi, qi = ([mp.mpf(float(v)) / mp.fsum(map(float, row)) for v in row] for row in (pi, qi))
            pairs = [(pi, qi)]
            if rate is not None:
                mix = [(1 - mp.mpf(rate)) * x + mp.mpf(rate) * y for x, y in zip(pi, qi)]
                pairs = [(mix, pi), (pi, mix)]
            for j, a in enumerate(alpha):
                a = mp.mpf(float(a))
                out[i, j] = max(
                    float(mp.log(mp.fsum(x**a * y ** (1 - a) for x, y in zip(u, v))) / (a - 1)) for u, v in pairs
                )
        return out


def test_bound_holds_for_random_discrete_mechanisms_both_directions():
    """Any pair (P, Q) of output distributions with RDP curve ε(ℓ) = max(D_ℓ(P‖Q), D_ℓ(Q‖P)) is a
    mechanism; its Poisson-subsampled pair (P, (1−q)P + qQ) must stay below the bound in both
    directions, at integer and fractional orders. The curve is passed precomputed (ε at 2..n)."""
    rng = np.random.default_rng(7)
    m = 60
    logits = rng.normal(scale=rng.uniform(0.1, 4.0, (m, 1)), size=(m, 5))
    p = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    logits_q = logits + rng.normal(scale=rng.uniform(0.1, 3.0, (m, 1)), size=(m, 5))
    q_dist = np.exp(logits_q) / np.exp(logits_q).sum(-1, keepdims=True)
    integers = np.arange(2.0, 17.0)
    curve = np.maximum(discrete_divergence(p, q_dist, integers), discrete_divergence(q_dist, p, integers))
    orders = np.array([1.3, 2.0, 2.5, 3.0, 4.0, 7.7, 12.0, 16.0])
    rates = np.array([0.01, 0.2, 0.6, 0.95])
    bound = np.asarray(rdp.subsampled(rates[:, None], curve, orders))  # (rates, m, K)
    tight = 0
    for i, rate in enumerate(rates):
        exact = discrete_divergence(p, q_dist, orders, rate=rate)
        assert np.all(bound[i] >= exact * (1 - 1e-13)), rate
        tight += np.sum(bound[i] <= exact * (1 + 1e-12))
    assert tight > 0  # attained (at α = 2) for some pairs: the check is sharp


# ------------------------------------------------------------------------------------------------
# Limits, monotonicity, shapes
# ------------------------------------------------------------------------------------------------


def test_q_one_is_the_base_curve_and_q_zero_is_zero():
    base = np.asarray(rdp.laplace(0.7, ORDERS))
    np.testing.assert_array_equal(np.asarray(rdp.subsampled(1.0, laplace_fn(0.7), ORDERS)), base)
    assert np.all(np.asarray(rdp.subsampled(0.0, laplace_fn(0.7), ORDERS)) == 0.0)
    # precomputed integer curve: exact at integer orders, the chord (≥ the curve) in between
    integers = np.arange(2.0, 257.0)
    pre = np.asarray(rdp.subsampled(1.0, np.asarray(rdp.laplace(0.7, integers)), ORDERS))
    is_int = ORDERS == np.floor(ORDERS)
    np.testing.assert_allclose(pre[is_int], base[is_int], rtol=1e-14)
    assert np.all(pre[~is_int] >= base[~is_int])


def test_vanishes_as_q_goes_to_zero_and_grows_with_q_and_epsilon():
    q = np.logspace(-12, 0, 13)[:, None]
    b = np.array([0.3, 1.0, 4.0])
    grid = np.asarray(rdp.subsampled(q, laplace_fn(b), ORDERS))
    assert np.all(np.diff(grid, axis=0) > 0)  # increasing in q
    assert np.all(np.diff(grid, axis=1) < 0)  # decreasing in b (increasing in ε = 1/b)
    assert np.all(grid[0] < 1e-20) and np.all(grid[0] > 0)  # ~q² at q = 1e-12: no cancellation to 0


def test_tiny_q_keeps_relative_precision():
    """At q = 1e-9 the bound at α = 2 is q²(e^{ε(2)} − 1) to first order: not lost to rounding of 1 + x."""
    got = float(rdp.subsampled(1e-9, laplace_fn(1.0), [2.0])[0])
    want = 1e-18 * math.expm1(float(rdp.laplace(1.0, [2.0])[0]))
    assert got == pytest.approx(want, rel=1e-8)


def test_infinite_base_orders_give_infinite_bound_only_from_there():
    fn = lambda a: np.where(np.asarray(a) > 5, np.inf, rdp.laplace(1.0, a))
    got = np.asarray(rdp.subsampled(0.3, fn, ORDERS))
    finite = np.asarray(rdp.subsampled(0.3, laplace_fn(1.0), ORDERS))
    assert np.all(np.isinf(got[ORDERS > 5])) and not np.isnan(got).any()
    np.testing.assert_array_equal(got[ORDERS <= 5], finite[ORDERS <= 5])


def test_large_orders_stay_finite_and_broadcast_matches_scalar_calls():
    orders = np.array([2.0, 100.5, 1024.0, 4096.0])
    q = np.array([1e-5, 0.01, 0.3])[:, None]
    b = np.array([0.05, 1.0, 50.0, 1e4])
    grid = np.asarray(rdp.subsampled(q, laplace_fn(b), orders))
    assert grid.shape == (3, 4, 4) and np.all(np.isfinite(grid)) and np.all(grid >= 0)
    for i, j in [(0, 0), (1, 2), (2, 3)]:
        one = np.asarray(rdp.subsampled(float(q[i, 0]), laplace_fn(float(b[j])), orders))
        np.testing.assert_allclose(grid[i, j], one, rtol=1e-14)
    assert np.all(grid <= np.asarray(rdp.laplace(b, orders)) * (1 + 1e-14))  # never above the base curve


def test_float64_with_x64_off_and_traced_q():
    out = rdp.subsampled(0.1, laplace_fn(2.0), [2.0, 3.5])
    assert out.dtype == np.float64
    traced = jax.jit(lambda q: rdp.subsampled(q, laplace_fn(2.0), [2.0, 3.5]))
    with jax.enable_x64(True):
        np.testing.assert_allclose(np.asarray(traced(0.1)), out, rtol=1e-14)


# ------------------------------------------------------------------------------------------------
# Bad input
# ------------------------------------------------------------------------------------------------

FN = laplace_fn(1.0)


@pytest.mark.parametrize(
    "args,match",
    [
        ((-0.1, FN, [2.0]), "q"),
        ((1.5, FN, [2.0]), "q"),
        ((np.nan, FN, [2.0]), "q"),
        ((0.1, FN, [1.0, 2.0]), "orders"),
        ((0.1, FN, []), "orders"),
        ((0.1, lambda a: np.ones(3), [2.0, 8.0]), "rdp_fn"),
        ((0.1, lambda a: -np.ones_like(a), [2.0]), "rdp_fn"),
        ((0.1, lambda a: np.full_like(a, np.nan), [2.0]), "rdp_fn"),
        ((0.1, np.ones(5), [2.0, 8.0]), "rdp_fn"),  # precomputed must reach order 8
        ((0.1, 1.0, [2.0]), "rdp_fn"),  # a scalar has no orders axis
        ((0.1, "laplace", [2.0]), "rdp_fn"),
        (([0.1, 0.2], lambda a: rdp.laplace([1.0, 2.0, 3.0], a), [2.0]), "shapes"),
    ],
)
def test_bad_input_raises_value_error(args, match):
    with pytest.raises(ValueError, match=match):
        rdp.subsampled(*args)
