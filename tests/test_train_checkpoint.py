"""train.checkpoint and train.models.squared_errors: round trip and every bad input (ValueError naming it)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxpriv.train import checkpoint
from jaxpriv.train.config import DPSGDConfig
from jaxpriv.train.data import load
from jaxpriv.train.models import squared_errors

STATE = {"w": jnp.ones((2, 3), jnp.float32), "key": jax.random.key(0)}


def test_round_trip_restores_every_leaf(tmp_path):
    checkpoint.save_checkpoint(str(tmp_path), 2, checkpoint.leaves_to_arrays("s_", STATE), {"epoch": 2})
    checkpoint.save_checkpoint(str(tmp_path), 3, checkpoint.leaves_to_arrays("s_", STATE), {"epoch": 3})
    meta, arrays = checkpoint.load_checkpoint(str(tmp_path))
    assert meta["epoch"] == 3 and len(list(tmp_path.glob("checkpoint-*.npz"))) == 1  # older ones deleted
    restored = checkpoint.arrays_to_tree("s_", arrays, STATE)
    np.testing.assert_array_equal(restored["w"], STATE["w"])
    np.testing.assert_array_equal(jax.random.key_data(restored["key"]), jax.random.key_data(STATE["key"]))


def test_an_empty_directory_holds_no_checkpoint(tmp_path):
    assert checkpoint.load_checkpoint(str(tmp_path)) is None


@pytest.mark.parametrize("arrays, message", [
    ({"s_0": np.ones((2, 3), np.float32)}, "1 saved 's_' arrays, 2 expected"),
    ({"s_0": np.ones((2,), np.uint32), "s_1": np.ones((3, 3), np.float32)}, r"s_1 has shape \(3, 3\)"),
    ({"s_0": np.ones((2,), np.uint32), "s_1": np.ones((2, 3), np.float64)}, "float64, expected"),
])
def test_a_checkpoint_of_another_model_is_refused(arrays, message):
    with pytest.raises(ValueError, match=message):
        checkpoint.arrays_to_tree("s_", arrays, STATE)


@pytest.mark.parametrize("epoch", [-1, 1.5, True, "1"])
def test_save_rejects_a_bad_epoch(tmp_path, epoch):
    with pytest.raises(ValueError, match=r"epoch must be an integer in \[0, inf\)"):
        checkpoint.save_checkpoint(str(tmp_path), epoch, {}, {})


def test_save_rejects_non_dicts(tmp_path):
    with pytest.raises(ValueError, match="arrays and meta must be dicts"):
        checkpoint.save_checkpoint(str(tmp_path), 1, [np.ones(2)], {})


def test_fingerprint_tells_runs_apart_and_rejects_bad_input():
    d = load("breast_cancer", seed=0)
    a = checkpoint.run_fingerprint(DPSGDConfig(epochs=1), d)
    assert a == checkpoint.run_fingerprint(DPSGDConfig(epochs=1), d) != checkpoint.run_fingerprint(DPSGDConfig(epochs=2), d)
    with pytest.raises(ValueError, match="config must be a DPSGDConfig"):
        checkpoint.run_fingerprint({"epochs": 1}, d)
    with pytest.raises(ValueError, match=r"data must be a Dataset \(x_train, y_train\)"):
        checkpoint.run_fingerprint(DPSGDConfig(epochs=1), (d.x_train, d.y_train))


def test_squared_errors_and_a_shape_mismatch():
    np.testing.assert_allclose(squared_errors(jnp.ones((2, 3)), jnp.zeros((2, 3))), [1.0, 1.0])
    with pytest.raises(ValueError, match=r"the model gives 3 output\(s\) per example but the targets hold 2"):
        squared_errors(jnp.ones((2, 3)), jnp.zeros((2, 2)))
