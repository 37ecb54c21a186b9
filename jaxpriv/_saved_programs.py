"""Traced kernels kept on disk, so that a process asking a question that an earlier process asked skips
tracing and lowering.

JAX's persistent compilation cache (:func:`jaxpriv._numerics.use_persistent_cache`) keeps XLA's executable,
but it is looked up by the lowered program: every new process still traces each kernel's Python and lowers
it to StableHLO before the cache can answer. For the PLD accountant's program that is most of a warm
question (trace 1.0 s and lowering 0.6 s of ~2.4 s CPU beyond the imports on the 2-core CI machine).

Here a top-level call of a kernel declared ``kernel_jit(..., saved=True)`` is exported once
(:mod:`jax.export`: the StableHLO program and its calling convention), written next to the compilation
cache, and read back by later processes, which call it without running the kernel's Python; the
compilation cache then supplies the executable. It is declared for the kernels whose tracing and lowering
cost more than exporting them once costs: the PLD accountant's two programs, and the RDP DP-SGD ε programs
(``dpsgd_epsilon``'s and the command line's: their tracing and lowering are ~0.35 s of a warm question's
~1.7 s CPU, bench/README "Saved RDP programs"); saving every kernel made the command-line tests 7% slower
(bench/README, "Saved programs"). (jax.export's CPU lowering of a
call also sets up jaxlib's LAPACK kernels, importing scipy.linalg: ~0.26 s once per process; it is skipped
for programs that call no LAPACK routine, :class:`_WithoutLapackSetup`.) The key holds everything the traced program depends on: the kernel (module and name), the
package's source (any edit makes new keys), the static arguments, the input tree, shapes and dtypes, JAX's
and jaxlib's versions, the x64 flag, the backend and the device count. Only calls that can be keyed safely
use it: a kernel that is a module-level function (no closure: its captured values would not be in the
key), static arguments with a stable text form, inputs that are arrays or numbers, one device. Anything
else, and any failure to export, serialize or read back, takes the ordinary ``jax.jit`` path, so the
answer never depends on this cache, only its cost (bench/README, "Saved programs").

The exported program is the one ``jax.jit`` compiles (the kernel's jaxpr, lowered the same way), so answers
are identical bit for bit (tests/test_saved_programs.py). ``JAXPRIV_SAVED_PROGRAMS=0`` turns it off;
turning off the compilation cache (``JAXPRIV_CACHE_DIR=``) turns it off too.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import inspect
import os
import threading
import types

import jax
import numpy as np

__all__ = ["call"]

#: where a key's program is, in this process, per compiler options (the tiers of :mod:`jaxpriv._tiers`): a
#: jitted caller of the exported program, or None for a call that cannot be exported (the ordinary path)
_MEMORY: dict[tuple, object] = {}
_LEAF_TYPES = (np.ndarray, np.generic, jax.Array, bool, int, float, complex)
_UNSUPPORTED = ".unsupported"
#: JAX settings that change what a kernel traces to
_TRACE_FLAGS = ("jax_enable_x64", "jax_default_matmul_precision", "jax_numpy_rank_promotion",
                "jax_numpy_dtype_promotion", "jax_default_prng_impl", "jax_threefry_partitionable",
                "jax_enable_checks", "jax_debug_nans", "jax_debug_infs", "jax_softmax_custom_jvp")


def enabled() -> bool:
    """True when saved programs are used: the compilation cache is on, one device, not turned off,
    jax.export's serialization (the ``flatbuffers`` package) installed, and the package's source readable."""
    return (os.environ.get("JAXPRIV_SAVED_PROGRAMS", "1") != "0" and jax.config.jax_compilation_cache_dir is not None
            and jax.device_count() == 1 and _can_serialize() and _package_digest() is not None)


@functools.lru_cache(maxsize=None)
def _can_serialize() -> bool:
    return importlib.util.find_spec("flatbuffers") is not None  # the format of jax.export's files


@functools.lru_cache(maxsize=None)
def _package_digest() -> str | None:
    """A digest of the package's source and JAX's versions: an edit or an upgrade makes new keys. None when
    the source cannot be read (e.g. a zipped install): then nothing is saved."""
    import jaxlib

    root = os.path.dirname(os.path.abspath(__file__))
    digest = hashlib.sha256(f"{jax.__version__} {jaxlib.__version__}".encode())
    read = 0
    for folder, dirs, files in sorted(os.walk(root)):
        dirs.sort()
        for name in sorted(files):
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                digest.update(os.path.relpath(path, root).encode())
                with open(path, "rb") as handle:
                    digest.update(handle.read())
                read += 1
    return digest.hexdigest() if read else None


def _stable_text(value) -> str | None:
    """A static argument's text, the same in every process, or None when it has none (an object whose
    text is its address)."""
    if isinstance(value, (tuple, list)):
        parts = [_stable_text(v) for v in value]
        return None if None in parts else f"{type(value).__name__}({', '.join(parts)})"
    if isinstance(value, types.FunctionType):
        return f"{value.__module__}.{value.__qualname__}" if _is_module_level(value) else None
    text = repr(value)
    return None if " at 0x" in text else text


def _is_module_level(fun) -> bool:
    """A function of this package (whose source the key holds) that depends only on its arguments and its
    module: no captured values."""
    return (isinstance(fun, types.FunctionType) and fun.__closure__ is None and "<" not in fun.__qualname__
            and (fun.__module__ or "").split(".")[0] == __name__.split(".")[0])


class Kernel:
    """What :func:`call` needs of a kernel: its function, signature and static parameters."""

    def __init__(self, fun, jit_kwargs: dict, wanted: bool = True):
        self.fun = fun
        self.saveable = wanted and _is_module_level(fun)
        if not self.saveable:
            return
        self.signature = inspect.signature(fun)
        params = list(self.signature.parameters.values())
        if any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in params):
            self.saveable = False
            return
        names = jit_kwargs.get("static_argnames", ())
        numbers = jit_kwargs.get("static_argnums", ())
        names = (names,) if isinstance(names, str) else tuple(names)
        numbers = (numbers,) if isinstance(numbers, int) else tuple(numbers)
        self.static = frozenset(names) | {params[i].name for i in numbers}


def _key(kernel: Kernel, static: dict, dynamic_names: list, treedef, leaves) -> str | None:
    texts = []
    for name in sorted(static):
        text = _stable_text(static[name])
        if text is None:
            return None
        texts.append(f"{name}={text}")
    tree = str(treedef)
    if " at 0x" in tree:
        return None
    avals = []
    for leaf in leaves:
        aval = jax.typeof(leaf)
        avals.append(f"{aval.dtype}{list(aval.shape)}{'w' if aval.weak_type else ''}")
    flags = [str(getattr(jax.config, flag, None)) for flag in _TRACE_FLAGS]
    source = "|".join([_package_digest(), kernel.fun.__module__, kernel.fun.__qualname__, ",".join(texts),
                       ",".join(dynamic_names), tree, ";".join(avals), *flags, jax.default_backend(),
                       str(jax.device_count())])
    return hashlib.sha256(source.encode()).hexdigest()


def call(kernel: Kernel, top, plain, options: dict, args: tuple, kwargs: dict):
    """``top(*args, **kwargs)``, through a saved program where the call can be keyed (module docstring);
    ``plain`` is the kernel's jit without compiler options (the one exported, as it is traced inside
    another program), ``top`` the one that compiles it with ``options``."""
    try:
        bound = kernel.signature.bind(*args, **kwargs)
    except TypeError:
        return top(*args, **kwargs)  # jit raises the caller's error
    static = {k: v for k, v in bound.arguments.items() if k in kernel.static}
    dynamic_names = [k for k in bound.arguments if k not in kernel.static]
    leaves, treedef = jax.tree.flatten([bound.arguments[k] for k in dynamic_names])
    if not all(isinstance(leaf, _LEAF_TYPES) for leaf in leaves):
        return top(*args, **kwargs)
    key = _key(kernel, static, dynamic_names, treedef, leaves)
    if key is None:
        return top(*args, **kwargs)
    memory_key = (key, tuple(sorted(options.items())))
    program = _MEMORY.get(memory_key, False)
    if program is False:
        program = _MEMORY[memory_key] = _load_or_export(kernel, plain, options, static, dynamic_names, treedef, leaves, key)
    return top(*args, **kwargs) if program is None else program(*leaves)


def _load_or_export(kernel: Kernel, plain, options, static, dynamic_names, treedef, leaves, key):
    folder = os.path.join(jax.config.jax_compilation_cache_dir, "jaxpriv-programs")
    path = os.path.join(folder, key)
    if os.path.exists(path + _UNSUPPORTED):
        return None
    exported = None
    if os.path.exists(path):
        try:
            with open(path, "rb") as handle:
                exported = jax.export.deserialize(bytearray(handle.read()))
        except Exception:  # a truncated or foreign file: export again, and overwrite it
            exported = None
    if exported is None:
        exported = _export(kernel, plain, static, dynamic_names, treedef, leaves)
        _write(folder, path, exported)
        if exported is None:
            return None

    def run(*flat):
        return exported.call(*flat)

    run.__name__ = run.__qualname__ = kernel.fun.__name__  # compile logs name the kernel, as before
    jitted = jax.jit(run, compiler_options=options) if options else jax.jit(run)
    return jitted if _calls_lapack(exported) else _WithoutLapackSetup(jitted)


def _calls_lapack(exported) -> bool:
    """Whether an exported program may call jaxlib's CPU linear algebra: its custom calls' names (lapack_…,
    and blas_… in older jaxlibs) are in the serialized module's string table (so are its source locations:
    a function named so is a false positive, which only keeps the set-up)."""
    return any(name in exported.mlir_module_serialized for name in (b"lapack", b"blas"))


try:  # JAX's (private) hook that sets up the CPU's LAPACK kernels before lowering a call of an exported program
    from jax._src.export import _export as _jax_export
except ImportError:  # pragma: no cover - another JAX layout: the hook is simply not skipped
    _jax_export = None
_HOOK = "_ensure_backends_initialized"
_HOOK_LOCK = threading.Lock()


class _WithoutLapackSetup:
    """A jitted caller of an exported program that calls no LAPACK routine, whose first call (where it is
    lowered) skips jax.export's LAPACK set-up: on the CPU that registers jaxlib's LAPACK kernels whatever the
    program calls, importing scipy.linalg for them (~0.26 s CPU, in every process that calls a saved
    program). Where JAX has no such hook, nothing is skipped."""

    def __init__(self, jitted):
        self.jitted, self.lowered = jitted, False

    def __call__(self, *flat):
        original = getattr(_jax_export, _HOOK, None)
        if self.lowered or original is None:
            return self.jitted(*flat)
        with _HOOK_LOCK:
            setattr(_jax_export, _HOOK, lambda platforms: None)
            try:
                out = self.jitted(*flat)
            finally:
                setattr(_jax_export, _HOOK, original)
        self.lowered = True
        return out


def _export(kernel: Kernel, plain, static, dynamic_names, treedef, leaves):
    def traced(*flat):
        values = jax.tree.unflatten(treedef, flat)
        bound = inspect.BoundArguments(kernel.signature, {**static, **dict(zip(dynamic_names, values))})
        return plain(*bound.args, **bound.kwargs)

    traced.__name__ = traced.__qualname__ = kernel.fun.__name__
    try:
        return jax.export.export(jax.jit(traced))(*leaves)
    except Exception:  # e.g. a host callback or an output tree that cannot be exported: the ordinary path
        return None


def _write(folder: str, path: str, exported) -> None:
    """The serialized program, or an empty marker that this key takes the ordinary path; written to a
    temporary name and renamed, so a reader never sees half a file (pytest-xdist workers share the cache)."""
    try:
        data = exported.serialize() if exported is not None else b""
    except Exception:
        data, exported = b"", None
    target = path if exported is not None else path + _UNSUPPORTED
    try:
        os.makedirs(folder, exist_ok=True)
        temporary = f"{target}.{os.getpid()}.tmp"
        with open(temporary, "wb") as handle:
            handle.write(data)
        os.replace(temporary, target)
    except OSError:  # a read-only cache: the program still runs, it is just not kept
        pass
