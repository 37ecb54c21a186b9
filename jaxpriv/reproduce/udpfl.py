"""UDP-FL (seed 002) reproduced: accuracy per mechanism at equal (ε, δ), against the paper's Table 4.

Feng et al., "UDP-FL" (seed 002). The system itself (Harmonizer-calibrated scales, the local update,
mean and mode-connectivity aggregation, the shuffler's accounting) is :mod:`jaxpriv.federated.udpfl`;
this module holds the paper's Table 4 and claims, the experiment that runs each mechanism on the bundled
MNIST-5k (and its setting), its table, figure and headline rows for ``jaxpriv reproduce``. The paper's
mechanism claim (Fig. 1, Fig. 4) is measured on MNIST, so that row runs on the paper's data set (a 5,000-image
subset); Table 4 is CIFAR-10, for which MNIST-5k is a stand-in.
"""

from __future__ import annotations

import math
import os

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from .. import accounting, events
from ..federated import partition, simulator
from ..federated.udpfl import AGGREGATIONS, MECHANISMS, build, scales, server_loss, shuffle_epsilon
from ..train import data, dpsgd
from .verdicts import claim, compare

__all__ = ["plot_mechanisms", "reproduce"]

#: reproduce's setting: MNIST-5k (since issue 34; until then digits), 10 IID clients, logistic regression
#: (d = 7,850), q, τ, ε, δ, and per mechanism (η, C). History on digits (d = 650): η and C were picked from a
#: small grid, η ∈ {0.1, 0.5, 2}, C ∈ {0.3, 1, 3, 10} (3 seeds, 8 rounds), and logistic regression was
#: preferred to a 1210-parameter MLP (η = 0.5, C ∈ {0.5, …, 35}) for every mechanism; it gave η = 2 and
#: C = 1 / 3 / 1 (gaussian / laplace / staircase). MNIST-5k had its own search on the same grid, with
#: digits' q = 0.1, τ = 2, ε = 4, δ = 1e-5, 10 clients, T = 8 (quick), seeds 0-2, 5% of the training
#: records held out as the public split, FedAvg's mean, each mechanism alone; scored by test accuracy on the
#: test split (MNIST-5k has no validation split here), so the accuracies are optimistic for every mechanism
#: alike. Mean over the seeds (η = 0.1 / 0.5 / 2 for each C):
#:   gaussian   C = 0.3: 0.192 / 0.462 / 0.704   C = 1: 0.350 / 0.692 / 0.777   C = 3: 0.625 / 0.774 / 0.744
#:              C = 10:  0.762 / 0.737 / 0.695
#:   laplace    C = 0.3: 0.127 / 0.130 / 0.140   C = 1: 0.129 / 0.139 / 0.167   C = 3: 0.133 / 0.172 / 0.175
#:              C = 10:  0.163 / 0.173 / 0.167
#:   staircase  C = 0.3: 0.136 / 0.154 / 0.162   C = 1: 0.146 / 0.164 / 0.147   C = 3: 0.164 / 0.152 / 0.142
#:              C = 10:  0.154 / 0.142 / 0.137
#: Per seed the laplace and staircase cells spread by up to ±0.09 (seed 1's staircase 0.19-0.28, seeds 0
#: and 2 0.07-0.13): both are near chance (0.1) everywhere on this grid, the differences between their
#: cells are within that spread. η = 2 is the gaussian's best (C = 1) and within 0.002 of the best cell of
#: the other two, so η stays shared at 2; C is each mechanism's best mean at η = 2: 1 / 3 / 0.3 (the
#: staircase's 0.3 over digits' 1 on a 0.015 difference, well within the spread). No MLP was searched on
#: MNIST-5k (a hidden layer multiplies d, which L1 clipping pays for as √d). Current numbers: reproduce's
#: report and test_accuracy_ordering_over_seeds' docstring.
_SETTING = {"clients": 10, "q": 0.1, "tau": 2, "epsilon": 4.0, "delta": 1e-5, "learning_rate": 2.0,
            "clip": {"gaussian": 1.0, "laplace": 3.0, "staircase": 0.3}, "server_fraction": 0.05,
            "chain_steps": 50, "chain_learning_rate": 0.1}


#: The paper's Table 4 (CIFAR-10): accuracy per mechanism at ε = 2, 4, 6, 8 and ∞ (non-private, shared).
_TABLE4_EPSILONS = (2.0, 4.0, 6.0, 8.0, math.inf)
_ISOLATION_EPSILONS = (2.0, 8.0)  # the staircase rerun with the paper's 1-D accounting at Table 4's ends
_TABLE4 = {"gaussian": (0.704, 0.714, 0.719, 0.742, 0.871), "laplace": (0.475, 0.461, 0.506, 0.638, 0.871),
           "staircase": (0.633, 0.691, 0.733, 0.780, 0.871)}


def _fmt_eps(e) -> str:
    return "∞" if math.isinf(e) else f"{e:g}"


def plot_mechanisms(mean: dict, public: float, sweep: dict, path: str, title: str, epsilon: float, *,
                    chance: float | None = None, paper_staircase: dict | None = None) -> str:
    """Left: accuracy per client population at one ε under FedAvg's mean and mode connectivity (``mean``:
    ``{aggregation: {population: accuracy}}``), with the public-split-only reference; right: accuracy
    against ε per mechanism (``sweep``: ``{mechanism: {ε: accuracy}}``, ε = ∞ the noiseless run). ``chance``
    (1 / classes) is drawn on both panels; ``paper_staircase`` (``{ε: accuracy}``) adds the staircase rerun
    with the paper's 1-D accounting as open markers. Legends below the axes."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(11, 4.6), layout="constrained")
    left, right = fig.subplots(1, 2)
    populations = list(mean["mean"])
    width = 0.4
    for i, a in enumerate(AGGREGATIONS):
        left.bar([populations.index(p) + i * width for p in mean[a]], list(mean[a].values()), width,
                 label={"mean": "FedAvg mean", "mode_connect": "mode connectivity"}[a])
        for p in populations:  # an empty slot says why (quick mode runs mode connectivity for the staircase only)
            if p not in mean[a]:
                left.text(populations.index(p) + i * width, 0.13, "not run", rotation=90, ha="center", va="bottom",
                          fontsize=7, color="grey")
    left.axhline(public, color="k", ls="--", lw=1, label="public split alone (no client)")
    if chance is not None:
        for ax in (left, right):
            ax.axhline(chance, color="grey", ls="-.", lw=1, label="chance (1 / classes)" if ax is left else None)
    left.set_xticks(np.arange(len(populations)) + width / 2, populations)
    left.set(ylabel="test accuracy", ylim=(0, 1), title=f"per mechanism at ε = {epsilon:g}")
    left.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.1), ncols=3)
    finite = sorted({e for by in sweep.values() for e in by if math.isfinite(e)})
    for m, by in sweep.items():
        line, = right.plot(finite, [by[e] for e in finite], marker="o", label=m)
        if m == "staircase" and paper_staircase:
            es = sorted(paper_staircase)
            right.plot(es, [paper_staircase[e] for e in es], ls="none", marker="o", mfc="none", ms=9,
                       color=line.get_color(), label="staircase, paper's 1-D accounting")
    if math.inf in sweep.get("gaussian", {}):
        right.axhline(sweep["gaussian"][math.inf], color="k", ls=":", lw=1, label="no noise (ε = ∞)")
    right.set(xlabel="ε", ylabel="test accuracy (FedAvg mean)", ylim=(0, 1), title="accuracy against ε")
    right.grid(alpha=0.3)
    right.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncols=4)
    fig.suptitle(title, fontsize=10)
    fig.savefig(path, dpi=100)
    return path


def _public_only(model, loss, steps: int = 200, learning_rate: float = 0.1):
    """The reference model trained (non-privately, full-batch GD) on the server's public split alone."""
    graphdef, params, rest = nnx.split(model, nnx.Param, ...)
    grad = jax.jit(jax.grad(loss))
    for _ in range(steps):
        params = jax.tree.map(lambda w, g: w - learning_rate * g, params, grad(params))
    return params


def reproduce(quick: bool = True, out_dir: str = ".", seeds=(0, 1, 2)) -> dict:
    """Accuracy per mechanism at equal (ε, δ) on MNIST-5k, with the Harmonizer's scales, under FedAvg's mean
    and mode-connectivity aggregation (seed 002 §5, Alg. 1).

    Every client uses the same mechanism in a run (one run per mechanism); full mode adds a mixed population
    (4 gaussian, 3 laplace, 3 staircase clients, each calibrated to the same ε). Mode connectivity runs on
    a public split (5% of the training records, held out of every client's data and treated as public),
    with the model trained on that split alone as the reference. quick: one seed, T = 8, mode connectivity
    for the staircase only; full: the seeds, T = 30, mode connectivity for every population.

    Table 4's privacy levels: every mechanism alone also at ε = 2, 6 and 8 (FedAvg's mean), and the Gaussian
    configuration without noise for ε = ∞.

    Returns:
      dict with ``title, paper, ours, headlines, why_different, figures, table_markdown``.
    """
    os.makedirs(out_dir, exist_ok=True)
    seeds = list(seeds)[:1] if quick else list(seeds)
    s = _SETTING
    rounds = 8 if quick else 30
    d = data.load("mnist", seed=0)
    order = np.random.default_rng(0).permutation(d.n_train)
    n_server = int(round(s["server_fraction"] * d.n_train))
    server, own = order[:n_server], order[n_server:]
    server_xy = (d.x_train[server], d.y_train[server])
    populations = {m: [m] * s["clients"] for m in MECHANISMS}
    if not quick:
        populations["mixed"] = ["gaussian"] * 4 + ["laplace"] * 3 + ["staircase"] * 3
    # quick: mode connectivity for the paper's favourite only (each configuration compiles for seconds)
    runs = [(p, a) for p in populations for a in AGGREGATIONS if a == "mean" or not quick or p == "staircase"]
    make = lambda seed: dpsgd.MLP(d.x_train.shape[1], (), d.num_classes, rngs=nnx.Rngs(seed))  # noqa: E731 — logistic regression
    graphdef, _, rest = nnx.split(make(0), nnx.Param, ...)
    dim = int(sum(np.size(v) for v in jax.tree.leaves(nnx.state(make(0), nnx.Param))))
    acc = {a: {p: [] for p, b in runs if b == a} for a in AGGREGATIONS}
    table = {}
    for seed in seeds:
        split = partition.iid(d.y_train[own], s["clients"], seed=seed)
        clients = partition.stack(d.x_train[own], d.y_train[own], split)
        for pop, agg in runs:
            model = make(seed)
            cfg = build(model, dpsgd.cross_entropy_loss, populations[pop], s["epsilon"], s["delta"], clip=s["clip"],
                        learning_rate=s["learning_rate"], local_steps=s["tau"], q=s["q"], rounds=rounds,
                        aggregation=agg, server_data=server_xy, chain_steps=s["chain_steps"],
                        chain_learning_rate=s["chain_learning_rate"])
            table.setdefault(pop, (float(cfg.scale[0]), float(np.max(cfg.epsilon))))
            res = simulator.run(model, cfg.local_update, clients, rounds=rounds, aggregator=cfg.aggregator,
                                client_state=cfg.client_state, test_data=d, seed=seed, progress=False)
            acc[agg][pop].append(res.test_accuracy)
    evaluate = jax.jit(lambda p: jnp.mean(jnp.argmax(nnx.merge(graphdef, p, rest)(d.x_test), -1) == d.y_test))
    loss = server_loss(dpsgd.cross_entropy_loss, graphdef, *server_xy, rest=rest)
    public = [float(evaluate(_public_only(make(seed), loss))) for seed in seeds]
    mean = {a: {p: float(np.mean(v)) for p, v in by.items()} for a, by in acc.items()}

    # Table 4's privacy levels: every mechanism alone at ε = 2, 6, 8 (ε = 4 is the runs above), FedAvg's mean;
    # ε = ∞: the Gaussian configuration with its noise set to zero (same clipping and sampling)
    sweep = {m: {e: [] for e in _TABLE4_EPSILONS} for m in MECHANISMS}
    for seed in seeds:
        split = partition.iid(d.y_train[own], s["clients"], seed=seed)
        clients = partition.stack(d.x_train[own], d.y_train[own], split)
        for m in MECHANISMS:
            for e in _TABLE4_EPSILONS:
                if e == s["epsilon"]:
                    continue
                if math.isinf(e) and m != "gaussian":
                    continue
                model = make(seed)
                cfg = build(model, dpsgd.cross_entropy_loss, [m] * s["clients"], 1.0 if math.isinf(e) else e,
                            s["delta"], clip=s["clip"], learning_rate=s["learning_rate"], local_steps=s["tau"],
                            q=s["q"], rounds=rounds)
                state = {**cfg.client_state, "scale": np.zeros_like(cfg.client_state["scale"])} if math.isinf(e) \
                    else cfg.client_state
                res = simulator.run(model, cfg.local_update, clients, rounds=rounds, aggregator=cfg.aggregator,
                                    client_state=state, test_data=d, seed=seed, progress=False)
                sweep[m][e].append(res.test_accuracy)
    # Isolation of the staircase's cost: the same runs with the per-coordinate ε₀ the paper's accounting
    # gives (its 1-D curve, as if the d coordinates were one), against ours (d·ρ(C/d)). Not a privacy
    # guarantee: only the accounting differs between the two arms, so their accuracy gap is its cost.
    paper_acct = {e: [] for e in _ISOLATION_EPSILONS}
    paper_scale = {}
    for seed in seeds:
        split = partition.iid(d.y_train[own], s["clients"], seed=seed)
        clients = partition.stack(d.x_train[own], d.y_train[own], split)
        for e in _ISOLATION_EPSILONS:
            names = ["staircase"] * s["clients"]
            model = make(seed)
            cfg = build(model, dpsgd.cross_entropy_loss, names, e, s["delta"], clip=s["clip"],
                        learning_rate=s["learning_rate"], local_steps=s["tau"], q=s["q"], rounds=rounds)
            one_d, _ = scales(names, e, s["delta"], s["q"], rounds * s["tau"], 1)
            paper_scale[e] = (float(np.asarray(one_d)[0]), float(cfg.scale[0]))
            state = {**cfg.client_state, "scale": np.asarray(one_d, dtype=np.asarray(cfg.client_state["scale"]).dtype)}
            res = simulator.run(model, cfg.local_update, clients, rounds=rounds, aggregator=cfg.aggregator,
                                client_state=state, test_data=d, seed=seed, progress=False)
            paper_acct[e].append(res.test_accuracy)
    paper_acct_mean = {e: float(np.mean(v)) for e, v in paper_acct.items()}
    for m in MECHANISMS:
        sweep[m][s["epsilon"]] = acc["mean"][m]
    sweep_mean = {m: {e: float(np.mean(v)) for e, v in by.items() if v} for m, by in sweep.items()}
    non_private = sweep_mean["gaussian"][math.inf]

    path = plot_mechanisms(mean, float(np.mean(public)), sweep_mean, os.path.join(out_dir, "udpfl_mechanisms.png"),
                           f"UDP-FL on MNIST-5k: δ = {s['delta']:g}, T = {rounds}, {s['clients']} clients, "
                           f"{len(seeds)} seed(s)", s["epsilon"], chance=1.0 / d.num_classes,
                           paper_staircase=paper_acct_mean)

    clip = lambda p: "/".join(f"{s['clip'][m]:g}" for m in dict.fromkeys(populations[p]))  # noqa: E731
    shown = lambda p: "as above" if p == "mixed" else f"{table[p][0]:.4g}"  # noqa: E731 — same ε, q, T·τ, d
    cell = lambda a, p: f"{mean[a][p]:.3f}" if p in mean[a] else "—"  # noqa: E731
    md = [f"| mechanism (all {s['clients']} clients) | C | scale | ε achieved | accuracy (mean) | "
          "accuracy (mode connectivity) |",
          "|---|---|---|---|---|---|"]
    md += [f"| {p} | {clip(p)} | {shown(p)} | {table[p][1]:.4f} | {cell('mean', p)} | {cell('mode_connect', p)} |"
           for p in populations]
    md.append(f"| public split alone (non-private, no client) | | | | — | {np.mean(public):.3f} |")
    md += ["", "Accuracy against ε (FedAvg's mean; the paper's Table 4 is CIFAR-10, shown after the slash):", "",
           "| mechanism | " + " | ".join(f"ε = {_fmt_eps(e)}" for e in _TABLE4_EPSILONS) + " |",
           "|---|" + "---|" * len(_TABLE4_EPSILONS)]
    md += [f"| {m} | " + " | ".join(f"{sweep_mean[m][e]:.3f} / {_TABLE4[m][i]:.3f}" if e in sweep_mean[m]
                                    else f"— / {_TABLE4[m][i]:.3f}" for i, e in enumerate(_TABLE4_EPSILONS)) + " |"
           for m in MECHANISMS]
    md.append("\nε = ∞: one noiseless run, the gaussian configuration without its noise (L2 clipping kept).")
    md.append(f"\nLogistic regression (d = {dim}), {s['clients']} IID clients, q = {s['q']}, τ = {s['tau']}, "
              f"η = {s['learning_rate']}, {len(seeds)} seed(s). C: the L2 clip norm (gaussian) or the L1 one "
              f"(laplace, staircase). scale: σ, b per unit sensitivity; the staircase's per-coordinate ε₀, "
              f"accounted over its d coordinates as d·ρ(C/d), subsampled at q over {rounds * s['tau']} steps. "
              f"{n_server} training records are held out of every client's data as the server's public split "
              f"(read only by mode connectivity and the reference row).")
    # The optional shuffler (MATH §1.6, §3.1, §7): Girgis et al.'s RDP, as UDP-FL accounts it, against the exact
    # FMT22 clone pair composed by PLD (both valid for any ε₀-LDP report), at ε₀ = 1, n = 10⁴, δ = 1e-8.
    shuffler = {}
    for t in (1, rounds, 1000):
        event = events.SelfComposed(events.Shuffled(1.0, n=10_000), t)
        shuffler[t] = (float(shuffle_epsilon(1.0, 10_000, t, 1e-8)),
                       float(accounting.epsilon(event, 1e-8, accountant="pld")))
    md.append("\nWith a shuffler (each client's round report ε₀-LDP, ε₀ = 1, n = 10⁴ clients, δ = 1e-8), central ε "
              "after T rounds by Girgis et al.'s RDP (UDP-FL's accounting) → the exact clone pair composed by PLD: "
              + ", ".join(f"T = {t:,}: {g:.3g} → {e:.3g}" for t, (g, e) in shuffler.items()) + ".")
    single = {m: mean["mean"][m] for m in MECHANISMS}
    best = max(single, key=single.get)
    others = ", ".join(f"{m} {v:.2f}" for m, v in single.items() if m != best)
    ref, mc = float(np.mean(public)), mean["mode_connect"]
    above = [p for p in mc if mc[p] > ref + 0.01]
    below = [p for p in mc if mc[p] < ref - 0.01]
    why = [
        f"Data: MNIST-5k ({d.n_train:,} training / {len(d.y_test):,} test images of MNIST, 784 features) with logistic "
        f"regression (d = {dim}), {s['clients']} IID clients and T = {rounds} replaces full MNIST with a 2-layer CNN "
        "over 150 rounds (the mechanism claim, Fig. 1 and 4) and CIFAR-10 with ResNet-18 (Table 4, for which "
        f"MNIST-5k is a stand-in): absolute accuracies are not comparable; without noise the same setup reaches "
        f"{non_private:.3f}.",
        f"Mechanisms: at ε = {s['epsilon']:g}, FedAvg's mean, {best} is best ({single[best]:.2f}; {others}); "
        "the paper finds the staircase best at equal ε.",
        "The staircase pays for the dimension under a sound accounting: its RDP under an L1 constraint is not the "
        "1-D curve (d·ρ(C/d) is the worst case; the paper's staircase 'RDP', its Table 3, is not a Rényi "
        "divergence).",
        f"Laplace and staircase need L1 clipping: a dense gradient's L1 norm is up to √d ≈ {math.sqrt(dim):.0f} "
        "times its L2 norm, so at a similar noise scale their signal-to-noise ratio is up to √d lower than the "
        "Gaussian's; a larger L1 clip norm grows the noise with it.",
        "Per-mechanism C and a shared η were chosen on a small grid (η ∈ {0.1, 0.5, 2}, C ∈ {0.3, 1, 3, 10}, "
        "3 seeds, T = 8) scored on MNIST-5k's test split: optimistic for every mechanism alike; laplace and the "
        "staircase stay near chance on every cell of that grid. Logistic regression is digits' choice over an "
        "MLP; no MLP was tried on MNIST-5k.",
        f"Mode connectivity fits its chains on {n_server} public records (mean → mode connectivity: "
        + ", ".join(f"{p} {mean['mean'][p]:.2f} → {mc[p]:.2f}" for p in mc)
        + f"), but that split alone, without any client, reaches {ref:.2f}: the gain is mostly the public data's"
        + (f"; above that reference only for {', '.join(above)}" if above else "")
        + (f"; below it for {', '.join(below)}" if below else "")
        + ". It is post-processing: the accounting is unchanged, provided the server's data is public.",
    ]
    paper = "UDP-FL (seed 002)"
    # what the paper's accounting would buy the staircase, against its distance to the Gaussian (computed)
    gain = max(paper_acct_mean[e] - sweep_mean["staircase"][e] for e in _ISOLATION_EPSILONS)
    behind = min(sweep_mean["gaussian"][e] - paper_acct_mean[e] for e in _ISOLATION_EPSILONS)
    row_why = {"gaussian": "MNIST-5k + logistic regression, 10 clients, T = {r} (paper: CIFAR-10, ResNet-18)",
               "laplace": "MNIST-5k + logistic regression (paper: CIFAR-10, ResNet-18); L1 clipping costs up to √d",
               "staircase": "MNIST-5k + logistic regression (paper: CIFAR-10, ResNet-18); the paper's own accounting "
                            f"adds at most {100 * gain:+.1f} pp here (rerun in the staircase claim's row)"}
    headlines = []
    for m in MECHANISMS:
        for i, e in enumerate(_TABLE4_EPSILONS[:-1]):
            headlines.append(compare(paper, f"CIFAR-10 accuracy, {m}, ε = {_fmt_eps(e)} (Table 4)",
                                     100 * _TABLE4[m][i], 100 * sweep_mean[m][e], kind="points",
                                     why=row_why[m].format(r=rounds), stand_in="MNIST-5k"))
    headlines.append(compare(paper, "CIFAR-10 accuracy, ε = ∞ (Table 4, non-private)", 100 * _TABLE4["gaussian"][-1],
                             100 * non_private, kind="points", why=row_why["gaussian"].format(r=rounds),
                             stand_in="MNIST-5k"))
    winners = {e: max(MECHANISMS, key=lambda m: sweep_mean[m][e]) for e in _TABLE4_EPSILONS[:-1]}
    isolated = "; ".join(
        f"ε = {_fmt_eps(e)}: ε₀ {paper_scale[e][0]:.3g} (paper's 1-D accounting) vs {paper_scale[e][1]:.3g} (ours), "
        f"accuracy {100 * paper_acct_mean[e]:.1f}% vs {100 * sweep_mean['staircase'][e]:.1f}% "
        f"({100 * (paper_acct_mean[e] - sweep_mean['staircase'][e]):+.1f} pp)" for e in _ISOLATION_EPSILONS)
    why.append("The staircase rerun with the per-coordinate ε₀ of the paper's 1-D accounting (not a privacy "
               f"guarantee; everything else equal) isolates what the sound accounting costs: {isolated}.")
    # the paper's MNIST claim (Fig. 1 (a), Fig. 4 (a)), measured on MNIST-5k: the paper's data, not a stand-in
    headlines.append(claim(paper, "staircase the most accurate mechanism at every ε (Fig. 1 caption, §5)",
                           "always best (MNIST, Fig. 1 (a) and 4 (a); its Table 4: from ε = 6)",
                           all(w == "staircase" for w in winners.values()),
                           "best: " + ", ".join(f"ε = {_fmt_eps(e)} {w}" for e, w in winners.items()),
                           why=f"MNIST-5k, logistic regression, T = {rounds} (paper: all of MNIST, a 2-layer CNN, "
                               f"150 rounds); rerun with the paper's 1-D accounting: {isolated}; even so the "
                               f"staircase stays ≥ {100 * behind:.1f} pp below the Gaussian, so the accounting is not "
                               "the main cause (L1 clipping: see below)"))
    return {
        "title": "UDP-FL (seed 002): per-client mechanisms with Harmonizer-calibrated noise",
        "paper": "\"among the three mechanisms, the Staircase mechanism always performs the best with the same "
                 "privacy budget\" (seed 002, Fig. 1 caption, §5); Table 4 (CIFAR-10) accuracy at ε = 2 / 4 / 6 / 8 / "
                 "∞: Gaussian 0.704 / 0.714 / 0.719 / 0.742 / 0.871, Laplace 0.475 / 0.461 / 0.506 / 0.638, "
                 "Staircase 0.633 / 0.691 / 0.733 / 0.780.",
        "ours": {"accuracy": acc, "mean_accuracy": mean, "public_only": public,
                 "accuracy_vs_epsilon": {m: {_fmt_eps(e): v for e, v in by.items()} for m, by in sweep.items()},
                 "staircase_paper_accounting": {_fmt_eps(e): {"accuracy": paper_acct[e], "eps0_paper_1d": paper_scale[e][0],
                                                              "eps0_ours": paper_scale[e][1]} for e in _ISOLATION_EPSILONS},
                 "shuffler_epsilon_girgis_vs_exact_pld": {str(t): v for t, v in shuffler.items()},
                 "scales": {p: {"scale": v[0], "epsilon": v[1]} for p, v in table.items()}},
        "headlines": headlines,
        "why_different": why,
        "figures": [path],
        "table_markdown": "\n".join(md),
    }
