"""Tiered compilation of the numerical kernels (jaxpriv._tiers): a structure's first calls run a program
compiled at XLA's optimisation level 0, its ninth and later calls (and a sweep's large chunks) the optimised
one, which is compiled once."""

import math
import os
import subprocess
import sys

import jax
import numpy as np
import pytest

from jaxpriv import _batching, _tiers, accounting, events
from jaxpriv._numerics import float64, kernel_jit

pytestmark = pytest.mark.skipif(not _tiers.QUICK_OPTIONS or jax.default_backend() != "cpu",
                                reason="tiering is for jaxlib 0.10 on the CPU")

_compiles = [0]


def _count(name, seconds, **kwargs):
    if name.endswith("backend_compile_duration"):
        _compiles[0] += 1


jax.monitoring.register_event_duration_secs_listener(_count)


def _multiply_add(a, b, c, scale):
    return a * b * scale + c


@pytest.fixture(autouse=True)
def _x64():
    with float64():  # float64 arrays, compared with numpy's
        yield


def _fused(out, a, b, c, scale=1.0):
    """Whether ``out`` differs from numpy's a·b·scale + c, each operation rounded: LLVM fuses the last
    multiplication and the addition into one FMA (one rounding) at level 3, not at level 0."""
    return not np.array_equal(np.asarray(out), a * b * scale + c)


def test_a_structure_runs_quick_eight_times_then_optimised_once():
    kernel = kernel_jit(_multiply_add, static_argnames="scale", tiered=True)
    rng = np.random.default_rng(0)
    a, b, c = (rng.standard_normal(4096) for _ in range(3))
    compiles, ups = _compiles[0], _tiers.tier_up_compiles()
    fused = []
    for i in range(_tiers.TIER_UP_CALLS + 3):
        fused.append(_fused(kernel(a, b, c, scale=1.0), a, b, c))
        if i == 0:
            assert _compiles[0] - compiles == 1  # the quick program
    assert fused == [False] * _tiers.TIER_UP_CALLS + [True] * 3
    assert _compiles[0] - compiles == 2 and _tiers.tier_up_compiles() - ups == 1
    # another static value, another shape: other structures, quick again; the same ones stay optimised
    assert not _fused(kernel(a, b, c, scale=3.0), a, b, c, scale=3.0)
    assert not _fused(kernel(a[:100], b[:100], c[:100], scale=1.0), a[:100], b[:100], c[:100])
    assert _fused(kernel(a + 1.0, b, c, scale=1.0), a + 1.0, b, c)
    assert _compiles[0] - compiles == 4 and _tiers.tier_up_compiles() - ups == 1


def test_python_numbers_are_one_structure_whatever_their_values():
    kernel = kernel_jit(_multiply_add, static_argnames="scale", tiered=True)
    tiers = kernel._tiers
    keys = {tiers._structure((x, 2.0, 0.5), {"scale": 1.0}) for x in (0.1, 0.2, 3.0)}
    assert len(keys) == 1
    assert tiers._structure((0.1, 2.0, 0.5), {"scale": 3.0}) not in keys  # a static value is structure
    assert tiers._structure((np.float32(0.1), 2.0, 0.5), {"scale": 1.0}) not in keys


def test_a_sweeps_large_chunks_run_optimised_at_once():
    kernel = kernel_jit(lambda a, b, c: (a * b + c,), tiered=True)
    rng = np.random.default_rng(1)
    a, b, c = (rng.standard_normal(300) for _ in range(3))
    ups = _tiers.tier_up_compiles()
    (out,) = _batching.map_chunked(kernel, [a, b, c], chunk_size=256, progress=False)
    assert _fused(out[:256], a[:256], b[:256], c[:256])  # one full chunk of 256 settings: optimised
    with _tiers.optimised():
        assert _fused(kernel(a, b, c)[0], a, b, c)
    assert not _fused(kernel(a, b, c)[0], a, b, c)  # outside the scope: quick
    assert _tiers.tier_up_compiles() == ups  # no tier-up: the sweep asked for the optimised form


def test_the_pld_evaluation_runs_optimised_at_once_from_a_large_grid_or_a_large_query(monkeypatch):
    """jaxpriv.accounting.pld: an evaluation runs inside optimised() from its first call on a grid of
    _OPTIMISED_FROM nodes or more, or where the query's rows on that grid times its nodes reach
    _OPTIMISED_WORK (a batch); a single question below both does not (the program itself is not run here:
    the call is stopped where it would start)."""
    from jaxpriv.accounting import pld

    default = pld._OPTIMISED_FROM
    seen = []

    class Stop(Exception):
        pass

    def evaluate(*args, N, **kwargs):
        seen.append((N, args[-2].shape[0], getattr(_tiers._local, "depth", 0) > 0))
        raise Stop

    monkeypatch.setattr(pld.pld_grid, "evaluate", evaluate)
    one = events.SelfComposed(events.PoissonSampled(0.01, events.Gaussian(1.1)), 1000)
    batch = events.SelfComposed(events.PoissonSampled(np.full(40, 0.01), events.Gaussian(1.1)), 1000)
    for work in (math.inf, pld._OPTIMISED_WORK):
        monkeypatch.setattr(pld, "_OPTIMISED_WORK", work)
        for event in (one, batch):
            for threshold in (1 << 30, 1 << 10):
                monkeypatch.setattr(pld, "_OPTIMISED_FROM", threshold)
                with pytest.raises(Stop):
                    accounting.epsilon(event, 1e-5, accountant="pld")
    # the same grid each time, below the default threshold and above the lowered one; the batch in one call
    assert len({N for N, _, _ in seen}) == 1 and 1 << 10 <= seen[0][0] < default
    assert seen[2][1] > seen[0][1] and seen[2][1] * seen[2][0] >= pld._OPTIMISED_WORK > seen[0][1] * seen[0][0]
    # by the grid alone; then the batch's work takes the optimised form whatever the grid
    assert [optimised for _, _, optimised in seen] == [False, True, False, True, False, True, True, True]


def test_both_tiers_answer_alike():
    """The PLD ε and δ of DP-SGD from the quick and the optimised programs: equal to 1e-9 relative (they
    differ only where LLVM fused a multiplication and an addition)."""
    event = events.SelfComposed(events.PoissonSampled(0.03, events.Gaussian(1.2)), 300)
    for query, value in ((accounting.epsilon, 1e-5), (accounting.delta, 1.0)):
        quick = float(query(event, value, accountant="pld"))
        with _tiers.optimised():
            full = float(query(event, value, accountant="pld"))
        assert quick == pytest.approx(full, rel=1e-9)


def test_an_untiered_kernel_compiles_one_form():
    kernel = kernel_jit(_multiply_add, static_argnames="scale")
    a, b, c = (np.random.default_rng(2).standard_normal(64) for _ in range(3))
    compiles = _compiles[0]
    assert all(_fused(kernel(a, b, c, scale=1.0), a, b, c) for _ in range(_tiers.TIER_UP_CALLS + 2))
    assert _compiles[0] - compiles == 1


def test_the_environment_variable_turns_tiering_off():
    code = "from jaxpriv import _tiers; print(bool(_tiers.QUICK_OPTIONS), bool(_tiers.FULL_OPTIONS))"
    for value, expected in (("0", "False False"), ("1", "True True")):
        env = {**os.environ, "JAXPRIV_QUICK_TIER": value}
        env.pop("JAXPRIV_KERNEL_XLA_DEFAULTS", None)
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
        assert out.stdout.split() == expected.split()


def test_reset_makes_a_structure_quick_again():
    kernel = kernel_jit(_multiply_add, static_argnames="scale", tiered=True)
    a, b, c = (np.random.default_rng(3).standard_normal(64) for _ in range(3))
    for _ in range(_tiers.TIER_UP_CALLS + 1):
        kernel(a, b, c, scale=1.0)
    assert _fused(kernel(a, b, c, scale=1.0), a, b, c)
    compiles = _compiles[0]
    _tiers.reset()
    assert not _fused(kernel(a, b, c, scale=1.0), a, b, c) and _compiles[0] == compiles  # quick, compiled already
