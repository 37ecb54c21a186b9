"""Shared test setup: a persistent XLA compilation cache so repeated runs skip kernel compilation."""

import os

import jax

_CACHE = os.environ.get("JAXPRIV_TEST_CACHE", os.path.join(os.path.dirname(__file__), "..", ".jax_cache"))
os.makedirs(_CACHE, exist_ok=True)  # an existing directory is hit on the very next run
jax.config.update("jax_compilation_cache_dir", os.path.abspath(_CACHE))
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)
