"""Compiled programs keyed on structure, never on numbers (DESIGN: "Programs are keyed on structure").

A DP-SGD step, an evaluation or a federated round is one jitted function of arrays. What a program bakes in
is its *structure*: the model's graph definition, the loss and optimizer functions, the clipping mode, the
microbatch size, the device layout. Every number of a privacy plan — the noise scale, the clip norms, the
normalisation, a learning rate given as a number, the keys — is an *argument*. :class:`ProgramCache` keeps
one jitted program per structure, so a second run that differs only in its numbers (another ε, σ, δ or C)
compiles nothing, and its first step runs at the speed of a warm one.

The key of a structure is :func:`structure_key`: a hashable description of Python objects as a traced
program sees them. A function is its code, its defaults and what its closure holds (recursively), so
``optax.sgd(0.1)`` built twice gives one key and ``optax.sgd(0.2)`` another (its learning rate is a constant
of the program it builds); numbers and arrays held by a closure are keyed by value (they are baked in);
frozen dataclasses and named tuples by their fields; an ``nnx.GraphDef`` (hashable by value) as itself; any
other object by identity (the cache keeps it alive, so its ``id`` is never reused by another). Two objects
with equal keys trace to the same program.

A :class:`Program` also counts its traces, per argument signature (shapes, dtypes, weak types and the
static arguments): the project's own count of compiled programs (``TrainResult.compiled_steps``), instead
of JAX's private cache sizes.

Example:
  >>> import optax
  >>> structure_key(optax.sgd(0.1)) == structure_key(optax.sgd(0.1)) != structure_key(optax.sgd(0.2))
  True
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import hashlib
import threading
import types
from typing import Any, Callable

import jax
import numpy as np

__all__ = ["structure_key", "Program", "ProgramCache", "signature"]


class _Key:
    """An identity key that keeps its object alive (so that its id is not reused while the key exists)."""

    __slots__ = ("obj",)

    def __init__(self, obj):
        self.obj = obj

    def __hash__(self):
        return id(self.obj)

    def __eq__(self, other):
        return isinstance(other, _Key) and other.obj is self.obj

    def __repr__(self):
        return f"<identity of {type(self.obj).__name__}>"


_ATOMS = (type(None), bool, int, str, bytes, complex, type, np.dtype, types.ModuleType, types.BuiltinFunctionType,
          type(Ellipsis))


def _array_key(a: np.ndarray):
    return ("array", a.shape, a.dtype.str, hashlib.sha1(np.ascontiguousarray(a).view(np.uint8)).hexdigest())


def _key(obj, seen: dict):
    if isinstance(obj, float):  # float subclasses (np.float64) included; -0.0 and 0.0 differ in a program
        return ("float", float(obj).hex())
    if isinstance(obj, _ATOMS):
        return (type(obj), obj)
    if isinstance(obj, np.generic):
        return ("scalar", obj.dtype.str, obj.tobytes())
    if id(obj) in seen:  # a cycle (a closure that refers to itself)
        return ("cycle", seen[id(obj)])
    seen[id(obj)] = len(seen)
    if isinstance(obj, jax.core.Tracer):
        return _Key(obj)
    if isinstance(obj, np.ndarray):
        return _array_key(obj)
    if isinstance(obj, jax.Array):
        if not obj.is_fully_addressable:
            return _Key(obj)
        if jax.dtypes.issubdtype(obj.dtype, jax.dtypes.prng_key):  # a typed PRNG key: its bits and its impl
            return ("key", str(obj.dtype), _array_key(np.asarray(jax.random.key_data(obj))))
        return _array_key(np.asarray(obj))
    if isinstance(obj, (tuple, list)):
        return (type(obj), tuple(_key(v, seen) for v in obj))
    if isinstance(obj, dict):
        return (type(obj), tuple((_key(k, seen), _key(v, seen)) for k, v in obj.items()))
    if isinstance(obj, types.FunctionType):
        cells = []
        for cell in obj.__closure__ or ():
            try:
                cells.append(_key(cell.cell_contents, seen))
            except ValueError:  # an empty cell
                cells.append(("empty",))
        return ("function", obj.__code__, id(obj.__globals__), _key(obj.__defaults__, seen),
                _key(obj.__kwdefaults__, seen), tuple(cells))
    if isinstance(obj, functools.partial):
        return ("partial", _key(obj.func, seen), _key(obj.args, seen), _key(obj.keywords, seen))
    if isinstance(obj, types.MethodType):
        return ("method", _key(obj.__func__, seen), _key(obj.__self__, seen))
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type) and obj.__dataclass_params__.frozen:
        return (type(obj), tuple(_key(getattr(obj, f.name), seen) for f in dataclasses.fields(obj)))
    if type(obj).__hash__ not in (None, object.__hash__):
        try:
            hash(obj)
            return (type(obj), obj)  # hashable by value (an nnx GraphDef, a jax.sharding object, an enum, …)
        except TypeError:
            pass
    return _Key(obj)


def structure_key(obj) -> Any:
    """A hashable key of ``obj`` (any Python object: functions, optax transformations, graph definitions,
    tuples of them) such that two objects with equal keys behave the same when traced (the module
    docstring lists the rules). Numbers and arrays held in closures are part of the key (they are baked
    into a program); an object of unknown kind is keyed by identity.

    Example:
      >>> f = lambda scale: (lambda x: x * scale)
      >>> structure_key(f(2.0)) == structure_key(f(2.0)), structure_key(f(2.0)) == structure_key(f(3.0))
      (True, False)
    """
    return _key(obj, {})


def signature(args, kwargs=None) -> tuple:
    """The signature a jitted function is compiled for: each argument leaf's shape, dtype and weak type
    (tracers or arrays), the tree structure, and the other (static) values as they are."""
    leaves, treedef = jax.tree_util.tree_flatten((args, kwargs or {}))

    def one(v):
        aval = getattr(v, "aval", None)
        if aval is not None:
            return (tuple(aval.shape), str(aval.dtype), bool(getattr(aval, "weak_type", False)))
        if isinstance(v, (np.ndarray, np.generic)):
            return (tuple(v.shape), str(v.dtype), False)
        return ("static", structure_key(v))

    return (treedef, tuple(one(v) for v in leaves))


class Program:
    """``jax.jit(fn, **jit_kwargs)`` that counts its traces: ``traces`` (every trace, including those after
    ``jax.clear_caches()``) and ``signatures`` (the distinct argument signatures it was traced for: its
    compiled programs). Call it like the jitted function; ``lower`` lowers it."""

    def __init__(self, fn: Callable, **jit_kwargs):
        self.traces = 0
        self.signatures: set = set()
        self._lock = threading.Lock()

        @functools.wraps(fn)
        def traced(*args, **kwargs):
            with self._lock:
                self.traces += 1
                self.signatures.add(signature(args, kwargs))
            return fn(*args, **kwargs)

        self.jitted = jax.jit(traced, **jit_kwargs)

    def __call__(self, *args, **kwargs):
        return self.jitted(*args, **kwargs)

    def lower(self, *args, **kwargs):
        return self.jitted.lower(*args, **kwargs)


class ProgramCache:
    """Programs built by ``build(*parts)`` and kept per :func:`structure_key` of ``parts`` (at most
    ``maxsize``, least recently used dropped): ``cache(*parts)`` returns the program, building it once.

    ``build`` must bake in nothing but ``parts`` (every number it needs is an argument of the program);
    ``cache.builds`` counts the programs built (cache misses)."""

    def __init__(self, build: Callable, maxsize: int = 32):
        self._build, self._maxsize = build, int(maxsize)
        self._entries: collections.OrderedDict = collections.OrderedDict()
        self._lock = threading.Lock()
        self.builds = 0

    def __call__(self, *parts):
        key = structure_key(parts)
        with self._lock:
            if key in self._entries:
                self._entries.move_to_end(key)
                return self._entries[key][0]
        program = self._build(*parts)
        with self._lock:
            if key not in self._entries:
                self.builds += 1
                self._entries[key] = (program, parts)  # parts: kept alive with the key
                while len(self._entries) > self._maxsize:
                    self._entries.popitem(last=False)
            return self._entries[key][0]

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)
