"""``jaxpriv audit``: train once with canaries and compare the claimed ε with the audited lower bounds.

Registered by :mod:`jaxpriv.cli` with one call (:func:`add_parser`), which hands over the command line's
own helpers (the shared numeric rules, the subparser factory, the defaults), so that this command follows
the same rules without importing the command line. Numpy only at import: JAX is imported by the handler.
"""

from __future__ import annotations

import json
import os

import numpy as np

from .._checks import check_values

__all__ = ["add_parser", "check_audit", "cmd_audit"]

EXAMPLE = "jaxpriv audit --dataset digits --epsilon 8 --canaries 1000 --out audit-out"


def _int(text: str) -> int | float:
    value = float(text.replace("_", ""))
    return int(value) if value.is_integer() else value


def add_parser(subparsers, subparser, add_number, defaults) -> None:
    """Add ``audit`` to the command line's ``subparsers`` with its helpers (``jaxpriv.cli``'s
    ``_subparser``, ``_add_number`` and ``_defaults``)."""
    p = subparser(subparsers, "audit",
                  "Train once with DP-SGD and canaries; print the claimed ε, the audited lower bounds and the gap.",
                  EXAMPLE)
    p.add_argument("--dataset", choices=("digits", "breast_cancer", "mnist"), default="digits",
                   help="bundled dataset: UCI digits (8×8) or breast cancer, or MNIST-5k (28×28; 4,000 training "
                        "images) (default: %(default)s)")
    add_number(p, "epsilon", required=True, extra="σ is calibrated to spend it over the run")
    add_number(p, "delta", default=1e-5)
    p.add_argument("--canaries", type=_int, default=1000, metavar="M",
                   help="gradient (Dirac) canaries, an integer in [2, inf) (default: %(default)s)")
    p.add_argument("--input-canaries", type=_int, default=100, metavar="M",
                   help="input canaries (mislabelled held-out examples), 0 or an integer in [2, inf) "
                        "(default: %(default)s)")
    p.add_argument("--confidence", type=float, default=0.95,
                   help="confidence level of the lower bounds, in (0, 1) (default: %(default)s)")
    add_number(p, "epochs", default=5)
    add_number(p, "batch_size", extra="default: the whole training set (q = 1, exactly Gaussian DP)")
    add_number(p, "clip", default=1.0)
    add_number(p, "lr", default=0.5)
    add_number(p, "hidden", default=32)
    add_number(p, "seed", default=0)
    p.add_argument("--out", metavar="DIR", help="write audit.png (claim vs audit) and audit.json here")
    defaults(p, cmd_audit, dirs=("out",), check=check_audit)


def check_audit(args) -> None:
    """The audit's own arguments (numpy only, before JAX): ``ValueError`` naming the option and its range."""
    check_values("canaries", args.canaries, 2.0, integer=True)
    if args.input_canaries != 0:
        check_values("input_canaries", args.input_canaries, 2.0, integer=True)
    check_values("confidence", args.confidence, 0.0, 1.0, lo_open=True, hi_open=True)
    check_values("epochs", args.epochs, 1.0, integer=True)


def cmd_audit(args) -> int:
    """Run the audit and print the claim, the bounds and the gap (and write the figure and JSON)."""
    from .training import audit_training

    audit = audit_training(args.dataset, epsilon=args.epsilon, delta=args.delta, canaries=int(args.canaries),
                           input_canaries=int(args.input_canaries), epochs=int(args.epochs),
                           batch_size=args.batch_size, clip_norm=args.clip, lr=args.lr, hidden=int(args.hidden),
                           confidence=args.confidence, seed=int(args.seed))
    print(f"DP-SGD on {args.dataset}: T = {audit.result.steps} steps, q = {audit.plan_rate:.4g}, "
          f"σ = {audit.plan_sigma:.4g}, test accuracy {audit.result.test_accuracy:.3f}")
    claim = f"claimed ε = {audit.claimed_epsilon:.3f} at δ = {audit.delta:g}"
    if audit.claimed_mu is not None:
        claim += f" (exactly μ = {audit.claimed_mu:.3f} Gaussian DP)"
    print(claim)
    print(f"{'canaries':<10}{'m':>6}{'guesses':>9}{'correct':>9}{'ε lb (ε,δ)':>12}{'μ lb':>8}{'ε lb (GDP)':>12}")
    for k in audit.kinds:
        print(f"{k.kind:<10}{k.scores.size:>6}{k.steinke.guesses:>9}{k.steinke.correct:>9}"
              f"{k.steinke.epsilon:>12.3f}{k.gdp.mu:>8.3f}{k.gdp.epsilon:>12.3f}")
    print(f"audited lower bound ε ≥ {audit.epsilon_lower:.3f} at {audit.confidence:.0%} confidence "
          f"(Steinke et al. 2023); gap to the claim {audit.claimed_epsilon - audit.epsilon_lower:.3f}")
    if audit.claim_p_value is not None:
        verdict = "inconsistent" if audit.claim_p_value <= 1.0 - audit.confidence else "consistent"
        print(f"f-DP one-run test of the claim (its accountant's privacy profile; Mahloujifar et al. 2025): "
              f"p = {audit.claim_p_value:.3g}, {verdict} with it at {audit.confidence:.0%}")
        for k in audit.kinds:
            rejected = (f"every DP-SGD claim (q, T, σ' ≥ {k.noise.sigma:.3g}) rejected" if np.isfinite(k.noise.sigma)
                        else "no DP-SGD claim (q, T, σ') rejected")
            print(f"  {k.kind}: {rejected} (the run's σ = {audit.plan_sigma:.3g}): ε ≥ {k.noise.epsilon:.3f} at "
                  f"δ = {audit.delta:g} if the run's curve has this shape")
    if args.out:
        from .figures import claimed_tpr, plot_audit

        os.makedirs(args.out, exist_ok=True)
        fpr = np.logspace(-4, 0, 80)
        if audit.claimed_mu is not None:
            tpr = claimed_tpr(fpr, mu=audit.claimed_mu)
        else:
            from .. import events

            event = events.SelfComposed(events.PoissonSampled(audit.plan_rate, events.Gaussian(audit.plan_sigma)),
                                        audit.result.steps)
            tpr = claimed_tpr(fpr, event=event)
        best = max(audit.kinds, key=lambda k: k.steinke.epsilon)
        path = plot_audit(os.path.join(args.out, "audit.png"), claimed_fpr=fpr, claimed_tpr=tpr,
                          scores=best.scores, inserted=best.inserted, epsilon_lower=audit.epsilon_lower,
                          delta=audit.delta, title=f"{args.dataset}: claimed ε = {audit.claimed_epsilon:.2f}, "
                                                   f"audited ε ≥ {audit.epsilon_lower:.2f}")
        with open(os.path.join(args.out, "audit.json"), "w", encoding="utf-8") as f:
            json.dump(audit.to_json(), f, indent=2)
        print(f"wrote {path} and {os.path.join(args.out, 'audit.json')}")
    return 0
