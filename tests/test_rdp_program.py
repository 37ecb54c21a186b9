"""The subsampled-Gaussian curve is one small program whatever the orders (issue 28): its size does not grow
with the grid, none of the grid is a constant in it, and grids of the same shape share it. DP-SGD's ε by both
conversions of that curve (``jaxpriv epsilon``'s two RDP rows) is one program too, with the bits of the
separate functions."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxpriv
from jaxpriv import _saved_programs, rdp
from jaxpriv.accounting.dpsgd import dpsgd_epsilon_conversions
from jaxpriv.rdp import program as series_program
from jaxpriv._numerics import float64, kernel_jit

_lowered = [0]
_lowered_names = []


def _count(name, seconds, **kwargs):
    if name.endswith("jaxpr_to_mlir_module_duration"):
        _lowered[0] += 1
        _lowered_names.append(kwargs.get("fun_name"))


jax.monitoring.register_event_duration_secs_listener(_count)


def test_the_program_does_not_grow_with_the_grid():
    """166 orders up to 1024 and 6 orders up to 32: the same loops over chunks; the orders' tables enter as
    arguments of the curve's own program (here, traced inside another jit, as constants of that one)."""
    with float64():
        q, sigma = jnp.full((1,), 0.01), jnp.full((1,), 1.1)
        sizes = []
        for orders in (rdp.DEFAULT_ORDERS, np.array([1.5, 2.0, 4.0, 8.0, 16.0, 32.0])):
            plan = series_program._curve_plan_arrays(tuple(float(a) for a in orders))
            sizes.append(len(series_program._curve_jit.lower(q, sigma, plan).as_text()))
    assert max(sizes) < 150_000  # the old program: 1.7 MB for the default grid, mostly constants
    assert max(sizes) / min(sizes) < 1.2, sizes


def test_grids_of_the_same_shape_share_one_program():
    a = rdp.subsampled_gaussian([0.01, 0.02], 1.1, [1.5, 2.0, 3.0, 8.0, 32.5])  # compiles (or reads) the program
    before = _lowered[0]
    b = rdp.subsampled_gaussian([0.01, 0.02], 1.1, [1.25, 2.0, 4.0, 7.0, 32.25])  # other orders, same buckets
    assert _lowered[0] == before
    assert np.all(np.isfinite(a)) and np.all(np.isfinite(b))
    np.testing.assert_allclose(b[:, 1], a[:, 1], rtol=0, atol=0)  # α = 2 in both grids: the same bits


def test_all_chunks_at_once_gives_the_loops_bits():
    """An accelerator evaluates every chunk at once (gathers and segment sums) where the CPU loops over them;
    checked here on the CPU by forcing it: the same values, to the bit."""
    rng = np.random.default_rng(3)
    q, sigma = 10 ** rng.uniform(-8, 0, 40), 10 ** rng.uniform(np.log10(0.3), 2, 40)
    key = tuple(float(a) for a in rdp.DEFAULT_ORDERS)
    with float64():
        looped = np.asarray(series_program._curve_jit(jnp.asarray(q), jnp.asarray(sigma), rdp.curve_tables(key)))
        try:
            series_program._CURVE_LOOPS = False
            # compiled as the looped program is (kernel_jit's options): the comparison is of the two chunk
            # strategies, not of XLA's code generators
            at_once = np.asarray(kernel_jit(series_program.exact_curve)(jnp.asarray(q), jnp.asarray(sigma),
                                                                        rdp.curve_tables(key)))
        finally:
            series_program._CURVE_LOOPS = None
    np.testing.assert_array_equal(at_once, looped)


# --------------------------------------------------------------------------------------------------
# DP-SGD's ε by both conversions of one curve, in one program (issue 28: jaxpriv epsilon's RDP rows)
# --------------------------------------------------------------------------------------------------


def test_both_conversions_in_one_program_have_the_separate_functions_bits():
    """dpsgd_epsilon_conversions computes the curve once and converts it both ways in one program: on a
    broadcast grid (q = 0 and q = 1 included, integer and fractional T, δ per row), with and without the
    search between orders, the improved pair is bit for bit dpsgd_epsilon's and the classic pair
    rdp.to_epsilon's of the composed curve (whose product T·ρ(α) must not be fused into the classic
    subtraction: see jaxpriv.rdp.dpsgd._conversions). A first call lowers that one program and nothing else.
    (A single setting, as ``jaxpriv epsilon`` asks, is checked against a scalar δ in test_compiled_programs.py.)"""
    rng = np.random.default_rng(28)
    q = np.concatenate([[0.0, 1.0], 10 ** rng.uniform(-4, -0.5, 38)])[:, None]
    sigma = np.array([0.6, 1.1, 3.0])
    steps = np.round(10 ** rng.uniform(0, 5, (40, 1))) + np.where(rng.uniform(size=(40, 1)) < 0.3, 0.5, 0.0)
    delta, orders = 10 ** rng.uniform(-10, -3, (40, 1)), rdp.DEFAULT_ORDERS
    jax.clear_caches()  # whatever ran before, this call's programs are lowered here
    before = len(_lowered_names)
    eps, order, eps_classic, order_classic = dpsgd_epsilon_conversions(q, sigma, steps, delta, progress=False)
    # one program, lowered once (twice where it is exported first: jaxpriv._saved_programs)
    lowered = _lowered_names[before:]
    assert set(lowered) == {"jit(_dpsgd_conversions_program)"}, lowered
    assert len(lowered) <= (2 if _saved_programs.enabled() else 1), lowered
    assert eps.shape == order.shape == eps_classic.shape == order_classic.shape == (40, 3)
    want_eps, want_order = jaxpriv.dpsgd_epsilon(q, sigma, steps, delta, return_order=True, progress=False)
    curve = rdp.compose(rdp.subsampled_gaussian(q, sigma, orders), counts=[steps[..., None]])
    want_classic, want_order_classic = rdp.to_epsilon(curve, orders, delta, conversion="classic")
    np.testing.assert_array_equal(eps, want_eps)
    np.testing.assert_array_equal(order, want_order)
    np.testing.assert_array_equal(eps_classic, want_classic)
    np.testing.assert_array_equal(order_classic, want_order_classic)
    assert np.all(eps <= eps_classic) and np.all(eps_classic[0] == 0.0)  # q = 0: no privacy loss
    refined = dpsgd_epsilon_conversions(q, sigma, steps, delta, refine=True, progress=False)
    want_refined = jaxpriv.dpsgd_epsilon(q, sigma, steps, delta, return_order=True, refine=True, progress=False)
    np.testing.assert_array_equal(refined[0], want_refined[0])
    np.testing.assert_array_equal(refined[1], want_refined[1])
    np.testing.assert_array_equal(refined[2], eps_classic)  # the search is the improved conversion's only
    np.testing.assert_array_equal(refined[3], order_classic)
    assert np.all(refined[0] <= eps)


def test_both_conversions_under_jit_and_grad():
    """Traced inputs go into the caller's program (no chunking): the same ε as an eager call, and a gradient."""
    orders = np.array([1.5, 2.0, 3.0, 8.0, 32.0])

    def both(sigma):
        return dpsgd_epsilon_conversions(0.01, sigma, 1000.0, 1e-5, orders=orders)

    with float64():
        traced = jax.jit(both)(jnp.float64(1.1))
        slope = float(jax.grad(lambda s: both(s)[2])(jnp.float64(1.1)))
    eager = both(1.1)
    for got, want in zip(traced, eager):
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-14)
    assert np.isfinite(slope) and slope < 0  # more noise, less ε


@pytest.mark.parametrize("kwargs, name", [
    (dict(q=1.5), "q"), (dict(sigma=0.0), "sigma"), (dict(steps=-1.0), "steps"), (dict(delta=1.0), "delta"),
    (dict(orders=[0.5, 2.0]), "orders"), (dict(refine="yes"), "refine"),
    (dict(q=np.full(3, 0.01), sigma=np.ones(2)), "shapes"),
])
def test_both_conversions_reject_bad_input_naming_it(kwargs, name):
    args = {"q": 0.01, "sigma": 1.1, "steps": 1000.0, "delta": 1e-5, **kwargs}
    with pytest.raises(ValueError, match=name):
        dpsgd_epsilon_conversions(**args)
