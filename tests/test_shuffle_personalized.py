"""Tests for jaxpriv.shuffle.poisson_binomial and jaxpriv.shuffle.personalized: an O(n²) float64 DP oracle
for the Poisson-binomial pmf (every value, tails included), scipy/Loader for equal probabilities, a
brute-force scipy clone sum with a Poisson-binomial C as the δ oracle, equal budgets against the uniform
clone accountant, monotonicity in users, per-user values between the uniform extremes and below the worst
case, conservative binning, and one ValueError per bad argument."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from jaxpriv._numerics import float64
from jaxpriv.shuffle import clones as clones_module
from jaxpriv.shuffle import clones_epsilon
from jaxpriv.shuffle.personalized import personalized_epsilon
from jaxpriv.shuffle.poisson_binomial import poisson_binomial_logpmf


@pytest.fixture(autouse=True)
def x64_flag_untouched():
    before = jax.config.jax_enable_x64
    yield
    assert jax.config.jax_enable_x64 == before


def dp_pmf(p):
    """Σ Bern(p_i) by the O(n²) recursion; positive sums only: ≤ 2n ulp relative error everywhere."""
    f = np.zeros(len(p) + 1)
    f[0] = 1.0
    for i, pi in enumerate(p):
        f[1:i + 2] = f[1:i + 2] * (1 - pi) + f[0:i + 1] * pi
        f[0] *= 1 - pi
    return f


def oracle_delta(q, pmf_c, eps):
    """Σ_C Pr[C] Σ_a max(0, P_C(a) − e^ε Q_C(a)) by brute force (scipy), any law of C."""
    total = 0.0
    for count, w in enumerate(pmf_c):
        if w < 1e-300:
            continue
        a = np.arange(count + 2)
        b, b_prev = stats.binom.pmf(a, count, 0.5), stats.binom.pmf(a - 1, count, 0.5)
        p_c, q_c = q * b_prev + (1 - q) * b, (1 - q) * b_prev + q * b
        total += w * np.maximum(0.0, p_c - np.exp(eps) * q_c).sum()
    return total


# ------------------------------------------------------------------------------------------------
# Poisson-binomial pmf
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("n, kind", [(40, "uniform"), (700, "uniform"), (2000, "uniform"), (6000, "uniform"), (2000, "small"),
                                     (1500, "few"), (1000, "edges"), (30, "certain")])
def test_pmf_matches_dp_recursion(n, kind):
    rng = np.random.default_rng(n)
    p = {"uniform": rng.uniform(size=n), "small": 0.01 * rng.uniform(size=n),
         "few": rng.choice([0.05, 0.5, 0.93], size=n),
         "edges": np.concatenate([rng.uniform(size=n - 20), np.zeros(10), np.ones(10)]),
         # p = 1 users: counts below their number are impossible and must not get FFT noise
         "certain": np.concatenate([rng.uniform(0.01, 1.0, size=n - 3), np.ones(3)])}[kind]
    w = poisson_binomial_logpmf(p)
    f = dp_pmf(p)
    k = w.lo + np.arange(w.logpmf.size)
    ref = f[k]
    ok = ref > 1e-300
    got = np.exp(w.logpmf)
    rel = np.abs(np.expm1(w.logpmf[ok] - np.log(ref[ok])))
    assert rel.max() < 1e-12  # every value in the window, far tails included
    bulk = ref > 1e-6 * ref.max()
    assert np.all(np.abs(got - ref)[bulk] <= 1e-12 * ref[bulk])
    assert np.all(np.abs(got - ref) <= 1e-15)
    assert np.all(rel <= w.rel_err[ok])  # the error estimate covers the measured error
    outside = f[:w.lo].sum() + f[w.lo + w.logpmf.size:].sum()
    assert outside <= w.dropped + 1e-300 and w.dropped < 1e-30


def test_frequencies_that_underflow_are_skipped_without_changing_a_value(monkeypatch):
    # 6000 distinct probabilities (variance ~1000): about a quarter of the FFT's frequencies can have |φ_θ| > 0;
    # the others, evaluated, would underflow to exactly 0, so skipping them changes the values only by the
    # rounding of XLA's vectorised exp/sin/cos over arrays of another length (a few ulp of the log; the
    # answer with every frequency evaluated, by patching the count, is the oracle).
    from jaxpriv.shuffle import poisson_binomial as pb

    p = np.random.default_rng(6000).uniform(size=6000)
    w = poisson_binomial_logpmf(p)
    size = 1 << max(6, (2 * w.logpmf.size + 64 - 1).bit_length())
    assert pb._live_frequencies(size, float(np.sum(p * (1 - p))) * 0.9) <= size // 4  # the cut is real here
    monkeypatch.setattr(pb, "_live_frequencies", lambda size, var: size // 2 + 1)
    full = poisson_binomial_logpmf(p)
    assert w.lo == full.lo and w.dropped == full.dropped and np.array_equal(np.isfinite(w.logpmf), np.isfinite(full.logpmf))
    assert np.max(np.abs(w.logpmf - full.logpmf)) <= 1e-12  # measured: 2.3e-13 at log values near −100
    np.testing.assert_allclose(w.rel_err, full.rel_err, rtol=1e-12, atol=0)


@pytest.mark.parametrize("var, size, live", [(399.0, 4096, 2049), (400.0, 4096, 2049), (2500.0, 4096, 768),
                                             (401.0, 4096, 2048), (1e6, 1 << 20, 8192)])
def test_live_frequencies_cover_every_frequency_that_does_not_underflow(var, size, live):
    from jaxpriv.shuffle import poisson_binomial as pb

    assert pb._live_frequencies(size, var) == live
    k = np.arange(live, size // 2 + 1)  # the skipped ones: the bound −2 sin²(πk/N)·var is below −800 there
    assert np.all(-2 * np.sin(np.pi * k / size) ** 2 * var <= -800.0)


@pytest.mark.parametrize("n, p", [(1000, 0.3), (10**5, 0.02), (10**7, 0.4)])
def test_pmf_equal_probabilities_is_binomial(n, p):
    w = poisson_binomial_logpmf([p], counts=[n])
    k = w.lo + np.arange(w.logpmf.size)
    with float64():
        loader = np.asarray(clones_module._log_binom_pmf(jnp.asarray(k, dtype=jnp.float64), float(n),
                                                         np.log(p), np.log1p(-p)))
    assert np.max(np.abs(w.logpmf - loader)) < 2e-11
    scipy_pmf = stats.binom.pmf(k, n, p)
    assert np.max(np.abs(np.exp(w.logpmf) - scipy_pmf)) < 1e-15
    bulk = scipy_pmf > 1e-3 * scipy_pmf.max()
    assert np.allclose(np.exp(w.logpmf[bulk]), scipy_pmf[bulk], rtol=1e-8 if n > 10**6 else 1e-10, atol=0)
    assert w.dropped < 1e-30


def test_pmf_bad_input():
    for bad in ([], [0.5, np.nan], [1.5], [-0.1]):
        with pytest.raises(ValueError, match="probs"):
            poisson_binomial_logpmf(bad)
    with pytest.raises(ValueError, match="counts"):
        poisson_binomial_logpmf([0.5, 0.2], counts=[3])


# ------------------------------------------------------------------------------------------------
# Personalized central ε
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("eps0, n, delta", [(1.0, 1000, 1e-6), (0.5, 5000, 1e-8), (3.0, 20000, 1e-7)])
def test_equal_budgets_equal_uniform_clone_accountant(eps0, n, delta):
    gspa = personalized_epsilon(np.full(n, eps0), delta)
    strong = clones_epsilon(eps0, n, delta, clones="strong")
    assert abs(gspa - strong) <= 1e-9 * strong
    gspa_user = personalized_epsilon(np.full(n, eps0), delta, per_user=True)
    assert gspa_user.shape == (n,) and np.all(np.abs(gspa_user - strong) <= 1e-9 * strong)
    apes = personalized_epsilon(np.full(n, eps0), delta, model="apes")
    fmt22 = clones_epsilon(eps0, n, delta, clones="fmt22")
    assert abs(apes - fmt22) <= 1e-9 * fmt22


def test_delta_matches_brute_force_oracle_for_heterogeneous_budgets():
    rng = np.random.default_rng(3)
    eps = rng.uniform(0.2, 2.0, size=120)
    delta = 1e-4
    got = float(personalized_epsilon(eps, delta))
    c = 2.0 / (1.0 + np.exp(eps))
    others = np.delete(c, np.argmax(c))
    pmf = dp_pmf(others)
    q = np.exp(eps.max()) / (1 + np.exp(eps.max()))
    assert oracle_delta(q, pmf, got) <= delta * (1 + 1e-9)
    assert oracle_delta(q, pmf, got * (1 - 1e-6)) > delta  # tight


def test_local_deltas_add_on_top():
    eps = np.full(500, 1.0)
    base = personalized_epsilon(eps, 1e-5)
    with_d = personalized_epsilon(eps, 1e-5, local_deltas=np.full(500, 1e-6))
    assert with_d > base
    # δ_total = δ_t + (1−δ_t) δ_pure, with c_i = 2(1−δ_i)/(1+e^{ε_i})
    assert np.isinf(personalized_epsilon(eps, 1e-6, local_deltas=np.full(500, 1e-6)))


def test_more_users_never_increase_epsilon():
    rng = np.random.default_rng(5)
    eps = rng.uniform(0.1, 2.0, size=400)
    prev = {m: np.inf for m in ("gspa", "apes")}
    for n in (100, 200, 300, 400):
        for model in prev:
            val = float(personalized_epsilon(eps[:n], 1e-6, model=model))
            assert val <= prev[model] * (1 + 1e-12)
            prev[model] = val


def test_per_user_between_extremes_and_below_worst_case():
    rng = np.random.default_rng(7)
    eps = rng.choice([0.3, 0.6, 1.0, 1.5], size=3000)
    delta = 1e-7
    per = personalized_epsilon(eps, delta, per_user=True)
    worst = personalized_epsilon(eps, delta)
    lo = clones_epsilon(eps.min(), eps.size, delta, clones="strong")
    hi = clones_epsilon(eps.max(), eps.size, delta, clones="strong")
    assert np.all(per >= lo * (1 - 1e-9)) and np.all(per <= hi * (1 + 1e-9))
    assert per.max() <= worst * (1 + 1e-12)
    assert worst <= hi * (1 + 1e-9)
    order = np.argsort(eps)  # a larger own budget never gets a smaller central ε
    assert np.all(np.diff(per[order]) >= -1e-12)


def test_binning_is_conservative():
    rng = np.random.default_rng(11)
    eps = rng.uniform(0.2, 1.5, size=600)
    delta = 1e-6
    exact = personalized_epsilon(eps, delta, per_user=True, max_groups=10**6)
    binned = personalized_epsilon(eps, delta, per_user=True, max_groups=16, grid_rtol=1e-2)
    assert np.all(binned >= exact * (1 - 1e-12))
    assert np.all(binned <= exact * 1.02)
    exact_w = personalized_epsilon(eps, delta, max_groups=10**6)
    binned_w = personalized_epsilon(eps, delta, max_groups=16, grid_rtol=1e-2)
    assert exact_w <= binned_w <= exact_w * 1.02


def test_apes_reproduces_paper_table3_scale():
    # n = 10⁴, ε_i ~ U(0.05, 1), δ = 1e-8: the paper reports APES 0.057 (numeric clone sum), UniS 0.069.
    eps = np.random.default_rng(1).uniform(0.05, 1.0, size=10_000)
    val = float(personalized_epsilon(eps, 1e-8, model="apes"))
    assert 0.050 < val < 0.064
    assert val < clones_epsilon(eps.max(), eps.size, 1e-8)


@pytest.mark.parametrize("kwargs, name", [
    (dict(local_epsilons=[]), "local_epsilons"),
    (dict(local_epsilons=[1.0, -1.0]), "local_epsilons"),
    (dict(local_epsilons=[1.0, np.inf]), "local_epsilons"),
    (dict(local_epsilons=[1.0, np.nan]), "local_epsilons"),
    (dict(local_epsilons=[1.0]), "local_epsilons"),
    (dict(delta=0.0), "delta"),
    (dict(delta=1.0), "delta"),
    (dict(local_deltas=[0.0]), "local_deltas"),
    (dict(local_deltas=[0.0, 1.0]), "local_deltas"),
    (dict(local_deltas=[0.0, -0.1]), "local_deltas"),
    (dict(model="nope"), "model"),
    (dict(model="apes", local_epsilons=[1.0, 0.0]), "local_epsilons"),
    (dict(model="apes", local_deltas=[0.0, 0.0]), "local_deltas"),
])
def test_bad_input_raises_value_error_naming_the_parameter(kwargs, name):
    args = dict(local_epsilons=[1.0, 2.0], delta=1e-6)
    args.update(kwargs)
    with pytest.raises(ValueError, match=name):
        personalized_epsilon(**args)


def test_budget_vectors_of_similar_size_reuse_the_compiled_programs():
    # Static shapes come in powers of two (rows, window, anchor, tilts, groups): a sweep over budgets and n
    # must not recompile for every new vector (it cost 2-4 s per call).
    from jaxpriv.shuffle import poisson_binomial as pb

    kernels = (pb._char_kernel, pb._tilted_kernel, clones_module._pmf_epsilon_kernel)
    rng = np.random.default_rng(3)
    personalized_epsilon(rng.uniform(0.5, 1.0, 1000), 1e-6)
    sizes = [k._cache_size() for k in kernels]
    for n in (1010, 1100):
        personalized_epsilon(rng.uniform(0.5, 1.0, n), 1e-6)
    assert [k._cache_size() for k in kernels] == sizes


def test_one_setting_and_a_small_per_user_batch_share_the_solve_and_tilt_programs():
    # Rows are padded to at least four: one worst-case row and three budget groups plus the worst case
    # (4 rows) run the same clone-law solve and leave-one-out tilt programs.
    from jaxpriv.shuffle import poisson_binomial as pb

    kernels = (pb._tilted_kernel, clones_module._pmf_epsilon_kernel)
    budgets = np.repeat([0.5, 0.8, 1.0], [700, 700, 600])
    single = personalized_epsilon(budgets, 1e-6)
    sizes = [k._cache_size() for k in kernels]
    per_user = personalized_epsilon(budgets, 1e-6, per_user=True)
    assert [k._cache_size() for k in kernels] == sizes
    assert np.all(per_user <= single) and per_user.shape == budgets.shape


# ------------------------------------------------------------------------------------------------
# APES / EoN clone law: one Bernoulli(p̄_i) per user (the docstring's derivation), against mpmath
# ------------------------------------------------------------------------------------------------


def mp_poisson_binomial(probabilities, dps=40):
    """Exact pmf of Σ Bern(p_i) by the O(n²) recursion in mpmath (every term positive)."""
    from mpmath import mp

    with mp.workdps(dps):
        f = [mp.mpf(1)]
        for p in probabilities:
            p = mp.mpf(float(p))
            f = [(f[k] if k < len(f) else 0) * (1 - p) + (f[k - 1] * p if k > 0 else 0) for k in range(len(f) + 1)]
        return np.array([float(x) for x in f])


def echo_matrix(eps):
    """p_ij of MATH §3.2 directly, O(n²): (ε_i/ε_j)(1−e^{−ε_j})/(1−e^{−ε_i}) e^{−max(ε_i, ε_j)}."""
    ei, ej = eps[:, None], eps[None, :]
    return (ei / ej) * (-np.expm1(-ej)) / (-np.expm1(-ei)) * np.exp(-np.maximum(ei, ej))


def apes_laws(eps):
    """(per-user, literal) clone-count pmfs for the worst-case target: the others are every user but the
    one with the largest p̄_i. Per user: Σ_{i≠t} Bern(p̄_i), p̄_i = Σ_j p_ij/n. Literal (the paper's
    display): Σ_{i≠t} Σ_j Bern(p_ij/n)."""
    p = echo_matrix(eps) / eps.size
    mean = p.sum(axis=1)
    others = np.delete(np.arange(eps.size), np.argmax(mean))
    return mp_poisson_binomial(mean[others]), mp_poisson_binomial(p[others].ravel())


def test_apes_clone_law_is_one_bernoulli_per_user_against_mpmath():
    eps = np.random.default_rng(5).uniform(0.05, 1.0, size=25)
    delta = 1e-2
    per_user, literal = apes_laws(eps)
    q = np.exp(eps.max()) / (1 + np.exp(eps.max()))  # the target answers RR at ε* = max ε
    got = float(personalized_epsilon(eps, delta, model="apes"))
    assert oracle_delta(q, per_user, got) <= delta * (1 + 1e-9)  # conservative for the per-user law
    assert oracle_delta(q, per_user, got * (1 - 1e-6)) > delta  # and tight: it is that law's ε
    # The paper's literal law has the same mean but more spread (a user can echo up to n times), and it
    # would give a larger ε: the per-user reading is not a looser bound in disguise, it is another law.
    counts = np.arange(literal.size)
    mean_u, mean_l = (counts[:per_user.size] * per_user).sum(), (counts * literal).sum()
    assert mean_u == pytest.approx(mean_l, rel=1e-12)
    var_u = (counts[:per_user.size] ** 2 * per_user).sum() - mean_u**2
    var_l = (counts**2 * literal).sum() - mean_l**2
    assert var_u < var_l
    assert oracle_delta(q, literal, got) > delta  # under the literal law the same ε would not hold


@pytest.mark.parametrize("n", [2, 3, 4, 5, 6, 8])
def test_tiny_populations_equal_the_uniform_sum(n):
    # Regression: the leave-one-out law's error estimate was NaN on impossible counts, which made the
    # allowance NaN and ε collapse to ~1e-54 at n = 2 and 4 (far below the truth).
    eps = np.ones(n)
    assert float(personalized_epsilon(eps, 1e-6)) == pytest.approx(float(clones_epsilon(1.0, n, 1e-6, clones="strong")),
                                                                   rel=1e-9)
    assert float(personalized_epsilon(eps, 1e-6, model="apes")) == pytest.approx(
        float(clones_epsilon(1.0, n, 1e-6, clones="fmt22")), rel=1e-6)
