"""APES / S-APES as simulator configurations: accounting equals the shuffle engine's numbers (and a plain
advanced-composition formula written here); every user's randomizer runs exactly at (or below) its own ε,
even for adversarial updates (reports re-derived from the samplers with the same keys, Theorem 1 checked on
a grid); the simulated round equals the explicit shuffle → analyze pipeline; the analyzer depends only on
the shuffled multisets; the calibrated mean is unbiased against clip_laplace's exact variance; accuracy
ordering on digits over several seeds; every bad input."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxpriv.federated import apes, simulator
from jaxpriv.federated.partition import ClientData
from jaxpriv.federated.simulator import LocalResult
from jaxpriv.mechanisms import clip_laplace, clip_laplace_analyzer, laplace
from jaxpriv.reproduce import apes as apes_reproduction
from jaxpriv.shuffle import apes_theorem4, clones_epsilon, fmt22_closed_form, personalized_epsilon, sapes_proposition1


def _advanced(eps, delta, k, delta_prime):
    """Advanced composition (Dwork, Rothblum, Vadhan 2010) of k (ε, δ) releases, written out here."""
    return (eps * math.sqrt(2 * k * math.log(1 / delta_prime)) + k * eps * math.expm1(eps),
            delta_prime + k * delta)


def _better(eps, delta, k, delta_prime):
    """The better of basic composition (kε, kδ) and advanced composition (then with the larger δ)."""
    adv = _advanced(eps, delta, k, delta_prime)
    return (adv[0], max(adv[1], k * delta)) if adv[0] < k * eps else (k * eps, k * delta)


# --------------------------------------------------------------------------------------------------
# accounting
# --------------------------------------------------------------------------------------------------


def test_dimension_level_epsilons_are_the_engines():
    eps = np.random.default_rng(0).uniform(0.05, 1.0, 500)
    for system in ("apes", "sapes"):
        p = apes.account(system, eps, dimension=50, rounds=1, b=10 if system == "sapes" else None, delta_s=1e-6)
        assert p.epsilon_c == float(personalized_epsilon(eps, 1e-6, model="apes")) and p.delta_c == 1e-6
        assert (p.theorem_epsilon, p.theorem_delta) == tuple(float(v) for v in apes_theorem4(eps, 1e-6))
    p = apes.account("unis", eps, dimension=50, delta_s=1e-6)
    assert p.epsilon_c == float(clones_epsilon(eps.max(), eps.size, 1e-6, clones="fmt22"))
    assert p.theorem_epsilon == float(fmt22_closed_form(eps.max(), eps.size, 1e-6))
    assert apes.account("pldp", eps, 50).epsilon_c == eps.max()
    assert apes.account("ldp_min", eps, 50).epsilon_c == eps.min()
    assert apes.account("nonprivate", eps, 50).total_epsilon == math.inf
    # the amplified APES bound is below UniS's at the same δ, both far below PLDP (seed 000 Table 3)
    assert apes.account("apes", eps, 50, delta_s=1e-6).epsilon_c < p.epsilon_c < eps.max()


def test_table3_privacy_values_at_the_papers_size():
    eps = np.linspace(0.05, 1.0, 10_000)
    a = apes.account("apes", eps, 7850, delta_s=1e-8)
    u = apes.account("unis", eps, 7850, delta_s=1e-8)
    assert round(a.epsilon_c, 3) == 0.057 and round(u.epsilon_c, 3) == 0.069  # the paper's 0.057 and 0.069
    assert abs(u.epsilon_c - 0.068880) < 5e-6  # MATH §3.1 reference value (ε₀ = 1)
    # with k = d and δ' = δ_s = 1e-8 the composed APES value is the paper's 57.6 (to its rounding, ±1)
    assert abs(a.round_epsilon - 57.6) < 1.0


def test_user_level_composition_against_the_formula():
    eps = np.random.default_rng(1).uniform(0.05, 1.0, 500)
    d, rounds, b, dp = 40, 3, 7, 1e-6
    a = apes.account("apes", eps, d, rounds, delta_s=1e-8, delta_prime=dp)
    want = _advanced(a.epsilon_c, a.delta_c, rounds * d, dp)
    assert a.releases == d and a.total_epsilon == pytest.approx(want[0], rel=1e-12)
    assert a.total_delta == pytest.approx(want[1], rel=1e-12)
    assert a.total_epsilon < rounds * d * a.epsilon_c  # advanced beats basic here
    s = apes.account("sapes", eps, d, rounds, b=b, delta_s=1e-8, delta_prime=dp)
    assert s.releases == 2 * b and s.epsilon_c == a.epsilon_c
    prop1 = tuple(float(v) for v in sapes_proposition1(s.epsilon_c, 1e-8, b, dp))
    basic = (2 * b * s.epsilon_c, 2 * b * 1e-8)
    # one round: the better of Proposition 1 (then with the larger δ of the two) and basic composition
    want = (prop1[0], max(prop1[1], basic[1])) if prop1[0] < basic[0] else basic
    assert (s.round_epsilon, s.round_delta) == want
    assert s.total_epsilon == pytest.approx(_better(s.epsilon_c, 1e-8, 2 * b * rounds, dp)[0], rel=1e-12)
    assert s.conservative_total_epsilon == a.total_epsilon > s.total_epsilon
    # odd k = d·T: one more release (the safe side)
    odd = apes.account("apes", eps, 41, 3, delta_s=1e-8, delta_prime=dp)
    assert odd.total_epsilon == pytest.approx(_advanced(odd.epsilon_c, 1e-8, 124, dp)[0], rel=1e-12)
    assert odd.total_epsilon < 123 * odd.epsilon_c
    # PLDP at ε up to 1 over d = 40: basic composition is the better one (pure, δ = 0)
    p = apes.account("pldp", eps, d, rounds)
    assert p.total_epsilon == pytest.approx(rounds * d * eps.max(), rel=1e-15) and p.total_delta == 0.0
    assert _advanced(eps.max(), 0.0, rounds * d, 1e-8)[0] > p.total_epsilon


# --------------------------------------------------------------------------------------------------
# local privacy: each user's randomizer at its own ε, whatever its update
# --------------------------------------------------------------------------------------------------

CLIP = 0.25


def _adversarial_base(values):
    """A client whose 'training' returns an arbitrary (huge, signed) update, one row per client."""
    def base(params, state, data, key):
        return LocalResult({"w": values[data.size]}, state, {"loss": jnp.float32(0.0)})
    return base


@pytest.mark.parametrize("system", ["apes", "sapes", "ldp_min", "pldp", "unis"])
def test_no_user_spends_more_than_its_budget(system):
    rng = np.random.default_rng(2)
    n, d = 6, 32
    budgets = np.array([0.05, 0.2, 0.5, 1.0, 3.0, 8.0])
    values = jnp.asarray(rng.choice([-1e6, 1e6, 0.0, 0.9 * CLIP], size=(n, d)) * rng.uniform(0.5, 2, (n, d)),
                         jnp.float32)
    cfg = apes.configure(system, {"w": jnp.zeros(d)}, _adversarial_base(values), budgets, CLIP,
                         b=5 if system == "sapes" else None)
    used = apes.used_epsilons(system, budgets)
    assert np.all(used <= budgets) and np.array_equal(cfg.client_state, used.astype(np.float32))
    # Theorem 1 on a grid for the ε each randomizer runs at: never above the user's budget
    worst = clip_laplace.worst_log_ratio(used, CLIP)
    assert np.all(worst <= budgets * (1 + 1e-12))
    local = jax.jit(cfg.local_update)
    for k in range(n):
        data = ClientData(None, None, None, jnp.int32(k))
        key = jax.random.key(100 + k)
        report, state, _ = local({"w": jnp.zeros(d)}, jnp.float32(cfg.client_state[k]), data, key)
        _, noise_key = jax.random.split(key)
        noise_key, sparse_key = jax.random.split(noise_key)
        g = jnp.clip(values[k], -CLIP, CLIP)
        # the randomizer's λ: 2C/ε rounded up in float32 (never below the exact quotient)
        lam = jax.jit(clip_laplace.local_scale)(jnp.float32(used[k]), jnp.float32(CLIP))
        assert float(lam) >= 2 * float(np.float32(CLIP)) / float(np.float32(used[k]))
        if system in ("apes", "sapes"):
            want = clip_laplace.sample(noise_key, g, lam, jnp.float32(CLIP))
            if system == "sapes":
                want = clip_laplace_analyzer.sparsify(sparse_key, want, jnp.float32(used[k]), CLIP, 5)
            assert np.all(np.abs(np.asarray(report)) <= CLIP)
        else:
            # under jit, as the client computes it (XLA may contract g + λ·L into one fused multiply-add)
            want = jax.jit(lambda g, key, lam: g + laplace.sample(key, lam, (d,), jnp.float32))(g, noise_key, lam)
        # float32 throughout; XLA may fuse g + λ·L differently under jit: 2 ulp
        np.testing.assert_allclose(np.asarray(report), np.asarray(want), rtol=2 * 2.0**-23, atol=0)
        assert float(state) == np.float32(used[k])
    spent = apes.account(system, budgets, d, rounds=4, b=5 if system == "sapes" else None).local_user_epsilon
    assert np.all(spent <= 4 * d * budgets * (1 + 1e-15))


def test_the_run_keeps_every_clients_epsilon():
    n, d = 5, 8
    budgets = np.linspace(0.1, 1.0, n)
    base = _adversarial_base(jnp.ones((n, d)) * 1e3)
    clients = ClientData(jnp.zeros((n, 1, 1)), jnp.zeros((n, 1), jnp.int32), jnp.ones((n, 1), bool),
                         jnp.arange(n, dtype=jnp.int32))
    clients = clients._replace(mask=jnp.arange(n)[:, None] >= 0, size=jnp.ones(n, jnp.int32))
    from flax import nnx

    class W(nnx.Module):
        def __init__(self):
            self.w = nnx.Param(jnp.zeros(d))

    model = W()
    cfg = apes.configure("apes", nnx.state(model, nnx.Param), base, budgets, CLIP)
    res = simulator.run(model, cfg.local_update, clients, rounds=3, aggregator=cfg.aggregator,
                        client_state=cfg.client_state, progress=False)
    np.testing.assert_array_equal(np.asarray(res.client_state), budgets.astype(np.float32))
    assert np.all(res.participation_counts(n) == 3)
    assert np.all(np.abs(np.asarray(res.params["w"])) <= 3 * CLIP + 1e-6)  # calibrated means stay in [−C, C]


# --------------------------------------------------------------------------------------------------
# shuffler and analyzer
# --------------------------------------------------------------------------------------------------


def test_shuffle_permutes_each_dimension_independently_and_the_epsilons_separately():
    n, d = 200, 30
    reports = np.arange(n * d, dtype=np.float64).reshape(n, d)
    eps = np.linspace(0.1, 1.0, n)
    s, e = (np.asarray(v) for v in apes.shuffle(jax.random.key(3), reports, eps))
    for k in range(d):
        assert sorted(s[:, k].tolist()) == reports[:, k].tolist()
    rows = s // d  # the original user of each shuffled value
    assert len({tuple(rows[:, k]) for k in range(d)}) == d  # a different permutation per dimension
    assert np.mean(rows == rows[:, :1]) < 0.05  # rows are not carried across dimensions
    assert sorted(e.tolist()) == eps.tolist() and not np.array_equal(e, eps)
    assert not np.array_equal(np.argsort(e), rows[:, 0])  # the ε order is not any dimension's order


def test_analyzer_sees_only_the_shuffled_multisets():
    rng = np.random.default_rng(4)
    n, d = 300, 12
    eps = rng.uniform(0.05, 1.0, n)
    g = jnp.asarray(rng.uniform(-0.1, 0.1, (n, d)), jnp.float32)
    lam = jnp.asarray(2 * 0.2 / eps[:, None], jnp.float32)
    reports = np.asarray(clip_laplace.sample(jax.random.key(5), g, lam, jnp.float32(0.2)), np.float64)
    base = apes.analyze(reports, eps, 0.2)
    for seed in (6, 7):
        s, e = apes.shuffle(jax.random.key(seed), reports, eps)
        np.testing.assert_allclose(apes.analyze(np.asarray(s), np.asarray(e), 0.2), base, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(apes.analyze(reports, eps, 0.2, "laplace"), reports.mean(0), rtol=1e-15)


def test_calibrated_mean_is_unbiased():
    """n users all holding g: the analyzer's mean of CLap(g, 2C/ε_i, C) is within 5σ of the mixture mean
    (σ from clip_laplace.variance), and the calibrated estimate lands near g."""
    rng = np.random.default_rng(8)
    n, clip = 20_000, 0.1
    eps = rng.uniform(0.5, 1.0, n)
    g = np.array([-0.08, -0.03, 0.0, 0.05, 0.09])
    lam = 2 * clip / eps
    z = np.asarray(clip_laplace.sample(jax.random.key(9), g[None, :], lam[:, None], clip, dtype=jnp.float32), np.float64)
    m = z.mean(0)
    want = np.asarray(clip_laplace.mean(g[None, :], lam[:, None], clip)).mean(0)
    sd = np.sqrt(np.asarray(clip_laplace.variance(g[None, :], lam[:, None], clip)).sum(0)) / n
    assert np.all(np.abs(m - want) < 5 * sd)
    est = apes.analyze(z, eps, clip)
    slope = np.asarray(clip_laplace.mean(1e-3, lam, clip)).mean() / 1e-3  # dM/dg at 0 (M is near-linear here)
    assert np.all(np.abs(est - g) < 6 * sd / slope)


def test_the_simulated_round_equals_the_explicit_shuffle_pipeline():
    n, d, clip = 40, 6, 0.2
    rng = np.random.default_rng(10)
    budgets = rng.uniform(0.05, 1.0, n)
    values = jnp.asarray(rng.uniform(-0.3, 0.3, (n, d)), jnp.float32)
    from flax import nnx

    class W(nnx.Module):
        def __init__(self):
            self.w = nnx.Param(jnp.zeros(d))

    clients = ClientData(jnp.zeros((n, 1, 1)), jnp.zeros((n, 1), jnp.int32), jnp.ones((n, 1), bool),
                         jnp.ones(n, jnp.int32))

    for system, mech in (("apes", "clip_laplace"), ("sapes", "clip_laplace"), ("pldp", "laplace")):
        def base_k(params, state, data, key, _v=values):
            return LocalResult({"w": _v[jnp.int32(data.y[0])]}, state, {})

        cl = clients._replace(y=jnp.arange(n, dtype=jnp.int32)[:, None])
        model = W()
        cfg = apes.configure(system, nnx.state(model, nnx.Param), base_k, budgets, clip,
                             b=2 if system == "sapes" else None)
        res = simulator.run(model, cfg.local_update, cl, rounds=1, aggregator=cfg.aggregator,
                            client_state=cfg.client_state, seed=3, progress=False)
        clients_key, _ = simulator.round_keys(3, 0)
        local = jax.jit(cfg.local_update)
        reports = np.stack([
            np.asarray(local({"w": jnp.zeros(d)}, jnp.float32(cfg.client_state[k]),
                             ClientData(cl.x[k], cl.y[k], cl.mask[k], cl.size[k]),
                             jax.random.fold_in(clients_key, k))[0], np.float64)
            for k in range(n)])
        s, e = apes.shuffle(jax.random.key(11), reports, cfg.client_state.astype(np.float64))
        want = apes.analyze(np.asarray(s), np.asarray(e, np.float64), clip, mech)
        got = np.asarray(res.params["w"], np.float64)
        # float32 sum in the simulator vs float64 mean here: |Δm| ≤ n·2⁻²⁴·C; calibration divides by M'(g)
        slope = 1.0 if mech == "laplace" else float(np.asarray(
            clip_laplace.mean(1e-4, 2 * clip / cfg.client_state.astype(np.float64), clip)).mean() / 1e-4)
        np.testing.assert_allclose(got, want, rtol=0, atol=4 * n * 2.0**-24 * clip / slope + 2e-7)


# --------------------------------------------------------------------------------------------------
# accuracy on digits (seed 000 Table 3 / Table 4 ordering, where it holds in our runs)
# --------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_accuracy_ordering_on_digits_over_seeds():
    """200 clients (one Uniform2 budget each), 15 rounds of logistic regression, C = 0.05, three seeds.
    Holds with margin in our runs: Non-Private > APES; APES, S-APES and PLDP/UniS ≫ LDP-Min; APES > S-APES.
    Not asserted: APES > PLDP/UniS (the paper's 79.67% vs 77.54%): here APES won 2 of 3 seeds by ≤ 2.2
    points and lost one by 0.9 points (see the module report)."""
    from jaxpriv.budgets import scenario
    from jaxpriv.train import data

    ds = data.load("digits", seed=0)
    acc = {s: [] for s in ("nonprivate", "ldp_min", "pldp", "apes", "sapes")}
    for seed in (1, 2, 3):
        eps = scenario("Uniform2", 200, seed=seed)
        for system in acc:
            res, _ = apes.train(system, ds, eps, rounds=15, clip=0.05, b=130 if system == "sapes" else None,
                                seed=seed)
            acc[system].append(res.test_accuracy)
    mean = {s: float(np.mean(v)) for s, v in acc.items()}
    assert mean["nonprivate"] > mean["apes"] + 0.02
    assert min(acc["apes"]) > max(acc["ldp_min"]) + 0.15
    assert min(acc["pldp"]) > max(acc["ldp_min"]) + 0.15
    assert min(acc["sapes"]) > max(acc["ldp_min"]) + 0.1
    assert mean["apes"] > mean["sapes"] + 0.03


# --------------------------------------------------------------------------------------------------
# bad inputs
# --------------------------------------------------------------------------------------------------


def _base(params, state, data, key):
    return LocalResult(params, state, {})


PARAMS = {"w": jnp.zeros(4)}


@pytest.mark.parametrize(
    "call,match",
    [
        (lambda: apes.configure("dp", PARAMS, _base, [1.0, 1.0], 0.1), "system"),
        (lambda: apes.configure("apes", PARAMS, None, [1.0, 1.0], 0.1), "base_update"),
        (lambda: apes.configure("apes", PARAMS, _base, 1.0, 0.1), "local_epsilons"),
        (lambda: apes.configure("apes", PARAMS, _base, [1.0], 0.1), "local_epsilons"),
        (lambda: apes.configure("apes", PARAMS, _base, [1.0, 0.0], 0.1), "local_epsilons"),
        (lambda: apes.configure("apes", PARAMS, _base, [1.0, np.nan], 0.1), "local_epsilons"),
        (lambda: apes.configure("apes", PARAMS, _base, [1.0, 1.0], 0.0), "clip"),
        (lambda: apes.configure("apes", PARAMS, _base, [1.0, 1.0], [0.1, 0.2]), "clip"),
        (lambda: apes.configure("apes", PARAMS, _base, [1.0, 1.0], 0.1, b=2), "b"),
        (lambda: apes.configure("sapes", PARAMS, _base, [1.0, 1.0], 0.1), "b"),
        (lambda: apes.configure("sapes", PARAMS, _base, [1.0, 1.0], 0.1, b=5), "b"),
        (lambda: apes.configure("sapes", PARAMS, _base, [1.0, 1.0], 0.1, b=True), "b"),
        (lambda: apes.configure("apes", {}, _base, [1.0, 1.0], 0.1), "params"),
        (lambda: apes.used_epsilons("x", [1.0, 1.0]), "system"),
        (lambda: apes.account("apes", [1.0, 1.0], 0), "dimension"),
        (lambda: apes.account("apes", [1.0, 1.0], 4, rounds=0), "rounds"),
        (lambda: apes.account("apes", [1.0, 1.0], 4, rounds=True), "rounds"),
        (lambda: apes.account("apes", [1.0, 1.0], 4, delta_s=0.0), "delta_s"),
        (lambda: apes.account("apes", [1.0, 1.0], 4, delta_prime=1.0), "delta_prime"),
        (lambda: apes.account("sapes", [1.0, 1.0], 4, b=0), "b"),
        (lambda: apes.account("pldp", [-1.0, 1.0], 4), "local_epsilons"),
        (lambda: apes.local_spent([1.0], 0, 1), "dimension"),
        (lambda: apes.local_spent([1.0], 3, -1), "rounds_taken"),
        (lambda: apes.local_spent([-1.0], 3, 1), "local_epsilons"),
        (lambda: apes.shuffle(jax.random.key(0), np.zeros(3), np.ones(3)), "reports"),
        (lambda: apes.shuffle(jax.random.key(0), np.zeros((3, 2)), np.ones(2)), "local_epsilons"),
        (lambda: apes.analyze(np.zeros((3, 2)), np.ones(3), 0.1, "gauss"), "mechanism"),
        (lambda: apes.analyze(np.zeros(3), np.ones(3), 0.1), "shuffled_reports"),
        (lambda: apes.analyze(np.zeros((3, 2)), np.ones(2), 0.1), "shuffled_epsilons"),
        (lambda: apes.analyze(np.zeros((3, 2)), np.ones(3), -0.1), "clip"),
        (lambda: apes_reproduction.reproduce(True, "/tmp", seeds=[]), "seeds"),
        (lambda: apes_reproduction.reproduce(True, "/tmp", seeds=[-1]), "seeds"),
    ],
)
def test_bad_input(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_train_bad_input():
    from jaxpriv.train import data

    ds = data.load("digits", seed=0)
    with pytest.raises(ValueError, match="local_epsilons"):
        apes.train("apes", ds, np.ones(len(ds.y_train) + 1), rounds=1)
    with pytest.raises(ValueError, match="server_lr"):
        apes.train("apes", ds, np.ones(4), rounds=1, server_lr=0.0)
    with pytest.raises(ValueError, match="system"):
        apes.train("lap", ds, np.ones(4), rounds=1)
