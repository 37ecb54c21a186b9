"""DP-SGD training on Flax NNX + Optax (MATH §6).

:mod:`.clipping` — per-example clipped gradient sums (vmap, and ghost clipping for Linear/Conv/Embed);
:mod:`.sampling` — Poisson sampling, uniform or per record, padded to fixed buckets with a mask;
:mod:`.noise` — Optax noise transforms built on :mod:`jaxpriv.mechanisms`;
:mod:`.dpsgd` — the trainer, its privacy plan (target ε, IDP-SGD "sample"/"scale") and accountant;
:mod:`.data` — the bundled digits and breast-cancer datasets, and synthetic stand-ins;
:mod:`.private` — :func:`make_private`: DP-SGD for your own model, optimizer and arrays, step by step.
"""

from .._lazy import lazy_attributes

# Submodules load on first use: the command line imports ``jaxpriv.train.config``/``data`` without JAX.
__getattr__, __dir__ = lazy_attributes(__name__, {
    **{name: name for name in ("clipping", "sampling", "noise", "dpsgd", "data", "config", "private")},
    "make_private": "private",
    "PrivateTrainer": "private",
})

__all__ = ["clipping", "sampling", "noise", "dpsgd", "data", "config", "private", "make_private", "PrivateTrainer"]
