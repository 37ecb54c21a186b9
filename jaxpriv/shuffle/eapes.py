"""E-APES Theorem 3 / GSPA Theorem 2 with the unknown Berry–Esseen constant replaced by a computed τ
(MATH §3.3): the μ-GDP trade-off of the shuffled personalized reports, relaxed by τ and δ_max, and its
(ε, δ) curve. τ is an upper bound on the lattice-to-Gaussian total-variation distance
(:func:`jaxpriv.shuffle.multinomial.lattice_gaussian_tv`); ``p`` is the vector of the other users' clone
probabilities (:func:`jaxpriv.shuffle.multinomial.clone_probabilities`).
"""

from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.scipy.special import ndtr, ndtri

from .. import fdp
from .._batching import map_chunked
from .._numerics import bisect_floats, check_array, check_broadcastable, float64, kernel_jit
from .multinomial import check_clone_probabilities

__all__ = ["eapes_mu", "eapes_tradeoff", "eapes_delta", "eapes_epsilon"]

_EPS = float(np.finfo(np.float64).eps)


def _check_tau(tau) -> np.ndarray:
    return np.asarray(check_array("tau", tau, 0.0, 1.0), dtype=np.float64)


def _check_delta_max(delta_max) -> np.ndarray:
    return np.asarray(check_array("delta_max", delta_max, 0.0, 1.0, hi_open=True), dtype=np.float64)



# ----------------------------------------------------------------------------------------------------
# E-APES Theorem 3 with a computed τ
# ----------------------------------------------------------------------------------------------------


def eapes_mu(p) -> np.float64:
    """μ = 2/√(Σ_i p_i) (E-APES Theorem 2 / GSPA Lemma 3: T(N(μ₀, Σ), N(μ₁, Σ)) = G_μ).

    Equal to MATH §3.3's √(2/Σ(1 − δ_i)/(1 + e^{ε_i})) over the other users.

    Args:
        p: 1-D array of the other users' clone probabilities p_i ∈ (0, 1].

    Returns:
        μ as a numpy float64 scalar.

    Example:
        >>> import numpy as np
        >>> from jaxpriv.shuffle.eapes import eapes_mu
        >>> from jaxpriv.shuffle.multinomial import clone_probabilities
        >>> round(float(eapes_mu(clone_probabilities(np.ones(9999)))), 6)  # MATH §3.3's reference
        0.027271
    """
    p = check_clone_probabilities(p)
    return np.float64(2.0 / math.sqrt(float(p.sum())))


def _tradeoff_kernel(mu, alpha, tau, dm):
    shifted = jnp.minimum(alpha + tau, 1.0)
    g = fdp.gaussian_tradeoff_kernel(mu, shifted)
    val = dm * (1 - alpha) + (1 - dm) * jnp.maximum(g - tau, 0.0)
    return (jnp.clip(val, 0.0, 1.0 - alpha),)


def _pure_delta_upper(mu, tau, eps):
    """U(ε) ≥ sup_{α∈[0,1]} [1 − g(α) − e^ε α] for g(α) = max(0, G_μ(min(α + τ, 1)) − τ).

    See :func:`eapes_delta` for the derivation. Rounded up.
    """
    gd = fdp.gdp_delta_kernel(mu, eps)
    # τ = 0 contributes 0 even where e^ε overflows (no inf·0 = NaN)
    a_branch = gd + jnp.where(tau > 0, (1 + jnp.exp(eps)) * tau, 0.0) * (1 + 4 * _EPS)
    b_star = ndtr(-eps / mu - mu / 2)
    g_tau = fdp.gaussian_tradeoff_kernel(mu, tau) * (1 - 8 * _EPS)
    b_branch = 1 + tau - g_tau
    u = jnp.where(b_star >= tau * (1 - 1e-9), a_branch, b_branch)
    return jnp.minimum(u * (1 + 4 * _EPS), 1.0)


def _delta(mu, tau, dm, eps):
    return jnp.minimum(dm + (1 - dm) * _pure_delta_upper(mu, tau, eps) * (1 + 2 * _EPS), 1.0)


def _delta_kernel(mu, tau, dm, eps):
    return (_delta(mu, tau, dm, eps),)


def _epsilon_kernel(mu, tau, dm, delta):
    """Bracket ε(δ), then bisect it to adjacent floats (see :func:`eapes_epsilon`)."""
    def good(e):
        return _delta(mu, tau, dm, e) <= delta

    pos = tau > 0
    z = -ndtri(jnp.where(pos, tau, 0.5))
    # τ > 0: at ε_hi the maximiser b* = Φ(−ε/μ − μ/2) is safely below τ, so δ(ε_hi) is the floor.
    hi_floor = jnp.maximum(mu * (z + 1e-6 * (1 + jnp.abs(z)) - mu / 2), 0.0)
    # τ = 0: the fdp bracket for the pure target δ' = (δ − δ_max)/(1 − δ_max) (δ_μ(ε_hi) < δ').
    target = (delta - dm) / (1 - dm)
    hi_gdp = mu * mu / 2 + mu * (1.0 - ndtri(jnp.clip(target, 1e-300, 0.5)))
    hi = jnp.where(pos, hi_floor, hi_gdp)

    def grow(_, carry):  # only τ = 0 rounding stragglers can need this
        hi, ok = carry
        more = ~ok & ~pos & (target > 0)
        hi = jnp.where(more, 2 * hi + 1e-3, hi)
        return hi, jnp.where(more, good(hi), ok)

    hi, ok_hi = lax.fori_loop(0, 30, grow, (hi, good(hi)))

    _, hi = bisect_floats(good, jnp.zeros_like(hi), hi)
    out = jnp.where(good(jnp.zeros_like(hi)), 0.0, hi)
    return (jnp.where(ok_hi, out, jnp.inf),)


_tradeoff_jit = kernel_jit(_tradeoff_kernel)
_delta_jit = kernel_jit(_delta_kernel)
_epsilon_jit = kernel_jit(_epsilon_kernel)


def _batched(kernel, mu: float, shape, *arrays) -> np.ndarray:
    """Evaluate a jitted (μ, a, b, c) kernel over the broadcast arrays in padded chunks (one compiled
    program per bucket size, see :func:`jaxpriv._batching.map_chunked`)."""
    flat = [np.broadcast_to(np.asarray(a, dtype=np.float64), shape).reshape(-1) for a in arrays]
    with float64():
        (out,) = map_chunked(kernel, [np.array([mu])] + flat, progress=False)
    return np.asarray(out, dtype=np.float64).reshape(shape)


def eapes_tradeoff(alpha, p, tau, delta_max):
    """E-APES Theorem 3 (GSPA Theorem 2) trade-off lower bound with a computed τ (MATH §3.3).

    T(α) ≥ δ_max(1 − α) + (1 − δ_max)·max(0, G_μ(min(α + τ, 1)) − τ),  μ = 2/√(Σ p_i),

    clipped to [0, 1 − α]. G_μ(α) = Φ(Φ⁻¹(1 − α) − μ) (:func:`jaxpriv.fdp.gaussian_tradeoff`). τ should
    be :func:`lattice_gaussian_tv` (a Berry–Esseen constant or the Eq. 14 number is not a valid τ).
    This is the paper's formula as stated; see :func:`eapes_delta` for the (ε, δ) curve used for
    accounting, which treats δ_max more conservatively. Jitted and batched over the broadcast arguments.

    Args:
        alpha: type-I error α ∈ [0, 1] (array-like).
        p: 1-D array of the other users' clone probabilities p_i ∈ (0, 1].
        tau: τ ∈ [0, 1] (array-like, broadcast against ``alpha``).
        delta_max: max_i δ_i ∈ [0, 1) (array-like, broadcast).

    Returns:
        float64 numpy array of the lower bound on the type-II error, non-increasing in α.

    Example:
        >>> from jaxpriv.shuffle.eapes import eapes_tradeoff
        >>> [round(float(t), 6) for t in eapes_tradeoff([0.0, 0.5], [0.5] * 400, 0.0, 0.0)]  # G_0.1
        [1.0, 0.443769]
    """
    alpha = np.asarray(check_array("alpha", alpha, 0.0, 1.0), dtype=np.float64)
    mu = float(eapes_mu(p))
    tau = _check_tau(tau)
    dm = _check_delta_max(delta_max)
    shape = check_broadcastable(alpha=alpha, tau=tau, delta_max=dm)
    return _batched(_tradeoff_jit, mu, shape, alpha, tau, dm)


def eapes_delta(p, tau, delta_max, epsilon):
    """δ(ε) implied by E-APES Theorem 3 with a computed τ — a rigorous upper bound (MATH §3.3, §3.1).

    Accounting (conservative in δ_max): the target's δ_max mass is treated as fully revealing,
    δ(ε) = δ_max + (1 − δ_max)·δ_g(ε) (the MATH §3.1 rule δ_t + (1 − δ_t)·δ_pure). This dominates the
    conversion of :func:`eapes_tradeoff`'s mixture: for f = δ_m(1 − α) + (1 − δ_m)g,
    sup_α[1 − f(α) − e^ε α] = sup_α[(1 − δ_m)(1 − g(α)) − (e^ε − δ_m)α] ≤ (1 − δ_m)δ_g(ε), since
    e^ε − δ_m ≥ (1 − δ_m)e^ε for ε ≥ 0.

    Pure part. g(α) = max(0, G_μ(α + τ) − τ) (G_μ := 0 beyond 1) is symmetric in the two neighbours
    (swap ξ₀ ↔ ξ₁), so f-DP ⇒ (ε, δ_g(ε))-DP with δ_g(ε) = sup_{α∈[0,1]} [1 − g(α) − e^ε α]
    (Dong, Roth & Su 2022, Prop. 2.12). Since 1 − max(0, x) ≤ 1 − x, substituting b = α + τ,
        δ_g(ε) ≤ (1 + e^ε)τ + sup_{b ≥ τ} [1 − G_μ(b) − e^ε b].
    The bracket is concave in b with maximiser b* = Φ(−ε/μ − μ/2) (where −G_μ'(b) = e^ε), and its
    value at b* is δ_μ(ε) = gdp_delta(μ, ε). Hence
        δ_g(ε) ≤ U(ε) = (1 + e^ε)τ + δ_μ(ε)      if b* ≥ τ,
                        1 + τ − G_μ(τ)            if b* < τ (the bracket peaks at b = τ),
    capped at 1. U is continuous and non-increasing (dU/dε = e^ε(τ − b*) ≤ 0 on the first branch, the
    second is constant), so ε(δ) is a monotone root find, and δ(ε) never falls below the floor
    δ_max + (1 − δ_max)(1 + τ − G_μ(τ)). In particular δ(ε) ≥ δ_μ(ε) (pure GDP) always, and
    δ(ε) ≤ δ_max + (1 − δ_max)(δ_μ(ε) + (1 + e^ε)τ). The first branch is used unless the computed b* is
    below τ(1 − 1e-9), so a rounding of b* cannot select the smaller branch wrongly; δ_μ is the
    rounded-up ``gdp_delta`` and the other terms are rounded up by a few ulp. Jitted and batched over
    the broadcast arguments.

    Args:
        p: 1-D array of the other users' clone probabilities p_i ∈ (0, 1].
        tau: τ ∈ [0, 1], normally :func:`lattice_gaussian_tv` (array-like).
        delta_max: max_i δ_i ∈ [0, 1) (array-like).
        epsilon: ε ≥ 0 (array-like); all broadcast together.

    Returns:
        float64 numpy array of δ ∈ [0, 1].

    Example:
        >>> import numpy as np
        >>> from jaxpriv import fdp
        >>> from jaxpriv.shuffle.eapes import eapes_delta, eapes_mu
        >>> p = np.full(999, 0.5)
        >>> d, gdp = eapes_delta(p, 0.0, 0.0, 0.1), fdp.gdp_delta(eapes_mu(p), 0.1)  # τ = 0: plain GDP
        >>> bool(gdp <= d <= gdp * (1 + 1e-14))  # rounded up by a few ulp
        True
    """
    mu = float(eapes_mu(p))
    tau = _check_tau(tau)
    dm = _check_delta_max(delta_max)
    eps = np.asarray(check_array("epsilon", epsilon, 0.0), dtype=np.float64)
    shape = check_broadcastable(tau=tau, delta_max=dm, epsilon=eps)
    return _batched(_delta_jit, mu, shape, tau, dm, eps)


def eapes_epsilon(p, tau, delta_max, delta):
    """Smallest ε (to adjacent floats, rounded up) with :func:`eapes_delta` ≤ δ.

    δ(ε) is non-increasing (see :func:`eapes_delta`), so ε is found by bisection to adjacent floats
    (:func:`jaxpriv.calibrate.bisect_floats`) on
    [0, ε_hi], ε_hi = max(0, μ(z + 10⁻⁶(1 + |z|) − μ/2)), z = −Φ⁻¹(τ) (there b* < τ, i.e. δ has reached
    its floor; for τ = 0 the ``fdp.gdp_epsilon`` bracket for δ' = (δ − δ_max)/(1 − δ_max)); the upper
    end, which satisfies δ(ε) ≤ δ, is returned. Returns ``inf`` when δ is below the floor
    δ_max + (1 − δ_max)(1 + τ − G_μ(τ)) (no finite ε is certified), and 0 when δ(0) ≤ δ. With τ = 0 this
    is ``fdp.gdp_epsilon`` after removing δ_max. The bisection is one jitted loop, batched over the
    broadcast arguments.

    Args:
        p: 1-D array of the other users' clone probabilities p_i ∈ (0, 1].
        tau: τ ∈ [0, 1] (array-like).
        delta_max: max_i δ_i ∈ [0, 1) (array-like).
        delta: target δ ∈ (0, 1) (array-like); all broadcast together.

    Returns:
        float64 numpy array of ε ≥ 0 (or inf).

    Example:
        >>> import numpy as np
        >>> from jaxpriv.shuffle.eapes import eapes_delta, eapes_epsilon
        >>> p = np.full(9999, 0.5)
        >>> eps = eapes_epsilon(p, 0.002, 0.0, [0.05, 0.01, 1e-6])
        >>> bool(eps[0] == 0.0 and 0 < eps[1] < 1 and np.isinf(eps[2]))  # 1e-6 is below the δ floor
        True
        >>> bool(eapes_delta(p, 0.002, 0.0, eps[1]) <= 0.01)
        True
    """
    mu = float(eapes_mu(p))
    tau = _check_tau(tau)
    dm = _check_delta_max(delta_max)
    delta = np.asarray(check_array("delta", delta, 0.0, 1.0, lo_open=True, hi_open=True), dtype=np.float64)
    shape = check_broadcastable(tau=tau, delta_max=dm, delta=delta)
    return _batched(_epsilon_jit, mu, shape, tau, dm, delta)
