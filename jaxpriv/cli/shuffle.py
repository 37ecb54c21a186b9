"""``jaxpriv shuffle``: the central ε of shuffling n users with personalized local budgets, by every
bound, composed over rounds with ``--rounds``, with figures under ``--out``.

The budgets are read and checked with numpy only (:func:`jaxpriv.cli.rules.budget_values`); the handler
imports the library when it runs.
"""

from __future__ import annotations

import json
import os

import numpy as np

from .rules import BUDGETS_HELP, add_number, budget_values, defaults, subparser
from .tables import fmt, json_value, stdout_console, table


def add_shuffle_parser(subparsers) -> None:
    """``shuffle``: a budget specification (or a CSV file of budgets), n, δ and the rounds to compose."""
    p = subparser(subparsers, "shuffle",
                  "Central ε of shuffling n users with personalized local budgets, every bound.",
                  "jaxpriv shuffle --budgets uniform:0.05,1 --n 10000 --delta 1e-8 --out shuffle-out")
    p.add_argument("--budgets", required=True, metavar="BUDGETS",
                   help=f"local budgets: {BUDGETS_HELP} | a CSV file of budgets")
    add_number(p, "n", extra="not needed with a CSV file")
    add_number(p, "delta", required=True)
    add_number(p, "rounds", metavar="T[,T...]",
               extra="e.g. 1,10,100,1000: the exact pair by PLD beside the seeds' compositions, one row per "
                     "method (and epsilon_vs_rounds.png with --out)")
    add_number(p, "dims", default=1, metavar="B", extra="with --rounds (S-APES's uploaded dimensions)")
    p.add_argument("--out", metavar="DIR", help="write epsilon_vs_n.png and budgets.png here")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    defaults(p, cmd_shuffle, dirs=("out",), check=_check_shuffle)


def _check_shuffle(args) -> None:
    args.budget_values = budget_values(args.budgets, args.n)
    if args.rounds:
        args.rounds = sorted(set(args.rounds))


def cmd_shuffle(args) -> int:
    from rich.markup import escape

    from ..shuffle import budgets as budget_specs
    from ..calibrate import shuffle_summary as summary
    from ..shuffle.personalized import personalized_epsilon

    eps = args.budget_values
    rows = summary.shuffle_summary(eps, args.delta)
    composed = None
    if args.rounds:
        from ..calibrate.shuffle_rounds import rounds_summary

        composed = rounds_summary(eps, args.delta, args.rounds, dims=args.dims)
    if args.json:
        out = {"budgets": args.budgets, "n": int(eps.size), "delta": args.delta,
               "bounds": [{**r, "epsilon": json_value(r["epsilon"])} for r in rows]}
        if composed:
            out["rounds"] = {"rounds": args.rounds, "dims": args.dims, "methods": [
                {"name": name, "kind": row["kind"], "note": row["note"],
                 "epsilon": [json_value(x) for x in row["epsilon"]]} for name, row in composed.items()]}
        print(json.dumps(out, indent=2))
    else:
        console = stdout_console()
        console.print(table(
            f"shuffling n = {eps.size:,} users, budgets {args.budgets} (ε from {eps.min():g} to {eps.max():g})",
            ["accountant", "central ε", "δ", "kind", "note"],
            [[r["name"], fmt(r["epsilon"]), f"{r['delta']:.3g}", _kind(r["kind"]), r["note"]] for r in rows],
            numeric=(1, 2),
        ))
        if composed:
            per = f", {args.dims} releases per round" if args.dims > 1 else ""
            console.print(table(
                f"central ε after T rounds{per} (worst-case user, δ = {args.delta:g})",
                ["method", *[f"T = {t:,}" for t in args.rounds], "kind"],
                [[name, *[f"{x:.4g}" for x in row["epsilon"]], _kind(row["kind"])]
                 for name, row in composed.items()],
                numeric=tuple(range(1, len(args.rounds) + 1)),
            ))
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        if os.path.isfile(args.budgets):
            population = lambda n: np.resize(eps, n)  # a file's budgets, repeated to reach n
        else:
            population = lambda n: budget_specs.budgets(args.budgets, n)
        ns = np.unique(np.geomspace(100, max(10 * eps.size, 1000), 12).astype(int))
        curves = summary.epsilon_versus_n(population, ns, args.delta)
        paths = [
            summary.plot_epsilon_versus_n(ns, curves, os.path.join(args.out, "epsilon_vs_n.png"),
                                          f"central ε vs n, budgets {args.budgets}, δ = {args.delta:g}"),
            summary.plot_budgets(eps, os.path.join(args.out, "budgets.png"), f"local budgets ({args.budgets})",
                                 per_user=personalized_epsilon(eps, args.delta, model="gspa", per_user=True)),
        ]
        if composed:
            paths.append(summary.plot_epsilon_versus_rounds(
                args.rounds, composed, os.path.join(args.out, "epsilon_vs_rounds.png"),
                f"central ε vs rounds, n = {eps.size:,}, budgets {args.budgets}, δ = {args.delta:g}"))
        if not args.json:
            for path in paths:
                stdout_console().print(f"wrote {escape(path)}", soft_wrap=True)
    return 0


def _kind(kind: str) -> str:
    """A table's "kind" column: "bound" or "approx." (an approximation, not a bound)."""
    return "approx." if kind == "approximation" else kind
