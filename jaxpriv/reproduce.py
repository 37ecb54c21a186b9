"""``jaxpriv reproduce``: the seeds' headline results, regenerated on bundled data, in one report.

Each seed system (:mod:`jaxpriv.federated.apes`, :mod:`~jaxpriv.federated.gspa`,
:mod:`~jaxpriv.federated.rpdp`, :mod:`~jaxpriv.federated.udpfl`) has a ``reproduce(quick, out_dir)`` that
returns the paper's number, ours, why they differ, a Markdown table and its figures; this module runs the
chosen ones and writes them, section by section, to ``systems.md`` next to the accounting report of
:func:`jaxpriv.report.write_report`.
"""

from __future__ import annotations

import importlib
import json
import os
import time
from typing import Callable

__all__ = ["SYSTEMS", "parse_systems", "reproduce_systems"]

#: name → (module, what it reproduces)
SYSTEMS = {
    "apes": ("jaxpriv.federated.apes", "APES / S-APES (seed 000): Table 3 privacy and accuracy vs baselines"),
    "gspa": ("jaxpriv.federated.gspa", "GSPA / E-APES (seeds 001, 003): privacy bounds, multinomial TV, shuffled SGD"),
    "rpdp": ("jaxpriv.federated.rpdp", "rPDP-FL (seed 004): SCF vs exact inversion, accuracy vs baselines"),
    "udpfl": ("jaxpriv.federated.udpfl", "UDP-FL (seed 002): Harmonizer scales and accuracy per mechanism"),
}


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


def _ours(value) -> str:
    """A system's own numbers: prose as is; a dict as a collapsed JSON block (its table shows the headline)."""
    if isinstance(value, str):
        return value
    text = json.dumps(value, indent=1, default=lambda x: float(x) if hasattr(x, "__float__") else str(x))
    return f"see the table below.\n\n<details><summary>all numbers</summary>\n\n```json\n{text}\n```\n</details>"


def _section(name: str, result: dict, seconds: float, out_dir: str) -> str:
    figures = "\n".join(f"![{os.path.basename(p)}]({os.path.relpath(p, out_dir)})" for p in result.get("figures", []))
    return "\n".join([
        f"## {result.get('title', name)}",
        "",
        f"**Paper:** {result.get('paper', '—')}",
        "",
        f"**Ours:** {_ours(result.get('ours', '—'))}",
        "",
        f"**Why they differ:** {result.get('why_different', '—')}",
        "",
        result.get("table_markdown", ""),
        "",
        figures,
        "",
        f"*({seconds:.0f} s; `jaxpriv.federated.{name}.reproduce`)*",
        "",
    ])


def reproduce_systems(out_dir: str, *, quick: bool, systems: list[str],
                      status: Callable[[str], None] = lambda message: None) -> dict:
    """Run each system's ``reproduce`` and write ``systems.md`` (and the figures) into ``out_dir``.

    Args:
      out_dir: output directory (created if needed).
      quick: the systems' fast configurations (small rounds and clients).
      systems: names from :data:`SYSTEMS` (see :func:`parse_systems`).
      status: called with a short message before each system.

    Returns:
      ``{"systems": path of systems.md, "results": {name: the system's result dict}}``.
    """
    for name in systems:
        if name not in SYSTEMS:
            raise ValueError(f"systems must be a subset of {sorted(SYSTEMS)}, got {name!r}")
    os.makedirs(out_dir, exist_ok=True)
    sections, results = [], {}
    for name in systems:
        module, what = SYSTEMS[name]
        status(what)
        start = time.perf_counter()
        results[name] = importlib.import_module(module).reproduce(quick, os.path.join(out_dir, name))
        sections.append(_section(name, results[name], time.perf_counter() - start, out_dir))
    path = os.path.join(out_dir, "systems.md")
    with open(path, "w", encoding="utf-8") as f:
        f.write("# The seeds' systems, reproduced on bundled data\n\n"
                + ("Quick mode: small numbers of clients and rounds; run without `--quick` for the full "
                   "configurations.\n\n" if quick else "")
                + "\n".join(sections))
    return {"systems": path, "results": results}
