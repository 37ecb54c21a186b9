"""Personalized privacy-budget scenarios of the seeds, as named, seeded generators.

:func:`scenario` draws n budgets ε_i i.i.d. from one of the populations the papers evaluate on;
:data:`SCENARIOS` maps each name to a one-line description. ``jaxpriv.shuffle.budgets.budgets`` accepts
``scenario:<Name>[,seed=S]`` and delegates here.

rPDP-FL (seed 004, §7 "Privacy Preference Distributions" and §7.2), budgets bounded to [0.1, 10]:

* ``ThreeLevels``: ε ∈ {0.1, 1.0, 5.0} with probabilities 0.7 / 0.2 / 0.1.
* ``BoundedMixGauss``: mixture of N(0.1, 0.01), N(1.0, 0.05), N(5.0, 0.5) with weights 0.7 / 0.2 / 0.1.
  The second parameter is a **variance**: the seed writes the Gaussian mechanism as f(·) + N(0, σ²I)
  (§5.1), so its N(μ, ·) notation carries σ². The standard deviations are 0.1, √0.05 ≈ 0.224 and
  √0.5 ≈ 0.707.
* ``BoundedPareto``: Pareto with shape 1.0 and scale (minimum) 0.1, bounded above by 10.

The seed says only that these budgets lie in [0.1, 10]. Here each component is truncated to the bounds
(rejection sampling, drawn exactly by the truncated inverse CDF), so the published mixture weights stay
as they are and each component keeps its shape inside the bounds. Clipping would instead put half of
the first Gaussian (35% of all records) exactly at 0.1. ``bounding="clip"`` is available to compare.
For ``BoundedPareto`` the truncated law is the classic bounded Pareto distribution, with
CDF F(x) = (1 − 0.1/x)/(1 − 0.01) on [0.1, 10].

APES (seed 000, Table 2; the ``…3`` rows are from its Figure 8 caption). Values outside the clip range
are **clipped** (Table 2 says so), which leaves atoms at both ends:

* ``Uniform1`` U(0.05, 0.5); ``Uniform2`` U(0.05, 1); ``Uniform3`` U(0.05, 3);
* ``Gauss1`` N(0.1, 1) clipped to [0.05, 0.5]; ``Gauss2`` N(0.2, 1) clipped to [0.05, 1];
  ``Gauss3`` N(0.5, 1) clipped to [0.05, 3];
* ``MixGauss1`` 90% N(0.1, 1) + 10% N(0.5, 1) clipped to [0.05, 0.5]; ``MixGauss2`` 90% N(0.2, 1) +
  10% N(1, 1) clipped to [0.05, 1]; ``MixGauss3`` 90% N(0.5, 1) + 10% N(3, 1) clipped to [0.05, 3].

The seed leaves two things open, decided here: every second parameter is 1, so variance and standard
deviation coincide; and "90% / 10%" is read as i.i.d. component probabilities (not exact counts), as in
every other scenario. For exact proportions use ``levels:`` in ``jaxpriv.shuffle.budgets``.

Reproducibility: record i uses the i-th pair of uniforms of ``numpy.random.default_rng(seed)``: one
picks the component and one is pushed through that component's (bounded) inverse CDF. So the first k
budgets are the same for every n ≥ k.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from scipy import special, stats

from ._checks import check_values

__all__ = ["scenario", "SCENARIOS"]


class _Component(NamedTuple):
    weight: float
    kind: str  # "point" | "uniform" | "normal" | "pareto"
    a: float  # point value, uniform low, normal mean, pareto shape
    b: float = 0.0  # uniform high, normal standard deviation, pareto scale (minimum)


class _Scenario(NamedTuple):
    components: tuple
    low: float
    high: float
    bounding: str  # the source's own choice: "clip" (APES Table 2) or "truncate"
    description: str


def _normal(weight, mean, sd):
    return _Component(weight, "normal", mean, sd)


_RPDP = "rPDP-FL (seed 004, §7.2)"
_APES = "APES (seed 000, Table 2)"
_APES_FIG8 = "APES (seed 000, Figure 8)"

_TABLE: dict[str, _Scenario] = {
    "ThreeLevels": _Scenario(
        (_Component(0.7, "point", 0.1), _Component(0.2, "point", 1.0), _Component(0.1, "point", 5.0)),
        0.1, 10.0, "truncate", f"{_RPDP}: ε = 0.1 / 1.0 / 5.0 with probabilities 0.7 / 0.2 / 0.1"),
    "BoundedMixGauss": _Scenario(
        (_normal(0.7, 0.1, math.sqrt(0.01)), _normal(0.2, 1.0, math.sqrt(0.05)), _normal(0.1, 5.0, math.sqrt(0.5))),
        0.1, 10.0, "truncate",
        f"{_RPDP}: 0.7 N(0.1, 0.01) + 0.2 N(1, 0.05) + 0.1 N(5, 0.5) (variances), each truncated to [0.1, 10]"),
    "BoundedPareto": _Scenario(
        (_Component(1.0, "pareto", 1.0, 0.1),), 0.1, 10.0, "truncate",
        f"{_RPDP}: Pareto(shape 1, minimum 0.1) truncated to [0.1, 10]"),
    "Uniform1": _Scenario((_Component(1.0, "uniform", 0.05, 0.5),), 0.05, 0.5, "clip", f"{_APES}: U(0.05, 0.5)"),
    "Uniform2": _Scenario((_Component(1.0, "uniform", 0.05, 1.0),), 0.05, 1.0, "clip", f"{_APES}: U(0.05, 1)"),
    "Uniform3": _Scenario((_Component(1.0, "uniform", 0.05, 3.0),), 0.05, 3.0, "clip", f"{_APES_FIG8}: U(0.05, 3)"),
    "Gauss1": _Scenario((_normal(1.0, 0.1, 1.0),), 0.05, 0.5, "clip", f"{_APES}: N(0.1, 1) clipped to [0.05, 0.5]"),
    "Gauss2": _Scenario((_normal(1.0, 0.2, 1.0),), 0.05, 1.0, "clip", f"{_APES}: N(0.2, 1) clipped to [0.05, 1]"),
    "Gauss3": _Scenario((_normal(1.0, 0.5, 1.0),), 0.05, 3.0, "clip", f"{_APES_FIG8}: N(0.5, 1) clipped to [0.05, 3]"),
    "MixGauss1": _Scenario(
        (_normal(0.9, 0.1, 1.0), _normal(0.1, 0.5, 1.0)), 0.05, 0.5, "clip",
        f"{_APES}: 0.9 N(0.1, 1) + 0.1 N(0.5, 1) clipped to [0.05, 0.5]"),
    "MixGauss2": _Scenario(
        (_normal(0.9, 0.2, 1.0), _normal(0.1, 1.0, 1.0)), 0.05, 1.0, "clip",
        f"{_APES}: 0.9 N(0.2, 1) + 0.1 N(1, 1) clipped to [0.05, 1]"),
    "MixGauss3": _Scenario(
        (_normal(0.9, 0.5, 1.0), _normal(0.1, 3.0, 1.0)), 0.05, 3.0, "clip",
        f"{_APES_FIG8}: 0.9 N(0.5, 1) + 0.1 N(3, 1) clipped to [0.05, 3]"),
}

#: Scenario name → one-line description (source, law, bounds).
SCENARIOS: dict[str, str] = {name: s.description for name, s in _TABLE.items()}


def _inverse_cdf(c: _Component, v: np.ndarray, low: float, high: float, bounding: str) -> np.ndarray:
    """The component's quantile at v ∈ [0, 1), bounded to [low, high] by clipping or truncation."""
    if c.kind == "point":
        return np.full(v.shape, c.a)
    if c.kind == "uniform":
        return c.a + (c.b - c.a) * v
    if c.kind == "normal":
        if bounding == "truncate":
            return stats.truncnorm.ppf(v, (low - c.a) / c.b, (high - c.a) / c.b, loc=c.a, scale=c.b)
        return np.clip(c.a + c.b * special.ndtri(v), low, high)
    # Pareto(shape k, minimum m): F(x) = 1 − (m/x)^k for x ≥ m; truncation at `high` rescales F by
    # F(high) = 1 − (m/high)^k, then inverts it in closed form.
    k, m = c.a, c.b
    mass = -math.expm1(k * math.log(m / high)) if bounding == "truncate" else 1.0
    return np.clip(m * np.power(1.0 - v * mass, -1.0 / k), low, high)


def scenario(name: str, n: int, seed: int = 0, *, bounding: str | None = None) -> np.ndarray:
    """n i.i.d. privacy budgets ε_i from one of the seeds' named scenarios.

    The laws, their bounds and the choices the seeds leave open are in the module docstring. Sources:
    rPDP-FL (seed 004) §7.2 for ``ThreeLevels``, ``BoundedMixGauss`` and ``BoundedPareto``; APES
    (seed 000) Table 2 and Figure 8 for ``Uniform1-3``, ``Gauss1-3`` and ``MixGauss1-3`` (MATH §3.2, §6).

    Args:
      name: a key of :data:`SCENARIOS` (case-sensitive).
      n: number of records or users, an integer ≥ 1.
      seed: integer ≥ 0 for ``numpy.random.default_rng``.
      bounding: ``"clip"`` or ``"truncate"`` (rejection: each component conditioned on the bounds);
        default: the source's own choice (clip for APES, truncate for rPDP-FL, whose seed does not say).

    Returns:
      float64 array of n budgets, each in the scenario's bounds, in draw order (not sorted).

    Example:
      >>> import numpy as np
      >>> from jaxpriv.budgets import scenario
      >>> eps = scenario("ThreeLevels", 10_000, seed=1)
      >>> sorted(np.unique(eps).tolist()), round(float(np.mean(eps == 0.1)), 2)
      ([0.1, 1.0, 5.0], 0.7)
      >>> bool(np.all((scenario("BoundedPareto", 1000) >= 0.1) & (scenario("BoundedPareto", 1000) <= 10)))
      True
    """
    if not isinstance(name, str) or name not in _TABLE:
        raise ValueError(f"name must be one of {', '.join(_TABLE)}; got {name!r}")
    if isinstance(n, bool) or not isinstance(n, (int, np.integer, float, np.floating)):
        raise ValueError(f"n must be an integer in [1, inf), got {n!r}")
    n = int(check_values("n", n, 1.0, np.inf, integer=True))
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be an integer in [0, inf), got {seed!r}")
    spec = _TABLE[name]
    bounding = spec.bounding if bounding is None else bounding
    if bounding not in ("clip", "truncate"):
        raise ValueError(f"bounding must be 'clip' or 'truncate', got {bounding!r}")
    uniforms = np.random.default_rng(int(seed)).random((n, 2))
    cumulative = np.cumsum([c.weight for c in spec.components])
    which = np.minimum(np.searchsorted(cumulative, uniforms[:, 0], side="right"), len(spec.components) - 1)
    values = np.empty(n, dtype=np.float64)
    for index, component in enumerate(spec.components):
        chosen = which == index
        values[chosen] = _inverse_cdf(component, uniforms[chosen, 1], spec.low, spec.high, bounding)
    return values
