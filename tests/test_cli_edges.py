"""The command line at its edges (issue 34) where the answer needs a computation: calibration targets the
chosen accountant cannot certify. Argument and output-path errors, which need none, are in
``test_cli_early_errors.py``. RDP only, on the settings the other CLI tests already compile (q = 0.01,
T = 1000, δ = 1e-5, the default orders)."""

import json

from cli_helpers import run

SIGMA = ["calibrate", "sigma", "--q", "0.01", "--steps", "1000", "--delta", "1e-5", "--accountant", "rdp"]


def test_targets_rdp_meets_only_by_epsilon_zero_are_not_certified(capsys):
    # Below the RDP conversion's floor the only certificate is ε = 0 (δ above the total variation), at one σ
    # (22,472 here) whatever the target: that σ answers δ, not the target, so it is not printed as one.
    code, out, err = run(capsys, *SIGMA, "--epsilon", "1e-6,1e-3,1")
    assert code == 1
    assert out.count("not certified") == 2 and "22472" not in out and "1.51312" in out  # the reachable one stays
    assert err.count("\n") == 1 and err.endswith("\n") and "Traceback" not in err
    assert err.startswith("jaxpriv: error: targets ε = 1e-06, 0.001 cannot be certified by the rdp accountant")
    assert "only ε = 0 (the (0, δ) bound) at σ = 22472.5" in err and "--accountant pld" in err


def test_not_certified_targets_in_json(capsys):
    code, out, err = run(capsys, *SIGMA, "--epsilon", "1e-3,1", "--json")
    assert code == 1 and err.count("\n") == 1 and "--accountant pld" in err
    rows = json.loads(out)
    assert rows[0]["sigma"] is None and rows[0]["achieved_epsilon"] is None
    assert rows[1]["achieved_epsilon"] <= 1.0 and rows[1]["sigma"] > 1


def test_sampling_rate_target_rdp_meets_only_by_epsilon_zero(capsys):
    code, out, err = run(capsys, "calibrate", "q", "--epsilon", "1e-6", "--sigma", "1", "--steps", "1000",
                         "--delta", "1e-5", "--accountant", "rdp")
    assert code == 1 and "not certified" in out and err.count("\n") == 1
    assert err.startswith("jaxpriv: error: target ε = 1e-06 cannot be certified by the rdp accountant")
    assert "at q = " in err and "--accountant pld" in err
