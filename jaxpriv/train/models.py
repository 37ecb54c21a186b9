"""The trainer's built-in models and per-example losses (Flax NNX): what ``jaxpriv train`` and the
federated systems train, and the losses :func:`jaxpriv.train.dpsgd.train` clips per example.

Mixed precision: every model takes ``dtype``, the computation dtype of its layers (Flax's convention), e.g.
``jnp.bfloat16`` for a bfloat16 forward and backward pass; parameters stay float32, and DP-SGD takes the
per-example norms, clipping factors, clipped sums and noise in float32 (:mod:`jaxpriv.train.clipping`,
:mod:`jaxpriv.train.noise`). :func:`cross_entropy_loss` takes the loss of 16-bit logits in float32."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from .._checks import check_scalar

__all__ = ["cross_entropy_loss", "check_labels", "mse_loss", "squared_errors", "MLP", "CNN", "Transformer",
           "TransformerBlock"]


def _size(name: str, value, lo: int = 1) -> int:
    """A layer size: an integer ≥ ``lo`` (ValueError naming it otherwise; Flax would fail deep inside)."""
    return int(check_scalar(name, value, lo, np.inf, integer=True))


def _dtype(dtype):
    """None (the inputs' dtype) or a floating dtype: the layers' computation dtype."""
    if dtype is None:
        return None
    try:
        resolved = jnp.dtype(dtype)
    except TypeError:
        resolved = None
    if resolved is None or not jnp.issubdtype(resolved, jnp.floating):
        raise ValueError(f"dtype must be None or a floating dtype (e.g. jnp.float32, jnp.bfloat16), got {dtype!r}")
    return resolved


def cross_entropy_loss(model, inputs, labels, key=None):
    """Per-example softmax cross-entropy −log softmax(model(x))_y of an NNX classifier, in the clipping
    interface ``loss_fn(model, inputs, labels, key) → (B,)``. ``key`` is unused (no stochastic layers).

    Example:
      >>> import jax.numpy as jnp
      >>> from flax import nnx
      >>> from jaxpriv.train.dpsgd import MLP, cross_entropy_loss
      >>> model = MLP(4, (8,), 3, rngs=nnx.Rngs(0))
      >>> cross_entropy_loss(model, jnp.ones((5, 4)), jnp.zeros(5, jnp.int32)).shape
      (5,)
    """
    logits = model(inputs)  # a bfloat16 model's logits: the loss in float32
    return optax.softmax_cross_entropy_with_integer_labels(logits.astype(jnp.promote_types(logits.dtype, jnp.float32)),
                                                           labels)


def check_labels(model, x, **labels) -> None:
    """Class labels against the classifier that :func:`cross_entropy_loss` trains: each array of
    ``labels`` (by name, e.g. ``y=…, y_test=…``) must lie in [0, C), C the number of logits ``model`` gives
    for one example of ``x`` (found by shape inference: nothing is compiled or run). ValueError naming the
    labels and the range otherwise (a label ≥ C would train silently on a clipped or garbage target).
    Models whose output is not (batch, C) are not checked.

    Example:
      >>> import numpy as np
      >>> from flax import nnx
      >>> check_labels(nnx.Linear(4, 3, rngs=nnx.Rngs(0)), np.zeros((2, 4), np.float32), y=np.array([5, 7]))
      Traceback (most recent call last):
      ...
      ValueError: labels y must be class indices in [0, 3) for a model with 3 outputs (logits), got 7
    """
    x = np.asarray(x)
    graphdef, state = nnx.split(model)
    try:
        logits = jax.eval_shape(lambda s, xb: nnx.merge(graphdef, s)(xb), state,
                                jax.ShapeDtypeStruct((1, *x.shape[1:]), x.dtype))
    except Exception:  # noqa: BLE001  a model that fails on this input fails in the step, with its own error
        return
    if not hasattr(logits, "shape") or len(logits.shape) != 2:
        return
    classes = int(logits.shape[-1])
    for name, y in labels.items():
        y = np.asarray(y)
        if y.size and int(y.max()) >= classes:
            raise ValueError(f"labels {name} must be class indices in [0, {classes}) for a model with {classes} "
                             f"outputs (logits), got {int(y.max())}")


def squared_errors(outputs, targets):
    """Per-example mean squared error between outputs (B, ...) and targets (B, ...) of as many numbers:
    (B,) = mean over each example's numbers of (output − target)². Raises ValueError when the counts differ.

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxpriv.train.models import squared_errors
      >>> squared_errors(jnp.ones((2, 3)), jnp.zeros((2, 3))).tolist()
      [1.0, 1.0]
    """
    batch = outputs.shape[0]
    outputs, targets = outputs.reshape(batch, -1), targets.reshape(batch, -1)
    if outputs.shape != targets.shape:
        raise ValueError(f"mse_loss: the model gives {outputs.shape[1]} output(s) per example but the targets hold "
                         f"{targets.shape[1]}; make them match (e.g. a final nnx.Linear(..., {targets.shape[1]}))")
    return jnp.mean(jnp.square(outputs - targets.astype(outputs.dtype)), axis=1)


def mse_loss(model, inputs, targets, key=None):
    """Per-example mean squared error of a regression model, in the clipping interface
    ``loss_fn(model, inputs, targets, key) → (B,)``: ℓ_i = (1/k) Σ_j (f(x_i)_j − y_ij)² over the k outputs
    (the per-example form of ``optax.squared_error`` averaged over outputs). The model's outputs and the
    targets may have any shapes with k numbers per example: ``(B,)``, ``(B, 1)`` and ``(B, k)`` all work.
    ``key`` is unused. ``DPSGDConfig(loss="mse")`` trains with it.

    Example:
      >>> import jax.numpy as jnp
      >>> from flax import nnx
      >>> from jaxpriv.train.dpsgd import mse_loss
      >>> model = nnx.Linear(3, 1, rngs=nnx.Rngs(0))
      >>> model.kernel[...], model.bias[...] = jnp.ones((3, 1)), jnp.zeros(1)
      >>> mse_loss(model, jnp.ones((2, 3)), jnp.array([3.0, 1.0])).tolist()  # outputs 3 and 3
      [0.0, 4.0]
    """
    return squared_errors(model(inputs), targets)


class MLP(nnx.Module):
    """Multilayer perceptron with tanh activations (bounded activations suit DP-SGD's clipping: Papernot
    et al. 2021, "Tempered sigmoid activations"). Inputs of any shape are flattened.

    Example:
      >>> import jax.numpy as jnp
      >>> from flax import nnx
      >>> from jaxpriv.train.dpsgd import MLP
      >>> MLP(64, (32,), 10, rngs=nnx.Rngs(0))(jnp.ones((2, 64))).shape
      (2, 10)
    """

    def __init__(self, in_features: int, hidden: tuple = (128,), num_classes: int = 10, *, dtype=None,
                 rngs: nnx.Rngs):
        if np.ndim(hidden) != 1:
            raise ValueError(f"hidden must be a sequence of layer widths (integers ≥ 1), got {hidden!r}")
        sizes = (_size("in_features", in_features),) + tuple(_size("hidden", h) for h in hidden)
        num_classes, dtype = _size("num_classes", num_classes), _dtype(dtype)
        self.layers = nnx.List([nnx.Linear(a, b, dtype=dtype, rngs=rngs) for a, b in zip(sizes[:-1], sizes[1:])])
        self.head = nnx.Linear(sizes[-1], num_classes, dtype=dtype, rngs=rngs)

    def __call__(self, x):
        x = x.reshape(x.shape[0], -1)
        for layer in self.layers:
            x = jnp.tanh(layer(x))
        return self.head(x)


class CNN(nnx.Module):
    """Small convolutional network for square images (e.g. digits' 8×8): two 3×3 convolutions with tanh
    and 2×2 average pooling, then a linear head. Flat inputs are reshaped to (side, side, channels).

    Example:
      >>> import jax.numpy as jnp
      >>> from flax import nnx
      >>> from jaxpriv.train.dpsgd import CNN
      >>> CNN(8, 1, 10, rngs=nnx.Rngs(0))(jnp.ones((2, 64))).shape
      (2, 10)
    """

    def __init__(self, side: int, channels: int = 1, num_classes: int = 10, width: int = 16, *, dtype=None,
                 rngs: nnx.Rngs):
        side, channels = _size("side", side, 4), _size("channels", channels)  # two 2×2 poolings: side ≥ 4
        num_classes, width, dtype = _size("num_classes", num_classes), _size("width", width), _dtype(dtype)
        self.side, self.channels = side, channels
        self.conv1 = nnx.Conv(channels, width, kernel_size=(3, 3), dtype=dtype, rngs=rngs)
        self.conv2 = nnx.Conv(width, 2 * width, kernel_size=(3, 3), dtype=dtype, rngs=rngs)
        pooled = side // 4
        self.head = nnx.Linear(2 * width * pooled * pooled, num_classes, dtype=dtype, rngs=rngs)

    def __call__(self, x):
        x = x.reshape(x.shape[0], self.side, self.side, self.channels)
        x = nnx.avg_pool(jnp.tanh(self.conv1(x)), window_shape=(2, 2), strides=(2, 2))
        x = nnx.avg_pool(jnp.tanh(self.conv2(x)), window_shape=(2, 2), strides=(2, 2))
        return self.head(x.reshape(x.shape[0], -1))


class TransformerBlock(nnx.Module):
    """Pre-norm encoder block (Xiong et al. 2020, "On layer normalization in the transformer architecture"):
    x + attention(LayerNorm(x)), then x + MLP(LayerNorm(x)) (GELU, 2× width). ``width`` features, ``heads``
    attention heads (``nnx.MultiHeadAttention``), computation ``dtype`` (None: the inputs').

    Example:
      >>> import jax.numpy as jnp
      >>> from flax import nnx
      >>> from jaxpriv.train.models import TransformerBlock
      >>> TransformerBlock(16, 4, rngs=nnx.Rngs(0))(jnp.ones((2, 8, 16))).shape
      (2, 8, 16)
    """

    def __init__(self, width: int, heads: int, *, dtype=None, rngs: nnx.Rngs):
        width, heads, dtype = _size("width", width), _size("heads", heads), _dtype(dtype)
        if width % heads:
            raise ValueError(f"width must be a multiple of heads (each head takes width/heads features), got "
                             f"width {width} and heads {heads}")
        self.attention_norm = nnx.LayerNorm(width, dtype=dtype, rngs=rngs)
        self.attention = nnx.MultiHeadAttention(heads, width, decode=False, dtype=dtype, rngs=rngs)
        self.mlp_norm = nnx.LayerNorm(width, dtype=dtype, rngs=rngs)
        self.mlp_in = nnx.Linear(width, 2 * width, dtype=dtype, rngs=rngs)
        self.mlp_out = nnx.Linear(2 * width, width, dtype=dtype, rngs=rngs)

    def __call__(self, x):
        x = x + self.attention(self.attention_norm(x))
        return x + self.mlp_out(nnx.gelu(self.mlp_in(self.mlp_norm(x))))


class Transformer(nnx.Module):
    """A small transformer encoder classifier over a sequence of ``length`` tokens, each a vector of
    ``features`` numbers (e.g. digits' 8×8 image as 8 row tokens of 8 pixels): a linear token embedding
    plus a learned position embedding, ``depth`` pre-norm blocks (:class:`TransformerBlock`), a final
    LayerNorm, mean pooling over the sequence and a linear head. Flat inputs are reshaped to
    (length, features). Every layer has a ghost norm (attention projections, Linear, Embed) or is a
    LayerNorm, so DP-SGD clips it without per-example gradients of its large layers
    (:mod:`jaxpriv.train.clipping`). ``dtype``: the computation dtype (module docstring: mixed precision).

    Example:
      >>> import jax.numpy as jnp
      >>> from flax import nnx
      >>> from jaxpriv.train.models import Transformer
      >>> model = Transformer(8, 8, 10, dtype=jnp.bfloat16, rngs=nnx.Rngs(0))  # digits: 8 rows of 8 pixels
      >>> out = model(jnp.ones((2, 64)))
      >>> out.shape, str(out.dtype), str(model.head.kernel.dtype)  # bfloat16 compute, float32 parameters
      ((2, 10), 'bfloat16', 'float32')
    """

    def __init__(self, length: int, features: int, num_classes: int = 10, *, width: int = 32, heads: int = 4,
                 depth: int = 2, dtype=None, rngs: nnx.Rngs):
        length, features = _size("length", length), _size("features", features)
        num_classes, depth = _size("num_classes", num_classes), _size("depth", depth)
        self.length, self.features = length, features
        self.embed = nnx.Linear(features, width, dtype=dtype, rngs=rngs)
        self.position = nnx.Embed(length, width, dtype=dtype, rngs=rngs)
        self.blocks = nnx.List([TransformerBlock(width, heads, dtype=dtype, rngs=rngs) for _ in range(depth)])
        self.norm = nnx.LayerNorm(width, dtype=dtype, rngs=rngs)
        self.head = nnx.Linear(width, num_classes, dtype=dtype, rngs=rngs)

    def __call__(self, x):
        x = x.reshape(x.shape[0], self.length, self.features)
        h = self.embed(x) + self.position(jnp.arange(self.length))
        for block in self.blocks:
            h = block(h)
        return self.head(self.norm(h).mean(axis=1))
