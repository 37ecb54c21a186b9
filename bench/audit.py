"""Audit benchmark: the claimed ε of DP-SGD runs against the audited lower bounds (issue 33).

    python bench/audit.py [--epsilons 1,4,8] [--canaries 1000] [--faults] [--json OUT]

1. **Claim vs audit** — for each ε, one run of the trainer on digits with gradient (Dirac) and input
   canaries (``jaxpriv.audit.audit_training``, full batch: q = 1, so the run is exactly √T/σ-GDP), at 95%
   confidence: the claimed ε (the trainer's RDP accountant), the Steinke et al. (ε, δ) bound and the GDP
   bound (μ and its ε) for each kind of canary, and the gap; for the gradient canaries also the one-run f-DP
   test of the trainer's own claim (its p-value) and the noise-multiplier bound σ_ub (every DP-SGD claim with
   σ' ≥ σ_ub is rejected; MATH §10.6). Check: every bound ≤ the claim.
2. **Planted faults** (``--faults``) — the faults of ``tests/audit_faults.py`` at the tests' settings; check:
   the audited bound exceeds the claim for each, and the f-DP test rejects the claim (p < 1 − confidence).

Prints markdown tables; exits with status 1 if a check fails.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if os.path.isfile(os.path.join(_ROOT, "jaxpriv", "__init__.py")):
    sys.path.insert(0, _ROOT)
sys.path.insert(0, os.path.join(_ROOT, "tests"))  # the planted faults live beside the tests that use them

from jaxpriv.audit.training import audit_training  # noqa: E402


def _row(name, audit, seconds):
    kinds = {k.kind: k for k in audit.kinds}
    cells = [name, f"{audit.claimed_epsilon:.3f}", f"{audit.claimed_mu:.3f}" if audit.claimed_mu else "-"]
    for kind in ("gradient", "input"):
        k = kinds.get(kind)
        cells += ["-", "-"] if k is None else [f"{k.steinke.epsilon:.3f} ({k.steinke.correct}/{k.steinke.guesses})",
                                               f"{k.gdp.mu:.3f} / {k.gdp.epsilon:.3f}"]
    best = _best(audit)
    grad = kinds.get("gradient")
    if grad is not None and grad.claim is not None:  # the f-DP test of the trainer's own claim (MATH §10.6)
        cells += [f"{grad.claim.p_value:.2g}", f"{grad.noise.sigma:.3g} ({audit.plan_sigma:.3g})"]
    else:
        cells += ["-", "-"]
    cells += [f"{best:.3f}", f"{audit.claimed_epsilon - best:.3f}", "yes" if best > audit.claimed_epsilon else "no",
              f"{seconds:.1f}"]
    return "| " + " | ".join(cells) + " |"


def _best(audit) -> float:
    """The largest valid bound: the (ε, δ) bound, and the GDP bound's ε where the claim is GDP (q = 1)."""
    return max(audit.epsilon_lower, audit.gdp_epsilon_lower if audit.claimed_mu is not None else 0.0)


HEADER = ("| run | claimed ε | claimed μ | gradient: ε lb (correct/guesses) | gradient: μ lb / its ε | "
          "input: ε lb | input: μ lb / its ε | gradient: claim's f-DP p | gradient: σ_ub (run's σ) | best lb | gap | "
          "lb > claim | s |\n"
          "|---|---|---|---|---|---|---|---|---|---|---|---|---|")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--epsilons", default="1,4,8")
    parser.add_argument("--canaries", type=int, default=1000)
    parser.add_argument("--input-canaries", type=int, default=300)
    parser.add_argument("--faults", action="store_true")
    parser.add_argument("--json")
    args = parser.parse_args()
    ok, rows = True, []
    print("## Claim vs audit (digits, full batch, 5 epochs, 95% confidence, δ = 1e-5, seed 0)\n")
    print(HEADER)
    for eps in (float(e) for e in args.epsilons.split(",")):
        start = time.perf_counter()
        audit = audit_training("digits", epsilon=eps, canaries=args.canaries, input_canaries=args.input_canaries)
        seconds = time.perf_counter() - start
        print(_row(f"ε = {eps:g}", audit, seconds), flush=True)
        rows.append({"run": f"epsilon={eps:g}", **audit.to_json(), "seconds": seconds})
        ok &= _best(audit) <= audit.claimed_epsilon
        ok &= audit.claim_p_value is None or audit.claim_p_value >= 1.0 - audit.confidence  # claim not rejected
        if audit.claimed_mu is not None:
            ok &= all(k.gdp.mu <= audit.claimed_mu for k in audit.kinds)
    if args.faults:
        from audit_faults import FAULTS, planted
        from test_audit_training import FAULT_SETTINGS

        print("\n## Planted faults (tests/test_audit_training.py's settings: claimed ε = 2, 95% confidence, seed 0;"
              "\nfull batch: 2000 gradient + 100 input canaries, T = 4; skip_clip: q ≈ 0.01, T = 384, 1000 canaries)\n")
        print(HEADER)
        for fault in FAULTS:
            settings = FAULT_SETTINGS[fault]
            start = time.perf_counter()
            with planted(fault):
                audit = audit_training("digits", **settings)
            seconds = time.perf_counter() - start
            print(_row(fault, audit, seconds), flush=True)
            rows.append({"run": fault, "settings": {k: v for k, v in settings.items()}, **audit.to_json(),
                         "seconds": seconds})
            ok &= _best(audit) > audit.claimed_epsilon
            ok &= audit.claim_p_value is not None and audit.claim_p_value < 1.0 - audit.confidence
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(rows, f, indent=2, default=str)
    print("\nall checks passed" if ok else "\nA CHECK FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
