"""Log pmf of a Poisson-binomial count (sum of independent Bernoulli(p_i)) over a window, with every
value accurate to ~1e-13 relative, even far in the tails (MATH §3.1, personalized clone counts).

Method: **exponentially tilted FFT**. Equal probabilities are grouped (a group is a Binomial). The count
X = Σ Bern(p_i) has the characteristic function φ(ω) = Π_g (1 + p_g(e^{iω} − 1))^{m_g}, evaluated in
closed form (no per-group FFT): log|1 + p(e^{iω}−1)| = ½ log1p(−4p(1−p) sin²(ω/2)) and its argument
atan2(p sin ω, 1 − 2p sin²(ω/2)) have no cancellation. A plain inverse FFT has an *absolute* error of
~1e-16 × max pmf, so values in the tails would be garbage (this is why "FFT after shifting by the max"
is not safe). Tilting fixes it: the tilted law f_θ(k) = f(k) e^{θk − K(θ)} (K = log E e^{θX}) is again
Poisson-binomial with p_θ = p e^θ/(1 − p + p e^θ), so for a grid of tilts θ_j whose tilted means x_j
step through the window by about one tilted standard deviation, each k is near the mode of some f_{θ_j}
and log f(k) = log f_{θ_j}(k) − θ_j k + K(θ_j) keeps full relative accuracy. For each k the tilt with
the smallest error estimate is used.

Window: [lo, hi] = mean ± (13 sd + 32), clipped to the support. The mass outside is bounded by the
Chernoff bound exp(K(θ) − θ·a) at the saddle point of each edge (≈ e^{−84}) and returned as
``dropped``, which a privacy caller adds to δ (MATH §0.1). The circle of the FFT has at least twice the
window's length, so wrapped-around tilted mass reaching the window is < e^{−300} relative.

Error estimate (``rel_err``, per value): eps·(8 log₂N + 32) Σ|φ_θ|/N for the FFT, eps·(16 + G)·Σ|φ_θ|
(|log|φ_θ|| + |arg φ_θ|)/N for the (sequentially summed) log characteristic function over G groups,
divided by f_θ(k), plus eps·8(|θk| + |K(θ)|) for the un-tilting. It is an a-priori estimate, not a
proof; against an exact (float64 DP, ≤ 2n ulp) oracle the measured error is ≥ 10× below it (tests).

Cost: O(T·G·N') with T ≈ 26 + 64/sd tilts, G groups and N' of the N ≈ 2·window frequencies: those
where the bound |φ_θ(ω)| ≤ exp(−2 sin²(ω/2)·Var_θ) is below e^{−800} are exactly 0 in float64 and are
not evaluated (N' = N/2 + 1 up to sd 20, 0.13–0.19·N at sd 50, < 0.01·N at sd 1,500). n = 10⁷ with a few
hundred groups takes seconds. Leave-one-out laws (all users but one of group r), as needed for per-user
accounting, cost one extra log-factor subtraction and one inverse FFT per tilt and row.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .._batching import power_of_two, row_bucket, static_size
from .._numerics import check_array, float64, kernel_jit

__all__ = ["poisson_binomial_logpmf", "PoissonBinomialWindow"]

_EPS = float(np.finfo(np.float64).eps)
_SDS = 13.0
_MARGIN = 32
_ELEMENTS = 1 << 22  # complex values per chunk of (rows × tilts × frequencies)


class PoissonBinomialWindow(NamedTuple):
    """log Pr[X = lo + j] for j = 0…len−1 (``logpmf``), the first count ``lo``, an upper bound
    ``dropped`` on Pr[X ∉ [lo, lo + len − 1]] (add it to δ), and an estimate ``rel_err`` of the relative
    error of each exp(logpmf) value."""

    logpmf: np.ndarray
    lo: int
    dropped: float
    rel_err: np.ndarray


# --------------------------------------------------------------------------------------------------
# numpy helpers: grouping, cumulant generating function, tilts
# --------------------------------------------------------------------------------------------------


def _group(probs, counts=None):
    """Distinct probabilities and their multiplicities (p = 0 removed: it never contributes)."""
    p = np.asarray(probs, dtype=np.float64).reshape(-1)
    m = np.ones_like(p) if counts is None else np.asarray(counts, dtype=np.float64).reshape(-1)
    keep = (p > 0) & (m > 0)
    p, m = p[keep], m[keep]
    uniq, inverse = np.unique(p, return_inverse=True)
    return uniq, np.bincount(inverse, weights=m, minlength=uniq.size)


def _logit(p):
    with np.errstate(divide="ignore"):
        return np.log(p) - np.log1p(-p)


def _cgf(p, m, theta):
    """K(θ) = Σ m log(1 − p + p e^θ), shape (T,), accurate (log1p(p·expm1 θ))."""
    theta = np.asarray(theta, dtype=np.float64)
    return np.sum(m[None, :] * _log_factor(p[None, :], theta[:, None]), axis=1)


def _log_factor(p, theta):
    """log(1 − p + p e^θ) elementwise, accurate for every θ (no overflow for large θ)."""
    with np.errstate(over="ignore", divide="ignore"):
        small = np.log1p(p * np.expm1(np.minimum(theta, 30.0)))
        large = theta + np.log(p) + np.log1p((1.0 - p) * np.exp(-np.maximum(theta, 30.0)) / np.maximum(p, 1e-300))
    return np.where(theta < 30.0, small, np.where(p > 0, large, 0.0))


def _tilted_moments(p, m, theta):
    lp = _logit(p)[None, :] + np.asarray(theta)[:, None]
    pt = 1.0 / (1.0 + np.exp(-lp))
    qt = 1.0 / (1.0 + np.exp(lp))
    return np.sum(m * pt, axis=1), np.sum(m * pt * qt, axis=1)


def _solve_tilt(p, m, targets):
    """θ with tilted mean = target (0 < target < Σm), by bisection (monotone), vectorised."""
    targets = np.asarray(targets, dtype=np.float64)
    span = float(np.max(np.abs(np.clip(_logit(p), -800, 800)))) + 60.0
    lo = np.full(targets.shape, -span)
    hi = np.full(targets.shape, span)
    for _ in range(110):
        mid = 0.5 * (lo + hi)
        mean, _ = _tilted_moments(p, m, mid)
        below = mean < targets
        lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
    return 0.5 * (lo + hi)


def _tilts(p, m, lo, hi, total):
    """Tilts whose tilted means step from lo to hi by about one tilted standard deviation."""
    xs, x = [], float(lo) + 0.5
    while True:
        x = min(max(x, 0.25), total - 0.25)
        xs.append(x)
        if x >= min(hi, total - 0.25):
            break
        theta = _solve_tilt(p, m, [x])
        _, var = _tilted_moments(p, m, theta)
        x = x + max(1.0, float(np.sqrt(var[0])))
    return _solve_tilt(p, m, xs), np.asarray(xs)


# --------------------------------------------------------------------------------------------------
# JAX kernel: tilted characteristic functions and their inverse FFTs
# --------------------------------------------------------------------------------------------------


def _log_char(logit_p, theta, s2, sinw):
    """(log|·|, arg) of 1 + p_θ(e^{iω} − 1), p_θ = expit(logit p + θ); broadcasting shapes."""
    x = logit_p + theta
    pt, qt = jax.nn.sigmoid(x), jax.nn.sigmoid(-x)
    re = 0.5 * jnp.log1p(jnp.maximum(-4.0 * pt * qt * s2, -1.0))
    re = jnp.maximum(re, -1e4)  # exactly −inf only at p_θ = ½, ω = π: φ = 0 there anyway
    im = jnp.arctan2(pt * sinw, 1.0 - 2.0 * pt * s2)
    return re, im


def _frequencies(size: int, live: int):
    k = jnp.arange(live, dtype=jnp.float64)
    omega = 2.0 * jnp.pi * k / size
    return k, omega, jnp.sin(0.5 * omega) ** 2, jnp.sin(omega)


#: |φ_θ(ω)| below e^{−800} is exactly 0 once exponentiated in float64 (the smallest subnormal is e^{−744.4}).
_UNDERFLOW = 800.0


def _live_frequencies(size: int, var: float) -> int:
    """How many of the N/2 + 1 frequencies of an inverse FFT of size N can have |φ_θ| > 0 in float64, for
    laws whose variance is at least ``var`` at every tilt; a static count on the :func:`static_size` ladder.

    ½ log1p(−x) ≤ −x/2 bounds each factor, so log|φ_θ(ω)| ≤ −2 sin²(ω/2)·Var_θ: from the first k with
    2 sin²(πk/N)·var ≥ 800 on, exp(log|φ_θ|) underflows to exactly 0, and the kernels' zero padding of
    those frequencies gives the inverse FFT and the error estimates the values a full evaluation gives, up to
    the rounding of vectorised exp/sin/cos over arrays of another length (a few ulp)
    (a law of standard deviation 50 needs a third of them, rounded up on the ladder; one below 20 all)."""
    half = size // 2 + 1
    if 2.0 * var <= _UNDERFLOW:
        return half
    first_dead = math.ceil(size * math.asin(math.sqrt(_UNDERFLOW / (2.0 * var))) / math.pi)
    return min(half, static_size(first_dead))


@functools.partial(kernel_jit, static_argnames=("size", "live", "group_chunk"))
def _char_kernel(logit_p, m, theta, *, size: int, live: int, group_chunk: int):
    """(log|φ_θ|, arg φ_θ) of the full law for every tilt at the first ``live`` frequencies, shape (T, live):
    one pass over the groups."""
    k, omega, s2, sinw = _frequencies(size, live)

    def body(carry, chunk):
        lp, mm = chunk
        re, im = _log_char(lp[:, None, None], theta[None, :, None], s2, sinw)  # (gc, T, K)
        return (carry[0] + jnp.sum(mm[:, None, None] * re, axis=0),
                carry[1] + jnp.sum(mm[:, None, None] * im, axis=0)), None

    zeros = jnp.zeros((theta.shape[0], k.shape[0]))
    (re, im), _ = jax.lax.scan(body, (zeros, zeros),
                               (logit_p.reshape(-1, group_chunk), m.reshape(-1, group_chunk)))
    return re, im


@functools.partial(kernel_jit, static_argnames=("size", "width"))
def _tilted_kernel(re, im, theta, k_rows, lo, logit_r, groups, *, size: int, width: int):
    """Rows r (leave one user with logit_r out; −inf = none), tilts t: (log f estimate, rel error).
    ``re``, ``im``: :func:`_char_kernel`'s, at its live frequencies; the others are zeros of the FFT."""
    k, omega, s2, sinw = _frequencies(size, re.shape[-1])
    r_re, r_im = _log_char(logit_r[:, None, None], theta[None, :, None], s2, sinw)  # (R, T, K)
    re = re[None] - jnp.where(jnp.isfinite(logit_r)[:, None, None] | (logit_r > 0)[:, None, None], r_re, 0.0)
    im = im[None] - jnp.where(jnp.isfinite(logit_r)[:, None, None] | (logit_r > 0)[:, None, None], r_im, 0.0)
    mag = jnp.exp(re)
    phase = omega * lo - im  # irfft uses e^{+iωj}: invert with the conjugate of φ e^{−iω·lo}
    f = jnp.fft.irfft(mag * (jnp.cos(phase) + 1j * jnp.sin(phase)), n=size, axis=-1)[..., :width]  # (R,T,W)

    weight = jnp.where(k == 0, 1.0, 2.0) / size
    fft_err = (8.0 * math.log2(size) + 32.0) * jnp.sum(weight * mag, axis=-1)
    char_err = (16.0 + groups) * jnp.sum(weight * mag * (jnp.abs(re) + jnp.abs(im)), axis=-1)
    abs_err = _EPS * (fft_err + char_err)  # (R, T)

    j = jnp.arange(width, dtype=jnp.float64)
    positive = f > 0
    rel = jnp.where(positive, abs_err[:, :, None] / jnp.where(positive, f, 1.0), jnp.inf)
    rel = rel + 8.0 * _EPS * (jnp.abs(theta[None, :, None] * (lo + j)) + jnp.abs(k_rows[:, :, None]))
    best = jnp.argmin(rel, axis=1)  # (R, W)
    pick = lambda a: jnp.take_along_axis(a, best[:, None, :], axis=1)[:, 0, :]
    # The log (and un-tilting) only for the chosen tilt of each value: the same arithmetic as doing it for
    # every tilt and picking afterwards, at 1/T of the cost.
    f_best, theta_best, k_best = pick(f), theta[best], pick(jnp.broadcast_to(k_rows[:, :, None], f.shape))
    log_f = jnp.log(jnp.where(f_best > 0, f_best, 1.0)) - theta_best * (lo + j) + k_best
    return log_f, pick(rel)


def leave_one_out_windows(p, m, remove):
    """Shared window and per-row leave-one-out log pmfs. ``remove``: probabilities of one removed user
    per row (0 = none). Returns (logpmf (R, W), lo, hi_rows (R,), dropped (R,), rel_err (R, W)).

    The law of C with one user left out, used by :mod:`jaxpriv.shuffle.personalized` and
    :mod:`jaxpriv.events.shuffled`."""
    remove = np.asarray(remove, dtype=np.float64).reshape(-1)
    total = float(np.sum(m))
    mean = float(np.sum(m * p))
    sd = float(np.sqrt(np.sum(m * p * (1.0 - p))))
    lo = int(max(0.0, math.floor(mean - _SDS * sd - _MARGIN)))
    hi = int(min(total, math.ceil(mean + _SDS * sd + _MARGIN)))
    width = hi - lo + 1
    size = 1 << max(6, (2 * width + 64 - 1).bit_length())
    theta, _ = _tilts(p, m, lo, hi, total) if total > 0.5 else (np.zeros(1), None)
    theta = np.concatenate([theta, np.full((-theta.size) % 8, theta[-1])])  # repeated tilts: a static count

    k_full = _cgf(p, m, theta)
    k_rows = k_full[None, :] - _log_factor(remove[:, None], theta[None, :])  # (R, T)

    # Dropped mass per row: Chernoff at the saddle point of each edge (any θ of the right sign is valid).
    dropped = np.zeros(remove.size)
    for edge, outside in ((lo - 1, lo >= 1), (hi + 1, hi + 1 <= total)):
        if not outside:
            continue
        th = _solve_tilt(p, m, [edge])
        k_edge = _cgf(p, m, th)[0] - _log_factor(remove, th[0])
        dropped += np.exp(np.minimum(k_edge - th[0] * edge, 0.0))
    dropped = dropped * (1.0 + 1e-12)

    # Frequencies where every row's |φ_θ| underflows are not evaluated (_live_frequencies): each row leaves
    # out one user of the groups, whose factor lowers the variance by p_θ(1 − p_θ) ≤ ¼.
    members = bool(np.isin(remove[remove > 0], p).all())
    live = _live_frequencies(size, float(_tilted_moments(p, m, theta)[1].min()) - 0.25) if members else size // 2 + 1

    # Static shapes in a few sizes per octave (groups, window width, rows), so that budgets that differ a
    # little reuse one compiled program: padding groups have p = 0 (no effect), padding rows are dropped.
    gc = 1 << min(8, max(0, (p.size - 1).bit_length()))
    gc = max(1, min(gc, _ELEMENTS // (theta.size * live) or 1))
    pad = -(-static_size(p.size) // gc) * gc - p.size
    kernel_width = min(power_of_two(width), size)
    logit_p = np.concatenate([_logit(p), np.full(pad, -np.inf)])
    mm = np.concatenate([m, np.zeros(pad)])
    logit_r = _logit(remove)  # −inf for "no removal" (p = 0)

    rows = max(1, _ELEMENTS // (theta.size * size))
    out_f, out_e = [], []
    with float64():
        re, im = _char_kernel(jnp.asarray(logit_p), jnp.asarray(mm), jnp.asarray(theta), size=size, live=live,
                              group_chunk=gc)
        for start in range(0, remove.size, rows):
            sl = slice(start, start + rows)
            nr = remove[sl].size
            padded = rows if remove.size > rows else row_bucket(nr, rows)
            lr = np.concatenate([logit_r[sl], np.full(padded - nr, -np.inf)])
            kr = np.concatenate([k_rows[sl], np.zeros((padded - nr, theta.size))])
            lf, rel = _tilted_kernel(re, im, jnp.asarray(theta), jnp.asarray(kr), float(lo), jnp.asarray(lr),
                                     float(p.size), size=size, width=kernel_width)
            out_f.append(np.asarray(lf)[:nr, :width])
            out_e.append(np.asarray(rel)[:nr, :width])
    logpmf = np.concatenate(out_f)
    rel_err = np.concatenate(out_e)
    top = np.full(remove.size, float(hi)) - (remove == 1.0)  # a removed p = 1 user lowers the support
    beyond = (lo + np.arange(width))[None, :] > np.floor(total - (remove > 0))[:, None]
    logpmf = np.where(beyond, -np.inf, logpmf)
    # impossible counts have no error to bound (their estimate divides by a zero pmf: NaN or inf)
    rel_err = np.where(np.isfinite(logpmf), rel_err, 0.0)
    return logpmf, lo, top, dropped, rel_err


def poisson_binomial_logpmf(probs, *, counts=None) -> PoissonBinomialWindow:
    """log pmf of X = Σ_i Bernoulli(p_i) over a window [lo, lo + len − 1] that holds all but ``dropped``
    of the mass (mean ± (13 sd + 32)); see the module docstring for the method and its accuracy.

    Args:
      probs: probabilities p_i ∈ [0, 1] (any shape, flattened; at least one value).
      counts: optional non-negative integer multiplicities of ``probs`` (same length): X then sums
        ``counts[i]`` copies of Bernoulli(p_i). Lets n = 10⁷ users with few distinct p be passed cheaply.

    Returns:
      :class:`PoissonBinomialWindow` ``(logpmf, lo, dropped, rel_err)``: ``logpmf[j] = log Pr[X = lo + j]``
      (−inf where impossible), ``dropped`` ≥ Pr[X outside the window] (Chernoff bound; add it to δ), and
      ``rel_err[j]`` an estimate of the relative error of ``exp(logpmf[j])``.

    Example:
      >>> import numpy as np
      >>> from scipy import stats
      >>> w = poisson_binomial_logpmf(np.full(1000, 0.3))
      >>> k = w.lo + np.arange(w.logpmf.size)
      >>> bool(np.allclose(w.logpmf, stats.binom.logpmf(k, 1000, 0.3), rtol=0, atol=1e-11))
      True
    """
    p = check_array("probs", probs, 0.0, 1.0)
    p = np.asarray(p).reshape(-1)
    if counts is not None:
        c = np.asarray(check_array("counts", counts, 0.0, np.inf, integer=True)).reshape(-1)
        if c.shape != p.shape:
            raise ValueError(f"counts must have the length of probs ({p.size}), got {c.size}")
    else:
        c = None
    gp, gm = _group(p, c)
    # p = 1 users are a deterministic shift: left in, the FFT would put rounding noise on impossible counts.
    certain = int(gm[gp == 1.0].sum())
    gp, gm = gp[gp < 1.0], gm[gp < 1.0]
    if gp.size == 0:  # X = certain surely
        return PoissonBinomialWindow(np.zeros(1), certain, 0.0, np.zeros(1))
    logpmf, lo, _, dropped, rel = leave_one_out_windows(gp, gm, np.zeros(1))
    return PoissonBinomialWindow(logpmf[0], lo + certain, float(dropped[0]), rel[0])
