"""f-DP and Gaussian DP: trade-off functions and the μ-GDP ↔ (ε, δ) conversions of MATH §2.

A trade-off function f(α) is the smallest type-II error of any test with type-I error α between the
outputs on two neighbouring datasets; a mechanism is f-DP when its trade-off is ≥ f (Dong, Roth & Su
2022). μ-GDP is f = G_μ, the trade-off between N(0, 1) and N(μ, 1): it composes as √Σμ² and is the
same thing as (ε, δ(ε))-DP for every ε ≥ 0. This module evaluates the trade-off curves, δ(ε) in log
space (it never cancels to 0 or goes negative, and is rounded up by its floating-point error bound),
and inverts it for ε(δ) and μ(ε, δ) by a conservative monotone root find that is differentiable by the
implicit function theorem. ``dpsgd_mu_clt`` is the CLT *approximation* for DP-SGD, not a bound.
Results are float64 whatever the global ``jax_enable_x64`` flag; inputs are validated when concrete
and passed through when traced, so every function also works under ``jit``, ``grad`` and ``vmap``.
"""

from __future__ import annotations

from functools import partial
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import erf, ndtr, ndtri

from ._numerics import (as_output, bisect_floats, check_array, check_broadcastable, erfcx, float64, is_concrete,
                        log_expm1, kernel_jit)

__all__ = [
    "gaussian_tradeoff",
    "gdp_delta",
    "gdp_epsilon",
    "gdp_mu",
    "compose_gdp",
    "group_gdp",
    "eps_delta_tradeoff",
    "chain_tradeoffs",
    "dpsgd_mu_clt",
]

_EPS = float(np.finfo(np.float64).eps)
_SQRT2 = float(np.sqrt(2.0))
_LOG2 = float(np.log(2.0))
_LOG_SQRT_2PI = 0.5 * float(np.log(2 * np.pi))


# --------------------------------------------------------------------------------------------------
# Kernels (float64, no validation)
# --------------------------------------------------------------------------------------------------


def _log_delta_upper(mu, epsilon):
    """log δ(ε) of μ-GDP, rounded up by a bound on its floating-point error (MATH §0.1).

    With u = ε/μ − μ/2 and v = ε/μ + μ/2, δ = Φ(−u) − e^ε Φ(−v). Each branch regroups δ into two terms
    without hidden cancellation and widens them by their rounding bound *before* subtracting, so the
    final cancellation carries the error into the bound.
    """
    ratio = epsilon / mu
    u, v = ratio - mu / 2, ratio + mu / 2
    v2 = 1 + jnp.minimum(v, 1e150) ** 2  # bounds every argument² (clamped: no inf·0 for huge inputs)
    k = 16 * _EPS  # erf/erfcx error (≤ 5.2 eps, measured) plus argument rounding, relative, with margin

    # u ≥ 0, where δ can be tiny: Φ(−x) = ½ erfcx(x/√2) e^{−x²/2} and v² − u² = 2ε factor δ exactly as
    # ½ e^{−u²/2} [erfcx(u/√2) − erfcx(v/√2)]. The bracket is O(1), so only its cancellation (≈ u/μ)
    # amplifies rounding, not the size of log δ (a difference of two log Φ would: ~1e-8 at δ ≈ 1e-200).
    uu = jnp.maximum(u, 0.0)
    erfcx_v = erfcx(v / _SQRT2)
    bracket = erfcx(uu / _SQRT2) * (1 + k) - erfcx_v * (1 - k)
    log_tail = -uu * uu / 2 - _LOG2 + jnp.log(bracket) + 4 * _EPS * v2

    # u < 0 (ε < μ²/2): for small μ both Φ terms are ≈ ½, so regroup as [Φ(v) − Φ(u)] − (e^ε − 1)Φ(−v):
    # an erf sum with no cancellation (u < 0 < v) minus ½ erfcx(v/√2) e^{−u²/2} (1 − e^{−ε}), which is
    # (e^ε − 1)Φ(−v) by the same identity, free of overflow and small for small ε.
    d1 = 0.5 * (erf(v / _SQRT2) - erf(u / _SQRT2))
    d2 = 0.5 * erfcx_v * jnp.exp(-u * u / 2) * -jnp.expm1(-epsilon)
    log_body = jnp.log(d1 * (1 + k * (1 + v)) - d2 * jnp.maximum(1 - k * v2, 0.0))
    return jnp.minimum(jnp.where(u >= 0, log_tail, log_body), 0.0)  # widening must not push δ past 1


def _log_partials(mu, epsilon):
    """log ∂δ/∂μ and log(−∂δ/∂ε) of δ(μ, ε).

    ∂δ/∂μ = φ(u) and −∂δ/∂ε = e^ε Φ(−v) = ½ e^{−u²/2} erfcx(v/√2): the φ terms cancel because
    e^ε φ(v) = φ(u). Their ratio, √(2/π)/erfcx(v/√2), is then free of over/underflow.
    """
    ratio = epsilon / mu
    u, v = ratio - mu / 2, ratio + mu / 2
    log_dmu = -u * u / 2 - _LOG_SQRT_2PI
    log_deps = -u * u / 2 - _LOG2 + jnp.log(erfcx(v / _SQRT2))
    return log_dmu, log_deps


@jax.custom_jvp
def _epsilon_kernel(mu, delta):
    # Compare δ itself, not its log, so the answer is consistent with gdp_delta to the last bit.
    below = lambda eps: jnp.exp(_log_delta_upper(mu, eps)) <= delta  # monotone: True for ε ≥ ε*
    # At ε = μ²/2 + μ(z + 1), z = Φ⁻¹(1 − δ): δ(ε) < Φ(−z − 1) < δ, a safe upper bracket with margin.
    upper = mu * mu / 2 + mu * (1.0 - ndtri(delta))
    upper = jnp.where(upper > 0, upper, 0.0)  # +0.0, never -0.0 (its bit pattern is negative)
    _, eps = bisect_floats(below, jnp.zeros_like(upper), upper)
    return jnp.where(below(jnp.zeros_like(mu)), 0.0, eps)  # conservative side: the end with δ ≤ target


def _implicit_jvp(kernel, solves_epsilon: bool):
    """The JVP rule of ``kernel(given, δ)``, the root of δ(μ, ε) = δ_target in ε (``solves_epsilon``, given μ)
    or in μ (given ε), by the implicit function theorem with the partials of :func:`_log_partials`:
    dε = (∂δ/∂μ·dμ − dδ) / (−∂δ/∂ε) and dμ = (dδ + (−∂δ/∂ε)·dε) / (∂δ/∂μ)."""

    def jvp(primals, tangents):
        given, delta = primals
        dgiven, ddelta = tangents
        root = kernel(given, delta)
        log_dmu, log_deps = _log_partials(*((given, root) if solves_epsilon else (root, given)))
        if solves_epsilon:
            # ε ≡ 0 on the clamped region; zeroing the coefficients (not the tangent) keeps reverse mode free
            # of 0·inf.
            c_given = jnp.where(root > 0, jnp.exp(log_dmu - log_deps), 0.0)
            c_delta = jnp.where(root > 0, -jnp.exp(-log_deps), 0.0)
        else:
            c_given, c_delta = jnp.exp(log_deps - log_dmu), jnp.exp(-log_dmu)
        return root, dgiven * c_given + ddelta * c_delta

    return jvp


_epsilon_kernel.defjvp(_implicit_jvp(_epsilon_kernel, solves_epsilon=True))


@jax.custom_jvp
def _mu_kernel(epsilon, delta):
    above = lambda mu: jnp.exp(_log_delta_upper(mu, epsilon)) > delta  # monotone: True for μ > μ*
    # At μ = s + √(s² + 2ε), μ/2 − ε/μ = s and Mills' ratio gives δ_μ(ε) ≥ 1 − 2φ(s)/s, which is > δ
    # once s ≥ 2 and e^{−s²/2} ≤ 1 − δ: a safe upper bracket.
    s = 1.0 + jnp.maximum(1.0, jnp.sqrt(-2.0 * jnp.log1p(-delta)))
    upper = s + jnp.sqrt(s * s + 2.0 * epsilon)
    mu, _ = bisect_floats(above, jnp.zeros_like(upper), upper)
    return mu  # conservative side: the end with δ ≤ target


_mu_kernel.defjvp(_implicit_jvp(_mu_kernel, solves_epsilon=False))


@kernel_jit
def gaussian_tradeoff_kernel(mu, alpha):
    """Jitted μ-GDP trade-off G_μ(α) = Φ(Φ⁻¹(1 − α) − μ), unvalidated (for callers inside their own
    kernels, e.g. :mod:`jaxpriv.shuffle.multinomial`; the checked API is :func:`gaussian_tradeoff`)."""
    # Φ⁻¹(1 − α) = −Φ⁻¹(α) keeps full precision for tiny α, where 1 − α would round to 1.
    return ndtr(-ndtri(alpha) - mu)


@kernel_jit
def _eps_delta_tradeoff_kernel(epsilon, delta, alpha):
    # e^ε·α as 0 at α = 0 so that e^ε = inf (ε > 709) cannot make inf·0 = NaN.
    grown = jnp.where(alpha > 0, alpha * jnp.exp(epsilon), 0.0)
    return jnp.maximum(jnp.maximum(0.0, 1 - delta - grown), jnp.exp(-epsilon) * (1 - delta - alpha))


@partial(kernel_jit, static_argnums=1)
def _compose_kernel(mus, axis):
    # Scale by the largest μ so that μ² cannot overflow.
    scale = jnp.max(mus, axis=axis, keepdims=True)
    scale = jnp.where(scale > 0, scale, 1.0)
    return jnp.squeeze(scale, axis) * jnp.sqrt(jnp.sum((mus / scale) ** 2, axis=axis))


@kernel_jit
def _clt_kernel(q, sigma, steps):
    # √(e^{1/σ²} − 1) via log_expm1 (expm1 for small 1/σ², no overflow for large); μ = 0 when qT = 0
    # even if that root is inf (σ → 0), rather than 0·inf = NaN.
    root = jnp.exp(0.5 * log_expm1(sigma**-2.0))
    return jnp.where(q * steps > 0, q * jnp.sqrt(steps) * root, 0.0)


@kernel_jit
def gdp_delta_kernel(mu, epsilon):
    """Jitted μ-GDP δ(ε), unvalidated (for :mod:`jaxpriv.shuffle.multinomial`; the checked API is
    :func:`gdp_delta`)."""
    return jnp.exp(_log_delta_upper(mu, epsilon))


_epsilon_jit = kernel_jit(_epsilon_kernel)
_mu_jit = kernel_jit(_mu_kernel)


def _equal_shapes(a, b):
    """``a`` and ``b`` broadcast to one shape, as the bisections want: by numpy when both are concrete (jnp's
    eager broadcast is a compiled one-operation program of its own for every new pair of shapes), by jnp
    inside a caller's trace. Broadcast inside the kernel's program instead, XLA divides by a broadcast
    operand differently, and ε moved by a few ulps."""
    return np.broadcast_arrays(np.asarray(a), np.asarray(b)) if is_concrete((a, b)) else jnp.broadcast_arrays(a, b)


# --------------------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------------------


def gaussian_tradeoff(mu, alpha):
    """Trade-off function of μ-GDP: G_μ(α) = Φ(Φ⁻¹(1 − α) − μ).

    Source: Dong, Roth & Su (2022), "Gaussian differential privacy", JRSSB, definition of μ-GDP
    (G_μ = T(N(0, 1), N(μ, 1))); seed 003 (GSPA), Appendix, Fact 3; seed 001 (E-APES), Fact 2; MATH §2.
    Evaluated as Φ(−Φ⁻¹(α) − μ), which keeps full precision for tiny α.

    Args:
        mu: GDP parameter μ ≥ 0 (array-like). G_0(α) = 1 − α (perfect privacy).
        alpha: type-I error α ∈ [0, 1] (array-like, broadcast against ``mu``).

    Returns:
        float64 array of the smallest achievable type-II error, in [0, 1].

    Example:
        >>> from jaxpriv import fdp
        >>> round(float(fdp.gaussian_tradeoff(1.0, 0.05)), 6)
        0.740489
    """
    with float64():
        mu = check_array("mu", mu, 0.0, worse="up")
        alpha = check_array("alpha", alpha, 0.0, 1.0)
        check_broadcastable(mu=mu, alpha=alpha)
        return as_output(gaussian_tradeoff_kernel(mu, alpha))


def gdp_delta(mu, epsilon):
    """δ(ε) of μ-GDP: δ = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2).

    Source: Dong, Roth & Su (2022), Corollary 2.13 (μ-GDP ⇔ (ε, δ(ε))-DP for all ε ≥ 0); seed 003
    (GSPA), Appendix, Fact 3; seed 001 (E-APES), Fact 2; MATH §2.

    Never cancels to 0 or goes negative; it underflows to 0 only below ~1e-308. For ε ≥ μ²/2, where δ
    can be tiny, Φ(−x) = ½ erfcx(x/√2) e^{−x²/2} factors it exactly in log space as
    log δ = −u²/2 + log(½ [erfcx(u/√2) − erfcx(v/√2)]), u, v = ε/μ ∓ μ/2, so rounding is not amplified
    by the size of log δ (as it is for log Φ(·) differences); for ε < μ²/2 it is regrouped as
    [Φ(v) − Φ(u)] − expm1(ε)Φ(−v), which keeps full precision for small μ. The result is rounded up by
    a bound on its floating-point error, so it is an upper bound on the exact δ (MATH §0.1); the excess
    is ≲ 3e-13/μ + 1e-11 relative (against mpmath: ≤ 2.7e-10 at μ = 1e-3, ≤ 7e-12 for 0.1 ≤ μ ≤ 50).

    Args:
        mu: GDP parameter μ > 0 (array-like).
        epsilon: ε ≥ 0 (array-like, broadcast against ``mu``).

    Returns:
        float64 array of δ(ε) ∈ [0, 1).

    Example:
        >>> from jaxpriv import fdp
        >>> round(float(fdp.gdp_delta(1.0, 1.0)), 6)
        0.126937
    """
    with float64():
        mu = check_array("mu", mu, 0.0, lo_open=True, worse="up")
        epsilon = check_array("epsilon", epsilon, 0.0, worse="down")
        check_broadcastable(mu=mu, epsilon=epsilon)
        return as_output(gdp_delta_kernel(mu, epsilon))


def gdp_epsilon(mu, delta):
    """Smallest ε ≥ 0 with ``gdp_delta(mu, ε) ≤ delta``: the (ε, δ)-DP guarantee of μ-GDP.

    Source: inverts Dong, Roth & Su (2022), Corollary 2.13 (δ(ε) is strictly decreasing in ε); MATH §2.

    Monotone root find by bisection on the float64 bit patterns of ε over the bracket
    [0, μ²/2 + μ(Φ⁻¹(1 − δ) + 1)] (at its top δ(ε) < Φ(−Φ⁻¹(1 − δ) − 1) < δ), 64 fixed steps, which
    ends on adjacent floats. The returned end is the conservative one: ``gdp_delta(mu, ε) ≤ delta``
    always (so the exact δ(ε) ≤ ``delta`` too), and ε is within 1 ulp of the root of the rounded-up
    δ(ε): against mpmath ≤ 2e-12 relative above the exact root for μ ≥ 1e-3 (looser, still safe, for
    tinier μ; see ``gdp_delta``). Returns 0 when δ(0) ≤ ``delta``. Differentiable in both arguments by
    the implicit function theorem (``jax.custom_jvp``), not through the bisection:
    dε = (φ(μ/2 − ε/μ)·dμ − dδ) / (e^ε Φ(−ε/μ − μ/2)).

    Args:
        mu: GDP parameter μ > 0 (array-like).
        delta: target δ ∈ (0, 1) (array-like, broadcast against ``mu``).

    Returns:
        float64 array of ε ≥ 0.

    Example:
        >>> from jaxpriv import fdp
        >>> round(float(fdp.gdp_epsilon(0.027271, 1e-6)), 4)  # GSPA, ε₀ = 1, n = 10⁴ (MATH §3.3)
        0.0989
    """
    with float64():
        mu = check_array("mu", mu, 0.0, lo_open=True, worse="up")
        delta = check_array("delta", delta, 0.0, 1.0, lo_open=True, hi_open=True, worse="down")
        check_broadcastable(mu=mu, delta=delta)
        return as_output(_epsilon_jit(*_equal_shapes(mu, delta)))


def gdp_mu(epsilon, delta):
    """Largest μ such that μ-GDP implies (ε, δ)-DP, i.e. ``gdp_delta(μ, epsilon) ≤ delta``.

    Source: inverts Dong, Roth & Su (2022), Corollary 2.13 (δ_μ(ε) is strictly increasing in μ);
    MATH §2.

    Monotone root find by bisection on the float64 bit patterns of μ over [0, s + √(s² + 2ε)] with
    s = 1 + max(1, √(−2 log(1 − δ))) (there μ/2 − ε/μ = s and Mills' ratio gives δ_μ(ε) ≥ 1 − 2φ(s)/s
    > δ), 64 fixed steps. The returned end is the conservative one: ``gdp_delta(μ, epsilon) ≤ delta``
    always, within 1 ulp of the root of the rounded-up δ (against mpmath: ≤ 7e-12 relative below).
    Differentiable in both arguments by the implicit function theorem, not through the bisection:
    dμ = (dδ + e^ε Φ(−ε/μ − μ/2)·dε) / φ(μ/2 − ε/μ).

    Args:
        epsilon: ε ≥ 0 (array-like).
        delta: δ ∈ (0, 1) (array-like, broadcast against ``epsilon``).

    Returns:
        float64 array of μ > 0.

    Example:
        >>> from jaxpriv import fdp
        >>> round(float(fdp.gdp_mu(1.0, 1e-5)), 6)
        0.268051
    """
    with float64():
        epsilon = check_array("epsilon", epsilon, 0.0, worse="down")
        delta = check_array("delta", delta, 0.0, 1.0, lo_open=True, hi_open=True, worse="down")
        check_broadcastable(epsilon=epsilon, delta=delta)
        return as_output(_mu_jit(*_equal_shapes(epsilon, delta)))


def compose_gdp(mus, axis: int = -1):
    """GDP parameter of the composition of μ_i-GDP mechanisms: μ = (Σ_i μ_i²)^{1/2}.

    Source: Dong, Roth & Su (2022), Corollary 3.3 (G_{μ1} ⊗ … ⊗ G_{μn} = G_μ); seed 003 (GSPA),
    Appendix, Fact 3; MATH §2. Exact (not an approximation); computed scaled by max μ_i, so no overflow.

    Args:
        mus: the μ_i ≥ 0 (array-like; a scalar is one mechanism).
        axis: the axis of ``mus`` to compose over (int, default the last).

    Returns:
        float64 array of μ, ``mus`` with ``axis`` removed.

    Example:
        >>> from jaxpriv import fdp
        >>> float(fdp.compose_gdp([0.3, 0.4]))
        0.5
    """
    with float64():
        mus = jnp.atleast_1d(check_array("mus", mus, 0.0, worse="up"))
        return as_output(_compose_kernel(mus, axis))


def group_gdp(mu, k):
    """GDP parameter for groups of k records: μ-GDP implies kμ-GDP for groups of size k.

    Source: Dong, Roth & Su (2022), Theorem 2.14 (group privacy); seed 003 (GSPA), Appendix, Fact 3;
    MATH §2.

    Args:
        mu: GDP parameter μ ≥ 0 (array-like).
        k: group size, a positive integer (array-like, broadcast against ``mu``).

    Returns:
        float64 array of kμ.

    Example:
        >>> from jaxpriv import fdp
        >>> float(fdp.group_gdp(0.5, 3))
        1.5
    """
    with float64():
        mu = check_array("mu", mu, 0.0, worse="up")
        k = check_array("k", k, 1.0, integer=True)
        check_broadcastable(mu=mu, k=k)
        return as_output(k * mu)


def eps_delta_tradeoff(epsilon, delta, alpha):
    """Trade-off function of (ε, δ)-DP: f_{ε,δ}(α) = max{0, 1 − δ − e^ε α, e^{−ε}(1 − δ − α)}.

    Source: Dong, Roth & Su (2022), Proposition 2.5 (after Wasserman & Zhou 2010: (ε, δ)-DP ⇔
    f_{ε,δ}-DP); seed 003 (GSPA), Appendix, Fact 1, Eq. (19); seed 001 (E-APES), Fact 1, Eq. (6);
    MATH §2. Erratum: both seeds print the last term as e^{−ε}(1 − δ − ε); it is e^{−ε}(1 − δ − α)
    (the curve is symmetric about the diagonal, with slopes −e^{±ε}).

    Args:
        epsilon: ε ≥ 0 (array-like).
        delta: δ ∈ [0, 1] (array-like; δ = 0 is pure ε-DP).
        alpha: type-I error α ∈ [0, 1] (array-like). All three broadcast together.

    Returns:
        float64 array of f_{ε,δ}(α) ∈ [0, 1].

    Example:
        >>> from jaxpriv import fdp
        >>> round(float(fdp.eps_delta_tradeoff(1.0, 0.01, 0.1)), 6)
        0.718172
    """
    with float64():
        epsilon = check_array("epsilon", epsilon, 0.0, worse="up")
        delta = check_array("delta", delta, 0.0, 1.0, worse="up")
        alpha = check_array("alpha", alpha, 0.0, 1.0)
        check_broadcastable(epsilon=epsilon, delta=delta, alpha=alpha)
        return as_output(_eps_delta_tradeoff_kernel(epsilon, delta, alpha))


def chain_tradeoffs(f: Callable, g: Callable) -> Callable:
    """Trade-off bound across a chain P → Q → R: the callable α ↦ g(1 − f(α)).

    If T(P, Q) ≥ f and T(Q, R) ≥ g then T(P, R) ≥ g(1 − f(α)): a test with type-I error α on P has
    type-I error ≤ 1 − f(α) on Q (f bounds its power there), and g is non-increasing. This is the step
    behind group privacy in Dong, Roth & Su (2022), Theorem 2.14 (with f = g); seed 003 (GSPA),
    Appendix, Fact 4, which writes it "f ∘ g" and prints the hypothesis as T(P, R) ≥ f (read
    T(P, Q) ≥ f); MATH §2. For Gaussians it is exact: chaining G_a then G_b gives G_{a+b}.

    Args:
        f: trade-off function for (P, Q), a callable mapping α ∈ [0, 1] to [0, 1].
        g: trade-off function for (Q, R), same kind.

    Returns:
        A callable α ↦ g(1 − f(α)) (it calls ``f`` and ``g`` as given, so their validation applies).

    Example:
        >>> from jaxpriv import fdp
        >>> h = fdp.chain_tradeoffs(lambda a: fdp.gaussian_tradeoff(0.5, a),
        ...                         lambda a: fdp.gaussian_tradeoff(1.0, a))
        >>> round(float(h(0.05)), 6) == round(float(fdp.gaussian_tradeoff(1.5, 0.05)), 6)
        True
    """
    for name, fn in (("f", f), ("g", g)):
        if not callable(fn):
            raise ValueError(f"{name} must be a callable trade-off function [0, 1] → [0, 1], got {fn!r}")

    def chained(alpha):
        with float64():  # 1 − f(α) on a float64 f would otherwise be truncated when x64 is off
            return g(1.0 - f(alpha))

    return chained


def dpsgd_mu_clt(q, sigma, steps):
    """CLT *approximation* to the GDP parameter of DP-SGD: μ ≈ q·√T·√(e^{1/σ²} − 1).

    Source: Bu, Dong, Long & Su (2020), "Deep learning with Gaussian differential privacy", HDSR (the
    CLT μ of Poisson-subsampled NoisySGD); Dong, Roth & Su (2019/2022), Corollary 5.4 (CLT for composed
    subsampled Gaussians as T → ∞ with q√T fixed); MATH §2. This is an asymptotic approximation, **not**
    a privacy bound: it can be optimistic for finite T; use a rigorous accountant (e.g. RDP) for a
    guarantee. Computed as q·√T·exp(½·log(expm1(1/σ²))), so it is finite until μ itself exceeds
    float64 (σ ≲ 0.027), where it returns inf; it is 0 whenever q·T = 0.

    Args:
        q: sampling rate q ∈ [0, 1] (array-like).
        sigma: noise multiplier σ > 0 (array-like).
        steps: number of steps T ≥ 0 (array-like; real values are accepted). All three broadcast.

    Returns:
        float64 array of the approximate μ ≥ 0.

    Example:
        >>> from jaxpriv import fdp
        >>> round(float(fdp.dpsgd_mu_clt(0.01, 1.0, 10_000)), 6)
        1.310832
    """
    with float64():
        q = check_array("q", q, 0.0, 1.0, worse="up")
        sigma = check_array("sigma", sigma, 0.0, lo_open=True, worse="down")
        steps = check_array("steps", steps, 0.0, worse="up")
        check_broadcastable(q=q, sigma=sigma, steps=steps)
        return as_output(_clt_kernel(q, sigma, steps))
