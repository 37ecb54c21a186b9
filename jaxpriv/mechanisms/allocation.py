"""Random allocation of one Gaussian step among m: the privacy-loss law of a round, bounded both ways (MATH §11).

A round of m steps in which one example takes part in exactly one step, chosen uniformly, each step adding
N(0, σ²) noise to a sum of sensitivity 1. With the example (P) its contribution lies in one coordinate J,
without it (Q) in none, so the likelihood ratio of the round's output is

    X = dP/dQ = (1/m) Σ_{i=1..m} Y_i,   Y_i = e^{(z_i − 1/2)/σ²},

where, under Q, the Y_i are independent lognormal with log Y ~ N(−1/(2σ²), 1/σ²) and E[Y] = 1 (Feldman &
Shenfeld 2025, arXiv 2502.08202; the PLD method of arXiv 2602.17284 works on the same sum). Both
neighbouring directions are functions of X under Q:

* remove (P, Q): loss log X, P-law = X · (Q-law); δ(ε) = E_Q[(X − e^ε)₊];
* add (Q, P): loss −log X with the Q-law; δ(ε) = E_Q[(1 − e^ε X)₊].

Both hockey-stick integrands are convex in X, so a **mean-preserving spread** of each Y_i (connect-the-dots
onto a lattice of spacing g: each cell's mass split between its ends, keeping its mean) gives a sum X⁺ that
dominates the round in both directions (convex order is kept by independent sums); the mean the lattice
cannot hold (the tail above its top, and sums that leave the window) becomes P-mass at X = ∞ (loss +∞).
That is the **upper** law. The **lower** law rounds every Y_i to its nearest node: X = X° + F/m with F a
sum of independent offsets in [−g/2, g/2] whose mean is known, so Bernstein's inequality gives a shift c
with Pr[F < c] ≤ η (remove) or Pr[F > c] ≤ η (add); the shifted law with η of its mass taken off its top is
dominated (the argument of :mod:`jaxpriv.events.sampling`'s dominated side).

The remove direction's upper law is computed as a P-law directly, the Q-law of m − 1 spread summands
convolved with the tilted summand y·q(y) (E_Q[Y_m; S] = (S/m)·Q(S)), so its rounding allowance is an ℓ1
bound on P-masses rather than a Q-mass bound scaled by the window's largest X. The laws are computed on the
host in float64 (numpy FFTs with a normwise rounding allowance that goes to +∞ on the upper side and off the
top on the lower side), then merged onto at most ``ATOMS`` loss bins:
upper by splitting each atom between its bin's ends keeping E_P[e^{−L}] (a spread of e^{−L}, whose
hockey-stick integrand (1 − e^ε e^{−L}·…)₊ is convex), lower by one atom per bin at the P-weighted mean of
e^{−L} (Jensen the other way).
"""

from __future__ import annotations

import functools
import math
import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

# scipy is imported where it is used: this module loads with jaxpriv.events (every accountant), and scipy.fft
# with scipy.special took 0.4 s of a first DP-SGD ε's 3.5 s in a fresh process.

__all__ = ["ATOMS", "round_laws", "round_laws_of", "merge_down"]

#: loss bins of the returned laws (each side, each direction)
ATOMS = 2048
_U = float(np.finfo(np.float64).eps)
#: lattice spacing, in standard deviations of one Y (the spread adds at most g²/4 of variance per step)
_SPACING = 0.02
#: the smallest and largest lattices (nodes); wider windows take a coarser spacing, still certified
_MIN_NODES, _MAX_NODES = 1 << 16, 1 << 20
#: the lower law's lattice (its window drops the P-mass beyond Φ(−6) of one summand's tail)
_LOWER_NODES = 1 << 17
#: the Bernstein miss probability of the lower law, per round
_ETA = 1e-13


def _phi(x):
    from scipy import special

    return special.ndtr(x)


#: Gauss-Legendre rule for cells narrower than _NARROW in z: the masses and excesses of narrow cells are then
#: accurate to a few ulps relative (a difference of Φ values would lose the ratio Φ/mass, ~1e3 in the bulk);
#: the rule's remainder, (Δz)^17 times bounded derivatives of a Gaussian, lies far below the rounding
_GAUSS = np.polynomial.legendre.leggauss(8)
_NARROW = 0.1


def _cell_sums(nodes, nu, s):
    """Per cell [a, b] = [nodes[j], nodes[j+1]] of the lognormal log Y ~ N(ν, s²): its mass, its excess
    E[Y − a; cell] and bounds on their rounding; and the mass and excess E[(Y − top)₊] above the last node.

    Narrow cells (in z = (log y − ν)/s) integrate φ(z) and a·expm1(s(z − z_a))·φ(z) by Gauss-Legendre; wide
    ones (near y = 0) use Φ differences and the partial means E[Y; Y ≤ y] = e^{ν+s²/2} Φ(z − s)."""
    with np.errstate(divide="ignore"):
        z = (np.log(nodes) - nu) / s
    scale = math.exp(nu + s * s / 2)
    za, zb = z[:-1], z[1:]

    def between(a, b):  # Pr[a < Z ≤ b] for standard normal Z, from the side of the median that keeps precision
        return np.where(a >= 0, _phi(-a) - _phi(-b), _phi(b) - _phi(a))

    # each cell by one method only: the Gauss rule on the narrow cells, Φ differences on the rest (most
    # cells of a wide lattice are narrow, and evaluating both everywhere doubled the cost of a round's laws)
    narrow = np.isfinite(za) & (zb - za < _NARROW)
    mass, excess = np.empty(za.size), np.empty(za.size)
    mass_err, excess_err = np.empty(za.size), np.empty(za.size)

    wide = ~narrow
    a, b, low = za[wide], zb[wide], nodes[:-1][wide]
    closed_mass = between(a, b)
    excess[wide] = np.maximum(scale * between(a - s, b - s) - low * closed_mass, 0.0)
    mass[wide] = closed_mass
    small_a, small_b = _phi(-np.abs(a)), _phi(-np.abs(b))
    small_s = _phi(-np.abs(a - s)) + _phi(-np.abs(b - s))
    mass_err[wide] = 4 * _U * (small_a + small_b)
    excess_err[wide] = 4 * _U * (scale * small_s + nodes[1:][wide] * (small_a + small_b))

    t, w = _GAUSS
    a, b = za[narrow], zb[narrow]
    half = ((b - a) / 2)[:, None]
    zk = ((a + b) / 2)[:, None] + half * t
    density = w * np.exp(-zk * zk / 2) / math.sqrt(2 * math.pi) * half
    mass[narrow] = density.sum(1)
    excess[narrow] = np.maximum((density * nodes[:-1][narrow, None] * np.expm1(s * (zk - a[:, None]))).sum(1), 0.0)
    mass_err[narrow] = 16 * _U * mass[narrow]
    excess_err[narrow] = 16 * _U * excess[narrow]
    tail_mass = _phi(-z[-1])
    tail_excess = max(scale * _phi(s - z[-1]) - nodes[-1] * tail_mass, 0.0)
    return mass, excess, tail_mass, tail_excess, mass_err, excess_err


def _spread(nodes, nu, s):
    """Connect-the-dots law of Y on the lattice (a mean-preserving spread) and the P-mass it leaves at ∞
    (the mean above the top node), with a bound on the rounding of each node's weight."""
    g = nodes[1] - nodes[0]
    mass, excess, tail_mass, tail_excess, mass_err, excess_err = _cell_sums(nodes, nu, s)
    up = excess / g
    law = np.zeros(nodes.size)
    law[1:] += up
    law[:-1] += np.maximum(mass - up, 0.0)
    law[-1] += tail_mass
    # each weight: its share of the cell's rounding (and one more ulp for the division and subtraction)
    node_err = np.zeros(nodes.size)
    node_err[1:] += excess_err / g + _U * up
    node_err[:-1] += mass_err + excess_err / g + _U * mass
    node_err[-1] += 4 * _U * tail_mass
    return law, tail_excess, node_err


def _nearest(nodes, nu, s):
    """The law of Y rounded to its nearest node, restricted to Y ≤ the top node (the rest is dropped: the
    lower side may drop mass), the conditional mean of the offset Y − node there (offsets lie in
    [−g/2, g/2]), and a bound on the masses' rounding."""
    g = nodes[1] - nodes[0]
    edges = np.concatenate([[0.0], nodes[:-1] + g / 2, [nodes[-1]]])
    mass, excess, _, _, mass_err, excess_err = _cell_sums(edges, nu, s)
    # E[Y − node; cell] = E[Y − lower edge; cell] − (node − lower edge)·mass
    offsets = excess - (nodes - edges[:-1]) * mass
    kept = float(np.sum(mass))
    return mass, float(np.sum(offsets)) / kept, float(np.sum(mass_err + excess_err + 4 * _U * mass * (1 + nodes)))


def _norm(a) -> float:
    return math.sqrt(float(np.sum(a * a)))


def _fft_size(size: int) -> int:
    """The shortest fast transform length for a linear convolution of two laws on ``size`` nodes: the next
    5-smooth length ≥ 2·size − 1 (a lattice of 2²⁰ + 1 nodes takes 2²¹ + 2, not the next power of two
    2²², which doubled every transform's cost)."""
    from scipy import fft

    return fft.next_fast_len(2 * size - 1, real=True)


def _product(fa, fb, norms, size, n):
    """The inverse of the transforms' product on the first ``size`` nodes and what lies beyond, negatives
    clipped, and a bound on the ℓ1 rounding: the FFT's normwise error ≲ u·log₂n·‖·‖₂ (8× margin), and
    ℓ1 ≤ √n ℓ2."""
    from scipy import fft

    c = fft.irfft(fa * fb, n)[: 2 * size - 1]
    err = 8 * _U * math.log2(n) * math.sqrt(n) * (norms + _norm(c))
    c = np.maximum(c, 0.0)
    return c[:size], c[size:], err


def _convolve(a, b, size):
    """a ∗ b of two laws on ``size`` nodes: (the first ``size`` nodes, the rest, ℓ1 rounding bound)."""
    from scipy import fft

    n = _fft_size(size)
    return _product(fft.rfft(a, n), fft.rfft(b, n), _norm(a) + _norm(b), size, n)


def _power(law, count, size, fold_top):
    """The law of a sum of ``count`` independent draws of ``law`` on ``size`` nodes by binary powering (one
    transform of each square serves both the next square and the running product). Sums beyond the
    window: folded onto the top node with their excess (in nodes) returned (``fold_top``, the upper side)
    or dropped (the lower side). Returns (law, excess, ℓ1 rounding)."""
    from scipy import fft

    n = _fft_size(size)
    result, excess, err = None, 0.0, 0.0
    base, k = law[:size].copy(), count
    while k:
        f_base, base_norm = fft.rfft(base, n), _norm(base)
        if k & 1:
            if result is None:
                result = base.copy()
            else:
                result, beyond, e = _product(fft.rfft(result, n), f_base, _norm(result) + base_norm, size, n)
                excess, err = excess + _fold(result, beyond, fold_top), err + e
        k >>= 1
        if k:
            base, beyond, e = _product(f_base, f_base, 2 * base_norm, size, n)
            excess, err = excess + _fold(base, beyond, fold_top), err + e
    return result, excess, err


def _fold(law, beyond, fold_top):
    """Put the mass beyond the window on its top node (upper side); return its excess mean in nodes."""
    if not fold_top or beyond.size == 0:
        return 0.0
    law[-1] += beyond.sum()
    return float(np.sum(beyond * np.arange(1, beyond.size + 1)))


def _bernstein(count, g, eta):
    """The deviation t with Pr[Σ F − E Σ F < −t] ≤ η (and the same above) for ``count`` independent offsets
    of range g and variance ≤ g²/4."""
    log_term = math.log(1.0 / eta)
    variance = count * g * g / 4
    return math.sqrt(2 * variance * log_term) + g * log_term / 3


# ~130 KB a setting: 1,024 of them hold ~134 MB. The PLD interval asks a batch's laws again when it refines
# its grid, so a batch of up to 1,024 distinct settings is computed once, not twice (64 before).
def _checked(sigma, steps) -> tuple[float, int]:
    """(σ, m) as float and int, or a ValueError naming the one out of range (m must be a whole number:
    2.5 steps is an error, not 2)."""
    sigma = float(sigma)
    if not sigma > 0 or not math.isfinite(sigma):
        raise ValueError(f"sigma must be a finite number > 0, got {sigma}")
    m = float(steps)
    if isinstance(steps, bool) or not math.isfinite(m) or m != math.floor(m) or m < 1:
        raise ValueError(f"steps must be an integer >= 1, got {steps}")
    return sigma, int(m)


def round_laws(sigma: float, steps: int) -> dict:
    """The privacy-loss laws of one round of random allocation (one of ``steps`` = m Gaussian steps of noise
    multiplier σ), as P-mass atoms: ``{"remove_upper", "remove_lower", "add_upper", "add_lower"}``, each
    (losses, masses) with +∞ last on the upper sides. See the module docstring for why each is safe.

    Example:
      >>> from jaxpriv.mechanisms import allocation
      >>> laws = allocation.round_laws(2.0, 4)
      >>> losses, masses = laws["remove_upper"]
      >>> bool(abs(masses.sum() - 1.0) < 1e-9)
      True
    """
    return _round_laws(*_checked(sigma, steps))


# checked before the cache: lru_cache keys compare equal across True == 1 and 2.0 == 2, so a cached
# round_laws(1.0, 1) would otherwise answer round_laws(1.0, True) without the check
@functools.lru_cache(maxsize=1024)
def _round_laws(sigma: float, m: int) -> dict:
    s = 1.0 / sigma
    sd_y = math.sqrt(math.expm1(s * s))
    bulk = m + 12.0 * math.sqrt(m) * sd_y  # the sum's bulk under Q

    # remove, upper: the P-law of the spread sum, over a window that reaches one summand far in the tail of
    # its P-law (log Y' ~ N(s²/2, s²)); what leaves the lattice becomes P-mass at ∞
    nodes, p_law, p_inf = _tilted_sum(m, s, sd_y, bulk + math.exp(s * s / 2 + 8.0 * s))
    remove_upper = (np.log(nodes[1:] / m), p_law[1:], p_inf)  # node 0 (X = 0) holds no P-mass

    # add, upper: X only matters up to a few e^{−ε}, and sums folded down onto the top only raise
    # E_Q[(1 − e^ε X)₊]: a window on the bulk, finer
    nodes, total, _, err = _spread_sum(m, s, sd_y, bulk)
    add_upper = (-np.log(nodes[1:] / m), total[1:], total[0] + err)

    # lower: finer lattices (the lower side may drop what leaves a window), nearest nodes, shifted by the
    # smaller of Bernstein's bound and the sure one (|F| ≤ g/2 each) on the offsets; remove needs the P-law,
    # the sum with one Y' in it, over a window into Y''s tail; add only the bulk of the Q-law
    remove_lower = _rounded_sum(m, s, sd_y, bulk + math.exp(s * s / 2 + 6.0 * s), with_p=True)
    add_lower = _rounded_sum(m, s, sd_y, bulk, with_p=False)
    return {"remove_upper": _merge_up(*remove_upper), "add_upper": _merge_up(*add_upper),
            "remove_lower": merge_down(*remove_lower), "add_lower": merge_down(*add_lower)}


#: most round laws computed at once (each holds a few arrays of up to 2²¹ float64 transiently)
_MAX_THREADS = 8


def round_laws_of(settings) -> list[dict]:
    """:func:`round_laws` of each (σ, m) in ``settings``, in order: every distinct setting once (a batch
    larger than the per-process cache would otherwise recompute a repeated one), the distinct ones on up
    to min(the usable cores, 8) threads — numpy's ufuncs and scipy's FFTs release the GIL, and the laws of
    one setting do not depend on another's.

    Example:
      >>> from jaxpriv.mechanisms import allocation
      >>> a, b, c = allocation.round_laws_of([(2.0, 4), (3.0, 4), (2.0, 4)])
      >>> a is c, a is allocation.round_laws(2.0, 4)
      (True, True)
    """
    keys = [_checked(sigma, m) for sigma, m in settings]
    distinct = list(dict.fromkeys(keys))
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    workers = min(len(distinct), cores, _MAX_THREADS)
    if workers > 1:
        with ThreadPoolExecutor(workers) as pool:
            laws = dict(zip(distinct, pool.map(lambda key: _round_laws(*key), distinct)))
    else:
        laws = {key: _round_laws(*key) for key in distinct}
    return [laws[key] for key in keys]


#: the upper laws' bins start where the P-mass below falls under this (what lies below moves up to it)
_FLOOR_MASS = 1e-30


def _spread_sum(m: int, s: float, sd_y: float, top: float):
    """The upper law's sum of m spread summands over [0, top]: (nodes, Q-law on them, the mean beyond the
    lattice in units of S — each summand's tail above the top and the excess of the sums folded onto it —
    and the ℓ1 rounding bound of the law)."""
    g, nodes = _lattice(top, sd_y)
    spread, tail_excess, node_err = _spread(nodes, -s * s / 2, s)
    total, excess, fft_err = _power(spread, m, nodes.size, fold_top=True)
    return nodes, total, m * tail_excess + excess * g, fft_err + m * float(node_err.sum())


def _tilted_sum(m: int, s: float, sd_y: float, top: float):
    """The remove direction's upper law as a P-law: the sum S of m spread summands over [0, top] under P,
    which is the Q-law of m − 1 of them convolved with the tilted summand y·q(y) (P = X·Q with X = S/m, and
    by symmetry E_Q[Y_m; S] = (S/m)·Q(S)). Returns (nodes, P-law on them, P-mass at ∞: the tilted summand's
    mean above the top, the sums that leave the window, and every rounding as ℓ1 bounds on P-masses).
    Computing P-masses directly keeps their rounding at the Q-law's ℓ1 bound; multiplying a Q-law by X, as
    before, scaled it by the window's largest X (top/m: 10⁴ and more at σ ≤ 0.7)."""
    g, nodes = _lattice(top, sd_y)
    spread, tail_excess, node_err = _spread(nodes, -s * s / 2, s)
    tilted = nodes * spread  # the P-law of one summand; its missing mass is the mean above the top
    tilted_err = float(np.sum(nodes * node_err)) + _U * float(np.sum(tilted))
    if m == 1:
        return nodes, tilted, tail_excess + tilted_err
    # the other m − 1 summands under Q; sums beyond the window are dropped (nonnegative summands: a partial
    # sum beyond it means the whole one is), and their mass, at most 1 − what remains, goes to ∞
    rest, _, fft_err = _power(spread, m - 1, nodes.size, fold_top=False)
    rest_err = fft_err + (m - 1) * float(node_err.sum())
    law, beyond, conv_err = _convolve(rest, tilted, nodes.size)
    left = max(1.0 - float(np.sum(rest)), 0.0) + rest_err
    return nodes, law, tail_excess + left + float(np.sum(beyond)) + rest_err + tilted_err + conv_err


def _rounded_sum(m: int, s: float, sd_y: float, top: float, with_p: bool):
    """The lower law of one direction: the sum of m summands rounded to the nearest node of a fine lattice
    over [0, top], as (losses, P-masses, mass to take off the top). ``with_p``: the remove direction's P-law
    (one summand Y' with log Y' ~ N(s²/2, s²), loss log X, offsets' sum bounded below); else the add
    direction's Q-law (loss −log X, offsets' sum bounded above)."""
    h, nodes = _lattice(top, sd_y, fine=True)
    near_q, mean_q, err_q = _nearest(nodes, -s * s / 2, s)
    if with_p:
        last, mean_last, err_last = _nearest(nodes, s * s / 2, s)
    else:
        last, mean_last, err_last = near_q, mean_q, err_q
    dev = min(_bernstein(m, h, _ETA), m * h / 2) + m * (err_q + err_last)  # the offsets' means are known to this
    if m > 1:
        rest, _, err_rest = _power(near_q, m - 1, nodes.size, fold_top=False)
    else:
        rest, err_rest = np.eye(1, nodes.size)[0], 0.0
    law, _, err_last_fft = _convolve(rest, last, nodes.size)
    removed = _ETA + err_rest + err_last_fft + m * max(err_q, err_last)
    mean = ((m - 1) * mean_q + mean_last) / m
    with np.errstate(divide="ignore"):
        if with_p:
            return np.log(np.maximum(nodes / m + mean - dev / m, 0.0)), law, removed
        return -np.log(nodes / m + mean + dev / m), law, removed


def _lattice(top: float, sd_y: float, fine: bool = False):
    """(g, nodes 0, g, 2g, … ≥ top): spacing _SPACING·sd(Y), finer where the window is small (at least
    _MIN_NODES nodes, or _LOWER_NODES when ``fine``), coarser where it is wide (at most _MAX_NODES)."""
    g = max(min(_SPACING * sd_y, top / (_LOWER_NODES if fine else _MIN_NODES)), top / _MAX_NODES)
    size = int(math.ceil(top / g)) + 1
    return g, g * np.arange(size, dtype=np.float64)


def _bins(losses, masses):
    """ATOMS + 1 bin edges from the loss below which at most _FLOOR_MASS of the mass lies to the largest."""
    order = np.argsort(losses)
    below = np.cumsum(masses[order])
    lo = losses[order][min(np.searchsorted(below, _FLOOR_MASS), losses.size - 1)]
    hi = max(losses.max(), lo + 1e-9)
    return np.linspace(lo, hi, ATOMS + 1)


def _live(losses, masses):
    keep = np.isfinite(losses) & (masses > 0)
    return losses[keep], masses[keep]


def _merge_up(losses, masses, p_inf):
    """Atoms spread onto the bin edges keeping E_P[e^{−L}] per atom (a spread of e^{−L}; atoms below the
    first edge move up to it), and +∞ last."""
    losses, masses = _live(losses, masses)
    edges = _bins(losses, masses)
    losses = np.maximum(losses, edges[0])
    j = np.clip(np.searchsorted(edges, losses, side="right") - 1, 0, ATOMS - 1)
    a, b = edges[j], edges[j + 1]
    # weight at the upper edge b: (e^{−a} − e^{−ℓ})/(e^{−a} − e^{−b}), computed relative to e^{−a}
    w_b = np.clip(-np.expm1(a - losses) / -np.expm1(a - b), 0.0, 1.0)
    out = np.bincount(j + 1, masses * w_b, ATOMS + 1) + np.bincount(j, masses * (1.0 - w_b), ATOMS + 1)
    return np.append(edges, np.inf), np.append(out, max(p_inf, 0.0))


def merge_down(losses, masses, removed):
    """A dominated law of at most ATOMS atoms from (``losses``, P-``masses``) float64 arrays: the outcomes
    whose losses share one of ATOMS bins merged into one atom (a post-processing: its loss is log(ΣP/ΣQ), at
    the P-weighted mean of e^{−L}; atoms far below the first bin are dropped, which only lowers δ), then
    ``removed`` of the mass taken off the top (MATH §11.2, the lower side). Returns (losses, masses).

    Example:
      >>> import numpy as np
      >>> from jaxpriv.mechanisms import allocation
      >>> losses, masses = allocation.merge_down(np.array([0.0, 1e-12, 1.0]), np.array([0.25, 0.25, 0.5]), 0.0)
      >>> bool(masses.sum() == 1.0 and losses.size <= allocation.ATOMS)
      True
    """
    losses, masses = _live(losses, masses)
    edges = _bins(losses, masses)
    keep = losses > edges[0] - 50.0
    losses, masses = losses[keep], masses[keep]
    j = np.clip(np.searchsorted(edges, losses, side="right") - 1, 0, ATOMS - 1)
    mass = np.bincount(j, masses, ATOMS)
    # mean of e^{−(ℓ − a_j)} within bin j, so that the exponent stays small
    rel = np.bincount(j, masses * np.exp(-(losses - edges[j])), ATOMS)
    with np.errstate(divide="ignore", invalid="ignore"):
        merged = np.where(mass > 0, edges[:-1] - np.log(rel / mass), edges[:-1])
    above = np.cumsum(mass[::-1])[::-1]  # mass at or above each bin
    cut = np.clip(removed - (above - mass), 0.0, mass)  # what the removal takes from each bin
    return merged, mass - cut
