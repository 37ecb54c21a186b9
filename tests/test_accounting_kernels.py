"""The small public pieces the accountants are built from: client sampling of an RDP curve, the
staircase and randomized-response loss atoms, and the dp_accounting export's refusals."""

import numpy as np
import pytest

from jaxpriv import events, rdp
from jaxpriv._numerics import float64
from jaxpriv.mechanisms import randomized_response as rr
from jaxpriv.mechanisms import staircase

ORDERS = np.array([1.5, 2.0, 4.0, 16.0])


def test_client_sampled_matches_two_stage_and_is_the_identity_at_rate_one():
    local = 5 * rdp.subsampled_gaussian(0.01, 1.0, ORDERS)
    np.testing.assert_allclose(rdp.client_sampled(local, 0.3, ORDERS), rdp.two_stage(0.01, 1.0, 5, 0.3, 1, ORDERS),
                               rtol=1e-12)
    np.testing.assert_allclose(rdp.client_sampled(local, 1.0, ORDERS), local, rtol=1e-12)
    # a release that may not happen leaks less than one that always does
    assert np.all(rdp.client_sampled(local, 0.3, ORDERS) <= local)


@pytest.mark.parametrize(
    "curve,rate,match",
    [([0.1] * 4, 0.0, "client_rate"), ([0.1] * 4, 1.5, "client_rate"), ([0.1] * 4, np.nan, "client_rate"),
     ([-0.1] * 4, 0.5, "curve"), ([np.nan] * 4, 0.5, "curve")],
)
def test_client_sampled_bad_input(curve, rate, match):
    with pytest.raises(ValueError, match=match):
        rdp.client_sampled(np.asarray(curve), rate, ORDERS)


@pytest.mark.parametrize("eps,gamma", [(0.5, 0.2), (1.0, None), (3.0, 0.5)])
def test_staircase_atoms_reproduce_its_exact_rdp(eps, gamma):
    g = float(staircase.optimal_gamma(eps)) if gamma is None else gamma
    with float64():  # a kernel: the accountants call it in their float64 scope
        losses, masses = (np.asarray(x) for x in staircase.privacy_loss_atoms(np.float64(eps), np.float64(g)))
    assert masses.sum() == pytest.approx(1.0, abs=1e-15) and np.all(masses >= 0)
    # the Rényi divergence of the three-atom pair, summed directly, is the module's exact curve
    direct = np.log(np.sum(masses[:, None] * np.exp((ORDERS - 1.0) * losses[:, None]), axis=0)) / (ORDERS - 1.0)
    np.testing.assert_allclose(direct, staircase.rdp(eps, gamma, ORDERS), rtol=1e-12)


@pytest.mark.parametrize("eps,k", [(0.1, 2), (1.0, 3), (40.0, 5)])
def test_randomized_response_log_probabilities(eps, k):
    with float64():
        log_q, log_p = (float(x) for x in rr.log_report_probabilities(np.float64(eps), k))
    assert np.exp(log_p) + (k - 1) * np.exp(log_q) == pytest.approx(1.0, rel=1e-14)
    assert log_p - log_q == pytest.approx(eps, rel=1e-14)


@pytest.mark.parametrize(
    "event,match",
    [(events.Staircase(1.0), "Staircase has no dp_accounting"),
     (events.ClientSampled(0.5, events.Gaussian(1.0)), "ClientSampled has no dp_accounting"),
     (events.Gaussian(np.array([1.0, 2.0])), "scalar numbers"),
     (events.Gaussian(-1.0), "noise_multiplier")],
)
def test_to_dp_accounting_refusals(event, match):
    pytest.importorskip("dp_accounting")
    with pytest.raises(ValueError, match=match):
        events.to_dp_accounting(event)


def test_rdp_accountant_curve_and_its_conversion():
    from jaxpriv import accounting

    acc = accounting.RDP(tuple(ORDERS))
    sigma = np.array([0.8, 2.0])
    np.testing.assert_allclose(acc.curve(events.Gaussian(sigma)), ORDERS / (2 * sigma[:, None] ** 2), rtol=1e-15)
    # rPDP-FL's round as an event: the accountant's curve is rdp.two_stage's
    local = events.SelfComposed(events.PoissonSampled([0.01, 0.2], events.Gaussian(1.0)), 5)
    round_curve = acc.curve(events.ClientSampled(0.3, local))
    np.testing.assert_allclose(round_curve, rdp.two_stage(np.array([0.01, 0.2]), 1.0, 5, 0.3, 1, ORDERS),
                               rtol=1e-12)
    # epsilon() is epsilon_of_curve() of curve(), composition included (RDP adds)
    spent = events.SelfComposed(events.ClientSampled(0.3, local), 40)
    np.testing.assert_array_equal(acc.epsilon_of_curve(40 * round_curve, 1e-5),
                                  accounting.epsilon(spent, 1e-5, accountant=acc))


@pytest.mark.parametrize("call,match", [
    (lambda acc: acc.epsilon_of_curve(np.ones((2, 4)), 0.0), "delta must lie in"),
    (lambda acc: acc.epsilon_of_curve(np.ones((2, 4)), 1.0), "delta must lie in"),
    (lambda acc: acc.epsilon_of_curve(np.ones((2, 3)), 1e-5), "curve must have the 4 orders on its last axis"),
    (lambda acc: acc.epsilon_of_curve(-np.ones(4), 1e-5), "curve must lie in"),
    (lambda acc: acc.epsilon_of_curve(np.ones((2, 4)), [1e-5, 1e-6, 1e-7]), "do not broadcast"),
    (lambda acc: acc.curve(events.Gaussian(-1.0)), "noise_multiplier"),
    (lambda acc: acc.curve(events.PersonalizedShuffled(np.array([1.0, 2.0]), model="gspa")), "cannot interpret"),
])
def test_rdp_accountant_curve_bad_input(call, match):
    from jaxpriv import accounting

    with pytest.raises(ValueError, match=match):
        call(accounting.RDP(tuple(ORDERS)))
