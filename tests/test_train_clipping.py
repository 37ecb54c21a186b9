"""Tests for jaxpriv.train.clipping (MATH §6): the clipped per-example gradient sum of Flax NNX models.

Oracle: a Python loop over examples (one jitted ``jax.grad`` per example: no vmap, no ghost norms), then
clipping and summing in float64 numpy. The vmap and ghost paths must both match it (1e-5 relative in
float32, 1e-10 in float64) on a model with every ghost route (Conv, Embed, Linear with one position,
the Gram trick and the materialised per-example gradient), on convolutions with every nnx padding mode,
on a mixed model (LayerNorm by vmap inside the ghost pass, a layer called twice, dropout keys), on
sequences (attention's LinearGeneral projections, RMSNorm, LayerNorm, position embeddings) and on the tiny
Transformer;
with masks, non-finite examples, per-layer norms, microbatches; plus the ghost path's guards (weight
tying, parameter penalties, shared kernels, BatchNorm), the rule by which "auto" falls back to vmap (and
logs why) where "ghost" raises, and one ValueError per bad argument.

Compilation dominates the run time, so every clipped sum goes through one ``jax.jit`` (``graphdef`` and
the method static, clip norms, mask and key traced) and the oracle's per-example gradients are cached.
"""

import functools
import logging
import math
import re

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

from jaxpriv.train import _ghost
from jaxpriv.train.clipping import (
    ClippedGradient,
    check_per_example,
    clipped_grad_sum,
    layer_names,
    split_clipped_grad_sum,
)

F32_TOL = 1e-5
F64_TOL = 1e-10


@pytest.fixture(autouse=True)
def x64_stays_off():
    """Every test runs with the default global flag (off) and must leave it that way."""
    assert not jax.config.jax_enable_x64
    yield
    assert not jax.config.jax_enable_x64


# ------------------------------------------------------------------------------------------------
# models, data, loss
# ------------------------------------------------------------------------------------------------


class Multi(nnx.Module):
    """Every ghost route in one model: two convolutions on an image; an embedding on tokens followed by
    a per-position Linear where T(d+p) < dp (Gram trick) and one where it is not (materialised); a
    dense head on one vector per example (‖a‖²‖g‖²)."""

    def __init__(self, rngs, dtype=jnp.float32):
        kw = dict(param_dtype=dtype, rngs=rngs)
        self.conv1 = nnx.Conv(2, 4, (3, 3), strides=2, padding="SAME", **kw)
        self.conv2 = nnx.Conv(4, 6, (2, 2), padding="VALID", **kw)
        self.embed = nnx.Embed(9, 16, **kw)
        self.gram = nnx.Linear(16, 16, **kw)  # T = 6: 6·32 < 256
        self.mat = nnx.Linear(16, 2, **kw)  # 6·18 ≥ 32
        self.head = nnx.Linear(6 * 3 * 3 + 16 + 2, 3, **kw)

    def __call__(self, inputs, key=None):
        x = nnx.relu(self.conv1(inputs["image"]))  # (8, 8) -> (4, 4)
        x = jnp.tanh(self.conv2(x)).reshape(x.shape[0], -1)  # (3, 3)
        e = self.embed(inputs["tokens"])
        h = jnp.concatenate([x, jnp.tanh(self.gram(e)).mean(1), jnp.tanh(self.mat(e)).mean(1)], axis=-1)
        return self.head(h)


class Convs(nnx.Module):
    """One branch per nnx.Conv option set (2-D and a causal 1-D one), plus a grouped convolution that
    ghost clipping leaves to vmap; branch outputs are pooled and summed into a dense head."""

    def __init__(self, rngs):
        options = [
            dict(padding="VALID", strides=2),
            dict(padding=1, kernel_dilation=2),
            dict(padding=((2, 0), (1, 1)), input_dilation=2),
            dict(padding="CIRCULAR"),
            dict(padding="REFLECT", strides=(2, 1)),
            dict(padding="SAME", use_bias=False),
        ]
        self.branches = nnx.List([nnx.Conv(2, 3, (3, 3), rngs=rngs, **o) for o in options])
        self.causal = nnx.Conv(2, 3, (3,), padding="CAUSAL", rngs=rngs)
        self.grouped = nnx.Conv(2, 4, (3, 3), feature_group_count=2, rngs=rngs)
        self.head = nnx.Linear(3, 3, rngs=rngs)

    def __call__(self, x, key=None):
        pooled = [jnp.tanh(conv(x)).mean((1, 2)) for conv in self.branches]
        pooled.append(jnp.tanh(self.causal(x.reshape(x.shape[0], -1, 2))).mean(1))
        pooled.append(jnp.tanh(self.grouped(x)).mean((1, 2))[:, :3])
        return self.head(sum(pooled))


class Mixed(nnx.Module):
    """Ghost layers next to a LayerNorm (vmap), a Linear called twice, and dropout."""

    def __init__(self, rngs):
        self.inp = nnx.Linear(5, 6, rngs=rngs)
        self.norm = nnx.LayerNorm(6, rngs=rngs)
        self.shared = nnx.Linear(6, 6, rngs=rngs)
        self.drop = nnx.Dropout(0.5)
        self.out = nnx.Linear(6, 3, rngs=rngs)

    def __call__(self, x, key=None):
        h = self.norm(jnp.tanh(self.inp(x)))
        h = jnp.tanh(self.shared(jnp.tanh(self.shared(h))))
        return self.out(self.drop(h, rngs=key, deterministic=key is None))


class Sequence(nnx.Module):
    """Transformer pieces on token sequences: attention (LinearGeneral query/key/value over the last axis,
    out over the last two), LinearGeneral to a 2-axis output, RMSNorm and LayerNorm (per-example gradients
    in the ghost pass), a position Embed called on an unbatched index, and two LinearGenerals ghost norms
    do not cover (a positive axis, a batch axis), left to vmap."""

    def __init__(self, rngs):
        self.embed = nnx.Embed(9, 8, rngs=rngs)
        self.position = nnx.Embed(6, 8, rngs=rngs)
        self.rms = nnx.RMSNorm(8, rngs=rngs)
        self.attention = nnx.MultiHeadAttention(2, 8, decode=False, rngs=rngs)
        self.norm = nnx.LayerNorm(8, rngs=rngs)
        self.split = nnx.LinearGeneral(8, (2, 3), rngs=rngs)
        self.positive = nnx.LinearGeneral(3, 4, axis=2, rngs=rngs)
        self.head = nnx.Linear(4, 3, rngs=rngs)

    def __call__(self, tokens, key=None):
        h = self.embed(tokens) + self.position(jnp.arange(tokens.shape[1]))
        h = h + self.attention(self.rms(h))
        h = jnp.tanh(self.split(self.norm(h)))  # (B, T, 2, 3)
        return self.head(jnp.tanh(self.positive(h.mean(1))).mean(1))


class Scaled(nnx.Module):
    """A user-defined layer (a learned temperature): no ghost norm, so "auto" clips by vmap."""

    def __init__(self, rngs):
        self.body = nnx.Linear(5, 3, rngs=rngs)
        self.temperature = Temperature()

    def __call__(self, x, key=None):
        return self.temperature(self.body(x))


class Temperature(nnx.Module):
    def __init__(self):
        self.value = nnx.Param(jnp.ones(()))

    def __call__(self, x):
        return x * self.value[...]


class MLP(nnx.Module):
    def __init__(self, rngs):
        self.hidden = nnx.Linear(5, 7, rngs=rngs)
        self.out = nnx.Linear(7, 3, rngs=rngs)

    def __call__(self, x, key=None):
        return self.out(jnp.tanh(self.hidden(x)))


class Tied(nnx.Module):
    """An embedding reused as the output layer (Embed.attend): ghost norms cannot see the second use."""

    def __init__(self, rngs):
        self.embed = nnx.Embed(9, 4, rngs=rngs)

    def __call__(self, tokens, key=None):
        return self.embed.attend(jnp.tanh(self.embed(tokens)).mean(axis=1))


def xent(model, x, y, key):
    return optax.softmax_cross_entropy_with_integer_labels(model(x, key), y)


def penalised(model, x, y, key):
    return xent(model, x, y, key) + 0.5 * jnp.sum(model.hidden.kernel[...] ** 2)


def multi_data(n=6, seed=0, dtype=jnp.float32):
    k1, k2, k3 = jax.random.split(jax.random.key(seed), 3)
    tokens = jax.random.randint(k2, (n, 6), 0, 9).at[:, 1].set(3)  # a repeated token in every example
    return {"image": jax.random.normal(k1, (n, 8, 8, 2), dtype), "tokens": tokens}, jax.random.randint(k3, (n,), 0, 3)


def vector_data(n=7, seed=1):
    kx, ky = jax.random.split(jax.random.key(seed))
    return 2.0 * jax.random.normal(kx, (n, 5)), jax.random.randint(ky, (n,), 0, 3)


# ------------------------------------------------------------------------------------------------
# the code under test (one jit) and the oracle (a loop over examples)
# ------------------------------------------------------------------------------------------------


@functools.partial(jax.jit,
                   static_argnames=("graphdef", "loss_fn", "method", "per_layer", "microbatch_size", "norm"))
def _jitted(params, rest, x, y, clip, mask, key, *, graphdef, loss_fn, method, per_layer, microbatch_size, norm):
    return split_clipped_grad_sum(loss_fn, graphdef, params, rest, x, y, clip_norm=clip, mask=mask, key=key,
                                  per_layer=per_layer, microbatch_size=microbatch_size, method=method, norm=norm)


def clipped(model, x, y, clip, *, loss_fn=xent, mask=None, key=None, method="auto", per_layer=False,
            microbatch_size=None, norm="l2") -> ClippedGradient:
    graphdef, params, rest = nnx.split(model, nnx.Param, ...)
    mask = None if mask is None else jnp.asarray(mask)
    return _jitted(params, rest, x, y, clip, mask, key, graphdef=graphdef, loss_fn=loss_fn, method=method,
                   per_layer=per_layer, microbatch_size=microbatch_size, norm=norm)


def flat(state) -> dict:
    return {"/".join(map(str, p)): np.asarray(v.get_value(), np.float64) for p, v in nnx.to_flat_state(state)}


@functools.lru_cache(maxsize=None)
def _grad_one(graphdef, loss_fn):
    return jax.jit(jax.grad(lambda p, rest, xi, yi, k: loss_fn(nnx.merge(graphdef, p, rest), xi, yi, k)[0]))


def per_example_grads(model, x, y, key=None, loss_fn=xent) -> list[dict]:
    graphdef, params, rest = nnx.split(model, nnx.Param, ...)
    grad = _grad_one(graphdef, loss_fn)
    out = []
    for i in range(len(y)):
        xi = jax.tree.map(lambda v: v[i:i + 1], x)
        out.append(flat(grad(params, rest, xi, y[i:i + 1], None if key is None else jax.random.fold_in(key, i))))
    return out


def reference(grads: list[dict], clip, mask=None) -> tuple[dict, np.ndarray]:
    """Clipped sum and norms in float64: flat clipping for a number, per-layer for {layer: C_l}."""
    norms = np.array([math.sqrt(sum(float(np.sum(v * v)) for v in g.values())) for g in grads])
    total = {k: np.zeros_like(v) for k, v in grads[0].items()}
    for i, g in enumerate(grads):
        if mask is not None and not mask[i]:
            continue
        if isinstance(clip, dict):
            layer = {k: k.rsplit("/", 1)[0] for k in g}
            sq = {}
            for k, v in g.items():
                sq[layer[k]] = sq.get(layer[k], 0.0) + float(np.sum(v * v))
            factor = {k: min(1.0, clip[layer[k]] / math.sqrt(sq[layer[k]])) for k in g}
        else:
            factor = {k: min(1.0, clip / norms[i]) for k in g}
        for k, v in g.items():
            total[k] += factor[k] * v
    return total, norms


def assert_close(got: dict, want: dict, tol: float):
    """max |got − want| ≤ tol · max |want| over all parameters (a scale-aware comparison)."""
    assert set(got) == set(want)
    scale = max(float(np.max(np.abs(v))) for v in want.values())
    err = max(float(np.max(np.abs(np.asarray(got[k], np.float64) - want[k]))) for k in want)
    assert err <= tol * scale, f"max abs error {err:.3g} > {tol:g} × {scale:.3g}"


def assert_matches(out: ClippedGradient, want: dict, want_norms, tol: float, rows=slice(None)):
    assert_close(flat(out.grads), want, tol)
    np.testing.assert_allclose(np.asarray(out.norms, np.float64)[rows], want_norms[rows], rtol=tol)


def ghost_names(model) -> set:
    return set(_ghost.ghost_layers(model, nnx.state(model, nnx.Param)))


# ------------------------------------------------------------------------------------------------
# agreement with the loop, ghost with vmap
# ------------------------------------------------------------------------------------------------


def test_every_ghost_route_matches_loop_and_vmap_with_mask():
    model = Multi(nnx.Rngs(0))
    assert ghost_names(model) == {"conv1", "conv2", "embed", "gram", "mat", "head"}
    x, y = multi_data()
    mask = np.array([True, False, True, True, False, True])
    want, norms = reference(per_example_grads(model, x, y), 0.5, mask)
    outs = {m: clipped(model, x, y, 0.5, mask=mask, method=m) for m in ("vmap", "ghost")}
    for out in outs.values():
        assert_matches(out, want, norms, F32_TOL)
    assert_close(flat(outs["ghost"].grads), flat(outs["vmap"].grads), F32_TOL)


def test_masked_and_non_finite_examples_contribute_exactly_zero():
    model = Multi(nnx.Rngs(0))
    x, y = multi_data()
    keep = np.array([True, False, True, True, False, True])
    bad = dict(x, image=x["image"].at[1].set(jnp.nan).at[4].set(jnp.inf))  # garbage in the padded rows
    want, norms = reference(per_example_grads(model, x, y), 0.5, keep)
    masked = clipped(model, bad, y, 0.5, mask=keep, method="ghost")
    assert_matches(masked, want, norms, F32_TOL, rows=keep)
    assert np.all(np.isnan(np.asarray(masked.norms)[~keep]))
    unmasked = clipped(model, bad, y, 0.5, method="ghost")  # no mask: non-finite examples are dropped
    assert_close(flat(unmasked.grads), want, F32_TOL)


def test_float64_ghost_vmap_and_loop_agree_to_1e_10():
    with jax.enable_x64(True):
        model = Multi(nnx.Rngs(1), jnp.float64)
        x, y = multi_data(4, dtype=jnp.float64)
        mask = np.array([True, True, False, True])
        want, norms = reference(per_example_grads(model, x, y), 0.3, mask)
        outs = {m: clipped(model, x, y, 0.3, mask=mask, method=m) for m in ("vmap", "ghost")}
        for out in outs.values():
            assert out.norms.dtype == jnp.float64
            assert_matches(out, want, norms, F64_TOL)
        assert_close(flat(outs["ghost"].grads), flat(outs["vmap"].grads), F64_TOL)


def test_conv_padding_modes_match_loop():
    model = Convs(nnx.Rngs(2))
    names = ghost_names(model)
    assert {f"branches/{i}" for i in range(6)} | {"causal", "head"} == names  # "grouped" is left to vmap
    x = jax.random.normal(jax.random.key(3), (4, 7, 7, 2))
    y = jnp.arange(4) % 3
    want, norms = reference(per_example_grads(model, x, y), 0.3)
    assert_matches(clipped(model, x, y, 0.3, method="ghost"), want, norms, F32_TOL)
    masked = nnx.Conv(2, 3, (3, 3), mask=jnp.ones((3, 3, 2, 3)), rngs=nnx.Rngs(3))
    assert _ghost._ghost_kind(masked) is None


def test_outer_norm_routes():
    """‖aᵀg‖²_F by its three routes (one row, Gram, materialised) and ‖aᵀg‖₁ by its two (one row:
    ‖a‖₁‖g‖₁; several: materialised) against numpy, in float64."""
    rng = np.random.default_rng(0)
    for t, d, p in [(1, 5, 3), (3, 20, 30), (40, 4, 3)]:
        a, g = rng.standard_normal((t, d)), rng.standard_normal((t, p))
        with jax.enable_x64(True):
            sq = float(_ghost._outer_sq_norm(jnp.asarray(a), jnp.asarray(g)))
            l1 = float(_ghost._outer_l1_norm(jnp.asarray(a), jnp.asarray(g)))
        assert sq == pytest.approx(float(np.sum((a.T @ g) ** 2)), rel=1e-12)
        assert l1 == pytest.approx(float(np.sum(np.abs(a.T @ g))), rel=1e-12)


def test_mixed_model_with_dropout_and_microbatches_matches_loop():
    model = Mixed(nnx.Rngs(5))
    assert ghost_names(model) == {"inp", "shared", "out"}  # LayerNorm's parameters go through vmap
    x, y = vector_data(7)
    key = jax.random.key(7)
    mask = np.array([True, True, True, False, True, True, True])
    want, norms = reference(per_example_grads(model, x, y, key), 0.4, mask)
    for method, size in [("vmap", None), ("ghost", None), ("vmap", 4), ("ghost", 3)]:  # 7 = 3 + 3 + 1 (padded)
        out = clipped(model, x, y, 0.4, mask=mask, key=key, method=method, microbatch_size=size)
        assert_matches(out, want, norms, F32_TOL)
    # identical examples get different dropout masks (per-example keys), so different gradients; with
    # 2⁶ masks of the 6 units two of the 7 may coincide, so ask for 5 distinct norms (fixed key)
    same = clipped(model, jnp.tile(x[:1], (7, 1)), jnp.tile(y[:1], 7), 0.4, mask=mask, key=key, method="ghost",
                   microbatch_size=3)
    assert len(np.unique(np.round(np.asarray(same.norms), 5))) >= 5


# ------------------------------------------------------------------------------------------------
# per-layer clipping, sensitivity, loss
# ------------------------------------------------------------------------------------------------


def test_per_layer_norms_as_dict_sequence_and_single_number():
    model = Multi(nnx.Rngs(0))
    names = layer_names(model)
    assert names == ["conv1", "conv2", "embed", "gram", "head", "mat"]
    x, y = multi_data()
    grads = per_example_grads(model, x, y)
    norms = [0.05, 0.1, 0.2, 0.3, 0.4, 0.5]
    want, _ = reference(grads, dict(zip(names, norms)))
    for method in ("vmap", "ghost"):
        out = clipped(model, x, y, dict(zip(names, norms)), method=method, per_layer=True)
        assert_close(flat(out.grads), want, F32_TOL)
    out = clipped(model, x, y, tuple(norms), method="ghost", per_layer=True)
    assert_close(flat(out.grads), want, F32_TOL)
    assert float(out.sensitivity) == pytest.approx(math.sqrt(sum(c * c for c in norms)), rel=1e-6)
    # one number C is split as C/√L, so the sensitivity stays C
    want, _ = reference(grads, {n: 0.6 / math.sqrt(6) for n in names})
    out = clipped(model, x, y, 0.6, method="ghost", per_layer=True)
    assert_close(flat(out.grads), want, F32_TOL)
    assert float(out.sensitivity) == pytest.approx(0.6, rel=1e-6)
    eager = clipped_grad_sum(xent, MLP(nnx.Rngs(0)), *vector_data(2), clip_norm=0.6, per_layer=True)
    assert eager.sensitivity == pytest.approx(0.6, rel=1e-15) and isinstance(eager.sensitivity, float)


def test_loss_sensitivity_and_clipped_contributions():
    model = Multi(nnx.Rngs(0))
    x, y = multi_data()
    mask = np.array([True, False, True, True, False, True])
    out = clipped(model, x, y, 0.5, mask=mask, method="ghost")
    assert float(out.sensitivity) == 0.5
    per_example = np.asarray(xent(model, x, y, None))
    assert float(out.loss) == pytest.approx(per_example[mask].mean(), rel=1e-6)
    assert jax.tree.structure(out.grads) == jax.tree.structure(nnx.state(model, nnx.Param))
    none = clipped(model, x, y, 0.5, mask=np.zeros(6, bool), method="ghost")
    assert float(none.loss) == 0.0 and all(np.all(v == 0.0) for v in flat(none.grads).values())
    # every example is clipped at C = 1e-4; one example alone sums to its clipped gradient, of norm C
    for i in range(3):
        one = clipped(model, x, y, 1e-4, mask=np.arange(6) == i, method="ghost")
        assert float(one.norms[i]) > 1e-4
        norm = math.sqrt(sum(float(np.sum(v * v)) for v in flat(one.grads).values()))
        assert norm == pytest.approx(1e-4, rel=1e-5)


# ------------------------------------------------------------------------------------------------
# jit, the nnx wrapper, and the ghost path's guards
# ------------------------------------------------------------------------------------------------


def test_nnx_wrapper_eager_and_under_nnx_jit():
    model = MLP(nnx.Rngs(0))
    x, y = vector_data(4)
    want, norms = reference(per_example_grads(model, x, y), 0.7)
    assert_matches(clipped_grad_sum(xent, model, x, y, clip_norm=0.7), want, norms, F32_TOL)
    step = nnx.jit(lambda m, x, y: clipped_grad_sum(xent, m, x, y, clip_norm=0.7, microbatch_size=3))
    assert_matches(step(model, x, y), want, norms, F32_TOL)


def test_weight_tying_ghost_raises_auto_falls_back_to_vmap():
    model = Tied(nnx.Rngs(0))
    x, y = multi_data()[0]["tokens"], jnp.arange(6) % 9
    with pytest.raises(ValueError, match="'embed/embedding' is used outside its layer"):
        clipped_grad_sum(xent, model, x, y, clip_norm=1.0, method="ghost")
    want, norms = reference(per_example_grads(model, x, y), 0.3)
    assert_matches(clipped(model, x, y, 0.3, method="auto"), want, norms, F32_TOL)


def test_parameter_penalty_in_loss_ghost_raises_auto_falls_back():
    model = MLP(nnx.Rngs(0))
    x, y = vector_data(4)
    with pytest.raises(ValueError, match="'hidden/kernel' is used outside its layer"):
        clipped_grad_sum(penalised, model, x, y, clip_norm=1.0, method="ghost")
    want, norms = reference(per_example_grads(model, x, y, loss_fn=penalised), 1.0)
    assert_matches(clipped(model, x, y, 1.0, loss_fn=penalised), want, norms, F32_TOL)


def test_shared_kernel_is_left_to_vmap():
    model = MLP(nnx.Rngs(0))
    model.twin = nnx.Linear(5, 7, rngs=nnx.Rngs(2))
    model.twin.kernel = model.hidden.kernel  # one Variable in two layers
    assert "hidden" not in ghost_names(model) and "twin" not in ghost_names(model)

    def loss(m, x, y, key):
        return xent(m, x, y, key) + jnp.sum(jnp.tanh(m.twin(x)), axis=-1)

    x, y = vector_data(4)
    want, norms = reference(per_example_grads(model, x, y, loss_fn=loss), 0.5)
    assert_matches(clipped(model, x, y, 0.5, loss_fn=loss, method="ghost"), want, norms, F32_TOL)


def test_batchnorm_is_rejected_naming_the_layer():
    model = MLP(nnx.Rngs(0))
    model.bn = nnx.BatchNorm(7, rngs=nnx.Rngs(0))
    with pytest.raises(ValueError, match="layer 'bn' is nnx.BatchNorm"):
        check_per_example(model)
    with pytest.raises(ValueError, match="'bn' is nnx.BatchNorm"):
        clipped_grad_sum(xent, model, *vector_data(2), clip_norm=1.0)
    check_per_example(MLP(nnx.Rngs(0)))  # no error


# ------------------------------------------------------------------------------------------------
# the ghost fallback rule: decided before the pass, logged under "auto", a ValueError under "ghost"
# ------------------------------------------------------------------------------------------------


def checkpointed(model, x, y, key):  # the layer runs inside a JAX transform the taps cannot enter
    h = jax.checkpoint(lambda v: jnp.tanh(model.hidden(v)))(x)
    return optax.softmax_cross_entropy_with_integer_labels(model.out(h), y)


def rematted(model, x, y, key):  # an nnx transform splits the layer, hidden parameters and all
    h = nnx.remat(lambda layer, v: layer(v))(model.hidden, x)
    return optax.softmax_cross_entropy_with_integer_labels(model.out(jnp.tanh(h)), y)


FALLBACK_LOG = "clipped_grad_sum: method='auto' uses vmap"


def auto_logs(caplog, model, x, y, clip, loss_fn) -> tuple[ClippedGradient, str]:
    """Eager, so that it traces (and logs) every time: a jitted call would log only when it compiles."""
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="jaxpriv.train.clipping"):
        out = clipped_grad_sum(loss_fn, model, x, y, clip_norm=clip)
    return out, "\n".join(r.getMessage() for r in caplog.records)


def test_auto_with_a_layer_without_ghost_norm_uses_vmap_and_logs_it(caplog):
    model = Scaled(nnx.Rngs(0))
    x, y = vector_data(5)
    want, norms = reference(per_example_grads(model, x, y), 0.4)
    out, log = auto_logs(caplog, model, x, y, 0.4, xent)
    assert FALLBACK_LOG in log and "layer 'temperature' (Temperature) has no ghost norm" in log
    assert_matches(out, want, norms, F32_TOL)
    for covered in (MLP(nnx.Rngs(0)), Mixed(nnx.Rngs(0))):  # ghost norms, and a LayerNorm: ghost, nothing logged
        _, log = auto_logs(caplog, covered, x, y, 0.4, xent)
        assert log == ""


def test_sequences_attention_and_norm_layers_match_loop():
    model = Sequence(nnx.Rngs(0))
    assert ghost_names(model) == {"embed", "position", "attention/query", "attention/key", "attention/value",
                                  "attention/out", "split", "head"}  # not "positive" (axis=2): vmap
    tokens = jax.random.randint(jax.random.key(3), (5, 6), 0, 9)
    y = jnp.array([0, 1, 2, 1, 0])
    mask = np.array([True, True, False, True, True])
    want, norms = reference(per_example_grads(model, tokens, y), 0.3, mask)
    for method in ("ghost", "vmap"):
        assert_matches(clipped(model, tokens, y, 0.3, mask=mask, method=method), want, norms, F32_TOL)
    per_layer = {name: 0.2 for name in layer_names(model)}
    want, _ = reference(per_example_grads(model, tokens, y), per_layer)
    assert_close(flat(clipped(model, tokens, y, per_layer, method="ghost", per_layer=True).grads), want, F32_TOL)


class HalfPrecision(nnx.Module):
    """Ghost layers (Conv, Embed, Linear) and a LayerNorm computing in bfloat16, float32 parameters."""

    def __init__(self, rngs):
        kw = dict(dtype=jnp.bfloat16, rngs=rngs)
        self.conv = nnx.Conv(2, 4, (3, 3), **kw)
        self.embed = nnx.Embed(9, 4, **kw)
        self.norm = nnx.LayerNorm(4, **kw)
        self.head = nnx.Linear(4 * 8 * 8 + 4, 3, **kw)

    def __call__(self, inputs, key=None):
        x = jnp.tanh(self.conv(inputs["image"])).reshape(inputs["image"].shape[0], -1)
        return self.head(jnp.concatenate([x, self.norm(self.embed(inputs["tokens"])).mean(1)], -1))


def test_bfloat16_models_clip_in_float32_and_never_exceed_the_clip_norm():
    """Mixed precision: each example's clipped contribution, alone in the batch (the others masked out),
    has norm ≤ C to float32 rounding, though its factor and output gradients would round to 8 bits."""
    model = HalfPrecision(nnx.Rngs(0))
    x, y = multi_data(6)
    loss_fn = lambda m, x, y, k: xent(m, x, y, k).astype(jnp.float32)  # noqa: E731
    clip = 0.01  # every example clipped
    for method in ("ghost", "vmap"):
        total = clipped(model, x, y, clip, loss_fn=loss_fn, method=method)
        assert all(v.dtype == jnp.float32 for v in jax.tree_util.tree_leaves(total.grads))
        for i in range(6):
            alone = clipped(model, x, y, clip, loss_fn=loss_fn, method=method, mask=np.arange(6) == i)
            norm = math.sqrt(sum(float(np.sum(v * v)) for v in flat(alone.grads).values()))
            assert norm <= clip * (1 + 1e-6), (method, i, norm / clip)
            assert norm >= clip * (1 - 1e-3)


@pytest.mark.parametrize("model_name", ["multi", "transformer"])
def test_float32_clipped_contribution_never_exceeds_the_clip_norm(model_name):
    """The sensitivity the noise is scaled by: each example's clipped contribution, alone in the batch, has
    norm ≤ C to float32 rounding, on every ghost route (convolutions, embeddings, the Gram trick, attention
    projections). The ghost norm and the clipped sum are separate passes, so matrix products of reduced
    precision in either (TF32 on NVIDIA GPUs) would show here as a contribution above C."""
    from jaxpriv.train.models import Transformer, cross_entropy_loss

    if model_name == "multi":
        model, (x, y), loss_fn = Multi(nnx.Rngs(0)), multi_data(6), xent
    else:
        model = Transformer(4, 5, 3, width=8, heads=2, depth=1, rngs=nnx.Rngs(0))
        x, y, loss_fn = jax.random.normal(jax.random.key(4), (6, 20)), jnp.array([0, 1, 2, 1, 0, 2]), cross_entropy_loss
    clip = 1e-3  # every example clipped
    for method in ("ghost", "vmap"):
        for i in range(6):
            alone = clipped(model, x, y, clip, loss_fn=loss_fn, method=method, mask=np.arange(6) == i)
            norm = math.sqrt(sum(float(np.sum(v * v)) for v in flat(alone.grads).values()))
            assert clip * (1 - 1e-5) <= norm <= clip * (1 + 1e-6), (method, i, norm / clip)


def test_transformer_is_clipped_by_ghost_norms_and_matches_loop(caplog):
    from jaxpriv.train.models import Transformer, cross_entropy_loss

    model = Transformer(4, 5, 3, width=8, heads=2, depth=1, rngs=nnx.Rngs(0))
    names = set(layer_names(model))
    norms_layers = {"blocks/0/attention_norm", "blocks/0/mlp_norm", "norm"}
    assert ghost_names(model) == names - norms_layers  # every other layer has a ghost norm
    x, y = jax.random.normal(jax.random.key(4), (5, 20)), jnp.array([0, 1, 2, 1, 0])
    loss_fn = cross_entropy_loss  # the trainer's loss (the model takes no key)
    want, norms = reference(per_example_grads(model, x, y, loss_fn=loss_fn), 0.5)
    out, log = auto_logs(caplog, model, x, y, 0.5, loss_fn)
    assert log == ""  # "auto" takes the ghost pass
    assert_matches(out, want, norms, F32_TOL)


@pytest.mark.parametrize("loss_fn,why", [
    (checkpointed, "layer 'hidden' is called inside a JAX transform in loss_fn"),
    (rematted, "parameter 'hidden/bias' is used outside its layer's __call__"),
    (penalised, "parameter 'hidden/kernel' is used outside its layer's __call__"),
])
def test_loss_fn_ghost_cannot_follow_ghost_raises_auto_logs_and_uses_vmap(caplog, loss_fn, why):
    model = MLP(nnx.Rngs(0))
    x, y = vector_data(5)
    with pytest.raises(ValueError, match=re.escape(f"method='ghost': {why}")):
        clipped_grad_sum(loss_fn, model, x, y, clip_norm=1.0, method="ghost")
    want, norms = reference(per_example_grads(model, x, y, loss_fn=loss_fn), 0.6)
    out, log = auto_logs(caplog, model, x, y, 0.6, loss_fn)
    assert f"{FALLBACK_LOG}: {why}" in log
    assert_matches(out, want, norms, F32_TOL)


def test_other_errors_of_loss_fn_propagate_without_a_second_pass(recwarn):
    calls = []

    def broken(model, x, y, key):
        calls.append(1)
        raise KeyError("a bug in loss_fn")

    with pytest.raises(KeyError, match="a bug in loss_fn"):
        clipped_grad_sum(broken, MLP(nnx.Rngs(0)), *vector_data(3), clip_norm=1.0)
    assert len(calls) == 1 and not recwarn.list  # the shape pass raised it; no fallback to vmap and no warning


# ------------------------------------------------------------------------------------------------
# one ValueError per bad argument
# ------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def mlp_setup():
    return MLP(nnx.Rngs(0)), *vector_data(4)


@pytest.mark.parametrize("clip", [0.0, -1.0, float("nan"), float("inf")])
def test_bad_clip_norm(mlp_setup, clip):
    model, x, y = mlp_setup
    with pytest.raises(ValueError, match=r"clip_norm must lie in \(0.0, inf\)"):
        clipped_grad_sum(xent, model, x, y, clip_norm=clip)


def test_clip_norm_not_a_number_without_per_layer(mlp_setup):
    model, x, y = mlp_setup
    with pytest.raises(ValueError, match=r"clip_norm must be one positive number \(or a \(B,\) array"):
        clipped_grad_sum(xent, model, x, y, clip_norm=[1.0, 1.0])
    with pytest.raises(ValueError, match=r"clip_norm must be one positive number or one per example, shape \(B,\) = \(4,\)"):
        clipped_grad_sum(xent, model, x, y, clip_norm=np.ones(2))
    with pytest.raises(ValueError, match="clip_norm must be a positive scalar"):
        clipped_grad_sum(xent, model, x, y, clip_norm=np.ones((4, 1)))


@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan"), float("inf")])
def test_bad_per_example_clip_norm(mlp_setup, bad):
    model, x, y = mlp_setup
    with pytest.raises(ValueError, match=r"clip_norm must lie in \(0.0, inf\)"):
        clipped_grad_sum(xent, model, x, y, clip_norm=np.array([1.0, bad, 1.0, 1.0]))


def test_bad_norm(mlp_setup):
    model, x, y = mlp_setup
    with pytest.raises(ValueError, match="norm must be one of"):
        clipped_grad_sum(xent, model, x, y, clip_norm=1.0, norm="linf")
    with pytest.raises(ValueError, match="norm must be one of"):
        clipped_grad_sum(xent, model, x, y, clip_norm=1.0, norm="L1", method="ghost")


def test_per_layer_norms_of_wrong_length_keys_or_value(mlp_setup):
    model, x, y = mlp_setup
    with pytest.raises(ValueError, match="clip_norm must have one norm per layer"):
        clipped_grad_sum(xent, model, x, y, clip_norm=[1.0, 1.0, 1.0], per_layer=True)
    with pytest.raises(ValueError, match="clip_norm must have one entry per layer"):
        clipped_grad_sum(xent, model, x, y, clip_norm={"hidden": 1.0}, per_layer=True)
    with pytest.raises(ValueError, match="clip_norm must lie in"):
        clipped_grad_sum(xent, model, x, y, clip_norm=[1.0, -2.0], per_layer=True)


def test_bad_per_layer_flag(mlp_setup):
    model, x, y = mlp_setup
    with pytest.raises(ValueError, match="per_layer must be True or False"):
        clipped_grad_sum(xent, model, x, y, clip_norm=1.0, per_layer="yes")


def test_bad_method(mlp_setup):
    model, x, y = mlp_setup
    with pytest.raises(ValueError, match="method must be one of"):
        clipped_grad_sum(xent, model, x, y, clip_norm=1.0, method="fast")


@pytest.mark.parametrize("size", [0, -3, 2.5, True])
def test_bad_microbatch_size(mlp_setup, size):
    model, x, y = mlp_setup
    with pytest.raises(ValueError, match="microbatch_size must be None or an integer ≥ 1"):
        clipped_grad_sum(xent, model, x, y, clip_norm=1.0, microbatch_size=size)


def test_bad_mask(mlp_setup):
    model, x, y = mlp_setup
    with pytest.raises(ValueError, match=r"mask must have shape \(B,\) = \(4,\)"):
        clipped_grad_sum(xent, model, x, y, clip_norm=1.0, mask=np.ones(3, bool))
    with pytest.raises(ValueError, match="mask must be boolean"):
        clipped_grad_sum(xent, model, x, y, clip_norm=1.0, mask=np.ones(4))


def test_bad_batch_shapes(mlp_setup):
    model, x, y = mlp_setup
    with pytest.raises(ValueError, match="labels must have the leading batch dimension 4"):
        clipped_grad_sum(xent, model, x, y[:3], clip_norm=1.0)
    with pytest.raises(ValueError, match="inputs must be an array"):
        clipped_grad_sum(xent, model, jnp.float32(1.0), y, clip_norm=1.0)
    with pytest.raises(ValueError, match="inputs must hold at least one example"):
        clipped_grad_sum(xent, model, x[:0], y[:0], clip_norm=1.0)


def test_bad_key(mlp_setup):
    model, x, y = mlp_setup
    with pytest.raises(ValueError, match="key must be one PRNG key"):
        clipped_grad_sum(xent, model, x, y, clip_norm=1.0, key=jax.random.split(jax.random.key(0), 4))


@pytest.mark.parametrize("method", ["auto", "vmap", "ghost"])
def test_loss_fn_must_return_per_example_losses(mlp_setup, method):
    model, x, y = mlp_setup
    with pytest.raises(ValueError, match="loss_fn must return per-example losses of shape"):
        clipped_grad_sum(lambda m, x, y, k: jnp.mean(xent(m, x, y, k)), model, x, y, clip_norm=1.0, method=method)


def test_model_without_parameters():
    with pytest.raises(ValueError, match="model has no nnx.Param"):
        clipped_grad_sum(lambda m, x, y, k: jnp.sum(m(x, deterministic=True), -1), nnx.Dropout(0.5),
                         jnp.ones((2, 3)), jnp.ones(2), clip_norm=1.0)


# ------------------------------------------------------------------------------------------------
# per-example clip norms (one pass for IDP-SGD "scale") and L1 clipping (Laplace noise)
# ------------------------------------------------------------------------------------------------


def reference_per_example(grads: list[dict], clips, mask) -> dict:
    """Σ_i min(1, C_i/‖g_i‖₂) g_i over the masked-in examples, in float64."""
    total = {k: np.zeros_like(v) for k, v in grads[0].items()}
    for g, c, m in zip(grads, clips, mask):
        norm = math.sqrt(sum(float(np.sum(v * v)) for v in g.values()))
        if m:
            for k, v in g.items():
                total[k] += min(1.0, c / norm) * v
    return total


@pytest.mark.parametrize("method,microbatch_size", [("vmap", None), ("ghost", None), ("ghost", 3), ("vmap", 4)])
def test_per_example_clip_norms_match_loop(method, microbatch_size):
    model = Multi(nnx.Rngs(0))
    x, y = multi_data(7)
    grads = per_example_grads(model, x, y)
    norms = np.array([math.sqrt(sum(float(np.sum(v * v)) for v in g.values())) for g in grads])
    clips = norms * np.array([0.3, 2.0, 0.7, 0.1, 1.5, 0.5, 0.9])  # some clipped, some not
    mask = np.array([True, True, False, True, True, True, False])
    out = clipped(model, x, y, jnp.asarray(clips, jnp.float32), mask=mask, method=method,
                  microbatch_size=microbatch_size)
    assert_close(flat(out.grads), reference_per_example(grads, clips, mask), F32_TOL)
    # a chunk after the last masked-in example is skipped (microbatches of 3: rows 6-8), its norms NaN
    computed = np.arange(7) < (6 if microbatch_size == 3 else 7)
    np.testing.assert_allclose(np.asarray(out.norms)[computed], norms[computed], rtol=F32_TOL)
    assert np.all(np.isnan(np.asarray(out.norms)[~computed]))
    # the sensitivity is the largest clip norm among the examples present (example 6's is masked out)
    assert float(out.sensitivity) == pytest.approx(float(np.max(clips[mask])), rel=1e-6)


def test_one_per_example_pass_equals_the_per_group_sum():
    # what dpsgd's "scale" mode ran before (one masked pass per group clip norm, added) equals one pass
    model = MLP(nnx.Rngs(0))
    x, y = vector_data(9)
    group = np.array([0, 1, 2, 0, 1, 2, 2, 1, 0])
    table = np.array([0.05, 0.4, 3.0])
    mask = np.array([True] * 8 + [False])
    for method in ("vmap", "ghost"):
        one = clipped(model, x, y, jnp.asarray(table[group], jnp.float32), mask=mask, method=method)
        parts = [clipped(model, x, y, float(c), mask=mask & (group == g), method=method) for g, c in enumerate(table)]
        summed = {k: sum(np.asarray(flat(p.grads)[k], np.float64) for p in parts) for k in flat(one.grads)}
        assert_close(flat(one.grads), summed, 1e-6)


def reference_l1(grads: list[dict], clip, mask) -> tuple[dict, np.ndarray]:
    """Σ_i min(1, C/‖g_i‖₁) g_i over the masked-in examples and the L1 norms, in float64 (flat clipping)."""
    norms = np.array([sum(float(np.sum(np.abs(v))) for v in g.values()) for g in grads])
    total = {k: np.zeros_like(v) for k, v in grads[0].items()}
    for g, n, m in zip(grads, norms, mask):
        for k, v in g.items():
            total[k] += m * min(1.0, clip / n) * v
    return total, norms


def test_l1_clipping_matches_loop_and_has_l1_sensitivity():
    model = MLP(nnx.Rngs(0))
    x, y = vector_data(7)
    grads = per_example_grads(model, x, y)
    mask = np.array([True, True, True, False, True, True, True])
    clip = float(np.median(reference_l1(grads, 1.0, mask)[1]))
    want, l1 = reference_l1(grads, clip, mask)
    for method, microbatch_size in (("auto", None), ("vmap", 3)):
        out = clipped_grad_sum(xent, model, x, y, clip_norm=clip, mask=jnp.asarray(mask), norm="l1", method=method,
                               microbatch_size=microbatch_size)
        assert_close(flat(out.grads), want, F32_TOL)
        np.testing.assert_allclose(np.asarray(out.norms), l1, rtol=F32_TOL)
        assert out.sensitivity == clip
    # every clipped contribution lies in the L1 ball: removing one example moves the sum by ≤ C in L1
    for i in np.nonzero(mask)[0]:
        contribution = sum(float(np.sum(np.abs(min(1.0, clip / l1[i]) * v))) for v in grads[i].values())
        assert contribution <= clip * (1 + 1e-9)
    # per-layer L1: C split as C/L, sensitivity Σ_l C_l
    out = clipped_grad_sum(xent, model, x, y, clip_norm=[0.5, 0.25], per_layer=True, norm="l1")
    assert out.sensitivity == 0.75
    out = clipped_grad_sum(xent, model, x, y, clip_norm=1.0, per_layer=True, norm="l1")
    assert out.sensitivity == 1.0


@pytest.mark.parametrize("model_name", ["multi", "mixed", "sequence"])
def test_l1_ghost_norms_match_loop_and_vmap_on_every_route(model_name):
    """L1 clipping by ghost norms: one-position Linear (the factorised norm), convolutions and sequences
    (materialised per example), an embedding with a repeated token, a Linear called twice, attention
    projections, and LayerNorm/RMSNorm by vmap in the same pass; against the float64 loop and vmap."""
    if model_name == "multi":
        model, (x, y) = Multi(nnx.Rngs(0)), multi_data()
    elif model_name == "mixed":
        model, (x, y) = Mixed(nnx.Rngs(5)), vector_data(6)
    else:
        model = Sequence(nnx.Rngs(0))
        x, y = jax.random.randint(jax.random.key(3), (6, 6), 0, 9).at[:, 2].set(4), jnp.array([0, 1, 2, 1, 0, 2])
    mask = np.array([True, False, True, True, True, True])
    grads = per_example_grads(model, x, y)
    clip = float(np.median(reference_l1(grads, 1.0, mask)[1]))  # some examples clipped, some not
    want, norms = reference_l1(grads, clip, mask)
    ghost = clipped(model, x, y, clip, mask=mask, method="ghost", norm="l1")
    assert_matches(ghost, want, norms, F32_TOL)
    if model_name == "multi":  # and equal to the vmap path's clipped sum
        assert_close(flat(ghost.grads), flat(clipped(model, x, y, clip, mask=mask, method="vmap", norm="l1").grads),
                     F32_TOL)
        # "auto" is ghost for L1 now: the same program's numbers
        auto = clipped(model, x, y, clip, mask=mask, method="auto", norm="l1")
        assert_close(flat(auto.grads), flat(ghost.grads), 0.0)


def test_l1_ghost_contribution_never_exceeds_the_clip_norm_and_per_layer_splits_it():
    """Each example's clipped contribution, alone in the batch, has L1 norm ≤ C to float32 rounding on the
    ghost routes; per-layer L1 clips each layer's slice to C/L."""
    model, (x, y) = Multi(nnx.Rngs(0)), multi_data(6)
    clip = 1e-3  # every example clipped
    for i in range(6):
        alone = clipped(model, x, y, clip, method="ghost", norm="l1", mask=np.arange(6) == i)
        norm = sum(float(np.sum(np.abs(v))) for v in flat(alone.grads).values())
        assert clip * (1 - 1e-5) <= norm <= clip * (1 + 1e-6), (i, norm / clip)
    layers = layer_names(model)
    per_layer = clipped(model, x, y, clip, method="ghost", norm="l1", per_layer=True, mask=np.arange(6) == 0)
    assert float(per_layer.sensitivity) == pytest.approx(clip)
    for name in layers:
        part = sum(float(np.sum(np.abs(v))) for k, v in flat(per_layer.grads).items() if k.rsplit("/", 1)[0] == name)
        assert part <= clip / len(layers) * (1 + 1e-6), name
