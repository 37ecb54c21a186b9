"""``jaxpriv reproduce``: the seeds' headline results, regenerated on bundled data, in one report.

Each seed system (:mod:`jaxpriv.federated.apes`, :mod:`~jaxpriv.federated.gspa`,
:mod:`~jaxpriv.federated.rpdp`, :mod:`~jaxpriv.federated.udpfl`) has a ``reproduce(quick, out_dir)`` that
returns its paper's claims, ours, its headline rows (:func:`compare`, :func:`claim`, :func:`not_computed`:
one per headline number, the verdict computed from the paper's value and ours against stated
tolerances), the reasons they differ as a short list, a Markdown table and its figures. This module runs
the chosen ones and writes ``systems.md`` next to the accounting report of
:func:`jaxpriv.report.write_report`: first one table of every headline number with its verdict, then a
section per system; every number goes to ``systems.json`` beside it.
"""

from __future__ import annotations

import importlib
import json
import math
import os
import time
from typing import Callable

__all__ = ["SYSTEMS", "parse_systems", "reproduce_systems", "compare", "claim", "not_computed", "headline_table"]

#: name → (module, what it reproduces)
SYSTEMS = {
    "apes": ("jaxpriv.federated.apes", "APES / S-APES (seed 000): Table 3 privacy and accuracy vs baselines"),
    "gspa": ("jaxpriv.federated.gspa", "GSPA / E-APES (seeds 001, 003): privacy bounds, multinomial TV, shuffled SGD"),
    "rpdp": ("jaxpriv.federated.rpdp", "rPDP-FL (seed 004): SCF vs exact inversion, accuracy vs baselines"),
    "udpfl": ("jaxpriv.federated.udpfl", "UDP-FL (seed 002): Harmonizer scales and accuracy per mechanism"),
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


#: Tolerances of the verdicts in the headline table (stated at its top): privacy and other figures are
#: compared relatively (the papers print 2-3 significant digits and draw their budgets at random),
#: accuracies in percentage points, run times by their order of magnitude (other machines).
RTOL = 0.05
ACC_ATOL = 2.0
TIME_FACTOR = 10.0
#: status of a row whose numbers agree although ours ran on other data than the paper's
STAND_IN = "matches on a stand-in"


def _num(x, digits: int = 4) -> str:
    x = float(x)
    return "∞" if math.isinf(x) else f"{x:.{digits}g}"


def _row(paper, quantity, paper_text, ours_text, status, verdict, paper_value=None, ours_value=None):
    return {"paper": paper, "quantity": quantity, "paper_text": paper_text, "ours_text": ours_text,
            "status": status, "verdict": verdict, "paper_value": paper_value, "ours_value": ours_value}


def compare(paper: str, quantity: str, paper_value, ours, *, why: str, kind: str = "relative",
            tol: float | None = None, digits: int = 4, paper_text: str | None = None,
            ours_text: str | None = None, stand_in: str | None = None) -> dict:
    """One headline row whose verdict is computed from the two numbers.

    ``kind="relative"``: reproduced when |ours/paper − 1| ≤ ``tol`` (default :data:`RTOL`);
    ``kind="points"`` (accuracies in %): when |ours − paper| ≤ ``tol`` percentage points (default
    :data:`ACC_ATOL`); ``kind="time"`` (seconds): when the ratio lies within a factor ``tol`` (default
    :data:`TIME_FACTOR`). ``why`` (one line) is shown only when the numbers differ. ``stand_in`` names the
    data ours ran on when it is not the paper's: numbers within tolerance then only *match on a stand-in*
    (a coincidence, not a reproduction).

    Example:
      >>> compare("APES", "ε^c", 0.057, 0.05723, why="budget draw")["verdict"]
      'reproduced (+0.4%; tolerance ±5%)'
      >>> compare("APES", "acc", 79.67, 86.91, kind="points", why="digits, not QMNIST")["verdict"]
      'differs by +7.2 pp (tolerance ±2 pp): digits, not QMNIST'
    """
    p, o = float(paper_value), float(ours)
    if math.isnan(o) or math.isnan(p):
        return _row(paper, quantity, paper_text or _num(p, digits), ours_text or "—", "differs",
                    f"differs: no value ({why})", p, o)
    if kind == "relative":
        tol = RTOL if tol is None else tol
        both_inf = math.isinf(p) and math.isinf(o)
        d = 0.0 if both_inf or o == p else (o / p - 1.0 if p != 0 else math.copysign(math.inf, o))
        delta = "∞" if not math.isfinite(d) else f"{d:+.1%}" if abs(d) >= 1e-3 else f"{d:+.2%}"
        bound, ok = f"±{tol:.0%}", both_inf or abs(d) <= tol
        if both_inf:
            delta = "both ∞"
    elif kind == "points":
        tol = ACC_ATOL if tol is None else tol
        d = o - p
        delta, bound, ok = f"{d:+.1f} pp", f"±{tol:g} pp", abs(d) <= tol
    elif kind == "time":
        tol = TIME_FACTOR if tol is None else tol
        r = o / p if p > 0 and o > 0 else math.nan  # a time of 0 has no ratio: never "within"
        delta = "n/a" if math.isnan(r) else f"{1 / r:.3g}× faster" if r < 1 else f"{r:.3g}× slower"
        bound, ok = f"within ×{tol:g}", 1 / tol <= r <= tol
    else:
        raise ValueError(f"kind must be 'relative', 'points' or 'time', got {kind!r}")
    unit = {"points": "%", "time": " s"}.get(kind, "")
    paper_text = paper_text or _num(p, digits) + unit
    ours_text = ours_text or _num(o, digits) + unit
    if ok and stand_in:
        status, verdict = STAND_IN, f"within tolerance ({delta}), but on {stand_in}: a coincidence, not a reproduction"
    elif ok:
        status, verdict = "reproduced", f"reproduced ({delta}; tolerance {bound})"
    else:
        status, verdict = "differs", f"differs by {delta} (tolerance {bound}): {why}"
    return _row(paper, quantity, paper_text, ours_text, status, verdict, p, o)


def claim(paper: str, quantity: str, paper_claim: str, holds: bool, evidence: str, *, why: str,
          stand_in: str | None = None) -> dict:
    """A row for a claim without a number (an ordering, a threshold): reproduced when ``holds``, which the
    caller computes from its numbers (``evidence`` shows them); ``why`` is shown only when it fails.
    ``stand_in`` names the data ours ran on when it is not the paper's: a claim that holds there only
    *matches on a stand-in*.

    Example:
      >>> claim("GSPA", "constant beats uniform", "94.8% > 93.5%", True, "54% vs 40%", why="-")["verdict"]
      'reproduced'
      >>> claim("GSPA", "constant beats uniform", "94.8% > 93.5%", True, "54% vs 40%", why="-",
      ...       stand_in="digits")["verdict"]
      'holds, but on digits: a coincidence, not a reproduction'
    """
    if holds and stand_in:
        return _row(paper, quantity, paper_claim, evidence, STAND_IN,
                    f"holds, but on {stand_in}: a coincidence, not a reproduction")
    ok = bool(holds)
    return _row(paper, quantity, paper_claim, evidence, "reproduced" if ok else "differs",
                "reproduced" if ok else f"not reproduced: {why}")


def not_computed(paper: str, quantity: str, paper_text: str, *, why: str) -> dict:
    """A headline number jaxpriv does not compute, with the reason."""
    return _row(paper, quantity, paper_text, "—", "not computed", f"not computed: {why}")


def _cell(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def headline_table(rows: list[dict]) -> str:
    """The Markdown table that opens ``systems.md``: one row per headline number, with its verdict."""
    counts = {s: sum(r["status"] == s for r in rows) for s in ("reproduced", STAND_IN, "differs", "not computed")}
    lines = [
        f"Verdicts are computed from the numbers: figures match within ±{RTOL:.0%} (relative), accuracies "
        f"within ±{ACC_ATOL:g} percentage points (pp), run times within a factor {TIME_FACTOR:g}; claims "
        "(orderings, thresholds) hold or not on our numbers. "
        "Accuracies measured on bundled stand-in data (digits, breast_cancer) are not the papers' experiments: "
        "their rows say by how much and why they differ, and agreement there is marked as a coincidence. "
        f"**{counts['reproduced']} reproduced, {counts[STAND_IN]} match only on stand-in data, {counts['differs']} "
        f"differ, {counts['not computed']} not computed** (of {len(rows)}).",
        "",
        "| paper | headline number | paper's value | ours | verdict |",
        "|---|---|---|---|---|",
    ]
    lines += [f"| {_cell(r['paper'])} | {_cell(r['quantity'])} | {_cell(r['paper_text'])} | {_cell(r['ours_text'])} | "
              f"{_cell(r['verdict'])} |" for r in rows]
    return "\n".join(lines)


def _why(value) -> str:
    if isinstance(value, str):
        return value
    return "\n\n" + "\n".join(f"- {item}" for item in value)


def _section(name: str, result: dict, seconds: float, out_dir: str) -> str:
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
        f"*({seconds:.0f} s; `jaxpriv.federated.{name}.reproduce`)*",
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
      headline rows (:func:`compare`, :func:`claim`, :func:`not_computed`), "results": {name: the system's
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
