"""Two ``jaxpriv reproduce`` outputs side by side: every number of ``systems.json`` and every verdict.

    jaxpriv reproduce --quick --out run-a          # e.g. cold: a fresh clone, an empty compilation cache
    jaxpriv reproduce --quick --out run-b          # warm: the same clone again (or another commit)
    python bench/compare_systems.py run-a run-b

Prints how many values were compared and each one that differs (path, both values, relative difference),
then the headline rows: their count, whether each (paper, headline number) is listed once, and every row
whose verdict differs. Timings differ from run to run and are listed like any other value; a verdict should
not change with them. Exit status 1 when a verdict differs or a headline row is listed twice, else 0.
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import os
import sys


def _leaves(value, path=""):
    """(path, value) of every number, string and boolean in a JSON tree."""
    if isinstance(value, dict):
        for key in sorted(value):
            yield from _leaves(value[key], f"{path}.{key}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _leaves(item, f"{path}[{i}]")
    else:
        yield path, value


def _same(a, b) -> bool:
    both_nan = isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b)
    return a == b or both_nan


def _relative(a, b):
    numbers = all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in (a, b))
    return abs(a - b) / max(abs(a), abs(b)) if numbers and max(abs(a), abs(b)) > 0 else None


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("first", help="a reproduce --out folder (or its systems.json)")
    parser.add_argument("second", help="another one")
    args = parser.parse_args(argv)
    runs = []
    for where in (args.first, args.second):
        path = os.path.join(where, "systems.json") if os.path.isdir(where) else where
        with open(path, encoding="utf-8") as f:
            runs.append(json.load(f))

    first, second = (dict(_leaves(run)) for run in runs)
    only = sorted(set(first) ^ set(second))
    differ = [(p, first[p], second[p]) for p in sorted(set(first) & set(second)) if not _same(first[p], second[p])]
    print(f"{len(set(first) & set(second))} values compared, {len(differ)} differ, {len(only)} in one run only")
    for path, a, b in differ:
        rel = _relative(a, b)
        print(f"  {path}: {a!r} | {b!r}" + (f"  (relative {rel:.3g})" if rel is not None else ""))
    for path in only:
        print(f"  {path}: in one run only")

    rows = [run.get("headlines", []) for run in runs]
    keys = [collections.Counter((r["paper"], r["quantity"]) for r in rs) for rs in rows]
    twice = sorted({k for counts in keys for k, n in counts.items() if n > 1})
    verdicts = [{(r["paper"], r["quantity"]): r["status"] for r in rs} for rs in rows]
    changed = sorted(k for k in set(verdicts[0]) | set(verdicts[1]) if verdicts[0].get(k) != verdicts[1].get(k))
    print(f"headline rows: {len(rows[0])} and {len(rows[1])}; listed twice: {len(twice)}; verdicts that differ: "
          f"{len(changed)}")
    print("  verdicts: " + ", ".join(f"{n} {s}" for s, n in collections.Counter(verdicts[0].values()).most_common()))
    for paper, quantity in twice:
        print(f"  listed twice: {paper} / {quantity}")
    for key in changed:
        print(f"  {key[0]} / {key[1]}: {verdicts[0].get(key)} | {verdicts[1].get(key)}")
    return 1 if twice or changed else 0


if __name__ == "__main__":
    sys.exit(main())
