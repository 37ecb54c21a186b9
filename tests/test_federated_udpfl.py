"""UDP-FL system: scales equal the Harmonizer called directly (staircase over the d-coordinate L1 curve);
every client's achieved ε ≤ its budget for random mechanisms and budgets; shuffler accounting equals
T·girgis_rdp converted by rdp.to_epsilon; the polygonal chain against its formula; chain fitting lowers
the expected loss; a simulator run; bad inputs."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from jaxpriv import rdp
from jaxpriv.federated import partition, simulator, udpfl
from jaxpriv.mechanisms import harmonizer
from jaxpriv.shuffle import bounds
from jaxpriv.train import data, dpsgd


ORDERS = (1.5, 2.0, 4.0, 8.0, 16.0, 32.0)  # a short grid keeps the Harmonizer's compilation cheap


def test_scales_equal_the_harmonizer():
    mechs = ["gaussian", "laplace", "staircase"]
    s, e = udpfl.scales(mechs, [2.0, 3.0, 4.0], 1e-5, 0.1, 20, 7, orders=ORDERS)
    for i, m in enumerate(mechs):
        want = harmonizer.harmonize([m], [2.0, 3.0, 4.0][i], 1e-5, 0.1, 20, ORDERS, dimension=7)
        assert s[i] == want.scale[0] and e[i] == want.epsilon[0]


def test_no_client_overspends():
    rng = np.random.default_rng(0)
    mechs = rng.choice(udpfl.MECHANISMS, 12)
    budgets = rng.uniform(0.5, 8.0, 12)
    s, e = udpfl.scales(mechs, budgets, 1e-5, 0.05, 30, 5, orders=ORDERS)
    assert np.all(e <= budgets) and np.all(np.isfinite(s))


def test_shuffle_epsilon_equals_composed_girgis():
    orders = np.arange(2, 33)
    want = rdp.to_epsilon(np.asarray(bounds.girgis_rdp(0.8, 5000, orders)) * 7, orders.astype(float), 1e-6)[0]
    assert udpfl.shuffle_epsilon(0.8, 5000, 7, 1e-6, orders=tuple(orders)) == float(want)


def test_polygonal_chain_formula():
    w1, w2, th = np.array([0.0, 1.0]), np.array([4.0, -2.0]), np.array([1.0, 3.0])
    for p in (0.0, 0.2, 0.5, 0.7, 1.0):
        want = 2 * (p * th + (0.5 - p) * w1) if p <= 0.5 else 2 * ((p - 0.5) * w2 + (1 - p) * th)
        got = udpfl.polygonal_chain(jnp.asarray(w1, jnp.float32), jnp.asarray(w2, jnp.float32),
                                    jnp.asarray(th, jnp.float32), p)
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6)


def test_fit_chain_lowers_the_expected_loss():
    loss = lambda w: jnp.sum((w - jnp.array([1.0, -1.0])) ** 2)
    w1, w2 = jnp.array([3.0, 3.0]), jnp.array([-3.0, 2.0])
    ps = np.linspace(0, 1, 201)
    expected = lambda th: np.mean([float(loss(udpfl.polygonal_chain(w1, w2, th, p))) for p in ps])
    th = udpfl.fit_chain(loss, w1, w2, steps=300, learning_rate=0.05)
    assert expected(th) < 0.8 * expected(0.5 * (w1 + w2))
    merged = udpfl.mode_connect(loss, [w1, w2, w1])
    assert merged.shape == (2,)


def test_simulator_run_with_mixed_mechanisms():
    d = data.load("digits", seed=0)
    clients = partition.stack(d.x_train[:300], d.y_train[:300], partition.iid(d.y_train[:300], 3, seed=0))
    model = dpsgd.MLP(64, (8,), 10, rngs=nnx.Rngs(0))
    graphdef, _, rest = nnx.split(model, nnx.Param, ...)
    local = udpfl.local_update(dpsgd.cross_entropy_loss, graphdef, 1.0, 0.3, 2, 0.2, rest=rest)
    mechs = ["gaussian", "laplace", "staircase"]
    s, _ = udpfl.scales(mechs, 8.0, 1e-5, 0.2, 4, 610)
    res = simulator.run(model, local, clients, rounds=2, client_state=udpfl.client_state(mechs, s),
                        test_data=d, progress=False)
    assert all(np.all(np.isfinite(np.asarray(v))) for v in jax.tree.leaves(res.params))


def test_bad_inputs():
    with pytest.raises(ValueError, match="mechanisms"):
        udpfl.scales(["gauss"], 1.0, 1e-5, 0.1, 10, 5)
    with pytest.raises(ValueError, match="steps"):
        udpfl.scales(["gaussian"], 1.0, 1e-5, 0.1, 0, 5)
    with pytest.raises(ValueError, match="dim"):
        udpfl.scales(["gaussian"], 1.0, 1e-5, 0.1, 10, 0)
    with pytest.raises(ValueError, match="epsilon"):
        udpfl.scales(["gaussian"], -1.0, 1e-5, 0.1, 10, 5)
    with pytest.raises(ValueError, match="q"):
        udpfl.local_update(None, None, 1.0, 0.1, 1, 0.0)
    with pytest.raises(ValueError, match="clip"):
        udpfl.local_update(None, None, 0.0, 0.1, 1, 0.5)
    with pytest.raises(ValueError, match="scale"):
        udpfl.client_state(["gaussian"], [1.0, 2.0])
    with pytest.raises(ValueError, match="models"):
        udpfl.mode_connect(lambda w: w, [])
    with pytest.raises(ValueError, match="steps"):
        udpfl.fit_chain(lambda w: w, 0.0, 1.0, steps=0)
