"""Every shuffle bound for one population of local budgets, side by side, and the figures for it.

Used by ``jaxpriv shuffle``; a report over the shuffle kernels, kept with the shuffled rounds in the
calibration layer (its old home ``jaxpriv.shuffle.summary`` is a deprecated alias). The rows are the
numeric (exact) accountants of MATH §3.1 and the closed forms
of §3.2-3.3, each evaluated where it applies (uniform bounds at the largest local budget, which is what
the seeds' "UniS" baseline does) and labelled with what it is: a bound, or an approximation.
"""

from __future__ import annotations

import warnings

import numpy as np

from .. import fdp, rdp
from ..shuffle import bounds, clones, personalized

__all__ = ["shuffle_summary", "epsilon_versus_n", "plot_epsilon_versus_n", "plot_epsilon_versus_rounds", "plot_budgets"]


def shuffle_summary(local_epsilons, delta: float) -> list[dict]:
    """Central ε of shuffling n users with these local budgets at δ, by every accountant we have.

    Returns a list of rows ``{"name", "epsilon", "delta", "kind", "note"}``; ``epsilon`` is inf where a
    closed form's validity condition fails (its warning is turned into the note).
    """
    eps = np.asarray(local_epsilons, dtype=np.float64)
    n, top = eps.size, float(eps.max())
    rows = []

    def add(name, value, kind, note, delta_out=delta):
        rows.append({"name": name, "epsilon": float(value), "delta": float(delta_out), "kind": kind, "note": note})

    add("clones (FMT22), exact numeric, ε₀ = max", clones.clones_epsilon(top, n, delta, clones="fmt22"),
        "bound", "the seeds' UniS baseline computed exactly (MATH §3.1)")
    add("strong clones, exact numeric, ε₀ = max", clones.clones_epsilon(top, n, delta, clones="strong"),
        "bound", "valid for the FMT23 class of randomizers (see clones_delta)")
    for name, fn, note in [
        ("FMT22 closed form (UniS, APES Eq. 2)", bounds.fmt22_closed_form, "closed form at ε₀ = max"),
        ("Erlingsson et al. 2019", bounds.erlingsson19, "closed form at ε₀ = max"),
    ]:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            value = fn(top, n, delta)
        add(name, value, "bound", caught[0].message.args[0] if caught else note)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        eps_c, delta_c = bounds.apes_theorem4(eps, delta)
    add("APES Theorem 4 (echo of neighbours)", eps_c, "bound",
        caught[0].message.args[0] if caught else f"δ_s = {delta:g}; its own δ^c shown", delta_c)
    add("personalized, GSPA model, exact numeric", personalized.personalized_epsilon(eps, delta, model="gspa"),
        "bound", "worst-case target; strong-clone class (MATH §3.1)")
    add("personalized, APES/EoN model, exact numeric", personalized.personalized_epsilon(eps, delta, model="apes"),
        "bound", "echo probabilities as clone probabilities (the APES paper's numeric value)")
    orders = np.arange(2, 257)
    girgis, order = rdp.to_epsilon(bounds.girgis_rdp(top, n, orders), orders, delta)
    add("Girgis et al. RDP (Theorem 1)", girgis, "bound",
        f"ε₀ = max, best order {int(order)}; an RDP curve, so it composes over rounds")
    mu = float(bounds.gspa_mu(eps))
    add("GSPA μ-GDP", fdp.gdp_epsilon(mu, delta), "approximation", f"μ = {mu:.6g}; the paper's GDP approximation")
    return rows


#: The curves of :func:`epsilon_versus_n`, named as the rows of :func:`shuffle_summary` they follow
#: (exact numeric accountants solid, closed forms dashed in :func:`plot_epsilon_versus_n`).
_EXACT_CURVES = ("personalized, GSPA model, exact numeric", "strong clones, exact numeric, ε₀ = max",
                 "clones (FMT22), exact numeric, ε₀ = max")


def epsilon_versus_n(spec_budgets, ns, delta: float, *, personalized_sizes: int = 6) -> dict:
    """ε of the exact accountants (the personalized GSPA-model clone sum, the tightest row of
    :func:`shuffle_summary`, and the strong and FMT22 clones at the largest budget) and the two main closed
    forms (FMT22 Eq. 2, APES Theorem 4) for each population size in ``ns``; ``spec_budgets(n)`` returns the
    budgets of n users (the same distribution at every size). A closed form outside its validity region is
    inf (a gap). The personalized sum costs seconds per size, so it is evaluated at ``personalized_sizes``
    of the sizes (log-spaced, the first and last included) and is NaN at the others (not drawn)."""
    ns = np.asarray(ns)
    chosen = set(np.unique(np.round(np.linspace(0, ns.size - 1, min(personalized_sizes, ns.size))).astype(int)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # inf outside validity is plotted as a gap
        populations = [spec_budgets(int(n)) for n in ns]
        tops = np.array([float(eps.max()) for eps in populations])
        curves = {  # the clone sums in one call each: the sizes share one compiled program
            _EXACT_CURVES[0]: np.array([personalized.personalized_epsilon(eps, delta, model="gspa")
                                        if i in chosen else np.nan for i, eps in enumerate(populations)]),
            _EXACT_CURVES[1]: clones.clones_epsilon(tops, ns, delta, clones="strong"),
            _EXACT_CURVES[2]: clones.clones_epsilon(tops, ns, delta),
            "FMT22 closed form (UniS, APES Eq. 2)": bounds.fmt22_closed_form(tops, ns, delta),
            "APES Theorem 4 (echo of neighbours)": np.array([bounds.apes_theorem4(eps, delta)[0]
                                                             for eps in populations]),
        }
    return {name: np.asarray(values, dtype=np.float64) for name, values in curves.items()}


def plot_epsilon_versus_n(ns, curves: dict, path: str, title: str) -> str:
    """Central ε against the number of users (log-log), one line per accountant: the exact numeric ones
    solid, the closed forms dashed; the legend below the axes."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7.5, 6.0), layout="constrained")
    ax = fig.add_subplot()
    for name, values in curves.items():
        values = np.asarray(values, dtype=np.float64)
        finite = np.isfinite(values)
        ax.loglog(np.asarray(ns)[finite], values[finite], marker="o", markersize=3, label=name,
                  linestyle="-" if name in _EXACT_CURVES else "--")
    ax.set_xlabel("number of users n")
    ax.set_ylabel("central ε")
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncols=2)
    fig.savefig(path, dpi=120)
    return path


def plot_epsilon_versus_rounds(rounds, composed: dict, path: str, title: str) -> str:
    """Central ε against the number of rounds T (log-log), one line per composition method of
    :func:`jaxpriv.calibrate.shuffle_rounds.rounds_summary` (approximations dashed)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7.5, 5.0), layout="constrained")
    ax = fig.add_subplot()
    for name, row in composed.items():
        values = np.asarray(row["epsilon"], dtype=np.float64)
        finite = np.isfinite(values)
        ax.loglog(np.asarray(rounds)[finite], values[finite], marker="o", markersize=4, label=name,
                  linestyle="--" if row["kind"] == "approximation" else "-")
    ax.set_xlabel("rounds T")
    ax.set_ylabel("central ε (worst-case user)")
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.savefig(path, dpi=120)
    return path


def plot_budgets(local_epsilons, path: str, title: str, per_user=None) -> str:
    """Histogram of the local budgets and, when given, of each user's central ε in a panel of its own
    (the central values are orders of magnitude smaller: one shared axis squeezes them into a sliver)."""
    from matplotlib.figure import Figure

    panels = 1 if per_user is None else 2
    fig = Figure(figsize=(6.0 * panels, 4.5), layout="constrained")
    axes = fig.subplots(1, panels, squeeze=False)[0]
    local = np.asarray(local_epsilons)
    edges = dict(edgecolor="white", linewidth=0.6)  # bin edges visible: a uniform population is not one block
    axes[0].hist(local, bins=40, color="tab:blue", **edges)
    axes[0].set_xlabel("local ε_i")
    axes[0].set_ylabel("users per bin (40 bins)")
    axes[0].set_title(f"local budgets of the n = {local.size:,} users", fontsize=10)
    if per_user is not None:
        values = np.asarray(per_user, dtype=np.float64)
        axes[1].hist(values[np.isfinite(values)], bins=40, color="tab:orange", **edges)
        axes[1].set_xlabel("central ε of each user (exact, GSPA model)")
        axes[1].set_ylabel("users per bin (40 bins)")
        axes[1].set_title("central ε after shuffling", fontsize=10)
    fig.suptitle(title, fontsize=11)
    fig.savefig(path, dpi=120)
    return path
