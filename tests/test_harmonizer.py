"""Tests for jaxpriv.calibrate.harmonizer (UDP-FL Harmonizer, MATH §5): every client's calibrated scale
meets its target on the safe side and within 1e-6 of it, recomputed independently through the public
curves; the Gaussian matches jaxpriv.calibrate.noise_multiplier; monotonicity; shapes; bad input.

One small order grid keeps compilation short (each mechanism's solver compiles once per grid and
group size)."""

import jax
import numpy as np
import pytest

from jaxpriv import calibrate, rdp
from jaxpriv.calibrate import harmonizer
from jaxpriv.mechanisms import staircase

ORDERS = np.array([1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 16.0, 24.0, 32.0, 48.0, 64.0, 128.0])
DELTA = 1e-5
# (target ε, q, T) per client, the same three for every mechanism
SETTINGS = [(0.5, 0.01, 1000.0), (2.0, 0.1, 100.0), (8.0, 1.0, 10.0)]
MECHS = np.repeat(harmonizer.MECHANISMS, len(SETTINGS))
TARGET, RATE, ROUNDS = (np.tile(np.array(col), 3) for col in zip(*SETTINGS))


@pytest.fixture(autouse=True)
def x64_stays_off():
    assert not jax.config.jax_enable_x64
    yield
    assert not jax.config.jax_enable_x64


def public_epsilon(mechanism, scale, q, rounds, delta=DELTA):
    """ε of T rounds through the public API only: the curves, rdp.subsampled and rdp.to_epsilon."""
    if mechanism == "gaussian":
        step = rdp.subsampled_gaussian(q, scale, ORDERS)
    elif mechanism == "laplace":
        step = rdp.subsampled(q, lambda a: rdp.laplace(scale, a), ORDERS)
    else:
        step = rdp.subsampled(q, lambda a: staircase.rdp(scale, None, a), ORDERS)
    return float(rdp.to_epsilon(rounds * np.asarray(step), ORDERS, delta)[0])


_cache = {}


def solved():
    if "all" not in _cache:
        _cache["all"] = harmonizer.harmonize(MECHS, TARGET, DELTA, RATE, ROUNDS, ORDERS)
    return _cache["all"]


def test_every_client_meets_its_target_within_1e6():
    scale, achieved = solved()
    assert scale.shape == achieved.shape == (9,)
    assert np.all(achieved <= TARGET) and np.all(achieved >= TARGET * (1 - 1e-6)), achieved / TARGET


@pytest.mark.parametrize("i", range(9), ids=[f"{m}-eps={t:g}-q={q:g}" for m, t, q in zip(MECHS, TARGET, RATE)])
def test_independent_recomputation_and_root_side(i):
    """Recomputed through the public curves, ε(scale) equals the reported value and is ≤ target, and a
    scale 1e-6 less private overspends: the scale is the conservative side of the root."""
    scale, achieved = solved()
    m = MECHS[i]
    again = public_epsilon(m, scale[i], RATE[i], ROUNDS[i])
    assert again == pytest.approx(achieved[i], rel=1e-12) and again <= TARGET[i]
    less_private = scale[i] * (1 + 1e-6) if m == "staircase" else scale[i] * (1 - 1e-6)
    assert public_epsilon(m, less_private, RATE[i], ROUNDS[i]) > TARGET[i]


def test_gaussian_matches_calibrate_noise_multiplier():
    target = np.array([0.5, 2.0, 8.0, 1.0])
    q = np.array([0.01, 0.1, 1.0, 1.0])
    rounds = np.array([1000.0, 100.0, 10.0, 1.0])
    sigma, _ = harmonizer.harmonize("gaussian", target, DELTA, q, rounds, ORDERS)
    want = calibrate.noise_multiplier(target, q, rounds, DELTA, orders=ORDERS)
    np.testing.assert_allclose(sigma, want, rtol=1e-9)


def test_laplace_and_staircase_with_full_participation_use_the_plain_curves():
    """q = 1: no subsampling, so ε is the conversion of T·ρ of the mechanism itself."""
    mechs = np.array([["laplace"], ["staircase"]])
    scale, eps = harmonizer.harmonize(mechs, np.array([1.0, 3.0]), DELTA, 1.0, 5, ORDERS)
    plain_b = np.asarray(rdp.to_epsilon(5 * rdp.laplace(scale[0], ORDERS), ORDERS, DELTA)[0])
    plain_s = np.asarray(rdp.to_epsilon(5 * staircase.rdp(scale[1], None, ORDERS), ORDERS, DELTA)[0])
    np.testing.assert_allclose(plain_b, eps[0], rtol=1e-12)
    np.testing.assert_allclose(plain_s, eps[1], rtol=1e-12)
    assert np.all(eps <= [1.0, 3.0]) and np.all(eps >= np.array([1.0, 3.0]) * (1 - 1e-6))


def test_staircase_epsilon_increases_with_its_step_epsilon():
    """The solver assumes a single sign change: ε(ε₀) with γ*(ε₀) is increasing."""
    steps = np.geomspace(1e-3, 20.0, 60)
    eps = [public_epsilon("staircase", s, 0.05, 200) for s in steps]
    assert np.all(np.diff(eps) > 0)


def test_monotone_in_target_rounds_and_rate():
    mechs = np.array(harmonizer.MECHANISMS)[:, None]
    by_target, _ = harmonizer.harmonize(mechs, np.array([0.5, 1.0, 2.0, 4.0]), DELTA, 0.1, 100, ORDERS)
    by_rounds, _ = harmonizer.harmonize(mechs, 2.0, DELTA, 0.1, np.array([10.0, 100.0, 1000.0, 5000.0]), ORDERS)
    by_rate, _ = harmonizer.harmonize(mechs, 2.0, DELTA, np.array([0.01, 0.05, 0.2, 1.0]), 100, ORDERS)
    noise_up = np.array([1.0, 1.0, -1.0])[:, None]  # σ, b grow with more noise; the staircase ε₀ shrinks
    assert np.all(np.diff(by_target, axis=1) * noise_up < 0)
    assert np.all(np.diff(by_rounds, axis=1) * noise_up > 0)
    assert np.all(np.diff(by_rate, axis=1) * noise_up > 0)


def test_broadcast_grouping_equals_one_client_at_a_time():
    mechs = np.array(["staircase", "gaussian", "laplace"])
    scale, eps = harmonizer.harmonize(mechs, np.array([[1.0], [3.0]]), DELTA, 0.1, 100, ORDERS)
    assert scale.shape == eps.shape == (2, 3)
    one = harmonizer.harmonize("laplace", 3.0, DELTA, 0.1, 100, ORDERS)
    assert scale[1, 2] == pytest.approx(float(one.scale), rel=1e-13)


def test_tiny_target_lands_on_the_total_variation_jump():
    """ε(scale) drops to 0 once δ ≥ √(1 − e^{−ρ}) (the TV bound of rdp.to_epsilon): a target below every
    ε the conversion gives above that point is met there, with ε = 0, and a slightly smaller scale fails."""
    scale, eps = harmonizer.harmonize(["laplace", "gaussian"], 1e-4, DELTA, 0.1, 10, ORDERS)
    assert np.all(np.isfinite(scale)) and np.all(eps == 0.0)
    for m, s in zip(("laplace", "gaussian"), scale):
        assert public_epsilon(m, s, 0.1, 10) == 0.0 and public_epsilon(m, s * (1 - 1e-6), 0.1, 10) > 1e-4


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(mechanisms="cauchy"), "mechanisms"),
        (dict(mechanisms=["gaussian", "exponential"]), "mechanisms"),
        (dict(mechanisms=[]), "mechanisms"),
        (dict(epsilon=0.0), "epsilon"),
        (dict(epsilon=-1.0), "epsilon"),
        (dict(delta=0.0), "delta"),
        (dict(delta=1.0), "delta"),
        (dict(q=0.0), "q"),
        (dict(q=1.5), "q"),
        (dict(rounds=0.5), "rounds"),
        (dict(rounds=2.5), "rounds must be an integer"),
        (dict(mechanisms=["gaussian", "laplace"], epsilon=[1.0, 2.0, 3.0]), "shapes"),
        (dict(orders=[0.5, 2.0]), "orders"),
    ],
)
def test_bad_input_raises_value_error(kwargs, match):
    args = dict(mechanisms="laplace", epsilon=1.0, delta=DELTA, q=0.1, rounds=10, orders=ORDERS)
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        harmonizer.harmonize(**args)


def test_staircase_dimension_uses_the_l1_product_curve():
    orders = np.array([2.0, 4.0, 8.0, 16.0, 32.0])
    one = harmonizer.harmonize("staircase", 2.0, 1e-5, q=0.1, rounds=50, orders=orders)
    many = harmonizer.harmonize("staircase", 2.0, 1e-5, q=0.1, rounds=50, orders=orders, dimension=1000)
    assert float(many.scale) < float(one.scale)  # spreading the shift costs more: a smaller ε₀ per step
    # the achieved ε, recomputed from the public pieces, is within the target
    eps0 = float(many.scale)
    curve = rdp.subsampled(0.1, lambda a: staircase.rdp_l1(eps0, 1000, orders=a), orders)
    direct = float(rdp.to_epsilon(50 * curve, orders, 1e-5)[0])
    assert direct <= 2.0 and direct == pytest.approx(float(many.epsilon), rel=1e-9)
    with pytest.raises(ValueError, match="dimension"):
        harmonizer.harmonize("staircase", 2.0, 1e-5, dimension=0)


@pytest.mark.parametrize("chunk_size", [0, -3, 2.5, True])
def test_bad_chunk_size(chunk_size):
    with pytest.raises(ValueError, match="chunk_size"):
        harmonizer.harmonize("gaussian", 1.0, 1e-5, q=0.1, rounds=10, orders=[2.0, 8.0], chunk_size=chunk_size)
