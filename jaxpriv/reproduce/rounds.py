"""The many-rounds table of the APES and GSPA sections of ``systems.md``: the central ε after T rounds.

One shuffled report per user and round, composed over T rounds by every method of
:func:`jaxpriv.calibrate.shuffle_rounds.rounds_summary` (the exact pair composed by PLD beside the papers' compositions;
MATH §3.1, §7), as Markdown lines and a figure (:func:`jaxpriv.calibrate.shuffle_summary.plot_epsilon_versus_rounds`,
the one ``jaxpriv shuffle --rounds`` draws).
"""

from __future__ import annotations

from ..calibrate.shuffle_rounds import rounds_summary
from ..calibrate.shuffle_summary import plot_epsilon_versus_rounds

__all__ = ["rounds_report"]


def rounds_report(local_epsilons, delta: float, rounds, path: str, title: str, *, dims: int = 1):
    """Markdown lines and a figure (``path``) of the central ε after each T in ``rounds`` by every
    composition of :func:`jaxpriv.calibrate.shuffle_rounds.rounds_summary`; returns ``(lines, rows)``."""
    rows = rounds_summary(local_epsilons, delta, rounds, dims=dims)
    plot_epsilon_versus_rounds(rounds, rows, path, title)
    per = f" × {dims} releases" if dims > 1 else ""
    lines = [f"| method (central ε after T rounds{per}, δ = {delta:g}) | " + " | ".join(f"T = {t:,}" for t in rounds)
             + " | kind |", "|---|" + "---|" * (len(rounds) + 1)]
    lines += [f"| {name} | " + " | ".join(f"{x:.4g}" for x in row["epsilon"]) + f" | {row['kind']} |"
              for name, row in rows.items()]
    return lines, rows
