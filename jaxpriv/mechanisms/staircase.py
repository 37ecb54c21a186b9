"""The staircase mechanism (Geng & Viswanath, "The optimal noise-adding mechanism in differential
privacy", IEEE Trans. IT 2016; MATH §4.2): density, CDF, a fast exact sampler, moments, pure ε and the
exact Rényi-DP curve.

With privacy ε, shape γ ∈ [0, 1], sensitivity Δ and b = e^{−ε}, the density is a·b^k on
|x| ∈ [kΔ, (k+γ)Δ) and a·b^{k+1} on [(k+γ)Δ, (k+1)Δ), a = (1−b)/(2Δ(γ + b(1−γ))). Equivalently
log f(x) = log a − ε·S(x), where S(x) counts the jump points ±(j+γ)Δ (j ≥ 0) between 0 and x. γ* =
1/(1+e^{ε/2}) minimises the expected magnitude E|X| to Δe^{ε/2}/(e^ε − 1) (Geng & Viswanath, the ℓ1
cost); the variance-optimal γ is a different, cube-root expression. ``gamma=None`` means γ*.

UDP-FL (seed 002) uses this mechanism; its printed "RDP" (Table 3 / Theorem 1) is not a Rényi divergence
and is kept only as :func:`udpfl_printed_rdp`, to document the discrepancy — never for accounting.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from .._numerics import (as_output, check_array, check_broadcastable, check_orders, float64, is_concrete, log1mexp,
                         kernel_jit)

__all__ = [
    "optimal_gamma",
    "log_prob",
    "cdf",
    "sample",
    "mean",
    "variance",
    "epsilon",
    "rdp",
    "rdp_shift",
    "rdp_l1",
    "udpfl_printed_rdp",
    "privacy_loss_atoms",
]


def _optimal_gamma(epsilon):
    return jax.nn.sigmoid(-epsilon / 2.0)  # 1/(1 + e^{ε/2}), without overflow for large ε


def optimal_gamma(epsilon):
    """Staircase shape γ* = 1/(1 + e^{ε/2}) that minimises E|X| (Geng & Viswanath 2016, the ℓ1 cost;
    MATH §4.2 and UDP-FL's choice). It is not the variance-optimal shape (the ℓ2 cost has its own).

    Args:
      epsilon: privacy parameter ε > 0 (any shape).

    Returns:
      float64 array of γ* ∈ (0, ½), same shape.

    Example:
      >>> from jaxpriv.mechanisms import staircase
      >>> round(float(staircase.optimal_gamma(1.0)), 6)
      0.377541
    """
    with float64():
        epsilon = check_array("epsilon", epsilon, 0.0, np.inf, lo_open=True)
        return as_output(_optimal_gamma(epsilon))


def _params(epsilon, gamma, sensitivity):
    """Validated float64 (ε, γ, Δ); γ = None means γ*(ε)."""
    epsilon = check_array("epsilon", epsilon, 0.0, np.inf, lo_open=True)
    gamma = _optimal_gamma(epsilon) if gamma is None else check_array("gamma", gamma, 0.0, 1.0)
    sensitivity = check_array("sensitivity", sensitivity, 0.0, np.inf, lo_open=True)
    check_broadcastable(epsilon=epsilon, gamma=gamma, sensitivity=sensitivity)
    return epsilon, gamma, sensitivity


def _log_a_delta(epsilon, gamma):
    """log(aΔ) = log(1−b) − log 2 − log(γ + b(1−γ)): the density at the origin times Δ."""
    return log1mexp(-epsilon) - jnp.log(2.0) - jnp.log(gamma + jnp.exp(-epsilon) * (1.0 - gamma))


# ------------------------------------------------------------------------------------------------------
# Density and distribution function
# ------------------------------------------------------------------------------------------------------


@kernel_jit
def _log_prob(x, epsilon, gamma, sensitivity):
    u = jnp.abs(x) / sensitivity
    k = jnp.floor(u)
    steps = k + (u - k >= gamma)  # jump points at (j + γ)Δ: k full periods, plus one if past γ
    value = _log_a_delta(epsilon, gamma) - jnp.log(sensitivity) - epsilon * steps
    return jnp.where(jnp.isinf(x), -jnp.inf, value)


def log_prob(x, epsilon, gamma=None, sensitivity=1.0):
    """Log-density of staircase noise: log a − ε·S(x) (MATH §4.2; Geng & Viswanath 2016, Eq. 11).

    Args:
      x: noise values (any shape; ±inf gives −inf).
      epsilon: ε > 0.
      gamma: shape γ ∈ [0, 1], or None for γ* = 1/(1+e^{ε/2}).
      sensitivity: Δ > 0.

    All arguments broadcast together.

    Returns:
      float64 array of log f(x).

    Example:
      >>> from jaxpriv.mechanisms import staircase
      >>> [round(float(v), 6) for v in staircase.log_prob([0.1, 0.5, 1.1], 1.0, 0.25)]
      [-0.509196, -1.509196, -1.509196]
    """
    with float64():
        epsilon, gamma, sensitivity = _params(epsilon, gamma, sensitivity)
        x = check_array("x", x, allow_inf=True)
        check_broadcastable(x=x, epsilon=epsilon, gamma=gamma, sensitivity=sensitivity)
        return as_output(_log_prob(x, epsilon, gamma, sensitivity))


@kernel_jit
def _tail(y, epsilon, gamma, sensitivity):
    """P(X > y) for y ≥ 0, as a sum of positive terms (no cancellation deep in the tail):
    a'b^k[(γ − r) + c] for r < γ and a'b^{k+1}[(1 − r + γ) + c] for r ≥ γ, with y = (k + r)Δ,
    a' = aΔ and c = b/(1−b) = 1/expm1(ε)."""
    u = y / sensitivity
    k = jnp.floor(u)
    r = u - k
    c = 1.0 / jnp.expm1(epsilon)
    first = r < gamma
    inner = jnp.where(first, gamma - r, 1.0 - r + gamma) + c
    log_tail = _log_a_delta(epsilon, gamma) - epsilon * (k + jnp.where(first, 0.0, 1.0)) + jnp.log(inner)
    return jnp.where(jnp.isinf(y), 0.0, jnp.exp(log_tail))


def cdf(x, epsilon, gamma=None, sensitivity=1.0):
    """Distribution function F(x) = P(X ≤ x) of staircase noise (MATH §4.2), exact in closed form.

    F(x) = P(X > |x|) for x < 0 and 1 − P(X > x) for x ≥ 0, with the tail summed over whole periods
    (geometric, ½b^k) plus the part of the current period.

    Args:
      x: points (any shape; ±inf allowed).
      epsilon, gamma, sensitivity: as in :func:`log_prob`.

    Returns:
      float64 array of F(x).

    Example:
      >>> from jaxpriv.mechanisms import staircase
      >>> [round(float(v), 6) for v in staircase.cdf([-1.0, 0.0, 1.0], 1.0, 0.25)]
      [0.18394, 0.5, 0.81606]
    """
    with float64():
        epsilon, gamma, sensitivity = _params(epsilon, gamma, sensitivity)
        x = check_array("x", x, allow_inf=True)
        check_broadcastable(x=x, epsilon=epsilon, gamma=gamma, sensitivity=sensitivity)
        tail = _tail(jnp.abs(x), epsilon, gamma, sensitivity)
        return as_output(jnp.where(x < 0, tail, 1.0 - tail))


# ------------------------------------------------------------------------------------------------------
# Sampler
# ------------------------------------------------------------------------------------------------------


@functools.partial(kernel_jit, static_argnames=("shape", "dtype"))
def _sample(key, epsilon, gamma, sensitivity, shape, dtype):
    """MATH §4.2 sampler from two 32-bit words per sample.

    Word 1 → W ∈ (0, 1] on a 2^-32 grid → G = ⌊−log W / ε⌋, so Pr[G ≥ k] = b^k: the 0-based geometric
    (the tail is exact down to probability ~1e-10). Word 2 → bit 0 is the sign, bits 8..31 are V ∈ [0, 1).
    B = 0 iff V < π = γ/(γ + (1−γ)b); given B, V rescaled to its sub-interval is again uniform and
    independent of B, so one uniform serves both: offset V·z (B = 0) or γ + (V − π)·z/b (B = 1), with
    z = γ + (1−γ)b = γ/π and z/b = (1−γ)/(1−π).
    Half-precision dtypes are computed in float32 and rounded once at the end (their 8–11-bit uniforms
    would distort the geometric).
    """
    work = jnp.float64 if dtype == jnp.float64 else jnp.float32
    epsilon, gamma, sensitivity = (jnp.asarray(v, work) for v in (epsilon, gamma, sensitivity))
    bits = jax.random.bits(key, (2,) + shape, jnp.uint32)
    w = (bits[0].astype(work) + 0.5) * (2.0**-32)
    g = jnp.floor(-jnp.log(w) / epsilon)
    v = (bits[1] >> 8).astype(work) * (2.0**-24)
    b = jnp.exp(-epsilon)
    z = gamma + (1.0 - gamma) * b
    pi = gamma / z
    offset = jnp.where(v < pi, v * z, gamma + (v - pi) * (z / b))
    sign = jnp.where((bits[1] & 1) == 1, -1.0, 1.0).astype(work)
    return (sign * sensitivity * (g + offset)).astype(dtype)


def sample(key, epsilon, gamma=None, shape=None, sensitivity=1.0, *, dtype=None):
    """Draw staircase noise: sign·Δ·(G + γU) with probability π, else sign·Δ·(G + γ + (1−γ)U) (MATH §4.2).

    G is 0-based geometric, Pr[G = k] = (1−b)b^k; π = γ/(γ + (1−γ)b). (The UDP-FL repository subtracts 1
    from an already 0-based geometric; that sampler puts mass 1 − b² instead of 1 − b on |X| < Δ and is
    not ε-DP. This one is exact up to the 2^-32 / 2^-24 resolution of its uniforms.) Runs in float32
    for training (the default dtype is JAX's default float) and costs two 32-bit random words per draw.

    Args:
      key: a JAX PRNG key.
      epsilon: ε > 0 (scalar or array broadcastable to ``shape``).
      gamma: γ ∈ [0, 1], or None for γ* = 1/(1+e^{ε/2}).
      shape: output shape (default: the broadcast shape of the parameters).
      sensitivity: Δ > 0.
      dtype: floating dtype of the draws (default: JAX's default float, float32 unless x64 is on).

    Returns:
      array of noise of the given shape and dtype.

    Example:
      >>> import jax
      >>> from jaxpriv.mechanisms import staircase
      >>> x = staircase.sample(jax.random.key(0), 1.0, shape=(100_000,))
      >>> x.shape, str(x.dtype), bool(abs(float(x.mean())) < 0.02)
      ((100000,), 'float32', True)
    """
    dtype = jnp.dtype(jax.dtypes.canonicalize_dtype(jnp.float_) if dtype is None else dtype)
    if not jnp.issubdtype(dtype, jnp.floating):
        raise ValueError(f"dtype must be a floating dtype, got {dtype}")
    params = (epsilon, gamma, sensitivity)
    if all(is_concrete(p) for p in params):
        # evaluated now even inside a caller's jit (γ* would otherwise become a tracer)
        with jax.ensure_compile_time_eval(), float64():
            epsilon, gamma, sensitivity = (np.asarray(p) for p in _params(*params))
            bshape = np.broadcast_shapes(epsilon.shape, gamma.shape, sensitivity.shape)
            shape = bshape if shape is None else tuple(int(s) for s in np.atleast_1d(shape))
            try:
                ok = np.broadcast_shapes(bshape, shape) == shape
            except ValueError:
                ok = False
            if not ok:
                raise ValueError(f"shapes do not broadcast together: parameters {bshape} and shape {shape}")
    else:  # traced parameters (inside the caller's jit): no validation
        if gamma is None:
            gamma = _optimal_gamma(jnp.asarray(epsilon))
        if shape is None:
            shape = jnp.broadcast_shapes(*(jnp.shape(p) for p in (epsilon, gamma, sensitivity)))
        shape = tuple(int(s) for s in np.atleast_1d(shape))
    return _sample(key, epsilon, gamma, sensitivity, shape, dtype)


# ------------------------------------------------------------------------------------------------------
# Moments
# ------------------------------------------------------------------------------------------------------


def mean(epsilon, gamma=None, sensitivity=1.0):
    """Mean of staircase noise: 0 (the density is symmetric).

    Args:
      epsilon, gamma, sensitivity: as in :func:`log_prob`.

    Returns:
      float64 zeros of the broadcast shape.

    Example:
      >>> from jaxpriv.mechanisms import staircase
      >>> float(staircase.mean(1.0))
      0.0
    """
    with float64():
        epsilon, gamma, sensitivity = _params(epsilon, gamma, sensitivity)
        return as_output(jnp.zeros(jnp.broadcast_shapes(epsilon.shape, gamma.shape, sensitivity.shape)))


@kernel_jit
def _variance(epsilon, gamma, sensitivity):
    b = jnp.exp(-epsilon)
    c = 1.0 / jnp.expm1(epsilon)  # E[G] = b/(1−b)
    z = gamma + b * (1.0 - gamma)
    e_r = (gamma**2 + b * (1.0 - gamma**2)) / (2.0 * z)
    e_r2 = (gamma**3 + b * (1.0 - gamma**3)) / (3.0 * z)
    e_g2 = c * (1.0 + 2.0 * c)  # E[G²] = b(1+b)/(1−b)² = c(1 + 2c)
    return sensitivity**2 * (e_g2 + 2.0 * c * e_r + e_r2)


def variance(epsilon, gamma=None, sensitivity=1.0):
    """Variance of staircase noise, exact: Δ²(E[G²] + 2E[G]E[R] + E[R²]).

    |X|/Δ = G + R with G geometric (Pr[G = k] = (1−b)b^k) independent of the position R ∈ [0, 1) in its
    period, whose density is ∝ 1 on [0, γ) and ∝ b on [γ, 1). So E[G] = b/(1−b), E[G²] = b(1+b)/(1−b)²,
    E[R] = (γ² + b(1−γ²))/(2z), E[R²] = (γ³ + b(1−γ³))/(3z), z = γ + b(1−γ). (Derived here from the
    density of MATH §4.2.)

    Args:
      epsilon, gamma, sensitivity: as in :func:`log_prob`.

    Returns:
      float64 array of Var[X].

    Example:
      >>> from jaxpriv.mechanisms import staircase
      >>> round(float(staircase.variance(1.0)), 6)
      1.919682
    """
    with float64():
        return as_output(_variance(*_params(epsilon, gamma, sensitivity)))


# ------------------------------------------------------------------------------------------------------
# Privacy
# ------------------------------------------------------------------------------------------------------


def epsilon(epsilon, gamma=None, sensitivity=1.0):
    """Pure-DP guarantee of the staircase mechanism: ε, for every γ ∈ [0, 1] (MATH §4.2).

    log f(x) = log a − ε·S(x) with S counting the jump points ±(j+γ)Δ between 0 and x. Two outputs at
    distance t ≤ Δ bracket at most one positive-side and at most one negative-side jump point (each
    side's jumps are Δ apart), so S changes by at most one and |log f(x) − log f(x − t)| ≤ ε.

    Args:
      epsilon, gamma, sensitivity: as in :func:`log_prob` (queries of sensitivity Δ).

    Returns:
      float64 array of the pure-DP ε (the broadcast shape).

    Example:
      >>> from jaxpriv.mechanisms import staircase
      >>> float(staircase.epsilon(0.5, 0.9))
      0.5
    """
    with float64():
        eps, gamma, sensitivity = _params(epsilon, gamma, sensitivity)
        return as_output(jnp.broadcast_to(eps, jnp.broadcast_shapes(eps.shape, gamma.shape, sensitivity.shape)))


def _loss_plus_mass(epsilon, gamma):
    """p₊ = P_f(L = +ε) at the worst shift Δ: ½ + aΔ·min(γ, 1−γ)."""
    return 0.5 + jnp.exp(_log_a_delta(epsilon, gamma)) * jnp.minimum(gamma, 1.0 - gamma)


def _loss_plus_mass_at(epsilon, gamma, s):
    """p₊(t) = P(L = +ε) at shift t = sΔ, s ∈ [0, 1], γ ≤ ½: aΔ/(1−b)·[min(s, 2γ) + b·max(s − 2γ, 0)].

    Each jump point z of f (a drop by the factor b, at |z| = (j+γ)Δ) contributes the mass of the window
    of length t just outside it where f(x − t)/f(x) = e^{ε}; the windows next to ±γΔ overlap once
    t > 2γΔ, after which only the lower level b·a is added. Equals ½ + aΔγ at s = 1.
    """
    a_scaled = jnp.exp(_log_a_delta(epsilon, gamma)) / -jnp.expm1(-epsilon)  # aΔ/(1−b)
    return a_scaled * (jnp.minimum(s, 2.0 * gamma) + jnp.exp(-epsilon) * jnp.maximum(s - 2.0 * gamma, 0.0))


def privacy_loss_atoms(epsilon, gamma):
    """The privacy loss distribution of the staircase mechanism at the worst shift Δ, as atoms (MATH §4.2,
    §7.2): losses (+ε, 0, −ε) with probabilities (p₊, p₀, p₋ = b·p₊) under the shifted density.

    Every shift t ≤ Δ gives the same three losses with a smaller p₊ (``rdp_shift``), and the hockey-stick
    divergence increases with p₊ at every e^ε, so this pair dominates all of them. A kernel for the
    accountants: ε > 0 and γ ∈ [0, 1] of any broadcast shape S in (γ = None is not accepted here; pass
    ``optimal_gamma(ε)``), two float64 arrays of shape S + (3,) out. p₀ is clipped at 0 (at γ = ½ it is
    exactly 0 and would round to −3e-17).

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxpriv.mechanisms import staircase
      >>> losses, masses = staircase.privacy_loss_atoms(jnp.float32(1.0), jnp.float32(0.3))
      >>> [round(float(m), 4) for m in masses], round(float(masses.sum()), 6)
      ([0.6701, 0.0834, 0.2465], 1.0)
    """
    with float64():
        epsilon = check_array("epsilon", epsilon, 0.0, np.inf, lo_open=True)
        gamma = check_array("gamma", gamma, 0.0, 1.0)
        check_broadcastable(epsilon=epsilon, gamma=gamma)
        eps, gamma = jnp.broadcast_arrays(epsilon, gamma)
        p_plus = _loss_plus_mass(eps, gamma)
        p_minus = jnp.exp(-eps) * p_plus
        losses = jnp.stack([eps, jnp.zeros_like(eps), -eps], axis=-1)
        return as_output((losses, jnp.stack([p_plus, jnp.maximum(1.0 - p_plus - p_minus, 0.0), p_minus], axis=-1)))


@kernel_jit  # one program per shape, not one per operation of an eager call
def _rdp(epsilon, gamma, orders, p_plus=None):
    """Unvalidated kernel: ε, γ of any broadcast shape S, orders (K,) → S + (K,); ``p_plus`` (shape S)
    replaces the worst-shift P(L = +ε) for a smaller shift."""
    eps, gamma = epsilon[..., None], gamma[..., None]
    shifted = p_plus is not None
    p_plus = p_plus[..., None] if shifted else _loss_plus_mass(eps, gamma)
    x = (orders - 1.0) * eps
    small = x < 1.0
    xs = jnp.where(small, x, 1.0)
    # M − 1 = p₊[(e^x − 1) + b(e^{−x} − 1)] (since p₋ = b·p₊ and p₀ = 1 − p₊ − p₋): ≥ 0, exact near α = 1
    near = jnp.log1p(p_plus * (jnp.expm1(xs) + jnp.exp(-eps) * jnp.expm1(-xs)))
    xl = jnp.where(small, 1.0, x)
    if shifted:  # p₀ = 1 − p₊ − p₋ with p₋ = b·p₊
        log_p0 = jnp.log(jnp.maximum(1.0 - (1.0 + jnp.exp(-eps)) * p_plus, 0.0))
    else:
        log_p0 = _log_a_delta(eps, gamma) + jnp.where(gamma <= 0.5, jnp.log1p(-2.0 * gamma) - eps,
                                                      jnp.log(jnp.abs(2.0 * gamma - 1.0)))
    far = jnp.logaddexp(
        jnp.logaddexp(jnp.log(p_plus) + xl, log_p0), jnp.log(p_plus) - eps - xl
    )
    return jnp.where(small, near, far) / (orders - 1.0)


def rdp(epsilon, gamma=None, orders=None, sensitivity=1.0):
    """Exact RDP curve of the staircase mechanism (neighbouring queries differ by at most Δ).

    The privacy loss L(x) = log f(x)/f(x − t) takes only the values −ε, 0, +ε for |t| ≤ Δ (see
    :func:`epsilon`), and E_f[e^{−L}] = 1 forces p₋ = b·p₊, so
    e^{(α−1)ρ(α)} = p₊e^{(α−1)ε} + p₀ + p₋e^{−(α−1)ε} = 1 + p₊[(e^{(α−1)ε} − 1) + b(e^{−(α−1)ε} − 1)],
    increasing in p₊ = P(L = +ε). P(L ≠ 0) = (1+b)p₊ does not decrease as the shift t grows to Δ: each
    jump point z adds the mass of x ∈ [z, z+t), at rate f(z + t); for γ < ½ and t > 2γΔ the jumps ±γΔ can
    share a window (net 0), which removes mass at rate 2f(t − γΔ), exactly offset by the rates
    f(t − γΔ) + f(t + γΔ) of those two jumps (both equal ab there). So t = Δ is the worst shift, where
    (MATH §4.2, a' = aΔ; tests check every t ∈ (0, Δ] numerically):

    * γ ≤ ½: p₊ = ½ + a'γ, p₀ = a'b(1 − 2γ);
    * γ > ½ (derived here the same way, MATH §4.2): p₊ = ½ + a'(1 − γ), p₀ = a'(2γ − 1).

    Both directions of the divergence are equal (f is symmetric). The curve does not depend on Δ (the
    noise scales with it); ``sensitivity`` is validated for symmetry with the other functions.

    Args:
      epsilon: ε > 0 (any shape ``S``, broadcast with ``gamma``).
      gamma: γ ∈ [0, 1], or None for γ*.
      orders: 1-D array of ``K`` Rényi orders > 1 (required).
      sensitivity: Δ > 0.

    Returns:
      float64 array of shape ``S + (K,)``.

    Example:
      >>> from jaxpriv.mechanisms import staircase
      >>> [round(float(r), 6) for r in staircase.rdp(1.0, orders=[2.0, 10.0])]
      [0.710577, 0.959851]
    """
    if orders is None:
        raise ValueError("orders must be given: a 1-D array of Rényi orders in (1, inf)")
    with float64():
        epsilon, gamma, _ = _params(epsilon, gamma, sensitivity)
        orders = jnp.asarray(check_orders(orders))
        return as_output(_rdp(epsilon, gamma, orders))


def _check_shift_params(epsilon, gamma, sensitivity):
    eps, gamma, sensitivity = _params(epsilon, gamma, sensitivity)
    if is_concrete(gamma) and np.any(np.asarray(gamma) > 0.5):
        raise ValueError("gamma must lie in [0, 0.5] for the shifted curve (γ* = 1/(1+e^{ε/2}) always does)")
    return eps, gamma, sensitivity


def rdp_shift(epsilon, shift, gamma=None, orders=None, sensitivity=1.0):
    """Exact RDP of the staircase mechanism between two queries that differ by ``shift`` ∈ [0, Δ].

    As in :func:`rdp`, e^{(α−1)ρ} = 1 + p₊(t)[(e^{(α−1)ε} − 1) + b(e^{−(α−1)ε} − 1)], now with the
    P(L = +ε) of the shift t: p₊(t) = aΔ/(1−b)·[min(t/Δ, 2γ) + b·max(t/Δ − 2γ, 0)] (γ ≤ ½). p₊ is
    concave and piecewise linear in t and log(1 + K·p) is concave in p, so ρ(t) is **concave** in t: a
    shift spread over many coordinates costs more than the same L1 distance on one (see :func:`rdp_l1`).
    Source: Geng & Viswanath's staircase density (MATH §4.2), derived here; tests integrate the two
    piecewise-constant densities exactly.

    Args:
      epsilon: ε > 0; shift: t ∈ [0, Δ] (broadcast together with ``gamma``, shape ``S``).
      gamma: γ ∈ [0, ½], or None for γ*.
      orders: 1-D array of ``K`` Rényi orders > 1 (required).
      sensitivity: Δ > 0.

    Returns:
      float64 array of shape ``S + (K,)``.

    Example:
      >>> import numpy as np
      >>> from jaxpriv.mechanisms import staircase
      >>> bool(np.allclose(staircase.rdp_shift(1.0, 1.0, orders=[2.0]), staircase.rdp(1.0, orders=[2.0])))
      True
    """
    if orders is None:
        raise ValueError("orders must be given: a 1-D array of Rényi orders in (1, inf)")
    with float64():
        eps, gamma, sensitivity = _check_shift_params(epsilon, gamma, sensitivity)
        shift = check_array("shift", shift, 0.0, np.inf)
        if is_concrete(shift) and np.any(np.asarray(shift) > np.asarray(sensitivity)):
            raise ValueError(f"shift must lie in [0, sensitivity={float(np.max(sensitivity))}]")
        shape = check_broadcastable(epsilon=eps, gamma=gamma, shift=shift, sensitivity=sensitivity)
        eps, gamma = jnp.broadcast_to(eps, shape), jnp.broadcast_to(gamma, shape)
        p_plus = _loss_plus_mass_at(eps, gamma, jnp.broadcast_to(shift / sensitivity, shape))
        return as_output(_rdp(eps, gamma, jnp.asarray(check_orders(orders)), p_plus))


def rdp_l1(epsilon, dimension, gamma=None, orders=None):
    """RDP of per-coordinate staircase noise on a ``dimension``-d query with L1 sensitivity Δ.

    The divergence of a product is the sum over coordinates, Σ_i ρ(|v_i|) with ‖v‖₁ ≤ Δ. Since ρ(t) is
    concave with ρ(0) = 0 (:func:`rdp_shift`), the sum is largest when the shift is spread evenly:
    ρ_d(α) = d·ρ(Δ/d; α) (Jensen), which grows with d towards Δ·ρ'(0). This is the curve to account
    per-coordinate staircase noise with (the 1-D curve :func:`rdp` is **not** a bound for d > 1).

    Args:
      epsilon: per-coordinate ε > 0 (scale: the staircase of sensitivity Δ; any shape ``S``).
      dimension: number of noised coordinates d ≥ 1 (integer; broadcasts with ``epsilon``).
      gamma: γ ∈ [0, ½], or None for γ*.
      orders: 1-D array of ``K`` Rényi orders > 1 (required).

    Returns:
      float64 array of shape ``S + (K,)``.

    Example:
      >>> from jaxpriv.mechanisms import staircase
      >>> one, many = staircase.rdp_l1(1.0, [1, 1000], orders=[2.0])[:, 0]
      >>> round(float(one), 4), round(float(many), 4)
      (0.7106, 1.224)
    """
    if orders is None:
        raise ValueError("orders must be given: a 1-D array of Rényi orders in (1, inf)")
    with float64():
        eps, gamma, _ = _check_shift_params(epsilon, gamma, 1.0)
        d = check_array("dimension", dimension, 1.0, np.inf, integer=True)
        shape = check_broadcastable(epsilon=eps, gamma=gamma, dimension=d)
        eps, gamma, d = (jnp.broadcast_to(x, shape) for x in (eps, gamma, d))
        p_plus = _loss_plus_mass_at(eps, gamma, 1.0 / d)
        return as_output(d[..., None] * _rdp(eps, gamma, jnp.asarray(check_orders(orders)), p_plus))


def udpfl_printed_rdp(epsilon, gamma, orders):
    """UDP-FL's printed staircase "RDP" (seed 002, Theorem 1 / Eq. 4, with ν = γ and λ = ε) — NOT a
    Rényi divergence; for documenting the discrepancy only, never for accounting.

    ½e^{(α−1)ε} + ½e^{−αε} + {(e^{(α−1)ε} + e^{−αε})(1−γ) + |2γ−1|e^{−sgn(½−γ)ε}}·(1 − e^{−1})/(2(γ + e^{−ε}(1−γ))).

    It has no logarithm and no 1/(α−1), and carries the paper's normaliser typo 1 − e^{−1} for
    1 − e^{−ε}; Table 3 additionally fixes ν = ½(1 + e^{−ε} − √(1 + (e^{−ε}−1)(e^{2(α−1)ε} − 1))), which is
    not real once (1 − e^{−ε})(e^{2(α−1)ε} − 1) > 1. Compared with the exact :func:`rdp` at γ*:

    ====  ====  ========  ==========  ===============
    ε     α     printed   exact ρ(α)  e^{(α−1)ρ(α)}
    ====  ====  ========  ==========  ===============
    0.1   2     1.2971    0.0099474   1.0100
    1     2     2.3994    0.71058     2.0352
    1     10    6.68e3    0.95985     5.65e3
    4     32    1.82e54   3.9977      6.64e53
    ====  ====  ========  ==========  ===============

    It grows like e^{(α−1)ε} where the RDP stays below ε, and it is not the moment e^{(α−1)ρ} either
    (it exceeds it by 0.29 to 2.7×), so used as an RDP value it would make accounting meaningless.

    Args:
      epsilon: ε > 0.
      gamma: ν = γ ∈ [0, 1].
      orders: 1-D array of orders > 1.

    Returns:
      float64 array of shape ``S + (K,)`` with the printed expression's value.

    Example:
      >>> from jaxpriv.mechanisms import staircase
      >>> round(float(staircase.udpfl_printed_rdp(1.0, 0.5, [2.0])[0]), 4)
      2.0862
    """
    with float64():
        eps, gamma, _ = _params(epsilon, gamma, 1.0)
        orders = jnp.asarray(check_orders(orders))
        eps, g = eps[..., None], gamma[..., None]
        up, down = jnp.exp((orders - 1.0) * eps), jnp.exp(-orders * eps)
        bracket = (up + down) * (1.0 - g) + jnp.abs(2.0 * g - 1.0) * jnp.exp(-jnp.sign(0.5 - g) * eps)
        value = 0.5 * up + 0.5 * down + bracket * (1.0 - np.exp(-1.0)) / (2.0 * (g + jnp.exp(-eps) * (1.0 - g)))
        return as_output(value)
