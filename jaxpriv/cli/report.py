"""``jaxpriv report`` (and its synonym ``reproduce``): the privacy report of a default DP-SGD run and the
seeds' systems reproduced on bundled data; ``jaxpriv math``: the mathematical reference (``MATH.md``).

The argument checks need no JAX; the handlers import the library when they run.
"""

from __future__ import annotations

import os
import sys

from .rules import defaults, subparser
from .tables import fmt, interval, stdout_console, table


def add_report_parser(subparsers, name: str) -> None:
    """``report`` and its synonym ``reproduce``."""
    summary = ("Privacy report of a default DP-SGD run (report.md) and the seeds' systems reproduced on bundled "
               "data (systems.md), with figures.")
    if name != "report":
        summary += " The same command as report."
    p = subparser(subparsers, name, summary, f"jaxpriv {name} --quick --out reproduce-out")
    p.add_argument("--out", metavar="DIR", default="reproduce-out", help="output directory (default: %(default)s)")
    p.add_argument("--quick", action="store_true", help="coarse grids and small federated runs (a few minutes)")
    p.add_argument("--systems", default="all", metavar="LIST",
                   help="seed systems to reproduce: all, none, or a comma-separated subset of apes,gspa,rpdp,udpfl "
                        "(default: %(default)s)")
    defaults(p, cmd_report, dirs=("out",), check=_check_report)


def _check_report(args) -> None:
    from ..reproduce import parse_systems  # no JAX

    args.system_list = parse_systems(args.systems)


def cmd_report(args) -> int:
    from rich.markup import escape

    from .. import report

    from ..reproduce import reproduce_systems

    console = stdout_console()
    systems = args.system_list
    files = report.write_report(args.out, quick=args.quick, status=lambda stage: console.print(f"… {stage}"))
    s = files["summary"]
    console.print(table("privacy of the default DP-SGD setting", ["accountant", "ε"], [
        ["RDP, improved conversion", fmt(s["epsilon_rdp"])],
        ["RDP, classic conversion", fmt(s["epsilon_classic"])],
        ["PLD \\[lower, upper]", interval(s["epsilon_pld_lower"], s["epsilon_pld_upper"])],
        ["Gaussian DP, CLT (approximation)", fmt(s["epsilon_gdp_clt_approximation"])],
    ]))
    for kind in ("report", "epsilon_grid", "sigma_vs_epsilon"):
        console.print(f"wrote {escape(files[kind])}", soft_wrap=True)
    if systems:
        done = reproduce_systems(args.out, quick=args.quick, systems=systems,
                                 status=lambda what: console.print(f"… {what}"))
        for kind in ("systems", "json"):
            console.print(f"wrote {escape(done[kind])}", soft_wrap=True)
    return 0


def add_math_parser(subparsers) -> None:
    """``math``: the mathematical reference shipped with the package (``jaxpriv/MATH.md``)."""
    p = subparser(subparsers, "math", "The mathematical reference behind every number (MATH.md), or one section.",
                  "jaxpriv math 3.1")
    p.add_argument("section", nargs="?", metavar="SECTION",
                   help="a section number, e.g. 3 (with its subsections) or 3.1; default: the whole document")
    p.add_argument("--list", action="store_true", help="list the section numbers and titles")
    defaults(p, cmd_math)


def cmd_math(args) -> int:
    """Print the reference, one section of it (``ValueError`` for an unknown one), or its table of contents."""
    from .._reference import math_reference, math_sections

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
