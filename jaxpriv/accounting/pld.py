"""The PLD accountant: privacy-loss distributions on a grid, composed by FFT, with certified bounds (SPEC §7).

For each step of an event the privacy loss law of its dominating pair (:mod:`.pairs`) is put on a grid
of spacing h twice:

* **pessimistic**, by "connect the dots" (Doroshenko, Ghazi, Kamath, Kumar & Manurangsi, PETS 2022): a
  loss ℓ between two nodes ℓ_k < ℓ ≤ ℓ_{k+1} is split between them with the weight on ℓ_k equal to
  (e^{−ℓ} − e^{−ℓ_{k+1}})/(e^{−ℓ_k} − e^{−ℓ_{k+1}}). The split keeps the P- and Q-masses, and in
  likelihood-ratio space under Q it is a mean-preserving spread, so the hockey-stick curve of the
  discrete pair lies above the true one at every e^ε (the chord of a convex function): the discrete pair
  dominates the true pair, and so do all its compositions. For a continuous part only the interval
  masses P(I), Q(I) are needed: the weight on ℓ_k is expm1(ℓ_{k+1} − r)/expm1(h) with r = log(P(I)/Q(I)),
  lowered by a margin for rounding (moving mass up only makes the bound looser). Mass above the grid goes
  to a +inf atom, mass below it up to the lowest node.
* **optimistic**, by rounding every loss down to its node (mass below or above the grid is dropped): a
  stochastically smaller loss, so every composition's δ(ε) is a lower bound. Rounding down shifts T
  composed losses by about T·h/2, which would make the interval useless; that shift is given back with a
  proof: the fractional parts F_t = L_t − ⌊L_t⌋ ∈ [0, h) are independent, so by Hoeffding
  Pr[Σ F_t < E ΣF_t − s] ≤ e^{−2s²/(T h²)}, and δ(ε) ≥ δ_opt(ε − c) − e^{−2s²/(Th²)} with
  c = E ΣF_t − s. Within an interval, Jensen gives E[L | I] ≥ log(P(I)/Q(I)), a lower bound on each E F_t.

Composition is a product of the per-step pmfs' real FFTs raised to their counts (T-fold self-composition
in the Fourier domain), on a circular grid of N nodes placed over the composed loss's bulk. The window is
chosen from the discrete pmfs' moment generating functions (Chernoff: Pr[ΣL ≥ U] ≤ M(λ)^T e^{−λU}), and
that tail bound — the most mass the circular convolution can wrap into the window — is added to the
pessimistic δ and taken off the optimistic one (Koskela, Jälkö, Prediger & Honkela, AISTATS 2021). An
allowance for the FFT's floating-point error (standard bounds: ≲ u·log₂N·‖p‖₂ per transform, amplified at
most T-fold by the power) is added on the same sides. δ(ε) of a discrete PLD is exact between nodes, so
ε(δ) is solved in closed form on the right interval (SPEC §7.5).

Both neighbouring directions are computed when a step is Poisson-subsampled (remove: (qA + (1−q)B, B);
add: (B, qA + (1−q)B)); the worse one is reported.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

from .. import events as ev
from .._batching import map_chunked
from ..mechanisms import staircase
from . import pairs

__all__ = ["DEFAULT_INTERVAL", "MAX_GRID", "interval"]

#: default grid spacing h of the loss (dp_accounting's value_discretization_interval default is 1e-4)
DEFAULT_INTERVAL = 1e-4
#: largest composed grid; wider windows get a coarser h (still certified, a little looser)
MAX_GRID = 1 << 22
#: the window leaves at most this much composed mass outside on each side (added to δ as a bound)
_TAIL = 1e-20
_LAMBDAS = np.concatenate([-np.geomspace(2.0**-8, 2.0**12, 21), np.geomspace(2.0**-8, 2.0**12, 21)])
_U = float(np.finfo(np.float64).eps)


# --------------------------------------------------------------------------------------------------
# Events → laws
# --------------------------------------------------------------------------------------------------


def law(event, direction: str) -> pairs.LossLaw:
    """The loss law of a single step (scalar numbers, traced) in one direction ("remove" or "add")."""
    if isinstance(event, ev.Gaussian):
        return pairs.gaussian(event.noise_multiplier)
    if isinstance(event, ev.Laplace):
        return pairs.laplace(event.scale)
    if isinstance(event, ev.RandomizedResponse):
        return pairs.randomized_response_law(event.epsilon, event.k)
    if isinstance(event, ev.Staircase):
        gamma = staircase.optimal_gamma(event.epsilon) if event.gamma is None else event.gamma
        return pairs.staircase_law(event.epsilon, gamma)
    if isinstance(event, ev.PoissonSampled):
        return pairs.poisson_sampled(event.rate, law(event.event, "remove"), direction)
    raise AssertionError(event)


def supported(event) -> str | None:
    """None when the PLD accountant can interpret ``event``; otherwise the reason."""
    if isinstance(event, (ev.Gaussian, ev.Laplace, ev.RandomizedResponse)):
        return None
    if isinstance(event, ev.Staircase):
        return None if event.dimension == 1 else "Staircase with dimension > 1 (its loss law is a d-fold product; use accountant='rdp')"
    if isinstance(event, (ev.PoissonSampled, ev.SelfComposed)):
        return supported(event.event)
    if isinstance(event, ev.Composed):
        reasons = [r for r in map(supported, event.events) if r]
        return reasons[0] if reasons else None
    return f"{type(event).__name__} (not yet interpretable by the PLD accountant; use accountant='rdp')"


def symmetric(event) -> bool:
    """True when both neighbouring directions have the same loss law (no Poisson subsampling inside)."""
    if isinstance(event, ev.PoissonSampled):
        return False
    return all(symmetric(c) for c in ev.children(event))


def components(event, count=1.0) -> list:
    """Flatten compositions: [(step event, count)], counts multiplied along SelfComposed."""
    if isinstance(event, ev.SelfComposed):
        return components(event.event, np.asarray(event.count, dtype=np.float64) * count)
    if isinstance(event, ev.Composed):
        return [c for e in event.events for c in components(e, count)]
    return [(event, count)]


# --------------------------------------------------------------------------------------------------
# One step on the grid
# --------------------------------------------------------------------------------------------------


def _interval_masses(head_lo, head_hi, tail_lo, tail_hi):
    """Mass in (ℓ_k, ℓ_{k+1}] from heads or tails, whichever side is smaller (no cancellation)."""
    use_head = head_hi <= tail_lo
    return jnp.maximum(jnp.where(use_head, head_hi - head_lo, tail_lo - tail_hi), 0.0)


def discretise(step_law: pairs.LossLaw, start, n: int, h):
    """Pessimistic and optimistic pmfs of one step on the nodes ℓ_k = (start + k)·h, k < n.

    Returns (pess, pess_inf, opt, opt_inf, frac): pmfs of shape (n,), the +inf atoms, and a lower bound
    on E[L − ⌊L⌋] under the optimistic rounding (0 for mass it drops).
    """
    k = jnp.arange(n, dtype=jnp.float64)
    nodes = (start + k) * h
    margin = 1e-6 + 1e-10 / h  # rounding of r = log P(I)/Q(I): a lower node never gets too much
    pess = jnp.zeros(n)
    opt = jnp.zeros(n)
    pess_inf = jnp.float64(0.0)
    frac = jnp.float64(0.0)
    if step_law.head is not None:
        (hp, hq), (tp, tq) = step_law.head(nodes), step_law.tail(nodes)
        p_int = _interval_masses(hp[:-1], hp[1:], tp[:-1], tp[1:])
        q_int = _interval_masses(hq[:-1], hq[1:], tq[:-1], tq[1:])
        lo, hi = nodes[:-1], nodes[1:]
        r = jnp.clip(jnp.log(p_int) - jnp.log(q_int), lo, hi)
        r = jnp.where(p_int > 0, r, hi)
        low = jnp.clip(jnp.expm1(hi - r) / jnp.expm1(h) - margin, 0.0, 1.0)
        pess = pess.at[:-1].add(p_int * low).at[1:].add(p_int * (1.0 - low))
        pess = pess.at[0].add(hp[0])  # below the grid: moved up to the lowest node
        pess_inf = pess_inf + tp[-1]  # above the grid: +inf
        opt = opt.at[:-1].add(p_int)  # rounded down; below and above the grid: dropped
        frac = frac + jnp.sum(p_int * jnp.maximum((r - lo) * (1.0 - 1e-6) - 1e-12, 0.0))
    a_loss, a_p, _ = step_law.atoms
    if a_loss.shape[0]:
        finite = jnp.isfinite(a_loss)
        loss = jnp.where(finite, a_loss, 0.0)
        up_loss = loss + 4 * _U * jnp.abs(loss)  # rounding: place atoms no lower than they are
        dn_loss = loss - 4 * _U * jnp.abs(loss)
        up = jnp.ceil(up_loss / h - start)
        up = jnp.where((start + up) * h < up_loss, up + 1, up)
        low = jnp.clip(jnp.expm1((start + up) * h - up_loss) / jnp.expm1(h) - margin, 0.0, 1.0)
        low = jnp.where(up <= 0, 0.0, low)
        upi = jnp.clip(up, 0, n - 1).astype(jnp.int32)
        inside = finite & (up <= n - 1)
        pess = pess.at[upi].add(jnp.where(inside, a_p * (1.0 - low), 0.0))
        pess = pess.at[jnp.maximum(upi - 1, 0)].add(jnp.where(inside, a_p * low, 0.0))
        pess_inf = pess_inf + jnp.sum(jnp.where(inside, 0.0, a_p))
        dn = jnp.floor(dn_loss / h - start)
        dn = jnp.where((start + dn) * h > dn_loss, dn - 1, dn)
        keep = finite & (dn >= 0) & (dn <= n - 1)
        opt = opt.at[jnp.clip(dn, 0, n - 1).astype(jnp.int32)].add(jnp.where(keep, a_p, 0.0))
        frac = frac + jnp.sum(jnp.where(keep, a_p * jnp.maximum(dn_loss - (start + dn) * h, 0.0), 0.0))
        opt_inf = jnp.sum(jnp.where(jnp.isposinf(a_loss), a_p, 0.0))
    else:
        opt_inf = jnp.float64(0.0)
    return pess, pess_inf, opt, opt_inf, frac


def _log_mgf(pmf, nodes):
    """log Σ p_k e^{λ ℓ_k} for every λ of the fixed grid (shape (|Λ|,))."""
    logp = jnp.where(pmf > 0, jnp.log(jnp.where(pmf > 0, pmf, 1.0)), -jnp.inf)
    return jax.vmap(lambda lam: jax.nn.logsumexp(logp + lam * nodes))(jnp.asarray(_LAMBDAS))


# --------------------------------------------------------------------------------------------------
# Pass 1: per-step grids and their moment generating functions (for the window)
# --------------------------------------------------------------------------------------------------


@functools.partial(jax.jit, static_argnames=("direction", "sizes"))
def _probe(steps, starts, h, *, direction: str, sizes: tuple):
    """For each step (vmapped over settings): log-MGF of the pessimistic and optimistic pmfs on the λ grid,
    their +inf atoms and the fractional-part lower bound."""

    def one(step_events, step_starts, hh):
        out = []
        for e, s, n in zip(step_events, step_starts, sizes):
            pess, pinf, opt, oinf, frac = discretise(law(e, direction), s, n, hh)
            nodes = (s + jnp.arange(n, dtype=jnp.float64)) * hh
            out.append((_log_mgf(pess, nodes), _log_mgf(opt, nodes), pinf, oinf, frac))
        return out

    return jax.vmap(one)(steps, starts, h)


# --------------------------------------------------------------------------------------------------
# Pass 2: compose by FFT and read off ε(δ) or δ(ε)
# --------------------------------------------------------------------------------------------------


def _compose(pmfs, counts, starts, window_start, N: int):
    """Σ of independent losses: pmfs (each from its own start) raised to their counts, on N circular nodes
    whose first node is ``window_start``. Returns the composed pmf in window order."""
    spectrum = jnp.ones(N // 2 + 1, dtype=jnp.complex128)
    offset = jnp.int64(0)
    for pmf, count, start in zip(pmfs, counts, starts):
        z = jnp.fft.rfft(jnp.zeros(N).at[: pmf.shape[0]].set(pmf))
        zero = jnp.abs(z) == 0
        power = jnp.exp(count * jnp.log(jnp.where(zero, 1.0, z)))
        spectrum = spectrum * jnp.where(count == 0, 1.0, jnp.where(zero, 0.0, power))
        offset = offset + count.astype(jnp.int64) * start.astype(jnp.int64)
    composed = jnp.fft.irfft(spectrum, n=N)
    shift = jnp.mod(offset - window_start.astype(jnp.int64), N)
    return jnp.roll(composed, shift)


def _suffix_sums(pmf, nodes):
    """S1_j = Σ_{k≥j} p_k and log S2_j = log Σ_{k≥j} p_k e^{−ℓ_k} (with an empty sum at j = N)."""
    s1 = jnp.cumsum(pmf[::-1])[::-1]
    logp = jnp.where(pmf > 0, jnp.log(jnp.where(pmf > 0, pmf, 1.0)), -jnp.inf)
    log_s2 = jax.lax.cumlogsumexp(logp - nodes, reverse=True)
    return jnp.append(s1, 0.0), jnp.append(log_s2, -jnp.inf)


def _delta_at(pmf, nodes, eps):
    """δ(ε) = Σ_{ℓ_k > ε} p_k (1 − e^{ε − ℓ_k}) of a discrete PLD (finite part)."""
    return jnp.sum(jnp.where(nodes > eps, pmf * -jnp.expm1(jnp.minimum(eps - nodes, 0.0)), 0.0))


def _epsilon_for(pmf, nodes, target, upper: bool):
    """Smallest ε ≥ 0 with δ(ε) ≤ target on a discrete PLD; made monotone on the safe side first."""
    s1, log_s2 = _suffix_sums(pmf, nodes)
    # δ at each node: mass above it, minus the e^{ℓ_j − ℓ_k} part
    d = s1[1:] - jnp.exp(nodes + log_s2[1:])
    d = jax.lax.cummax(d, reverse=True) if upper else jax.lax.cummin(d)  # non-increasing, on the safe side
    below = d <= target
    j = jnp.argmax(below)  # first node whose δ is ≤ target (the last node's δ is 0)
    # on (ℓ_{j−1}, ℓ_j]: δ(ε) = S1_j − e^{ε} S2_j
    value = jnp.log(jnp.maximum(s1[j] - target, 1e-300)) - log_s2[j]
    lo = jnp.where(j > 0, nodes[jnp.maximum(j - 1, 0)], -jnp.inf)
    eps = jnp.clip(value, lo, nodes[j])
    eps = jnp.where(s1[j] - target <= 0, lo, eps)
    eps = eps + 1e-12 * jnp.abs(eps) if upper else eps - 1e-12 * jnp.abs(eps)
    eps = jnp.where(target < 0, jnp.inf, eps)
    return jnp.maximum(eps, 0.0)


def _fp_allowance(pmf, N: int, total_count):
    """Floating-point error of the FFT composition on δ (see the module docstring)."""
    l2 = jnp.sqrt(jnp.sum(pmf * pmf))
    return 64.0 * _U * (math.sqrt(N) * (total_count + math.log2(N)) * l2 + N)


@functools.partial(jax.jit, static_argnames=("direction", "sizes", "N", "query"))
def _evaluate(steps, starts, counts, h, window_start, alias_pess, alias_opt, shift, hoeffding, value,
              *, direction: str, sizes: tuple, N: int, query: str):
    """(upper, lower) of ε(δ = value) or δ(ε = value), vmapped over settings."""

    def one(step_events, step_starts, step_counts, hh, w0, a_pess, a_opt, c, eta, x):
        pess, opt, log_pinf, log_oinf = [], [], 0.0, 0.0
        for e, s, n, t in zip(step_events, step_starts, sizes, step_counts):
            p, pinf, o, oinf, _ = discretise(law(e, direction), s, n, hh)
            pess.append(p)
            opt.append(o)
            log_pinf = log_pinf + t * jnp.log1p(-pinf)
            log_oinf = log_oinf + t * jnp.log1p(-oinf)
        total = sum(step_counts)
        nodes = (w0 + jnp.arange(N, dtype=jnp.float64)) * hh
        composed_pess = _compose(pess, step_counts, step_starts, w0, N)
        composed_opt = _compose(opt, step_counts, step_starts, w0, N)
        inf_pess, inf_opt = -jnp.expm1(log_pinf), -jnp.expm1(log_oinf)
        fp_pess = _fp_allowance(composed_pess, N, total)
        fp_opt = _fp_allowance(composed_opt, N, total)
        if query == "epsilon":
            upper = _epsilon_for(composed_pess, nodes, x - inf_pess - a_pess - fp_pess, upper=True)
            lower = _epsilon_for(composed_opt, nodes, x - inf_opt + a_opt + fp_opt + eta, upper=False) + c
            lower = jnp.where(x - inf_opt + a_opt + fp_opt + eta < 0, jnp.inf, lower)
        else:
            upper = _delta_at(composed_pess, nodes, x) + inf_pess + a_pess + fp_pess
            lower = _delta_at(composed_opt, nodes, x - c) + inf_opt - a_opt - fp_opt - eta
            upper, lower = jnp.clip(upper, 0.0, 1.0), jnp.clip(lower, 0.0, 1.0)
        return upper, lower

    return jax.vmap(one)(steps, starts, counts, h, window_start, alias_pess, alias_opt, shift, hoeffding, value)


# --------------------------------------------------------------------------------------------------
# Host side: supports, windows, buckets
# --------------------------------------------------------------------------------------------------


def _bucket(n: int) -> int:
    """Grid sizes 2^k and 3·2^(k−1) (≥ 64): few compiled shapes, at most 1.5× padding."""
    n = max(int(n), 64)
    p = 1 << (n - 1).bit_length()
    return 3 * p // 4 if 3 * p // 4 >= n else p


def _supports(step, direction: str):
    """(lo, hi) of a step's loss over continuous part and finite atoms, for a batch of settings."""

    def one(e):
        lw = law(e, direction)
        lo, hi = lw.support
        a = lw.atoms[0]
        if a.shape[0]:
            finite = jnp.isfinite(a)
            lo = jnp.minimum(lo, jnp.min(jnp.where(finite, a, jnp.inf))) if lw.head is not None else jnp.min(jnp.where(finite, a, jnp.inf))
            hi = jnp.maximum(hi, jnp.max(jnp.where(finite, a, -jnp.inf))) if lw.head is not None else jnp.max(jnp.where(finite, a, -jnp.inf))
        return lo, hi

    lo, hi = jax.jit(jax.vmap(one))(step)
    return np.asarray(lo), np.asarray(hi)


def _chernoff(log_mgf_total, lam, tail_log):
    """Window ends from the composed log-MGF on the λ grid: Pr[ΣL ≥ U] ≤ e^{log M(λ) − λU} ≤ tail."""
    pos, neg = lam > 0, lam < 0
    upper = np.min(np.where(pos, (log_mgf_total - tail_log) / np.where(pos, lam, 1.0), np.inf), axis=-1)
    lower = np.max(np.where(neg, (log_mgf_total - tail_log) / np.where(neg, lam, -1.0), -np.inf), axis=-1)
    return lower, upper


def _tail_bound(log_mgf_total, lam, lower, upper):
    """Best Chernoff bound on the mass outside [lower, upper] (both sides)."""
    pos, neg = lam > 0, lam < 0
    up = np.min(np.where(pos, log_mgf_total - lam * upper[..., None], np.inf), axis=-1)
    dn = np.min(np.where(neg, log_mgf_total - lam * lower[..., None], np.inf), axis=-1)
    with np.errstate(over="ignore"):
        return (np.exp(np.minimum(up, 700.0)) + np.exp(np.minimum(dn, 700.0))) * (1.0 + 1e-9)


def _hoeffding(frac_total, count_total, h, eta):
    """Shift c = E ΣF − s with Pr[ΣF < c] ≤ η (Hoeffding for T variables in [0, h))."""
    s = h * np.sqrt(np.maximum(count_total, 0.0) * np.log(1.0 / eta) / 2.0)
    return np.maximum(frac_total - s, 0.0)


def interval(event, value, *, query: str, discretization=None, chunk_size=None, progress=None):
    """(upper, lower) numpy arrays of ε(δ) (query "epsilon") or δ(ε) (query "delta") over the event's
    batch; the event and ``value`` are validated and broadcast by the caller (flat, shape (B,))."""
    h_req = DEFAULT_INTERVAL if discretization is None else float(discretization)
    steps = components(event)
    B = value.shape[0]
    step_events = [jax.tree_util.tree_map(lambda x: jnp.asarray(np.broadcast_to(np.asarray(x, np.float64), (B,))), e)
                   for e, _ in steps]
    counts = np.stack([np.broadcast_to(np.asarray(c, np.float64), (B,)) for _, c in steps], axis=-1)  # (B, C)
    directions = ("remove",) if symmetric(event) else ("remove", "add")
    upper = np.full(B, -np.inf)
    lower = np.full(B, -np.inf) if query == "epsilon" else np.full(B, -np.inf)
    for direction in directions:
        up, lo = _direction(step_events, counts, value, direction, h_req, query, chunk_size, progress)
        upper, lower = np.maximum(upper, up), np.maximum(lower, lo)
    return upper, lower


def _direction(step_events, counts, value, direction, h_req, query, chunk_size, progress):
    B, C = counts.shape
    spans = [_supports(e, direction) for e in step_events]
    h = np.full(B, h_req)
    for _ in range(4):  # widen h where the composed window would exceed MAX_GRID
        starts = np.stack([np.floor(lo / h) - 1 for lo, _ in spans], -1)
        stops = np.stack([np.ceil(hi / h) + 1 for _, hi in spans], -1)
        sizes = np.vectorize(_bucket)((stops - starts + 1).astype(np.int64))  # (B, C)
        probe = _run_probe(step_events, starts, h, sizes, direction)
        log_pess = np.einsum("bc,bcl->bl", counts, probe["pess"])
        log_opt = np.einsum("bc,bcl->bl", counts, probe["opt"])
        tail_log = math.log(_TAIL)
        lo_p, hi_p = _chernoff(log_pess, _LAMBDAS, tail_log)
        lo_o, hi_o = _chernoff(log_opt, _LAMBDAS, tail_log)
        w_lo = np.floor(np.minimum(lo_p, lo_o) / h) - 1
        w_hi = np.ceil(np.maximum(hi_p, hi_o) / h) + 1
        need = np.maximum(w_hi - w_lo + 1, sizes.max(-1))
        too_wide = need > MAX_GRID
        if not too_wide.any():
            break
        h = np.where(too_wide, h * np.ceil(need / MAX_GRID * 1.25), h)
    grid = np.vectorize(_bucket)(need.astype(np.int64))
    w_lo = np.where(np.isfinite(w_lo), w_lo, 0.0)
    alias_pess = _tail_bound(log_pess, _LAMBDAS, w_lo * h, (w_lo + grid - 1) * h)
    alias_opt = _tail_bound(log_opt, _LAMBDAS, w_lo * h, (w_lo + grid - 1) * h)
    total = counts.sum(-1)
    eta = np.full(B, 1e-12) if query == "delta" else np.maximum(1e-3 * value, 1e-300)
    shift = _hoeffding(np.einsum("bc,bc->b", counts, probe["frac"]), total, h, eta)
    upper, lower = np.empty(B), np.empty(B)
    keys = np.concatenate([grid[:, None], sizes], -1)
    for key in np.unique(keys, axis=0):
        idx = np.nonzero((keys == key).all(-1))[0]
        N, n_sizes = int(key[0]), tuple(int(s) for s in key[1:])
        per_chunk = max(1, min(chunk_size or 4096, (1 << 25) // N))
        sub = lambda x: x[idx]  # noqa: E731
        inputs = [np.arange(idx.size, dtype=np.float64)]

        def kernel(pos, N=N, n_sizes=n_sizes, idx=idx):
            take = idx[np.asarray(pos, dtype=np.int64)]
            return _evaluate(
                [jax.tree_util.tree_map(lambda x: x[take], e) for e in step_events],
                [jnp.asarray(starts[take, c]) for c in range(C)],
                [jnp.asarray(counts[take, c]) for c in range(C)],
                jnp.asarray(h[take]), jnp.asarray(w_lo[take]), jnp.asarray(alias_pess[take]),
                jnp.asarray(alias_opt[take]), jnp.asarray(shift[take]), jnp.asarray(eta[take]),
                jnp.asarray(value[take]), direction=direction, sizes=n_sizes, N=N, query=query)

        up, lo = _map_host(kernel, idx.size, per_chunk, progress)
        upper[idx], lower[idx] = up, lo
        del sub, inputs
    return upper, lower


def _map_host(kernel, n: int, chunk: int, progress):
    """Run ``kernel`` over positions 0..n−1 in chunks (padded with the last position: one shape)."""
    chunk = min(chunk, 1 << max(0, (n - 1).bit_length()))
    outs_up, outs_lo = np.empty(n), np.empty(n)
    starts = list(range(0, n, chunk))
    bar = None
    if progress or (progress is None and len(starts) > 4):
        from .._batching import status_bar

        bar, task = status_bar("PLD accounting", n)
    for s in starts:
        pos = np.minimum(np.arange(s, s + chunk), n - 1)
        up, lo = kernel(pos)
        m = min(chunk, n - s)
        outs_up[s:s + m], outs_lo[s:s + m] = np.asarray(up)[:m], np.asarray(lo)[:m]
        if bar is not None:
            bar.update(task, advance=m)
    if bar is not None:
        bar.stop()
    return outs_up, outs_lo


def _run_probe(step_events, starts, h, sizes, direction):
    """Pass 1 over the batch, grouped by the tuple of per-step grid sizes."""
    B, C = sizes.shape
    out = {"pess": np.empty((B, C, _LAMBDAS.size)), "opt": np.empty((B, C, _LAMBDAS.size)),
           "pinf": np.empty((B, C)), "oinf": np.empty((B, C)), "frac": np.empty((B, C))}
    for key in np.unique(sizes, axis=0):
        idx = np.nonzero((sizes == key).all(-1))[0]
        n_sizes = tuple(int(s) for s in key)
        chunk = max(1, min(4096, (1 << 24) // max(n_sizes) // 8))
        chunk = min(chunk, 1 << max(0, (idx.size - 1).bit_length()))
        for s in range(0, idx.size, chunk):
            take = idx[np.minimum(np.arange(s, s + chunk), idx.size - 1)]
            res = _probe([jax.tree_util.tree_map(lambda x: x[take], e) for e in step_events],
                         [jnp.asarray(starts[take, c]) for c in range(C)], jnp.asarray(h[take]),
                         direction=direction, sizes=n_sizes)
            m = min(chunk, idx.size - s)
            rows = idx[s:s + m]
            for c, (lp, lo, pinf, oinf, frac) in enumerate(res):
                out["pess"][rows, c] = np.asarray(lp)[:m]
                out["opt"][rows, c] = np.asarray(lo)[:m]
                out["pinf"][rows, c] = np.asarray(pinf)[:m]
                out["oinf"][rows, c] = np.asarray(oinf)[:m]
                out["frac"][rows, c] = np.asarray(frac)[:m]
    return out
