"""Calibration: the parameter of a mechanism that meets a target ε (MATH §5).

Every privacy map here is monotone in the parameter being solved for, so calibration is a bracketed
root find: bracket expansion, then Illinois regula falsi safeguarded by bisection, all inside one
``lax.while_loop`` over the whole batch of targets. The returned parameter is always on the safe side
(ε(parameter) ≤ target) and within ``1e-10`` (relative, in the parameter) of the root. Calibrated values
are differentiable by the implicit-function theorem (``jax.custom_jvp``), never by differentiating
through the iterations.
"""

from __future__ import annotations

import functools
import math
import warnings

import jax
import jax.numpy as jnp
import numpy as np

from .. import events, rdp
from .._batching import map_chunked
from .._numerics import (SOLVE_XTOL, as_output, bisect_floats, check_array, check_broadcastable, check_orders, float64,
                        is_concrete, kernel_jit, solve_monotone)  # solve_monotone, bisect_floats: re-exported root finders

__all__ = ["calibrate", "noise_multiplier", "sampling_rate", "steps", "solve_monotone", "bisect_floats"]

MARGIN = 1e-12  # relative headroom on the safe side of a calibrated parameter


def orders_key(orders) -> tuple:
    """Validated orders, sorted and de-duplicated (the order of a grid never matters), as a jit key."""
    return tuple(float(a) for a in np.unique(check_orders(rdp.DEFAULT_ORDERS if orders is None else orders)))


# --------------------------------------------------------------------------------------------------
# σ for a target ε (fixed q, T, δ)
# --------------------------------------------------------------------------------------------------


# The root finders take the exact curve's order tables (rdp.curve_tables) as an argument: passed to the
# jitted solvers they stay runtime data, not half a megabyte of constants compiled into every solver.


def _eps(q, sigma, steps, delta, orders_key, tables):
    return rdp.dpsgd_epsilon_kernel(q, sigma, steps, delta, orders_key, tables=tables)[0]


@functools.partial(jax.custom_jvp, nondiff_argnums=(5,))
def _sigma_core(target, q, steps, delta, tables, orders_key):
    log_target = jnp.log(target)

    def gap(log_sigma):  # > 0 while σ is too small
        return jnp.log(_eps(q, jnp.exp(log_sigma), steps, delta, orders_key, tables)) - log_target

    log_sigma, found = solve_monotone(gap, jnp.zeros_like(target))
    # 1e-12 of headroom: a separately compiled ε evaluation may differ from the solver's by an ulp.
    return jnp.where(found, jnp.exp(log_sigma + MARGIN), jnp.inf)


@_sigma_core.defjvp
def _sigma_core_jvp(orders_key, primals, tangents):
    target, q, steps, delta, tables = primals
    d_target, d_q, d_steps, d_delta, _ = tangents  # the tables are constants of the problem
    sigma = _sigma_core(target, q, steps, delta, tables, orders_key)
    f = lambda s, q_, t_, d_: _eps(q_, s, t_, d_, orders_key, tables)
    zero = jnp.zeros_like(sigma)
    _, d_eps_d_sigma = jax.jvp(f, (sigma, q, steps, delta), (jnp.ones_like(sigma), zero, zero, zero))
    _, d_eps_other = jax.jvp(f, (sigma, q, steps, delta), (zero, d_q, d_steps, d_delta))
    # Implicit function theorem on ε(σ*, θ) = target.
    d_sigma = (d_target - d_eps_other) / d_eps_d_sigma
    return sigma, jnp.where(jnp.isfinite(sigma) & (d_eps_d_sigma != 0), d_sigma, 0.0)


_sigma_jit = kernel_jit(_sigma_core, static_argnums=(5,))


#: The calibrators' arguments, each with its valid range (lo, hi, lo_open, hi_open) and the direction that
#: makes privacy worse (see :func:`jaxpriv._numerics.check_array`): one table for every solver below.
_ARGUMENTS = {
    "target_epsilon": (0.0, np.inf, True, False, "down"),
    "q": (0.0, 1.0, True, False, "up"),
    "sigma": (0.0, np.inf, True, False, "down"),
    "steps": (1.0, np.inf, False, False, "up"),
    "client_rate": (0.0, 1.0, True, False, "up"),
    "rounds": (1.0, np.inf, False, False, "up"),
    "delta": (0.0, 1.0, True, True, "down"),
}


def _validated(**values):
    """Validate the named arguments against :data:`_ARGUMENTS` and broadcast them to one shape."""
    arrays = {}
    for name, value in values.items():
        lo, hi, lo_open, hi_open, worse = _ARGUMENTS[name]
        arrays[name] = check_array(name, value, lo, hi, lo_open=lo_open, hi_open=hi_open, worse=worse)
    shape = check_broadcastable(**arrays)
    # concrete numbers broadcast in numpy: an eager jnp.broadcast_to would compile a program per shape
    return shape, [np.broadcast_to(np.asarray(a), shape) if is_concrete(a) else jnp.broadcast_to(a, shape)
                   for a in arrays.values()]


def run_batched(kernel, shape, arrays, chunk_size, progress, what):
    """Concrete inputs: chunked and sharded; traced inputs (inside jit/grad): direct."""
    if all(is_concrete(a) for a in arrays):
        flat = [np.asarray(a, dtype=np.float64).reshape(-1) for a in arrays]
        # A root finder's 16-row call costs about as much as 8 single ones (it runs until its slowest row
        # converges): fewer settings than that run one by one.
        (out,) = map_chunked(lambda *xs: (kernel(*xs),), flat, chunk_size=chunk_size, progress=progress,
                             description=what, alone_below=8)
        out = out.reshape(shape)
    else:
        out = kernel(*(a.reshape(-1) for a in arrays)).reshape(shape)
    return as_output(out)


def _warn_unattainable(value, what: str):
    if is_concrete(value) and not np.all(np.isfinite(np.asarray(value))):
        warnings.warn(
            f"some targets are below the smallest ε these orders can certify; {what} is inf there "
            "(add larger orders to reach smaller ε)",
            RuntimeWarning,
            stacklevel=3,
        )


def _check_table(max_exact, table_rtol) -> None:
    if isinstance(max_exact, bool) or not (isinstance(max_exact, (int, np.integer)) and max_exact >= 1):
        raise ValueError(f"max_exact must be an integer in [1, inf), got {max_exact!r}")
    if not (isinstance(table_rtol, (int, float)) and 0.0 < table_rtol <= 0.1):
        raise ValueError(f"table_rtol must lie in (0, 0.1], got {table_rtol!r}")


def _sigma_table(targets, params, key, rtol, chunk_size, progress):
    """σ for many distinct targets sharing one (q, T, δ): one exactly evaluated table, then one step each.

    ε is evaluated on a geometric σ grid of ratio 1 + rtol between the exact roots of the largest and the
    smallest target. Each target's σ is interpolated (log ε linear in log σ) between the two grid points
    around its root and evaluated once: kept where ε ≤ target, else the upper grid point is returned,
    where ε was computed and is ≤ target. Every σ is thus safe and within a factor 1 + rtol above the
    root (in practice within ~1e-7: the interpolation error is O(rtol²)), at one ε evaluation per target
    plus the table. None when the smallest target cannot be met (the exact solve then reports it).
    """
    ends = np.asarray(_sigma_jit(jnp.asarray([targets.max(), targets.min()]), *[jnp.full(2, p) for p in params],
                                 rdp.curve_tables(key), key))
    s_lo, s_hi = float(ends[0]), float(ends[1])
    if not np.isfinite(s_hi):
        return None
    size = max(2, math.ceil(math.log(s_hi / s_lo) / math.log1p(rtol)) + 1)
    grid = np.geomspace(s_lo, s_hi, size)
    grid[0], grid[-1] = s_lo, s_hi
    shared = [np.asarray([p], dtype=np.float64) for p in params]

    def epsilon(sigma, what):
        q, steps, delta = shared
        (eps,) = map_chunked(lambda s, *ps: (rdp.dpsgd_epsilon_jit(ps[0], s, ps[1], ps[2], orders_key=key)[0],),
                             [sigma, q, steps, delta], chunk_size=chunk_size, progress=progress, description=what)
        return eps

    eps_grid = epsilon(grid, "tabulating ε(σ)")
    # Largest ε at or beyond each grid point: non-increasing, so the first point where it is ≤ the target
    # has a computed ε ≤ target even if rounding wobbles the table.
    ceiling = np.maximum.accumulate(eps_grid[::-1])[::-1]
    upper = np.minimum(np.searchsorted(-ceiling, -targets, side="left"), size - 1)
    lower = np.maximum(upper - 1, 0)
    x0, x1 = np.log(grid[lower]), np.log(grid[upper])
    y0, y1 = np.log(eps_grid[lower]), np.log(eps_grid[upper])
    fraction = np.clip(np.where(y1 < y0, (np.log(targets) - y0) / np.where(y1 < y0, y1 - y0, 1.0), 1.0), 0.0, 1.0)
    guess = np.exp(x0 + fraction * (x1 - x0) + MARGIN)
    safe = epsilon(guess, "refining σ") <= targets
    sigma = np.where(safe & (guess < grid[upper]), guess, grid[upper])
    sigma = np.where(targets >= targets.max(), s_lo, sigma)  # the end targets: their exact roots
    return np.where(targets <= targets.min(), s_hi, sigma)


def noise_multiplier(target_epsilon, q, steps, delta, *, orders=None, accountant="rdp", chunk_size=None,
                     progress=None, max_exact=4096, table_rtol=1e-3):
    """Smallest noise multiplier σ such that T steps of the Poisson-subsampled Gaussian are (ε, δ)-DP.

    Solves ε(σ; q, T, δ) = target for σ, with ε from the exact RDP curve (MATH §1.3) and the improved
    conversion (MATH §1.8), minimised over ``orders``. Conservative: ε(σ) ≤ target always, and σ is
    within 1e-10 relative of the root (so ε(σ) is within ~1e-9 relative of the target). A target below
    what the orders can certify (ε(σ → ∞) > target) gives ``inf`` with a warning. Differentiable in all
    arguments by the implicit-function theorem (MATH §0.6). MATH §5.

    Many targets sharing (q, T, δ): when there are more than ``max_exact`` distinct concrete targets and
    q, T, δ are scalars, ε is tabulated once on a σ grid of ratio 1 + ``table_rtol`` and each target
    costs one more ε evaluation (an interpolated σ, kept only where ε(σ) ≤ target): still always safe,
    within ``table_rtol`` above the root and in practice within ~1e-7 of it, at ≤ 2 ε evaluations per
    target instead of ~14.

    Args:
      target_epsilon: ε > 0.
      q: Poisson sampling rate in (0, 1].
      steps: number of steps T ≥ 1 (real values allowed, for differentiation).
      delta: δ ∈ (0, 1).
      orders: Rényi orders (default :data:`jaxpriv.rdp.DEFAULT_ORDERS`).
      accountant: "rdp" (default: the exact RDP curve, jit-compiled and differentiable) or "pld"/"best"
        (the tighter PLD accountant through :func:`calibrate`: a smaller σ, concrete inputs only; σ within
        1e-6 relative of the PLD root, ε(σ) ≤ target certified by its upper bound).
      chunk_size, progress: batching of large calibrations (see :mod:`jaxpriv._batching`).
      max_exact: most distinct targets solved one by one before switching to the table.
      table_rtol: grid ratio − 1 of the table, in (0, 0.1].

    All of ``target_epsilon, q, steps, delta`` broadcast together; the result has their shape.

    Example:
      >>> from jaxpriv import calibrate
      >>> sigma = calibrate.noise_multiplier(1.0, q=0.01, steps=10_000, delta=1e-5)
      >>> round(float(sigma), 4)
      4.1258
    """
    _check_table(max_exact, table_rtol)
    with float64():
        shape, arrays = _validated(target_epsilon=target_epsilon, q=q, steps=steps, delta=delta)
        if accountant != "rdp":
            return _by_events(lambda s, q_, t: events.SelfComposed(events.PoissonSampled(q_, events.Gaussian(s)), t),
                              shape, arrays, (1e-2, 1e4), accountant, np.inf, chunk_size, progress)
        key = orders_key(orders)
        sigma = None
        if all(is_concrete(a) for a in arrays) and all(np.ndim(x) == 0 for x in (q, steps, delta)):
            targets = np.asarray(arrays[0]).reshape(-1)
            distinct, inverse = np.unique(targets, return_inverse=True)
            if distinct.size > max_exact:
                params = [float(np.asarray(a).reshape(-1)[0]) for a in arrays[1:]]
                table = _sigma_table(distinct, params, key, table_rtol, chunk_size, progress)
                sigma = None if table is None else as_output(table[inverse].reshape(shape))
        if sigma is None:
            sigma = run_batched(lambda *xs: _sigma_jit(*xs, rdp.curve_tables(key), key), shape, arrays, chunk_size,
                                progress, "calibrating σ")
        _warn_unattainable(sigma, "σ")
        return sigma


# --------------------------------------------------------------------------------------------------
# q for a target ε (fixed σ, T, δ)
# --------------------------------------------------------------------------------------------------


def _eps_two_stage(q, sigma, steps, client_rate, rounds, delta, orders_key, tables):
    return rdp.two_stage_epsilon_kernel(q, sigma, steps, client_rate, rounds, delta, orders_key, tables)[0]


def _eps_for_rate(q, sigma, steps, client_rate, rounds, delta, tables, orders_key, two_stage):
    if two_stage:
        return _eps_two_stage(q, sigma, steps, client_rate, rounds, delta, orders_key, tables)
    return _eps(q, sigma, steps, delta, orders_key, tables)  # DP-SGD: client_rate and rounds are unused


@functools.partial(jax.custom_jvp, nondiff_argnums=(7, 8))
def _rate_core(target, sigma, steps, client_rate, rounds, delta, tables, orders_key, two_stage):
    log_target = jnp.log(target)
    eps = functools.partial(_eps_for_rate, tables=tables, orders_key=orders_key, two_stage=two_stage)
    full = eps(jnp.ones_like(target), sigma, steps, client_rate, rounds, delta)

    def gap(neg_log_q):  # > 0 while q is too large; searched in −log q so that "larger is safer"
        q = jnp.minimum(jnp.exp(-neg_log_q), 1.0)
        return jnp.log(eps(q, sigma, steps, client_rate, rounds, delta)) - log_target

    neg_log_q, found = solve_monotone(gap, jnp.full(target.shape, math.log(100.0)), step=math.log(10.0))
    q = jnp.where(found, jnp.minimum(jnp.exp(-neg_log_q - MARGIN), 1.0), 0.0)
    return jnp.where(full <= target, 1.0, q)


@_rate_core.defjvp
def _rate_core_jvp(orders_key, two_stage, primals, tangents):
    target, *params, tables = primals
    d_target, *d_params, _ = tangents  # the tables are constants of the problem
    q = _rate_core(target, *params, tables, orders_key, two_stage)
    f = functools.partial(_eps_for_rate, tables=tables, orders_key=orders_key, two_stage=two_stage)
    zero = jnp.zeros_like(q)
    _, d_eps_d_q = jax.jvp(f, (q, *params), (jnp.ones_like(q), *[zero] * len(params)))
    _, d_eps_other = jax.jvp(f, (q, *params), (zero, *d_params))
    interior = (q > 0) & (q < 1) & (d_eps_d_q != 0)
    return q, jnp.where(interior, (d_target - d_eps_other) / d_eps_d_q, 0.0)


_rate_jit = kernel_jit(_rate_core, static_argnums=(7, 8))
_eps_for_rate_jit = kernel_jit(_eps_for_rate, static_argnums=(7, 8))


def _rate_table(targets, params, key, two_stage, rtol, chunk_size, progress):
    """q for many distinct targets sharing one (σ, τ, λ, T, δ): an exactly evaluated geometric table.

    The exact root is solved at the smallest and largest target; between them ε is evaluated on a
    geometric q grid of ratio 1 + rtol, and each target gets the largest grid q whose ε is ≤ it. Every
    returned q is thus a point where ε was computed, ε(q) ≤ target, and q is within a factor 1 + rtol
    below the root.
    """
    ends = np.asarray(_rate_jit(jnp.asarray([targets.min(), targets.max()]),
                                *[jnp.full(2, p) for p in params], rdp.curve_tables(key), key, two_stage))
    q_lo, q_hi = float(ends[0]), float(ends[1])
    if q_lo <= 0.0:  # some target is below what the orders can certify: no table can start there
        return None
    size = max(2, math.ceil(math.log(q_hi / q_lo) / math.log1p(rtol)) + 1)
    grid = np.geomspace(q_lo, q_hi, size)
    grid[0], grid[-1] = q_lo, q_hi
    shared = [np.asarray([p], dtype=np.float64) for p in params]
    (eps_grid,) = map_chunked(lambda q, *ps: (_eps_for_rate_jit(q, *ps, rdp.curve_tables(key), key, two_stage),),
                              [grid, *shared],
                              chunk_size=chunk_size, progress=progress, description="tabulating ε(q)")
    eps_grid = np.maximum.accumulate(eps_grid)  # a rounding wobble can only move the table up: safe
    index = np.searchsorted(eps_grid, targets, side="right") - 1
    q = grid[np.maximum(index, 0)]
    q = np.where(index < 0, q_lo, q)  # the smallest target: its exact root
    return np.where(targets >= targets.max(), q_hi, q)


def sampling_rate(target_epsilon, sigma, steps, delta, *, rounds=None, client_rate=None, orders=None,
                  accountant="rdp", chunk_size=None, progress=None, max_exact=4096, table_rtol=1e-3):
    """Largest Poisson sampling rate q such that the training run is (ε, δ)-DP.

    Solves ε(q) = target for q ∈ (0, 1] (ε is increasing in q), on the exact RDP curve with the
    improved conversion. Without ``rounds``/``client_rate`` the run is DP-SGD: ``steps`` steps of the
    Poisson-subsampled Gaussian (MATH §1.3). With them it is rPDP-FL two-stage sampling
    (:func:`jaxpriv.rdp.two_stage`, MATH §1.5): ``steps`` = τ local steps per round, client rate λ,
    ``rounds`` = T. Returns 1 when even q = 1 meets the target, 0 when no q > 0 does (the target is
    below what the orders certify). Conservative: ε(q) ≤ target always (the per-record budget is never
    overspent). Vectorised over millions of budgets (one q per record: rPDP-FL, IDP-SGD "Sample").
    MATH §5.

    Accuracy: each target is solved to 1e-10 relative in q (differentiable by the implicit-function
    theorem). When there are more than ``max_exact`` distinct targets and every other argument is a
    scalar, the targets share one exactly evaluated table of ε on a geometric q grid of ratio
    1 + ``table_rtol`` between the roots of the smallest and largest target, and each gets the largest
    grid q with ε(q) ≤ target: still never overspending, and within ``table_rtol`` (relative) below the
    root, at the cost of log(q_max/q_min)/table_rtol evaluations instead of ~11 per target.

    Args:
      target_epsilon: ε > 0 (one per record).
      sigma: noise multiplier σ > 0.
      steps: number of steps T ≥ 1 (DP-SGD) or local steps per round τ ≥ 1 (two-stage).
      delta: δ ∈ (0, 1).
      rounds: FL rounds T ≥ 1 (two-stage; default 1 when ``client_rate`` is given).
      client_rate: client sampling rate λ ∈ (0, 1] (two-stage; default 1 when ``rounds`` is given).
      orders, chunk_size, progress: as in :func:`noise_multiplier`.
      accountant: "rdp" (default) or "pld"/"best" through :func:`calibrate` (DP-SGD only; concrete inputs;
        q within 1e-6 relative below the PLD root).
      max_exact: most distinct targets solved one by one before switching to the table.
      table_rtol: grid ratio − 1 of the table, in (0, 0.1].

    Example:
      >>> from jaxpriv import calibrate
      >>> q = calibrate.sampling_rate(1.0, sigma=4.1258, steps=10_000, delta=1e-5)
      >>> round(float(q), 5)
      0.01
      >>> q_fl = calibrate.sampling_rate(2.0, sigma=1.0, steps=5, delta=1e-5, rounds=50, client_rate=0.5)
      >>> 0 < float(q_fl) < 1
      True
    """
    two_stage = rounds is not None or client_rate is not None
    _check_table(max_exact, table_rtol)
    with float64():
        shape, arrays = _validated(
            target_epsilon=target_epsilon,
            sigma=sigma,
            steps=steps,
            client_rate=1.0 if client_rate is None else client_rate,
            rounds=1.0 if rounds is None else rounds,
            delta=delta,
        )
        if accountant != "rdp":
            if two_stage:
                raise ValueError("sampling_rate with rounds/client_rate (two-stage sampling) needs accountant='rdp'")
            return _by_events(lambda q_, s, t, _lam, _rounds: events.SelfComposed(
                events.PoissonSampled(q_, events.Gaussian(s)), t), shape, arrays, (1e-12, 1.0), accountant, 0.0,
                chunk_size, progress, delta_index=5)
        key = orders_key(orders)
        shared = (sigma, steps, delta, client_rate, rounds)  # already validated above; None = the default 1
        if all(is_concrete(a) for a in arrays) and all(np.ndim(x) == 0 for x in shared if x is not None):
            targets = np.asarray(arrays[0]).reshape(-1)
            distinct, inverse = np.unique(targets, return_inverse=True)
            params = [float(np.asarray(a).reshape(-1)[0]) for a in arrays[1:]]
            q = None
            if distinct.size > max_exact:
                q = _rate_table(distinct, params, key, two_stage, table_rtol, chunk_size, progress)
            if q is None:  # equal budgets share one solve
                shared = [np.full(distinct.shape, p) for p in params]
                q = np.asarray(run_batched(lambda *xs: _rate_jit(*xs, rdp.curve_tables(key), key, two_stage), distinct.shape,
                                           [distinct, *shared], chunk_size, progress, "calibrating q"))
            return as_output(q[inverse].reshape(shape))
        return run_batched(lambda *xs: _rate_jit(*xs, rdp.curve_tables(key), key, two_stage), shape, arrays, chunk_size,
                           progress,
                    "calibrating q")


# --------------------------------------------------------------------------------------------------
# T for a target ε (fixed q, σ, δ)
# --------------------------------------------------------------------------------------------------


def _steps_kernel(target, q, sigma, delta, tables, orders_key):
    """Largest integer T with ε(T) ≤ target. The RDP of T steps is T·ρ₁(α), so each order gives its own
    largest T in closed form; the best order wins, and a final check absorbs rounding."""
    orders = np.asarray(orders_key)
    rho1 = rdp.subsampled_gaussian_kernel(q, sigma, orders_key, tables)  # (B, K)
    log_delta = jnp.log(delta)[:, None]
    offset = jnp.log1p(-1.0 / orders) - (log_delta + jnp.log(orders)) / (orders - 1.0)
    per_order = jnp.floor((target[:, None] - offset) / rho1)
    # ε = 0 region (TV bound): δ² + expm1(−T ρ) > 0  ⇔  T < −log1p(−δ²)/ρ
    tv_budget = -jnp.log1p(-(delta**2))[:, None]
    per_order_tv = jnp.where(rho1 > 0, jnp.ceil(tv_budget / jnp.where(rho1 > 0, rho1, 1.0)) - 1.0, jnp.inf)
    best = jnp.max(jnp.maximum(per_order, per_order_tv), axis=-1)
    best = jnp.clip(best, 0.0, 1e18)
    for _ in range(3):  # rounding guard: step down (by ≥ 1 ulp of T) while the exact check fails
        eps = rdp.to_epsilon_kernel(rho1 * best[:, None], orders, delta)[0]
        best = jnp.where(eps > target, best - jnp.maximum(1.0, jnp.spacing(best)), best)
    eps = rdp.to_epsilon_kernel(rho1 * best[:, None], orders, delta)[0]
    return jnp.where(eps > target, 0.0, jnp.maximum(best, 0.0))  # never return an overspending T


_steps_jit = kernel_jit(_steps_kernel, static_argnums=(5,))


def steps(target_epsilon, q, sigma, delta, *, orders=None, accountant="rdp", chunk_size=None, progress=None):
    """Largest number of steps T such that T-fold Poisson-subsampled Gaussian is (ε, δ)-DP.

    RDP composes linearly, ρ_T(α) = T·ρ₁(α), so for each order the largest T meeting the improved
    conversion is ⌊(ε − log1p(−1/α) + (log δ + log α)/(α−1)) / ρ₁(α)⌋ (MATH §1.7-1.8, §5); the answer is
    the largest over orders, checked exactly. Returns a float64 array of integers (0 when not even one
    step fits; up to 1e18 when ρ₁ underflows to 0).

    Args:
      target_epsilon: ε > 0.
      q: sampling rate in (0, 1].
      sigma: noise multiplier σ > 0.
      delta: δ ∈ (0, 1).
      orders, accountant, chunk_size, progress: as in :func:`noise_multiplier` (with "pld"/"best" the
        largest integer T ≤ 10⁹ whose ε by that accountant meets the target, found on the integers).

    Example:
      >>> from jaxpriv import calibrate
      >>> int(calibrate.steps(1.0, q=0.01, sigma=4.1259, delta=1e-5))
      10000
    """
    with float64():
        shape, arrays = _validated(target_epsilon=target_epsilon, q=q, sigma=sigma, delta=delta)
        key = orders_key(orders)
        by_rdp = run_batched(lambda *xs: _steps_jit(*xs, rdp.curve_tables(key), key), shape, arrays, chunk_size,
                             progress, "calibrating T")
        if accountant == "rdp":
            return by_rdp
        flat = [np.asarray(a, np.float64).reshape(-1) for a in (*arrays, by_rdp)]
        return _largest_steps(*flat, accountant, chunk_size, progress).reshape(shape)


_MAX_STEPS = 1e9  # where the search for T stops (a target met at 10⁹ steps gets 10⁹)


def _largest_steps(targets, q, sigma, delta, seed, accountant, chunk_size, progress):
    """Largest integer T ≤ 10⁹ with ε(T) ≤ target under a PLD-based accountant, by a search on the integers.

    RDP's T (``seed``) is safe under "best" (its ε is at most RDP's) and, PLD being tighter, almost always
    under "pld" (checked; a seed that fails restarts the search from 0). From there the unsafe end steps
    out (×1.1 first, then to 2% past the extrapolated root) and the bracket closes to adjacent integers by
    secant guesses in (log T, log ε) with Illinois pulls, every fourth guess a bisection: about 5 batched
    PLD evaluations, where a real-valued root search to 1e-9 spent ~37 on a step function (ε depends on
    ⌊T⌋ only). Evaluations away from the root skip the PLD refinement (:func:`_epsilon_deciding`).
    """

    def eps(t, rows):
        event = events.SelfComposed(events.PoissonSampled(q[rows], events.Gaussian(sigma[rows])), t)
        return _epsilon_deciding(event, delta[rows], targets[rows], accountant, chunk_size, progress)

    lo = np.minimum(seed, _MAX_STEPS)
    e_lo = np.zeros_like(lo)
    check = np.nonzero(lo >= 1)[0]
    if check.size:
        e_lo[check] = eps(lo[check], check)
        failed = check[e_lo[check] > targets[check]]
        lo[failed], e_lo[failed] = 0.0, 0.0
    log_target = np.log(targets)

    def secant(a, ea, b, eb, rows, lowest, highest):
        """The T where the line through (log a, log ε_a) and (log b, log ε_b) meets the target, as an
        integer in [lowest, highest]; NaN where undefined (a = 0 or ε = 0)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            la, lb, ga, gb = np.log(a), np.log(b), np.log(ea), np.log(eb)
            x = la + (log_target[rows] - ga) * (lb - la) / (gb - ga)
            t = np.round(np.exp(x))
        return np.where(np.isfinite(t) & (a >= 1), np.clip(t, lowest, highest), np.nan)

    hi = np.minimum(np.maximum(np.ceil(lo * 1.1), lo + 1.0), _MAX_STEPS)
    e_hi = eps(hi, np.arange(lo.size))
    while True:  # step the unsafe end out (to 2% past the extrapolated root, at least ×1.1, at most ×2)
        out = np.nonzero((e_hi <= targets) & (hi < _MAX_STEPS))[0]
        if not out.size:
            break
        step = secant(lo[out], e_lo[out], hi[out], e_hi[out], out, np.ceil(hi[out] * 1.1), 2.0 * hi[out])
        lo[out], e_lo[out] = hi[out], e_hi[out]
        hi[out] = np.minimum(np.where(np.isnan(step), 2.0 * hi[out], np.ceil(step * 1.02)), _MAX_STEPS)
        e_hi[out] = eps(hi[out], out)
    capped = e_hi <= targets  # the cap itself meets the target
    lo[capped] = hi[capped]
    # Illinois: the ε kept at an end that survives twice in a row is pulled halfway (in log) to the target,
    # so the secant cannot stall beside a fixed end; every fourth guess bisects.
    pull_lo, pull_hi = e_lo.copy(), e_hi.copy()
    side = np.zeros(lo.size)
    for iteration in range(200):
        open_ = np.nonzero(hi - lo > 1.0)[0]
        if not open_.size:
            break
        a, b = lo[open_], hi[open_]
        guess = secant(a, pull_lo[open_], b, pull_hi[open_], open_, a + 1.0, b - 1.0)
        guess = np.where(np.isnan(guess) | (iteration % 4 == 3), np.floor(0.5 * (a + b)), guess)
        e = eps(guess, open_)
        safe = e <= targets[open_]
        rows_safe, rows_unsafe = open_[safe], open_[~safe]
        twice_safe, twice_unsafe = rows_safe[side[rows_safe] == -1], rows_unsafe[side[rows_unsafe] == 1]
        pull_hi[twice_safe] = np.sqrt(pull_hi[twice_safe] * targets[twice_safe])
        pull_lo[twice_unsafe] = np.sqrt(pull_lo[twice_unsafe] * targets[twice_unsafe])
        lo[rows_safe], e_lo[rows_safe], pull_lo[rows_safe] = guess[safe], e[safe], e[safe]
        hi[rows_unsafe], e_hi[rows_unsafe], pull_hi[rows_unsafe] = guess[~safe], e[~safe], e[~safe]
        side[rows_safe], side[rows_unsafe] = -1, 1
    if np.any(lo < 1):
        warnings.warn("some targets cannot be met; their parameter is set to its unattainable value", RuntimeWarning,
                      stacklevel=3)
    return lo


def _by_events(family, shape, arrays, bounds, accountant, unattainable, chunk_size, progress, delta_index=3):
    """The old calibrators through :func:`calibrate`: ``family(param, *other numbers)`` builds the event;
    settings are solved one distinct (other numbers, δ) group at a time, every target of a group together."""
    flat = [np.asarray(a, np.float64).reshape(-1) for a in arrays]
    targets, others = flat[0], [a for i, a in enumerate(flat[1:], 1) if i != delta_index]
    deltas = flat[delta_index]
    out = np.empty(targets.size)
    groups = np.stack(others + [deltas], -1)
    for key in np.unique(groups, axis=0):
        idx = np.nonzero((groups == key).all(-1))[0]
        fixed = tuple(float(k) for k in key[:-1])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            out[idx] = calibrate(lambda p, fixed=fixed: family(p, *fixed), targets[idx], key[-1], bounds=bounds,
                                 accountant=accountant, chunk_size=chunk_size, progress=progress)
    if np.isnan(out).any():
        warnings.warn("some targets cannot be met; their parameter is set to its unattainable value", RuntimeWarning,
                      stacklevel=3)
    return np.where(np.isnan(out), unattainable, out).reshape(shape)


# --------------------------------------------------------------------------------------------------
# Any monotone event family, any accountant
# --------------------------------------------------------------------------------------------------


#: the PLD interval's relative width a search's first look accepts (:func:`_epsilon_deciding`)
_COARSE_TOLERANCE = 0.1


def _epsilon_deciding(event, deltas, targets, accountant, chunk_size, progress) -> np.ndarray:
    """ε of ``event`` by ``accountant`` (flat, one per target) as a search for a target needs it: exact
    (``accounting.epsilon``'s value) where the target lies inside the certified PLD interval of the default
    grid, elsewhere an upper bound on the same side of the target as the exact value.

    With the PLD accountant (or "best"), ``accounting.epsilon`` is the upper end of the interval refined to
    1% (MATH §7.3), and a refinement keeps each end's tightest: the refined upper end lies between the
    first grid's lower and upper ends. So a target above the first upper end (with "best": above RDP's ε,
    or that end) is met, one below its lower end (and RDP's ε) is not, and only the settings between pay
    for the finer grids (a search spends most of its evaluations away from the root)."""
    from .. import accounting

    def full(sub_event, rows, by=accountant):
        return np.asarray(accounting.epsilon(sub_event, deltas[rows], accountant=by, chunk_size=chunk_size,
                                             progress=progress), np.float64).reshape(-1)

    rows_all = np.arange(targets.size)
    shapes = set()
    events.map_numbers(event, lambda _, x: shapes.add(np.shape(x)) or x)
    if (accountant not in ("best", "pld") or accounting.PLD().unsupported(event) is not None
            or not shapes <= {(), (targets.size,)}):  # (numbers of another shape: not split by rows)
        return full(event, rows_all)
    lower, upper = (np.asarray(x, np.float64).reshape(-1) for x in accounting.epsilon_interval(
        event, deltas, tolerance=_COARSE_TOLERANCE, chunk_size=chunk_size, progress=progress))
    by_rdp = None
    if accountant == "best" and accounting.RDP().unsupported(event) is None:
        by_rdp = np.asarray(accounting.epsilon(event, deltas, accountant="rdp", chunk_size=chunk_size,
                                               progress=progress), np.float64).reshape(-1)
        upper, lower = np.minimum(upper, by_rdp), np.minimum(lower, by_rdp)
    undecided = np.nonzero((lower <= targets) & (targets < upper))[0]
    if undecided.size:
        sub = events.map_numbers(event, lambda _, x: np.asarray(x).reshape(-1)[undecided] if np.ndim(x) else x)
        # "best" is the smaller of RDP's ε, computed above for every setting, and PLD's refined one
        refined = full(sub, undecided, "pld")
        upper[undecided] = refined if by_rdp is None else np.minimum(refined, by_rdp[undecided])
    return upper


def calibrate(make_event, target_epsilon, delta, *, bounds, accountant="best", xtol=None, chunk_size=None,
              progress=None):
    """The parameter of a monotone event family that meets a target ε, on the safe side (MATH §5).

    ``make_event(p)`` maps an array of parameters (shape B) to an event (:mod:`jaxpriv.events`) whose ε
    is monotone in p — decreasing (a noise scale) or increasing (a sampling rate, a number of steps);
    the direction is read off the ε at the two ``bounds``. For each target the result p satisfies
    ε(make_event(p)) ≤ target as certified by ``accountant`` and lies within ``xtol`` (relative, in p) of
    the root, found by :func:`solve_monotone` (the library's one root finder) on log p, with every
    target of the batch iterated together. A target the unsafe end of ``bounds`` already meets gets that
    end; a target that not even the safe end meets gets NaN (with a warning).

    Differentiable with the RDP accountant: under ``jax.grad``/``jax.jvp`` (not ``jit``: the search runs
    on the host) the derivative in ``target_epsilon`` and ``delta`` comes from the implicit-function
    theorem on the traced RDP ε(p, δ) = target, as for :func:`noise_multiplier`.

    With the PLD accountant (or "best") and an event the RDP accountant can also interpret, the RDP
    solution (cheap) seeds the bracket: it meets the target under any tighter accountant (checked), and
    a step of 10% below it usually does not, so a handful of PLD evaluations finish the search; each one
    whose certified interval on the first grid lies on one side of the target skips the refinement
    (MATH §5.1).

    Args:
      make_event: callable from a float64 array of parameters to an event.
      target_epsilon: ε > 0 (any shape; broadcasts with ``delta``).
      delta: δ ∈ (0, 1).
      bounds: (lo, hi) with 0 < lo < hi: where the parameter is searched.
      accountant: "best" (default), "pld", "rdp", or an ``accounting.RDP``/``accounting.PLD`` object.
      xtol: relative tolerance in the parameter (default 1e-10 for RDP, 1e-6 otherwise).
      chunk_size, progress: batching of the accountant's evaluations.

    Returns:
      float64 numpy array of parameters, the broadcast shape of ``target_epsilon`` and ``delta``.

    Example:
      >>> from jaxpriv import calibrate, events
      >>> dpsgd = lambda s: events.SelfComposed(events.PoissonSampled(0.01, events.Gaussian(s)), 10_000)
      >>> sigma = calibrate.calibrate(dpsgd, 1.0, 1e-5, bounds=(0.3, 50.0), accountant="rdp")
      >>> round(float(sigma), 4)
      4.1258
    """
    from .. import accounting

    if not (isinstance(bounds, (tuple, list)) and len(bounds) == 2):
        raise ValueError(f"bounds must be a pair (lo, hi) with 0 < lo < hi < inf, got {bounds!r}")
    lo_b = float(check_array("bounds[0]", bounds[0], 0.0, np.inf, lo_open=True))
    hi_b = float(check_array("bounds[1]", bounds[1], lo_b, np.inf, lo_open=True))
    if xtol is not None and not (isinstance(xtol, (int, float)) and 0.0 < xtol < 1.0):
        raise ValueError(f"xtol must lie in (0, 1), got {xtol!r}")
    if not callable(make_event):
        raise ValueError(f"make_event must be a callable from parameters to an event, got {make_event!r}")
    is_rdp = accountant == "rdp" or isinstance(accountant, accounting.RDP)
    if is_rdp and not (is_concrete(target_epsilon) and is_concrete(delta)):
        return _differentiable_rdp_solution(make_event, target_epsilon, delta, (lo_b, hi_b), accountant, xtol)
    with float64():
        shape, (targets, deltas) = _validated(target_epsilon=target_epsilon, delta=delta)
        targets = np.asarray(targets, np.float64).reshape(-1)
        deltas = np.asarray(deltas, np.float64).reshape(-1)
    tol = (SOLVE_XTOL if is_rdp else 1e-6) if xtol is None else float(xtol)

    def eps(params, rows):
        return _epsilon_deciding(make_event(params), deltas[rows], targets[rows], accountant, chunk_size, progress)

    rows_all = np.arange(targets.size)
    rdp_ok = not is_rdp and accounting.RDP().unsupported(make_event(np.full(targets.size, lo_b))) is None
    ends_by = "rdp" if rdp_ok else accountant  # RDP reads the direction as well, and cheaply
    e_lo = accounting.epsilon(make_event(np.full(targets.size, lo_b)), deltas, accountant=ends_by)
    e_hi = accounting.epsilon(make_event(np.full(targets.size, hi_b)), deltas, accountant=ends_by)
    decreasing = bool(np.all(e_lo >= e_hi))
    unsafe_end, safe_end = (lo_b, hi_b) if decreasing else (hi_b, lo_b)
    sign = 1.0 if decreasing else -1.0  # x = ±log p, oriented so that larger x is safer
    to_param = lambda x: np.exp(sign * np.asarray(x))  # noqa: E731
    out = np.full(targets.size, np.nan)
    if rdp_ok:  # the RDP solution is a safe end for any tighter accountant; the step below it, likely unsafe
        seed = calibrate(make_event, targets, deltas, bounds=(lo_b, hi_b), accountant="rdp")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            safe = np.where(np.isfinite(seed), seed, safe_end)
        unsafe = np.exp(np.log(safe) - sign * 0.1)
        unsafe = np.clip(unsafe, lo_b, hi_b)
    else:
        safe, unsafe = np.full(targets.size, safe_end), np.full(targets.size, unsafe_end)
    e_safe, e_unsafe = eps(safe, rows_all), eps(unsafe, rows_all)
    for _ in range(40):  # step the unsafe end out until it is unsafe (or reaches the bound)
        meets = (e_unsafe <= targets) & (unsafe != unsafe_end)
        if not meets.any():
            break
        safe, e_safe = np.where(meets, unsafe, safe), np.where(meets, e_unsafe, e_safe)
        unsafe = np.where(meets, np.clip(np.exp(np.log(unsafe) - sign * 0.5), lo_b, hi_b), unsafe)
        e_unsafe = np.where(meets, eps(unsafe, rows_all), e_unsafe)
    out[(e_unsafe <= targets)] = unsafe[(e_unsafe <= targets)]
    todo = np.nonzero((e_unsafe > targets) & (e_safe <= targets))[0]
    if todo.size:
        log_targets = np.log(targets[todo])

        def gap(x):
            with np.errstate(divide="ignore"):
                return jnp.asarray(np.log(eps(to_param(x), todo)) - log_targets)

        with float64(), np.errstate(divide="ignore"):
            bracket = (jnp.asarray(sign * np.log(unsafe[todo])), jnp.asarray(sign * np.log(safe[todo])),
                       jnp.asarray(np.log(e_unsafe[todo]) - log_targets), jnp.asarray(np.log(e_safe[todo]) - log_targets))
            x, found = solve_monotone(gap, bracket[1], bracket=bracket, xtol=tol, traced=False)
        out[todo] = np.where(np.asarray(found), to_param(x), np.nan)
    if np.isnan(out).any():
        warnings.warn("some targets cannot be met within bounds; the parameter is NaN there", RuntimeWarning,
                      stacklevel=2)
    return out.reshape(shape)


def _differentiable_rdp_solution(make_event, target_epsilon, delta, bounds, accountant, xtol):
    """:func:`calibrate` under ``jax.grad``/``jvp`` (RDP accountant): the solution is found on the host
    from the primal values, and its derivative comes from the implicit-function theorem on the traced
    RDP ε(p, δ) = target: dp = (d target − ∂ε/∂δ · dδ) / (∂ε/∂p), never through the search."""
    from .. import accounting
    from ..accounting import renyi

    orders = (accountant if isinstance(accountant, accounting.RDP) else accounting.RDP())._orders()

    def epsilon(p, d):
        event = events.map_numbers(make_event(p), lambda _, x: jnp.broadcast_to(x, jnp.shape(p)))
        return rdp.to_epsilon(renyi.curve(event, orders), orders, d)[0]

    @jax.custom_jvp
    def solve(target, d):
        return jnp.asarray(calibrate(make_event, np.asarray(target), np.asarray(d), bounds=bounds,
                                     accountant=accountant, xtol=xtol))

    @solve.defjvp
    def solve_jvp(primals, tangents):
        (target, d), (d_target, d_delta) = primals, tangents
        p = solve(target, d)
        # At a bound (the target met there already) or unmet (NaN), p does not move with the target.
        interior = jnp.isfinite(p) & (p > bounds[0]) & (p < bounds[1])
        at = jnp.where(interior, p, math.sqrt(bounds[0] * bounds[1]))  # a valid point for the derivatives
        _, d_eps_d_p = jax.jvp(lambda x: epsilon(x, d), (at,), (jnp.ones_like(at),))
        _, d_eps_delta = jax.jvp(lambda x: epsilon(at, x), (d,), (d_delta,))
        ok = interior & (d_eps_d_p != 0)
        return p, jnp.where(ok, (d_target - d_eps_delta) / jnp.where(ok, d_eps_d_p, 1.0), 0.0)

    with float64():
        target_epsilon, delta = jnp.broadcast_arrays(jnp.asarray(target_epsilon, jnp.float64),
                                                     jnp.asarray(delta, jnp.float64))
        return solve(target_epsilon, delta)
