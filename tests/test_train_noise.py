"""Tests for jaxpriv.train.noise: the noise step of DP-SGD and the federated clients (MATH §6).

Oracles: the empirical standard deviation of the added noise against stddev/normalize_by (and the
Laplace and staircase variances from their modules) within 5 standard errors estimated from the draws'
fourth moment; the noise reproduced bit for bit from the mechanism samplers with the documented key
schedule (one split per step, one key per leaf; one key for a flat draw), and the trainer's noise bit for
bit against the formula it used before the one noise transform; optax chains checked against a manual
update; traced invalid numbers give NaN. One ValueError test per bad input.
"""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

from jaxpriv import events
from jaxpriv.mechanisms import gaussian, laplace, staircase
from jaxpriv.train import noise


@pytest.fixture(autouse=True)
def x64_stays_off():
    assert not jax.config.jax_enable_x64
    yield
    assert not jax.config.jax_enable_x64


def assert_std(draws, expected_var):
    """Sample variance within 5 SE of the expected one, SE = √((m4 − s⁴)/n) from the draws."""
    d = np.asarray(draws, np.float64).ravel()
    d = d - d.mean()
    s2 = np.mean(d**2)
    se = np.sqrt((np.mean(d**4) - s2**2) / d.size)
    assert abs(s2 - expected_var) < 5 * se


TRANSFORMS = {
    "gaussian": (lambda seed, n: noise.gaussian_noise(3.0, seed=seed, normalize_by=n), 3.0**2),
    "laplace": (lambda seed, n: noise.noise_transform(events.Laplace(0.7), seed=seed, normalize_by=n), float(laplace.variance(0.7))),
    "staircase": (
        lambda seed, n: noise.noise_transform(events.Staircase(0.5, 0.3), seed=seed, sensitivity=2.0, normalize_by=n),
        float(staircase.variance(0.5, 0.3, 2.0)),
    ),
}


@pytest.mark.parametrize("name", list(TRANSFORMS))
def test_noise_std_is_scale_over_normalize_by(name):
    make, var_on_sum = TRANSFORMS[name]
    tx = make(0, 8.0)
    updates = {"w": jnp.full((200_000,), 4.0)}  # a non-zero clipped sum
    out, _ = tx.update(updates, tx.init(updates))
    w = np.asarray(out["w"], np.float64)
    assert_std(w, var_on_sum / 64.0)
    assert abs(w.mean() - 0.5) < 5 * np.sqrt(var_on_sum / 64.0 / w.size)  # (4 + noise)/8


@pytest.mark.parametrize("name", list(TRANSFORMS))
def test_noise_is_the_mechanism_sampler_with_one_split_per_step(name):
    make, _ = TRANSFORMS[name]
    draw = {
        "gaussian": lambda k, s: gaussian.sample(k, 3.0, s),
        "laplace": lambda k, s: laplace.sample(k, 0.7, s),
        "staircase": lambda k, s: staircase.sample(k, 0.5, 0.3, s, sensitivity=2.0, dtype=jnp.float32),
    }[name]
    tx = make(jax.random.key(7), 1.0)
    zeros = {"a": jnp.zeros((5,)), "b": jnp.zeros((2, 3))}
    state = tx.init(zeros)
    key = jax.random.key(7)
    for _ in range(2):
        out, state = tx.update(zeros, state)
        keys = jax.random.split(key, 3)
        leaves = jax.tree_util.tree_leaves(out)
        for leaf_key, leaf in zip(keys[1:], leaves):
            np.testing.assert_array_equal(leaf, draw(leaf_key, leaf.shape))
        key = keys[0]
        assert jnp.array_equal(jax.random.key_data(state.key), jax.random.key_data(key))


def test_keys_differ_per_step_and_per_leaf():
    tx = noise.gaussian_noise(1.0, seed=3)
    zeros = {"a": jnp.zeros(50_000), "b": jnp.zeros(50_000)}
    state = tx.init(zeros)
    first, state = tx.update(zeros, state)
    second, state = tx.update(zeros, state)
    a1, b1, a2 = (np.asarray(v) for v in (first["a"], first["b"], second["a"]))
    assert not np.array_equal(a1, b1) and not np.array_equal(a1, a2)
    # independent, not merely different: correlations within 5 SE (1/√n) of 0
    for u, v in [(a1, b1), (a1, a2)]:
        assert abs(np.corrcoef(u, v)[0, 1]) < 5 / np.sqrt(u.size)


def test_deterministic_given_the_seed():
    zeros = {"w": jnp.zeros(16)}
    outs = []
    for seed in [5, 5, jax.random.key(5), jax.random.PRNGKey(5), 6]:
        tx = noise.noise_transform(events.Laplace(1.0), seed=seed)
        out, state = tx.update(zeros, tx.init(zeros))
        outs.append((np.asarray(out["w"]), np.asarray(jax.random.key_data(state.key))))
    np.testing.assert_array_equal(outs[0][0], outs[1][0])
    np.testing.assert_array_equal(outs[0][1], outs[1][1])
    np.testing.assert_array_equal(outs[0][0], outs[2][0])  # an int seed is jax.random.key(seed)
    assert outs[3][0].shape == (16,)  # a legacy uint32 key works
    assert not np.array_equal(outs[0][0], outs[4][0])


def test_jit_matches_eager():
    tx = noise.gaussian_noise(0.5, seed=1, normalize_by=3.0)
    grads = {"w": jnp.arange(6.0).reshape(2, 3), "b": jnp.ones(3)}
    state = tx.init(grads)
    eager, eager_state = tx.update(grads, state)
    jitted, jit_state = jax.jit(tx.update)(grads, state)
    for k in grads:
        np.testing.assert_allclose(jitted[k], eager[k], rtol=1e-6)
    assert jnp.array_equal(jax.random.key_data(jit_state.key), jax.random.key_data(eager_state.key))


@pytest.mark.parametrize("optimizer", [optax.sgd(0.1), optax.adam(1e-2)])
def test_chains_with_optax(optimizer):
    params = {"w": jnp.ones((3, 2)), "b": jnp.zeros(2)}
    tx = optax.chain(noise.gaussian_noise(1.0, seed=0, normalize_by=10.0), optimizer)
    state = tx.init(params)
    reference = noise.gaussian_noise(1.0, seed=0, normalize_by=10.0)
    ref_state, opt_state = reference.init(params), optimizer.init(params)

    @jax.jit
    def step(params, state):
        grads = jax.grad(lambda p: jnp.sum(p["w"] ** 2) + jnp.sum(p["b"]))(params)
        updates, state = tx.update(grads, state, params)
        return optax.apply_updates(params, updates), state

    manual = params
    for _ in range(3):
        params, state = step(params, state)
        grads = jax.grad(lambda p: jnp.sum(p["w"] ** 2) + jnp.sum(p["b"]))(manual)
        noisy, ref_state = reference.update(grads, ref_state)
        updates, opt_state = optimizer.update(noisy, opt_state, manual)
        manual = optax.apply_updates(manual, updates)
    for k in params:
        np.testing.assert_allclose(params[k], manual[k], rtol=1e-5, atol=1e-6)


def test_nnx_state_and_dtypes():
    model = nnx.Linear(4, 3, rngs=nnx.Rngs(0))
    params = nnx.state(model, nnx.Param)
    tx = noise.gaussian_noise(1.0, seed=0)
    state = tx.init(params)
    zeros = jax.tree_util.tree_map(jnp.zeros_like, params)
    out, _ = jax.jit(tx.update)(zeros, state)
    assert type(out) is type(params)
    assert jax.tree_util.tree_structure(out) == jax.tree_util.tree_structure(params)
    for leaf in jax.tree_util.tree_leaves(out):
        assert leaf.dtype == jnp.float32 and np.all(np.asarray(leaf) != 0)
    # bfloat16 leaves stay bfloat16 (noise drawn in float32, the sum cast back)
    half = {"w": jnp.zeros(10_000, jnp.bfloat16)}
    tx = noise.noise_transform(events.Laplace(1.0), seed=0)
    noisy, _ = tx.update(half, tx.init(half))
    assert noisy["w"].dtype == jnp.bfloat16
    assert_std(noisy["w"].astype(jnp.float32), 2.0)  # bfloat16 rounding adds ~1e-5 relative variance


def test_float64_leaves_with_x64_on():
    with jax.enable_x64(True):
        grads = {"w": jnp.zeros(50_000, jnp.float64)}
        tx = noise.gaussian_noise(2.0, seed=0, normalize_by=2.0)
        out, _ = jax.jit(tx.update)(grads, tx.init(grads))
        assert out["w"].dtype == jnp.float64
        assert_std(out["w"], 1.0)


def test_staircase_default_gamma_is_optimal():
    zeros = {"w": jnp.zeros(1000)}
    tx = noise.noise_transform(events.Staircase(1.5), seed=2)
    out, _ = tx.update(zeros, tx.init(zeros))
    keys = jax.random.split(jax.random.key(2), 2)
    expected = staircase.sample(keys[1], 1.5, float(staircase.optimal_gamma(1.5)), (1000,), sensitivity=1.0, dtype=jnp.float32)
    np.testing.assert_allclose(out["w"], expected, rtol=1e-6)


# ------------------------------------------------------------------------------------------------
# the one core: traced numbers, vmap over clients, flat and per-leaf draws
# ------------------------------------------------------------------------------------------------

EVENTS = {
    "gaussian": (events.Gaussian(1.5), lambda k, s, d: gaussian.sample(k, 1.5 * 0.5, s, d)),
    "laplace": (events.Laplace(0.8), lambda k, s, d: laplace.sample(k, 0.8 * 0.5, s, d)),
    "staircase": (events.Staircase(0.9, 0.2),
                  lambda k, s, d: staircase.sample(k, 0.9, 0.2, s, sensitivity=0.5, dtype=d)),
}


def _old_noise_update(draw, key, updates, denominator):
    """The trainer's noise step before the one noise transform (its ``_noise_transform.update_fn``)."""
    leaves, treedef = jax.tree_util.tree_flatten(updates)
    keys = jax.random.split(key, len(leaves) + 1)
    noisy = []
    for leaf_key, leaf in zip(keys[1:], leaves):
        dtype = jnp.promote_types(leaf.dtype, jnp.float32)
        total = leaf.astype(dtype) + draw(leaf_key, leaf.shape, dtype)
        noisy.append((total / denominator).astype(leaf.dtype))
    return jax.tree_util.tree_unflatten(treedef, noisy), keys[0]


@pytest.mark.parametrize("name", ["gaussian", "laplace", "staircase"])
def test_trainer_noise_is_bit_identical_to_the_old_formula(name):
    """Built with Python floats (as dpsgd.train builds its noise), the jitted step must draw exactly as before."""
    tx, draw = {
        "gaussian": (noise.gaussian_noise(1.37, seed=11, normalize_by=25.6),
                     lambda k, s, d: gaussian.sample(k, 1.37, s, d)),
        "laplace": (noise.noise_transform(events.Laplace(0.61), seed=11, normalize_by=25.6),
                    lambda k, s, d: laplace.sample(k, 0.61, s, d)),
        "staircase": (noise.noise_transform(events.Staircase(0.9), seed=11, sensitivity=1.3, normalize_by=25.6),
                      lambda k, s, d: staircase.sample(k, 0.9, None, s, sensitivity=1.3, dtype=d)),
    }[name]
    grads = {"w": jnp.linspace(-2.0, 2.0, 60).reshape(12, 5), "b": jnp.arange(5.0), "h": jnp.ones(7, jnp.bfloat16)}
    old = jax.jit(lambda key, g: _old_noise_update(draw, key, g, 25.6))
    state, key = tx.init(grads), jax.random.key(11)
    for _ in range(3):
        got, state = jax.jit(tx.update)(grads, state)
        want, key = old(key, grads)
        for a, b in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
            assert a.dtype == b.dtype
            np.testing.assert_array_equal(np.asarray(a, np.float32), np.asarray(b, np.float32))
        assert jnp.array_equal(jax.random.key_data(state.key), jax.random.key_data(key))


@pytest.mark.parametrize("name", list(EVENTS))
def test_add_noise_draws_one_key_per_leaf_or_one_flat_draw(name):
    event, draw = EVENTS[name]
    updates = {"a": jnp.arange(6.0).reshape(2, 3), "b": jnp.full(4, 2.0)}
    key = jax.random.key(5)
    per_leaf = noise.add_noise(key, updates, event, sensitivity=0.5, normalize_by=2.0)
    for leaf_key, x, got in zip(jax.random.split(key, 2), jax.tree_util.tree_leaves(updates),
                                jax.tree_util.tree_leaves(per_leaf)):
        np.testing.assert_array_equal(got, (x + draw(leaf_key, x.shape, jnp.float32)) / 2.0)
    flat = noise.add_noise(key, updates, event, sensitivity=0.5, normalize_by=2.0, flat=True)
    vector = jnp.concatenate([jnp.ravel(v) for v in jax.tree_util.tree_leaves(updates)])
    want = (vector + draw(key, (10,), jnp.float32)) / 2.0
    np.testing.assert_array_equal(jnp.concatenate([jnp.ravel(v) for v in jax.tree_util.tree_leaves(flat)]), want)
    assert jax.tree_util.tree_structure(flat) == jax.tree_util.tree_structure(updates)


def test_flat_transform_splits_once_per_step_and_matches_per_leaf_statistics():
    zeros = {"a": jnp.zeros(60_000), "b": jnp.zeros((200, 300))}
    flat = noise.noise_transform(events.Gaussian(2.0), seed=3, sensitivity=1.5, normalize_by=3.0, flat=True)
    per_leaf = noise.noise_transform(events.Gaussian(2.0), seed=3, sensitivity=1.5, normalize_by=3.0)
    state = flat.init(zeros)
    out, state = flat.update(zeros, state)
    keys = jax.random.split(jax.random.key(3), 2)
    want = gaussian.sample(keys[1], 3.0, (120_000,)) / 3.0
    np.testing.assert_array_equal(jnp.concatenate([out["a"], out["b"].ravel()]), want)
    assert jnp.array_equal(jax.random.key_data(state.key), jax.random.key_data(keys[0]))
    leafwise, _ = per_leaf.update(zeros, per_leaf.init(zeros))
    for tree in (out, leafwise):  # both N(0, (σΔ/n)²) = N(0, 1) per coordinate
        for leaf in jax.tree_util.tree_leaves(tree):
            assert_std(leaf, 1.0)


def test_traced_scale_under_jit_equals_the_concrete_one():
    zeros = {"w": jnp.zeros(50_000)}

    def run(sigma, sensitivity, n):
        tx = noise.noise_transform(events.Gaussian(sigma), seed=4, sensitivity=sensitivity, normalize_by=n)
        return tx.update(zeros, tx.init(zeros))[0]["w"]

    concrete = run(2.0, 1.0, 4.0)
    traced = jax.jit(run)(jnp.float32(2.0), 1.0, jnp.float32(4.0))  # 2.0 is exact in float32
    # the same draws; a concrete scale is a constant the compiler may fold into the sampler's own
    # constants, which moves the last bit (a relative 2^-23 at most here)
    np.testing.assert_allclose(traced, concrete, rtol=4 * 2.0**-24, atol=0)
    assert_std(traced, 0.25)


def test_traced_product_is_never_below_sigma_times_sensitivity():
    sigma, sens = np.float32(0.1), np.float32(0.3)  # σΔ is inexact in float32
    key = jax.random.key(2)
    got = jax.jit(lambda s, d: noise.add_noise(key, {"w": jnp.zeros(1000)}, events.Gaussian(s), sensitivity=d))(
        sigma, sens)["w"]
    used = np.nextafter(sigma * sens, np.float32(np.inf))
    np.testing.assert_array_equal(got, gaussian.sample(jax.random.split(key, 1)[0], used, (1000,)))
    assert float(used) >= float(sigma) * float(sens)


def test_vmap_over_clients_each_noise_std_matches_its_scale():
    sigmas = jnp.array([0.5, 1.0, 2.0, 4.0], jnp.float32)
    expected = jnp.array([2.0, 4.0, 8.0, 16.0], jnp.float32)  # a per-client expected batch size, traced too
    keys = jax.random.split(jax.random.key(0), 4)
    grads = {"w": jnp.full(40_000, 8.0), "b": jnp.full((100, 100), 8.0)}

    @jax.jit
    @jax.vmap
    def client(sigma, n, key):
        tx = noise.noise_transform(events.Gaussian(sigma), seed=key, sensitivity=3.0, normalize_by=n)
        return tx.update(grads, tx.init(grads))[0]

    out = client(sigmas, expected, keys)
    for i in range(4):
        draws = np.concatenate([np.ravel(out["w"][i]), np.ravel(out["b"][i])])
        std = 3.0 * float(sigmas[i]) / float(expected[i])
        assert_std(draws, std**2)
        assert abs(draws.mean() - 8.0 / float(expected[i])) < 5 * std / np.sqrt(draws.size)


@pytest.mark.parametrize("name", list(EVENTS))
def test_vmap_over_clients_laplace_and_staircase_scales(name):
    scales = jnp.array([0.5, 2.0], jnp.float32)
    make = {"gaussian": lambda s: events.Gaussian(s), "laplace": lambda s: events.Laplace(s),
            "staircase": lambda s: events.Staircase(s, 0.2)}[name]
    variance = {"gaussian": lambda s: s**2, "laplace": lambda s: float(laplace.variance(s)),
                "staircase": lambda s: float(staircase.variance(s, 0.2, 1.0))}[name]
    zeros = {"w": jnp.zeros(200_000)}
    out = jax.jit(jax.vmap(lambda s, k: noise.add_noise(k, zeros, make(s))["w"]))(
        scales, jax.random.split(jax.random.key(1), 2))
    for i, s in enumerate([0.5, 2.0]):
        assert_std(out[i], variance(s))


def test_zero_noise_parameter_adds_no_noise_concrete_or_traced():
    grads = {"w": jnp.arange(5.0)}
    for event in (events.Gaussian(0.0), events.Laplace(0.0)):
        np.testing.assert_array_equal(noise.add_noise(0, grads, event, normalize_by=2.0)["w"], jnp.arange(5.0) / 2)
    traced = jax.jit(lambda s: noise.add_noise(0, grads, events.Gaussian(s), sensitivity=0.7, normalize_by=2.0))
    np.testing.assert_array_equal(traced(jnp.float32(0.0))["w"], jnp.arange(5.0) / 2)


TRACED_INVALID = [
    ("gaussian σ < 0", lambda v: dict(event=events.Gaussian(-v))),
    ("gaussian σ NaN", lambda v: dict(event=events.Gaussian(v * jnp.nan))),
    ("laplace b inf", lambda v: dict(event=events.Laplace(v * jnp.inf))),
    ("staircase ε ≤ 0", lambda v: dict(event=events.Staircase(0.0 * v))),
    ("staircase γ > 1", lambda v: dict(event=events.Staircase(1.0, 1.0 + v))),
    ("sensitivity ≤ 0", lambda v: dict(event=events.Gaussian(1.0), sensitivity=-v)),
    ("normalize_by ≤ 0", lambda v: dict(event=events.Laplace(1.0), normalize_by=0.0 * v)),
]


@pytest.mark.parametrize("flat", [False, True])
@pytest.mark.parametrize("kwargs", [k for _, k in TRACED_INVALID], ids=[i for i, _ in TRACED_INVALID])
def test_traced_invalid_number_gives_nan_never_a_number(kwargs, flat):
    grads = {"w": jnp.ones(8), "b": jnp.ones((2, 2))}
    out = jax.jit(lambda v: noise.add_noise(jax.random.key(0), grads, flat=flat, **kwargs(v)))(jnp.float32(0.5))
    assert all(bool(jnp.all(jnp.isnan(leaf))) for leaf in jax.tree_util.tree_leaves(out))
    tx_out = jax.jit(lambda v: (lambda tx: tx.update(grads, tx.init(grads))[0])(
        noise.noise_transform(seed=0, flat=flat, **kwargs(v))))(jnp.float32(0.5))
    assert all(bool(jnp.all(jnp.isnan(leaf))) for leaf in jax.tree_util.tree_leaves(tx_out))


# ------------------------------------------------------------------------------------------------
# bad inputs: one test each, the message names the parameter
# ------------------------------------------------------------------------------------------------

BAD = [
    ("gaussian stddev ≤ 0", lambda: noise.gaussian_noise(0.0, seed=0), "stddev"),
    ("gaussian stddev NaN", lambda: noise.gaussian_noise(np.nan, seed=0), "stddev"),
    ("gaussian stddev array", lambda: noise.gaussian_noise([1.0, 2.0], seed=0), "stddev"),
    ("gaussian normalize_by ≤ 0", lambda: noise.gaussian_noise(1.0, seed=0, normalize_by=0.0), "normalize_by"),
    ("gaussian normalize_by array", lambda: noise.gaussian_noise(1.0, seed=0, normalize_by=[1.0]), "normalize_by"),
    ("gaussian seed float", lambda: noise.gaussian_noise(1.0, seed=1.5), "seed"),
    ("gaussian seed string", lambda: noise.gaussian_noise(1.0, seed="0"), "seed"),
    ("gaussian seed bool", lambda: noise.gaussian_noise(1.0, seed=True), "seed"),
    ("gaussian seed key batch", lambda: noise.gaussian_noise(1.0, seed=jax.random.split(jax.random.key(0), 2)), "seed"),
    ("laplace scale ≤ 0", lambda: noise.noise_transform(events.Laplace(-1.0), seed=0), "scale"),
    ("laplace normalize_by inf", lambda: noise.noise_transform(events.Laplace(1.0), seed=0, normalize_by=np.inf), "normalize_by"),
    ("staircase epsilon ≤ 0", lambda: noise.noise_transform(events.Staircase(0.0), seed=0), "epsilon"),
    ("staircase gamma > 1", lambda: noise.noise_transform(events.Staircase(1.0, 1.5), seed=0), "gamma"),
    ("staircase gamma < 0", lambda: noise.noise_transform(events.Staircase(1.0, -0.1), seed=0), "gamma"),
    ("staircase sensitivity ≤ 0", lambda: noise.noise_transform(events.Staircase(1.0), seed=0, sensitivity=0.0), "sensitivity"),
    ("staircase normalize_by ≤ 0", lambda: noise.noise_transform(events.Staircase(1.0), seed=0, normalize_by=-2.0), "normalize_by"),
    ("transform event not a noise event", lambda: noise.noise_transform(events.RandomizedResponse(1.0), seed=0),
     "event"),
    ("transform event a string", lambda: noise.noise_transform("gaussian", seed=0), "event"),
    ("transform Gaussian σ < 0", lambda: noise.noise_transform(events.Gaussian(-1.0), seed=0), "noise_multiplier"),
    ("transform Gaussian σ NaN", lambda: noise.noise_transform(events.Gaussian(np.nan), seed=0), "noise_multiplier"),
    ("transform Gaussian σ inf", lambda: noise.noise_transform(events.Gaussian(np.inf), seed=0), "noise_multiplier"),
    ("transform Gaussian σ array", lambda: noise.noise_transform(events.Gaussian(np.ones(2)), seed=0),
     "noise_multiplier"),
    ("transform Laplace b < 0", lambda: noise.noise_transform(events.Laplace(-0.5), seed=0), "scale"),
    ("transform Staircase ε ≤ 0", lambda: noise.noise_transform(events.Staircase(0.0), seed=0), "epsilon"),
    ("transform Staircase γ > 1", lambda: noise.noise_transform(events.Staircase(1.0, 2.0), seed=0), "gamma"),
    ("transform sensitivity ≤ 0", lambda: noise.noise_transform(events.Gaussian(1.0), seed=0, sensitivity=0.0),
     "sensitivity"),
    ("transform sensitivity array", lambda: noise.noise_transform(events.Gaussian(1.0), seed=0, sensitivity=[1.0]),
     "sensitivity"),
    ("transform normalize_by ≤ 0", lambda: noise.noise_transform(events.Gaussian(1.0), seed=0, normalize_by=0.0),
     "normalize_by"),
    ("transform flat not a bool", lambda: noise.noise_transform(events.Gaussian(1.0), seed=0, flat=1), "flat"),
    ("transform seed float", lambda: noise.noise_transform(events.Gaussian(1.0), seed=0.5), "seed"),
    ("add_noise key float", lambda: noise.add_noise(0.5, {"w": jnp.zeros(2)}, events.Gaussian(1.0)), "key"),
    ("add_noise key batch", lambda: noise.add_noise(jax.random.split(jax.random.key(0), 2), {"w": jnp.zeros(2)},
                                                    events.Gaussian(1.0)), "key"),
    ("add_noise event", lambda: noise.add_noise(0, {"w": jnp.zeros(2)}, events.Gaussian(-2.0)), "noise_multiplier"),
    ("add_noise sensitivity NaN", lambda: noise.add_noise(0, {"w": jnp.zeros(2)}, events.Gaussian(1.0),
                                                          sensitivity=np.nan), "sensitivity"),
    ("add_noise normalize_by inf", lambda: noise.add_noise(0, {"w": jnp.zeros(2)}, events.Gaussian(1.0),
                                                           normalize_by=np.inf), "normalize_by"),
    ("add_noise flat None", lambda: noise.add_noise(0, {"w": jnp.zeros(2)}, events.Gaussian(1.0), flat=None), "flat"),
]


@pytest.mark.parametrize("call, name", [(c, n) for _, c, n in BAD], ids=[i for i, _, _ in BAD])
def test_bad_input(call, name):
    with pytest.raises(ValueError, match=name):
        call()
