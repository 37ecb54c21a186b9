"""GSPA system: accounting equals the engines (gspa_mu_composed, personalized_epsilon, a numpy advanced-
composition formula); every client's noise meets its own (ε_i, δ_i) on the exact Gaussian curve and its
report moves by at most 2C/m under an adversarial record; Alg. 3 equals a Python loop; accuracy; bad inputs."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from jaxpriv.federated import gspa, partition
from jaxpriv.mechanisms import gaussian
from jaxpriv.shuffle import bounds, personalized
from jaxpriv.train import data, dpsgd

LOSS = dpsgd.cross_entropy_loss


@pytest.fixture(scope="module")
def digits():
    return data.load("digits", seed=0)


def test_accounting_equals_the_engines():
    eps = np.random.default_rng(0).uniform(0.3, 1.0, 200)
    acc = gspa.accounting(eps, 1e-7, rounds=5, delta=1e-4)
    assert acc.mu_composed == float(bounds.gspa_mu_composed(eps, 5, np.full(200, 1e-7)))
    e_basic = float(personalized.personalized_epsilon(eps, 1e-4 / 5, "gspa", np.full(200, 1e-7)))
    assert acc.epsilon_basic == 5 * e_basic
    e0 = float(personalized.personalized_epsilon(eps, 1e-4 / 10, "gspa", np.full(200, 1e-7)))
    want = e0 * math.sqrt(2 * 5 * math.log(2 / 1e-4)) + 5 * e0 * math.expm1(e0)
    assert math.isclose(acc.epsilon_advanced, want, rel_tol=1e-12)
    assert acc.epsilon_exact == min(acc.epsilon_basic, acc.epsilon_advanced)


def test_exact_route_needs_delta_above_the_local_deltas():
    acc = gspa.accounting(np.ones(50), 1e-3, rounds=10, delta=1e-3)
    assert acc.epsilon_exact == math.inf and math.isfinite(acc.epsilon_gdp)


def test_per_user_epsilons_never_exceed_the_worst_case():
    eps = np.random.default_rng(1).uniform(0.2, 1.0, 100)
    worst = gspa.accounting(eps, 0.0, rounds=3, delta=1e-5)
    per = gspa.accounting(eps, 0.0, rounds=3, delta=1e-5, per_user=True)
    assert per.epsilon_exact.shape == (100,)
    assert np.all(per.epsilon_exact <= worst.epsilon_exact)


@pytest.mark.parametrize("calibration", ["classical", "analytic"])
def test_each_client_noise_meets_its_own_budget(calibration):
    rng = np.random.default_rng(2)
    eps, dl = rng.uniform(0.05, 1.0, 30), rng.uniform(1e-8, 1e-3, 30)
    clip, m = 1.5, 12
    sig = gspa.client_sigmas(eps, dl, clip, m, calibration)
    # the exact Gaussian δ(ε) at sensitivity 2C/m never exceeds the client's δ_i
    got = np.asarray(gaussian.delta(sig, eps, 2 * clip / m))
    assert np.all(got <= dl * (1 + 1e-9))
    np.testing.assert_allclose(sig * eps / np.sqrt(2 * np.log(1.25 / dl)), 2 * clip / m, rtol=1e-12) \
        if calibration == "classical" else None


def test_report_moves_by_at_most_2c_over_m_under_an_adversarial_record(digits):
    model = dpsgd.MLP(64, (8,), 10, rngs=nnx.Rngs(0))
    graphdef, params, rest = nnx.split(model, nnx.Param, ...)
    clip, m, lr = 0.7, 16, 1.0
    local = jax.jit(gspa.local_update(LOSS, graphdef, clip, lr, m, rest=rest))
    x, y = jnp.asarray(digits.x_train[:m]), jnp.asarray(digits.y_train[:m])
    base = partition.ClientData(x, y, jnp.ones(m, bool), jnp.int32(m))
    worst = 0.0
    for scale in (1.0, 1e3, 1e6):  # replace record 0 with an extreme one, wrong label
        x2 = x.at[0].set(scale * jnp.sign(x[0] + 0.1))
        other = base._replace(x=x2, y=y.at[0].set((y[0] + 3) % 10))
        a = local(params, jnp.float32(0.0), base, jax.random.key(0)).update
        b = local(params, jnp.float32(0.0), other, jax.random.key(0)).update
        shift = math.sqrt(sum(float(jnp.sum((u - v) ** 2)) for u, v in zip(jax.tree.leaves(a), jax.tree.leaves(b))))
        worst = max(worst, shift)
    assert 0 < worst <= lr * 2 * clip / m * (1 + 1e-5)


def test_shuffled_sgd_equals_a_python_loop(digits):
    y = digits.y_train[:120]
    clients = partition.stack(digits.x_train[:120], y, partition.iid(y, 6, seed=0))
    model = dpsgd.MLP(64, (8,), 10, rngs=nnx.Rngs(0))
    local, _, sig = gspa.build(model, LOSS, np.full(6, 0.8), 1e-5, clip=1.0, learning_rate=0.3, batch_size=20)
    graphdef, params, rest = nnx.split(model, nnx.Param, ...)
    params = jax.tree.map(jnp.array, params)
    res = gspa.shuffled_sgd(model, local, clients, sig, epochs=2, seed=3)
    jl = jax.jit(local)
    p = params
    for t, order in enumerate(res.orders):
        key = jax.random.fold_in(jax.random.key(3), t)
        assert sorted(order.tolist()) == list(range(6))
        for k in order.tolist():
            d = partition.ClientData(*(jnp.asarray(np.asarray(a)[k]) for a in clients))
            u = jl(p, jnp.float32(sig[k]), d, jax.random.fold_in(key, k)).update
            p = jax.tree.map(jnp.add, p, u)
    for a, b in zip(jax.tree.leaves(res.params), jax.tree.leaves(p)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)


@pytest.mark.slow
def test_accuracy_ordering_on_digits(digits):
    """Non-private > GSPA (ε_i ~ U(0.5, 1)) > chance + margin, over 3 seeds."""
    rng = np.random.default_rng(0)
    eps = rng.uniform(0.5, 1.0, 10)
    got = {"gspa": [], "free": []}
    for s in range(3):
        clients = partition.stack(digits.x_train, digits.y_train, partition.iid(digits.y_train, 10, seed=s))
        for name, scale in (("gspa", 1.0), ("free", 0.0)):
            model = dpsgd.MLP(64, (16,), 10, rngs=nnx.Rngs(s))
            local, _, sig = gspa.build(model, LOSS, eps, 1e-6, clip=1.0, learning_rate=0.5, batch_size=144)
            got[name].append(gspa.shuffled_sgd(model, local, clients, sig * scale, epochs=8, seed=s,
                                               test_data=digits).accuracies[-1])
    assert np.mean(got["free"]) > np.mean(got["gspa"]) + 0.05
    assert min(got["gspa"]) > 0.3


def test_bad_inputs():
    with pytest.raises(ValueError, match="calibration"):
        gspa.client_sigmas([0.5], 1e-5, 1.0, 4, calibration="exact")
    with pytest.raises(ValueError, match="unit"):
        gspa.client_sigmas([0.5], 1e-5, 1.0, 4, unit="user")
    with pytest.raises(ValueError, match="epsilon"):
        gspa.client_sigmas([2.0], 1e-5, 1.0, 4)  # classical calibration is invalid beyond ε = 1
    with pytest.raises(ValueError, match="clip"):
        gspa.client_sigmas([0.5], 1e-5, 0.0, 4)
    with pytest.raises(ValueError, match="batch_size"):
        gspa.client_sigmas([0.5], 1e-5, 1.0, 0)
    with pytest.raises(ValueError, match="local_epsilons"):
        gspa.client_sigmas([[0.5]], 1e-5, 1.0, 4)
    with pytest.raises(ValueError, match="learning_rate"):
        gspa.local_update(LOSS, None, 1.0, -1.0, 4)
    with pytest.raises(ValueError, match="delta"):
        gspa.accounting([1.0, 1.0], 0.0, 2, 1.5)
    with pytest.raises(ValueError, match="rounds"):
        gspa.accounting([1.0, 1.0], 0.0, 0, 1e-5)
    with pytest.raises(ValueError, match="local_epsilons"):
        gspa.accounting([1.0], 0.0, 1, 1e-5)
    with pytest.raises(ValueError, match="delta_prime"):
        gspa.advanced_composition(0.1, 0.0, 3)


def test_shuffled_sgd_rejects_bad_sigmas(digits):
    y = digits.y_train[:40]
    clients = partition.stack(digits.x_train[:40], y, partition.iid(y, 4, seed=0))
    model = dpsgd.MLP(64, (4,), 10, rngs=nnx.Rngs(0))
    local, _, _ = gspa.build(model, LOSS, np.full(4, 0.5), 1e-5, clip=1.0, learning_rate=0.1, batch_size=10)
    with pytest.raises(ValueError, match="sigmas"):
        gspa.shuffled_sgd(model, local, clients, np.ones(3), epochs=1)
    with pytest.raises(ValueError, match="epochs"):
        gspa.shuffled_sgd(model, local, clients, np.ones(4), epochs=0)
