"""Hard PLD questions, where the certified interval is refined: this checkout against another, side by side.

At small noise (σ ≲ 0.5) the default grid's interval is wider than its 1% tolerance, and the accountant
recomputes the setting on finer grids (MATH §7.3). Each question is asked in a fresh Python process
sharing one compilation cache, which a first untimed pass over every question fills (what a user's second
run sees; the cold cost is bench/latency.py's); the checkouts alternate within each repeat; CPU = user +
system seconds of the child, medians over repeats. Reported with each time: the interval, so that a
faster answer is seen not to be a looser one.

    python bench/pld_refinement.py --baseline ../checkout-of-another-commit     # ~5 min on 2 CPU cores
    python bench/pld_refinement.py --repeats 5 --json refinement.json
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import shutil
import statistics
import sys
import tempfile
import time

import jaxpriv
from _common import checkouts, finish, machine_info, print_header, say, table
from latency import ROOT, fresh, python

#: (name, program printing [lower, upper]): the questions whose default interval is refined
QUESTIONS = [
    ("ε, q = 0.01, σ = 0.3, T = 1923", "from jaxpriv import accounting, events as e\n"
     "print(json.dumps([float(x) for x in accounting.epsilon_interval(e.SelfComposed(e.PoissonSampled(0.01, "
     "e.Gaussian(0.3)), 1923), 1e-5)]))"),
    ("ε, q = 0.5, σ = 0.3, T = 10⁶", "from jaxpriv import accounting, events as e\n"
     "print(json.dumps([float(x) for x in accounting.epsilon_interval(e.SelfComposed(e.PoissonSampled(0.5, "
     "e.Gaussian(0.3)), 1_000_000), 1e-5)]))"),
    ("ε at δ = 0.3743, 20 × RR(0.3, k = 4)", "from jaxpriv import accounting, events as e\n"
     "print(json.dumps([float(x) for x in accounting.epsilon_interval(e.SelfComposed(e.RandomizedResponse(0.3, "
     "4), 20), 0.3743)]))"),
    ("`jaxpriv calibrate steps`, ε = 100, q = 0.01, σ = 0.3", None),
]
CALIBRATE = ["-m", "jaxpriv", "calibrate", "steps", "--epsilon", "100", "--q", "0.01", "--sigma", "0.3", "--delta",
             "1e-5", "--json"]


def argv(program: str | None) -> list[str]:
    return [sys.executable, *CALIBRATE] if program is None else python("import json\n" + program)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", metavar="OUT")
    parser.add_argument("--baseline", metavar="DIR", help="a checkout of another commit, asked the same questions")
    args = parser.parse_args()
    arms = checkouts(parser, args, ("this checkout", ROOT))
    t_start = time.perf_counter()
    info = machine_info({name: importlib.metadata.version(name) for name in ("jaxpriv", "jax")},
                        os.path.dirname(jaxpriv.__file__))
    print_header(info, f"{args.repeats} repeats", "Refined PLD intervals: time and width",
                 "Each figure: a fresh Python process, warm compilation cache (one per checkout); CPU = user + "
                 "system seconds; median over repeats, the checkouts interleaved.")
    caches = {arm: tempfile.mkdtemp(prefix="jaxpriv-refinement-") for arm in arms}
    samples: dict[tuple[str, str], list[dict]] = {}
    try:
        for arm, root in arms.items():  # fill each checkout's cache: every program these questions need
            say(f"warming {arm} …")
            for _, program in QUESTIONS:
                fresh(argv(program), caches[arm], cwd=root)
        for repeat in range(args.repeats):
            say(f"repeat {repeat + 1}/{args.repeats} …")
            for name, program in QUESTIONS:
                for arm, root in (arms.items() if repeat % 2 == 0 else reversed(arms.items())):
                    samples.setdefault((name, arm), []).append(fresh(argv(program), caches[arm], cwd=root))
    finally:
        for cache in caches.values():
            shutil.rmtree(cache, ignore_errors=True)
    rows = []
    for name, _ in QUESTIONS:
        base = statistics.median(s["cpu"] for s in samples[(name, next(iter(arms)))])
        for arm in arms:
            runs = samples[(name, arm)]
            cpu = statistics.median(s["cpu"] for s in runs)
            rows.append([name, arm, f"{cpu:.2f}", f"{statistics.median(s['wall'] for s in runs):.2f}",
                         f"{cpu / base:.2f}×", _answer(runs[0]["stdout"])])
    say()
    say(table(["question", "checkout", "CPU s", "wall s", "CPU / this checkout", "answer (first repeat)"], rows))
    results = {"machine": info, "samples": {" / ".join(k): v for k, v in samples.items()}}
    return finish(results, {}, t_start, args.json)


def _answer(stdout: str) -> str:
    """[lower, upper] with the relative width, or the calibrated T (the command's JSON rows)."""
    value = json.loads(stdout) if stdout.startswith("[") else stdout
    if isinstance(value, list) and len(value) == 2 and all(isinstance(x, float) for x in value):
        lower, upper = value
        return f"[{lower:.6g}, {upper:.6g}] ({(upper - lower) / upper:.2%} wide)"
    return stdout[:60]


if __name__ == "__main__":
    sys.exit(main())
