"""Privacy-budget distributions for personalized shuffling: the seeds' scenarios as reproducible arrays.

A specification string names a distribution; :func:`budgets` turns it into n local budgets ε_i. The
values are the distribution's quantiles at (i + ½)/n rather than random draws, so the same
specification always gives the same population (and the same bounds):

* ``uniform:LO,HI`` — uniform on [LO, HI] (APES "Uniform1/2");
* ``gauss:MEAN,SD[,clip=LO,HI]`` — normal, clipped to [LO, HI] (APES "Gauss1/2");
* ``levels:E1@W1,E2@W2,...`` — budget E_k for a fraction W_k of the users (rPDP "ThreeLevels"); the
  fractions lie in (0, 1] and sum to 1 (within 1e-6);
* ``scenario:NAME[,seed=S]`` — n random draws from a named scenario of the seeds (:mod:`jaxpriv.budgets`,
  e.g. ``scenario:BoundedPareto,seed=3``; seed 0 by default), sorted;
* a path to a CSV file with one budget per line (or per row, first column); n is then the file's length.
"""

from __future__ import annotations

import os
from statistics import NormalDist

import numpy as np

from .._checks import check_values

__all__ = ["budgets"]

#: How far from 1 the weights of ``levels:`` may sum (they are fractions of the users)
_WEIGHT_TOLERANCE = 1e-6


def _numbers(text: str, what: str) -> list[float]:
    try:
        return [float(t) for t in text.split(",") if t.strip()]
    except ValueError:
        raise ValueError(f"budgets: cannot read numbers in {what!r}") from None


def _quantiles(n: int) -> np.ndarray:
    return (np.arange(n) + 0.5) / n


def budgets(spec: str, n: int | None = None) -> np.ndarray:
    """n local privacy budgets ε_i from a distribution specification (see the module docstring).

    Args:
      spec: ``uniform:LO,HI``, ``gauss:MEAN,SD[,clip=LO,HI]``, ``levels:E@W,...``,
        ``scenario:NAME[,seed=S]`` or a CSV path.
      n: number of users ≥ 2 (ignored for a CSV file, whose length is n).

    Returns:
      float64 array of n budgets, each > 0, sorted ascending for distributions (file order for CSV).

    Example:
      >>> from jaxpriv.shuffle.budgets import budgets
      >>> budgets("levels:0.1@0.7,1@0.2,5@0.1", 10).tolist()
      [0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 1.0, 1.0, 5.0]
    """
    if not isinstance(spec, str) or not spec:
        raise ValueError(f"budgets spec must be a non-empty string, got {spec!r}")
    if os.path.isfile(spec):
        values = np.loadtxt(spec, delimiter=",", ndmin=2, dtype=np.float64)[:, 0]
        return check_values("budgets", values, 0.0, np.inf, lo_open=True)
    kind, _, body = spec.partition(":")
    if n is None:
        raise ValueError("n (the number of users) is required for a distribution spec")
    n = int(check_values("n", n, 2.0, np.inf, integer=True))
    u = _quantiles(n)
    if kind == "uniform":
        bounds = _numbers(body, spec)
        if len(bounds) != 2 or not 0 < bounds[0] <= bounds[1]:
            raise ValueError(f"uniform:LO,HI needs 0 < LO ≤ HI, got {spec!r}")
        values = bounds[0] + (bounds[1] - bounds[0]) * u
    elif kind == "gauss":
        main, _, clip = body.partition(",clip=")
        params = _numbers(main, spec)
        if len(params) != 2 or params[1] <= 0:
            raise ValueError(f"gauss:MEAN,SD[,clip=LO,HI] needs SD > 0, got {spec!r}")
        values = np.array([NormalDist(params[0], params[1]).inv_cdf(x) for x in u])
        if clip:
            lo, hi = (_numbers(clip, spec) + [None, None])[:2]
            if hi is None or not 0 < lo <= hi:
                raise ValueError(f"gauss clip=LO,HI needs 0 < LO ≤ HI, got {spec!r}")
            values = np.clip(values, lo, hi)
    elif kind == "levels":
        pairs = []
        for item in body.split(","):
            eps, _, weight = item.partition("@")
            pairs.append(_numbers(f"{eps},{weight}", spec) if weight else [])
        # written as "not (valid)" so that a NaN fails every test
        if not pairs or any(len(p) != 2 or not (0 < p[0] < np.inf and 0 < p[1]) for p in pairs):
            raise ValueError(f"levels:E@W,... needs positive finite budgets E and weights W, got {spec!r}")
        eps, weight = np.array(pairs).T
        if not (np.all(weight <= 1) and abs(weight.sum() - 1) <= _WEIGHT_TOLERANCE):
            raise ValueError(f"levels:E@W,... needs weights W in (0, 1] summing to 1 (within {_WEIGHT_TOLERANCE:g}), "
                             f"got {spec!r} (sum {weight.sum():.6g})")
        cumulative = np.cumsum(weight) / weight.sum()
        values = eps[np.minimum(np.searchsorted(cumulative, u), eps.size - 1)]
    elif kind == "scenario":
        name, _, option = body.partition(",")
        key, _, seed = option.partition("=")
        if option and (key.strip() != "seed" or not seed.strip().isdigit()):
            raise ValueError(f"scenario:NAME[,seed=S] needs seed to be an integer in [0, inf), got {spec!r}")
        from ..budgets import scenario  # scipy: imported only for this spec

        values = scenario(name.strip(), n, int(seed) if option else 0)
    else:
        raise ValueError(
            f"budgets spec must be uniform:LO,HI, gauss:MEAN,SD[,clip=LO,HI], levels:E@W,..., "
            f"scenario:NAME[,seed=S] or a CSV path; got {spec!r}"
        )
    return check_values("budgets", np.sort(values), 0.0, np.inf, lo_open=True)
