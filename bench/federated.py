"""Federated simulation: one round of 1000 clients vmapped vs a Python loop over clients, in one process.

    python bench/federated.py [--quick] [--json OUT]

Both sides compute the same FedAvg round (McMahan et al. 2017, Alg. 1) on the same model and data:
a small MLP (64 → hidden → 10, tanh; ``jaxpriv.train.dpsgd.MLP``) on digits-shaped synthetic data (64
features, 10 classes, ``jaxpriv.train.data.synthetic``), split IID over C = 1000 clients
(``jaxpriv.federated.partition``), every client taking τ local SGD steps on batches of B records
(``jaxpriv.federated.simulator.fedavg_local_sgd``, learning rate 0.1), full participation, size-weighted
mean (``mean_aggregator``):

* **vmapped simulator** — ``jaxpriv.federated.simulator.make_round``: all 1000 clients in one compiled
  program (``jax.vmap`` over the client axis), their contributions summed on device, the server step;
  with ``run``'s default chunking (``default_chunk_size``: on CPU, ``lax.scan`` over cache-sized chunks of
  clients) and in one chunk of all 1000 clients.
* **Python loop** — the same local update and aggregator contribution in *one* ``jax.jit``-compiled
  single-client function ``total ← total + contribute(local_update(w, data_k, key_k))``, called once per
  client (one dispatch per client: the strongest loop), client datasets already sliced on device before
  timing, then one jitted server step. Same per-client keys, so both sides give the same model.

Timing: after a warm-up call of each (compilation), the two are timed alternately (a change in machine
load hits both alike); medians are reported and the ratio is loop / vmapped. Goal: ≥ 20× on a 2-core CPU.
Check (exit status 1 if it fails): the two global models agree to float32 tolerance.

Second part, rPDP-FL per-record sampling rates: ``jaxpriv.calibrate.sampling_rate`` for 10⁶ records with
BoundedMixGauss budgets (rPDP-FL §7.2; ``jaxpriv.budgets.scenario``) under two-stage sampling with the
paper's MNIST setting (σ = 1, τ = 50, T = 15, λ = 0.8, δ = 1e-4): first call (compilation and the exact
table) and warm calls. Goal: < 2 s warm. Checks: every q in [0, 1], q non-decreasing in the budget.
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
from _common import ms, say, table, timed  # noqa: E402

import flax  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import optax  # noqa: E402
from flax import nnx  # noqa: E402

from jaxpriv import calibrate  # noqa: E402
from jaxpriv.federated import partition  # noqa: E402
from jaxpriv.federated.simulator import (  # noqa: E402
    ServerState, default_chunk_size, fedavg_local_sgd, make_round, mean_aggregator)
from jaxpriv.train import data, dpsgd  # noqa: E402

CLIENTS = 1000
LR = 0.1
SEED = 0
#: (hidden units, τ local steps, records per client, batch size); the first is the headline configuration
MAIN = (32, 5, 16, 8)
SWEEP = [(32, 5, 2, 8), (32, 1, 2, 8), (16, 5, 16, 8), (32, 1, 16, 8), (32, 20, 16, 8), (32, 5, 64, 32)]
#: rPDP-FL §7.2, MNIST: σ = 1, τ = 50 local steps, T = 15 rounds, λ = 0.8, δ = 1e-4
RPDP = {"sigma": 1.0, "steps": 50, "rounds": 15, "client_rate": 0.8, "delta": 1e-4}




def machine_info() -> dict:
    return common.machine_info(
        {
            "jax": jax.__version__,
            "jaxlib": importlib.metadata.version("jaxlib"),
            "flax": flax.__version__,
            "optax": optax.__version__,
            "numpy": np.__version__,
            "jaxpriv": jaxpriv.__version__,
        },
        os.path.dirname(os.path.abspath(jaxpriv.__file__)),
    )


# --------------------------------------------------------------------------------------------------
# one FedAvg round: vmapped vs a Python loop
# --------------------------------------------------------------------------------------------------


def block(tree):
    return jax.tree.map(lambda v: np.asarray(v), tree)


def bench_round(hidden: int, tau: int, per_client: int, batch: int, repeats: int) -> dict:
    n = int(round(CLIENTS * per_client / 0.8))  # 20% held out by synthetic(): ~per_client records each
    d = data.synthetic((64,), n=n, classes=10, seed=SEED)
    clients = partition.stack(d.x_train, d.y_train, partition.iid(d.y_train, CLIENTS, seed=SEED))
    model = dpsgd.MLP(64, (hidden,), 10, rngs=nnx.Rngs(SEED))
    graphdef, params = nnx.split(model, nnx.Param)
    local = fedavg_local_sgd(dpsgd.cross_entropy_loss, graphdef, optax.sgd(LR), local_steps=tau, batch_size=batch)
    aggregator = mean_aggregator("size")
    key = jax.random.fold_in(jax.random.key(SEED), 0)
    clients_key, server_key = jax.random.split(key)  # the split make_round does (see round_keys)

    # vmapped simulator
    step = make_round(local, aggregator=aggregator)
    stacked = jax.tree.map(jnp.asarray, clients)
    server = ServerState(params, None)
    ids, valid = jnp.arange(CLIENTS, dtype=jnp.int32), jnp.ones(CLIENTS, bool)

    def vmapped(chunk=CLIENTS):
        return block(step(server, None, stacked, ids, valid, key, chunk=chunk)[0].params)

    # Python loop: one jitted dispatch per client
    @jax.jit
    def client_step(total, p, client, k):
        update = local(p, None, client, k).update
        return jax.tree.map(jnp.add, total, aggregator.contribute(update, client))

    @jax.jit
    def server_step(p, total, k):
        return jax.tree.map(jnp.add, p, aggregator.finalize(total, k))

    per_client_data = [partition.ClientData(*(jnp.asarray(np.asarray(a)[k]) for a in clients)) for k in range(CLIENTS)]
    keys = [jax.random.fold_in(clients_key, k) for k in range(CLIENTS)]
    zero = jax.tree.map(jnp.zeros_like, aggregator.contribute(params, per_client_data[0]))  # same structure

    def loop():
        total = zero
        for k in range(CLIENTS):
            total = client_step(total, params, per_client_data[k], keys[k])
        return block(server_step(params, total, server_key))

    first_vmap, out_vmap = timed(vmapped)
    chunk = default_chunk_size(params, CLIENTS)
    first_chunked, out_chunked = timed(lambda: vmapped(chunk))
    first_loop, out_loop = timed(loop)
    t_vmap, t_chunked, t_loop = [], [], []
    for _ in range(repeats):  # interleaved
        t_vmap.append(timed(vmapped)[0])
        t_chunked.append(timed(lambda: vmapped(chunk))[0])
        t_loop.append(timed(loop)[0])
    diff = max(float(np.max(np.abs(a - b))) for a, b in zip(jax.tree.leaves(out_vmap), jax.tree.leaves(out_loop)))
    diff_chunked = max(float(np.max(np.abs(a - b)))
                       for a, b in zip(jax.tree.leaves(out_chunked), jax.tree.leaves(out_loop)))
    scale = max(float(np.max(np.abs(v))) for v in jax.tree.leaves(out_loop))
    num_params = sum(int(np.size(v)) for v in jax.tree.leaves(params))
    med = lambda xs: float(np.median(xs))  # noqa: E731
    return {
        "hidden": hidden, "local_steps": tau, "records_per_client": int(clients.mask.shape[1]),
        "records": int(clients.size.sum()), "batch_size": batch, "clients": CLIENTS, "parameters": num_params,
        "vmap_first_call_s": first_vmap, "vmap_times_s": t_vmap, "vmap_median_s": med(t_vmap),
        "default_chunk": chunk, "chunked_first_call_s": first_chunked, "chunked_times_s": t_chunked,
        "chunked_median_s": med(t_chunked),
        "loop_first_call_s": first_loop, "loop_times_s": t_loop, "loop_median_s": med(t_loop),
        "ratio": med(t_loop) / med(t_chunked), "ratio_one_chunk": med(t_loop) / med(t_vmap),
        "max_abs_diff": diff, "max_abs_diff_chunked": diff_chunked, "max_abs_param": scale,
        "checks": {"vmapped equals loop (≤ 1e-5 · max|w|)": diff <= 1e-5 * scale,
                   "chunked equals loop (≤ 1e-5 · max|w|)": diff_chunked <= 1e-5 * scale},
    }


# --------------------------------------------------------------------------------------------------
# per-record q for 10⁶ records (rPDP-FL)
# --------------------------------------------------------------------------------------------------


def bench_rates(n: int, repeats: int) -> dict:
    from jaxpriv.budgets import scenario

    budgets = scenario("BoundedMixGauss", n, seed=SEED)

    def solve():
        return np.asarray(calibrate.sampling_rate(budgets, RPDP["sigma"], RPDP["steps"], RPDP["delta"],
                                                  rounds=RPDP["rounds"], client_rate=RPDP["client_rate"],
                                                  progress=False))

    first, q = timed(solve)
    warm = [timed(solve)[0] for _ in range(repeats)]
    order = np.argsort(budgets, kind="stable")
    return {
        "records": n, "distinct_budgets": int(np.unique(budgets).size), **RPDP,
        "budget_min": float(budgets.min()), "budget_max": float(budgets.max()),
        "q_min": float(q.min()), "q_median": float(np.median(q)), "q_max": float(q.max()),
        "first_call_s": first, "warm_times_s": warm, "warm_median_s": float(np.median(warm)),
        "checks": {"q in [0, 1]": bool(np.all((q >= 0) & (q <= 1))),
                   "q non-decreasing in the budget": bool(np.all(np.diff(q[order]) >= 0))},
    }


# --------------------------------------------------------------------------------------------------
# report
# --------------------------------------------------------------------------------------------------


def report(rounds: list, rates: dict):
    say(f"## One FedAvg round, {CLIENTS} clients, full participation")
    say()
    rows = []
    for r in rounds:
        rows.append([r["hidden"], f"{r['parameters']:,}", r["local_steps"], r["records_per_client"], r["batch_size"],
                     f"{ms(r['chunked_median_s'])} ({r['default_chunk']})", ms(r["vmap_median_s"]),
                     ms(r["loop_median_s"]), f"**{r['ratio']:.1f}×**", f"{r['ratio_one_chunk']:.1f}×",
                     f"{max(r['max_abs_diff'], r['max_abs_diff_chunked']):.1e}"])
    say(table(["hidden", "params", "τ", "max records/client", "B", "vmapped, default chunks (size)",
               "vmapped, one chunk", "Python loop", "ratio", "ratio (one chunk)", "max |Δw| vmapped vs loop"], rows))
    say()
    say("The first row is the headline configuration (goal ≥ 20× on CPU); the others show how the ratio "
        "moves with the model size, τ and the client's data. First calls (compilation): "
        + ", ".join(f"vmapped {ms(r['chunked_first_call_s'])} / loop {ms(r['loop_first_call_s'])}" for r in rounds[:1])
        + ". The loop's cost is mostly one dispatch per client (≈ loop time / 1000 per client); the vmapped "
        "round's cost is the clients' arithmetic and the memory traffic of their C·|θ| private parameter "
        "copies, so the ratio falls as |θ|·τ per client grows.")
    say()
    say(f"## Per-record sampling rates for {rates['records']:,} records (rPDP-FL, BoundedMixGauss budgets)")
    say()
    say(table(["records", "distinct budgets", "σ", "τ", "T", "λ", "δ", "first call", "warm median", "q range"],
              [[f"{rates['records']:,}", f"{rates['distinct_budgets']:,}", rates["sigma"], rates["steps"],
                rates["rounds"], rates["client_rate"], rates["delta"], ms(rates["first_call_s"]),
                f"**{ms(rates['warm_median_s'])}**", f"[{rates['q_min']:.3g}, {rates['q_max']:.3g}]"]]))
    say()
    say("`calibrate.sampling_rate` with more than `max_exact` distinct budgets evaluates the two-stage RDP "
        "curve exactly on a geometric q grid once (the first call also compiles it) and gives every record "
        "the largest grid q whose ε does not exceed its budget (goal: < 2 s warm).")
    say()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="headline configuration only, 10⁵ records for q")
    parser.add_argument("--json", metavar="OUT", help="write all results to this JSON file")
    parser.add_argument("--repeats", type=int, default=None, help="timed calls per measurement (default 7, quick 3)")
    args = parser.parse_args(argv)
    repeats = args.repeats or (3 if args.quick else 7)

    t_start = time.perf_counter()
    info = machine_info()
    mode = "quick" if args.quick else "full"
    common.print_header(info, mode, "jaxpriv federated simulator: vmapped clients vs a Python loop over clients",
                        "Timings are wall-clock (time.perf_counter) until the result is on the host. On a loaded "
                        "machine they are noisy: compare the ratio of the same run (the two sides alternate).")
    results = {"machine": info, "mode": mode, "repeats": repeats}
    configs = [MAIN] + ([] if args.quick else SWEEP)
    results["rounds"] = [bench_round(*c, repeats=repeats) for c in configs]
    results["rates"] = bench_rates(100_000 if args.quick else 1_000_000, repeats)
    report(results["rounds"], results["rates"])
    checks = {f"hidden={r['hidden']} τ={r['local_steps']} n={r['records_per_client']}: {k}": v
              for r in results["rounds"] for k, v in r["checks"].items()}
    checks.update({f"rates: {k}": v for k, v in results["rates"]["checks"].items()})
    results["checks"] = checks
    results["goals"] = {"ratio ≥ 20× (headline)": results["rounds"][0]["ratio"] >= 20.0,
                        "q for the records < 2 s warm": results["rates"]["warm_median_s"] < 2.0}
    say("Checks: " + ", ".join(f"{k}: {'ok' if v else 'FAILED'}" for k, v in checks.items()))
    say("Goals: " + ", ".join(f"{k}: {'met' if v else 'not met'}" for k, v in results["goals"].items()))
    return common.finish(results, checks, t_start, args.json)


if __name__ == "__main__":
    sys.exit(main())
