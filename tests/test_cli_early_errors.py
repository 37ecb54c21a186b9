"""Every argument error and unwritable output path of every subcommand: exit status 2 and a one-line
message, before JAX is imported (so before any computation). One fresh interpreter runs all the cases
and reports whether JAX was ever imported."""

import os

import pytest
from cli_helpers import run_fresh

REFERENCE = ["--q", "0.01", "--sigma", "1.1", "--steps", "100", "--delta", "1e-5"]
SWEEP = ["sweep", *REFERENCE]
TRAIN = ["train", "--epsilon", "1", "--epochs", "1"]

# name → (argv, text the message must contain); {file} is a regular file, so {file}/x cannot be created
CASES = {
    "no command": ([], "the following arguments are required: COMMAND"),
    "unknown command": (["budget"], "invalid choice: 'budget'"),
    "epsilon q out of range": (["epsilon", *REFERENCE[:1], "1.5", *REFERENCE[2:]], "q must lie in [0.0, 1.0], got 1.5"),
    "epsilon delta": (["epsilon", *REFERENCE[:-1], "1"], "delta must lie in (0.0, 1.0)"),
    "epsilon sigma not a number": (["epsilon", *REFERENCE[:3], "abc", *REFERENCE[4:]], "not a number: 'abc'"),
    "epsilon bad accountant": (["epsilon", *REFERENCE, "--accountant", "prv"], "invalid choice: 'prv'"),
    "calibrate sigma target": (["calibrate", "sigma", "--epsilon", "0", "--q", "0.01", "--steps", "100",
                                "--delta", "1e-5"], "epsilon must lie in (0.0, inf)"),
    "calibrate q sigma": (["calibrate", "q", "--epsilon", "1", "--sigma", "0", "--steps", "100", "--delta", "1e-5"],
                          "sigma must lie in (0.0, inf)"),
    "calibrate steps q": (["calibrate", "steps", "--epsilon", "1", "--q", "2", "--sigma", "1", "--delta", "1e-5"],
                          "q must lie in (0.0, 1.0]"),
    "sweep grid out of range": (["sweep", "--q", "0.1:2:3", *REFERENCE[2:]], "q must lie in [0.0, 1.0]"),
    "sweep csv missing directory": ([*SWEEP, "--csv", "/nonexistent/dir/eps.csv"],
                                    "--csv '/nonexistent/dir/eps.csv': '/nonexistent/dir' does not exist"),
    "sweep json is a directory": ([*SWEEP, "--json", "{dir}"], "is a directory; give a file name"),
    "sweep plot under a file": ([*SWEEP, "--plot", "{file}/x.png"], "is a file, not a directory"),
    "sweep plot needs a slice": ([*SWEEP, "--plot", "{dir}/x.png"], "--plot needs at least 2 values of --q"),
    "sweep out under a file": ([*SWEEP, "--out", "{file}/out"], "--out '{file}/out' cannot be created"),
    "shuffle budgets": (["shuffle", "--budgets", "beta:1,2", "--n", "100", "--delta", "1e-8"], "budgets spec must be"),
    "shuffle delta": (["shuffle", "--budgets", "uniform:0.1,1", "--n", "100", "--delta", "0"], "delta must lie in"),
    "shuffle rounds zero": (["shuffle", "--budgets", "uniform:0.1,1", "--n", "100", "--delta", "1e-8", "--rounds",
                             "1,0"], "rounds must lie in [1, inf), got 0"),
    "shuffle rounds fraction": (["shuffle", "--budgets", "uniform:0.1,1", "--n", "100", "--delta", "1e-8",
                                 "--rounds", "2.5"], "rounds must be an integer in [1, inf), got 2.5"),
    "shuffle dims": (["shuffle", "--budgets", "uniform:0.1,1", "--n", "100", "--delta", "1e-8", "--rounds", "10",
                      "--dims", "0"], "dims must lie in [1, inf), got 0"),
    "shuffle out under a file": (["shuffle", "--budgets", "uniform:0.1,1", "--n", "100", "--delta", "1e-8", "--out",
                                  "{file}/out"], "cannot be created"),
    "report systems": (["report", "--systems", "apes,dpsgd"], "systems must be"),
    "report out under a file": (["report", "--quick", "--out", "{file}/out"], "cannot be created"),
    "reproduce alias": (["reproduce", "--out", "{file}/out"], "cannot be created"),
    "train no privacy": (["train"], "needs --epsilon"),
    "train json missing directory": ([*TRAIN, "--json", "/nonexistent/train.json"], "does not exist"),
    "train plot under a file": ([*TRAIN, "--plot", "{file}/curve.png"], "is a file, not a directory"),
    "train checkpoint under a file": ([*TRAIN, "--checkpoint", "{file}/ckpt"], "cannot be created"),
    "train batch size": ([*TRAIN, "--batch-size", "1e6"], "batch_size must lie in (0.0, 1438.0]"),
    "train lr": ([*TRAIN, "--lr", "0"], "lr must lie in (0.0, inf), got 0.0"),
    "train cnn on tabular data": ([*TRAIN, "--dataset", "breast_cancer", "--model", "cnn"], "needs square images"),
    "train budgets": ([*TRAIN[:1], "--budgets", "nonsense:1"], "budgets spec must be"),
    "train budgets with laplace": ([*TRAIN[:1], "--budgets", "levels:1@0.5,2@0.5", "--mechanism", "laplace"],
                                   "are Gaussian-only"),
    "train epochs": ([*TRAIN[:3], "--epochs", "0"], "epochs must lie in [1, inf), got 0"),
    "train coordinator": ([*TRAIN, "--coordinator", "localhost", "--num-processes", "2", "--process-id", "0"],
                          "coordinator_address must be 'host:port'"),
    "train process id": ([*TRAIN, "--coordinator", "127.0.0.1:1234", "--num-processes", "2", "--process-id", "2"],
                         "process_id must be an integer in [0, 1], got 2"),
    "train num processes": ([*TRAIN, "--coordinator", "127.0.0.1:1234", "--num-processes", "two"],
                            "invalid int value: 'two'"),
    "train process id missing": ([*TRAIN, "--coordinator", "127.0.0.1:1234", "--num-processes", "2"],
                                 "process_id is required: pass it or set JAX_PROCESS_ID"),
    # output paths (issue 34): a missing parent, a place no file can be created in (/proc, even for root), a
    # figure's file type, a file --out would write; {dir}/missing never exists, {dir}/outdir holds a directory
    # named sweep.csv
    "sweep out missing parent": ([*SWEEP, "--out", "{dir}/missing/out"],
                                 "--out '{dir}/missing/out' cannot be created: its parent directory "
                                 "'{dir}/missing' does not exist"),
    "sweep out unwritable": ([*SWEEP, "--out", "/proc/jaxpriv-out"], "--out '/proc/jaxpriv-out' is not writable"),
    "sweep csv unwritable": ([*SWEEP, "--csv", "/proc/eps.csv"], "--csv '/proc/eps.csv' is not writable"),
    "sweep json unwritable": ([*SWEEP, "--json", "/proc/eps.json"], "--json '/proc/eps.json' is not writable"),
    "sweep plot not a figure": ([*SWEEP, "--plot", "{dir}/p.txt"], "--plot '{dir}/p.txt': a figure is written as .png"),
    "sweep plot without extension": ([*SWEEP, "--plot", "{dir}/p"], "got no extension"),
    "sweep out file is a directory": ([*SWEEP, "--out", "{dir}/outdir"],
                                      "--out's csv '{dir}/outdir/sweep.csv' is a directory"),
    "shuffle out missing parent": (["shuffle", "--budgets", "uniform:0.1,1", "--n", "100", "--delta", "1e-8",
                                    "--out", "{dir}/missing/out"], "its parent directory '{dir}/missing' does not"),
    "shuffle out unwritable": (["shuffle", "--budgets", "uniform:0.1,1", "--n", "100", "--delta", "1e-8",
                                "--out", "/proc/jaxpriv-out"], "is not writable"),
    "shuffle budgets file not found": (["shuffle", "--budgets", "{dir}/missing.csv", "--delta", "1e-8"],
                                       "--budgets '{dir}/missing.csv': file not found"),
    "shuffle budgets relative file not found": (["shuffle", "--budgets", "no-such-budgets.csv", "--n", "100",
                                                 "--delta", "1e-8"], "file not found"),
    "shuffle budgets directory": (["shuffle", "--budgets", "{dir}", "--delta", "1e-8"], "is a directory, not a CSV"),
    "report out missing parent": (["report", "--quick", "--out", "{dir}/missing/out"], "does not exist"),
    "report out unwritable": (["report", "--quick", "--out", "/proc/jaxpriv-out"], "is not writable"),
    "train checkpoint missing parent": ([*TRAIN, "--checkpoint", "{dir}/missing/ckpt"], "does not exist"),
    "train checkpoint unwritable": ([*TRAIN, "--checkpoint", "/proc/jaxpriv-ckpt"], "is not writable"),
    "train json unwritable": ([*TRAIN, "--json", "/proc/train.json"], "is not writable"),
    "train plot not a figure": ([*TRAIN, "--plot", "{dir}/curve.csv"], "a figure is written as .png"),
    "train budgets file not found": ([*TRAIN[:1], "--budgets", "{dir}/missing.csv"], "file not found"),
    "audit out missing parent": (["audit", "--epsilon", "8", "--out", "{dir}/missing/out"], "does not exist"),
    "audit out unwritable": (["audit", "--epsilon", "8", "--out", "/proc/jaxpriv-out"], "is not writable"),
}

@pytest.fixture(scope="module")
def outcome(tmp_path_factory):
    """Run every case in one fresh interpreter: name → (result, expected text), and whether JAX loaded."""
    base = tmp_path_factory.mktemp("cli_errors")
    (base / "file").write_text("not a directory\n")
    (base / "outdir" / "sweep.csv").mkdir(parents=True)
    subs = {"{file}": str(base / "file"), "{dir}": str(base)}

    def fill(text):
        for key, value in subs.items():
            text = text.replace(key, value)
        return text

    argvs = [[fill(a) for a in argv] for argv, _ in CASES.values()]
    report = run_fresh(argvs)
    cases = {name: (result, fill(expected)) for (name, (_, expected)), result in zip(CASES.items(), report["results"])}
    return cases, report["jax_imported"], base


@pytest.mark.parametrize("name", list(CASES))
def test_exit_2_with_one_line_naming_the_problem(outcome, name):
    result, expected = outcome[0][name]
    assert result["code"] == 2, result
    assert result["stdout"] == ""
    assert result["stderr"].count("\n") == 1 and result["stderr"].endswith("\n"), result["stderr"]
    assert expected in result["stderr"], result["stderr"]


def test_no_case_imports_jax(outcome):
    assert outcome[1] is False


def test_the_parser_names_every_accountant():
    from jaxpriv import accounting, cli

    assert cli.ACCOUNTANTS == accounting.ACCOUNTANTS


def test_a_failed_run_creates_nothing(outcome):
    """No directory made for a missing parent, no write probe left behind, nothing written under /proc."""
    base = outcome[2]
    assert not (base / "missing").exists()
    assert sorted(p.name for p in base.iterdir()) == ["file", "outdir"]
    assert [p.name for p in (base / "outdir").iterdir()] == ["sweep.csv"]
    assert not any(os.path.exists(f"/proc/{name}") for name in ("jaxpriv-out", "eps.csv", "train.json"))
