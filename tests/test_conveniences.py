"""A newcomer's path: (q, T) from dataset size / batch size / epochs (Python and the command line),
``dpsgd.train`` on plain arrays, the regression (MSE) loss, and ``jaxpriv train`` showing its σ."""

import json
import math

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

import jaxpriv
from jaxpriv.schedule import sampling_and_steps
from jaxpriv.train import data, dpsgd
from jaxpriv.train.dpsgd import DPSGDConfig
from cli_helpers import run, run_fresh

DELTA = 1e-5


# --------------------------------------------------------------------------------------------------
# sampling_and_steps
# --------------------------------------------------------------------------------------------------


def test_sampling_and_steps_follows_tensorflow_privacy():
    # compute_dp_sgd_privacy_lib: q = batch_size / n, steps = int(math.ceil(epochs * n / batch_size))
    for n, b, e in [(60_000, 256, 60), (60_000, 256, 15), (1000, 100, 3), (569, 64, 2.5), (10, 10, 1), (7, 3, 1)]:
        q, steps = sampling_and_steps(n, b, e)
        assert q == b / n and steps == math.ceil(e * n / b) and isinstance(steps, int)
    assert sampling_and_steps(60_000, 256, 60) == (256 / 60_000, 14_063)  # 14062.5 rounded up
    assert sampling_and_steps(100, 100, 1) == (1.0, 1)  # full batch


def test_sampling_and_steps_never_adds_a_step_by_float_rounding():
    assert math.ceil(1.1 * 100 / 10) == 12  # float arithmetic: 11.000000000000002
    assert sampling_and_steps(100, 10, 1.1) == (0.1, 11)  # exact on the numbers as written
    assert sampling_and_steps(100, 10, 1.11)[1] == 12
    assert sampling_and_steps(np.int64(1000), np.float32(100), np.float64(2)) == (0.1, 20)  # numpy scalars


def test_sampling_and_steps_feeds_the_accounting_recipes():
    q, steps = sampling_and_steps(60_000, 256, 60)
    assert float(jaxpriv.dpsgd_epsilon(q, 1.12, steps, DELTA)) == pytest.approx(2.5187, abs=1e-4)
    sigma = float(jaxpriv.calibrate.noise_multiplier(3.0, q, steps, DELTA))
    assert float(jaxpriv.dpsgd_epsilon(q, sigma, steps, DELTA)) <= 3.0
    assert jaxpriv.sampling_and_steps is sampling_and_steps  # the package's lazy name


@pytest.mark.parametrize("kwargs, message", [
    ({"dataset_size": 0}, r"dataset_size must lie in \[1.0, inf\), got 0.0"),
    ({"dataset_size": 2.5}, "dataset_size must be an integer"),
    ({"dataset_size": np.nan}, "dataset_size contains NaN"),
    ({"dataset_size": [100, 200]}, "dataset_size must be a single number"),
    ({"dataset_size": "many"}, "dataset_size must be a real number"),
    ({"batch_size": 0}, r"batch_size must lie in \(0.0, 100.0\], got 0.0"),
    ({"batch_size": 101}, r"batch_size must lie in \(0.0, 100.0\], got 101.0"),
    ({"batch_size": np.inf}, "batch_size contains inf"),
    ({"epochs": 0}, r"epochs must lie in \(0.0, inf\), got 0.0"),
    ({"epochs": -1}, r"epochs must lie in \(0.0, inf\)"),
    ({"epochs": np.inf}, "epochs contains inf"),
    ({"epochs": True}, "epochs must be a real number, not a bool"),
])
def test_sampling_and_steps_bad_inputs(kwargs, message):
    with pytest.raises(ValueError, match=message):
        sampling_and_steps(**{"dataset_size": 100, "batch_size": 10, "epochs": 2, **kwargs})


# --------------------------------------------------------------------------------------------------
# command line: --dataset-size/--batch-size/--epochs
# --------------------------------------------------------------------------------------------------

SCHEDULE = ["--dataset-size", "60000", "--batch-size", "256", "--epochs", "60"]


def test_epsilon_from_the_schedule_is_epsilon_from_q_and_steps(capsys):
    code, out, err = run(capsys, "epsilon", *SCHEDULE, "--sigma", 1.12, "--delta", DELTA, "--accountant", "rdp",
                         "--json")
    assert code == 0, err
    by_schedule = json.loads(out)
    code, out, err = run(capsys, "epsilon", "--q", 256 / 60_000, "--steps", 14_063, "--sigma", 1.12, "--delta", DELTA,
                         "--accountant", "rdp", "--json")
    assert code == 0, err
    assert by_schedule == json.loads(out)
    code, out, _ = run(capsys, "epsilon", *SCHEDULE, "--sigma", 1.12, "--delta", DELTA, "--accountant", "rdp")
    assert code == 0 and "q = 0.00426667" in out and "T = 14,063" in out


def test_calibrate_sigma_and_steps_from_the_schedule(capsys):
    # the schedule's (q, T) against the library's RDP calibration: the CLI's RDP accountant, not its default
    code, out, err = run(capsys, "calibrate", "sigma", "--epsilon", "3", *SCHEDULE, "--delta", DELTA, "--json",
                         "--accountant", "rdp")
    assert code == 0, err
    (row,) = json.loads(out)
    q, steps = sampling_and_steps(60_000, 256, 60)
    assert row["q"] == q and row["steps"] == steps
    assert row["sigma"] == float(jaxpriv.calibrate.noise_multiplier(3.0, q, steps, DELTA))
    code, out, err = run(capsys, "calibrate", "steps", "--epsilon", "3", *SCHEDULE[:4], "--sigma", 1.1,
                         "--delta", DELTA, "--json", "--accountant", "rdp")
    assert code == 0, err
    (row,) = json.loads(out)
    assert row["q"] == q and row["steps"] == float(jaxpriv.calibrate.steps(3.0, q, 1.1, DELTA))


def test_sweep_over_epochs(capsys, tmp_path):
    path = tmp_path / "sweep.csv"
    code, _, err = run(capsys, "sweep", "--dataset-size", 1000, "--batch-size", 100, "--epochs", "1,5,10",
                       "--sigma", "1,2", "--delta", DELTA, "--csv", path)
    assert code == 0, err
    rows = path.read_text().splitlines()[1:]
    assert len(rows) == 6
    assert sorted({float(r.split(",")[2]) for r in rows}) == [10.0, 50.0, 100.0]  # T = E·N/B
    assert {float(r.split(",")[0]) for r in rows} == {0.1}


# every schedule error: exit 2, one line, before JAX is imported (one fresh interpreter for all)
EPS = ["epsilon", "--sigma", "1.1", "--delta", "1e-5"]
SCHEDULE_ERRORS = {
    "both ways": ([*EPS, *SCHEDULE, "--q", "0.1"], "give either --q and --steps or --dataset-size, --batch-size "
                                                   "and --epochs, not both"),
    "steps and epochs": ([*EPS, *SCHEDULE, "--steps", "10"], "not both (got --steps, --dataset-size"),
    "neither": (EPS, "the following arguments are required: --q, --steps (or --dataset-size, --batch-size and "
                     "--epochs)"),
    "no epochs": ([*EPS, *SCHEDULE[:4]], "--dataset-size and --batch-size need --epochs too"),
    "epochs alone": ([*EPS, "--epochs", "3"], "--epochs needs --dataset-size and --batch-size too"),
    "batch larger than the dataset": ([*EPS, "--dataset-size", "100", "--batch-size", "200", "--epochs", "1"],
                                      "batch_size must lie in (0.0, 100.0], got 200.0"),
    "dataset size fraction": ([*EPS, "--dataset-size", "100.5", "--batch-size", "10", "--epochs", "1"],
                              "dataset_size must be an integer in [1, inf), got 100.5"),
    "dataset size zero": ([*EPS, "--dataset-size", "0", "--batch-size", "10", "--epochs", "1"],
                          "dataset_size must lie in [1, inf), got 0"),
    "batch size zero": ([*EPS, "--dataset-size", "100", "--batch-size", "0", "--epochs", "1"],
                        "batch_size must lie in (0.0, inf), got 0"),
    "batch size not a number": ([*EPS, "--dataset-size", "100", "--batch-size", "x", "--epochs", "1"],
                                "argument --batch-size: not a number: 'x'"),
    "epochs zero": ([*EPS, "--dataset-size", "100", "--batch-size", "10", "--epochs", "0"],
                    "epochs must lie in (0.0, inf), got 0.0"),
    "calibrate sigma neither": (["calibrate", "sigma", "--epsilon", "1", "--delta", "1e-5"],
                                "the following arguments are required: --q, --steps"),
    "calibrate steps with q": (["calibrate", "steps", "--epsilon", "1", "--sigma", "1", "--delta", "1e-5", "--q",
                                "0.1", *SCHEDULE[:4]], "give either --q or --dataset-size and --batch-size, not both"),
    "calibrate steps takes no epochs": (["calibrate", "steps", "--epsilon", "1", "--sigma", "1", "--delta", "1e-5",
                                         *SCHEDULE], "unrecognized arguments: --epochs 60"),
    "calibrate q takes no schedule": (["calibrate", "q", "--epsilon", "1", "--sigma", "1", "--steps", "10", "--delta",
                                       "1e-5", *SCHEDULE[:2]], "unrecognized arguments: --dataset-size"),
    "sweep one batch size": (["sweep", "--sigma", "1", "--delta", "1e-5", "--dataset-size", "100", "--batch-size",
                              "10,20", "--epochs", "1"], "argument --batch-size: not a number: '10,20'"),
    "sweep both ways": (["sweep", "--sigma", "1", "--delta", "1e-5", "--q", "0.1", *SCHEDULE], "not both"),
}

@pytest.fixture(scope="module")
def schedule_errors():
    argvs = [argv for argv, _ in SCHEDULE_ERRORS.values()]
    report = run_fresh(argvs)
    return dict(zip(SCHEDULE_ERRORS, report["results"])), report["jax_imported"]


@pytest.mark.parametrize("name", list(SCHEDULE_ERRORS))
def test_schedule_errors_exit_2_with_one_line(schedule_errors, name):
    result = schedule_errors[0][name]
    assert result["code"] == 2 and result["stdout"] == "", result
    assert result["stderr"].count("\n") == 1, result["stderr"]
    assert SCHEDULE_ERRORS[name][1] in result["stderr"], result["stderr"]


def test_schedule_errors_import_no_jax(schedule_errors):
    assert schedule_errors[1] is False


def test_schedule_options_have_help(capsys):
    for command in (["epsilon"], ["calibrate", "sigma"], ["calibrate", "steps"], ["sweep"]):
        code, out, _ = run(capsys, *command, "--help")
        assert code == 0 and "--dataset-size" in out and "q = B/N" in out


# --------------------------------------------------------------------------------------------------
# dpsgd.train on plain arrays
# --------------------------------------------------------------------------------------------------


def _arrays(n=120, features=5, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, features)).astype(np.float32)
    return x, (x[:, 0] + 0.5 * x[:, 1] > 0).astype(np.int32)


CONFIG = DPSGDConfig(epochs=2, batch_size=30, noise_multiplier=1.0, seed=3)


def _params(model):
    return [np.asarray(a) for a in jax.tree_util.tree_leaves(nnx.state(model, nnx.Param))]


def test_train_accepts_a_tuple_of_numpy_or_jax_arrays():
    x, y = _arrays()
    d = data.Dataset("arrays", x[:90], y[:90], x[90:], y[90:], 2)
    runs = {}
    for name, given in [("dataset", d), ("numpy", (x[:90], y[:90], x[90:], y[90:])),
                        ("jax", tuple(jnp.asarray(a) for a in (x[:90], y[:90], x[90:], y[90:]))),
                        ("float labels", (x[:90], y[:90].astype(np.float64), x[90:], y[90:])),
                        ("list", [x[:90], y[:90], x[90:], y[90:]])]:
        model = nnx.Linear(5, 2, rngs=nnx.Rngs(0))
        result = dpsgd.train(model, optax.sgd(0.5), given, CONFIG, progress=False)
        runs[name] = (_params(model), result.history[-1].test_accuracy, result.epsilon)
    for name, (params, accuracy, eps) in runs.items():  # the same run, whatever the container
        for a, b in zip(params, runs["dataset"][0]):
            np.testing.assert_array_equal(a, b, err_msg=name)
        assert (accuracy, eps) == runs["dataset"][1:], name


def test_train_on_x_y_only_evaluates_on_the_training_arrays():
    x, y = _arrays()
    model = nnx.Linear(5, 2, rngs=nnx.Rngs(0))
    result = dpsgd.train(model, optax.sgd(0.5), (x, y), CONFIG, progress=False)
    accuracy = float(np.mean(np.argmax(np.asarray(model(x)), -1) == y))
    assert result.test_accuracy == pytest.approx(accuracy, abs=1e-6) and result.test_accuracy > 0.6


@pytest.mark.parametrize("given, message", [
    (lambda x, y: (x, y[:-1]), r"x and y must hold the same number of examples, got x of shape \(120, 5\) and y "
                               r"of shape \(119,\)"),
    (lambda x, y: (x, y, x[:10], y[:9]), "x_test and y_test must hold the same number of examples"),
    (lambda x, y: (x, y, x[:10, :4], y[:10]), r"the test set must have the training set's shapes per example: x "
                                               r"\(5,\)"),
    (lambda x, y: (x, y, x[:0], y[:0]), r"x_test must be an array with a leading axis of N ≥ 1 examples, got shape "
                                        r"\(0, 5\)"),
    (lambda x, y: (x[0, 0], y), "x must be an array with a leading axis"),
    (lambda x, y: (x, y, x), "data must be a Dataset or a tuple \\(x, y\\) or \\(x, y, x_test, y_test\\), got a "
                             "sequence of 3 items"),
    (lambda x, y: {"x": x, "y": y}, "data must be a Dataset or a tuple .* got dict"),
    (lambda x, y: (x, y + 0.5), "y must hold integer class labels ≥ 0 for loss 'cross_entropy'"),
    (lambda x, y: (x, y - 1), "y must hold integer class labels ≥ 0"),
    (lambda x, y: (x, np.stack([y, y], 1)), r"y must hold one integer class label per example, shape \(N,\)"),
    (lambda x, y: (x, y, x[:5], np.full(5, 0.5)), "y_test must hold integer class labels"),
    (lambda x, y: (x, y.astype(np.float32) + 5), r"labels y must be class indices in \[0, 2\) for a model with 2"),
    (lambda x, y: (x, y + 5), r"labels y must be class indices in \[0, 2\) for a model with 2 outputs"),
    (lambda x, y: (x, y, x[:5], np.full(5, 2)), r"labels y_test must be class indices in \[0, 2\) for a model with 2 "
                                                r"outputs \(logits\), got 2"),
])
def test_train_rejects_bad_arrays(given, message):
    x, y = _arrays()
    with pytest.raises(ValueError, match=message):
        dpsgd.train(nnx.Linear(5, 2, rngs=nnx.Rngs(0)), optax.sgd(0.5), given(x, y), CONFIG, progress=False)


def test_train_rejects_a_config_that_is_not_one():
    x, y = _arrays()
    with pytest.raises(ValueError, match="config must be a DPSGDConfig, got dict"):
        dpsgd.train(nnx.Linear(5, 2, rngs=nnx.Rngs(0)), optax.sgd(0.5), (x, y), {"epochs": 1}, progress=False)


# --------------------------------------------------------------------------------------------------
# regression: the MSE loss
# --------------------------------------------------------------------------------------------------


def _linear_data(n=400, seed=0, outputs=None):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 3)).astype(np.float32)
    w = np.array([1.0, -2.0, 0.5], np.float32)
    y = x @ w + 0.3
    if outputs is not None:
        y = np.stack([y, -y], 1)[:, :outputs]
    return x, y.astype(np.float32)


def test_mse_loss_values():
    model = nnx.Linear(2, 1, rngs=nnx.Rngs(0))
    model.kernel[...], model.bias[...] = jnp.array([[1.0], [2.0]]), jnp.array([0.5])
    x = jnp.array([[1.0, 1.0], [0.0, 0.0]])  # outputs 3.5 and 0.5
    np.testing.assert_allclose(dpsgd.mse_loss(model, x, jnp.array([3.5, 2.5])), [0.0, 4.0])
    np.testing.assert_allclose(dpsgd.mse_loss(model, x, jnp.array([[3.5], [2.5]])), [0.0, 4.0])
    two = nnx.Linear(2, 2, rngs=nnx.Rngs(0))
    two.kernel[...], two.bias[...] = jnp.zeros((2, 2)), jnp.array([1.0, 3.0])
    np.testing.assert_allclose(dpsgd.mse_loss(two, x, jnp.zeros((2, 2))), [5.0, 5.0])  # mean over the outputs
    with pytest.raises(ValueError, match=r"mse_loss: the model gives 2 output\(s\) per example but the targets hold 1"):
        dpsgd.mse_loss(two, x, jnp.zeros(2))


@pytest.mark.parametrize("outputs", [None, 2])
def test_train_with_mse_learns_a_linear_map(outputs):
    x, y = _linear_data(outputs=outputs)
    k = 1 if outputs is None else outputs
    model = nnx.Linear(3, k, rngs=nnx.Rngs(0))
    initial = float(np.mean((np.asarray(model(x)).reshape(len(x), -1) - y.reshape(len(x), -1)) ** 2))
    config = DPSGDConfig(epochs=8, batch_size=50, epsilon=8.0, delta=DELTA, clip_norm=5.0, loss="mse", seed=1)
    result = dpsgd.train(model, optax.sgd(0.1), (x[:300], y[:300], x[300:], y[300:]), config, progress=False)
    assert result.epsilon <= 8.0 and math.isnan(result.test_accuracy)
    losses = [r.test_loss for r in result.history]
    assert losses[-1] < 0.05 * initial and losses[-1] < 0.5, losses
    if outputs is None:
        np.testing.assert_allclose(np.asarray(model.kernel[...])[:, 0], [1.0, -2.0, 0.5], atol=0.3)


def test_mse_evaluator_and_padded_targets():
    x, y = _linear_data(n=37, outputs=2)
    model = nnx.Linear(3, 2, rngs=nnx.Rngs(0))
    graphdef, params, rest = nnx.split(model, nnx.Param, ...)
    test = dpsgd.padded_test_set((x, y), 8)
    assert test[1].shape == (40, 2)
    accuracy, loss = dpsgd.make_evaluator(graphdef, 8, "mse")(params, rest, *test)
    assert math.isnan(float(accuracy))
    assert float(loss) == pytest.approx(float(np.mean((np.asarray(model(x)) - y) ** 2)), rel=1e-5)
    with pytest.raises(ValueError, match=r"loss must be one of \('cross_entropy', 'mse'\), got 'hinge'"):
        dpsgd.make_evaluator(graphdef, 8, "hinge")


def test_config_rejects_an_unknown_loss():
    x, y = _linear_data()
    with pytest.raises(ValueError, match=r"loss must be one of \('cross_entropy', 'mse'\), got 'l1'"):
        dpsgd.train(nnx.Linear(3, 1, rngs=nnx.Rngs(0)), optax.sgd(0.1), (x, y),
                    DPSGDConfig(epochs=1, batch_size=50, epsilon=1.0, loss="l1"), progress=False)
    from jaxpriv.train.config import check_config

    with pytest.raises(ValueError, match="loss must be one of"):
        check_config(DPSGDConfig(epsilon=1.0, batch_size=10, loss="mae"), n=100)


# --------------------------------------------------------------------------------------------------
# jaxpriv train shows its noise multiplier
# --------------------------------------------------------------------------------------------------

TRAIN = ["train", "--dataset", "breast_cancer", "--epochs", "1", "--batch-size", "64", "--quiet", "--hidden", "8"]


def test_train_prints_the_calibrated_noise_multiplier(capsys, tmp_path):
    out_json = tmp_path / "run.json"
    code, out, err = run(capsys, *TRAIN, "--epsilon", "2", "--json", out_json)
    assert code == 0, err
    sigma = json.loads(out_json.read_text())["plan"]["groups"][0]["noise_multiplier"]
    assert f"noise multiplier σ = {sigma:.6g} (calibrated to ε = 2)" in out
    code, out, err = run(capsys, *TRAIN, "--noise-multiplier", "1.5")
    assert code == 0, err
    assert "noise multiplier σ = 1.5 (given)" in out


def test_fractional_epochs_on_the_command_line(capsys):
    """Like sampling_and_steps, the schedule options take a real number of epochs: T = ⌈E·N/B⌉."""
    code, out, err = run(capsys, "epsilon", "--dataset-size", "1000", "--batch-size", "10", "--epochs", "0.5",
                         "--sigma", "1", "--delta", "1e-5", "--accountant", "rdp", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["steps"] == 50 and data["q"] == pytest.approx(0.01)
