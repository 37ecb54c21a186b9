"""Tests for jaxpriv.shuffle.multinomial: the lattice law against a direct convolution of trinomials,
the Poisson-binomial marginal against a direct DP, the Gaussian cell masses against scipy quadrature
and their proven error bound, the TV bound against a brute-force computation, the paper's Eq. 14
figure (0.0206 at n = 50), the E-APES trade-off and (ε, δ) curve, and one ValueError per bad argument."""

import math

import jax
import numpy as np
import pytest
from scipy import integrate
from scipy.stats import multivariate_normal

from jaxpriv import fdp
from jaxpriv.shuffle import multinomial as M
from jaxpriv.shuffle import eapes as E


@pytest.fixture(autouse=True)
def x64_flag_untouched():
    before = jax.config.jax_enable_x64
    yield
    assert jax.config.jax_enable_x64 == before


# ------------------------------------------------------------------------------------------------
# direct oracles
# ------------------------------------------------------------------------------------------------


def trinomial_convolution(p):
    """Pr[ξ₀ = a, ξ₁ = b] by convolving the n trinomials (1 − p_i, p_i/2 on (1,0), p_i/2 on (0,1))."""
    m = len(p)
    f = np.zeros((m + 1, m + 1))
    f[0, 0] = 1.0
    for pi in p:
        g = (1 - pi) * f
        g[1:, :] += pi / 2 * f[:-1, :]
        g[:, 1:] += pi / 2 * f[:, :-1]
        f = g
    return f


def poisson_binomial_direct(p):
    f = np.array([1.0])
    for pi in p:
        g = np.zeros(f.size + 1)
        g[:-1] += (1 - pi) * f
        g[1:] += pi * f
        f = g
    return f


def gaussian_params(p):
    mean = p.sum() / 2
    var = np.sum(p / 2 * (1 - p / 2))
    cov = -np.sum(p * p) / 4
    return np.array([mean, mean]), np.array([[var, cov], [cov, var]])


def cell_mass_dblquad(mean, cov, x0, x1, y0, y1):
    rv = multivariate_normal(mean, cov)
    val, _ = integrate.dblquad(lambda y, x: rv.pdf([x, y]), x0, x1, y0, y1, epsabs=1e-14, epsrel=1e-12)
    return val


RNG = np.random.default_rng(12345)
P_SMALL = RNG.uniform(0.2, 1.0, size=7)


# ------------------------------------------------------------------------------------------------
# lattice law
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("m", [1, 2, 5, 17, 50])
def test_lattice_matches_trinomial_convolution(m):
    p = np.random.default_rng(m).uniform(0.01, 1.0, size=m)
    if m >= 5:
        p[0] = 1.0  # an ε_i = 0 user
    law = M.lattice_logpmf(p)
    assert law.offset == 0 and law.logpmf.shape == (m + 1, m + 1) and law.outside == 0.0
    got = np.exp(law.logpmf)
    want = trinomial_convolution(p)
    assert np.max(np.abs(got - want)) <= 1e-13
    assert abs(got.sum() - 1.0) <= 1e-13
    assert np.all(np.isneginf(law.logpmf[np.add.outer(np.arange(m + 1), np.arange(m + 1)) > m]))


def test_lattice_uniform_and_precomputed_count():
    p = np.full(40, M.clone_probabilities(0.5, 1e-3)[()])
    want = trinomial_convolution(p)
    assert np.max(np.abs(np.exp(M.lattice_logpmf(p).logpmf) - want)) <= 1e-13
    log_c = np.log(poisson_binomial_direct(p))
    law = M.lattice_logpmf(p, log_pmf_count=log_c)
    assert np.max(np.abs(np.exp(law.logpmf) - want)) <= 1e-13


def test_lattice_anti_diagonal_sums_are_the_count_law():
    p = np.random.default_rng(7).uniform(0.05, 0.95, size=300)
    p2 = p[:45]
    law = M.lattice_logpmf(p2)
    P = np.exp(law.logpmf)
    c = np.add.outer(np.arange(46), np.arange(46))
    marg = np.bincount(c.ravel(), weights=P.ravel())[:46]
    assert np.max(np.abs(marg - poisson_binomial_direct(p2))) <= 1e-14


def test_large_window_mass():
    p = M.clone_probabilities(np.random.default_rng(3).uniform(0.05, 2.0, size=9999))
    law = M.lattice_logpmf(p)
    # outside = the count window's Chernoff-bounded tail (≈ e^{-84}) + the 2-D window's 2e-40
    assert law.offset > 0 and law.outside < 1e-30
    assert abs(np.exp(law.logpmf).sum() - 1.0) < 1e-11


# ------------------------------------------------------------------------------------------------
# Gaussian cell masses and the TV bound
# ------------------------------------------------------------------------------------------------


def test_cell_masses_against_dblquad_and_total():
    p = P_SMALL
    mean, cov = gaussian_params(p)
    q, err = M.gaussian_cell_masses(p, -15, 40)
    assert err < 1e-12
    assert abs(q.sum() - 1.0) <= 1e-12  # the window holds all but ~e^{-150} of the Gaussian
    for (i, j) in [(15, 15), (17, 16), (18, 18), (20, 14), (15, 21)]:
        x, y = -15 + i, -15 + j
        ref = cell_mass_dblquad(mean, cov, x - 0.5, x + 0.5, y - 0.5, y + 0.5)
        assert abs(q[i, j] - ref) <= 1e-12
    # on the support window: masses + the Gaussian mass outside all cells = 1 (the outside by scipy)
    law = M.lattice_logpmf(p)
    qs, _ = M.gaussian_cell_masses(p, law.offset, law.logpmf.shape[0])
    lo, hi = law.offset - 0.5, law.offset + law.logpmf.shape[0] - 0.5
    rv = multivariate_normal(mean, cov)
    inside = rv.cdf([hi, hi]) - rv.cdf([lo, hi]) - rv.cdf([hi, lo]) + rv.cdf([lo, lo])
    assert abs(qs.sum() - inside) <= 1e-6  # scipy's mvn cdf is accurate to ~1e-8 only


def test_quadrature_error_bound_is_honest():
    p = np.array([0.9, 0.95, 0.99, 0.97, 0.8])  # strong correlation, small conditional sd
    g = M._matched_gaussian(p)
    edges = np.arange(-2, 8, dtype=np.float64) - 0.5
    exact, _ = M._rect_masses(g, edges, 1.0, edges, 1.0, 1e-16)
    for order in (4, 8, 12):
        nodes, weights = np.polynomial.legendre.leggauss(order)
        # force a low order by a huge budget after monkeypatching the order list
        old = M._QUAD_ORDERS
        try:
            M._QUAD_ORDERS = (order,)
            low, _ = M._rect_masses(g, edges, 1.0, edges, 1.0, 1e300)
        finally:
            M._QUAD_ORDERS = old
        bound = M._quad_error_bound(g, 1.0, 1.0, order)
        assert np.max(np.abs(low - exact)) <= bound + 1e-15


def brute_tv(p):
    """½Σ_supp |P − Q_cell| + ½(1 − Σ_supp Q_cell), Q_cell by scipy dblquad (tiny supports only)."""
    m = len(p)
    mean, cov = gaussian_params(p)
    P = trinomial_convolution(p)
    Q = np.zeros_like(P)
    for a in range(m + 1):
        for b in range(m + 1):
            Q[a, b] = cell_mass_dblquad(mean, cov, a - 0.5, a + 0.5, b - 0.5, b + 0.5)
    return 0.5 * np.abs(P - Q).sum() + 0.5 * (1 - Q.sum())


def test_tv_matches_brute_force():
    p = P_SMALL[:5]
    tau = float(M.lattice_gaussian_tv(p))
    ref = brute_tv(p)
    assert tau >= ref - 1e-11  # an upper bound (up to dblquad's own error)
    assert tau - ref <= 1e-9


def test_tv_range_and_decrease_with_n():
    taus = []
    for n in (10, 30, 100, 300, 1000, 3000):
        p = np.full(n - 1, M.clone_probabilities(1.0)[()])
        tau, parts = M.lattice_gaussian_tv(p, return_parts=True)
        assert 0.0 <= tau <= 1.0
        assert parts["error_allowance"] < 1e-10
        taus.append(float(tau))
    assert all(a > b for a, b in zip(taus, taus[1:]))
    # Berry–Esseen rate: τ·√n roughly constant
    scaled = np.array(taus) * np.sqrt([10, 30, 100, 300, 1000, 3000])
    assert scaled.max() / scaled.min() < 2.0


def test_tv_all_ones_degenerate():
    p = np.ones(20)
    tau = float(M.lattice_gaussian_tv(p))
    # ξ₀ ~ Bin(20, ½) against N(10, 5) discretised: exact TV by hand
    from scipy.stats import binom, norm

    x = np.arange(21)
    q = norm.cdf(x + 0.5, 10, math.sqrt(5)) - norm.cdf(x - 0.5, 10, math.sqrt(5))
    ref = 0.5 * np.abs(binom.pmf(x, 20, 0.5) - q).sum() + 0.5 * (1 - q.sum())
    assert 0 <= tau - ref <= 1e-12


def test_tv_large_n():
    p = M.clone_probabilities(np.full(9999, 0.1), 1e-4)
    tau = float(M.lattice_gaussian_tv(p))
    assert 0 < tau < 0.01


# ------------------------------------------------------------------------------------------------
# the paper's Eq. 14 quantity
# ------------------------------------------------------------------------------------------------


def test_eq14_reproduces_paper_figure():
    # ε₀ = 0.1, δ₀ = 1/n, n = 50 users (49 others): the papers' 0.0206
    n = 50
    p = np.full(n - 1, M.clone_probabilities(0.1, 1.0 / n)[()])
    val = float(M.gspa_eq14(p))
    assert round(val, 4) == 0.0206
    assert abs(val - 0.020576353) < 1e-8
    # sensible: below the largest point mass, and ≈ O(1/n) as the paper remarks
    assert val <= np.exp(M.lattice_logpmf(p).logpmf).max()
    p100 = np.full(99, M.clone_probabilities(0.1, 1.0 / 100)[()])
    assert 0.4 < float(M.gspa_eq14(p100)) / val < 0.6
    # it is not the TV bound
    assert abs(float(M.lattice_gaussian_tv(p)) - val) > 1e-3


def test_eq14_against_brute_force():
    p = P_SMALL[:4]
    mean, cov = gaussian_params(p)
    P = trinomial_convolution(p)
    best = 0.0
    for a in range(5):
        for b in range(5):
            h = cell_mass_dblquad(mean, cov, a, a + 0.5, b, b + 0.5)
            best = max(best, abs(P[a, b] - h))
    assert abs(float(M.gspa_eq14(p)) - best) <= 1e-11


# ------------------------------------------------------------------------------------------------
# E-APES trade-off and (ε, δ)
# ------------------------------------------------------------------------------------------------


def test_mu_reference():
    p = M.clone_probabilities(np.ones(9999))
    assert abs(float(E.eapes_mu(p)) - 0.027271) < 5e-7  # MATH §3.3


def test_tradeoff_properties():
    p = M.clone_probabilities(np.full(999, 0.5))
    mu = float(E.eapes_mu(p))
    a = np.linspace(0, 1, 2001)
    for tau, dm in [(0.0, 0.0), (0.003, 0.0), (0.02, 1e-3), (0.5, 0.1)]:
        t = E.eapes_tradeoff(a, p, tau, dm)
        assert np.all(t <= 1 - a + 1e-15) and np.all(t >= 0)
        assert np.all(np.diff(t) <= 1e-15)
        if tau == 0 and dm == 0:
            assert np.allclose(t, fdp.gaussian_tradeoff(mu, a), atol=1e-15)
        else:
            assert np.all(t <= np.asarray(fdp.gaussian_tradeoff(mu, a)) + 1e-15 + dm)


def numeric_conjugate_delta(p, tau, eps):
    """sup_α [1 − g(α) − e^ε α] on a fine α grid (g: the pure trade-off bound), a lower estimate."""
    mu = float(E.eapes_mu(p))
    a = np.concatenate([np.geomspace(1e-14, 1e-3, 20001), np.linspace(1e-3, 1, 200001)])
    g = np.maximum(np.asarray(fdp.gaussian_tradeoff(mu, np.minimum(a + tau, 1.0))) - tau, 0.0)
    return np.max(1 - g - math.exp(eps) * a)


def test_delta_curve_bounds_and_monotone():
    p = M.clone_probabilities(np.full(2999, 1.0))
    mu = float(E.eapes_mu(p))
    tau = float(M.lattice_gaussian_tv(p))
    eps = np.linspace(0, 1.0, 101)
    for dm in (0.0, 1e-6):
        d = E.eapes_delta(p, tau, dm, eps)
        gd = np.asarray(fdp.gdp_delta(mu, eps))
        assert np.all(d >= gd)  # looser than pure GDP
        assert np.all(d <= dm + (1 - dm) * (gd + (1 + np.exp(eps)) * tau) + 1e-13)
        assert np.all(np.diff(d) <= 0)
    for e in (0.0, 0.05, 0.1, 0.2, 0.5, 2.0, 5.0):
        exact = numeric_conjugate_delta(p, tau, e)
        got = float(E.eapes_delta(p, tau, 0.0, e))
        assert got >= exact - 1e-15  # never below the conversion of the trade-off
        assert got - exact <= 1e-6  # and it is that conversion (the grid is the only gap)
    # the floor: δ never below 1 + τ − G_μ(τ)
    floor = 1 + tau - float(fdp.gaussian_tradeoff(mu, tau))
    assert float(E.eapes_delta(p, tau, 0.0, 50.0)) >= floor


def test_epsilon_inverse():
    p = M.clone_probabilities(np.full(9999, 1.0))
    mu = float(E.eapes_mu(p))
    tau = 0.0017
    deltas = np.array([0.5, 0.012, 0.008, 0.006, 0.0045, 0.004])
    eps = E.eapes_epsilon(p, tau, 1e-6, deltas)
    assert np.all(np.isfinite(eps)) and np.all(np.diff(eps) >= 0)
    assert eps[0] == 0.0 and np.all(eps[1:] > 0)
    back = E.eapes_delta(p, tau, 1e-6, eps)
    assert np.all(back <= deltas)
    pos = eps > 0
    below = E.eapes_delta(p, tau, 1e-6, eps[pos] * (1 - 1e-9))
    assert np.all(below > deltas[pos])
    assert np.all(eps >= np.asarray(fdp.gdp_epsilon(mu, deltas)))
    # below the floor no finite ε is certified
    floor = float(E.eapes_delta(p, tau, 1e-6, 60.0))
    assert np.isinf(E.eapes_epsilon(p, tau, 1e-6, floor * 0.99))
    # τ = 0, δ_max = 0 is plain GDP
    e0 = float(E.eapes_epsilon(p, 0.0, 0.0, 1e-6))
    assert abs(e0 - float(fdp.gdp_epsilon(mu, 1e-6))) <= 1e-9 * e0


def test_end_to_end_n1e4():
    p = M.clone_probabilities(np.full(9999, 1.0))
    tau = float(M.lattice_gaussian_tv(p))
    # δ(0) ≈ 0.0144: a δ of 0.05 needs no ε at all; 0.005 needs a small positive ε
    assert float(E.eapes_epsilon(p, tau, 0.0, 0.05)) == 0.0
    eps = float(E.eapes_epsilon(p, tau, 0.0, 0.005))
    assert 0 < eps < 1
    # but with τ ≈ 1.8e-3 the δ floor 1 + τ − G_μ(τ) ≈ 3.7e-3 rules out small δ altogether
    assert np.isinf(E.eapes_epsilon(p, tau, 0.0, 1e-6))


# ------------------------------------------------------------------------------------------------
# validation
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "call, name",
    [
        (lambda: M.lattice_logpmf([]), "p"),
        (lambda: M.lattice_logpmf([0.5, 0.0]), "p"),
        (lambda: M.lattice_logpmf([0.5, 1.5]), "p"),
        (lambda: M.lattice_logpmf([0.5, np.nan]), "p"),
        (lambda: M.lattice_logpmf([[0.5, 0.5]]), "p"),
        (lambda: M.lattice_gaussian_tv([-0.1]), "p"),
        (lambda: M.gspa_eq14([]), "p"),
        (lambda: M.clone_probabilities(-1.0), "local_epsilons"),
        (lambda: M.clone_probabilities(1.0, 1.0), "local_deltas"),
        (lambda: E.eapes_tradeoff(1.5, [0.5], 0.1, 0.0), "alpha"),
        (lambda: E.eapes_tradeoff(0.5, [0.5], 1.1, 0.0), "tau"),
        (lambda: E.eapes_tradeoff(0.5, [0.5], -0.1, 0.0), "tau"),
        (lambda: E.eapes_tradeoff(0.5, [0.5], 0.1, 1.0), "delta_max"),
        (lambda: E.eapes_delta([0.5], 0.1, 0.0, -1.0), "epsilon"),
        (lambda: E.eapes_epsilon([0.5], 0.1, 0.0, 0.0), "delta"),
        (lambda: E.eapes_epsilon([0.5], 0.1, 0.0, 1.0), "delta"),
        (lambda: E.eapes_epsilon([], 0.1, 0.0, 0.5), "p"),
        (lambda: M.lattice_logpmf([0.5, 0.5], log_pmf_count=[0.0, 0.0, 0.0, 0.0]), "log_pmf_count"),
    ],
)
def test_bad_input(call, name):
    with pytest.raises(ValueError, match=name):
        call()


# ------------------------------------------------------------------------------------------------
# the JAX kernels against the previous numpy/scipy algorithm, written out directly here
# ------------------------------------------------------------------------------------------------


def numpy_rect_masses(p, x_lo, wx, y_lo, wy, order):
    """Gauss–Legendre (order) in x of φ_X(u)·[Φ((y₁ − E[Y|u])/s) − Φ((y₀ − E[Y|u])/s)], scipy ndtr, numpy."""
    from scipy.special import ndtr

    mean, cov = gaussian_params(p)
    var, c = cov[0, 0], cov[0, 1]
    sd, slope = math.sqrt(var), c / var
    s = math.sqrt(np.sum(p * (1 - p)) / 2 * (var - c) / var)
    nodes, weights = np.polynomial.legendre.leggauss(order)
    u = x_lo[:, None] + wx / 2 * (nodes[None, :] + 1)
    w = wx / 2 * weights[None, :] * np.exp(-0.5 * ((u - mean[0]) / sd) ** 2) / (sd * math.sqrt(2 * math.pi))
    cm = mean[0] + slope * (u - mean[0])
    lo = (y_lo[None, None, :] - cm[:, :, None]) / s
    hi = (y_lo[None, None, :] + wy - cm[:, :, None]) / s
    diff = np.where(lo > 0, ndtr(-lo) - ndtr(-hi), ndtr(hi) - ndtr(lo))
    return np.einsum("ig,igj->ij", w, diff)


GRID = [np.array([0.3]), P_SMALL, np.random.default_rng(5).uniform(0.2, 1.0, 50),
        M.clone_probabilities(np.random.default_rng(6).uniform(0.0, 3.0, 150), 1e-3)]


@pytest.mark.parametrize("k", range(len(GRID)))
def test_kernels_equal_direct_numpy(k):
    """TV parts, cell masses and Eq. 14 equal a plain numpy/scipy evaluation of the same formulas (the
    pre-JAX implementation's algorithm) on the full support, to rounding."""
    p = GRID[k]
    law = M.lattice_logpmf(p)
    lo, size = law.offset, law.logpmf.shape[0]  # the whole support except for m = 150
    P = trinomial_convolution(p)[lo : lo + size, lo : lo + size]
    assert np.max(np.abs(np.exp(law.logpmf) - P)) <= 1e-13
    g = M._matched_gaussian(p)
    order, _ = M._quad_order(g, 1.0, 1.0, size**2, 1e-13)
    edges = lo + np.arange(size) - 0.5
    Q = numpy_rect_masses(p, edges, 1.0, edges, 1.0, order)
    q, q_err = M.gaussian_cell_masses(p, lo, size)
    assert np.max(np.abs(q - Q)) <= 1e-16 + 1e-14 * np.abs(Q).max()
    tau, parts = M.lattice_gaussian_tv(p, return_parts=True)
    assert parts["window"] == (lo, size)
    body, q_out = 0.5 * np.abs(P - Q).sum(), max(0.0, 1.0 - Q.sum())
    assert abs(parts["half_abs_sum"] - body) <= 1e-14
    assert abs(parts["gauss_outside"] - q_out) <= 1e-14
    assert parts["error_allowance"] >= q_err  # the allowance still covers the cell masses' own bound
    computed = body + 0.5 * q_out + 0.5 * law.outside
    assert computed <= float(tau) <= computed + 1e-11  # the allowance on top, and nothing more
    # Eq. 14: ½ × ½ boxes with corners on the lattice
    order14, _ = M._quad_order(g, 0.5, 0.5, size**2, 1e-15)
    corners = lo + np.arange(size, dtype=np.float64)
    h = numpy_rect_masses(p, corners, 0.5, corners, 0.5, order14)
    assert abs(float(M.gspa_eq14(p)) - np.max(np.abs(P - h))) <= 1e-14


def numpy_eapes_delta(mu, tau, dm, eps):
    """δ(ε) of eapes_delta written with scipy (no rounding allowances): δ_max + (1 − δ_max)·U(ε)."""
    from scipy.stats import norm

    gd = norm.cdf(-eps / mu + mu / 2) - np.exp(eps) * norm.cdf(-eps / mu - mu / 2)
    b_star = norm.cdf(-eps / mu - mu / 2)
    g_tau = norm.cdf(norm.isf(tau) - mu) if tau > 0 else 1.0
    u = np.where(b_star >= tau, gd + (1 + np.exp(eps)) * tau, 1 + tau - g_tau)
    return dm + (1 - dm) * np.minimum(u, 1.0)


def test_eapes_delta_and_epsilon_equal_direct_scipy():
    from scipy.optimize import brentq

    p = M.clone_probabilities(np.full(4999, 0.8), 1e-5)
    mu = float(E.eapes_mu(p))
    eps = np.linspace(0.0, 2.0, 41)
    for tau, dm in [(0.0, 0.0), (1e-3, 0.0), (2e-3, 1e-6), (0.05, 1e-3)]:
        want = numpy_eapes_delta(mu, tau, dm, eps)
        got = E.eapes_delta(p, tau, dm, eps)
        # the direct Φ difference has an absolute rounding error of a few 1e-17 (here δ goes down to 1e-60)
        assert np.all(got >= want - 1e-16) and np.all(got <= want * (1 + 1e-12) + 1e-16)
        for delta in (0.3, 0.02, 4e-3, 1e-4):
            e = float(E.eapes_epsilon(p, tau, dm, delta))
            gap = lambda x: numpy_eapes_delta(mu, tau, dm, x) - delta
            if gap(0.0) <= 0:
                assert e == 0.0
            elif gap(50.0) > 0:
                assert np.isinf(e)  # below the δ floor
            else:
                root = brentq(gap, 0.0, 50.0, xtol=1e-15, rtol=1e-13)
                assert root <= e <= root * (1 + 1e-9) + 1e-12


def test_sweep_reuses_compiled_programs():
    """A second p of similar size (a different window, the same padded width) and a different number of
    ε values (the same bucket) do not compile again."""
    rng = np.random.default_rng(11)
    p1 = np.full(2000, 0.5)
    p2 = rng.uniform(0.45, 0.55, 2060)
    M.lattice_gaussian_tv(p1)
    M.gspa_eq14(p1)
    E.eapes_epsilon(p1, 1e-3, 0.0, [1e-2, 1e-3, 1e-4])
    sizes = (M._window_kernel._cache_size(), E._epsilon_jit._cache_size())
    assert M.lattice_gaussian_tv(p2, return_parts=True)[1]["window"] != M.lattice_gaussian_tv(p1, return_parts=True)[1]["window"]
    M.gspa_eq14(p2)
    E.eapes_epsilon(p2, 2e-3, 1e-6, [5e-2, 1e-2, 1e-3, 1e-4, 1e-5])
    assert (M._window_kernel._cache_size(), E._epsilon_jit._cache_size()) == sizes


@pytest.mark.parametrize(
    "kwargs, name",
    [({"offset": 0.5, "size": 4}, "offset"), ({"offset": 0, "size": 0}, "size"), ({"offset": 0, "size": 2.5}, "size")],
)
def test_bad_cell_window(kwargs, name):
    with pytest.raises(ValueError, match=name):
        M.gaussian_cell_masses([0.5, 0.6], **kwargs)
