"""GSPA's personalized estimators in the shuffle model: mean (Alg. 1) and frequency (Alg. 2) (MATH §3.3).

Chen, Cao & Ge, "A Generalized Shuffle Framework for Privacy Amplification" (GSPA, seed 003). Each user
randomizes locally with its own budget ε_i, a shuffler permutes the reports, and the analyzer only sees
the shuffled multiset and the multiset of budgets:

* Alg. 1 (mean): y_i = x_i + Lap(Δ/ε_i), z = (1/n) Σ_i y_π(i). Unbiased; Var z = (2Δ²/n²) Σ_i 1/ε_i².
* Alg. 2 (frequency of 1 in binary data): binary randomized response y_i, A = Σ_i y_i,
  B = Σ_i 1/(1 + e^{ε_i}), z = (A − B)/(n − 2B). E[z] = Σ_i w_i x_i / Σ_i w_i with
  w_i = (e^{ε_i} − 1)/(e^{ε_i} + 1), so z is unbiased for c = (1/n) Σ_i x_i when the budgets are equal
  or assigned independently of the data (in expectation over that assignment), and biased otherwise;
  Var z = Σ_i e^{ε_i}/(1 + e^{ε_i})² / (n − 2B)². (Derivation:
  :func:`jaxpriv.mechanisms.randomized_response.estimate_frequencies`.)

Both use the mechanism modules' samplers (:mod:`jaxpriv.mechanisms.laplace`,
:mod:`jaxpriv.mechanisms.randomized_response`) and return an :class:`Estimate` with the exact
expectation and variance of the estimator given the data and budgets. Their privacy is accounted by
:func:`jaxpriv.shuffle.bounds.gspa_mu` (the paper's approximation) or exactly by
:func:`jaxpriv.shuffle.personalized_epsilon`. ``trials`` repeats the whole algorithm with independent
randomness (the paper's 1 000 repetitions) in one compiled, batched call; the analyzers are symmetric in
the reports, so the shuffle cannot change an estimate and batched trials skip its sort.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .._docs import fill_doc
from .._numerics import as_output, check_array, float64, kernel_jit
from ..mechanisms import laplace
from ..mechanisms import randomized_response as rr

#: the Args/Returns of an estimator (``{x}``: what the data are; ``{more}``: arguments after ``epsilon``)
_ESTIMATOR_ARGS = """
    Args:
      key: a JAX PRNG key.
      x: {x}
      epsilon: budgets ε_i > 0, one per user or a scalar shared by all.{more}
      trials: ``None`` for one run, or the number of independent runs.

    Returns:
      :class:`Estimate` (estimate of shape ``()`` or ``(trials,)``; float64)."""

__all__ = ["Estimate", "mean_estimation", "frequency_estimation"]


class Estimate(NamedTuple):
    """An estimate with the estimator's exact moments (given the data and the budgets)."""

    estimate: np.ndarray  #: the estimate (shape ``(trials,)`` when ``trials`` is given, else a scalar)
    expectation: np.ndarray  #: E[estimate]
    variance: np.ndarray  #: Var[estimate]


def _check_users(x, epsilon, *, binary: bool):
    """x: 1-D, n ≥ 1 users; ε: one positive budget per user or a scalar shared by all."""
    x = check_array("x", x, 0.0, 1.0, integer=True) if binary else check_array("x", x)
    if x.ndim != 1:
        raise ValueError(f"x must be a 1-D array of the users' values, got shape {x.shape}")
    eps = check_array("epsilon", epsilon, 0.0, np.inf, lo_open=True)
    if eps.ndim > 1 or (eps.ndim == 1 and eps.shape[0] != x.shape[0]):
        raise ValueError(f"epsilon must be a scalar or hold one budget per user ({x.shape[0]}), got shape {eps.shape}")
    return x, jnp.broadcast_to(eps, x.shape)


def _check_trials(trials):
    if trials is None:
        return None
    if np.ndim(trials) != 0:
        raise ValueError(f"trials must be None or an integer ≥ 1, got shape {np.shape(trials)}")
    check_array("trials", trials, 1.0, np.inf, integer=True)
    return int(trials)


def _run_trials(one_trial, key, trials):
    """One run with ``key`` (shuffled), or ``trials`` independent ones (keys split from ``key``), batched.

    Both analyzers are symmetric functions of the reports, so the shuffle never changes an estimate; in
    batched trials it is skipped, since its O(n log n) sort per trial would dominate the cost."""
    if trials is None:
        return one_trial(key, True)
    return jax.lax.map(lambda k: one_trial(k, False), jax.random.split(key, trials), batch_size=min(trials, 64))


# ----------------------------------------------------------------------------------------------------
# Alg. 1: mean estimation
# ----------------------------------------------------------------------------------------------------


@functools.partial(kernel_jit, static_argnames=("trials",))
def _mean_kernel(key, x, scales, trials):
    def one_trial(k, shuffle):
        noise_key, shuffle_key = jax.random.split(k)
        reports = x + laplace.sample(noise_key, scales, x.shape, x.dtype)  # line 2
        if shuffle:  # line 4: what the analyzer receives
            reports = jax.random.permutation(shuffle_key, reports)
        return jnp.mean(reports)  # line 5

    return _run_trials(one_trial, key, trials)


@fill_doc(args=_ESTIMATOR_ARGS.format(
    x="the users' values, a 1-D array (n ≥ 1) with max − min ≤ ``sensitivity``.",
    more="\n      sensitivity: Δ > 0, the width of the value domain (the paper's Δf)."))
def mean_estimation(key, x, epsilon, sensitivity=1.0, *, trials=None):
    """GSPA Alg. 1: personalized Laplace reports y_i = x_i + Lap(Δ/ε_i), shuffled and averaged.

    z = (1/n) Σ_i y_π(i), E[z] = (1/n) Σ_i x_i (unbiased), Var[z] = (2Δ²/n²) Σ_i 1/ε_i² (exact: the
    noises are independent with variance 2(Δ/ε_i)²). Each report is ε_i-LDP when the values lie in an
    interval of length Δ (checked: max x − min x ≤ Δ). Source: GSPA (seed 003), Alg. 1 and Thm 3;
    MATH §3.3. Sampling in float64 (scoped; x64 need not be on).

    {args}

    Example:
      >>> import jax, numpy as np
      >>> from jaxpriv.shuffle import estimators
      >>> x = np.linspace(20.0, 80.0, 10_000)
      >>> est = estimators.mean_estimation(jax.random.key(0), x, 1.0, sensitivity=60.0, trials=200)
      >>> float(est.expectation), round(float(est.variance), 4)
      (50.0, 0.72)
      >>> bool(abs(est.estimate.mean() - 50.0) < 5 * (est.variance / 200) ** 0.5)
      True
    """
    trials = _check_trials(trials)
    with float64():
        x, eps = _check_users(x, epsilon, binary=False)
        sensitivity = check_array("sensitivity", sensitivity, 0.0, np.inf, lo_open=True)
        if sensitivity.ndim != 0:
            raise ValueError(f"sensitivity must be a scalar, got shape {sensitivity.shape}")
        spread = float(jnp.max(x) - jnp.min(x))
        if spread > float(sensitivity):
            raise ValueError(
                f"x must lie in an interval of length sensitivity = {float(sensitivity)!r} for ε_i-LDP "
                f"reports, got max − min = {spread!r}"
            )
        scales = jnp.asarray(laplace.scale_for(eps, sensitivity))
        n = x.shape[0]
        estimate = _mean_kernel(key, x, scales, trials)
        expectation = jnp.mean(x)
        variance = jnp.sum(jnp.asarray(laplace.variance(scales))) / n**2
        return Estimate(*as_output((estimate, expectation, variance)))


# ----------------------------------------------------------------------------------------------------
# Alg. 2: frequency estimation
# ----------------------------------------------------------------------------------------------------


@functools.partial(kernel_jit, static_argnames=("trials",))
def _count_kernel(key, x, eps, trials):
    def one_trial(k, shuffle):
        rr_key, shuffle_key = jax.random.split(k)
        reports = rr.sample(rr_key, x, eps, k=2, dtype=jnp.float64)  # lines 2–6
        if shuffle:  # line 8
            reports = jax.random.permutation(shuffle_key, reports)
        return jnp.sum(reports)  # line 9: A

    return _run_trials(one_trial, key, trials)


@fill_doc(args=_ESTIMATOR_ARGS.format(x="binary values in {0, 1}, a 1-D array (n ≥ 1).", more=""))
def frequency_estimation(key, x, epsilon, *, trials=None):
    """GSPA Alg. 2: personalized binary randomized response, shuffled; z = (A − B)/(n − 2B).

    A = number of 1-reports, B = Σ_i 1/(1 + e^{ε_i}); z is the k = 2 case of
    :func:`jaxpriv.mechanisms.randomized_response.estimate_frequencies` (frequency of the value 1).
    Exact moments given x and the budgets (:func:`~jaxpriv.mechanisms.randomized_response.frequency_moments`):
    E[z] = Σ_i w_i x_i / Σ_i w_i, w_i = tanh(ε_i/2) — equal to c = mean(x) when the budgets are equal or
    independent of the data, biased otherwise (the paper states E(z) = c without that condition);
    Var[z] = Σ_i e^{ε_i}/(1 + e^{ε_i})² / (n − 2B)². Source: GSPA (seed 003), Alg. 2 and Thm 4;
    MATH §3.3. The coins are float64 uniforms (scoped; x64 need not be on).

    {args}

    Example:
      >>> import jax, numpy as np
      >>> from jaxpriv.shuffle import estimators
      >>> x = (np.arange(10_000) < 7_000).astype(int)  # density c = 0.7
      >>> est = estimators.frequency_estimation(jax.random.key(0), x, 1.0, trials=200)
      >>> round(float(est.expectation), 12), round(float(est.variance), 8)
      (0.7, 9.207e-05)
      >>> bool(abs(est.estimate.mean() - 0.7) < 5 * (est.variance / 200) ** 0.5)
      True
    """
    trials = _check_trials(trials)
    with float64():
        x, eps = _check_users(x, epsilon, binary=True)
        ones = _count_kernel(key, x.astype(jnp.int32), eps, trials)
        counts = jnp.stack([x.shape[0] - ones, ones], axis=-1)
        estimate = jnp.asarray(rr.estimate_frequencies(counts, eps))[..., 1]
        expectation, variance = (jnp.asarray(m)[1] for m in rr.frequency_moments(x, eps, k=2))
        return Estimate(*as_output((estimate, expectation, variance)))
