"""APES / S-APES (seed 000) reproduced: Table 3's privacy column and its accuracy comparison.

Liu et al., "Echo of Neighbors" (AAAI 2023). The system itself (local update, shuffler, analyzer,
accounting, training) is :mod:`jaxpriv.federated.apes`; this module holds the paper's Table 3, the
experiment that regenerates it (privacy from the engine at the paper's size, accuracy on the bundled
MNIST-5k subset), its table, figures and headline rows for ``jaxpriv reproduce``.
"""

from __future__ import annotations

import math
import os

import numpy as np

from .._checks import check_values
from ..budgets import scenario
from ..federated.apes import account, train
from ..train import data
from .rounds import rounds_report
from .verdicts import claim, compare

__all__ = ["implied_delta_prime", "plot_accuracy", "reproduce"]

#: Table 3 of seed 000 (Uniform2, n = 10⁴, δ_s = 1e-8, d = 7850; QMNIST): system → (ε^c, ε^uc, accuracy in %)
_PAPER_TABLE3 = {"ldp_min": (0.05, 40.1, 56.11), "pldp": (1.0, 7850, 77.54), "unis": (0.069, 76.9, 77.54),
                 "apes": (0.057, 57.6, 79.67), "sapes": (0.057, 25.6, 78.14), "nonprivate": (math.inf, math.inf, 84.35)}
_LABELS = {"nonprivate": "Non-Private", "ldp_min": "LDP-Min", "pldp": "PLDP", "unis": "UniS", "apes": "APES",
           "sapes": "S-APES"}


def _fmt(x: float, digits: int = 4) -> str:
    return "∞" if not math.isfinite(x) else f"{x:.{digits}g}"


def implied_delta_prime(eps_c: float, releases: int, eps_uc: float) -> float:
    """The advanced-composition slack δ' at which ``releases`` = k releases of ε^c compose to ``eps_uc``.

    Advanced composition (Dwork, Rothblum, Vadhan 2010; seed 000 Proposition 1 with k = 2b; MATH §3.2):
    ε^uc = ε^c √(2k ln(1/δ')) + k ε^c (e^{ε^c} − 1), solved for δ':
    δ' = exp(−((ε^uc − k ε^c (e^{ε^c} − 1)) / ε^c)² / (2k)). NaN when ε^uc ≤ k ε^c (e^{ε^c} − 1) (no δ' < 1
    gives so small an ε^uc). Used to explain Table 3's ε^uc column, whose δ' the paper does not state.

    Args:
      eps_c: per-release ε^c > 0 (finite).
      releases: k, an integer ≥ 1.
      eps_uc: the composed ε^uc > 0.

    Returns:
      δ' as a float in (0, 1), or NaN.

    Example:
      >>> f"{implied_delta_prime(0.05, 7850, 40.1):.2g}"  # Table 3's LDP-Min row
      '3.8e-05'
    """
    eps_c = float(check_values("eps_c", eps_c, 0.0, np.inf, lo_open=True, hi_open=True))
    k = int(check_values("releases", releases, 1.0, np.inf, integer=True))
    eps_uc = float(check_values("eps_uc", eps_uc, 0.0, np.inf, lo_open=True, hi_open=True))
    root = (eps_uc - k * eps_c * math.expm1(eps_c)) / eps_c
    return math.exp(-root * root / (2 * k)) if root > 0 else math.nan


def plot_accuracy(curves: dict, path: str, title: str) -> str:
    """Test accuracy after each round, one line per system (``{label: accuracies}``), the legend outside
    the axes (the curves fill the plot)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7.5, 4.0), layout="constrained")
    ax = fig.add_subplot()
    for label, curve in curves.items():
        ax.plot(np.arange(1, len(curve) + 1), curve, label=label)
    ax.set_xlabel("round")
    ax.set_ylabel("test accuracy")
    ax.set_ylim(0.0, 1.0)
    ax.grid(alpha=0.3)
    ax.set_title(title, fontsize=10)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    fig.savefig(path, dpi=120)
    return path


def reproduce(quick: bool = True, out_dir: str = ".", seeds=(0,)) -> dict:
    """Regenerate seed 000's headline results: Table 3's privacy column (n = 10⁴, Uniform2, δ_s = 1e-8,
    d = 7850, b = 1570) from the engine, and the accuracy-vs-rounds comparison of APES / S-APES against
    Non-Private, LDP-Min and PLDP/UniS (one mechanism, identical accuracy) on the bundled MNIST-5k subset
    (logistic regression, d = 7850 as the paper's, one client per training record, Uniform2 budgets).

    Args:
      quick: small configuration (under a minute on 2 CPU cores) when True.
      out_dir: where the PNG figure is written (created if missing).
      seeds: training seeds (accuracies are averaged over them).

    Returns:
      dict with ``title``, ``paper``, ``ours``, ``headlines`` (:func:`~jaxpriv.reproduce.verdicts.compare` /
      :func:`~jaxpriv.reproduce.verdicts.claim` rows), ``why_different`` (a list of short reasons), ``figures``,
      ``table_markdown``.

    Example:
      >>> callable(reproduce)
      True
    """
    seeds = [int(s) for s in np.atleast_1d(seeds)]
    if not seeds or any(s < 0 for s in seeds):
        raise ValueError(f"seeds must be a non-empty list of integers ≥ 0, got {seeds!r}")
    os.makedirs(out_dir, exist_ok=True)

    # Privacy (Table 3): cheap, exact engine numbers at the paper's size.
    eps_paper = scenario("Uniform2", 10_000, seed=0)
    d_paper, b_paper = 7850, 1570
    privacy = {s: account(s, eps_paper, d_paper, 1, b=b_paper if s == "sapes" else None)
               for s in ("ldp_min", "pldp", "unis", "apes", "sapes")}
    # Table 3's ε^uc column: the δ' each printed figure implies under advanced composition, from the
    # paper's own ε^c and release count (k = d = 7850; S-APES k = 2b = 3140); PLDP's 7850 = d · 1 is basic
    implied = {}
    for s in ("ldp_min", "unis", "apes", "sapes"):
        k = 2 * b_paper if s == "sapes" else d_paper
        implied[s] = implied_delta_prime(_PAPER_TABLE3[s][0], k, _PAPER_TABLE3[s][1])

    # Accuracy on MNIST-5k: logistic regression on 28×28 images has the paper's d = 7850, so S-APES keeps
    # the paper's b = 1570.
    ds = data.load("mnist", seed=0)
    n_clients = 200 if quick else len(ds.y_train)
    rounds = 15 if quick else 80
    d_train = ds.feature_shape[0] * ds.num_classes + ds.num_classes
    b_train = d_train // 5
    systems = ("nonprivate", "ldp_min", "pldp", "apes", "sapes")
    curves = {s: [] for s in systems}
    for seed in seeds:
        eps = scenario("Uniform2", n_clients, seed=seed)
        for s in systems:
            res, _ = train(s, ds, eps, rounds=rounds, b=b_train if s == "sapes" else None, seed=seed)
            curves[s].append([r.test_accuracy for r in res.history])
    mean_curve = {s: np.mean(np.array(v), axis=0) for s, v in curves.items()}
    final = {s: float(c[-1]) for s, c in mean_curve.items()}

    path = plot_accuracy({("PLDP / UniS" if s == "pldp" else _LABELS[s]): mean_curve[s] for s in systems},
                         os.path.join(out_dir, "apes_accuracy.png"),
                         f"APES on MNIST-5k: {n_clients} clients, Uniform2 ε, C = 0.05, {len(seeds)} seed(s)")

    rows = ["| system | paper ε^c | ours ε^c (closed form) | paper ε^uc | ours ε^uc | paper acc (QMNIST) | "
            "ours acc (MNIST-5k) |", "|---|---|---|---|---|---|---|"]
    for s in ("nonprivate", "ldp_min", "pldp", "unis", "apes", "sapes"):
        p_eps, p_uc, p_acc = _PAPER_TABLE3[s]
        acc_key = "pldp" if s == "unis" else s
        if s in privacy:
            pr = privacy[s]
            ours = _fmt(pr.epsilon_c) + ("" if math.isnan(pr.theorem_epsilon) else f" ({_fmt(pr.theorem_epsilon)})")
            ours_uc = _fmt(pr.round_epsilon)
            if s == "sapes":  # Prop. 1's 2b count is the paper's claim; k = d is the value we can prove
                ours_uc += f" (Prop. 1; {_fmt(pr.conservative_total_epsilon)} with k = d)"
        else:
            ours, ours_uc = "∞", "∞"
        rows.append(f"| {_LABELS[s]} | {_fmt(p_eps)} | {ours} | {_fmt(p_uc)} | {ours_uc} | {p_acc:.2f}% | "
                    f"{100 * final[acc_key]:.2f}% |")
    # Many rounds (MATH §3.1, §7): the one-round exact pair composed by PLD beside the papers' compositions.
    many_rounds = [1, 10, 100, 1000]
    rounds_path = os.path.join(out_dir, "apes_epsilon_vs_rounds.png")
    lines, composed = rounds_report(eps_paper, 1e-8, many_rounds, rounds_path,
                                    "APES Table 3 setting (n = 10⁴, Uniform2, δ = 1e-8): central ε vs rounds")
    rows += ["", "Central ε after T rounds at the Table 3 setting (one shuffled report per user and round; "
             "worst-case user):", "", *lines]
    ours = {
        "epsilon_after_rounds": {"rounds": many_rounds,
                                 **{name: row["epsilon"].tolist() for name, row in composed.items()}},
        "epsilon_c": {s: p.epsilon_c for s, p in privacy.items()},
        "epsilon_c_closed_form": {s: p.theorem_epsilon for s, p in privacy.items()},
        "epsilon_uc_one_round": {s: p.round_epsilon for s, p in privacy.items()},
        "delta_uc_one_round": {s: p.round_delta for s, p in privacy.items()},
        "epsilon_uc_one_round_k_equals_d": {s: p.conservative_total_epsilon for s, p in privacy.items()},
        "final_accuracy": final,
        "table3_implied_delta_prime": implied,
        "clients": n_clients,
        "rounds": rounds,
        "seeds": seeds,
    }
    paper = "APES / S-APES (seed 000)"
    per_coord = n_clients * b_train / d_train  # S-APES: users that keep a given coordinate per round
    data_why = (f"MNIST-5k, {n_clients} users of one image each, {rounds} rounds (paper: QMNIST, 10⁴ users): "
                "fewer users average the LDP noise less")
    headlines = []
    for s in ("ldp_min", "pldp", "unis", "apes", "sapes"):
        headlines.append(compare(paper, f"ε^c {_LABELS[s]} (Table 3)", _PAPER_TABLE3[s][0], privacy[s].epsilon_c,
                                 why="budgets drawn anew from Uniform2"))
    for s in ("ldp_min", "pldp", "unis", "apes", "sapes"):
        if s == "pldp":
            why = f"the paper's 7850 is basic composition of d = {d_paper} releases of ε^c = 1"
        else:
            k = 2 * b_paper if s == "sapes" else d_paper
            why = (f"the paper's {_fmt(_PAPER_TABLE3[s][1])} is advanced composition of k = {k} releases of its "
                   f"ε^c = {_fmt(_PAPER_TABLE3[s][0])} with δ' = {implied[s]:.2g} (back-solved; not stated); ours "
                   f"uses δ' = δ_s = 1e-8 and our ε^c")
        headlines.append(compare(paper, f"ε^uc {_LABELS[s]}, one round (Table 3)", _PAPER_TABLE3[s][1],
                                 privacy[s].round_epsilon, why=why))
    for s in ("nonprivate", "ldp_min", "unis", "apes", "sapes"):
        label = "PLDP = UniS" if s == "unis" else _LABELS[s]
        why = data_why
        if s == "sapes":
            why = (f"b = {b_train} of d = {d_train} kept: each coordinate averages ~{per_coord:.0f} users per "
                   "round (paper: ~2,000)")
        headlines.append(compare(paper, f"accuracy {label} (Table 3)", _PAPER_TABLE3[s][2],
                                 100 * final["pldp" if s == "unis" else s], kind="points", why=why))
    floor = 100 * final["pldp"] - 2.0  # "comparable": within the accuracy tolerance of the table
    headlines.append(claim(
        paper, "APES and S-APES accuracy comparable to or above UniS (abstract)",
        "APES 79.67%, S-APES 78.14% ≥ UniS 77.54%",
        100 * final["apes"] >= floor and 100 * final["sapes"] >= floor,
        f"APES {100 * final['apes']:.1f}%, S-APES {100 * final['sapes']:.1f}%, UniS {100 * final['pldp']:.1f}%",
        why=(f"S-APES {100 * (final['sapes'] - final['pldp']):+.1f} pp: each kept coordinate averages "
             f"~{per_coord:.0f} users per round") if 100 * final["apes"] >= floor else data_why))
    return {
        "title": "APES / S-APES (seed 000): shuffled personalized LDP for federated learning",
        "paper": "Table 3 (Uniform2, n = 10⁴, δ_s = 1e-8, d = 7850): ε^c UniS 0.069, APES 0.057 (S-APES 0.057); "
                 "ε^uc LDP-Min 40.1, PLDP 7850, UniS 76.9, APES 57.6, S-APES 25.6; accuracy Non-Private 84.35%, "
                 "LDP-Min 56.11%, PLDP = UniS 77.54%, APES 79.67%, S-APES 78.14% (QMNIST, logistic regression).",
        "ours": ours,
        "headlines": headlines,
        "why_different": [
            "ε^c: exact numeric clone sums at the paper's size; they differ from Table 3 only by the budget draw. "
            f"The closed forms (Theorem 4 / Eq. 2) give {_fmt(privacy['apes'].theorem_epsilon)} / "
            f"{_fmt(privacy['unis'].theorem_epsilon)}, so Table 3's numbers are the numeric ones.",
            "ε^uc: the d (APES, baselines) or 2b (S-APES, Prop. 1) releases of a round, composed by the better of "
            "basic and advanced composition with δ' = δ_s = 1e-8. Back-solved from the paper's own ε^c, its figures "
            "imply δ' = " + ", ".join(f"{implied[s]:.2g} ({_LABELS[s]})" for s in implied) + ": one δ' near 1e-8 "
            "for APES and UniS, others for LDP-Min and S-APES (the paper states none).",
            "S-APES's 2b count is Proposition 1's claim, not re-proved here (the b kept dimensions are chosen from "
            f"all d perturbed values); the value we can prove (k = d) is {_fmt(privacy['sapes'].conservative_total_epsilon)}.",
            f"Accuracy: MNIST-5k (28×28, d = {d_train} as the paper's, {n_clients} users, one image each, {rounds} "
            "rounds) replaces QMNIST with 10⁴ users. Fewer users average the LDP noise less, so the private "
            "systems sit further below Non-Private.",
            f"S-APES keeps b = {b_train} of d = {d_train} coordinates per user (as the paper), so "
            f"a coordinate is averaged over ~{per_coord:.0f} users per round here against ~2,000 in the paper.",
        ],
        "figures": [path, rounds_path],
        "table_markdown": "\n".join(rows),
    }
