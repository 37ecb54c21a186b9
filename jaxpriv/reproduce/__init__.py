"""``jaxpriv reproduce``: the seeds' headline results, regenerated on bundled data, in one report.

The reproduction layer: the papers' tables, figures and constants, kept out of the library. One module
per seed system (:mod:`jaxpriv.reproduce.apes`, :mod:`~jaxpriv.reproduce.gspa`,
:mod:`~jaxpriv.reproduce.rpdp`, :mod:`~jaxpriv.reproduce.udpfl`) runs that system's library code
(:mod:`jaxpriv.federated`) in the papers' settings; its ``reproduce(quick, out_dir)`` returns the paper's
claims, ours, its headline rows (:mod:`jaxpriv.reproduce.verdicts`: one per headline number, the verdict
computed from the paper's value and ours against stated tolerances), the reasons they differ as a short
list, a Markdown table and its figures. This module runs the chosen ones and writes ``systems.md`` next
to the accounting report of :func:`jaxpriv.report.write_report`: first one table of every headline number
with its verdict, then a section per system; every number goes to ``systems.json`` beside it.

The layer may import everything below it; nothing in the library imports it (only the command line).
Importing this package costs no JAX: the system modules load when they run.
"""

from __future__ import annotations

import importlib
import json
import math
import os
import time
from typing import Callable

from .verdicts import (ACC_ATOL, NOT_JUDGED, RTOL, STAND_IN, TIME_FACTOR, claim, compare, headline_table, not_computed,
                       not_judged)

__all__ = ["SYSTEMS", "parse_systems", "reproduce_systems", "compare", "claim", "not_computed", "not_judged",
           "headline_table", "RTOL", "ACC_ATOL", "TIME_FACTOR", "STAND_IN", "NOT_JUDGED"]

#: name → (module, what it reproduces)
SYSTEMS = {
    "apes": ("jaxpriv.reproduce.apes", "APES / S-APES (seed 000): Table 3 privacy and accuracy vs baselines"),
    "gspa": ("jaxpriv.reproduce.gspa", "GSPA / E-APES (seeds 001, 003): privacy bounds, multinomial TV, shuffled SGD"),
    "rpdp": ("jaxpriv.reproduce.rpdp", "rPDP-FL (seed 004): SCF vs exact inversion, accuracy vs baselines"),
    "udpfl": ("jaxpriv.reproduce.udpfl", "UDP-FL (seed 002): Harmonizer scales and accuracy per mechanism"),
}


#: The papers in the order of the headline table (the ``paper`` field of each system's headline rows).
PAPERS = ("APES / S-APES (seed 000)", "E-APES (seed 001)", "GSPA (seed 003)", "UDP-FL (seed 002)", "rPDP-FL (seed 004)")


def parse_systems(spec: str) -> list[str]:
    """``"all"``, ``"none"`` or a comma-separated subset of :data:`SYSTEMS` → the list of names.

    Example:
      >>> parse_systems("rpdp,apes")
      ['rpdp', 'apes']
    """
    spec = spec.strip().lower()
    if spec == "all":
        return list(SYSTEMS)
    if spec == "none":
        return []
    names = [s.strip() for s in spec.split(",")]
    unknown = [s for s in names if s not in SYSTEMS]
    if unknown:
        raise ValueError(f"systems must be 'all', 'none' or a comma-separated subset of {sorted(SYSTEMS)}, "
                         f"got {unknown[0]!r}")
    return names


def _why(value) -> str:
    if isinstance(value, str):
        return value
    return "\n\n" + "\n".join(f"- {item}" for item in value)


def _section(name: str, result: dict, seconds: float, out_dir: str) -> str:
    module = SYSTEMS[name][0]
    figures = "\n".join(f"![{os.path.basename(p)}]({os.path.relpath(p, out_dir)})" for p in result.get("figures", []))
    rows = result.get("headlines", [])
    done = sum(r["status"] == "reproduced" for r in rows)
    return "\n".join([
        f"## {result.get('title', name)}",
        "",
        f"**Paper:** {result.get('paper', '—')}",
        "",
        f"**Ours:** {done} of {len(rows)} headline numbers reproduced (verdicts in the table at the top); every "
        f"number of this run in [systems.json](systems.json) under `systems.{name}.ours`.",
        "",
        f"**Why they differ:** {_why(result.get('why_different', '—'))}",
        "",
        result.get("table_markdown", ""),
        "",
        figures,
        "",
        f"*({seconds:.0f} s; `{module}.reproduce`)*",
        "",
    ])


def _jsonable(x):
    """``x`` with NumPy/JAX numbers as Python ones, ±inf as the strings "inf"/"-inf" and NaN as null."""
    if isinstance(x, float):
        if math.isfinite(x):
            return float(x)
        return None if math.isnan(x) else ("inf" if x > 0 else "-inf")
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, (str, int, bool)) or x is None:
        return x
    if hasattr(x, "tolist"):  # numpy / JAX arrays and scalars
        return _jsonable(x.tolist())
    if hasattr(x, "__float__"):
        return _jsonable(float(x))
    return str(x)


def reproduce_systems(out_dir: str, *, quick: bool, systems: list[str],
                      status: Callable[[str], None] = lambda message: None) -> dict:
    """Run each system's ``reproduce`` and write ``systems.md`` (and the figures) into ``out_dir``.

    Args:
      out_dir: output directory (created if needed).
      quick: the systems' fast configurations (small rounds and clients).
      systems: names from :data:`SYSTEMS` (see :func:`parse_systems`).
      status: called with a short message before each system.

    Returns:
      ``{"systems": path of systems.md, "json": path of systems.json (every number), "headlines": the
      headline rows (:func:`~jaxpriv.reproduce.verdicts.compare`, :func:`~jaxpriv.reproduce.verdicts.claim`,
      :func:`~jaxpriv.reproduce.verdicts.not_computed`), "results": {name: the system's
      result dict}}``.
    """
    for name in systems:
        if name not in SYSTEMS:
            raise ValueError(f"systems must be a subset of {sorted(SYSTEMS)}, got {name!r}")
    os.makedirs(out_dir, exist_ok=True)
    sections, results, seconds = [], {}, {}
    for name in systems:
        module, what = SYSTEMS[name]
        status(what)
        start = time.perf_counter()
        results[name] = importlib.import_module(module).reproduce(quick, os.path.join(out_dir, name))
        seconds[name] = time.perf_counter() - start
        sections.append(_section(name, results[name], seconds[name], out_dir))
    rows = [r for name in systems for r in results[name].get("headlines", [])]
    rows.sort(key=lambda r: PAPERS.index(r["paper"]) if r["paper"] in PAPERS else len(PAPERS))  # stable
    path, raw = os.path.join(out_dir, "systems.md"), os.path.join(out_dir, "systems.json")
    with open(raw, "w", encoding="utf-8") as f:
        json.dump(_jsonable({
            "quick": quick, "tolerances": {"relative": RTOL, "accuracy_points": ACC_ATOL, "time_factor": TIME_FACTOR},
            "headlines": rows,
            "systems": {name: {"title": results[name].get("title"), "paper": results[name].get("paper"),
                               "seconds": seconds[name], "ours": results[name].get("ours"),
                               "figures": [os.path.relpath(p, out_dir) for p in results[name].get("figures", [])]}
                        for name in systems},
        }), f, indent=1, ensure_ascii=False)
    with open(path, "w", encoding="utf-8") as f:
        f.write("# The seeds' systems, reproduced on bundled data\n\n"
                + ("Quick mode: small numbers of clients, rounds and seeds; run without `--quick` for the full "
                   "configurations.\n\n" if quick else "")
                + "## Headline numbers: the papers' against ours\n\n" + headline_table(rows) + "\n\n"
                + "Every number behind this page: [systems.json](systems.json). Each system's section below "
                "gives its setting, the reasons in brief, its tables and figures.\n\n"
                + "\n".join(sections))
    return {"systems": path, "json": raw, "headlines": rows, "results": results}
