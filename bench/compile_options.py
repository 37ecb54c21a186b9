"""The numerical kernels' XLA options (``jaxpriv._numerics.kernel_jit``) against XLA's defaults, and tiered
compilation (``jaxpriv._tiers``) against one optimised form, side by side.

    python bench/compile_options.py [--repeats 3] [--compare options|tiers] [--json OUT]

Each measurement is a fresh process with the persistent compilation cache off (``JAXPRIV_CACHE_DIR=``), so a
question's first answer pays its compilations, as a new user's does. The two arms alternate (A B A B …) so
that a change in machine load hits both alike; the table gives medians over ``--repeats`` pairs and the
load. ``--compare options`` (the default): ``JAXPRIV_KERNEL_XLA_DEFAULTS=1`` is the "XLA defaults" arm;
``--compare tiers``: ``JAXPRIV_QUICK_TIER=0`` is the "one form" arm (every kernel compiled at XLA's full
optimisation level at once).

Workloads (each: CPU seconds of the whole process for the first answer, then the median wall time of a warm
call on new numbers, which compiles nothing, the warm call's second to fourth runs; "hot": its 11th to 13th
runs, past a tiered kernel's quick calls, where a warm call takes under a second):

* ``pld``: ``accounting.epsilon`` of DP-SGD (q = 0.01, σ = 1.1, T = 1000, δ = 1e-5) by the PLD accountant;
  warm: another setting (q = 0.02, σ = 1.3).
* ``rdp``: ``jaxpriv.dpsgd_epsilon`` of the same setting; warm: a sweep of 20,000 settings.
* ``shuffle``: ``shuffle.clones_epsilon`` (ε₀ = 1, n = 10⁴, δ = 1e-6); warm: 256 settings.

Every answer is compared between the arms: they must agree to 1e-9 relative (the real math library is the
same bit for bit; complex exp/log in the PLD's FFT powers may differ in the last bit).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORKLOADS = ("pld", "rdp", "shuffle")


def _child(workload: str) -> dict:
    sys.path.insert(0, _ROOT)
    import numpy as np

    start = time.process_time()
    if workload == "pld":
        from jaxpriv import accounting, events as ev

        def ask(q, sigma):
            return accounting.epsilon(ev.SelfComposed(ev.PoissonSampled(q, ev.Gaussian(sigma)), 1000), 1e-5,
                                      accountant="pld")

        first = ask(0.01, 1.1)
        warm = lambda: ask(0.02, 1.3)  # noqa: E731
    elif workload == "rdp":
        import jaxpriv

        first = jaxpriv.dpsgd_epsilon(q=0.01, sigma=1.1, steps=1000, delta=1e-5)
        rng = np.random.default_rng(0)
        qs, sigmas = rng.uniform(1e-3, 0.1, 20_000), rng.uniform(0.6, 3.0, 20_000)
        warm = lambda: jaxpriv.dpsgd_epsilon(q=qs, sigma=sigmas, steps=1000, delta=1e-5)  # noqa: E731
    else:
        from jaxpriv.shuffle import clones

        first = clones.clones_epsilon(1.0, 10_000, 1e-6)
        eps0 = np.linspace(0.5, 2.0, 256)
        warm = lambda: clones.clones_epsilon(eps0, 10_000, 1e-6)  # noqa: E731
    cold_cpu = time.process_time() - start
    warm()  # the warm call's own first run (shapes of the warm batch)
    times = []
    for _ in range(3):
        t = time.perf_counter()
        answer = warm()
        times.append(time.perf_counter() - t)
    hot = times
    if statistics.median(times) < 1.0:  # past the quick calls of a tiered kernel (jaxpriv._tiers)
        hot = []
        for i in range(12):
            t = time.perf_counter()
            warm()
            if i >= 9:
                hot.append(time.perf_counter() - t)
    return {"cold_cpu": cold_cpu, "warm": statistics.median(times), "hot": statistics.median(hot),
            "first": float(np.asarray(first).reshape(-1)[0]),
            "warm_answer_sum": float(np.sum(np.asarray(answer, np.float64)))}


def _run(workload: str, defaults: bool, compare: str = "options") -> dict:
    env = dict(os.environ, JAXPRIV_CACHE_DIR="")
    env.pop("JAXPRIV_KERNEL_XLA_DEFAULTS", None)
    env.pop("JAXPRIV_QUICK_TIER", None)
    if defaults:
        env["JAXPRIV_KERNEL_XLA_DEFAULTS" if compare == "options" else "JAXPRIV_QUICK_TIER"] = (
            "1" if compare == "options" else "0")
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", workload], env=env,
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3, help="pairs of fresh processes per workload")
    parser.add_argument("--workloads", default=",".join(WORKLOADS), help="comma-separated subset of " +
                        ", ".join(WORKLOADS))
    parser.add_argument("--compare", choices=("options", "tiers"), default="options",
                        help="options: the kernels' XLA option against XLA's defaults; tiers: tiered compilation "
                             "(jaxpriv._tiers) against one optimised form (JAXPRIV_QUICK_TIER=0)")
    parser.add_argument("--json", metavar="OUT")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(_child(args.child)))
        return 0
    workloads = [w for w in args.workloads.split(",") if w]
    unknown = sorted(set(workloads) - set(WORKLOADS))
    if unknown or args.repeats < 1:
        parser.error(f"workloads must be among {WORKLOADS} and repeats ≥ 1, got {unknown or args.repeats}")
    load = [os.getloadavg()[0]]
    results = {w: {"kernel": [], "defaults": []} for w in workloads}
    failures = 0
    for _ in range(args.repeats):
        for w in workloads:
            for arm in ("kernel", "defaults"):
                results[w][arm].append(_run(w, arm == "defaults", args.compare))
                load.append(os.getloadavg()[0])
    print(f"{os.cpu_count()} CPUs, load {min(load):.1f}–{max(load):.1f}; medians over {args.repeats} pair(s)")
    names = ("kernel", "defaults") if args.compare == "options" else ("tiered", "one form")
    print(f"arms: {names[0]} / {names[1]}")
    print(f"{'workload':9} {'cold CPU s':>20} {'ratio':>6} {'warm s':>20} {'ratio':>6} {'hot s':>20} {'ratio':>6}  agree")
    summary = {}
    for w, arms in results.items():
        med = {arm: {k: statistics.median(r[k] for r in runs) for k in ("cold_cpu", "warm", "hot")}
               for arm, runs in arms.items()}
        equal = all(abs(a[k] - b[k]) <= 1e-9 * abs(b[k]) for a, b in zip(arms["kernel"], arms["defaults"])
                    for k in ("first", "warm_answer_sum"))
        failures += not equal
        k, d = med["kernel"], med["defaults"]
        print(f"{w:9} {k['cold_cpu']:11.2f} / {d['cold_cpu']:6.2f} {k['cold_cpu'] / d['cold_cpu']:6.2f} "
              f"{k['warm']:11.4f} / {d['warm']:6.4f} {k['warm'] / d['warm']:6.2f} "
              f"{k['hot']:11.4f} / {d['hot']:6.4f} {k['hot'] / d['hot']:6.2f}  {equal}")
        summary[w] = {"median": med, "equal": equal, "runs": arms}
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"load": load, "cpus": os.cpu_count(), "results": summary}, f, indent=1)
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
