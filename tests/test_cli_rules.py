"""One set of argument rules (``jaxpriv.cli.RULES``) for every subcommand: what ``--help`` states is what
is checked, integer options accept the same spellings everywhere, every rule's violation is one line on
stderr with exit status 2 before JAX is imported; unattainable calibrations exit 1 with the reason; tables
fit 80 columns when stdout is not a terminal."""

import argparse
import contextlib
import io
import json
import re

import pytest

from jaxpriv import cli
from jaxpriv.cli import RULES, build_parser
from cli_helpers import replace_arg, run, run_fresh

DPSGD = ["--q", "0.01", "--sigma", "1.1", "--steps", "1000", "--delta", "1e-5"]
SHUFFLE = ["shuffle", "--budgets", "uniform:0.05,1", "--n", "1000", "--delta", "1e-8"]
TRAIN = ["train", "--epsilon", "1", "--epochs", "1"]


# --------------------------------------------------------------------------------------------------
# Bad input: exit 2, one line, before JAX
# --------------------------------------------------------------------------------------------------

# name → (argv, the whole message after "jaxpriv: error: " or, with a trailing "…", its start)
CASES = {
    # steps are integers everywhere (no more RDP of 2.5 steps beside a CLT value)
    "epsilon fractional steps": (["epsilon", *replace_arg(DPSGD, "--steps", "2.5")],
                                 "steps must be an integer in [0, inf), got 2.5"),
    "epsilon infinite steps": (["epsilon", *replace_arg(DPSGD, "--steps", "1e400")], "steps contains inf; …"),
    "calibrate fractional steps": (["calibrate", "sigma", "--epsilon", "1", "--q", "0.01", "--steps", "10.5",
                                    "--delta", "1e-5"], "steps must be an integer in [1, inf), got 10.5"),
    "calibrate zero steps": (["calibrate", "q", "--epsilon", "1", "--sigma", "1", "--steps", "0", "--delta", "1e-5"],
                             "steps must lie in [1, inf), got 0"),
    "calibrate zero q": (["calibrate", "steps", "--epsilon", "1", "--q", "0", "--sigma", "1", "--delta", "1e-5"],
                         "q must lie in (0.0, 1.0], got 0.0"),
    "sweep fractional steps": (["sweep", *replace_arg(DPSGD, "--steps", "100,150.5")],
                               "steps must be an integer in [0, inf), got 150.5"),
    "sweep log grid of steps": (["sweep", *replace_arg(DPSGD, "--steps", "10:1000:4:log")],
                                "steps must be an integer in [0, inf), got 46.4…"),
    "sweep fractional chunk size": (["sweep", *DPSGD, "--chunk-size", "2.5"],
                                    "chunk_size must be an integer in [1, inf), got 2.5"),
    # every integer option: a fraction is rejected with the same message
    "shuffle fractional n": (replace_arg(SHUFFLE, "--n", "2.5"), "n must be an integer in [2, inf), got 2.5"),
    "shuffle one user": (replace_arg(SHUFFLE, "--n", "1"), "n must lie in [2, inf), got 1"),
    "shuffle fractional dims": ([*SHUFFLE, "--rounds", "10", "--dims", "1.5"],
                                "dims must be an integer in [1, inf), got 1.5"),
    "shuffle fractional rounds": ([*SHUFFLE, "--rounds", "1,1e1,2.5"],
                                  "rounds must be an integer in [1, inf), got 2.5"),
    "shuffle no n": (SHUFFLE[:3] + SHUFFLE[5:], "--n (the number of users) is required with the distribution "
                                                "--budgets 'uniform:0.05,1'"),
    "train fractional epochs": (replace_arg(TRAIN, "--epochs", "2.5"), "epochs must be an integer in [1, inf), got 2.5"),
    "train fractional hidden": ([*TRAIN, "--hidden", "1.5"], "hidden must be an integer in [1, inf), got 1.5"),
    "train fractional seed": ([*TRAIN, "--seed", "1.5"], "seed must be an integer in [0, 4294967295], got 1.5"),
    "train seed too large": ([*TRAIN, "--split-seed", "1e10"],
                             "split_seed must lie in [0, 4294967295], got 10000000000"),
    "train momentum": ([*TRAIN, "--momentum", "1"], "momentum must lie in [0.0, 1.0), got 1.0"),
    # budget mixtures: weights in (0, 1] summing to 1
    "shuffle weights below 1": (replace_arg(SHUFFLE, "--budgets", "levels:1@0.5"),
                                "--budgets: levels:E@W,... needs weights W in (0, 1] summing to 1 (within 1e-06), "
                                "got 'levels:1@0.5' (sum 0.5)"),
    "shuffle weights above 1": (replace_arg(SHUFFLE, "--budgets", "levels:1@0.7,2@0.7"),
                                "--budgets: levels:E@W,... needs weights W in (0, 1] summing to 1 …"),
    "shuffle weight above 1": (replace_arg(SHUFFLE, "--budgets", "levels:1@2,2@-1"), "--budgets: levels:E@W,... needs …"),
    "train weights": ([*TRAIN[:1], "--budgets", "levels:1@0.3,3@0.3"],
                      "--budgets: levels:E@W,... needs weights W in (0, 1] summing to 1 …"),
}

@pytest.fixture(scope="module")
def outcome():
    """Every case in one fresh interpreter: name → result, and whether JAX was ever imported."""
    report = run_fresh([argv for argv, _ in CASES.values()])
    return dict(zip(CASES, report["results"])), report["jax_imported"]


@pytest.mark.parametrize("name", list(CASES))
def test_a_broken_rule_is_one_line_and_exit_2(outcome, name):
    result, expected = outcome[0][name], CASES[name][1]
    assert result["code"] == 2, result
    assert result["stdout"] == ""
    err = result["stderr"]
    assert err.endswith("\n") and err.count("\n") == 1, err
    message = err.removeprefix("jaxpriv: error: ").removesuffix("\n")
    if expected.endswith("…"):
        assert message.startswith(expected[:-1]), err
    else:
        assert message == expected, err


def test_rules_are_checked_before_jax_and_at_once(outcome):
    assert outcome[1] is False
    assert max(result["seconds"] for result in outcome[0].values()) < 1.5


# --------------------------------------------------------------------------------------------------
# One table: the same rule and help text for an option everywhere, narrower only where stated
# --------------------------------------------------------------------------------------------------


def _leaf_parsers(parser, path=()):
    """(command path, parser) for every subcommand that runs (calibrate's targets included)."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield path, parser
        return
    for name, child in subs[0].choices.items():
        yield from _leaf_parsers(child, (*path, name))


def _help(*command):
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        build_parser().parse_args([*command, "--help"])
    return " ".join(out.getvalue().split())  # argparse wraps the help text


def test_every_numeric_option_follows_the_shared_table():
    seen = set()
    for path, parser in _leaf_parsers(build_parser()):
        rules = parser.get_default("rules")
        for action in parser._actions:
            if action.dest in RULES and action.option_strings:
                seen.add(action.dest)
                rule = rules[action.dest]  # every numeric option is checked by a rule...
                if rule != RULES[action.dest]:  # ...the shared one, or a narrower copy that says why
                    assert rule.why.startswith(f"narrower than the shared {RULES[action.dest].range}: "), path
                    assert rule._replace(lo=0, hi=0, lo_open=0, hi_open=0, integer=0, why="") == \
                        RULES[action.dest]._replace(lo=0, hi=0, lo_open=0, hi_open=0, integer=0)
                    assert rule.integer >= RULES[action.dest].integer  # an integer rule may narrow a real one
                help_text = " ".join(_help(*path).split())
                assert f"{rule.phrase} in {rule.range}" in help_text, (path, action.dest)
    assert {"q", "sigma", "steps", "delta", "epsilon", "n", "rounds", "dims", "chunk_size", "epochs",
            "batch_size", "seed"} <= seen


def test_epsilon_and_calibrate_state_their_ranges_from_the_table():
    epsilon, calibrate = _help("epsilon"), _help("calibrate", "sigma")
    assert "Poisson sampling rate q in [0.0, 1.0]" in epsilon
    assert "integer number of steps T in [0, inf)" in epsilon
    assert ("Poisson sampling rate q in (0.0, 1.0] (narrower than the shared [0.0, 1.0]: q = 0 spends no privacy, "
            "so there is nothing to calibrate)") in calibrate
    assert "integer number of steps T in [1, inf) (narrower than the shared [0, inf)" in calibrate
    for text in (epsilon, calibrate, _help("sweep")):
        assert "δ in (0.0, 1.0)" in text


def test_reproduce_help_names_itself():
    assert _help("reproduce").startswith("usage: jaxpriv reproduce ")
    assert _help("report").startswith("usage: jaxpriv report ")


# --------------------------------------------------------------------------------------------------
# Integer spellings: the same for every integer option
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("argv, dest, value", [
    (["epsilon", *replace_arg(DPSGD, "--steps", "1e4")], "steps", 10_000),
    (["epsilon", *replace_arg(DPSGD, "--steps", "10_000")], "steps", 10_000),
    (["epsilon", *replace_arg(DPSGD, "--steps", "1e12")], "steps", 10**12),
    (["calibrate", "sigma", "--epsilon", "1", "--q", "0.01", "--steps", "2.5e3", "--delta", "1e-5"], "steps", 2500),
    (replace_arg(SHUFFLE, "--n", "1e7"), "n", 10**7),
    ([*SHUFFLE, "--rounds", "1e1,100", "--dims", "2e0"], "dims", 2),
    ([*SHUFFLE, "--rounds", "1e1,100,1e1"], "rounds", [10, 100, 10]),
    (["sweep", *DPSGD, "--chunk-size", "1e3"], "chunk_size", 1000),
    ([*TRAIN, "--hidden", "3.2e1", "--seed", "7e0"], "hidden", 32),
    (replace_arg(TRAIN, "--epochs", "2.0"), "epochs", 2),
])
def test_integer_options_accept_every_spelling_of_an_integer(argv, dest, value):
    args = build_parser().parse_args(argv)
    assert getattr(args, dest) == value and type(getattr(args, dest)) is type(value)
    for name, rule in args.rules.items():  # the rules pass (the subcommand's own check is not run here)
        if getattr(args, name) is not None:
            rule.check(getattr(args, name))


def test_the_grid_size_accepts_the_same_spellings():
    assert cli.parse_grid("0.1:1:1e1").size == 10
    with pytest.raises(argparse.ArgumentTypeError, match="must be a positive integer, got '2.5'"):
        cli.parse_grid("0.1:1:2.5")


def test_shuffle_rounds_are_sorted_and_unique_after_the_check():
    args = build_parser().parse_args([*SHUFFLE, "--rounds", "100,1e1,10"])
    cli._check_arguments(args)
    assert args.rounds == [10, 100]


def test_budget_weights_summing_to_one_are_accepted():
    from jaxpriv.shuffle.budgets import budgets

    assert budgets("levels:1@0.7,2@0.2,3@0.1", 10).tolist() == [1.0] * 7 + [2.0] * 2 + [3.0]
    assert budgets("levels:0.5@1", 4).tolist() == [0.5] * 4
    with pytest.raises(ValueError, match=r"summing to 1 \(within 1e-06\), got 'levels:1@0.5,2@0.4999' \(sum 0.9999\)"):
        budgets("levels:1@0.5,2@0.4999", 10)


# --------------------------------------------------------------------------------------------------
# Unattainable calibration: exit 1, the table or JSON, and one line on stderr that says why
# --------------------------------------------------------------------------------------------------


def test_unattainable_steps_exit_1_with_the_reason(capsys):
    code, out, err = run(capsys, "calibrate", "steps", "--epsilon", "1", "--q", "0.01", "--sigma", "0.3",
                         "--delta", "1e-5")
    assert code == 1
    assert "unattainable" in out  # the table still lists the target
    assert err.count("\n") == 1 and err.endswith("\n")
    assert re.fullmatch(r"jaxpriv: error: target ε = 1 unattainable with the best accountant: even T = 1 gives "
                        r"ε = [0-9.]+; raise σ or lower q\n", err), err


def test_unattainable_among_attainable_targets_exit_1_in_json(capsys):
    code, out, err = run(capsys, "calibrate", "steps", "--epsilon", "1,100", "--q", "0.01", "--sigma", "0.3",
                         "--delta", "1e-5", "--json")
    assert code == 1
    rows = json.loads(out)
    assert rows[0]["steps"] is None and rows[1]["steps"] >= 1
    assert err.startswith("jaxpriv: error: target ε = 1 unattainable") and err.count("\n") == 1


def test_attainable_targets_exit_0(capsys):
    code, _, err = run(capsys, "calibrate", "steps", "--epsilon", "100", "--q", "0.01", "--sigma", "0.3",
                       "--delta", "1e-5")
    assert code == 0 and err == ""


# --------------------------------------------------------------------------------------------------
# Output: 80 columns when not a terminal, no wrapped rows, no empty header, no rate for one configuration
# --------------------------------------------------------------------------------------------------


def _assert_fits(out):
    width = max(len(line) for line in out.splitlines())
    assert width <= 80, out


@pytest.fixture
def piped(monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)  # capsys's stdout is not a terminal: 80 columns


def test_epsilon_table_fits_80_columns_and_labels_the_clt(capsys, piped):
    code, out, _ = run(capsys, "epsilon", *replace_arg(DPSGD, "--steps", "3"))
    assert code == 0
    _assert_fits(out)
    rows = {line.split("  ")[0].strip(): line for line in out.splitlines()}
    assert "Gaussian DP, CLT (approximation)" in rows and "RDP, improved conversion" in rows  # one line per row
    # 3 steps: the CLT falls far below the certified interval, and the table says so
    text = " ".join(out.split())  # a footnote may wrap
    assert "approximation, not a bound" in text and "below the PLD lower bound: it underestimates ε here" in text


def test_shuffle_tables_fit_80_columns_one_line_per_row(capsys, piped):
    code, out, _ = run(capsys, *SHUFFLE, "--rounds", "1,10,100,1000")
    assert code == 0
    _assert_fits(out)
    code, data, _ = run(capsys, *SHUFFLE, "--json")
    names = [row["name"] for row in json.loads(data)["bounds"]]
    lines = out.splitlines()
    for name in names:  # each row's label and value on one line: no row wraps
        assert any(line.startswith(name + " ") for line in lines), name
    assert "approx." in out  # the kind column, as in the rounds table


def test_calibrate_and_sweep_tables_fit_80_columns(capsys, piped):
    code, out, _ = run(capsys, "calibrate", "sigma", "--epsilon", "1,2", "--q", "0.01", "--steps", "1000",
                       "--delta", "1e-5")
    assert code == 0
    _assert_fits(out)
    code, out, _ = run(capsys, "sweep", *DPSGD)
    assert code == 0
    _assert_fits(out)


def test_sweep_of_one_configuration_has_no_header_and_no_rate(capsys, piped):
    code, out, _ = run(capsys, "sweep", *DPSGD)
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "ε sweep" and "configurations" in lines[2]  # a top rule, then the first row
    assert "configurations/s" not in out and "median" not in out
    assert any(line.split("│")[1].strip() == "ε" for line in lines if line.count("│") == 3)
    code, out, _ = run(capsys, "sweep", *replace_arg(DPSGD, "--q", "0.01,0.02"))
    assert "configurations/s" in out and "median ε" in out


def test_a_wide_table_keeps_its_rows_on_one_line():
    from rich.console import Console

    header, rows = ["name", "value", "note"], [["row " + "x" * 30, "1.5", "a long note " * 6], ["short", "2", ""]]
    for width, layout in ((200, "┃"), (80, "───")):
        console = Console(width=width, file=io.StringIO(), highlight=False)
        console.print(cli._table("title", header, rows))
        text = console.file.getvalue()
        assert layout in text and max(map(len, text.splitlines())) <= width
        assert any(line.startswith(("row ", "┃ row", "│ row")) and "1.5" in line for line in text.splitlines())
    assert "[1] a long note" in text  # at 80 columns the note became a footnote
