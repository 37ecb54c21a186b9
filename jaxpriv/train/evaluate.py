"""Evaluation of a trained classifier (or regression model) on a test set, in fixed-size chunks: used by
the trainer after every epoch and by the federated systems after every round."""

from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from .._numerics import check_array
from .config import LOSSES
from .models import squared_errors
from .programs import Program, ProgramCache

__all__ = ["make_evaluator", "padded_test_set", "EVALUATORS"]


def _check_batch_size(batch_size) -> int:
    return int(check_array("batch_size", batch_size, 1.0, np.inf, integer=True))


def make_evaluator(graphdef, batch_size: int, loss: str = "cross_entropy") -> Callable:
    """A jitted evaluation of a classifier: its test accuracy and mean softmax cross-entropy, computed
    ``batch_size`` examples at a time (a ``lax.scan`` over chunks bounds memory; padding is masked out).
    With ``loss="mse"``, of a regression model: (NaN, the mean of :func:`mse_loss` over the test set).

    ``evaluate(params, rest, x, y, mask) -> (accuracy, loss)``: ``params`` and ``rest`` are the state of
    ``nnx.split(model, nnx.Param, ...)``; ``x``, ``y``, ``mask`` are a test set padded to a multiple of
    ``batch_size`` (:func:`padded_test_set`). With n = Σ mask it returns (#{i: mask_i, argmax f(x_i) = y_i}
    / n, Σ_{i: mask_i} −log softmax(f(x_i))_{y_i} / n), as 0-d arrays. The model runs in eval mode
    (``model.eval()``: dropout off), on a copy.

    Args:
      graphdef: the model's graph definition from ``nnx.split(model, nnx.Param, ...)``.
      batch_size: examples per chunk, an integer ≥ 1 (the same as :func:`padded_test_set`'s).
      loss: ``"cross_entropy"`` (a classifier) or ``"mse"`` (a regression model), as in :class:`DPSGDConfig`.

    Returns:
      the jitted ``evaluate`` (a :class:`jaxpriv.train.programs.Program`), shared by every call with the same
      graph definition, ``batch_size`` and ``loss``.

    Example:
      >>> import numpy as np
      >>> from flax import nnx
      >>> from jaxpriv.train.dpsgd import MLP, make_evaluator, padded_test_set
      >>> graphdef, params, rest = nnx.split(MLP(4, (8,), 3, rngs=nnx.Rngs(0)), nnx.Param, ...)
      >>> x, y, mask = padded_test_set((np.ones((5, 4), np.float32), np.zeros(5, np.int32)), batch_size=2)
      >>> accuracy, loss = make_evaluator(graphdef, 2)(params, rest, x, y, mask)
      >>> float(accuracy) in (0.0, 1.0), float(loss) > 0  # five equal examples: all right or all wrong
      (True, True)
    """
    if not isinstance(graphdef, nnx.graphlib.GraphDef):
        raise ValueError(f"graphdef must be the GraphDef of nnx.split(model, nnx.Param, ...), got "
                         f"{type(graphdef).__name__}")
    batch = _check_batch_size(batch_size)
    if loss not in LOSSES:
        raise ValueError(f"loss must be one of {LOSSES}, got {loss!r}")
    return EVALUATORS(graphdef, batch, loss)


def _build_evaluator(graphdef, batch: int, loss: str) -> Program:
    regression = loss == "mse"

    def evaluate(params, rest, x, y, mask):
        model = nnx.merge(graphdef, params, rest)
        model.eval()  # dropout off, whatever the training graph says (this copy is discarded)

        def chunk(carry, xs):
            xb, yb, mb = xs
            outputs = model(xb)
            if regression:
                correct, losses = jnp.int32(0), squared_errors(outputs, yb)
            else:
                correct = jnp.sum((jnp.argmax(outputs, -1) == yb) & mb, dtype=jnp.int32)
                losses = optax.softmax_cross_entropy_with_integer_labels(outputs, yb)
            total = jnp.sum(jnp.where(mb, losses, 0.0), dtype=jnp.float32)
            return (carry[0] + correct, carry[1] + total), None

        shape = lambda a: a.reshape((-1, batch) + a.shape[1:])  # noqa: E731
        (correct, total), _ = jax.lax.scan(chunk, (jnp.int32(0), jnp.float32(0.0)),
                                           (shape(x), shape(y), shape(mask)))
        n = jnp.sum(mask)
        accuracy = jnp.float32(jnp.nan) if regression else correct / n
        return accuracy, total / n

    return Program(evaluate)


#: the evaluation programs, one per (graph definition, chunk size, loss): every run and round of a model shares one
EVALUATORS = ProgramCache(_build_evaluator)


def padded_test_set(data, batch_size: int) -> tuple[jax.Array, jax.Array, jax.Array]:
    """The test set as the arrays :func:`make_evaluator`'s ``evaluate`` takes: ``x`` and ``y`` padded with
    zeros to the next multiple of ``batch_size`` examples, and the ``mask`` that is True on the real ones
    (one compiled evaluation, whatever the test set's size).

    Args:
      data: a :class:`jaxpriv.train.data.Dataset` (its ``x_test``, ``y_test``) or a tuple ``(x, y)`` of N ≥ 1
        examples ``x`` (N, ...) and their labels ``y`` (N,) (or regression targets (N, ...)).
      batch_size: an integer ≥ 1.

    Returns:
      ``(x, y, mask)`` as JAX arrays with leading axis N rounded up to a multiple of ``batch_size``.

    Example:
      >>> import numpy as np
      >>> from jaxpriv.train.dpsgd import padded_test_set
      >>> x, y, mask = padded_test_set((np.ones((5, 4)), np.arange(5)), batch_size=4)
      >>> x.shape, y.tolist(), mask.tolist()
      ((8, 4), [0, 1, 2, 3, 4, 0, 0, 0], [True, True, True, True, True, False, False, False])
    """
    if isinstance(data, (tuple, list)):
        if len(data) != 2:
            raise ValueError(f"data must be a Dataset (x_test, y_test) or a tuple (x, y), got a sequence of "
                             f"{len(data)} items")
        x, y = data
    elif hasattr(data, "x_test") and hasattr(data, "y_test"):
        x, y = data.x_test, data.y_test
    else:
        raise ValueError(f"data must be a Dataset (x_test, y_test) or a tuple (x, y), got {type(data).__name__}")
    batch = _check_batch_size(batch_size)
    x, y = np.asarray(x), np.asarray(y)
    if x.ndim == 0 or x.shape[0] == 0 or y.ndim == 0 or y.shape[0] != x.shape[0]:
        raise ValueError(f"data must hold a non-empty x (N, ...) and labels y (N,), got shapes {x.shape} and {y.shape}")
    n = x.shape[0]
    pad = (-n) % batch
    x = np.concatenate([x, np.zeros((pad,) + x.shape[1:], x.dtype)])
    y = np.concatenate([y, np.zeros((pad,) + y.shape[1:], y.dtype)])
    return jnp.asarray(x), jnp.asarray(y), jnp.asarray(np.arange(n + pad) < n)
