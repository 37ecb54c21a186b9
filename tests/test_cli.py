"""The ``jaxpriv`` command line, run in-process through ``main(argv)``.

Kernel compilation dominates the run time, so the tests reuse the same shapes: single configurations
(batch 1) for ``epsilon``/``calibrate``, and a sweep of more than 16 configurations so that it shares
the 256-wide batch of ``report --quick``'s sweep.
"""

import csv
import json
import math
import subprocess
import sys

import numpy as np
import pytest

import jaxpriv
from jaxpriv.cli import build_parser, cmd_report, main, parse_grid
from cli_helpers import replace_arg, run

REFERENCE = ["--q", "0.01", "--sigma", "1.1", "--steps", "10000", "--delta", "1e-5"]


# --------------------------------------------------------------------------------------------------
# epsilon
# --------------------------------------------------------------------------------------------------


def test_epsilon_table(capsys):
    code, out, _ = run(capsys, "epsilon", *REFERENCE)
    assert code == 0
    assert "5.63" in out
    assert "classic" in out and "approximation" in out


def test_epsilon_json(capsys):
    code, out, _ = run(capsys, "epsilon", *REFERENCE, "--json")
    assert code == 0
    data = json.loads(out)
    assert data["epsilon_rdp"] == pytest.approx(5.632, abs=5e-4)
    assert data["epsilon_rdp"] <= 5.632010670  # MATH §1.8: exact RDP is never above dp_accounting's value
    assert data["epsilon_rdp"] == float(jaxpriv.dpsgd_epsilon(0.01, 1.1, 10_000, 1e-5))
    assert data["epsilon_classic"] > data["epsilon_rdp"]  # the classic conversion is looser
    # the default accountant "best" reports the smaller upper bound: here the PLD's
    assert data["accountant"] == "best" and data["epsilon"] == data["epsilon_pld_upper"] < data["epsilon_rdp"]
    assert data["gdp_clt_mu_approximation"] > 0 and data["epsilon_gdp_clt_approximation"] > 0
    assert data["best_order"] > 1


def test_epsilon_without_sampling_is_zero(capsys):
    # q = 0 gives μ = 0 in the CLT approximation, which gdp_epsilon alone would reject
    code, out, _ = run(capsys, "epsilon", *replace_arg(REFERENCE, "--q", "0"), "--json")
    assert code == 0
    data = json.loads(out)
    assert data["epsilon"] == data["epsilon_classic"] == data["epsilon_gdp_clt_approximation"] == 0.0
    assert data["epsilon_pld_lower"] == data["epsilon_pld_upper"] == 0.0


def test_epsilon_with_a_tiny_sigma_has_no_clt_approximation_but_its_bounds(capsys):
    # σ = 0.02: the CLT's μ overflows; the rigorous rows are still computed (the command used to fail with
    # "mu contains inf", a parameter the user never gave), and the JSON stays strict (no Infinity)
    args = replace_arg(REFERENCE, "--sigma", "0.02") + ["--accountant", "rdp"]
    code, out, err = run(capsys, "epsilon", *args, "--json")
    assert code == 0, err
    data = json.loads(out, parse_constant=lambda name: pytest.fail(f"{name} in the JSON output"))
    assert data["gdp_clt_mu_approximation"] is None and data["epsilon_gdp_clt_approximation"] is None
    assert math.isfinite(data["epsilon_rdp"]) and data["epsilon"] == data["epsilon_rdp"] > 0
    code, out, _ = run(capsys, "epsilon", *args)
    assert code == 0
    assert "inf" in next(line for line in out.splitlines() if line.startswith("Gaussian DP, CLT"))


# --------------------------------------------------------------------------------------------------
# calibrate
# --------------------------------------------------------------------------------------------------

CALIBRATE_SIGMA = ["calibrate", "sigma", "--epsilon", "1", "--q", "0.01", "--steps", "1e4", "--delta", "1e-5",
                   "--accountant", "rdp"]  # the RDP value (4.1258); the default, best, is tested in test_cli_accountant


def test_calibrate_sigma_table(capsys):
    code, out, _ = run(capsys, *CALIBRATE_SIGMA)
    assert code == 0
    assert "4.1258" in out
    assert "yes" in out  # achieved ε ≤ target


def test_calibrate_sigma_json(capsys):
    code, out, _ = run(capsys, *CALIBRATE_SIGMA, "--json")
    assert code == 0
    (row,) = json.loads(out)
    assert row["sigma"] == pytest.approx(4.1258, abs=1e-4)
    assert row["achieved_epsilon"] <= 1.0
    assert row["achieved_epsilon"] == pytest.approx(1.0, rel=1e-6)


def test_calibrate_steps(capsys):
    argv = ["calibrate", "steps", "--epsilon", "3", "--q", "0.01", "--sigma", "1.1", "--delta", "1e-5", "--json"]
    code, out, _ = run(capsys, *argv)
    assert code == 0
    (row,) = json.loads(out)
    assert row["steps"] == float(int(row["steps"])) and row["steps"] > 1000
    assert row["achieved_epsilon"] <= 3.0
    # one more step would exceed the budget: the answer is the largest T
    assert float(jaxpriv.dpsgd_epsilon(0.01, 1.1, row["steps"] + 1, 1e-5)) > 3.0


# --------------------------------------------------------------------------------------------------
# sweep
# --------------------------------------------------------------------------------------------------


def test_sweep_writes_csv_json_png(tmp_path, capsys):
    q, sigma = np.geomspace(1e-3, 0.1, 4), np.linspace(0.8, 2.0, 5)
    argv = ["sweep", "--q", "1e-3:0.1:4:log", "--sigma", "0.8:2:5", "--steps", "14063", "--delta", "1e-5",
            "--out", str(tmp_path)]
    code, out, _ = run(capsys, *argv)
    assert code == 0
    assert "median ε" in out and "configurations/s" in out

    expected = np.asarray(jaxpriv.dpsgd_epsilon(q[:, None], sigma[None, :], 14063, 1e-5)).ravel()
    with open(tmp_path / "sweep.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == q.size * sigma.size
    assert list(rows[0]) == ["q", "sigma", "steps", "delta", "epsilon", "best_order"]
    np.testing.assert_array_equal([float(r["epsilon"]) for r in rows], expected)  # q varies slowest
    np.testing.assert_array_equal([float(r["q"]) for r in rows], np.repeat(q, sigma.size))

    document = json.loads((tmp_path / "sweep.json").read_text())
    assert len(document["results"]) == q.size * sigma.size
    np.testing.assert_array_equal([r["epsilon"] for r in document["results"]], expected)
    np.testing.assert_array_equal(document["grid"]["sigma"], sigma)

    assert (tmp_path / "epsilon_grid.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_sweep_plot_needs_a_2d_slice(tmp_path, capsys):
    argv = ["sweep", "--q", "0.01", "--sigma", "1,2", "--steps", "100", "--delta", "1e-5",
            "--plot", str(tmp_path / "p.png")]
    code, _, err = run(capsys, *argv)
    assert code == 2 and "--plot" in err and "--q" in err


# --------------------------------------------------------------------------------------------------
# report
# --------------------------------------------------------------------------------------------------


def test_report_quick(tmp_path, capsys):
    code, out, _ = run(capsys, "report", "--quick", "--out", str(tmp_path), "--systems", "none")
    assert code == 0 and not (tmp_path / "systems.md").exists()
    text = (tmp_path / "report.md").read_text()
    for heading in ("## Privacy guarantee", "## Noise needed for a target ε", "## Training length affordable"):
        assert heading in text
    assert "approximation" in text and "14,063 steps" in text
    assert "ε, PLD accountant | [2.37" in text and "PLD [lower, upper]" in out  # the certified interval
    for name in ("epsilon_grid.png", "sigma_vs_epsilon.png"):
        assert (tmp_path / name).read_bytes()[:4] == b"\x89PNG"
        assert name in text and name in out


def test_reproduce_is_an_alias_of_report():
    args = build_parser().parse_args(["reproduce", "--quick", "--out", "x"])
    assert args.handler is cmd_report and args.quick and args.out == "x" and args.systems == "all"


def test_reproduce_writes_a_seed_system_section(tmp_path, capsys):
    code, out, _ = run(capsys, "reproduce", "--quick", "--out", str(tmp_path), "--systems", "apes")
    assert code == 0 and "systems.md" in out
    text = (tmp_path / "systems.md").read_text()
    assert "**Paper:**" in text and "**Ours:**" in text and "**Why they differ:**" in text
    for line in text.splitlines():  # every figure the report links exists
        if line.startswith("!["):
            assert (tmp_path / line.split("](")[1].rstrip(")")).read_bytes()[:4] == b"\x89PNG"


def test_reproduce_rejects_an_unknown_system(capsys):
    code, _, err = run(capsys, "reproduce", "--quick", "--systems", "apes,dpsgd")
    assert code == 2 and "systems must be" in err and "'dpsgd'" in err


# --------------------------------------------------------------------------------------------------
# errors and help
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["epsilon", *replace_arg(REFERENCE, "--q", "2")], "q must lie in [0.0, 1.0]"),
        (["epsilon", *replace_arg(REFERENCE, "--sigma", "-1")], "sigma must lie in (0.0, inf"),
        (["epsilon", *replace_arg(REFERENCE, "--delta", "0")], "delta must lie in (0.0, 1.0)"),
        (["epsilon", *replace_arg(REFERENCE, "--steps", "nan")], "steps contains NaN"),
        (["epsilon", *replace_arg(REFERENCE, "--q", "abc")], "argument --q: not a number: 'abc'"),
        (["epsilon", *REFERENCE, "--orders", "mine"], "argument --orders: invalid choice: 'mine'"),
        (["epsilon", *REFERENCE[:-2]], "the following arguments are required: --delta"),
        (["sweep", *replace_arg(REFERENCE, "--q", "1:2")], "argument --q: malformed grid '1:2'"),
        (["sweep", *replace_arg(REFERENCE, "--q", "0.1:2:3")], "q must lie in [0.0, 1.0]"),
        (["sweep", *replace_arg(REFERENCE, "--sigma", "0:2:3:log")], "argument --sigma: a log grid needs START > 0"),
        (["sweep", *REFERENCE, "--chunk-size", "0"], "chunk_size must lie in [1, inf), got 0"),
        (["calibrate", "sigma", "--epsilon", "0", *REFERENCE[:2], *REFERENCE[4:]], "epsilon must lie in"),
        (["calibrate", "sigma", "--epsilon", "1", *REFERENCE[4:]], "the following arguments are required: --q"),
        (["calibrate", "noise", "--epsilon", "1"], "argument {sigma,q,steps}: invalid choice: 'noise'"),
        ([], "the following arguments are required: COMMAND"),
    ],
)
def test_bad_arguments_exit_2_with_a_message(capsys, argv, expected):
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert expected in err
    assert out == ""


def test_library_errors_are_one_line(capsys):
    code, _, err = run(capsys, "epsilon", *replace_arg(REFERENCE, "--q", "2"))
    assert code == 2
    assert err.startswith("jaxpriv: error: q must lie in") and err.count("\n") == 1


@pytest.mark.parametrize("command", [["epsilon"], ["calibrate", "sigma"], ["sweep"], ["report"]])
def test_subcommand_help_has_an_example(capsys, command):
    code, out, _ = run(capsys, *command, "--help")
    assert code == 0
    assert "example:" in out and "jaxpriv " + command[0] in out


def test_parse_grid():
    np.testing.assert_allclose(parse_grid("1e-3:0.1:3:log"), [1e-3, 1e-2, 1e-1])
    np.testing.assert_allclose(parse_grid("0.5:1.5:3"), [0.5, 1.0, 1.5])
    np.testing.assert_allclose(parse_grid("0.5:1.5:3:lin"), [0.5, 1.0, 1.5])
    np.testing.assert_array_equal(parse_grid("1,2,4"), [1.0, 2.0, 4.0])
    np.testing.assert_array_equal(parse_grid("7"), [7.0])


def test_python_m_jaxpriv_help():
    result = subprocess.run([sys.executable, "-m", "jaxpriv", "--help"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    for command in ("epsilon", "calibrate", "sweep", "report"):
        assert command in result.stdout


def test_epsilon_refine_is_never_worse(capsys):
    assert main(["epsilon", "--q", "0.01", "--sigma", "1.1", "--steps", "10000", "--delta", "1e-5", "--json"]) == 0
    grid = json.loads(capsys.readouterr().out)
    assert main(["epsilon", "--q", "0.01", "--sigma", "1.1", "--steps", "10000", "--delta", "1e-5", "--json",
                 "--refine"]) == 0
    refined = json.loads(capsys.readouterr().out)
    assert refined["epsilon_rdp"] < grid["epsilon_rdp"] and refined["best_order"] != grid["best_order"]


def test_shuffle_json_reproduces_unis(capsys):
    # no --out: the figures' ε-versus-n curve (12 sizes up to 10n) would cost 4x the table; the figures are
    # checked at n = 500 below
    assert main(["shuffle", "--budgets", "uniform:0.05,1", "--n", "10000", "--delta", "1e-8", "--json"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)["bounds"]}
    # the APES paper's "UniS" 0.069 is the exact clone sum at the largest budget (ε₀ ≈ 1)
    assert rows["clones (FMT22), exact numeric, ε₀ = max"]["epsilon"] == pytest.approx(0.06888, abs=2e-4)
    assert rows["FMT22 closed form (UniS, APES Eq. 2)"]["epsilon"] == pytest.approx(0.2408, abs=1e-3)
    # ...and its "APES" 0.057 is the same exact sum with the echo probabilities as clone probabilities
    assert rows["personalized, APES/EoN model, exact numeric"]["epsilon"] == pytest.approx(0.057, abs=5e-4)
    assert rows["Erlingsson et al. 2019"]["epsilon"] is None  # outside its validity (ε₀ ≤ ½): inf → null
    # the Girgis RDP bound holds for every ε₀-LDP randomizer, so it cannot beat the exact strong clones
    girgis = rows["Girgis et al. RDP (Theorem 1)"]["epsilon"]
    assert girgis >= rows["strong clones, exact numeric, ε₀ = max"]["epsilon"]


def test_shuffle_rounds_json_and_figures(capsys, tmp_path):
    out = tmp_path / "rounds"
    assert main(["shuffle", "--budgets", "uniform:0.5,1", "--n", "100", "--delta", "1e-6", "--rounds", "10,1",
                 "--dims", "2", "--json", "--out", str(out)]) == 0
    report = json.loads(capsys.readouterr().out)["rounds"]
    assert report["rounds"] == [1, 10] and report["dims"] == 2
    methods = {m["name"]: m["epsilon"] for m in report["methods"]}
    exact = methods["exact pair by PLD, APES"]
    assert exact[0] < exact[1] < methods["Girgis RDP, ε₀ = max"][1]
    for figure in ("epsilon_vs_rounds.png", "epsilon_vs_n.png", "budgets.png"):
        assert (out / figure).stat().st_size > 0, figure


def test_shuffle_bad_budgets_exit_2(capsys):
    assert main(["shuffle", "--budgets", "beta:1,2", "--n", "100", "--delta", "1e-8"]) == 2
    assert "budgets spec" in capsys.readouterr().err
    assert main(["shuffle", "--budgets", "uniform:0.1,1", "--n", "100", "--delta", "2"]) == 2
    assert "delta" in capsys.readouterr().err
