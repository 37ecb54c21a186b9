"""The ``jaxpriv`` command: ε of DP-SGD, calibration of σ / q / T, ε sweeps and the privacy report.

    jaxpriv epsilon --q 0.01 --sigma 1.1 --steps 10000 --delta 1e-5
    jaxpriv calibrate sigma --epsilon 1,2,4,8 --q 0.01 --steps 10000 --delta 1e-5 --accountant pld
    jaxpriv sweep --q 1e-3:0.1:25:log --sigma 0.6:3:40 --steps 10000 --delta 1e-5 --out sweep-out
    jaxpriv shuffle --budgets uniform:0.05,1 --n 10000 --delta 1e-8
    jaxpriv report --quick --out reproduce-out
    jaxpriv train --dataset digits --epsilon 3 --delta 1e-5 --json train.json --plot curve.png

Exit status: 0 on success; 1 when ``calibrate`` finds that a target ε cannot be met, or that RDP meets it
only by ε = 0 (its (0, δ) bound, at a σ, q or T set by δ: the message names --accountant pld) (the table or JSON
still lists every target; one line on stderr says which and why: this needs the computation, so it is
never a usage error); 2 on a bad argument, with a one-line message naming it and its valid range.
Every argument and output path is checked before JAX is imported, so a mistake is reported at once:
argparse catches malformed numbers and grids, unknown choices and missing arguments; the ranges and
paths are checked next (numpy only): every output directory's parent must exist and every output place
take a file (probed with a temporary file), a figure needs an image file type, an input file must exist,
and a run that fails these checks creates nothing; the library checks its inputs again (its ``ValueError``
names the parameter and its range).

One module per concept; importing this package (and so every argument check) imports no JAX, the
handlers import the library when they run:

- :mod:`jaxpriv.cli.rules`: the argument rules (:data:`RULES`, :class:`Rule`), the argument types
  (:func:`parse_grid`), the checks that run before JAX, and the parser's building blocks;
- :mod:`jaxpriv.cli.tables`: the output helpers (the console, tables that fit it, number formats);
- :mod:`jaxpriv.cli.accounting`: ``epsilon``, ``calibrate`` and ``sweep``;
- :mod:`jaxpriv.cli.shuffle`: ``shuffle``;
- :mod:`jaxpriv.cli.report`: ``report`` (and its synonym ``reproduce``) and ``math``;
- :mod:`jaxpriv.cli.train`: ``train``;
- this module: :func:`main` and :func:`build_parser`, which assembles the command modules' parsers.
"""

from __future__ import annotations

import argparse
import sys

from .. import __version__
# Besides what main and build_parser use: the names this package re-exports from its modules, as the
# single-module jaxpriv.cli had them (the handlers, the rules, parse_grid, ACCOUNTANTS)
from .accounting import add_accounting_parsers, cmd_calibrate, cmd_epsilon, cmd_sweep
from .report import add_math_parser, add_report_parser, cmd_math, cmd_report
from .rules import ACCOUNTANTS, FORMATTER, RULES, Rule, add_number, check_arguments, defaults, parse_grid, subparser
from .shuffle import add_shuffle_parser, cmd_shuffle
from .tables import table
from .train import add_train_parser, cmd_train

__all__ = ["main", "build_parser", "parse_grid", "Rule", "RULES"]

#: The private names two helpers had in the single module (``tests/test_cli_rules.py`` uses them)
_check_arguments, _table = check_arguments, table


def main(argv: list[str] | None = None) -> int:
    """Run the command line with ``argv`` (default ``sys.argv[1:]``) and return the exit status."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as stop:  # argparse exits by itself on --help (0) and on usage errors (2)
        return int(stop.code or 0)
    try:
        check_arguments(args)  # before JAX is imported: a mistake costs no compilation
        return args.handler(args)
    except ValueError as err:  # invalid input: the message names the parameter and its range
        print(f"jaxpriv: error: {err}", file=sys.stderr)
        return 2
    except OSError as err:  # an output that became unwritable after the checks (they run before the work)
        print(f"jaxpriv: error: {err.strerror or err}: {err.filename!r}", file=sys.stderr)
        return 2


class _Parser(argparse.ArgumentParser):
    """argparse with a one-line error message (its default prints the whole usage first)."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message}\n")


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
        formatter_class=FORMATTER,
    )
    parser.add_argument("--version", action="version", version=f"jaxpriv {__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    add_accounting_parsers(subparsers)  # epsilon, calibrate, sweep
    add_shuffle_parser(subparsers)
    for name in ("report", "reproduce"):  # one parser each, so that each --help names itself
        add_report_parser(subparsers, name)
    add_train_parser(subparsers)
    add_math_parser(subparsers)
    from ..audit import command as audit_command  # numpy only: the audit's logic lives in jaxpriv.audit

    audit_command.add_parser(subparsers, subparser, add_number, defaults)
    return parser
