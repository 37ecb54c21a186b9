"""Ghost norms: a supported layer's per-example squared L2 (or L1) gradient norm from its inputs and output
gradients, its book-keeping clipped sum, and the taps that collect both during one batched backward pass (the
``"ghost"`` method of :mod:`jaxpriv.train.clipping`, whose module docstring gives the identities and their
sources: Goodfellow 2015; Li et al. 2022, §4; Bu et al. 2023).

Package infrastructure for :mod:`jaxpriv.train.clipping`, not a user API: :func:`ghost_layers` finds the
layers a model's ghost pass covers (unshared ``nnx.Linear``, ``nnx.LinearGeneral`` over trailing axes,
``nnx.Conv``, ``nnx.Embed``), :class:`GhostLayer` gives each one's norm and clipped sum, and :class:`Taps`
records their inputs and adds a zero probe to their outputs inside the traced forward pass, hiding their
parameters from every other use (:class:`GhostUnsupported` when a use is found).
"""

from __future__ import annotations

import functools
import math
import threading

import jax
import jax.numpy as jnp
from flax import nnx
from flax.errors import TraceContextError
from flax.nnx.nn.linear import _conv_dimension_numbers, canonicalize_padding

__all__ = ["EXACT", "GhostLayer", "GhostUnsupported", "Taps", "ghost_layers", "layer_name", "per_row"]


class GhostUnsupported(ValueError):
    """Raised while tracing when ghost clipping cannot see all uses of a layer's parameters."""


def layer_name(path) -> str:
    """A layer's name: its path in the model joined by "/" ("<root>" for the model itself)."""
    return "/".join(str(p) for p in path) or "<root>"


# --------------------------------------------------------------------------------------------------
# ghost layers: per-example squared L2 or L1 norms from (inputs, output gradients), and the book-keeping sum
# --------------------------------------------------------------------------------------------------


#: The precision of every product that forms a norm or a clipped contribution. The norm and the clipped sum
#: are separate computations: at the backend's default precision (TF32 on NVIDIA GPUs rounds float32
#: operands to 10-bit mantissas) each could round differently, and an example's contribution could exceed
#: its clip norm by ~1e-3 relative. At full precision both are exact to float32 rounding.
EXACT = jax.lax.Precision.HIGHEST


def _outer_sq_norm(a, g):
    """‖aᵀg‖²_F for a (T, d), g (T, p): the squared norm of Σ_t a_t g_tᵀ, by the cheaper route."""
    t, d = a.shape
    p = g.shape[1]
    if t == 1:
        return jnp.sum(a * a) * jnp.sum(g * g)
    if t * (d + p) < d * p:  # Gram trick: Σ_{t,s} (a_t·a_s)(g_t·g_s), cost T²(d+p)
        return jnp.sum(jnp.matmul(a, a.T, precision=EXACT) * jnp.matmul(g, g.T, precision=EXACT))
    return jnp.sum(jnp.square(jnp.matmul(a.T, g, precision=EXACT)))  # materialised per-example gradient, cost Tdp


def _bias_sq_norm(g):
    return jnp.sum(jnp.square(jnp.sum(g, axis=0)))


def _outer_l1_norm(a, g):
    """‖aᵀg‖₁ (the sum of absolute entries) for a (T, d), g (T, p). One position: |a_j g_k| factorises, so
    it is ‖a‖₁‖g‖₁; several positions share no such identity, so the (d, p) product is materialised."""
    if a.shape[0] == 1:
        return jnp.sum(jnp.abs(a)) * jnp.sum(jnp.abs(g))
    return jnp.sum(jnp.abs(jnp.matmul(a.T, g, precision=EXACT)))


def _bias_l1_norm(g):
    return jnp.sum(jnp.abs(jnp.sum(g, axis=0)))


class GhostLayer:
    """A supported layer: how to get its per-example gradient norm term (Σ g², or Σ|g| for L1) and its clipped
    sum."""

    def __init__(self, path, module):
        self.path = path
        self.name = layer_name(path)
        self.module = module  # the layer as merged from the caller's params (real values)
        self.attrs = tuple(a for a in ("kernel", "bias", "embedding")
                           if isinstance(getattr(module, a, None), nnx.Param))

    def rows(self, a, g):
        """(T, d) inputs and (T, p) output gradients of one call, for one example."""
        return a.reshape(-1, a.shape[-1]), g.reshape(-1, g.shape[-1])

    def norm_term(self, acts, gouts, l1: bool = False):
        """Squared L2 norm (``l1``: the L1 norm) of this layer's gradient for one example (inside vmap), all
        calls together."""
        if not acts:
            return jnp.zeros((), jnp.result_type(float))
        pairs = [self.rows(a, g) for a, g in zip(acts, gouts)]
        a = _at_least_f32(jnp.concatenate([p[0] for p in pairs]))
        g = _at_least_f32(jnp.concatenate([p[1] for p in pairs]))
        total = _outer_l1_norm(a, g) if l1 else _outer_sq_norm(a, g)
        if "bias" in self.attrs:
            total = total + (_bias_l1_norm(g) if l1 else _bias_sq_norm(g))
        return total

    def clipped_sum(self, acts, gouts, factor, valid):
        """Σ_i c_i ∇θ ℓ_i for this layer's parameters: one vjp of the layer at the batched inputs with
        the clipping factors folded into the output gradients (book-keeping)."""
        graphdef, state = nnx.split(self.module)
        if not acts:
            return {self.path + k: jnp.zeros_like(v) for k, v in _flat_values(state).items()}
        # Zero the inputs and output gradients of dropped examples: 0·NaN would still poison the sum. A layer
        # computing in bfloat16/float16 (mixed precision) has its clipped sum taken in float32 all the same:
        # c_i·g_i rounded to 16 bits could carry example i's contribution above its clip norm.
        acts = [jnp.where(per_row(valid, a), _at_least_f32(a), jnp.zeros((), _at_least_f32(a).dtype)) for a in acts]
        cot = [jnp.where(per_row(valid, g), _at_least_f32(g) * per_row(factor, g), 0.0).astype(_at_least_f32(g).dtype)
               for g in gouts]

        def outputs(s):
            layer = nnx.merge(graphdef, s)
            if getattr(layer, "dtype", None) is not None:
                layer.dtype = jnp.promote_types(layer.dtype, jnp.float32)
            if hasattr(layer, "precision"):  # the weight gradient at the precision its norm was taken in
                layer.precision = EXACT
            return [layer(a) for a in acts]

        with jax.default_matmul_precision("highest"):  # and whatever the layer calls that has no precision
            _, vjp = jax.vjp(outputs, state)
            (grads,) = vjp(cot)
        return {self.path + k: v for k, v in _flat_values(grads).items()}


class _GhostLinear(GhostLayer):
    pass


class _GhostLinearGeneral(GhostLayer):
    """LinearGeneral contracting the trailing axes (attention's query/key/value/out projections): a linear
    layer from the flattened contracted axes to the flattened output features."""

    def rows(self, a, g):
        d = math.prod(self.module.in_features)
        p = math.prod(self.module.out_features)
        return a.reshape(-1, d), g.reshape(-1, p)


class _GhostConv(GhostLayer):
    """Convolution as a linear layer over patches: a_t is the receptive field at output position t."""

    def rows(self, a, g):
        m = self.module
        n = len(m.kernel_size)
        x = a.reshape((-1,) + a.shape[-(n + 1):])

        def per_dim(v):
            v = 1 if v is None else v
            return (v,) * n if isinstance(v, int) else tuple(v)

        strides, lhs_dil, rhs_dil = per_dim(m.strides), per_dim(m.input_dilation), per_dim(m.kernel_dilation)
        padding = canonicalize_padding(m.padding, n)
        # The same input padding as nnx.Conv.__call__ for the modes lax does not know.
        if padding in ("CIRCULAR", "REFLECT"):
            sizes = [(k - 1) * d + 1 for k, d in zip(m.kernel_size, rhs_dil)]
            pads = [(0, 0)] + [((k - 1) // 2, k // 2) for k in sizes] + [(0, 0)]
            x = jnp.pad(x, pads, mode={"CIRCULAR": "wrap", "REFLECT": "reflect"}[padding])
            padding = "VALID"
        elif padding == "CAUSAL":
            x = jnp.pad(x, [(0, 0), (rhs_dil[0] * (m.kernel_size[0] - 1), 0), (0, 0)])
            padding = "VALID"
        patches = jax.lax.conv_general_dilated_patches(
            x, m.kernel_size, strides, padding, lhs_dilation=lhs_dil, rhs_dilation=rhs_dil,
            dimension_numbers=_conv_dimension_numbers(x.shape), precision=jax.lax.Precision.HIGHEST)
        # The patch features come in (channel, window) order, not the kernel's, but a norm does not care.
        return patches.reshape(-1, patches.shape[-1]), g.reshape(-1, g.shape[-1])


class _GhostEmbed(GhostLayer):
    """Embedding: example i's gradient adds g_t to row idx_t, so its squared norm is Σ over distinct
    rows of ‖Σ_{t: idx_t = r} g_t‖² (its L1 norm: of ‖·‖₁), computed by sorting the indices (O(T log T), no
    V×p array)."""

    def norm_term(self, acts, gouts, l1: bool = False):
        if not acts:
            return jnp.zeros((), jnp.result_type(float))
        vocab = self.module.num_embeddings
        idx = jnp.concatenate([a.reshape(-1) for a in acts])
        g = _at_least_f32(jnp.concatenate([x.reshape(-1, x.shape[-1]) for x in gouts]))
        if vocab == 1:  # nnx.Embed broadcasts its single row whatever the index
            return _bias_l1_norm(g) if l1 else _bias_sq_norm(g)
        idx = jnp.where(idx < 0, idx + vocab, idx)  # jnp.take's wrap-around of negative indices
        order = jnp.argsort(idx)
        sorted_idx = idx[order]
        first = jnp.concatenate([jnp.ones((1,), bool), sorted_idx[1:] != sorted_idx[:-1]])
        segment = jnp.cumsum(first) - 1
        rows = jax.ops.segment_sum(g[order], segment, num_segments=idx.shape[0])
        return jnp.sum(jnp.abs(rows)) if l1 else jnp.sum(jnp.square(rows))


def _at_least_f32(x):
    """Norms and clipped sums of bfloat16/float16 activations and gradients are computed in float32 (integer
    inputs, an embedding's indices, are kept)."""
    if not jnp.issubdtype(x.dtype, jnp.floating):
        return x
    return x.astype(jnp.promote_types(x.dtype, jnp.float32))


def _flat_values(state) -> dict:
    return {path: var.get_value() for path, var in nnx.to_flat_state(state)}


def per_row(v, like):
    """The (B,) vector ``v`` shaped to broadcast against the batched array ``like``."""
    return v.reshape((-1,) + (1,) * (like.ndim - 1))


def _ghost_kind(module):
    """The ghost class for a supported layer configuration, else None (its parameters use vmap)."""
    kind = type(module)
    # (A kernel with extra leading axes is a stack of layers made by nnx.vmap, applied by nnx.scan.)
    if kind is nnx.Linear and module.dot_general is jax.lax.dot_general and module.kernel.ndim == 2:
        return _GhostLinear
    if (kind is nnx.Conv and module.conv_general_dilated is jax.lax.conv_general_dilated
            and module.feature_group_count == 1 and module.mask is None
            and module.kernel.ndim == len(module.kernel_size) + 2):
        return _GhostConv
    if kind is nnx.Embed and module.embedding.ndim == 2:
        return _GhostEmbed
    if (kind is nnx.LinearGeneral and module.dot_general is None and module.dot_general_cls is None
            and not module.batch_axis and tuple(module.axis) == tuple(range(-len(module.axis), 0))
            and module.kernel.ndim == len(module.in_features) + len(module.out_features)):
        return _GhostLinearGeneral
    return None


def _variable_refs(module) -> list:
    """The Variables a module references directly or inside plain containers."""
    found, stack = [], list(vars(module).values())
    while stack:
        v = stack.pop()
        if isinstance(v, nnx.Variable):
            found.append(v)
        elif isinstance(v, (list, tuple)):
            stack.extend(v)
        elif isinstance(v, dict):
            stack.extend(v.values())
    return found


def ghost_layers(model, params) -> dict[str, GhostLayer]:
    """Supported layers whose parameters nothing else references (a shared kernel would need the norm
    of a sum of contributions, which the per-layer formulas do not give)."""
    counts: dict[int, int] = {}
    for _, module in nnx.iter_modules(model):
        for var in _variable_refs(module):
            counts[id(var)] = counts.get(id(var), 0) + 1
    param_paths = {path for path, _ in nnx.to_flat_state(params)}
    layers = {}
    for path, module in nnx.iter_modules(model):
        cls = _ghost_kind(module)
        if cls is None:
            continue
        layer = cls(path, module)
        owned = [getattr(module, a) for a in layer.attrs]
        if (layer.attrs and all(counts[id(v)] == 1 for v in owned)
                and all(path + (a,) in param_paths for a in layer.attrs)):
            layers[layer.name] = layer
    return layers


# --------------------------------------------------------------------------------------------------
# taps: record a ghost layer's inputs and add a probe to its output, inside the traced forward pass
# --------------------------------------------------------------------------------------------------

_ACTIVE = threading.local()


def _hidden_message(name):
    return (f"parameter '{name}' is used outside its layer's __call__ (weight tying, Embed.attend, a penalty "
            "in the loss, an nnx transform in loss_fn...), where ghost clipping cannot see its per-example "
            "gradient")


class _Hidden:
    """Stands in for a ghost layer's parameter while tracing: any use outside the layer's call raises."""

    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    def _fail(self, *args, **kwargs):
        raise GhostUnsupported(_hidden_message(self.name))

    def __getattr__(self, attr):
        raise GhostUnsupported(_hidden_message(object.__getattribute__(self, "name")))


# No __jax_array__: JAX's abstractification (an nnx transform splitting the model) then asks __getattr__ for it
# and gets GhostUnsupported, where defining it would make JAX raise its own, unrecognisable, ValueError.
for _dunder in ("__array__", "__getitem__", "__len__", "__iter__", "__float__", "__int__",
                "__bool__", "__neg__", "__pos__", "__abs__", "__add__", "__radd__", "__sub__", "__rsub__",
                "__mul__", "__rmul__", "__matmul__", "__rmatmul__", "__truediv__", "__rtruediv__", "__pow__",
                "__rpow__", "__lt__", "__le__", "__gt__", "__ge__"):
    setattr(_Hidden, _dunder, _Hidden._fail)


@functools.cache
def _tapped_class(base):
    """A subclass of ``base`` whose ``__call__`` goes through the active taps (swapped in per instance)."""

    def __call__(self, inputs, *args, **kwargs):
        entry = getattr(_ACTIVE, "registry", {}).get(id(self))
        if entry is None:  # a copy made by an nnx transform inside the loss (nnx.scan, nnx.vmap...)
            raise GhostUnsupported(f"a {base.__name__} layer is called on a copy of the model (an nnx "
                                    "transform inside loss_fn?), where ghost clipping cannot follow it")
        taps, name = entry
        return taps.call(name, functools.partial(base.__call__, self), inputs, args, kwargs)

    return type(base)(f"_Tapped{base.__name__}", (base,), {"__call__": __call__, "__module__": __name__})


class Taps:
    """Swaps the ghost layers of a freshly merged (trace-local) model for tapped ones.

    With ``probes=None`` it records each call's output (the shape pass); otherwise it adds
    ``probes[name][k]`` to the k-th call's output, so that the gradient with respect to the probe is
    the gradient with respect to the output.
    """

    def __init__(self, model, layers, probes=None):
        self.probes = probes
        self.inputs = {name: [] for name in layers}
        self.outputs = {name: [] for name in layers}
        self.hidden = {}
        by_path = dict(nnx.iter_modules(model))
        self.modules = {}
        for name, layer in layers.items():
            module = by_path[layer.path]
            self.hidden[name] = [(getattr(module, a), getattr(module, a).get_value(), f"{name}/{a}")
                                 for a in layer.attrs]
            for var, _, full in self.hidden[name]:
                var.set_value(_Hidden(full))
            object.__setattr__(module, "__class__", _tapped_class(type(module)))
            self.modules[name] = module

    def __enter__(self):
        if not hasattr(_ACTIVE, "registry"):
            _ACTIVE.registry = {}
        for name, module in self.modules.items():
            _ACTIVE.registry[id(module)] = (self, name)
        return self

    def __exit__(self, *exc):
        for module in self.modules.values():
            _ACTIVE.registry.pop(id(module), None)

    def call(self, name, call, inputs, args, kwargs):
        hidden = self.hidden[name]
        try:
            for var, value, _ in hidden:
                var.set_value(value)
        except TraceContextError:  # flax refuses writes from an inner trace: a JAX transform inside loss_fn
            raise GhostUnsupported(f"layer '{name}' is called inside a JAX transform in loss_fn (lax.scan, lax.cond, "
                                    "jax.checkpoint, jax.vmap...), where ghost clipping cannot follow it") from None
        try:
            out = call(inputs, *args, **kwargs)
        finally:
            for var, _, full in hidden:
                var.set_value(_Hidden(full))
        k = len(self.inputs[name])
        self.inputs[name].append(inputs)
        if self.probes is None:
            self.outputs[name].append(out)
            return out
        if k >= len(self.probes[name]):
            raise GhostUnsupported(f"layer '{name}' was called more often than in the shape pass")
        return out + self.probes[name][k]
