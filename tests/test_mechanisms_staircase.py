"""Tests for jaxpriv.mechanisms.staircase (MATH §4.2): density, CDF and moments against a plain numpy
implementation of the MATH §4.2 density integrated piece by piece, the pure-ε guarantee on a grid, the exact
RDP curve against piecewise integration of ∫p^α q^{1−α} (mpmath sums) including the worst-shift claim, the
sampler against the exact law (χ² on the staircase cells, P(|X| < Δ) and KS) with a check that the
UDP-FL off-by-one sampler fails the same test, UDP-FL's printed formula, and one ValueError per bad input.
"""

import math
import re

import jax
import jax.numpy as jnp
import mpmath as mp
import numpy as np
import pytest
from scipy import stats

from jaxpriv.mechanisms import staircase

PARAMS = [(0.05, None), (0.5, 0.0), (1.0, None), (1.0, 0.2), (1.0, 0.5), (1.0, 0.8), (1.0, 1.0), (3.0, None)]
IDS = [f"eps={e:g}-gamma={'opt' if g is None else g}" for e, g in PARAMS]


@pytest.fixture(autouse=True)
def x64_stays_off():
    assert not jax.config.jax_enable_x64
    yield
    assert not jax.config.jax_enable_x64


def gamma_of(eps, gamma):
    return 1.0 / (1.0 + math.exp(eps / 2)) if gamma is None else gamma


# ------------------------------------------------------------------------------------------------
# Oracle: the MATH §4.2 density, written independently, and its exact piecewise integrals
# ------------------------------------------------------------------------------------------------


def spec_log_density(x, eps, gamma, delta=1.0):
    b = math.exp(-eps)
    a = (1 - b) / (2 * delta * (gamma + b * (1 - gamma)))
    y = np.abs(np.asarray(x, dtype=np.float64)) / delta
    k = np.floor(y)
    in_first = (y - k) < gamma
    return math.log(a) + np.where(in_first, k, k + 1) * -eps


def pieces(eps, gamma, delta=1.0, shift=0.0, tail=1e-22):
    """Breakpoints of f(x) and f(x − shift) over the range holding all but `tail` of the mass."""
    periods = int(math.ceil(math.log(1 / tail) / eps)) + 2
    j = np.arange(periods)
    jumps = np.concatenate([j * delta, (j + gamma) * delta])
    points = np.concatenate([jumps, -jumps, jumps + shift, -jumps + shift])
    return np.unique(points[np.abs(points) <= periods * delta])


def moment_oracle(eps, gamma, power, delta=1.0):
    """∫ |x|^power f(x) dx, exact on each piece (f is constant there)."""
    pts = pieces(eps, gamma, delta)
    lo, hi = pts[:-1], pts[1:]
    dens = np.exp(spec_log_density((lo + hi) / 2, eps, gamma, delta))
    integral = (np.abs(hi) ** (power + 1) * np.sign(hi) - np.abs(lo) ** (power + 1) * np.sign(lo)) / (power + 1)
    return math.fsum(dens * integral)


def rdp_oracle(eps, gamma, alpha, shift=1.0, reverse=False):
    """D_α(f ‖ f(· − shift)) (or the reverse) as Σ_pieces width·p^α q^{1−α}, at 30 digits."""
    pts = pieces(eps, gamma, 1.0, shift)
    mid, width = (pts[:-1] + pts[1:]) / 2, np.diff(pts)
    lp, lq = spec_log_density(mid, eps, gamma), spec_log_density(mid - shift, eps, gamma)
    if reverse:
        lp, lq = lq, lp
    with mp.workdps(30):
        a = mp.mpf(alpha)
        total = mp.fsum(mp.mpf(w) * mp.exp(a * mp.mpf(u) + (1 - a) * mp.mpf(v)) for w, u, v in zip(width, lp, lq))
        return float(mp.log(total) / (a - 1))


# ------------------------------------------------------------------------------------------------
# Density, CDF, moments
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("eps,gamma", PARAMS, ids=IDS)
def test_log_prob_is_the_spec_density_and_integrates_to_one(eps, gamma):
    g = gamma_of(eps, gamma)
    x = np.linspace(-7.3, 7.3, 2001) * 1.7
    got = np.asarray(staircase.log_prob(x, eps, gamma, sensitivity=1.7))
    np.testing.assert_allclose(got, spec_log_density(x, eps, g, 1.7), rtol=1e-13, atol=1e-13)
    assert moment_oracle(eps, g, 0, 1.7) == pytest.approx(1.0, abs=1e-13)


@pytest.mark.parametrize("eps,gamma", PARAMS, ids=IDS)
def test_cdf_matches_the_integral_of_the_density(eps, gamma):
    g = gamma_of(eps, gamma)
    pts = pieces(eps, g, 2.0)
    lo, hi = pts[:-1], pts[1:]
    mass = np.exp(spec_log_density((lo + hi) / 2, eps, g, 2.0)) * (hi - lo)
    below = np.concatenate([[0.0], np.cumsum(mass)])  # F at each breakpoint (mass left of the range < 1e-22)
    x = np.concatenate([np.linspace(-30, 30, 601), [-3.3, -0.1, 0.0, 0.1, 2.9]])
    j = np.searchsorted(pts, x, side="right") - 1  # the piece holding x
    want = below[j] + np.exp(spec_log_density(x, eps, g, 2.0)) * (x - pts[j])
    got = np.asarray(staircase.cdf(x, eps, gamma, sensitivity=2.0))
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(np.asarray(staircase.cdf(-x, eps, gamma, 2.0)), 1 - got, atol=1e-15)
    assert float(staircase.cdf(-np.inf, eps, gamma)) == 0.0 and float(staircase.cdf(np.inf, eps, gamma)) == 1.0


def test_cdf_deep_tail_has_relative_precision():
    """F(−x) = ½b^k·(…) far out: computed as a product of positive terms, not 1 − (1 − tiny)."""
    got = float(staircase.cdf(-200.0, 1.0, 0.3))
    b = math.exp(-1.0)
    a1 = (1 - b) / (2 * (0.3 + b * 0.7))
    assert got == pytest.approx(a1 * b**200 * (0.3 + b / (1 - b)), rel=1e-12)


@pytest.mark.parametrize("eps,gamma", PARAMS, ids=IDS)
def test_variance_and_mean_match_summation(eps, gamma):
    g = gamma_of(eps, gamma)
    assert float(staircase.variance(eps, gamma, 0.7)) == pytest.approx(moment_oracle(eps, g, 2, 0.7), rel=1e-12)
    assert float(staircase.mean(eps, gamma, 0.7)) == 0.0


def test_optimal_gamma_minimises_expected_magnitude():
    """γ* = 1/(1+e^{ε/2}) minimises E|X|, to Δ e^{ε/2}/(e^ε − 1) (Geng & Viswanath; UDP-FL's Lemma)."""
    for eps in (0.1, 1.0, 3.0):
        star = float(staircase.optimal_gamma(eps))
        assert star == pytest.approx(gamma_of(eps, None), rel=1e-15)
        at_star = moment_oracle(eps, star, 1)
        assert at_star == pytest.approx(math.exp(eps / 2) / math.expm1(eps), rel=1e-12)
        assert all(moment_oracle(eps, g, 1) >= at_star for g in np.linspace(0, 1, 41))


# ------------------------------------------------------------------------------------------------
# Privacy
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("eps,gamma", PARAMS, ids=IDS)
def test_worst_log_ratio_on_a_grid_is_epsilon(eps, gamma):
    # x off the jump points (a grid point exactly on one is a measure-zero rounding artifact)
    x = (np.linspace(-6.0, 6.0, 1201)[:, None] + math.pi * 1e-4) * 1.3
    shift = np.linspace(-1.0, 1.0, 201)[None, :] * 1.3
    ratio = np.asarray(staircase.log_prob(x, eps, gamma, 1.3)) - np.asarray(staircase.log_prob(x - shift, eps, gamma, 1.3))
    worst = np.abs(ratio).max()
    guarantee = float(staircase.epsilon(eps, gamma, 1.3))
    assert guarantee == eps
    assert worst <= guarantee * (1 + 1e-12) and worst >= guarantee * (1 - 1e-12)


RDP_ORDERS = np.array([1.01, 1.5, 2.0, 7.5, 64.0, 1024.0])


@pytest.mark.parametrize("eps,gamma", PARAMS, ids=IDS)
def test_rdp_matches_piecewise_integration(eps, gamma):
    g = gamma_of(eps, gamma)
    got = np.asarray(staircase.rdp(eps, gamma, RDP_ORDERS))
    want = np.array([rdp_oracle(eps, g, a) for a in RDP_ORDERS])
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=0)
    reverse = np.array([rdp_oracle(eps, g, a, reverse=True) for a in RDP_ORDERS[:3]])
    np.testing.assert_allclose(got[:3], reverse, rtol=1e-9, atol=0)  # symmetric: both directions agree
    assert np.all(np.diff(got) > 0) and np.all(got <= eps)  # increasing in α, below the pure ε


@pytest.mark.parametrize("eps,gamma", [(0.5, 0.1), (1.0, None), (1.0, 0.5), (2.0, 0.75)])
def test_shift_delta_is_the_worst_shift(eps, gamma):
    g = gamma_of(eps, gamma)
    at_delta = np.asarray(staircase.rdp(eps, gamma, [1.5, 4.0]))
    for shift in np.linspace(0.05, 1.0, 20):
        for k, alpha in enumerate((1.5, 4.0)):
            assert rdp_oracle(eps, g, alpha, shift=shift) <= at_delta[k] * (1 + 1e-12)


def test_rdp_broadcasts_and_does_not_depend_on_sensitivity():
    eps = np.array([0.3, 1.0, 2.0])[:, None]
    gamma = np.array([0.1, 0.6])
    got = np.asarray(staircase.rdp(eps, gamma, [2.0, 3.0]))
    assert got.shape == (3, 2, 2)
    np.testing.assert_array_equal(got[1, 0], np.asarray(staircase.rdp(1.0, 0.1, [2.0, 3.0])))
    np.testing.assert_array_equal(got, np.asarray(staircase.rdp(eps, gamma, [2.0, 3.0], sensitivity=5.0)))


def test_udpfl_printed_formula_is_not_a_renyi_divergence():
    """The printed value exceeds the pure ε (impossible for an RDP of an ε-DP mechanism) and is far from
    both the exact ρ(α) and the moment e^{(α−1)ρ}; the docstring's table is reproduced."""
    table = [(0.1, 2.0, 1.2971, 0.0099474), (1.0, 2.0, 2.3994, 0.71058), (1.0, 10.0, 6.68e3, 0.95985), (4.0, 32.0, 1.82e54, 3.9977)]
    for eps, alpha, printed_want, exact_want in table:
        star = float(staircase.optimal_gamma(eps))
        printed = float(staircase.udpfl_printed_rdp(eps, star, [alpha])[0])
        exact = float(staircase.rdp(eps, None, [alpha])[0])
        assert printed == pytest.approx(printed_want, rel=1e-3) and exact == pytest.approx(exact_want, rel=1e-4)
        assert exact <= eps < printed
        moment = math.exp((alpha - 1) * exact)
        assert printed > 1.1 * moment


# ------------------------------------------------------------------------------------------------
# Sampler
# ------------------------------------------------------------------------------------------------


def cell_test(draws, eps, gamma, delta=1.0, cells=40):
    """χ² of |X|/Δ over the staircase cells [k, k+γ), [k+γ, k+1) (k < cells) and the tail, against the
    exact masses 2a'γb^k and 2a'(1−γ)b^{k+1}; returns (p-value, observed P(|X| < Δ))."""
    b = math.exp(-eps)
    a1 = (1 - b) / (2 * (gamma + b * (1 - gamma)))
    k = np.arange(cells)
    probs = np.stack([2 * a1 * gamma * b**k, 2 * a1 * (1 - gamma) * b ** (k + 1)], axis=1).reshape(-1)
    probs = np.append(probs, b**cells)
    edges = np.stack([k, k + gamma], axis=1).reshape(-1)
    u = np.abs(np.asarray(draws, dtype=np.float64)) / delta
    idx = np.searchsorted(edges, u, side="right") - 1
    idx = np.where(u >= cells, probs.size - 1, idx)
    idx = np.where(u < 0, 0, idx)  # a negative magnitude cannot happen; keep it visible in cell 0
    observed = np.bincount(idx, minlength=probs.size)
    keep = probs * u.size >= 5  # χ² needs expected counts ≥ 5: merge the rest into the last kept cell
    exp_counts = probs * u.size
    obs = np.append(observed[keep], observed[~keep].sum())
    expc = np.append(exp_counts[keep], exp_counts[~keep].sum())
    obs, expc = obs[expc > 0], expc[expc > 0]
    p_value = stats.chisquare(obs, expc * obs.sum() / expc.sum()).pvalue
    return p_value, float(np.mean(u < 1.0))


def off_by_one_sampler(rng, eps, gamma, n):
    """The UDP-FL repository's sampler: a 0-based geometric with 1 subtracted again."""
    b = math.exp(-eps)
    g = rng.geometric(1 - b, n) - 1  # numpy's geometric is 1-based: this is the 0-based G
    g = g - 1  # the off-by-one
    u = rng.uniform(size=n)
    first = rng.uniform(size=n) < gamma / (gamma + (1 - gamma) * b)
    mag = np.where(first, g + gamma * u, g + gamma + (1 - gamma) * u)
    return np.where(rng.uniform(size=n) < 0.5, -mag, mag)


N_DRAWS = 1_000_000


@pytest.mark.parametrize("eps,gamma", [(0.5, None), (1.0, 0.2), (1.0, 0.5), (2.0, 0.9), (0.3, 0.0), (1.0, 1.0)])
def test_sampler_matches_the_exact_law_and_off_by_one_fails(eps, gamma):
    g = gamma_of(eps, gamma)
    draws = np.asarray(staircase.sample(jax.random.key(11), eps, gamma, (N_DRAWS,)))
    assert draws.dtype == np.float32
    p_value, inside = cell_test(draws, eps, g)
    assert p_value > 1e-4, p_value
    # P(|X| < Δ) = 1 − b exactly; the off-by-one sampler gives 1 − b²
    se = math.sqrt((1 - math.exp(-eps)) * math.exp(-eps) / N_DRAWS)
    assert abs(inside - (1 - math.exp(-eps))) < 5 * se
    assert abs(np.mean(draws > 0) - 0.5) < 5 * 0.5 / math.sqrt(N_DRAWS)
    bad = off_by_one_sampler(np.random.default_rng(3), eps, g, N_DRAWS)
    bad_p, bad_inside = cell_test(bad, eps, g)
    assert bad_p < 1e-12 and abs(bad_inside - (1 - math.exp(-eps))) > 50 * se


def test_sampler_ks_against_cdf_and_variance():
    eps, gamma = 0.7, None
    draws = np.asarray(staircase.sample(jax.random.key(5), eps, gamma, (200_000,)), dtype=np.float64)
    ks = stats.kstest(draws, lambda x: np.asarray(staircase.cdf(x, eps, gamma)))
    assert ks.pvalue > 1e-3
    var = float(staircase.variance(eps, gamma))
    fourth = moment_oracle(eps, gamma_of(eps, gamma), 4)
    assert abs(draws.var() - var) < 5 * math.sqrt((fourth - var**2) / draws.size)


def test_sampler_dtypes_shapes_and_per_element_parameters():
    key = jax.random.key(0)
    with jax.enable_x64(True):
        assert staircase.sample(key, 1.0, shape=(4,)).dtype == jnp.float64
    assert staircase.sample(key, 1.0, shape=(4,), dtype=jnp.bfloat16).dtype == jnp.bfloat16
    eps = np.array([0.2, 3.0])
    draws = np.asarray(staircase.sample(key, eps, None, (200_000, 2), sensitivity=np.array([1.0, 4.0])))
    assert draws.shape == (200_000, 2)
    want = np.asarray(staircase.variance(eps, None, np.array([1.0, 4.0])))
    np.testing.assert_allclose(draws.var(axis=0), want, rtol=0.03)
    assert staircase.sample(key, eps).shape == (2,)  # default shape: the parameters'
    traced = jax.jit(lambda k, e: staircase.sample(k, e, None, (1000,)))(key, 1.0)
    np.testing.assert_array_equal(np.asarray(traced), np.asarray(staircase.sample(key, 1.0, None, (1000,))))


# ------------------------------------------------------------------------------------------------
# Bad input
# ------------------------------------------------------------------------------------------------

KEY = jax.random.key(0)


@pytest.mark.parametrize(
    "call,match",
    [
        (lambda: staircase.log_prob(0.0, 0.0, 0.3), "epsilon"),
        (lambda: staircase.log_prob(0.0, -1.0, 0.3), "epsilon"),
        (lambda: staircase.log_prob(0.0, 1.0, 1.5), "gamma"),
        (lambda: staircase.log_prob(0.0, 1.0, -0.1), "gamma"),
        (lambda: staircase.log_prob(0.0, 1.0, 0.3, sensitivity=0.0), "sensitivity"),
        (lambda: staircase.log_prob(np.nan, 1.0, 0.3), "x"),
        (lambda: staircase.log_prob(np.zeros(3), np.ones(2), 0.3), "shapes"),
        (lambda: staircase.cdf(0.0, np.inf, 0.3), "epsilon"),
        (lambda: staircase.cdf(np.zeros(3), 1.0, np.full(2, 0.3)), "shapes"),
        (lambda: staircase.sample(KEY, 0.0, 0.3, (3,)), "epsilon"),
        (lambda: staircase.sample(KEY, 1.0, 2.0, (3,)), "gamma"),
        (lambda: staircase.sample(KEY, 1.0, 0.3, (3,), sensitivity=-1.0), "sensitivity"),
        (lambda: staircase.sample(KEY, np.ones(2), 0.3, (3,)), "shapes"),
        (lambda: staircase.sample(KEY, 1.0, 0.3, (3,), dtype=jnp.int32), "dtype"),
        (lambda: staircase.variance(1.0, 1.01), "gamma"),
        (lambda: staircase.mean(-1.0), "epsilon"),
        (lambda: staircase.epsilon(1.0, 0.3, sensitivity=0.0), "sensitivity"),
        (lambda: staircase.optimal_gamma(0.0), "epsilon"),
        (lambda: staircase.rdp(1.0, 0.3, [1.0]), "orders"),
        (lambda: staircase.rdp(1.0, 0.3), "orders"),
        (lambda: staircase.rdp(0.0, 0.3, [2.0]), "epsilon"),
        (lambda: staircase.rdp(1.0, 1.2, [2.0]), "gamma"),
        (lambda: staircase.rdp(np.ones(2), np.full(3, 0.3), [2.0]), "shapes"),
        (lambda: staircase.udpfl_printed_rdp(1.0, 0.3, [0.5]), "orders"),
    ],
)
def test_bad_input_raises_value_error(call, match):
    with pytest.raises(ValueError, match=match):
        call()


# ------------------------------------------------------------------------------------------------
# shifted and per-coordinate (L1) curves
# ------------------------------------------------------------------------------------------------


def staircase_renyi_exact(eps, gamma, shift, alpha):
    """D_α(f(· − t) ‖ f) by summing over the intervals on which both densities are constant."""
    k = np.arange(int(80 / eps) + 5)  # the mass beyond is < e^{-80}
    jumps = np.concatenate([k, k + gamma])
    points = np.unique(np.concatenate([jumps, -jumps, jumps + shift, -jumps + shift]))
    mid = (points[1:] + points[:-1]) / 2
    width = np.diff(points)
    log_p = np.asarray(staircase.log_prob(mid - shift, eps, gamma))
    log_q = np.asarray(staircase.log_prob(mid, eps, gamma))
    terms = np.log(width) + alpha * log_p + (1 - alpha) * log_q
    return float(np.logaddexp.reduce(terms) / (alpha - 1))


@pytest.mark.parametrize("eps", [0.1, 1.0, 3.0])
@pytest.mark.parametrize("gamma", [None, 0.1, 0.5])
def test_shifted_curve_matches_exact_integration(eps, gamma):
    g = float(staircase.optimal_gamma(eps)) if gamma is None else gamma
    orders = np.array([1.5, 2.0, 5.0, 20.0])
    shifts = np.array([0.0, 0.05, 0.2, 0.5, 0.8, 1.0])
    got = staircase.rdp_shift(eps, shifts[:, None], gamma, orders=orders)[:, 0, :]
    for i, t in enumerate(shifts):
        want = [staircase_renyi_exact(eps, g, t, a) for a in orders]
        np.testing.assert_allclose(got[i], want, rtol=1e-9, atol=1e-13)  # the oracle sums ~10³ terms in float64


def test_shifted_curve_is_concave_so_spreading_costs_more():
    orders = np.array([2.0, 8.0])
    t = np.linspace(0, 1, 201)
    rho = staircase.rdp_shift(1.0, t, orders=orders)  # (201, 2)
    assert np.all(np.diff(rho, 2, axis=0) <= 1e-14)
    l1 = staircase.rdp_l1(1.0, np.array([1, 2, 10, 1000]), orders=orders)
    np.testing.assert_allclose(l1[0], staircase.rdp(1.0, orders=orders), rtol=1e-13)
    assert np.all(np.diff(l1, axis=0) > 0)  # more coordinates, larger worst case
    np.testing.assert_allclose(l1[2], 10 * staircase.rdp_shift(1.0, 0.1, orders=orders), rtol=1e-13)


def test_l1_curve_bounds_random_shift_vectors():
    rng = np.random.default_rng(3)
    d, orders = 12, np.array([2.0, 6.0])
    bound = staircase.rdp_l1(0.7, d, orders=orders)
    for _ in range(50):
        v = rng.dirichlet(np.full(d, rng.uniform(0.1, 5)))  # ‖v‖₁ = Δ = 1
        total = staircase.rdp_shift(0.7, v, orders=orders).sum(axis=0)
        assert np.all(total <= bound * (1 + 1e-12))


@pytest.mark.parametrize("call, name", [
    (lambda: staircase.rdp_shift(1.0, 0.5, 0.7, orders=[2.0]), "gamma"),
    (lambda: staircase.rdp_shift(1.0, 1.5, orders=[2.0]), "shift"),
    (lambda: staircase.rdp_shift(1.0, -0.1, orders=[2.0]), "shift"),
    (lambda: staircase.rdp_shift(1.0, 0.5), "orders"),
    (lambda: staircase.rdp_l1(1.0, 0, orders=[2.0]), "dimension"),
    (lambda: staircase.rdp_l1(1.0, 2.5, orders=[2.0]), "dimension"),
    (lambda: staircase.rdp_l1(0.0, 2, orders=[2.0]), "epsilon"),
    (lambda: staircase.rdp_l1(1.0, 2), "orders"),
    (lambda: staircase.rdp_shift(0.0, 0.5, orders=[2.0]), "epsilon"),
    (lambda: staircase.rdp_shift(1.0, 0.5, orders=[2.0], sensitivity=0.0), "sensitivity"),
    (lambda: staircase.rdp_l1(1.0, 2, gamma=1.5, orders=[2.0]), "gamma"),
    (lambda: staircase.rdp_l1(1.0, True, orders=[2.0]), "dimension"),
])
def test_shifted_curves_bad_input(call, name):
    with pytest.raises(ValueError, match=name):
        call()


def test_sample_with_concrete_parameters_inside_a_callers_jit():
    key = jax.random.key(0)
    inside = jax.jit(lambda k: staircase.sample(k, 1.0, None, (1000,), sensitivity=0.5))(key)
    np.testing.assert_array_equal(inside, staircase.sample(key, 1.0, None, (1000,), sensitivity=0.5))


@pytest.mark.parametrize("epsilon, gamma, message", [(0.0, 0.3, "epsilon must lie in (0.0, inf)"),
                                                     (1.0, 1.5, "gamma must lie in [0.0, 1.0]"),
                                                     (float("nan"), 0.3, "epsilon contains NaN")])
def test_privacy_loss_atoms_rejects_bad_input(epsilon, gamma, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        staircase.privacy_loss_atoms(epsilon, gamma)
