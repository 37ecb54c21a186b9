"""Banded matrix-factorization strategies (issue 32, MATH §12.1): their expected error against DP-SGD's
(C = I) and the full (b = n) factorization, and how long the optimisation takes.

    python bench/mf_strategies.py --quick     # n = 64, 256 (~20 s on 2 CPU cores)
    python bench/mf_strategies.py             # n = 64, 256, 512 (~2 min)
    python bench/mf_strategies.py --json mf.json
    python bench/mf_strategies.py --speed     # the banded optimiser against the old dense one (~3 min)

For each n and b: err(C) = ‖A C⁻¹‖_F² · max_j ‖C[:, j]‖² of ``mf.banded_strategy(n, bands=b)`` (no disk
cache), its ratio to the identity's n(n + 1)/2 and to the full factorization's, and the wall time of the
optimisation. The first b of each n includes the optimiser's compilation (one program per n; the band is a
runtime mask). Checks: b = 1 is the identity, every b > 1 beats it, more bands never lose.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import sys
import time

# Benchmark the checkout this script lives in, not whatever `jaxpriv` happens to be installed.
_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if os.path.isfile(os.path.join(_ROOT, "jaxpriv", "__init__.py")):
    sys.path.insert(0, _ROOT)

import _common as common  # noqa: E402  (bench/ is the script's directory)
from _common import say, timed  # noqa: E402

import jaxpriv  # noqa: E402
from jaxpriv import mf  # noqa: E402


def _dense(n: int, bands: int):
    """The previous optimiser: dense n×n parameters masked to the band, O(n³) per iteration."""
    import jax.numpy as jnp
    import numpy as np

    from jaxpriv._numerics import float64
    from jaxpriv.mf import strategy

    with float64():
        i, j = np.indices((n, n))
        mask = jnp.asarray((i - j >= 0) & (i - j < bands))
        C, _, _ = strategy._optimise(jnp.asarray(strategy._initial(n, bands)), mask,
                                     jnp.asarray(np.tril(np.ones((n, n)))), jnp.asarray(strategy.TOLERANCE),
                                     iterations=strategy.MAX_ITERATIONS)
        C = np.where(np.asarray(mask), np.asarray(C, np.float64), 0.0)
    return C / mf.column_norms(C)


def speed(args, start, info) -> int:
    """Wall time (compilation included: one program per (n, b)) of the banded optimiser, and of the dense
    one where it is feasible (n = 512)."""
    rows, records, checks = [], [], {}
    for n, b, dense in ((512, 16, True), (2000, 64, False)):
        seconds, C = timed(lambda: mf.banded_strategy(n, bands=b, cache=False))
        err = mf.expected_error(C)
        record = {"n": n, "bands": b, "error": err, "seconds": seconds, "load": os.getloadavg()[0]}
        old = "-"
        if dense:
            record["dense_seconds"], D = timed(lambda: _dense(n, b))
            record["dense_error"] = mf.expected_error(D)
            old = f"{common.ms(record['dense_seconds'])} (err {record['dense_error']:.1f})"
            checks[f"n={n}, b={b}: same optimum as the dense optimiser (rel 1e-6)"] = (
                abs(err - record["dense_error"]) <= 1e-6 * err)
        checks[f"n={n}, b={b}: beats the identity"] = err < n * (n + 1) / 2
        record["toeplitz_seconds"], T = timed(lambda: mf.banded_toeplitz_strategy(n, bands=b))
        record["toeplitz_error"] = mf.expected_error(T)
        record["full_toeplitz_error"] = mf.expected_error(mf.banded_toeplitz_strategy(n, bands=n))
        checks[f"n={n}, b={b}: Toeplitz never below banded"] = record["toeplitz_error"] >= err * (1 - 1e-9)
        records.append(record)
        rows.append([str(n), str(b), f"{err:.1f}", f"{err / (n * (n + 1) / 2):.4f}", common.ms(seconds), old,
                     f"{record['toeplitz_error']:.1f} ({common.ms(record['toeplitz_seconds'])})",
                     f"{record['full_toeplitz_error']:.1f}", f"{n * (n + 1) / 2:.0f}", f"{record['load']:.1f}"])
    say(common.table(["n", "b", "err(C) banded", "err / err(I)", "banded optimiser", "dense optimiser",
                      "Toeplitz b (time)", "Toeplitz b = n", "err(I)", "load"], rows))
    say()
    for name, ok in checks.items():
        say(f"- {'ok' if ok else 'FAILED'}: {name}")
    return common.finish({"machine": info, "speed": records}, checks, start, args.json)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="n = 64 and 256 only")
    parser.add_argument("--speed", action="store_true", help="n = 512/b = 16 and n = 2000/b = 64, against the dense optimiser")
    parser.add_argument("--json", default=None, help="write every number here")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    versions = {name: importlib.metadata.version(name) for name in ("jax", "optax")}
    info = common.machine_info(versions, os.path.dirname(jaxpriv.__file__))
    common.print_header(info, "quick" if args.quick else "full", "Banded MF strategies: error and optimisation time",
                        "Wall times on this machine; the first row of each n includes compilation.")
    if args.speed:
        return speed(args, start, info)
    sizes = (64, 256) if args.quick else (64, 256, 512)
    rows, records, checks = [], [], {}
    for n in sizes:
        bands = sorted({1, 2, 4, 8, 16, 32, 64, n} & set(range(1, n + 1)))
        errors = {}
        for b in bands:
            seconds, C = timed(lambda b=b: mf.banded_strategy(n, bands=b, cache=False))
            errors[b] = mf.expected_error(C)
            records.append({"n": n, "bands": b, "error": errors[b], "seconds": seconds})
        identity, full = n * (n + 1) / 2, errors[n]
        for record in records[-len(bands):]:
            b, err = record["bands"], record["error"]
            rows.append([str(n), str(b), f"{err:.1f}", f"{err / identity:.3f}", f"{err / full:.3f}",
                         common.ms(record["seconds"])])
        checks[f"n={n}: b=1 is the identity"] = errors[1] == identity
        checks[f"n={n}: b>1 beats the identity"] = all(errors[b] < identity for b in bands if b > 1)
        checks[f"n={n}: more bands never lose"] = all(errors[a] >= errors[b] * (1 - 1e-9)
                                                      for a, b in zip(bands, bands[1:]))
    say(common.table(["n", "b", "err(C)", "err / err(I)", "err / err(full)", "optimisation"], rows))
    say()
    for name, ok in checks.items():
        say(f"- {'ok' if ok else 'FAILED'}: {name}")
    return common.finish({"machine": info, "strategies": records}, checks, start, args.json)


if __name__ == "__main__":
    sys.exit(main())
