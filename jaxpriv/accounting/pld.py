"""The PLD accountant: privacy-loss distributions on a grid, composed by FFT, with certified bounds (MATH §7).

This module is the host side: it turns an event and a batch of settings into *rows* (one setting in one
neighbouring direction: both are computed where a step is Poisson-subsampled, remove (qA + (1−q)B, B) and
add (B, qA + (1−q)B), and the worse is reported), plans each row's grid, and runs the two device programs
of :mod:`.pld_grid` (the discretisation, composition and conversions are documented there):

1. **probe** each step's law (one program for every setting): its support, the log-MGF of a pessimistic
   pmf and the mean and variance of its loss;
2. **plan** on the host: the composed window from Chernoff bounds on the MGFs (Pr[ΣL ≥ U] ≤ M(λ)^T e^{−λU},
   tails of at most 1e-20 on each side; the mass that could wrap around the circular FFT is added to the
   pessimistic δ and taken off the optimistic one), the grid spacing h and the grid size N;
3. **evaluate** (one program per grid size N, of a short ladder of powers of two; from 2¹⁸ nodes a second
   one that discretises the steps on N/8 nodes, where their supports fit, and pads them to N): both ends of
   ε(δ) or δ(ε) at once.

**The grid spacing** (MATH §7.3). Connect-the-dots spreads each step's loss by at most ~h²/6 of variance
and the merged optimistic grid contracts it by ~h²/3, so both ends move by a fraction of (h/sd)² of the
composed loss's spread, sd the standard deviation of one step's loss. By default h = SPACING·sd (the RMS
sd over the steps of a composition), then h is lowered to fill the grid size it needs (a power of two),
and, for pure-ε steps whose atoms share a lattice (randomized response, Laplace, the staircase), lowered
again so that every atom is a node (their δ is then exact at the atoms, e.g. δ(kε₀) = 0). The certified
interval says how close the answer is: ``tolerance`` asks for a relative width, and settings wider than
it are recomputed on finer grids. ``discretization`` fixes h instead (like-for-like comparisons).

Where δ is so small (≲ 1e-11) that the FFT's rounding allowance would swamp it, a Chernoff bound on the
probe's pessimistic pmfs, computed in log space, gives the upper end instead (a few % looser than exact at
δ = 1e-14, never infinite for a finite ε).

Two kinds of step are prepared on the host first (their event types' ``pld_step``): a shuffle round
(:mod:`jaxpriv.events.shuffled`: its clone-count tables) and a client-sampled local run
(:mod:`jaxpriv.events.sampling`: the run's own PLD composed by this
accountant, kept as a dominating and a dominated atom list, mixed with the "not sampled" atom at loss 0).
"""

from __future__ import annotations

import math

import jax
import numpy as np

from .. import _tiers, events as ev
from .._batching import batch_sharding, power_of_two, to_devices, to_host
from . import pld_grid

__all__ = ["MAX_GRID", "MIN_GRID", "MIN_TABLE_GRID", "SPACING", "INTERVAL_TOLERANCE", "interval", "profile",
           "supported"]

#: default grid spacing h, in standard deviations of one step's loss (see the module docstring)
SPACING = 0.1
#: smallest and largest composed grids (powers of two); wider windows get a coarser h (still certified).
#: The smallest is what most DP-SGD questions need (at h = SPACING·sd the rows of 200 random settings, q ∈
#: [1e-3, 0.1], σ ∈ [0.6, 3], T ∈ [132, 10⁴], need 2¹³ (44%), 2¹⁴ (36%), 2¹⁵ (19%): `bench/pld_grid_sizes.py`):
#: 81% of single questions then reuse one compiled program (or one on disk) whatever their numbers, at the
#: price of a finer h than needed, and up to 2x the run time, for the settings below it. Their upper ends
#: lie within 0.11% of the h → 0 limit (2¹⁵: 0.07%, at twice the batch's time)
MIN_GRID, MAX_GRID = 1 << 14, 1 << 22
#: the smallest grid for events with steps held as tables (shuffled clone counts, client mixtures), whose
#: every node costs a table's width: there the run time, not the compilation, is what a small grid saves
MIN_TABLE_GRID = 1 << 12
#: default relative width of the certified interval asked by ``epsilon_interval``/``delta_interval``
INTERVAL_TOLERANCE = 0.01
#: the window leaves at most this much composed mass outside on each side (added to δ as a bound)
_TAIL = 1e-20
#: rounds of refinement when a tolerance is asked
_ROUNDS = 3
#: a row whose width a finer grid narrowed by less than this factor's complement is not refined again
_STALLED = 0.8
#: δ below which an interval's width is the FFT's absolute rounding allowance (not refined)
_DELTA_FLOOR = 1e-10
#: grids from this size discretise the steps on N/8 nodes where their supports fit (see :func:`_run`)
_NARROW_FROM = 1 << 18
#: grids from this size run the evaluation's optimised program from the first call (jaxpriv._tiers): there the
#: run, not the compilation, is most of a question's time (2-core CPU, fresh processes: one DP-SGD step at
#: q = 1e-6 on 2^22 nodes, 27.0 s CPU with the quick form, 14.8 s optimised; bench/README "Tiers by grid size")
_OPTIMISED_FROM = 1 << 20
#: rows times grid nodes from which a query runs the optimised programs from the first call: its rows times
#: the smallest grid (then its probes and refinements too, so that it compiles one form of each program), or
#: its rows on one grid size times their nodes. The quick form runs a row 2-5x slower and the optimised form
#: compiles ~2x longer (bench/README, "Tiered compilation of the PLD programs"): a batch repays the compilation,
#: a single question (two rows) keeps the quick form; its answer differs from a batch's by rounding only (_tiers)
_OPTIMISED_WORK = 1 << 20
#: steps whose tables hold this many values per row (the clone pair of 10⁴ shuffled users: 1.4·10⁷) run the
#: probe and the evaluation optimised from the first call: there, too, the run is most of a question's time
_OPTIMISED_TABLES = 1 << 22
_LAMBDAS = pld_grid.LAMBDAS


# --------------------------------------------------------------------------------------------------
# Events: what the accountant can interpret, and how it flattens a composition
# --------------------------------------------------------------------------------------------------


def supported(event) -> str | None:
    """None when the PLD accountant can interpret ``event``; otherwise the reason."""
    return ev.unsupported(event, "pld")


def components(event, count=1.0) -> list:
    """Flatten compositions: [(step event, count)], counts multiplied along SelfComposed."""
    return event.pld_components(count)


# --------------------------------------------------------------------------------------------------
# The query: rows, plans, programs
# --------------------------------------------------------------------------------------------------


def interval(event, value, *, query: str, discretization=None, tolerance=None, chunk_size=None, progress=None):
    """(upper, lower) numpy arrays of ε(δ) (query "epsilon") or δ(ε) (query "delta") over the event's
    batch; the event and ``value`` are validated and broadcast by the caller (flat, shape (B,)).

    ``discretization``: a fixed grid spacing h (else the accuracy-driven default of the module docstring).
    ``tolerance``: settings whose interval is wider than this fraction of its upper end are recomputed on
    finer grids (up to three rounds; h falls as the square root of the width asked, since both ends move
    with h²); both ends of every round are valid, so each direction keeps its tightest, and a round
    recomputes only the directions that can move the setting's ends (MATH §7.3)."""
    B = value.shape[0]
    if not components(event):  # nothing released: ε = 0 at every δ, δ = 0 at every ε
        return np.zeros(B), np.zeros(B)
    large = B * (1 if event.pld_symmetric() else 2) * MIN_GRID >= _OPTIMISED_WORK
    with _tiers.optimised(when=large):
        return _interval(event, value, query, discretization, tolerance, chunk_size, progress, large)


def _interval(event, value, query, discretization, tolerance, chunk_size, progress, large):
    B = value.shape[0]
    fixed = None if discretization is None else np.full(B, float(discretization))
    up, lo, h, N = _interval_at(event, value, fixed, query, chunk_size, progress, large)  # each (directions, B)
    upper, low = up.max(0), lo.max(0)
    if tolerance is None or discretization is not None:
        return upper, low
    before = np.full(B, np.inf)
    for _ in range(_ROUNDS):
        width = _width(upper, low)
        # a δ below ~1e-10 is as wide as the FFT's absolute rounding allowance, which no grid narrows; and a
        # width the last finer grid barely narrowed is the steps' own (e.g. a table step's bounding laws)
        helps = (upper > _DELTA_FLOOR if query == "delta" else True) & (width < _STALLED * before)
        # per direction: one on the largest grid cannot have a finer one, and one whose upper end lies below
        # the setting's lower end decides neither end (its ε or δ is below the setting's)
        wanted = (width > tolerance) & helps & (N < MAX_GRID) & (up >= low)
        redo = np.nonzero(wanted.any(0))[0]
        if redo.size == 0:
            break
        before = width
        factor = np.clip(np.sqrt(width[redo] / (0.6 * tolerance)), 1.5, 16.0)
        sub = ev.map_numbers(event, lambda _, x: np.asarray(x)[redo] if np.ndim(x) else x)
        u, l_, h[:, redo], N[:, redo] = _interval_at(sub, value[redo], h.min(0)[redo] / factor, query, chunk_size,
                                                     progress, large, wanted[:, redo], h[:, redo], N[:, redo])
        # every round's ends are certified: each direction keeps its tightest, the setting the worse direction's
        up[:, redo], lo[:, redo] = np.minimum(up[:, redo], u), np.maximum(lo[:, redo], l_)
        upper, low = up.max(0), lo.max(0)
    return upper, low


def profile(event, epsilon) -> tuple[np.ndarray, np.ndarray]:
    """(lower, upper) δ(ε) of every row of ``event`` (numbers of shape (B,)) at every ε of ``epsilon``
    (shape (G,)), each (B, G): one composition per row and direction on the default grid, read at all G
    values (where :func:`interval` composes once per (row, value)).

    The composed pmfs are those of a client-sampled run (:func:`_composed_pmfs`): the dominating one with
    every mass it may miss (tails, FFT rounding) at +∞, the dominated one with its Bernstein shift and miss
    taken off, so δ(ε) = Pr[L = ∞] + Σ_{ℓ_k > ε} p_k (1 − e^{ε−ℓ_k}) of the first is an upper bound and of
    the second a lower bound on the true δ(ε) (MATH §7.2–7.4). The sum is S₁ − e^ε S₂ from suffix sums over
    the atoms (S₁ = Σ p_k, S₂ = Σ p_k e^{−ℓ_k}, both over ℓ_k > ε ≥ 0, so e^ε S₂ ≤ S₁); its rounding error
    is below 4·N·u·S₁ (N atoms, u the float64 unit roundoff), added to the upper end and taken off the lower.
    Both directions where the event is not symmetric; the worse is reported."""
    eps = np.asarray(epsilon, np.float64).reshape(-1)
    B = np.asarray(jax.tree_util.tree_leaves(event)[0]).shape[0] if jax.tree_util.tree_leaves(event) else 1
    lower, upper = np.zeros((B, eps.size)), np.zeros((B, eps.size))
    if not components(event):  # nothing released: δ = 0 at every ε
        return lower, upper
    for add in ((False,) if event.pld_symmetric() else (False, True)):
        dominating, dominated = _composed_pmfs(event, add)
        for i in range(B):
            for out, (loss, mass), sign in ((upper, dominating[i], 1.0), (lower, dominated[i], -1.0)):
                out[i] = np.maximum(out[i], _profile_sum(loss, mass, eps, sign))
    return lower, upper


def _profile_sum(loss, mass, eps, sign):
    """δ(ε) of one atom list (losses ascending, +∞ last) at every ε ≥ 0, moved by its rounding bound in the
    direction ``sign`` (+1 up, −1 down); see :func:`profile`."""
    finite = np.isfinite(loss)
    keep = finite & (loss > 0.0)  # an atom at ℓ ≤ 0 ≤ ε adds nothing
    ell, p = loss[keep], mass[keep]
    s1 = np.append(np.cumsum(p[::-1])[::-1], 0.0)  # suffix sums: index j sums atoms j, j+1, ...
    s2 = np.append(np.cumsum((p * np.exp(-ell))[::-1])[::-1], 0.0)
    j = np.searchsorted(ell, eps, side="right")  # first atom with ℓ > ε
    body = np.maximum(s1[j] - np.exp(eps) * s2[j], 0.0)
    allowance = 4.0 * max(ell.size, 1) * np.finfo(np.float64).eps * s1[j]
    return np.clip(mass[~finite].sum() + body + sign * allowance, 0.0, 1.0)


def _width(upper, low):
    """(upper − lower)/upper, 0 where both are 0, inf where the upper end is infinite."""
    with np.errstate(divide="ignore", invalid="ignore"):
        width = (upper - low) / np.abs(upper)
    return np.where(upper == low, 0.0, np.where(np.isfinite(upper), width, 0.0))


def _interval_at(event, value, h_req, query, chunk_size, progress, whole, wanted=None, h_before=None, N_before=None):
    """One round: (upper, lower, h, N) per direction and setting, each (directions, B); ``whole``: a large
    query's rows left over on a grid size join a padded whole chunk (:func:`_row_sizes`). A refinement round
    passes the rows ``wanted`` and their last grids (h, N): a row not wanted, or whose new grid would not be
    finer than its last (its window fills the largest grid), is not computed (its ends: +inf and −inf, its
    grid: the last)."""
    B = value.shape[0]
    steps = components(event)
    step_events = [e.pld_step(B, _composed_pmfs) for e, _ in steps]
    counts = np.stack([np.broadcast_to(np.asarray(c, np.float64), (B,)) * ~e.releases_nothing(B) for e, c in steps],
                      axis=-1)  # (B, C); a step that samples nobody releases nothing
    lattice = _combined_lattice([e.pld_lattice(B) for e in step_events])
    D = 1 if event.pld_symmetric() else 2
    tile = lambda x: np.tile(np.asarray(x), (D,) + (1,) * (np.ndim(x) - 1))  # noqa: E731  rows: direction-major
    rows = [jax.tree_util.tree_map(tile, e) for e in step_events]
    add = np.repeat(np.arange(D) == 1, B)
    plan = _plan(rows, tile(counts), add, None if h_req is None else tile(h_req), tile(lattice), per_setting=D,
                 whole=whole)
    skip = None
    if wanted is not None:
        skip = ~wanted.reshape(-1) | (plan["h"] >= h_before.reshape(-1) * (1.0 - 1e-12))
        plan["h"], plan["N"] = np.where(skip, h_before.reshape(-1), plan["h"]), np.where(skip, N_before.reshape(-1),
                                                                                         plan["N"])
    value_rows = tile(value)
    eta = np.full(B * D, 1e-12) if query == "delta" else np.maximum(1e-3 * value_rows, 1e-300)
    up, lo = _run(rows, tile(counts), plan, add, eta, value_rows, 1 if query == "delta" else 0, chunk_size, progress,
                  skip=skip, per_setting=D, whole=whole)
    up = np.minimum(up, _chernoff_upper(plan["log_mgf"], plan["log_finite"], value_rows, query))
    if skip is not None:
        up, lo = np.where(skip, np.inf, up), np.where(skip, -np.inf, lo)
    return tuple(x.reshape(D, B) for x in (up, lo, plan["h"], plan["N"]))


def _combined_lattice(lattices) -> np.ndarray:
    """Per setting, the lattice every step's atoms lie on (0: no step has atoms; NaN: none is shared)."""
    stacked = np.stack(lattices, -1)  # (B, C)
    free = stacked == 0
    with np.errstate(invalid="ignore"):
        base = np.fmax.reduce(np.where(free, np.nan, stacked), axis=-1)  # NaN where no finite base
        shared = np.all(free | (np.abs(stacked - base[:, None]) <= 1e-12 * base[:, None]), axis=-1)
    return np.where(free.all(-1), 0.0, np.where(shared, base, np.nan))


def _row_sizes(rows: int, limit: int, per_setting: int = 2, whole: bool = False) -> list[tuple[int, int, int]]:
    """(start, stop, padded size) of the program calls over ``rows`` rows: whole chunks of ``limit`` rows (a
    power of two), the rest in calls of one setting's rows (``per_setting``: both directions, or one for a
    symmetric event) unless it fills more than half a chunk: two compiled shapes per program, and little
    padding (each row costs a grid's work). ``whole``, where there is a whole chunk: the rest in one whole chunk
    too, one shape: a large query's (optimised) programs share no shape with single questions' (quick) ones,
    and one padded chunk costs less than compiling a second shape (1000 DP-SGD settings: two fewer)."""
    small = max(per_setting, jax.device_count())
    limit = max(limit, small)
    if whole and rows >= limit:
        return [(s, min(s + limit, rows), limit) for s in range(0, rows, limit)]
    calls, start = [], 0
    while rows - start >= limit or (rows - start > limit // 2 and limit > small):
        calls.append((start, min(start + limit, rows), limit))
        start += limit
    calls += [(s, min(s + small, rows), small) for s in range(start, rows, small)]
    return calls


def _tree_rows(tree, take):
    return jax.tree_util.tree_map(lambda x: np.asarray(x)[take], tree)


def _probe(rows, add, per_setting: int = 2, whole: bool = False) -> list[np.ndarray]:
    """Pass 1 over every row: per step, (rows, 2 + len(LAMBDAS) + 3) (see :func:`.pld_grid.probe`). A probe
    depends on the steps and the direction only, not on the counts, so rows that differ in their counts
    alone (one event at many T) are probed once."""
    first, inverse = _distinct_rows(rows, add)
    rows, add = [_tree_rows(e, first) for e in rows], add[first]
    R = add.shape[0]
    tables = max(e.table_elements(pld_grid.PROBE_NODES) for e in rows)
    limit = max(16, min(64, power_of_two((1 << 24) // max(tables, 1)) // 2))
    out = [np.empty((R, _LAMBDAS.size + 5)) for _ in rows]
    for start, stop, size in _row_sizes(R, limit, per_setting, whole):
        take = np.minimum(np.arange(start, start + size), R - 1)
        with _tiers.optimised(when=tables >= _OPTIMISED_TABLES):
            results = pld_grid.probe([_tree_rows(e, take) for e in rows], add[take])
        for o, r in zip(out, results):
            o[start:stop] = to_host(r)[:stop - start]
    return [o[inverse] for o in out]


def _distinct_rows(rows, add) -> tuple[np.ndarray, np.ndarray]:
    """(first, inverse): the first of each group of rows whose steps and direction are equal bit for bit, and
    each row's group, so that ``x[first][inverse]`` is ``x`` for any per-row function x of them."""
    leaves = [np.asarray(add)] + [np.asarray(x) for e in rows for x in jax.tree_util.tree_leaves(e)]
    key = np.concatenate([np.ascontiguousarray(x).reshape(add.shape[0], -1).view(np.uint8) for x in leaves], axis=1)
    # a dict keyed on each row's bytes (np.unique's sort of long byte rows is slow); groups numbered in order
    groups: dict[bytes, int] = {}
    inverse = np.fromiter((groups.setdefault(row.tobytes(), len(groups)) for row in key), np.int64, key.shape[0])
    return np.unique(inverse, return_index=True)[1], inverse


def _table_elements(rows, nodes: int) -> int:
    """The most float64 values one row's table steps hold on a grid of ``nodes`` (0: no table steps)."""
    return max(e.table_elements(nodes) for e in rows)


def _plan(rows, counts, add, h_req, lattice, per_setting: int = 2, whole: bool = False):
    """Pass 1 and the host plan for every row: the grid spacing h, the grid size N, each step's first node,
    the composed window (placed by Chernoff bounds on the steps' MGFs) and the λ that bound its tails."""
    probes = _probe(rows, add, per_setting, whole)
    smallest = MIN_TABLE_GRID if _table_elements(rows, 1) else MIN_GRID
    lo = np.stack([p[:, 0] for p in probes], -1)  # (R, C)
    hi = np.stack([p[:, 1] for p in probes], -1)
    log_mgf = sum(counts[:, c:c + 1] * p[:, 2:2 + _LAMBDAS.size] for c, p in enumerate(probes))
    log_finite = sum(counts[:, c] * p[:, 2 + _LAMBDAS.size] for c, p in enumerate(probes))
    var = np.stack([p[:, -1] for p in probes], -1)
    total = np.maximum(counts.sum(-1), 1e-300)
    sd = np.sqrt((counts * var).sum(-1) / total)
    h = np.zeros(add.shape[0])
    for _ in range(2):
        # on a grid of spacing h a step's log-MGF moves by about |λ(λ + 1)|·(the variance the grid adds or
        # removes, ≲ h²/8 spread, ≲ h²/3 merged over two nodes)/2 from the probe's: T times that, with room to
        # spare, places the window for the grid's pmfs (not a bound: the programs bound the wrap-around)
        moved = log_mgf + 0.5 * total[:, None] * np.abs(_LAMBDAS * (_LAMBDAS + 1.0)) * (h * h)[:, None]
        w_lo, w_hi, lam_dn, lam_up = _window(moved, math.log(_TAIL))
        # never beyond what the sum can reach (bounded losses: pure-ε mechanisms, small T); a side cut there
        # covers everything, which needs the grid's node margins too (a step's pmf spans a node more per side)
        reach_lo, reach_hi = (counts * lo).sum(-1), (counts * hi).sum(-1)
        cut = (w_lo <= reach_lo).astype(float) + (w_hi >= reach_hi)
        w_lo, w_hi = np.maximum(w_lo, reach_lo), np.minimum(w_hi, reach_hi)
        span = np.maximum(w_hi - w_lo, 1e-9 * np.maximum(np.abs(w_hi), 1.0))
        h, N = _spacing(span, sd, h_req, lattice, cut * (counts.sum(-1) + 2), smallest)
    # each step from the lowest loss at which the sum can still reach the window (the others at their
    # largest), over N nodes: what lies above goes to +inf (pessimistic) or is dropped (optimistic)
    lowest = np.maximum(lo, w_lo[:, None] - ((counts * hi).sum(-1)[:, None] - hi))
    starts = np.floor(lowest / h[:, None]) - 1
    top = np.minimum(np.ceil(hi / h[:, None]) + 1, starts + N[:, None] - 1)
    reach = np.stack([(counts * starts).sum(-1), (counts * top).sum(-1)], -1)  # in nodes
    # the window's first node: at the lowest node the sum can reach where the window still covers w_hi
    w_start = np.maximum(np.minimum(np.floor(w_lo / h) - 2, reach[:, 0]), np.ceil(w_hi / h) + 3 - N)
    # a window that covers everything the sum can reach on a side wraps nothing around from that side
    covers_lo, covers_hi = w_start <= reach[:, 0], w_start + N - 1 >= reach[:, 1]
    return dict(h=h, N=N, starts=starts, used=top - starts + 1, w_start=w_start, reach=reach * h[:, None],
                lam_up=np.where(covers_hi, 0.0, lam_up), lam_dn=np.where(covers_lo, 0.0, lam_dn),
                log_mgf=log_mgf, log_finite=log_finite)


#: nodes of a grid not counted in its span: the window's rounding to nodes, the reach's extra nodes
_MARGIN = 16


def _spacing(span, sd, h_req, lattice, extra, smallest=MIN_GRID):
    """The grid spacing h and size N of each row whose composed window is ``span`` wide and needs ``extra``
    nodes besides (see the module docstring): h = SPACING·sd filled out to its grid size, or ``h_req``; then
    snapped to the atoms' lattice."""
    margin = _MARGIN + extra
    if h_req is None:
        h = np.where(sd > 0, SPACING * sd, span / (smallest - margin))
        h = np.clip(h, span / (MAX_GRID - margin), span / (smallest - margin))
        h = span / (_rung(span / h + margin, smallest) - margin)  # the grid size is paid for: use all of it
        # up to one of 16 values an octave (nearby settings share h): up, so that the window still fits the
        # grid size just paid for (rounding down pushed nearly every setting onto a grid twice that size)
        h = 2.0 ** (np.ceil(16.0 * np.log2(h)) / 16.0)
    else:
        h = np.maximum(h_req, span / (MAX_GRID - margin))
    # a lattice a of atoms: h = a/2^j, so that k·2^j·h is k·a exactly in floating point (every atom a node);
    # the largest such h ≤ h, unless the window would then overflow the largest grid (and wrap around)
    snap = np.isfinite(lattice) & (lattice > 0)
    a = np.where(snap, lattice, 1.0)
    j = np.minimum(np.ceil(np.log2(a / h)), np.floor(np.log2(a / (span / (MAX_GRID - margin)))))
    h = np.where(snap, a / 2.0 ** j, h)
    return h, _rung(span / h + margin, smallest)


def _rung(nodes: np.ndarray, smallest: int = MIN_GRID) -> np.ndarray:
    """Grid sizes: the power of two ≥ ``nodes``, between ``smallest`` and MAX_GRID."""
    exponent = np.ceil(np.log2(np.clip(nodes, smallest, MAX_GRID)))
    return (2 ** exponent).astype(np.int64)


def _window(log_mgf_total, tail_log):
    """Window ends and the λ attaining them: Pr[ΣL ≥ U] ≤ e^{log M(λ) − λU} ≤ tail, likewise below."""
    lam = _LAMBDAS
    pos, neg = lam > 0, lam < 0
    up_all = np.where(pos, (log_mgf_total - tail_log) / np.where(pos, lam, 1.0), np.inf)
    dn_all = np.where(neg, (log_mgf_total - tail_log) / np.where(neg, lam, -1.0), -np.inf)
    i_up, i_dn = np.argmin(up_all, -1), np.argmax(dn_all, -1)
    rows = np.arange(log_mgf_total.shape[0])
    return dn_all[rows, i_dn], up_all[rows, i_up], lam[i_dn], lam[i_up]


def _run(rows, counts, plan, add, eta, value, query, chunk_size, progress, pmf: bool = False, skip=None,
         per_setting: int = 2, whole: bool = False):
    """Pass 2: one program per grid size N, over chunks of rows. Returns the outputs per row: arrays of
    scalars (NaN at the rows ``skip`` marks), or (``pmf``) lists of per-row arrays (their lengths are the
    rows' grid sizes)."""
    R = add.shape[0]
    active = np.ones(R, bool) if skip is None else ~skip
    C = counts.shape[1]
    outs = None
    bar = None
    if progress or (progress is None and R > 2048):
        from .._batching import status_bar

        bar, task = status_bar("PLD accounting", int(active.sum()))
    for N in np.unique(plan["N"][active]):
        idx = np.nonzero((plan["N"] == N) & active)[0]
        tables = _table_elements(rows, int(N))
        limit = max(1, min(chunk_size or 64, (1 << 22) // int(N), (1 << 24) // max(tables, 1)))
        limit = 1 << (limit.bit_length() - 1)
        for start, stop, size in _row_sizes(idx.size, limit, per_setting, whole):
            take = idx[np.minimum(np.arange(start, start + size), idx.size - 1)]
            args = ([_tree_rows(e, take) for e in rows], [plan["starts"][take, c] for c in range(C)],
                    [plan["used"][take, c] for c in range(C)], [counts[take, c] for c in range(C)],
                    *(plan[k][take] for k in ("h", "w_start", "lam_up", "lam_dn")), eta[take], value[take],
                    plan["reach"][take], add[take])
            if jax.device_count() > 1 and size % jax.device_count() == 0:  # rows sharded over devices
                args = to_devices(args, batch_sharding())
            # on large grids a step's support often fills a small part of the window (5-11% for DP-SGD
            # settings): the steps are then discretised on N/8 nodes, the costliest part of a row (a second
            # program per large N; the small grids of most questions keep one). The node above the used ones
            # must be on the grid too (its lower half cell is merged down): the same pmfs as on N nodes
            narrow = {"S": int(N) // 8} if N >= _NARROW_FROM and plan["used"][take].max() < N // 8 else {}
            # by the grid, the steps' table sizes and the query's rows on this grid (not the rows in a call: the
            # chunks of one query all run one form)
            with _tiers.optimised(when=N >= _OPTIMISED_FROM or tables >= _OPTIMISED_TABLES
                                  or idx.size * N >= _OPTIMISED_WORK):
                results = [to_host(r) for r in pld_grid.evaluate(*args, np.int32(query), N=int(N), pmf=pmf, **narrow)]
            if outs is None:
                outs = [[None if pmf else np.nan] * R for _ in results]
            for out, r in zip(outs, results):
                for j, i in enumerate(idx[start:stop]):
                    out[i] = r[j]
            if bar is not None:
                bar.update(task, advance=stop - start)
    if bar is not None:
        bar.stop()
    if outs is None:  # every row skipped (a query's two ends)
        return np.full(R, np.nan), np.full(R, np.nan)
    return tuple(out if pmf else np.asarray(out, np.float64) for out in outs)


def _chernoff_upper(log_mgf, log_finite, value, query):
    """A second valid upper bound from the probe's pessimistic pmfs, with no FFT and no absolute rounding
    floor: (1 − e^{ε−L})₊ ≤ e^{λ(L−ε)}·λ^λ/(λ+1)^{λ+1} for λ > 0, so δ(ε) ≤ Pr[L = ∞] + M(λ)^T e^{−λε}
    λ^λ/(λ+1)^{λ+1} (the composed MGF in log space, relative precision). It takes over where δ is so small
    that the FFT's rounding allowance would swamp it (δ ≲ 1e-11)."""
    lam = _LAMBDAS[_LAMBDAS > 0]
    log_m = log_mgf[:, _LAMBDAS > 0] + (lam * np.log(lam) - (lam + 1.0) * np.log1p(lam))
    log_m = log_m + 1e-9 * np.abs(log_m) + 1e-12  # the log-sum-exps' rounding, upward
    p_inf = -np.expm1(log_finite)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        if query == "epsilon":
            room = np.log(value - p_inf)[:, None]  # −inf or NaN when the +inf atom alone exceeds δ
            eps = np.min((log_m - room) / lam, axis=-1)
            return np.where(np.isfinite(room[:, 0]), np.maximum(eps, 0.0), np.inf)
        delta = p_inf + np.exp(np.min(log_m - lam * value[:, None], axis=-1))
        return np.minimum(delta * (1.0 + 1e-12), 1.0)


# --------------------------------------------------------------------------------------------------
# Client sampling: the local run's PLD, composed first
# --------------------------------------------------------------------------------------------------

#: the Bernstein miss probability of a local run nested in client sampling (its mass is taken off the
#: dominated law's top)
_NESTED_ETA = 1e-15


def _composed_pmfs(event, add: bool):
    """The composed PLD of ``event`` (numbers of shape (B,)) in one direction, on its default grid:
    (dominating, dominated), each a list of B (losses, masses) atom arrays with +∞ as the last loss,
    trimmed to the nodes that hold mass; see :mod:`jaxpriv.events.sampling` for why each side is safe."""
    steps = components(event)
    B = np.asarray(jax.tree_util.tree_leaves(event)[0]).shape[0] if jax.tree_util.tree_leaves(event) else 1
    if not steps:
        point = [(np.array([0.0, np.inf]), np.array([1.0, 0.0]))] * B
        return point, point
    rows = [e.pld_step(B, _composed_pmfs) for e, _ in steps]
    counts = np.stack([np.broadcast_to(np.asarray(c, np.float64), (B,)) * ~e.releases_nothing(B) for e, c in steps],
                      axis=-1)
    flags = np.full(B, add)
    plan = _plan(rows, counts, flags, None, _combined_lattice([e.pld_lattice(B) for e in rows]))
    p_up, inf_up, p_lo, inf_lo, shift = _run(rows, counts, plan, flags, np.full(B, _NESTED_ETA), np.zeros(B), 0,
                                             None, False, pmf=True)

    def trimmed(first, mass, inf, hh):
        keep = np.nonzero(mass > 0)[0]
        lo, hi = (keep[0], keep[-1] + 1) if keep.size else (0, 0)
        return (np.append((first + np.arange(lo, hi)) * hh, np.inf), np.append(mass[lo:hi], inf))

    upper, lower = [], []
    for i in range(B):
        hh, w0, n = plan["h"][i], plan["w_start"][i], int(plan["N"][i])
        upper.append(trimmed(w0, p_up[i][:n], inf_up[i], hh))
        lower.append(trimmed(w0 + shift[i], p_lo[i][:n], inf_lo[i], hh))
    return upper, lower
