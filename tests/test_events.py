"""Tests for jaxpriv.events: events as pytrees (flatten/unflatten, jit over an event), batch shapes,
validation errors naming the parameter and its range, and the dp_accounting DpEvent conversions both ways.
Also the input checks of the jaxpriv.accounting entry points (MATH §0.4), which run before any
accountant does work (so these tests are fast).
"""

import dp_accounting
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxpriv import accounting
from jaxpriv import events as ev


@pytest.fixture(autouse=True)
def x64_stays_off():
    assert not jax.config.jax_enable_x64
    yield
    assert not jax.config.jax_enable_x64


def dpsgd(q=0.01, sigma=1.1, steps=100):
    return ev.SelfComposed(ev.PoissonSampled(q, ev.Gaussian(sigma)), steps)


EVENTS = [
    ev.Gaussian(1.5),
    ev.Laplace(0.5),
    ev.Staircase(1.0),
    ev.Staircase(1.0, gamma=0.3, dimension=4),
    ev.RandomizedResponse(0.7, k=5),
    ev.PoissonSampled(0.02, ev.Laplace(2.0)),
    ev.ClientSampled(0.5, dpsgd()),
    dpsgd(),
    ev.Composed((ev.Gaussian(2.0), dpsgd(0.1, 3.0, 7), ev.RandomizedResponse(1.0))),
    ev.Shuffled(1.0, n=1000),
    ev.Shuffled(1.0, n=1000, clones="strong"),
    ev.PersonalizedShuffled(np.array([0.5, 1.0, 2.0]), model="gspa"),
]


# --------------------------------------------------------------------------------------------------
# Pytrees
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("event", EVENTS, ids=lambda e: type(e).__name__)
def test_pytree_round_trip(event):
    leaves, treedef = jax.tree_util.tree_flatten(event)
    back = jax.tree_util.tree_unflatten(treedef, leaves)
    assert type(back) is type(event)
    assert jax.tree_util.tree_structure(back) == treedef
    for a, b in zip(leaves, jax.tree_util.tree_leaves(back)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    ev.validate(back)


def test_leaves_and_static_fields():
    event = ev.Composed((dpsgd(0.01, 1.1, 100), ev.RandomizedResponse(0.7, k=5), ev.Staircase(2.0, dimension=3)))
    # numeric leaves in pytree order; k and dimension are static metadata, gamma=None is no leaf
    assert [float(x) for x in ev.leaves(event)] == [0.01, 1.1, 100.0, 0.7, 2.0]
    doubled = jax.tree_util.tree_map(lambda x: 2 * x, event)
    assert doubled.events[1].k == 5 and doubled.events[2].dimension == 3
    assert float(doubled.events[0].event.event.noise_multiplier) == 2.2
    assert float(doubled.events[0].count) == 200
    # different static metadata → different tree structures
    assert (jax.tree_util.tree_structure(ev.RandomizedResponse(1.0, k=2))
            != jax.tree_util.tree_structure(ev.RandomizedResponse(1.0, k=3)))


def test_events_are_frozen_and_comparable():
    e = ev.Gaussian(1.0)
    with pytest.raises(Exception):
        e.noise_multiplier = 2.0
    assert ev.Gaussian(1.0) == ev.Gaussian(1.0)
    assert ev.Composed([ev.Gaussian(1.0)]).events == (ev.Gaussian(1.0),)


def test_jit_over_an_event():
    calls = []

    @jax.jit
    def mu_squared(event):  # GDP μ² of T Poisson-free Gaussian steps, from the event's leaves
        calls.append(1)
        return event.count / event.event.noise_multiplier**2

    e1 = ev.SelfComposed(ev.Gaussian(2.0), 8)
    e2 = ev.SelfComposed(ev.Gaussian(4.0), 32)
    assert float(mu_squared(e1)) == pytest.approx(2.0)
    assert float(mu_squared(e2)) == pytest.approx(2.0)
    assert len(calls) == 1  # same structure: traced once
    batched = ev.SelfComposed(ev.Gaussian(jnp.array([1.0, 2.0])), jnp.array([1.0, 4.0]))
    np.testing.assert_allclose(np.asarray(mu_squared(batched)), [1.0, 1.0])
    # vmap over a batched event's leaves
    out = jax.vmap(lambda e: e.rate * e.event.noise_multiplier)(ev.PoissonSampled(jnp.array([0.1, 0.2]),
                                                                                    ev.Gaussian(jnp.array([3.0, 5.0]))))
    np.testing.assert_allclose(np.asarray(out), [0.3, 1.0], rtol=1e-6)


def test_grad_through_event_leaves():
    g = jax.grad(lambda e: e.event.noise_multiplier ** 2 * e.rate)(ev.PoissonSampled(0.5, ev.Gaussian(3.0)))
    assert isinstance(g, ev.PoissonSampled)
    assert float(g.rate) == pytest.approx(9.0)
    assert float(g.event.noise_multiplier) == pytest.approx(3.0)


# --------------------------------------------------------------------------------------------------
# batch_shape, map_numbers
# --------------------------------------------------------------------------------------------------


def test_batch_shape():
    assert ev.batch_shape(dpsgd()) == ()
    q = np.full((3, 1), 0.01)
    sigma = np.linspace(1.0, 2.0, 4)
    assert ev.batch_shape(dpsgd(q, sigma, 10)) == (3, 4)
    assert ev.batch_shape(ev.Composed((ev.Gaussian(sigma), ev.Laplace(np.ones((2, 1)))))) == (2, 4)
    # a personalized shuffle's budgets are a population, not a batch
    assert ev.batch_shape(ev.PersonalizedShuffled(np.ones(50), model="apes")) == ()
    assert ev.batch_shape(ev.Composed(())) == ()


def test_batch_shape_mismatch_names_the_fields():
    bad = dpsgd(np.full(3, 0.01), np.ones(4), 10)
    with pytest.raises(ValueError, match=r"rate.*\(3,\).*noise_multiplier.*\(4,\)"):
        ev.batch_shape(bad)


def test_map_numbers():
    event = ev.Composed((dpsgd(0.01, 1.1, 100), ev.PersonalizedShuffled(np.ones(3), model="gspa")))
    seen = []
    out = ev.map_numbers(event, lambda name, x: (seen.append(name), np.asarray(x) * 10)[1])
    assert sorted(seen) == ["count", "noise_multiplier", "rate"]
    assert float(out.events[0].event.rate) == pytest.approx(0.1)
    assert float(out.events[0].count) == 1000
    np.testing.assert_array_equal(out.events[1].local_epsilons, np.ones(3))  # personalized: untouched


# --------------------------------------------------------------------------------------------------
# validate
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("event", EVENTS, ids=lambda e: type(e).__name__)
def test_valid_events_validate(event):
    ev.validate(event)


@pytest.mark.parametrize(
    "event, match",
    [
        (ev.PoissonSampled(1.5, ev.Gaussian(1.0)), r"rate.{0,8} must lie in \[0\.0, 1\.0\], got 1\.5"),
        (ev.PoissonSampled(-0.1, ev.Gaussian(1.0)), r"rate.{0,8} must lie in \[0\.0, 1\.0\]"),
        (ev.PoissonSampled(np.nan, ev.Gaussian(1.0)), r"rate.{0,8} contains NaN"),
        (ev.PoissonSampled(np.array([]), ev.Gaussian(1.0)), r"rate.{0,8} is empty"),
        (ev.Gaussian(0.0), r"noise_multiplier.{0,8} must lie in \(0\.0, inf\)"),
        (ev.Gaussian(-1.0), r"noise_multiplier.{0,8} must lie in \(0\.0, inf\)"),
        (ev.Gaussian(np.array([1.0, np.nan])), r"noise_multiplier.{0,8} contains NaN"),
        (ev.Gaussian(np.inf), r"noise_multiplier.{0,8} contains inf"),
        (ev.Gaussian("1.0x"), r"noise_multiplier.{0,8} must be a real number"),
        (ev.Gaussian(True), r"noise_multiplier.{0,8} must be a real number, not a bool"),
        (ev.Laplace(0.0), r"scale.{0,8} must lie in \(0\.0, inf\)"),
        (ev.SelfComposed(ev.Gaussian(1.0), -1), r"count.{0,8} must lie in \[0\.0, inf\)"),
        (ev.SelfComposed(ev.Gaussian(1.0), 2.5), r"count.{0,8} must be an integer, got 2\.5"),
        (ev.SelfComposed(ev.Gaussian(1.0), np.array([1.0, 2.0, 3.5])), r"count.{0,8} must be an integer"),
        (ev.Staircase(0.0), r"Staircase epsilon must lie in \(0\.0, inf\)"),
        (ev.Staircase(1.0, gamma=1.5), r"Staircase gamma must lie in \[0\.0, 1\.0\]"),
        (ev.Staircase(1.0, dimension=0), r"Staircase dimension must be an integer in \[1, inf\)"),
        (ev.RandomizedResponse(-1.0), r"RandomizedResponse epsilon must lie in \(0\.0, inf\)"),
        (ev.RandomizedResponse(1.0, k=1), r"RandomizedResponse k must be an integer in \[2, inf\)"),
        (ev.ClientSampled(0.0, ev.Gaussian(1.0)), r"ClientSampled rate.{0,8} must lie in \(0\.0, 1\.0\]"),
        (ev.Shuffled(1.0, n=1), r"Shuffled n must lie in \[2\.0, inf\)"),
        (ev.Shuffled(1.0, n=10.5), r"Shuffled n must be an integer"),
        (ev.Shuffled(1.0), r"Shuffled with a uniform budget needs the number of users n"),
        (ev.Shuffled(0.0, n=10), r"Shuffled epsilon0 must lie in \(0\.0, inf\)"),
        (ev.PersonalizedShuffled(np.array([1.0]), model="gspa"), r"at least n = 2 users"),
        (ev.PersonalizedShuffled(np.ones((2, 2)), model="gspa"), r"local_epsilons must be a 1-D array"),
        (ev.PersonalizedShuffled(np.array([1.0, -1.0]), model="apes"), r"local_epsilons must lie in \(0\.0, inf\)"),
        # a nested bad number is found
        (ev.Composed((ev.Gaussian(1.0), dpsgd(2.0, 1.0, 3))), r"rate.{0,8} must lie in \[0\.0, 1\.0\]"),
        (ev.ClientSampled(0.5, dpsgd(0.1, -3.0, 3)), r"noise_multiplier.{0,8} must lie in \(0\.0, inf\)"),
    ],
)
def test_validate_errors(event, match):
    with pytest.raises(ValueError, match=match):
        ev.validate(event)


def test_noise_mechanisms_by_name():
    assert ev.noise_mechanism("gaussian", 1.1) == ev.Gaussian(1.1)
    assert ev.noise_mechanism("laplace", 2.0, dimension=9) == ev.Laplace(2.0)  # worst case: one coordinate
    assert ev.noise_mechanism("staircase", 0.5, dimension=650) == ev.Staircase(0.5, None, 650)
    norms = {name: ev.sensitivity_norm(ev.noise_mechanism(name, 1.0)) for name in ev.NOISE_MECHANISMS}
    assert norms == {"gaussian": "l2", "laplace": "l1", "staircase": "l1"}


@pytest.mark.parametrize("name", ev.NOISE_MECHANISMS)
def test_noise_family_says_which_way_is_more_private(name):
    from jaxpriv import accounting

    family = ev.noise_family(name)
    assert family.name == name and family.norm == ev.sensitivity_norm(family.event(1.0, 1))
    assert type(family.event(1.0, 1)) is family.event_type
    assert family.description.endswith(family.parameter)  # "noise multiplier σ", "Laplace scale b", …
    d = 7 if family.needs_dimension else 1
    s = np.array([0.5, 1.0])
    eps = accounting.epsilon(ev.noise_mechanism(name, s, d), 1e-5, accountant="rdp")
    assert (eps[1] < eps[0]) == family.noisier_when_larger  # the larger parameter is the more private one
    if family.needs_dimension:  # the accounting really depends on d (a 1-D curve would not be a bound)
        assert accounting.epsilon(ev.noise_mechanism(name, 1.0, 1), 1e-5, accountant="rdp") != eps[1]


@pytest.mark.parametrize("call, match", [
    (lambda: ev.noise_mechanism("exponential", 1.0), r"mechanism must be one of \('gaussian', 'laplace', 'staircase'\)"),
    (lambda: ev.noise_mechanism("staircase", 1.0, dimension=0), r"dimension must lie in \[1\.0, inf\), got 0"),
    (lambda: ev.noise_mechanism("staircase", 1.0, dimension=2.5), r"dimension must be an integer, got 2\.5"),
    (lambda: ev.sensitivity_norm(ev.RandomizedResponse(1.0, 2)), r"event must be a Gaussian, Laplace or Staircase"),
    (lambda: ev.sensitivity_norm("gaussian"), r"event must be a Gaussian, Laplace or Staircase event, got str"),
    (lambda: ev.noise_family("Gaussian"), r"mechanism must be one of \('gaussian', 'laplace', 'staircase'\)"),
    (lambda: ev.noise_family(None), r"mechanism must be one of .*, got None"),
])
def test_noise_mechanism_bad_input(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_validate_rejects_non_events():
    with pytest.raises(ValueError, match="event must be a jaxpriv.events event"):
        ev.validate(1.0)
    with pytest.raises(ValueError, match="event must be a jaxpriv.events event"):
        ev.validate(ev.SelfComposed("gaussian", 3))


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(model="foo"), r"Shuffled model must be one of \('gspa', 'apes'\)"),
        (dict(n=10, clones="weak"), r"Shuffled clones must be one of \('fmt22', 'strong'\)"),
        (dict(clones="fmt22", model="gspa"), r"either clones= .* or model="),
    ],
)
def test_shuffled_constructor_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ev.Shuffled(1.0, **kwargs)


def test_shuffled_defaults():
    assert ev.Shuffled(1.0, n=10).clones == "fmt22"
    assert not ev.Shuffled(1.0, n=10).personalized
    with pytest.warns(DeprecationWarning, match="PersonalizedShuffled"):
        p = ev.Shuffled(np.ones(3), model="apes")
    assert p.personalized and p.clones is None


def test_the_deprecated_personalized_shuffled_is_a_personalized_shuffled():
    """``Shuffled(local_epsilons, model=...)`` warns and is read exactly as :class:`PersonalizedShuffled`: the same
    batch, the same refusal by the RDP accountant, the same PLD step (clone-count tables) to the bit."""
    budgets = np.linspace(0.5, 2.0, 7)
    for model, target in (("gspa", 1.0), ("apes", None)):
        new = ev.PersonalizedShuffled(budgets, model=model, target_epsilon=target)
        with pytest.warns(DeprecationWarning, match="PersonalizedShuffled"):
            old = ev.Shuffled(budgets, model=model, target_epsilon=target)
        same = old.as_personalized()
        assert type(same) is ev.PersonalizedShuffled and (same.model, same.target_epsilon) == (model, target)
        np.testing.assert_array_equal(same.local_epsilons, budgets)
        ev.validate(old)
        assert ev.batch_shape(old) == ev.batch_shape(new) == ()
        assert ev.unsupported(old, "rdp") == ev.unsupported(new, "rdp") is not None
        assert ev.unsupported(old, "pld") is None and ev.unsupported(new, "pld") is None
        a, b = old.pld_step(3, None), new.pld_step(3, None)
        for field in ("target_epsilon", "counts", "log_weights", "dropped"):
            np.testing.assert_array_equal(np.asarray(getattr(a, field)), np.asarray(getattr(b, field)))
        assert a.a_width == b.a_width
    with pytest.warns(DeprecationWarning, match="PersonalizedShuffled"):
        both = ev.Shuffled(budgets, n=7, model="apes")
    with pytest.raises(ValueError, match=r"takes n from len\(local_epsilons\)"):
        ev.validate(both)


def test_validate_skips_traced_numbers():
    @jax.jit
    def f(sigma):
        ev.validate(ev.Gaussian(sigma))  # a tracer: unchecked, as everywhere in jaxpriv
        return sigma

    assert float(f(-1.0)) == -1.0


# --------------------------------------------------------------------------------------------------
# dp_accounting conversions
# --------------------------------------------------------------------------------------------------


def rr_p(eps, k):
    """dp_accounting's noise_parameter: probability of replacing the answer by a uniform bucket."""
    return k / (np.exp(eps) + k - 1.0)


@pytest.mark.parametrize(
    "dp_event, expected",
    [
        (dp_accounting.GaussianDpEvent(1.1), ev.Gaussian(1.1)),
        (dp_accounting.LaplaceDpEvent(0.5), ev.Laplace(0.5)),
        (dp_accounting.PoissonSampledDpEvent(0.01, dp_accounting.GaussianDpEvent(1.1)),
         ev.PoissonSampled(0.01, ev.Gaussian(1.1))),
        (dp_accounting.SelfComposedDpEvent(dp_accounting.GaussianDpEvent(2.0), 3), ev.SelfComposed(ev.Gaussian(2.0), 3)),
        (dp_accounting.ComposedDpEvent([dp_accounting.GaussianDpEvent(2.0), dp_accounting.LaplaceDpEvent(1.0)]),
         ev.Composed((ev.Gaussian(2.0), ev.Laplace(1.0)))),
        (dp_accounting.NoOpDpEvent(), ev.Composed(())),
        (dp_accounting.SelfComposedDpEvent(
            dp_accounting.PoissonSampledDpEvent(0.1, dp_accounting.LaplaceDpEvent(3.0)), 100),
         ev.SelfComposed(ev.PoissonSampled(0.1, ev.Laplace(3.0)), 100)),
    ],
    ids=lambda x: type(x).__name__,
)
def test_from_dp_accounting(dp_event, expected):
    assert ev.from_dp_accounting(dp_event) == expected
    assert ev.from_dp_accounting(expected) is expected  # jaxpriv events pass through


@pytest.mark.parametrize("eps, k", [(0.7, 2), (1.0, 5), (3.0, 10)])
def test_randomized_response_conversion(eps, k):
    p = rr_p(eps, k)
    dp_event = dp_accounting.RandomizedResponseDpEvent(p, k)
    mine = ev.from_dp_accounting(dp_event)
    assert isinstance(mine, ev.RandomizedResponse) and mine.k == k
    assert mine.epsilon == pytest.approx(eps, rel=1e-12)
    # the definition: truth w.p. 1 − p + p/k, each other bucket p/k; ε = log of their ratio
    assert mine.epsilon == pytest.approx(np.log((1 - p + p / k) / (p / k)), rel=1e-12)
    back = ev.to_dp_accounting(mine)
    assert isinstance(back, dp_accounting.RandomizedResponseDpEvent)
    assert back.num_buckets == k and back.noise_parameter == pytest.approx(p, rel=1e-12)


def test_randomized_response_conversion_rejects_degenerate_p():
    with pytest.raises(ValueError, match="noise_parameter"):
        ev.from_dp_accounting(dp_accounting.RandomizedResponseDpEvent(0.0, 2))


@pytest.mark.parametrize(
    "event",
    [
        ev.Gaussian(1.1),
        ev.Laplace(0.25),
        ev.SelfComposed(ev.PoissonSampled(0.01, ev.Gaussian(1.1)), 1000),
        ev.Composed((ev.Gaussian(2.0), ev.SelfComposed(ev.Laplace(1.0), 4), ev.RandomizedResponse(1.0, 3))),
        ev.Composed(()),
    ],
    ids=lambda e: type(e).__name__,
)
def test_to_dp_accounting_round_trip(event):
    dp_event = ev.to_dp_accounting(event)
    assert isinstance(dp_event, dp_accounting.DpEvent)
    back = ev.from_dp_accounting(dp_event)
    for a, b in zip(ev.leaves(back), ev.leaves(event)):
        assert float(a) == pytest.approx(float(b), rel=1e-12)
    assert jax.tree_util.tree_structure(back) == jax.tree_util.tree_structure(event)


def test_to_dp_accounting_types():
    e = ev.to_dp_accounting(ev.SelfComposed(ev.PoissonSampled(0.01, ev.Gaussian(1.1)), 1000))
    assert isinstance(e, dp_accounting.SelfComposedDpEvent) and e.count == 1000 and isinstance(e.count, int)
    assert isinstance(e.event, dp_accounting.PoissonSampledDpEvent) and e.event.sampling_probability == 0.01
    assert isinstance(e.event.event, dp_accounting.GaussianDpEvent) and e.event.event.noise_multiplier == 1.1
    # dp_accounting itself accepts the conversion (RDP accountant, same ε as ours within its looser bound)
    acc = dp_accounting.rdp.RdpAccountant()
    acc.compose(e)
    assert np.isfinite(acc.get_epsilon(1e-5))


@pytest.mark.parametrize(
    "dp_event",
    [
        dp_accounting.SampledWithReplacementDpEvent(100, 10, dp_accounting.GaussianDpEvent(1.0)),
        dp_accounting.SampledWithoutReplacementDpEvent(100, 10, dp_accounting.GaussianDpEvent(1.0)),
        dp_accounting.NonPrivateDpEvent(),
        dp_accounting.UnsupportedDpEvent(),
        dp_accounting.ZCDpEvent(0.5),
        # nested: the unsupported child is found
        dp_accounting.ComposedDpEvent([dp_accounting.GaussianDpEvent(1.0), dp_accounting.NonPrivateDpEvent()]),
    ],
    ids=lambda e: type(e).__name__,
)
def test_from_dp_accounting_unsupported(dp_event):
    with pytest.raises(ValueError, match="supported dp_accounting DpEvent"):
        ev.from_dp_accounting(dp_event)


def test_from_dp_accounting_rejects_other_objects():
    with pytest.raises(ValueError, match="got str"):
        ev.from_dp_accounting("gaussian")


@pytest.mark.parametrize(
    "event, match",
    [
        (ev.Staircase(1.0), "Staircase has no dp_accounting DpEvent"),
        (ev.ClientSampled(0.5, ev.Gaussian(1.0)), "ClientSampled has no dp_accounting DpEvent"),
        (ev.Shuffled(1.0, n=100), "Shuffled has no dp_accounting DpEvent"),
        (ev.Gaussian(np.array([1.0, 2.0])), r"scalar numbers, got batch shape \(2,\)"),
        (ev.Gaussian(-1.0), r"noise_multiplier.{0,8} must lie in"),
    ],
)
def test_to_dp_accounting_unsupported(event, match):
    with pytest.raises(ValueError, match=match):
        ev.to_dp_accounting(event)


def test_accounting_accepts_dp_accounting_events():
    dp_event = dp_accounting.SelfComposedDpEvent(
        dp_accounting.PoissonSampledDpEvent(0.01, dp_accounting.GaussianDpEvent(1.1)), 10_000)
    mine = ev.SelfComposed(ev.PoissonSampled(0.01, ev.Gaussian(1.1)), 10_000)
    assert accounting.epsilon(dp_event, 1e-5, accountant="rdp") == accounting.epsilon(mine, 1e-5, accountant="rdp")


# --------------------------------------------------------------------------------------------------
# accounting entry points: bad input → ValueError naming the parameter and its range (MATH §0.4)
# --------------------------------------------------------------------------------------------------

QUERIES = [
    pytest.param(lambda e, x, **kw: accounting.epsilon(e, x, **kw), id="epsilon"),
    pytest.param(lambda e, x, **kw: accounting.delta(e, x, **kw), id="delta"),
    pytest.param(lambda e, x, **kw: accounting.epsilon_interval(e, x), id="epsilon_interval"),
    pytest.param(lambda e, x, **kw: accounting.delta_interval(e, x), id="delta_interval"),
]


@pytest.mark.parametrize("query", QUERIES)
@pytest.mark.parametrize(
    "event, match",
    [
        (dpsgd(q=1.2), r"rate.{0,8} must lie in \[0\.0, 1\.0\], got 1\.2"),
        (dpsgd(q=-1e-3), r"rate.{0,8} must lie in \[0\.0, 1\.0\]"),
        (dpsgd(sigma=0.0), r"noise_multiplier.{0,8} must lie in \(0\.0, inf\), got 0\.0"),
        (dpsgd(sigma=-2.0), r"noise_multiplier.{0,8} must lie in \(0\.0, inf\)"),
        (dpsgd(steps=-1), r"count.{0,8} must lie in \[0\.0, inf\)"),
        (dpsgd(steps=10.5), r"count.{0,8} must be an integer, got 10\.5"),
        (dpsgd(q=np.nan), r"rate.{0,8} contains NaN"),
        (dpsgd(sigma=np.array([1.0, np.nan])), r"noise_multiplier.{0,8} contains NaN"),
        (dpsgd(q=np.array([])), r"rate.{0,8} is empty"),
        (dpsgd(q=np.full(3, 0.01), sigma=np.ones(4)), r"shapes do not broadcast together.*rate.*noise_multiplier"),
        (ev.Laplace(-1.0), r"scale.{0,8} must lie in \(0\.0, inf\)"),
        ("not an event", r"event must be a jaxpriv.events event"),
    ],
)
def test_accounting_bad_event(query, event, match):
    with pytest.raises(ValueError, match=match):
        query(event, 0.5, accountant="rdp")


@pytest.mark.parametrize("accountant", ["rdp", "pld", "best"])
@pytest.mark.parametrize("delta, match", [
    (0.0, r"delta must lie in \(0\.0, 1\.0\), got 0\.0"),
    (1.0, r"delta must lie in \(0\.0, 1\.0\), got 1\.0"),
    (-1e-5, r"delta must lie in \(0\.0, 1\.0\)"),
    (np.nan, r"delta contains NaN"),
    (np.array([]), r"delta is empty"),
    (np.array([1e-5, 2.0]), r"delta must lie in \(0\.0, 1\.0\), got 2\.0"),
])
def test_accounting_bad_delta(accountant, delta, match):
    with pytest.raises(ValueError, match=match):
        accounting.epsilon(dpsgd(), delta, accountant=accountant)
    with pytest.raises(ValueError, match=match):
        accounting.epsilon_interval(dpsgd(), delta)


@pytest.mark.parametrize("accountant", ["rdp", "pld", "best"])
@pytest.mark.parametrize("epsilon, match", [
    (-0.5, r"epsilon must lie in \[0\.0, inf\), got -0\.5"),
    (np.nan, r"epsilon contains NaN"),
    (np.inf, r"epsilon contains inf"),
    (np.array([]), r"epsilon is empty"),
])
def test_accounting_bad_epsilon(accountant, epsilon, match):
    with pytest.raises(ValueError, match=match):
        accounting.delta(dpsgd(), epsilon, accountant=accountant)
    with pytest.raises(ValueError, match=match):
        accounting.delta_interval(dpsgd(), epsilon)


def test_accounting_value_shape_mismatch():
    with pytest.raises(ValueError, match=r"shapes do not broadcast together.*delta \(4,\)"):
        accounting.epsilon(dpsgd(q=np.full(3, 0.01)), np.full(4, 1e-5), accountant="rdp")
    with pytest.raises(ValueError, match=r"shapes do not broadcast together.*epsilon \(2,\)"):
        accounting.delta_interval(dpsgd(q=np.full(3, 0.01)), np.ones(2))


@pytest.mark.parametrize("accountant", ["PLD", "pld ", "moments", "", None, 3])
def test_unknown_accountant(accountant):
    with pytest.raises(ValueError, match=r"accountant must be one of \('best', 'pld', 'rdp'\)"):
        accounting.epsilon(dpsgd(), 1e-5, accountant=accountant)
    with pytest.raises(ValueError, match=r"accountant must be one of"):
        accounting.delta(dpsgd(), 1.0, accountant=accountant)


@pytest.mark.parametrize(
    "event, accountant, match",
    [
        (ev.Staircase(1.0, dimension=3), "pld", r"PLD accountant cannot interpret.*Staircase with dimension > 1"),
        (ev.SelfComposed(ev.Staircase(1.0, dimension=3), 10), accounting.PLD(), r"PLD accountant.*Staircase"),
        (ev.PoissonSampled(0.1, ev.ClientSampled(0.5, ev.Gaussian(1.0))), "pld",
         r"PLD accountant cannot interpret.*ClientSampled inside PoissonSampled"),
        (ev.Composed((ev.Shuffled(1.0, n=100), ev.PoissonSampled(0.1, ev.ClientSampled(0.5, ev.Gaussian(1.0))))),
         "pld", r"PLD accountant.*ClientSampled"),
        (ev.PersonalizedShuffled(np.ones(10), model="gspa"), "rdp", r"RDP accountant cannot interpret.*personalized"),
        # neither accountant interprets both parts: "best" names what RDP cannot do
        (ev.Composed((ev.PersonalizedShuffled(np.ones(10), model="apes"),
                      ev.PoissonSampled(0.1, ev.ClientSampled(0.5, ev.Gaussian(1.0))))), "best",
         r"RDP accountant cannot interpret.*personalized"),
        (ev.Composed((ev.Gaussian(1.0), ev.PersonalizedShuffled(np.ones(10), model="gspa"))), accounting.RDP(),
         r"RDP accountant cannot interpret.*personalized"),
    ],
)
def test_accountant_cannot_interpret(event, accountant, match):
    with pytest.raises(ValueError, match=match):
        accounting.epsilon(event, 1e-5, accountant=accountant)
    with pytest.raises(ValueError, match=match):
        accounting.delta(event, 1.0, accountant=accountant)


@pytest.mark.parametrize("event", [ev.Staircase(1.0, dimension=3),
                                   ev.PoissonSampled(0.1, ev.ClientSampled(0.5, ev.Gaussian(1.0)))])
def test_interval_needs_pld(event):
    with pytest.raises(ValueError, match="PLD accountant cannot interpret"):
        accounting.epsilon_interval(event, 1e-5)
    with pytest.raises(ValueError, match="PLD accountant cannot interpret"):
        accounting.delta_interval(event, 1.0)


@pytest.mark.parametrize("discretization", [0.0, -1e-4, 2.0, np.nan])
def test_bad_discretization(discretization):
    with pytest.raises(ValueError, match="discretization"):
        accounting.PLD(discretization)
    with pytest.raises(ValueError, match="discretization"):
        accounting.epsilon_interval(dpsgd(), 1e-5, discretization=discretization)


@pytest.mark.parametrize("tolerance", [0.0, -0.01, 0.2, np.nan, np.inf])
def test_bad_tolerance(tolerance):
    """The relative width asked of a PLD interval lies in (0, 0.1]; the error names it and its range."""
    with pytest.raises(ValueError, match=r"tolerance must lie in \(0\.0, 0\.1\]"):
        accounting.PLD(tolerance=tolerance)
    for interval in (accounting.epsilon_interval, accounting.delta_interval):
        with pytest.raises(ValueError, match="tolerance"):
            interval(dpsgd(), 1e-5, tolerance=tolerance)


@pytest.mark.parametrize("orders, match", [([1.0, 2.0], r"orders must lie in \(1\.0, inf\)"),
                                           ([], r"orders is empty"),
                                           ([[2.0, 3.0]], r"orders must be a 1-D array")])
def test_bad_rdp_orders(orders, match):
    with pytest.raises(ValueError, match=match):
        accounting.epsilon(dpsgd(), 1e-5, accountant=accounting.RDP(orders=orders))
