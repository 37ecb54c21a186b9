"""Checkpoints of a DP-SGD run: save after an epoch, resume a killed run.

Checkpoints (``checkpoint_dir``) hold the model's NNX state, the optimizer state (which carries the
noise key), the plan, the step count (the sampler is a function of (seed, step)) and the history, as
``np.savez`` arrays plus JSON metadata; a killed run resumes with the same parameters and the same ε as
an uninterrupted one. A run killed mid-epoch restarts that epoch from its checkpoint and replays the same
batches with the same noise, so the replay computes exactly what was computed before the kill.

Example (the round trip :func:`jaxpriv.train.dpsgd.train` makes with its state):
  >>> import tempfile, jax, jax.numpy as jnp
  >>> from jaxpriv.train import checkpoint
  >>> state = {"w": jnp.ones((2, 3)), "key": jax.random.key(0)}
  >>> d = tempfile.mkdtemp()
  >>> checkpoint.save_checkpoint(d, 1, checkpoint.leaves_to_arrays("s_", state), {"epoch": 1})
  >>> meta, arrays = checkpoint.load_checkpoint(d)
  >>> restored = checkpoint.arrays_to_tree("s_", arrays, state)
  >>> meta["epoch"], bool((restored["w"] == state["w"]).all())
  (1, True)
"""

from __future__ import annotations

import glob
import hashlib
import json
import os

import jax
import jax.numpy as jnp
import numpy as np

from .config import DPSGDConfig

__all__ = ["leaves_to_arrays", "arrays_to_tree", "save_checkpoint", "load_checkpoint", "run_fingerprint"]


_META = "latest.json"


def _is_key(x) -> bool:
    return hasattr(x, "dtype") and jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key)


def leaves_to_arrays(prefix: str, tree) -> dict:
    """A pytree's leaves as numpy arrays named ``prefix0, prefix1, …`` in flattening order (typed PRNG keys
    as their raw key data), ready for :func:`save_checkpoint`. Example in the module docstring."""
    leaves = jax.tree_util.tree_leaves(tree)
    return {f"{prefix}{i}": np.asarray(jax.random.key_data(x) if _is_key(x) else x) for i, x in enumerate(leaves)}


def arrays_to_tree(prefix: str, arrays, template):
    """The pytree shaped like ``template`` rebuilt from the ``prefix``-named arrays of :func:`leaves_to_arrays`
    (PRNG keys rewrapped with the template's implementation). Raises ValueError when the number of arrays,
    or a shape or dtype, differs from the template's (a checkpoint of another model or optimizer)."""
    leaves, treedef = jax.tree_util.tree_flatten(template)
    names = sorted((k for k in arrays if k.startswith(prefix)), key=lambda k: int(k[len(prefix):]))
    if len(names) != len(leaves):
        raise ValueError(f"checkpoint does not match the model/optimizer: {len(names)} saved {prefix!r} arrays, "
                         f"{len(leaves)} expected")
    restored = []
    for name, ref in zip(names, leaves):
        value = arrays[name]
        if _is_key(ref):
            value = jax.random.wrap_key_data(value, impl=jax.random.key_impl(ref))
        elif value.shape != np.shape(ref) or value.dtype != np.asarray(ref).dtype:
            raise ValueError(f"checkpoint does not match the model/optimizer: {name} has shape {value.shape} "
                             f"{value.dtype}, expected {np.shape(ref)} {np.asarray(ref).dtype}")
        restored.append(jnp.asarray(value) if not _is_key(ref) else value)
    return jax.tree_util.tree_unflatten(treedef, restored)


def save_checkpoint(directory: str, epoch: int, arrays: dict, meta: dict) -> None:
    """Write ``arrays`` (name → numpy array) as ``checkpoint-{epoch}.npz`` in ``directory`` and ``meta`` (JSON
    data) as ``latest.json``, then delete older checkpoints. Arrays first, then the JSON that names them
    (atomic renames): a crash at any point leaves the previous checkpoint intact and readable."""
    if isinstance(epoch, bool) or not isinstance(epoch, (int, np.integer)) or epoch < 0:
        raise ValueError(f"epoch must be an integer in [0, inf), got {epoch!r}")
    if not isinstance(arrays, dict) or not isinstance(meta, dict):
        raise ValueError(f"arrays and meta must be dicts, got {type(arrays).__name__} and {type(meta).__name__}")
    os.makedirs(directory, exist_ok=True)
    name = f"checkpoint-{epoch:05d}.npz"
    tmp = os.path.join(directory, name + ".tmp")
    with open(tmp, "wb") as f:
        np.savez(f, **arrays)
    os.replace(tmp, os.path.join(directory, name))
    tmp = os.path.join(directory, _META + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump({**meta, "arrays": name}, f)
    os.replace(tmp, os.path.join(directory, _META))
    for old in glob.glob(os.path.join(directory, "checkpoint-*.npz")):
        if os.path.basename(old) != name:
            os.remove(old)


def load_checkpoint(directory: str):
    """``(meta, arrays)`` of the latest checkpoint in ``directory`` (see :func:`save_checkpoint`), or None
    when it holds none."""
    path = os.path.join(directory, _META)
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as f:
        meta = json.load(f)
    with np.load(os.path.join(directory, meta["arrays"])) as stored:
        return meta, dict(stored)


def run_fingerprint(config: DPSGDConfig, data) -> str:
    """Identity of a run, a SHA-256 hex digest of the configuration (:class:`DPSGDConfig`) and the training
    arrays of ``data`` (``x_train``, ``y_train``): a checkpoint resumes only its own run."""
    if not isinstance(config, DPSGDConfig):
        raise ValueError(f"config must be a DPSGDConfig, got {type(config).__name__}")
    if not all(hasattr(data, k) for k in ("x_train", "y_train")):
        raise ValueError(f"data must be a Dataset (x_train, y_train), got {type(data).__name__}")
    h = hashlib.sha256(json.dumps(config.to_json(), sort_keys=True).encode())
    for a in (data.x_train, data.y_train):
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()
