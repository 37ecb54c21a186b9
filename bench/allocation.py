"""Balls in bins (random allocation, one step per example per epoch) against Poisson sampling, by the PLD
accountant: the certified ε of both for the guide's DP-SGD settings, and what a setting costs cold and warm;
beside them, shuffled batches' certified *lower* bound (MATH §11.7: no upper bound is known), which shows how
far a Poisson ε reported for shuffled batches may be from the truth.

Each (setting, scheme) runs in a fresh Python process with an empty compilation cache (JAXPRIV_CACHE_DIR
set to a new directory): "cold" is the first epsilon_interval call there (tracing, compilation and, for
balls in bins, the host's round laws), "warm" the same call again in that process. A batch of settings (σ
varied) is timed in one call too. Balls in bins uses t = 1/q steps per epoch and T/t epochs; shuffled batches
the same epochs, each a permutation cut into t batches (``ShuffledBatches(1, t, ·)``: only t matters), timed
the same way on ``epsilon_lower_bound`` (its "interval" is [lower bound, ∞)).

    python bench/allocation.py              # three settings, ~3-6 min on 2 cores
    python bench/allocation.py --json OUT
    python bench/allocation.py --many 100   # also: 100 distinct σ of balls in bins in one call
    python bench/allocation.py --small-noise   # σ ≤ 0.6 (Chua et al.'s regime): one epoch at δ = 1e-7

``--many N`` times one epsilon_interval call over N distinct settings (t = 100 steps per epoch, 10 epochs,
σ = linspace(1.0, 1.5, N)) in a fresh process, after a warm-up call of the same batch size at one σ (so the
figure is the round laws and the composition, not compilation).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

SETTINGS = [(0.01, 1.1, 10_000), (0.1, 2.9, 1_000), (0.001, 0.8, 10_000)]  # (q, σ, T)
DELTA = 1e-5
BATCH = 8  # settings in the batched call (σ = σ₀ · linspace(0.9, 1.1))

_ONE = """
import json, sys, time
import numpy as np
from jaxpriv import accounting, events
scheme, q, sigma, steps, delta, batch = json.loads(sys.argv[1])
def make(s):
    if scheme == "poisson":
        return events.SelfComposed(events.PoissonSampled(q, events.Gaussian(s)), steps)
    t = round(1 / q)
    if scheme == "shuffle":
        return events.SelfComposed(events.ShuffledBatches(1, t, events.Gaussian(s)), steps // t)
    return events.SelfComposed(events.RandomAllocation(1, t, events.Gaussian(s)), steps // t)
def ask(event):
    if scheme == "shuffle":  # a lower bound only: every upper-bound query refuses it
        return accounting.epsilon_lower_bound(event, delta), np.inf
    return accounting.epsilon_interval(event, delta)
t1 = time.perf_counter(); c1 = time.process_time()
lower, upper = ask(make(sigma))
t2 = time.perf_counter(); c2 = time.process_time()
ask(make(sigma))
t3 = time.perf_counter()
ask(make(sigma * np.linspace(0.9, 1.1, batch)))
t4 = time.perf_counter()
print(json.dumps({"cold_s": t2 - t1, "cold_cpu_s": c2 - c1, "warm_s": t3 - t2, "batch_s": t4 - t3,
                  "lower": float(lower), "upper": None if upper == np.inf else float(upper)}))
"""


_MANY = """
import json, sys, time
import numpy as np
from jaxpriv import accounting, events
count = json.loads(sys.argv[1])
make = lambda s: events.SelfComposed(events.RandomAllocation(1, 100, events.Gaussian(s)), 10)
t0 = time.perf_counter(); c0 = time.process_time()
accounting.epsilon_interval(make(np.full(count, 3.0)), 1e-5)  # compile the programs first (same batch size)
t1 = time.perf_counter(); c1 = time.process_time()
lower, upper = accounting.epsilon_interval(make(np.linspace(1.0, 1.5, count)), 1e-5)
print(json.dumps({"wall_s": time.perf_counter() - t1, "cpu_s": time.process_time() - c1,
                  "warmup_wall_s": t1 - t0, "warmup_cpu_s": c1 - c0, "upper_max": float(np.max(upper)),
                  "width_max": float(np.max((upper - lower) / upper))}))
"""


SMALL_NOISE = [(0.5, 100), (0.6, 200), (0.5, 1563), (0.4, 1563), (0.3, 1563)]  # (σ, t): one epoch, δ = 1e-7


def small_noise() -> None:
    """One epoch of balls in bins beside Poisson sampling at rate 1/t for t steps, at small σ and δ = 1e-7
    (t = 1563 is Chua et al.'s SCL-8192 setting, which Feldman & Shenfeld's Fig. 8 uses with σ ∈ [0.1, 0.5])."""
    from jaxpriv import accounting, events

    print("| σ | t | balls in bins ε [lower, upper] | Poisson ε [lower, upper] | CPU s (both) |")
    print("|---|---|---|---|---|")
    for sigma, t in SMALL_NOISE:
        c = time.process_time()
        bins = accounting.epsilon_interval(events.RandomAllocation(1, t, events.Gaussian(sigma)), 1e-7)
        poisson = accounting.epsilon_interval(
            events.SelfComposed(events.PoissonSampled(1 / t, events.Gaussian(sigma)), t), 1e-7)
        print(f"| {sigma:g} | {t} | [{float(bins[0]):.4f}, {float(bins[1]):.4f}] "
              f"| [{float(poisson[0]):.4f}, {float(poisson[1]):.4f}] | {time.process_time() - c:.1f} |")


def many(count: int) -> dict:
    done = subprocess.run([sys.executable, "-c", _MANY, json.dumps(count)], capture_output=True, text=True,
                          check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def run(scheme, q, sigma, steps) -> dict:
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, JAXPRIV_CACHE_DIR=cache)
        done = subprocess.run([sys.executable, "-c", _ONE, json.dumps([scheme, q, sigma, steps, DELTA, BATCH])],
                              capture_output=True, text=True, env=env, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", help="write the results to this file")
    parser.add_argument("--many", type=int, metavar="N", help="only time N distinct balls-in-bins settings in one call")
    parser.add_argument("--small-noise", action="store_true", help="only one epoch at small σ beside Poisson")
    args = parser.parse_args(argv)
    if args.small_noise:
        print(f"load average at start: {os.getloadavg()[0]:.2f}; {os.cpu_count()} cores")
        small_noise()
        print(f"load average at end: {os.getloadavg()[0]:.2f}")
        return 0
    if args.many:
        print(f"load average at start: {os.getloadavg()[0]:.2f}; {os.cpu_count()} cores")
        r = many(args.many)
        print(f"{args.many} settings in {r['wall_s']:.1f} s ({r['cpu_s']:.1f} CPU s), "
              f"after a warm-up call of {r['warmup_wall_s']:.1f} s ({r['warmup_cpu_s']:.1f} CPU s); "
              f"largest ε {r['upper_max']:.4f}, widest interval {100 * r['width_max']:.2f}% of its upper end")
        print(f"load average at end: {os.getloadavg()[0]:.2f}")
        return 0
    rows, ok = [], True
    print(f"load average at start: {os.getloadavg()[0]:.2f}; δ = {DELTA:g}; batch = {BATCH} settings")
    print("| q | σ | T | Poisson ε [lower, upper] | balls in bins ε [lower, upper] | bins upper < Poisson lower "
          "| shuffled batches ε ≥ | shuffled lower bound > Poisson upper "
          "| cold s (CPU s) Poisson / bins / shuffled | warm s | batch s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for q, sigma, steps in SETTINGS:
        poisson, bins, shuffled = (run(scheme, q, sigma, steps) for scheme in ("poisson", "balls_in_bins", "shuffle"))
        claim = bins["upper"] < poisson["lower"]
        ok &= claim
        rows.append({"q": q, "sigma": sigma, "steps": steps, "poisson": poisson, "balls_in_bins": bins,
                     "shuffle": shuffled})
        three = (poisson, bins, shuffled)
        cold = " / ".join(f"{r['cold_s']:.1f} ({r['cold_cpu_s']:.1f})" for r in three)
        warm = " / ".join(f"{r['warm_s']:.2f}" for r in three)
        batch = " / ".join(f"{r['batch_s']:.1f}" for r in three)
        print(f"| {q:g} | {sigma:g} | {steps} | [{poisson['lower']:.4f}, {poisson['upper']:.4f}] "
              f"| [{bins['lower']:.4f}, {bins['upper']:.4f}] | {'yes' if claim else 'NO'} "
              f"| {shuffled['lower']:.4f} | {'yes' if shuffled['lower'] > poisson['upper'] else 'no'} "
              f"| {cold} | {warm} | {batch} |")
    print(f"load average at end: {os.getloadavg()[0]:.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
