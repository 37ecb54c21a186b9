"""``jaxpriv.train.make_private``: its step is the trainer's step (to the bit), its σ is the core's
calibration, its ε the core's accountant, it learns (classification and regression), it stops at the
budget, and every parameter is checked."""

import jax
import numpy as np
import optax
import pytest
from flax import nnx

import jaxpriv
from jaxpriv.schedule import sampling_and_steps
from jaxpriv.train import PrivateTrainer, dpsgd, make_private
from jaxpriv.train.dpsgd import DPSGDConfig

DELTA = 1e-5


def _classification(n=200, features=4, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, features)).astype(np.float32)
    return x, (x[:, 0] - x[:, 1] > 0).astype(np.int32)


def _params(model):
    return [np.asarray(a) for a in jax.tree_util.tree_leaves(nnx.state(model, nnx.Param))]


def _accuracy(model, x, y):
    return float(np.mean(np.argmax(np.asarray(model(x)), -1) == y))


def test_target_epsilon_calibrates_sigma_and_learns():
    x, y = _classification()
    model = nnx.Linear(4, 2, rngs=nnx.Rngs(0))
    private = make_private(model, optax.sgd(1.0), x, y, target_epsilon=4.0, delta=DELTA, batch_size=50, epochs=5)
    assert isinstance(private, PrivateTrainer) and private.model is model
    q, steps = sampling_and_steps(200, 50, 5)
    assert (private.sample_rate, private.total_steps) == (q, steps) == (0.25, 20)
    assert private.noise_multiplier == float(jaxpriv.calibrate.noise_multiplier(4.0, q, steps, DELTA))
    assert private.steps == 0 and private.epsilon() == 0.0
    private.step()
    assert private.steps == 1 and 0 < private.epsilon() < 4.0
    epsilon = private.run()
    assert private.steps == 20
    assert epsilon == float(jaxpriv.dpsgd_epsilon(q, private.noise_multiplier, 20, DELTA)) and epsilon <= 4.0
    assert _accuracy(model, x, y) > 0.85
    assert "steps=20/20" in repr(private) and "target_epsilon=4" in repr(private)


def test_the_budget_stops_the_steps():
    x, y = _classification(n=64)
    private = make_private(nnx.Linear(4, 2, rngs=nnx.Rngs(0)), optax.sgd(0.1), x, y, target_epsilon=2.0,
                           delta=DELTA, batch_size=32, epochs=1)
    with pytest.raises(ValueError, match=r"steps must lie in \[0.0, 2\]"):
        private.run(3)
    assert private.run(1) <= 2.0 and private.steps == 1
    private.run()
    with pytest.raises(RuntimeError, match="the privacy budget is spent: the 2 planned steps are done"):
        private.step()
    assert private.run() == private.epsilon() and private.steps == 2  # nothing left: run() takes no step


def test_a_fixed_noise_multiplier_reports_epsilon_and_may_go_on():
    x, y = _classification(n=64)
    private = make_private(nnx.Linear(4, 2, rngs=nnx.Rngs(0)), optax.sgd(0.1), x, y, noise_multiplier=1.3,
                           delta=DELTA, batch_size=16, epochs=1)
    assert private.noise_multiplier == 1.3 and private.target_epsilon is None and private.total_steps == 4
    private.run(6)  # beyond the planned steps: ε simply grows
    assert private.epsilon() == float(jaxpriv.dpsgd_epsilon(0.25, 1.3, 6, DELTA))


def test_the_step_is_the_trainers_step_to_the_bit():
    """Same seed, same schedule (B divides N): make_private's steps give dpsgd.train's parameters exactly."""
    x, y = _classification(n=120)
    config = DPSGDConfig(epochs=2, batch_size=30, noise_multiplier=1.1, clip_norm=0.7, seed=5)
    trained = nnx.Linear(4, 2, rngs=nnx.Rngs(1))
    result = dpsgd.train(trained, optax.sgd(0.3, momentum=0.9), (x, y), config, progress=False)
    model = nnx.Linear(4, 2, rngs=nnx.Rngs(1))
    private = make_private(model, optax.sgd(0.3, momentum=0.9), x, y, noise_multiplier=1.1, delta=DELTA,
                           batch_size=30, epochs=2, max_grad_norm=0.7, seed=5)
    assert private.run() == result.epsilon and private.steps == result.steps == 8
    for a, b in zip(_params(model), _params(trained)):
        np.testing.assert_array_equal(a, b)


def test_same_seed_same_run_other_seed_other_run():
    x, y = _classification(n=64)
    runs = []
    for seed in (0, 0, 1):
        model = nnx.Linear(4, 2, rngs=nnx.Rngs(0))  # the step program of the fixed-σ test above: compiled once
        make_private(model, optax.sgd(0.1), x, y, noise_multiplier=1.0, delta=DELTA, batch_size=16, epochs=1,
                     seed=seed).run()
        runs.append(_params(model))
    assert all(np.array_equal(a, b) for a, b in zip(runs[0], runs[1]))
    assert not all(np.array_equal(a, b) for a, b in zip(runs[0], runs[2]))


def test_mse_regression_learns():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(400, 3)).astype(np.float32)
    y = x @ np.array([1.0, -2.0, 0.5], np.float32) + 0.3
    model = nnx.Linear(3, 1, rngs=nnx.Rngs(0))
    initial = float(np.mean((np.asarray(model(x))[:, 0] - y) ** 2))
    private = make_private(model, optax.sgd(0.1), x, y, target_epsilon=8.0, delta=DELTA, batch_size=50, epochs=8,
                           max_grad_norm=5.0, loss="mse")
    assert private.run() <= 8.0
    final = float(np.mean((np.asarray(model(x))[:, 0] - y) ** 2))
    assert final < 0.05 * initial and final < 0.5
    np.testing.assert_allclose(np.asarray(model.kernel[...])[:, 0], [1.0, -2.0, 0.5], atol=0.3)


def test_a_custom_loss_and_microbatches():
    x, y = _classification(n=64)
    seen = []

    def hinge(model, inputs, labels, key):
        seen.append(inputs.shape)
        margin = model(inputs)[:, 0] * (2.0 * labels - 1.0)
        return jax.nn.relu(1.0 - margin)

    model = nnx.Linear(4, 1, rngs=nnx.Rngs(0))
    private = make_private(model, optax.sgd(0.5), x, y.astype(np.float32), noise_multiplier=0.5, delta=DELTA,
                           batch_size=32, epochs=4, loss=hinge, microbatch_size=8)
    private.run()
    assert seen and all(shape[0] == 1 for shape in seen)  # called per example, under vmap
    assert float(np.mean((np.asarray(model(x))[:, 0] > 0) == y)) > 0.8


def _model():
    return nnx.Linear(4, 2, rngs=nnx.Rngs(0))


GOOD = dict(target_epsilon=2.0, delta=DELTA, batch_size=16, epochs=1)


@pytest.mark.parametrize("change, message", [
    (dict(model=nnx.Rngs(0)), "model must be a flax.nnx.Module, got Rngs"),
    (dict(optimizer="sgd"), "optimizer must be an optax.GradientTransformation, got str"),
    (dict(x="x"), "x must be an array with a leading axis of N ≥ 1 examples"),
    (dict(y=np.zeros(63, np.int32)), r"x and y must hold the same number of examples, got x of shape \(64, 4\)"),
    (dict(y=np.full(64, 0.5)), "y must hold integer class labels ≥ 0 for loss 'cross_entropy'"),
    # issue 34: labels beyond the model's classes, float (5.0, 6.0, 7.0: whole numbers are accepted as classes)
    # or integer, trained silently on a wrong target
    (dict(y=np.arange(64) % 3 + 5.0), r"labels y must be class indices in \[0, 2\) for a model with 2 outputs "
                                      r"\(logits\), got 7"),
    (dict(y=np.arange(64) % 3), r"labels y must be class indices in \[0, 2\) for a model with 2 outputs \(logits\), "
                                "got 2"),
    (dict(batch_size=0), r"batch_size must lie in \(0.0, 64.0\], got 0.0"),
    (dict(batch_size=65), r"batch_size must lie in \(0.0, 64.0\], got 65.0"),
    (dict(epochs=0), r"epochs must lie in \(0.0, inf\), got 0.0"),
    (dict(epochs=np.nan), "epochs contains NaN"),
    (dict(delta=0.0), r"delta must lie in \(0.0, 1.0\), got 0.0"),
    (dict(delta=1.0), r"delta must lie in \(0.0, 1.0\), got 1.0"),
    (dict(target_epsilon=0.0), r"target_epsilon must lie in \(0.0, inf\), got 0.0"),
    (dict(target_epsilon=[1.0, 2.0]), "target_epsilon must be a single number"),
    (dict(target_epsilon=None), "give exactly one of target_epsilon .* and noise_multiplier"),
    (dict(noise_multiplier=1.0), "give exactly one of target_epsilon .* and noise_multiplier"),
    (dict(target_epsilon=None, noise_multiplier=0.0), r"noise_multiplier must lie in \(0.0, inf\), got 0.0"),
    (dict(max_grad_norm=0.0), r"max_grad_norm must lie in \(0.0, inf\), got 0.0"),
    (dict(max_grad_norm=np.inf), "max_grad_norm contains inf"),
    (dict(loss="hinge"), r"loss must be one of \('cross_entropy', 'mse'\) or a callable"),
    (dict(seed=-1), r"seed must lie in \[0.0, 4294967295.0\], got -1.0"),
    (dict(seed=2.5), "seed must be an integer, got 2.5"),
    (dict(microbatch_size=0), r"microbatch_size must lie in \[1.0, inf\), got 0.0"),
])
def test_bad_inputs(change, message):
    x, y = _classification(n=64)
    kwargs = {"model": _model(), "optimizer": optax.sgd(0.1), "x": x, "y": y, **GOOD, **change}
    with pytest.raises(ValueError, match=message):
        make_private(**kwargs)


def test_bad_run_steps():
    x, y = _classification(n=64)
    private = make_private(_model(), optax.sgd(0.1), x, y, noise_multiplier=1.0, delta=DELTA, batch_size=16, epochs=1)
    for steps, message in [(-1, r"steps must lie in \[0.0, inf\)"), (1.5, "steps must be an integer"),
                           (np.inf, "steps contains inf")]:
        with pytest.raises(ValueError, match=message):
            private.run(steps)
