"""The PLD accountant's device programs: a step's loss law on a grid, composed by FFT, read off (MATH §7).

Two jitted programs do all the work, both vmapped over *rows* (one row = one setting in one neighbouring
direction) and keyed on structure only — the event's tree, the grid size N — never on numbers: σ, q, h,
the direction, the query (ε(δ) or δ(ε)) are all data.

* :func:`probe` — each step's law on a fixed, non-uniform grid (fine near 0, coarse in the tails): its
  support, the log-MGF of its pessimistic pmf (to place the composed window, and a Chernoff upper bound of
  its own), and the mean and variance of its loss (to choose the grid spacing h).
* :func:`evaluate` — each step's pessimistic and optimistic pmfs on N nodes of spacing h, both composed
  by FFT (one code path, vmapped over the two sides), and the certified (upper, lower) ε(δ) or δ(ε).

Discretisation (MATH §7.3): nodes ℓ_k = (start + k)·h.

* **pessimistic** ("connect the dots", Doroshenko, Ghazi, Kamath, Kumar & Manurangsi, PETS 2022): the
  mass of (ℓ_k, ℓ_{k+1}] with P/Q = e^r is split between the two nodes keeping its P- and Q-masses, a
  mean-preserving spread in likelihood-ratio space, so the discrete pair dominates the true one. Mass
  above the grid goes to +∞, mass below it up to the lowest node.
* **optimistic** (a dominated pair, new here): the cell (ℓ_k − h/2, ℓ_k + h/2] is *merged* (a
  post-processing of the pair, so the merged pair is dominated), its lower half B only in the fraction
  f that keeps the merged likelihood ratio at least e^{ℓ_k}; the rest of B (ratio above e^{ℓ_{k−1}}) is
  merged into node k − 1. Each merged atom then sits at or below its true loss with its true P-mass,
  which can only lower δ(ε) after any composition. Unlike rounding every loss down (which shifts T
  composed losses by ~T·h/2), the merged losses are within O(h²) of the node, so the lower end is as
  tight as the upper one. What remains (F = true loss − node ∈ [0, h]) is given back by Bernstein's
  inequality on the exact mean and variance of F: δ(ε) ≥ δ_opt(ε − c) − η, c = E ΣF − s.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

from .._batching import map_rows
from .._numerics import kernel_jit
from ..events import laws

__all__ = ["LAMBDAS", "PROBE_NODES", "law", "probe", "evaluate"]

#: the λ grid of the log-MGFs (the window's Chernoff bounds and the small-δ upper bound)
LAMBDAS = np.concatenate([-np.geomspace(2.0**-14, 2.0**12, 27), np.geomspace(2.0**-14, 2.0**12, 27)])
#: nodes of the probe's non-uniform grid
PROBE_NODES = 8192
_U = float(np.finfo(np.float64).eps)


# --------------------------------------------------------------------------------------------------
# Events → laws (direction as data)
# --------------------------------------------------------------------------------------------------


def law(event, add) -> laws.LossLaw:
    """The loss law of a single step (one setting's traced scalars), as its type declares it
    (:meth:`jaxpriv.events.Event.pld_law`); ``add``: the add direction (traced)."""
    return event.pld_law(add)


def _masses(step_law, points):
    """(P head, Q head, P tail, Q tail) of the continuous part at ``points`` (zeros without one)."""
    if step_law.masses is None:
        zero = jnp.zeros_like(points)
        return zero, zero, zero, zero
    return step_law.masses(points)


def _interval_masses(head_lo, head_hi, tail_lo, tail_hi):
    """Mass in (x_j, x_{j+1}] from heads or tails, whichever side is smaller (no cancellation), and a bound
    on its absolute rounding error (the subtraction's operands carry an ulp or two each)."""
    use_head = head_hi <= tail_lo
    mass = jnp.maximum(jnp.where(use_head, head_hi - head_lo, tail_lo - tail_hi), 0.0)
    error = 4.0 * _U * jnp.where(use_head, head_hi, tail_lo)
    return mass, error


def _log_ratio(p, q, p_err, q_err, lo, hi):
    """r = log(P/Q) of a cell whose loss lies in [lo, hi], clipped there, and a bound on its rounding error."""
    safe_p, safe_q = jnp.where(p > 0, p, 1.0), jnp.where(q > 0, q, 1.0)
    r = jnp.clip(jnp.log(safe_p) - jnp.log(safe_q), lo, hi)
    err = p_err / safe_p + q_err / safe_q + 4.0 * _U * (jnp.abs(jnp.log(safe_p)) + jnp.abs(jnp.log(safe_q)))
    return jnp.where(p > 0, r, hi), err


# --------------------------------------------------------------------------------------------------
# One step on the uniform grid: pessimistic and optimistic pmfs
# --------------------------------------------------------------------------------------------------


def _node(start, j, h):
    """The half-grid point x_j = (start + (j − 1)/2)·h: x_{2k+1} = ℓ_k, x_{2k} = ℓ_k − h/2."""
    return (start + 0.5 * (j - 1.0)) * h


def _atom_cells(loss, start, h, n_cells):
    """For each atom, the half-grid cell j with x_j < loss ≤ x_{j+1} (compared exactly as the points are
    computed), and whether it lies inside [x_0, x_{n_cells}]."""
    j = jnp.ceil(2.0 * (loss / h - start) + 1.0) - 1.0
    j = jnp.where(_node(start, j + 1.0, h) < loss, j + 1.0, j)
    j = jnp.where(_node(start, j, h) >= loss, j - 1.0, j)
    inside = jnp.isfinite(loss) & (j >= 0) & (j <= n_cells - 1)
    return jnp.clip(j, 0, n_cells - 1).astype(jnp.int32), inside


def _split(masses, low, bottom):
    """Connect the dots: interval k's mass, the fraction ``low`` on its lower node k and the rest on node
    k + 1, plus ``bottom`` on node 0 (pads and adds: a scatter compiles far slower)."""
    zero = jnp.zeros(1)
    return jnp.concatenate([masses * low, zero]) + jnp.concatenate([zero, masses * (1.0 - low)]) + jnp.where(
        jnp.arange(masses.shape[0] + 1) == 0, bottom, 0.0)


def discretise(step_law: laws.LossLaw, start, n: int, h, used=None):
    """Pessimistic and optimistic pmfs (P-masses) of one step on the nodes ℓ_k = (start + k)·h, k < n, of
    which the first ``used`` (traced; default all) hold its support: the pessimistic mass above them goes
    to +inf and the optimistic one is dropped, so that nothing lies beyond the support's top (whose tiny
    masses would dominate the MGFs that bound the wrap-around).

    Returns (pess, pess_inf, opt, opt_inf, f_stats): pmfs of shape (n,), the +inf atoms, and
    (mass, Σ mass·F, Σ mass·F²) of the optimistic atoms' offsets F = true loss − node ∈ [0, h], each F a
    lower bound (what Bernstein's inequality needs, see the module docstring).

    Similar computations are stacked into one call each (masses, ratios, expm1): every call site of a long
    function is compiled anew, and this program is compiled for every new question's grid size.
    """
    points = _node(start, jnp.arange(2 * n + 1, dtype=jnp.float64), h)  # x_0 … x_2n
    nodes = points[1::2]  # ℓ_0 … ℓ_{n−1}
    margin = 1e-6 * h + 1e-10  # loss units: a lower node never gets too much, a merged atom never too high
    # half cells s_j = (x_j, x_{j+1}]: B_k = s_2k just below ℓ_k, A_k = s_2k+1 just above it; rows P, Q
    if step_law.masses is not None:
        # materialised once: every use below slices them, and XLA would otherwise recompute the law per use
        hp, hq, tp, tq = jax.lax.optimization_barrier(_masses(step_law, points))
        heads, tails = jnp.stack([hp, hq]), jnp.stack([tp, tq])
        sub, sub_err = _interval_masses(heads[:, :-1], heads[:, 1:], tails[:, :-1], tails[:, 1:])  # (2, 2n)
        below, above = hp[1], tp[-2]  # P(L ≤ ℓ_0), P(L > ℓ_{n−1})
    else:
        sub = sub_err = jnp.zeros((2, 2 * n))
        below = above = jnp.float64(0.0)
    # pessimistic intervals (ℓ_k, ℓ_{k+1}] = A_k ∪ B_{k+1}, continuous part only
    interval = sub[:, 1:-1:2] + sub[:, 2::2]  # (2, n − 1)
    interval_err = sub_err[:, 1:-1:2] + sub_err[:, 2::2] + 2.0 * _U * interval
    o_loss, o_p = (step_law.atoms[0], step_law.atoms[1]) if step_law.lower_atoms is None else step_law.lower_atoms
    opt_inf = jnp.float64(0.0)
    if o_loss.shape[0]:  # the optimistic side's atoms join the half cells they fall in
        cell, inside = _atom_cells(o_loss, start, h, 2 * n)
        o_q = o_p * jnp.exp(-jnp.where(jnp.isfinite(o_loss), o_loss, 0.0))
        add = jnp.where(inside, jnp.stack([o_p, o_q]), 0.0)
        sub = sub.at[:, cell].add(add)
        sub_err = sub_err.at[:, cell].add(4.0 * _U * add)
        opt_inf = jnp.sum(jnp.where(jnp.isposinf(o_loss), o_p, 0.0))
    pad = lambda x: jnp.concatenate([x, jnp.zeros(x.shape[:-1] + (1,))], -1)  # noqa: E731  (n − 1) → n
    # log ratios of B_k, A_k and the intervals, each within its cell
    P = jnp.stack([sub[0, 0::2], sub[0, 1::2], pad(interval[0])])
    Q = jnp.stack([sub[1, 0::2], sub[1, 1::2], pad(interval[1])])
    P_err = jnp.stack([sub_err[0, 0::2], sub_err[0, 1::2], pad(interval_err[0])])
    Q_err = jnp.stack([sub_err[1, 0::2], sub_err[1, 1::2], pad(interval_err[1])])
    lo = jnp.stack([nodes - 0.5 * h, nodes, nodes])
    hi = jnp.stack([nodes, nodes + 0.5 * h, nodes + h])
    r, r_err = _log_ratio(P, Q, P_err, Q_err, lo, hi)
    r_low = jnp.maximum(r - r_err - margin, lo)  # each cell's ratio, rounded down
    (pb, pa, p_int), (pb_err, pa_err, _) = P, P_err
    pb_low, pa_low = jnp.maximum(pb - pb_err, 0.0), jnp.maximum(pa - pa_err, 0.0)
    pb_high, pa_high = pb + pb_err, pa + pa_err
    # one expm1 for: the connect-the-dots weight, and the excesses/deficits of the merged grid (below)
    e = jnp.expm1(jnp.stack([hi[2] - r[2], nodes - r_low[0], nodes - r_low[1], nodes - h - r_low[0],
                             nodes + h - r_low[1]]))

    # pessimistic: connect the dots; the weight falls ~1/h per unit of r: r's rounding error and the margin
    # move it down (mass up)
    low = jnp.clip(e[0] / jnp.expm1(h) - (margin + 1.01 * jnp.exp(h) * r_err[2]) / h, 0.0, 1.0)
    low = jnp.where(p_int > 0, low, 0.0)[:-1]
    p_int = p_int[:-1]
    pess = _split(p_int, low, below)  # below the grid: moved up to the lowest node
    pess_inf = above  # above the grid: +inf
    a_loss, a_p, _ = step_law.atoms
    if a_loss.shape[0]:
        finite = jnp.isfinite(a_loss)
        loss = jnp.where(finite, a_loss, 0.0)
        node = lambda i: (start + i) * h  # noqa: E731  (computed exactly as the grid's nodes are)
        # the smallest node ≥ the atom, compared in floating point as the nodes are
        up = jnp.ceil(loss / h - start)
        up = jnp.where(node(up) < loss, up + 1, up)
        up = jnp.where(node(up - 1) >= loss, up - 1, up)
        w = jnp.clip(jnp.expm1(node(up) - loss) / jnp.expm1(h) - margin / h, 0.0, 1.0)
        w = jnp.where(up <= 0, 0.0, w)
        upi = jnp.clip(up, 0, n - 1).astype(jnp.int32)
        inside = finite & (up <= n - 1)
        pess = pess.at[upi].add(jnp.where(inside, a_p * (1.0 - w), 0.0))
        pess = pess.at[jnp.maximum(upi - 1, 0)].add(jnp.where(inside, a_p * w, 0.0))
        pess_inf = pess_inf + jnp.sum(jnp.where(inside, 0.0, a_p))

    # optimistic: node k merges, from the top down, the part g_{k+1} of B_{k+1} left over by node k + 1,
    # what node k + 1 left of A_k (1 − t_{k+1}), then B_k (all of it, or the fraction f_k that keeps the
    # merged ratio at e^{ℓ_k}: the rest g_k = 1 − f_k goes down to node k − 1), then, while excess remains,
    # the fraction t_k of A_{k−1} that uses it up. A piece's excess and deficit at a node, P(1 − e^{ℓ − r})
    # and P(e^{ℓ − r} − 1), are rounded down and up, so every merged ratio is ≥ its node whatever the
    # rounding of the recursion. Cells stay balanced (F = 0) but where the excess outgrows a whole
    # neighbour (isolated atoms) or has none below (the lowest node of a law whose density falls from its
    # least loss, as a subsampled Gaussian's remove direction at small σ; given back by Bernstein, MATH §7.3).
    grow, shrink = 1.0 + 8.0 * _U, 1.0 - 8.0 * _U
    deficit_b = pb_high * e[1] * grow  # B_k at ℓ_k
    excess_a = -pa_low * e[2] * shrink  # A_k at ℓ_k
    excess_b = -pb_low * e[3] * shrink  # B_k at ℓ_{k−1}
    deficit_a = pa_high * e[4] * grow  # A_k at ℓ_{k+1}

    def down(carry, x):
        g_above, t_above = carry
        d_b, u_a, e_above, d_below = x
        available = g_above * e_above + (1.0 - t_above) * u_a
        fits = available >= d_b
        f = jnp.where(fits, 1.0, available / jnp.where(d_b > 0, d_b, 1.0) * (1.0 - 4.0 * _U))
        rest = jnp.where(fits, available - d_b, 0.0)
        t = jnp.where(fits & (d_below > 0), jnp.minimum(rest / jnp.where(d_below > 0, d_below, 1.0), 1.0)
                      * (1.0 - 4.0 * _U), 0.0)
        # the excess A_{k−1} could not use up (all of it taken, or none there: the lowest node), rounded down
        surplus = jnp.where(fits, jnp.maximum(rest * shrink - t * d_below * grow, 0.0), 0.0)
        return (1.0 - f, t), (f, t, surplus)

    nxt = lambda x: jnp.append(x[1:], 0.0)  # noqa: E731  x_{k+1}
    prv = lambda x: jnp.concatenate([jnp.zeros(1), x[:-1]])  # noqa: E731  x_{k−1}
    # the merge starts at the first node above the used ones (whose own mass is dropped below, but the part of
    # its lower half cell it leaves goes down to the top used node), as on a grid of used + 1 nodes: the cells
    # further up, dropped anyway, would otherwise pass their merge fractions down, and the optimistic pmf
    # would depend on how many nodes lie above the support
    inside = jnp.ones(n, bool) if used is None else jnp.arange(n) <= used
    keep = lambda x: jnp.where(inside, x, 0.0)  # noqa: E731
    _, (f, t, surplus) = jax.lax.scan(down, (jnp.float64(0.0), jnp.float64(0.0)),
                                      (keep(deficit_b), keep(excess_a), keep(nxt(keep(excess_b))),
                                       keep(prv(deficit_a))), reverse=True)
    # at ℓ_k, true P-masses (or less): the merged cell's loss rounded down to its node
    opt = nxt(keep((1.0 - f) * pb_low)) + (1.0 - nxt(t)) * pa_low + f * pb_low + t * prv(pa_low)
    # offsets F (lower bounds): 0 in balanced cells; surplus/P ≤ −log(1 − surplus/P) where excess remains
    f_main = jnp.clip(surplus * (1.0 - 1e-9) / jnp.where(opt > 0, opt, 1.0), 0.0, h)
    if used is not None:
        beyond = jnp.arange(n) >= used
        pess_inf = pess_inf + jnp.sum(jnp.where(beyond, pess, 0.0))
        pess, opt = jnp.where(beyond, 0.0, pess), jnp.where(beyond, 0.0, opt)
    f_stats = jnp.stack([jnp.sum(opt), jnp.sum(opt * f_main), jnp.sum(opt * f_main**2)])
    return pess, pess_inf, opt, opt_inf, f_stats


def _log_mgf(pmf, nodes, lams):
    """log Σ p_k e^{λ ℓ_k} for each λ."""
    logp = jnp.where(pmf > 0, jnp.log(jnp.where(pmf > 0, pmf, 1.0)), -jnp.inf)
    return jax.vmap(lambda lam: jax.nn.logsumexp(logp + lam * nodes))(lams)


# --------------------------------------------------------------------------------------------------
# Pass 1: a probe of each step's law on a non-uniform grid
# --------------------------------------------------------------------------------------------------


def _support(step_law):
    """(lo, hi) of a step's loss over its continuous part and finite atoms."""
    lo, hi = step_law.support
    a = step_law.atoms[0]
    if a.shape[0]:
        finite = jnp.isfinite(a)
        a_lo, a_hi = jnp.min(jnp.where(finite, a, jnp.inf)), jnp.max(jnp.where(finite, a, -jnp.inf))
        lo, hi = (jnp.minimum(lo, a_lo), jnp.maximum(hi, a_hi)) if step_law.masses is not None else (a_lo, a_hi)
    return lo, hi


def _probe_one(event, add):
    """One step, one row: (lo, hi, log-MGF at LAMBDAS, log(1 − p_inf), mean, variance) of its loss.

    The pmf is the pessimistic one (connect the dots) on a sinh-spaced grid over [lo, hi]: relative
    spacing ~1% everywhere above 1e-8 of the range, so a narrow bulk near 0 (small sampling rates) and a
    long tail are both resolved. Connect the dots is valid on any grid, so its MGF at λ > 0 bounds the true
    one (E_P e^{λL} = E_Q (P/Q)^{λ+1} grows under a mean-preserving spread). The mean and variance are of
    the cells' merged losses (a slight underestimate of the variance: a finer grid h, the accurate side)."""
    step_law = law(event, add)
    lo, hi = _support(step_law)
    lo = jnp.where(jnp.isfinite(lo), lo, 0.0)
    hi = jnp.where(jnp.isfinite(hi) & (hi > lo), hi, lo + 1e-12 * (1.0 + jnp.abs(lo)))
    # a little beyond the support, so that an atom at its end, computed an ulp away, stays on the grid
    pad = 1e-9 * (hi - lo) + 1e-12 * (jnp.abs(lo) + jnp.abs(hi))
    lo, hi = lo - pad, hi + pad
    scale = 1e-8 * jnp.maximum(jnp.maximum(jnp.abs(lo), jnp.abs(hi)), 1e-300)
    u = jnp.linspace(jnp.arcsinh(lo / scale), jnp.arcsinh(hi / scale), PROBE_NODES)
    k = jnp.arange(PROBE_NODES)
    nodes = jnp.where(k == 0, lo, jnp.where(k == PROBE_NODES - 1, hi, jnp.clip(scale * jnp.sinh(u), lo, hi)))
    nodes = jax.lax.cummax(nodes)  # monotone despite rounding
    pess = jnp.zeros(PROBE_NODES)
    pess_inf = jnp.float64(0.0)
    m1 = m2 = mass = jnp.float64(0.0)
    if step_law.masses is not None:
        hp, hq, tp, tq = jax.lax.optimization_barrier(_masses(step_law, nodes))
        heads, tails = jnp.stack([hp, hq]), jnp.stack([tp, tq])
        (p_int, q_int), (p_err, q_err) = _interval_masses(heads[:, :-1], heads[:, 1:], tails[:, :-1], tails[:, 1:])
        a, b = nodes[:-1], nodes[1:]
        r, _ = _log_ratio(p_int, q_int, p_err, q_err, a, b)
        width = jnp.expm1(b - a)
        low = jnp.where(width > 0, jnp.clip(jnp.expm1(b - r) / jnp.where(width > 0, width, 1.0) - 1e-6, 0.0, 1.0), 1.0)
        pess = _split(p_int, low, hp[0])
        pess_inf = pess_inf + tp[-1]
        mass, m1, m2 = jnp.sum(p_int), jnp.sum(p_int * r), jnp.sum(p_int * r * r)
    a_loss, a_p, _ = step_law.atoms
    if a_loss.shape[0]:
        finite = jnp.isfinite(a_loss)
        loss = jnp.where(finite, a_loss, lo)
        up = jnp.clip(jnp.searchsorted(nodes, loss), 0, PROBE_NODES - 1)  # nodes[up − 1] < loss ≤ nodes[up]
        below = nodes[jnp.maximum(up - 1, 0)]
        width = jnp.expm1(nodes[up] - below)
        w_low = jnp.where((up > 0) & (width > 0),
                          jnp.clip(jnp.expm1(nodes[up] - loss) / jnp.where(width > 0, width, 1.0) - 1e-6, 0.0, 1.0),
                          0.0)
        pess = pess.at[up].add(jnp.where(finite, a_p * (1.0 - w_low), 0.0))
        pess = pess.at[jnp.maximum(up - 1, 0)].add(jnp.where(finite, a_p * w_low, 0.0))
        pess_inf = pess_inf + jnp.sum(jnp.where(finite, 0.0, a_p))
        kept = jnp.where(finite, a_p, 0.0)
        mass, m1, m2 = mass + jnp.sum(kept), m1 + jnp.sum(kept * loss), m2 + jnp.sum(kept * loss * loss)
    mean = m1 / jnp.maximum(mass, 1e-300)
    var = jnp.maximum(m2 / jnp.maximum(mass, 1e-300) - mean * mean, 0.0)
    log_mgf = _log_mgf(pess, nodes, jnp.asarray(LAMBDAS))
    return jnp.concatenate([jnp.stack([lo, hi]), log_mgf, jnp.stack([jnp.log1p(-pess_inf), mean, var])])


@functools.partial(kernel_jit, saved=True, tiered=True)
def probe(steps, add):
    """Pass 1 over rows: for each step of the (flattened) event, (rows, 2 + len(LAMBDAS) + 3) — see
    :func:`_probe_one`. ``steps``: the list of step events (numbers of shape (rows,)); ``add``: (rows,)."""
    return [map_rows(_probe_one, step, add) for step in steps]


# --------------------------------------------------------------------------------------------------
# Pass 2: compose by FFT and read off ε(δ) or δ(ε)
# --------------------------------------------------------------------------------------------------


def _compose(pmfs, counts, starts, window_start):
    """Σ of independent losses: pmfs (C, N), each from its own start, raised to their counts, on N circular
    nodes whose first node is ``window_start``. Returns the composed pmf in window order and the rounding
    scale of the computation: Σ_c T_c‖y_{−c}‖₂ (y_{−c}: one step of c fewer), which bounds how much a
    coefficient's forward-FFT error can grow through the power (|d(z^T)| = T|z|^{T−1}|dz|, Parseval)."""
    N = pmfs.shape[-1]
    spectra = jnp.fft.rfft(pmfs, axis=-1)
    # z^T by one complex log a coefficient (T = 0 gives 1; a zero coefficient stays 0), whose real part,
    # log|z|, also gives the scale: it needs |y_{−c}| only, |z|^k by a real exp of k·log|z|
    zero = spectra == 0
    log_z = jnp.log(jnp.where(zero, 1.0, spectra))
    T = counts[:, None]
    spectrum = jnp.prod(jnp.where(T == 0, 1.0, jnp.where(zero, 0.0, jnp.exp(T * log_z))), axis=0)
    log_abs = jnp.where(zero, -jnp.inf, jnp.real(log_z))
    growth = 0.0
    for c in range(pmfs.shape[0]):
        exponents = counts - (jnp.arange(counts.shape[0]) == c)  # T_c − 1 for step c, T_c' for the others
        exponents = jnp.maximum(exponents, 0.0)[:, None]
        log_fewer = jnp.sum(jnp.where(exponents == 0, 0.0, exponents * log_abs), axis=0)
        growth = growth + counts[c] * _spectrum_l2_of_power(jnp.exp(2.0 * log_fewer), N)
    offset = jnp.sum(counts.astype(jnp.int64) * starts.astype(jnp.int64))
    composed = jnp.fft.irfft(spectrum, n=N)
    shift = jnp.mod(offset - window_start.astype(jnp.int64), N)
    return jnp.roll(composed, shift), growth


def _spectrum_l2_of_power(power, N: int):
    """‖irfft(X, N)‖₂ by Parseval from the power spectrum |X_k|², without the inverse transform (N even):
    ‖x‖² = (|X₀|² + |X_{N/2}|² + 2Σ_{0<k<N/2}|X_k|²)/N. A rounding scale (used with an 8× margin), so its own
    relative rounding, ≲ u·(log₂N + T) from the tree sum and the powers, does not matter."""
    return jnp.sqrt((2.0 * jnp.sum(power) - power[0] - power[-1]) / N)


def _delta_sum(pmf, nodes, eps, upper):
    """δ(ε) = Σ_{ℓ_k > ε} p_k (1 − e^{ε − ℓ_k}) of a discrete PLD (finite part) by a direct (tree) sum,
    moved by the bound on that sum's rounding: up when ``upper``, down otherwise."""
    terms = jnp.where(nodes > eps, pmf * -jnp.expm1(jnp.minimum(eps - nodes, 0.0)), 0.0)
    slack = 4.0 * _U * math.log2(nodes.shape[0]) * jnp.sum(jnp.abs(terms))
    return jnp.sum(terms) + jnp.where(upper, slack, -slack)


def _fp_allowance(nodes, eps, l2_terms, reachable):
    """Rounding of the FFT composition on δ(ε). A forward FFT's coefficient errs by ≲ u·log₂N·‖p‖₁
    (‖p‖₁ ≤ 1); through the power it becomes T|z|^{T−1} times that, ≲ u·log₂N·Σ_c T_c‖y_{−c}‖₂ in ℓ2
    after the inverse FFT (Parseval); the power's own exp/log and the inverse FFT add
    ≲ u·(4T + log₂N)·‖y‖₂. ``l2_terms`` carries these scales (8× margin on the constants), and δ(ε)
    weighs the pmf by w_k = (1 − e^{ε−ℓ_k})₊ ∈ [0, 1], so Cauchy-Schwarz bounds the error on δ by
    ‖w(ε)‖₂ times it. ‖w(ε)‖₂ decreases in ε: the value at ε bounds every larger ε."""
    w = jnp.where(reachable & (nodes > eps), -jnp.expm1(jnp.minimum(eps - nodes, 0.0)), 0.0)
    return 8.0 * _U * math.log2(nodes.shape[0]) * jnp.sqrt(jnp.sum(w * w)) * l2_terms


def _delta_at_nodes(pmf, h):
    """δ at every node ℓ_j of a discrete PLD on a uniform grid, approximately (for a starting guess):
    Σ_{k>j} p_k (1 − e^{−(k−j)h}) = S1_{j+1} − E_j with E_j = Σ_{m≥1} p_{j+m} e^{−mh}, the discounted suffix
    sums taken in blocks of 128 nodes (e^{±128h} stays finite) and carried between blocks by an associative
    scan (log-depth: a sequential loop over the blocks cost ~1 µs a block)."""
    N = pmf.shape[0]
    B = min(128, N)
    blocks = pmf.reshape(-1, B)
    m = jnp.arange(B, dtype=jnp.float64)
    # L[b, i] = Σ_{i' ≥ i} p[b, i'] e^{−(i' − i)h}, via e^{−i'h} / e^{−ih} within the block
    local = jnp.cumsum((blocks * jnp.exp(-m * h))[:, ::-1], axis=1)[:, ::-1] * jnp.exp(jnp.minimum(m * h, 700.0))
    decay = jnp.exp(-B * h)

    def compose(inner, outer):  # block b as the map g ↦ L[b, 0] + e^{−Bh}·g, applied after the blocks above
        return outer[0] * inner[0], outer[1] + outer[0] * inner[1]

    # G_b = L[b, 0] + e^{−Bh} G_{b+1}: the blocks' suffix sums, from the top; G_{b+1} for each block b
    _, suffix = jax.lax.associative_scan(compose, (jnp.full(blocks.shape[0], decay), local[:, 0]), reverse=True)
    beyond = jnp.append(suffix[1:], 0.0)
    discounted = local + beyond[:, None] * jnp.exp(-(B - m) * h)  # Σ_{k ≥ j} p_k e^{−(k−j)h}
    e = jnp.append(discounted.reshape(-1)[1:], 0.0) * jnp.exp(-h)  # E_j: from k = j + 1
    s1 = jnp.append(jnp.cumsum(pmf[::-1])[::-1][1:], 0.0)  # S1_{j+1}
    return s1 - e


def _certified(pmf, nodes, target, extra, l2_terms, reachable, upper):
    """``upper``: the smallest ε found with δ(ε) + extra + allowances ≤ target (inf if none); else the
    largest ε found with δ(ε') − extra − allowances > target just below it (so, δ being non-increasing, for
    every ε' < ε, and the true ε is at least it; −inf if none). Every answer is checked by a direct sum
    with its rounding bound and the FFT allowance at that ε, on the safe side.

    The node where the condition changes is searched by direct sums from a guess (δ at every node by
    suffix sums, :func:`_delta_at_nodes`): steps doubling away from the guess until the condition
    changes, then bisection; then the crossing inside its interval in closed form (δ(ε) = S1 − e^{ε−ℓ_j}·S2
    there, with both allowances taken at the interval's left end, where they are largest) and checked; if
    the check fails, the node itself is the answer. A good guess needs a handful of direct sums, a wrong one
    only more. One loop over one direct sum (its body compiled once); one function for both ends, vmapped
    over the two sides."""
    N = nodes.shape[0]
    budget = target - jnp.where(upper, extra, -extra)
    sign = jnp.where(upper, 1.0, -1.0)
    k = jnp.arange(N)
    h = nodes[1] - nodes[0]
    guess = jnp.argmax(jnp.append(_delta_at_nodes(pmf, h) <= budget, True)).astype(jnp.int32)

    def check(point, shifted):  # the condition at ε = point: passes(), and the allowance there
        at = jnp.where(shifted, point - 1e-12 * (1.0 + jnp.abs(point)), point)  # the lower end: just below
        weights = -jnp.expm1(jnp.minimum(at - nodes, 0.0))
        terms = jnp.where(nodes > at, pmf * weights, 0.0)
        w = jnp.where(reachable & (nodes > at), weights, 0.0)
        d = jnp.sum(terms)
        allowance = (4.0 * _U * math.log2(N) * jnp.sum(jnp.abs(terms))
                     + 8.0 * _U * math.log2(N) * jnp.sqrt(jnp.sum(w * w)) * l2_terms)
        return jnp.where(upper, d + allowance <= budget, d - allowance > budget), allowance

    # the first node j with flips(j) = (passes at ℓ_j) == upper, flips(N) = True, on (lo, hi]; phases: 0 the
    # guess, 1 doubling down, 2 doubling up, 3 bisection, 4 found
    def search(state):
        phase, lo, hi, step = state
        probe = jnp.where(phase == 0, guess, jnp.where(phase == 1, hi - step, jnp.where(phase == 2, lo + step,
                                                                                        (lo + hi) // 2)))
        passes, _ = check(nodes[jnp.clip(probe, 0, N - 1)], ~upper)
        flips = jnp.where((probe >= 0) & (probe < N), passes == upper, probe >= N)
        lo, hi = jnp.where(flips, lo, probe), jnp.where(flips, probe, hi)
        phase = jnp.where(phase == 0, jnp.where(flips, 1, 2),
                          jnp.where(((phase == 1) & ~flips) | ((phase == 2) & flips), 3, phase))
        phase = jnp.where((phase == 1) & (hi <= 0), 3, phase)  # nothing below the grid to double into
        return jnp.where((phase == 3) & (hi - lo <= 1), 4, phase), lo, hi, step * 2

    state = (jnp.int32(0), jnp.int32(-1), jnp.int32(N), jnp.int32(1))
    _, lo, hi, _ = jax.lax.while_loop(lambda s: s[0] < 4, search, state)
    j = jnp.where(upper, hi, hi - 1)  # upper: (ℓ_{j−1}, ℓ_j] holds the answer; lower: [ℓ_j, ℓ_{j+1})
    right = jnp.clip(jnp.where(upper, j, j + 1), 0, N - 1)
    left = jnp.where(right > 0, nodes[jnp.maximum(right - 1, 0)], nodes[0] - 1.0)

    def finish(i, state):  # i = 0: the allowance at `left` and the crossing; i = 1: the crossing's check
        crossing, ok = state
        passes, allowance = check(jnp.where(i == 0, left, crossing), ~upper & (i == 1))

        def solve(_):  # both allowances fall with ε: their value at `left` holds across the interval
            s1 = jnp.sum(jnp.where(k >= right, pmf, 0.0))
            s2 = jnp.sum(jnp.where(k >= right, pmf * jnp.exp(jnp.minimum(nodes[right] - nodes, 0.0)), 0.0))
            room = budget - sign * allowance
            new = nodes[right] + jnp.log(jnp.maximum(s1 - room, 1e-300)) - jnp.log(jnp.maximum(s2, 1e-300))
            return jnp.clip(new + sign * 1e-12 * jnp.abs(new), jnp.where(right > 0, left, -jnp.inf), nodes[right])

        return jax.lax.cond(i == 0, solve, lambda _: crossing, None), jnp.where(i == 1, passes, ok)

    crossing, ok = jax.lax.fori_loop(0, 2, finish, (0.0, False))
    found = jnp.where(upper, j < N, j >= 0)
    inside = jnp.where(upper, True, j < N - 1)  # a lower end past the top node stays at it
    answer = jnp.where(inside & ok, crossing, nodes[jnp.clip(j, 0, N - 1)])
    return jnp.where(found, answer, sign * jnp.inf)


def _chernoff_mass(log_mgf_total, lam, edge):
    """Pr[ΣL beyond edge] ≤ exp(log M(λ) − λ·edge), for λ > 0 (above) or λ < 0 (below); λ = 0 marks a
    side where the window covers every reachable loss (nothing beyond it)."""
    bound = jnp.exp(jnp.minimum(log_mgf_total - lam * edge, 700.0)) * (1.0 + 1e-9)
    return jnp.where(lam == 0, 0.0, bound)


def _inf_mass(pmfs, infs, counts, upper: bool):
    """The composition's +inf mass: 1 − (1 − p∞)^T for probability measures, and m^T − (m − p∞)^T =
    m^T·(1 − (1 − p∞/m)^T) for a measure of mass m ≠ 1 (a nested client-sampled run's dominating or
    dominated measure); the larger of the two for the upper side, the smaller for the lower."""
    mass = jnp.sum(pmfs, axis=-1) + infs
    plain = -jnp.expm1(jnp.sum(counts * jnp.log1p(-infs)))
    general = jnp.exp(jnp.sum(counts * jnp.log(mass))) * -jnp.expm1(jnp.sum(counts * jnp.log1p(-infs / mass)))
    return jnp.maximum(plain, general) if upper else jnp.minimum(plain, general)


def _bernstein_shift(f_stats, counts, h, eta):
    """c with Pr[ΣF < c] ≤ η for the independent offsets F_t ∈ [0, h], from each step's (mass, Σ mass·F,
    Σ mass·F²); 0 when nothing can be given back (then no η is spent). Bernstein's one-sided inequality for
    X_t = −F_t, whose deviations X_t − E X_t = E F_t − F_t are at most b = max_t E F_t because F_t ≥ 0:
    Pr[ΣF − EΣF ≤ −s] ≤ exp(−s²/(2(V + bs/3))), V = Σ Var F_t. (The range h in place of b, as before,
    cost up to h·log(1/η)/3 ≈ 6h where the offsets are nearly constant: an isolated atom per step.)"""
    mass = jnp.maximum(f_stats[:, 0], 1e-300)
    mean = f_stats[:, 1] / mass
    var = jnp.maximum(f_stats[:, 2] / mass - mean * mean, 0.0)
    log_eta = jnp.log(1.0 / eta)
    b = jnp.minimum(jnp.max(jnp.where(counts > 0, mean, 0.0)) * (1.0 + 1e-9), h)  # rounded up: an upper bound
    third = b * log_eta / 3.0
    s = third + jnp.sqrt(third * third + 2.0 * log_eta * jnp.sum(counts * var))
    shift = jnp.sum(counts * mean) * (1.0 - 1e-9) - s
    return jnp.maximum(shift, 0.0)


def _row(step_events, step_starts, step_used, step_counts, hh, w0, l_up, l_dn, eta, x, reach_ends, add, query,
         pmf: bool, N: int, S: int):
    """One row: both sides on the grid, composed, converted; ``query`` 0 = ε(δ = x), 1 = δ(ε = x); ``pmf``:
    the composed measures instead. Each step is discretised on its first S ≤ N nodes (S > its ``used``: the
    node above them takes part in the merge, see :func:`discretise`) and padded with zeros to the window's N."""
    sides = [discretise(law(e, add), s, S, hh, u) for e, s, u in zip(step_events, step_starts, step_used)]
    counts = jnp.stack(step_counts)
    starts = jnp.stack(step_starts)
    pmfs = jnp.stack([jnp.stack([s[0] for s in sides]), jnp.stack([s[2] for s in sides])])  # (2, C, S)
    infs = jnp.stack([jnp.stack([s[1] for s in sides]), jnp.stack([s[3] for s in sides])])  # (2, C)
    f_stats = jnp.stack([s[4] for s in sides])
    step_nodes = (starts[:, None] + jnp.arange(S, dtype=jnp.float64)) * hh  # (C, S)
    lams = jnp.stack([l_up, l_dn])
    mgf = jnp.sum(counts[None, :, None] * jax.vmap(jax.vmap(lambda p, nd: _log_mgf(p, nd, lams)), (0, None))(
        pmfs, step_nodes), axis=1)  # (2 sides, 2 λ)
    pmfs = jnp.pad(pmfs, ((0, 0), (0, 0), (0, N - S)))  # (2, C, N)
    total = jnp.sum(counts)
    nodes = (w0 + jnp.arange(N, dtype=jnp.float64)) * hh
    top, bottom = nodes[-1] + 0.5 * hh, nodes[0] - 0.5 * hh
    # nodes the sum cannot reach hold only FFT rounding: their true mass is 0
    reachable = (nodes >= reach_ends[0] - 0.5 * hh) & (nodes <= reach_ends[1] + 0.5 * hh)
    alias = _chernoff_mass(mgf[:, 0], l_up, top) + _chernoff_mass(mgf[:, 1], l_dn, bottom)  # (2,)
    composed, growth = jax.vmap(lambda p: _compose(p, counts, starts, w0))(pmfs)
    composed = jnp.where(reachable, composed, 0.0)
    l2 = growth + (4.0 * total / math.log2(N) + 1.0) * jnp.linalg.norm(composed, axis=-1)
    inf_pess = _inf_mass(pmfs[0], infs[0], counts, True)
    inf_opt = _inf_mass(pmfs[1], infs[1], counts, False)
    shift = _bernstein_shift(f_stats, counts, hh, eta)
    spent = jnp.where(shift > 0, eta, 0.0)  # the Bernstein miss probability, where a shift is used
    if pmf:  # the nested client-sampled run: a dominating and a dominated measure
        pess, opt = composed[0], composed[1]
        fp_up = math.sqrt(N) * 8.0 * _U * math.log2(N) * l2[0]  # ‖err‖₁ ≤ √N‖err‖₂
        pmf_up, inf_up = jnp.maximum(pess, 0.0), inf_pess + alias[0] + fp_up
        # dominated: the top r of the mass removed, then moved up by the shift
        r = alias[1] + math.sqrt(N) * 8.0 * _U * math.log2(N) * l2[1] + spent + 2.0 * N * _U
        inf_lo = jnp.maximum(inf_opt - r, 0.0)
        r = jnp.maximum(r - inf_opt, 0.0)
        pmf = jnp.maximum(opt, 0.0)
        above = jnp.cumsum(pmf[::-1])[::-1]  # mass at or above each node
        pmf_lo = jnp.minimum(pmf, jnp.maximum(above - r, 0.0))
        return pmf_up, inf_up, pmf_lo, inf_lo, jnp.floor(shift / hh)
    upper = jnp.array([True, False])
    sign = jnp.array([1.0, -1.0])
    infs = jnp.stack([inf_pess, inf_opt])
    extra = alias + jnp.stack([0.0, spent])

    def epsilon_query(_):
        target = jnp.stack([x, x - inf_opt])
        ends = jax.vmap(_certified, (0, None, 0, 0, 0, None, 0))(
            composed, nodes, target, jnp.stack([inf_pess, 0.0]) + extra, l2, reachable, upper)
        low = jnp.maximum(ends[1] + shift, 0.0)
        low = jnp.where(x - inf_opt + extra[1] < 0, jnp.inf, low)
        return jnp.maximum(ends[0], 0.0), low

    def delta_query(_):
        at = jnp.stack([x, x - shift])
        d = jax.vmap(lambda p, e, u: _delta_sum(p, nodes, e, u))(composed, at, upper)
        allowance = jax.vmap(lambda e, l2_terms: _fp_allowance(nodes, e, l2_terms, reachable))(at, l2)
        ends = jnp.clip(d + infs + sign * (extra + allowance), 0.0, 1.0)
        return ends[0], ends[1]

    return jax.lax.cond(query == 1, delta_query, epsilon_query, None)


@functools.partial(kernel_jit, static_argnames=("N", "pmf", "S"), saved=True, tiered=True)
def evaluate(steps, starts, used, counts, h, window_start, lam_up, lam_dn, eta, value, reach, add, query, *, N: int,
             pmf: bool = False, S: int | None = None):
    """(upper, lower) of ε(δ = value) (``query`` 0) or δ(ε = value) (``query`` 1) for each row, every step
    discretised on the first ``used`` of its S (default N) nodes from its own start and composed on the N-node
    window; ``query`` is one number for the whole call (a branch, not a per-row select). ``pmf=True``: the two
    composed measures instead (a client-sampled local run, see :mod:`jaxpriv.events.sampling`)."""

    def one(step_events, step_starts, step_used, step_counts, hh, w0, l_up, l_dn, e, x, reach_ends, a):
        return _row(step_events, step_starts, step_used, step_counts, hh, w0, l_up, l_dn, e, x, reach_ends, a, query,
                    pmf, N, N if S is None else S)

    return map_rows(one, steps, starts, used, counts, h, window_start, lam_up, lam_dn, eta, value, reach, add)
