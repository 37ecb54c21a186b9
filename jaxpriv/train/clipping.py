"""Per-example gradient clipping for Flax NNX models: the clipped *sum* of DP-SGD and its sensitivity.

DP-SGD (MATH §6; Abadi et al. 2016, Alg. 1) clips every example's gradient g_i to L2 norm C and sums,
Σ_i g_i · min(1, C/‖g_i‖), so that adding or removing one example moves the sum by at most C (the
sensitivity the noise is calibrated to). Per-layer clipping (McMahan et al. 2018, §3) clips each layer's
slice g_{l,i} to C_l instead, for a total sensitivity √(Σ_l C_l²).

Two ways to get the per-example norms, numerically equal (tested to 1e-5 in float32, 1e-10 in float64):

* ``"vmap"`` — per-example gradients of any model: ``jax.vmap(jax.grad(...))`` over batches of one
  example (``nnx.split``/``nnx.merge`` give the functional form), then clip and sum. Memory B·|θ|.
* ``"ghost"`` — ghost / book-keeping clipping (Goodfellow 2015; Li et al. 2022, §4; Bu et al. 2023,
  "book-keeping") for ``nnx.Linear``, ``nnx.LinearGeneral`` over trailing axes (attention projections),
  ``nnx.Conv`` and ``nnx.Embed``, on single vectors or sequences. One batched backward pass returns
  every layer's input a_i and output gradient g_i = ∂ℓ_i/∂z_i (by adding a zero *probe* to the layer's
  output and differentiating with respect to it). A layer's weight gradient for example i is
  Σ_t a_{i,t} g_{i,t}ᵀ, so its squared norm is ‖a_i‖²‖g_i‖² for one position, and
  Σ_{t,s} (a_t·a_s)(g_t·g_s) (the Gram-matrix trick) or the materialised ‖a_iᵀ g_i‖² for T positions
  (sequence positions, or convolution patches), whichever is cheaper for the shapes (T(d+p) vs dp).
  The clipped sum is then one weight-gradient product per layer with the clipping factors folded into
  the output gradients, Σ_i c_i a_iᵀ g_i (book-keeping: no second backward pass). Parameters of other
  layers get per-example gradients by vmap in the same pass: for ``nnx.LayerNorm`` and ``nnx.RMSNorm``
  (scale, bias: O(features) numbers per example, one activation row's worth) that is their norm's cheapest
  form, so a transformer is clipped without per-example gradients of its large layers.

Per-example clip norms (flat clipping): ``clip_norm`` may be a ``(B,)`` array, example i being clipped to
C_i (IDP-SGD's "scale" personalisation runs one pass with each record's own norm instead of one pass per
group). Adding or removing example i then moves the sum by at most C_i, so the returned sensitivity is
max_i C_i over the masked-in examples — a bound for the examples present; a trainer that accounts per
record uses C_i itself.

L1 clipping (``norm="l1"``): each example's whole gradient is clipped to ‖g_i‖₁ ≤ C, so the sum has L1
sensitivity C under add/remove (what per-coordinate Laplace or staircase noise needs). Ghost layers have L1
norms too: for one position Σ_{j,k} |a_j g_k| = ‖a‖₁‖g‖₁ (the outer product's entries factorise), and
for T positions the (d, p) product a_iᵀg_i is materialised per example (the L1 norm of a sum has no Gram
identity); an embedding's is Σ over distinct rows of ‖Σ_{t: idx_t = r} g_t‖₁.

Privacy-relevant details: masked-out examples (padding of Poisson batches) and examples whose gradient
is not finite contribute exactly zero; ghost parameters are hidden from everything but their layer's
``__call__`` while tracing, so a model that uses them elsewhere (weight tying, a penalty in the loss)
cannot silently get a wrong norm: ``"ghost"`` raises, ``"auto"`` falls back to ``"vmap"`` (and logs why).
Per-example semantics must hold: :func:`check_per_example` rejects ``nnx.BatchNorm``.
"""

from __future__ import annotations

import logging
import math
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from .._numerics import check_array, is_concrete
from ._ghost import EXACT, GhostUnsupported, Taps, ghost_layers, layer_name, per_row

__all__ = [
    "ClippedGradient",
    "METHODS",
    "NORMS",
    "check_per_example",
    "layer_names",
    "clipped_grad_sum",
    "split_clipped_grad_sum",
]

_log = logging.getLogger(__name__)

METHODS = ("auto", "vmap", "ghost")
NORMS = ("l2", "l1")


class ClippedGradient(NamedTuple):
    """The result of :func:`clipped_grad_sum`.

    Attributes:
      grads: the clipped sum Σ_i c_i g_i over the examples where ``mask`` is true, a pytree like
        ``nnx.state(model, nnx.Param)``.
      sensitivity: sensitivity of ``grads`` (in the clipping norm) to adding or removing one example:
        ``clip_norm``; √(Σ_l C_l²) with per-layer L2 clipping, Σ_l C_l with per-layer L1 clipping; with
        per-example norms ``(B,)``, max_i C_i over the masked-in examples (0 when none is). A float when
        the norms are concrete (and not per-example), else a JAX scalar.
      loss: mean per-example loss over the masked-in examples (0 when none is).
      norms: ``(B,)`` per-example norms (L2, or L1 with ``norm="l1"``) of the whole gradient before
        clipping (NaN for examples not computed: non-finite ones, and the masked-out microbatches skipped
        after the last masked-in example).
    """

    grads: Any
    sensitivity: Any
    loss: jax.Array
    norms: jax.Array


# --------------------------------------------------------------------------------------------------
# model inspection
# --------------------------------------------------------------------------------------------------


def check_per_example(model) -> None:
    """Raise ``ValueError`` naming the first layer that breaks per-example gradients.

    DP-SGD's sensitivity argument (MATH §6) needs each example's loss to depend on that example only.
    ``nnx.BatchNorm`` (and any layer holding ``nnx.BatchStat`` state) normalises over the batch, so
    one example's gradient depends on the others and clipping it bounds nothing.

    Args:
      model: an ``nnx.Module``.

    Raises:
      ValueError: the model contains ``nnx.BatchNorm`` or ``nnx.BatchStat`` variables; the message
        names the layer's path and suggests ``nnx.GroupNorm`` / ``nnx.LayerNorm``.

    Example:
      >>> from flax import nnx
      >>> class Net(nnx.Module):
      ...     def __init__(self, rngs):
      ...         self.dense = nnx.Linear(4, 4, rngs=rngs)
      ...         self.norm = nnx.BatchNorm(4, rngs=rngs)
      >>> check_per_example(Net(nnx.Rngs(0)))
      Traceback (most recent call last):
      ...
      ValueError: layer 'norm' is nnx.BatchNorm: it normalises over the batch, so per-example gradients (and their clipping) are undefined; use nnx.GroupNorm or nnx.LayerNorm for DP training
    """
    for path, module in nnx.iter_modules(model):
        if isinstance(module, nnx.BatchNorm):
            kind = "is nnx.BatchNorm"
        elif any(isinstance(v, nnx.BatchStat) for v in vars(module).values()):
            kind = "holds nnx.BatchStat state"
        else:
            continue
        raise ValueError(
            f"layer '{layer_name(path)}' {kind}: it normalises over the batch, so per-example gradients (and "
            "their clipping) are undefined; use nnx.GroupNorm or nnx.LayerNorm for DP training"
        )


def _param_groups(params) -> dict[str, list[tuple]]:
    """Parameter paths grouped by the module that owns them ("layers"), in the params' order."""
    groups: dict[str, list[tuple]] = {}
    for path, _ in nnx.to_flat_state(params):
        groups.setdefault(layer_name(path[:-1]), []).append(path)
    return groups


def layer_names(model_or_params) -> list[str]:
    """The layers of per-layer clipping, in the order a sequence of per-layer norms follows.

    A layer is a module that owns parameters directly (a ``Linear``'s kernel and bias form one layer);
    its name is its path joined by ``/``.

    Args:
      model_or_params: an ``nnx.Module`` or its ``nnx.state(model, nnx.Param)``.

    Returns:
      list of layer names.

    Example:
      >>> from flax import nnx
      >>> class Net(nnx.Module):
      ...     def __init__(self, rngs):
      ...         self.hidden = nnx.Linear(4, 8, rngs=rngs)
      ...         self.out = nnx.Linear(8, 2, rngs=rngs)
      >>> layer_names(Net(nnx.Rngs(0)))
      ['hidden', 'out']
    """
    params = model_or_params
    if isinstance(params, nnx.Module):
        params = nnx.state(params, nnx.Param)
    return list(_param_groups(params))


# --------------------------------------------------------------------------------------------------
# validation
# --------------------------------------------------------------------------------------------------


def _check_batch(inputs, labels, mask) -> int:
    leaves = jax.tree.leaves(inputs)
    if not leaves or any(np.ndim(x) == 0 for x in leaves):
        raise ValueError("inputs must be an array (or pytree of arrays) with a leading batch dimension")
    batch = int(np.shape(leaves[0])[0])
    if batch < 1:
        raise ValueError("inputs must hold at least one example (leading batch dimension ≥ 1), got 0")
    for what, tree in (("inputs", inputs), ("labels", labels)):
        for x in jax.tree.leaves(tree):
            if np.ndim(x) == 0 or np.shape(x)[0] != batch:
                raise ValueError(f"{what} must have the leading batch dimension {batch} of inputs, "
                                 f"got shape {np.shape(x)}")
    if mask is not None:
        if np.shape(mask) != (batch,):
            raise ValueError(f"mask must have shape (B,) = ({batch},), got {np.shape(mask)}")
        if jnp.asarray(mask).dtype != jnp.bool_:
            raise ValueError(f"mask must be boolean, got dtype {jnp.asarray(mask).dtype}")
    return batch


def _check_clip_norm(value):
    if np.ndim(value) != 0:
        raise ValueError(f"clip_norm must be a positive scalar here, got shape {np.shape(value)}")
    if is_concrete(value):
        check_array("clip_norm", value, 0.0, np.inf, lo_open=True)
        return float(np.asarray(value))
    return value


def _example_clip_norms(clip_norm, batch):
    """A ``(B,)`` array of per-example clip norms, each > 0 and finite (checked when concrete)."""
    if np.shape(clip_norm) != (batch,):
        raise ValueError(f"clip_norm must be one positive number or one per example, shape (B,) = ({batch},), "
                         f"got shape {np.shape(clip_norm)}")
    if is_concrete(clip_norm):
        check_array("clip_norm", np.asarray(clip_norm, dtype=np.float64), 0.0, np.inf, lo_open=True)
    return jnp.asarray(clip_norm)


def _layer_clip_norms(clip_norm, per_layer, names, norm="l2", batch=None):
    """{layer: C_l} (per-layer), the single C, or the (B,) per-example C_i; and the sensitivity (for
    per-example norms, the (B,) array itself: the caller takes the max over the masked-in examples)."""
    if not isinstance(per_layer, bool):
        raise ValueError(f"per_layer must be True or False, got {per_layer!r}")
    if not per_layer:
        if isinstance(clip_norm, (dict, list, tuple)):
            raise ValueError("clip_norm must be one positive number (or a (B,) array of per-example norms) unless "
                             f"per_layer=True, got a {type(clip_norm).__name__}")
        if np.ndim(clip_norm) == 1 and batch is not None:
            c = _example_clip_norms(clip_norm, batch)
            return c, c
        c = _check_clip_norm(clip_norm)
        return c, c
    if isinstance(clip_norm, dict):
        if set(clip_norm) != set(names):
            raise ValueError(f"clip_norm must have one entry per layer {names}, got keys {sorted(clip_norm)}")
        norms = {n: _check_clip_norm(clip_norm[n]) for n in names}
    elif isinstance(clip_norm, (list, tuple)) or np.ndim(clip_norm) == 1:
        if len(clip_norm) != len(names):
            raise ValueError(f"clip_norm must have one norm per layer ({len(names)}: {names}), got {len(clip_norm)}")
        norms = {n: _check_clip_norm(c) for n, c in zip(names, clip_norm)}
    else:  # one total C, split equally: C_l = C/√L keeps √(Σ C_l²) = C (L2), C_l = C/L keeps Σ C_l = C (L1)
        c = _check_clip_norm(clip_norm)
        parts = math.sqrt(len(names)) if norm == "l2" else len(names)
        norms = {n: c / parts for n in names}
    values = list(norms.values())
    # the triangle inequality of each norm: √(Σ_l C_l²) for L2, Σ_l C_l for L1
    if all(isinstance(v, float) for v in values):
        sensitivity = math.sqrt(sum(v * v for v in values)) if norm == "l2" else sum(values)
    elif norm == "l2":
        sensitivity = jnp.sqrt(sum(jnp.square(v) for v in values))
    else:
        sensitivity = sum(values)
    return norms, sensitivity


def _check_key(key, batch):
    if key is None:
        return None
    arr = jnp.asarray(key)
    typed = jnp.issubdtype(arr.dtype, jax.dtypes.prng_key)
    if (typed and arr.shape != ()) or (not typed and (arr.shape != (2,) or arr.dtype != jnp.uint32)):
        raise ValueError(f"key must be one PRNG key (jax.random.key(...) or jax.random.PRNGKey(...)), got "
                         f"shape {arr.shape} dtype {arr.dtype}")
    # fold_in by index: example i's key does not depend on the batch's padding or microbatching.
    return jax.vmap(jax.random.fold_in, (None, 0))(arr, jnp.arange(batch))


# --------------------------------------------------------------------------------------------------
# the functional core
# --------------------------------------------------------------------------------------------------


class _ClipPlan(NamedTuple):
    """What a clipped sum fixes before it sees a microbatch."""
    loss_fn: Callable
    graphdef: Any
    params: Any  # the nnx.Param State differentiated; rest: the model's other state, passed through
    rest: Any
    groups: dict  # {layer name: its parameter paths}: the units of per-layer clipping
    clip: Any  # {layer name: C_l} with per_layer, else one C; None when the batch carries per-example norms
    per_layer: bool
    l1: bool  # clip L1 norms instead of L2
    layers: dict = {}  # {layer name: GhostLayer}: the layers clipped by ghost norms, the rest by vmap
    probe_shapes: dict = {}  # {layer name: output shape of each call}, for one example


class _Batch(NamedTuple):
    """The per-example arrays: one pytree, so that padding and chunking treat them alike."""
    inputs: Any
    labels: Any
    keys: Any  # (B,) PRNG keys, or None
    mask: jax.Array  # (B,) bool: False rows contribute exactly zero
    clip: Any  # (B,) per-example clip norms, or None (plan.clip applies)


def _split_states(params, ghost_paths):
    flat = list(nnx.to_flat_state(params))
    ghost = nnx.from_flat_state([(p, v) for p, v in flat if p in ghost_paths])
    other = nnx.from_flat_state([(p, v) for p, v in flat if p not in ghost_paths])
    return ghost, other


def _pass(plan: _ClipPlan, batch: _Batch):
    """One microbatch: per-example squared L2 (or L1) norms by layer, clipping factors and the clipped sum."""
    layers, groups = plan.layers, plan.groups
    ghost_paths = {layer.path + (a,) for layer in layers.values() for a in layer.attrs}
    ghost_state, other_state = _split_states(plan.params, ghost_paths)
    group_of = {path: name for name, paths in groups.items() for path in paths}

    def one(xi, yi, ki):
        def loss_of(other, probes):
            # Fresh Variables at this trace level (the taps mutate them); tree.map rebuilds the States.
            model = nnx.merge(plan.graphdef, *jax.tree.map(lambda v: v, (ghost_state, other, plan.rest)))
            with Taps(model, layers, probes) as taps:
                losses = plan.loss_fn(model, _add_batch(xi), _add_batch(yi), ki)
            if jnp.shape(losses) != (1,):
                raise ValueError(f"loss_fn must return per-example losses of shape (B,), got shape "
                                 f"{jnp.shape(losses)} for a batch of one example")
            return losses[0], taps.inputs

        probes = {n: [jnp.zeros(s.shape, s.dtype) for s in shapes] for n, shapes in plan.probe_shapes.items()}
        value_and_grad = jax.value_and_grad(loss_of, argnums=(0, 1), has_aux=True)
        (loss, acts), (g_other, g_probes) = value_and_grad(other_state, probes)
        return loss, acts, g_probes, g_other

    in_keys = None if batch.keys is None else 0
    loss, acts, g_probes, g_other = jax.vmap(one, in_axes=(0, 0, in_keys))(batch.inputs, batch.labels, batch.keys)
    # The norms and the clipped sum must read the same numbers. Fused into the backward pass, a bfloat16
    # gradient may be used at float32 precision by one consumer and rounded to bfloat16 for the other (XLA
    # allows excess precision), and an example's contribution could then exceed its clip norm.
    if any(jnp.issubdtype(x.dtype, jnp.floating) and jnp.finfo(x.dtype).bits < 32
           for x in jax.tree_util.tree_leaves((acts, g_probes, g_other))):
        acts, g_probes, g_other = jax.lax.optimization_barrier((acts, g_probes, g_other))
    dtype = jnp.promote_types(loss.dtype, jnp.float32)  # norms of bfloat16 gradients in float32
    sq = {name: jnp.zeros(loss.shape, dtype) for name in groups}
    for path, var in nnx.to_flat_state(g_other):
        g = var.get_value().astype(dtype)
        sq[group_of[path]] = sq[group_of[path]] + jnp.sum(jnp.abs(g) if plan.l1 else jnp.square(g),
                                                          axis=tuple(range(1, g.ndim)))
    for name, layer in layers.items():
        part = jax.vmap(lambda a, g, layer=layer: layer.norm_term(a, g, plan.l1))(acts[name], g_probes[name])
        sq[name] = sq[name] + part.astype(dtype)

    finish = (lambda v: v) if plan.l1 else jnp.sqrt  # sq holds Σ|g| (L1) or Σ g² (L2)
    norms = finish(sum(sq.values()))
    valid = batch.mask & jnp.isfinite(norms)
    if plan.per_layer:
        factor = {n: jnp.where(valid, jnp.minimum(1.0, plan.clip[n] / finish(sq[n])), 0.0) for n in groups}
    else:
        c = plan.clip if batch.clip is None else batch.clip
        f = jnp.where(valid, jnp.minimum(1.0, c / norms), 0.0)
        factor = {n: f for n in groups}

    grads = {}
    for path, var in nnx.to_flat_state(g_other):
        g = var.get_value()
        g = jnp.where(per_row(valid, g), g, jnp.zeros((), g.dtype))
        # at full precision: Σ_i c_i g_i must not round g_i (TF32 would) away from the g_i its norm was taken of
        grads[path] = jnp.tensordot(factor[group_of[path]].astype(g.dtype), g, axes=1, precision=EXACT)
    for name, layer in layers.items():
        grads.update(layer.clipped_sum(acts[name], g_probes[name], factor[name], valid))
    loss_sum = jnp.sum(jnp.where(batch.mask, loss, 0.0))
    return grads, norms, loss_sum


def _add_batch(tree):
    return jax.tree.map(lambda v: v[None], tree)


# Normalisation layers hold O(features) parameters: their per-example gradients, taken in the ghost pass
# itself, cost what one activation row does, so they never force per-example gradients of the big layers.
_PER_EXAMPLE_LAYERS = (nnx.LayerNorm, nnx.RMSNorm)


def _with_ghost_layers(plan: _ClipPlan, model, method: str, batch: _Batch) -> _ClipPlan:
    """The plan with its ghost layers, by a rule decided before the clipped pass runs:

    1. only unshared Linear/LinearGeneral/Conv/Embed layers have ghost norms (ghost_layers); "ghost" clips
       the other layers by per-example gradients in the same pass, "auto" too when they are normalisation
       layers (_PER_EXAMPLE_LAYERS), else it goes all vmap (logged);
    2. an abstract trace of loss_fn must meet the ghost parameters only inside their layer's own call
       (no weight tying, penalty, JAX or nnx transform around the layer), else "ghost" raises a
       ValueError naming the layer or parameter and "auto" logs it and goes all vmap.
    """
    layers = ghost_layers(model, plan.params)
    kind = {layer_name(path): type(module) for path, module in nnx.iter_modules(model)}
    uncovered = [name for name in plan.groups if name not in layers and kind.get(name) not in _PER_EXAMPLE_LAYERS]
    if method == "auto" and uncovered:
        _log.info("clipped_grad_sum: method='auto' uses vmap: layer '%s' (%s) has no ghost norm (only unshared "
                  "nnx.Linear, nnx.LinearGeneral, nnx.Conv and nnx.Embed do; normalisation layers join them)",
                  uncovered[0], getattr(kind.get(uncovered[0]), "__name__", "not a module"))
        return plan

    def forward(params, x, y, k):  # the outputs of every call of every ghost layer, for one example
        model = nnx.merge(plan.graphdef, *jax.tree.map(lambda v: v, (params, plan.rest)))
        with Taps(model, layers) as taps:
            plan.loss_fn(model, _add_batch(x), _add_batch(y), k)
        return taps.outputs

    first = jax.tree.map(lambda v: v[0], (batch.inputs, batch.labels, batch.keys))
    try:  # abstract evaluation: the probes' shapes, and rule 2 checked by the taps
        shapes = jax.eval_shape(forward, plan.params, *first) if layers else {}
    except GhostUnsupported as err:  # the taps' own signal (rule 2); any other error is loss_fn's, raised as is
        if method == "ghost":
            raise ValueError(f"method='ghost': {err}; use method='vmap'") from None
        _log.info("clipped_grad_sum: method='auto' uses vmap: %s", err)
        return plan
    return plan._replace(layers=layers, probe_shapes=shapes)


def _run(plan: _ClipPlan, batch: _Batch, microbatch_size):
    """All microbatches of ``microbatch_size`` examples, summed: a loop that stops after the last chunk holding
    a masked-in example, so a Poisson batch padded to its bucket (masked-in rows first) costs its realised
    size rounded up to a chunk, not the bucket. Rows of the chunks skipped (all masked out) get NaN norms."""
    n = batch.mask.shape[0]
    size = n if microbatch_size is None else min(microbatch_size, n)
    chunks = -(-n // size)
    if chunks * size != n:  # pad with copies of real examples, masked out (they contribute exactly zero)
        index = jnp.arange(chunks * size)
        batch = jax.tree.map(lambda v: jnp.take(v, index % n, axis=0), batch)
        batch = batch._replace(mask=batch.mask & (index < n))
    if chunks == 1:
        grads, norms, loss_sum = _pass(plan, batch)
        return grads, norms[:n], loss_sum
    chunked = jax.tree.map(lambda v: v.reshape((chunks, size) + v.shape[1:]), batch)
    last = jnp.max(jnp.where(batch.mask, jnp.arange(chunks * size), -1))  # −1: nothing masked in
    active = (last + size) // size

    def body(c, carry):
        grads, loss_sum, norms = carry
        chunk = jax.tree.map(lambda v: jax.lax.dynamic_index_in_dim(v, c, keepdims=False), chunked)
        g, chunk_norms, chunk_loss = _pass(plan, chunk)
        return (jax.tree.map(jnp.add, grads, g), loss_sum + chunk_loss,
                jax.lax.dynamic_update_index_in_dim(norms, chunk_norms.astype(norms.dtype), c, 0))

    shapes = jax.eval_shape(lambda c: _pass(plan, jax.tree.map(lambda v: v[0], c)), chunked)
    init = (jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), shapes[0]), jnp.zeros(shapes[2].shape, shapes[2].dtype),
            jnp.full((chunks,) + shapes[1].shape, jnp.nan, shapes[1].dtype))
    grads, loss_sum, norms = jax.lax.fori_loop(0, active, body, init)
    return grads, norms.reshape(-1)[:n], loss_sum


def split_clipped_grad_sum(loss_fn: Callable, graphdef, params, rest, inputs, labels, *, clip_norm, mask=None,
                           key=None, per_layer: bool = False, microbatch_size: int | None = None,
                           method: str = "auto", norm: str = "l2") -> ClippedGradient:
    """:func:`clipped_grad_sum` on a split model ``(graphdef, params, rest)``: the functional core.

    ``nnx.split(model, nnx.Param, ...)`` gives the three parts. Everything but ``params``, ``rest``,
    ``inputs``, ``labels``, ``mask``, ``key`` and the values of ``clip_norm`` is static, so a trainer can
    ``jax.jit`` its step with ``graphdef`` (and ``loss_fn``, ``method``, ``per_layer``,
    ``microbatch_size``) static. Source and arguments as in :func:`clipped_grad_sum`.

    Returns:
      :class:`ClippedGradient`; ``grads`` has the structure of ``params``.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> from flax import nnx
      >>> model = nnx.Linear(3, 1, rngs=nnx.Rngs(0))
      >>> graphdef, params, rest = nnx.split(model, nnx.Param, ...)
      >>> loss = lambda m, x, y, key: jnp.sum((m(x) - y) ** 2, axis=-1)
      >>> step = jax.jit(lambda p, x, y: split_clipped_grad_sum(loss, graphdef, p, rest, x, y, clip_norm=1.0))
      >>> out = step(params, jnp.ones((4, 3)), jnp.zeros((4, 1)))
      >>> out.grads["kernel"].shape, float(out.sensitivity)
      ((3, 1), 1.0)
    """
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    if norm not in NORMS:
        raise ValueError(f"norm must be one of {NORMS}, got {norm!r}")
    if microbatch_size is not None and (isinstance(microbatch_size, bool) or not isinstance(microbatch_size, int)
                                        or microbatch_size < 1):
        raise ValueError(f"microbatch_size must be None or an integer ≥ 1, got {microbatch_size!r}")
    batch = _check_batch(inputs, labels, mask)
    groups = _param_groups(params)
    if not groups:
        raise ValueError("model has no nnx.Param parameters to differentiate")
    clip, sensitivity = _layer_clip_norms(clip_norm, per_layer, list(groups), norm, batch)
    mask = jnp.ones(batch, bool) if mask is None else jnp.asarray(mask)
    data = _Batch(inputs, labels, _check_key(key, batch), mask, None)
    if not per_layer and jnp.ndim(clip) == 1:  # per-example norms: the sensitivity is the largest one present
        data = data._replace(clip=clip)
        sensitivity = jnp.max(jnp.where(mask, clip, jnp.zeros((), clip.dtype)))
    plan = _ClipPlan(loss_fn, graphdef, params, rest, groups, None if data.clip is not None else clip, per_layer,
                     l1=norm == "l1")

    template = nnx.merge(graphdef, params, rest)  # Python structure only: which layers are what
    check_per_example(template)
    if method != "vmap":
        plan = _with_ghost_layers(plan, template, method, data)
    flat, norms, loss_sum = _run(plan, data, microbatch_size)
    grads = nnx.from_flat_state([(path, var.replace(flat[path])) for path, var in nnx.to_flat_state(params)])
    loss = loss_sum / jnp.maximum(jnp.sum(mask), 1).astype(loss_sum.dtype)
    return ClippedGradient(grads, sensitivity, loss, norms)


def clipped_grad_sum(loss_fn: Callable, model, inputs, labels, *, clip_norm, mask=None, key=None,
                     per_layer: bool = False, microbatch_size: int | None = None,
                     method: str = "auto", norm: str = "l2") -> ClippedGradient:
    """Sum of per-example gradients clipped in L2 (or L1) norm, with its sensitivity (DP-SGD's clipped sum).

    Σ_{i: mask_i} g_i · min(1, C/‖g_i‖), g_i = ∇θ ℓ(θ; x_i, y_i) (Abadi et al. 2016, Alg. 1; MATH §6);
    per-layer: each layer's slice clipped to C_l (McMahan et al. 2018), sensitivity √(Σ_l C_l²). Noise
    is added and the sum divided by the expected batch size elsewhere (``jaxpriv.train.noise``).
    Ghost norms: Li et al. 2022 §4 (Gram trick), Bu et al. 2023 (book-keeping); see the module docstring.

    Args:
      loss_fn: ``loss_fn(model, inputs, labels, key) -> (B,)`` per-example losses. It is called on
        batches of one example (under ``jax.vmap``); ``key`` is ``None`` or that example's PRNG key,
        to pass as ``rngs`` to ``nnx.Dropout`` so that dropout masks differ per example.
      model: an ``nnx.Module`` without ``nnx.BatchNorm`` (see :func:`check_per_example`).
      inputs, labels: arrays (or pytrees of arrays) with leading batch dimension B ≥ 1.
      clip_norm: C > 0; with ``per_layer=False`` also a ``(B,)`` array of per-example norms C_i > 0
        (example i clipped to C_i; the sensitivity is then max_i C_i over the masked-in examples). With
        ``per_layer=True`` also a sequence of per-layer norms in :func:`layer_names` order or a dict
        ``{layer name: C_l}``; a single C is split as C/√L (L2) or C/L (L1).
      mask: ``(B,)`` bool; False rows (padding of a Poisson batch) contribute exactly zero.
      key: one PRNG key or None; example i gets ``jax.random.fold_in(key, i)``.
      per_layer: clip each layer separately.
      microbatch_size: process the batch in chunks of this many examples (one loop) to bound memory; a
        last partial chunk is padded with masked-out examples, and the loop stops after the last chunk
        holding a masked-in example (a padded Poisson batch costs its realised size; the skipped rows'
        ``norms`` are NaN).
      method: ``"vmap"`` (any model), ``"ghost"`` (Linear/Conv/Embed by ghost norms, other parameters
        by vmap; raises ``ValueError`` if a ghost parameter is used outside its layer's call, or the layer
        is called inside a JAX or nnx transform in ``loss_fn``) or ``"auto"`` (ghost when every layer with
        parameters supports it and ``"ghost"`` would not raise, else vmap, logged at INFO naming the layer
        that forces it).
      norm: ``"l2"`` (DP-SGD with Gaussian noise) or ``"l1"`` (‖g_i‖₁ ≤ C: the L1 sensitivity that
        per-coordinate Laplace/staircase noise is calibrated to).

    Returns:
      :class:`ClippedGradient` ``(grads, sensitivity, loss, norms)``. An example whose gradient is not
      finite is dropped from the sum (factor 0), like a masked one.

    Example:
      >>> import jax.numpy as jnp
      >>> from flax import nnx
      >>> model = nnx.Linear(2, 1, use_bias=False, rngs=nnx.Rngs(0))
      >>> model.kernel[...] = jnp.zeros((2, 1))
      >>> loss = lambda m, x, y, key: 0.5 * jnp.sum((m(x) - y) ** 2, axis=-1)
      >>> out = clipped_grad_sum(loss, model, jnp.array([[3.0, 4.0], [0.3, 0.4]]), jnp.array([[-1.0], [-1.0]]),
      ...                        clip_norm=1.0)
      >>> [round(float(n), 6) for n in out.norms]  # ‖x_i‖·|y_i|: 5, 0.5
      [5.0, 0.5]
      >>> [round(float(v), 6) for v in out.grads["kernel"][:, 0]]  # (3,4)/5 + (0.3,0.4)
      [0.9, 1.2]
    """
    check_per_example(model)
    graphdef, params, rest = nnx.split(model, nnx.Param, ...)
    return split_clipped_grad_sum(loss_fn, graphdef, params, rest, inputs, labels, clip_norm=clip_norm, mask=mask,
                                  key=key, per_layer=per_layer, microbatch_size=microbatch_size, method=method,
                                  norm=norm)
