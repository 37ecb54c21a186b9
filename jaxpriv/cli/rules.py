"""The arguments of the ``jaxpriv`` command: their rules, types and checks, and the parser's building
blocks that tie an option to its rule.

One table of argument rules, :data:`RULES`, gives every numeric option its type, valid range and help
phrase: ``--help`` states the range the check enforces, and an option means the same in every
subcommand. Where a subcommand needs a narrower range (``calibrate`` needs q > 0 and T ≥ 1), its rule is
derived with :meth:`Rule.narrow`, and its help says so and why. Integer options accept any spelling of
an exact integer (``10000``, ``1e4``, ``10_000``) and reject a fraction (``2.5``).

A command module adds each numeric option with :func:`add_number` (its type, help text and check all
come from its rule) and declares its handler, output paths and own check with :func:`defaults`;
:func:`check_arguments` runs those checks before the handler. Numpy only: nothing here imports JAX, not
even indirectly (the library modules it loads on use, :mod:`jaxpriv.schedule` and
:mod:`jaxpriv.shuffle.budgets`, are numpy only), so an argument error costs no JAX import.
"""

from __future__ import annotations

import argparse
import math
import os
from typing import NamedTuple

import numpy as np


#: The help formatter of every parser: descriptions and epilogs (the examples) keep their line breaks
FORMATTER = argparse.RawDescriptionHelpFormatter
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
    # epsilon, calibrate and sweep's training schedule (with batch_size and epochs: see add_schedule)
    "dataset_size": Rule("dataset_size", "number of training records N", 1.0, integer=True),
    "clip": Rule("clip_norm", "per-example clip norm C", 0.0, lo_open=True),
    "lr": Rule("lr", "SGD learning rate", 0.0, lo_open=True),
    "momentum": Rule("momentum", "SGD momentum", 0.0, 1.0, hi_open=True),
    "hidden": Rule("hidden", "MLP hidden width", 1.0, integer=True),
    "bands": Rule("bands", "bands b of the BandMF strategy (partitions sampled in turn)", 1.0, integer=True),
    "steps_per_example": Rule("steps_per_example", "steps k each record takes part in per epoch (random allocation)",
                              1.0, integer=True),
    "seed": Rule("seed", "seed of the model, sampler and noise", **_SEED),
    "split_seed": Rule("split_seed", "seed of the train/test split", **_SEED),
    "test_fraction": Rule("test_fraction", "held-out fraction", 0.0, 1.0, lo_open=True, hi_open=True),
}
#: calibrate solves for one of σ, q, T given the others: q = 0 or T = 0 spends no privacy at all
CALIBRATE_RULES = {
    "q": RULES["q"].narrow("q = 0 spends no privacy, so there is nothing to calibrate", lo_open=True),
    "steps": RULES["steps"].narrow("T = 0 spends no privacy, so there is nothing to calibrate", lo=1.0),
}


#: The budget specifications of :func:`jaxpriv.shuffle.budgets.budgets` (shuffle and train --budgets)
BUDGETS_HELP = ("uniform:LO,HI | gauss:MEAN,SD[,clip=LO,HI] | levels:E@W,... (each weight W in (0, 1], "
                "summing to 1) | scenario:NAME[,seed=S]")


# --------------------------------------------------------------------------------------------------
# Argument checks (numpy only: they run before JAX is imported)
# --------------------------------------------------------------------------------------------------


def check_arguments(args) -> None:
    """The rules of the numeric arguments (:data:`RULES`), output paths (and a figure's file type), then
    the subcommand's own check (``ValueError``)."""
    for dest, rule in args.rules.items():
        if getattr(args, dest, None) is not None:
            rule.check(getattr(args, dest))
    _apply_schedule(args)  # --dataset-size/--batch-size/--epochs → q, steps
    for dest in args.output_dirs:
        if getattr(args, dest):
            check_output_dir(f"--{dest}", getattr(args, dest))
    for dest in args.output_files:
        if getattr(args, dest):
            check_output_file(f"--{dest}", getattr(args, dest), figure=dest in args.output_figures)
    if args.check is not None:
        args.check(args)


def _apply_schedule(args) -> None:
    """A subcommand with :func:`add_schedule`'s options gets q (and T) from them: q = B/N, T = ⌈E·N/B⌉
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
    from ..schedule import sampling_and_steps  # numpy only

    epochs = np.atleast_1d(args.epochs if "steps" in derives else 1)
    pairs = [sampling_and_steps(args.dataset_size, args.batch_size, e) for e in epochs]
    args.q = np.array([pairs[0][0]]) if grid else pairs[0][0]
    if "steps" in derives:
        steps = [t for _, t in pairs]
        args.steps = np.array(steps, dtype=np.float64) if grid else steps[0]


#: The file types a figure may be written as: those matplotlib's Agg canvas writes (with Pillow, a
#: dependency of matplotlib), less its raw pixel buffers (named here: matplotlib is imported on use)
FIGURE_TYPES = (".png", ".pdf", ".svg", ".svgz", ".eps", ".ps", ".jpg", ".jpeg", ".tif", ".tiff", ".webp")


def check_output_dir(option: str, path: str) -> None:
    """``path`` is a directory we can write into, or one we can create in an existing, writable parent.
    Nothing is created: a missing parent is an error (a mistyped path must not leave directories behind),
    and writability is probed with a temporary file, deleted at once (``os.access`` says yes to root even
    where writing fails, e.g. on a read-only file system or under /proc)."""
    full = os.path.abspath(path)
    if os.path.exists(full) and not os.path.isdir(full):
        raise ValueError(f"{option} {path!r} is a file, not a directory")
    parent = full if os.path.isdir(full) else os.path.dirname(full)
    if not os.path.isdir(parent):
        existing = parent
        while not os.path.exists(existing):
            existing = os.path.dirname(existing)
        if not os.path.isdir(existing):
            raise ValueError(f"{option} {path!r} cannot be created: {existing!r} is a file, not a directory")
        raise ValueError(f"{option} {path!r} cannot be created: its parent directory {parent!r} does not exist")
    _probe_directory(option, path, parent)


def check_output_file(option: str, path: str, figure: bool = False) -> None:
    """``path`` is a file we can write: its directory exists and is writable, and it is not a directory;
    a ``figure`` also needs a file type matplotlib writes (:data:`FIGURE_TYPES`). Nothing is created."""
    if figure and os.path.splitext(path)[1].lower() not in FIGURE_TYPES:
        kind = os.path.splitext(path)[1] or "no extension"
        raise ValueError(f"{option} {path!r}: a figure is written as {', '.join(FIGURE_TYPES)}, got {kind}")
    if os.path.isdir(path):
        raise ValueError(f"{option} {path!r} is a directory; give a file name")
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        what = "is a file, not a directory" if os.path.exists(directory) else "does not exist"
        raise ValueError(f"{option} {path!r}: {directory!r} {what}")
    if os.path.exists(path):
        try:  # opened for writing without truncating it: the file is left as it is
            os.close(os.open(path, os.O_WRONLY))
        except OSError as err:
            raise ValueError(f"{option} {path!r} is not writable ({err.strerror})") from None
    else:
        _probe_directory(option, path, directory)


def _probe_directory(option: str, path: str, directory: str) -> None:
    """``ValueError`` unless a file can be created in ``directory`` (a probe file, removed at once)."""
    import tempfile

    try:
        handle, probe = tempfile.mkstemp(prefix=".jaxpriv-write-check-", dir=directory)
    except OSError as err:
        raise ValueError(f"{option} {path!r} is not writable: cannot create files in {directory!r} "
                         f"({err.strerror})") from None
    os.close(handle)
    os.unlink(probe)


#: The distribution kinds of a budget specification (:mod:`jaxpriv.shuffle.budgets`); anything else is a file
BUDGET_KINDS = ("uniform", "gauss", "levels", "scenario")


def budget_values(spec: str, n: int | None) -> np.ndarray:
    """The budgets of a ``--budgets`` spec or CSV file (numpy only); a bad spec's message names the option,
    and a file that is not there says so."""
    from ..shuffle.budgets import budgets

    if not os.path.isfile(spec) and spec.partition(":")[0] not in BUDGET_KINDS:
        if os.path.isdir(spec):
            raise ValueError(f"--budgets {spec!r} is a directory, not a CSV file of budgets")
        if ":" not in spec or os.sep in spec or spec.lower().endswith(".csv"):  # meant as a file
            raise ValueError(f"--budgets {spec!r}: file not found (nor is it a distribution: "
                             f"{', '.join(k + ':...' for k in BUDGET_KINDS)})")
    if n is None and not os.path.isfile(spec):
        raise ValueError(f"--n (the number of users) is required with the distribution --budgets {spec!r}")
    try:
        return budgets(spec, n)
    except ValueError as err:
        raise ValueError(f"--budgets: {err}") from None


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
# Parser building blocks: an option from its rule, the training schedule, a subcommand
# --------------------------------------------------------------------------------------------------


def add_number(parser, dest: str, rule: Rule | None = None, *, grid: bool = False, extra: str = "",
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


def add_schedule(parser, derives: tuple = ("q", "steps"), *, grid: bool = False) -> None:
    """--dataset-size N, --batch-size B and (when T is derived) --epochs E, instead of ``derives`` (--q, or
    --q and --steps): q = B/N and T = ⌈E·N/B⌉, TensorFlow Privacy's ``compute_dp_sgd_privacy`` convention
    (:func:`jaxpriv.schedule.sampling_and_steps`), applied by :func:`_apply_schedule`. The options in
    ``derives`` must be added without ``required``. ``grid`` (sweep): --epochs may be a grid."""
    replaced = " and ".join(f"--{dest}" for dest in derives)
    rule = "q = B/N, T = ⌈E·N/B⌉ (TensorFlow Privacy's convention)" if "steps" in derives else "q = B/N"
    add_number(parser, "dataset_size", metavar="N", extra=f"instead of {replaced}, with --batch-size"
               + (" and --epochs" if "steps" in derives else "") + f": {rule}")
    add_number(parser, "batch_size", metavar="B",
               extra="with --dataset-size: q = B/N" + (", one value" if grid else ""))
    if "steps" in derives:
        add_number(parser, "epochs", grid=grid, metavar="E", extra="with --dataset-size: T = ⌈E·N/B⌉")
    parser.set_defaults(schedule=derives, schedule_grid=grid)


def defaults(parser, handler, *, dirs=(), files=(), figures=(), check=None) -> None:
    """A subcommand's handler and what :func:`check_arguments` checks first: the rules of the options
    added by :func:`add_number`, output ``dirs`` and ``files`` (argument names; ``figures``, those of
    ``files`` that are figures, need an image file type) and a ``check(args)``."""
    rules = dict(vars(parser).get("_jaxpriv_rules", {}))
    parser.set_defaults(handler=handler, rules=rules, output_dirs=dirs, output_files=files, output_figures=figures,
                        check=check)


def subparser(subparsers, name: str, summary: str, example: str, **kwargs) -> argparse.ArgumentParser:
    """A subcommand's parser: ``summary`` is its line in the command list and its description, ``example``
    its epilog."""
    return subparsers.add_parser(
        name, help=summary, description=summary, epilog=f"example:\n  {example}", formatter_class=FORMATTER,
        **kwargs,
    )
