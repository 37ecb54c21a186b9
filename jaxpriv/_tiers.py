"""Tiered compilation: a program's first calls run a quickly compiled form, its frequent calls an optimised one.

XLA's CPU compiler spends most of a new program's time in LLVM, which optimises at its highest level (-O3,
``xla_backend_optimization_level=3``) by default. At level 0 the same program compiles in about half the
time and runs 2–5× slower (2-core CI machine, ``bench/compile_options.py --tiers``: the PLD accountant's
first answer 6.4 → 3.5 s CPU, its warm call 0.08 → 0.29 s; a 20,000-setting RDP sweep 6.6 → 29 s). A
question asked once (a command, a notebook cell, a test) wants the first; a sweep or a loop asking many
questions the second. So the kernels declared ``kernel_jit(..., tiered=True)`` (the PLD accountant's
two programs) are compiled at level 0 for their first :data:`TIER_UP_CALLS` calls of one input structure, and at XLA's full level from
then on: one more compilation, which the calls that follow repay. Calls inside :func:`optimised` take the optimised form at
once: :func:`jaxpriv._batching.map_chunked` runs a sweep's chunks of :data:`SWEEP_SETTINGS` or more
settings in it, and the PLD accountant its evaluations on grids of 2^20 nodes or more, a query's many rows
(rows times grid nodes from 2^20: 32 DP-SGD settings, fewer on larger grids), and its probes and evaluations
of steps held as large tables (there the run costs more than the compilation).

The choice is deterministic (a count per structure, no clock), so which programs a sequence of calls
compiles does not depend on the machine's load. Both forms compute the same operations in the same
order; at -O3 LLVM may fuse a multiplication and an addition into one FMA (one rounding instead of two), so
a result may differ by rounding between the tiers (a DP-SGD PLD ε by ~1e-10 relative, the ε of 1,000 composed
shuffle rounds by 3e-8: FFT powers amplify it), as between two XLA
versions: both are evaluations of the same formula, and the accountants' rounding allowances hold for
either. The trainer's programs are not tiered: a training run is long, and a run resumed from a checkpoint
must repeat the uninterrupted one bit for bit. CPU only: other backends compile one form. ``JAXPRIV_QUICK_TIER=0`` (read at import) turns it off,
and so does ``JAXPRIV_KERNEL_XLA_DEFAULTS`` (every kernel with XLA's defaults).
"""

from __future__ import annotations

import contextlib
import inspect
import os
import threading
import weakref
from typing import Iterator

import jax

__all__ = ["QUICK_OPTIONS", "FULL_OPTIONS", "TIER_UP_CALLS", "SWEEP_SETTINGS", "Tiers", "optimised",
           "tier_up_compiles", "reset"]

#: top-level calls of one input structure that run the quickly compiled form
TIER_UP_CALLS = 8
#: settings per call from which a sweep's chunk takes the optimised form at once (the CPU's chunk sizes are 1,
#: 16 and 256: the 256-setting chunks; 16 PLD settings run ~3 s longer at level 0, what level 3 costs more to
#: compile, and an RDP setting 1 ms longer)
SWEEP_SETTINGS = 64
#: structures remembered per program (then forgotten all at once: a forgotten one starts quick again)
_MAX_STRUCTURES = 4096


def _options() -> tuple[dict, dict]:
    """The two tiers' XLA options, for the jaxlib versions they were measured on (an option XLA does not know
    fails every compilation); empty when tiering is off."""
    import jaxlib

    if os.environ.get("JAXPRIV_QUICK_TIER", "1") == "0" or os.environ.get("JAXPRIV_KERNEL_XLA_DEFAULTS"):
        return {}, {}
    try:
        version = tuple(int(part) for part in jaxlib.__version__.split(".")[:2])
    except ValueError:
        return {}, {}
    if not (0, 10) <= version < (0, 11):
        return {}, {}
    # The full level is stated, not left to XLA's default, so that XLA_FLAGS cannot lower it (per-program
    # options override the flags). The quick form's machine code is generated in one piece, not split over
    # threads: its programs are small, and the split's per-piece work cost a first PLD answer 0.1-0.2 s of CPU
    # (bench/README, "One piece of machine code")
    return ({"xla_backend_optimization_level": 0, "xla_cpu_parallel_codegen_split_count": 1},
            {"xla_backend_optimization_level": 3})


#: XLA options of the quick form and of the optimised form (both empty: one form)
QUICK_OPTIONS, FULL_OPTIONS = _options()


_local = threading.local()
_tier_up_compiles = [0]
_instances: "weakref.WeakSet[Tiers]" = weakref.WeakSet()


def reset() -> None:
    """Forget every program's call counts: each structure's next calls are quick again (their quick programs
    are compiled already). The test suite calls it before each module, so that which calls of a module run
    which form depends on that module alone, not on the modules its process ran before."""
    for tiers in list(_instances):
        with tiers._lock:
            tiers._calls.clear()


def tier_up_compiles() -> int:
    """Executables this process has obtained (compiled, or read from the compilation cache) for the
    optimised form of a structure that had run its quick calls: the programs tiering adds."""
    return _tier_up_compiles[0]


def _count_compile(event: str, seconds: float, **kwargs) -> None:
    if event.endswith("backend_compile_duration") and getattr(_local, "up", 0):
        _tier_up_compiles[0] += 1


jax.monitoring.register_event_duration_secs_listener(_count_compile)


@contextlib.contextmanager
def optimised(when: bool = True) -> Iterator[None]:
    """Within this scope (this thread), every tiered program runs its optimised form; ``when=False``: a scope
    that changes nothing (for a caller that decides by the size of its work)."""
    if not when:
        yield
        return
    _local.depth = getattr(_local, "depth", 0) + 1
    try:
        yield
    finally:
        _local.depth -= 1


def _static_positions(fun, jit_kwargs: dict) -> tuple[frozenset, frozenset]:
    """The positions and names of ``fun``'s static arguments under ``jax.jit(fun, **jit_kwargs)``."""
    names = jit_kwargs.get("static_argnames", ())
    numbers = jit_kwargs.get("static_argnums", ())
    names = {names} if isinstance(names, str) else set(names)
    numbers = {numbers} if isinstance(numbers, int) else set(numbers)
    try:
        params = list(inspect.signature(fun).parameters.values())
    except (TypeError, ValueError):
        return frozenset(numbers), frozenset(names)
    for i, p in enumerate(params):
        positional = p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        if p.name in names and positional:
            numbers.add(i)
        if i in numbers:
            names.add(p.name)
    return frozenset(numbers), frozenset(names)


class Tiers:
    """Which form a program's top-level calls run: :meth:`run` counts the call and runs the quick form for
    its input structure's first :data:`TIER_UP_CALLS` calls (outside :func:`optimised`), the optimised one
    after them.

    Example:
      >>> tiers = Tiers(lambda x, n: x, {"static_argnames": "n"})
      >>> forms = [tiers.run((1.0, 2), {}, lambda quick: quick) for _ in range(TIER_UP_CALLS + 1)]
      >>> forms[-2:] == [bool(QUICK_OPTIONS), False]
      True
    """

    def __init__(self, fun, jit_kwargs: dict, enabled: bool = True):
        self.enabled = enabled and bool(QUICK_OPTIONS)
        self._numbers, self._names = _static_positions(fun, jit_kwargs)
        self._calls: dict = {}
        self._lock = threading.Lock()
        _instances.add(self)

    def run(self, args: tuple, kwargs: dict, call):
        """``call(quick)`` with ``quick`` saying which form this call of ``args``/``kwargs`` runs."""
        tier = self._count(args, kwargs)
        if tier != "up":
            return call(tier == "quick")
        _local.up = getattr(_local, "up", 0) + 1  # the compilations of this call are the tier's (counted)
        try:
            return call(False)
        finally:
            _local.up -= 1

    def _count(self, args: tuple, kwargs: dict) -> str:
        if not self.enabled or getattr(_local, "depth", 0) or jax.default_backend() != "cpu":
            return "full"
        key = self._structure(args, kwargs)
        if key is False:
            return "full"
        with self._lock:
            count = self._calls.get(key, 0)
            if len(self._calls) >= _MAX_STRUCTURES:
                self._calls.clear()
            self._calls[key] = min(count + 1, TIER_UP_CALLS + 1)
        return "quick" if count < TIER_UP_CALLS else "up" if count == TIER_UP_CALLS else "full"

    def _structure(self, args: tuple, kwargs: dict):
        """A hashable key of what the program is compiled for (dynamic inputs' shapes and dtypes, static
        values; a Python number's type, not its value), or False for an input it cannot key."""
        static = tuple(args[i] for i in sorted(self._numbers) if i < len(args))
        static += tuple((k, kwargs[k]) for k in sorted(kwargs) if k in self._names)
        dynamic = ([a for i, a in enumerate(args) if i not in self._numbers],
                   {k: v for k, v in kwargs.items() if k not in self._names})
        leaves, treedef = jax.tree.flatten(dynamic)
        parts = [(tuple(leaf.shape), str(getattr(leaf, "dtype", ""))) if hasattr(leaf, "shape") else type(leaf)
                 for leaf in leaves]
        key = (treedef, tuple(parts), static)
        try:
            hash(key)
        except TypeError:
            return False
        return key
