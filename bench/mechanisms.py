"""Mechanism benchmark: jaxpriv's samplers against JAX's own random draws, and Clip-Laplace calibration.

    python bench/mechanisms.py [--quick] [--json OUT]

1. **Sampling throughput** (samples/s, float32, after compilation, median of ``--repeats`` calls on fresh
   keys): ``jax.random.normal`` and ``jax.random.laplace`` are the physical reference (one scaled draw
   per sample is the least any sampler can do); against them ``gaussian.sample``, ``laplace.sample``,
   ``clip_laplace.sample`` (truncated inverse CDF; scalar f and one f per element, inside the caller's
   jit) and ``staircase.sample`` (sign, geometric, uniform, Bernoulli). Goal: Clip-Laplace and Staircase
   within 3× of plain Laplace.
2. **Clip-Laplace calibration** at the analyzer (APES): 10⁶ dimensions × 10⁴ distinct budgets
   (``clip_laplace_analyzer.calibrate``), first call and warm median, with the recovery error on a sample of
   dimensions whose observed mean is the exact mixture mean of a known g.

Prints markdown tables, writes every number with ``--json OUT``; exits with status 1 if a check fails.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import sys
import time

import numpy as np

# Benchmark the checkout this script lives in, not whatever `jaxpriv` happens to be installed.
_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if os.path.isfile(os.path.join(_ROOT, "jaxpriv", "__init__.py")):
    sys.path.insert(0, _ROOT)
import jaxpriv  # noqa: E402

import _common as common  # noqa: E402  (bench/ is the script's directory)
from _common import say, timed  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from jaxpriv.mechanisms import clip_laplace, clip_laplace_analyzer, gaussian, laplace, staircase  # noqa: E402


def median_time(fn, repeats: int) -> float:
    """Median wall time of ``fn(key)`` over fresh keys, after one warm-up call (compilation)."""
    key = jax.random.key(0)
    jax.block_until_ready(fn(key))
    times = []
    for i in range(repeats):
        k = jax.random.fold_in(key, i + 1)
        start = time.perf_counter()
        jax.block_until_ready(fn(k))
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def bench_sampling(n: int, repeats: int) -> dict:
    f = jax.random.uniform(jax.random.key(7), (n,), jnp.float32, -1.0, 1.0)  # one clipped value per element
    normal = jax.jit(lambda k: jax.random.normal(k, (n,), jnp.float32))
    plain_laplace = jax.jit(lambda k: jax.random.laplace(k, (n,), jnp.float32))
    clap_in_jit = jax.jit(lambda k, f: clip_laplace.sample(k, f, 2.0, 1.0))
    contenders = {
        "jax.random.normal": lambda k: normal(k),
        "jax.random.laplace": lambda k: plain_laplace(k),
        "gaussian.sample": lambda k: gaussian.sample(k, 2.0, (n,)),
        "laplace.sample": lambda k: laplace.sample(k, 2.0, (n,)),
        "clip_laplace.sample (scalar f)": lambda k: clip_laplace.sample(k, 0.3, 2.0, 1.0, shape=(n,)),
        "clip_laplace.sample (f per element, in jit)": lambda k: clap_in_jit(k, f),
        "staircase.sample (γ*)": lambda k: staircase.sample(k, 1.0, None, (n,)),
    }
    seconds = {name: median_time(fn, repeats) for name, fn in contenders.items()}
    reference = seconds["jax.random.laplace"]
    rows = {name: {"seconds": t, "samples_per_s": n / t, "vs_jax_laplace": t / reference} for name, t in seconds.items()}
    checks = {f"{name} within 3x of jax.random.laplace": rows[name]["vs_jax_laplace"] <= 3.0
              for name in rows if name.startswith(("clip_laplace", "staircase"))}
    return {"n": n, "repeats": repeats, "rows": rows, "checks": checks}


def bench_calibration(dims: int, budgets: int) -> dict:
    rng = np.random.default_rng(0)
    eps = rng.uniform(0.05, 10.0, budgets)  # distinct budgets
    g_true = rng.uniform(-0.9, 0.9, 200)
    lam = 2.0 / eps  # clip C = 1: λ_i = 2C/ε_i, A = C
    exact = np.mean(np.asarray(clip_laplace.mean(g_true[:, None], lam[None, :], 1.0)), axis=1)
    m = rng.uniform(-0.5, 0.5, dims).astype(np.float32)
    m[: exact.size] = exact  # known answers for the first 200 dimensions (float32 rounding aside)
    first, _ = timed(lambda: clip_laplace_analyzer.calibrate(m, eps, 1.0))
    times = [timed(lambda: clip_laplace_analyzer.calibrate(m, eps, 1.0))[0] for _ in range(3)]
    g64 = clip_laplace_analyzer.calibrate(exact, eps, 1.0)  # float64 means: recovery to the calibration's accuracy
    err = float(np.max(np.abs(g64 - g_true)))
    return {"dims": dims, "budgets": budgets, "first_call_s": first, "times_s": times,
            "median_s": float(np.median(times)), "max_recovery_error_float64_means": err,
            "checks": {"recovers g to 1e-8": err <= 1e-8}}


def machine_info() -> dict:
    return common.machine_info(
        {"jax": jax.__version__, "jaxlib": importlib.metadata.version("jaxlib"), "numpy": np.__version__,
         "jaxpriv": jaxpriv.__version__},
        os.path.dirname(os.path.abspath(jaxpriv.__file__)),
    )


def report(results: dict) -> None:
    s = results["sampling"]
    say(f"## Sampling throughput: {s['n']:,} float32 samples per call, median of {s['repeats']}")
    say()
    lines = ["| sampler | time | samples/s | time ÷ jax.random.laplace |", "|---|---|---|---|"]
    for name, r in s["rows"].items():
        lines.append(f"| {name} | {r['seconds'] * 1e3:.1f} ms | {r['samples_per_s'] / 1e6:.1f} M | "
                     f"{r['vs_jax_laplace']:.2f}× |")
    say("\n".join(lines))
    say()
    c = results["calibration"]
    say(f"## Clip-Laplace calibration: {c['dims']:,} dimensions × {c['budgets']:,} distinct budgets")
    say()
    say(f"First call {c['first_call_s']:.2f} s (compilation and the per-budget mixture table), then median "
        f"{c['median_s']:.2f} s. Largest recovery error of a known g from its exact mixture mean: "
        f"{c['max_recovery_error_float64_means']:.1e} (clip C = 1).")
    say()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="10⁶ samples per call instead of 10⁷")
    parser.add_argument("--json", metavar="OUT", help="write all results to this JSON file")
    parser.add_argument("--repeats", type=int, default=9, help="timed calls per sampler")
    args = parser.parse_args(argv)
    t_start = time.perf_counter()
    info = machine_info()
    mode = "quick" if args.quick else "full"
    common.print_header(info, mode, "jaxpriv mechanisms: sampling throughput and Clip-Laplace calibration",
                        "Timings are wall-clock medians after compilation; on a loaded machine read the ratios.")
    results = {"machine": info, "mode": mode}
    results["sampling"] = bench_sampling(10**6 if args.quick else 10**7, args.repeats)
    results["calibration"] = bench_calibration(10**6, 10**4)
    report(results)
    checks = {**results["sampling"]["checks"], **results["calibration"]["checks"]}
    results["checks"] = checks
    say("Checks: " + ", ".join(f"{k}: {'ok' if v else 'FAILED'}" for k, v in checks.items()))
    return common.finish(results, checks, t_start, args.json)


if __name__ == "__main__":
    sys.exit(main())
