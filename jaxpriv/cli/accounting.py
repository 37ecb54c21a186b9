"""``jaxpriv epsilon``, ``calibrate`` and ``sweep``: ε of DP-SGD, the σ, q or T that meets each target ε,
and ε over a grid of settings (with CSV, JSON and a heatmap).

The parsers and the argument checks need numpy only; each handler imports the library (and so JAX) when
it runs.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import sys
import warnings

import numpy as np

from .rules import ACCOUNTANTS, CALIBRATE_RULES, add_number, add_schedule, check_output_file, defaults, subparser
from .tables import fmt, fmt_steps, interval, json_value, stdout_console, table


#: the batch samplers of ``epsilon --sampling``
SAMPLINGS = ("poisson", "balls_in_bins", "shuffle")
_NAMES = {"sigma": "the noise multiplier σ", "q": "the sampling rate q", "steps": "the number of steps T"}
_SYMBOL = {"sigma": "σ", "q": "q", "steps": "T"}
_GRID_LABEL = {"rdp": "ε (RDP accountant, improved conversion)", "pld": "ε (PLD accountant, upper bound)",
               "best": "ε (smaller of the RDP and PLD upper bounds)"}


def _add_orders(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--orders", choices=("default", "dp_accounting"), default="default",
        help="Rényi orders: jaxpriv's default grid (a superset of dp_accounting's) or dp_accounting's 156 "
             "(RDP accountant)",
    )


def _add_accountant(parser: argparse.ArgumentParser, default: str, why: str) -> None:
    """--accountant, shared by epsilon, calibrate and sweep; ``why`` explains the command's default."""
    parser.add_argument(
        "--accountant", choices=ACCOUNTANTS, default=default,
        help="rdp: Rényi DP (fast, vectorised); pld: privacy loss distributions (a certified interval, "
             "tighter, seconds per setting on a CPU); best: both, and the smaller of their two upper bounds "
             "(each is a valid upper bound, so their minimum is too). Only the accountant chosen is computed "
             f"(default: %(default)s; {why})",
    )


def add_accounting_parsers(subparsers) -> None:
    """``epsilon``, ``calibrate`` (with its targets ``sigma``, ``q`` and ``steps``) and ``sweep``."""
    p = subparser(subparsers, "epsilon", "ε of T steps of DP-SGD (Poisson rate q, noise σ) at δ.",
                  "jaxpriv epsilon --q 0.01 --sigma 1.1 --steps 10000 --delta 1e-5")
    for dest in ("q", "sigma", "steps", "delta"):
        add_number(p, dest, required=dest in ("sigma", "delta"))  # q, steps: or from the schedule
    add_schedule(p)
    _add_orders(p)
    _add_accountant(p, "best", "the table shows the RDP bounds and the PLD interval of the accountants "
                               "computed, and the CLT approximation")
    p.add_argument("--json", action="store_true", help="print a JSON object instead of a table")
    p.add_argument("--refine", action="store_true",
                   help="also search real Rényi orders between the grid points (never worse, slower)")
    p.add_argument("--sampling", choices=SAMPLINGS, default="poisson",
                   help="how batches are drawn: poisson (rate q, the default), balls_in_bins (each example in "
                        "one uniformly chosen step of each epoch of t = 1/q steps; T a multiple of t) or shuffle "
                        "(each epoch a fresh permutation cut into t batches): adds a table of the Poisson and "
                        "balls-in-bins certified PLD intervals beside shuffling's certified lower bound, which is "
                        "no guarantee: no upper bound on shuffling's ε is offered (MATH §11, §11.7)")
    defaults(p, cmd_epsilon, check=_check_sampling)

    p = subparser(subparsers, "calibrate", "The σ, q or T that meets each target ε (conservatively).",
                  "jaxpriv calibrate sigma --epsilon 1,2,4,8 --q 0.01 --steps 10000 --delta 1e-5")
    targets = p.add_subparsers(dest="target", required=True, metavar="{sigma,q,steps}")
    for target, needs, example in (
        ("sigma", ("q", "steps"), "jaxpriv calibrate sigma --epsilon 1 --q 0.01 --steps 10000 --delta 1e-5"),
        ("q", ("sigma", "steps"), "jaxpriv calibrate q --epsilon 1,2 --sigma 1.1 --steps 10000 --delta 1e-5"),
        ("steps", ("q", "sigma"), "jaxpriv calibrate steps --epsilon 3 --q 0.01 --sigma 1.1 --delta 1e-5"),
    ):
        t = subparser(targets, target, f"Calibrate {_NAMES[target]} to target ε.", example)
        add_number(t, "epsilon", grid=True, required=True)
        derives = {"sigma": ("q", "steps"), "steps": ("q",)}.get(target, ())  # or from the schedule
        for name in (*needs, "delta"):
            add_number(t, name, CALIBRATE_RULES.get(name), required=name not in derives)
        if derives:
            add_schedule(t, derives)
        _add_orders(t)
        _add_accountant(t, "best", "as in epsilon: the smaller of the RDP and PLD answers (σ 1.41 instead of "
                                   "1.51 for ε = 1, q = 0.01, T = 1,000), for about a second more per target; "
                                   "rdp alone is faster")
        t.add_argument("--json", action="store_true", help="print JSON instead of a table")
        defaults(t, cmd_calibrate)

    p = subparser(subparsers, "sweep", "ε of DP-SGD over a grid of (q, σ, T, δ), with CSV/JSON/plot output.",
                  "jaxpriv sweep --q 1e-3:0.1:25:log --sigma 0.6:3:40 --steps 10000 --delta 1e-5 --out sweep-out")
    for dest in ("q", "sigma", "steps", "delta"):
        add_number(p, dest, grid=True, required=dest in ("sigma", "delta"))  # q, steps: or from the schedule
    add_schedule(p, grid=True)
    _add_orders(p)
    _add_accountant(p, "rdp", "not best as in epsilon: RDP does thousands of settings per second; pld/best "
                              "evaluate the PLD setting by setting, about a second each on a CPU")
    p.add_argument("--out", metavar="DIR", help="write sweep.csv, sweep.json and epsilon_grid.png here")
    p.add_argument("--csv", metavar="FILE",
                   help="write the results as CSV (q,sigma,steps,delta,epsilon,best_order; best_order is nan "
                        "where the PLD bound is reported)")
    p.add_argument("--json", metavar="FILE", help="write the grid and results as JSON")
    p.add_argument("--plot", metavar="FILE", help="heatmap of ε over (q, σ) (needs one T and one δ)")
    add_number(p, "chunk_size", metavar="N", extra="256 on the CPU, 4096 on an accelerator, when not given")
    defaults(p, cmd_sweep, dirs=("out",), files=("csv", "json", "plot"), figures=("plot",), check=_check_sweep)


def _epochs(args) -> tuple[int, int]:
    """(t, epochs) of balls in bins or shuffling: t = 1/q steps per epoch; ``ValueError`` unless 1/q and T/t
    are integers."""
    t = round(1.0 / args.q) if args.q > 0 else 0
    if t < 1 or abs(t * args.q - 1.0) > 1e-9:
        raise ValueError(f"--sampling {args.sampling} needs 1/q to be an integer number of steps per epoch, "
                         f"got q = {args.q:g}")
    if args.steps % t:
        raise ValueError(f"--sampling {args.sampling} needs --steps to be a multiple of t = 1/q = {t} (whole "
                         f"epochs), got {args.steps:g}")
    return t, int(args.steps) // t


def _check_sampling(args) -> None:
    if args.sampling != "poisson":
        _epochs(args)


def _sampling_rows(args, summary: dict) -> dict:
    """The certified PLD intervals of Poisson sampling and of balls in bins for the same q, σ, T, δ (the
    Poisson one from ``summary`` when its accountant already computed it), shuffling's certified lower bound
    (MATH §11.7), and the chosen scheme's certified ε (``None`` for shuffling: it has none)."""
    from .. import accounting, events

    t, epochs = _epochs(args)
    step = events.Gaussian(args.sigma)
    schemes = {"poisson": events.SelfComposed(events.PoissonSampled(args.q, step), int(args.steps)),
               "balls_in_bins": events.SelfComposed(events.RandomAllocation(1, t, step), epochs)}
    out = {"scheme": args.sampling, "steps_per_epoch": t, "epochs": epochs}
    for name, event in schemes.items():
        known = (summary["epsilon_pld_lower"], summary["epsilon_pld_upper"]) if name == "poisson" else (None,)
        lower, upper = known if None not in known else accounting.epsilon_interval(event, args.delta)
        out[name] = {"epsilon_pld_lower": float(lower), "epsilon_pld_upper": float(upper)}
    # one epoch is a permutation of t·b records cut into t batches of b: only t matters (b = 1 here)
    shuffled = events.SelfComposed(events.ShuffledBatches(1, t, step), epochs)
    out["shuffle"] = {"epsilon_lower_bound": float(accounting.epsilon_lower_bound(shuffled, args.delta))}
    out["epsilon"] = out["balls_in_bins"]["epsilon_pld_upper"] if args.sampling == "balls_in_bins" else None
    return out


def cmd_epsilon(args) -> int:
    from ..report import ORDER_SETS, privacy_summary

    s = privacy_summary(args.q, args.sigma, args.steps, args.delta, orders=ORDER_SETS[args.orders],
                        refine=args.refine, accountant=args.accountant)
    sampling = _sampling_rows(args, s) if args.sampling != "poisson" else None
    if args.json:
        numbers = {k: json_value(v) if isinstance(v, float) else v for k, v in s.items()}  # strict JSON: no inf
        print(json.dumps({**numbers, "orders": args.orders, **({"sampling": sampling} if sampling else {})}, indent=2))
        return 0
    by = {"rdp": "RDP", "pld": "PLD upper", "best": "the smaller of RDP and PLD upper"}[args.accountant]
    console = stdout_console()
    if sampling and sampling["epsilon"] is None:  # shuffling: no certified ε, and the Poisson one is not it
        floor = sampling["shuffle"]["epsilon_lower_bound"]
        verdict = ("is false for them" if floor > sampling["poisson"]["epsilon_pld_upper"]
                   else "is no guarantee for them")
        console.print(f"shuffled batches: no certified ε; ε ≥ {fmt(floor)} at δ = {args.delta:g} (a lower bound, "
                      f"MATH §11.7); the Poisson ε below {verdict}")
    elif sampling:
        console.print(f"balls in bins: ε = {fmt(sampling['epsilon'])} at δ = {args.delta:g} (PLD upper, certified)")
    console.print(f"{'Poisson sampling: ' if sampling else ''}ε = {fmt(s['epsilon'])} at δ = {args.delta:g} "
                  f"(accountant {args.accountant}: {by})")
    # Only the accountant asked for is computed (PLD costs seconds, RDP a fraction of one): the other's
    # rows say how to get them.
    skipped = "not computed: --accountant best computes both"
    pld_note = ("bound: the true ε lies in the interval" if s["epsilon_pld_lower"] is not None
                else skipped if args.accountant == "rdp" else "needs an integer T")
    # The CLT (Bu et al.) is exact only as T → ∞ with q√T fixed; for few steps, or where the rare sampled
    # step dominates the privacy loss, it can fall far below the true ε: say so when the interval shows it.
    clt = s["epsilon_gdp_clt_approximation"]
    clt_note = f"approximation, not a bound (μ ≈ {s['gdp_clt_mu_approximation']:.4g})"
    if s["epsilon_pld_lower"] is not None and clt < s["epsilon_pld_lower"]:
        clt_note += "; below the PLD lower bound: it underestimates ε here"
    if s["epsilon_rdp"] is None:
        rdp_rows = [["RDP, improved conversion", "-", skipped], ["RDP, classic conversion", "-", skipped]]
    else:
        rdp_rows = [["RDP, improved conversion", fmt(s["epsilon_rdp"]), f"bound; best order α = {s['best_order']:g}"],
                    ["RDP, classic conversion", fmt(s["epsilon_classic"]),
                     f"bound, looser; best order α = {s['best_order_classic']:g}"]]
    console.print(table(
        f"DP-SGD: q = {args.q:g}, σ = {args.sigma:g}, T = {fmt_steps(args.steps)}, δ = {args.delta:g}",
        ["accountant", "ε", "note"],
        [
            *rdp_rows,
            ["PLD \\[lower, upper]", interval(s["epsilon_pld_lower"], s["epsilon_pld_upper"]), pld_note],
            ["Gaussian DP, CLT (approximation)", fmt(clt), clt_note],
        ],
    ))
    if sampling:
        poisson, bins = sampling["poisson"], sampling["balls_in_bins"]
        chosen = lambda name: " (chosen)" if args.sampling == name else ""  # noqa: E731
        console.print(table(
            f"Sampling schemes (PLD, every bound certified): t = {sampling['steps_per_epoch']} steps per epoch, "
            f"{sampling['epochs']} epochs",
            ["batches", "ε \\[lower, upper]", "note"],
            [
                [f"Poisson, rate q = {args.q:g}", interval(poisson["epsilon_pld_lower"], poisson["epsilon_pld_upper"]),
                 "each example in each step with probability q"],
                [f"balls in bins (random allocation){chosen('balls_in_bins')}",
                 interval(bins["epsilon_pld_lower"], bins["epsilon_pld_upper"]),
                 "each example in one uniform step per epoch (MATH §11)"],
                [f"shuffled batches{chosen('shuffle')}", f"≥ {fmt(sampling['shuffle']['epsilon_lower_bound'])}",
                 "a lower bound only, no guarantee: no upper bound is certified (MATH §11.7)"],
            ],
        ))
    return 0


def _solve(target: str, epsilon, params: dict, delta: float, orders, accountant: str) -> np.ndarray:
    """The calibrated parameter for each target ε (inf or 0 where a target cannot be met)."""
    from .. import calibrate

    with warnings.catch_warnings():  # unattainable targets are reported in the table instead
        warnings.simplefilter("ignore", RuntimeWarning)
        if target == "sigma":
            value = calibrate.noise_multiplier(epsilon, params["q"], params["steps"], delta, orders=orders,
                                               accountant=accountant)
        elif target == "q":
            value = calibrate.sampling_rate(epsilon, params["sigma"], params["steps"], delta, orders=orders,
                                            accountant=accountant)
        else:
            value = calibrate.steps(epsilon, params["q"], params["sigma"], delta, orders=orders,
                                    accountant=accountant)
    return np.asarray(value)


def _achieved(params: dict, delta: float, orders, accountant: str) -> np.ndarray:
    """ε at the calibrated values, by the accountant that calibrated them."""
    from .. import accounting, events
    from ..accounting.dpsgd import dpsgd_epsilon

    if accountant == "rdp":
        return np.asarray(dpsgd_epsilon(delta=delta, orders=orders, **params))
    step = events.PoissonSampled(params["q"], events.Gaussian(params["sigma"]))
    return accounting.epsilon(events.SelfComposed(step, params["steps"]), delta, accountant=accountant)


def cmd_calibrate(args) -> int:
    from ..report import ORDER_SETS

    orders = ORDER_SETS[args.orders]
    fixed = {name: getattr(args, name) for name in ("q", "sigma", "steps") if name != args.target}
    value = _solve(args.target, args.epsilon, fixed, args.delta, orders, args.accountant)
    met = np.isfinite(value) & (value > 0)  # σ = inf, q = 0 or T = 0: the target is out of reach
    # Recompute ε at the calibrated value: it shows the guarantee holds (achieved ≤ target).
    params = {**fixed, args.target: np.where(met, value, 1.0)}
    achieved = np.where(met, _achieved(params, args.delta, orders, args.accountant), np.nan)
    # RDP's conversion certifies no ε below a floor that depends on the setting; under it, a target is met
    # only by ε = 0, the (0, δ) bound that holds once δ exceeds the total variation (Bretagnolle–Huber), at
    # the same σ, q or T whatever the target: that value answers δ, not the target, so it is not reported.
    zero_only = met & (achieved == 0) & (args.accountant == "rdp")
    jump = value[zero_only][0] if zero_only.any() else None
    met, achieved = met & ~zero_only, np.where(zero_only, np.nan, achieved)

    if args.json:
        rows = [{"target_epsilon": float(t), args.target: json_value(v) if m else None,
                 "achieved_epsilon": json_value(a), **fixed, "delta": args.delta, "accountant": args.accountant}
                for t, v, a, m in zip(args.epsilon, value, achieved, met)]
        print(json.dumps(rows, indent=2))
        return _report_unattainable(args, fixed, met, orders, zero_only, jump)
    fmt_target = fmt_steps if args.target == "steps" else fmt
    rows = [
        [fmt(t), fmt_target(v), fmt(a), "yes" if a <= t else "NO"] if m
        else [fmt(t), "not certified" if z else "unattainable", "-", "-"]
        for t, v, a, m, z in zip(args.epsilon, value, achieved, met, zero_only)
    ]
    given = ", ".join(f"{_SYMBOL[k]} = {fmt_steps(v) if k == 'steps' else f'{v:g}'}" for k, v in fixed.items())
    console = stdout_console()
    console.print(table(f"{_SYMBOL[args.target]} calibrated for {given}, δ = {args.delta:g} "
                        f"({args.accountant} accountant)",
                        ["target ε", _SYMBOL[args.target], "achieved ε", "≤ target"], rows, numeric=(0, 1, 2)))
    return _report_unattainable(args, fixed, met, orders, zero_only, jump)


#: The end of each calibrated parameter's range where ε is smallest (the library's search brackets)
_SAFEST = {"sigma": 1e4, "q": 1e-12, "steps": 1}


def _report_unattainable(args, fixed: dict, met: np.ndarray, orders, zero_only: np.ndarray, jump) -> int:
    """Exit status 1, with one line on stderr, when a target cannot be met: which targets, the smallest ε
    the accountant certifies (at the safest end of the parameter's range) and what to change; and the
    targets RDP meets only by ε = 0 (``zero_only``, at the value ``jump``), naming the accountant that
    certifies small ε."""
    if met.all():
        return 0
    def named(targets) -> str:
        return f"target{'s' if targets.size > 1 else ''} ε = {', '.join(fmt(t) for t in targets)}"

    symbol, end = _SYMBOL[args.target], _SAFEST[args.target]
    parts = []
    missed = np.asarray(args.epsilon)[~met & ~zero_only]
    if missed.size:
        safest = {**fixed, args.target: _SAFEST[args.target]}
        floor = float(np.min(_achieved(safest, args.delta, orders, args.accountant)))
        hint = "raise σ or lower q" if args.target == "steps" else "raise the target or δ"
        if args.accountant == "rdp" and args.target != "steps":
            hint += ", or try --accountant pld (tighter)"
        if floor > missed.max():
            reason = f"even {symbol} = {end:,g} gives ε = {fmt(floor)}"
        else:
            reason = f"no {symbol} in the calibration's search range meets it"
        parts.append(f"{named(missed)} unattainable with the {args.accountant} accountant: {reason}; {hint}")
    if zero_only.any():
        shown = fmt_steps(jump) if args.target == "steps" else fmt(jump)
        parts.append(f"{named(np.asarray(args.epsilon)[zero_only])} cannot be certified by the rdp accountant: "
                     f"its conversion certifies no ε that small here, only ε = 0 (the (0, δ) bound) at {symbol} = "
                     f"{shown} whatever the target; the pld accountant has no such floor (--accountant pld)")
    print(f"jaxpriv: error: {'; and '.join(parts)}", file=sys.stderr)
    return 1


def _sweep_paths(args) -> dict:
    """Where each sweep output goes: explicit --csv/--json/--plot, else default names under --out."""
    defaults = {"csv": "sweep.csv", "json": "sweep.json", "plot": "epsilon_grid.png"}
    paths = {kind: getattr(args, kind) for kind in defaults}
    if args.out:
        paths = {kind: path or os.path.join(args.out, defaults[kind]) for kind, path in paths.items()}
    return {kind: path for kind, path in paths.items() if path}


def _check_sweep(args) -> None:
    """The files --out names by default are writable (--csv/--json/--plot given are checked with every
    output path); a heatmap needs a 2-D (q, σ) slice with q > 0 (log axis): fail before a long sweep, not
    after."""
    paths = _sweep_paths(args)
    if args.out and os.path.isdir(args.out):  # a directory --out would create is empty
        for kind, path in paths.items():
            if getattr(args, kind) is None:
                check_output_file(f"--out's {kind}", path)
    if "plot" not in paths:
        return
    if args.steps.size != 1 or args.delta.size != 1:
        raise ValueError("--plot needs a single --steps and a single --delta value")
    if args.q.size < 2 or args.sigma.size < 2 or not np.all(args.q > 0):
        raise ValueError("--plot needs at least 2 values of --q (all > 0, log axis) and of --sigma")


def _write_csv(path: str, rows: list[dict]) -> None:
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)  # floats are written with repr(): they read back exactly


def _write_json(path: str, grid, orders: str) -> None:
    document = {
        "grid": {name: getattr(grid, name).tolist() for name in ("q", "sigma", "steps", "delta")},
        "orders": orders,
        "accountant": grid.accountant,
        "seconds": grid.seconds,
        "results": [{k: json_value(v) for k, v in row.items()} for row in grid.rows()],
    }
    with open(path, "w", encoding="utf-8") as f:
        json.dump(document, f)


def cmd_sweep(args) -> int:
    from rich.markup import escape

    from .. import report

    paths = _sweep_paths(args)
    # dpsgd_epsilon chunks the grid and shows its own progress bar when there is more than one chunk.
    grid = report.epsilon_grid(args.q, args.sigma, args.steps, args.delta, orders=report.ORDER_SETS[args.orders],
                               chunk_size=args.chunk_size, accountant=args.accountant)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
    if "csv" in paths:
        _write_csv(paths["csv"], grid.rows())
    if "json" in paths:
        _write_json(paths["json"], grid, args.orders)
    if "plot" in paths:
        title = f"DP-SGD ε, T = {fmt_steps(grid.steps[0])}, δ = {grid.delta[0]:g}"
        report.plot_epsilon_grid(grid.q, grid.sigma, grid.epsilon[:, :, 0, 0], paths["plot"], title,
                                 label=_GRID_LABEL[args.accountant])

    eps = grid.epsilon[np.isfinite(grid.epsilon)]
    shape = " × ".join(str(a.size) for a in (grid.q, grid.sigma, grid.steps, grid.delta))
    console = stdout_console()
    if grid.size == 1:  # one configuration: its ε (no spread, and no rate worth stating)
        spread = [["ε", fmt(float(grid.epsilon.flat[0]))]]
    else:
        spread = [["min ε", fmt(eps.min()) if eps.size else "-"],
                  ["median ε", fmt(np.median(eps)) if eps.size else "-"],
                  ["max ε", fmt(eps.max()) if eps.size else "-"],
                  ["infinite ε", f"{grid.size - eps.size:,}"]]
    rate = grid.size / grid.seconds if grid.seconds > 0 else math.inf
    timing = [["time", f"{grid.seconds:.2f} s (compilation included)"]]
    if grid.size > 1:
        timing.append(["configurations/s", f"{rate:,.0f}" if rate >= 10 else f"{rate:.2g}"])
    console.print(table("ε sweep", None, [
        ["configurations", f"{grid.size:,} (q × σ × T × δ = {shape})"],
        ["accountant", args.accountant],
        *spread,
        *timing,
    ], numeric=()))
    for kind, path in paths.items():
        console.print(f"wrote {kind}: {escape(path)}", soft_wrap=True)  # paths never wrap
    return 0
