"""Tests for jaxpriv.train.noise: the Optax noise transforms of DP-SGD (MATH §6).

Oracles: the empirical standard deviation of the added noise against stddev/normalize_by (and the
Laplace and staircase variances from their modules) within 5 standard errors estimated from the draws'
fourth moment; the noise reproduced bit for bit from the mechanism samplers with the documented key
schedule (one split per step, one key per leaf); optax chains checked against a manual update.
One ValueError test per bad input.
"""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

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
    "laplace": (lambda seed, n: noise.laplace_noise(0.7, seed=seed, normalize_by=n), float(laplace.variance(0.7))),
    "staircase": (
        lambda seed, n: noise.staircase_noise(0.5, 0.3, 2.0, seed=seed, normalize_by=n),
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
        tx = noise.laplace_noise(1.0, seed=seed)
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
    noisy, _ = noise.laplace_noise(1.0, seed=0).update(half, noise.laplace_noise(1.0, seed=0).init(half))
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
    tx = noise.staircase_noise(1.5, seed=2)
    out, _ = tx.update(zeros, tx.init(zeros))
    keys = jax.random.split(jax.random.key(2), 2)
    expected = staircase.sample(keys[1], 1.5, float(staircase.optimal_gamma(1.5)), (1000,), sensitivity=1.0, dtype=jnp.float32)
    np.testing.assert_allclose(out["w"], expected, rtol=1e-6)


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
    ("laplace scale ≤ 0", lambda: noise.laplace_noise(-1.0, seed=0), "scale"),
    ("laplace normalize_by inf", lambda: noise.laplace_noise(1.0, seed=0, normalize_by=np.inf), "normalize_by"),
    ("staircase epsilon ≤ 0", lambda: noise.staircase_noise(0.0, seed=0), "epsilon"),
    ("staircase gamma > 1", lambda: noise.staircase_noise(1.0, 1.5, seed=0), "gamma"),
    ("staircase gamma < 0", lambda: noise.staircase_noise(1.0, -0.1, seed=0), "gamma"),
    ("staircase sensitivity ≤ 0", lambda: noise.staircase_noise(1.0, None, 0.0, seed=0), "sensitivity"),
    ("staircase normalize_by ≤ 0", lambda: noise.staircase_noise(1.0, seed=0, normalize_by=-2.0), "normalize_by"),
]


@pytest.mark.parametrize("call, name", [(c, n) for _, c, n in BAD], ids=[i for i, _, _ in BAD])
def test_bad_input(call, name):
    with pytest.raises(ValueError, match=name):
        call()
