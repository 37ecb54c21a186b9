"""Tests for jaxpriv.shuffle.bounds: every closed form against a direct numpy/math evaluation written
here, the APES echo sum against an O(n²) oracle, the MATH/paper reference numbers, validity warnings,
float64 with x64 off, speed at n = 10⁶, and one ValueError per bad argument."""

import math
import warnings

import jax
import jax.numpy as jnp
import mpmath as mp
import numpy as np
import pytest

from scipy.special import logsumexp
from scipy.stats import binom

from jaxpriv import fdp, rdp
from jaxpriv.shuffle import bounds, clones_epsilon

mp.mp.dps = 40


@pytest.fixture(autouse=True)
def x64_flag_untouched():
    """No call may flip the caller's global x64 flag (the suite runs with it off by default)."""
    before = jax.config.jax_enable_x64
    yield
    assert jax.config.jax_enable_x64 == before


# ------------------------------------------------------------------------------------------------
# direct evaluations (the formulas exactly as printed, numpy/math)
# ------------------------------------------------------------------------------------------------


def fmt22_direct(eps0, n, delta):
    e = mp.exp(mp.mpf(eps0))
    n, delta = mp.mpf(n), mp.mpf(delta)
    return float(mp.log(1 + (e - 1) / (e + 1) * (8 * mp.sqrt(e * mp.log(4 / delta)) / mp.sqrt(n) + 8 * e / n)))


def fmt22_valid(eps0, n, delta):
    return eps0 <= math.log(n / (16 * math.log(2 / delta)))


def erlingsson_direct(eps0, n, delta):
    return float(12 * mp.mpf(eps0) * mp.sqrt(mp.log(1 / mp.mpf(delta)) / n))


def echo_matrix(e):
    """p_ij = (ε_i/ε_j)·(1−e^{−ε_j})/(1−e^{−ε_i})·e^{−max(ε_i, ε_j)}, all n² entries (numpy)."""
    ei, ej = e[:, None], e[None, :]
    return (ei / ej) * (1 - np.exp(-ej)) / (1 - np.exp(-ei)) * np.exp(-np.maximum(ei, ej))


def echo_sum_oracle(e, target=None):
    """O(n²) S = Σ_{i≠t} Σ_j p_ij / n; t = the worst target (largest row) unless given."""
    rows = echo_matrix(np.asarray(e, dtype=np.float64)).sum(axis=1)
    excluded = rows.max() if target is None else rows[target]
    return (rows.sum() - excluded) / len(e)


def apes_direct(s, eps_star, delta_s):
    e, s, delta_s = mp.exp(mp.mpf(eps_star)), mp.mpf(s), mp.mpf(delta_s)
    p = (e - 1) / (e + 1)
    eps_c = mp.log(1 + p * (8 * mp.sqrt(mp.log(4 / delta_s)) / mp.sqrt(s) + 8 / s))
    return float(eps_c), float(p * delta_s)


def sapes_direct(eps_c, delta_c, b, delta_prime):
    e = mp.mpf(eps_c)
    eps_uc = e * mp.sqrt(4 * b * mp.log(1 / mp.mpf(delta_prime))) + 2 * b * e * (mp.exp(e) - 1)
    return float(eps_uc), float(mp.mpf(delta_prime) + 2 * b * mp.mpf(delta_c))


def gspa_direct(eps, deltas):
    w = (1 - deltas) / (1 + np.exp(eps))
    return math.sqrt(2 / (w.sum() - w.max()))


def girgis_direct(eps0, n, alpha, upper):
    gap = (mp.exp(mp.mpf(eps0)) - 1) ** 2
    term = 4 * gap / n if upper else gap / (n * mp.exp(mp.mpf(eps0)))
    return float(mp.log(1 + math.comb(alpha, 2) * term) / (alpha - 1))


def budgets(n, seed, ties=False):
    rng = np.random.default_rng(seed)
    e = rng.uniform(0.05, 3.0, n)
    if ties:
        e = np.round(e, 1)  # ~30 distinct values: many exact ties
        e[: n // 4] = e[-1]
    return rng.permutation(e)  # unsorted


# ------------------------------------------------------------------------------------------------
# FMT22 closed form / UniS
# ------------------------------------------------------------------------------------------------


def test_fmt22_matches_direct_formula_and_broadcasts():
    eps0 = np.array([0.1, 0.5, 1.0, 2.0])[:, None, None]
    n = np.array([1e3, 1e4, 1e6])[None, :, None]
    delta = np.array([1e-8, 1e-5])[None, None, :]
    with pytest.warns(RuntimeWarning, match="fails for 2 of 24 entries"):  # ε₀ = 2 at n = 10³
        got = bounds.fmt22_closed_form(eps0, n, delta)
    assert got.shape == (4, 3, 2)
    for idx in np.ndindex(got.shape):
        e0, nn, d = float(eps0[idx[0], 0, 0]), float(n[0, idx[1], 0]), float(delta[0, 0, idx[2]])
        if fmt22_valid(e0, nn, d):
            want = fmt22_direct(e0, nn, d)
            assert got[idx] == pytest.approx(want, rel=1e-13)
            assert got[idx] >= want  # rounded up, never below the formula
        else:
            assert got[idx] == np.inf


def test_unis_closed_form_paper_value():
    # MATH §3.2: the closed form gives ≈ 0.24 for UniS (n = 10⁴, δ = 1e-8, ε₀ = max ε = 1).
    got = float(bounds.fmt22_closed_form(1.0, 10_000, 1e-8))
    assert got == pytest.approx(0.240804929, rel=1e-8)
    assert got == pytest.approx(fmt22_direct(1.0, 10_000, 1e-8), rel=1e-13)


def test_fmt22_validity_boundary_gives_inf_and_warning():
    n, delta = 10_000, 1e-8
    edge = math.log(n / (16 * math.log(2 / delta)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # inside the region: no warning at all
        assert np.isfinite(bounds.fmt22_closed_form(edge * (1 - 1e-12), n, delta))
    with pytest.warns(RuntimeWarning, match=r"ε₀ ≤ log\(n / \(16 log\(2/δ\)\)\)"):
        got = bounds.fmt22_closed_form([1.0, edge * (1 + 1e-12)], n, delta)
    assert np.isfinite(got[0]) and got[1] == np.inf
    with pytest.warns(RuntimeWarning, match="fails for 1 of 1"):
        assert bounds.fmt22_closed_form(0.1, 100, 1e-8) == np.inf  # n < 16 log(2/δ): nothing is valid


# ------------------------------------------------------------------------------------------------
# Erlingsson et al. 2019
# ------------------------------------------------------------------------------------------------


def test_erlingsson_matches_direct_formula():
    eps0 = np.array([0.01, 0.2, 0.5])[:, None]
    n = np.array([1000, 54321, 10**7])[None, :]
    for delta in (1e-2, 1e-6, 1e-12):
        got = bounds.erlingsson19(eps0, n, delta)
        want = np.vectorize(erlingsson_direct)(eps0, n, delta)
        np.testing.assert_allclose(got, want, rtol=1e-13)
        assert np.all(got >= want)


@pytest.mark.parametrize(
    "eps0, n, delta, condition",
    [(0.6, 10_000, 1e-6, "ε₀ ≤ 1/2"), (0.3, 999, 1e-6, "n ≥ 1000"), (0.3, 10_000, 0.02, "δ ≤ 1/100")],
)
def test_erlingsson_outside_validity_is_inf_with_warning(eps0, n, delta, condition):
    with pytest.warns(RuntimeWarning, match=condition) as record:
        assert bounds.erlingsson19(eps0, n, delta) == np.inf
    assert len(record) == 1
    assert all(c not in str(record[0].message) for c in {"ε₀ ≤ 1/2", "n ≥ 1000", "δ ≤ 1/100"} - {condition})


# ------------------------------------------------------------------------------------------------
# APES echo sum and Theorem 4
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "n, seed, ties", [(2, 0, False), (3, 1, True), (17, 2, False), (500, 3, True), (2000, 4, False), (2000, 5, True)]
)
def test_echo_sum_matches_quadratic_oracle(n, seed, ties):
    e = budgets(n, seed, ties)
    got = float(bounds.apes_echo_sum(e))
    want = echo_sum_oracle(e)
    assert got == pytest.approx(want, rel=1e-12)
    assert got <= want * (1 + 1e-14)  # rounded down by the summation error bound: conservative


def test_echo_sum_with_explicit_target_matches_oracle():
    e = budgets(300, 7, ties=True)
    for t in (0, 123, -1):
        assert float(bounds.apes_echo_sum(e, target=t)) == pytest.approx(echo_sum_oracle(e, target=t), rel=1e-12)
    # The default (worst target) is never larger than any explicit target.
    assert bounds.apes_echo_sum(e) <= min(bounds.apes_echo_sum(e, target=t) for t in range(0, 300, 37))


def test_echo_sum_is_order_invariant_and_batches():
    e = budgets(1000, 8, ties=True)
    rng = np.random.default_rng(9)
    np.testing.assert_array_equal(bounds.apes_echo_sum(e), bounds.apes_echo_sum(rng.permutation(e)))
    np.testing.assert_array_equal(bounds.apes_echo_sum(np.sort(e)), bounds.apes_echo_sum(e[::-1]))
    batch = np.stack([e, budgets(1000, 10), np.full(1000, 0.3)])
    got = bounds.apes_echo_sum(batch)
    assert got.shape == (3,)
    np.testing.assert_array_equal(got, [bounds.apes_echo_sum(row) for row in batch])


def test_apes_uniform_budgets_reduce_to_fmt22_with_n_minus_1():
    # Uniform ε₀: p_ij = e^{−ε₀}, S = (n−1)e^{−ε₀}, so Theorem 4 is FMT22's closed form at n − 1 users.
    eps0, n, delta_s = 0.7, 5000, 1e-6
    eps_c, delta_c = bounds.apes_theorem4(np.full(n, eps0), delta_s)
    assert float(eps_c) == pytest.approx(fmt22_direct(eps0, n - 1, delta_s), rel=1e-11)
    assert float(delta_c) == pytest.approx(math.tanh(eps0 / 2) * delta_s, rel=1e-14)


def test_apes_theorem4_matches_direct_formula():
    e = np.random.default_rng(11).uniform(0.05, 1.0, 1500)
    delta_s = np.array([1e-8, 1e-5, 1e-3])
    s = echo_sum_oracle(e)
    assert s >= 16 * math.log(4 / 1e-8)  # every entry is inside the validity region
    eps_c, delta_c = bounds.apes_theorem4(e, delta_s)
    assert eps_c.shape == delta_c.shape == (3,)
    for k, d in enumerate(delta_s):
        want_eps, want_delta = apes_direct(s, e.max(), d)
        assert eps_c[k] == pytest.approx(want_eps, rel=1e-11)
        assert eps_c[k] >= want_eps
        assert delta_c[k] == pytest.approx(want_delta, rel=1e-13)
        assert delta_c[k] >= want_delta


def test_apes_closed_form_paper_value():
    # MATH §3.2: Theorem 4 with ε uniform in [0.05, 1] (evenly spaced), n = 10⁴, δ_s = 1e-8 gives ≈ 0.21,
    # below UniS's ≈ 0.24 at the same ε* = 1.
    e = np.linspace(0.05, 1.0, 10_000)
    eps_c, delta_c = bounds.apes_theorem4(e, 1e-8)
    assert float(bounds.apes_echo_sum(e)) == pytest.approx(5253.5006416, rel=1e-10)
    assert float(eps_c) == pytest.approx(0.2051459072, rel=1e-9)
    assert abs(float(eps_c) - 0.21) < 0.01
    assert float(eps_c) < float(bounds.fmt22_closed_form(1.0, 10_000, 1e-8))
    assert float(delta_c) == pytest.approx(math.tanh(0.5) * 1e-8, rel=1e-14)


def test_apes_validity_gives_inf_and_warning():
    with pytest.warns(RuntimeWarning, match=r"S ≥ 16 log\(4/δ_s\)"):
        eps_c, delta_c = bounds.apes_theorem4(np.full(100, 1.0), 1e-8)
    assert eps_c == np.inf and np.isfinite(delta_c)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert np.isfinite(bounds.apes_theorem4(np.full(10_000, 1.0), 1e-8)[0])


# ------------------------------------------------------------------------------------------------
# S-APES Proposition 1
# ------------------------------------------------------------------------------------------------


def test_sapes_matches_direct_formula():
    eps_c = np.array([1e-3, 0.05, 0.2051])[:, None]
    b = np.array([1, 10, 100])[None, :]
    delta_c, delta_prime = 4.6e-9, 1e-5
    eps_uc, delta_uc = bounds.sapes_proposition1(eps_c, delta_c, b, delta_prime)
    assert eps_uc.shape == delta_uc.shape == (3, 3)
    for i, j in np.ndindex(3, 3):
        e, bb = float(eps_c[i, 0]), int(b[0, j])
        want_eps, want_delta = sapes_direct(e, delta_c, bb, delta_prime)
        assert eps_uc[i, j] == pytest.approx(want_eps, rel=1e-13) and eps_uc[i, j] >= want_eps
        assert delta_uc[i, j] == pytest.approx(want_delta, rel=1e-13) and delta_uc[i, j] >= want_delta


def test_sapes_propagates_an_invalid_theorem4():
    eps_uc, delta_uc = bounds.sapes_proposition1(np.inf, 1e-9, 5, 1e-5)
    assert eps_uc == np.inf and delta_uc == pytest.approx(1e-5 + 1e-8)


# ------------------------------------------------------------------------------------------------
# GSPA approximate μ
# ------------------------------------------------------------------------------------------------


def test_gspa_reference_values():
    # MATH §3.3 / reference README: uniform ε₀ = 1, δ_i = 0, n = 10⁴ → μ = 0.027271 → ε(1e-6) = 0.0989.
    mu = bounds.gspa_mu(np.ones(10_000))
    assert float(mu) == pytest.approx(0.027271, abs=5e-7)
    assert float(mu) == pytest.approx(math.sqrt(2 / (9999 / (1 + math.e))), rel=1e-13)
    assert float(fdp.gdp_epsilon(mu, 1e-6)) == pytest.approx(0.0989, abs=5e-5)


def test_gspa_matches_direct_formula_with_deltas():
    rng = np.random.default_rng(13)
    e = rng.uniform(0.0, 4.0, 3000)
    d = rng.uniform(0.0, 1e-3, 3000)
    assert float(bounds.gspa_mu(e, d)) == pytest.approx(gspa_direct(e, d), rel=1e-12)
    assert float(bounds.gspa_mu(e, 1e-4)) == pytest.approx(gspa_direct(e, np.full(3000, 1e-4)), rel=1e-12)
    # Large budgets do not overflow: 1/(1 + e^{800}) underflows to 0 only in the huge user's own term.
    assert float(bounds.gspa_mu(np.r_[e, 800.0])) == pytest.approx(gspa_direct(e, np.zeros(3000)), rel=1e-12)
    batch = bounds.gspa_mu(np.stack([e, e[::-1]]), np.stack([d, d[::-1]]))
    np.testing.assert_allclose(batch, gspa_direct(e, d), rtol=1e-12)


def test_gspa_composed_is_sqrt_rounds_times_mu():
    e = budgets(400, 14)
    mu = float(bounds.gspa_mu(e))
    got = bounds.gspa_mu_composed(e, [1, 4, 100])
    np.testing.assert_allclose(got, [mu, 2 * mu, 10 * mu], rtol=1e-14)


# ------------------------------------------------------------------------------------------------
# Girgis et al. shuffle RDP (Theorem 1 and the simplified forms)
# ------------------------------------------------------------------------------------------------


def test_girgis_forms_match_direct_formula():
    eps0 = np.array([0.1, 1.0, 3.0])[:, None]
    n = np.array([100, 10_000])[None, :]
    orders = [2, 3, 7, 32, 256]
    upper = bounds.girgis_rdp_simplified(eps0, n, orders)
    lower = bounds.girgis_rdp_lower(eps0, n, orders)
    assert upper.shape == lower.shape == (3, 2, 5)
    for i, j, k in np.ndindex(upper.shape):
        e, nn, a = float(eps0[i, 0]), int(n[0, j]), orders[k]
        assert upper[i, j, k] == pytest.approx(girgis_direct(e, nn, a, True), rel=1e-13)
        assert lower[i, j, k] == pytest.approx(girgis_direct(e, nn, a, False), rel=1e-13)
    assert np.all(lower < upper)


def girgis_theorem1_direct(eps0, n, alpha):
    e0 = mp.mpf(eps0)
    n_bar = math.floor((n - 1) / (2 * math.exp(eps0))) + 1
    total = 1 + 4 * math.comb(alpha, 2) * (mp.exp(e0) - 1) ** 2 / n_bar
    ratio = 2 * (mp.exp(2 * e0) - 1) ** 2 / (mp.exp(2 * e0) * n_bar)
    for j in range(3, alpha + 1):
        total += math.comb(alpha, j) * j * mp.gamma(mp.mpf(j) / 2) * ratio ** (mp.mpf(j) / 2)
    total += mp.exp(e0 * alpha - (n - 1) / (8 * mp.exp(e0)))
    return float(mp.log(total) / (alpha - 1))


def shuffled_rr_renyi(eps0, n, alpha):
    """Exact D_α between the counts of n shuffled binary randomized responses (numpy/scipy oracle).

    All other users hold 0; each reports 1 with probability 1/(1+e^{ε₀}) = c/2 (strong clones), the target
    reports 1 with probability q or 1−q, q = e^{ε₀}/(1+e^{ε₀}). Every ε₀-LDP shuffle bound must exceed it.
    """
    log_others = binom.logpmf(np.arange(n), n - 1, 1 / (1 + math.exp(eps0)))
    q = math.exp(eps0) / (1 + math.exp(eps0))

    def count_law(p_one):
        out = np.full(n + 1, -np.inf)
        out[1:] = np.logaddexp(out[1:], math.log(p_one) + log_others)
        out[:-1] = np.logaddexp(out[:-1], math.log1p(-p_one) + log_others)
        return out

    p, r = count_law(q), count_law(1 - q)
    return float(logsumexp(alpha * p + (1 - alpha) * r) / (alpha - 1))


def test_girgis_theorem1_matches_direct_formula():
    eps0 = np.array([0.1, 1.0, 3.0])[:, None]
    n = np.array([50, 10_000])[None, :]
    orders = [2, 3, 7, 32, 100]
    got = bounds.girgis_rdp(eps0, n, orders)
    assert got.shape == (3, 2, 5)
    for i, j, k in np.ndindex(got.shape):
        want = girgis_theorem1_direct(float(eps0[i, 0]), int(n[0, j]), orders[k])
        assert got[i, j, k] == pytest.approx(want, rel=1e-12)
        assert got[i, j, k] >= want


@pytest.mark.parametrize("share", [1.0, 0.5], ids=["allowance", "half-allowance"])
@pytest.mark.parametrize("fused", [True, False], ids=["xla-default", "xla-level-0"])
def test_girgis_theorem1_stays_above_the_direct_formula_however_xla_rounds(fused, share):
    # The kernel's sum cancels components of up to ~10^3 down to ~1, so its last bits depend on whether XLA
    # fuses multiply-adds (optimisation level 3, as users run, or 0). Its rounding allowance must cover both,
    # with a margin: half of it still does. (A fixed 16-ulp round-up failed here at level 3.)
    eps0 = np.array([0.01, 0.1, 1.0, 3.0])[:, None]
    n = np.array([2.0, 50.0, 10_000.0, 1e6])[None, :]
    orders = np.array([2.0, 3.0, 7.0, 32.0, 100.0])
    eps0, n = np.broadcast_arrays(eps0, n)
    with jax.enable_x64(True):
        args = (jnp.asarray(eps0), jnp.asarray(n), jnp.asarray(orders), jnp.arange(2.0, 101.0),
                bounds._GIRGIS_ALLOWANCE * share)
        kernel = jax.jit(bounds._girgis_theorem1_kernel.__wrapped__).lower(*args)
        got = np.asarray(kernel.compile({} if fused else {"xla_backend_optimization_level": 0})(*args))
    for i, j, k in np.ndindex(got.shape):
        want = girgis_theorem1_direct(float(eps0[i, j]), int(n[i, j]), int(orders[k]))
        assert got[i, j, k] >= want, (eps0[i, j], n[i, j], orders[k])
        assert got[i, j, k] == pytest.approx(want, rel=1e-12)


@pytest.mark.parametrize("eps0", [0.1, 0.5, 1.0, 2.0, 3.0])
def test_girgis_theorem1_is_above_exact_shuffled_randomized_response(eps0):
    orders = [2, 3, 5, 10, 20, 50]
    for n in [10, 30, 100, 1000, 10_000]:
        theorem = bounds.girgis_rdp(eps0, n, orders)
        exact = np.array([shuffled_rr_renyi(eps0, n, a) for a in orders])
        assert np.all(theorem >= exact), (n, theorem, exact)


def test_girgis_simplified_form_is_not_a_bound():
    # The form UDP-FL quotes drops the j ≥ 3 terms: at small n / large α it is below the exact RDP of an
    # actual ε₀-LDP protocol, so it must never be used for accounting.
    simplified = float(bounds.girgis_rdp_simplified(1.0, 100, [50])[0])
    exact = shuffled_rr_renyi(1.0, 100, 50)
    assert simplified == pytest.approx(0.1017, abs=1e-4)
    assert exact == pytest.approx(0.2057, abs=1e-4)
    assert simplified < exact


@pytest.mark.parametrize("eps0, n", [(0.5, 1000), (1.0, 10_000), (2.0, 100_000)])
def test_girgis_theorem1_epsilon_is_above_exact_strong_clone_epsilon(eps0, n):
    # Strong clones are exact for binary randomized response, so the clone ε(δ) is attained by an ε₀-LDP
    # protocol: the RDP bound, converted to (ε, δ), can never be below it.
    orders = np.arange(2, 257)
    for delta in [1e-5, 1e-8]:
        eps_rdp = float(rdp.to_epsilon(bounds.girgis_rdp(eps0, n, orders), orders, delta)[0])
        eps_clone = float(clones_epsilon(eps0, n, delta, clones="strong"))
        assert eps_rdp >= eps_clone


def test_girgis_large_eps0_does_not_overflow():
    got = bounds.girgis_rdp_simplified(800.0, 1000, [2, 5])
    want = [(math.log(4) + 1600 - math.log(1000)) / 1, (math.log(40) + 1600 - math.log(1000)) / 4]
    np.testing.assert_allclose(got, want, rtol=1e-13)


# ------------------------------------------------------------------------------------------------
# float64 with the global flag off; jit
# ------------------------------------------------------------------------------------------------


@jax.enable_x64(False)
def test_results_are_float64_numpy_with_x64_off():
    assert not jax.config.jax_enable_x64
    e = np.linspace(0.05, 1.0, 2000)
    outs = [
        bounds.fmt22_closed_form(1.0, 10_000, 1e-8),
        bounds.erlingsson19(0.5, 10_000, 1e-6),
        bounds.apes_echo_sum(e),
        *bounds.apes_theorem4(e, 1e-8),
        *bounds.sapes_proposition1(0.1, 1e-9, 3, 1e-5),
        bounds.gspa_mu(e),
        bounds.gspa_mu_composed(e, 10),
        bounds.girgis_rdp_simplified(1.0, 100, [2, 3]),
        bounds.girgis_rdp_lower(1.0, 100, [2, 3]),
        bounds.girgis_rdp(1.0, 100, [2, 3]),
    ]
    assert all(isinstance(o, np.ndarray) and o.dtype == np.float64 for o in outs)
    # δ = 1e-300 survives (float32 would flush it to 0 and log(4/δ) to inf).
    tiny = bounds.fmt22_closed_form(0.1, 10**9, 1e-300)
    assert float(tiny) == pytest.approx(fmt22_direct(0.1, 10**9, 1e-300), rel=1e-13)


@jax.enable_x64(False)
def test_under_jit_and_grad_with_x64_off():
    got = jax.jit(bounds.fmt22_closed_form)(1.0, 10_000.0, 1e-6)
    assert got.dtype == jnp.float64
    assert float(got) == pytest.approx(float(bounds.fmt22_closed_form(1.0, 10_000, 1e-6)), rel=1e-6)
    g = jax.grad(bounds.fmt22_closed_form)(1.0, 10_000.0, 1e-6)
    h = 1e-6
    fd = (fmt22_direct(1 + h, 10_000, 1e-6) - fmt22_direct(1 - h, 10_000, 1e-6)) / (2 * h)
    assert float(g) == pytest.approx(fd, rel=1e-5)
    e = jnp.linspace(0.05, 1.0, 1000)
    eps_c, _ = jax.jit(bounds.apes_theorem4)(e, 1e-6)
    assert float(eps_c) == pytest.approx(float(bounds.apes_theorem4(np.asarray(e), 1e-6)[0]), rel=1e-6)


# ------------------------------------------------------------------------------------------------
# bad input: one ValueError per argument, naming it
# ------------------------------------------------------------------------------------------------

GOOD_E = np.linspace(0.1, 1.0, 50)

BAD_INPUTS = {
    "fmt22 eps0 = 0": (lambda: bounds.fmt22_closed_form(0.0, 1000, 1e-6), r"eps0 must lie in \(0.0, inf\)"),
    "fmt22 eps0 < 0": (lambda: bounds.fmt22_closed_form(-1.0, 1000, 1e-6), "eps0"),
    "fmt22 eps0 NaN": (lambda: bounds.fmt22_closed_form(np.nan, 1000, 1e-6), "eps0 contains NaN"),
    "fmt22 eps0 inf": (lambda: bounds.fmt22_closed_form(np.inf, 1000, 1e-6), "eps0 contains inf"),
    "fmt22 n < 2": (lambda: bounds.fmt22_closed_form(1.0, 1, 1e-6), r"n must lie in \[2.0, inf\)"),
    "fmt22 n non-integer": (lambda: bounds.fmt22_closed_form(1.0, 100.5, 1e-6), "n must be an integer"),
    "fmt22 delta = 0": (lambda: bounds.fmt22_closed_form(1.0, 1000, 0.0), r"delta must lie in \(0.0, 1.0\)"),
    "fmt22 delta = 1": (lambda: bounds.fmt22_closed_form(1.0, 1000, 1.0), "delta"),
    "fmt22 shapes": (lambda: bounds.fmt22_closed_form([1.0, 2.0], [10, 20, 30], 1e-6), "do not broadcast"),
    "erlingsson eps0": (lambda: bounds.erlingsson19(0.0, 1000, 1e-6), "eps0"),
    "erlingsson n": (lambda: bounds.erlingsson19(0.1, 1000.5, 1e-6), "n must be an integer"),
    "erlingsson delta": (lambda: bounds.erlingsson19(0.1, 1000, 1.5), "delta"),
    "apes empty": (lambda: bounds.apes_theorem4([], 1e-6), "local_epsilons is empty"),
    "apes negative": (lambda: bounds.apes_theorem4([-0.1, 1.0], 1e-6), "local_epsilons must lie in"),
    "apes zero budget": (lambda: bounds.apes_theorem4([0.0, 1.0], 1e-6), r"local_epsilons must lie in \(0.0, inf\)"),
    "apes NaN budget": (lambda: bounds.apes_echo_sum([np.nan, 1.0]), "local_epsilons contains NaN"),
    "apes one user": (lambda: bounds.apes_theorem4([1.0], 1e-6), "at least 2 users"),
    "apes scalar": (lambda: bounds.apes_echo_sum(1.0), "local_epsilons must be an array"),
    "apes delta_s": (lambda: bounds.apes_theorem4(GOOD_E, 0.0), "delta_s"),
    "apes target range": (lambda: bounds.apes_echo_sum(GOOD_E, target=50), "target"),
    "apes target type": (lambda: bounds.apes_theorem4(GOOD_E, 1e-6, target=1.5), "target"),
    "sapes eps_c": (lambda: bounds.sapes_proposition1(-0.1, 1e-9, 2, 1e-5), "eps_c"),
    "sapes delta_c": (lambda: bounds.sapes_proposition1(0.1, 1.5, 2, 1e-5), "delta_c"),
    "sapes b < 1": (lambda: bounds.sapes_proposition1(0.1, 1e-9, 0, 1e-5), r"b must lie in \[1.0, inf\)"),
    "sapes b non-integer": (lambda: bounds.sapes_proposition1(0.1, 1e-9, 2.5, 1e-5), "b must be an integer"),
    "sapes delta_prime": (lambda: bounds.sapes_proposition1(0.1, 1e-9, 2, 0.0), "delta_prime"),
    "gspa empty": (lambda: bounds.gspa_mu([]), "local_epsilons is empty"),
    "gspa negative": (lambda: bounds.gspa_mu([0.5, -1.0]), "local_epsilons must lie in"),
    "gspa local_deltas range": (lambda: bounds.gspa_mu(GOOD_E, 1.0), r"local_deltas must lie in \[0.0, 1.0\)"),
    "gspa local_deltas shape": (lambda: bounds.gspa_mu(GOOD_E, np.zeros(49)), "local_deltas must broadcast"),
    "gspa rounds": (lambda: bounds.gspa_mu_composed(GOOD_E, 0), "rounds"),
    "gspa rounds non-integer": (lambda: bounds.gspa_mu_composed(GOOD_E, 2.5), "rounds must be an integer"),
    "girgis orders < 2": (lambda: bounds.girgis_rdp_simplified(1.0, 100, [1.5, 2]), r"orders must lie in \[2.0, inf\)"),
    "girgis orders non-integer": (lambda: bounds.girgis_rdp_simplified(1.0, 100, [2, 2.5]), "orders must be an integer"),
    "girgis orders 2-D": (lambda: bounds.girgis_rdp_lower(1.0, 100, [[2, 3]]), "orders must be a 1-D"),
    "girgis eps0": (lambda: bounds.girgis_rdp_lower(0.0, 100, [2]), "eps0"),
    "girgis n": (lambda: bounds.girgis_rdp_simplified(1.0, 1, [2]), "n must lie in"),
    "girgis theorem orders": (lambda: bounds.girgis_rdp(1.0, 100, [2, 2.5]), "orders must be an integer"),
    "girgis theorem eps0": (lambda: bounds.girgis_rdp(-1.0, 100, [2]), "eps0"),
    "girgis theorem n": (lambda: bounds.girgis_rdp(1.0, 1.5, [2]), "n must"),
}


@pytest.mark.parametrize("case", list(BAD_INPUTS))
def test_bad_input_raises_value_error_naming_the_parameter(case):
    call, match = BAD_INPUTS[case]
    with pytest.raises(ValueError, match=match):
        call()
