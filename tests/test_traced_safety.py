"""Inside a caller's jit an invalid input cannot raise: it must give NaN, never a number (MATH §0.4).

For each public privacy function, one valid call is listed below. The test runs it once eagerly while
recording every range check the function makes (the library's own ``check_values`` calls: name, range,
and which argument was checked), so the invalid values come from the library's declared ranges rather
than from a second copy here. Then, per checked argument, one jitted, vmapped call evaluates the valid
value and every invalid one (NaN, each side of the range, ±inf, a non-integer where integers are
required): the valid row must not be NaN and every invalid row must be NaN (or the call must raise). An array
argument is made invalid in its first element, and the answer must be NaN at least where it feeds.
"""

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxpriv
from jaxpriv import _numerics, accounting, calibrate, events, fdp, rdp
from jaxpriv.mechanisms import clip_laplace, echo, gaussian, laplace, randomized_response, staircase
from jaxpriv.shuffle import bounds, clones

#: The orders of every curve and every DP-SGD ε here, whose assertions (NaN for an invalid traced input, float32
#: inputs taken at their pessimistic end) hold on any grid: a short one keeps each program small. One
#: fractional order, so the fractional-order kernel is traced too. (The default grid is checked against
#: dp_accounting and mpmath in test_rdp.py, test_rdp_subsampled.py and test_accountant.py.)
ORDERS = np.array([1.5, 2.0, 8.0, 32.0])
INTEGER_ORDERS = np.array([2.0, 3.0, 8.0, 32.0])
RDP_ACCOUNTANT = accounting.RDP(orders=tuple(ORDERS))


class Number(float):
    """A float with its own identity, so a recorded check can be traced back to the argument."""


# name → (function, keyword arguments of one valid call); numbers are wrapped in Number below
CALLS = {
    "fdp.gaussian_tradeoff": (fdp.gaussian_tradeoff, dict(mu=1.0, alpha=0.1)),
    "fdp.gdp_delta": (fdp.gdp_delta, dict(mu=1.0, epsilon=1.0)),
    "fdp.gdp_epsilon": (fdp.gdp_epsilon, dict(mu=1.0, delta=1e-5)),
    "fdp.gdp_mu": (fdp.gdp_mu, dict(epsilon=1.0, delta=1e-5)),
    "fdp.group_gdp": (fdp.group_gdp, dict(mu=1.0, k=3.0)),
    "fdp.eps_delta_tradeoff": (fdp.eps_delta_tradeoff, dict(epsilon=1.0, delta=1e-3, alpha=0.1)),
    "fdp.dpsgd_mu_clt": (fdp.dpsgd_mu_clt, dict(q=0.01, sigma=1.1, steps=1000.0)),
    "rdp.gaussian": (rdp.gaussian, dict(sigma=1.1, orders=ORDERS)),
    "rdp.laplace": (rdp.laplace, dict(b=1.1, orders=ORDERS)),
    "rdp.subsampled_gaussian": (rdp.subsampled_gaussian, dict(q=0.01, sigma=1.1, orders=ORDERS)),
    "rdp.to_epsilon": (rdp.to_epsilon, dict(rdp=np.array([0.1, 0.2, 0.5, 2.0]), orders=ORDERS, delta=1e-5)),
    "rdp.to_delta": (rdp.to_delta, dict(rdp=np.array([0.1, 0.2, 0.5, 2.0]), orders=ORDERS, epsilon=1.0)),
    "rdp.two_stage": (rdp.two_stage, dict(q=0.05, sigma=1.1, steps=5.0, client_rate=0.5, rounds=20.0,
                                          orders=ORDERS)),
    "dpsgd_epsilon": (jaxpriv.dpsgd_epsilon, dict(q=0.01, sigma=1.1, steps=1000.0, delta=1e-5, orders=ORDERS)),
    "dpsgd_epsilon_conversions": (accounting.dpsgd.dpsgd_epsilon_conversions,
                                  dict(q=0.01, sigma=1.1, steps=1000.0, delta=1e-5, orders=ORDERS)),
    "calibrate.noise_multiplier": (calibrate.noise_multiplier, dict(target_epsilon=2.0, q=0.01, steps=1000.0,
                                                                     delta=1e-5, orders=ORDERS)),
    "calibrate.sampling_rate": (calibrate.sampling_rate, dict(target_epsilon=2.0, sigma=1.1, steps=1000.0,
                                                               delta=1e-5, orders=ORDERS)),
    "calibrate.steps": (calibrate.steps, dict(target_epsilon=2.0, q=0.01, sigma=1.1, delta=1e-5, orders=ORDERS)),
    "shuffle.fmt22_closed_form": (bounds.fmt22_closed_form, dict(eps0=1.0, n=1000.0, delta=1e-6)),
    "shuffle.erlingsson19": (bounds.erlingsson19, dict(eps0=0.5, n=1000.0, delta=1e-6)),
    "shuffle.girgis_rdp": (bounds.girgis_rdp, dict(eps0=1.0, n=1000.0, orders=INTEGER_ORDERS)),
    "shuffle.girgis_rdp_simplified": (bounds.girgis_rdp_simplified, dict(eps0=1.0, n=1000.0, orders=INTEGER_ORDERS)),
    "shuffle.girgis_rdp_lower": (bounds.girgis_rdp_lower, dict(eps0=1.0, n=1000.0, orders=INTEGER_ORDERS)),
    "shuffle.sapes_proposition1": (bounds.sapes_proposition1, dict(eps_c=1.0, delta_c=1e-6, b=4.0,
                                                                   delta_prime=1e-6)),
    "shuffle.clones_delta": (clones.clones_delta, dict(eps0=1.0, n=1000.0, epsilon=0.5)),
    "shuffle.clones_epsilon": (clones.clones_epsilon, dict(eps0=1.0, n=1000.0, delta=1e-6)),
    "gaussian.rdp": (gaussian.rdp, dict(sigma=1.1, orders=ORDERS, sensitivity=1.0)),
    "gaussian.mu": (gaussian.mu, dict(sigma=1.1, sensitivity=1.0)),
    "gaussian.delta": (gaussian.delta, dict(sigma=1.1, epsilon=1.0, sensitivity=1.0)),
    "gaussian.epsilon": (gaussian.epsilon, dict(sigma=1.1, delta=1e-5, sensitivity=1.0)),
    "gaussian.classical_sigma": (gaussian.classical_sigma, dict(epsilon=0.5, delta=1e-5, sensitivity=1.0)),
    "gaussian.analytic_sigma": (gaussian.analytic_sigma, dict(epsilon=1.0, delta=1e-5, sensitivity=1.0)),
    "laplace.rdp": (laplace.rdp, dict(scale=1.1, orders=ORDERS, sensitivity=1.0)),
    "laplace.epsilon": (laplace.epsilon, dict(scale=1.1, sensitivity=1.0)),
    "laplace.scale_for": (laplace.scale_for, dict(epsilon=1.0, sensitivity=1.0)),
    "staircase.optimal_gamma": (staircase.optimal_gamma, dict(epsilon=1.0)),
    "staircase.epsilon": (staircase.epsilon, dict(epsilon=1.0, gamma=0.3, sensitivity=1.0)),
    "staircase.rdp": (staircase.rdp, dict(epsilon=1.0, gamma=0.3, orders=ORDERS, sensitivity=1.0)),
    "staircase.rdp_shift": (staircase.rdp_shift, dict(epsilon=1.0, shift=0.5, gamma=0.3, orders=ORDERS,
                                                      sensitivity=1.0)),
    "staircase.rdp_l1": (staircase.rdp_l1, dict(epsilon=1.0, dimension=3.0, gamma=0.3, orders=ORDERS)),
    "randomized_response.keep_probability": (randomized_response.keep_probability, dict(epsilon=1.0, k=3.0)),
    "randomized_response.epsilon": (randomized_response.epsilon, dict(keep=0.6, k=3.0)),
    "randomized_response.rdp": (randomized_response.rdp, dict(epsilon=1.0, orders=ORDERS, k=3.0)),
    "clip_laplace.local_scale": (clip_laplace.local_scale, dict(epsilon=1.0, clip=1.0)),
    "echo.neighbor_divergence": (echo.neighbor_divergence, dict(eps_i=1.0, eps_j=2.0, clip=1.0,
                                                                                A=1.0)),
    # array arguments (an invalid value replaces their first element) and the mechanisms' moments
    "fdp.compose_gdp": (fdp.compose_gdp, dict(mus=np.array([0.5, 1.0, 2.0]))),
    "rdp.client_sampled": (rdp.client_sampled, dict(curve=np.array([0.1, 0.2, 0.5, 2.0]), client_rate=0.5,
                                                    orders=ORDERS)),
    "shuffle.gspa_mu": (bounds.gspa_mu, dict(local_epsilons=np.array([0.5, 1.0, 2.0] * 100))),
    "shuffle.gspa_mu_composed": (bounds.gspa_mu_composed, dict(local_epsilons=np.array([0.5, 1.0, 2.0] * 100),
                                                               rounds=10.0)),
    "staircase.privacy_loss_atoms": (staircase.privacy_loss_atoms, dict(epsilon=1.0, gamma=0.3)),
    "staircase.udpfl_printed_rdp": (staircase.udpfl_printed_rdp, dict(epsilon=1.0, gamma=0.3, orders=ORDERS)),
    "gaussian.log_prob": (gaussian.log_prob, dict(x=0.3, sigma=1.1)),
    "gaussian.variance": (gaussian.variance, dict(sigma=1.1)),
    "laplace.log_prob": (laplace.log_prob, dict(x=0.3, scale=1.1)),
    "laplace.variance": (laplace.variance, dict(scale=1.1)),
    "staircase.log_prob": (staircase.log_prob, dict(x=0.3, epsilon=1.0, gamma=0.3, sensitivity=1.0)),
    "staircase.cdf": (staircase.cdf, dict(x=0.3, epsilon=1.0, gamma=0.3, sensitivity=1.0)),
    "staircase.variance": (staircase.variance, dict(epsilon=1.0, gamma=0.3, sensitivity=1.0)),
    "randomized_response.pmf": (randomized_response.pmf, dict(y=1.0, x=0.0, epsilon=1.0, k=3.0)),
    "randomized_response.variance": (randomized_response.variance, dict(x=0.0, epsilon=1.0, k=3.0)),
    "clip_laplace.normalizer": (clip_laplace.normalizer, dict(f=0.2, lam=1.5, A=1.0)),
    "clip_laplace.log_prob": (clip_laplace.log_prob, dict(z=0.1, f=0.2, lam=1.5, A=1.0)),
    "clip_laplace.cdf": (clip_laplace.cdf, dict(z=0.1, f=0.2, lam=1.5, A=1.0)),
    "clip_laplace.variance": (clip_laplace.variance, dict(f=0.2, lam=1.5, A=1.0)),
    "clip_laplace.mean": (clip_laplace.mean, dict(f=0.2, lam=1.5, A=1.0)),
    "echo.echo_probabilities": (echo.echo_probabilities,
                                        dict(local_epsilons=np.array([0.5, 1.0, 2.0]))),
    "shuffle.apes_echo_sum": (bounds.apes_echo_sum, dict(local_epsilons=np.array([0.5, 1.0, 2.0] * 100))),
    "shuffle.apes_theorem4": (bounds.apes_theorem4, dict(local_epsilons=np.array([0.5, 1.0, 2.0] * 1000),
                                                         delta_s=1e-6)),
    "gaussian.mean": (gaussian.mean, dict(sigma=1.1)),
    "laplace.mean": (laplace.mean, dict(scale=1.1)),
    "staircase.mean": (staircase.mean, dict(epsilon=1.0, gamma=0.3, sensitivity=1.0)),
    "randomized_response.log_report_probabilities": (randomized_response.log_report_probabilities,
                                                     dict(epsilon=1.0, k=3)),
    "randomized_response.log_prob": (randomized_response.log_prob, dict(y=1.0, x=0.0, epsilon=1.0, k=3)),
    "randomized_response.mean": (randomized_response.mean, dict(x=0.0, epsilon=1.0, k=3)),
    "randomized_response.frequency_moments": (randomized_response.frequency_moments,
                                               dict(x=np.array([0.0, 1.0, 2.0]), epsilon=1.0, k=3)),
    # the accounting interface, with the event's numbers traced
    "accounting.epsilon (rdp)": (lambda q, sigma, steps, delta: accounting.epsilon(
        events.SelfComposed(events.PoissonSampled(q, events.Gaussian(sigma)), steps), delta,
        accountant=RDP_ACCOUNTANT), dict(q=0.01, sigma=1.1, steps=100.0, delta=1e-5)),
    "accounting.delta (rdp)": (lambda scale, epsilon: accounting.delta(events.Laplace(scale), epsilon,
                                                                       accountant=RDP_ACCOUNTANT),
                               dict(scale=1.1, epsilon=1.0)),
}


def invalid_values(lo, hi, lo_open, hi_open, integer, allow_inf) -> list[float]:
    """Values outside [lo, hi] (ends open or closed as declared), NaN, inf and a non-integer."""
    bad = [math.nan]
    if math.isfinite(lo):
        bad += [lo - max(1.0, abs(lo))] + ([lo] if lo_open else [])
    if math.isfinite(hi):
        bad += [hi + max(1.0, abs(hi))] + ([hi] if hi_open else [])
    elif not allow_inf:
        bad += [math.inf]
    if integer:
        bad += [max(lo, 0.0) + 1.5]
    return bad


def checked_arguments(fn, kwargs) -> dict:
    """Run ``fn(**kwargs)`` eagerly and return argument → the range spec each check declared for it."""
    numbered = {k: Number(v) if isinstance(v, float) else v for k, v in kwargs.items()}
    specs = {}
    original = _numerics.check_values

    def recording(name, value, lo=-np.inf, hi=np.inf, *, lo_open=False, hi_open=False, integer=False,
                  allow_inf=False):
        for key, arg in numbered.items():
            if value is arg:
                specs.setdefault(key, []).append((lo, hi, lo_open, hi_open, integer, allow_inf))
        return original(name, value, lo, hi, lo_open=lo_open, hi_open=hi_open, integer=integer,
                        allow_inf=allow_inf)

    _numerics.check_values = recording
    try:
        fn(**numbered)
    finally:
        _numerics.check_values = original
    return specs


def _numeric_arguments(kwargs) -> list[str]:
    return [a for a, v in kwargs.items() if isinstance(v, float) or (isinstance(v, np.ndarray) and a != "orders")]


def _refuses_tracing(fn, kwargs, arg, values) -> bool:
    """True when ``arg`` must be concrete: a structural argument (RR's k) or a host-side accountant that
    refuses a traced argument outright. Both are safe. Traced abstractly: nothing is compiled."""
    try:
        jax.eval_shape(jax.vmap(lambda v: fn(**{**kwargs, arg: v})), values)
    except jax.errors.ConcretizationTypeError:
        return True
    except ValueError as err:
        assert "concrete" in str(err), err
        return True
    return False


@pytest.mark.parametrize("fn, kwargs", [pytest.param(fn, kwargs, id=name) for name, (fn, kwargs) in CALLS.items()])
def test_invalid_traced_arguments_give_nan(fn, kwargs):
    """Every numeric argument has a declared range, and each value outside it, passed traced (x64 off: the
    caller's float32), gives NaN in what it feeds while the valid call stays finite. One compiled program
    per function: each row of one vmapped batch makes one argument invalid and keeps the others valid."""
    specs = checked_arguments(fn, kwargs)
    cases = {}  # argument → (its invalid values, its rows: the valid value first, then each invalid one)
    for arg in _numeric_arguments(kwargs):
        assert arg in specs, f"{arg} is never range-checked"
        bad = sorted({v for spec in specs[arg] for v in invalid_values(*spec)
                      if not all(_inside(v, *s) for s in specs[arg])}, key=repr)
        valid = np.asarray(kwargs[arg], dtype=np.float64)
        # an array argument is made invalid in its first element
        rows = [valid] + [np.where(np.arange(valid.size).reshape(valid.shape) == 0, v, valid) for v in bad]
        values = np.stack(rows).astype(np.float32)  # built in numpy: no eager program per shape
        if not _refuses_tracing(fn, kwargs, arg, values):
            cases[arg] = (bad, values)
    if not cases:
        return
    owners = [(arg, i) for arg, (_, values) in cases.items() for i in range(len(values))]
    batch = {a: np.stack([cases[arg][1][i] if a == arg else np.asarray(kwargs[a], np.float32)
                          for arg, i in owners]) for a in cases}
    out = jax.jit(jax.vmap(lambda b: fn(**{**kwargs, **b})))(batch)
    for leaf in jax.tree_util.tree_leaves(out):
        leaf = np.asarray(leaf, dtype=np.float64).reshape(len(owners), -1)
        for (arg, i), row in zip(owners, leaf):
            if i == 0:
                assert not np.isnan(row).any(), f"valid {arg} = {kwargs[arg]} gave {row}"
                continue
            # a scalar makes the whole answer NaN; an array at least the part its invalid element feeds
            # (one invalid order of a curve makes that order's value NaN: the conversions then give NaN)
            nan = np.isnan(row).all() if np.ndim(kwargs[arg]) == 0 else np.isnan(row).any()
            assert nan, f"invalid {arg} = {cases[arg][0][i - 1]} gave {row}"


def _inside(v, lo, hi, lo_open, hi_open, integer, allow_inf) -> bool:
    if math.isnan(v) or (math.isinf(v) and not allow_inf):
        return False
    ok = (v > lo if lo_open else v >= lo) and (v < hi if hi_open else v <= hi)
    return ok and (not integer or float(v).is_integer())


# --------------------------------------------------------------------------------------------------
# float32 inputs under jit (x64 off): conservative for every float64 the caller may have meant
# --------------------------------------------------------------------------------------------------


# DP-SGD's ε and its calibrators on the short grid (ORDERS)
dpsgd_epsilon = functools.partial(jaxpriv.dpsgd_epsilon, orders=ORDERS)
noise_multiplier = functools.partial(calibrate.noise_multiplier, orders=ORDERS)
sampling_rate = functools.partial(calibrate.sampling_rate, orders=ORDERS)


def _random_settings(n=100, seed=0):
    rng = np.random.default_rng(seed)
    return (10 ** rng.uniform(-3, np.log10(0.2), n), rng.uniform(0.5, 5.0, n),
            np.round(10 ** rng.uniform(1, 4, n)), 10 ** rng.uniform(-8, -3, n))


def test_float32_inputs_under_jit_never_give_a_smaller_epsilon(monkeypatch):
    assert not jax.config.jax_enable_x64  # the caller's setting in this suite: jit rounds inputs to float32
    q, sigma, steps, delta = _random_settings()
    exact = np.asarray(dpsgd_epsilon(q, sigma, steps, delta))  # at the caller's float64 values
    monkeypatch.setattr(_numerics, "_warned_float32", False)
    with pytest.warns(UserWarning, match="pessimistic end of its rounding interval"):
        traced = np.asarray(jax.jit(dpsgd_epsilon)(q, sigma, steps, delta))
    assert (traced >= exact).all()
    assert (traced <= exact * (1 + 1e-5)).all()  # and only by the rounding, not more


def test_float32_calibration_under_jit_stays_on_the_safe_side():
    q, sigma, steps, delta = _random_settings(40, seed=1)
    target = np.asarray(dpsgd_epsilon(q, sigma, steps, delta))  # a reachable target per setting
    exact_sigma = np.asarray(noise_multiplier(target, q, steps, delta))
    traced_sigma = np.asarray(jax.jit(noise_multiplier)(target, q, steps, delta))
    assert (traced_sigma >= exact_sigma).all()
    exact_q = np.asarray(sampling_rate(target, sigma, steps, delta))
    traced_q = np.asarray(jax.jit(sampling_rate)(target, sigma, steps, delta))
    assert (traced_q <= exact_q).all()
    assert (np.asarray(dpsgd_epsilon(q, traced_sigma, steps, delta)) <= target).all()


def test_float32_mechanism_and_shuffle_bounds_under_jit_are_conservative():
    rng = np.random.default_rng(2)
    sigma, delta = rng.uniform(0.5, 5.0, 50), 10 ** rng.uniform(-8, -3, 50)
    assert (np.asarray(jax.jit(gaussian.epsilon)(sigma, delta)) >= np.asarray(gaussian.epsilon(sigma, delta))).all()
    eps0 = rng.uniform(0.1, 2.0, 20)
    exact = np.asarray(clones.clones_epsilon(eps0, 1000, 1e-6))
    traced = np.asarray(jax.jit(lambda e: clones.clones_epsilon(e, 1000, 1e-6))(eps0))
    assert (traced >= exact).all()


def test_python_floats_under_jit_are_conservative_too():
    """A Python float passed to jit is a weak-typed float32 there: it is moved to its pessimistic end too."""
    q, sigma, steps, delta = _random_settings(20, seed=3)
    for args in zip(q.tolist(), sigma.tolist(), steps.tolist(), delta.tolist()):
        assert float(jax.jit(dpsgd_epsilon)(*args)) >= float(dpsgd_epsilon(*args))
    target = float(dpsgd_epsilon(0.01, 1.3, 1000.0, 1e-5))
    s = float(jax.jit(noise_multiplier)(target, 0.01, 1000.0, 1e-5))
    assert float(dpsgd_epsilon(0.01, s, 1000.0, 1e-5)) <= target


def test_gradients_with_float32_inputs_still_work():
    grad = jax.grad(lambda s: dpsgd_epsilon(0.01, s, 1000.0, 1e-5))(jnp.float32(1.1))
    assert np.isfinite(grad) and grad < 0


def test_eager_jvp_of_an_invalid_input_is_nan_even_where_the_result_ignores_it():
    value, _ = jax.jvp(lambda g: staircase.epsilon(1.0, g), (jnp.float32(-0.5),), (jnp.float32(0.0),))
    assert np.isnan(value)
    value, _ = jax.jvp(lambda g: staircase.epsilon(1.0, g), (jnp.float32(0.3),), (jnp.float32(0.0),))
    assert value == 1.0


def test_a_batch_masks_only_the_invalid_rows_of_a_curve():
    """One invalid σ in a jitted batch makes its own row of the (batch, orders) curve NaN, no other."""
    curves = np.asarray(jax.jit(lambda s: rdp.gaussian(s, ORDERS))(jnp.array([1.0, -1.0, 2.0, 3.0])))
    assert np.isnan(curves[1]).all() and np.isfinite(curves[[0, 2, 3]]).all()


def test_calibrate_derivative_is_zero_at_a_bound_and_for_an_unmet_target():
    family = lambda s: events.SelfComposed(events.PoissonSampled(0.01, events.Gaussian(s)), 1000)  # noqa: E731
    with jax.enable_x64(True):
        solve = lambda t: calibrate.calibrate(family, t, 1e-5, bounds=(0.5, 50.0), accountant=RDP_ACCOUNTANT)  # noqa: E731
        at_bound = jax.grad(solve)(500.0)
        unmet = jax.grad(solve)(1e-6)
    assert float(at_bound) == 0.0 and float(unmet) == 0.0
