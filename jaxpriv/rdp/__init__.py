"""Rényi differential privacy curves and their conversion to (ε, δ) (MATH §1).

A *curve* is the array ρ(α) of Rényi-DP guarantees at a 1-D array of orders α (shape ``S + (K,)`` for
parameters broadcast to shape ``S`` and ``K`` orders). Curves of a composition add order by order
(:func:`compose`); :func:`to_epsilon` and :func:`to_delta` turn a curve into an (ε, δ) statement.

Modules, one concept each:

* :mod:`.curves` — the order grids, the Gaussian and Laplace curves, composition and conversion;
* :mod:`.series` — the signed binomial series of the subsampled Gaussian and their CVZ acceleration;
* :mod:`.program` — the Poisson-subsampled Gaussian's exact curve as one small program;
* :mod:`.dpsgd` — DP-SGD's ε as one program, on the grid and refined between its orders;
* :mod:`.subsampling` — client and two-stage sampling (rPDP-FL) and Poisson subsampling of any mechanism.

Every curve is *conservative* (MATH §0.1): its floating-point error is bounded and added upward, so a
returned value is never below the exact one, and is typically a few ulps above it (``gaussian(1.0, [2.0])``
is 1.0000000000000007, not 1.0); round before comparing for equality.
"""

from __future__ import annotations

from .curves import (DEFAULT_ORDERS, DP_ACCOUNTING_ORDERS, compose, gaussian, laplace, laplace_kernel, orders_array,
                     to_delta, to_epsilon, to_epsilon_both_kernel, to_epsilon_kernel)
from .dpsgd import (REFINE_ITERATIONS, dpsgd_conversions_jit, dpsgd_conversions_kernel, dpsgd_epsilon_jit,
                    dpsgd_epsilon_kernel, dpsgd_epsilon_refined_jit, dpsgd_epsilon_refined_kernel)
from .series import REFINE_MAX_ORDER
from .program import curve_tables, subsampled_gaussian, subsampled_gaussian_kernel
from .subsampling import (client_sampled, subsampled, subsampled_kernel, two_stage, two_stage_curve_kernel,
                          two_stage_epsilon_kernel)

__all__ = [
    "DEFAULT_ORDERS",
    "DP_ACCOUNTING_ORDERS",
    "gaussian",
    "laplace",
    "subsampled_gaussian",
    "subsampled",
    "two_stage",
    "client_sampled",
    "compose",
    "to_epsilon",
    "to_delta",
]
