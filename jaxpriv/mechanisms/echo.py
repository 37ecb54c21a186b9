"""Echo of neighbors (seed 000, Lemma 4; MATH §3.2): how much of one user's Clip-Laplace report is
distributed as another's, the quantity APES's shuffle amplification is built on.

p_ij = a(ε_i)·b(ε_j)·e^{−max(ε_i, ε_j)} (:func:`echo_factors_kernel`) is the echo probability, the
neighbor divergence is its −log (:func:`neighbor_divergence`, also for an output range A > C), and
:func:`echo_row_sums` gives every user's row sum Σ_j p_ij in O(n log n): the one implementation behind the
APES echo sum (:func:`jaxpriv.shuffle.bounds.apes_echo_sum`) and the APES clone probabilities
(:mod:`jaxpriv.shuffle.personalized`).
"""

from __future__ import annotations


import jax.numpy as jnp
import numpy as np

from .._numerics import as_output, check_array, check_broadcastable, float64, kernel_jit
from .clip_laplace import check_budgets, check_clip_and_range, normalizer_kernel

__all__ = ["neighbor_divergence", "echo_factors_kernel", "echo_probabilities", "echo_row_sums"]

def echo_factors_kernel(e):
    """The four factors of p_ij = a(ε_i)·b(ε_j)·e^{−max(ε_i, ε_j)} (seed 000, Lemma 4; MATH §3.2): returns
    (a, b, f, g) with a(ε) = ε/(1−e^{−ε}), b = 1/a, f = a·e^{−ε} and g = b·e^{−ε}, elementwise (JAX, traceable).
    A kernel, like ``rdp.dpsgd_epsilon_kernel``: it does not check its input (ε > 0); its callers
    (:func:`neighbor_divergence`, :func:`echo_probabilities`, the shuffle bounds) validate first.

    The closed-form neighbor divergence (:func:`neighbor_divergence`, A = C) is log a(ε_i) + log b(ε_j) +
    max(ε_i, ε_j); the echo probabilities (:func:`echo_probabilities`), the APES echo sum of
    :func:`jaxpriv.shuffle.bounds.apes_echo_sum` and the APES clone probabilities of
    :mod:`jaxpriv.shuffle.personalized` are built from these factors.

    Example:
      >>> from jaxpriv.mechanisms import echo
      >>> a, b, f, g = (float(v) for v in echo.echo_factors_kernel(1.0))
      >>> round(a * b, 6), round(a, 4), round(f, 4), round(g, 4)
      (1.0, 1.582, 0.582, 0.2325)
    """
    one_minus = -jnp.expm1(-e)  # 1 − e^{−ε}, no cancellation for small ε
    a = e / one_minus
    b = one_minus / e
    f = e / jnp.expm1(e)  # a(ε)·e^{−ε}
    g = b * jnp.exp(-e)  # b(ε)·e^{−ε}
    return a, b, f, g


def echo_row_sums(sorted_epsilons):
    """Every user's row sum R_i = Σ_j p_ij, for budgets sorted ascending on the last axis (leading axes: a
    batch), in O(n log n). A kernel (JAX, traceable, no validation: ε > 0, sorted).

    After sorting, p_ij = f_i·b_j for j < i (there max = ε_i) and p_ij = a_i·g_j for j > i (max = ε_j);
    ties give the same value either way. So R_i = f_i·Σ_{j<i} b_j + e^{−ε_i} + a_i·Σ_{j>i} g_j, two
    exclusive prefix sums of positive terms (relative error ≤ (n − 1)u each; callers round down).

    Example:
      >>> import jax, numpy as np
      >>> from jaxpriv.mechanisms import echo
      >>> e = np.array([0.5, 1.0, 2.0])
      >>> with jax.enable_x64(True):   # a kernel: the caller picks the precision
      ...     rows = echo.echo_row_sums(e)
      >>> bool(np.allclose(rows, echo.echo_probabilities(e).sum(-1), rtol=1e-14))
      True
    """
    e = sorted_epsilons
    a, b, f, g = echo_factors_kernel(e)
    zeros = jnp.zeros(e.shape[:-1] + (1,), e.dtype)
    below = jnp.concatenate([zeros, jnp.cumsum(b, axis=-1)[..., :-1]], axis=-1)  # Σ_{j<i} b_j
    g_rev = jnp.cumsum(jnp.flip(g, axis=-1), axis=-1)
    above = jnp.concatenate([jnp.flip(g_rev, axis=-1)[..., 1:], zeros], axis=-1)  # Σ_{j>i} g_j
    return f * below + jnp.exp(-e) + a * above


@kernel_jit
def _neighbor_divergence_closed(eps_i, eps_j):
    a_i, _, _, _ = echo_factors_kernel(eps_i)
    _, b_j, _, _ = echo_factors_kernel(eps_j)
    return jnp.log(a_i) + jnp.log(b_j) + jnp.maximum(eps_i, eps_j)


@kernel_jit
def _neighbor_divergence_alpha(eps_i, eps_j, clip, A):
    log_alpha = jnp.log(normalizer_kernel(clip, 2.0 * clip / eps_j, A)) - jnp.log(normalizer_kernel(clip, 2.0 * clip / eps_i, A))
    return log_alpha + jnp.log(eps_i / eps_j) + 0.5 * (eps_i + eps_j) + 0.5 * A / clip * jnp.abs(eps_i - eps_j)


def neighbor_divergence(eps_i, eps_j, clip=1.0, A=None):
    """Upper bound on the neighbor divergence D_N(μ_i ‖ μ_j) of Clip-Laplace randomizers (Lemma 4).

    D_N(μ_i ‖ μ_j) = sup over z and over inputs f, f' ∈ [−C, C] of log μ_i(z | f)/μ_j(z | f'), where μ_k is
    CLap(·, 2C/ε_k, A). Lemma 4 of seed 000 (MATH §3.2):

    * A = C (``A=None``): D_N ≤ log((ε_i/ε_j)·(1−e^{−ε_j})/(1−e^{−ε_i})·e^{max(ε_i, ε_j)}), evaluated with the
      factors a(ε) = ε/(1−e^{−ε}), b = 1/a of :func:`echo_factors_kernel`.
    * general A ≥ C: D_N ≤ log(α·(ε_i/ε_j)·e^{(ε_i+ε_j)/2 + A|ε_i−ε_j|/(2C)}), α = S_j/S_i with
      S_k = 1 − ½e^{ε_k(−A+C)/(2C)} − ½e^{ε_k(−A−C)/(2C)} the normalizer at f = C. At A = C it equals the
      closed form exactly. (The proof bounds |z − f'|/λ_j − |z − f|/λ_i by the triangle inequality and
      uses that S(u)e^{εu/(2C)} increases on [−C, C] when A ≥ C; tested numerically against the densities.)

    The echo probability of :func:`echo_probabilities` is p_ij = e^{−D_N(μ_j ‖ μ_i)}.

    Args:
      eps_i, eps_j: local budgets > 0 (broadcast together).
      clip: clip bound C > 0.
      A: output bound A ≥ C; ``None`` means A = C and selects the closed form.

    Returns:
      float64 array, shape = broadcast of the arguments.

    Example:
      >>> from jaxpriv.mechanisms import echo
      >>> round(float(echo.neighbor_divergence(1.0, 1.0)), 12)  # equal budgets: D_N = ε
      1.0
      >>> closed = echo.neighbor_divergence(0.5, 1.0)
      >>> bool(abs(echo.neighbor_divergence(0.5, 1.0, A=1.0) - closed) < 1e-14), round(float(closed), 9)
      (True, 0.780929804)
    """
    with float64():
        eps_i = check_array("eps_i", eps_i, 0.0, np.inf, lo_open=True)
        eps_j = check_array("eps_j", eps_j, 0.0, np.inf, lo_open=True)
        closed = A is None
        clip, A = check_clip_and_range(clip, A)
        check_broadcastable(eps_i=eps_i, eps_j=eps_j, clip=clip, A=A)
        if closed:
            out = _neighbor_divergence_closed(eps_i, eps_j)
            return as_output(jnp.broadcast_to(out, jnp.broadcast_shapes(out.shape, clip.shape)))
        return as_output(_neighbor_divergence_alpha(eps_i, eps_j, clip, A))


@kernel_jit
def _echo_matrix(e):
    a, b, _, _ = echo_factors_kernel(e)
    return a[..., :, None] * b[..., None, :] * jnp.exp(-jnp.maximum(e[..., :, None], e[..., None, :]))


def echo_probabilities(local_epsilons):
    """Echo probabilities p_ij = e^{−D_N(μ_j ‖ μ_i)} = (ε_i/ε_j)·(1−e^{−ε_j})/(1−e^{−ε_i})·e^{−max(ε_i, ε_j)}.

    p_ij ≤ inf_z μ_i(z | f)/μ_j(z | f') for all inputs, so user i's output is a mixture that contains
    user j's output on either neighboring input with probability p_ij/2 each (the "echo", seed 000,
    Step (i) of §4.3 and Lemma 4, A = C; MATH §3.2). Built from :func:`echo_factors_kernel`, as is
    :func:`jaxpriv.shuffle.bounds.apes_echo_sum`, whose S is (Σ_{i≠t} Σ_j p_ij)/n. O(n²) memory: a test
    oracle and a tool for small n; the accountant uses the O(n log n) sum.

    Args:
      local_epsilons: budgets ε_i > 0 on the last axis (n ≥ 1); leading axes are a batch.

    Returns:
      float64 array of shape ``batch + (n, n)``, entry [..., i, j] = p_ij.

    Example:
      >>> import numpy as np
      >>> from jaxpriv.mechanisms import echo
      >>> p = echo.echo_probabilities([1.0, 1.0])
      >>> bool(np.allclose(p, np.exp(-1.0), rtol=1e-15))
      True
    """
    with float64():
        eps = check_budgets("local_epsilons", local_epsilons)
        return as_output(_echo_matrix(eps))
