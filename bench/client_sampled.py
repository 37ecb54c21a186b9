"""rPDP-FL's two-stage events by the PLD accountant against the RDP accountant, with cold and warm times.

Each setting is T rounds of ClientSampled(λ, SelfComposed(PoissonSampled(q, Gaussian(σ)), τ)) at δ = 1e-5.
Every setting runs in a fresh Python process with an empty compilation cache (JAXPRIV_CACHE_DIR set to a
new directory): "cold" is the first epsilon_interval call there (tracing and compilation included), "warm"
the same call again in that process. The RDP value is the same event by accountant="rdp".

    python bench/client_sampled.py            # the two settings of the closing note, ~1-2 min on 2 cores
    python bench/client_sampled.py --json OUT
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

SETTINGS = [  # (λ, q, σ, τ, T)
    (0.5, 0.05, 1.0, 10, 50),
    (0.1, 0.01, 1.1, 50, 200),
]
DELTA = 1e-5

_ONE = """
import json, sys, time
t0 = time.perf_counter()
from jaxpriv import accounting, events
lam, q, sigma, tau, rounds, delta = json.loads(sys.argv[1])
event = events.SelfComposed(events.ClientSampled(lam, events.SelfComposed(
    events.PoissonSampled(q, events.Gaussian(sigma)), tau)), rounds)
t1 = time.perf_counter()
lower, upper = accounting.epsilon_interval(event, delta)
t2 = time.perf_counter()
accounting.epsilon_interval(event, delta)
t3 = time.perf_counter()
rdp = accounting.epsilon(event, delta, accountant="rdp")
print(json.dumps({"import_s": t1 - t0, "cold_s": t2 - t1, "warm_s": t3 - t2, "lower": float(lower),
                  "upper": float(upper), "rdp": float(rdp)}))
"""


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", help="write the results to this file")
    args = parser.parse_args(argv)
    rows = []
    print(f"load average at start: {os.getloadavg()[0]:.2f}")
    print("| λ | q | σ | τ | T | PLD [lower, upper] | RDP | PLD / RDP | import (s) | cold (s) | warm (s) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for lam, q, sigma, tau, rounds in SETTINGS:
        with tempfile.TemporaryDirectory() as cache:
            env = dict(os.environ, JAXPRIV_CACHE_DIR=cache)
            done = subprocess.run([sys.executable, "-c", _ONE, json.dumps([lam, q, sigma, tau, rounds, DELTA])],
                                  capture_output=True, text=True, env=env, check=True)
        r = json.loads(done.stdout.strip().splitlines()[-1])
        r.update(rate=lam, q=q, sigma=sigma, tau=tau, rounds=rounds)
        rows.append(r)
        print(f"| {lam:g} | {q:g} | {sigma:g} | {tau} | {rounds} | [{r['lower']:.4f}, {r['upper']:.4f}] | "
              f"{r['rdp']:.4f} | {r['upper'] / r['rdp']:.3f} | {r['import_s']:.2f} | {r['cold_s']:.1f} | "
              f"{r['warm_s']:.2f} |", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
