"""The subsampled-Gaussian curve is one small program whatever the orders (issue 28): its size does not grow
with the grid, none of the grid is a constant in it, and grids of the same shape share it."""

import jax
import jax.numpy as jnp
import numpy as np

from jaxpriv import rdp
from jaxpriv.rdp import program as series_program
from jaxpriv._numerics import float64, kernel_jit

_lowered = [0]


def _count(name, seconds, **kwargs):
    if name.endswith("jaxpr_to_mlir_module_duration"):
        _lowered[0] += 1


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
