"""A second ``train()`` on the same model with another ε: its programs and its first step's time (issue 29).

    python bench/second_run.py [--model mlp|cnn] [--runs 3] [--json OUT]

In one process, ``jaxpriv.train.dpsgd.train`` runs the same architecture on digits at ε = 2 (the first run: it
compiles the step and the evaluator) and then ``--runs`` more times at other ε, σ-calibrated anew (3, 4, 6, …;
another seed and clip norm each). Every step is timed to completion (the trainer's step program is wrapped so
that each call waits for its result: ``jax.block_until_ready``). Reported per later run: the step programs it
traced (``new_programs``), the XLA compilations of the whole run (JAX's monitoring events: step, evaluator,
sampler, calibration and accounting), its first step's seconds, the median of its other steps of the same
batch bucket, and their ratio; and, as a control, the same ratio for the first step of the run's second epoch
(after an evaluation and the accounting, the program long warm). Issue 29's goal: 0 programs and a first step
within 1.2× of a warm one. The same measurement for ``make_private`` (another target ε and clip norm) follows.

Step times are medians within a run; the machine's load is printed with them.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import time

import jax
import optax
from flax import nnx

from jaxpriv.train import data as datasets
from jaxpriv.train import dpsgd, private


class TimedProgram:
    """The trainer's step program, each call waited for and timed: (bucket size, seconds) in ``calls``."""

    def __init__(self, program):
        self.program, self.calls = program, []

    @property
    def traces(self):
        return self.program.traces

    def __call__(self, params, opt_state, x, y, record_clip, indices, *rest):
        start = time.perf_counter()
        out = jax.block_until_ready(self.program(params, opt_state, x, y, record_clip, indices, *rest))
        self.calls.append((int(indices.shape[0]), time.perf_counter() - start))
        return out


def first_against_warm(calls) -> tuple[float, float, int]:
    """(the first step's seconds, the median of the later steps of its bucket, how many there were)."""
    bucket, first = calls[0]
    later = [s for b, s in calls[1:] if b == bucket]
    return first, statistics.median(later) if later else float("nan"), len(later)


def after_evaluation(calls, steps_per_epoch: int) -> float:
    """The control: the first step of the second epoch (after the evaluation and the accounting of the first,
    in a run whose program is warm) against the median of the steps of its bucket."""
    bucket, seconds = calls[steps_per_epoch]
    others = [s for i, (b, s) in enumerate(calls) if b == bucket and i not in (0, steps_per_epoch)]
    return seconds / statistics.median(others)


def model_of(kind: str, d):
    if kind == "mlp":
        return dpsgd.MLP(d.feature_shape[0], (64,), d.num_classes, rngs=nnx.Rngs(0))
    side = int(round(d.feature_shape[0] ** 0.5))
    return dpsgd.CNN(side, 1, d.num_classes, rngs=nnx.Rngs(0))


class CompileCounter:
    """XLA compilations in this process (JAX's monitoring event of each backend compile): ``count``."""

    def __init__(self):
        self.count = 0
        jax.monitoring.register_event_duration_secs_listener(self._heard)

    def _heard(self, event, duration, **_):
        if event == "/jax/core/compile/backend_compile_duration":
            self.count += 1


def row(api, run, eps, programs, compiles, seconds, steps, calls, epoch2_ratio=float("nan")) -> dict:
    first, warm, count = first_against_warm(calls)
    return {"api": api, "run": run, "epsilon": eps, "new_programs": programs, "compiles": compiles,
            "seconds": seconds, "steps": steps, "first_step_s": first, "warm_step_s": warm, "warm_steps": count,
            "ratio": first / warm, "epoch2_ratio": epoch2_ratio}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", choices=("mlp", "cnn"), default="mlp")
    parser.add_argument("--runs", type=int, choices=range(1, 6), default=3,
                        help="runs after the first, 1 to 5 (default: %(default)s)")
    parser.add_argument("--json", metavar="OUT")
    args = parser.parse_args(argv)

    d = datasets.load("digits", seed=0)
    timed: list[TimedProgram] = []
    build = dpsgd.step_program

    def step_program(*a, **k):
        timed.append(TimedProgram(build(*a, **k)))
        return timed[-1]

    dpsgd.step_program = step_program  # make_private imports it from dpsgd when it builds its trainer
    compiled = CompileCounter()
    epsilons = [2.0, 3.0, 4.0, 6.0, 8.0, 1.0][: args.runs + 1]
    rows = []
    config = dpsgd.DPSGDConfig(epochs=2, batch_size=128, epsilon=2.0, delta=1e-5, seed=0)
    for run, eps in enumerate(epsilons):
        cfg = dataclasses.replace(config, epsilon=eps, seed=run, clip_norm=1.0 + 0.25 * run)
        start, before = time.perf_counter(), compiled.count
        result = dpsgd.train(model_of(args.model, d), optax.sgd(0.5), d, cfg, progress=False)
        rows.append(row("train", run, eps, result.new_programs, compiled.count - before, time.perf_counter() - start,
                        result.steps, timed[-1].calls, after_evaluation(timed[-1].calls, result.plan.steps_per_epoch)))
    for run, eps in enumerate(epsilons):  # make_private: train()'s step; no evaluation between its epochs
        start, before = time.perf_counter(), compiled.count
        trainer = private.make_private(model_of(args.model, d), optax.sgd(0.5), d.x_train, d.y_train, batch_size=128,
                                       epochs=2, delta=1e-5, target_epsilon=eps, max_grad_norm=1.0 + 0.25 * run,
                                       seed=run)
        traces = timed[-1].traces
        trainer.run()
        rows.append(row("make_private", run, eps, timed[-1].traces - traces, compiled.count - before,
                        time.perf_counter() - start, trainer.steps, timed[-1].calls))

    print(f"{args.model} on digits, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}")
    print(f"{'api':12} {'run':>3} {'ε':>4} {'programs':>8} {'compiles':>8} {'run s':>7} {'first step ms':>13} "
          f"{'warm step ms':>12} {'first/warm':>10} {'epoch 2 first/warm':>18}")
    for r in rows:
        print(f"{r['api']:12} {r['run']:>3} {r['epsilon']:>4} {r['new_programs']:>8} {r['compiles']:>8} "
              f"{r['seconds']:>7.2f} "
              f"{1e3 * r['first_step_s']:>13.2f} {1e3 * r['warm_step_s']:>12.2f} {r['ratio']:>10.2f} "
              f"{r['epoch2_ratio']:>18.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
