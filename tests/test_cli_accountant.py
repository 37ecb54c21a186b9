"""``--accountant {best,pld,rdp}`` of ``jaxpriv epsilon``, ``calibrate`` and ``sweep``.

Small settings (T = 1000 steps) keep the PLD accountant at a few seconds per setting on a CPU.
"""

import csv
import json

import numpy as np
import pytest

import jaxpriv
from jaxpriv import accounting, events
from jaxpriv.cli import main

SMALL = ["--q", "0.01", "--sigma", "1.1", "--steps", "1000", "--delta", "1e-5"]


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def dpsgd(q, sigma, steps):
    return events.SelfComposed(events.PoissonSampled(q, events.Gaussian(sigma)), steps)


# --------------------------------------------------------------------------------------------------
# epsilon
# --------------------------------------------------------------------------------------------------


def test_epsilon_json_every_accountant(capsys):
    results = {}
    for name in ("rdp", "pld", "best"):
        code, out, _ = run(capsys, "epsilon", *SMALL, "--accountant", name, "--json")
        assert code == 0
        results[name] = data = json.loads(out)
        assert data["accountant"] == name
        assert data["epsilon_gdp_clt_approximation"] > 0
    rdp = float(jaxpriv.dpsgd_epsilon(0.01, 1.1, 1000, 1e-5))
    for name in ("rdp", "best"):
        assert results[name]["epsilon_rdp"] == rdp
    for name in ("pld", "best"):
        assert 0 < results[name]["epsilon_pld_lower"] <= results[name]["epsilon_pld_upper"] < rdp
    # the accountant chosen is the only one computed: the other's entries are None
    assert results["rdp"]["epsilon_pld_lower"] is None and results["rdp"]["epsilon_pld_upper"] is None
    assert results["pld"]["epsilon_rdp"] is None and results["pld"]["epsilon_classic"] is None
    assert results["rdp"]["epsilon"] == results["rdp"]["epsilon_rdp"]
    assert results["pld"]["epsilon"] == results["pld"]["epsilon_pld_upper"]
    assert results["best"]["epsilon"] == min(results["best"]["epsilon_rdp"], results["best"]["epsilon_pld_upper"])
    # the interval is the library's certified PLD interval
    lower, upper = accounting.epsilon_interval(dpsgd(0.01, 1.1, 1000), 1e-5)
    assert results["pld"]["epsilon_pld_lower"] == float(lower) and results["pld"]["epsilon_pld_upper"] == float(upper)


@pytest.mark.parametrize("name, skipped", [("rdp", "epsilon_interval"), ("pld", "dpsgd_epsilon")])
def test_epsilon_computes_only_the_accountant_chosen(capsys, monkeypatch, name, skipped):
    import jaxpriv.report

    def fail(*args, **kwargs):
        raise AssertionError(f"--accountant {name} computed {skipped}")

    target = jaxpriv.report.accounting if skipped == "epsilon_interval" else jaxpriv.report
    monkeypatch.setattr(target, skipped, fail)
    code, out, err = run(capsys, "epsilon", *SMALL, "--accountant", name)
    assert code == 0, err
    assert "not computed: --accountant best computes both" in out


def test_epsilon_table_shows_rdp_pld_and_clt(capsys):
    code, out, _ = run(capsys, "epsilon", *SMALL)
    assert code == 0
    assert "RDP, improved conversion" in out and "PLD [lower, upper]" in out and "Gaussian DP, CLT" in out
    assert "approximation, not a bound" in out
    assert "accountant best" in out  # which value is reported as ε
    first = out.splitlines()[0]
    # the PLD upper bound (1.516 here), smaller than RDP's 1.712 here: printed to six digits
    pld_upper = float(accounting.epsilon_interval(dpsgd(0.01, 1.1, 1000), 1e-5)[1])
    rdp = float(jaxpriv.dpsgd_epsilon(0.01, 1.1, 1000, 1e-5))
    assert 1.51 < pld_upper < rdp and round(rdp, 3) == 1.712
    assert first.startswith(f"ε = {pld_upper:.6g}")


@pytest.mark.parametrize("accountant", ["best", "rdp", "pld"])
def test_epsilon_fractional_steps_are_a_bad_argument(capsys, accountant):
    # The command line counts steps in integers, whatever the accountant (an RDP ε of 2.5 steps beside a CLT
    # value and no PLD interval was a silent trap); the library's RDP functions still take real-valued counts.
    code, out, err = run(capsys, "epsilon", "--q", "0.01", "--sigma", "1.1", "--steps", "1000.5", "--delta", "1e-5",
                         "--accountant", accountant, "--json")
    assert code == 2 and out == ""
    assert err == "jaxpriv: error: steps must be an integer in [0, inf), got 1000.5\n"


def test_library_rdp_still_takes_a_real_number_of_steps():
    from jaxpriv.report import privacy_summary

    summary = privacy_summary(0.01, 1.1, 1000.5, 1e-5)  # RDP composes a real count; the PLD needs an integer T
    assert summary["epsilon_pld_lower"] is None and summary["epsilon"] == summary["epsilon_rdp"]
    with pytest.raises(ValueError, match="the PLD accountant needs an integer"):
        privacy_summary(0.01, 1.1, 1000.5, 1e-5, accountant="pld")


# --------------------------------------------------------------------------------------------------
# calibrate
# --------------------------------------------------------------------------------------------------


def _calibrate(capsys, target, *argv):
    code, out, _ = run(capsys, "calibrate", target, *argv, "--json")
    assert code == 0
    (row,) = json.loads(out)
    return row


def test_calibrate_sigma_by_pld_and_best(capsys):
    given = ["--epsilon", "2", "--q", "0.01", "--steps", "1000", "--delta", "1e-5"]
    rows = {name: _calibrate(capsys, "sigma", *given, "--accountant", name) for name in ("rdp", "pld", "best")}
    for name, row in rows.items():
        assert row["accountant"] == name and row["achieved_epsilon"] <= 2.0
    assert rows["pld"]["sigma"] < rows["rdp"]["sigma"]  # the tighter accountant needs less noise
    assert rows["best"]["sigma"] == pytest.approx(rows["pld"]["sigma"], rel=1e-5)
    assert _calibrate(capsys, "sigma", *given) == rows["best"]  # best is the default, as in epsilon
    event = dpsgd(0.01, rows["pld"]["sigma"], 1000)
    assert rows["pld"]["achieved_epsilon"] == float(accounting.epsilon(event, 1e-5, accountant="pld"))


def test_calibrate_q_and_steps_by_pld(capsys):
    row = _calibrate(capsys, "q", "--epsilon", "2", "--sigma", "1.1", "--steps", "1000", "--delta", "1e-5",
                     "--accountant", "pld")
    assert row["achieved_epsilon"] <= 2.0 and row["q"] > 0.01  # ε(q = 0.01) ≈ 1.52 < 2
    row = _calibrate(capsys, "steps", "--epsilon", "1.6", "--q", "0.01", "--sigma", "1.1", "--delta", "1e-5",
                     "--accountant", "pld")
    assert row["achieved_epsilon"] <= 1.6 and row["steps"] == int(row["steps"]) > 1000


def test_calibrate_table_names_the_accountant(capsys):
    code, out, _ = run(capsys, "calibrate", "sigma", "--epsilon", "2", "--q", "0.01", "--steps", "1000",
                       "--delta", "1e-5", "--accountant", "pld")
    assert code == 0 and "(pld accountant)" in out and "yes" in out


# --------------------------------------------------------------------------------------------------
# sweep
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["pld", "best"])
def test_sweep_by_pld_and_best(tmp_path, capsys, name):
    q, sigma = np.array([0.005, 0.01]), np.array([0.9, 1.1])
    code, out, _ = run(capsys, "sweep", "--q", "0.005,0.01", "--sigma", "0.9,1.1", "--steps", "1000",
                       "--delta", "1e-5", "--accountant", name, "--out", str(tmp_path))
    assert code == 0 and name in out
    pld = accounting.epsilon(dpsgd(q[:, None], sigma[None, :], 1000), 1e-5, accountant="pld").ravel()
    rdp = np.asarray(jaxpriv.dpsgd_epsilon(q[:, None], sigma[None, :], 1000, 1e-5)).ravel()
    with open(tmp_path / "sweep.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    eps = np.array([float(r["epsilon"]) for r in rows])
    np.testing.assert_array_equal(eps, pld if name == "pld" else np.minimum(rdp, pld))
    assert np.all(eps < rdp)  # PLD is tighter in all four settings: no Rényi order is reported
    assert all(r["best_order"] == "nan" for r in rows)
    document = json.loads((tmp_path / "sweep.json").read_text())
    assert document["accountant"] == name and document["results"][0]["best_order"] is None
    assert (tmp_path / "epsilon_grid.png").read_bytes()[:4] == b"\x89PNG"


# --------------------------------------------------------------------------------------------------
# arguments and help
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("command", [["epsilon", *SMALL], ["calibrate", "sigma", "--epsilon", "1", *SMALL[:2],
                                                             *SMALL[4:]], ["sweep", *SMALL]])
def test_bad_accountant_exits_2(capsys, command):
    code, out, err = run(capsys, *command, "--accountant", "exact")
    assert code == 2 and out == ""
    (line,) = [line for line in err.splitlines() if "error:" in line]
    assert line.endswith("argument --accountant: invalid choice: 'exact' (choose from 'best', 'pld', 'rdp')")


@pytest.mark.parametrize("command, default", [(["epsilon"], "best"), (["calibrate", "sigma"], "best"),
                                              (["sweep"], "rdp")])
def test_accountant_help_states_the_default(capsys, command, default):
    code, out, _ = run(capsys, *command, "--help")
    assert code == 0
    text = " ".join(out.split())  # argparse wraps the help text
    assert "--accountant {best,pld,rdp}" in text and f"(default: {default};" in text
