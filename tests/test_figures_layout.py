"""Every figure-producing function, drawn at its saved size from small precomputed inputs shaped like the
real runs' (``jaxpriv reproduce --quick``, ``jaxpriv shuffle --out``, ``jaxpriv report``, ``jaxpriv train
--plot``): titles, axis labels, tick labels and legends lie inside the canvas, and no legend covers
plotted data (line samples, bars, histogram bins, shaded spans, heatmap cells, error bars) of any axes.

The figures are captured at ``Figure.savefig`` (each function builds a bare ``matplotlib.figure.Figure``
and saves it), then drawn on an Agg canvas and measured in display coordinates."""

import math
import types

import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from jaxpriv import report
from jaxpriv.federated import rpdp_accounting as acct
from jaxpriv.calibrate import shuffle_summary as summary
from jaxpriv.report import plot_learning_curve
from jaxpriv.reproduce import apes, gspa, rpdp, udpfl
from jaxpriv.train.dpsgd import EpochRecord

_SLACK = 1.0  # display pixels of tolerance at the canvas edge and legend frame


@pytest.fixture
def saved(monkeypatch, tmp_path):
    """Calls ``draw(path)`` with a fresh path and returns the figure it saved (exactly one)."""
    figures = []
    original = Figure.savefig

    def capture(self, *args, **kwargs):
        figures.append(self)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", capture)

    def run(draw, name="figure.png"):
        path = str(tmp_path / name)
        assert draw(path) == path
        assert len(figures) == 1, f"expected one saved figure, got {len(figures)}"
        fig = figures.pop()
        FigureCanvasAgg(fig)
        fig.canvas.draw()
        return fig

    return run


# --------------------------------------------------------------------------------------------------
# the layout checks
# --------------------------------------------------------------------------------------------------


def _texts(fig):
    """(description, text artist) of every title and axis label (colour bars are axes too); the tick
    labels that are drawn are inside each axes' tight bounding box, checked apart."""
    if fig._suptitle is not None:
        yield "suptitle", fig._suptitle
    for i, ax in enumerate(fig.axes):
        for name in ("title", "_left_title", "_right_title"):
            yield f"axes {i} {name}", getattr(ax, name)
        yield f"axes {i} x label", ax.xaxis.label
        yield f"axes {i} y label", ax.yaxis.label


def _legends(fig):
    out = [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None]
    return out + list(fig.legends)


def _inside(box, frame) -> bool:
    return (box.x0 >= frame.x0 - _SLACK and box.y0 >= frame.y0 - _SLACK and box.x1 <= frame.x1 + _SLACK
            and box.y1 <= frame.y1 + _SLACK)


def _overlaps(box, other) -> bool:
    """Interiors intersect (touching frames do not count)."""
    return (min(box.x1, other.x1) - max(box.x0, other.x0) > _SLACK
            and min(box.y1, other.y1) - max(box.y0, other.y0) > _SLACK)


def _samples(path, transform, per_segment: int = 25):
    """Display points along an open path: its vertices and points on every segment between them."""
    pts = transform.transform(path.vertices)
    pts = pts[np.all(np.isfinite(pts), axis=1)]
    if len(pts) < 2:
        return pts
    t = np.linspace(0.0, 1.0, per_segment)[:, None, None]
    return (pts[:-1][None] * (1 - t) + pts[1:][None] * t).reshape(-1, 2)


def _data_in(ax, renderer):
    """What an axes plots, in display coordinates: ``("points", array)`` for lines and open paths,
    ``("box", Bbox)`` for filled areas (bars, bins, spans, cells, markers)."""
    for line in ax.get_lines():
        if not line.get_visible() or len(line.get_xdata()) == 0:
            continue
        if line.get_linestyle() in ("None", "none", "", " "):  # markers only: each marker's extent
            pts = line.get_transform().transform(np.column_stack([line.get_xdata(), line.get_ydata()]))
            size = line.get_markersize() * line.figure.dpi / 72 / 2
            for x, y in pts[np.all(np.isfinite(pts), axis=1)]:
                yield "box", types.SimpleNamespace(x0=x - size, x1=x + size, y0=y - size, y1=y + size)
        else:
            yield "points", _samples(line.get_path(), line.get_transform())
    for patch in ax.patches:
        if patch.get_visible():
            yield "box", patch.get_window_extent(renderer)
    for coll in ax.collections:
        if not coll.get_visible():
            continue
        transform = coll.get_transform()
        for path in coll.get_paths():
            closed = path.codes is not None and path.codes[-1] == path.CLOSEPOLY or len(path.vertices) > 2 and \
                np.allclose(path.vertices[0], path.vertices[-1])
            if closed or type(coll).__name__ in ("QuadMesh", "PolyCollection", "FillBetweenPolyCollection"):
                yield "box", path.get_extents(transform)
            else:
                yield "points", _samples(path, transform)
    for image in ax.images:
        yield "box", image.get_window_extent(renderer)


def check_layout(fig):
    renderer = fig.canvas.get_renderer()
    frame = fig.bbox
    problems = []
    for what, text in _texts(fig):
        if text.get_visible() and text.get_text().strip():
            box = text.get_window_extent(renderer)
            if not _inside(box, frame):
                problems.append(f"{what} {text.get_text()!r} leaves the canvas: {box} not in {frame}")
    for i, ax in enumerate(fig.axes):  # everything an axes draws: tick labels, titles, labels, its legend
        box = ax.get_tightbbox(renderer)
        if box is not None and not _inside(box, frame):
            problems.append(f"axes {i} (tick labels, titles or legend) leaves the canvas: {box} not in {frame}")
    legends = _legends(fig)
    for legend in legends:
        box = legend.get_window_extent(renderer)
        if not _inside(box, frame):
            problems.append(f"legend {[t.get_text() for t in legend.get_texts()]} leaves the canvas")
        for i, ax in enumerate(fig.axes):
            for kind, data in _data_in(ax, renderer):
                if kind == "points":
                    inner = ((data[:, 0] > box.x0 + _SLACK) & (data[:, 0] < box.x1 - _SLACK)
                             & (data[:, 1] > box.y0 + _SLACK) & (data[:, 1] < box.y1 - _SLACK))
                    hit = bool(inner.any())
                else:
                    hit = _overlaps(data, box)
                if hit:
                    problems.append(f"legend {[t.get_text() for t in legend.get_texts()]} covers data of axes {i}")
                    break
    assert not problems, "\n".join(problems)
    return fig


def _titles(fig):
    return [t for _, t in _texts(fig) if t.get_text().strip()]


# --------------------------------------------------------------------------------------------------
# the figures (inputs shaped like the real runs')
# --------------------------------------------------------------------------------------------------


def test_the_checks_catch_a_legend_over_data_and_a_cut_title(saved):
    """The checks are not vacuous: a legend on top of a line and a title wider than the canvas fail."""

    def bad(path):
        fig = Figure(figsize=(4, 3))
        ax = fig.add_subplot()
        ax.plot([0, 1], [0, 1], label="a line through the middle")
        ax.legend(loc="center")
        ax.set_title("a title far too long to fit into a figure of four inches, so it runs off both edges")
        fig.savefig(path)
        return path

    with pytest.raises(AssertionError, match="leaves the canvas") as err:
        check_layout(saved(bad))
    assert "covers data" in str(err.value)


def test_the_checks_catch_a_legend_over_bars(saved):
    """rPDP-FL's former accuracy figure: the legend in the lower right corner, over the bars."""

    def former(path):
        fig = Figure(figsize=(6.2, 4), layout="constrained")
        ax = fig.add_subplot()
        for j, height in enumerate((0.76, 0.61, 0.33, 0.44, 0.94)):
            ax.bar(np.arange(2) + (j - 2) * 0.16, [height, height], 0.16, yerr=[0.02, 0.02], label=f"method {j}")
        ax.set_ylim(0, 1)
        ax.legend(fontsize=7, loc="lower right")
        fig.savefig(path)
        return path

    with pytest.raises(AssertionError, match="covers data"):
        check_layout(saved(former))


def test_report_epsilon_grid(saved):
    q, sigma = np.geomspace(1e-3, 0.1, 9), np.linspace(0.5, 3.0, 12)
    eps = 50 * q[:, None] * np.sqrt(14_063 * 1e-3) / sigma[None, :] ** 1.5  # ε grows with q, falls with σ
    fig = check_layout(saved(lambda p: report.plot_epsilon_grid(
        q, sigma, eps, p, "DP-SGD ε after T = 14,063 steps, δ = 1e-05", mark=(0.004267, 1.1, "this setting (RDP ε = 2.6)"))))
    assert _legends(fig)


def test_report_sigma_vs_epsilon(saved):
    targets = np.array([0.5, 1, 2, 4, 8, 16])
    rates = [0.004267, 0.001, 0.01, 0.05]
    sigmas = np.array([[4.0, 2.2, 1.3, 0.88, 0.68, 0.55], [1.27, 0.93, 0.71, 0.58, 0.48, 0.41],
                       [9.1, 4.8, 2.65, 1.55, 1.0, 0.74], [45, 24, 12.7, 6.9, 3.85, 2.27]])
    fig = check_layout(saved(lambda p: report.plot_sigma_vs_epsilon(
        targets, rates, sigmas, p, "σ needed for (ε, δ = 1e-05) after T = 14,063 steps", mark=(2.6, 1.1, "this setting (σ = 1.1)"))))
    # the legend reads in order of q, whatever order the rates came in (issue 34: it followed the input)
    labels = [t.get_text() for t in _legends(fig)[0].get_texts()]
    assert labels == ["q = 0.001", "q = 0.004267", "q = 0.01", "q = 0.05", "this setting (σ = 1.1)"]


def test_shuffle_epsilon_versus_n(saved):
    ns = np.unique(np.geomspace(100, 100_000, 12).astype(int))
    base = 0.53 * (ns / 100.0) ** -0.52
    curves = {"personalized, GSPA model, exact numeric": np.where(np.arange(ns.size) % 2 == 0, base, np.nan),
              "strong clones, exact numeric, ε₀ = max": 1.2 * base, "clones (FMT22), exact numeric, ε₀ = max": 1.4 * base,
              "FMT22 closed form (UniS, APES Eq. 2)": np.where(ns > 1000, 4 * base, np.inf),
              "APES Theorem 4 (echo of neighbours)": np.where(ns > 600, 3.4 * base, np.inf)}
    fig = check_layout(saved(lambda p: summary.plot_epsilon_versus_n(ns, curves, p, "central ε vs n, budgets "
                                                                    "uniform:0.05,1, δ = 1e-08")))
    labels = [t.get_text() for t in _legends(fig)[0].get_texts()]
    assert "personalized, GSPA model, exact numeric" in labels and "strong clones, exact numeric, ε₀ = max" in labels


def test_shuffle_epsilon_versus_n_has_the_summary_tables_tightest_rows():
    """epsilon_versus_n's curves include the exact accountants of shuffle_summary's table, named alike, and
    the personalized (GSPA-model) curve lies below every other exact curve where it is evaluated."""
    from jaxpriv.shuffle.budgets import budgets

    curves = summary.epsilon_versus_n(lambda n: budgets("uniform:0.05,1", n), [200, 400], 1e-6)
    rows = {r["name"] for r in summary.shuffle_summary(budgets("uniform:0.05,1", 200), 1e-6)}
    assert {"personalized, GSPA model, exact numeric", "strong clones, exact numeric, ε₀ = max",
            "clones (FMT22), exact numeric, ε₀ = max"} <= set(curves) & rows
    tight = curves["personalized, GSPA model, exact numeric"]
    assert np.isfinite(tight).all()
    for name in ("strong clones, exact numeric, ε₀ = max", "clones (FMT22), exact numeric, ε₀ = max"):
        assert (tight <= curves[name]).all()


def test_shuffle_epsilon_versus_rounds(saved):
    rounds = [1, 10, 100, 1000]
    composed = {"exact pair by PLD, GSPA": {"epsilon": [0.0475, 0.159, 0.529, 1.78], "kind": "bound"},
                "exact pair by PLD, APES": {"epsilon": [0.0572, 0.191, 0.637, 2.15], "kind": "bound"},
                "Girgis RDP, ε₀ = max": {"epsilon": [0.271, 1.44, 5.40, 18.4], "kind": "bound"},
                "S-APES Prop. 1": {"epsilon": [0.539, 1.92, 7.30, 33.2], "kind": "bound"},
                "GSPA √(bT)·μ": {"epsilon": [0.107, 0.356, 1.19, 4.09], "kind": "approximation"}}
    check_layout(saved(lambda p: summary.plot_epsilon_versus_rounds(
        rounds, composed, p, "APES Table 3 setting (n = 10⁴, Uniform2, δ = 1e-8): central ε vs rounds")))


def test_shuffle_budgets_gives_the_central_epsilons_their_own_axis(saved):
    local = np.linspace(0.05, 1.0, 10_000)
    central = 0.002 + 0.045 * local  # two orders of magnitude below the local budgets
    fig = check_layout(saved(lambda p: summary.plot_budgets(local, p, "local budgets (uniform:0.05,1)",
                                                            per_user=central)))
    assert len(fig.axes) == 2
    lo, hi = fig.axes[1].get_xlim()
    assert hi - lo < 0.1  # the central ε fill their own axis, not a sliver of the local one
    for ax in fig.axes:  # bin edges drawn: 40 bars of a uniform population are not one solid block
        assert len(ax.patches) == 40
        assert all(bar.get_linewidth() > 0 and bar.get_edgecolor()[3] > 0 for bar in ax.patches)
    assert "n = 10,000 users" in fig.axes[0].get_title()
    check_layout(saved(lambda p: summary.plot_budgets(local, p, "local budgets"), "alone.png"))


def test_apes_accuracy(saved):
    rounds = 15
    x = np.arange(1, rounds + 1)
    curves = {"Non-Private": 0.91 - 0.2 * np.exp(-x / 2), "LDP-Min": 0.18 + 0.02 * x, "PLDP / UniS": 0.84 - 0.65 * np.exp(-x / 3),
              "APES": 0.87 - 0.7 * np.exp(-x / 3), "S-APES": 0.72 * (1 - np.exp(-x / 8)) + 0.1}
    check_layout(saved(lambda p: apes.plot_accuracy(curves, p, "APES on digits: 200 clients, Uniform2 ε, C = 0.05, 1 seed(s)")))


def test_gspa_bounds(saved):
    ns = [100, 1000, 10_000]
    table = [{"n": 100, "gspa_mu_eps": 0.976, "exact_clone": 0.214, "fmt22_exact": 0.241, "fmt22_closed": math.inf,
              "erlingsson19": math.inf},
             {"n": 1000, "gspa_mu_eps": 0.283, "exact_clone": 0.0627, "fmt22_exact": 0.0705, "fmt22_closed": 0.273,
              "erlingsson19": 0.705},
             {"n": 10_000, "gspa_mu_eps": 0.0825, "exact_clone": 0.0181, "fmt22_exact": 0.0204, "fmt22_closed": 0.0939,
              "erlingsson19": 0.223}]
    tv = [(50, 0.0206, 0.0665), (100, 0.0108, 0.0475), (1000, 0.00112, 0.0163), (3000, 0.000374, 0.0095)]
    check_layout(saved(lambda p: gspa.plot_bounds(ns, table, tv, p)))


@pytest.mark.parametrize("sweeps", [("f_c", "eps_c"), ("f_c", "eps_c", "n")])
def test_gspa_estimation(saved, sweeps):
    values = {"f_c": (0.01, 0.25, 0.5), "eps_c": (0.05, 0.1, 0.5), "n": (100, 300, 1000, 1797)}
    rows = []
    for sweep in sweeps:
        for v in values[sweep]:
            scale = v if sweep == "f_c" else (0.1 / v) ** 2 if sweep == "eps_c" else 1000 / v
            row = {"sweep": sweep, "f_c": v if sweep == "f_c" else 0.54, "eps_c": v if sweep == "eps_c" else 0.1,
                   "n": v if sweep == "n" else 1797}
            for task, base in (("mean", 0.1), ("freq", 0.005)):
                exact = [base * scale, base * 2.0, base * 0.2 * (1 + scale)]
                row[f"{task}_mse_exact"] = exact
                row[f"{task}_mse"] = [e * 1.05 for e in exact]
            rows.append(row)
    fig = check_layout(saved(lambda p: gspa.plot_estimation(rows, p, "GSPA Alg. 1-2 on digits (n = 1797 unless swept): "
                                                                     "lines exact MSE, dots 1000 trials")))
    assert len(fig.axes) == 2 * len(sweeps) and fig.legends
    titles = [ax.get_title() for ax in fig.axes]
    assert "ε_C = 0.1" in titles[0] and "f_c = 0.54" in titles[1]  # what each sweep holds fixed
    assert all(not any(t.get_text() for t in ax.get_yticklabels(minor=True)) for ax in fig.axes)


def _fit(q, a, b, c, r2):
    model = acct.scf_model(q, a, b, c)
    return types.SimpleNamespace(q_grid=q, epsilon_grid=model * 1.02, a=a, b=b, c=c, r2=r2)


def test_rpdp_scf_vs_exact(saved):
    """With budgets no q > 0 can serve (q = 0: drawn apart and named) and budgets above ε(q = 1) (shaded)."""
    q = np.unique(np.concatenate([np.arange(1, 100) * 1e-3, np.arange(1, 101) * 1e-2]))
    exact_grid = 6.24 * q ** 0.8 + 0.002
    budgets = np.geomspace(0.1, 10, 40)
    scf_q = np.clip((budgets / 7.0) ** 1.2, 0, 1)
    exact_q = np.where(budgets < 0.15, 0.0, np.clip((budgets / 6.24) ** 1.25, 0, 1))
    out = {"q_grid": q, "exact_grid": exact_grid, "budgets": budgets,
           "fits": {"classic": _fit(q, 4.1, -1.5, -0.2, 0.99999), "improved": _fit(q, 3.9, -1.7, -0.25, 0.99997)},
           "scf_rates": {"classic": scf_q * 0.8, "improved": scf_q},
           "overspend": {"classic": -0.4 + 0.3 * np.log10(budgets / 0.1) / 2,
                         "improved": 0.1 - 0.05 * np.log10(budgets / 0.1)},
           "exact_rates": exact_q, "exact_overspend": np.where(exact_q == 0, -1.0, np.minimum(0, 6.24 / budgets - 1)),
           "setting": {"sigma": 6.0, "steps": 10, "delta": 1e-4, "rounds": 8, "client_rate": 0.8}}
    fig = check_layout(saved(lambda p: rpdp.plot_scf(out, p)))
    labels = [t.get_text() for t in fig.axes[1].get_legend().get_texts()]
    assert any(label.startswith("q = 0") for label in labels) and any("unspendable" in label for label in labels)
    # every left-panel curve stays visible where they coincide: the exact one underneath, the simulated ones
    # marked on alternate points, no two curves drawn alike
    lines = {line.get_label(): line for line in fig.axes[0].get_lines()}
    exact = lines["exact accountant (improved)"]
    assert len(lines) == 5 and all(exact.get_zorder() < line.get_zorder() for line in lines.values() if line is not exact)
    simulated = [line for label, line in lines.items() if label.startswith("simulated")]
    assert len({line.get_marker() for line in simulated}) == 2 and "None" not in {l.get_marker() for l in simulated}
    looks = {(line.get_linestyle(), line.get_marker(), line.get_color(), line.get_linewidth()) for line in lines.values()}
    assert len(looks) == 5


def test_rpdp_scf_vs_exact_never_draws_a_line_through_budgets_that_spend_nothing(saved):
    """The real setting's shape (scf_comparison() at its defaults): the exact ε*(q) is 0 up to q ≈ 1.52e-4,
    where the total-variation bound stops certifying (0, δ), and jumps to 0.194 there, so the exact inverse
    gives the budgets below 0.194 that q > 0 and they spend none of themselves (−100%), while the classic
    SCF fit leaves some budgets out (q = 0) and serves others on both sides of a gap. Points that spend
    nothing are markers apart (crosses for q = 0, open diamonds for a q > 0 with ε = 0, both named); no
    rule's line has a vertex at −100% or joins budgets across points it does not draw (the figure drew the
    exact inverse's line along −100% and up the jump to 0%)."""
    q = np.unique(np.concatenate([np.arange(1, 100) * 1e-3, np.arange(1, 101) * 1e-2]))
    exact_grid = 6.24 * q ** 0.8 + 0.002
    budgets = np.geomspace(0.1, 10, 40)
    jump = budgets < 0.194
    exact_q = np.where(jump, 1.5185e-4, np.clip((budgets / 60.8) ** 1.25, 0, 1))
    classic_q = np.where((budgets < 0.5) | ((budgets > 2) & (budgets < 3)), 0.0, (budgets / 50) ** 1.1)
    improved_q = (budgets / 45) ** 1.1
    out = {"q_grid": q, "exact_grid": exact_grid, "budgets": budgets,
           "fits": {"classic": _fit(q, 4.1, -1.5, -0.2, 0.99999), "improved": _fit(q, 3.9, -1.7, -0.25, 0.99997)},
           "scf_rates": {"classic": classic_q, "improved": improved_q},
           "overspend": {"classic": np.where(classic_q == 0, -1.0, -0.45 + 0.1 * np.log10(budgets)),
                         "improved": 2.6 * (0.1 / budgets) ** 0.8 - 0.02},
           "exact_rates": exact_q, "exact_overspend": np.where(jump, -1.0, -1e-12),
           "setting": {"sigma": 1.0, "steps": 5, "delta": 1e-3, "rounds": 20, "client_rate": 0.5}}
    fig = check_layout(saved(lambda p: rpdp.plot_scf(out, p)))
    ax = fig.axes[1]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any(label.startswith("q = 0") for label in labels)
    assert any("certified ε = 0" in label for label in labels)
    spends = {"SCF q (classic fit)": (classic_q > 0) & (out["overspend"]["classic"] > -1),
              "SCF q (improved fit)": np.ones(budgets.size, bool),
              "exact inverse (calibrate.sampling_rate)": ~jump}
    drawn = [line for line in ax.get_lines() if line.get_linestyle() not in ("None", "", " ")]
    for line in drawn:
        y = np.asarray(line.get_ydata(), dtype=float)
        assert not np.any(y[np.isfinite(y)] <= -100.0), f"{line.get_label()!r} draws a line through −100%"
    lines = {line.get_label(): line for line in drawn}
    for label, spending in spends.items():
        x, y = (np.asarray(v, dtype=float) for v in lines[label].get_data())
        # vertices only where the rule spends something, each at its own budget: NaN elsewhere breaks the line
        assert np.array_equal(x, budgets) and np.array_equal(np.isfinite(y), spending), label
    diamonds = [line for line in ax.get_lines() if line.get_marker() == "D" and len(line.get_xdata())]
    assert len(diamonds) == 1 and np.array_equal(diamonds[0].get_xdata(), budgets[jump])
    assert np.all(np.asarray(diamonds[0].get_ydata()) == -100.0)


@pytest.mark.parametrize("groups", [("ThreeLevels", "BoundedMixGauss"), ("ThreeLevels",),
                                    ("ThreeLevels", "BoundedMixGauss", "BoundedPareto")])
def test_rpdp_accuracy(saved, groups):
    means = {"rpdp": 0.76, "scf": 0.61, "minimum": 0.33, "dropout": 0.44, "privacy_free": 0.94}
    table = {g: {m: [v - 0.02, v + 0.02] for m, v in means.items()} for g in groups}
    fig = check_layout(saved(lambda p: rpdp.plot_accuracy(
        table, rpdp.METHODS, p, "rPDP-FL on MNIST-5k: T=8, τ=10, λ=0.8, σ=6, δ=0.0001\n3 IID clients, softmax "
                                  "regression, 2 seed(s)")))
    assert fig.axes[0].get_ylim() == (0.0, 1.0)


def test_udpfl_mechanisms(saved):
    mean = {"mean": {"gaussian": 0.836, "laplace": 0.248, "staircase": 0.109},
            "mode_connect": {"staircase": 0.813}}
    sweep = {"gaussian": {2.0: 0.769, 4.0: 0.836, 6.0: 0.847, 8.0: 0.858, math.inf: 0.877},
             "laplace": {2.0: 0.187, 4.0: 0.248, 6.0: 0.295, 8.0: 0.348},
             "staircase": {2.0: 0.12, 4.0: 0.109, 6.0: 0.128, 8.0: 0.145}}
    fig = check_layout(saved(lambda p: udpfl.plot_mechanisms(
        mean, 0.822, sweep, p, "UDP-FL on MNIST-5k: δ = 1e-05, T = 8, 10 clients, 1 seed(s)", 4.0, chance=0.1,
        paper_staircase={2.0: 0.13, 8.0: 0.2})))
    labels = [t.get_text() for ax in fig.axes for legend in [ax.get_legend()] if legend for t in legend.get_texts()]
    assert "chance (1 / classes)" in labels and "staircase, paper's 1-D accounting" in labels
    # the mode-connectivity slots quick mode leaves empty (gaussian, laplace) say so; chance on both panels
    left, right = fig.axes
    assert sorted(t.get_text() for t in left.texts) == ["not run", "not run"]
    for ax in (left, right):
        assert any(np.allclose(line.get_ydata(), 0.1) for line in ax.get_lines()), ax.get_title()


def test_train_learning_curve(saved):
    history = [EpochRecord(e, 100 * e, 0.5 + 0.04 * e, 1.0 / e, 0.3 * e, 0.1 * e) for e in range(1, 11)]
    fig = check_layout(saved(lambda p: plot_learning_curve(history, p, "DP-SGD on digits, ε = 3, δ = 1e-5")))
    assert _titles(fig)
