"""Data-parallel DP-SGD over several local devices (the step's batch sharded along its examples).

Each run is a fresh interpreter with ``--xla_force_host_platform_device_count`` (the device count is fixed
when JAX starts): 4 CPU devices against 1, same seed. The trained parameters agree to float32 rounding
(only the order of the clipped sum's final addition differs), ε is identical, and the 4-device step really
is partitioned: its compiled program adds the devices' clipped sums with an all-reduce.
"""

import json
import os
import subprocess
import sys

import jax
import numpy as np
import pytest

_RUN = """
import json
import jax, jax.numpy as jnp, numpy as np, optax
from flax import nnx
from jaxpriv.train import data, dpsgd

d = data.load("breast_cancer", seed=0)
model = dpsgd.MLP(30, (16,), 2, rngs=nnx.Rngs(0))
config = dpsgd.DPSGDConfig(epochs=2, batch_size=64, epsilon=3.0, delta=1e-5, seed=3)
result = dpsgd.train(model, optax.sgd(0.5), d, config, progress=False)
graphdef, params, rest = nnx.split(model, nnx.Param, ...)
tx = optax.sgd(0.1)
step = dpsgd.make_step(graphdef, rest, tx, dpsgd.cross_entropy_loss, None, 1.0)
x, y = jnp.asarray(d.x_train), jnp.asarray(d.y_train)
program = step.lower(params, tx.init(params), x, y, jnp.ones(x.shape[0]), jnp.arange(64), jnp.ones(64, bool),
                     jax.random.key(0)).compile().as_text()
print(json.dumps({"devices": jax.device_count(), "epsilon": result.epsilon, "steps": result.steps,
                  "all_reduce": "all-reduce" in program,
                  "params": np.concatenate([np.ravel(p) for p in jax.tree_util.tree_leaves(params)]).tolist()}))
"""


def _train_on(devices: int) -> dict:
    env = {**os.environ, "XLA_FLAGS": f"--xla_force_host_platform_device_count={devices}",
           "JAXPRIV_CACHE_DIR": jax.config.jax_compilation_cache_dir or ""}
    done = subprocess.run([sys.executable, "-c", _RUN], capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def runs():
    return _train_on(1), _train_on(4)


def test_four_devices_train_the_same_model_as_one(runs):
    one, four = runs
    assert (one["devices"], four["devices"]) == (1, 4)
    assert four["epsilon"] == one["epsilon"] and four["steps"] == one["steps"]
    np.testing.assert_allclose(four["params"], one["params"], rtol=0, atol=1e-6)


def test_the_four_device_step_is_partitioned(runs):
    one, four = runs
    assert four["all_reduce"] and not one["all_reduce"]
