"""The verdicts of ``jaxpriv reproduce``'s headline table: one row per headline number of a seed paper.

Each row holds the paper's value and ours and a verdict computed from the two against stated tolerances
(:func:`compare`), or whether a claim without a number holds on our numbers (:func:`claim`), or why
jaxpriv does not compute it (:func:`not_computed`). Every system module of :mod:`jaxpriv.reproduce`
returns its rows; :func:`headline_table` renders them all as the table that opens ``systems.md``.
"""

from __future__ import annotations

import math

__all__ = ["RTOL", "ACC_ATOL", "TIME_FACTOR", "STAND_IN", "NOT_JUDGED", "compare", "claim", "not_computed", "not_judged",
           "headline_table"]

#: Tolerances of the verdicts in the headline table (stated at its top): privacy and other figures are
#: compared relatively (the papers print 2-3 significant digits and draw their budgets at random),
#: accuracies in percentage points, run times by their order of magnitude (other machines).
RTOL = 0.05
ACC_ATOL = 2.0
TIME_FACTOR = 10.0
#: status of a row whose numbers agree although ours ran on other data than the paper's
STAND_IN = "matches on a stand-in"
#: status of a row whose number quick mode measures but too small a run to judge (the reason is computed)
NOT_JUDGED = "not judged in quick mode"


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


def not_judged(paper: str, quantity: str, paper_text: str, ours_text: str, *, why: str) -> dict:
    """A headline number quick mode measures (``ours_text``) but does not judge: ``why`` gives the computed
    reason (e.g. the run's number of steps against the paper's); the full run judges it with :func:`compare`.

    Example:
      >>> not_judged("GSPA", "acc", "96.78%", "61.0%", why="80 of the paper's 5,000 steps")["verdict"]
      "not judged in quick mode: 80 of the paper's 5,000 steps"
    """
    return _row(paper, quantity, paper_text, ours_text, NOT_JUDGED, f"{NOT_JUDGED}: {why}")


def _cell(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def headline_table(rows: list[dict]) -> str:
    """The Markdown table that opens ``systems.md``: one row per headline number, with its verdict.

    Raises ValueError when two rows share a paper and a headline number (a claim counted twice weighs twice
    in the counts; issue 34). ``systems.json`` is written before this table, so no number is lost.
    """
    seen: dict = {}
    for r in rows:
        seen[r["paper"], r["quantity"]] = seen.get((r["paper"], r["quantity"]), 0) + 1
    twice = [f"{paper!r} / {quantity!r} ({n} rows)" for (paper, quantity), n in seen.items() if n > 1]
    if twice:
        raise ValueError("rows must hold one row per paper and headline number, got " + "; ".join(twice))
    counts = {s: sum(r["status"] == s for r in rows)
              for s in ("reproduced", STAND_IN, "differs", "not computed", NOT_JUDGED)}
    unjudged = f", {counts[NOT_JUDGED]} not judged in quick mode" if counts[NOT_JUDGED] else ""
    lines = [
        f"Verdicts are computed from the numbers: figures match within ±{RTOL:.0%} (relative), accuracies "
        f"within ±{ACC_ATOL:g} percentage points (pp), run times within a factor {TIME_FACTOR:g}; claims "
        "(orderings, thresholds) hold or not on our numbers. "
        "Accuracies measured on bundled stand-in data (digits, breast_cancer, and MNIST-5k where a paper's data "
        "is CIFAR-10) are not the papers' experiments: "
        "their rows say by how much and why they differ, and agreement there is marked as a coincidence. "
        f"**{counts['reproduced']} reproduced, {counts[STAND_IN]} match only on stand-in data, {counts['differs']} "
        f"differ, {counts['not computed']} not computed{unjudged}** (of {len(rows)}).",
        "",
        "| paper | headline number | paper's value | ours | verdict |",
        "|---|---|---|---|---|",
    ]
    lines += [f"| {_cell(r['paper'])} | {_cell(r['quantity'])} | {_cell(r['paper_text'])} | {_cell(r['ours_text'])} | "
              f"{_cell(r['verdict'])} |" for r in rows]
    return "\n".join(lines)
