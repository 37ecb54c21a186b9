"""White-box canaries in one run of the DP-SGD trainer (jaxpriv.audit.training) and ``jaxpriv audit``.

The correct trainer's audited lower bounds stay below its claim (and the f-DP test of its own claim does not
reject it); each planted fault of ``audit_faults.py``
(noise × ½, the noise scaled by a wrong sensitivity, clipping skipped for one example of every batch, the
clipped norm's float32 rounding error amplified) is caught: its audited bound exceeds the claim, at the
stated canary count, 95% confidence and seed 0. All runs share the settings of their regime, so the step
program compiles once per regime (the clipping faults compile their own)."""

import json

import numpy as np
import pytest

from audit_faults import FAULTS, planted
from jaxpriv.audit import training

#: full batch (q = 1: the run is exactly √T/σ-GDP), T = 4 steps, 2000 gradient and 100 input canaries, claimed
#: ε = 2 (δ = 1e-5); one guess candidate fixed in advance: the 5% highest and the 5% lowest scores
FULL_BATCH = dict(epsilon=2.0, canaries=2000, input_canaries=100, epochs=4, batch_size=None, seed=0,
                  guesses=[(0.05, 0.05)])
#: Poisson sampling at q ≈ 0.01 (T = 384 steps) for the fault that hits the first example of each batch: the
#: canaries come first, so about a hundred of them are some batch's first example; guesses: the top 10%
POISSON = dict(epsilon=2.0, canaries=1000, epochs=4, batch_size=20.0, seed=0, guesses=[(0.1, 0.0)])
FAULT_SETTINGS = {"half_noise": FULL_BATCH, "wrong_sensitivity": FULL_BATCH, "rounding_amplified": FULL_BATCH,
                  "skip_clip": POISSON}


@pytest.fixture(scope="module")
def digits():
    from jaxpriv.train import data

    return data.load("digits", seed=0)


def _caught(audit) -> bool:
    """The audit's bound exceeds the claim: the (ε, δ) bound always; the GDP bound where the claim is GDP."""
    gdp = audit.gdp_epsilon_lower if audit.claimed_mu is not None else 0.0
    return max(audit.epsilon_lower, gdp) > audit.claimed_epsilon


def _claim_rejected(audit) -> bool:
    """The f-DP one-run test of the trainer's own claim (its privacy profile) rejects it at 95%, and the
    DP-SGD family's bound puts the run's noise multiplier below the one it claims."""
    return audit.claim_p_value <= 0.05 and all(k.noise.sigma <= audit.plan_sigma for k in audit.kinds
                                               if k.kind == "gradient")


@pytest.mark.parametrize("settings", [FULL_BATCH, POISSON], ids=["full-batch", "poisson"])
def test_the_correct_trainer_audits_below_its_claim(digits, settings):
    audit = training.audit_training(digits, **settings)
    assert audit.claimed_epsilon <= settings["epsilon"]
    assert audit.epsilon_lower <= audit.claimed_epsilon
    if audit.claimed_mu is not None:
        assert all(k.gdp.mu <= audit.claimed_mu for k in audit.kinds)
        assert audit.gdp_epsilon_lower <= audit.claimed_epsilon
    assert not _caught(audit)
    # the f-DP test of the trainer's own claim (its accountant's privacy profile) does not reject it, and the
    # noise-multiplier bound stays above the run's σ (the family's ε below the claim)
    assert audit.claim_p_value > 0.05 and not _claim_rejected(audit)
    for k in audit.kinds:
        assert not k.claim.rejected and k.noise.sigma > audit.plan_sigma
        assert k.noise.epsilon <= audit.claimed_epsilon
    if audit.claimed_mu is not None:  # q = 1: the family is μ-GDP, so its bound is the GDP bound's μ
        mu = np.sqrt(audit.result.steps) / audit.kind("gradient").noise.sigma
        assert abs(mu - audit.kind("gradient").gdp.mu) <= 0.03 * audit.kind("gradient").gdp.mu + 0.005
    # the canaries carry signal: inserted ones score higher on average
    k = audit.kind("gradient")
    assert k.scores[k.inserted].mean() > k.scores[~k.inserted].mean()
    if settings.get("input_canaries"):  # input canaries: scored by −loss, bounded like the others
        k = audit.kind("input")
        assert k.scores.shape == (settings["input_canaries"],) and (k.scores <= 0).all()
        assert k.steinke.epsilon <= audit.claimed_epsilon and k.gdp.mu <= audit.claimed_mu


@pytest.mark.parametrize("fault", FAULTS)
def test_each_planted_fault_is_caught(digits, fault):
    with planted(fault):
        audit = training.audit_training(digits, **FAULT_SETTINGS[fault])
    assert _caught(audit), (fault, audit.claimed_epsilon, audit.epsilon_lower, audit.gdp_epsilon_lower)
    # the f-DP test of the trainer's own claim rejects it too (p = 0.0026 for the three full-batch faults,
    # 1e-7 for skip_clip), and the noise-multiplier bound falls below the run's σ
    assert _claim_rejected(audit), (fault, audit.claim_p_value, [k.noise.sigma for k in audit.kinds], audit.plan_sigma)


def test_canaries_are_inserted_with_probability_half_and_first():
    x, y = np.ones((50, 3), np.float32), np.arange(50) % 5
    c = training.make_canaries(x, y, x, y, 5, canaries=4000, input_canaries=30, dirac_norm=7.0, seed=3)
    assert abs(c.gradient_inserted.mean() - 0.5) < 0.03
    g = int(c.gradient_inserted.sum())
    assert (c.x[:g, 3] == 7.0).all() and (c.x[:g, 4] == np.flatnonzero(c.gradient_inserted)).all()
    assert (c.x[g:, 3] == 0).all()
    assert (c.input_y != y[np.arange(30) % 50]).all()  # every input canary is mislabelled


@pytest.mark.parametrize("kwargs, message", [
    (dict(canaries=1), r"canaries must be 0 or an integer in \[2, inf\)"),
    (dict(canaries=0, input_canaries=1), r"input_canaries must be 0 or an integer in \[2, inf\)"),
    (dict(canaries=0, input_canaries=0), "both 0"),
    (dict(canaries=2.5), r"canaries must be an integer in \[0, inf\)"),
    (dict(confidence=1.0), r"confidence must lie in \(0.0, 1.0\)"),
    (dict(dirac_norm=0.0), r"dirac_norm must lie in \(0.0, inf\)"),
    (dict(lr=-1.0), r"lr must lie in \(0.0, inf\)"),
    (dict(hidden=0), r"hidden must be an integer in \[1, inf\)"),
    (dict(seed=-1), r"seed must be an integer in \[0, inf\)"),
    (dict(epochs=0), "epochs must lie in"),
    (dict(fdp_claim=1), "fdp_claim must be True or False"),
    (dict(delta=1.0), "delta must lie in"),
    (dict(epsilon=-1.0), "epsilon must lie in"),
    (dict(guesses=[(0.6, 0.6)]), r"f_in \+ f_out ≤ 1"),
    (dict(guesses=[(0.1,)]), "sequence of \\(f_in, f_out\\) fractions"),
    (dict(guesses=5), "guesses must be None or a sequence"),
])
def test_bad_arguments_raise_value_errors(digits, kwargs, message):
    with pytest.raises(ValueError, match=message):
        training.audit_training(digits, **{"epsilon": 1.0, **kwargs})


def test_bad_data_raises():
    with pytest.raises(ValueError, match="data must be a jaxpriv.train.data.Dataset"):
        training.audit_training(np.zeros(3), epsilon=1.0)


# --------------------------------------------------------------------------------------------------
# The command line
# --------------------------------------------------------------------------------------------------


def test_cli_audit_prints_claim_bounds_and_gap_and_writes_the_figure(tmp_path, capsys):
    from jaxpriv import cli

    # the settings of FULL_BATCH (the same compiled step), with the default guesses
    code = cli.main(["audit", "--dataset", "digits", "--epsilon", "2", "--canaries", "2000",
                     "--input-canaries", "100", "--epochs", "4", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "claimed ε =" in out and "audited lower bound ε ≥" in out and "gap to the claim" in out
    assert "f-DP one-run test of the claim" in out and "consistent with it" in out
    assert (tmp_path / "audit.png").stat().st_size > 0
    summary = json.loads((tmp_path / "audit.json").read_text())
    assert summary["epsilon_lower"] <= summary["claimed_epsilon"]
    assert [k["kind"] for k in summary["kinds"]] == ["gradient", "input"]


@pytest.mark.parametrize("argv, message", [
    (["--epsilon", "8", "--canaries", "1"], "canaries must lie in [2.0, inf), got 1.0"),
    (["--epsilon", "8", "--canaries", "2.5"], "canaries must be an integer, got 2.5"),
    (["--epsilon", "8", "--input-canaries", "1"], "input_canaries must lie in [2.0, inf), got 1.0"),
    (["--epsilon", "8", "--confidence", "1"], "confidence must lie in (0.0, 1.0), got 1.0"),
    (["--epsilon", "0"], "epsilon must lie in (0.0, inf), got 0.0"),
    (["--epsilon", "8", "--epochs", "1.5"], "epochs must be an integer, got 1.5"),
])
def test_cli_audit_bad_arguments_exit_2(capsys, argv, message):
    from jaxpriv import cli

    code = cli.main(["audit", *argv])
    err = capsys.readouterr().err
    assert code == 2 and err.strip() == f"jaxpriv: error: {message}"
