"""A first answer to two questions, this checkout against another, interleaved (the figures of bench/README's
"The clone pair as atoms" paragraph).

Questions, each in a fresh process with an empty compilation cache (``JAXPRIV_CACHE_DIR=``):

* the APES Table 3 many-rounds rows, ``rounds_epsilon(scenario("Uniform2", 10_000, seed=0), 1e-8,
  [1, 10, 100, 1000], model=m)`` for the GSPA and APES models: CPU and wall of the first call (compile
  included) and of a second call in the same process;
* ``jaxpriv calibrate steps --epsilon 100 --q 0.01 --sigma 0.3 --delta 1e-5`` (the default accountant):
  CPU (user + system of the child) and wall.

    git worktree add /tmp/old 8f7dec3 && python bench/rounds_steps_ab.py /tmp/old --repeats 3

Medians over the repeats; the load average at the start of each run is printed beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_ROUNDS = r'''
import json, time, numpy as np
from jaxpriv.budgets import scenario
from jaxpriv.calibrate.shuffle_rounds import rounds_epsilon
eps, out = scenario("Uniform2", 10_000, seed=0), {}
for call in ("first", "second"):
    c, w = time.process_time(), time.perf_counter()
    values = [rounds_epsilon(eps, 1e-8, np.array([1, 10, 100, 1000]), model=m).tolist() for m in ("gspa", "apes")]
    out[call] = [time.process_time() - c, time.perf_counter() - w]
out["values"] = values
print(json.dumps(out))
'''
_STEPS = ["-m", "jaxpriv", "calibrate", "steps", "--epsilon", "100", "--q", "0.01", "--sigma", "0.3", "--delta",
          "1e-5", "--json"]


def fresh(tree: str, argv: list[str]) -> tuple[str, float, float]:
    """Run ``python argv`` with ``tree`` first on the path, empty cache, from a neutral directory."""
    env = dict(os.environ, JAXPRIV_CACHE_DIR="", PYTHONPATH=tree)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, *argv], env=env, cwd=tempfile.gettempdir(), capture_output=True,
                          text=True, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return done.stdout, cpu, time.perf_counter() - start


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("baseline", help="a checkout of another commit (e.g. a git worktree)")
    parser.add_argument("--repeats", type=int, default=3, help="interleaved repeats (default 3)")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error(f"--repeats must be an integer in [1, inf), got {args.repeats}")
    if not os.path.isdir(os.path.join(args.baseline, "jaxpriv")):
        parser.error(f"baseline must be a checkout holding jaxpriv/, got {args.baseline!r}")
    trees = {"baseline": os.path.abspath(args.baseline), "this": ROOT}
    rows = {}
    for repeat in range(args.repeats):
        for name, tree in trees.items():
            load = os.getloadavg()[0]
            out, _, _ = fresh(tree, ["-c", _ROUNDS])
            r = json.loads(out.strip().splitlines()[-1])
            rows.setdefault((name, "rounds first"), []).append(r["first"])
            rows.setdefault((name, "rounds second"), []).append(r["second"])
            out, cpu, wall = fresh(tree, _STEPS)
            rows.setdefault((name, "calibrate steps"), []).append([cpu, wall])
            print(f"repeat {repeat + 1} {name}: load {load:.2f}, rounds {r['first']} then {r['second']} "
                  f"(APES T = 1000: {r['values'][1][-1]:.9f}), steps CPU {cpu:.1f} s wall {wall:.1f} s "
                  f"T = {json.loads(out)[0]['steps']:.0f}", flush=True)
    print("\nmedians: question, baseline CPU / wall, this CPU / wall, ratio CPU / wall")
    for question in ("rounds first", "rounds second", "calibrate steps"):
        (bc, bw), (tc, tw) = ([statistics.median(v[i] for v in rows[(n, question)]) for i in (0, 1)] for n in trees)
        print(f"{question:16s} {bc:7.1f} / {bw:6.1f} s   {tc:7.1f} / {tw:6.1f} s   {tc / bc:.2f}× / {tw / bw:.2f}×")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
