"""``jaxpriv train``: DP-SGD on a bundled dataset, with ε accounted after every epoch.

The argument check loads the data and checks the whole run's configuration with numpy only
(:mod:`jaxpriv.train.config`, :mod:`jaxpriv.train.data`); the handler imports JAX, flax and optax when
it runs.
"""

from __future__ import annotations

import json
import math
import os

import numpy as np

from .rules import BUDGETS_HELP, RULES, add_number, budget_values, defaults, subparser
from .tables import fmt, stdout_console, table


def add_train_parser(subparsers) -> None:
    """``train``: the dataset and model, the privacy target, the optimizer and the multi-process options."""
    p = subparser(
        subparsers, "train",
        "Train a classifier with DP-SGD on a bundled dataset, accounting ε after every epoch.",
        "jaxpriv train --dataset digits --epsilon 3 --delta 1e-5 --json train.json --plot curve.png",
    )
    p.add_argument("--dataset", choices=("digits", "breast_cancer", "mnist"), default="digits",
                   help="bundled dataset: UCI digits (8×8) or breast cancer, or MNIST-5k (28×28; 4,000 training "
                        "images) (default: %(default)s)")
    add_number(p, "epsilon", extra="σ is calibrated to spend it over the run; with --budgets, a cap on every "
                                    "record's budget")
    add_number(p, "delta", default=1e-5)
    p.add_argument("--budgets", metavar="BUDGETS",
                   help=f"per-record budgets: {BUDGETS_HELP} | a CSV "
                        "file with one budget per training record (assigned to records in a seeded random order)")
    p.add_argument("--personalization", choices=("sample", "scale"), default="sample",
                   help="with --budgets: IDP-SGD 'sample' (per-record rates, shared σ) or 'scale' (per-record "
                        "clip norms and noise multipliers, shared rate) (default: %(default)s)")
    add_number(p, "noise_multiplier", metavar="SIGMA",
               extra="without --epsilon/--budgets ε is only reported; with them, rates are calibrated instead of σ")
    from ..train.config import SAMPLINGS, TRAIN_MECHANISMS  # numpy only, as the argument checks must be

    p.add_argument("--mechanism", "--noise", dest="mechanism", choices=TRAIN_MECHANISMS, default="gaussian",
                   help="noise: 'gaussian' (L2 clipping) or 'laplace' (L1 clipping, per-coordinate Laplace; "
                        "--noise-multiplier is then the Laplace scale per unit L1 sensitivity; no --budgets), "
                        "'staircase', or 'bandmf' (Gaussian noise correlated by a --bands banded matrix "
                        "factorization, partitions sampled in turn; MATH §12) (default: %(default)s)")
    add_number(p, "bands", default=1, extra="with --noise bandmf; batch size × bands ≤ the training set's size")
    p.add_argument("--sampling", choices=SAMPLINGS, default="poisson",
                   help="how batches are drawn: 'poisson' (each record in each step with probability q), "
                        "'balls_in_bins' (each record in one uniformly chosen step of each epoch; its ε is random "
                        "allocation's, by PLD), 'random_allocation' (each record in --steps-per-example k "
                        "uniformly chosen steps of each epoch of round(k·N/B) steps; PLD) or 'fixed_size' (every "
                        "step a uniform subset of exactly --batch-size records; ε of sampling without replacement "
                        "under add/remove, by RDP, MATH §11.5); all but poisson: Gaussian noise, --epsilon or "
                        "--noise-multiplier, no --budgets; MATH §11 (default: %(default)s)")
    add_number(p, "steps_per_example", default=1, extra="with --sampling random_allocation")
    add_number(p, "epochs", RULES["epochs"].narrow("the trainer runs whole epochs", lo=1.0, lo_open=False,
                                                   integer=True), default=20)
    add_number(p, "batch_size", default=128.0, extra="at most the training set's size")
    add_number(p, "clip", default=1.0)
    add_number(p, "lr", default=0.1)
    add_number(p, "momentum", default=0.9)
    p.add_argument("--model", choices=("mlp", "cnn", "transformer"), default="mlp",
                   help="classifier; 'transformer' reads an image's rows as tokens (default: %(default)s)")
    add_number(p, "hidden", default=64)
    p.add_argument("--precision", choices=("float32", "bfloat16"), default="float32",
                   help="the model's computation dtype; norms, clipping and noise stay float32 (default: %(default)s)")
    add_number(p, "seed", default=0)
    add_number(p, "split_seed", default=0)
    add_number(p, "test_fraction", default=0.2)
    p.add_argument("--checkpoint", metavar="DIR", help="save after every epoch here and resume from it")
    p.add_argument("--json", metavar="FILE", help="write the run's summary (test_accuracy, epsilon, history) as JSON")
    p.add_argument("--plot", metavar="FILE", help="learning curve: test accuracy and ε per epoch")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    multi = p.add_argument_group(
        "multi-process (multi-host) data parallelism",
        "run the same command in every process; each batch is sharded over every process's devices and "
        "process 0 writes the outputs (jaxpriv.distributed)")
    multi.add_argument("--coordinator", metavar="HOST:PORT",
                       help="process 0's address (or set JAX_COORDINATOR_ADDRESS)")
    multi.add_argument("--num-processes", type=int, metavar="N", help="number of processes (or JAX_NUM_PROCESSES)")
    multi.add_argument("--process-id", type=int, metavar="I", help="this process, 0…N−1 (or JAX_PROCESS_ID)")
    defaults(p, cmd_train, dirs=("checkpoint",), files=("json", "plot"), figures=("plot",), check=_check_train)


def _record_budgets(spec: str, n: int, seed: int, cap: float | None) -> np.ndarray:
    """One budget per training record from a budget specification (jaxpriv.shuffle.budgets), in a seeded
    random order (the spec's values are sorted quantiles); capped at ``cap`` when given."""
    values = budget_values(spec, n)
    if values.size != n:
        raise ValueError(f"budgets file {spec!r} has {values.size} budgets, the training set {n} records")
    values = values[np.random.default_rng(seed).permutation(n)]
    return values if cap is None else np.minimum(values, cap)


def _check_train(args) -> None:
    """Load the data and check the whole run's configuration (numpy only) before JAX is imported."""
    from ..train import data as datasets
    from ..train.config import DPSGDConfig, check_config

    if args.epsilon is None and args.budgets is None and args.noise_multiplier is None:
        raise ValueError("train needs --epsilon (a target), --budgets (per-record targets) or --noise-multiplier")
    d = datasets.load(args.dataset, test_fraction=args.test_fraction, seed=args.split_seed)
    features = int(np.prod(d.feature_shape))
    if args.model in ("cnn", "transformer") and round(math.sqrt(features)) ** 2 != features:
        raise ValueError(f"model '{args.model}' needs square images; dataset {args.dataset} has {features} features")
    budgets = None
    if args.budgets is not None:
        budgets = _record_budgets(args.budgets, d.n_train, args.seed, args.epsilon)
    config = DPSGDConfig(
        epochs=args.epochs, batch_size=args.batch_size, clip_norm=args.clip, delta=args.delta,
        epsilon=None if budgets is not None else args.epsilon, noise_multiplier=args.noise_multiplier,
        budgets=budgets, personalization=args.personalization, seed=args.seed, mechanism=args.mechanism,
        bands=args.bands, sampling=args.sampling, steps_per_example=args.steps_per_example,
    )
    check_config(config, d.n_train)
    args.data, args.config = d, config
    args.processes = None
    if args.coordinator or args.num_processes is not None or os.environ.get("JAX_COORDINATOR_ADDRESS"):
        from .. import distributed

        args.processes = distributed.resolve(args.coordinator, args.num_processes, args.process_id)


_SAMPLING_TITLES = {"balls_in_bins": ", balls in bins", "random_allocation": ", random allocation",
                    "fixed_size": ", fixed-size batches"}


def _noise_line(mechanism: str, mode: str, group: dict, epsilon: float | None) -> str:
    """The run's noise scale (σ, or the Laplace b, or the staircase ε₀), rate and clip norm, and which of
    them was calibrated to the target ε (the plan's ``mode``, e.g. "σ for ε" or "q for ε")."""
    from ..events import noise_family

    name = noise_family("gaussian" if mechanism == "bandmf" else mechanism).description
    target = f"calibrated to ε = {epsilon:g}" if epsilon is not None else ""
    scale_how, rate_how = (target, "") if mode.endswith("for ε") and not mode.startswith("q") else ("given", "")
    if mode == "q for ε":
        rate_how = f" ({target})"
    return (f"{name} = {fmt(group['noise_multiplier'])} ({scale_how}); q = {fmt(group['rate'])}{rate_how}, "
            f"C = {fmt(group['clip_norm'])}")


def cmd_train(args) -> int:
    import optax
    from flax import nnx
    from rich.markup import escape

    if args.processes is not None:  # before the first JAX call
        from .. import distributed

        distributed.initialize(*args.processes)
    import jax

    from ..train import dpsgd

    leader = jax.process_index() == 0  # the one process that reports and writes
    d, config, budgets = args.data, args.config, args.config.budgets
    rngs = nnx.Rngs(args.seed)
    features = int(np.prod(d.feature_shape))
    side = round(math.sqrt(features))
    dtype = None if args.precision == "float32" else jax.numpy.bfloat16
    if args.model == "cnn":
        model = dpsgd.CNN(side, 1, d.num_classes, dtype=dtype, rngs=rngs)
    elif args.model == "transformer":  # the image's rows are the tokens
        from ..train.models import Transformer

        model = Transformer(side, side, d.num_classes, dtype=dtype, rngs=rngs)
    else:
        model = dpsgd.MLP(features, (args.hidden,), d.num_classes, dtype=dtype, rngs=rngs)
    optimizer = optax.sgd(args.lr, momentum=args.momentum or None)
    result = dpsgd.train(model, optimizer, d, config, progress=leader and not args.quiet,
                         checkpoint_dir=args.checkpoint)
    if not leader:
        return 0

    summary = {
        "dataset": args.dataset, "model": args.model, **result.to_json(),
        "config": config.to_json(),
        "optimizer": {"name": "sgd", "lr": args.lr, "momentum": args.momentum},
        "budgets_spec": args.budgets,
    }
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(summary, f, indent=2)
    if args.plot:
        from ..report import plot_learning_curve

        plot_learning_curve(result.history, args.plot, f"DP-SGD on {args.dataset} ({args.model}), δ = {args.delta:g}")

    console = stdout_console()
    console.print(table(
        f"DP-SGD ({args.mechanism}{_SAMPLING_TITLES.get(args.sampling, '')}) on "
        f"{args.dataset}: {result.plan.mode}, T = {result.steps:,} steps, δ = {args.delta:g}",
        ["epoch", "steps", "test accuracy", "ε spent"],
        [[str(r.epoch), f"{r.steps:,}", f"{r.test_accuracy:.4f}", fmt(r.epsilon)] for r in result.history],
        numeric=(0, 1, 2, 3),
    ))
    groups = summary["plan"]["groups"]
    if len(groups) > 1 or budgets is not None:
        title = "privacy groups (records with the same budget)"
        if len(groups) > 12:  # continuous budgets: one group per record; show a spread, the JSON has all
            title = f"12 of {len(groups):,} privacy groups (records with the same budget; --json lists all)"
            groups = [groups[i] for i in np.linspace(0, len(groups) - 1, 12).round().astype(int)]
        console.print(table(
            title,
            ["budget ε", "records", "rate q", "noise σ", "clip C", "ε spent"],
            [[fmt(g["budget"]) if g["budget"] is not None else "-", f"{g['records']:,}", fmt(g["rate"]),
              fmt(g["noise_multiplier"]), fmt(g["clip_norm"]), fmt(g["epsilon"])] for g in groups],
            numeric=(0, 1, 2, 3, 4, 5),
        ))
    if len(groups) == 1 and budgets is None:  # one noise scale for all (else the groups table shows each)
        console.print(_noise_line(args.mechanism, result.plan.mode, groups[0], args.epsilon))
    console.print(f"test accuracy {result.test_accuracy:.4f}, ε = {fmt(result.epsilon)} at δ = {args.delta:g} "
                  f"({result.stopped}; {result.seconds:.1f} s)")
    for kind in ("json", "plot"):
        if getattr(args, kind):
            console.print(f"wrote {kind}: {escape(getattr(args, kind))}", soft_wrap=True)
    return 0
