"""The PLD accountant: privacy-loss distributions on a grid, composed by FFT, with certified bounds (MATH §7).

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
ε(δ) is solved in closed form on the right interval (MATH §7.5).

Where δ is so small (≲ 1e-11) that the FFT's rounding allowance would swamp it, a Chernoff bound on the
same pessimistic pmfs, computed in log space, gives the upper end instead (a few % looser than exact at
δ = 1e-14, never infinite for a finite ε).

Both neighbouring directions are computed when a step is Poisson-subsampled (remove: (qA + (1−q)B, B);
add: (B, qA + (1−q)B)); the worse one is reported.

Two kinds of step are prepared on the host before the device programs run: a shuffle round
(:mod:`.shuffled`: its clone-count tables) and a client-sampled local run (:mod:`.client_sampled`: the
run's own PLD composed on the same grid, kept as a dominating and a dominated atom list and mixed with
the "not sampled" atom at loss 0).
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

from .. import events as ev
from .._batching import batch_sharding, static_size, to_devices, to_host
from ..mechanisms import staircase
from . import client_sampled, pairs, shuffled

__all__ = ["DEFAULT_INTERVAL", "MAX_GRID", "interval"]

#: default grid spacing h of the loss (dp_accounting's value_discretization_interval default is 1e-4)
DEFAULT_INTERVAL = 1e-4
#: largest composed grid; wider windows get a coarser h (still certified, a little looser)
MAX_GRID = 1 << 22
#: the window leaves at most this much composed mass outside on each side (added to δ as a bound)
_TAIL = 1e-20
_LAMBDAS = np.concatenate([-np.geomspace(2.0**-6, 2.0**12, 19), np.geomspace(2.0**-6, 2.0**12, 19)])
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
    if isinstance(event, shuffled.CloneCounts):  # a Shuffled event, prepared on the host
        return shuffled.law(event)
    if isinstance(event, client_sampled.ClientMixture):  # a ClientSampled event, prepared on the host
        return client_sampled.law(event, direction)
    if isinstance(event, ev.PoissonSampled):
        return pairs.poisson_sampled(event.rate, law(event.event, "remove"), direction)
    raise AssertionError(event)


def supported(event) -> str | None:
    """None when the PLD accountant can interpret ``event``; otherwise the reason."""
    if isinstance(event, (ev.Gaussian, ev.Laplace, ev.RandomizedResponse, ev.Shuffled)):
        return None
    if isinstance(event, ev.Staircase):
        return None if event.dimension == 1 else "Staircase with dimension > 1 (its loss law is a d-fold product; use accountant='rdp')"
    if isinstance(event, ev.PoissonSampled) and _contains(event.event, ev.ClientSampled):
        return "ClientSampled inside PoissonSampled (client sampling is the outer stage; use accountant='rdp')"
    if isinstance(event, (ev.PoissonSampled, ev.SelfComposed, ev.ClientSampled)):
        return supported(event.event)
    if isinstance(event, ev.Composed):
        reasons = [r for r in map(supported, event.events) if r]
        return reasons[0] if reasons else None
    return f"{type(event).__name__} (not yet interpretable by the PLD accountant; use accountant='rdp')"


def _contains(event, kind) -> bool:
    return isinstance(event, kind) or any(_contains(c, kind) for c in ev.children(event))


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
        node = lambda i: (start + i) * h  # noqa: E731  (computed exactly as the grid's nodes are)
        # the smallest node ≥ the atom and the largest node ≤ it, compared in floating point as they are
        up = jnp.ceil(loss / h - start)
        up = jnp.where(node(up) < loss, up + 1, up)
        up = jnp.where(node(up - 1) >= loss, up - 1, up)
        low = jnp.clip(jnp.expm1(node(up) - loss) / jnp.expm1(h) - margin, 0.0, 1.0)
        low = jnp.where(up <= 0, 0.0, low)
        upi = jnp.clip(up, 0, n - 1).astype(jnp.int32)
        inside = finite & (up <= n - 1)
        pess = pess.at[upi].add(jnp.where(inside, a_p * (1.0 - low), 0.0))
        pess = pess.at[jnp.maximum(upi - 1, 0)].add(jnp.where(inside, a_p * low, 0.0))
        pess_inf = pess_inf + jnp.sum(jnp.where(inside, 0.0, a_p))
        if step_law.lower_atoms is not None:  # the optimistic grid rounds a dominated law down instead
            a_loss, a_p = step_law.lower_atoms
            finite = jnp.isfinite(a_loss)
            loss = jnp.where(finite, a_loss, 0.0)
        dn = jnp.floor(loss / h - start)
        dn = jnp.where(node(dn) > loss, dn - 1, dn)
        dn = jnp.where(node(dn + 1) <= loss, dn + 1, dn)
        keep = finite & (dn >= 0) & (dn <= n - 1)
        opt = opt.at[jnp.clip(dn, 0, n - 1).astype(jnp.int32)].add(jnp.where(keep, a_p, 0.0))
        frac = frac + jnp.sum(jnp.where(keep, a_p * jnp.maximum(loss - node(dn), 0.0) * (1.0 - 1e-9), 0.0))
        opt_inf = jnp.sum(jnp.where(jnp.isposinf(a_loss), a_p, 0.0))
    else:
        opt_inf = jnp.float64(0.0)
    return pess, pess_inf, opt, opt_inf, frac


def _log_mgf(pmf, nodes, lams=None):
    """log Σ p_k e^{λ ℓ_k} for each λ (default: the fixed grid)."""
    logp = jnp.where(pmf > 0, jnp.log(jnp.where(pmf > 0, pmf, 1.0)), -jnp.inf)
    lams = jnp.asarray(_LAMBDAS) if lams is None else lams
    return jax.vmap(lambda lam: jax.nn.logsumexp(logp + lam * nodes))(lams)


# --------------------------------------------------------------------------------------------------
# Pass 1: a coarse probe of each step's loss law, to place the composed window
# --------------------------------------------------------------------------------------------------

@functools.partial(jax.jit, static_argnames=("direction", "n"))
def _probe(step, start, h, *, direction: str, n: int):
    """log-MGF on the λ grid of one step's pessimistic pmf on its own grid of n nodes (vmapped over
    settings): where the composed loss lives, to place the window (the optimistic pmf lies within h
    below it; the bounds that enter δ are computed from both pmfs later)."""

    def one(e, s, hh):
        pess, pinf, _, _, _ = discretise(law(e, direction), s, n, hh)
        nodes = (s + jnp.arange(n, dtype=jnp.float64)) * hh
        return jnp.append(_log_mgf(pess, nodes), jnp.log1p(-pinf))

    return jax.vmap(one)(step, start, h)


# --------------------------------------------------------------------------------------------------
# Pass 2: compose by FFT and read off ε(δ) or δ(ε)
# --------------------------------------------------------------------------------------------------


def _power(z, count):
    """z^T of a spectrum (T = 0 gives 1; a zero coefficient stays 0)."""
    zero = jnp.abs(z) == 0
    power = jnp.exp(count * jnp.log(jnp.where(zero, 1.0, z)))
    return jnp.where(count == 0, 1.0, jnp.where(zero, 0.0, power))


def _compose(pmfs, counts, starts, window_start, N: int):
    """Σ of independent losses: pmfs (each from its own start) raised to their counts, on N circular nodes
    whose first node is ``window_start``. Returns the composed pmf in window order and the rounding
    scale of the computation: Σ_c T_c‖y_{−c}‖₂ (y_{−c}: one step of c fewer), which bounds how much a
    coefficient's forward-FFT error can grow through the power (|d(z^T)| = T|z|^{T−1}|dz|, Parseval)."""
    spectra = [jnp.fft.rfft(pmf) for pmf in pmfs]
    powers = [_power(z, t) for z, t in zip(spectra, counts)]
    spectrum = functools.reduce(jnp.multiply, powers, jnp.ones(N // 2 + 1, dtype=jnp.complex128))
    growth = 0.0
    for c, (z, t) in enumerate(zip(spectra, counts)):
        fewer = functools.reduce(jnp.multiply, [p for i, p in enumerate(powers) if i != c], _power(z, jnp.maximum(t - 1, 0)))
        growth = growth + t * jnp.linalg.norm(jnp.fft.irfft(fewer, n=N))
    offset = sum(t.astype(jnp.int64) * s.astype(jnp.int64) for t, s in zip(counts, starts))
    composed = jnp.fft.irfft(spectrum, n=N)
    shift = jnp.mod(offset - window_start.astype(jnp.int64), N)
    return jnp.roll(composed, shift), growth


def _suffix_sums(pmf, nodes):
    """S1_j = Σ_{k≥j} p_k and log S2_j = log Σ_{k≥j} p_k e^{−ℓ_k} (with an empty sum at j = N)."""
    s1 = jnp.cumsum(pmf[::-1])[::-1]
    logp = jnp.where(pmf > 0, jnp.log(jnp.where(pmf > 0, pmf, 1.0)), -jnp.inf)
    log_s2 = jax.lax.cumlogsumexp(logp - nodes, reverse=True)
    return jnp.append(s1, 0.0), jnp.append(log_s2, -jnp.inf)


def _epsilon_for(pmf, nodes, target, upper: bool):
    """Smallest ε with δ(ε) ≤ target on a discrete PLD (any sign; −inf when every ε qualifies), with δ
    at the nodes first made non-increasing on the safe side."""
    s1, log_s2 = _suffix_sums(pmf, nodes)
    # δ at each node: mass above it, minus the e^{ℓ_j − ℓ_k} part
    d = s1[1:] - jnp.exp(nodes + log_s2[1:])
    d = jax.lax.cummax(d, reverse=True) if upper else jax.lax.cummin(d)
    j = jnp.argmax(d <= target)  # first node whose δ is ≤ target (the last node's δ is 0)
    # on (ℓ_{j−1}, ℓ_j]: δ(ε) = S1_j − e^{ε} S2_j
    value = jnp.log(jnp.maximum(s1[j] - target, 1e-300)) - log_s2[j]
    lo = jnp.where(j > 0, nodes[jnp.maximum(j - 1, 0)], -jnp.inf)
    eps = jnp.clip(value, lo, nodes[j])
    eps = jnp.where(s1[j] - target <= 0, lo, eps)
    eps = eps + 1e-12 * jnp.abs(eps) if upper else eps - 1e-12 * jnp.abs(eps)
    return jnp.where(target < 0, jnp.inf, eps)


def _delta_sum(pmf, nodes, eps, upper: bool):
    """δ(ε) = Σ_{ℓ_k > ε} p_k (1 − e^{ε − ℓ_k}) of a discrete PLD (finite part) by a direct (tree) sum,
    moved by the bound on that sum's rounding: up when ``upper``, down otherwise."""
    terms = jnp.where(nodes > eps, pmf * -jnp.expm1(jnp.minimum(eps - nodes, 0.0)), 0.0)
    slack = 4.0 * _U * math.log2(nodes.shape[0]) * jnp.sum(jnp.abs(terms))
    total = jnp.sum(terms)
    return total + slack if upper else total - slack


def _fp_allowance(nodes, eps, l2_terms, reachable):
    """Rounding of the FFT composition on δ(ε). A forward FFT's coefficient errs by ≲ u·log₂N·‖p‖₁
    (‖p‖₁ ≤ 1); through the power it becomes T|z|^{T−1} times that, ≲ u·log₂N·Σ_c T_c‖y_{−c}‖₂ in ℓ2
    after the inverse FFT (Parseval); the power's own exp/log and the inverse FFT add
    ≲ u·(4T + log₂N)·‖y‖₂. ``l2_terms`` carries these scales (8× margin on the constants), and δ(ε)
    weighs the pmf by w_k = (1 − e^{ε−ℓ_k})₊ ∈ [0, 1], so Cauchy-Schwarz bounds the error on δ by
    ‖w(ε)‖₂ times it. ‖w(ε)‖₂ decreases in ε: the value at ε bounds every larger ε."""
    w = jnp.where(reachable & (nodes > eps), -jnp.expm1(jnp.minimum(eps - nodes, 0.0)), 0.0)
    return 8.0 * _U * math.log2(nodes.shape[0]) * jnp.sqrt(jnp.sum(w * w)) * l2_terms


_STEPS = np.array([0.0, 1e-4, 1e-3, 1e-2, 0.1, 0.25, 1.0, 4.0, 16.0, 64.0, 256.0, 1024.0])  # in units of h: re-checks


def _certified_upper(pmf, nodes, target, extra, l2_terms, h, reachable):
    """Smallest checked ε with δ(ε) + extra + FFT allowance ≤ target, found by the suffix sums and then
    certified by direct sums (the suffix sums' rounding grows with N; direct sums' does not)."""
    eps0 = _epsilon_for(pmf, nodes, target - extra, True)
    budget = target - extra - _fp_allowance(nodes, eps0, l2_terms, reachable)  # valid for every ε ≥ eps0
    eps1 = jnp.maximum(_epsilon_for(pmf, nodes, budget, True), eps0)
    tries = eps1 + h * jnp.asarray(_STEPS)
    ok = jax.vmap(lambda e: _delta_sum(pmf, nodes, e, True))(tries) <= budget
    return jnp.where(jnp.any(ok) & (budget > 0), tries[jnp.argmax(ok)], jnp.inf)


def _certified_lower(pmf, nodes, target, extra, l2_terms, h, reachable):
    """Largest checked ε such that δ_opt(ε') − extra − FFT allowance > target for every ε' < ε (so the
    true ε is at least it); −inf when none is found."""
    eps0 = _epsilon_for(pmf, nodes, target + extra, False)
    floor = eps0 - h * _STEPS[-1]
    budget = target + extra + _fp_allowance(nodes, floor, l2_terms, reachable)  # valid for every ε ≥ floor
    eps1 = jnp.minimum(_epsilon_for(pmf, nodes, budget, False), eps0)
    tries = eps1 - h * jnp.asarray(_STEPS)
    below = tries - 1e-12 * (1.0 + jnp.abs(tries))
    ok = (jax.vmap(lambda e: _delta_sum(pmf, nodes, e, False))(below) > budget) & (tries >= floor)
    return jnp.where(jnp.any(ok), tries[jnp.argmax(ok)], -jnp.inf)


def _chernoff_mass(log_mgf_total, lam, edge):
    """Pr[ΣL beyond edge] ≤ exp(log M(λ) − λ·edge), for λ > 0 (above) or λ < 0 (below); λ = 0 marks a
    side where the window covers every reachable loss (nothing beyond it)."""
    bound = jnp.exp(jnp.minimum(log_mgf_total - lam * edge, 700.0)) * (1.0 + 1e-9)
    return jnp.where(lam == 0, 0.0, bound)


class _Side:
    """One side (pessimistic or optimistic) of a composition being assembled: the steps' pmfs padded to the
    composed grid, their summed log-MGF at the window's two λ, and what its +inf mass needs."""

    def __init__(self, N: int, lams):
        self.N, self.lams = N, lams
        self.pmfs, self.mgf = [], jnp.zeros(2)
        self.log_finite = self.log_mass = self.log_no_inf = 0.0

    def add(self, pmf, inf, count, nodes):
        n = pmf.shape[0]
        self.pmfs.append(jnp.zeros(self.N).at[:n].set(pmf))
        self.mgf = self.mgf + count * _log_mgf(pmf, nodes, self.lams)
        self.log_finite = self.log_finite + count * jnp.log1p(-inf)
        mass = jnp.sum(pmf) + inf
        self.log_mass = self.log_mass + count * jnp.log(mass)
        self.log_no_inf = self.log_no_inf + count * jnp.log1p(-inf / mass)

    def inf_mass(self, upper: bool):
        """The composition's +inf mass: 1 − (1 − p∞)^T for probability measures, and m^T − (m − p∞)^T =
        m^T·(1 − (1 − p∞/m)^T) for a measure of mass m ≠ 1 (a nested client-sampled run's dominating or
        dominated measure); the larger of the two for the upper side, the smaller for the lower."""
        plain = -jnp.expm1(self.log_finite)
        general = jnp.exp(self.log_mass) * -jnp.expm1(self.log_no_inf)
        return jnp.maximum(plain, general) if upper else jnp.minimum(plain, general)


@functools.partial(jax.jit, static_argnames=("direction", "N", "sizes", "query", "lower"))
def _evaluate(steps, starts, counts, h, window_start, lam_up, lam_dn, eta, value, reach, *, direction: str,
              N: int, sizes: tuple, query: str, lower: bool):
    """(upper, lower) of ε(δ = value) or δ(ε = value), vmapped over settings; each step is discretised on
    its own ``sizes[c]`` nodes and padded to the N of the composed grid. ``lower=False`` skips the
    optimistic side (returns NaN for it)."""

    def one(step_events, step_starts, step_counts, hh, w0, l_up, l_dn, eta, x, reach_ends):
        lams = jnp.stack([l_up, l_dn])
        pess, opt = _Side(N, lams), _Side(N, lams)
        frac = 0.0
        for e, s, t, n in zip(step_events, step_starts, step_counts, sizes):
            p, pinf, o, oinf, f = discretise(law(e, direction), s, n, hh)
            step_nodes = (s + jnp.arange(n, dtype=jnp.float64)) * hh
            pess.add(p, pinf, t, step_nodes)
            if lower:
                opt.add(o, oinf, t, step_nodes)
                frac = frac + t * f
        total = sum(step_counts)
        nodes = (w0 + jnp.arange(N, dtype=jnp.float64)) * hh
        top, bottom = nodes[-1] + 0.5 * hh, nodes[0] - 0.5 * hh
        # nodes the sum cannot reach hold only FFT rounding: their true mass is 0
        reachable = (nodes >= reach_ends[0] - 0.5 * hh) & (nodes <= reach_ends[1] + 0.5 * hh)
        alias_pess = _chernoff_mass(pess.mgf[0], l_up, top) + _chernoff_mass(pess.mgf[1], l_dn, bottom)
        composed_pess, growth = _compose(pess.pmfs, step_counts, step_starts, w0, N)
        composed_pess = jnp.where(reachable, composed_pess, 0.0)
        inf_pess = pess.inf_mass(upper=True)
        l2_pess = growth + (4.0 * total / math.log2(N) + 1.0) * jnp.linalg.norm(composed_pess)
        if query == "pmf":  # a dominating measure: everything it may miss goes up to +inf (see .client_sampled)
            fp_l1 = math.sqrt(N) * 8.0 * _U * math.log2(N) * l2_pess  # ‖err‖₁ ≤ √N‖err‖₂
            pmf_up, inf_up = jnp.maximum(composed_pess, 0.0), inf_pess + alias_pess + fp_l1
        elif query == "epsilon":
            upper = _certified_upper(composed_pess, nodes, x, inf_pess + alias_pess, l2_pess, hh, reachable)
            upper = jnp.maximum(upper, 0.0)
        else:
            upper = (_delta_sum(composed_pess, nodes, x, True) + inf_pess + alias_pess
                     + _fp_allowance(nodes, x, l2_pess, reachable))
            upper = jnp.clip(upper, 0.0, 1.0)
        if not lower:
            return upper, jnp.nan
        alias_opt = _chernoff_mass(opt.mgf[0], l_up, top) + _chernoff_mass(opt.mgf[1], l_dn, bottom)
        composed_opt, growth_opt = _compose(opt.pmfs, step_counts, step_starts, w0, N)
        composed_opt = jnp.where(reachable, composed_opt, 0.0)
        inf_opt = opt.inf_mass(upper=False)
        l2_opt = growth_opt + (4.0 * total / math.log2(N) + 1.0) * jnp.linalg.norm(composed_opt)
        # Hoeffding: Pr[ΣF < E ΣF − s] ≤ η for T fractional parts in [0, h)
        shift = jnp.maximum(frac - hh * jnp.sqrt(total * jnp.log(1.0 / eta) / 2.0), 0.0)
        if query == "pmf":  # a dominated measure: the top r of the mass removed, then moved up by the shift
            fp_l1 = math.sqrt(N) * 8.0 * _U * math.log2(N) * l2_opt
            r = alias_opt + fp_l1 + eta + 2.0 * N * _U
            inf_lo = jnp.maximum(inf_opt - r, 0.0)
            r = jnp.maximum(r - inf_opt, 0.0)
            pmf = jnp.maximum(composed_opt, 0.0)
            above = jnp.cumsum(pmf[::-1])[::-1]  # mass at or above each node
            pmf_lo = jnp.minimum(pmf, jnp.maximum(above - r, 0.0))
            return pmf_up, inf_up, pmf_lo, inf_lo, jnp.floor(shift / hh)
        if query == "epsilon":
            low = _certified_lower(composed_opt, nodes, x - inf_opt, alias_opt + eta, l2_opt, hh, reachable)
            low = jnp.maximum(low + shift, 0.0)
            low = jnp.where(x - inf_opt + alias_opt + eta < 0, jnp.inf, low)
        else:
            low = (_delta_sum(composed_opt, nodes, x - shift, False) + inf_opt - alias_opt - eta
                   - _fp_allowance(nodes, x - shift, l2_opt, reachable))
            low = jnp.clip(low, 0.0, 1.0)
        return upper, low

    return jax.vmap(one)(steps, starts, counts, h, window_start, lam_up, lam_dn, eta, value, reach)


# --------------------------------------------------------------------------------------------------
# Host side: supports, windows, buckets
# --------------------------------------------------------------------------------------------------


def _bucket(n: int) -> int:
    """Grid sizes 2^k and 3·2^(k−1) (≥ 1024): few compiled shapes, at most 1.5× padding."""
    n = max(int(n), 1024)
    p = 1 << (n - 1).bit_length()
    return 3 * p // 4 if 3 * p // 4 >= n else p


def _step_bucket(n: int) -> int:
    """Per-step grid sizes: powers of two (≥ 1024)."""
    return 1 << max(10, (int(n) - 1).bit_length())


@functools.partial(jax.jit, static_argnames=("direction",))
def _support_kernel(step, *, direction: str):
    def one(e):
        lw = law(e, direction)
        lo, hi = lw.support
        a = lw.atoms[0]
        if a.shape[0]:
            finite = jnp.isfinite(a)
            a_lo, a_hi = jnp.min(jnp.where(finite, a, jnp.inf)), jnp.max(jnp.where(finite, a, -jnp.inf))
            lo, hi = (jnp.minimum(lo, a_lo), jnp.maximum(hi, a_hi)) if lw.head is not None else (a_lo, a_hi)
        return lo, hi

    return jax.vmap(one)(step)


def _supports(step, direction: str):
    """(lo, hi) of a step's loss over continuous part and finite atoms, for a batch of settings."""
    B = jax.tree_util.tree_leaves(step)[0].shape[0]
    size = 1 << max(0, (B - 1).bit_length())  # one compiled shape per power of two
    take = np.minimum(np.arange(size), B - 1)
    lo, hi = _support_kernel(jax.tree_util.tree_map(lambda x: x[take], step), direction=direction)
    return np.asarray(lo)[:B], np.asarray(hi)[:B]


def _window(log_mgf_total, tail_log):
    """Window ends and the λ attaining them: Pr[ΣL ≥ U] ≤ e^{log M(λ) − λU} ≤ tail, likewise below."""
    lam = _LAMBDAS
    pos, neg = lam > 0, lam < 0
    up_all = np.where(pos, (log_mgf_total - tail_log) / np.where(pos, lam, 1.0), np.inf)
    dn_all = np.where(neg, (log_mgf_total - tail_log) / np.where(neg, lam, -1.0), -np.inf)
    i_up, i_dn = np.argmin(up_all, -1), np.argmax(dn_all, -1)
    rows = np.arange(log_mgf_total.shape[0])
    return dn_all[rows, i_dn], up_all[rows, i_up], lam[i_dn], lam[i_up]


#: with the default grid, an interval wider than this (relative to its upper end) is recomputed on a finer
#: grid (small ε: the Hoeffding slack h·√(T log(1/η)/2) is then a large part of ε)
TARGET_WIDTH = 0.005


def interval(event, value, *, query: str, discretization=None, lower: bool = True, chunk_size=None, progress=None):
    """(upper, lower) numpy arrays of ε(δ) (query "epsilon") or δ(ε) (query "delta") over the event's
    batch; the event and ``value`` are validated and broadcast by the caller (flat, shape (B,)).
    ``lower=False`` computes the upper end only (half the work; the lower end is NaN). With the default
    ``discretization`` and ``lower``, settings whose interval is wider than :data:`TARGET_WIDTH` of its
    upper end are recomputed with h divided by up to 64 (two rounds at most)."""
    B = value.shape[0]
    if not components(event):  # nothing released: ε = 0 at every δ, δ = 0 at every ε
        return np.zeros(B), np.zeros(B)
    h = np.full(B, DEFAULT_INTERVAL if discretization is None else float(discretization))
    upper, low = _interval_at(event, value, h, query, lower, chunk_size, progress)
    if discretization is not None or not lower:
        return upper, low
    for _ in range(2):
        width = (upper - low) / np.maximum(np.abs(upper), 1e-300)
        redo = np.nonzero(np.isfinite(upper) & (width > TARGET_WIDTH))[0]
        if redo.size == 0:
            break
        factor = 2.0 ** np.clip(np.ceil(np.log2(width[redo] / (0.8 * TARGET_WIDTH))), 1, 6)
        sub = ev.map_numbers(event, lambda _, x: np.asarray(x)[redo] if np.ndim(x) else x)
        up, lo = _interval_at(sub, value[redo], h[redo] / factor, query, lower, chunk_size, progress)
        h[redo] = h[redo] / factor
        upper[redo], low[redo] = np.minimum(upper[redo], up), np.maximum(low[redo], lo)
    return upper, low


def _interval_at(event, value, h, query, lower, chunk_size, progress):
    steps = components(event)
    B = value.shape[0]
    step_events = [_device_step(e, B, h) for e, _ in steps]
    counts = np.stack([np.broadcast_to(np.asarray(c, np.float64), (B,)) * ~_never_sampled(e, B) for e, c in steps],
                      axis=-1)  # (B, C); a step that samples nobody releases nothing
    directions = ("remove",) if symmetric(event) else ("remove", "add")
    worst_up, worst_lo = np.full(B, -np.inf), np.full(B, -np.inf)
    for direction in directions:
        up, lo = _direction(step_events, counts, value, direction, h, query, lower, chunk_size, progress)
        worst_up, worst_lo = np.maximum(worst_up, up), np.maximum(worst_lo, lo)
    return worst_up, worst_lo


def _device_step(step, B: int, h: np.ndarray):
    """A step's numbers broadcast to the batch (B,), with Shuffled events replaced by their clone-count
    tables (:func:`.shuffled.counts_step`) and ClientSampled ones by their local run's composed PLDs on
    the grid spacing ``h`` (:func:`_client_mixture`), both computed on the host."""
    if isinstance(step, ev.Shuffled):
        return shuffled.counts_step(step, B)
    if isinstance(step, ev.ClientSampled):
        return _client_mixture(step, B, h)
    if isinstance(step, ev.PoissonSampled):
        rate = jnp.asarray(np.broadcast_to(np.asarray(step.rate, np.float64), (B,)))
        return ev.PoissonSampled(rate, _device_step(step.event, B, h))
    return jax.tree_util.tree_map(lambda x: jnp.asarray(np.broadcast_to(np.asarray(x, np.float64), (B,))), step)


def _never_sampled(step, B: int) -> np.ndarray:
    """True where some Poisson sampling around the step has rate 0 (the step then releases nothing)."""
    out = np.zeros(B, bool)
    while isinstance(step, ev.PoissonSampled):
        out |= np.broadcast_to(np.asarray(step.rate, np.float64) == 0.0, (B,))
        step = step.event
    return out


def _step_elements(step, nodes: int) -> int:
    """Float64 values one setting of a prepared step holds besides the grid (its tables or atoms)."""
    return max(shuffled.elements(step, nodes), client_sampled.elements(step, nodes))


#: the Hoeffding miss probability of a local run nested in client sampling (its mass is taken off the
#: dominated law's top)
_NESTED_ETA = 1e-15


#: settings whose local runs are composed at once (bounds the host memory of their composed PLDs)
_NESTED_CHUNK = 64


def _client_mixture(step: ev.ClientSampled, B: int, h: np.ndarray) -> client_sampled.ClientMixture:
    """The ClientMixture step of a ClientSampled event: its local run composed on the grid, both ways."""
    run = ev.map_numbers(step.event, lambda _, x: np.broadcast_to(np.asarray(x, np.float64), (B,)))
    sides = {key: [] for key in ("remove_upper", "remove_lower", "add_upper", "add_lower")}
    for s in range(0, B, _NESTED_CHUNK):
        part = ev.map_numbers(run, lambda _, x, s=s: x[s:s + _NESTED_CHUNK])
        remove = _composed_pmfs(part, h[s:s + _NESTED_CHUNK], "remove")
        add = remove if symmetric(run) else _composed_pmfs(part, h[s:s + _NESTED_CHUNK], "add")
        for name, lists in (("remove", remove), ("add", add)):
            sides[f"{name}_upper"] += lists[0]
            sides[f"{name}_lower"] += lists[1]
    rate = jnp.asarray(np.broadcast_to(np.asarray(step.rate, np.float64), (B,)))
    return client_sampled.ClientMixture(rate, **{key: _pack(atoms) for key, atoms in sides.items()})


def _pack(atoms: list) -> tuple:
    """Per-setting (losses, masses) atom lists → two (B, A) arrays, padded with atoms of loss 0, mass 0."""
    A = static_size(max(loss.size for loss, _ in atoms))
    losses = np.stack([np.pad(loss, (0, A - loss.size)) for loss, _ in atoms])
    masses = np.stack([np.pad(mass, (0, A - mass.size)) for _, mass in atoms])
    return jnp.asarray(losses), jnp.asarray(masses)


def _composed_pmfs(event, h, direction):
    """The composed PLD of ``event`` (numbers of shape (B,)) in one direction, on the spacing h (or the
    coarser one the accountant needs): (dominating, dominated), each a list of B (losses, masses) atom
    arrays with +∞ as the last loss, trimmed to the nodes that hold mass; see :mod:`.client_sampled` for
    why each side is safe."""
    steps = components(event)
    B = h.shape[0]
    if not steps:
        point = [(np.array([0.0, np.inf]), np.array([1.0, 0.0]))] * B
        return point, point
    step_events = [_device_step(e, B, h) for e, _ in steps]
    counts = np.stack([np.broadcast_to(np.asarray(c, np.float64), (B,)) * ~_never_sampled(e, B) for e, c in steps],
                      axis=-1)
    plan = _plan(step_events, counts, direction, h, True)
    eta = np.full(B, _NESTED_ETA)
    upper, lower = [None] * B, [None] * B

    def trimmed(first, mass, inf, hh):
        keep = np.nonzero(mass > 0)[0]
        lo, hi = (keep[0], keep[-1] + 1) if keep.size else (0, 0)
        return (np.append((first + np.arange(lo, hi)) * hh, np.inf), np.append(mass[lo:hi], inf))

    for idx, (p_up, inf_up, p_lo, inf_lo, shift) in _groups(step_events, counts, plan, eta, np.zeros(B), direction,
                                                              "pmf", True, None, False):
        for j, i in enumerate(idx):
            hh, w0 = plan["h"][i], plan["w_start"][i]
            upper[i] = trimmed(w0, p_up[j], inf_up[j], hh)
            lower[i] = trimmed(w0 + shift[j], p_lo[j], inf_lo[j], hh)
    return upper, lower


def _plan(step_events, counts, direction, h_req, lower):
    """Pass 1 for a batch: the grid spacing, each step's first node, the composed window (placed by
    Chernoff bounds on the steps' MGFs) and the compiled sizes, per setting."""
    B, C = counts.shape
    spans = [_supports(e, direction) for e in step_events]
    step_width = np.max(np.stack([hi - lo for lo, hi in spans], -1), -1)
    h = np.maximum(h_req, step_width / (MAX_GRID // 4))  # h_req: one spacing per setting
    for _ in range(3):  # widen h where the composed window would not fit in MAX_GRID nodes
        starts = np.stack([np.floor(lo / h) - 1 for lo, _ in spans], -1)
        log_mgf = np.zeros((B, _LAMBDAS.size + 1))
        for c, (lo, hi) in enumerate(spans):
            sizes = np.vectorize(_step_bucket)((np.ceil(hi / h) + 2 - starts[:, c]).astype(np.int64))
            log_mgf += counts[:, c:c + 1] * _run_probe(step_events[c], starts[:, c], h, sizes, direction)
        log_finite = log_mgf[:, -1]  # log Pr[no +inf loss] of the composition
        log_mgf = log_mgf[:, :-1]
        w_lo, w_hi, lam_dn, lam_up = _window(log_mgf, math.log(_TAIL))
        if lower:  # the optimistic sum lies up to T·h below the pessimistic one
            w_lo = w_lo - counts.sum(-1) * h
        # never beyond what the sum can reach (bounded losses: pure-ε mechanisms, small T)
        reach_lo = sum(counts[:, c] * starts[:, c] for c in range(C)) * h
        reach_hi = sum(counts[:, c] * (np.ceil(hi / h) + 1) for c, (_, hi) in enumerate(spans)) * h
        covers_lo, covers_hi = w_lo <= reach_lo, w_hi >= reach_hi
        w_lo, w_hi = np.maximum(w_lo, reach_lo), np.minimum(w_hi, reach_hi)
        nodes_needed = np.maximum((w_hi - w_lo) / h, step_width / h) + 8
        if (nodes_needed <= MAX_GRID).all():
            break
        h = np.where(nodes_needed > MAX_GRID, h * np.ceil(nodes_needed / MAX_GRID * 1.1), h)
    grid = np.vectorize(_bucket)(np.minimum(nodes_needed, MAX_GRID).astype(np.int64))
    # a window that covers everything the sum can reach on a side wraps nothing around from that side
    lam_dn, lam_up = np.where(covers_lo, 0.0, lam_dn), np.where(covers_hi, 0.0, lam_up)
    step_sizes = np.stack([np.vectorize(_step_bucket)((np.ceil(hi / h) + 2 - starts[:, c]).astype(np.int64))
                           for c, (_, hi) in enumerate(spans)], -1)
    return dict(h=h, starts=starts, w_start=np.floor(w_lo / h) - 2, lam_up=lam_up, lam_dn=lam_dn,
                reach=np.stack([reach_lo, reach_hi], -1), log_mgf=log_mgf, log_finite=log_finite,
                keys=np.concatenate([grid[:, None], np.minimum(step_sizes, grid[:, None])], -1))


def _groups(step_events, counts, plan, eta, value, direction, query, lower, chunk_size, progress):
    """Pass 2, one compiled program per distinct (composed grid, step grids): yields (settings, results)."""
    C = counts.shape[1]
    keys = plan["keys"]
    for key in np.unique(keys, axis=0):
        idx = np.nonzero((keys == key).all(-1))[0]
        N, sizes = int(key[0]), tuple(int(k) for k in key[1:])

        def kernel(take, N=N, sizes=sizes):
            args = ([jax.tree_util.tree_map(lambda x: np.asarray(x)[take], e) for e in step_events],
                    [plan["starts"][take, c] for c in range(C)], [counts[take, c] for c in range(C)],
                    *(plan[k][take] for k in ("h", "w_start", "lam_up", "lam_dn")), eta[take], value[take],
                    plan["reach"][take])
            if jax.device_count() > 1 and take.size % jax.device_count() == 0:  # settings sharded over devices
                args = to_devices(args, batch_sharding())
            return _evaluate(*args, direction=direction, N=N, sizes=sizes, query=query, lower=lower)

        # bounded memory: about 2^22 grid nodes in flight per chunk (≈ 0.5 GB of intermediates); a step
        # with tables (Shuffled, ClientSampled) also holds them per setting
        tables = max(_step_elements(e, n) for e, n in zip(step_events, sizes))
        per_chunk = max(jax.device_count(), min(chunk_size or 4096, (1 << 22) // N, (1 << 24) // max(tables, 1)))
        yield idx, _map_host(kernel, idx, per_chunk, progress)


def _direction(step_events, counts, value, direction, h_req, query, lower, chunk_size, progress):
    plan = _plan(step_events, counts, direction, h_req, lower)
    eta = np.full(counts.shape[0], 1e-12) if query == "delta" else np.maximum(1e-3 * value, 1e-300)
    upper, low = np.empty(value.shape[0]), np.empty(value.shape[0])
    for idx, (up, lo) in _groups(step_events, counts, plan, eta, value, direction, query, lower, chunk_size,
                                 progress):
        upper[idx], low[idx] = up, lo
    return np.minimum(upper, _chernoff_upper(plan["log_mgf"], plan["log_finite"], value, query)), low


def _chernoff_upper(log_mgf, log_finite, value, query):
    """A second valid upper bound from the same pessimistic pmfs, with no FFT and no absolute rounding
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


def _map_host(kernel, idx: np.ndarray, chunk: int, progress):
    """Run ``kernel`` over the settings ``idx`` in chunks of a power-of-two size (the last one padded by
    repeating its last setting: one compiled shape); its outputs (a tuple of arrays with the chunk as
    leading axis) are gathered into numpy arrays over ``idx``."""
    n = idx.size
    chunk = min(chunk, 1 << max(0, (n - 1).bit_length()))
    chunk = 1 << max(0, chunk.bit_length() - 1)
    outs = None
    bar = None
    if progress or (progress is None and n > 4 * chunk):
        from .._batching import status_bar

        bar, task = status_bar("PLD accounting", n)
    for s in range(0, n, chunk):
        take = idx[np.minimum(np.arange(s, s + chunk), n - 1)]
        results = [to_host(r) for r in kernel(take)]
        if outs is None:
            outs = [np.empty((n,) + r.shape[1:], r.dtype) for r in results]
        m = min(chunk, n - s)
        for out, r in zip(outs, results):
            out[s:s + m] = r[:m]
        if bar is not None:
            bar.update(task, advance=m)
    if bar is not None:
        bar.stop()
    return tuple(outs)


def _run_probe(step, start, h, sizes, direction):
    """Pass 1 for one step over the whole batch, grouped by grid size, in chunks of one compiled size:
    the log-MGF on the λ grid and, last, log(1 − the +inf atom's mass)."""
    B = start.shape[0]
    out = np.empty((B, _LAMBDAS.size + 1))
    for n in np.unique(sizes):
        idx = np.nonzero(sizes == n)[0]
        chunk = max(1, min(1024, (1 << 23) // int(n) // _LAMBDAS.size, (1 << 24) // max(shuffled.elements(step, n), 1)))
        chunk = 1 << max(0, min(chunk, 1 << max(0, (idx.size - 1).bit_length())).bit_length() - 1)
        for s in range(0, idx.size, chunk):
            take = idx[np.minimum(np.arange(s, s + chunk), idx.size - 1)]
            res = _probe(jax.tree_util.tree_map(lambda x: x[take], step), jnp.asarray(start[take]),
                         jnp.asarray(h[take]), direction=direction, n=int(n))
            m = min(chunk, idx.size - s)
            out[idx[s:s + m]] = np.asarray(res)[:m]
    return out
