"""UDP-FL system: scales and build()'s accounting equal the Harmonizer called directly (staircase over the
d-coordinate L1 curve); every client's achieved ε ≤ its budget for random mechanisms and budgets; the
float32 noise parameters are on the safe side; each mechanism's noise in the local update against scipy's
distributions (KS); the select program equals the one-mechanism program; shuffler accounting equals
T·girgis_rdp converted by rdp.to_epsilon; the polygonal chain and the chosen point against plain numpy;
the mode-connectivity aggregator (stacking, one participant = FedAvg exactly, none = no move, two clients:
server loss ≤ the plain average's); simulator runs; accuracy ordering (slow); bad inputs."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from scipy import stats

from jaxpriv import rdp
from jaxpriv.federated import partition, simulator, udpfl
from jaxpriv.federated.partition import ClientData
from jaxpriv.federated.simulator import ServerState
from jaxpriv.calibrate import harmonizer
from jaxpriv.mechanisms import staircase
from jaxpriv.reproduce import udpfl as udpfl_reproduction
from jaxpriv.shuffle import bounds
from jaxpriv.train import data, dpsgd

ORDERS = (1.5, 2.0, 4.0, 8.0, 16.0, 32.0)  # a short grid keeps the Harmonizer's compilation cheap


@pytest.fixture(scope="module")
def digits():
    return data.load("digits", seed=0)


@pytest.fixture(scope="module")
def mnist():
    return data.load("mnist", seed=0)


def _linear(n_in=64, n_out=10, seed=0):
    return nnx.split(nnx.Linear(n_in, n_out, rngs=nnx.Rngs(seed)), nnx.Param, ...)


# --------------------------------------------------------------------------------------------------
# accounting
# --------------------------------------------------------------------------------------------------


def test_scales_equal_the_harmonizer():
    mechs = ["gaussian", "laplace", "staircase"]
    s, e = udpfl.scales(mechs, [2.0, 3.0, 4.0], 1e-5, 0.1, 20, 7, orders=ORDERS)
    for i, m in enumerate(mechs):
        want = harmonizer.harmonize([m], [2.0, 3.0, 4.0][i], 1e-5, 0.1, 20, ORDERS, dimension=7)
        assert s[i] == want.scale[0] and e[i] == want.epsilon[0]


def test_build_accounting_is_the_engines_and_float32_is_on_the_safe_side():
    graphdef, params, rest = _linear(6, 3)
    model = nnx.merge(graphdef, params, rest)
    mechs = ["gaussian", "laplace", "staircase", "laplace"]
    budgets = [1.0, 2.0, 3.0, 4.0]
    clip = {"gaussian": 0.7, "laplace": 2.3, "staircase": 1.1}
    for agg in udpfl.AGGREGATIONS:  # mode connectivity is post-processing: the same accounting
        cfg = udpfl.build(model, dpsgd.cross_entropy_loss, mechs, budgets, 1e-5, clip=clip, learning_rate=0.5,
                          local_steps=3, q=0.05, rounds=7, aggregation=agg, server_data=(np.ones((2, 6)), [0, 1]),
                          orders=ORDERS)
        want = harmonizer.harmonize(mechs, budgets, 1e-5, 0.05, 21, ORDERS, dimension=6 * 3 + 3)
        np.testing.assert_array_equal(cfg.scale, want.scale)
        np.testing.assert_array_equal(cfg.epsilon, want.epsilon)
        st = cfg.client_state
        c = np.array([clip[m] for m in mechs], np.float32).astype(np.float64)
        np.testing.assert_array_equal(st["clip"], c.astype(np.float32))
        np.testing.assert_array_equal(st["mechanism"], [0, 1, 2, 1])
        np.testing.assert_array_equal(st["slot"], np.arange(4))
        noise = st["scale"].astype(np.float64)
        exact = want.scale * np.where(np.array(mechs) == "staircase", 1.0, c)
        stair = np.array(mechs) == "staircase"
        assert np.all(noise[~stair] >= exact[~stair]) and np.all(noise[stair] <= exact[stair])  # σC, bC up; ε₀ down
        np.testing.assert_allclose(noise, exact, rtol=2**-23)


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


# --------------------------------------------------------------------------------------------------
# local update
# --------------------------------------------------------------------------------------------------


def _zero_grad_loss(model, x, y, key=None):
    return 0.0 * jnp.sum(model(x), axis=-1)  # the clipped sum is 0: the update is the noise alone


def test_local_update_noise_has_each_mechanisms_distribution():
    graphdef, params, rest = _linear(100, 100)  # 10 100 coordinates of noise per draw
    n, q, lr = 40, 0.25, 0.5
    data_ = ClientData(jnp.ones((n, 100)), jnp.zeros(n, jnp.int32), jnp.ones(n, bool), jnp.int32(n))
    local = udpfl.local_update(_zero_grad_loss, graphdef, lr, 1, q, rest=rest)
    for mech, scale, clip in (("gaussian", 1.3, 0.5), ("laplace", 0.8, 2.0), ("staircase", 0.9, 1.5)):
        state = jax.tree.map(lambda v: v[0], udpfl.client_state([mech], [scale], clip))
        res = local(params, state, data_, jax.random.key(1))
        flat = np.concatenate([np.ravel(v) for v in jax.tree.leaves(res.update["delta"])]).astype(np.float64)
        noise = -flat * q * n / lr  # update = −η·noise / (q·n)
        if mech == "gaussian":
            cdf = stats.norm(scale=scale * clip).cdf
            wrong = stats.norm(scale=1.25 * scale * clip).cdf
        elif mech == "laplace":
            cdf = stats.laplace(scale=scale * clip).cdf
            wrong = stats.laplace(scale=1.25 * scale * clip).cdf
        else:
            cdf = lambda x: np.asarray(staircase.cdf(x, scale, sensitivity=clip))  # noqa: E731
            wrong = lambda x: np.asarray(staircase.cdf(x, scale, sensitivity=1.25 * clip))  # noqa: E731
        assert stats.kstest(noise, cdf).pvalue > 1e-3, mech
        assert stats.kstest(noise, wrong).pvalue < 1e-6, mech  # the test has the power to see a 25% error


def test_select_program_equals_the_single_mechanism_program(digits):
    graphdef, params, rest = _linear()
    x, y = digits.x_train[:60], digits.y_train[:60]
    data_ = ClientData(jnp.asarray(x), jnp.asarray(y), jnp.ones(60, bool), jnp.int32(60))
    every = udpfl.local_update(dpsgd.cross_entropy_loss, graphdef, 0.5, 2, 0.3, rest=rest)
    for mech in udpfl.MECHANISMS:
        one = udpfl.local_update(dpsgd.cross_entropy_loss, graphdef, 0.5, 2, 0.3, rest=rest, mechanisms=[mech])
        state = jax.tree.map(lambda v: v[0], udpfl.client_state([mech], [0.8], 1.0))
        a = every(params, state, data_, jax.random.key(3)).update["delta"]
        b = one(params, state, data_, jax.random.key(3)).update["delta"]
        for u, v in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
            np.testing.assert_allclose(u, v, rtol=1e-6, atol=1e-7)


def test_unlisted_mechanism_gives_a_nan_update_not_another_mechanisms_noise():
    graphdef, params, rest = _linear(4, 3)
    data_ = ClientData(jnp.ones((8, 4)), jnp.zeros(8, jnp.int32), jnp.ones(8, bool), jnp.int32(8))
    local = udpfl.local_update(dpsgd.cross_entropy_loss, graphdef, 0.5, 1, 0.5, rest=rest, mechanisms=["staircase"])
    state = jax.tree.map(lambda v: v[0], udpfl.client_state(["laplace"], [1.0], 1.0))
    delta = local(params, state, data_, jax.random.key(0)).update["delta"]
    assert all(np.all(np.isnan(v)) for v in jax.tree.leaves(delta))


# --------------------------------------------------------------------------------------------------
# mode connectivity
# --------------------------------------------------------------------------------------------------


def test_polygonal_chain_formula():
    w1, w2, th = np.array([0.0, 1.0]), np.array([4.0, -2.0]), np.array([1.0, 3.0])
    for p in (0.0, 0.2, 0.5, 0.7, 1.0):
        want = 2 * (p * th + (0.5 - p) * w1) if p <= 0.5 else 2 * ((p - 0.5) * w2 + (1 - p) * th)
        got = udpfl.polygonal_chain(jnp.asarray(w1, jnp.float32), jnp.asarray(w2, jnp.float32),
                                    jnp.asarray(th, jnp.float32), p)
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6)


def test_fit_chain_lowers_the_expected_loss():
    loss = lambda w: jnp.sum((w - jnp.array([1.0, -1.0])) ** 2)  # noqa: E731
    w1, w2 = jnp.array([3.0, 3.0]), jnp.array([-3.0, 2.0])
    ps = np.linspace(0, 1, 201)
    expected = lambda th: np.mean([float(loss(udpfl.polygonal_chain(w1, w2, th, p))) for p in ps])  # noqa: E731
    th = udpfl.fit_chain(loss, w1, w2, steps=300, learning_rate=0.05)
    assert expected(th) < 0.8 * expected(0.5 * (w1 + w2))


def test_chosen_point_is_the_numpy_argmin_over_the_candidates():
    target = np.array([1.0, -1.0, 0.5])
    loss = lambda w: jnp.sum((w - target) ** 2 * jnp.array([1.0, 3.0, 0.5]))  # noqa: E731
    rng = np.random.default_rng(0)
    for _ in range(5):
        w1, w2, th = (rng.normal(size=3).astype(np.float32) * 2 for _ in range(3))
        got = np.asarray(udpfl._chosen_point(loss, jnp.asarray(w1), jnp.asarray(w2), jnp.asarray(th), 9))
        cands = [2 * (p * th + (0.5 - p) * w1) if p <= 0.5 else 2 * ((p - 0.5) * w2 + (1 - p) * th)
                 for p in np.linspace(0, 1, 9)] + [(w1 + w2) / 2]
        losses = [np.sum((c - target) ** 2 * np.array([1.0, 3.0, 0.5])) for c in cands]
        np.testing.assert_allclose(got, cands[int(np.argmin(losses))], rtol=1e-5, atol=1e-6)


def test_mode_connect_merges_to_no_worse_than_the_average_and_keeps_a_single_model():
    loss = lambda w: jnp.sum((w - jnp.array([1.0, -1.0])) ** 2)  # noqa: E731
    models = [jnp.array([3.0, 3.0]), jnp.array([-3.0, 2.0]), jnp.array([0.0, -4.0])]
    merged = udpfl.mode_connect(loss, models, steps=100)
    assert float(loss(merged)) <= float(loss(sum(models) / 3))
    assert float(udpfl.mode_connect(loss, models[:1])[0]) == 3.0


def _stack_round(agg, graphdef, rest, clients, ids, valid, mechs=("gaussian",) * 3):
    local = udpfl.local_update(dpsgd.cross_entropy_loss, graphdef, 0.5, 2, 0.3, rest=rest,
                               mechanisms=sorted(set(mechs)))
    step = simulator.make_round(local, aggregator=agg)
    state = jax.tree.map(jnp.asarray, udpfl.client_state(list(mechs), [0.5] * len(mechs), 1.0))
    return lambda server, key: step(server, state, clients, jnp.asarray(ids, jnp.int32), jnp.asarray(valid),
                                    key, chunk=len(ids))[0]


def test_contributions_sum_to_the_stack_of_client_models():
    agg = udpfl.mode_connect_aggregator(lambda w: jnp.sum(w["w"] ** 2), 4)
    deltas = np.arange(12, dtype=np.float32).reshape(3, 2, 2)
    updates = {"delta": {"w": jnp.asarray(deltas)}, "slot": jnp.array([2, 0, 9]), "global": {"w": jnp.ones((3, 2, 2))}}
    parts = jax.vmap(agg.contribute, (0, None))(updates, None)
    total = jax.tree.map(lambda v: jnp.sum(v, 0), parts)
    want = np.zeros((4, 2, 2), np.float32)
    want[2], want[0] = deltas[0], deltas[1]  # slot 9 ≥ C: padding, in no row
    np.testing.assert_array_equal(total["models"]["w"], want)
    np.testing.assert_array_equal(total["present"], [1, 0, 1, 0])


def test_one_participant_equals_fedavg_and_none_keeps_the_model(digits):
    clients = partition.stack(digits.x_train[:150], digits.y_train[:150], partition.iid(digits.y_train[:150], 3, seed=0))
    graphdef, params, rest = _linear()
    loss = udpfl.server_loss(dpsgd.cross_entropy_loss, graphdef, digits.x_train[150:200], digits.y_train[150:200], rest=rest)
    mc = udpfl.mode_connect_aggregator(loss, 3, steps=5)
    server = ServerState(params, None)
    key = jax.random.key(7)
    for valid in ([False, True, False], [False, False, False]):
        got = _stack_round(mc, graphdef, rest, clients, [0, 1, 2], valid)(server, key).params
        # uniform weights: Δ·1/1 is Δ exactly (size weights round Δ·n/n)
        want = _stack_round(udpfl.mean_aggregator("uniform"), graphdef, rest, clients, [0, 1, 2], valid)(server, key).params
        for u, v in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
            np.testing.assert_array_equal(u, v)
        if not any(valid):
            for u, v in zip(jax.tree.leaves(got), jax.tree.leaves(params)):
                np.testing.assert_array_equal(u, v)


def test_two_clients_server_loss_no_worse_than_the_plain_average(digits):
    clients = partition.stack(digits.x_train[:200], digits.y_train[:200], partition.iid(digits.y_train[:200], 2, seed=0))
    graphdef, params, rest = _linear()
    loss = udpfl.server_loss(dpsgd.cross_entropy_loss, graphdef, digits.x_train[200:300], digits.y_train[200:300],
                             rest=rest)
    server = ServerState(params, None)
    for seed in range(3):
        key = jax.random.key(seed)
        mc = _stack_round(udpfl.mode_connect_aggregator(loss, 2), graphdef, rest, clients, [0, 1], [True, True],
                          ("gaussian", "laplace"))(server, key).params
        avg = _stack_round(udpfl.mean_aggregator("uniform"), graphdef, rest, clients, [0, 1], [True, True],
                           ("gaussian", "laplace"))(server, key).params
        assert float(loss(mc)) <= float(loss(avg))


def test_server_loss_is_the_mean_cross_entropy():
    graphdef, params, rest = _linear(5, 3)
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(7, 5)).astype(np.float32), rng.integers(0, 3, 7)
    logits = x @ np.asarray(params["kernel"]) + np.asarray(params["bias"])
    logp = logits - np.log(np.sum(np.exp(logits), 1, keepdims=True))
    want = -np.mean(logp[np.arange(7), y])
    got = float(udpfl.server_loss(dpsgd.cross_entropy_loss, graphdef, x, y, rest=rest)(params))
    np.testing.assert_allclose(got, want, rtol=1e-5)


# --------------------------------------------------------------------------------------------------
# simulator runs
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("aggregation", udpfl.AGGREGATIONS)
def test_simulator_run_with_mixed_mechanisms(digits, aggregation):
    clients = partition.stack(digits.x_train[:300], digits.y_train[:300], partition.iid(digits.y_train[:300], 4, seed=0))
    model = dpsgd.MLP(64, (8,), 10, rngs=nnx.Rngs(0))
    cfg = udpfl.build(model, dpsgd.cross_entropy_loss, ["gaussian", "laplace", "staircase", "gaussian"], 8.0, 1e-5,
                      clip=1.0, learning_rate=0.3, local_steps=2, q=0.2, rounds=2, aggregation=aggregation,
                      server_data=(digits.x_train[300:340], digits.y_train[300:340]), chain_steps=5)
    res = simulator.run(model, cfg.local_update, clients, rounds=2, client_rate=0.6, aggregator=cfg.aggregator,
                        client_state=cfg.client_state, test_data=digits, progress=False)
    assert all(np.all(np.isfinite(np.asarray(v))) for v in jax.tree.leaves(res.params))
    assert res.compiled_rounds >= 1 and len(res.history) == 2


@pytest.mark.slow
def test_accuracy_ordering_over_seeds(mnist):
    """reproduce's quick setting (MNIST-5k, logistic regression, T = 8), seeds 0-2. Measured, FedAvg mean:
    gaussian 0.781 / 0.778 / 0.773, laplace 0.153 / 0.170 / 0.201, staircase 0.110 / 0.279 / 0.096; mode
    connectivity (200 public records): gaussian 0.835 / 0.848 / 0.833, staircase 0.802 / 0.814 / 0.793. (On
    digits, until issue 34: gaussian 0.836 / 0.822 / 0.813, laplace 0.248 / 0.206 / 0.267, staircase 0.109 /
    0.089 / 0.120; mode connectivity gaussian 0.886 / 0.875 / 0.880, staircase 0.813 / 0.755 / 0.760.) The
    paper's order (staircase best) does not hold under a sound accounting: gaussian leads by > 0.4 in every
    seed. Laplace vs staircase is not asserted (on digits laplace led in seeds 0-4, but they tie at T = 30;
    on MNIST-5k the staircase led in seed 1). Mode connectivity beats the mean for both mechanisms in every
    seed (mostly the public data's doing, see reproduce)."""
    s = udpfl_reproduction._SETTING
    order = np.random.default_rng(0).permutation(mnist.n_train)
    k = int(round(s["server_fraction"] * mnist.n_train))
    server, own = (mnist.x_train[order[:k]], mnist.y_train[order[:k]]), order[k:]
    accs = {}
    for seed in range(3):
        clients = partition.stack(mnist.x_train[own], mnist.y_train[own],
                                  partition.iid(mnist.y_train[own], s["clients"], seed=seed))
        runs = [(m, "mean") for m in udpfl.MECHANISMS] + [(m, "mode_connect") for m in ("gaussian", "staircase")]
        for mech, agg in runs:
            model = dpsgd.MLP(784, (), 10, rngs=nnx.Rngs(seed))
            cfg = udpfl.build(model, dpsgd.cross_entropy_loss, [mech] * s["clients"], s["epsilon"], s["delta"],
                              clip=s["clip"], learning_rate=s["learning_rate"], local_steps=s["tau"], q=s["q"],
                              rounds=8, aggregation=agg, server_data=server)
            res = simulator.run(model, cfg.local_update, clients, rounds=8, aggregator=cfg.aggregator,
                                client_state=cfg.client_state, test_data=mnist, seed=seed, progress=False)
            accs.setdefault((mech, agg), []).append(res.test_accuracy)
    acc = {k: np.array(v) for k, v in accs.items()}
    assert np.all(acc["gaussian", "mean"] > 0.75), accs
    for mech in ("laplace", "staircase"):
        assert np.all(acc["gaussian", "mean"] - acc[mech, "mean"] > 0.4), accs
    assert np.all(acc["gaussian", "mode_connect"] - acc["gaussian", "mean"] > 0.02), accs
    assert np.all(acc["staircase", "mode_connect"] - acc["staircase", "mean"] > 0.4), accs


# --------------------------------------------------------------------------------------------------
# bad inputs
# --------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny():
    """A 4-input, 3-class linear model for the bad-input cases."""
    graphdef, params, rest = _linear(4, 3)
    return {"model": nnx.merge(graphdef, params, rest), "graphdef": graphdef}


_SQ = lambda w: jnp.sum(w ** 2)  # noqa: E731
_OK = dict(clip=1.0, learning_rate=0.1, local_steps=1, q=0.1, rounds=2)
_X4, _Y4 = np.ones((3, 4)), np.array([0, 1, 2])


def _build(t, **kw):
    args = {**_OK, **kw}
    mechanisms = args.pop("mechanisms", ["gaussian"])
    return udpfl.build(t["model"], dpsgd.cross_entropy_loss, mechanisms, 1.0, 1e-5, **args)


BAD = [
    ("scales unknown mechanism", lambda t: udpfl.scales(["gauss"], 1.0, 1e-5, 0.1, 10, 5), "mechanisms"),
    ("scales no mechanism", lambda t: udpfl.scales([], 1.0, 1e-5, 0.1, 10, 5), "mechanisms"),
    ("scales steps 0", lambda t: udpfl.scales(["gaussian"], 1.0, 1e-5, 0.1, 0, 5), "steps"),
    ("scales dim 0", lambda t: udpfl.scales(["gaussian"], 1.0, 1e-5, 0.1, 10, 0), "dim"),
    ("scales epsilon negative", lambda t: udpfl.scales(["gaussian"], -1.0, 1e-5, 0.1, 10, 5), "epsilon"),
    ("scales q > 1", lambda t: udpfl.scales(["gaussian"], 1.0, 1e-5, 1.5, 10, 5), "q"),
    ("local_update q 0", lambda t: udpfl.local_update(None, None, 0.1, 1, 0.0), "q"),
    ("local_update learning_rate 0", lambda t: udpfl.local_update(None, None, 0.0, 1, 0.5), "learning_rate"),
    ("local_update local_steps 0", lambda t: udpfl.local_update(None, None, 0.1, 0, 0.5), "local_steps"),
    ("local_update unknown mechanism", lambda t: udpfl.local_update(None, None, 0.1, 1, 0.5, mechanisms=["gauss"]),
     "mechanisms"),
    ("client_state scale length", lambda t: udpfl.client_state(["gaussian"], [1.0, 2.0], 1.0), "scale"),
    ("client_state scale 0", lambda t: udpfl.client_state(["gaussian"], [0.0], 1.0), "scale"),
    ("client_state clip 0", lambda t: udpfl.client_state(["gaussian"], [1.0], 0.0), "clip"),
    ("client_state clip length", lambda t: udpfl.client_state(["gaussian"] * 2, [1.0] * 2, [1.0] * 3), "clip"),
    ("shuffle_epsilon rounds 0", lambda t: udpfl.shuffle_epsilon(1.0, 100, 0, 1e-6), "rounds"),
    ("fit_chain steps 0", lambda t: udpfl.fit_chain(_SQ, 0.0, 1.0, steps=0), "steps"),
    ("fit_chain learning_rate 0", lambda t: udpfl.fit_chain(_SQ, 0.0, 1.0, learning_rate=0.0), "learning_rate"),
    ("fit_chain seed negative", lambda t: udpfl.fit_chain(_SQ, 0.0, 1.0, seed=-1), "seed"),
    ("mode_connect no model", lambda t: udpfl.mode_connect(_SQ, []), "models"),
    ("mode_connect grid even", lambda t: udpfl.mode_connect(_SQ, [0.0, 1.0], grid=4), "grid"),
    ("mode_connect grid 1", lambda t: udpfl.mode_connect(_SQ, [0.0, 1.0], grid=1), "grid"),
    ("aggregator loss not callable", lambda t: udpfl.mode_connect_aggregator("loss", 3), "loss"),
    ("aggregator num_clients 0", lambda t: udpfl.mode_connect_aggregator(_SQ, 0), "num_clients"),
    ("aggregator steps 0", lambda t: udpfl.mode_connect_aggregator(_SQ, 3, steps=0), "steps"),
    ("server_loss labels length", lambda t: udpfl.server_loss(dpsgd.cross_entropy_loss, t["graphdef"], _X4, [0, 1]),
     "x, y"),
    ("build aggregation unknown", lambda t: _build(t, aggregation="median"), "aggregation"),
    ("build mode_connect without server_data", lambda t: _build(t, aggregation="mode_connect"), "server_data"),
    ("build clip missing a mechanism", lambda t: _build(t, mechanisms=["gaussian", "laplace"], clip={"gaussian": 1.0}),
     "clip"),
    ("build rounds 0", lambda t: _build(t, rounds=0), "rounds"),
    # server_data: a malformed value names server_data (not Python's unpacking error)
    ("server_data not a pair", lambda t: _build(t, aggregation="mode_connect", server_data=(_X4, _Y4, _Y4)),
     "server_data"),
    ("server_data one array", lambda t: _build(t, aggregation="mode_connect", server_data=_X4), "server_data"),
    ("server_data a number", lambda t: _build(t, aggregation="mode_connect", server_data=3.0), "server_data"),
    ("server_data a string", lambda t: _build(t, aggregation="mode_connect", server_data="xy"), "server_data"),
    ("server_data dict", lambda t: _build(t, aggregation="mode_connect", server_data={"x": _X4, "y": _Y4}),
     "server_data"),
    ("server_data labels length", lambda t: _build(t, aggregation="mode_connect", server_data=(_X4, _Y4[:2])),
     "server_data"),
    ("server_data labels 2-D", lambda t: _build(t, aggregation="mode_connect", server_data=(_X4, _Y4[:, None])),
     "server_data"),
    ("server_data x scalar", lambda t: _build(t, aggregation="mode_connect", server_data=(1.0, [0])), "server_data"),
    ("server_data empty", lambda t: _build(t, aggregation="mode_connect", server_data=(np.ones((0, 4)), [])),
     "server_data"),
    ("server_data NaN", lambda t: _build(t, aggregation="mode_connect", server_data=(np.r_[_X4[:2], [[np.nan] * 4]], _Y4)),
     "server_data"),
    ("server_data ragged", lambda t: _build(t, aggregation="mode_connect", server_data=([[1.0, 2.0], [1.0]], [0, 1])),
     "server_data"),
    ("server_data features", lambda t: _build(t, aggregation="mode_connect", server_data=(np.ones((3, 5)), _Y4)),
     "server_data"),
    ("server_data features with mean", lambda t: _build(t, server_data=(np.ones((3, 5)), _Y4)), "server_data"),
]


@pytest.mark.parametrize("call, name", [(c, n) for _, c, n in BAD], ids=[i for i, _, _ in BAD])
def test_bad_input(tiny, call, name):
    with pytest.raises(ValueError, match=name):
        call(tiny)


def test_valid_server_data_is_accepted_as_lists_and_arrays(tiny):
    for server in ((_X4, _Y4), [_X4.tolist(), _Y4.tolist()], (jnp.asarray(_X4), jnp.asarray(_Y4))):
        cfg = _build(tiny, aggregation="mode_connect", server_data=server)
        assert isinstance(cfg.aggregator, simulator.Aggregator)
