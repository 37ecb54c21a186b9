"""The ``jaxpriv`` command's output helpers: standard output as a console, tables that fit it, and the
number formats of tables and JSON (no JAX, no numpy; rich is imported on use).

Tables fit the console: a full table where it fits, else a compact one, else one whose notes move to
numbered footnotes below it, so no row wraps. Output that is not a terminal is 80 columns wide (or
``$COLUMNS``).
"""

from __future__ import annotations

import math
import os
import sys


def stdout_console():
    """Standard output as a rich console. When it is not a terminal (a pipe, a file) it is 80 columns wide,
    or ``$COLUMNS``: rich would otherwise take the width of whichever of stdin/stderr is a terminal."""
    from rich.console import Console

    width = None if sys.stdout.isatty() or os.environ.get("COLUMNS", "").isdigit() else 80
    return Console(highlight=False, width=width)


def table(title: str, header: list[str] | None, rows: list[list[str]], numeric: tuple[int, ...] = (1,),
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


def fmt(x: float) -> str:
    """A number as tables and messages show it: 6 significant digits; inf and nan as such."""
    return f"{x:.6g}" if math.isfinite(x) else str(x)


def fmt_steps(x: float) -> str:
    """A number of steps: an integer with thousands separators (``10,000``), anything else as ``:g``."""
    return f"{int(x):,}" if float(x).is_integer() else f"{x:g}"


def json_value(x: float):
    """A number for JSON output: a float, or None for inf and nan."""
    return float(x) if math.isfinite(x) else None  # strict JSON has no inf


def interval(lower, upper) -> str:
    """A certified interval ``[lower, upper]``, or ``-`` where there is none (``lower`` None)."""
    return "-" if lower is None else f"[{fmt(lower)}, {fmt(upper)}]"
