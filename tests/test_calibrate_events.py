"""calibrate.calibrate: any monotone event family, any accountant, on the one root finder."""

import jax
import numpy as np
import pytest

from jaxpriv import _tiers, accounting, calibrate, events

DELTA = 1e-5


def dpsgd(q, steps):
    return lambda sigma: events.SelfComposed(events.PoissonSampled(q, events.Gaussian(sigma)), steps)


def test_rdp_calibration_equals_noise_multiplier():
    targets = np.array([0.5, 1.0, 4.0])
    ours = calibrate.calibrate(dpsgd(0.01, 1000), targets, DELTA, bounds=(0.3, 50.0), accountant="rdp")
    reference = calibrate.noise_multiplier(targets, 0.01, 1000, DELTA)
    np.testing.assert_allclose(ours, reference, rtol=1e-9)


def test_pld_sigma_meets_the_target_and_is_within_tolerance_of_the_root():
    targets = np.array([0.8, 2.0])
    sigma = calibrate.calibrate(dpsgd(0.02, 500), targets, DELTA, bounds=(0.3, 50.0), accountant="pld")
    eps = accounting.epsilon(dpsgd(0.02, 500)(sigma), DELTA, accountant="pld")
    assert np.all(eps <= targets)
    below = accounting.epsilon(dpsgd(0.02, 500)(sigma * (1 - 1e-5)), DELTA, accountant="pld")
    assert np.all(below > targets)  # within 1e-5 of the root: a slightly smaller σ overspends
    # PLD is the tighter accountant here, so it affords less noise than RDP
    assert np.all(sigma < calibrate.noise_multiplier(targets, 0.02, 500, DELTA))


def test_an_increasing_family_returns_the_largest_safe_rate():
    family = lambda q: events.SelfComposed(events.PoissonSampled(q, events.Gaussian(1.0)), 300)  # noqa: E731
    q = calibrate.calibrate(family, [0.5, 1.5], DELTA, bounds=(1e-6, 1.0), accountant="pld")
    eps = accounting.epsilon(family(q), DELTA, accountant="pld")
    assert np.all(eps <= [0.5, 1.5])
    assert np.all(accounting.epsilon(family(q * (1 + 1e-5)), DELTA, accountant="pld") > [0.5, 1.5])


def test_wrappers_take_the_pld_accountant():
    sigma = calibrate.noise_multiplier(1.0, 0.02, 500, DELTA, accountant="pld")
    direct = calibrate.calibrate(dpsgd(0.02, 500), 1.0, DELTA, bounds=(1e-2, 1e4), accountant="pld")
    assert float(sigma) == pytest.approx(float(direct), rel=1e-5)
    t = float(calibrate.steps(1.0, 0.02, 1.5, DELTA, accountant="pld"))
    assert t == int(t) and t >= float(calibrate.steps(1.0, 0.02, 1.5, DELTA))
    event = lambda n: events.SelfComposed(events.PoissonSampled(0.02, events.Gaussian(1.5)), n)  # noqa: E731
    assert accounting.epsilon(event(t), DELTA, accountant="pld") <= 1.0
    assert accounting.epsilon(event(t + 1), DELTA, accountant="pld") > 1.0
    q = float(calibrate.sampling_rate(1.0, 1.5, 500, DELTA, accountant="pld"))
    assert accounting.epsilon(dpsgd(q, 500)(1.5), DELTA, accountant="pld") <= 1.0


def test_steps_by_best_is_the_largest_integer_for_each_target_of_a_batch():
    # targets at different distances from RDP's T (and one not even one step meets) finish the integer
    # search at different iterations: each answer is the largest T whose ε meets its own target
    targets = np.array([0.05, 0.7, 1.3, 6.0])
    with pytest.warns(RuntimeWarning, match="cannot be met"):
        t = calibrate.steps(targets, 0.02, 1.5, DELTA, accountant="best")
    assert t[0] == 0 and np.all(t[1:] == np.floor(t[1:])) and np.all(np.diff(t) > 0)
    assert np.all(t[1:] >= calibrate.steps(targets[1:], 0.02, 1.5, DELTA))  # never fewer than RDP affords
    event = lambda n: events.SelfComposed(events.PoissonSampled(0.02, events.Gaussian(1.5)), n)  # noqa: E731
    assert np.all(accounting.epsilon(event(t[1:]), DELTA) <= targets[1:])
    assert np.all(accounting.epsilon(event(t[1:] + 1), DELTA) > targets[1:])
    assert accounting.epsilon(event(1.0), DELTA) > targets[0]


@pytest.mark.parametrize("accountant", ["pld", "best"])
def test_a_search_refines_only_the_settings_whose_interval_holds_the_target(accountant, monkeypatch):
    """The searches' ε (calibrate._epsilon_deciding): on the same side of every target as the accountant's
    own ε, never below it, equal to it where the target lies inside the first grid's interval, and PLD's
    refined ε computed for those settings only (with "best", RDP's ε once for all settings). (All in the
    optimised tier: a tier switch between two calls moves a PLD answer by ~1e-10.)"""
    event = events.SelfComposed(events.PoissonSampled(np.array([0.01, 0.02, 0.05, 0.01]),
                                                      events.Gaussian(np.array([0.8, 1.0, 0.7, 1.5]))),
                                np.array([300, 200, 100, 1000]))
    deltas = np.full(4, DELTA)
    with _tiers.optimised():
        exact = accounting.epsilon(event, deltas, accountant=accountant)
        lower, upper = accounting.epsilon_interval(event, deltas, tolerance=0.1)
        assert lower[3] < upper[3]
        targets = np.array([0.5 * exact[0], 2.0 * exact[1], 1.001 * upper[2], 0.5 * (lower[3] + upper[3])])
        full_rows = []
        epsilon = accounting.epsilon
        monkeypatch.setattr(accounting, "epsilon", lambda e, d, accountant, **kw: full_rows.append(
            (accountant, np.size(d))) or epsilon(e, d, accountant=accountant, **kw))
        got = calibrate._epsilon_deciding(event, deltas, targets, accountant, None, False)
    assert np.array_equal(got <= targets, exact <= targets) and np.all(got >= exact)
    assert got[3] == exact[3]
    # PLD's refined ε for the one undecided setting only; with "best", RDP's once for all four (its minimum)
    want = [("pld", 1)] if accountant == "pld" else [("rdp", 4), ("pld", 1)]
    assert full_rows == want, full_rows


def test_targets_outside_the_bounds():
    family = dpsgd(0.01, 1000)
    with pytest.warns(RuntimeWarning, match="cannot be met"):
        sigma = calibrate.calibrate(family, [1e-9, 1e6], DELTA, bounds=(0.5, 20.0), accountant="rdp")
    assert np.isnan(sigma[0])  # not even σ = 20 certifies ε = 1e-9
    assert sigma[1] == 0.5  # the unsafe end already meets a huge target


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(bounds=(1.0,)), "bounds"),
        (dict(bounds=(0.0, 1.0)), r"bounds\[0\]"),
        (dict(bounds=(2.0, 1.0)), r"bounds\[1\]"),
        (dict(bounds=(1.0, 2.0), xtol=2.0), "xtol"),
        (dict(bounds=(1.0, 2.0), accountant="moments"), "accountant"),
        (dict(bounds=(1.0, 2.0), target_epsilon=0.0), "target_epsilon"),
        (dict(bounds=(1.0, 2.0), target_epsilon=np.nan), "target_epsilon"),
        (dict(bounds=(1.0, 2.0), delta=1.0), "delta"),
        (dict(bounds=(1.0, 2.0), target_epsilon=[1.0, 2.0], delta=[1e-5, 1e-6, 1e-7]), "broadcast"),
        (dict(bounds=(1.0, 2.0), make_event="gaussian"), "make_event"),
    ],
)
def test_bad_input(kwargs, match):
    args = dict(make_event=dpsgd(0.01, 100), target_epsilon=1.0, delta=DELTA)
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        calibrate.calibrate(args.pop("make_event"), args.pop("target_epsilon"), args.pop("delta"), **args)


def test_an_event_the_accountant_cannot_interpret():
    family = lambda eps: events.Staircase(eps, dimension=4)  # noqa: E731
    with pytest.raises(ValueError, match="PLD accountant cannot interpret"):
        calibrate.calibrate(family, 1.0, DELTA, bounds=(0.1, 10.0), accountant="pld")


def test_calibrate_is_differentiable_by_the_implicit_function_theorem():
    """d σ/d target and d σ/d δ of the generic calibrate equal noise_multiplier's (its own custom_jvp) and a
    central finite difference; the same for an increasing family (the sampling rate)."""
    sigma_family = lambda s: events.SelfComposed(events.PoissonSampled(0.01, events.Gaussian(s)), 10_000)  # noqa: E731
    rate_family = lambda q: events.SelfComposed(events.PoissonSampled(q, events.Gaussian(1.1)), 10_000)  # noqa: E731
    solve = lambda t, d: calibrate.calibrate(sigma_family, t, d, bounds=(0.3, 50.0), accountant="rdp")  # noqa: E731
    with jax.enable_x64(True):
        d_target = jax.grad(lambda t: solve(t, 1e-5))(1.0)
        d_delta = jax.grad(lambda d: solve(1.0, d))(1e-5)
        d_rate = jax.grad(lambda t: calibrate.calibrate(rate_family, t, 1e-5, bounds=(1e-6, 1.0), accountant="rdp"))(2.0)
        ref_target = jax.grad(lambda t: calibrate.noise_multiplier(t, 0.01, 10_000, 1e-5))(1.0)
        ref_delta = jax.grad(lambda d: calibrate.noise_multiplier(1.0, 0.01, 10_000, d))(1e-5)
        ref_rate = jax.grad(lambda t: calibrate.sampling_rate(t, 1.1, 10_000, 1e-5))(2.0)
    np.testing.assert_allclose([d_target, d_delta, d_rate], [ref_target, ref_delta, ref_rate], rtol=1e-8)
    h = 1e-5
    finite = (float(solve(1.0 + h, 1e-5)) - float(solve(1.0 - h, 1e-5))) / (2 * h)
    assert float(d_target) == pytest.approx(finite, rel=1e-6)
