"""One home per event type: a new type declared in this file alone is accepted by the RDP and PLD
accountants, ``calibrate``, the range checks and the dp_accounting conversion, with no library file
touched (jaxpriv.events.base says what a type declares).

The toy type is a Gaussian mechanism on a query of sensitivity Δ ≠ 1: its noise std s gives the noise
multiplier σ = s/Δ, so every answer must equal the library's ``Gaussian(s/Δ)``'s.
"""

from typing import Any

import numpy as np
import pytest

from jaxpriv import _tiers, accounting, calibrate, events, rdp
from jaxpriv.events import laws

Q, STEPS, DELTA = 0.02, 300, 1e-5


@events.event_type(("noise_std", "sensitivity"))
class ScaledGaussian(events.Event):
    """f(D) + N(0, s²) for a query of L2 sensitivity Δ: the Gaussian mechanism with σ = s/Δ."""

    noise_std: Any
    sensitivity: Any

    PARAMETERS = (events.Parameter("noise_std", "ScaledGaussian noise_std s", lo_open=True),
                  events.Parameter("sensitivity", "ScaledGaussian sensitivity Δ", lo_open=True))

    def rdp(self, orders):
        return rdp.gaussian(self.noise_std / self.sensitivity, orders)

    def subsampled_rdp(self, rate, orders):
        return rdp.subsampled_gaussian(rate, self.noise_std / self.sensitivity, orders)

    def pld_law(self, add):
        return laws.gaussian(self.noise_std / self.sensitivity)

    def pld_lattice(self, size):
        return np.zeros(size)

    def to_dp_accounting(self, convert):
        import dp_accounting

        return dp_accounting.GaussianDpEvent(float(self.noise_std / self.sensitivity))


@events.event_type(("noise_std",))
class RdpOnly(events.Event):
    """A type that declares an RDP curve and no PLD law."""

    noise_std: Any

    PARAMETERS = (events.Parameter("noise_std", "RdpOnly noise_std", lo_open=True),)

    def rdp(self, orders):
        return rdp.gaussian(self.noise_std, orders)


def dpsgd(step):
    return events.SelfComposed(events.PoissonSampled(Q, step), STEPS)


def test_the_new_type_is_an_event_type():
    assert ScaledGaussian in events.event_types()
    assert events.batch_shape(ScaledGaussian(np.ones(3), 2.0)) == (3,)
    assert events.leaves(ScaledGaussian(1.0, 2.0)) == [1.0, 2.0]


@pytest.mark.parametrize("event, match", [
    (ScaledGaussian(1.0, -2.0), r"ScaledGaussian sensitivity Δ must lie in \(0.0, inf\), got -2.0"),
    (ScaledGaussian(0.0, 1.0), r"ScaledGaussian noise_std s must lie in \(0.0, inf\)"),
    (dpsgd(ScaledGaussian(np.array([1.0, np.nan]), 1.0)), r"ScaledGaussian noise_std s"),
])
def test_its_ranges_are_checked_from_its_declaration(event, match):
    with pytest.raises(ValueError, match=match):
        events.validate(event)
    with pytest.raises(ValueError, match=match):
        accounting.epsilon(event, DELTA, accountant="rdp")


def test_the_rdp_accountant_reads_its_curve():
    sigma = np.array([0.8, 1.1, 2.0])
    ours = accounting.epsilon(dpsgd(ScaledGaussian(4.0 * sigma, 4.0)), DELTA, accountant="rdp")  # exact: Δ = 2²
    library = accounting.epsilon(dpsgd(events.Gaussian(sigma)), DELTA, accountant="rdp")
    np.testing.assert_array_equal(ours, library)
    # without its exact subsampled curve, the generic (Zhu-Wang) bound: valid, so never below the exact one
    generic = accounting.epsilon(dpsgd(RdpOnly(sigma)), DELTA, accountant="rdp")
    assert np.all(generic >= library)


def test_the_pld_accountant_reads_its_law():
    with _tiers.optimised():  # one tier for both: the quick and optimised forms differ by rounding (jaxpriv._tiers)
        ours = accounting.epsilon_interval(dpsgd(ScaledGaussian(np.array([2.2, 4.0]), 2.0)), DELTA)
        library = accounting.epsilon_interval(dpsgd(events.Gaussian(np.array([1.1, 2.0]))), DELTA)
    np.testing.assert_allclose(ours, library, rtol=1e-12)


def test_an_interpretation_it_does_not_declare_is_refused_with_the_reason():
    assert events.unsupported(dpsgd(RdpOnly(1.0)), "pld").startswith("RdpOnly (not yet interpretable by the PLD")
    with pytest.raises(ValueError, match="RdpOnly"):
        accounting.epsilon(dpsgd(RdpOnly(1.0)), DELTA, accountant="pld")
    assert events.unsupported(dpsgd(RdpOnly(1.0)), "rdp") is None


def test_calibrate_solves_for_its_parameter():
    target = 2.0
    noise_std = calibrate.calibrate(lambda s: dpsgd(ScaledGaussian(s, 4.0)), target, DELTA, bounds=(0.1, 400.0),
                                    accountant="rdp")
    sigma = calibrate.calibrate(lambda s: dpsgd(events.Gaussian(s)), target, DELTA, bounds=(0.1, 100.0),
                                accountant="rdp")
    assert float(noise_std) == pytest.approx(4.0 * float(sigma), rel=1e-8)


def test_the_dp_accounting_conversion_uses_its_mapping():
    import dp_accounting

    assert events.to_dp_accounting(dpsgd(ScaledGaussian(3.0, 2.0))) == dp_accounting.SelfComposedDpEvent(
        dp_accounting.PoissonSampledDpEvent(Q, dp_accounting.GaussianDpEvent(1.5)), STEPS)
    with pytest.raises(ValueError, match="RdpOnly has no dp_accounting DpEvent"):
        events.to_dp_accounting(RdpOnly(1.0))


def test_a_type_must_derive_from_event_and_declare_its_numbers():
    with pytest.raises(TypeError, match="must derive from jaxpriv.events.Event"):
        events.event_type(("x",))(type("Plain", (), {"__annotations__": {"x": float}}))
    with pytest.raises(TypeError, match=r"Undeclared: data fields \['x'\] need a Parameter"):
        events.event_type(("x",))(type("Undeclared", (events.Event,), {"__annotations__": {"x": float}}))


@pytest.mark.parametrize("option, event_type, field", [
    ("q", events.PoissonSampled, "rate"),
    ("sigma", events.Gaussian, "noise_multiplier"),
    ("noise_multiplier", events.Gaussian, "noise_multiplier"),
    ("steps", events.SelfComposed, "count"),
    ("n", events.Shuffled, "n"),
    ("dataset_size", events.SampledWithoutReplacement, "dataset_size"),
    ("bands", events.AmplifiedBandMF, "bands"),
])
def test_the_command_lines_rules_state_the_declared_ranges(option, event_type, field):
    """The command line checks its arguments before JAX is imported, so it keeps its own (numpy) table;
    this pins each of its event numbers to the range the event type declares."""
    from jaxpriv.cli import RULES

    declared = next(p for p in event_type.PARAMETERS if p.field == field)
    rule = RULES[option]
    assert (rule.lo, rule.hi, rule.lo_open, rule.hi_open, rule.integer) == (
        declared.lo, declared.hi, declared.lo_open, declared.hi_open, declared.integer)
