"""Shared test setup (tests/ and the doctests in jaxpriv/).

* A persistent XLA compilation cache, so repeated runs skip kernel compilation, and the pytest-xdist
  workers (pyproject's ``-n auto``) and the command-line subprocesses (``JAXPRIV_CACHE_DIR``) read the
  kernels one of them already compiled, and the traced kernels one of them saved
  (:mod:`jaxpriv._saved_programs`).
* Every program of the run (the trainer's, the tests' own jitted functions, JAX's eager operations, and the
  command-line subprocesses, which inherit ``XLA_FLAGS``) compiles with the XLA option the numerical kernels
  already use for users (:func:`jaxpriv._numerics.kernel_jit`: the elemental CPU fusion emitter). The suite
  is compilation-bound, and the option took 19–36% off the CPU of the module sets measured side by side
  (bench/README, ``suite_profile.py``). The trainer keeps XLA's defaults for users, because its warm steps
  are what a training run pays for; its numbers depend on the emitter only through float rounding, and the
  suite passes under either (one setting for the whole run: no test compares programs compiled both ways).
  ``JAXPRIV_TEST_XLA_DEFAULTS=1`` leaves ``XLA_FLAGS`` alone: every program but the kernels then compiles
  with XLA's defaults, as for users.
* The in-memory JAX caches are cleared after a test module once the process holds more than
  ``JAXPRIV_TEST_MAX_MAPS`` (32,000) memory maps, and after every module where that count is unknown. A
  full run compiles thousands of executables; kept alive in one process they exhaust the kernel's
  memory-map limit (vm.max_map_count = 65530 here) and XLA crashes with a segmentation fault. Clearing
  after every module instead made each later module trace and lower again the programs it shares with
  earlier ones (PLD, curves, solvers): 6.5% more CPU on four accounting modules run in one process.
* pytest-xdist runs whole modules (pyproject's ``--dist loadscope``): a module's kernels are compiled and its
  module-scoped fixtures computed by one worker, not by each. The modules that take minutes are collected
  first (:data:`HEAVY_FIRST`), so they start first and the two workers finish together.
* Tests marked ``slow`` take the fixture ``full``: False (the default, as CI runs them) asks for their fast
  configuration, ``--full`` (or ``JAXPRIV_FULL_TESTS=1``) for the full one.
"""

import os

if not os.environ.get("JAXPRIV_TEST_XLA_DEFAULTS"):
    # Before any JAX backend exists (XLA reads the flags once); the same option, gated on the same jaxlib
    # versions, as the kernels' (an option XLA does not know would fail every compilation).
    from jaxpriv._numerics import KERNEL_COMPILER_OPTIONS

    _flags = os.environ.get("XLA_FLAGS", "").split()
    _flags += [flag for flag in (f"--{name}={str(value).lower()}" for name, value in KERNEL_COMPILER_OPTIONS.items())
               if flag not in _flags]  # once, though the pytest-xdist workers inherit the controller's
    os.environ["XLA_FLAGS"] = " ".join(_flags)

import jax
import pytest

_CACHE = os.environ.get("JAXPRIV_TEST_CACHE", os.path.join(os.path.dirname(__file__), ".jax_cache"))
os.makedirs(_CACHE, exist_ok=True)  # an existing directory is hit on the very next run
jax.config.update("jax_compilation_cache_dir", os.path.abspath(_CACHE))
# and the subprocesses' (they leave the user's ~/.cache alone)
os.environ["JAXPRIV_CACHE_DIR"] = os.path.abspath(_CACHE)
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)  # workers share small kernels too


#: Deprecated alias modules (they warn on import and hold no doctests): not collected by --doctest-modules
collect_ignore = ["jaxpriv/accountant.py", "jaxpriv/mechanisms/harmonizer.py"]

#: Test modules that take a minute or more from a cold cache, slowest first (measured with ``--durations=0``;
#: most of their time is XLA compilation). Every other module keeps its collection order after these.
HEAVY_FIRST = ("test_accounting_pld.py", "test_cli.py", "test_readme.py", "test_allocation.py", "test_shuffle_rounds.py",
               "test_traced_safety.py",
               "test_notebooks.py", "test_distributed.py", "test_federated_rpdp.py", "test_accountant.py",
               "test_calibrate_events.py", "test_rdp.py", "test_federated_udpfl.py",
               "test_accounting_client_sampled.py", "test_cli_rules.py", "test_calibrate.py")


def pytest_collection_modifyitems(config, items):
    rank = {name: i for i, name in enumerate(HEAVY_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: a module's tests stay together


@pytest.fixture(autouse=True, scope="module")
def _tiers_per_module():
    """Each module starts with no tier counts (jaxpriv._tiers.reset): whether a call runs a tiered kernel's
    quick or optimised program then depends on the module's own order, not on which modules pytest-xdist
    gave its worker before (the tiers' answers differ in the last bits)."""
    from jaxpriv import _tiers

    _tiers.reset()
    yield


def pytest_addoption(parser):
    parser.addoption("--full", action="store_true",
                     help="run the tests marked slow in their full configuration (CI runs the fast one)")


@pytest.fixture(scope="session")
def full(request) -> bool:
    """Whether slow tests run in their full configuration (``--full`` or ``JAXPRIV_FULL_TESTS=1``)."""
    return request.config.getoption("--full") or os.environ.get("JAXPRIV_FULL_TESTS") == "1"


#: Memory maps this process may hold before the in-memory JAX caches are dropped: half the usual
#: vm.max_map_count, so a module that compiles many programs still fits below the limit.
_MAX_MAPS = int(os.environ.get("JAXPRIV_TEST_MAX_MAPS", "32000"))


def _memory_maps() -> int | None:
    try:
        with open("/proc/self/maps", "rb") as maps:
            return sum(1 for _ in maps)
    except OSError:  # no procfs (macOS): count unknown
        return None


@pytest.fixture(autouse=True, scope="module")
def _release_compiled_executables():
    yield
    maps = _memory_maps()
    if maps is None or maps > _MAX_MAPS:
        jax.clear_caches()
