"""Privacy reports and figures for DP-SGD: the numbers behind ``jaxpriv epsilon``, ``sweep`` and ``report``,
and the learning curve of ``jaxpriv train``.

Everything numeric comes from the public API (:func:`jaxpriv.dpsgd_epsilon`, :mod:`jaxpriv.rdp`,
:mod:`jaxpriv.accounting`, :mod:`jaxpriv.fdp`, :mod:`jaxpriv.calibrate`); this module only arranges it.
Matplotlib is imported inside the plotting functions, and figures are drawn on a bare
:class:`matplotlib.figure.Figure` with the Agg canvas, so importing this module is cheap and the caller's
pyplot backend is never touched.
"""

from __future__ import annotations

import dataclasses
import datetime
import math
import os
import time
from typing import Callable

import numpy as np

from . import __version__, accounting, calibrate, events, fdp, rdp
from .accounting.dpsgd import dpsgd_epsilon, dpsgd_epsilon_conversions

__all__ = [
    "ORDER_SETS",
    "ACCOUNTANTS",
    "DpsgdSetting",
    "EpsilonGrid",
    "privacy_summary",
    "epsilon_grid",
    "plot_epsilon_grid",
    "plot_sigma_vs_epsilon",
    "plot_learning_curve",
    "write_report",
]

#: Named Rényi-order grids selectable from the command line.
ORDER_SETS = {"default": rdp.DEFAULT_ORDERS, "dp_accounting": rdp.DP_ACCOUNTING_ORDERS}

#: Accountants selectable from the command line (see :mod:`jaxpriv.accounting`).
ACCOUNTANTS = accounting.ACCOUNTANTS


# --------------------------------------------------------------------------------------------------
# Numbers
# --------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class DpsgdSetting:
    """A DP-SGD training run: dataset size, batch size, noise multiplier, epochs and δ."""

    n: int = 60_000
    batch_size: int = 256
    sigma: float = 1.1
    epochs: float = 60.0
    delta: float = 1e-5

    @property
    def q(self) -> float:
        return self.batch_size / self.n

    @property
    def steps(self) -> int:
        # epochs / q steps, rounded up: one extra step can only make the reported ε larger (safe side).
        return math.ceil(self.epochs * self.n / self.batch_size)


def _dpsgd_event(q, sigma, steps):
    return events.SelfComposed(events.PoissonSampled(q, events.Gaussian(sigma)), steps)


def _check_accountant(accountant: str) -> None:
    if accountant not in ACCOUNTANTS:
        raise ValueError(f"accountant must be one of {ACCOUNTANTS}, got {accountant!r}")


def privacy_summary(q: float, sigma: float, steps: float, delta: float, orders=None, refine: bool = False,
                    accountant: str = "best") -> dict:
    """ε of T steps of DP-SGD four ways: RDP with the improved and the classic conversion and the PLD
    certified interval [lower, upper] (rigorous bounds), and the CLT Gaussian-DP *approximation* (not a
    bound; shown for comparison). With ``refine`` the improved-conversion ε also searches real orders
    between the grid points.

    Only the accountant asked for is computed: ``"rdp"`` (improved conversion, and the classic one beside
    it), ``"pld"`` (the certified interval) or ``"best"`` (both; the smaller upper bound is reported). The
    entries of an accountant not computed are None. ``"epsilon"`` is the upper bound of ``accountant``.
    The PLD needs an integer T; for a fractional T its entries are None and ``"best"`` reports RDP.
    """
    _check_accountant(accountant)
    orders = rdp.DEFAULT_ORDERS if orders is None else np.asarray(orders, dtype=np.float64)
    eps = order = eps_classic = order_classic = None
    if accountant in ("rdp", "best"):
        # one curve, both conversions, one compiled program (the classic ε through rdp.compose and
        # rdp.to_epsilon was two more programs and a handful of eager operations, bit for bit the same)
        eps, order, eps_classic, order_classic = map(float, dpsgd_epsilon_conversions(
            q, sigma, steps, delta, orders=orders, refine=refine))
    mu = float(fdp.dpsgd_mu_clt(q, sigma, steps))
    # μ = 0 (q = 0 or T = 0) is perfect privacy, ε = 0; gdp_epsilon itself only accepts 0 < μ < inf. A σ so
    # small that the CLT's μ overflows has no finite approximation (the bounds above are still computed).
    eps_clt = 0.0 if mu == 0 else math.inf if math.isinf(mu) else float(fdp.gdp_epsilon(mu, delta))
    pld_lower = pld_upper = None
    if accountant in ("pld", "best") and float(steps).is_integer():
        pld_lower, pld_upper = map(float, accounting.epsilon_interval(_dpsgd_event(q, sigma, steps), delta))
    elif accountant == "pld":
        raise ValueError(f"the PLD accountant needs an integer number of steps T, got {steps!r}")
    if accountant == "best":
        reported = eps if pld_upper is None else min(eps, pld_upper)
    else:
        reported = eps if accountant == "rdp" else pld_upper
    return {
        "q": float(q),
        "sigma": float(sigma),
        "steps": float(steps),
        "delta": float(delta),
        "accountant": accountant,
        "epsilon": reported,
        "epsilon_rdp": eps,
        "best_order": order,
        "epsilon_classic": eps_classic,
        "best_order_classic": order_classic,
        "epsilon_pld_lower": pld_lower,
        "epsilon_pld_upper": pld_upper,
        "gdp_clt_mu_approximation": mu,
        "epsilon_gdp_clt_approximation": eps_clt,
    }


@dataclasses.dataclass
class EpsilonGrid:
    """ε of DP-SGD on the full grid q × σ × T × δ: arrays of shape (len(q), len(sigma), len(steps),
    len(delta)), plus the wall time of the evaluation (compilation included) and the accountant used.
    ``best_order`` is the Rényi order of the RDP bound, NaN where the PLD bound is the one reported."""

    q: np.ndarray
    sigma: np.ndarray
    steps: np.ndarray
    delta: np.ndarray
    epsilon: np.ndarray
    best_order: np.ndarray
    seconds: float
    accountant: str = "rdp"

    @property
    def size(self) -> int:
        return int(self.epsilon.size)

    def rows(self) -> list[dict]:
        """One record per configuration (q varies slowest), as written to CSV and JSON."""
        axes = np.meshgrid(self.q, self.sigma, self.steps, self.delta, indexing="ij")
        columns = [a.ravel() for a in axes] + [self.epsilon.ravel(), self.best_order.ravel()]
        names = ("q", "sigma", "steps", "delta", "epsilon", "best_order")
        return [dict(zip(names, map(float, values))) for values in zip(*columns)]


def epsilon_grid(q, sigma, steps, delta, *, orders=None, chunk_size=None, accountant="rdp") -> EpsilonGrid:
    """ε of DP-SGD on every combination of the four 1-D axes, by ``accountant``: ``"rdp"`` (default:
    :func:`jaxpriv.dpsgd_epsilon`, thousands of settings per second), ``"pld"``
    (:func:`jaxpriv.accounting.epsilon`: tighter, but about a second per setting on a CPU) or ``"best"``
    (the smaller of the two upper bounds).

    Large grids are chunked by the library; its progress bar appears when there is more than one chunk.
    """
    _check_accountant(accountant)
    axes = [np.atleast_1d(np.asarray(a, dtype=np.float64)) for a in (q, sigma, steps, delta)]
    # Each axis on its own dimension, so broadcasting forms the full grid without materialising it here.
    shaped = [a.reshape([-1 if i == k else 1 for i in range(4)]) for k, a in enumerate(axes)]
    start = time.perf_counter()
    if accountant == "pld":
        order = np.full(np.broadcast_shapes(*(a.shape for a in shaped)), np.nan)
    else:
        eps, order = dpsgd_epsilon(*shaped, orders=orders, return_order=True, chunk_size=chunk_size)
        eps, order = np.asarray(eps), np.asarray(order)
    if accountant != "rdp":
        pld = accounting.epsilon(_dpsgd_event(*shaped[:3]), shaped[3], accountant="pld", chunk_size=chunk_size)
        if accountant == "pld":
            eps = pld
        else:
            eps, order = np.minimum(eps, pld), np.where(eps <= pld, order, np.nan)
    return EpsilonGrid(*axes, epsilon=eps, best_order=order, seconds=time.perf_counter() - start,
                       accountant=accountant)


# --------------------------------------------------------------------------------------------------
# Figures
# --------------------------------------------------------------------------------------------------


def _cell_edges(x: np.ndarray, log: bool) -> np.ndarray:
    """Edges of the cells centred on the grid points (geometric midpoints on a log axis)."""
    t = np.log(x) if log else np.asarray(x, dtype=np.float64)
    if t.size == 1:  # a single row or column: a cell of unit width (in log units on a log axis)
        edges = t[0] + np.array([-0.5, 0.5])
    else:
        mid = (t[1:] + t[:-1]) / 2
        edges = np.concatenate([[2 * t[0] - mid[0]], mid, [2 * t[-1] - mid[-1]]])
    return np.exp(edges) if log else edges


def plot_epsilon_grid(q, sigma, eps, path, title: str, mark=None,
                      label: str = "ε (RDP accountant, improved conversion)") -> str:
    """Heatmap of ε over (q, σ) with a log-scaled q axis, a log colour scale and labelled ε contours.

    Args:
      q: 1-D sampling rates (> 0), length Nq.
      sigma: 1-D noise multipliers, length Nσ.
      eps: ε array of shape (Nq, Nσ).
      path: output file (the format follows the extension, e.g. ``.png``).
      title: figure title.
      mark: optional (q, σ, label) point to highlight, e.g. the current training setting.
      label: colour bar label (name the accountant).

    Returns:
      ``path``.
    """
    from matplotlib.colors import LogNorm
    from matplotlib.figure import Figure

    q, sigma = np.asarray(q, dtype=np.float64), np.asarray(sigma, dtype=np.float64)
    eps = np.asarray(eps, dtype=np.float64).reshape(q.size, sigma.size)
    shown = np.ma.masked_where(~np.isfinite(eps) | (eps <= 0), eps).T  # a log scale cannot show 0 or inf
    fig = Figure(figsize=(7.5, 5.5), layout="constrained")
    ax = fig.add_subplot()
    vmin = shown.min() if shown.count() else 1e-3
    vmax = shown.max() if shown.count() else 1.0
    norm = LogNorm(vmin=vmin, vmax=max(vmax, vmin * 1.01))
    mesh = ax.pcolormesh(_cell_edges(q, log=True), _cell_edges(sigma, log=False), shown, norm=norm,
                         cmap="viridis_r")
    ax.set_xscale("log")
    cbar = fig.colorbar(mesh, ax=ax)
    cbar.set_label(label)
    # Contours at round budgets that fall inside the plotted range, labelled on the lines.
    levels = [lv for lv in (0.25, 0.5, 1, 2, 4, 8, 16, 32, 64, 128) if vmin < lv < vmax]
    if len(levels) and min(q.size, sigma.size) >= 2:
        lines = ax.contour(q, sigma, shown, levels=levels, colors="white", linewidths=1.0)
        ax.clabel(lines, fmt=lambda v: f"ε={v:g}", fontsize=8)
    if mark is not None:
        ax.plot([mark[0]], [mark[1]], marker="*", markersize=14, color="red", linestyle="none", label=mark[2])
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.12))  # below: the heatmap fills the axes
    ax.set_xlabel("sampling rate q (log scale)")
    ax.set_ylabel("noise multiplier σ")
    ax.set_title(title)
    fig.savefig(path, dpi=120)
    return str(path)


def plot_sigma_vs_epsilon(targets, rates, sigmas, path, title: str, mark=None) -> str:
    """σ needed to meet each target ε, one line per sampling rate.

    Args:
      targets: 1-D target ε values, length E.
      rates: 1-D sampling rates, length R (one line each).
      sigmas: calibrated σ, shape (R, E) (inf where a target is unattainable; not drawn).
      path: output file.
      title: figure title.
      mark: optional (ε, σ, label) point to highlight, e.g. the current training setting.
    """
    from matplotlib.figure import Figure

    sigmas = np.asarray(sigmas, dtype=np.float64)
    fig = Figure(figsize=(7.0, 5.0), layout="constrained")
    ax = fig.add_subplot()
    order = np.argsort(np.asarray(rates, dtype=np.float64), kind="stable")  # the legend reads from the smallest q
    for rate, row in zip(np.asarray(rates)[order], sigmas[order]):
        finite = np.isfinite(row)
        ax.plot(np.asarray(targets)[finite], row[finite], marker="o", markersize=3, label=f"q = {rate:.4g}")
    if mark is not None:
        ax.plot([mark[0]], [mark[1]], marker="*", markersize=14, color="black", linestyle="none", label=mark[2])
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("target ε")
    ax.set_ylabel("noise multiplier σ needed")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    ax.set_title(title)
    fig.savefig(path, dpi=120)
    return str(path)


# --------------------------------------------------------------------------------------------------
# The report
# --------------------------------------------------------------------------------------------------

#: Budgets whose σ the report tabulates, and the budget whose affordable training length it states.
REPORT_TARGETS = (1.0, 2.0, 4.0, 8.0)
REPORT_STEPS_TARGET = 3.0


def _sigma_curves(setting: DpsgdSetting, quick: bool):
    """σ for a range of target ε at a few sampling rates (the setting's q first), at the setting's T, δ.

    The tabulated targets are part of the range, so one batched calibration serves the table and the
    figure (each batch shape is a separate compilation of the solver).
    """
    rates = np.array([setting.q, 1e-3, 1e-2, 5e-2])
    span = np.geomspace(0.5, 16, 6 if quick else 20)
    targets = np.unique(np.round(np.concatenate([span, REPORT_TARGETS]), 10))  # 0.99999… and 1 are one
    sigmas = calibrate.noise_multiplier(targets[None, :], rates[:, None], setting.steps, setting.delta)
    return targets, rates, np.asarray(sigmas)


def _markdown_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows])


def _render(setting: DpsgdSetting, summary: dict, calibrated: list, affordable: int, grid: EpsilonGrid,
            curves: tuple, quick: bool) -> str:
    """The text of report.md."""
    s = summary
    eps = grid.epsilon[np.isfinite(grid.epsilon)]
    targets, rates, _ = curves
    guarantee = _markdown_table(["quantity", "value", "note"], [
        ["ε, RDP accountant (improved conversion)", f"{s['epsilon_rdp']:.6g}",
         f"rigorous bound; best order α = {s['best_order']:g}"],
        ["ε, RDP accountant (classic conversion)", f"{s['epsilon_classic']:.6g}",
         f"rigorous, looser; best order α = {s['best_order_classic']:g}"],
        ["ε, PLD accountant", f"[{s['epsilon_pld_lower']:.6g}, {s['epsilon_pld_upper']:.6g}]",
         "certified interval: the true ε lies in it; the upper end is a rigorous bound"],
        ["ε, Gaussian DP via the CLT", f"{s['epsilon_gdp_clt_approximation']:.6g}",
         f"*approximation, not a bound* (μ ≈ {s['gdp_clt_mu_approximation']:.6g})"],
    ])
    noise = _markdown_table(["target ε", "σ needed", "achieved ε"],
                            [[f"{t:g}", f"{sg:.6g}", f"{a:.6g}"] for t, sg, a in calibrated])
    when = datetime.datetime.now().isoformat(timespec="seconds")
    return f"""# jaxpriv privacy report

Generated by jaxpriv {__version__} on {when} ({"quick" if quick else "full"} mode).

## Setting

DP-SGD with Poisson sampling: n = {setting.n:,} examples, expected batch size {setting.batch_size}
(q = {setting.q:.6g}), noise multiplier σ = {setting.sigma:g}, {setting.epochs:g} epochs
(T = ⌈epochs / q⌉ = {setting.steps:,} steps), δ = {setting.delta:g}. Rényi orders: jaxpriv's default
grid ({rdp.DEFAULT_ORDERS.size} orders, a superset of dp_accounting's).

## Privacy guarantee

{guarantee}

The reported ε is **{s['epsilon']:.6g}**, the smaller of the two rigorous upper bounds (RDP and PLD). The
calibration, training length and sweep below use the RDP accountant (fast for whole grids; PLD per setting:
`jaxpriv calibrate/sweep --accountant pld`).

## Noise needed for a target ε

σ calibrated for the same q, T and δ (conservatively: the solver keeps ε ≤ target); the achieved ε is
recomputed from σ with the RDP accountant.

{noise}

## Training length affordable at ε = {REPORT_STEPS_TARGET:g}

At σ = {setting.sigma:g} and q = {setting.q:.6g}: at most **{affordable:,} steps**
({affordable * setting.q:.4g} epochs).

## ε over sampling rate and noise

T = {setting.steps:,} steps, δ = {setting.delta:g}, {grid.q.size} × {grid.sigma.size} grid (q from {grid.q[0]:g}
to {grid.q[-1]:g}, log-spaced; σ from {grid.sigma[0]:g} to {grid.sigma[-1]:g}): ε from {eps.min():.4g} to
{eps.max():.4g}, median {np.median(eps):.4g}. {grid.size:,} configurations in {grid.seconds:.2f} s
(compilation included).

![ε over (q, σ)](epsilon_grid.png)

## Noise needed versus target ε

T = {setting.steps:,} steps, δ = {setting.delta:g}, target ε from {targets[0]:g} to {targets[-1]:g},
q ∈ {{{", ".join(f"{r:.4g}" for r in sorted(rates))}}}. σ is calibrated by the RDP accountant, so the star marks
this setting at its RDP ε; the headline above is the tighter PLD ε.

![σ needed vs target ε](sigma_vs_epsilon.png)
"""


def write_report(out_dir, *, quick: bool = False, setting: DpsgdSetting | None = None,
                 status: Callable[[str], None] = lambda message: None) -> dict:
    """Compute the privacy report of a DP-SGD setting and write report.md and two figures to ``out_dir``.

    Args:
      out_dir: output directory (created if needed).
      quick: a 10×12 sweep and a coarse σ-vs-ε curve instead of 25×40 and a fine one.
      setting: the training run (default: MNIST-sized, q = 256/60000, σ = 1.1, 60 epochs, δ = 1e-5).
      status: called with a short message before each stage (e.g. to update a spinner).

    Returns:
      ``{"report": path, "epsilon_grid": path, "sigma_vs_epsilon": path, "summary": privacy_summary}``.
    """
    setting = setting or DpsgdSetting()
    os.makedirs(out_dir, exist_ok=True)
    paths = {name: os.path.join(out_dir, name + ext) for name, ext in
             (("report", ".md"), ("epsilon_grid", ".png"), ("sigma_vs_epsilon", ".png"))}

    status("ε of the setting (RDP, PLD interval, CLT)")  # one PLD evaluation: seconds, not a sweep
    summary = privacy_summary(setting.q, setting.sigma, setting.steps, setting.delta, accountant="best")

    status("calibrating σ against target ε")
    curves = targets, rates, sigmas = _sigma_curves(setting, quick)
    tabulated = sigmas[0, np.searchsorted(targets, REPORT_TARGETS)]
    achieved = np.asarray(dpsgd_epsilon(setting.q, tabulated, setting.steps, setting.delta))
    calibrated = list(zip(REPORT_TARGETS, tabulated, achieved))

    status(f"steps affordable at ε = {REPORT_STEPS_TARGET:g}")
    affordable = int(calibrate.steps(REPORT_STEPS_TARGET, setting.q, setting.sigma, setting.delta))

    status("ε sweep over (q, σ)")
    nq, ns = (10, 12) if quick else (25, 40)
    grid = epsilon_grid(np.geomspace(1e-3, 0.1, nq), np.linspace(0.6, 3.0, ns), setting.steps, setting.delta)

    status("drawing figures")
    here = f"this setting (RDP ε = {summary['epsilon_rdp']:.3g})"
    plot_epsilon_grid(grid.q, grid.sigma, grid.epsilon[:, :, 0, 0], paths["epsilon_grid"],
                      f"DP-SGD ε after T = {setting.steps:,} steps, δ = {setting.delta:g}",
                      mark=(setting.q, setting.sigma, here))
    plot_sigma_vs_epsilon(targets, rates, sigmas, paths["sigma_vs_epsilon"],
                          f"σ needed for (ε, δ = {setting.delta:g}) after T = {setting.steps:,} steps",
                          mark=(summary["epsilon_rdp"], setting.sigma,
                                f"this setting, σ = {setting.sigma:g}: at its RDP ε\n"
                                f"(the curves' accountant; PLD ε ≤ {summary['epsilon_pld_upper']:.3g})"))

    with open(paths["report"], "w", encoding="utf-8") as f:
        f.write(_render(setting, summary, calibrated, affordable, grid, curves, quick))
    return {**paths, "summary": summary}


def plot_learning_curve(history, path: str, title: str = "DP-SGD") -> str:
    """Learning curve of a run: test accuracy (left axis) and spent ε (right axis) after each epoch.

    Drawn on a bare :class:`matplotlib.figure.Figure` (Agg canvas): the caller's pyplot backend is never
    touched.

    Args:
      history: :class:`EpochRecord` list (``TrainResult.history``), non-empty.
      path: output file; the format follows the extension (``.png``, ``.pdf``, ``.svg``).
      title: figure title.

    Returns:
      ``path``.

    Example:
      >>> import os, tempfile
      >>> from jaxpriv.report import plot_learning_curve
      >>> from jaxpriv.train.dpsgd import EpochRecord
      >>> h = [EpochRecord(1, 10, 0.8, 0.6, 1.2, 0.1), EpochRecord(2, 20, 0.9, 0.4, 1.9, 0.2)]
      >>> path = plot_learning_curve(h, os.path.join(tempfile.mkdtemp(), "curve.png"))
      >>> os.path.getsize(path) > 0
      True
    """
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    if not history:
        raise ValueError("history is empty: nothing to plot (the run took no epoch)")
    epochs = [r.epoch for r in history]
    fig = Figure(figsize=(7.0, 4.5), layout="constrained")
    ax = fig.add_subplot()
    ax.plot(epochs, [r.test_accuracy for r in history], marker="o", color="tab:blue", label="test accuracy")
    ax.set_xlabel("epoch")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel("test accuracy", color="tab:blue")
    ax.set_ylim(0.0, 1.0)
    ax.grid(alpha=0.3)
    eps_ax = ax.twinx()
    eps_ax.plot(epochs, [r.epsilon for r in history], marker="s", color="tab:red", label="ε spent")
    eps_ax.set_ylabel("ε spent (RDP accountant)", color="tab:red")
    eps_ax.set_ylim(bottom=0.0)
    ax.set_title(title)
    fig.savefig(path, dpi=120)
    return path
