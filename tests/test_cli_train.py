"""``jaxpriv train``, run in-process through ``main(argv)``: JSON summary, learning-curve plot,
personalized budgets (checked against the core accountant), resume, and every bad argument (exit 2)."""

import json

import numpy as np
import pytest

from jaxpriv import accounting, events
from jaxpriv.cli import main

BASE = ["train", "--dataset", "breast_cancer", "--epochs", "2", "--batch-size", "64", "--delta", "1e-5", "--quiet",
        "--hidden", "8"]


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_train_json_and_plot(capsys, tmp_path):
    out_json, out_png = tmp_path / "run.json", tmp_path / "curve.png"
    code, out, err = run(capsys, *BASE, "--epsilon", "2", "--json", str(out_json), "--plot", str(out_png))
    assert code == 0, err
    summary = json.loads(out_json.read_text())
    assert 0.5 < summary["test_accuracy"] <= 1.0
    assert summary["epsilon"] <= 2.0 and summary["epsilon"] == pytest.approx(2.0, rel=1e-6)
    assert summary["delta"] == 1e-5 and summary["stopped"] == "completed"
    assert [r["epoch"] for r in summary["history"]] == [1, 2]
    assert summary["history"][-1]["epsilon"] == summary["epsilon"]
    plan = summary["plan"]
    # the spent ε is the core's for the planned events
    group = plan["groups"][0]
    step = events.PoissonSampled(group["rate"], events.Gaussian(group["noise_multiplier"]))
    assert summary["epsilon"] == float(accounting.epsilon(events.SelfComposed(step, summary["steps"]), 1e-5,
                                                          accountant=accounting.RDP()))
    assert out_png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "test accuracy" in out and "ε" in out and "wrote json" in out


def test_train_balls_in_bins_reports_the_allocation_epsilon(capsys, tmp_path):
    from jaxpriv.train.plan import AllocationAccountant

    out_json = tmp_path / "run.json"
    code, out, err = run(capsys, *BASE, "--noise-multiplier", "1.5", "--sampling", "balls_in_bins", "--json",
                         str(out_json))
    assert code == 0, err
    summary = json.loads(out_json.read_text())
    plan = summary["plan"]
    assert plan["sampling"] == "balls_in_bins" and summary["config"]["sampling"] == "balls_in_bins"
    event = AllocationAccountant.run_event(plan["steps_per_epoch"], 1.5, 2)
    assert summary["epsilon"] == float(accounting.epsilon(event, 1e-5, accountant="pld"))
    assert "balls in bins" in out


@pytest.mark.parametrize("personalization", ["sample", "scale"])
def test_train_personalized_budgets(capsys, tmp_path, personalization):
    out_json = tmp_path / "run.json"
    code, out, err = run(capsys, *BASE, "--budgets", "levels:1@0.5,4@0.5", "--personalization", personalization,
                         "--json", str(out_json))
    assert code == 0, err
    summary = json.loads(out_json.read_text())
    groups = summary["plan"]["groups"]
    assert [g["budget"] for g in groups] == [1.0, 4.0]
    assert sum(g["records"] for g in groups) == 456  # breast cancer: 569 − (42 + 71) held out
    for g in groups:
        assert g["epsilon"] <= g["budget"]
        assert g["epsilon"] == pytest.approx(g["budget"], rel=1e-6)  # calibrated to spend it exactly
    assert summary["epsilon"] == max(g["epsilon"] for g in groups)
    if personalization == "sample":
        assert groups[0]["rate"] < groups[1]["rate"] and groups[0]["noise_multiplier"] == groups[1]["noise_multiplier"]
    else:
        assert groups[0]["rate"] == groups[1]["rate"] and groups[0]["clip_norm"] < groups[1]["clip_norm"]
    assert "privacy groups" in out


def test_train_transformer_in_bfloat16_on_digits(capsys, tmp_path):
    """The tiny Transformer (digits' 8 rows as tokens) with a bfloat16 forward and backward pass: it runs,
    learns, spends the same ε as the float32 plan (the privacy plan does not depend on the precision)."""
    out_json = tmp_path / "run.json"
    code, _, err = run(capsys, "train", "--dataset", "digits", "--model", "transformer", "--precision", "bfloat16",
                       "--epochs", "2", "--batch-size", "128", "--epsilon", "3", "--quiet", "--json", str(out_json))
    assert code == 0, err
    summary = json.loads(out_json.read_text())
    assert summary["model"] == "transformer" and summary["epsilon"] == pytest.approx(3.0, rel=1e-6)
    assert summary["test_accuracy"] > 0.2  # 10 classes: above chance after two epochs


def test_train_laplace_mechanism(capsys, tmp_path):
    from jaxpriv import rdp

    out_json = tmp_path / "run.json"
    code, out, err = run(capsys, *BASE, "--epsilon", "4", "--mechanism", "laplace", "--json", str(out_json))
    assert code == 0, err
    summary = json.loads(out_json.read_text())
    assert summary["config"]["mechanism"] == "laplace" and summary["plan"]["mechanism"] == "laplace"
    group = summary["plan"]["groups"][0]
    # the spent ε is the improved conversion of T steps of the Zhu-Wang bound on the subsampled Laplace
    curve = rdp.subsampled(group["rate"], lambda a: rdp.laplace(group["noise_multiplier"], a), rdp.DEFAULT_ORDERS)
    want = float(rdp.to_epsilon(summary["steps"] * curve, rdp.DEFAULT_ORDERS, 1e-5)[0])
    assert summary["epsilon"] == pytest.approx(want, rel=1e-12) and summary["epsilon"] <= 4.0
    assert "DP-SGD (laplace)" in out


def test_train_epsilon_caps_the_budgets(capsys, tmp_path):
    out_json = tmp_path / "run.json"
    code, _, err = run(capsys, *BASE, "--budgets", "levels:1@0.5,8@0.5", "--epsilon", "3", "--json", str(out_json))
    assert code == 0, err
    summary = json.loads(out_json.read_text())
    assert [g["budget"] for g in summary["plan"]["groups"]] == [1.0, 3.0]
    assert summary["epsilon"] <= 3.0


def test_train_budgets_from_a_csv_file(capsys, tmp_path):
    path = tmp_path / "budgets.csv"
    np.savetxt(path, np.resize([2.0, 3.0], 456))
    out_json = tmp_path / "run.json"
    code, _, err = run(capsys, *BASE, "--budgets", str(path), "--json", str(out_json))
    assert code == 0, err
    assert [g["records"] for g in json.loads(out_json.read_text())["plan"]["groups"]] == [228, 228]


def test_train_resumes_from_its_checkpoint(capsys, tmp_path):
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    argv = [*BASE, "--noise-multiplier", "1.0", "--checkpoint", str(tmp_path / "ckpt")]
    assert run(capsys, *argv, "--json", str(first))[0] == 0
    assert run(capsys, *argv, "--json", str(second))[0] == 0  # finished run: restored, no new step
    a, b = json.loads(first.read_text()), json.loads(second.read_text())
    assert a["epsilon"] == b["epsilon"] and a["test_accuracy"] == b["test_accuracy"] and a["steps"] == b["steps"]


# --------------------------------------------------------------------------------------------------
# bad arguments: exit status 2 and a message naming the argument
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("extra,message", [
    ([], "needs --epsilon"),
    (["--epsilon", "-1"], "epsilon must lie"),
    (["--epsilon", "1", "--delta", "2"], "delta must lie"),
    (["--epsilon", "1", "--clip", "0"], "clip_norm must lie"),
    (["--epsilon", "1", "--batch-size", "1e6"], "batch_size must lie"),
    (["--epsilon", "1", "--momentum", "1"], "momentum must lie"),
    (["--epsilon", "1", "--lr", "0"], "lr must lie in (0.0, inf)"),
    (["--epsilon", "1", "--test-fraction", "1.5"], "test_fraction must lie"),
    (["--epsilon", "1", "--seed", "-3"], "seed must lie"),
    (["--epsilon", "1", "--model", "cnn"], "square images"),
    (["--budgets", "nonsense:1"], "budgets spec must be"),
    (["--budgets", "levels:1@0.5,2@0.5", "--personalization", "scale", "--noise-multiplier", "1"],
     "leave noise_multiplier unset"),
    (["--budgets", "levels:1@0.5,2@0.5", "--mechanism", "laplace"], "are Gaussian-only"),
    (["--epsilon", "1", "--noise-multiplier", "2", "--mechanism", "laplace"], "give epsilon or noise_multiplier"),
    (["--epsilon", "1", "--sampling", "balls_in_bins", "--mechanism", "laplace"], "accounted for Gaussian noise only"),
    (["--budgets", "levels:1@0.5,2@0.5", "--sampling", "balls_in_bins"], "use sampling 'poisson' with budgets"),
    (["--epsilon", "1", "--noise-multiplier", "2", "--sampling", "balls_in_bins"],
     "give epsilon or noise_multiplier, not both"),
])
def test_train_bad_arguments(capsys, extra, message):
    code, _, err = run(capsys, *BASE, *extra)
    assert code == 2
    assert message in err


def test_train_budget_file_of_the_wrong_length(capsys, tmp_path):
    path = tmp_path / "budgets.csv"
    np.savetxt(path, np.ones(10))
    code, _, err = run(capsys, *BASE, "--budgets", str(path))
    assert code == 2 and "10 budgets, the training set 456 records" in err


@pytest.mark.parametrize("extra", [["--dataset", "cifar10"], ["--personalization", "other"], ["--epochs", "ten"],
                                   ["--mechanism", "exponential"], ["--sampling", "shuffle"]])
def test_train_argparse_errors(capsys, extra):
    code, _, err = run(capsys, "train", "--epsilon", "1", *extra)
    assert code == 2 and err.startswith("jaxpriv train: error: argument ") and err.count("\n") == 1


def test_train_dataset_mnist_is_the_bundled_mnist_5k(capsys, tmp_path):
    # checked before any training: the budgets file must have one budget per MNIST-5k training image
    budgets = tmp_path / "b.csv"
    budgets.write_text("1\n2\n3\n")
    code, _, err = run(capsys, "train", "--dataset", "mnist", "--epsilon", "1", "--budgets", str(budgets))
    assert code == 2 and "has 3 budgets, the training set 4000 records" in err and err.count("\n") == 1


def test_train_help_has_an_example(capsys):
    code, out, _ = run(capsys, "train", "--help")
    assert code == 0 and "example:" in out and "jaxpriv train --dataset digits --epsilon 3" in out


def test_train_library_errors_are_one_line(capsys):
    code, _, err = run(capsys, *BASE, "--epsilon", "0")
    assert code == 2 and err.startswith("jaxpriv: error: epsilon must lie in") and err.count("\n") == 1
