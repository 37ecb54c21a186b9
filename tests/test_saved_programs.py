"""Saved programs (jaxpriv._saved_programs): a kernel exported by one call answers a later call without its
Python being traced, bit for bit as the ordinary jit; calls that cannot be keyed safely take the ordinary
path."""

import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxpriv import _saved_programs, accounting, events
from jaxpriv._numerics import float64, kernel_jit
from jaxpriv.accounting import pld_grid


def _forget_this_process():
    """What a new process knows: nothing in memory, everything on disk."""
    _saved_programs._MEMORY.clear()
    jax.clear_caches()


def _folder():
    return os.path.join(jax.config.jax_compilation_cache_dir, "jaxpriv-programs")


def test_a_saved_program_answers_without_tracing_and_bit_for_bit(monkeypatch):
    # A setting of its own (T, rate) so that its grid is new to this worker.
    event = events.SelfComposed(events.PoissonSampled(0.0173, events.Gaussian(1.23)), 1377)
    monkeypatch.setenv("JAXPRIV_SAVED_PROGRAMS", "0")
    ordinary = accounting.epsilon_interval(event, 1e-6)
    monkeypatch.setenv("JAXPRIV_SAVED_PROGRAMS", "1")
    assert _saved_programs.enabled()
    _forget_this_process()
    first = accounting.epsilon_interval(event, 1e-6)  # exported here, or read from an earlier run's file

    rows_traced = []
    original_row = pld_grid._row
    monkeypatch.setattr(pld_grid, "_row", lambda *a, **k: rows_traced.append(1) or original_row(*a, **k))
    _forget_this_process()
    lapack_setups = []
    hook = getattr(_saved_programs._jax_export, _saved_programs._HOOK)
    monkeypatch.setattr(_saved_programs._jax_export, _saved_programs._HOOK,
                        lambda platforms: lapack_setups.append(platforms) or hook(platforms))
    again = accounting.epsilon_interval(event, 1e-6)
    assert rows_traced == []  # the PLD program's Python did not run: it came from disk
    assert lapack_setups == []  # nor jax.export's LAPACK set-up (the PLD programs call no LAPACK routine)
    assert tuple(map(float, again)) == tuple(map(float, first)) == tuple(map(float, ordinary))

    monkeypatch.setenv("JAXPRIV_SAVED_PROGRAMS", "0")  # the switch: the ordinary path traces again
    jax.clear_caches()
    assert tuple(map(float, accounting.epsilon_interval(event, 1e-6))) == tuple(map(float, ordinary))
    assert rows_traced


def test_the_rdp_dpsgd_programs_are_saved_and_answer_bit_for_bit(monkeypatch):
    """dpsgd_epsilon's program and dpsgd_epsilon_conversions' (the command line's) are saved: a later process
    answers without tracing the RDP curve, with the ordinary jit's bits."""
    from jaxpriv.accounting.dpsgd import dpsgd_epsilon, dpsgd_epsilon_conversions
    from jaxpriv.rdp import dpsgd as rdp_dpsgd

    def ask():  # settings of their own, so that the structures may be new to this worker's files
        return (tuple(map(float, dpsgd_epsilon([0.0137, 0.021], 1.17, 1311, 1e-6))),
                tuple(map(float, np.ravel(dpsgd_epsilon_conversions(0.0137, 1.17, 1311, 1e-6)))))

    monkeypatch.setenv("JAXPRIV_SAVED_PROGRAMS", "0")
    ordinary = ask()
    monkeypatch.setenv("JAXPRIV_SAVED_PROGRAMS", "1")
    _forget_this_process()
    first = ask()  # exported here, or read from an earlier run's file
    curves_traced = []
    original = rdp_dpsgd.exact_curve
    monkeypatch.setattr(rdp_dpsgd, "exact_curve", lambda *a, **k: curves_traced.append(1) or original(*a, **k))
    _forget_this_process()
    again = ask()
    assert curves_traced == []  # neither program's Python ran: both came from disk
    assert again == first == ordinary


def test_a_program_that_calls_linear_algebra_is_recognised_by_its_serialized_module():
    """What _load_or_export reads to keep jax.export's LAPACK set-up: the custom calls' names are in the
    serialized module's bytes (an inverse calls LAPACK, an FFT does not). (A name here that held "lapack"
    would be in the module too, as a source location: a false positive keeps the set-up, which is safe.)"""
    with float64():
        inverse = jax.export.export(jax.jit(jnp.linalg.inv))(jnp.eye(3))
        fft = jax.export.export(jax.jit(jnp.fft.rfft))(jnp.ones(8))
    assert _saved_programs._calls_lapack(inverse) and not _saved_programs._calls_lapack(fft)


def test_keys_separate_what_changes_the_program():
    kernel = _saved_programs.Kernel(pld_grid._log_mgf, {})
    assert kernel.saveable

    def key(static, *leaves, names=("pmf", "nodes", "lams")):
        flat, tree = jax.tree.flatten(list(leaves))
        with float64():  # as the package's calls are (outside it, JAX reads float64 inputs as float32)
            return _saved_programs._key(kernel, static, list(names), tree, flat)

    a = np.zeros(4)
    base = key({}, a, a, a)
    assert base == key({}, np.ones(4), a, a)  # values are not in the key, only what shapes the program
    assert base != key({}, np.zeros(5), a, a)  # a shape
    assert base != key({}, a.astype(np.float32), a, a)  # a dtype
    assert key({}, 1.0, a, a) != key({}, np.float64(1.0), a, a)  # a weakly typed Python number
    assert base != key({"mode": "classic"}, a, a, a) != key({"mode": "improved"}, a, a, a)  # a static value
    assert base != key({}, a, (a, a), names=("pmf", "nodes"))  # the input tree
    with jax.default_matmul_precision("highest"):  # a JAX setting that changes the trace
        assert base != key({}, a, a, a)
    assert key({"draw": lambda x: x}, a, a, a) is None  # a static with no stable text: not saved
    assert key({"table": object()}, a, a, a) is None


def test_calls_that_cannot_be_keyed_take_the_ordinary_path():
    assert pld_grid.evaluate._saved.saveable and pld_grid.probe._saved.saveable  # the kernels that ask for it
    closure = kernel_jit(lambda x: jnp.log1p(x) * 2.0, saved=True)  # captured values would not be in a key
    assert not closure._saved.saveable
    with float64():
        assert float(closure(np.float64(1.0))) == pytest.approx(2.0 * np.log(2.0), rel=1e-15)
    outside = kernel_jit(np.add, saved=True)  # not a function of this package: its source is not in the key
    assert not outside._saved.saveable
    assert not kernel_jit(pld_grid._log_mgf)._saved.saveable  # not asked for


def test_nothing_is_saved_without_the_packages_source(monkeypatch):
    monkeypatch.setenv("JAXPRIV_SAVED_PROGRAMS", "1")
    assert _saved_programs._package_digest() is not None and _saved_programs.enabled()  # this checkout's source
    walk = os.walk
    monkeypatch.setattr(os, "walk", lambda root: iter(()))  # as in a zipped install
    _saved_programs._package_digest.cache_clear()
    try:
        assert _saved_programs._package_digest() is None and not _saved_programs.enabled()
    finally:
        monkeypatch.setattr(os, "walk", walk)
        _saved_programs._package_digest.cache_clear()
    assert _saved_programs._package_digest() is not None


def test_a_damaged_file_is_exported_again(monkeypatch):
    monkeypatch.setenv("JAXPRIV_SAVED_PROGRAMS", "1")
    event = events.SelfComposed(events.PoissonSampled(0.0311, events.Gaussian(1.71)), 733)
    expected = float(accounting.epsilon(event, 1e-5, accountant="pld"))
    files = sorted(os.listdir(_folder()))
    assert files
    for name in files:  # every saved program damaged (this worker's and any other's: each is re-exported)
        if not name.endswith((".unsupported", ".tmp")):
            with open(os.path.join(_folder(), name), "wb") as handle:
                handle.write(b"not a program")
    _forget_this_process()
    assert float(accounting.epsilon(event, 1e-5, accountant="pld")) == expected
    _forget_this_process()
    assert float(accounting.epsilon(event, 1e-5, accountant="pld")) == expected  # and read back again
