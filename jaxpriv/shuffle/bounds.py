"""Closed-form privacy-amplification-by-shuffling bounds (MATH §1.6, §3.2, §3.3).

Every function here is a formula from a paper, evaluated in float64, vectorised and jit-compiled:

* :func:`fmt22_closed_form` — Feldman, McMillan & Talwar (FOCS 2021 / 2022), Theorem 3.1; the APES
  paper's "UniS" baseline (its Eq. 2) is this bound at ε₀ = max_i ε_i.
* :func:`erlingsson19` — Erlingsson et al. (SODA 2019), ε = 12 ε₀ √(log(1/δ)/n).
* :func:`apes_echo_sum`, :func:`apes_theorem4` — the APES / Echo-of-Neighbors central bound (Liu et al.,
  AAAI 2023, Theorem 4), with the echo sum S computed in O(n log n).
* :func:`sapes_proposition1` — S-APES user-level bound (same paper, Proposition 1).
* :func:`gspa_mu`, :func:`gspa_mu_composed` — the GSPA / E-APES *approximate* μ-GDP parameter (Chen, Cao
  & Ge): a central-limit approximation, **not** a bound.
* :func:`girgis_rdp` — the shuffle RDP upper bound of Girgis et al. (CCS 2021, Theorem 1), all terms.
* :func:`girgis_rdp_simplified`, :func:`girgis_rdp_lower` — the simplified forms UDP-FL quotes: the upper
  form is only the leading (j = 2) term of Theorem 1 and falls *below* the exact RDP of shuffled
  randomized response at small n or large α, so it is **not** a bound (see its docstring).

Conventions (MATH §0):

* Closed forms are sufficient conditions with a validity region. Outside it a bound returns ``inf`` and
  emits one ``RuntimeWarning`` naming the violated condition (never an optimistic number).
* Bounds are rounded up by 16 ulp (relative 3.6e-15) so that float64 rounding in their few operations
  can only loosen them; the APES echo sum S is rounded *down* by its summation error bound. The GSPA μ
  and the Girgis forms are not bounds and are returned as evaluated.
* Invalid input raises ``ValueError`` naming the parameter and its valid range (checked when concrete;
  inside a caller's ``jit`` the kernels return NaN for inputs outside their domain).
* Results are float64 whatever the caller's ``jax_enable_x64`` flag; concrete results are numpy arrays.
"""

from __future__ import annotations

import math
import warnings
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import gammaln

from .._docs import fill_doc
from .._numerics import (as_output, check_array, check_broadcastable, check_orders, float64, is_concrete, log_expm1,
                         kernel_jit)
from ..mechanisms.echo import echo_factors_kernel, echo_row_sums  # the echo probabilities (APES Lemma 4)

#: the Args/Returns of the closed-form bounds of ε(ε₀, n, δ)
_CLOSED_FORM_ARGS = """
    Args:
      eps0: local privacy ε₀ > 0, finite (array, broadcast with ``n`` and ``delta``).
      n: number of users, an integer ≥ 2 (array).
      delta: δ ∈ (0, 1) (array).

    Returns:
      float64 array of ε, shape = broadcast of the arguments."""

__all__ = [
    "fmt22_closed_form",
    "erlingsson19",
    "apes_echo_sum",
    "apes_theorem4",
    "sapes_proposition1",
    "gspa_mu",
    "gspa_mu_composed",
    "girgis_rdp",
    "girgis_rdp_simplified",
    "girgis_rdp_lower",
]

_EPS = float(np.finfo(np.float64).eps)
_UP = 1.0 + 16.0 * _EPS  # relative round-up of a few-operation closed-form bound
_LOG2 = math.log(2.0)
_LOG4 = math.log(4.0)


# ----------------------------------------------------------------------------------------------------
# validation and warning helpers
# ----------------------------------------------------------------------------------------------------


def _check_eps0(eps0):
    return check_array("eps0", eps0, 0.0, np.inf, lo_open=True)


def _check_n(n):
    return check_array("n", n, 2.0, np.inf, integer=True)


def _check_delta(name, delta):
    return check_array(name, delta, 0.0, 1.0, lo_open=True, hi_open=True)


def _check_budgets(local_epsilons, *, positive: bool):
    """Budgets along the last axis (users); leading axes are a batch. At least 2 users."""
    arr = check_array("local_epsilons", local_epsilons, 0.0, np.inf, lo_open=positive)
    if arr.ndim == 0:
        raise ValueError("local_epsilons must be an array of per-user budgets (users on the last axis), got a scalar")
    if arr.shape[-1] < 2:
        raise ValueError(f"local_epsilons must hold at least 2 users on its last axis (n ≥ 2), got {arr.shape[-1]}")
    return arr


def _warn_outside(function: str, conditions: dict) -> None:
    """One RuntimeWarning naming every validity condition that fails somewhere (concrete values only)."""
    masks = {}
    for text, ok in conditions.items():
        if not is_concrete(ok):
            return
        masks[text] = np.asarray(ok, dtype=bool)
    total = int(np.prod(np.broadcast_shapes(*(m.shape for m in masks.values()))))
    failed = {text: int(m.size - np.count_nonzero(m)) for text, m in masks.items()}
    failed = {text: count for text, count in failed.items() if count}
    if not failed:
        return
    detail = "; ".join(f"{text} fails for {count} of {total} entries" for text, count in failed.items())
    warnings.warn(
        f"{function}: outside the closed form's validity region ({detail}); the bound is returned as inf there",
        RuntimeWarning,
        stacklevel=3,
    )


# ----------------------------------------------------------------------------------------------------
# Feldman-McMillan-Talwar closed form (and UniS)
# ----------------------------------------------------------------------------------------------------


def _fmt22_valid(eps0, n, delta):
    # ε₀ ≤ log(n / (16 log(2/δ))), written without the division so that n < 16 log(2/δ) is simply invalid.
    return eps0 <= jnp.log(n) - jnp.log(16.0 * (_LOG2 - jnp.log(delta)))


@kernel_jit
def _fmt22_kernel(eps0, n, delta):
    valid = _fmt22_valid(eps0, n, delta)
    e0 = jnp.where(valid, eps0, 1.0)  # keep the untaken branch finite (no NaN gradients)
    log4d = _LOG4 - jnp.log(delta)
    inner = 8.0 * jnp.sqrt(jnp.exp(e0) * log4d / n) + 8.0 * jnp.exp(e0) / n
    eps = jnp.log1p(jnp.tanh(e0 / 2.0) * inner) * _UP
    eps = jnp.where(valid, eps, jnp.inf)
    domain = (eps0 > 0) & (n >= 2) & (delta > 0) & (delta < 1)
    return jnp.where(domain, eps, jnp.nan)


def _closed_form_inputs(eps0, n, delta):
    """ε₀, n and δ of a closed-form bound, validated and broadcast to one shape."""
    eps0, n, delta = _check_eps0(eps0), _check_n(n), _check_delta("delta", delta)
    shape = check_broadcastable(eps0=eps0, n=n, delta=delta)
    return tuple(jnp.broadcast_to(a, shape) for a in (eps0, n, delta))


@fill_doc(args=_CLOSED_FORM_ARGS)
def fmt22_closed_form(eps0, n, delta):
    """Closed-form shuffle amplification of Feldman, McMillan & Talwar (FMT22, "hiding among the clones").

    ε ≤ log(1 + (e^{ε₀}−1)/(e^{ε₀}+1) · (8√(e^{ε₀} log(4/δ))/√n + 8e^{ε₀}/n)),
    valid for ε₀ ≤ log(n / (16 log(2/δ))).

    Source: Feldman, McMillan, Talwar, "Hiding Among the Clones", FOCS 2021 (arXiv 2012.12803),
    Theorem 3.1: n users each running an ε₀-LDP randomizer, shuffled, give (ε, δ)-DP. MATH §3.2: the
    APES paper's baseline "UniS" (its Eq. 2) is this bound at ε₀ = max_i ε_i. The bound is looser than
    the exact clone sum of MATH §3.1 (UniS at n = 10⁴, δ = 1e-8, ε₀ = 1: 0.2408 here vs 0.0689 exact).

    Outside the validity region the result is ``inf`` and a ``RuntimeWarning`` names the condition.
    The value is rounded up by 16 ulp.

    {args}

    Example:
      >>> from jaxpriv.shuffle import bounds
      >>> round(float(bounds.fmt22_closed_form(1.0, 10_000, 1e-8)), 4)  # APES "UniS" closed form
      0.2408
    """
    with float64():
        eps0, n, delta = _closed_form_inputs(eps0, n, delta)
        out = _fmt22_kernel(eps0, n, delta)
        _warn_outside("fmt22_closed_form", {"ε₀ ≤ log(n / (16 log(2/δ)))": _fmt22_valid(eps0, n, delta)})
        return as_output(out)


# ----------------------------------------------------------------------------------------------------
# Erlingsson et al. 2019
# ----------------------------------------------------------------------------------------------------

_EFMRTT_MAX_EPS0 = 0.5
_EFMRTT_MIN_N = 1000.0
_EFMRTT_MAX_DELTA = 0.01


@kernel_jit
def _erlingsson_kernel(eps0, n, delta):
    valid = (eps0 <= _EFMRTT_MAX_EPS0) & (n >= _EFMRTT_MIN_N) & (delta <= _EFMRTT_MAX_DELTA)
    eps = 12.0 * eps0 * jnp.sqrt(-jnp.log(delta) / n) * _UP
    eps = jnp.where(valid, eps, jnp.inf)
    domain = (eps0 > 0) & (n >= 2) & (delta > 0) & (delta < 1)
    return jnp.where(domain, eps, jnp.nan)


@fill_doc(args=_CLOSED_FORM_ARGS)
def erlingsson19(eps0, n, delta):
    """Amplification by shuffling of Erlingsson et al. (EFMRTT19): ε = 12 ε₀ √(log(1/δ)/n).

    Valid for ε₀ ≤ 1/2, n ≥ 1000 and δ ≤ 1/100; outside, ``inf`` with a ``RuntimeWarning`` naming the
    failed condition(s).

    Source: Erlingsson, Feldman, Mironov, Raghunathan, Talwar, Thakurta, "Amplification by Shuffling:
    From Local to Central Differential Privacy via Anonymity", SODA 2019 (arXiv 1811.12469): the
    explicit-constant corollary of its shuffling theorem, for n users each applying an ε₀-LDP local
    randomizer to a uniformly shuffled dataset. The seed papers cite this bound only by name (APES's
    baseline "Erlingson19"); the explicit form and its parameter range (ε₀ ≤ 1/2, n ≥ 1000, δ ≤ 1/100)
    are those of the reference implementation of Balle, Bell, Gascón & Nissim ("The Privacy Blanket of
    the Shuffle Model", CRYPTO 2019), which the APES code reuses. No ``min(ε, ε₀)`` is applied: the
    formula can exceed ε₀ (e.g. when log(1/δ) > n/144), in which case the trivial ε₀ is the better
    statement and the caller may take the minimum.

    {args}

    Example:
      >>> from jaxpriv.shuffle import bounds
      >>> round(float(bounds.erlingsson19(0.5, 10_000, 1e-6)), 6)  # 12·0.5·√(log(1e6)/1e4)
      0.223015
    """
    with float64():
        eps0, n, delta = _closed_form_inputs(eps0, n, delta)
        out = _erlingsson_kernel(eps0, n, delta)
        _warn_outside(
            "erlingsson19",
            {
                "ε₀ ≤ 1/2": eps0 <= _EFMRTT_MAX_EPS0,
                "n ≥ 1000": n >= _EFMRTT_MIN_N,
                "δ ≤ 1/100": delta <= _EFMRTT_MAX_DELTA,
            },
        )
        return as_output(out)


# ----------------------------------------------------------------------------------------------------
# APES / Echo of Neighbors (seed 000)
# ----------------------------------------------------------------------------------------------------


def _echo_row(e_i, e):
    """R_i = Σ_j p_ij for one user i (e_i of shape batch + (1,)), O(n), straight from the formula."""
    a_i, _, _, _ = echo_factors_kernel(e_i)
    _, b, _, _ = echo_factors_kernel(e)
    return jnp.sum(a_i * b * jnp.exp(-jnp.maximum(e_i, e)), axis=-1)


@partial(kernel_jit, static_argnames="worst")
def _echo_sum_kernel(eps, target, worst):
    """S = Σ_{i≠t} Σ_j p_ij / n in O(n log n) (the rows of :func:`~jaxpriv.mechanisms.echo.echo_row_sums`),
    rounded down by its summation error bound."""
    n = eps.shape[-1]
    rows = echo_row_sums(jnp.sort(eps, axis=-1))
    total = jnp.sum(rows, axis=-1)
    if worst:
        excluded = jnp.max(rows, axis=-1)  # worst target: the user whose own row is largest
    else:
        e_t = jax.lax.dynamic_slice_in_dim(eps, target, 1, axis=-1)
        excluded = _echo_row(e_t, eps)
    s = (total - excluded) / n
    # Every partial sum is of positive terms: relative error ≤ (n−1)u per sum (sequential bound; XLA's
    # tree scans do better), a few u per product. (2n + 32)u covers prefix sums, row sums and the total.
    s = s * (1.0 - (2.0 * n + 32.0) * _EPS)
    invalid = jnp.any(~(eps > 0) | ~jnp.isfinite(eps), axis=-1)
    return jnp.where(invalid, jnp.nan, s)


def _resolve_target(target, n: int):
    """(index, worst) for the kernel; the index is a runtime argument so targets share one compilation."""
    if target is None:
        return 0, True
    if isinstance(target, bool) or not isinstance(target, (int, np.integer)):
        raise ValueError(f"target must be None or an integer user index in [0, {n - 1}], got {target!r}")
    if not -n <= int(target) < n:
        raise ValueError(f"target must be None or an integer user index in [-{n}, {n - 1}], got {target!r}")
    return int(target) % n, False


def apes_echo_sum(local_epsilons, *, target=None):
    """The APES echo sum S = Σ_{i≠t} Σ_{j=1}^{n} p_ij / n of Theorem 4, in O(n log n).

    p_ij = (ε_i/ε_j) · (1−e^{−ε_j})/(1−e^{−ε_i}) · e^{−max(ε_i, ε_j)}.

    Source: Liu, Zhao, Xiong, Liu, Chen, "Echo of Neighbors", AAAI 2023 (seed 000), Theorem 4 and
    Lemma 4 (MATH §3.2). Index reading: the paper fixes the differing user as u_1 and sums i = 2..n,
    j = 1..n. From its Step (i) and Lemma 5, i is a *non-target* user whose output distribution μ_i is
    decomposed into "echoes" of the target's two possible outputs, and j ranges over every budget the
    target's report may carry (the budgets are shuffled too, so each ε_j has weight 1/n); p_ij =
    e^{−D_N(μ_j ‖ μ_i)} ≤ inf μ_i/μ_j (checked numerically for Clip-Laplace with A = C: it is tight for
    ε_i ≥ ε_j and conservative otherwise). So the excluded row is the target's own. Which user is the
    target is not fixed by the data: ``target=None`` (default) takes the worst case over targets, i.e.
    excludes the user with the largest row sum R_t = Σ_j p_tj (this makes S order-invariant and valid
    for every user); ``target=k`` excludes user k (the paper's u_1 = index k of the array).

    Cost: sort, then two prefix sums (p_ij factorises as f(i)·g(j) on each side of the diagonal), so
    n = 10⁶ takes well under a second after compilation and n = 10⁷ is practical. The returned S is
    rounded down by its summation error bound (2n + 32) ulp, so it can only make ε^c larger.

    Args:
      local_epsilons: per-user budgets ε_i > 0 on the last axis (any order; n ≥ 2); leading axes are
        a batch.
      target: ``None`` (worst case over targets) or the index of the target user on the last axis.

    Returns:
      float64 array of S with the batch shape (a 0-d array for a 1-D input).

    Example:
      >>> import numpy as np
      >>> from jaxpriv.shuffle import bounds
      >>> s = bounds.apes_echo_sum(np.full(1000, 1.0))  # uniform budgets: S = (n−1)·e^{−ε₀}
      >>> bool(np.isclose(s, 999 * np.exp(-1.0), rtol=1e-12))
      True
    """
    with float64():
        eps = _check_budgets(local_epsilons, positive=True)
        t, worst = _resolve_target(target, eps.shape[-1])
        return as_output(_echo_sum_kernel(eps, t, worst))


def _apes_valid(s, delta_s):
    return s >= 16.0 * (_LOG4 - jnp.log(delta_s))


@kernel_jit
def _apes_kernel(s, eps_star, delta_s):
    valid = _apes_valid(s, delta_s)
    s_safe = jnp.where(valid, s, 1.0)
    log4d = _LOG4 - jnp.log(delta_s)
    p = jnp.tanh(eps_star / 2.0)  # (e^{ε*}−1)/(e^{ε*}+1)
    eps_c = jnp.log1p(p * (8.0 * jnp.sqrt(log4d / s_safe) + 8.0 / s_safe)) * _UP
    eps_c = jnp.where(valid, eps_c, jnp.inf)
    delta_c = p * delta_s * _UP
    domain = (delta_s > 0) & (delta_s < 1) & ~jnp.isnan(s)
    return jnp.where(domain, eps_c, jnp.nan), jnp.where(domain, delta_c, jnp.nan)


def apes_theorem4(local_epsilons, delta_s, *, target=None):
    """APES central bound (Echo of Neighbors, Theorem 4): returns (ε^c, δ^c).

    With S = Σ_{i≠t} Σ_j p_ij / n (:func:`apes_echo_sum`) and ε* = max_i ε_i, if S ≥ 16 log(4/δ_s):
      ε^c = log(1 + (e^{ε*}−1)/(e^{ε*}+1) · (8√(log(4/δ_s))/√S + 8/S)),
      δ^c = (e^{ε*}−1)/(e^{ε*}+1) · δ_s.

    Source: Liu et al., AAAI 2023 (seed 000), Theorem 4 / Lemma 6 with ε* = max ε_j (proof of
    Theorem 4); MATH §3.2. The last display of the paper's Lemma 6 proof drops the square root on S;
    Theorem 4 (used here) has it. The paper states δ^c with "ε_j"; its proof uses ε* = max ε_j, as here.
    For uniform budgets ε₀, S = (n−1)e^{−ε₀} and this is FMT22's closed form with n−1 users (and the
    slightly stricter condition log(4/δ) in place of log(2/δ)). At n = 10⁴, δ_s = 1e-8 and budgets
    evenly spaced on [0.05, 1] it gives ε^c = 0.2051 (the paper's Table 3 value 0.057 comes from the
    numeric clone sum, MATH §3.2).

    When S < 16 log(4/δ_s), ε^c is ``inf`` (δ^c is still returned) with a ``RuntimeWarning``.

    Args:
      local_epsilons: per-user budgets ε_i > 0 on the last axis (any order; n ≥ 2); leading axes are
        a batch.
      delta_s: δ_s ∈ (0, 1), broadcast against the batch shape.
      target: see :func:`apes_echo_sum` (``None``: worst case over target users).

    Returns:
      (eps_c, delta_c): float64 arrays of the broadcast batch shape.

    Example:
      >>> import numpy as np
      >>> from jaxpriv.shuffle import bounds
      >>> eps_c, delta_c = bounds.apes_theorem4(np.linspace(0.05, 1.0, 10_000), 1e-8)
      >>> round(float(eps_c), 4), float(delta_c) < 1e-8
      (0.2051, True)
    """
    with float64():
        eps = _check_budgets(local_epsilons, positive=True)
        delta_s = _check_delta("delta_s", delta_s)
        t, worst = _resolve_target(target, eps.shape[-1])
        shape = check_broadcastable(local_epsilons_batch=np.empty(eps.shape[:-1]), delta_s=delta_s)
        s = jnp.broadcast_to(_echo_sum_kernel(eps, t, worst), shape)
        eps_star = jnp.broadcast_to(jnp.max(eps, axis=-1), shape)
        delta_s = jnp.broadcast_to(delta_s, shape)
        out = _apes_kernel(s, eps_star, delta_s)
        _warn_outside("apes_theorem4", {"S ≥ 16 log(4/δ_s)": _apes_valid(s, delta_s)})
        return as_output(out)


@kernel_jit
def _sapes_kernel(eps_c, delta_c, b, delta_prime):
    finite = jnp.isfinite(eps_c)
    e = jnp.where(finite, eps_c, 0.0)
    eps_uc = (e * jnp.sqrt(4.0 * b * -jnp.log(delta_prime)) + 2.0 * b * e * jnp.expm1(e)) * _UP
    eps_uc = jnp.where(finite, eps_uc, jnp.inf)
    delta_uc = (delta_prime + 2.0 * b * delta_c) * _UP
    domain = (eps_c >= 0) & (delta_c >= 0) & (delta_c <= 1) & (b >= 1) & (delta_prime > 0) & (delta_prime < 1)
    return jnp.where(domain, eps_uc, jnp.nan), jnp.where(domain, delta_uc, jnp.nan)


def sapes_proposition1(eps_c, delta_c, b, delta_prime):
    """S-APES user-level bound (Proposition 1): advanced composition of (ε^c, δ^c) over 2b releases.

    ε^{uc} = ε^c √(4b log(1/δ')) + 2b ε^c (e^{ε^c} − 1),   δ^{uc} = δ' + 2b δ^c.

    Source: Liu et al., AAAI 2023 (seed 000), Proposition 1; MATH §3.2. It is the advanced composition
    theorem (Dwork, Rothblum, Vadhan 2010) with k = 2b: b uploaded dimensions, each with sensitivity 2.
    The paper prints log(1/δ^{uc}) under the root; advanced composition has the slack δ' there (δ^{uc} >
    δ' would make ε^{uc} optimistic), so δ' is used. δ^{uc} is not clipped to 1.

    Args:
      eps_c: dimension-level central ε^c ≥ 0 (may be ``inf``; then ε^{uc} is ``inf``) (array).
      delta_c: dimension-level δ^c ∈ [0, 1] (array).
      b: number of uploaded dimensions, an integer ≥ 1 (array).
      delta_prime: the composition slack δ' ∈ (0, 1) (array).

    Returns:
      (eps_uc, delta_uc): float64 arrays of the broadcast shape.

    Example:
      >>> from jaxpriv.shuffle import bounds
      >>> eps_uc, delta_uc = bounds.sapes_proposition1(0.01, 1e-9, 10, 1e-5)
      >>> round(float(eps_uc), 6), round(float(delta_uc), 12)
      (0.216607, 1.002e-05)
    """
    with float64():
        eps_c = check_array("eps_c", eps_c, 0.0, np.inf, allow_inf=True)
        delta_c = check_array("delta_c", delta_c, 0.0, 1.0)
        b = check_array("b", b, 1.0, np.inf, integer=True)
        delta_prime = _check_delta("delta_prime", delta_prime)
        shape = check_broadcastable(eps_c=eps_c, delta_c=delta_c, b=b, delta_prime=delta_prime)
        return as_output(_sapes_kernel(*(jnp.broadcast_to(a, shape) for a in (eps_c, delta_c, b, delta_prime))))


# ----------------------------------------------------------------------------------------------------
# GSPA / E-APES approximate μ-GDP (seeds 001, 003)
# ----------------------------------------------------------------------------------------------------


@kernel_jit
def _gspa_kernel(eps, deltas):
    # (1−δ_i)/(1+e^{ε_i}) = (1−δ_i)·e^{−softplus(ε_i)}, no overflow for large ε_i.
    w = (1.0 - deltas) * jnp.exp(-jax.nn.softplus(eps))
    denominator = jnp.sum(w, axis=-1) - jnp.max(w, axis=-1)
    mu = jnp.sqrt(2.0 / denominator)
    invalid = jnp.any(~(eps >= 0) | ~jnp.isfinite(eps) | ~(deltas >= 0) | ~(deltas < 1), axis=-1)
    return jnp.where(invalid, jnp.nan, mu)


def _check_local_deltas(local_deltas, eps):
    if local_deltas is None:
        return jnp.zeros_like(eps)
    deltas = check_array("local_deltas", local_deltas, 0.0, 1.0, hi_open=True)
    try:
        ok = np.broadcast_shapes(eps.shape, deltas.shape) == eps.shape
    except ValueError:
        ok = False
    if not ok:
        raise ValueError(f"local_deltas must broadcast to the shape of local_epsilons {eps.shape}, got {deltas.shape}")
    return jnp.broadcast_to(deltas, eps.shape)


def gspa_mu(local_epsilons, local_deltas=None):
    """GSPA's *approximate* μ-GDP parameter of shuffled (ε_i, δ_i)-PLDP reports (not a bound).

    μ = √( 2 / (Σ_i (1−δ_i)/(1+e^{ε_i}) − max_i (1−δ_i)/(1+e^{ε_i})) ).

    Source: Chen, Cao, Ge, "A Generalized Shuffle Framework for Privacy Amplification" (GSPA, seed 003),
    Theorem 2 and Algorithms 1–3 (also E-APES, seed 001); MATH §3.3. The paper proves a trade-off
    G_μ(α + C/√(n−1)) − C/√(n−1) with an unstated Berry–Esseen constant C and then drops that term:
    μ-GDP here is the paper's approximation ("approximately preserves μ-GDP"), **not** a privacy bound;
    use the exact clone sum of MATH §3.1 for a guarantee. The max term removes the worst target user
    (its own randomizer is not a blanket for itself). Convert with :func:`jaxpriv.fdp.gdp_epsilon`.

    Args:
      local_epsilons: per-user ε_i ≥ 0 on the last axis (n ≥ 2); leading axes are a batch.
      local_deltas: per-user δ_i ∈ [0, 1), broadcast to ``local_epsilons``; ``None`` means all 0.

    Returns:
      float64 array of μ with the batch shape.

    Example:
      >>> import numpy as np
      >>> from jaxpriv import fdp
      >>> from jaxpriv.shuffle import bounds
      >>> mu = bounds.gspa_mu(np.ones(10_000))  # uniform ε₀ = 1, δ_i = 0 (MATH §3.3)
      >>> round(float(mu), 6), round(float(fdp.gdp_epsilon(mu, 1e-6)), 4)
      (0.027271, 0.0989)
    """
    with float64():
        eps = _check_budgets(local_epsilons, positive=False)
        deltas = _check_local_deltas(local_deltas, eps)
        return as_output(_gspa_kernel(eps, deltas))


def gspa_mu_composed(local_epsilons, rounds, local_deltas=None):
    """GSPA's approximate μ-GDP after T rounds: √T · μ (GDP composition of :func:`gspa_mu`; not a bound).

    Source: GSPA (seed 003), Algorithm 3 / its Theorem ("approximately satisfies √T μ-GDP"), using
    μ-GDP composition (Dong, Roth & Su 2022); MATH §3.3. Inherits the approximation of :func:`gspa_mu`.

    Args:
      local_epsilons: per-user ε_i ≥ 0 on the last axis (n ≥ 2); leading axes are a batch.
      rounds: number of rounds T, an integer ≥ 1 (array, broadcast against the batch shape).
      local_deltas: per-user δ_i ∈ [0, 1), broadcast to ``local_epsilons``; ``None`` means all 0.

    Returns:
      float64 array of √T·μ with the broadcast batch shape.

    Example:
      >>> import numpy as np
      >>> from jaxpriv.shuffle import bounds
      >>> round(float(bounds.gspa_mu_composed(np.ones(10_000), 100)), 5)
      0.27271
    """
    with float64():
        eps = _check_budgets(local_epsilons, positive=False)
        deltas = _check_local_deltas(local_deltas, eps)
        rounds = check_array("rounds", rounds, 1.0, np.inf, integer=True)
        mu = _gspa_kernel(eps, deltas)
        check_broadcastable(local_epsilons_batch=np.empty(eps.shape[:-1]), rounds=rounds)
        return as_output(jnp.sqrt(rounds) * mu)


# ----------------------------------------------------------------------------------------------------
# Girgis et al. shuffle RDP: Theorem 1 and the simplified forms quoted by UDP-FL (MATH §1.6)
# ----------------------------------------------------------------------------------------------------


def _check_integer_orders(orders) -> np.ndarray:
    arr = check_orders(orders)  # concrete, 1-D, > 1
    check_array("orders", arr, 2.0, np.inf, integer=True)
    return arr


@partial(kernel_jit, static_argnames="upper")
def _girgis_kernel(eps0, n, orders, upper):
    e = eps0[..., None]
    log_pairs = jnp.log(orders) + jnp.log(orders - 1.0) - _LOG2  # log C(α, 2)
    log_gap = 2.0 * log_expm1(e) - jnp.log(n)[..., None]  # log((e^{ε₀}−1)²/n)
    x = log_pairs + log_gap + (_LOG4 if upper else -e)
    rho = jax.nn.softplus(x) / (orders - 1.0)  # log(1 + e^x)/(α−1), no overflow
    domain = (eps0 > 0) & (n >= 2)
    return jnp.where(domain[..., None], rho, jnp.nan)


def girgis_rdp_simplified(eps0, n, orders):
    """Simplified shuffle RDP of Girgis et al. as quoted in UDP-FL (an approximation, not a proven bound).

    γ(α) = log(1 + C(α, 2) · 4(e^{ε₀}−1)²/n) / (α−1), integer α ≥ 2.

    Source: Girgis, Data, Diggavi, Suresh, Kairouz, "On the Rényi Differential Privacy of the Shuffle
    Model", CCS 2021, as quoted by UDP-FL (seed 002, §4.4.1, its upper-bound lemma); MATH §1.6.
    Caution: this is the simplified form UDP-FL quotes. It is the leading (j = 2) term of Girgis et al.'s
    Theorem 1 (:func:`girgis_rdp`) with n in place of n̄; the theorem adds positive j ≥ 3 terms and a
    remainder. It is **not** a guarantee: it falls below the exact Rényi divergence of shuffled binary
    randomized response (a valid lower bound for every ε₀-LDP randomizer), e.g. at ε₀ = 1, n = 100,
    α = 50 it gives 0.102 where the exact value is 0.206 (tests/test_shuffle_bounds.py checks this).
    Use :func:`girgis_rdp` for accounting.

    Args:
      eps0: local privacy ε₀ > 0, finite (array, broadcast with ``n``; shape ``S``).
      n: number of users, an integer ≥ 2 (array).
      orders: 1-D array of ``K`` integer Rényi orders α ≥ 2.

    Returns:
      float64 array of shape ``S + (K,)``.

    Example:
      >>> import math
      >>> from jaxpriv.shuffle import bounds
      >>> got = float(bounds.girgis_rdp_simplified(1.0, 1000, [2])[0])  # C(2, 2) = 1, α − 1 = 1
      >>> math.isclose(got, math.log1p(4 * math.expm1(1.0) ** 2 / 1000), rel_tol=1e-14)
      True
    """
    return _girgis(eps0, n, orders, upper=True)


def girgis_rdp_lower(eps0, n, orders):
    """Lower form of the shuffle RDP of Girgis et al. as quoted in UDP-FL.

    γ_l(α) = log(1 + C(α, 2) · (e^{ε₀}−1)²/(n e^{ε₀})) / (α−1), integer α ≥ 2.

    Source: Girgis et al., CCS 2021, lower bound (attained by an ε₀-LDP randomizer, so no bound that holds
    for every ε₀-LDP randomizer can be below it), as quoted by UDP-FL (seed 002, §4.4.1, its lower-bound
    lemma); MATH §1.6. Useful as a sanity floor for any shuffle RDP upper bound. Arguments and result as
    :func:`girgis_rdp_simplified`.

    Example:
      >>> import math
      >>> from jaxpriv.shuffle import bounds
      >>> got = float(bounds.girgis_rdp_lower(1.0, 1000, [3])[0])
      >>> math.isclose(got, math.log1p(3 * math.expm1(1.0) ** 2 / (1000 * math.e)) / 2, rel_tol=1e-14)
      True
    """
    return _girgis(eps0, n, orders, upper=False)


#: Rounding allowance of the Theorem-1 kernel, in units of ε·(magnitude of a term's components). Each log-term
#: is a sum of components that are each accurate to a few ulp (lgamma up to α+1, (j/2)·log ratio), so its
#: absolute error is a small multiple of ε times the sum of their magnitudes, and logsumexp carries the
#: softmax-weighted mean of those errors. A fixed relative round-up does not suffice: the components reach
#: ~10³ where the sum is ~1. tests/test_shuffle_bounds.py checks that half of it suffices whether or not
#: XLA fuses multiply-adds.
_GIRGIS_ALLOWANCE = 4.0


@kernel_jit
def _girgis_theorem1_kernel(eps0, n, orders, j, allowance):
    e = eps0[..., None, None]  # batch + (orders, j)
    alpha = orders[:, None]
    n_bar = jnp.floor((n[..., None, None] - 1.0) / (2.0 * jnp.exp(e))) + 1.0
    binom_parts = (gammaln(alpha + 1.0), -gammaln(j + 1.0), -gammaln(alpha - j + 1.0))  # log C(α, j)
    # j = 2: 4·C(α,2)·(e^{ε₀}−1)²/n̄.   j ≥ 3: C(α,j)·j·Γ(j/2)·(2(e^{2ε₀}−1)²/(e^{2ε₀} n̄))^{j/2}.
    second_parts = binom_parts + (_LOG4, 2.0 * log_expm1(e), -jnp.log(n_bar))
    ratio_parts = (_LOG2, 2.0 * log_expm1(2.0 * e), -2.0 * e, -jnp.log(n_bar))
    higher_parts = binom_parts + (jnp.log(j), gammaln(j / 2.0), 0.5 * j * sum(ratio_parts))
    present = j <= alpha
    terms = jnp.where(present, jnp.where(j == 2.0, sum(second_parts), sum(higher_parts)), -jnp.inf)
    higher_size = _magnitude(higher_parts[:-1]) + 0.5 * j * _magnitude(ratio_parts)
    size = jnp.where(j == 2.0, _magnitude(second_parts), higher_size)
    remainder_parts = (eps0[..., None] * orders, -(n[..., None] - 1.0) / (8.0 * jnp.exp(eps0[..., None])))
    all_terms = jnp.concatenate([terms, sum(remainder_parts)[..., None]], axis=-1)
    all_sizes = jnp.concatenate([jnp.where(present, size, 0.0), _magnitude(remainder_parts)[..., None]], axis=-1)
    log_sum = jax.scipy.special.logsumexp(all_terms, axis=-1)
    rounding = allowance * _EPS * jnp.sum(jax.nn.softmax(all_terms, axis=-1) * all_sizes, axis=-1)
    rho = jax.nn.softplus(log_sum + rounding) / (orders - 1.0) * _UP  # log(1 + Σ)/(α−1), rounded up
    domain = (eps0 > 0) & (n >= 2)
    return jnp.where(domain[..., None], rho, jnp.nan)


def _magnitude(parts):
    """Σ|part| + 1: the scale of a sum's absolute rounding error (the 1 for parts near zero)."""
    return sum(jnp.abs(part) for part in parts) + 1.0


def girgis_rdp(eps0, n, orders):
    """Shuffle RDP upper bound of Girgis et al. (Theorem 1) for n users of any ε₀-LDP randomizer.

    ρ(α) ≤ log( 1 + 4·C(α,2)(e^{ε₀}−1)²/n̄ + Σ_{j=3}^{α} C(α,j)·j·Γ(j/2)·(2(e^{2ε₀}−1)²/(e^{2ε₀} n̄))^{j/2}
    + e^{ε₀α − (n−1)/(8e^{ε₀})} ) / (α−1),  n̄ = ⌊(n−1)/(2e^{ε₀})⌋ + 1, integer α ≥ 2.

    Source: Girgis, Data, Diggavi, Suresh, Kairouz, "On the Rényi Differential Privacy of the Shuffle
    Model", CCS 2021, Theorem 1 (MATH §1.6). How the constants were fixed: the j ≥ 3 terms are
    the sub-Gaussian moment bound E|Z|^j ≤ j·Γ(j/2)·(2s²)^{j/2} of a mean over n̄ clones; the two public
    implementations of the theorem differ by a factor 4 in s² (a clone variable's range of
    (e^{2ε₀}−1)/e^{ε₀} or twice that). We could not settle it from the paper's text offline, so we
    take the **larger** value, which is an upper bound under either reading; the remainder uses
    e^{ε₀α}, which dominates the subsampled variant's (1 + sinh ε₀)^α. Checked in the tests: the bound
    is never below the exact Rényi divergence of shuffled binary randomized response (a lower bound on
    every ε₀-LDP randomizer), and its (ε, δ) conversion is never below the exact strong-clone value.
    It is much looser than the numeric clone accountant (:func:`jaxpriv.shuffle.clones_epsilon`), but
    it is an RDP curve, so it composes over rounds and combines with Poisson subsampling.

    Args:
      eps0: local privacy ε₀ > 0, finite (array, broadcast with ``n``; shape ``S``).
      n: number of users, an integer ≥ 2 (array).
      orders: 1-D array of ``K`` integer Rényi orders α ≥ 2 (cost grows with the largest order).

    Returns:
      float64 array of shape ``S + (K,)``, rounded up by an allowance for its rounding errors.

    Example:
      >>> from jaxpriv.shuffle import bounds
      >>> rho = bounds.girgis_rdp(1.0, 10_000, [2, 8, 32])
      >>> bool((rho > bounds.girgis_rdp_simplified(1.0, 10_000, [2, 8, 32])).all())
      True
    """
    with float64():
        eps0, n = _check_eps0(eps0), _check_n(n)
        orders_np = _check_integer_orders(orders)
        shape = check_broadcastable(eps0=eps0, n=n)
        j = jnp.arange(2.0, orders_np.max() + 1.0)
        rho = _girgis_theorem1_kernel(
            jnp.broadcast_to(eps0, shape), jnp.broadcast_to(n, shape), jnp.asarray(orders_np), j, _GIRGIS_ALLOWANCE
        )
        return as_output(rho)


def _girgis(eps0, n, orders, *, upper: bool):
    with float64():
        eps0, n = _check_eps0(eps0), _check_n(n)
        orders = jnp.asarray(_check_integer_orders(orders))
        shape = check_broadcastable(eps0=eps0, n=n)
        return as_output(_girgis_kernel(jnp.broadcast_to(eps0, shape), jnp.broadcast_to(n, shape), orders, upper))
