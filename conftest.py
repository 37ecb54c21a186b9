"""Shared test setup (tests/ and the doctests in jaxpriv/).

* A persistent XLA compilation cache, so repeated runs skip kernel compilation, and the pytest-xdist
  workers (pyproject's ``-n auto``) read the kernels one of them already compiled.
* The in-memory JAX caches are cleared after every test module. A full run compiles thousands of
  executables; kept alive in one process they exhaust the kernel's memory-map limit
  (vm.max_map_count = 65530 here) and XLA crashes with a segmentation fault. Recompiling a kernel in a
  later module is read back from the persistent cache.
* Tests marked ``slow`` take the fixture ``full``: False (the default, as CI runs them) asks for their fast
  configuration, ``--full`` (or ``JAXPRIV_FULL_TESTS=1``) for the full one.
"""

import os

import jax
import pytest

_CACHE = os.environ.get("JAXPRIV_TEST_CACHE", os.path.join(os.path.dirname(__file__), ".jax_cache"))
os.makedirs(_CACHE, exist_ok=True)  # an existing directory is hit on the very next run
jax.config.update("jax_compilation_cache_dir", os.path.abspath(_CACHE))
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)  # workers share small kernels too


def pytest_addoption(parser):
    parser.addoption("--full", action="store_true",
                     help="run the tests marked slow in their full configuration (CI runs the fast one)")


@pytest.fixture(scope="session")
def full(request) -> bool:
    """Whether slow tests run in their full configuration (``--full`` or ``JAXPRIV_FULL_TESTS=1``)."""
    return request.config.getoption("--full") or os.environ.get("JAXPRIV_FULL_TESTS") == "1"


@pytest.fixture(autouse=True, scope="module")
def _release_compiled_executables():
    yield
    jax.clear_caches()
