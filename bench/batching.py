"""Batching never costs more than asking one by one: n settings in one call against the same n settings
asked in n calls, for the public kernels whose batches are cut by ``jaxpriv._batching.call_plan``.

A batch pays for its padding (a compiled program has a fixed number of rows) and, in a root finder, for
its slowest row (the iteration runs until every row has converged); a single call pays Python's and the
dispatch's overhead once per setting. Issue 14's goal: a batch is never slower per setting than single
calls. Warm (every program compiled before timing); the batch and the loop of single calls are timed
alternately, ``--repeats`` times each, and the medians compared.

    python bench/batching.py                  # ~3 min on 2 CPU cores
    python bench/batching.py --json batching.json
    python bench/batching.py --cold --baseline ../old-checkout   # cold start, against another commit

``--cold`` times instead one batch per fresh Python process with an empty compilation cache (a new
``JAXPRIV_CACHE_DIR``), imports and compilation included, for n = 2, 40 and 300 settings of each kernel:
which program a batch compiles is what a new user pays for. With ``--baseline DIR`` (a checkout of another
commit) the same processes run that checkout's jaxpriv, interleaved with this one's.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
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


# The calibrators' batch answers, certified by the exact ε of what they found: ε ≤ the target
CERTIFY = {
    "calibrate.noise_multiplier": lambda i, sigma: jaxpriv.dpsgd_epsilon(Q[i], sigma, 1000, 1e-5, progress=False),
    "calibrate.sampling_rate": lambda i, q: jaxpriv.dpsgd_epsilon(q, SIGMA[i], 1000, 1e-5, progress=False),
}


def batch_over_singles(fn, n: int, repeats: int) -> tuple[float, float, float]:
    """(median time of one call with settings 0..n−1, median time of n single calls of the same settings,
    largest relative difference between their answers), the two timed alternately; every program compiled
    (or loaded) before timing."""
    batch = lambda: np.asarray(fn(np.arange(n)))  # noqa: E731
    singles = lambda: np.concatenate([np.asarray(fn(np.array([i]))) for i in range(n)])  # noqa: E731
    a, b = batch(), singles()
    differ = float(np.max(np.abs(a - b) / np.abs(b)))
    times = {batch: [], singles: []}
    for _ in range(repeats):
        for run in (batch, singles):
            start = time.perf_counter()
            run()
            times[run].append(time.perf_counter() - start)
    return float(np.median(times[batch])), float(np.median(times[singles])), differ


COLD_SIZES = (2, 40, 300)
_CHILD = """
import sys, time
sys.path.insert(0, {root!r})
import jaxpriv  # the checkout under test, before the bench module puts its own first on the path
sys.path.insert(0, {bench!r})
import jax, numpy as np, batching
jax.block_until_ready(batching.KERNELS[{name!r}](np.arange({n})))
"""


def cold_run(root: str, name: str, n: int) -> dict:
    """One batch of ``n`` settings of kernel ``name`` in a fresh process, empty compilation cache: CPU
    (user + system of the child) and wall seconds, imports and compilation included."""
    cache = tempfile.mkdtemp(prefix="jaxpriv-batching-")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    try:
        code = _CHILD.format(root=os.path.abspath(root), bench=os.path.dirname(os.path.abspath(__file__)), name=name, n=n)
        subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                       env={**os.environ, "JAXPRIV_CACHE_DIR": cache})
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"cpu_s": cpu, "wall_s": time.perf_counter() - start}


def cold(args, info, t_start) -> int:
    roots = {"this checkout": _ROOT}
    if args.baseline:
        if not os.path.isfile(os.path.join(args.baseline, "jaxpriv", "__init__.py")):
            raise SystemExit(f"--baseline must be a checkout of jaxpriv (no jaxpriv/__init__.py in {args.baseline!r})")
        roots["baseline"] = args.baseline
    samples: dict = {}
    for repeat in range(args.repeats):
        say(f"repeat {repeat + 1}/{args.repeats} …")
        for name in KERNELS:
            for n in COLD_SIZES:
                for who, root in roots.items():  # interleaved
                    samples.setdefault((name, n, who), []).append(cold_run(root, name, n))
    rows = []
    for (name, n, who), runs in samples.items():
        cpu = float(np.median([r["cpu_s"] for r in runs]))
        wall = float(np.median([r["wall_s"] for r in runs]))
        rows.append([name, str(n), who, f"{cpu:.2f}", f"{wall:.2f}"])
    say()
    say(table(["kernel", "n", "jaxpriv", "CPU s (median)", "wall s (median)"], rows))
    results = {"machine": info, "roots": roots,
               "cold": {f"{name} / {n} / {who}": runs for (name, n, who), runs in samples.items()}}
    return finish(results, {}, t_start, args.json)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5, help="timed alternations per figure (median)")
    parser.add_argument("--json", metavar="OUT", help="write all results to this JSON file")
    parser.add_argument("--cold", action="store_true", help="time one batch per fresh process, empty cache")
    parser.add_argument("--baseline", metavar="DIR", help="with --cold: also run this checkout's jaxpriv")
    args = parser.parse_args(argv)
    t_start = time.perf_counter()
    info = machine_info({"jaxpriv": jaxpriv.__version__, "jax": jax.__version__}, os.path.dirname(jaxpriv.__file__))
    if args.cold:
        print_header(info, f"cold, {args.repeats} repeats", "Batches in a fresh process, empty compilation cache",
                     "Each figure: one fresh Python process (imports, compilation and the batch); CPU = user + "
                     "system seconds of the child; medians over the repeats, the checkouts interleaved.")
        return cold(args, info, t_start)
    print_header(info, f"{args.repeats} repeats", "Batches against single calls",
                 "Each cell: (one call with the n settings) / (n single calls of the same settings), warm, medians "
                 "of alternating runs. ≤ 1: the batch is no slower per setting than asking one by one.")
    results, checks, rows = {"machine": info, "sizes": list(SIZES), "kernels": {}}, {}, []
    for name, fn in KERNELS.items():
        times = [batch_over_singles(fn, n, args.repeats) for n in SIZES]
        ratios = [b / s for b, s, _ in times]
        per_single = float(np.median([s / n for (_, s, _), n in zip(times, SIZES)]))
        differ = max(d for _, _, d in times)
        results["kernels"][name] = {"batch_s": [b for b, _, _ in times], "singles_s": [s for _, s, _ in times],
                                    "batch_over_singles": ratios, "max_rel_diff_of_answers": differ}
        rows.append([name, f"{per_single * 1e3:.2f}"] + [f"{r:.2f}" for r in ratios] + [f"{differ:.1e}"])
        checks[f"{name}: every batch ≤ its singles (ratio ≤ 1)"] = max(ratios) <= 1.0
        checks[f"{name}: batch answers = single answers (≤ 1e-10 relative)"] = differ <= 1e-10
        if name in CERTIFY:
            every = np.arange(SETTINGS)
            achieved = np.asarray(CERTIFY[name](every, np.asarray(fn(every))))
            checks[f"{name}: ε at the batch's answers ≤ the targets"] = bool(np.all(achieved <= EPS[every]))
        say(f"- {name} done")
    say()
    say(table(["kernel", "single call, ms (median)"] + [f"n = {n}" for n in SIZES] + ["answers differ by"], rows))
    say()
    say("| check | passed |\n|---|---|\n" + "\n".join(f"| {k} | {'yes' if v else 'NO'} |" for k, v in checks.items()))
    return finish(results, checks, t_start, args.json)


if __name__ == "__main__":
    raise SystemExit(main())
