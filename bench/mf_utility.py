"""BandMF against DP-SGD at the same ε (issue 32): test accuracy on the bundled digits data, and the expected
error σ²·err(C) of each run's noise (MATH §12.1; σ calibrated for each mechanism at that ε).

    python bench/mf_utility.py                # ε ∈ {1, 3, 8}: DP-SGD, BandMF and Toeplitz b ∈ {4, 16}, 5 seeds
    python bench/mf_utility.py --seeds 3 --json mf_utility.json
    python bench/mf_utility.py --step         # the trainer's step: DP-SGD vs BandMF b ∈ {2, 4, 8}, same batch (<1 min)
    python bench/mf_utility.py --step --against main --reps 200   # and each BandMF arm with main's noise.py

Same run for every mechanism: an MLP (64 hidden units), 10 epochs, expected batch 64, SGD 0.1 with
momentum 0.9, clip norm 1, δ = 1e-5. DP-SGD samples every record at rate B/N in every step; BandMF with b
bands samples partition t mod b at rate b·B/N (so each record is offered ⌈T/b⌉ steps) and is accounted
as ⌈T/b⌉ subsampled Gaussians, which calibrates a larger σ; whether its correlated noise wins depends on
ε (the papers' claim is a regime, not everywhere). Reported whichever wins. The BandMF arms use the trainer's
optimised banded strategy, the Toeplitz arms ``mf.banded_toeplitz_strategy`` (b coefficients) in its place
(substituted for ``mf.banded_strategy`` while those runs build their noise); DP-SGD's err(C) is err(I) =
T(T + 1)/2.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import os
import sys
import time

import numpy as np

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if os.path.isfile(os.path.join(_ROOT, "jaxpriv", "__init__.py")):
    sys.path.insert(0, _ROOT)

import _common as common  # noqa: E402  (bench/ is the script's directory)
from _common import say  # noqa: E402

import jaxpriv  # noqa: E402


ARMS = (("DP-SGD", "gaussian", 1, None), ("BandMF b=4", "bandmf", 4, "banded"), ("BandMF b=16", "bandmf", 16, "banded"),
        ("Toeplitz b=4", "bandmf", 4, "toeplitz"), ("Toeplitz b=16", "bandmf", 16, "toeplitz"))


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be an integer ≥ 1, got {text}")
    return value


@contextlib.contextmanager
def _trainer_strategy(fn):
    """``train()`` builds its strategy with ``jaxpriv.mf.banded_strategy(T, bands=b)``; inside this block it
    gets ``fn(T, bands=b)`` instead (the Toeplitz arms: ``mf.banded_toeplitz_strategy``, also b-banded with
    largest column norm 1, so the same cyclic sampling and AmplifiedBandMF accounting apply, MATH §12.2)."""
    from jaxpriv import mf

    saved = mf.banded_strategy
    mf.banded_strategy = fn
    try:
        yield
    finally:
        mf.banded_strategy = saved


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=_positive_int, default=5, help="seeds 0 … SEEDS − 1 per arm (default 5)")
    parser.add_argument("--json", default=None)
    parser.add_argument("--step", action="store_true", help="time the step: DP-SGD vs BandMF, interleaved")
    parser.add_argument("--reps", type=_positive_int, default=30)
    parser.add_argument("--against", default=None, metavar="REV",
                        help="with --step: also run each BandMF arm with noise.py of git revision REV")
    args = parser.parse_args(argv)
    if args.step:
        return step_bench(args.reps, args.against)
    import optax
    from flax import nnx

    from jaxpriv import mf
    from jaxpriv.train import data, dpsgd

    start = time.perf_counter()
    versions = {name: importlib.metadata.version(name) for name in ("jax", "flax", "optax")}
    info = common.machine_info(versions, os.path.dirname(jaxpriv.__file__))
    common.print_header(info, f"{args.seeds} seeds", "BandMF against DP-SGD at the same ε (digits)",
                        "Accuracy: mean ± sample standard deviation over seeds; error: err(C) = ‖A C⁻¹‖_F² "
                        "(unit noise) and σ²·err(C) of the run's noise.")
    d = data.load("digits", seed=0)
    strategies = {}  # (kind, T, b) → C: what each arm's train() uses, and whose error is reported
    builders = {"banded": mf.banded_strategy, "toeplitz": mf.banded_toeplitz_strategy}  # before any substitution

    def strategy(kind, n, bands):
        if (kind, n, bands) not in strategies:
            strategies[(kind, n, bands)] = builders[kind](n, bands=bands)
        return strategies[(kind, n, bands)]

    rows, records = [], []
    for epsilon in (1.0, 3.0, 8.0):
        for name, mechanism, bands, kind in ARMS:
            accuracies, seconds, used = [], time.perf_counter(), []

            def given(n, *, bands, kind=kind, used=used):
                used.append((n, bands))
                return strategy(kind, n, bands)

            for seed in range(args.seeds):
                model = dpsgd.MLP(64, (64,), 10, rngs=nnx.Rngs(seed))
                config = dpsgd.DPSGDConfig(epochs=10, batch_size=64, epsilon=epsilon, mechanism=mechanism,
                                           bands=bands, seed=seed)
                with _trainer_strategy(given):
                    result = dpsgd.train(model, optax.sgd(0.1, momentum=0.9), d, config, progress=False)
                accuracies.append(result.test_accuracy)
            steps, sigma = result.steps, float(result.plan.noise_parameter[0])
            if kind is not None and used != [(steps, bands)] * args.seeds:  # each run used the arm's strategy
                raise RuntimeError(f"{name}: train() asked for strategies {used}, expected {(steps, bands)} per run")
            unit = steps * (steps + 1) / 2 if kind is None else mf.expected_error(strategy(kind, steps, bands))
            error = sigma ** 2 * unit
            sd = float(np.std(accuracies, ddof=1)) if len(accuracies) > 1 else float("nan")
            rows.append([f"{epsilon:g}", name, str(steps), f"{sigma:.3f}", f"{float(result.plan.rate[0]):.4f}",
                         f"{np.mean(accuracies):.3f} ± {sd:.3f}", f"{unit:,.0f}", f"{error:,.0f}",
                         common.ms((time.perf_counter() - seconds) / args.seeds)])
            records.append({"epsilon": epsilon, "arm": name, "mechanism": mechanism, "bands": bands,
                            "strategy": kind, "steps": steps, "sigma": sigma, "rate": float(result.plan.rate[0]),
                            "accuracies": accuracies, "error_unit_noise": unit, "expected_error": error})
            say(" | ".join(rows[-1]))
    say()
    say(common.table(["ε", "arm", "T", "σ", "q", "test accuracy", "err(C)", "σ²·err(C)", "per run"], rows))
    return common.finish({"machine": info, "runs": records}, {}, start, args.json)


def _noise_module_at(rev: str):
    """``jaxpriv/train/noise.py`` as it was at git revision ``rev`` of this checkout, loaded as a module of
    the package (its relative imports resolve in the current ``jaxpriv``): the "before" arm of ``--against``."""
    import importlib
    import importlib.util
    import subprocess

    importlib.import_module("jaxpriv.train")  # the package the old module's relative imports resolve in
    source = subprocess.run(["git", "-C", _ROOT, "show", f"{rev}:jaxpriv/train/noise.py"], capture_output=True,
                            text=True, check=True).stdout
    name = "jaxpriv.train._noise_at_" + "".join(c if c.isalnum() else "_" for c in rev)
    module = importlib.util.module_from_spec(importlib.util.spec_from_loader(name, loader=None))
    module.__package__ = "jaxpriv.train"
    sys.modules[name] = module
    exec(compile(source, f"{rev}:jaxpriv/train/noise.py", "exec"), module.__dict__)
    return module


def step_bench(reps: int, against: str | None = None, batch: int = 64, steps: int = 220) -> int:
    """Warm step times of the trainer's own step program (``dpsgd.step_program``, what ``train()`` runs:
    the clipped gradient sum of the digits MLP on one batch of 64, the noise with its numbers as arguments,
    SGD), DP-SGD's noise against BandMF's with b ∈ {2, 4, 8}; arms interleaved, medians. With ``against``
    (a git revision) each BandMF arm runs a second time with that revision's ``jaxpriv/train/noise.py``
    (its state layout and its banded update in the same trainer program): before and after, side by side."""
    import platform

    import jax
    import jax.numpy as jnp
    import optax
    from flax import nnx

    from jaxpriv import events, mf
    from jaxpriv.train import data, dpsgd, noise

    d = data.load("digits", seed=0)
    x, y = jnp.asarray(d.x_train, jnp.float32), jnp.asarray(d.y_train)
    indices, mask = jnp.arange(batch, dtype=jnp.int32), jnp.ones(batch, bool)
    record_clip = jnp.ones(x.shape[0], jnp.float32)
    graphdef, params, rest = nnx.split(dpsgd.MLP(64, (64,), 10, rngs=nnx.Rngs(0)), nnx.Param, ...)
    sgd, event = optax.sgd(0.1), events.Gaussian(1.0)
    numbers = {"clip": jnp.asarray(1.0),
               "noise": dpsgd.noise_numbers(event, sensitivity=1.0, normalize_by=float(batch), params=params)}

    def arm(module, bands):
        """(program, its numbers, the first opt_state): the trainer's step with ``module``'s noise."""
        if bands == 1:
            state = optax.chain(module.noise_transform(event, seed=0, normalize_by=batch), sgd).init(params)
            return dpsgd._build_step(graphdef, sgd, dpsgd.cross_entropy_loss, None, False, "l2", None), numbers, state
        strategy = mf.banded_strategy(steps, bands=bands)
        state = optax.chain(module.banded_noise_transform(event, strategy, seed=0, normalize_by=batch), sgd).init(params)
        saved = noise.banded_noise_update
        noise.banded_noise_update = module.banded_noise_update  # the program imports it when it is built
        try:
            program = dpsgd._build_step(graphdef, sgd, dpsgd.cross_entropy_loss, None, False, "l2", None)
        finally:
            noise.banded_noise_update = saved
        return program, {**numbers, "band": jnp.asarray(module.band_table(strategy))}, state

    arms = {"DP-SGD": arm(noise, 1)}
    old = _noise_module_at(against) if against else None
    for b in (2, 4, 8):
        if old is not None:
            arms[f"BandMF b={b} ({against})"] = arm(old, b)
        arms[f"BandMF b={b}"] = arm(noise, b)
    key = jax.random.key(0)
    state = {}
    for name, (program, nums, opt_state) in arms.items():  # compile and warm each arm
        state[name] = (params, opt_state)
        for _ in range(2):
            state[name] = jax.block_until_ready(program(*state[name], x, y, record_clip, indices, mask, key, rest, nums))
    times = {name: [] for name in arms}
    load = os.getloadavg()
    for rep in range(reps):  # interleaved A B C D A B C D …
        for name, (program, nums, _) in arms.items():
            t = time.perf_counter()
            state[name] = jax.block_until_ready(program(*state[name], x, y, record_clip, indices, mask, key, rest, nums))
            times[name].append(time.perf_counter() - t)
        if rep % 200 == 199:  # every arm back to its first state: BandMF stays inside the strategy's 220 steps
            state = {name: (params, opt_state) for name, (_, _, opt_state) in arms.items()}
    say(f"cpus={os.cpu_count()} processor={platform.processor() or platform.machine()} "
        f"load={load} -> {os.getloadavg()} jax={jax.__version__} batch={batch} reps={reps}")
    base = float(np.median(times["DP-SGD"]))
    rows = [[name, f"{np.median(t) * 1e6:.0f}", f"{np.median(t) / base:.2f}×"] for name, t in times.items()]
    say(common.table(["arm", "median step (µs)", "÷ DP-SGD"], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
