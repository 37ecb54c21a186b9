"""The ``jaxpriv`` command: ε of DP-SGD, calibration of σ / q / T, ε sweeps and the privacy report.

    jaxpriv epsilon --q 0.01 --sigma 1.1 --steps 10000 --delta 1e-5
    jaxpriv calibrate sigma --epsilon 1,2,4,8 --q 0.01 --steps 10000 --delta 1e-5 --accountant pld
    jaxpriv sweep --q 1e-3:0.1:25:log --sigma 0.6:3:40 --steps 10000 --delta 1e-5 --out sweep-out
    jaxpriv shuffle --budgets uniform:0.05,1 --n 10000 --delta 1e-8
    jaxpriv report --quick --out reproduce-out
    jaxpriv train --dataset digits --epsilon 3 --delta 1e-5 --json train.json --plot curve.png

Exit status: 0 on success; 1 when ``calibrate`` finds that a target ε cannot be met (the table or JSON
still lists every target; one line on stderr says which and why: this needs the computation, so it is
never a usage error); 2 on a bad argument, with a one-line message naming it and its valid range.
Every argument and output path is checked before JAX is imported, so a mistake is reported at once:
argparse catches malformed numbers and grids, unknown choices and missing arguments; the ranges and
paths are checked next (numpy only); the library checks its inputs again (its ``ValueError`` names the
parameter and its range).

One table of argument rules, :data:`RULES`, gives every numeric option its type, valid range and help
phrase: ``--help`` states the range the check enforces, and an option means the same in every
subcommand. Where a subcommand needs a narrower range (``calibrate`` needs q > 0 and T ≥ 1), its rule is
derived with :meth:`Rule.narrow`, and its help says so and why. Integer options accept any spelling of
an exact integer (``10000``, ``1e4``, ``10_000``) and reject a fraction (``2.5``).

Tables fit the console: a full table where it fits, else a compact one, else one whose notes move to
numbered footnotes below it, so no row wraps. Output that is not a terminal is 80 columns wide (or
``$COLUMNS``).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import sys
import warnings
from typing import NamedTuple

import numpy as np

from . import __version__

__all__ = ["main", "build_parser", "parse_grid", "Rule", "RULES"]

_FORMATTER = argparse.RawDescriptionHelpFormatter
_NAMES = {"sigma": "the noise multiplier σ", "q": "the sampling rate q", "steps": "the number of steps T"}
_SYMBOL = {"sigma": "σ", "q": "q", "steps": "T"}
#: The accountants of :mod:`jaxpriv.accounting` (named here: the parser must not import JAX)
ACCOUNTANTS = ("best", "pld", "rdp")
_INF = math.inf


# --------------------------------------------------------------------------------------------------
# The argument rules: one table for every subcommand, its help text and its checks
# --------------------------------------------------------------------------------------------------


class Rule(NamedTuple):
    """One numeric option: the name its messages use, the phrase its help starts with, its valid range
    and whether it takes integers. ``--help`` and the check both read the rule, so the range a help text
    states is the range that is checked; ``why`` is set on a subcommand's narrower copy (:meth:`narrow`)."""

    name: str
    phrase: str
    lo: float
    hi: float = _INF
    lo_open: bool = False
    hi_open: bool = False
    integer: bool = False
    why: str = ""

    @property
    def range(self) -> str:
        """The valid range as messages and help texts write it, e.g. ``[0.0, 1.0]`` or ``[1, inf)``."""
        def bound(x):
            return "inf" if math.isinf(x) else str(int(x)) if self.integer else str(float(x))

        left = "(" if self.lo_open or self.lo == -_INF else "["
        right = ")" if self.hi_open or self.hi == _INF else "]"
        return f"{left}{bound(self.lo)}, {bound(self.hi)}{right}"

    def help(self, grid: bool = False, extra: str = "") -> str:
        """``--help`` text: the phrase, the range (and why a subcommand narrows it), then ``extra``."""
        text = f"{'integer ' if self.integer else ''}{self.phrase} in {self.range}"
        if self.why:
            text += f" ({self.why})"
        if grid:
            text += ": one value, a comma list or START:STOP:NUM[:log]"
        return text + (f"; {extra}" if extra else "")

    def narrow(self, why: str, **bounds) -> "Rule":
        """A subcommand's narrower copy: new ``bounds`` (lo, hi, lo_open, hi_open, integer), and its help
        says so."""
        narrower = self._replace(**bounds)
        return narrower._replace(why=f"narrower than the shared {self.range}: {why}")

    def check(self, value) -> None:
        """``ValueError`` naming the option and its range, for a number, a list or a grid of numbers."""
        arr = np.asarray(value, dtype=np.float64)
        valid = f"{self.name} must lie in {self.range}"
        for what, bad in (("NaN", np.isnan(arr)), ("inf", np.isinf(arr))):
            if bad.any():
                raise ValueError(f"{self.name} contains {what}; {valid}")
        ok = (arr > self.lo) if self.lo_open else (arr >= self.lo)
        ok &= (arr < self.hi) if self.hi_open else (arr <= self.hi)
        if not ok.all():
            raise ValueError(f"{valid}, got {self._shown(arr[~ok].flat[0])}")
        fraction = np.floor(arr) != arr
        if self.integer and fraction.any():
            first = self._shown(arr[fraction].flat[0])
            raise ValueError(f"{self.name} must be an integer in {self.range}, got {first}")

    def _shown(self, x) -> str:
        x = float(x)
        return str(int(x)) if self.integer and x.is_integer() else repr(x)


_SEED = dict(lo=0.0, hi=2.0**32 - 1, integer=True)
#: Every numeric option of every subcommand, by argparse ``dest``. Checked before JAX is imported (the
#: library checks its inputs again, some against the data, e.g. ``--batch-size`` ≤ the training set).
RULES: dict[str, Rule] = {
    # DP-SGD accounting: epsilon, calibrate, sweep (and train's --epsilon, --delta)
    "q": Rule("q", "Poisson sampling rate q", 0.0, 1.0),
    "sigma": Rule("sigma", "noise multiplier σ", 0.0, lo_open=True),
    "steps": Rule("steps", "number of steps T", 0.0, integer=True),
    "delta": Rule("delta", "δ", 0.0, 1.0, lo_open=True, hi_open=True),
    "epsilon": Rule("epsilon", "target ε", 0.0, lo_open=True),
    "chunk_size": Rule("chunk_size", "configurations per compiled batch", 1.0, integer=True),
    # shuffle
    "n": Rule("n", "number of users n", 2.0, integer=True),
    "rounds": Rule("rounds", "rounds T to compose (comma-separated)", 1.0, integer=True),
    "dims": Rule("dims", "shuffled releases per round B", 1.0, integer=True),
    # train
    "noise_multiplier": Rule("noise_multiplier", "fixed noise multiplier σ", 0.0, lo_open=True),
    "epochs": Rule("epochs", "number of epochs", 0.0, lo_open=True),
    "batch_size": Rule("batch_size", "expected batch size Σq (Poisson sampling)", 0.0, lo_open=True),
    # epsilon, calibrate and sweep's training schedule (with batch_size and epochs: see _add_schedule)
    "dataset_size": Rule("dataset_size", "number of training records N", 1.0, integer=True),
    "clip": Rule("clip_norm", "per-example clip norm C", 0.0, lo_open=True),
    "lr": Rule("lr", "SGD learning rate", 0.0, lo_open=True),
    "momentum": Rule("momentum", "SGD momentum", 0.0, 1.0, hi_open=True),
    "hidden": Rule("hidden", "MLP hidden width", 1.0, integer=True),
    "seed": Rule("seed", "seed of the model, sampler and noise", **_SEED),
    "split_seed": Rule("split_seed", "seed of the train/test split", **_SEED),
    "test_fraction": Rule("test_fraction", "held-out fraction", 0.0, 1.0, lo_open=True, hi_open=True),
}
#: calibrate solves for one of σ, q, T given the others: q = 0 or T = 0 spends no privacy at all
_CALIBRATE_RULES = {
    "q": RULES["q"].narrow("q = 0 spends no privacy, so there is nothing to calibrate", lo_open=True),
    "steps": RULES["steps"].narrow("T = 0 spends no privacy, so there is nothing to calibrate", lo=1.0),
}

#: The budget specifications of :func:`jaxpriv.shuffle.budgets.budgets` (shuffle and train --budgets)
_BUDGETS_HELP = ("uniform:LO,HI | gauss:MEAN,SD[,clip=LO,HI] | levels:E@W,... (each weight W in (0, 1], "
                 "summing to 1) | scenario:NAME[,seed=S]")
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
    """The rules of the numeric arguments (:data:`RULES`), output paths, then the subcommand's own check
    (``ValueError``)."""
    for dest, rule in args.rules.items():
        if getattr(args, dest, None) is not None:
            rule.check(getattr(args, dest))
    _apply_schedule(args)  # --dataset-size/--batch-size/--epochs → q, steps
    for dest in args.output_dirs:
        if getattr(args, dest):
            _check_output_dir(f"--{dest}", getattr(args, dest))
    for dest in args.output_files:
        if getattr(args, dest):
            _check_output_file(f"--{dest}", getattr(args, dest))
    if args.check is not None:
        args.check(args)


def _apply_schedule(args) -> None:
    """A subcommand with :func:`_add_schedule`'s options gets q (and T) from them: q = B/N, T = ⌈E·N/B⌉
    (:func:`jaxpriv.schedule.sampling_and_steps`); they and --q/--steps exclude each other, and one of the
    two ways is required. ``ValueError`` with one line otherwise."""
    derives, grid = getattr(args, "schedule", ()), getattr(args, "schedule_grid", False)
    if not derives:
        return
    options = ("dataset_size", "batch_size", "epochs") if "steps" in derives else ("dataset_size", "batch_size")
    def flags(dests) -> str:  # "--a", "--a and --b", "--a, --b and --c"
        names = ["--" + dest.replace("_", "-") for dest in dests]
        return " and ".join([", ".join(names[:-1]), names[-1]] if len(names) > 1 else names)

    given = [dest for dest in options if getattr(args, dest) is not None]
    direct = [dest for dest in derives if getattr(args, dest) is not None]
    if given and direct:
        raise ValueError(f"give either {flags(derives)} or {flags(options)}, not both (got {flags(direct + given)})")
    if not given:
        missing = [dest for dest in derives if getattr(args, dest) is None]
        if missing:
            raise ValueError(f"the following arguments are required: {', '.join('--' + m for m in missing)} "
                             f"(or {flags(options)})")
        return
    if len(given) < len(options):
        verb = "needs" if len(given) == 1 else "need"
        raise ValueError(f"{flags(given)} {verb} {flags([d for d in options if d not in given])} too (q = B/N"
                         f"{', T = ⌈E·N/B⌉' if 'steps' in derives else ''})")
    from .schedule import sampling_and_steps  # numpy only

    epochs = np.atleast_1d(args.epochs if "steps" in derives else 1)
    pairs = [sampling_and_steps(args.dataset_size, args.batch_size, e) for e in epochs]
    args.q = np.array([pairs[0][0]]) if grid else pairs[0][0]
    if "steps" in derives:
        steps = [t for _, t in pairs]
        args.steps = np.array(steps, dtype=np.float64) if grid else steps[0]


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


def _integer(text: str) -> int | float:
    """An integer option: any spelling of a number (``10000``, ``1e4``, ``10_000``); an exact integer
    becomes an ``int``, anything else stays a float for its rule to reject with the option's range."""
    try:
        return int(text)
    except ValueError:
        value = _number(text)
    return int(value) if value.is_integer() else value  # nan and inf are not integers


def _integer_list(text: str) -> list:
    """Comma-separated integers (e.g. ``1,10,1e3``), each spelled as :func:`_integer` accepts."""
    return [_integer(part) for part in text.split(",")]


def _positive_int(text: str) -> int:
    """A positive integer in one argument (a grid's NUM), spelled as :func:`_integer` accepts."""
    value = _integer(text)
    if not isinstance(value, int) or value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}")
    return value


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


def _add_number(parser, dest: str, rule: Rule | None = None, *, grid: bool = False, extra: str = "",
                **kwargs) -> None:
    """A numeric option ``--dest`` (underscores as dashes) whose type, help text and check all come from
    its rule: ``RULES[dest]`` unless a subcommand passes a narrower ``rule``. ``grid``: a grid of values
    (:func:`parse_grid`); ``extra``: help after the range (e.g. the default)."""
    rule = rule or RULES[dest]
    if grid:
        parse = parse_grid
    elif dest == "rounds":
        parse = _integer_list
    else:
        parse = _integer if rule.integer else _number
    if kwargs.get("default") is not None:
        extra += (" " if extra else "") + ("(default: %(default)g)" if isinstance(kwargs["default"], float)
                                           else "(default: %(default)s)")
    parser.add_argument("--" + dest.replace("_", "-"), dest=dest, type=parse, help=rule.help(grid, extra), **kwargs)
    vars(parser).setdefault("_jaxpriv_rules", {})[dest] = rule


def _add_schedule(parser, derives: tuple = ("q", "steps"), *, grid: bool = False) -> None:
    """--dataset-size N, --batch-size B and (when T is derived) --epochs E, instead of ``derives`` (--q, or
    --q and --steps): q = B/N and T = ⌈E·N/B⌉, TensorFlow Privacy's ``compute_dp_sgd_privacy`` convention
    (:func:`jaxpriv.schedule.sampling_and_steps`), applied by :func:`_apply_schedule`. The options in
    ``derives`` must be added without ``required``. ``grid`` (sweep): --epochs may be a grid."""
    replaced = " and ".join(f"--{dest}" for dest in derives)
    rule = "q = B/N, T = ⌈E·N/B⌉ (TensorFlow Privacy's convention)" if "steps" in derives else "q = B/N"
    _add_number(parser, "dataset_size", metavar="N", extra=f"instead of {replaced}, with --batch-size"
                + (" and --epochs" if "steps" in derives else "") + f": {rule}")
    _add_number(parser, "batch_size", metavar="B",
                extra="with --dataset-size: q = B/N" + (", one value" if grid else ""))
    if "steps" in derives:
        _add_number(parser, "epochs", grid=grid, metavar="E", extra="with --dataset-size: T = ⌈E·N/B⌉")
    parser.set_defaults(schedule=derives, schedule_grid=grid)


def _defaults(parser, handler, *, dirs=(), files=(), check=None) -> None:
    """A subcommand's handler and what :func:`_check_arguments` checks first: the rules of the options
    added by :func:`_add_number`, output ``dirs`` and ``files`` (argument names) and a ``check(args)``."""
    rules = dict(vars(parser).get("_jaxpriv_rules", {}))
    parser.set_defaults(handler=handler, rules=rules, output_dirs=dirs, output_files=files, check=check)


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
        "Compiled kernels are cached in $JAXPRIV_CACHE_DIR (default ~/.cache/jaxpriv/xla; empty disables).\n"
        "Exit status: 0 success; 1 a calibration target that cannot be met (computed: the reason on stderr);\n"
        "2 a bad argument (one line on stderr, before any computation).",
        formatter_class=_FORMATTER,
    )
    parser.add_argument("--version", action="version", version=f"jaxpriv {__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = _subparser(subparsers, "epsilon", "ε of T steps of DP-SGD (Poisson rate q, noise σ) at δ.",
                   "jaxpriv epsilon --q 0.01 --sigma 1.1 --steps 10000 --delta 1e-5")
    for dest in ("q", "sigma", "steps", "delta"):
        _add_number(p, dest, required=dest in ("sigma", "delta"))  # q, steps: or from the schedule
    _add_schedule(p)
    _add_orders(p)
    _add_accountant(p, "best", "the table shows RDP, the PLD interval and the CLT approximation either way; "
                               "this picks the ε reported")
    p.add_argument("--json", action="store_true", help="print a JSON object instead of a table")
    p.add_argument("--refine", action="store_true",
                   help="also search real Rényi orders between the grid points (never worse, slower)")
    _defaults(p, cmd_epsilon)

    p = _subparser(subparsers, "calibrate", "The σ, q or T that meets each target ε (conservatively).",
                   "jaxpriv calibrate sigma --epsilon 1,2,4,8 --q 0.01 --steps 10000 --delta 1e-5")
    targets = p.add_subparsers(dest="target", required=True, metavar="{sigma,q,steps}")
    for target, needs, example in (
        ("sigma", ("q", "steps"), "jaxpriv calibrate sigma --epsilon 1 --q 0.01 --steps 10000 --delta 1e-5"),
        ("q", ("sigma", "steps"), "jaxpriv calibrate q --epsilon 1,2 --sigma 1.1 --steps 10000 --delta 1e-5"),
        ("steps", ("q", "sigma"), "jaxpriv calibrate steps --epsilon 3 --q 0.01 --sigma 1.1 --delta 1e-5"),
    ):
        t = _subparser(targets, target, f"Calibrate {_NAMES[target]} to target ε.", example)
        _add_number(t, "epsilon", grid=True, required=True)
        derives = {"sigma": ("q", "steps"), "steps": ("q",)}.get(target, ())  # or from the schedule
        for name in (*needs, "delta"):
            _add_number(t, name, _CALIBRATE_RULES.get(name), required=name not in derives)
        if derives:
            _add_schedule(t, derives)
        _add_orders(t)
        _add_accountant(t, "rdp", "fast once compiled, and differentiable; pld/best give a smaller "
                                  "σ, a larger q or T, in seconds per target")
        t.add_argument("--json", action="store_true", help="print JSON instead of a table")
        _defaults(t, cmd_calibrate)

    p = _subparser(subparsers, "sweep", "ε of DP-SGD over a grid of (q, σ, T, δ), with CSV/JSON/plot output.",
                   "jaxpriv sweep --q 1e-3:0.1:25:log --sigma 0.6:3:40 --steps 10000 --delta 1e-5 --out sweep-out")
    for dest in ("q", "sigma", "steps", "delta"):
        _add_number(p, dest, grid=True, required=dest in ("sigma", "delta"))  # q, steps: or from the schedule
    _add_schedule(p, grid=True)
    _add_orders(p)
    _add_accountant(p, "rdp", "thousands of settings per second; pld/best evaluate the PLD setting by setting, "
                              "slow for big grids on a CPU")
    p.add_argument("--out", metavar="DIR", help="write sweep.csv, sweep.json and epsilon_grid.png here")
    p.add_argument("--csv", metavar="FILE",
                   help="write the results as CSV (q,sigma,steps,delta,epsilon,best_order; best_order is nan "
                        "where the PLD bound is reported)")
    p.add_argument("--json", metavar="FILE", help="write the grid and results as JSON")
    p.add_argument("--plot", metavar="FILE", help="heatmap of ε over (q, σ) (needs one T and one δ)")
    _add_number(p, "chunk_size", metavar="N", extra="256 on the CPU, 4096 on an accelerator, when not given")
    _defaults(p, cmd_sweep, dirs=("out",), files=("csv", "json", "plot"), check=_check_sweep)

    p = _subparser(subparsers, "shuffle",
                   "Central ε of shuffling n users with personalized local budgets, every bound.",
                   "jaxpriv shuffle --budgets uniform:0.05,1 --n 10000 --delta 1e-8 --out shuffle-out")
    p.add_argument("--budgets", required=True, metavar="BUDGETS",
                   help=f"local budgets: {_BUDGETS_HELP} | a CSV file of budgets")
    _add_number(p, "n", extra="not needed with a CSV file")
    _add_number(p, "delta", required=True)
    _add_number(p, "rounds", metavar="T[,T...]",
                extra="e.g. 1,10,100,1000: the exact pair by PLD beside the seeds' compositions, one row per "
                      "method (and epsilon_vs_rounds.png with --out)")
    _add_number(p, "dims", default=1, metavar="B", extra="with --rounds (S-APES's uploaded dimensions)")
    p.add_argument("--out", metavar="DIR", help="write epsilon_vs_n.png and budgets.png here")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    _defaults(p, cmd_shuffle, dirs=("out",), check=_check_shuffle)

    for name in ("report", "reproduce"):  # one parser each, so that each --help names itself
        _add_report_parser(subparsers, name)
    _add_train_parser(subparsers)
    _add_math_parser(subparsers)
    from .audit import command as audit_command  # numpy only: the audit's logic lives in jaxpriv.audit

    audit_command.add_parser(subparsers, _subparser, _add_number, _defaults)
    return parser


def _add_report_parser(subparsers, name: str) -> None:
    """``report`` and its synonym ``reproduce``."""
    summary = ("Privacy report of a default DP-SGD run (report.md) and the seeds' systems reproduced on bundled "
               "data (systems.md), with figures.")
    if name != "report":
        summary += " The same command as report."
    p = _subparser(subparsers, name, summary, f"jaxpriv {name} --quick --out reproduce-out")
    p.add_argument("--out", metavar="DIR", default="reproduce-out", help="output directory (default: %(default)s)")
    p.add_argument("--quick", action="store_true", help="coarse grids and small federated runs (a few minutes)")
    p.add_argument("--systems", default="all", metavar="LIST",
                   help="seed systems to reproduce: all, none, or a comma-separated subset of apes,gspa,rpdp,udpfl "
                        "(default: %(default)s)")
    _defaults(p, cmd_report, dirs=("out",), check=_check_report)


def _add_math_parser(subparsers) -> None:
    """``math``: the mathematical reference shipped with the package (``jaxpriv/MATH.md``)."""
    p = _subparser(subparsers, "math", "The mathematical reference behind every number (MATH.md), or one section.",
                   "jaxpriv math 3.1")
    p.add_argument("section", nargs="?", metavar="SECTION",
                   help="a section number, e.g. 3 (with its subsections) or 3.1; default: the whole document")
    p.add_argument("--list", action="store_true", help="list the section numbers and titles")
    _defaults(p, cmd_math)


def cmd_math(args) -> int:
    """Print the reference, one section of it (``ValueError`` for an unknown one), or its table of contents."""
    from ._reference import math_reference, math_sections

    if args.list:
        text = "".join(f"{'  ' * number.count('.')}§{number}  {title}\n" for number, title in math_sections().items())
    else:
        text = math_reference(args.section)
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:  # e.g. `jaxpriv math | head`: the reader has gone, which is not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0


# --------------------------------------------------------------------------------------------------
# Output helpers
# --------------------------------------------------------------------------------------------------


def _console():
    """Standard output as a rich console. When it is not a terminal (a pipe, a file) it is 80 columns wide,
    or ``$COLUMNS``: rich would otherwise take the width of whichever of stdin/stderr is a terminal."""
    from rich.console import Console

    width = None if sys.stdout.isatty() or os.environ.get("COLUMNS", "").isdigit() else 80
    return Console(highlight=False, width=width)


def _table(title: str, header: list[str] | None, rows: list[list[str]], numeric: tuple[int, ...] = (1,),
           notes: int | None = None):
    """A rich table under a bold title line (a table title would wrap to the table's width); the
    ``numeric`` columns are right-aligned. ``header`` None: no header row (a list of quantity, value).
    ``notes``: the column of free-text notes (default: the one headed "note"), which may become
    footnotes so that the table fits the console (see :class:`_FittedTable`)."""
    if notes is None and header is not None and "note" in header:
        notes = header.index("note")
    return _FittedTable(title, header, rows, numeric, notes)


class _FittedTable:
    """A titled table laid out for the width of the console it is printed on, so that no row wraps where
    that can be helped: the full boxed table where it fits; else a compact one (no vertical rules, one
    space between columns); else the compact one with its notes as numbered footnotes below it."""

    def __init__(self, title, header, rows, numeric, notes):
        self.title, self.header, self.rows, self.numeric, self.notes = title, header, rows, numeric, notes

    def layout(self, compact: bool, footnotes: bool):
        """The table and the footnotes under it (rich renderables)."""
        from rich import box
        from rich.table import Table
        from rich.text import Text

        rows, below = self.rows, []
        if footnotes:
            i, marks = self.notes, {}
            for row in rows:
                if row[i] and row[i] not in marks:
                    marks[row[i]] = f"[{len(marks) + 1}]"
            rows = [[*row[:i], marks.get(row[i], ""), *row[i + 1:]] for row in rows]
            below = [Text(f"{mark} ") + Text.from_markup(note) for note, mark in marks.items()]
        table = Table(show_header=self.header is not None, box=box.SIMPLE_HEAD if compact else box.HEAVY_HEAD,
                      show_edge=not compact, padding=(0, 0) if compact else (0, 1))
        for i, name in enumerate(self.header or [""] * max((len(row) for row in rows), default=0)):
            table.add_column(name, justify="right" if i in self.numeric else "left")
        for row in rows:
            table.add_row(*row)
        return table, below

    def __rich_console__(self, console, options):
        from rich.measure import Measurement
        from rich.text import Text

        layouts = [(False, False), (True, False)] + ([(True, True)] if self.notes is not None else [])
        unbounded = options.update_width(10**6)  # a table's measurement is clamped to the width it is given
        for compact, footnotes in layouts:
            table, below = self.layout(compact, footnotes)
            if Measurement.get(console, unbounded, table).maximum <= options.max_width:
                break
        yield Text(self.title, style="bold")
        yield table
        yield from below


def _fmt(x: float) -> str:
    return f"{x:.6g}" if math.isfinite(x) else str(x)


def _fmt_steps(x: float) -> str:
    return f"{int(x):,}" if float(x).is_integer() else f"{x:g}"


def _kind(kind: str) -> str:
    """A table's "kind" column: "bound" or "approx." (an approximation, not a bound)."""
    return "approx." if kind == "approximation" else kind


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
    # The CLT (Bu et al.) is exact only as T → ∞ with q√T fixed; for few steps, or where the rare sampled
    # step dominates the privacy loss, it can fall far below the true ε: say so when the interval shows it.
    clt = s["epsilon_gdp_clt_approximation"]
    clt_note = f"approximation, not a bound (μ ≈ {s['gdp_clt_mu_approximation']:.4g})"
    if s["epsilon_pld_lower"] is not None and clt < s["epsilon_pld_lower"]:
        clt_note += "; below the PLD lower bound: it underestimates ε here"
    console.print(_table(
        f"DP-SGD: q = {args.q:g}, σ = {args.sigma:g}, T = {_fmt_steps(args.steps)}, δ = {args.delta:g}",
        ["accountant", "ε", "note"],
        [
            ["RDP, improved conversion", _fmt(s["epsilon_rdp"]), f"bound; best order α = {s['best_order']:g}"],
            ["RDP, classic conversion", _fmt(s["epsilon_classic"]),
             f"bound, looser; best order α = {s['best_order_classic']:g}"],
            ["PLD \\[lower, upper]", _interval(s["epsilon_pld_lower"], s["epsilon_pld_upper"]), pld_note],
            ["Gaussian DP, CLT (approximation)", _fmt(clt), clt_note],
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
        return _report_unattainable(args, fixed, met, orders)
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
    return _report_unattainable(args, fixed, met, orders)


#: The end of each calibrated parameter's range where ε is smallest (the library's search brackets)
_SAFEST = {"sigma": 1e4, "q": 1e-12, "steps": 1}


def _report_unattainable(args, fixed: dict, met: np.ndarray, orders) -> int:
    """Exit status 1, with one line on stderr, when a target cannot be met: which targets, the smallest ε
    the accountant certifies (at the safest end of the parameter's range) and what to change."""
    if met.all():
        return 0
    missed = np.asarray(args.epsilon)[~met]
    safest = {**fixed, args.target: _SAFEST[args.target]}
    floor = float(np.min(_achieved(safest, args.delta, orders, args.accountant)))
    targets = f"target{'s' if missed.size > 1 else ''} ε = {', '.join(_fmt(t) for t in missed)}"
    hint = "raise σ or lower q" if args.target == "steps" else "raise the target or δ"
    if args.accountant == "rdp" and args.target != "steps":
        hint += ", or try --accountant pld (tighter)"
    symbol, end = _SYMBOL[args.target], _SAFEST[args.target]
    if floor > missed.max():
        reason = f"even {symbol} = {end:,g} gives ε = {_fmt(floor)}"
    else:
        reason = f"no {symbol} in the calibration's search range meets it"
    print(f"jaxpriv: error: {targets} unattainable with the {args.accountant} accountant: {reason}; {hint}",
          file=sys.stderr)
    return 1


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
    if grid.size == 1:  # one configuration: its ε (no spread, and no rate worth stating)
        spread = [["ε", _fmt(float(grid.epsilon.flat[0]))]]
    else:
        spread = [["min ε", _fmt(eps.min()) if eps.size else "-"],
                  ["median ε", _fmt(np.median(eps)) if eps.size else "-"],
                  ["max ε", _fmt(eps.max()) if eps.size else "-"],
                  ["infinite ε", f"{grid.size - eps.size:,}"]]
    rate = grid.size / grid.seconds if grid.seconds > 0 else math.inf
    timing = [["time", f"{grid.seconds:.2f} s (compilation included)"]]
    if grid.size > 1:
        timing.append(["configurations/s", f"{rate:,.0f}" if rate >= 10 else f"{rate:.2g}"])
    console.print(_table("ε sweep", None, [
        ["configurations", f"{grid.size:,} (q × σ × T × δ = {shape})"],
        ["accountant", args.accountant],
        *spread,
        *timing,
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
        for kind in ("systems", "json"):
            console.print(f"wrote {escape(done[kind])}", soft_wrap=True)
    return 0


def _budget_values(spec: str, n: int | None) -> np.ndarray:
    """The budgets of a ``--budgets`` spec (numpy only); a bad spec's message names the option."""
    from .shuffle.budgets import budgets

    if n is None and not os.path.isfile(spec):
        raise ValueError(f"--n (the number of users) is required with the distribution --budgets {spec!r}")
    try:
        return budgets(spec, n)
    except ValueError as err:
        raise ValueError(f"--budgets: {err}") from None


def _check_shuffle(args) -> None:
    args.budget_values = _budget_values(args.budgets, args.n)
    if args.rounds:
        args.rounds = sorted(set(args.rounds))


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
            [[r["name"], _fmt(r["epsilon"]), f"{r['delta']:.3g}", _kind(r["kind"]), r["note"]] for r in rows],
            numeric=(1, 2),
        ))
        if composed:
            per = f", {args.dims} releases per round" if args.dims > 1 else ""
            console.print(_table(
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
    _add_number(p, "epsilon", extra="σ is calibrated to spend it over the run; with --budgets, a cap on every "
                                     "record's budget")
    _add_number(p, "delta", default=1e-5)
    p.add_argument("--budgets", metavar="BUDGETS",
                   help=f"per-record budgets: {_BUDGETS_HELP} | a CSV "
                        "file with one budget per training record (assigned to records in a seeded random order)")
    p.add_argument("--personalization", choices=("sample", "scale"), default="sample",
                   help="with --budgets: IDP-SGD 'sample' (per-record rates, shared σ) or 'scale' (per-record "
                        "clip norms and noise multipliers, shared rate) (default: %(default)s)")
    _add_number(p, "noise_multiplier", metavar="SIGMA",
                extra="without --epsilon/--budgets ε is only reported; with them, rates are calibrated instead of σ")
    from .train.config import MECHANISMS  # numpy only, as the argument checks must be

    p.add_argument("--mechanism", choices=MECHANISMS, default="gaussian",
                   help="noise: 'gaussian' (L2 clipping) or 'laplace' (L1 clipping, per-coordinate Laplace; "
                        "--noise-multiplier is then the Laplace scale per unit L1 sensitivity; no --budgets) "
                        "(default: %(default)s)")
    _add_number(p, "epochs", RULES["epochs"].narrow("the trainer runs whole epochs", lo=1.0, lo_open=False,
                                                    integer=True), default=20)
    _add_number(p, "batch_size", default=128.0, extra="at most the training set's size")
    _add_number(p, "clip", default=1.0)
    _add_number(p, "lr", default=0.1)
    _add_number(p, "momentum", default=0.9)
    p.add_argument("--model", choices=("mlp", "cnn", "transformer"), default="mlp",
                   help="classifier; 'transformer' reads an image's rows as tokens (default: %(default)s)")
    _add_number(p, "hidden", default=64)
    p.add_argument("--precision", choices=("float32", "bfloat16"), default="float32",
                   help="the model's computation dtype; norms, clipping and noise stay float32 (default: %(default)s)")
    _add_number(p, "seed", default=0)
    _add_number(p, "split_seed", default=0)
    _add_number(p, "test_fraction", default=0.2)
    p.add_argument("--checkpoint", metavar="DIR", help="save after every epoch here and resume from it")
    p.add_argument("--json", metavar="FILE", help="write the run's summary (test_accuracy, epsilon, history) as JSON")
    p.add_argument("--plot", metavar="FILE", help="learning curve: test accuracy and ε per epoch")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    multi = p.add_argument_group(
        "multi-process (multi-host) data parallelism",
        "run the same command in every process; each batch is sharded over every process's devices and "
        "process 0 writes the outputs (jaxpriv.distributed)")
    multi.add_argument("--coordinator", metavar="HOST:PORT",
                       help="process 0's address (or set JAX_COORDINATOR_ADDRESS)")
    multi.add_argument("--num-processes", type=int, metavar="N", help="number of processes (or JAX_NUM_PROCESSES)")
    multi.add_argument("--process-id", type=int, metavar="I", help="this process, 0…N−1 (or JAX_PROCESS_ID)")
    _defaults(p, cmd_train, dirs=("checkpoint",), files=("json", "plot"), check=_check_train)


def _record_budgets(spec: str, n: int, seed: int, cap: float | None) -> np.ndarray:
    """One budget per training record from a budget specification (jaxpriv.shuffle.budgets), in a seeded
    random order (the spec's values are sorted quantiles); capped at ``cap`` when given."""
    values = _budget_values(spec, n)
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
    d = datasets.load(args.dataset, test_fraction=args.test_fraction, seed=args.split_seed)
    features = int(np.prod(d.feature_shape))
    if args.model in ("cnn", "transformer") and round(math.sqrt(features)) ** 2 != features:
        raise ValueError(f"model '{args.model}' needs square images; dataset {args.dataset} has {features} features")
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
    args.processes = None
    if args.coordinator or args.num_processes is not None or os.environ.get("JAX_COORDINATOR_ADDRESS"):
        from . import distributed

        args.processes = distributed.resolve(args.coordinator, args.num_processes, args.process_id)


def _noise_line(mechanism: str, mode: str, group: dict, epsilon: float | None) -> str:
    """The run's noise scale (σ, or the Laplace b, or the staircase ε₀), rate and clip norm, and which of
    them was calibrated to the target ε (the plan's ``mode``, e.g. "σ for ε" or "q for ε")."""
    from .events import noise_family

    name = noise_family(mechanism).description
    target = f"calibrated to ε = {epsilon:g}" if epsilon is not None else ""
    scale_how, rate_how = (target, "") if mode.endswith("for ε") and not mode.startswith("q") else ("given", "")
    if mode == "q for ε":
        rate_how = f" ({target})"
    return (f"{name} = {_fmt(group['noise_multiplier'])} ({scale_how}); q = {_fmt(group['rate'])}{rate_how}, "
            f"C = {_fmt(group['clip_norm'])}")


def cmd_train(args) -> int:
    import optax
    from flax import nnx
    from rich.markup import escape

    if args.processes is not None:  # before the first JAX call
        from . import distributed

        distributed.initialize(*args.processes)
    import jax

    from .train import dpsgd

    leader = jax.process_index() == 0  # the one process that reports and writes
    d, config, budgets = args.data, args.config, args.config.budgets
    rngs = nnx.Rngs(args.seed)
    features = int(np.prod(d.feature_shape))
    side = round(math.sqrt(features))
    dtype = None if args.precision == "float32" else jax.numpy.bfloat16
    if args.model == "cnn":
        model = dpsgd.CNN(side, 1, d.num_classes, dtype=dtype, rngs=rngs)
    elif args.model == "transformer":  # the image's rows are the tokens
        from .train.models import Transformer

        model = Transformer(side, side, d.num_classes, dtype=dtype, rngs=rngs)
    else:
        model = dpsgd.MLP(features, (args.hidden,), d.num_classes, dtype=dtype, rngs=rngs)
    optimizer = optax.sgd(args.lr, momentum=args.momentum or None)
    result = dpsgd.train(model, optimizer, d, config, progress=leader and not args.quiet,
                         checkpoint_dir=args.checkpoint)
    if not leader:
        return 0

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
        from .report import plot_learning_curve

        plot_learning_curve(result.history, args.plot, f"DP-SGD on {args.dataset} ({args.model}), δ = {args.delta:g}")

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
    if len(groups) == 1 and budgets is None:  # one noise scale for all (else the groups table shows each)
        console.print(_noise_line(args.mechanism, result.plan.mode, groups[0], args.epsilon))
    console.print(f"test accuracy {result.test_accuracy:.4f}, ε = {_fmt(result.epsilon)} at δ = {args.delta:g} "
                  f"({result.stopped}; {result.seconds:.1f} s)")
    for kind in ("json", "plot"):
        if getattr(args, kind):
            console.print(f"wrote {kind}: {escape(getattr(args, kind))}", soft_wrap=True)
    return 0
