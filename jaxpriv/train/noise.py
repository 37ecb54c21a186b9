"""The noise step of DP-SGD and of every federated client: add a mechanism's noise to a clipped sum, then
normalise (MATH §6; one primitive, many callers).

The noise is described by an event (:mod:`jaxpriv.events`: ``Gaussian(σ)``, ``Laplace(b)``,
``Staircase(ε, γ)``), the same data the accountant charges for, and scaled by the clipped sum's
sensitivity Δ (:attr:`jaxpriv.train.clipping.ClippedGradient.sensitivity`, the clip norm C):

    update ← (Σ_i clip(g_i) + Z) / normalize_by,   Z ~ N(0, (σΔ)²) | Lap(bΔ) | Staircase(ε, γ, Δ)

per coordinate, with ``normalize_by`` the *expected* batch size (qN, or Σ_i q_i; never the realised one).
The draws come from :func:`jaxpriv.mechanisms.gaussian.sample`, :func:`~jaxpriv.mechanisms.laplace.sample`
and :func:`~jaxpriv.mechanisms.staircase.sample`, the scale passed into the sampler. Two front doors share
one core:

* :func:`noise_transform`: an Optax ``GradientTransformation`` whose :class:`NoiseState` holds a PRNG key;
  each step splits it once into the next state key and the draw keys;
* :func:`add_noise`: one application with a key the caller derives (the federated clients, whose keys
  come from the round and the local step).

Every number (the event's, Δ, ``normalize_by``) may be a traced JAX scalar: the noise step runs inside
``jit`` and under ``jax.vmap`` over clients with a per-client scale. Concrete numbers are validated on
the host (``ValueError`` naming the parameter and its range); traced ones cannot be, and an invalid traced
number (NaN, ±inf, out of range) makes the whole update NaN, never a number (MATH §0.4). The noise scale
on the sum is never below σΔ (MATH §0.1, the safe side): concrete, the product is taken in float64 and
the sampler rounds it up to float32; traced, the float32 product is moved up one ulp. A noise parameter
σ or b of 0 adds no noise (the non-private baselines of the federated systems; the accountant rejects it).

Draws: one key per leaf (the default), or with ``flat=True`` one draw over the flattened parameter
vector (:func:`jax.flatten_util.ravel_pytree`; UDP-FL selects between mechanisms per client, and per-leaf
draws under that select compile several times slower). Noise is drawn in at least float32
(bfloat16/float16 leaves get float32 noise, the noisy sum is cast back to the leaf's dtype).

Example (DP-SGD's noise and normalisation chained with an optimizer):

    >>> import jax.numpy as jnp, optax
    >>> from jaxpriv import events
    >>> from jaxpriv.train import noise
    >>> dp = noise.noise_transform(events.Gaussian(1.1), sensitivity=1.0, seed=0, normalize_by=256.0)
    >>> tx = optax.chain(dp, optax.sgd(0.1))
    >>> params = {"w": jnp.zeros(3)}
    >>> state = tx.init(params)
    >>> updates, state = tx.update({"w": jnp.ones(3)}, state, params)
    >>> updates["w"].shape
    (3,)
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.flatten_util import ravel_pytree

from .. import events, mf
from .._checks import check_values, in_range
from .._numerics import is_concrete
from ..mechanisms import staircase
from ..mechanisms._common import round_to

__all__ = ["NoiseState", "NoiseArguments", "noise_transform", "noise_arguments", "noise_update", "add_noise",
           "gaussian_noise", "BandedNoiseState", "banded_noise_transform", "banded_noise_update", "band_table"]

class NoiseState(NamedTuple):
    """State of a noise transform: the PRNG key of the next step."""

    key: jax.Array


class _Noise(NamedTuple):
    draw: Callable | None  # (key, shape, dtype) → noise; None: no noise
    denominator: object
    valid: object  # True, or a traced bool: every traced number in range


def _as_key(seed, name: str = "seed") -> jax.Array:
    """An int seed becomes ``jax.random.key(seed)``; a PRNG key (typed or legacy uint32[2]) is kept."""
    if isinstance(seed, (bool, np.bool_)):
        raise ValueError(f"{name} must be an int or a JAX PRNG key, got {seed!r}")
    if isinstance(seed, (int, np.integer)):
        return jax.random.key(int(seed))
    if isinstance(seed, jax.Array):
        if jnp.issubdtype(seed.dtype, jax.dtypes.prng_key) and seed.shape == ():
            return seed
        if seed.dtype == jnp.uint32 and seed.shape == (2,):
            return seed
    raise ValueError(f"{name} must be an int or a single JAX PRNG key, got {seed!r}")


def _number(name: str, value, lo: float, hi: float = np.inf, lo_open: bool = False):
    """``(value, valid)``: a concrete scalar checked here, a traced one with its range test (as a bool)."""
    if np.ndim(value) != 0:
        raise ValueError(f"{name} must be a scalar, got shape {np.shape(value)}")
    if is_concrete(value):
        check_values(name, value, lo, hi, lo_open=lo_open)  # numpy: nothing traced inside the caller's jit
        return value, True
    return value, in_range(jnp, value, lo, hi, lo_open=lo_open)


def _scale_on_sum(number, sensitivity):
    """number × Δ, never below the exact product (the module docstring); Δ = 1 multiplies nothing."""
    if is_concrete(number) and is_concrete(sensitivity):
        return float(number) * float(sensitivity)  # float64; the sampler rounds it up to float32
    if is_concrete(sensitivity) and sensitivity == 1.0:
        return number
    product = jnp.multiply(number, sensitivity)
    # round to nearest errs by at most half an ulp, so one ulp up is never below σΔ (0 stays 0: no noise)
    return jnp.where(product > 0, jnp.nextafter(product, jnp.inf), product)


def _prepare(event, sensitivity, normalize_by) -> _Noise:
    """Validate the numbers and bind the event's sampler at its scale."""
    sensitivity, ok = _number("sensitivity", sensitivity, 0.0, lo_open=True)
    denominator, ok_n = _number("normalize_by", normalize_by, 0.0, lo_open=True)
    ok = ok & ok_n
    if isinstance(event, events.Staircase):
        epsilon, ok_e = _number("Staircase epsilon", event.epsilon, 0.0, lo_open=True)
        gamma, ok_g = (None, True) if event.gamma is None else _number("Staircase gamma", event.gamma, 0.0, 1.0)

        def draw(key, shape, dtype):
            return staircase.sample(key, epsilon, gamma, shape, sensitivity=sensitivity, dtype=dtype)

        return _Noise(draw, denominator, ok & ok_e & ok_g)
    if not (isinstance(event, events.Event) and event.NOISE_SCALE):  # noise = sample_noise(key, number × Δ, ...)
        raise ValueError(f"event must be events.Gaussian, events.Laplace or events.Staircase, got "
                         f"{type(event).__name__}")
    field, sample = event.NOISE_SCALE, event.sample_noise
    number, ok_x = _number(f"{type(event).__name__} {field}", getattr(event, field), 0.0)
    scale = _scale_on_sum(number, sensitivity)
    if is_concrete(scale) and scale == 0:
        return _Noise(None, denominator, ok & ok_x)

    def draw(key, shape, dtype):
        return sample(key, scale, shape, dtype)

    return _Noise(draw, denominator, ok & ok_x)


def _check_flat(flat) -> bool:
    if not isinstance(flat, (bool, np.bool_)):
        raise ValueError(f"flat must be True or False, got {flat!r}")
    return bool(flat)


def _apply(noise: _Noise, keys, updates, flat: bool):
    """(x + draw) / denominator on every leaf (``keys``: one per leaf), or on the flat vector (one key)."""

    def noisy(key, x):
        x = jnp.asarray(x)
        # Noise in ≥ float32: a bfloat16 draw would quantise the noise itself, not just the update.
        dtype = jnp.promote_types(x.dtype, jnp.float32)
        total = x.astype(dtype)
        if noise.draw is not None:
            total = total + noise.draw(key, x.shape, dtype)
        return (total / denominator.astype(dtype)).astype(x.dtype)

    # an invalid traced number: divide by NaN, so that every output is NaN (one scalar select)
    denominator = jnp.asarray(noise.denominator)
    if noise.valid is not True:
        denominator = jnp.where(noise.valid, denominator, jnp.nan)

    if flat:
        vector, unravel = ravel_pytree(updates)
        return unravel(noisy(keys, vector))
    leaves, treedef = jax.tree_util.tree_flatten(updates)
    return jax.tree_util.tree_unflatten(treedef, [noisy(k, leaf) for k, leaf in zip(keys, leaves)])


def noise_transform(event, *, seed, sensitivity=1.0, normalize_by=1.0, flat: bool = False
                    ) -> optax.GradientTransformation:
    """The noise step as an Optax transformation: (update + Z) / ``normalize_by``, Z the event's noise at
    sensitivity Δ (DP-SGD: Abadi et al. 2016, Alg. 1; MATH §6, §4 for the mechanisms).

    The update is the clipped gradient sum (any pytree: a dict, a Flax ``nnx.State``, …). Every step
    splits the state key once into m + 1 keys (m = the number of leaves, or 1 with ``flat``): the first
    is the next state key, the others draw the noise in leaf order (:func:`add_noise` for the draw).
    Every number may be traced (built inside the caller's ``jit`` or ``vmap``); see the module docstring
    for what an invalid traced number does.

    Args:
      event: ``events.Gaussian(σ)`` (N(0, (σΔ)²)), ``events.Laplace(b)`` (Lap(bΔ)) with σ, b ≥ 0 (0: no
        noise), or ``events.Staircase(ε, γ)`` with ε > 0, γ ∈ [0, 1] or ``None`` for γ* (Δ its sensitivity).
      seed: an int or a JAX PRNG key (the state starts from it; same seed, same noise).
      sensitivity: Δ > 0 of the clipped sum, e.g. the clip norm C. With per-example clip norms the
        attached ``ClippedGradient.sensitivity`` (max C_i of the batch) depends on the data: pass the
        plan's noise std s = σ_g·C_g (one for every group g) as the event's number and Δ = 1, as
        :func:`jaxpriv.train.dpsgd.train` does.
      normalize_by: the expected batch size, > 0.
      flat: one draw over the flattened update instead of one per leaf.

    Returns:
      an ``optax.GradientTransformation`` with :class:`NoiseState`.

    Example (ten clients, each with its own noise multiplier, under ``vmap``):
      >>> import jax, jax.numpy as jnp
      >>> from jaxpriv import events
      >>> from jaxpriv.train import noise
      >>> def client(sigma, key):
      ...     tx = noise.noise_transform(events.Gaussian(sigma), seed=key, sensitivity=2.0, normalize_by=4.0)
      ...     return tx.update({"b": jnp.zeros(100_000)}, tx.init(None))[0]["b"]
      >>> out = jax.vmap(client)(jnp.arange(1.0, 11.0), jax.random.split(jax.random.key(0), 10))
      >>> [round(float(s), 1) for s in out.std(axis=1)[:3]]  # σΔ/4
      [0.5, 1.0, 1.5]
    """
    key0 = _as_key(seed)
    noise = _prepare(event, sensitivity, normalize_by)
    flat = _check_flat(flat)

    def init_fn(params):
        del params
        return NoiseState(key=key0)

    def update_fn(updates, state, params=None):
        del params
        return _step(noise, updates, state, flat)

    return optax.GradientTransformation(init_fn, update_fn)


def _step(noise: _Noise, updates, state: NoiseState, flat: bool):
    """One step of a noise transform: split the state key once (the next key, then the draw keys)."""
    count = 1 if flat else len(jax.tree_util.tree_leaves(updates))
    keys = jax.random.split(state.key, count + 1)  # the one split of this step
    return _apply(noise, keys[1] if flat else keys[1:], updates, flat), NoiseState(key=keys[0])


class NoiseArguments(NamedTuple):
    """The numbers of a noise transform, as arrays a compiled step takes as arguments
    (:func:`noise_arguments`, :func:`noise_update`): the event with its numbers already on the sum's scale
    (σΔ, bΔ rounded up; the staircase's ε and γ), the sensitivity (``None``: already applied) and the
    normaliser. A pytree: its structure (the event type, its static fields, the dtypes) is what a program
    is keyed on, its leaves are the numbers."""

    event: Any
    sensitivity: Any
    normalize_by: Any


def noise_arguments(event, *, sensitivity=1.0, normalize_by=1.0, dtype=jnp.float32) -> NoiseArguments:
    """The numbers of ``noise_transform(event, sensitivity=…, normalize_by=…)`` computed on the host, so
    that a compiled step can take them as arguments (a new σ, C or batch size then compiles nothing) and
    add exactly the noise the transform adds.

    Concrete numbers only (validated here, ``ValueError`` as :func:`noise_transform`). The scale on the sum
    is the transform's: σΔ (``Gaussian``) or bΔ (``Laplace``) in float64, rounded up to ``dtype`` (float32:
    what the sampler would round it to; float64: the float64 product), never below σΔ (MATH §0.1); the
    staircase's ε, γ (γ* when ``None``) and Δ are taken in float64 and cast to ``dtype`` as its sampler
    casts them. ``normalize_by`` becomes a weakly typed JAX scalar (float32, or float64 with x64 on), as a
    Python number does inside ``jit``.

    Args:
      event, sensitivity, normalize_by: as :func:`noise_transform` (concrete).
      dtype: the dtype the noise is drawn in: float32 for float32, bfloat16 and float16 updates, float64
        for float64 ones.

    Returns:
      :class:`NoiseArguments`.

    Example:
      >>> import numpy as np
      >>> from jaxpriv import events
      >>> from jaxpriv.train import noise
      >>> args = noise.noise_arguments(events.Gaussian(1.1), sensitivity=0.3, normalize_by=64.0)
      >>> bool(np.float64(args.event.noise_multiplier) >= 1.1 * 0.3), args.sensitivity
      (True, None)
    """
    dtype = jnp.dtype(dtype)
    if dtype not in (jnp.float32, jnp.float64):
        raise ValueError(f"dtype must be float32 or float64, got {dtype}")
    if not is_concrete((event, sensitivity, normalize_by)):
        raise ValueError("noise_arguments takes concrete numbers (it runs on the host)")
    _prepare(event, sensitivity, normalize_by)  # validation, the transform's messages
    denominator = jnp.asarray(float(normalize_by))  # weakly typed, as a Python number inside jit
    if isinstance(event, events.Staircase):
        epsilon = np.asarray(float(event.epsilon), np.float64)
        gamma = staircase.optimal_gamma(epsilon) if event.gamma is None else float(event.gamma)
        numbers = (np.asarray(v, np.float64).astype(dtype) for v in (epsilon, gamma, float(sensitivity)))
        epsilon, gamma, delta = numbers
        return NoiseArguments(events.Staircase(epsilon, gamma, event.dimension), delta, denominator)
    field = event.NOISE_SCALE
    scale = _scale_on_sum(getattr(event, field), sensitivity)  # float64
    scale = round_to(scale, dtype) if dtype == jnp.float32 else np.asarray(scale, np.float64)
    return NoiseArguments(type(event)(**{field: scale}), None, denominator)


def noise_update(arguments: NoiseArguments, updates, state: NoiseState, *, flat: bool = False):
    """One step of a noise transform whose numbers are ``arguments`` (:func:`noise_arguments`, passed
    into a jitted step as arguments): the update of ``noise_transform(event, seed=…, sensitivity=…,
    normalize_by=…, flat=flat)`` with the state ``state``, drawing the same noise from the same key.

    Returns:
      ``(noisy updates, next NoiseState)``.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> from jaxpriv import events
      >>> from jaxpriv.train import noise
      >>> args = noise.noise_arguments(events.Gaussian(2.0), normalize_by=4.0)
      >>> step = jax.jit(lambda a, u, s: noise.noise_update(a, u, s))
      >>> tx = noise.noise_transform(events.Gaussian(2.0), seed=0, normalize_by=4.0)
      >>> u = {"b": jnp.zeros(1000)}
      >>> bool((step(args, u, tx.init(None))[0]["b"] == tx.update(u, tx.init(None))[0]["b"]).all())
      True
    """
    sensitivity = 1.0 if arguments.sensitivity is None else arguments.sensitivity
    return _step(_prepare(arguments.event, sensitivity, arguments.normalize_by), updates, state, _check_flat(flat))


def add_noise(key, updates, event, *, sensitivity=1.0, normalize_by=1.0, flat: bool = False):
    """(updates + Z) / ``normalize_by`` with the caller's key: the step of :func:`noise_transform` once
    (MATH §6). Per leaf, the leaves (in ``jax.tree_util`` order) take ``jax.random.split(key, L)``; with
    ``flat`` one draw of ``key`` covers the flattened ``updates``.

    Args:
      key: a JAX PRNG key (or an int seed).
      updates: the clipped sum, any pytree of float arrays.
      event, sensitivity, normalize_by, flat: as :func:`noise_transform`.

    Returns:
      a pytree like ``updates``.

    Example (rPDP-FL's step: N(0, σ²C²) on the clipped sum, over a traced expected batch Σ_i q_i):
      >>> import jax, jax.numpy as jnp
      >>> from jaxpriv import events
      >>> from jaxpriv.train import noise
      >>> step = jax.jit(lambda k, g, q: noise.add_noise(k, g, events.Gaussian(1.0), sensitivity=0.5,
      ...                                                normalize_by=q.sum()))
      >>> out = step(jax.random.key(0), {"w": jnp.zeros(100_000)}, jnp.full(8, 0.5))
      >>> round(float(out["w"].std()), 3)  # σC/Σq = 0.5/4
      0.125
    """
    key = _as_key(key, "key")
    noise = _prepare(event, sensitivity, normalize_by)
    keys = key if _check_flat(flat) else jax.random.split(key, len(jax.tree_util.tree_leaves(updates)))
    return _apply(noise, keys, updates, flat)


def _positive(name: str, value):
    """The front ends' historical range, > 0, for a concrete scalar (a traced one is the core's to check)."""
    if is_concrete(value):
        _number(name, value, 0.0, lo_open=True)
    return value


def gaussian_noise(stddev, *, seed, normalize_by=1.0) -> optax.GradientTransformation:
    """Add N(0, stddev²) to every leaf of the update (the clipped gradient sum), then divide by
    ``normalize_by``: DP-SGD's Gaussian noise (Abadi et al. 2016, Alg. 1; MATH §6).

    :func:`noise_transform` with ``events.Gaussian(stddev)`` at sensitivity 1. With clip norm C and noise
    multiplier σ, ``stddev = σC`` and ``normalize_by = qN``; the result has noise standard deviation σC/(qN).

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
    return noise_transform(events.Gaussian(_positive("stddev", stddev)), seed=seed, normalize_by=normalize_by)


# --------------------------------------------------------------------------------------------------
# Correlated noise: a banded matrix factorization (MATH §12)
# --------------------------------------------------------------------------------------------------


class BandedNoiseState(NamedTuple):
    """State of :func:`banded_noise_transform`: the PRNG key of the next step, the step t, and the ring
    buffer of the last b − 1 correlated noise vectors: a tuple with one array per leaf of the updates (in
    ``jax.tree_util`` order), each the leaf's shape with a leading axis of length b − 1 (slot t mod (b − 1)
    holds step t's): (b − 1) × the model's size, in at least float32 (nothing for b = 1).

    A flat tuple of arrays, not a pytree like the updates: a Flax ``nnx.State`` of ``Param`` variables is
    flattened and rebuilt in Python at every call of a jitted step, a cost per leaf that DP-SGD's state
    (a key) does not pay (bench/README, ``mf_utility.py --step``)."""

    key: jax.Array
    step: jax.Array
    buffer: Any


def band_table(strategy) -> np.ndarray:
    """The strategy's bands as an (n, b) table: row t holds C[t, t], C[t, t − 1], …, C[t, t − b + 1] (0
    before the first step): what :func:`banded_noise_update` takes as an argument. ``ValueError`` unless C
    is square, lower triangular, invertible and its largest column norm is at most 1 (the sensitivity the
    accounting assumes, MATH §12.2).

    Example:
      >>> import numpy as np
      >>> from jaxpriv.train import noise
      >>> noise.band_table(np.array([[0.8, 0.0], [0.6, 1.0]])).tolist()   # unit columns
      [[0.8, 0.0], [1.0, 0.6]]
    """
    C = np.asarray(strategy, np.float64)
    bands = mf.bands_of(C)
    worst = float(mf.column_norms(C).max())
    if worst > 1.0 + 1e-9:
        raise ValueError(f"strategy's largest column norm must be at most 1 (its sensitivity; divide C by it), "
                         f"got {worst!r}")
    n = C.shape[0]
    rows = np.arange(n)[:, None]
    cols = rows - np.arange(bands)[None, :]
    return np.where(cols >= 0, C[rows, np.clip(cols, 0, None)], 0.0)


def _check_buffer(buffer, leaves, bands: int) -> tuple:
    """The state's buffer, checked against the updates and the strategy (shapes are static: this runs at
    trace time): ``ValueError`` unless it holds one array per leaf, each (b − 1, *leaf's shape)."""
    if not isinstance(buffer, tuple) or len(buffer) != len(leaves):
        raise ValueError(f"state.buffer must be a tuple of one array per leaf of the updates ({len(leaves)}), "
                         f"as banded_noise_transform(...).init(params) builds it, got {type(buffer).__name__}"
                         + (f" of {len(buffer)}" if isinstance(buffer, tuple) else ""))
    for i, (slots, leaf) in enumerate(zip(buffer, leaves)):
        want = (bands - 1,) + tuple(np.shape(leaf))
        if tuple(np.shape(slots)) != want:
            raise ValueError(f"state.buffer[{i}] must have shape {want} (b − 1 = {bands - 1} slots for the "
                             f"strategy's {bands} bands, then the update's leaf shape), got {tuple(np.shape(slots))}: "
                             f"the state was built for another strategy or model")
    return buffer


def _banded_step(noise: _Noise, table, updates, state: BandedNoiseState):
    """One step of the banded transform: the noise bound by :func:`_prepare`, the (n, b) band table (a
    constant or a traced argument)."""
    n, bands = table.shape
    leaves, treedef = jax.tree_util.tree_flatten(updates)
    buffers = _check_buffer(state.buffer, leaves, bands)
    keys = jax.random.split(state.key, len(leaves) + 1)  # DP-SGD's one split per step
    t = state.step
    coef = table[jnp.minimum(t, n - 1)]  # (b,): C[t, t], C[t, t−1], …
    # the weight of each buffer slot: slot s holds x_{t−j} with j = ((t − 1 − s) mod (b − 1)) + 1 (zeros
    # before step 0) and gets C[t, t − j], j = 1 … b − 1. A weighted sum over the slots in place, not a
    # gather of the buffer in lag order (one copy of the buffer less); the weights are gathered from the
    # row, the same numbers as scattering the row into the slots, without a scatter.
    ring = max(bands - 1, 1)
    weights = coef[(t - 1 - jnp.arange(ring)) % ring + 1] if bands > 1 else None
    denominator = jnp.asarray(noise.denominator)
    ok = (t < n) if noise.valid is True else (t < n) & noise.valid
    denominator = jnp.where(ok, denominator, jnp.nan)
    out, kept = [], []
    for key, x, buffer in zip(keys[1:], leaves, buffers):
        x = jnp.asarray(x)
        dtype = buffer.dtype
        z = noise.draw(key, x.shape, dtype) if noise.draw is not None else jnp.zeros(x.shape, dtype)
        if bands > 1:
            z = z - jnp.tensordot(weights.astype(dtype), buffer, axes=1)
        correlated = z / coef[0].astype(dtype)  # b = 1: z / C[t, t] alone, so C = I is DP-SGD's noise exactly
        kept.append(buffer.at[t % ring].set(correlated) if bands > 1 else buffer)
        out.append(((x.astype(dtype) + correlated) / denominator.astype(dtype)).astype(x.dtype))
    state = BandedNoiseState(key=keys[0], step=t + 1, buffer=tuple(kept))
    return jax.tree_util.tree_unflatten(treedef, out), state


def banded_noise_update(arguments: NoiseArguments, table, updates, state: BandedNoiseState):
    """One step of :func:`banded_noise_transform` whose numbers are arguments: ``arguments``
    (:func:`noise_arguments` of ``events.Gaussian(σ)``) and the strategy's ``table`` (:func:`band_table`),
    so a jitted step takes σ, Δ, the batch size and the strategy's coefficients as data and is compiled
    once per shape (the trainer's BandMF step). The same draws as the transform from the same state; the
    two are compiled apart (coefficients as data, not constants), so they agree to float32 rounding, not
    always to the bit. The scale σΔ of :func:`noise_arguments` is rounded up (never less noise).

    Returns:
      ``(noisy updates, next BandedNoiseState)``.

    Raises:
      ValueError: ``arguments.event`` is not Gaussian, ``table`` is not an (n, b) table with n, b ≥ 1, or
        ``state`` does not fit them: its buffer must hold one (b − 1, *leaf's shape) array per leaf of
        ``updates`` (a state built for another number of bands or another model).

    Example:
      >>> import jax, jax.numpy as jnp
      >>> from jaxpriv import events, mf
      >>> from jaxpriv.train import noise
      >>> C = mf.banded_strategy(4, bands=2, cache=False)
      >>> tx = noise.banded_noise_transform(events.Gaussian(1.0), C, seed=0, normalize_by=2.0)
      >>> args = noise.noise_arguments(events.Gaussian(1.0), normalize_by=2.0)
      >>> step = jax.jit(noise.banded_noise_update)
      >>> u, state = {"w": jnp.ones(3)}, tx.init({"w": jnp.zeros(3)})
      >>> a, b = step(args, noise.band_table(C), u, state)[0]["w"], tx.update(u, state)[0]["w"]
      >>> bool(jnp.allclose(a, b, rtol=1e-6))        # the same draw; compiled apart, they may round apart
      True
    """
    if not isinstance(arguments.event, events.Gaussian):
        raise ValueError(f"arguments.event must be events.Gaussian (the matrix mechanism's noise), got "
                         f"{type(arguments.event).__name__}")
    table = jnp.asarray(table)
    if table.ndim != 2 or table.shape[0] < 1 or table.shape[1] < 1:
        raise ValueError(f"table must be a strategy's (n, b) band table (band_table), n ≥ 1 and b ≥ 1, got shape "
                         f"{table.shape}")
    sensitivity = 1.0 if arguments.sensitivity is None else arguments.sensitivity
    return _banded_step(_prepare(arguments.event, sensitivity, arguments.normalize_by), table, updates, state)


def banded_noise_transform(event, strategy, *, seed, sensitivity=1.0, normalize_by=1.0
                           ) -> optax.GradientTransformation:
    """Correlated noise C⁻¹Z as an Optax transformation: (update_t + x_t) / ``normalize_by``, with x the
    solution of C x = z, z_t ~ N(0, (σΔ)²) per coordinate (the matrix mechanism, DP-FTRL/BandMF:
    Choquette-Choo et al., NeurIPS 2023, arXiv:2306.08153; MATH §12).

    For a b-banded lower-triangular C row t of C x = z reads
    x_t = (z_t − Σ_{j=1}^{b−1} C[t, t − j] x_{t−j}) / C[t, t], so x is computed online from a ring buffer
    of the last b − 1 noise vectors (:class:`BandedNoiseState`): **memory (b − 1) × the model's size**
    (float32 or wider) on top of DP-SGD's, b vectors with the one being drawn (x_t overwrites x_{t−b+1},
    read for the last time at step t). The law of the sequence x_0, …, x_{n−1} (one coordinate) is
    N(0, (σΔ)² (CᵀC)⁻¹). z is drawn exactly as :func:`noise_transform` draws DP-SGD's noise: the state
    key is split once per step into the next key and one key per leaf, and each leaf's z is
    ``event.sample_noise(key, σΔ, …)``; so with the identity (``bands=1``) the noise is DP-SGD's, bit for
    bit, for the same seed.

    Steps past the strategy's n make every output NaN (the strategy does not cover them; never a number
    without its privacy accounted for). The accounting of the run is
    :class:`jaxpriv.events.AmplifiedBandMF` (with cyclic Poisson sampling over the b partitions).

    Args:
      event: ``events.Gaussian(σ)`` with σ ≥ 0 (0: no noise; σ may be traced).
      strategy: the n×n strategy C (e.g. :func:`jaxpriv.mf.banded_strategy`): lower triangular, nonzero
        diagonal, largest column norm ≤ 1; its number of bands b is read off its nonzeros.
      seed: an int or a JAX PRNG key.
      sensitivity: Δ > 0 of the clipped sum (the clip norm).
      normalize_by: the expected batch size, > 0.

    Returns:
      an ``optax.GradientTransformation`` with :class:`BandedNoiseState`; its ``init`` takes the
      parameters (or any pytree shaped like the updates), to size the buffer.

    Example:
      >>> import jax.numpy as jnp, numpy as np
      >>> from jaxpriv import events, mf
      >>> from jaxpriv.train import noise
      >>> C = mf.banded_strategy(4, bands=2, cache=False)
      >>> tx = noise.banded_noise_transform(events.Gaussian(1.0), C, seed=0, normalize_by=2.0)
      >>> state = tx.init({"w": jnp.zeros(3)})
      >>> state.buffer[0].shape                        # (b − 1) × the model's size, one array per leaf
      (1, 3)
      >>> out, state = tx.update({"w": jnp.ones(3)}, state)
      >>> out["w"].shape, int(state.step)
      ((3,), 1)
    """
    if not isinstance(event, events.Gaussian):
        raise ValueError(f"event must be events.Gaussian (the matrix mechanism's noise), got {type(event).__name__}")
    table = band_table(strategy)
    bands = table.shape[1]
    key0 = _as_key(seed)
    noise = _prepare(event, sensitivity, normalize_by)

    def init_fn(params):
        def slots(p):
            p = jnp.asarray(p)
            return jnp.zeros((bands - 1,) + p.shape, jnp.promote_types(p.dtype, jnp.float32))

        buffer = tuple(slots(p) for p in jax.tree_util.tree_leaves(params))
        return BandedNoiseState(key=key0, step=jnp.zeros((), jnp.int32), buffer=buffer)

    def update_fn(updates, state, params=None):
        del params
        return _banded_step(noise, jnp.asarray(table), updates, state)

    return optax.GradientTransformation(init_fn, update_fn)
