"""The DP-SGD step under each batch sampling (issue 31): Poisson, balls in bins and fixed-size batches, the same
model, data and expected batch size, timed side by side.

Poisson and balls-in-bins batches have random sizes (Binomial(N, B/N) for both: a balls-in-bins step holds the
records allocated to it), so the jitted step pads them to a bucket (`train.sampling.bucket_sizes`, the
trainer's: μ + 3σ for a short run); fixed-size batches hold exactly B records and are not padded. The step's
cost follows its padded size, so this measures what the padding costs. Rounds interleave the three schemes
(one epoch each per round, after a warm-up epoch that compiles every bucket the round will use); the figure
is the median over all timed steps of the wall time of one `PrivateTrainer.step()` to a finished update
(`jax.block_until_ready` on the parameters), the batch sizes are read off the batches the samplers drew.

    python bench/sampling_step.py            # ~1-2 min on 2 cores
    python bench/sampling_step.py --json OUT
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

SCHEMES = ("poisson", "balls_in_bins", "fixed_size")


def _model(features: int, classes: int, seed: int):
    from flax import nnx

    class MLP(nnx.Module):
        def __init__(self, rngs):
            self.hidden = nnx.Linear(features, 512, rngs=rngs)
            self.out = nnx.Linear(512, classes, rngs=rngs)

        def __call__(self, x):
            return self.out(nnx.relu(self.hidden(x)))

    return MLP(nnx.Rngs(seed))


def _trainer(scheme, x, y, batch, epochs):
    import optax

    from jaxpriv.train import make_private

    return make_private(_model(x.shape[1], int(y.max()) + 1, 0), optax.sgd(0.1), x, y, batch_size=batch,
                        epochs=epochs, delta=1e-5, noise_multiplier=1.0, sampling=scheme, seed=1)


def _timed_steps(trainer, steps: int) -> list[float]:
    import jax

    times = []
    for _ in range(steps):
        t = time.perf_counter()
        trainer.step()
        jax.block_until_ready(trainer._params)
        times.append(time.perf_counter() - t)
    return times


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=8192)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", help="write the results to this file")
    args = parser.parse_args(argv)
    print(f"load average at start: {os.getloadavg()[0]:.2f}; {os.cpu_count()} cores")
    rng = np.random.default_rng(0)
    x = rng.normal(size=(args.records, 784)).astype(np.float32)
    y = rng.integers(0, 10, size=args.records)
    per_epoch = round(args.records / args.batch)
    trainers = {s: _trainer(s, x, y, args.batch, args.rounds + 1) for s in SCHEMES}
    sizes = {}
    for scheme, trainer in trainers.items():
        drawn = trainer._sampler.sample_block(0, per_epoch * (args.rounds + 1))
        sizes[scheme] = (np.array([b.indices.shape[0] for b in drawn]), np.array([int(np.sum(b.mask)) for b in drawn]))
        _timed_steps(trainer, per_epoch)  # warm-up epoch: compiles the buckets
    times = {s: [] for s in SCHEMES}
    for _ in range(args.rounds):
        for scheme in SCHEMES:
            times[scheme] += _timed_steps(trainers[scheme], per_epoch)
    base = np.median(times["poisson"])
    print(f"N = {args.records}, expected batch B = {args.batch}, {per_epoch} steps per epoch, MLP 784-512-10, "
          f"{args.rounds} rounds interleaved")
    print("| sampling | records per step (mean) | padded rows per step (mean) | step, median ms | / Poisson |")
    print("|---|---|---|---|---|")
    results = {}
    for scheme in SCHEMES:
        padded, real = sizes[scheme]
        ms = 1e3 * float(np.median(times[scheme]))
        results[scheme] = {"records_mean": float(real.mean()), "padded_mean": float(padded.mean()), "step_ms": ms,
                           "step_ms_quartiles": [1e3 * float(q) for q in np.percentile(times[scheme], [25, 75])]}
        print(f"| {scheme} | {real.mean():.1f} | {padded.mean():.1f} | {ms:.2f} | {ms / (1e3 * base):.2f} |")
    print(f"load average at end: {os.getloadavg()[0]:.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
