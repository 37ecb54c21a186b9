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

Where the vmapped round's time goes (headline row), measured next to it in the same run: the round's
matmul FLOPs (forward, weight gradients and the head's input gradient: 2·rows·(2·(64h + 10h) + 10h) per
client and local step, rows = min(B, records per client)), the FLOP rate they run at, the peak FLOP rate
of this machine (best of a 2048×2048 by 2048×2048 float32 matmul) and a **hand-written batched einsum**
of the same local SGD (explicit forward/backward ``jnp.einsum`` over the client axis, batches pre-drawn:
the arithmetic alone, without batch sampling). "Ratio at peak" is the ratio the round would give if it ran
at that peak.

Why the goal (≥ 20×) is not reached on this 2-core CPU (AMD EPYC, Zen 5, AVX-512; measured 2026-11 under
load, process CPU time, one core pinned with ``--xla_cpu_multi_thread_eigen=false``): the vmapped round
(0.40 GFLOP) takes ≈ 20 ms of CPU time, ≈ 20 GFLOP/s, about 10% of the single-core float32 matmul peak
(≈ 200 GFLOP/s), and the hand-written batched einsum takes the same ≈ 22 ms, so the simulator adds
nothing measurable on top of XLA's batched matmuls. Those are the bottleneck: per client and step they are
tiny (8×64·64×32 and smaller) and the weight-gradient contractions over the 8-record batch axis
(xᵀ·g: 1000×(64×8·8×32), hᵀ·g: 1000×(32×8·8×10)) run at 8–30 GFLOP/s and take ≈ 1.7 of the ≈ 2.2 ms a
local step of 1000 clients spends in matmuls, while the forward x·W₁ runs at ≈ 135 GFLOP/s. Neither the
client-minor layout (5–13 GFLOP/s), the XNNPACK / YNNPACK / oneDNN dot fusions of XLA:CPU, unrolling the
τ steps, taking the first step on the shared global parameters (one big forward matmul, no per-client copy
of w_g), a plain clamped gather for the batches, nor chunk sizes 100–500 changed the round's CPU time by
more than the ≈ 5% noise (chunks of ~200 clients stay ≈ 25% faster than one chunk of 1000). The loop,
meanwhile, is bound by dispatch (≈ 86 µs per client on a quiet machine: 86 ms per round), so the ratio is
≈ dispatch / per-client arithmetic ≈ 86 µs / 20 µs ≈ 4–5×; 20× would need the round in ≤ 4.3 ms, i.e.
≈ 94 GFLOP/s sustained on these tiny batched matmuls (about half of one core's matmul peak, ≈ 4.5× what
XLA:CPU reaches on them). The ratio does grow as the per-client arithmetic shrinks (the sweep's τ = 1 and
2-record rows).

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


def round_flops(hidden: int, tau: int, rows: int, clients: int = CLIENTS) -> float:
    """Matmul FLOPs of one round of the 64 → hidden → 10 MLP: per client and local step, the forward pass
    (2·rows·(64h + 10h)), the weight gradients (the same again) and the head's input gradient (2·rows·10h;
    the inputs need none)."""
    mac = 64 * hidden + hidden * 10
    return float(clients * tau * 2 * rows * (2 * mac + hidden * 10))


def peak_gflops(repeats: int) -> float:
    """This machine's float32 matmul rate: the best of ``repeats`` 2048×2048 by 2048×2048 products."""
    a = jnp.ones((2048, 2048), jnp.float32)
    matmul = jax.jit(lambda a: a @ a)
    matmul(a).block_until_ready()
    best = min(timed(lambda: matmul(a).block_until_ready())[0] for _ in range(max(repeats, 3)))
    return 2 * 2048**3 / best / 1e9


def batched_einsum(params, x, y, lr: float):
    """The same local SGD written by hand with einsums over the client axis c: τ steps of the tanh MLP on
    pre-drawn batches ``x`` (τ, C, rows, 64), ``y`` (τ, C, rows); returns the clients' summed parameters.
    Only the arithmetic of the vmapped round (no batch sampling), to compare XLA's vmapped program with."""
    w1, b1 = params["layers"][0]["kernel"][...], params["layers"][0]["bias"][...]
    w2, b2 = params["head"]["kernel"][...], params["head"]["bias"][...]
    clients, rows = x.shape[1], x.shape[2]
    init = tuple(jnp.broadcast_to(p, (clients,) + p.shape) for p in (w1, b1, w2, b2))

    def step(p, batch):
        (w1, b1, w2, b2), (xb, yb) = p, batch
        h = jnp.tanh(jnp.einsum("cbi,cih->cbh", xb, w1) + b1[:, None])
        g = (jax.nn.softmax(jnp.einsum("cbh,cho->cbo", h, w2) + b2[:, None]) - jax.nn.one_hot(yb, 10)) / rows
        gh = jnp.einsum("cbo,cho->cbh", g, w2) * (1 - h * h)
        grads = (jnp.einsum("cbi,cbh->cih", xb, gh), gh.sum(1), jnp.einsum("cbh,cbo->cho", h, g), g.sum(1))
        return tuple(v - lr * d for v, d in zip(p, grads)), None

    return [v.sum(0) for v in jax.lax.scan(step, init, (x, y))[0]]


def bench_round(hidden: int, tau: int, per_client: int, batch: int, repeats: int, hand: bool = False) -> dict:
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
    rows = min(batch, int(clients.mask.shape[1]))  # B < max records: B drawn records; else every (padded) row
    flops = round_flops(hidden, tau, rows)
    extra = {}
    if hand:  # the arithmetic alone, by hand, and the machine's peak: where the vmapped round's time goes
        rng = np.random.default_rng(SEED)
        xs = jnp.asarray(rng.normal(size=(tau, CLIENTS, rows, 64)), jnp.float32)
        ys = jnp.asarray(rng.integers(0, 10, size=(tau, CLIENTS, rows)), jnp.int32)
        einsum = jax.jit(batched_einsum, static_argnums=3)
        first_hand = timed(lambda: block(einsum(params, xs, ys, LR)))[0]
        t_hand = [timed(lambda: block(einsum(params, xs, ys, LR)))[0] for _ in range(repeats)]
        peak = peak_gflops(repeats)
        extra = {"hand_first_call_s": first_hand, "hand_times_s": t_hand, "hand_median_s": float(np.median(t_hand)),
                 "peak_gflops": peak, "ratio_at_peak": float(np.median(t_loop)) / (flops / 1e9 / peak)}
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
        "flops": flops, "chunked_gflops": flops / 1e9 / med(t_chunked), **extra,
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
    r = rounds[0]
    say(table(["round FLOPs (matmuls)", "vmapped, default chunks", "hand-written batched einsum (arithmetic only)",
               "peak (2048² matmul)", "vmapped share of peak", "ratio at peak"],
              [[f"{r['flops'] / 1e9:.3g} GFLOP", f"{ms(r['chunked_median_s'])}: {r['chunked_gflops']:.3g} GFLOP/s",
                ms(r["hand_median_s"]), f"{r['peak_gflops']:.3g} GFLOP/s",
                f"{r['chunked_gflops'] / r['peak_gflops']:.0%}", f"{r['ratio_at_peak']:.0f}×"]]))
    say()
    say("Where the headline round's time goes: its matmuls are tiny per client (rows × 64 · 64 × hidden and "
        "smaller), and XLA:CPU's batched matmuls run them at a small share of the machine's peak — a "
        "hand-written batched einsum of the same training is no faster, so the ratio is bounded by the loop's "
        "dispatch cost over the per-client arithmetic at that rate, not by the simulator (see the module "
        "docstring for the per-matmul rates). \"Ratio at peak\" is what the round would give at the peak rate.")
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
    results["rounds"] = [bench_round(*c, repeats=repeats, hand=c == MAIN) for c in configs]
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
