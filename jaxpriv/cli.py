"""The ``jaxpriv`` command: ε of DP-SGD, calibration of σ / q / T, ε sweeps and the privacy report.

    jaxpriv epsilon --q 0.01 --sigma 1.1 --steps 10000 --delta 1e-5
    jaxpriv calibrate sigma --epsilon 1,2,4,8 --q 0.01 --steps 10000 --delta 1e-5 --accountant pld
    jaxpriv sweep --q 1e-3:0.1:25:log --sigma 0.6:3:40 --steps 10000 --delta 1e-5 --out sweep-out
    jaxpriv shuffle --budgets uniform:0.05,1 --n 10000 --delta 1e-8
    jaxpriv report --quick --out reproduce-out
    jaxpriv train --dataset digits --epsilon 3 --delta 1e-5 --json train.json --plot curve.png

Exit status: 0 on success; 2 on a bad argument, with a one-line message naming it and its valid range.
Every argument and output path is checked before JAX is imported, so a mistake is reported at once:
argparse catches malformed numbers and grids, unknown choices and missing arguments; the ranges and
paths are checked next (numpy only); the library checks its inputs again (its ``ValueError`` names the
parameter and its range).
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

from . import __version__
from ._checks import check_values

__all__ = ["main", "build_parser", "parse_grid"]

_FORMATTER = argparse.RawDescriptionHelpFormatter
_NAMES = {"sigma": "the noise multiplier σ", "q": "the sampling rate q", "steps": "the number of steps T"}
_HELP = {
    "q": "Poisson sampling rate in (0, 1]",
    "sigma": "noise multiplier σ > 0",
    "steps": "number of steps T ≥ 1",
    "delta": "δ in (0, 1)",
}
_SYMBOL = {"sigma": "σ", "q": "q", "steps": "T"}
#: The accountants of :mod:`jaxpriv.accounting` (named here: the parser must not import JAX)
ACCOUNTANTS = ("best", "pld", "rdp")
_INF = math.inf
#: Valid ranges of the numeric arguments, checked before JAX is imported (the library checks again):
#: argument → (name in the message, lo, hi, lo_open, hi_open)
_DPSGD_RANGES = {"q": ("q", 0.0, 1.0, False, False), "sigma": ("sigma", 0.0, _INF, True, False),
                 "steps": ("steps", 0.0, _INF, False, False), "delta": ("delta", 0.0, 1.0, True, True)}
_CALIBRATE_RANGES = {**_DPSGD_RANGES, "epsilon": ("target_epsilon", 0.0, _INF, True, False),
                     "q": ("q", 0.0, 1.0, True, False), "steps": ("steps", 1.0, _INF, False, False)}
_GRID_LABEL = {"rdp": "ε (RDP accountant, improved conversion)", "pld": "ε (PLD accountant, upper bound)",
               "best": "ε (smaller of the RDP and PLD upper bounds)"}


def main(argv: list[str] | None = None) -> int:
    """Run the command line with ``argv`` (default ``sys.argv[1:]``) and return the exit status."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as stop:  # argparse exits by itself on --help (0) and on usage errors (2)
        return int(stop.code or 0)
    try:
        _check_arguments(args)  # before JAX is imported: a mistake costs no compilation
        return args.handler(args)
    except ValueError as err:  # invalid input: the message names the parameter and its range
        print(f"jaxpriv: error: {err}", file=sys.stderr)
        return 2


class _Parser(argparse.ArgumentParser):
    """argparse with a one-line error message (its default prints the whole usage first)."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message}\n")


# --------------------------------------------------------------------------------------------------
# Argument checks (numpy only: they run before JAX is imported)
# --------------------------------------------------------------------------------------------------


def _check_arguments(args) -> None:
    """Ranges of the numeric arguments, output paths, then the subcommand's own check (``ValueError``)."""
    for dest, (name, lo, hi, lo_open, hi_open) in args.ranges.items():
        if getattr(args, dest, None) is not None:
            check_values(name, getattr(args, dest), lo, hi, lo_open=lo_open, hi_open=hi_open)
    for dest in args.output_dirs:
        if getattr(args, dest):
            _check_output_dir(f"--{dest}", getattr(args, dest))
    for dest in args.output_files:
        if getattr(args, dest):
            _check_output_file(f"--{dest}", getattr(args, dest))
    if args.check is not None:
        args.check(args)


def _check_output_dir(option: str, path: str) -> None:
    """``path`` is a directory we can write into, or one we can create."""
    existing = os.path.abspath(path)
    while not os.path.exists(existing):
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        raise ValueError(f"{option} {path!r} cannot be created: {existing!r} is a file, not a directory")
    if not os.access(existing, os.W_OK):
        raise ValueError(f"{option} {path!r}: directory {existing!r} is not writable")


def _check_output_file(option: str, path: str) -> None:
    """``path`` is a file we can write: its directory exists and is writable, and it is not a directory."""
    if os.path.isdir(path):
        raise ValueError(f"{option} {path!r} is a directory; give a file name")
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        what = "is a file, not a directory" if os.path.exists(directory) else "does not exist"
        raise ValueError(f"{option} {path!r}: {directory!r} {what}")
    if not os.access(directory, os.W_OK) or (os.path.exists(path) and not os.access(path, os.W_OK)):
        raise ValueError(f"{option} {path!r} is not writable")


# --------------------------------------------------------------------------------------------------
# Argument types
# --------------------------------------------------------------------------------------------------


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None


def _positive_int(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}")
    return int(text)


def _rounds_list(text: str) -> list[int]:
    """Comma-separated positive integers (numbers of rounds), e.g. ``1,10,100``."""
    parts = text.split(",")
    if not all(part.strip().isdigit() and int(part) >= 1 for part in parts):
        raise argparse.ArgumentTypeError(f"must be positive integers separated by commas (e.g. 1,10,100), got {text!r}")
    return sorted({int(part) for part in parts})


def parse_grid(text: str) -> np.ndarray:
    """A 1-D array from ``START:STOP:NUM`` (linear), ``START:STOP:NUM:log`` (geometric), ``a,b,c`` or ``a``."""
    if ":" not in text:
        return np.array([_number(part) for part in text.split(",")])
    parts = text.split(":")
    if len(parts) not in (3, 4) or (len(parts) == 4 and parts[3] not in ("log", "lin")):
        raise argparse.ArgumentTypeError(
            f"malformed grid {text!r}; expected START:STOP:NUM[:log], a comma-separated list or one number"
        )
    start, stop, num = _number(parts[0]), _number(parts[1]), _positive_int(parts[2])
    if len(parts) == 4 and parts[3] == "log":
        if not (start > 0 and stop > 0):
            raise argparse.ArgumentTypeError(f"a log grid needs START > 0 and STOP > 0, got {text!r}")
        return np.geomspace(start, stop, num)
    return np.linspace(start, stop, num)


# --------------------------------------------------------------------------------------------------
# Parser
# --------------------------------------------------------------------------------------------------


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
             "tighter, seconds per setting on a CPU); best: the smaller of the two upper bounds "
             f"(default: %(default)s; {why})",
    )


def _defaults(parser, handler, *, ranges=None, dirs=(), files=(), check=None) -> None:
    """A subcommand's handler and what :func:`_check_arguments` checks first: numeric ``ranges``, output
    ``dirs`` and ``files`` (argument names) and a ``check(args)`` of its own."""
    parser.set_defaults(handler=handler, ranges=ranges or {}, output_dirs=dirs, output_files=files, check=check)


def _subparser(subparsers, name: str, summary: str, example: str, **kwargs) -> argparse.ArgumentParser:
    return subparsers.add_parser(
        name, help=summary, description=summary, epilog=f"example:\n  {example}", formatter_class=_FORMATTER,
        **kwargs,
    )


def build_parser() -> argparse.ArgumentParser:
    """The argparse parser of the ``jaxpriv`` command (each subcommand sets ``handler``)."""
    parser = _Parser(
        prog="jaxpriv",
        description="Differential-privacy accounting for DP-SGD: exact RDP, Gaussian DP, calibration.",
        epilog="examples:\n"
        "  jaxpriv epsilon --q 0.01 --sigma 1.1 --steps 10000 --delta 1e-5\n"
        "  jaxpriv report --quick --out reproduce-out\n\n"
        "Compiled kernels are cached in $JAXPRIV_CACHE_DIR (default ~/.cache/jaxpriv/xla; empty disables).",
        formatter_class=_FORMATTER,
    )
    parser.add_argument("--version", action="version", version=f"jaxpriv {__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = _subparser(subparsers, "epsilon", "ε of T steps of DP-SGD (Poisson rate q, noise σ) at δ.",
                   "jaxpriv epsilon --q 0.01 --sigma 1.1 --steps 10000 --delta 1e-5")
    p.add_argument("--q", type=_number, required=True, help="Poisson sampling rate in [0, 1]")
    p.add_argument("--sigma", type=_number, required=True, help="noise multiplier σ > 0")
    p.add_argument("--steps", type=_number, required=True, help="number of steps T ≥ 0")
    p.add_argument("--delta", type=_number, required=True, help="δ in (0, 1)")
    _add_orders(p)
    _add_accountant(p, "best", "the table shows RDP, the PLD interval and the CLT approximation either way; "
                               "this picks the ε reported")
    p.add_argument("--json", action="store_true", help="print a JSON object instead of a table")
    p.add_argument("--refine", action="store_true",
                   help="also search real Rényi orders between the grid points (never worse, slower)")
    _defaults(p, cmd_epsilon, ranges=_DPSGD_RANGES)

    p = _subparser(subparsers, "calibrate", "The σ, q or T that meets each target ε (conservatively).",
                   "jaxpriv calibrate sigma --epsilon 1,2,4,8 --q 0.01 --steps 10000 --delta 1e-5")
    targets = p.add_subparsers(dest="target", required=True, metavar="{sigma,q,steps}")
    for target, needs, example in (
        ("sigma", ("q", "steps"), "jaxpriv calibrate sigma --epsilon 1 --q 0.01 --steps 10000 --delta 1e-5"),
        ("q", ("sigma", "steps"), "jaxpriv calibrate q --epsilon 1,2 --sigma 1.1 --steps 10000 --delta 1e-5"),
        ("steps", ("q", "sigma"), "jaxpriv calibrate steps --epsilon 3 --q 0.01 --sigma 1.1 --delta 1e-5"),
    ):
        t = _subparser(targets, target, f"Calibrate {_NAMES[target]} to target ε.", example)
        t.add_argument("--epsilon", type=parse_grid, required=True,
                       help="target ε > 0: one value, a comma list or START:STOP:NUM[:log]")
        for name in needs:
            t.add_argument(f"--{name}", type=_number, required=True, help=_HELP[name])
        t.add_argument("--delta", type=_number, required=True, help=_HELP["delta"])
        _add_orders(t)
        _add_accountant(t, "rdp", "fast once compiled, and differentiable; pld/best give a smaller "
                                  "σ, a larger q or T, in seconds per target")
        t.add_argument("--json", action="store_true", help="print JSON instead of a table")
        _defaults(t, cmd_calibrate, ranges=_CALIBRATE_RANGES)

    p = _subparser(subparsers, "sweep", "ε of DP-SGD over a grid of (q, σ, T, δ), with CSV/JSON/plot output.",
                   "jaxpriv sweep --q 1e-3:0.1:25:log --sigma 0.6:3:40 --steps 10000 --delta 1e-5 --out sweep-out")
    grid_help = " (START:STOP:NUM[:log], a comma list or one number)"
    p.add_argument("--q", type=parse_grid, required=True, help="sampling rates in [0, 1]" + grid_help)
    p.add_argument("--sigma", type=parse_grid, required=True, help="noise multipliers > 0" + grid_help)
    p.add_argument("--steps", type=parse_grid, required=True, help="numbers of steps ≥ 0" + grid_help)
    p.add_argument("--delta", type=parse_grid, required=True, help="δ values in (0, 1)" + grid_help)
    _add_orders(p)
    _add_accountant(p, "rdp", "thousands of settings per second; pld/best evaluate the PLD setting by setting, "
                              "slow for big grids on a CPU")
    p.add_argument("--out", metavar="DIR", help="write sweep.csv, sweep.json and epsilon_grid.png here")
    p.add_argument("--csv", metavar="FILE",
                   help="write the results as CSV (q,sigma,steps,delta,epsilon,best_order; best_order is nan "
                        "where the PLD bound is reported)")
    p.add_argument("--json", metavar="FILE", help="write the grid and results as JSON")
    p.add_argument("--plot", metavar="FILE", help="heatmap of ε over (q, σ) (needs one T and one δ)")
    p.add_argument("--chunk-size", type=_positive_int, metavar="N",
                   help="configurations per compiled batch (default 4096)")
    _defaults(p, cmd_sweep, ranges=_DPSGD_RANGES, dirs=("out",), files=("csv", "json", "plot"), check=_check_sweep)

    p = _subparser(subparsers, "shuffle", "Central ε of shuffling n users with personalized local budgets, every bound.",
                   "jaxpriv shuffle --budgets uniform:0.05,1 --n 10000 --delta 1e-8 --out shuffle-out")
    p.add_argument("--budgets", required=True, metavar="SPEC",
                   help="uniform:LO,HI | gauss:MEAN,SD[,clip=LO,HI] | levels:E@W,... | a CSV file of budgets")
    p.add_argument("--n", type=_positive_int, help="number of users (not needed with a CSV file)")
    p.add_argument("--delta", type=_number, required=True, help=_HELP["delta"])
    p.add_argument("--rounds", type=_rounds_list, metavar="T[,T...]",
                   help="also compose T rounds (e.g. 1,10,100,1000): the exact pair by PLD beside the seeds' "
                        "compositions, one row per method (and epsilon_vs_rounds.png with --out)")
    p.add_argument("--dims", type=_positive_int, default=1, metavar="B",
                   help="with --rounds: shuffled releases per round (S-APES's uploaded dimensions; default 1)")
    p.add_argument("--out", metavar="DIR", help="write epsilon_vs_n.png and budgets.png here")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    _defaults(p, cmd_shuffle, ranges={"delta": _DPSGD_RANGES["delta"]}, dirs=("out",), check=_check_shuffle)

    p = _subparser(subparsers, "report",
                   "Privacy report of a default DP-SGD run (report.md) and the seeds' systems reproduced on bundled "
                   "data (systems.md), with figures.",
                   "jaxpriv reproduce --quick --out reproduce-out", aliases=["reproduce"])
    p.add_argument("--out", metavar="DIR", default="reproduce-out", help="output directory (default: %(default)s)")
    p.add_argument("--quick", action="store_true", help="coarse grids and small federated runs (a few minutes)")
    p.add_argument("--systems", default="all", metavar="LIST",
                   help="seed systems to reproduce: all, none, or a comma-separated subset of apes,gspa,rpdp,udpfl "
                        "(default: %(default)s)")
    _defaults(p, cmd_report, dirs=("out",), check=_check_report)

    _add_train_parser(subparsers)
    return parser


# --------------------------------------------------------------------------------------------------
# Output helpers
# --------------------------------------------------------------------------------------------------


def _console():
    from rich.console import Console

    return Console(highlight=False)


def _table(title: str, header: list[str], rows: list[list[str]], numeric: tuple[int, ...] = (1,)):
    """A rich table under a bold title line (a table title would wrap to the table's width);
    the ``numeric`` columns are right-aligned."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    table = Table()
    for i, name in enumerate(header):
        table.add_column(name, justify="right" if i in numeric else "left")
    for row in rows:
        table.add_row(*row)
    return Group(Text(title, style="bold"), table)


def _fmt(x: float) -> str:
    return f"{x:.6g}" if math.isfinite(x) else str(x)


def _fmt_steps(x: float) -> str:
    return f"{int(x):,}" if float(x).is_integer() else f"{x:g}"


def _json_value(x: float):
    return float(x) if math.isfinite(x) else None  # strict JSON has no inf


# --------------------------------------------------------------------------------------------------
# Subcommands
# --------------------------------------------------------------------------------------------------


def _interval(lower, upper) -> str:
    return "-" if lower is None else f"[{_fmt(lower)}, {_fmt(upper)}]"


def cmd_epsilon(args) -> int:
    from .report import ORDER_SETS, privacy_summary

    s = privacy_summary(args.q, args.sigma, args.steps, args.delta, orders=ORDER_SETS[args.orders],
                        refine=args.refine, accountant=args.accountant)
    if args.json:
        print(json.dumps({**s, "orders": args.orders}, indent=2))
        return 0
    by = {"rdp": "RDP", "pld": "PLD upper", "best": "the smaller of RDP and PLD upper"}[args.accountant]
    console = _console()
    console.print(f"ε = {_fmt(s['epsilon'])} at δ = {args.delta:g} (accountant {args.accountant}: {by})")
    pld_note = ("bound: the true ε lies in the interval" if s["epsilon_pld_lower"] is not None
                else "needs an integer T")
    console.print(_table(
        f"DP-SGD: q = {args.q:g}, σ = {args.sigma:g}, T = {_fmt_steps(args.steps)}, δ = {args.delta:g}",
        ["accountant", "ε", "note"],
        [
            ["RDP, improved conversion", _fmt(s["epsilon_rdp"]), f"bound; best order α = {s['best_order']:g}"],
            ["RDP, classic conversion", _fmt(s["epsilon_classic"]),
             f"bound, looser; best order α = {s['best_order_classic']:g}"],
            ["PLD \\[lower, upper]", _interval(s["epsilon_pld_lower"], s["epsilon_pld_upper"]), pld_note],
            ["Gaussian DP, CLT", _fmt(s["epsilon_gdp_clt_approximation"]),
             f"approximation, not a bound (μ ≈ {s['gdp_clt_mu_approximation']:.4g})"],
        ],
    ))
    return 0


def _solve(target: str, epsilon, params: dict, delta: float, orders, accountant: str) -> np.ndarray:
    """The calibrated parameter for each target ε (inf or 0 where a target cannot be met)."""
    from . import calibrate

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
    from . import accounting, events
    from .accountant import dpsgd_epsilon

    if accountant == "rdp":
        return np.asarray(dpsgd_epsilon(delta=delta, orders=orders, **params))
    step = events.PoissonSampled(params["q"], events.Gaussian(params["sigma"]))
    return accounting.epsilon(events.SelfComposed(step, params["steps"]), delta, accountant=accountant)


def cmd_calibrate(args) -> int:
    from .report import ORDER_SETS

    orders = ORDER_SETS[args.orders]
    fixed = {name: getattr(args, name) for name in ("q", "sigma", "steps") if name != args.target}
    value = _solve(args.target, args.epsilon, fixed, args.delta, orders, args.accountant)
    met = np.isfinite(value) & (value > 0)  # σ = inf, q = 0 or T = 0: the target is out of reach
    # Recompute ε at the calibrated value: it shows the guarantee holds (achieved ≤ target).
    params = {**fixed, args.target: np.where(met, value, 1.0)}
    achieved = np.where(met, _achieved(params, args.delta, orders, args.accountant), np.nan)

    if args.json:
        rows = [{"target_epsilon": float(t), args.target: _json_value(v) if m else None,
                 "achieved_epsilon": _json_value(a), **fixed, "delta": args.delta, "accountant": args.accountant}
                for t, v, a, m in zip(args.epsilon, value, achieved, met)]
        print(json.dumps(rows, indent=2))
        return 0
    fmt = _fmt_steps if args.target == "steps" else _fmt
    rows = [
        [_fmt(t), fmt(v), _fmt(a), "yes" if a <= t else "NO"] if m else [_fmt(t), "unattainable", "-", "-"]
        for t, v, a, m in zip(args.epsilon, value, achieved, met)
    ]
    given = ", ".join(f"{_SYMBOL[k]} = {_fmt_steps(v) if k == 'steps' else f'{v:g}'}" for k, v in fixed.items())
    console = _console()
    console.print(_table(f"{_SYMBOL[args.target]} calibrated for {given}, δ = {args.delta:g} "
                         f"({args.accountant} accountant)",
                         ["target ε", _SYMBOL[args.target], "achieved ε", "≤ target"], rows, numeric=(0, 1, 2)))
    if not met.all():
        console.print("unattainable: no value of the parameter meets that ε with this accountant")
    return 0


def _sweep_paths(args) -> dict:
    """Where each sweep output goes: explicit --csv/--json/--plot, else default names under --out."""
    defaults = {"csv": "sweep.csv", "json": "sweep.json", "plot": "epsilon_grid.png"}
    paths = {kind: getattr(args, kind) for kind in defaults}
    if args.out:
        paths = {kind: path or os.path.join(args.out, defaults[kind]) for kind, path in paths.items()}
    return {kind: path for kind, path in paths.items() if path}


def _check_sweep(args) -> None:
    """A heatmap needs a 2-D (q, σ) slice with q > 0 (log axis): fail before a long sweep, not after."""
    if "plot" not in _sweep_paths(args):
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
        "results": [{k: _json_value(v) for k, v in row.items()} for row in grid.rows()],
    }
    with open(path, "w", encoding="utf-8") as f:
        json.dump(document, f)


def cmd_sweep(args) -> int:
    from rich.markup import escape

    from . import report

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
        title = f"DP-SGD ε, T = {_fmt_steps(grid.steps[0])}, δ = {grid.delta[0]:g}"
        report.plot_epsilon_grid(grid.q, grid.sigma, grid.epsilon[:, :, 0, 0], paths["plot"], title,
                                 label=_GRID_LABEL[args.accountant])

    eps = grid.epsilon[np.isfinite(grid.epsilon)]
    shape = " × ".join(str(a.size) for a in (grid.q, grid.sigma, grid.steps, grid.delta))
    console = _console()
    console.print(_table("ε sweep", ["", ""], [
        ["configurations", f"{grid.size:,} (q × σ × T × δ = {shape})"],
        ["accountant", args.accountant],
        ["min ε", _fmt(eps.min()) if eps.size else "-"],
        ["median ε", _fmt(np.median(eps)) if eps.size else "-"],
        ["max ε", _fmt(eps.max()) if eps.size else "-"],
        ["infinite ε", f"{grid.size - eps.size:,}"],
        ["time", f"{grid.seconds:.2f} s (compilation included)"],
        ["configurations/s", f"{rate:,.0f}" if (rate := grid.size / grid.seconds) >= 10 else f"{rate:.2g}"],
    ], numeric=()))
    for kind, path in paths.items():
        console.print(f"wrote {kind}: {escape(path)}", soft_wrap=True)  # paths never wrap
    return 0


def _check_report(args) -> None:
    from .reproduce import parse_systems  # no JAX

    args.system_list = parse_systems(args.systems)


def cmd_report(args) -> int:
    from rich.markup import escape

    from . import report

    from .reproduce import reproduce_systems

    console = _console()
    systems = args.system_list
    files = report.write_report(args.out, quick=args.quick, status=lambda stage: console.print(f"… {stage}"))
    s = files["summary"]
    console.print(_table("privacy of the default DP-SGD setting", ["accountant", "ε"], [
        ["RDP, improved conversion", _fmt(s["epsilon_rdp"])],
        ["RDP, classic conversion", _fmt(s["epsilon_classic"])],
        ["PLD \\[lower, upper]", _interval(s["epsilon_pld_lower"], s["epsilon_pld_upper"])],
        ["Gaussian DP, CLT (approximation)", _fmt(s["epsilon_gdp_clt_approximation"])],
    ]))
    for kind in ("report", "epsilon_grid", "sigma_vs_epsilon"):
        console.print(f"wrote {escape(files[kind])}", soft_wrap=True)
    if systems:
        done = reproduce_systems(args.out, quick=args.quick, systems=systems,
                                 status=lambda what: console.print(f"… {what}"))
        console.print(f"wrote {escape(done['systems'])}", soft_wrap=True)
    return 0


def _check_shuffle(args) -> None:
    from .shuffle import budgets as budget_specs  # numpy only

    args.budget_values = budget_specs.budgets(args.budgets, args.n)


def cmd_shuffle(args) -> int:
    from rich.markup import escape

    from .shuffle import budgets as budget_specs
    from .shuffle import summary
    from .shuffle.personalized import personalized_epsilon

    eps = args.budget_values
    rows = summary.shuffle_summary(eps, args.delta)
    composed = None
    if args.rounds:
        from .shuffle.rounds import rounds_summary

        composed = rounds_summary(eps, args.delta, args.rounds, dims=args.dims)
    if args.json:
        out = {"budgets": args.budgets, "n": int(eps.size), "delta": args.delta,
               "bounds": [{**r, "epsilon": _json_value(r["epsilon"])} for r in rows]}
        if composed:
            out["rounds"] = {"rounds": args.rounds, "dims": args.dims, "methods": [
                {"name": name, "kind": row["kind"], "note": row["note"],
                 "epsilon": [_json_value(x) for x in row["epsilon"]]} for name, row in composed.items()]}
        print(json.dumps(out, indent=2))
    else:
        console = _console()
        console.print(_table(
            f"shuffling n = {eps.size:,} users, budgets {args.budgets} (ε from {eps.min():g} to {eps.max():g})",
            ["accountant", "central ε", "δ", "kind", "note"],
            [[r["name"], _fmt(r["epsilon"]), f"{r['delta']:.3g}", r["kind"], r["note"]] for r in rows],
            numeric=(1, 2),
        ))
        if composed:
            per = f", {args.dims} releases per round" if args.dims > 1 else ""
            console.print(_table(
                f"central ε after T rounds{per} (worst-case user, δ = {args.delta:g})",
                ["method", *[f"T = {t:,}" for t in args.rounds], "kind"],
                [[name, *[f"{x:.4g}" for x in row["epsilon"]], "approx." if row["kind"] == "approximation" else "bound"]
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
                _console().print(f"wrote {escape(path)}", soft_wrap=True)
    return 0


# --------------------------------------------------------------------------------------------------
# train
# --------------------------------------------------------------------------------------------------


def _add_train_parser(subparsers) -> None:
    p = _subparser(
        subparsers, "train",
        "Train a classifier with DP-SGD on a bundled dataset, accounting ε after every epoch.",
        "jaxpriv train --dataset digits --epsilon 3 --delta 1e-5 --json train.json --plot curve.png",
    )
    p.add_argument("--dataset", choices=("digits", "breast_cancer"), default="digits",
                   help="bundled UCI dataset (default: %(default)s)")
    p.add_argument("--epsilon", type=_number,
                   help="target ε > 0: σ is calibrated to spend it over the run; with --budgets, a cap on every "
                        "record's budget")
    p.add_argument("--delta", type=_number, default=1e-5, help="δ in (0, 1) (default: %(default)g)")
    p.add_argument("--budgets", metavar="SPEC",
                   help="per-record budgets: uniform:LO,HI | gauss:MEAN,SD[,clip=LO,HI] | levels:E@W,... | a CSV "
                        "file with one budget per training record (assigned to records in a seeded random order)")
    p.add_argument("--personalization", choices=("sample", "scale"), default="sample",
                   help="with --budgets: IDP-SGD 'sample' (per-record rates, shared σ) or 'scale' (per-record "
                        "clip norms and noise multipliers, shared rate) (default: %(default)s)")
    p.add_argument("--noise-multiplier", type=_number, metavar="SIGMA",
                   help="fixed σ > 0: without --epsilon/--budgets ε is only reported; with them, rates are "
                        "calibrated instead of σ")
    p.add_argument("--mechanism", choices=("gaussian", "laplace", "staircase"), default="gaussian",
                   help="noise: 'gaussian' (L2 clipping) or 'laplace' (L1 clipping, per-coordinate Laplace; "
                        "--noise-multiplier is then the Laplace scale per unit L1 sensitivity; no --budgets) "
                        "(default: %(default)s)")
    p.add_argument("--epochs", type=_positive_int, default=20, help="epochs (default: %(default)s)")
    p.add_argument("--batch-size", type=_number, default=128.0,
                   help="expected batch size Σq (Poisson sampling) (default: %(default)g)")
    p.add_argument("--clip", type=_number, default=1.0, help="per-example clip norm C > 0 (default: %(default)g)")
    p.add_argument("--lr", type=_number, default=0.1, help="SGD learning rate (default: %(default)g)")
    p.add_argument("--momentum", type=_number, default=0.9, help="SGD momentum in [0, 1) (default: %(default)g)")
    p.add_argument("--model", choices=("mlp", "cnn"), default="mlp", help="classifier (default: %(default)s)")
    p.add_argument("--hidden", type=_positive_int, default=64, help="MLP hidden width (default: %(default)s)")
    p.add_argument("--seed", type=int, default=0, help="seed of the model, sampler and noise (default: %(default)s)")
    p.add_argument("--split-seed", type=int, default=0, help="seed of the train/test split (default: %(default)s)")
    p.add_argument("--test-fraction", type=_number, default=0.2, help="held-out fraction (default: %(default)g)")
    p.add_argument("--checkpoint", metavar="DIR", help="save after every epoch here and resume from it")
    p.add_argument("--json", metavar="FILE", help="write the run's summary (test_accuracy, epsilon, history) as JSON")
    p.add_argument("--plot", metavar="FILE", help="learning curve: test accuracy and ε per epoch")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    _defaults(p, cmd_train, dirs=("checkpoint",), files=("json", "plot"), check=_check_train)


def _record_budgets(spec: str, n: int, seed: int, cap: float | None) -> np.ndarray:
    """One budget per training record from a budget specification (jaxpriv.shuffle.budgets), in a seeded
    random order (the spec's values are sorted quantiles); capped at ``cap`` when given."""
    from .shuffle.budgets import budgets as budget_values

    values = budget_values(spec, n)
    if values.size != n:
        raise ValueError(f"budgets file {spec!r} has {values.size} budgets, the training set {n} records")
    values = values[np.random.default_rng(seed).permutation(n)]
    return values if cap is None else np.minimum(values, cap)


def _check_train(args) -> None:
    """Load the data and check the whole run's configuration (numpy only) before JAX is imported."""
    from .train import data as datasets
    from .train.config import DPSGDConfig, check_config

    if args.epsilon is None and args.budgets is None and args.noise_multiplier is None:
        raise ValueError("train needs --epsilon (a target), --budgets (per-record targets) or --noise-multiplier")
    if not 0 <= args.momentum < 1:
        raise ValueError(f"momentum must lie in [0, 1), got {args.momentum!r}")
    if not args.lr > 0:
        raise ValueError(f"lr must be > 0, got {args.lr!r}")
    d = datasets.load(args.dataset, test_fraction=args.test_fraction, seed=args.split_seed)
    features = int(np.prod(d.feature_shape))
    if args.model == "cnn" and round(math.sqrt(features)) ** 2 != features:
        raise ValueError(f"model 'cnn' needs square images; dataset {args.dataset} has {features} features")
    budgets = None
    if args.budgets is not None:
        budgets = _record_budgets(args.budgets, d.n_train, args.seed, args.epsilon)
    config = DPSGDConfig(
        epochs=args.epochs, batch_size=args.batch_size, clip_norm=args.clip, delta=args.delta,
        epsilon=None if budgets is not None else args.epsilon, noise_multiplier=args.noise_multiplier,
        budgets=budgets, personalization=args.personalization, seed=args.seed, mechanism=args.mechanism,
    )
    check_config(config, d.n_train)
    args.data, args.config = d, config


def cmd_train(args) -> int:
    import optax
    from flax import nnx
    from rich.markup import escape

    from .train import dpsgd

    d, config, budgets = args.data, args.config, args.config.budgets
    rngs = nnx.Rngs(args.seed)
    features = int(np.prod(d.feature_shape))
    if args.model == "cnn":
        model = dpsgd.CNN(round(math.sqrt(features)), 1, d.num_classes, rngs=rngs)
    else:
        model = dpsgd.MLP(features, (args.hidden,), d.num_classes, rngs=rngs)
    optimizer = optax.sgd(args.lr, momentum=args.momentum or None)
    result = dpsgd.train(model, optimizer, d, config, progress=not args.quiet, checkpoint_dir=args.checkpoint)

    summary = {
        "dataset": args.dataset, "model": args.model, **result.to_json(),
        "config": config.to_json(),
        "optimizer": {"name": "sgd", "lr": args.lr, "momentum": args.momentum},
        "budgets_spec": args.budgets,
    }
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(summary, f, indent=2)
    if args.plot:
        dpsgd.plot_learning_curve(result.history, args.plot,
                                  f"DP-SGD on {args.dataset} ({args.model}), δ = {args.delta:g}")

    console = _console()
    console.print(_table(
        f"DP-SGD ({args.mechanism}) on {args.dataset}: {result.plan.mode}, T = {result.steps:,} steps, δ = {args.delta:g}",
        ["epoch", "steps", "test accuracy", "ε spent"],
        [[str(r.epoch), f"{r.steps:,}", f"{r.test_accuracy:.4f}", _fmt(r.epsilon)] for r in result.history],
        numeric=(0, 1, 2, 3),
    ))
    groups = summary["plan"]["groups"]
    if len(groups) > 1 or budgets is not None:
        title = "privacy groups (records with the same budget)"
        if len(groups) > 12:  # continuous budgets: one group per record; show a spread, the JSON has all
            title = f"12 of {len(groups):,} privacy groups (records with the same budget; --json lists all)"
            groups = [groups[i] for i in np.linspace(0, len(groups) - 1, 12).round().astype(int)]
        console.print(_table(
            title,
            ["budget ε", "records", "rate q", "noise σ", "clip C", "ε spent"],
            [[_fmt(g["budget"]) if g["budget"] is not None else "-", f"{g['records']:,}", _fmt(g["rate"]),
              _fmt(g["noise_multiplier"]), _fmt(g["clip_norm"]), _fmt(g["epsilon"])] for g in groups],
            numeric=(0, 1, 2, 3, 4, 5),
        ))
    console.print(f"test accuracy {result.test_accuracy:.4f}, ε = {_fmt(result.epsilon)} at δ = {args.delta:g} "
                  f"({result.stopped}; {result.seconds:.1f} s)")
    for kind in ("json", "plot"):
        if getattr(args, kind):
            console.print(f"wrote {kind}: {escape(getattr(args, kind))}", soft_wrap=True)
    return 0
