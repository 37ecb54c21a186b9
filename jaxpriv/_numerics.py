"""Numerical plumbing shared by every kernel: the float64 policy, input validation and log-space helpers.

Two rules live here (MATH §0.3-0.4), and one default:

* Accounting runs in float64 whatever the caller's global ``jax_enable_x64`` flag says. Public functions
  wrap their work in :func:`float64`, a scoped ``jax.enable_x64(True)``; the caller's flag is never
  flipped globally.
* Invalid input raises ``ValueError`` naming the parameter and its valid range. Validation runs once, at
  the Python boundary, on concrete values. Inside a caller's ``jit``/``grad`` (tracers) nothing can be
  raised, so an invalid traced value makes the answer NaN, never a number: :func:`check_array` replaces
  it by NaN and records where inputs were valid, and :func:`as_output` turns every floating output
  NaN where they were not (elementwise along the output's leading batch axes, else wholesale). Both
  hooks are in every public function already (validation in, ``as_output`` out, inside one
  :func:`float64` scope), so the rule is written once, here.
* Compiled kernels are kept on disk (:func:`use_persistent_cache`, run on import): a kernel's first
  call compiles for seconds, and the next process reads it back; beside them, the traced kernels
  (:mod:`jaxpriv._saved_programs`), so that the next process does not trace and lower them either.

It also holds the one seeding helper, :func:`derive_seeds` (the trainer's and the federated simulator's
independent seeds from one user seed), and the library's root finders, :func:`solve_monotone` and
:func:`bisect_floats` (public as :func:`jaxpriv.calibrate.solve_monotone` and
:func:`jaxpriv.calibrate.bisect_floats`), below every module that solves for a parameter.
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
import threading
import warnings
from typing import Iterator

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import ndtr

from . import _saved_programs, _tiers
from ._checks import check_values, in_range

__all__ = [
    "use_persistent_cache",
    "KERNEL_COMPILER_OPTIONS",
    "kernel_jit",
    "float64",
    "is_concrete",
    "check_array",
    "check_orders",
    "log_expm1",
    "log1p",
    "log1mexp",
    "log_normal_cdf",
    "as_output",
    "solve_monotone",
    "bisect_floats",
    "derive_seeds",
]


def use_persistent_cache() -> str | None:
    """Turn on JAX's persistent compilation cache in $JAXPRIV_CACHE_DIR, else ~/.cache/jaxpriv/xla
    (``XDG_CACHE_HOME`` respected); return the directory, or None when it is left off.

    A cache directory the user (or a test harness) already configured is never overridden; setting
    ``JAXPRIV_CACHE_DIR`` to the empty string turns the cache off.
    """
    if jax.config.jax_compilation_cache_dir is not None:
        return None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    path = os.environ.get("JAXPRIV_CACHE_DIR", os.path.join(base, "jaxpriv", "xla"))
    if not path:
        return None
    try:
        # Create it first: JAX keys the entries written into a missing directory differently, and the
        # next run would miss them all.
        os.makedirs(path, exist_ok=True)
    except OSError:  # a read-only home: run without the cache rather than fail
        return None
    jax.config.update("jax_compilation_cache_dir", path)
    # Keep the quick compilations too: the accountants compile many small kernels (seconds in all).
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    return path


use_persistent_cache()


def _kernel_compiler_options() -> dict:
    """XLA options for the package's numerical kernels (see :func:`kernel_jit`), for the jaxlib versions they
    were measured on; others keep XLA's defaults (an option XLA does not know fails the compilation)."""
    import jaxlib

    if os.environ.get("JAXPRIV_KERNEL_XLA_DEFAULTS"):  # the user's way back to XLA's defaults
        return {}
    try:
        version = tuple(int(part) for part in jaxlib.__version__.split(".")[:2])
    except ValueError:
        return {}
    return {"xla_cpu_use_fusion_emitters": False} if (0, 10) <= version < (0, 11) else {}


#: the options :func:`kernel_jit` compiles with (empty: XLA's defaults)
KERNEL_COMPILER_OPTIONS = _kernel_compiler_options()


def kernel_jit(fun, *, xla_defaults: bool = False, saved: bool = False, tiered: bool = False, **jit_kwargs):
    """``jax.jit`` for the package's numerical kernels (accounting, curves, mechanisms, shuffle bounds).

    On the CPU they compile with XLA's elemental fusion emitter instead of its newer MLIR fusion emitters:
    the kernels are long chains of float64 elementwise math (log-sum-exps, special functions, while loops),
    which the elemental emitter compiles in about 30% less time (the PLD accountant's main program: 3.6 s
    instead of 5.0 s of CPU) and runs about as fast (``bench/compile_options.py`` measures both). The real
    math library is the same, bit for bit; complex exp/log may differ in the last bit, which moves a PLD ε by
    ~1e-10 relative, inside the accountant's rounding allowances. Compilation is most of a new question's
    time, and of the test suite's. The option is an XLA CPU flag; other backends ignore it. The trainer's
    programs (convolutions, matrix products) keep XLA's defaults, and so does every kernel when the
    environment variable ``JAXPRIV_KERNEL_XLA_DEFAULTS`` is set (read at import), and a kernel declared with
    ``xla_defaults=True``: one whose long summation loops run faster with the newer emitter's code (the
    shuffle clone sums, 16% slower warm with the option, ``bench/compile_options.py``).

    ``tiered=True`` (:mod:`jaxpriv._tiers`): on the CPU the kernel's first calls with one input structure run
    a program compiled at XLA's optimisation level 0 (about half the compile time, 2–5× the run time), its
    ninth and later calls, and a sweep's large chunks, the program optimised at level 3, compiled once then.
    For the PLD accountant's two programs, whose compilation is most of a new question's time; answers of
    the two tiers differ where LLVM fuses a multiplication and an addition (a PLD ε by ~1e-10 relative).

    ``saved=True``: a top-level call's traced program is also kept on disk (:mod:`jaxpriv._saved_programs`),
    so a later process neither traces nor lowers it. For the kernels whose tracing and lowering cost more
    than the ~0.3 s a process pays once to call saved programs (jax.export's CPU lowering loads LAPACK, which
    imports scipy.linalg): the PLD accountant's two programs (1.6 s of a warm question).

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxpriv._numerics import kernel_jit
      >>> float(kernel_jit(lambda x: jnp.log1p(x) * 2.0)(jnp.float32(0.0)))
      0.0
    """
    return jax.jit(fun, **jit_kwargs) if xla_defaults else _KernelJit(fun, jit_kwargs, saved, tiered)


class _KernelJit:
    """A kernel's jitted forms: with :data:`KERNEL_COMPILER_OPTIONS` when called at the top level (two: the
    quick and the optimised tier of :mod:`jaxpriv._tiers`), and plain when traced inside another program
    (JAX takes compiler options on top-level programs only; there the kernel is inlined into its caller,
    which is compiled as one). Attributes (``lower``, ``trace``, ...) are the optimised form's."""

    def __init__(self, fun, jit_kwargs, saved: bool = False, tiered: bool = False):
        self._plain = jax.jit(fun, **jit_kwargs)
        self._tiers = _tiers.Tiers(fun, jit_kwargs, enabled=tiered)
        self._options = {**KERNEL_COMPILER_OPTIONS, **(_tiers.FULL_OPTIONS if self._tiers.enabled else {})}
        self._quick_options = {**KERNEL_COMPILER_OPTIONS, **_tiers.QUICK_OPTIONS}
        self._top = jax.jit(fun, compiler_options=self._options, **jit_kwargs) if self._options else self._plain
        self._quick = jax.jit(fun, compiler_options=self._quick_options, **jit_kwargs) if self._tiers.enabled else None
        self._saved = _saved_programs.Kernel(fun, jit_kwargs, saved)
        functools.update_wrapper(self, fun)

    def __call__(self, *args, **kwargs):
        from jax._src import core  # the trace stack has no public accessor

        if not core.trace_ctx.is_top_level():
            return self._plain(*args, **kwargs)
        return self._tiers.run(args, kwargs, functools.partial(self._call, args, kwargs))

    def _call(self, args, kwargs, quick: bool):
        # a structure's first calls run the quickly compiled form (jaxpriv._tiers)
        top, options = (self._quick, self._quick_options) if quick else (self._top, self._options)
        if self._saved.saveable and _saved_programs.enabled():  # a later process skips tracing and lowering
            return _saved_programs.call(self._saved, top, self._plain, options, args, kwargs)
        return top(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._top, name)


# Validity of the traced inputs of the public call in progress (one list per thread, kept while the
# outermost float64() scope is open).
_traced = threading.local()


@contextlib.contextmanager
def float64() -> Iterator[None]:
    """Scope float64 for the accounting path without touching the caller's global JAX setting; the
    outermost scope also collects the validity of traced inputs (see the module docstring)."""
    depth = getattr(_traced, "depth", 0)
    if depth == 0:
        _traced.valid = []
    _traced.depth = depth + 1
    try:
        with jax.enable_x64(True):
            yield
    finally:
        _traced.depth = depth
        if depth == 0:
            _traced.valid = []


def is_concrete(x) -> bool:
    """True when ``x`` holds values we can inspect (not a tracer inside the caller's jit/grad)."""
    return not any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree_util.tree_leaves(x))


def check_array(name: str, value, lo: float = -np.inf, hi: float = np.inf, *, worse: str | None = None, **rules):
    """Validate ``value`` (:func:`jaxpriv._checks.check_values`; ``rules``: its ``lo_open``, ``hi_open``,
    ``integer``, ``allow_inf``) and return it as a float64 JAX array.

    A traced value cannot be checked: it comes back with NaN where it is invalid, and its validity is
    recorded for :func:`as_output` (see the module docstring).

    ``worse`` ("up" or "down") is the direction in which the parameter makes privacy worse. A traced
    float32 value (a caller's jit with x64 off rounds every Python float to float32) stands for every
    float64 that rounds to it; it is then replaced by the far end of that rounding interval in the
    ``worse`` direction, so the answer is conservative for whatever float64 the caller meant (MATH §0.3).
    """
    if is_concrete(value):
        value = check_values(name, value, lo, hi, **rules)
        with float64():
            return jnp.asarray(value, dtype=jnp.float64)
    with float64():
        x = jnp.asarray(value, dtype=jnp.float64)
        valid = in_range(jnp, x, lo, hi, **rules)
        # The tracer's own dtype: a Python float passed to the caller's jit is a weak-typed float32 there,
        # which result_type would report as float64 inside this x64 scope.
        dtype = value.dtype if hasattr(value, "dtype") else jnp.result_type(value)
        if worse is not None and jnp.issubdtype(dtype, jnp.floating) and jnp.finfo(dtype).bits < 64:
            far = _far_end_of_rounding(value, x, worse)
            x = jnp.where(in_range(jnp, far, lo, hi, **rules), far, x)  # never across the valid range's end
        if getattr(_traced, "depth", 0) > 0:
            _traced.valid.append(valid)
        return jnp.where(valid, x, jnp.nan)


def check_orders(orders) -> np.ndarray:
    """Validate a 1-D array of Rényi orders (each > 1, finite, non-empty) and return it as numpy float64.

    Orders stay concrete (numpy) because the kernels specialise on them: integer orders use the finite
    binomial sum and every order's series length is fixed at trace time.
    """
    if not is_concrete(orders):
        raise ValueError("orders must be concrete values (not traced); pass them as a numpy array or list")
    arr = np.asarray(orders, dtype=np.float64)
    if arr.ndim == 0:
        arr = arr[None]
    if arr.ndim != 1:
        raise ValueError(f"orders must be a 1-D array of Rényi orders in (1, inf), got shape {arr.shape}")
    check_array("orders", arr, 1.0, np.inf, lo_open=True)
    return arr


def check_broadcastable(**arrays) -> tuple:
    """Return the broadcast shape of the named arrays or raise ``ValueError`` naming the mismatch."""
    shapes = {name: np.shape(a) for name, a in arrays.items()}
    try:
        return np.broadcast_shapes(*shapes.values())
    except ValueError:
        described = ", ".join(f"{name} {shape}" for name, shape in shapes.items())
        raise ValueError(f"shapes do not broadcast together: {described}") from None


#: float64 unit roundoff: relative error allowances below are multiples of it
EPS64 = float(np.finfo(np.float64).eps)


def round_up(x, ulps: float):
    """x + |x|·ulps·eps: moves a computed value whose relative error is at most ``ulps`` float64 ulps to
    the safe (upper) side of the exact value (MATH §0.1: floating-point error absorbed on the safe side)."""
    return x + jnp.abs(x) * (ulps * EPS64)


@kernel_jit  # called eagerly by many checks and calibrators: one program per shape, not one per operation
def log1p(x):
    """log(1 + x) within 1.5 ulps. XLA's float64 ``log1p`` is off by up to 120 ulps for x ∈ (−0.4143, −0.3603)
    (log(1 − q) at q ≈ 0.4, log1p(−1/α) at α ≈ 2.5); there the result is log(u)·x/(u − 1), u = 1 + x (Goldberg
    1991: u − 1 is exact and the ratio undoes the rounding of u; it needs an accurate log, which XLA's is away
    from u ≈ 1)."""
    u = 1.0 + x
    patch = (x > -0.45) & (x < -0.3)
    return jnp.where(patch, jnp.log(u) * (x / jnp.where(patch, u - 1.0, 1.0)), jnp.log1p(x))


def log1mexp(x):
    """log(1 − e^x) for x ≤ 0, accurate near 0 and for very negative x (Mächler 2012)."""
    x = jnp.minimum(x, 0.0)
    safe_small = jnp.where(x > -0.6931471805599453, x, -1.0)
    safe_large = jnp.where(x > -0.6931471805599453, -1.0, x)
    return jnp.where(
        x > -0.6931471805599453,
        jnp.log(-jnp.expm1(safe_small)),
        log1p(-jnp.exp(safe_large)),
    )


def log_expm1(x):
    """log(e^x − 1) for x > 0, without overflow for large x or cancellation for small x."""
    small = jnp.where(x < 30.0, x, 1.0)
    return jnp.where(x < 30.0, jnp.log(jnp.expm1(small)), x + jnp.log1p(-jnp.exp(-jnp.where(x < 30.0, 30.0, x))))


# (−1)^n (2n − 1)!!, n = 0…10: the asymptotic series of Φ(x)·(−x)√(2π)·e^{x²/2} in 1/x²
_LOG_PHI_SERIES = tuple(float((-1) ** n * np.prod(np.arange(2 * n - 1, 0, -2))) for n in range(11))


@jax.custom_jvp
def log_normal_cdf(x):
    """log Φ(x) to full float64 relative precision everywhere.

    ``jax.scipy.special.log_ndtr`` switches to an asymptotic series below x = −20 whose default 3 terms
    leave an error of up to ~4e-9 in Φ; 10 terms bring it under 1e-17 there ((2k−1)!!/x^{2k} at x = −20).
    This is ``log_ndtr(x, series_order=10)`` bit for bit above −20; below, the same 10-term series is
    evaluated by Horner's rule in 1/x² (one division instead of ten: 15% faster overall; within 1 ulp of
    the term-by-term sum). (``erfcx`` is not a safe alternative: in float64 it returns 0 for arguments
    near 26.6.)
    """
    above = x > 8.0
    phi = ndtr(jnp.where(above, -x, jnp.maximum(x, -20.0)))  # log Φ ≈ −Φ(−x) above 8 (log1p(−ε) ≈ −ε)
    far = jnp.minimum(x, -20.0)
    r = 1.0 / -far
    z = r * r
    series = _LOG_PHI_SERIES[-1]
    for c in _LOG_PHI_SERIES[-2::-1]:
        series = series * z + c
    asymptotic = -0.5 * far * far - 0.5 * np.log(2.0 * np.pi) + jnp.log(series * r)
    return jnp.where(above, -phi, jnp.where(x > -20.0, jnp.log(phi), asymptotic))


@log_normal_cdf.defjvp
def _log_normal_cdf_jvp(primals, tangents):
    # d log Φ = φ/Φ, as log_ndtr's own rule: the branches' derivatives are not all finite everywhere
    (x,), (t,) = primals, tangents
    value = log_normal_cdf(x)
    return value, t * jnp.exp(-0.5 * x * x - 0.5 * np.log(2.0 * np.pi) - value)


_warned_float32 = False


def _far_end_of_rounding(narrow, wide, worse: str):
    """The end, in direction ``worse``, of the float64 interval that rounds to the narrow float ``narrow``
    (``wide`` is the same value in float64); warns once per process."""
    global _warned_float32
    if not _warned_float32:
        _warned_float32 = True
        warnings.warn(
            "jaxpriv: a float32 (or narrower) traced input, as inside jit with jax_enable_x64 off: it is "
            "taken at the pessimistic end of its rounding interval, so the result is conservative for "
            "every float64 the caller may have meant (ε up to ~1e-7 relative larger). Pass float64 "
            "arrays or enable x64 for the exact value.",
            UserWarning,
            stacklevel=4,
        )
    narrow = jax.lax.stop_gradient(jnp.asarray(narrow))  # nextafter has no derivative; the shift needs none
    neighbour = jnp.nextafter(narrow, jnp.asarray(jnp.inf if worse == "up" else -jnp.inf, narrow.dtype))
    half_gap = 0.5 * (neighbour.astype(jnp.float64) - wide)
    return wide + jax.lax.stop_gradient(jnp.where(jnp.isfinite(half_gap), half_gap, 0.0))


def as_output(x):
    """Concrete results leave as numpy float64 (so the caller's arithmetic on them stays float64 even
    with ``jax_enable_x64`` off); traced results (inside the caller's jit/grad) stay JAX values. Either
    way a floating result is NaN wherever a traced input of this call was invalid (even a result that
    does not depend on that input, as under an eager ``jax.jvp``)."""
    if isinstance(x, tuple):
        return tuple(as_output(v) for v in x)
    active = _active_traces()
    valid = [v for v in getattr(_traced, "valid", [])
             if not isinstance(v, jax.core.Tracer) or id(v._trace) in active]  # only tracers can leak
    if valid and jnp.issubdtype(jnp.result_type(x), jnp.floating):
        ok = True
        for v in valid:  # elementwise along the output's leading (batch) axes, else all or nothing
            out = jnp.shape(x)
            ok = ok & (jnp.reshape(v, v.shape + (1,) * (len(out) - v.ndim)) if out[:v.ndim] == v.shape
                       else jnp.all(v))
        x = jnp.where(ok, x, jnp.nan)
    return np.asarray(x) if is_concrete(x) else x


def _active_traces() -> set:
    """ids of the traces in progress (the innermost and its parents). A validity recorded in an earlier,
    finished jit of the same function (a float64() scope held open around both) is not among them and
    must not be reused: its tracer would leak."""
    from jax._src import core  # the trace stack has no public accessor

    trace, active = core.trace_ctx.trace, set()
    while trace is not None:
        active.add(id(trace))
        trace = getattr(trace, "parent_trace", None)
    return active


def erfcx(x):
    """Scaled complementary error function e^{x²} erfc(x), without the hole of ``jax.scipy.special.erfcx``
    (which returns 0 in float64 for x ≈ 26.55…26.64). Above x = 25 the asymptotic series
    1/(x√π) Σ_k (−1)^k (2k−1)!!/(2x²)^k is used; 9 terms leave < 1e-19 relative there."""
    from jax.scipy.special import erfcx as _jax_erfcx

    xl = jnp.maximum(x, 25.0)
    z = 1.0 / (2.0 * xl * xl)
    term, total = jnp.ones_like(xl), jnp.ones_like(xl)
    for k in range(1, 9):
        term = -term * (2 * k - 1) * z
        total = total + term
    series = total / (xl * np.sqrt(np.pi))
    return jnp.where(x > 25.0, series, _jax_erfcx(jnp.minimum(x, 25.0)))


# --------------------------------------------------------------------------------------------------
# Root finding (re-exported by jaxpriv.calibrate, whose calibrations are built on it)
# --------------------------------------------------------------------------------------------------

SOLVE_XTOL = 1e-10  # bracket width in log-parameter space (relative width in the parameter)
_MAX_EXPANSIONS = 60
_MAX_ITERATIONS = 200


def solve_monotone(safe_gap, start, step: float = math.log(8.0), *, bracket=None, xtol: float = SOLVE_XTOL,
                   traced: bool = True):
    """Smallest x with ``safe_gap(x) ≤ 0``, for a gap that is > 0 below the root and ≤ 0 above it.

    The library's one root finder. ``safe_gap`` maps a batch x (shape B) to a continuous gap (e.g.
    log ε(x) − log target) whose sign flips once. Starting from ``start``, the search steps outward by
    ``step`` until the root is bracketed (at most 60 steps; or starts from ``bracket`` = (lo, hi) or
    (lo, hi, gap(lo), gap(hi))), then shrinks the bracket to width ``xtol`` by Illinois regula falsi (a
    bisection step every eighth iteration guarantees progress). The gap is evaluated once per
    iteration, at one point per element, so the (expensive) privacy map appears once in the compiled
    loop. ``traced=False`` runs the same iterations as a Python loop, for gaps computed on the host
    (the PLD accountant).

    Returns (hi, found): hi is always a point where the gap is ≤ 0 (the safe side); ``found`` is False
    where no such point was reached (an unattainable target).
    """
    inf = jnp.full(jnp.shape(start), jnp.inf)

    def body(state):
        x, lo, hi, g_lo, g_hi, side, n = state
        g = safe_gap(x)
        unsafe = g > 0
        # Illinois: halve the gap kept at an endpoint that survives twice in a row.
        g_hi = jnp.where(unsafe & (side == 1), 0.5 * g_hi, g_hi)
        g_lo = jnp.where(~unsafe & (side == -1), 0.5 * g_lo, g_lo)
        lo, g_lo = jnp.where(unsafe, x, lo), jnp.where(unsafe, g, g_lo)
        hi, g_hi = jnp.where(unsafe, hi, x), jnp.where(unsafe, g_hi, g)
        side = jnp.where(unsafe, 1, -1).astype(jnp.int32)
        have_lo, have_hi = jnp.isfinite(lo), jnp.isfinite(hi)
        secant_ok = have_lo & have_hi & jnp.isfinite(g_lo) & jnp.isfinite(g_hi) & (g_lo > g_hi) & (n % 8 != 7)
        secant = (lo * g_hi - hi * g_lo) / jnp.where(secant_ok, g_hi - g_lo, 1.0)
        # Keep the point strictly inside, by a bit less than half the tolerance: once the secant sits on
        # the root, the next evaluation lands across it and closes the bracket.
        secant = jnp.clip(secant, lo + 0.4 * xtol, hi - 0.4 * xtol)
        inner = jnp.where(secant_ok & jnp.isfinite(secant), secant, 0.5 * (lo + hi))
        x = jnp.where(~have_lo, hi - step, jnp.where(~have_hi, lo + step, inner))
        return x, lo, hi, g_lo, g_hi, side, n + 1

    def unfinished(state):
        _, lo, hi, *_, n = state
        bracketing = ~(jnp.isfinite(lo) & jnp.isfinite(hi))
        searching = jnp.where(bracketing, n < _MAX_EXPANSIONS, hi - lo > xtol)
        return (n < _MAX_ITERATIONS) & jnp.any(searching)

    zeros = jnp.zeros(jnp.shape(start), dtype=jnp.int32)
    if bracket is None:
        state = (start, -inf, inf, inf, -inf, zeros, 0)
    else:  # a known bracket: an end whose gap has the wrong sign is dropped, and the search steps out from it
        lo, hi = bracket[:2]
        g_lo, g_hi = bracket[2:] if len(bracket) == 4 else (safe_gap(lo), safe_gap(hi))
        lo_ok, hi_ok = g_lo > 0, g_hi <= 0
        lo, g_lo = jnp.where(lo_ok, lo, -inf), jnp.where(lo_ok, g_lo, inf)
        hi, g_hi = jnp.where(hi_ok, hi, inf), jnp.where(hi_ok, g_hi, -inf)
        x = jnp.where(lo_ok & hi_ok, 0.5 * (lo + hi), jnp.where(hi_ok, hi - step, jnp.where(lo_ok, lo + step, start)))
        state = (x, lo, hi, g_lo, g_hi, zeros, 0)
    if traced:
        state = jax.lax.while_loop(unfinished, body, state)
    else:
        while bool(unfinished(state)):
            state = body(state)
    _, lo, hi, *_ = state
    return hi, jnp.isfinite(hi)


def bisect_floats(is_high, lo, hi):
    """Narrow ``lo < hi`` (floats ≥ 0) to adjacent float64s for a monotone predicate ``is_high``.

    :func:`solve_monotone`'s companion for roots needed to the last bit (GDP's ε(δ) and μ(ε, δ), the
    E-APES ε): non-negative float64s are ordered like their int64 bit patterns, so bisecting the
    patterns halves the number of floats left in the bracket: 64 fixed steps reach adjacent floats
    whatever the scale of the root (1e-300 or 1e300), with no tolerance to tune. Returns (lo, hi);
    every moved end was evaluated, and ``is_high(hi)`` holds wherever it held at the start.

    Example:
      >>> import numpy as np
      >>> import jax.numpy as jnp
      >>> from jaxpriv import calibrate
      >>> from jaxpriv._numerics import float64
      >>> with float64():
      ...     lo, hi = calibrate.bisect_floats(lambda x: x * x >= 2.0, jnp.float64(0.0), jnp.float64(2.0))
      >>> bool(float(hi) == np.nextafter(float(lo), 3.0)), float(hi)
      (True, 1.4142135623730951)
    """
    to_bits = lambda x: jax.lax.bitcast_convert_type(x, jnp.int64)  # noqa: E731
    to_float = lambda b: jax.lax.bitcast_convert_type(b, jnp.float64)  # noqa: E731

    def step(_, bracket):
        lo, hi = bracket
        mid = lo + (hi - lo) // 2
        high = is_high(to_float(mid))
        return jnp.where(high, lo, mid), jnp.where(high, mid, hi)

    lo, hi = jax.lax.fori_loop(0, 64, step, (to_bits(lo), to_bits(hi)))
    return to_float(lo), to_float(hi)


def derive_seeds(seed: int, count: int) -> tuple[int, ...]:
    """``count`` independent 32-bit seeds from one seed: the first ``count`` words of numpy's
    ``SeedSequence(seed).generate_state`` (O'Neill's seed-sequence hashing, NumPy NEP 19), so a caller
    that needs fewer seeds gets a prefix of a caller that needs more, and every stream of a run (client
    or record sampling, round keys, noise) is a function of the one seed. The one seeding helper of
    :func:`jaxpriv.train.dpsgd.train` (3 seeds), :mod:`jaxpriv.train.private` (3) and
    :func:`jaxpriv.federated.simulator.run` (2).

    Args:
      seed: integer ≥ 0.
      count: number of seeds, an integer ≥ 1.

    Returns:
      tuple of ``count`` Python ints in [0, 2³²).

    Example:
      >>> derive_seeds(0, 3)[:2] == derive_seeds(0, 2)
      True
    """
    for name, value, lo in (("seed", seed, 0), ("count", count, 1)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < lo:
            raise ValueError(f"{name} must be an integer in [{lo}, inf), got {value!r}")
    return tuple(int(s) for s in np.random.SeedSequence(int(seed)).generate_state(int(count)))
