"""Claim and audit on one plot (MATH §10.7): the most powerful membership test a claim allows (TPR at each
FPR, from the claim's trade-off function) beside what the canaries achieved (their empirical ROC) and the
audited lower bound's (ε_lb, δ) line.

The claimed curve is TPR_max(α) = 1 − f(α), f the claim's trade-off function (Dong, Roth & Su 2022, Def. 2.1):
for a μ-GDP claim f = G_μ (:func:`jaxpriv.fdp.gaussian_tradeoff`); for any event of :mod:`jaxpriv.events`,
f = max_i f_{ε_i, δ(ε_i)} over an ε grid, δ(ε) from :func:`jaxpriv.accounting.delta` (the PLD/RDP upper
bounds, so the curve lies above the true one: a test above it would contradict the claim). Matplotlib is
imported inside :func:`plot_audit` and draws on a bare Figure (Agg canvas).
"""

from __future__ import annotations

import numpy as np

from .._checks import check_values

__all__ = ["claimed_tpr", "empirical_roc", "plot_audit"]


def claimed_tpr(fpr, *, mu: float | None = None, event=None, epsilons=None) -> np.ndarray:
    """The largest TPR at each FPR that a claim allows: 1 − f(FPR) (module docstring; MATH §10.7).

    Args:
      fpr: false-positive rates in [0, 1] (array-like).
      mu: a μ-GDP claim (μ ≥ 0); or
      event: a :mod:`jaxpriv.events` event (add/remove adjacency), whose δ(ε) on ``epsilons`` (default 0 to
        24 in steps of 1; the certified PLD accountant's upper bound) gives f = max_i f_{ε_i, δ_i}
        (:func:`jaxpriv.fdp.eps_delta_tradeoff`).
      epsilons: the ε grid for ``event`` (array-like, ≥ 0).

    Returns:
      float64 numpy array like ``fpr``.

    Example:
      >>> from jaxpriv.audit.figures import claimed_tpr
      >>> [round(float(t), 4) for t in claimed_tpr([0.01, 0.1], mu=1.0)]
      [0.0924, 0.3891]
    """
    from .. import fdp

    alpha = check_values("fpr", fpr, 0.0, 1.0)
    if (mu is None) == (event is None):
        raise ValueError("give exactly one claim: mu (a GDP μ ≥ 0) or event (a jaxpriv.events event)")
    if mu is not None:
        m = float(check_values("mu", mu, 0.0).reshape(()))
        return 1.0 - np.asarray(fdp.gaussian_tradeoff(m, alpha), np.float64)
    from .. import accounting

    grid = np.linspace(0.0, 24.0, 25) if epsilons is None else check_values("epsilons", epsilons, 0.0).reshape(-1)
    deltas = np.minimum(np.asarray(accounting.delta(event, grid, accountant="pld"), np.float64).reshape(-1), 1.0)
    f = np.asarray(fdp.eps_delta_tradeoff(grid[:, None], deltas[:, None], alpha.reshape(-1)[None, :]), np.float64)
    return (1.0 - f.max(axis=0)).reshape(alpha.shape)


def empirical_roc(scores, inserted) -> tuple[np.ndarray, np.ndarray]:
    """(FPR, TPR) of the tests "score ≥ t" at every distinct score t, from canary scores (descriptive: a
    curve, not a confidence bound).

    Example:
      >>> from jaxpriv.audit.figures import empirical_roc
      >>> fpr, tpr = empirical_roc([3.0, 2.0, 1.0, 0.0], [1, 0, 1, 0])
      >>> fpr.tolist(), tpr.tolist()
      ([0.0, 0.5, 0.5, 1.0], [0.5, 0.5, 1.0, 1.0])
    """
    from .one_run import check_scores

    s, b = check_scores(scores, inserted)
    if b.all() or not b.any():
        raise ValueError("inserted must hold both inserted and not-inserted canaries to draw an ROC")
    thresholds = np.unique(s)[::-1]
    tpr = np.array([(s[b] >= t).mean() for t in thresholds])
    fpr = np.array([(s[~b] >= t).mean() for t in thresholds])
    return fpr, tpr


def plot_audit(path: str, *, claimed_fpr, claimed_tpr, scores=None, inserted=None, epsilon_lower=None,
               delta: float = 0.0, title: str = "privacy audit") -> str:
    """Claimed TPR-at-FPR curve, the canaries' empirical ROC and the audited (ε_lb, δ) line
    TPR = e^{ε_lb}·FPR + δ, on log-log axes; saved to ``path`` (format from its extension).

    Args:
      path: output file.
      claimed_fpr, claimed_tpr: the claim's curve (:func:`claimed_tpr`), same length ≥ 2.
      scores, inserted: canary scores and inclusion bits (optional: the empirical ROC).
      epsilon_lower: the audited lower bound (optional), drawn with ``delta``.
      title: the figure's title.

    Returns:
      ``path``.

    Example:
      >>> import os, tempfile
      >>> import numpy as np
      >>> from jaxpriv.audit.figures import claimed_tpr, plot_audit
      >>> fpr = np.logspace(-4, 0, 50)
      >>> path = os.path.join(tempfile.mkdtemp(), "audit.png")
      >>> plot_audit(path, claimed_fpr=fpr, claimed_tpr=claimed_tpr(fpr, mu=1.0), epsilon_lower=0.5) == path
      True
    """
    from matplotlib.figure import Figure

    x = check_values("claimed_fpr", claimed_fpr, 0.0, 1.0).reshape(-1)
    y = check_values("claimed_tpr", claimed_tpr, 0.0, 1.0).reshape(-1)
    if x.size != y.size or x.size < 2:
        raise ValueError(f"claimed_fpr and claimed_tpr must have the same length ≥ 2, got {x.size} and {y.size}")
    fig = Figure(figsize=(6.4, 4.8), layout="constrained")
    ax = fig.add_subplot()
    keep = x > 0
    ax.plot(x[keep], y[keep], color="tab:blue", label="claimed: largest TPR the claim allows")
    if scores is not None:
        fpr, tpr = empirical_roc(scores, inserted)
        ok = fpr > 0
        ax.step(fpr[ok], tpr[ok], where="post", color="tab:orange", label="canaries: empirical ROC")
    if epsilon_lower is not None:
        e = float(check_values("epsilon_lower", epsilon_lower, 0.0).reshape(()))
        line = np.minimum(np.exp(e) * x[keep] + delta, 1.0)
        ax.plot(x[keep], line, color="tab:red", linestyle="--",
                label=f"audited lower bound: TPR = exp({e:.2f})·FPR + δ")
    ax.plot(x[keep], x[keep], color="0.6", linewidth=0.8, label="no information (TPR = FPR)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("false-positive rate")
    ax.set_ylabel("true-positive rate")
    ax.set_title(title)
    ax.grid(alpha=0.3, which="both")
    ax.legend(loc="lower right", fontsize="small")
    fig.savefig(path, dpi=120)
    return path
