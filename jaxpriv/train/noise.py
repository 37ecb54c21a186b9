"""Optax noise transforms for DP-SGD: add a mechanism's noise to the clipped gradient sum, then normalise
(MATH §6; one primitive, many callers).

Each transform receives the *sum* of clipped per-example gradients (any pytree: a dict, a Flax
``nnx.State``, …), adds i.i.d. noise of its mechanism to every leaf, and divides by ``normalize_by``,
the *expected* batch size qN (never the realised one):

    update ← (Σ_i clip(g_i) + Z) / normalize_by,   Z ~ N(0, stddev²) | Lap(scale) | Staircase(ε, γ, Δ)

The noise comes from :mod:`jaxpriv.mechanisms` (:func:`~jaxpriv.mechanisms.gaussian.sample`,
:func:`~jaxpriv.mechanisms.laplace.sample`, :func:`~jaxpriv.mechanisms.staircase.sample`), so what is
added is exactly what the accountant charges for. The state is a :class:`NoiseState` holding a PRNG key:
each step splits it once into a new state key and one key per leaf, so noise differs across steps and
leaves and is reproducible from ``seed``. Noise is drawn in at least float32 (bfloat16/float16 leaves
get float32 noise, the noisy sum is cast back to the leaf's dtype). Everything works under ``jit``.

Example (DP-SGD's noise and normalisation chained with an optimizer):

    >>> import jax.numpy as jnp, optax
    >>> from jaxpriv.train import noise
    >>> tx = optax.chain(noise.gaussian_noise(1.1, seed=0, normalize_by=256.0), optax.sgd(0.1))
    >>> params = {"w": jnp.zeros(3)}
    >>> state = tx.init(params)
    >>> updates, state = tx.update({"w": jnp.ones(3)}, state, params)
    >>> updates["w"].shape
    (3,)
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from .._numerics import check_array
from ..mechanisms import gaussian, laplace, staircase

__all__ = ["NoiseState", "gaussian_noise", "laplace_noise", "staircase_noise"]


class NoiseState(NamedTuple):
    """State of a noise transform: the PRNG key of the next step."""

    key: jax.Array


def _as_key(seed) -> jax.Array:
    """An int seed becomes ``jax.random.key(seed)``; a PRNG key (typed or legacy uint32[2]) is kept."""
    if isinstance(seed, (bool, np.bool_)):
        raise ValueError(f"seed must be an int or a JAX PRNG key, got {seed!r}")
    if isinstance(seed, (int, np.integer)):
        return jax.random.key(int(seed))
    if isinstance(seed, jax.Array):
        if jnp.issubdtype(seed.dtype, jax.dtypes.prng_key) and seed.shape == ():
            return seed
        if seed.dtype == jnp.uint32 and seed.shape == (2,):
            return seed
    raise ValueError(f"seed must be an int or a single JAX PRNG key, got {seed!r}")


def _check_normalize_by(normalize_by) -> float:
    if np.ndim(normalize_by) != 0:
        raise ValueError(f"normalize_by must be a scalar > 0 (the expected batch size), got shape {np.shape(normalize_by)}")
    check_array("normalize_by", normalize_by, 0.0, np.inf, lo_open=True)
    return float(normalize_by)


def _check_scalar(name: str, value, **bounds) -> float:
    if np.ndim(value) != 0:
        raise ValueError(f"{name} must be a scalar, got shape {np.shape(value)}")
    check_array(name, value, **bounds)
    return float(value)


def _noise_transform(draw: Callable, seed, normalize_by) -> optax.GradientTransformation:
    """(update + draw(key, shape, dtype)) / normalize_by on every leaf, one fresh key per leaf and step."""
    key0 = _as_key(seed)
    denominator = _check_normalize_by(normalize_by)

    def init_fn(params):
        del params
        return NoiseState(key=key0)

    def update_fn(updates, state, params=None):
        del params
        leaves, treedef = jax.tree_util.tree_flatten(updates)
        keys = jax.random.split(state.key, len(leaves) + 1)  # the one split of this step
        noisy = []
        for leaf_key, leaf in zip(keys[1:], leaves):
            leaf = jnp.asarray(leaf)
            # Noise in ≥ float32: a bfloat16 draw would quantise the noise itself, not just the update.
            dtype = jnp.promote_types(leaf.dtype, jnp.float32)
            total = leaf.astype(dtype) + draw(leaf_key, leaf.shape, dtype)
            noisy.append((total / denominator).astype(leaf.dtype))
        return jax.tree_util.tree_unflatten(treedef, noisy), NoiseState(key=keys[0])

    return optax.GradientTransformation(init_fn, update_fn)


def gaussian_noise(stddev, *, seed, normalize_by=1.0) -> optax.GradientTransformation:
    """Add N(0, stddev²) to every leaf of the update (the clipped gradient sum), then divide by
    ``normalize_by``: DP-SGD's Gaussian noise (Abadi et al. 2016, Alg. 1; MATH §6).

    With clip norm C and noise multiplier σ, ``stddev = σC`` and ``normalize_by = qN``; the result has
    noise standard deviation σC/(qN). Noise from :func:`jaxpriv.mechanisms.gaussian.sample`.

    Args:
      stddev: noise standard deviation on the sum, > 0.
      seed: an int or a JAX PRNG key (the state starts from it; same seed, same noise).
      normalize_by: the expected batch size, > 0.

    Returns:
      an ``optax.GradientTransformation`` with :class:`NoiseState`.

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxpriv.train import noise
      >>> tx = noise.gaussian_noise(2.0, seed=0, normalize_by=4.0)
      >>> state = tx.init(None)
      >>> out, state = tx.update({"b": jnp.zeros(100_000)}, state)
      >>> round(float(out["b"].std()), 2)
      0.5
    """
    stddev = _check_scalar("stddev", stddev, lo=0.0, hi=np.inf, lo_open=True)
    return _noise_transform(lambda key, shape, dtype: gaussian.sample(key, stddev, shape, dtype), seed, normalize_by)


def laplace_noise(scale, *, seed, normalize_by=1.0) -> optax.GradientTransformation:
    """Add Lap(scale) noise to every leaf of the update, then divide by ``normalize_by`` (MATH §6,
    UDP-FL's Laplace clients). Noise from :func:`jaxpriv.mechanisms.laplace.sample`; its standard
    deviation after normalisation is √2·scale/normalize_by.

    Args:
      scale: Laplace scale b > 0 on the sum.
      seed: an int or a JAX PRNG key.
      normalize_by: the expected batch size, > 0.

    Returns:
      an ``optax.GradientTransformation`` with :class:`NoiseState`.

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxpriv.train import noise
      >>> tx = noise.laplace_noise(1.0, seed=0, normalize_by=2.0)
      >>> out, _ = tx.update({"b": jnp.zeros(100_000)}, tx.init(None))
      >>> round(float(abs(out["b"]).mean()), 2)  # E|Lap(b)|/2 = 0.5
      0.5
    """
    scale = _check_scalar("scale", scale, lo=0.0, hi=np.inf, lo_open=True)
    return _noise_transform(lambda key, shape, dtype: laplace.sample(key, scale, shape, dtype), seed, normalize_by)


def staircase_noise(epsilon, gamma=None, sensitivity=1.0, *, seed, normalize_by=1.0) -> optax.GradientTransformation:
    """Add staircase noise (Geng & Viswanath) to every leaf of the update, then divide by
    ``normalize_by`` (MATH §4.2, §6; UDP-FL's Staircase clients).

    Noise from :func:`jaxpriv.mechanisms.staircase.sample` with privacy ε, shape γ (``None``: the
    optimal γ* = 1/(1 + e^{ε/2})) and sensitivity Δ.

    Args:
      epsilon: ε > 0.
      gamma: γ ∈ [0, 1], or ``None`` for γ*.
      sensitivity: Δ > 0 (the clip norm of the summed gradients).
      seed: an int or a JAX PRNG key.
      normalize_by: the expected batch size, > 0.

    Returns:
      an ``optax.GradientTransformation`` with :class:`NoiseState`.

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxpriv.train import noise
      >>> tx = noise.staircase_noise(1.0, seed=0, normalize_by=1.0)
      >>> out, _ = tx.update({"b": jnp.zeros(4)}, tx.init(None))
      >>> out["b"].shape
      (4,)
    """
    epsilon = _check_scalar("epsilon", epsilon, lo=0.0, hi=np.inf, lo_open=True)
    if gamma is not None:
        gamma = _check_scalar("gamma", gamma, lo=0.0, hi=1.0)
    sensitivity = _check_scalar("sensitivity", sensitivity, lo=0.0, hi=np.inf, lo_open=True)

    def draw(key, shape, dtype):
        return staircase.sample(key, epsilon, gamma, shape, sensitivity=sensitivity, dtype=dtype)

    return _noise_transform(draw, seed, normalize_by)
