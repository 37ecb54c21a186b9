"""Federated simulator: the vmapped, chunked (and 4-device sharded) round against a plain Python loop over
clients with the same keys; FedAvg with one client against centralised gradient descent written here;
FedProx against its own proximal-gradient loop and the ‖Δ‖ ≤ G/μ bound; client-sampling frequencies
against the binomial law; empty rounds; the round hook (state set before a round, metrics, early stop,
no hook = an identity hook); aggregators against numpy means; a DP-SGD local update with
per-record rates in the client state; accuracy on digits; every bad input."""

import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

from cli_helpers import host_devices_env
from jaxpriv.federated import partition, simulator
from jaxpriv.federated.partition import ClientData
from jaxpriv.federated.simulator import (
    Aggregator,
    LocalResult,
    RoundHook,
    ServerState,
    default_chunk_size,
    fedavg_local_sgd,
    make_round,
    mean_aggregator,
    round_keys,
    run,
)
from jaxpriv.train import data, dpsgd

LOSS = dpsgd.cross_entropy_loss


@pytest.fixture(scope="module")
def digits():
    return data.load("digits", seed=0)


def _model(hidden=16, seed=0):
    return dpsgd.MLP(64, (hidden,), 10, rngs=nnx.Rngs(seed))


def _split(model, *filters):
    """nnx.split with the parameters copied: run() updates the model in place, which nnx.split's State
    would follow."""
    graphdef, *states = nnx.split(model, nnx.Param, *filters)
    return (graphdef, *jax.tree.map(jnp.array, states))


def _client(clients: ClientData, k: int) -> ClientData:
    return ClientData(*(jnp.asarray(np.asarray(a)[k]) for a in clients))


def _leaves(tree):
    return [np.asarray(v, dtype=np.float64) for v in jax.tree.leaves(tree)]


def _assert_trees_close(a, b, rtol=1e-5, atol=1e-6):
    for u, v in zip(_leaves(a), _leaves(b)):
        np.testing.assert_allclose(u, v, rtol=rtol, atol=atol)


def _loop_oracle(params, local, clients, participants, seed, weighting="size", state=None):
    """FedAvg written as a plain Python loop: each participant's update with its own key, then a float64
    numpy weighted mean. Returns the final parameters' leaves (float64)."""
    jitted = jax.jit(local)
    treedef = jax.tree.structure(params)
    leaves = _leaves(params)
    for t, ids in enumerate(participants):
        clients_key, _ = round_keys(seed, t)
        tree = jax.tree.unflatten(treedef, [jnp.asarray(v, jnp.float32) for v in leaves])
        total, weight = [np.zeros_like(v) for v in leaves], 0.0
        for k in ids:
            k = int(k)
            client_state = None if state is None else jnp.asarray(state[k])
            delta = jitted(tree, client_state, _client(clients, k), jax.random.fold_in(clients_key, k))[0]
            w = float(np.asarray(clients.size)[k]) if weighting == "size" else 1.0
            total = [s + w * d for s, d in zip(total, _leaves(delta))]
            weight += w
        if weight > 0:
            leaves = [p + s / weight for p, s in zip(leaves, total)]
    return leaves


def test_vmapped_rounds_equal_a_python_loop_over_clients(digits):
    y = digits.y_train[:400]
    clients = partition.stack(digits.x_train[:400], y, partition.dirichlet(y, 9, 0.5, seed=0))
    model = _model()
    graphdef, params = _split(model)
    local = fedavg_local_sgd(LOSS, graphdef, optax.sgd(0.05, momentum=0.9), local_steps=4, batch_size=16,
                             proximal_mu=0.1)
    results = []
    for chunk in (None, 2):  # one chunk of all participants, and chunks of 2 with padding
        m = _model()
        results.append(run(m, local, clients, rounds=3, client_rate=0.6, seed=7, chunk_size=chunk, progress=False))
    whole, chunked = results
    assert [len(p) for p in whole.participants] == [len(p) for p in chunked.participants]
    assert sum(len(p) for p in whole.participants) > 0
    _assert_trees_close(whole.params, chunked.params, rtol=1e-5, atol=1e-7)
    oracle = _loop_oracle(params, local, clients, whole.participants, seed=7)
    for got, want in zip(_leaves(whole.params), oracle):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    # the model was updated in place with the final parameters
    _assert_trees_close(nnx.state(m, nnx.Param), chunked.params, rtol=0, atol=0)


def test_uniform_weighting_equals_the_loop_too(digits):
    y = digits.y_train[:300]
    clients = partition.stack(digits.x_train[:300], y, partition.shards(y, 6, 2, seed=0))
    model = _model()
    graphdef, params = _split(model)
    local = fedavg_local_sgd(LOSS, graphdef, optax.sgd(0.1), local_steps=3, batch_size=8)
    result = run(model, local, clients, rounds=2, client_rate=0.7, aggregator=mean_aggregator("uniform"), seed=2,
                 progress=False)
    oracle = _loop_oracle(params, local, clients, result.participants, seed=2, weighting="uniform")
    for got, want in zip(_leaves(result.params), oracle):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def _centralised_gd(params, graphdef, x, y, lr, steps, mu=0.0, anchor=None):
    """Plain gradient descent on the mean cross-entropy ℓ (+ μ/2‖w − anchor‖²), no optax, no simulator.
    Returns the final parameters and ‖∇ℓ(w_t)‖ (data term only) at every iterate."""
    def data_loss(p):
        logits = nnx.merge(graphdef, p)(x)
        return jnp.mean(optax.softmax_cross_entropy_with_integer_labels(logits, y))

    def prox(p):
        pairs = zip(jax.tree.leaves(p), jax.tree.leaves(anchor))
        return 0.5 * mu * sum(jnp.sum((a - b) ** 2) for a, b in pairs) if mu else 0.0

    grads = jax.jit(lambda p: (jax.grad(data_loss)(p), jax.grad(prox)(p) if mu else None))
    norms = []
    for _ in range(steps):
        g, g_prox = grads(params)
        norms.append(float(jnp.sqrt(sum(jnp.sum(v ** 2) for v in jax.tree.leaves(g)))))
        if mu:
            g = jax.tree.map(jnp.add, g, g_prox)
        params = jax.tree.map(lambda p, gi: p - lr * gi, params, g)
    return params, norms


def test_fedavg_with_one_client_is_centralised_gradient_descent(digits):
    x, y = digits.x_train[:200], digits.y_train[:200]
    clients = partition.stack(x, y, partition.iid(y, 1, seed=0))
    order = partition.iid(y, 1, seed=0).indices[0]
    model = _model()
    graphdef, params = _split(model)
    local = fedavg_local_sgd(LOSS, graphdef, optax.sgd(0.2), local_steps=4, batch_size=256)  # full batch
    result = run(model, local, clients, rounds=3, progress=False)
    want, _ = _centralised_gd(params, graphdef, jnp.asarray(x[order]), jnp.asarray(y[order]), 0.2, steps=12)
    _assert_trees_close(result.params, want, rtol=1e-5, atol=1e-6)


def test_fedprox_is_proximal_gradient_descent_and_stays_near_the_global_model(digits):
    x, y = jnp.asarray(digits.x_train[:100]), jnp.asarray(digits.y_train[:100])
    data_k = ClientData(x, y, jnp.ones(100, bool), jnp.int32(100))
    graphdef, params = nnx.split(_model(), nnx.Param)
    lr, steps = 0.02, 30
    norms = []
    for mu in (0.0, 1.0, 10.0, 40.0):
        local = jax.jit(fedavg_local_sgd(LOSS, graphdef, optax.sgd(lr), steps, batch_size=100, proximal_mu=mu))
        delta, _, _ = local(params, None, data_k, jax.random.key(0))
        want, grad_norms = _centralised_gd(params, graphdef, x, y, lr, steps, mu=mu, anchor=params)
        _assert_trees_close(delta, jax.tree.map(jnp.subtract, want, params), rtol=1e-5, atol=1e-6)
        norm = float(np.sqrt(sum(np.sum(v ** 2) for v in _leaves(delta))))
        norms.append(norm)
        if mu > 0:
            # e_{t+1} = (1 − lr·μ) e_t − lr·∇ℓ(w_t) with lr·μ ≤ 1 gives ‖e_t‖ ≤ G/μ, G = max_t ‖∇ℓ(w_t)‖
            assert lr * mu <= 1 and norm <= max(grad_norms) / mu
    assert norms[0] > norms[1] > norms[2] > norms[3]
    assert norms[3] < 0.25 * norms[0]


def test_server_optimizer_applies_the_pseudo_gradient(digits):
    y = digits.y_train[:120]
    clients = partition.stack(digits.x_train[:120], y, partition.iid(y, 4, seed=0))
    graphdef, params = nnx.split(_model(), nnx.Param)
    local = fedavg_local_sgd(LOSS, graphdef, optax.sgd(0.1), local_steps=2, batch_size=8)
    plain = run(_model(), local, clients, rounds=1, progress=False)
    unit = run(_model(), local, clients, rounds=1, server_optimizer=optax.sgd(1.0), progress=False)
    half = run(_model(), local, clients, rounds=1, server_optimizer=optax.sgd(0.5), progress=False)
    _assert_trees_close(plain.params, unit.params, rtol=1e-6, atol=1e-7)
    delta = jax.tree.map(jnp.subtract, plain.params, params)
    _assert_trees_close(half.params, jax.tree.map(lambda p, d: p + 0.5 * d, params, delta), rtol=1e-5, atol=1e-7)


def _counting_update(params, state, data, key):
    """Moves nothing; counts its own participations in the client state; reports the client size."""
    zero = jax.tree.map(jnp.zeros_like, params)
    return LocalResult(zero, state + 1, {"size": data.size.astype(jnp.float32)})


def test_client_sampling_frequencies_match_the_rate_and_states_are_written_back_once():
    num, rate, rounds = 60, 0.3, 250
    sizes = np.arange(1, num + 1)
    clients = ClientData(np.zeros((num, num, 1), np.float32), np.zeros((num, num), np.int32),
                         np.arange(num)[None, :] < sizes[:, None], sizes.astype(np.int32))
    model = nnx.Linear(1, 1, rngs=nnx.Rngs(0))
    result = run(model, _counting_update, clients, rounds=rounds, client_rate=rate, seed=11, chunk_size=7,
                 client_state=np.zeros(num, np.int32), progress=False)
    counts = result.participation_counts(num)
    # the state counter equals the participation count: no write from padding (index C, and the
    # sampler's padding that points at client 0), none lost
    np.testing.assert_array_equal(np.asarray(result.client_state), counts)
    total, n = counts.sum(), num * rounds
    assert abs(total - rate * n) < 5 * np.sqrt(n * rate * (1 - rate))
    assert np.all(np.abs(counts - rate * rounds) < 5 * np.sqrt(rounds * rate * (1 - rate)))
    for record, ids in zip(result.history, result.participants):
        assert record.participants == ids.size and len(np.unique(ids)) == ids.size
        if ids.size:  # metrics are the participants' mean
            assert record.client_metrics["size"] == pytest.approx(sizes[ids].mean(), rel=1e-6)
    assert result.compiled_rounds <= 2


def test_empty_rounds_leave_the_model_unchanged(digits):
    y = digits.y_train[:80]
    clients = partition.stack(digits.x_train[:80], y, partition.iid(y, 4, seed=0))
    model = _model()
    graphdef, params = _split(model)
    local = fedavg_local_sgd(LOSS, graphdef, optax.sgd(0.1), local_steps=2, batch_size=8)
    seen = []
    result = run(model, local, clients, rounds=12, client_rate=0.05, seed=0, progress=False,
                 test_data=(digits.x_test, digits.y_test), eval_every=100, callback=seen.append)
    counts = [r.participants for r in result.history]
    assert 0 in counts and seen == result.history
    assert all(r.client_metrics == {} for r in result.history if r.participants == 0)
    assert all(r.test_accuracy is None for r in result.history[:-1]) and result.history[-1].test_accuracy is not None
    if sum(counts) == 0:
        _assert_trees_close(result.params, params, rtol=0, atol=0)
    # replaying only the non-empty rounds with the loop gives the same model
    oracle = _loop_oracle(params, local, clients, result.participants, seed=0)
    for got, want in zip(_leaves(result.params), oracle):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def _state_reporting_update(params, state, data, key):
    """Moves nothing; reports the state it was given and writes back state + 1."""
    return LocalResult(jax.tree.map(jnp.zeros_like, params), state + 1, {"state": state.astype(jnp.float32)})


def test_round_hook_sets_the_state_each_round_runs_on():
    num = 5
    clients = ClientData(np.zeros((num, 2, 1), np.float32), np.zeros((num, 2), np.int32), np.ones((num, 2), bool),
                         np.full(num, 2, np.int32))
    given, seen_after = [], []

    def before(t, state):
        given.append(np.asarray(state))
        return np.full(num, 10 * t, np.int32)  # the round must run on this, not on what was written back

    def after(t, ids, server, state):
        seen_after.append(np.asarray(state))
        return {}, False

    result = run(nnx.Linear(1, 1, rngs=nnx.Rngs(0)), _state_reporting_update, clients, rounds=3,
                 client_state=np.zeros(num, np.int32), round_hook=RoundHook(before, after), progress=False)
    assert [r.client_metrics["state"] for r in result.history] == [0.0, 10.0, 20.0]
    # after a round the hook sees the participants' written-back state; the next before gets it too
    np.testing.assert_array_equal(seen_after, [np.full(num, 10 * t + 1) for t in range(3)])
    np.testing.assert_array_equal(given, [np.zeros(num)] + seen_after[:2])
    np.testing.assert_array_equal(np.asarray(result.client_state), np.full(num, 21))


def test_round_hook_adds_metrics_and_stops_early(setup, digits):
    model, local, clients, _ = setup
    seen = []
    hook = RoundHook(after=lambda t, ids, server, state: ({"clients": ids.size, "round": t}, t == 2))
    result = run(model, local, clients, rounds=10, client_rate=0.7, seed=3, test_data=digits, eval_every=100,
                 round_hook=hook, callback=seen.append, progress=False)
    assert len(result.history) == len(result.participants) == 3 and seen == result.history
    assert [r.hook_metrics for r in result.history] == [{"clients": ids.size, "round": t}
                                                        for t, ids in enumerate(result.participants)]
    # the stopping round is the last one: evaluated although eval_every is 100
    assert [r.test_accuracy is None for r in result.history] == [True, True, False]
    assert result.test_accuracy == result.history[-1].test_accuracy


def test_no_hook_equals_an_identity_hook_bit_for_bit(setup):
    _, local, clients, _ = setup
    identity = RoundHook(lambda t, state: state, lambda t, ids, server, state: ({}, False))
    runs = [run(_model(), local, clients, rounds=3, client_rate=0.7, seed=5, progress=False, round_hook=hook)
            for hook in (None, RoundHook(), identity)]
    for other in runs[1:]:
        _assert_trees_close(other.params, runs[0].params, rtol=0, atol=0)
        assert [r.participants for r in other.history] == [r.participants for r in runs[0].history]
        assert [r.client_metrics for r in other.history] == [r.client_metrics for r in runs[0].history]
    assert all(r.hook_metrics == {} for res in runs for r in res.history)


@pytest.mark.parametrize("hook,match", [
    (RoundHook(before=lambda t, state: np.zeros(3)), r"round_hook.before's client_state .* C = 4"),
    (RoundHook(after=lambda t, ids, server, state: {"n": 1}), r"round_hook.after must return a tuple"),
    (RoundHook(after=lambda t, ids, server, state: ({"n": "one"}, False)), r"round_hook.after must return"),
    (RoundHook(after=lambda t, ids, server, state: ({}, "yes")), r"round_hook.after must return"),
])
def test_round_hook_bad_output(setup, hook, match):
    model, local, clients, _ = setup
    with pytest.raises(ValueError, match=match):
        run(model, local, clients, rounds=1, round_hook=hook, progress=False)


def test_mean_aggregator_against_numpy():
    rng = np.random.default_rng(0)
    updates = rng.standard_normal((5, 3)).astype(np.float32)
    sizes = np.array([1, 4, 0, 2, 7], np.int32)
    for weighting, w in (("size", sizes.astype(np.float64)), ("uniform", np.ones(5))):
        for den in (None, 3.5):
            agg = mean_aggregator(weighting, den)
            sized = ClientData(None, None, None, jnp.asarray(sizes))
            contrib = jax.vmap(agg.contribute)({"u": jnp.asarray(updates)}, sized)
            total = jax.tree.map(lambda v: v.sum(0), contrib)
            got = np.asarray(agg.finalize(total, jax.random.key(0))["u"])
            want = (w[:, None] * updates).sum(0) / (w.sum() if den is None else den)
            np.testing.assert_allclose(got, want, rtol=1e-6)
    agg = mean_aggregator()
    empty = {"sum": {"u": jnp.zeros(3)}, "weight": jnp.float32(0.0)}
    assert np.all(np.asarray(agg.finalize(empty, jax.random.key(0))["u"]) == 0)


def test_a_noisy_aggregator_acts_in_empty_rounds_too():
    """The server step runs every round: a central-noise aggregator releases noise even when nobody
    took part (an unchanged model would reveal the empty round)."""
    base = mean_aggregator("uniform", denominator=1.0)
    noisy = Aggregator(base.contribute, lambda total, key: jax.tree.map(
        lambda s: s + jax.random.normal(key, s.shape, s.dtype), base.finalize(total, key)))
    step = make_round(lambda p, s, d, k: LocalResult(p, s, {}), aggregator=noisy)
    clients = ClientData(jnp.zeros((2, 1)), jnp.zeros((2, 1)), jnp.ones((2, 1), bool), jnp.ones(2, jnp.int32))
    server = ServerState({"w": jnp.zeros(4)}, None)
    out, _, sums = step(server, None, clients, jnp.array([2, 2]), jnp.zeros(2, bool), jax.random.key(1), chunk=2)
    assert int(sums["participants"]) == 0 and np.all(np.asarray(out.params["w"]) != 0)


def test_runs_are_deterministic_functions_of_the_seed(digits):
    y = digits.y_train[:100]
    clients = partition.stack(digits.x_train[:100], y, partition.iid(y, 5, seed=0))
    graphdef, _ = nnx.split(_model(), nnx.Param)
    local = fedavg_local_sgd(LOSS, graphdef, optax.sgd(0.1), local_steps=2, batch_size=4)
    a, b, c = (run(_model(), local, clients, rounds=2, client_rate=0.5, seed=s, progress=False) for s in (3, 3, 4))
    _assert_trees_close(a.params, b.params, rtol=0, atol=0)
    assert [p.tolist() for p in a.participants] == [p.tolist() for p in b.participants]
    assert any(not np.array_equal(u, v) for u, v in zip(_leaves(a.params), _leaves(c.params)))


def test_default_chunk_size_bounds_the_parameter_copies_on_cpu():
    small = {"w": jnp.zeros(2410, jnp.float32)}
    big = {"w": jnp.zeros(10**6, jnp.float32)}
    assert default_chunk_size(small, 7) == 7
    if jax.default_backend() == "cpu":
        cap = simulator.CPU_CHUNK_BYTES // (2410 * 4)  # clients whose parameter copies fit
        chunk = default_chunk_size(small, 1000)
        assert chunk <= cap and -(-1000 // chunk) == -(-1000 // cap)  # the fewest chunks, balanced
        assert -(-1000 // chunk) * chunk - 1000 < -(-1000 // chunk)  # less than one slot of padding per chunk
        assert default_chunk_size(big, 1000) == 16  # never below 16 clients
    else:
        assert default_chunk_size(small, 1000) == 1000


def test_progress_bar_runs(digits, capsys):
    y = digits.y_train[:40]
    clients = partition.stack(digits.x_train[:40], y, partition.iid(y, 4, seed=0))
    model = _model()
    graphdef, _ = nnx.split(model, nnx.Param)
    local = fedavg_local_sgd(LOSS, graphdef, optax.sgd(0.1), 1, 4)
    result = run(model, local, clients, rounds=2, test_data=digits, progress=True)
    assert len(result.history) == 2 and "round 2/2" in capsys.readouterr().out


def test_round_keys_are_the_keys_the_round_uses():
    clients_key, server_key = round_keys(5, 2)
    again = round_keys(5, 2)
    assert np.array_equal(jax.random.key_data(clients_key), jax.random.key_data(again[0]))
    assert not np.array_equal(jax.random.key_data(clients_key), jax.random.key_data(server_key))
    assert not np.array_equal(jax.random.key_data(clients_key), jax.random.key_data(round_keys(5, 3)[0]))


def test_dp_sgd_local_update_with_per_record_rates_runs_vmapped(digits):
    """An rPDP-FL-shaped system as a configuration: per-record Poisson rates in the client state, the
    clipped sum of jaxpriv.train.clipping and Gaussian noise of jaxpriv.mechanisms inside the local
    update; vmapped rounds equal the Python loop."""
    from jaxpriv.mechanisms import gaussian
    from jaxpriv.train.clipping import split_clipped_grad_sum

    y = digits.y_train[:240]
    part = partition.iid(y, 6, seed=0)
    clients = partition.stack(digits.x_train[:240], y, part)
    rates = partition.per_client(np.random.default_rng(0).uniform(0.2, 0.6, 240), part)
    model = _model()
    graphdef, params, rest = _split(model, ...)
    sigma, clip, lr, tau = 1.0, 1.0, 0.2, 3

    def dp_local(global_params, q, d, key):
        expected = jnp.maximum(jnp.sum(jnp.where(d.mask, q, 0.0)), 1e-6)

        def step(p, t):
            sample_key, noise_key = jax.random.split(jax.random.fold_in(key, t))
            batch = d.mask & (jax.random.uniform(sample_key, q.shape) < q)
            g = split_clipped_grad_sum(LOSS, graphdef, p, rest, d.x, d.y, clip_norm=clip, mask=batch).grads
            keys = jax.random.split(noise_key, len(jax.tree.leaves(g)))
            noise = jax.tree.unflatten(jax.tree.structure(g), [
                gaussian.sample(k, sigma * clip, v.shape, v.dtype) for k, v in zip(keys, jax.tree.leaves(g))])
            return jax.tree.map(lambda w, s, z: w - lr * (s + z) / expected, p, g, noise), None

        final, _ = jax.lax.scan(step, global_params, jnp.arange(tau))
        return LocalResult(jax.tree.map(jnp.subtract, final, global_params), q, {})

    result = run(model, dp_local, clients, rounds=2, client_rate=0.8, client_state=rates, seed=1, chunk_size=4,
                 progress=False)
    want = _loop_oracle(params, dp_local, clients, result.participants, seed=1, state=rates)
    for got, w in zip(_leaves(result.params), want):
        np.testing.assert_allclose(got, w, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(np.asarray(result.client_state), rates.astype(np.float32))  # untouched


def test_fedavg_on_digits_with_ten_iid_clients_is_accurate(digits):
    clients = partition.stack(digits.x_train, digits.y_train, partition.iid(digits.y_train, 10, seed=0))
    model = _model(hidden=32)
    graphdef, _ = nnx.split(model, nnx.Param)
    local = fedavg_local_sgd(LOSS, graphdef, optax.sgd(0.2), local_steps=10, batch_size=32)
    result = run(model, local, clients, rounds=8, test_data=digits, progress=False)
    accuracies = [r.test_accuracy for r in result.history]
    assert result.test_accuracy >= 0.9 and accuracies[-1] == result.test_accuracy
    assert accuracies[0] < accuracies[-1]
    assert result.history[-1].client_metrics["loss"] < result.history[0].client_metrics["loss"]


def test_client_axis_is_sharded_over_four_cpu_devices(digits):
    script = textwrap.dedent(
        """
        import jax, numpy as np, optax
        from flax import nnx
        from jaxpriv.federated import partition, simulator
        from jaxpriv.train import data, dpsgd
        assert jax.device_count() == 4, jax.devices()
        d = data.load("digits", seed=0)
        y = d.y_train[:300]
        # 10 clients: not a multiple of 4 (the client axis is padded with empty clients)
        clients = partition.stack(d.x_train[:300], y, partition.dirichlet(y, 10, 1.0, seed=0))
        model = dpsgd.MLP(64, (16,), 10, rngs=nnx.Rngs(0))
        graphdef, _ = nnx.split(model, nnx.Param)
        local = simulator.fedavg_local_sgd(dpsgd.cross_entropy_loss, graphdef, optax.sgd(0.1), 3, 8)
        r = simulator.run(model, local, clients, rounds=3, client_rate=0.7, seed=4, chunk_size=3,
                          client_state=np.zeros(10, np.int32), test_data=d, server_optimizer=optax.adam(0.01),
                          progress=False)
        print(r.test_accuracy)
        print(r.devices)
        print(repr([np.asarray(v).ravel().tolist() for v in jax.tree.leaves(r.params)]))
        """
    )
    env = host_devices_env(4, JAX_PLATFORMS="cpu")
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert lines[-2] == "4"
    sharded = [np.array(v) for v in eval(lines[-1])]
    y = digits.y_train[:300]
    clients = partition.stack(digits.x_train[:300], y, partition.dirichlet(y, 10, 1.0, seed=0))
    model = _model()
    graphdef, _ = nnx.split(model, nnx.Param)
    local = fedavg_local_sgd(LOSS, graphdef, optax.sgd(0.1), 3, 8)
    single = run(model, local, clients, rounds=3, client_rate=0.7, seed=4, chunk_size=3,
                 client_state=np.zeros(10, np.int32), test_data=digits, server_optimizer=optax.adam(0.01),
                 progress=False)
    assert single.devices == 1
    assert abs(float(lines[-3]) - single.test_accuracy) <= 1.5 / digits.y_test.size  # one argmax may flip
    for got, want in zip(sharded, _leaves(single.params)):
        np.testing.assert_allclose(got, want.ravel(), rtol=1e-5, atol=1e-6)


# --------------------------------------------------------------------------------------------------
# bad inputs
# --------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def setup(digits):
    y = digits.y_train[:40]
    clients = partition.stack(digits.x_train[:40], y, partition.iid(y, 4, seed=0))
    model = _model()
    graphdef, _ = nnx.split(model, nnx.Param)
    local = fedavg_local_sgd(LOSS, graphdef, optax.sgd(0.1), 1, 4)
    return model, local, clients, graphdef


def _bad_clients(clients, **change):
    return clients._replace(**change)


@pytest.mark.parametrize(
    "change,match",
    [
        (dict(model="not a model"), "model"),
        (dict(clients=(1, 2)), "clients"),
        (dict(clients="mask_int"), "clients.mask"),
        (dict(clients="x_short"), "clients.x"),
        (dict(clients="y_short"), "clients.y"),
        (dict(clients="size_wrong"), "clients.size"),
        (dict(rounds=0), "rounds"),
        (dict(rounds=1.5), "rounds"),
        (dict(rounds=True), "rounds"),
        (dict(client_rate=0.0), "client_rate"),
        (dict(client_rate=1.5), "client_rate"),
        (dict(client_rate=np.nan), "client_rate"),
        (dict(eval_every=0), "eval_every"),
        (dict(eval_batch_size=0), "eval_batch_size"),
        (dict(seed=-1), "seed"),
        (dict(chunk_size=0), "chunk_size"),
        (dict(callback=3), "callback"),
        (dict(round_hook=3), "round_hook must be a RoundHook"),
        (dict(round_hook=lambda t, state: state), "round_hook must be a RoundHook"),
        (dict(round_hook=RoundHook(before=3)), "round_hook.before must be callable"),
        (dict(round_hook=RoundHook(after="x")), "round_hook.after must be callable"),
        (dict(client_state=np.zeros(3)), "client_state"),
        (dict(test_data=np.zeros(3)), "test_data"),
        (dict(test_data=(np.zeros((3, 64)), np.zeros(2))), "test_data"),
        (dict(aggregator=lambda u, d: u), "aggregator"),
        (dict(server_optimizer="adam"), "server_optimizer"),
        (dict(local_update=None), "local_update"),
        (dict(mesh="devices"), "mesh"),
    ],
)
def test_run_bad_input(setup, change, match):
    model, local, clients, _ = setup
    kwargs = dict(model=model, local_update=local, clients=clients, rounds=1, progress=False)
    special = {
        "mask_int": lambda c: _bad_clients(c, mask=np.asarray(c.mask).astype(np.int32)),
        "x_short": lambda c: _bad_clients(c, x=np.asarray(c.x)[:, :-1]),
        "y_short": lambda c: _bad_clients(c, y=np.asarray(c.y)[:3]),
        "size_wrong": lambda c: _bad_clients(c, size=np.asarray(c.size) + 1),
    }
    if isinstance(change.get("clients"), str):
        change = dict(clients=special[change["clients"]](clients))
    kwargs.update(change)
    args = [kwargs.pop(k) for k in ("model", "local_update", "clients")]
    with pytest.raises(ValueError, match=match):
        run(*args, **kwargs)


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(loss_fn=None), "loss_fn"),
        (dict(graphdef="g"), "graphdef"),
        (dict(optimizer=0.1), "optimizer"),
        (dict(local_steps=0), "local_steps"),
        (dict(local_steps=2.5), "local_steps"),
        (dict(batch_size=0), "batch_size"),
        (dict(proximal_mu=-1.0), "proximal_mu"),
        (dict(proximal_mu=np.inf), "proximal_mu"),
    ],
)
def test_fedavg_local_sgd_bad_input(setup, kwargs, match):
    graphdef = setup[3]
    args = dict(loss_fn=LOSS, graphdef=graphdef, optimizer=optax.sgd(0.1), local_steps=1, batch_size=4)
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        fedavg_local_sgd(**args)


@pytest.mark.parametrize(
    "call,match",
    [
        (lambda: mean_aggregator("median"), "weighting"),
        (lambda: mean_aggregator("size", 0.0), "denominator"),
        (lambda: mean_aggregator("size", np.nan), "denominator"),
        (lambda: round_keys(-1, 0), "seed"),
        (lambda: round_keys(0, -1), "round_index"),
        (lambda: default_chunk_size({"w": jnp.zeros(3)}, 0), "participants"),
        (lambda: make_round(None), "local_update"),
        (lambda: make_round(_counting_update, aggregator=(1, 2)), "aggregator"),
        (lambda: make_round(_counting_update, server_optimizer=1.0), "server_optimizer"),
    ],
)
def test_other_bad_input(call, match):
    with pytest.raises(ValueError, match=match):
        call()
