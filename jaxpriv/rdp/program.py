"""The Poisson-subsampled Gaussian's RDP curve, exact at every order, as one small program (MATH §1.3).

Both paths (:mod:`.series`) compute A_α − 1 rather than A_α: the curve is ρ = log1p(A_α − 1)/(α − 1), which
keeps full relative precision when q is tiny and A_α is within 1e-15 of 1.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .._batching import map_chunked
from .._numerics import (EPS64, round_up, check_array, check_broadcastable, check_orders, float64, is_concrete,
                         as_output, log_normal_cdf, log1p, kernel_jit)
from .curves import gaussian_kernel
from .series import CVZ_TERMS, CVZ_WEIGHTS, LOG_CVZ_ERROR, log_abs_binom, log_binomial_row

__all__ = ["exact_curve", "curve_tables", "subsampled_gaussian_kernel", "subsampled_gaussian"]


# ----------------------------------------------------------------------------------------------------
# The subsampled-Gaussian curve as one small program (MATH §1.3)
# ----------------------------------------------------------------------------------------------------
#
# At every order A_α − 1 is a signed sum of terms ±exp(coef + E(s) + t·log(1−q)):
# * integer α (all signs +): coef = log C(α, i) (exact), E(i) = i log q + log expm1((i² − i)/(2σ²)), t = α − i;
# * fractional α, part 0: coef = log|C(α, i)| (+ log|w_k| in the CVZ tail), E(i) = the lower exponent
#   i log q + (i² − i)/(2σ²) + log Φ((z0 − i)/σ), t = α − i;
# * fractional α, part 1: the same coefficient at j, E(m) = the upper exponent at m = α − j = f + r
#   (f = α − ⌊α⌋, r = ⌊α⌋ − j) with log Φ((m − z0)/σ), t = j;
# plus, for fractional α, the four corrections of :func:`log_am1_at`.
# E depends on the configuration only through (q, σ), so it is tabulated once per configuration: the
# integer table over i = 0, 1, …; the lower table over i; one upper row per distinct fractional part f,
# over r = −21, −20, … . Each order's terms read a *prefix* of one table row (i = 0…α; i = 0…⌊α⌋+21;
# r = −21…⌊α⌋), so they are whole aligned slabs of _SLAB table entries: every order of every grid is a
# list of chunks (order, slab, _SLAB coefficients), walked by two loops whose bodies do not depend on the
# grid (the largest term per order, then the exps and their sums). What depends only on the orders
# (coefficients, signs, t, each chunk's order and slab) is computed on the host from the concrete orders
# and enters the program as runtime arrays: the program does not grow with the grid, none of it is a
# constant, and grids of similar shape share one compiled program (their sizes are rounded up by
# :func:`_bucket`). log Φ and log expm1 have one call site each, over the whole table.
#
# The arithmetic of each term, of the corrections and of the error allowances (MATH §0.1) is that of
# :func:`log_am1_at` and :func:`log_am1_binomial`, which evaluate one order at a time: 3 ulps of
# Σ|terms| for the rounding of a signed sum and 4 ulps of each term's size (the magnitudes its log is
# summed from) for the term's own, plus the CVZ truncation bound (fractional orders); 8 ulps of the
# weighted size (integer orders). The values agree with theirs up to the order of the additions: within
# ~1e-13 relative, except where the signed sum cancels to ~1e-9 of its terms (α → 1, σ ≥ 50), where both
# are the exact value plus part of the same allowance (MATH §1.3's stated accuracy is unchanged).

_SLAB = 32  # terms per chunk: one row of a ⌊α⌋ ≤ 10 series (the default grid's fractional orders)
_TAIL_START = CVZ_TERMS + 1  # upper rows start at r = −21: the last CVZ tail term of part 1


class _CurvePlan(NamedTuple):
    """The order-dependent data of the subsampled-Gaussian program (see the comment above)."""

    chunk_slot: np.ndarray  # (C,) int32, sorted: the order slot each chunk of terms belongs to
    chunk_slab: np.ndarray  # (C,) int32: the table slab (of _SLAB entries) it reads
    coef: np.ndarray  # (C, _SLAB) log|coefficient| of each term
    coef_size: np.ndarray  # (C, _SLAB) the rounding scale of coef (sum of the magnitudes it is built from)
    sign: np.ndarray  # (C, _SLAB) +1 or −1; 0 where the slot holds no term
    rest: np.ndarray  # (C, _SLAB) t: the term's power of (1 − q)
    int_shift: np.ndarray  # (I,) i = 0, 1, … of the integer table
    phi_shift: np.ndarray  # (P + 4,) shifts of the lower and upper tables; then 0, 1 (lower) and 0, 1 (upper)
    phi_sign: np.ndarray  # (P + 4,) −1: lower, log Φ((z0 − s)/σ); +1: upper, log Φ((s − z0)/σ)
    slab_shift: np.ndarray  # (S, _SLAB) the shift s of each table entry (I + P of them, in slabs)
    slab_quad: np.ndarray  # (S, _SLAB) 1 where the entry holds (s² − s)/(2σ²) (lower, upper), 0 (integer)
    frac_alpha: np.ndarray  # (KF,) fractional orders (slots 0 … KF − 1)
    frac_log_c: np.ndarray  # (KF, 40) log|C(α, k)|, k = 2…41: the series of (1 − q)^α − 1 + αq
    frac_c_sign: np.ndarray  # (KF, 40) the sign of C(α, k)(−q)^k
    chunk_allow: np.ndarray  # (C, 2) the term's rounding allowance is (a + b·size) ulps: (3, 4) fractional, (0, 8) integer
    tail_row: np.ndarray  # (KF, 2) int32: table row of the first CVZ tail term of parts 0 and 1
    tail_coef: np.ndarray  # (KF, 2) its coefficient
    tail_rest: np.ndarray  # (KF, 2) its power of (1 − q)
    slot_alpha: np.ndarray  # (KF + KI,) the order of each slot (integer orders after the fractional ones)
    perm: np.ndarray  # (K,) int32: the slot of each requested order


def _bucket(n: int) -> int:
    """A static size ≥ n: a power of two up to 16, then one of 8 sizes per octave. Grids whose sizes round
    to the same buckets share one compiled program."""
    n = max(int(n), 1)
    if n <= 16:
        return 1 << (n - 1).bit_length()
    grain = 1 << (n.bit_length() - 4)
    return -(-n // grain) * grain


def _slabs(rows: int) -> int:
    return -(-rows // _SLAB)


@functools.lru_cache(maxsize=64)
def _curve_plan(orders_key: tuple) -> _CurvePlan:
    """The host-side tables of :func:`_curve_block` for a grid of orders (concrete, any order, repeats allowed)."""
    orders = np.asarray(orders_key, dtype=np.float64)
    is_int = orders == np.floor(orders)
    fracs, ints = np.unique(orders[~is_int]), np.unique(orders[is_int])
    kf, ki = _bucket(fracs.size), _bucket(ints.size)
    slot_alpha = np.concatenate([fracs, np.full(kf - fracs.size, 1.5), ints, np.full(ki - ints.size, 2.0)])
    perm = np.where(is_int, kf + np.searchsorted(ints, orders), np.searchsorted(fracs, orders)).astype(np.int32)

    # Table rows: the integer table (i = 0 … max α), the lower table (i = 0 … max⌊α⌋ + 21), one upper row per
    # fractional part f (r = −21 … the largest ⌊α⌋ with that f); each padded to whole slabs.
    int_slabs = _bucket(_slabs(int(ints.max()) + 1 if ints.size else 1))
    floors = np.floor(fracs)
    parts, part_index = np.unique(fracs - floors, return_inverse=True)
    low_rows = _SLAB * _slabs(int(floors.max(initial=0.0)) + 1 + _TAIL_START)
    row_slabs = [_slabs(int(floors[part_index == p].max()) + 1 + _TAIL_START) for p in range(parts.size)]
    row_start = int_slabs + _slabs(low_rows) + np.concatenate([[0], np.cumsum(row_slabs)]).astype(int)
    frac_slabs = _slabs(low_rows) + int(sum(row_slabs))
    shifts = [np.arange(low_rows, dtype=np.float64)]
    shifts += [parts[p] + (np.arange(_SLAB * row_slabs[p], dtype=np.float64) - _TAIL_START) for p in range(parts.size)]
    pad_rows = _SLAB * (_bucket(frac_slabs) - frac_slabs)
    # the corrections' four log Φ values last: lower at s = 0, 1 (Φ(z0/σ), Φ((z0 − 1)/σ)), upper at s = 0, 1
    phi_shift = np.concatenate(shifts + [np.zeros(pad_rows), [0.0, 1.0, 0.0, 1.0]])
    phi_sign = np.concatenate([-np.ones(low_rows), np.ones(phi_shift.size - low_rows - 4), [-1.0, -1.0, 1.0, 1.0]])

    w = CVZ_WEIGHTS
    tail_coef, tail_sign = np.log(np.abs(w)), -np.sign(w)
    slots, slabs, coef, size, sign, rest = [], [], [], [], [], []
    first_tail = np.zeros((kf, 2), dtype=np.int32)

    def add(slot, first_slab, n_rows, fill):
        """Chunks of one order reading ``n_rows`` table entries from ``first_slab`` on; ``fill`` sets the terms."""
        n = _slabs(n_rows)
        c, s, g, t = (np.zeros(n * _SLAB) for _ in range(4))
        fill(np.arange(n * _SLAB), c, s, g, t)
        start = len(slots)
        slots.extend([slot] * n)
        slabs.extend(range(first_slab, first_slab + n))
        for dest, src in ((coef, c), (size, s), (sign, g), (rest, t)):
            dest.extend(src.reshape(n, _SLAB))
        return start * _SLAB

    for k, alpha in enumerate(fracs):
        c = int(floors[k])
        n = c + 1 + _TAIL_START  # terms i (part 0) or j (part 1) = 0 … ⌊α⌋ + 21
        log_c = log_abs_binom(np.asarray([alpha]), n)[0]
        log_size = log_abs_binom(np.asarray([alpha]), n, magnitude=True)[0]
        tail = np.arange(n) >= c + 2  # past ⌈α⌉ = c + 1: the alternating tail, k = i − c − 2
        term_coef = log_c + np.where(tail, tail_coef[np.clip(np.arange(n) - c - 2, 0, CVZ_TERMS - 1)], 0.0)
        term_sign = np.where(tail, tail_sign[np.clip(np.arange(n) - c - 2, 0, CVZ_TERMS - 1)], 1.0)

        def part0(i, cf, sz, sg, t, alpha=alpha, n=n):  # row i of the lower table: term i (from i = 2)
            on = (i >= 2) & (i < n)
            ii = np.where(on, i, 0)
            cf[on], sz[on], sg[on] = term_coef[ii[on]], log_size[ii[on]], term_sign[ii[on]]
            t[on] = alpha - i[on]

        def part1(p, cf, sz, sg, t, n=n, c=c):  # row p of the upper row (r = p − 21): term j = c − r
            j = c + _TAIL_START - p
            on = (j >= 0) & (j < n)
            cf[on], sz[on], sg[on] = term_coef[j[on]], log_size[j[on]], term_sign[j[on]]
            t[on] = j[on]

        base0 = add(k, int_slabs, n, part0)
        base1 = add(k, row_start[part_index[k]], n, part1)
        first_tail[k] = (base0 + c + 2, base1 + _TAIL_START - 2)  # i = c + 2; j = c + 2, i.e. r = −2

    for k, alpha in enumerate(ints):
        a = int(alpha)
        log_binom = log_binomial_row(a)

        def whole(i, cf, sz, sg, t, a=a, log_binom=log_binom):
            on = (i >= 2) & (i <= a)
            cf[on] = log_binom[i[on]]
            sz[on] = np.abs(log_binom[i[on]]) + 1.0
            sg[on] = 1.0
            t[on] = a - i[on]

        add(kf + k, 0, a + 1, whole)

    n_frac_chunks = sum(1 for slot in slots if slot < kf)
    pad = _bucket(len(slots)) - len(slots)  # empty chunks (no terms) of the last slot
    slots.extend([kf + ki - 1] * pad)
    slabs.extend([0] * pad)
    for dest in (coef, size, sign, rest):
        dest.extend(np.zeros((pad, _SLAB)))
    allow = np.zeros((len(slots), 2))
    allow[:n_frac_chunks] = (3.0, 4.0)  # as in log_am1_at: 3 ulps of each term for the sum, 4 of its size
    allow[n_frac_chunks : len(slots) - pad] = (0.0, 8.0)  # as in log_am1_binomial: 8 ulps of its size
    flat_coef, flat_rest = np.asarray(coef).reshape(-1), np.asarray(rest).reshape(-1)
    tail_row = np.asarray(slabs)[first_tail // _SLAB] * _SLAB + first_tail % _SLAB

    frac_alpha = slot_alpha[:kf]
    k = np.arange(2, 42, dtype=np.float64)
    return _CurvePlan(
        chunk_slot=np.asarray(slots, np.int32),
        chunk_slab=np.asarray(slabs, np.int32),
        coef=np.asarray(coef),
        coef_size=np.asarray(size),
        sign=np.asarray(sign),
        rest=np.asarray(rest),
        int_shift=np.arange(_SLAB * int_slabs, dtype=np.float64),
        phi_shift=phi_shift,
        phi_sign=phi_sign,
        slab_shift=np.concatenate([np.arange(_SLAB * int_slabs, dtype=np.float64), phi_shift[:-4]]).reshape(-1, _SLAB),
        slab_quad=np.concatenate([np.zeros(_SLAB * int_slabs), np.ones(phi_shift.size - 4)]).reshape(-1, _SLAB),
        frac_alpha=frac_alpha,
        frac_log_c=log_abs_binom(frac_alpha, 42)[:, 2:],
        frac_c_sign=np.where(k <= np.ceil(frac_alpha)[:, None], 1.0,
                             np.where((k - np.ceil(frac_alpha)[:, None]) % 2 == 0, 1.0, -1.0))
        * np.where(k % 2 == 0, 1.0, -1.0),
        chunk_allow=allow,
        tail_row=tail_row.astype(np.int32),
        tail_coef=flat_coef[first_tail],
        tail_rest=flat_rest[first_tail],
        slot_alpha=slot_alpha,
        perm=perm,
    )


@functools.lru_cache(maxsize=64)
def _curve_plan_arrays(orders_key: tuple) -> _CurvePlan:
    """:func:`_curve_plan` as device arrays (float64), made once per grid: no transfer per call. Concrete even
    when first asked for inside a trace (then they enter that program as constants)."""
    with jax.enable_x64(True), jax.ensure_compile_time_eval():  # device_put: no copy program (jnp.asarray has one)
        return _CurvePlan(*(jax.device_put(np.asarray(x)) for x in _curve_plan(orders_key)))


def _log_expm1_positive(x):
    """log(e^x − 1) for x ≥ 0 (−inf at 0), one branch: x + log(1 − e^{−x}). Its error is within ~3 ulps of
    max(x, |result|) + 1, inside the integer sum's allowance (8 ulps of each term's magnitude, which counts
    |result| and 1); :func:`jaxpriv._numerics.log_expm1` evaluates two branches (4 transcendentals)."""
    return x + jnp.log(-jnp.expm1(-x))


def _materialise(x):
    """``x`` (rows, N) unchanged, but computed once into memory. The table has several readers (the two loops,
    the corrections' rows, the first CVZ tail terms), and XLA fuses an elementwise producer into each
    reader that can take it, even an expensive one once it is itself a fusion: log Φ would be compiled and
    evaluated more than once (into a gather of all terms: once per term, 10x slower). XLA never fuses a
    scatter into a reader, so writing the rows through an identity scatter pins them down; an optimization
    barrier does not, XLA's CPU pipeline removes it before fusion."""
    rows = jnp.arange(x.shape[0])
    return jnp.zeros_like(x).at[rows].set(x, unique_indices=True, indices_are_sorted=True)


def _curve_config(q, sigma):
    """Per-configuration scalars (5, N): log q, log(1 − q), z0 = σ² log((1 − q)/q) + ½, 2σ², q (again, from
    its log, as the corrections of log_am1_at take it); 0 < q < 1 (q = 0 and q = 1 are exact limits,
    selected at the end)."""
    q_in = jnp.where((q > 0) & (q < 1), q, 0.5)
    log_q, log_1mq = jnp.log(q_in), log1p(-q_in)
    return jnp.stack([log_q, log_1mq, sigma**2 * (log_1mq - log_q) + 0.5, 2.0 * sigma**2, jnp.exp(log_q)])


def _curve_table(cfg, sigma, plan: _CurvePlan):
    """The per-configuration table of E (configurations last; see the comment above :data:`_SLAB`): the
    integer rows i log q + log expm1((i² − i)/(2σ²)), then the lower and upper rows s log q + (s² − s)/(2σ²)
    + log Φ(∓(s − z0)/σ), whose last two (upper, s = 0 and 1) serve the corrections. Each transcendental is
    evaluated once per entry."""
    log_q, z0, two_var = cfg[0], cfg[2], cfg[3]
    i, s = plan.int_shift[:, None], plan.phi_shift[:, None]
    integer = i * log_q + _log_expm1_positive((i * i - i) / two_var)
    log_phi = log_normal_cdf(plan.phi_sign[:, None] * ((s - z0) / sigma))
    exponent = s[:-4] * log_q + (s[:-4] * s[:-4] - s[:-4]) / two_var + log_phi[:-4]
    return _materialise(jnp.concatenate([integer, exponent, log_phi[-4:]]))


#: None: loops over the chunks on the CPU, all chunks at once elsewhere; True/False forces one (tests)
_CURVE_LOOPS = None


def _chunk_terms(entry, coef, sign, rest, log_1mq):
    """The log of each term of chunks (..., _SLAB): coefficient + table entry + t·log(1 − q); −inf off the
    terms. ``entry`` (..., _SLAB, N)."""
    return jnp.where((sign != 0)[..., None], coef[..., None] + entry + rest[..., None] * log_1mq, -jnp.inf)


def _chunk_sums(terms, entry, top, shift, quad_on, coef_size, sign, rest, allow, log_q, log_1mq, two_var):
    """Σ e over the positive and the negative terms of chunks (..., _SLAB), and Σ e·(a + b·size), with
    e = exp(term − top) → (..., 3, N). A term's size, the scale of its rounding: the magnitudes its log is
    summed from (coefficient, s log q, (s² − s)/(2σ²), log Φ or log expm1, t log(1 − q))."""
    e = jnp.exp(terms - top[..., None, :])
    s = shift[..., None]
    linear = s * log_q
    quad = quad_on[..., None] * ((s * s - s) / two_var)
    rest_part = jnp.where(jnp.isfinite(entry), entry - linear - quad, 0.0)
    size = (coef_size[..., None] + jnp.abs(linear) + jnp.abs(quad) + jnp.abs(rest_part)
            + jnp.abs(rest)[..., None] * jnp.abs(log_1mq))
    weight = allow[..., 0][..., None, None] + allow[..., 1][..., None, None] * size
    return jnp.stack([jnp.sum(jnp.where(sign[..., None] > 0, e, 0.0), axis=-2),
                      jnp.sum(jnp.where(sign[..., None] < 0, e, 0.0), axis=-2), jnp.sum(e * weight, axis=-2)], axis=-2)


def _max_rows(x):
    """The largest of the rows of one chunk (_SLAB, N) → (N,), pairwise (its value does not depend on the
    order). XLA's reduction kernel costs a few µs per call on a narrow batch, more than the work, and this
    runs once per chunk."""
    while x.shape[0] > 1:
        half = x.shape[0] // 2
        x = jnp.maximum(x[:half], x[half:])
    return x[0]


def _curve_block(q, sigma, plan: _CurvePlan):
    """ρ at the plan's slots → (K, N) for configurations q, σ of shape (N,) (configurations last). See the
    comment above :data:`_SLAB`; the arithmetic of each term, the corrections and the error allowances are
    those of :func:`log_am1_at` and :func:`log_am1_binomial`.

    The terms are visited one chunk (_SLAB terms × N configurations) at a time, in two loops: the largest
    term of each order, then the exps and their sums, each accumulated into its order's row (chunks are
    sorted by order, so each row sums its chunks in order). A chunk reads its table slab by a dynamic index,
    a contiguous block: on the CPU a gather of all chunks at once costs XLA 2-4 ns per term for the indexing
    alone (more than the exp), and its (chunks, _SLAB, N) intermediates outgrow the caches. An accelerator
    does take all chunks at once (gathers, segment reductions; the same values, bit for bit, on the CPU):
    there a loop step costs more than its work."""
    kf, ks, n = plan.frac_alpha.shape[0], plan.slot_alpha.shape[0], q.shape[0]
    cfg = _curve_config(q, sigma)
    log_q, log_1mq, two_var, q_back = cfg[0], cfg[1], cfg[3], cfg[4]
    table = _curve_table(cfg, sigma, plan)
    slabs = table[:-4].reshape(-1, _SLAB, n)

    chunks = (plan.chunk_slab, plan.chunk_slot, plan.coef, plan.coef_size, plan.sign, plan.rest, plan.chunk_allow)
    looped = _CURVE_LOOPS if _CURVE_LOOPS is not None else jax.default_backend() == "cpu"

    def chunk(k):  # chunk k: its data, the table entries it reads, and the log of each of its terms
        slab, slot, coef, coef_size, sign, rest, allow = (jax.lax.dynamic_index_in_dim(x, k, keepdims=False) for x in chunks)
        entry = jax.lax.dynamic_index_in_dim(slabs, slab, keepdims=False)
        return slab, slot, coef_size, sign, rest, allow, entry, _chunk_terms(entry, coef, sign, rest, log_1mq)

    if looped:
        def largest(k, top):
            _, slot, *_, terms = chunk(k)
            row = jax.lax.dynamic_index_in_dim(top, slot, keepdims=False)
            return jax.lax.dynamic_update_index_in_dim(top, jnp.maximum(row, _max_rows(terms)), slot, 0)

        top = jax.lax.fori_loop(0, plan.chunk_slot.shape[0], largest, jnp.full((ks, n), -jnp.inf))
    else:  # all chunks at once (an accelerator: gathers are cheap there, and a loop's steps are not)
        entries = slabs[plan.chunk_slab]
        terms = _chunk_terms(entries, plan.coef, plan.sign, plan.rest, log_1mq)
        top = jax.ops.segment_max(jnp.max(terms, axis=-2), plan.chunk_slot, num_segments=ks, indices_are_sorted=True)

    # corrections of the fractional orders (KF, N): [(1−q)^α − 1 + αq] Φ(z0/σ) ≥ 0, αq[(1−q)^{α−1} − 1]
    # Φ((z0−1)/σ) ≤ 0 (part 0); −(1−αq) Φ(−z0/σ), −αq Φ((1−z0)/σ) (part 1)
    alpha = plan.frac_alpha[:, None]
    small = alpha * q_back < 0.5
    log_qs = jnp.log(jnp.where(small, q_back, 0.5))
    k = jnp.arange(2, 42, dtype=jnp.float64)[:, None]
    series = jnp.sum(plan.frac_c_sign[..., None] * jnp.exp(plan.frac_log_c[..., None] + k * log_qs[:, None, :]), axis=1)
    direct = jnp.expm1(alpha * log1p(-q_back)) + alpha * q_back
    log_a = jnp.log(alpha)
    corr = [  # the table's last four rows: log Φ(z0/σ), log Φ((z0 − 1)/σ), log Φ(−z0/σ), log Φ((1 − z0)/σ)
        (jnp.log(jnp.where(small, series, direct)) + table[-4], 1.0),
        (log_a + log_q + jnp.log(-jnp.expm1((alpha - 1.0) * log_1mq)) + table[-3], -1.0),
        (jnp.log(jnp.abs(1.0 - alpha * q_back)) + table[-2], -jnp.sign(1.0 - alpha * q_back)),
        (log_a + log_q + table[-1], -1.0),
    ]

    # per-order log-sum-exp, relative to the largest term (or correction)
    top_f = top[:kf]
    for value, _ in corr:
        top_f = jnp.maximum(top_f, value)
    top = jnp.concatenate([top_f, top[kf:]])
    top = jnp.where(jnp.isfinite(top), top, 0.0)

    def sums(slab, coef_size, sign, rest, allow, entry, terms, top_row):
        return _chunk_sums(terms, entry, top_row, plan.slab_shift[slab], plan.slab_quad[slab], coef_size, sign, rest,
                           allow, log_q, log_1mq, two_var)

    if looped:
        def add(k, acc):  # adds chunk k's sums to its order's row
            slab, slot, coef_size, sign, rest, allow, entry, terms = chunk(k)
            row = jax.lax.dynamic_index_in_dim(acc, slot, keepdims=False)
            top_row = jax.lax.dynamic_index_in_dim(top, slot, keepdims=False)
            return jax.lax.dynamic_update_index_in_dim(
                acc, row + sums(slab, coef_size, sign, rest, allow, entry, terms, top_row), slot, 0)

        sums = jax.lax.fori_loop(0, plan.chunk_slot.shape[0], add, jnp.zeros((ks, 3, n)))
    else:
        sums = sums(plan.chunk_slab, plan.coef_size, plan.sign, plan.rest, plan.chunk_allow, entries, terms,
                    top[plan.chunk_slot])
        sums = jax.ops.segment_sum(sums, plan.chunk_slot, num_segments=ks, indices_are_sorted=True)

    # fractional orders: the signed sum and its upward slack (as in log_am1_at): 3 ulps of Σ|terms| for
    # the rounding of the sum, 4 ulps of each term's size for its own rounding, and the CVZ truncation bound
    top_f = top[:kf]
    pos, neg, allowance = sums[:kf, 0], sums[:kf, 1], sums[:kf, 2]
    for value, sgn in corr:
        term = jnp.exp(value - top_f)
        pos = pos + jnp.where(sgn > 0, term, 0.0)
        neg = neg + jnp.where(sgn < 0, term, 0.0)
        allowance = allowance + term * (3.0 + 4.0 * jnp.where(jnp.isfinite(value), jnp.abs(value), 0.0))
    diff = pos - neg
    first = (plan.tail_coef[..., None] + table[plan.tail_row]
             + plan.tail_rest[..., None] * log_1mq)  # the first term of each CVZ tail: (KF, 2, N)
    first_tail = jnp.logaddexp(first[:, 0], first[:, 1]) - float(np.log(np.abs(CVZ_WEIGHTS[0])))
    slack = jnp.logaddexp(math.log(EPS64) + top_f + jnp.log(allowance), LOG_CVZ_ERROR + first_tail)
    log_am1_f = jnp.where(diff > 0, jnp.logaddexp(top_f + jnp.log(jnp.abs(diff)), slack), slack)

    # integer orders: all terms ≥ 0, 8 ulps of the weighted magnitude added (as in log_am1_binomial)
    total = sums[kf:, 0]
    positive = total > 0  # all terms 0 (σ → ∞): A_α − 1 = 0, log = −inf, no allowance
    weighted = jnp.where(positive, sums[kf:, 2] / jnp.where(positive, total, 1.0), 0.0)
    log_am1_i = top[kf:] + jnp.log(total) + EPS64 * weighted

    orders = plan.slot_alpha[:, None]
    rho = jax.nn.softplus(jnp.concatenate([log_am1_f, log_am1_i])) / (orders - 1.0)
    rho = round_up(rho, 4.0)  # softplus and the division by α − 1: ≤ 2 ulps
    rho = jnp.where(q >= 1.0, gaussian_kernel(sigma, orders), rho)
    rho = jnp.where(q <= 0.0, 0.0, rho)
    invalid = ~((q >= 0) & (q <= 1) & (sigma > 0))  # traced input outside the domain: NaN, not a number
    return jnp.where(invalid, jnp.nan, rho)[plan.perm]


def _curve_rows(q, sigma, plan: _CurvePlan):
    """(N,) configurations → (N, K)."""
    return _curve_block(q, sigma, plan).T


@jax.custom_jvp
def exact_curve(q, sigma, plan: _CurvePlan):
    return _curve_rows(q, sigma, plan)


@exact_curve.defjvp
def _curve_jvp(primals, tangents):
    # Each row depends only on its own (q, σ): two forward passes with unit tangents give ∂ρ/∂q and ∂ρ/∂σ,
    # and the tangent is their combination. Its transpose (for grad) is a product, never the transpose of
    # a gather: that is a scatter built in the default dtype, which fails with x64 off outside our scope.
    q, sigma, plan = primals
    dq, dsigma, _ = tangents
    f = functools.partial(_curve_rows, plan=plan)
    one, zero = jnp.ones_like(q), jnp.zeros_like(q)
    rho, by_q = jax.jvp(f, (q, sigma), (one, zero))
    _, by_sigma = jax.jvp(f, (q, sigma), (zero, one))
    return rho, by_q * dq[:, None] + by_sigma * dsigma[:, None]


_curve_jit = kernel_jit(exact_curve)


def curve_tables(orders_key: tuple):
    """The order-dependent tables of :func:`subsampled_gaussian_kernel` for ``orders_key`` (a pytree of
    float64 and int32 device arrays, made once per grid). A program of the caller's own that traces the
    kernels (a root finder, a sweep) can take them as an argument and pass them on as ``tables=``: they
    then stay runtime data of that program instead of ~0.5 MB of constants compiled into it."""
    return _curve_plan_arrays(tuple(orders_key))


def subsampled_gaussian_kernel(q, sigma, orders_key: tuple, tables=None):
    """ρ(α) of the Poisson-subsampled Gaussian; q, σ of shape (N,) and static orders → (N, K).

    One compiled program serves every grid whose sizes round to the same buckets (:func:`_curve_plan`):
    the orders enter as runtime tables (``tables``: :func:`curve_tables`, looked up when not given).
    Inside a caller's trace it is inlined there."""
    return _curve_jit(q, sigma, curve_tables(orders_key) if tables is None else tables)


def _subsampled_gaussian(q, sigma, orders: np.ndarray):
    """Unvalidated, broadcasting entry for internal callers (q, sigma float64 arrays; orders numpy).
    Concrete numbers run in padded chunks (:func:`jaxpriv._batching.map_chunked`: a few compiled sizes
    whatever the number of settings); traced ones go straight into the caller's program."""
    shape = jnp.broadcast_shapes(jnp.shape(q), jnp.shape(sigma))
    key = tuple(float(a) for a in orders)
    if is_concrete((q, sigma)):
        flat = [np.broadcast_to(np.asarray(x, np.float64), shape).reshape(-1) for x in (q, sigma)]
        (rho,) = map_chunked(lambda q, s: (subsampled_gaussian_kernel(q, s, key),), flat, progress=False,
                             shard=False)
        return rho.reshape(shape + (orders.size,))
    q = jnp.broadcast_to(q, shape).reshape(-1)
    sigma = jnp.broadcast_to(sigma, shape).reshape(-1)
    return subsampled_gaussian_kernel(q, sigma, key).reshape(shape + (orders.size,))


def subsampled_gaussian(q, sigma, orders):
    """Exact RDP curve of the Poisson-subsampled Gaussian mechanism (sampling rate q, noise multiplier σ).

    ρ(α) = log A_α / (α−1), A_α = E_{z∼N(0,σ²)}[(1 − q + q e^{(2z−1)/(2σ²)})^α]
    (Mironov, Talwar, Zhang 2019, "Rényi DP of the Sampled Gaussian Mechanism", §3.3; MATH §1.3).
    Integer orders use the finite binomial sum; fractional orders the signed two-part series (exact, with
    a proven upper bound on the neglected tail added, ≲ 1e-18 relative). q = 1 gives the Gaussian curve,
    q = 0 gives 0. Finite for q ∈ [0, 1], σ > 0 and orders up to 10⁴ and beyond.

    Args:
      q: Poisson sampling rate in [0, 1]; broadcasts with ``sigma`` to shape ``S``.
      sigma: noise multiplier σ > 0.
      orders: 1-D array of ``K`` Rényi orders > 1 (concrete values).

    Returns:
      float64 array of shape ``S + (K,)``.

    Example:
      >>> from jaxpriv import rdp
      >>> round(float(rdp.subsampled_gaussian(0.01, 1.1, [4.7])[0]), 12)
      0.000317788072
    """
    with float64():
        q = check_array("q", q, 0.0, 1.0, worse="up")
        sigma = check_array("sigma", sigma, 0.0, np.inf, lo_open=True, worse="down")
        check_broadcastable(q=q, sigma=sigma)
        return as_output(_subsampled_gaussian(q, sigma, check_orders(orders)))
