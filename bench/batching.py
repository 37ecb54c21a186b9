"""Batching never costs more than asking one by one: n settings in one call against the same n settings
asked in n calls, for the public kernels whose batches are cut by ``jaxpriv._batching.call_plan``.

A batch pays for its padding (a compiled program has a fixed number of rows) and, in a root finder, for
its slowest row (the iteration runs until every row has converged); a single call pays Python's and the
dispatch's overhead once per setting. Issue 14's goal: a batch is never slower per setting than single
calls. Warm (every program compiled before timing); the batch and the loop of single calls are timed
alternately, ``--repeats`` times each, and the medians compared.

    python bench/batching.py                  # ~2 min on 2 CPU cores
    python bench/batching.py --json batching.json
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if os.path.isfile(os.path.join(_ROOT, "jaxpriv", "__init__.py")):
    sys.path.insert(0, _ROOT)
import jax  # noqa: E402

import jaxpriv  # noqa: E402
from _common import finish, machine_info, print_header, say, table  # noqa: E402
from jaxpriv import calibrate  # noqa: E402
from jaxpriv.shuffle import clones_epsilon  # noqa: E402

SIZES = (2, 5, 9, 16, 17, 40, 64, 100, 176, 177, 255, 300)
SETTINGS = max(SIZES)
rng = np.random.default_rng(0)
Q, SIGMA, EPS = 10 ** rng.uniform(-3, -1, SETTINGS), rng.uniform(0.8, 3.0, SETTINGS), rng.uniform(1.0, 8.0, SETTINGS)
EPS0, DELTA = rng.uniform(0.1, 4.0, SETTINGS), 10 ** rng.uniform(-12, -5, SETTINGS)

# name → settings i ↦ the answers (i: an index array)
KERNELS = {
    "dpsgd_epsilon (exact RDP, T = 1000)": lambda i: jaxpriv.dpsgd_epsilon(Q[i], SIGMA[i], 1000, 1e-5,
                                                                            progress=False),
    "calibrate.noise_multiplier": lambda i: calibrate.noise_multiplier(EPS[i], Q[i], 1000, 1e-5, progress=False),
    "calibrate.sampling_rate": lambda i: calibrate.sampling_rate(EPS[i], SIGMA[i], 1000, 1e-5, progress=False),
    "shuffle.clones_epsilon (n = 10⁵)": lambda i: clones_epsilon(EPS0[i], 100_000, DELTA[i], progress=False),
}


def batch_over_singles(fn, n: int, repeats: int) -> tuple[float, float]:
    """(median time of one call with settings 0..n−1, median time of n single calls of the same settings),
    the two timed alternately; every program compiled (or loaded) before timing."""
    batch = lambda: jax.block_until_ready(fn(np.arange(n)))  # noqa: E731
    singles = lambda: [jax.block_until_ready(fn(np.array([i]))) for i in range(n)]  # noqa: E731
    batch(), singles()
    times = {batch: [], singles: []}
    for _ in range(repeats):
        for run in (batch, singles):
            start = time.perf_counter()
            run()
            times[run].append(time.perf_counter() - start)
    return float(np.median(times[batch])), float(np.median(times[singles]))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5, help="timed alternations per figure (median)")
    parser.add_argument("--json", metavar="OUT", help="write all results to this JSON file")
    args = parser.parse_args(argv)
    t_start = time.perf_counter()
    info = machine_info({"jaxpriv": jaxpriv.__version__, "jax": jax.__version__}, os.path.dirname(jaxpriv.__file__))
    print_header(info, f"{args.repeats} repeats", "Batches against single calls",
                 "Each cell: (one call with the n settings) / (n single calls of the same settings), warm, medians "
                 "of alternating runs. ≤ 1: the batch is no slower per setting than asking one by one.")
    results, checks, rows = {"machine": info, "sizes": list(SIZES), "kernels": {}}, {}, []
    for name, fn in KERNELS.items():
        times = [batch_over_singles(fn, n, args.repeats) for n in SIZES]
        ratios = [b / s for b, s in times]
        per_single = float(np.median([s / n for (_, s), n in zip(times, SIZES)]))
        results["kernels"][name] = {"batch_s": [b for b, _ in times], "singles_s": [s for _, s in times],
                                    "batch_over_singles": ratios}
        rows.append([name, f"{per_single * 1e3:.2f}"] + [f"{r:.2f}" for r in ratios])
        checks[f"{name}: every batch ≤ its singles (ratio ≤ 1)"] = max(ratios) <= 1.0
        say(f"- {name} done")
    say()
    say(table(["kernel", "single call, ms (median)"] + [f"n = {n}" for n in SIZES], rows))
    say()
    say("| check | passed |\n|---|---|\n" + "\n".join(f"| {k} | {'yes' if v else 'NO'} |" for k, v in checks.items()))
    return finish(results, checks, t_start, args.json)


if __name__ == "__main__":
    raise SystemExit(main())
