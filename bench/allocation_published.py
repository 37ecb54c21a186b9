"""Random allocation against the numbers the literature prints (issue 31): jaxpriv's certified intervals beside
the published exact values and the published accountants' answers, setting by setting.

Sources (their settings: one pass of m steps per epoch, each example in one uniform step, Gaussian noise of
multiplier σ, a fresh allocation each epoch; add/remove of one example, which is their "zero-out" pair):

* Ertan & van Dijk 2026, "Closed-Form Noise Calibration Against Membership Inference for Random-Allocation
  DP-SGD" (preprint):
  - Table 11: the exact total variation d_TV of E epochs (their Theorem 4.1; = δ(0) in either direction) at
    the closed-form σ of their Corollary 3.4 for a target λ, to 5 decimals, with Feldman & Shenfeld's PLD
    accountant's bracket [largest lower, smallest upper bound] over both directions;
  - Table 4: the exact σ of nine cells (λ = 0.10, rounded up to 1e-6) with a ball-arithmetic certificate
    d_TV ≤ bound (their text: d_TV lies in [0.099999917, 0.099999998] at these σ);
  - Table 6: ε at δ = 1e-5 at the closed-form and the exact σ of the same cells, each the upper end of
    Feldman & Shenfeld's accountant at numerical accuracy 0.01, the larger of the two directions.
* dp_accounting's random-allocation accountant (google/differential-privacy pull request #414,
  pld_privacy_accountant_test.py::test_random_allocation_basic): 10 of 100 steps, σ = 2, δ = 1e-6 →
  ε = 2.4265, its pessimistic PLD estimate (grid 1e-4), by the same reduction to rounds of one-of-⌊t/k⌋.

Checks (exit 1 if one fails): our upper end never lies below an exact value (less its rounding) and our
lower end never above a published upper bound (plus its rounding). Tightness is reported, not asserted.
Each table is one batched jaxpriv call; the times include its compilation in this process.

    python bench/allocation_published.py          # ~3-5 min on 2 cores
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

# Table 11: (λ, m, E, exact d_TV, Feldman-Shenfeld lower, upper); σ is the closed form of (λ, m, E)
TABLE_11 = [
    (0.10, 100, 10, 0.07885, 0.07434, 0.08359), (0.10, 100, 20, 0.07887, 0.07436, 0.08364),
    (0.10, 100, 40, 0.07888, 0.07439, 0.08364), (0.10, 250, 10, 0.07880, 0.07486, 0.08286),
    (0.10, 250, 20, 0.07886, 0.07487, 0.08286), (0.10, 250, 40, 0.07887, 0.07491, 0.08289),
    (0.10, 500, 10, 0.07870, 0.07482, 0.08269), (0.10, 500, 20, 0.07884, 0.07497, 0.08286),
    (0.10, 500, 40, 0.07887, 0.07500, 0.08289), (0.20, 100, 10, 0.15193, 0.14778, 0.15612),
    (0.20, 100, 20, 0.15254, 0.14839, 0.15681), (0.20, 100, 40, 0.15270, 0.14852, 0.15699),
    (0.20, 250, 10, 0.15079, 0.14712, 0.15449), (0.20, 250, 20, 0.15223, 0.14856, 0.15590),
    (0.20, 250, 40, 0.15262, 0.14897, 0.15628), (0.20, 500, 10, 0.14923, 0.14575, 0.15277),
    (0.20, 500, 20, 0.15172, 0.14816, 0.15534), (0.20, 500, 40, 0.15249, 0.14890, 0.15613),
    (0.35, 100, 10, 0.24117, 0.23757, 0.24485), (0.35, 100, 20, 0.24572, 0.24203, 0.24944),
    (0.35, 100, 40, 0.24724, 0.24352, 0.25100), (0.35, 250, 10, 0.23524, 0.23207, 0.23846),
    (0.35, 250, 20, 0.24318, 0.23994, 0.24645), (0.35, 250, 40, 0.24643, 0.24314, 0.24970),
    (0.35, 500, 10, 0.22923, 0.22620, 0.23233), (0.35, 500, 20, 0.24004, 0.23692, 0.24320),
    (0.35, 500, 40, 0.24523, 0.24206, 0.24842),
]
# Tables 4 and 6 (λ = 0.10): (m, E, exact σ, certified d_TV bound, ε closed-form σ, ε exact σ) at δ = 1e-5
TABLES_4_6 = [
    (100, 10, 1.426215, 0.0999999543, 0.727, 0.949), (100, 20, 1.907073, 0.0999999580, 0.724, 0.940),
    (100, 40, 2.610518, 0.0999999743, 0.723, 0.939), (250, 10, 1.024495, 0.0999999977, 0.733, 0.970),
    (250, 20, 1.309428, 0.0999999624, 0.725, 0.944), (250, 40, 1.732809, 0.0999999826, 0.724, 0.939),
    (500, 10, 0.834432, 0.0999999316, 0.745, 1.022), (500, 20, 1.025964, 0.0999999445, 0.728, 0.952),
    (500, 40, 1.310146, 0.0999999769, 0.724, 0.941),
]
TV_AT_EXACT_SIGMA = 0.099999917  # the least d_TV at Table 4's σ (their Appendix E)
PR_414 = (10, 100, 2.0, 1e-6, 2.4265)  # (k, t, σ, δ, ε)


def closed_form_sigma(lam, m, epochs):
    """Ertan & van Dijk's Corollary 3.4: ½·√((1 + (e^{1/σ²} − 1)/m)^E − 1) = λ solved for σ."""
    return np.log1p(m * ((1 + 4 * np.asarray(lam) ** 2) ** (1 / np.asarray(epochs)) - 1)) ** -0.5


def _allocation(m, epochs, sigma):
    from jaxpriv import events

    return events.SelfComposed(events.RandomAllocation(1, np.asarray(m), events.Gaussian(np.asarray(sigma))),
                               np.asarray(epochs))


def _timed(function, *args):
    t, c = time.perf_counter(), time.process_time()
    out = function(*args)
    return out, time.perf_counter() - t, time.process_time() - c


def table_11() -> tuple[list, bool]:
    from jaxpriv import accounting

    lam, m, epochs, exact, fs_low, fs_up = (np.array(c) for c in zip(*TABLE_11))
    sigma = closed_form_sigma(lam, m, epochs)
    (low, up), wall, cpu = _timed(accounting.delta_interval, _allocation(m, epochs, sigma), 0.0)
    ok = bool(np.all(up >= exact - 5e-6) and np.all(low <= exact + 5e-6))
    print(f"\n### Table 11: d_TV = δ(0) at the closed-form σ, 27 settings in one call: {wall:.1f} s ({cpu:.1f} CPU s)")
    print("| λ | m | E | σ | exact d_TV | jaxpriv δ(0) [lower, upper] | upper − exact | Feldman-Shenfeld [lower, upper] |")
    print("|---|---|---|---|---|---|---|---|")
    rows = []
    for i in range(len(TABLE_11)):
        print(f"| {lam[i]:.2f} | {m[i]} | {epochs[i]} | {sigma[i]:.4f} | {exact[i]:.5f} | [{low[i]:.5f}, {up[i]:.5f}] "
              f"| {100 * (up[i] / exact[i] - 1):+.2f}% | [{fs_low[i]:.5f}, {fs_up[i]:.5f}] |")
        rows.append({"lambda": lam[i], "m": int(m[i]), "epochs": int(epochs[i]), "sigma": sigma[i],
                     "exact": exact[i], "lower": low[i], "upper": up[i], "fs": [fs_low[i], fs_up[i]]})
    tighter = int(np.sum(up < fs_up))
    print(f"jaxpriv's upper end below Feldman-Shenfeld's in {tighter} of {len(up)}; its lower end above theirs in "
          f"{int(np.sum(low > fs_low))}; upper − exact: median {100 * np.median(up / exact - 1):.2f}%, "
          f"largest {100 * np.max(up / exact - 1):.2f}%; conservative: {'yes' if ok else 'NO'}")
    return rows, ok


def tables_4_6() -> tuple[list, bool]:
    from jaxpriv import accounting

    m, epochs, sigma, bound, eps_closed, eps_exact = (np.array(c) for c in zip(*TABLES_4_6))
    closed = closed_form_sigma(0.10, m, epochs)
    (tv_low, tv_up), wall_tv, cpu_tv = _timed(accounting.delta_interval, _allocation(m, epochs, sigma), 0.0)
    both = _allocation(np.tile(m, 2), np.tile(epochs, 2), np.concatenate([closed, sigma]))
    (e_low, e_up), wall_e, cpu_e = _timed(accounting.epsilon_interval, both, 1e-5)
    published = np.concatenate([eps_closed, eps_exact])
    ok = bool(np.all(tv_up >= TV_AT_EXACT_SIGMA) and np.all(tv_low <= bound) and np.all(e_low <= published + 5e-4))
    print(f"\n### Tables 4 and 6 (λ = 0.10): δ(0) at the exact σ in one call {wall_tv:.1f} s ({cpu_tv:.1f} CPU s); "
          f"ε at δ = 1e-5 at both σ in one call {wall_e:.1f} s ({cpu_e:.1f} CPU s)")
    print("| m | E | exact σ | certified d_TV ≤ | jaxpriv δ(0) [lower, upper] | closed σ: F-S ε / jaxpriv ε "
          "| exact σ: F-S ε / jaxpriv ε |")
    print("|---|---|---|---|---|---|---|")
    rows, n = [], len(TABLES_4_6)
    for i in range(n):
        print(f"| {m[i]} | {epochs[i]} | {sigma[i]:.6f} | {bound[i]:.10f} | [{tv_low[i]:.5f}, {tv_up[i]:.5f}] "
              f"| {eps_closed[i]:.3f} / [{e_low[i]:.4f}, {e_up[i]:.4f}] "
              f"| {eps_exact[i]:.3f} / [{e_low[n + i]:.4f}, {e_up[n + i]:.4f}] |")
        rows.append({"m": int(m[i]), "epochs": int(epochs[i]), "sigma": sigma[i], "tv": [tv_low[i], tv_up[i]],
                     "eps_closed": [e_low[i], e_up[i]], "eps_exact": [e_low[n + i], e_up[n + i]]})
    print(f"jaxpriv's ε upper end below the published (accuracy 0.01) in {int(np.sum(e_up < published))} of {2 * n}; "
          f"conservative: {'yes' if ok else 'NO'}")
    return rows, ok


def pull_request_414() -> tuple[dict, bool]:
    from jaxpriv import accounting, events

    k, t, sigma, delta, eps = PR_414
    (low, up), wall, cpu = _timed(accounting.epsilon_interval, events.RandomAllocation(k, t, events.Gaussian(sigma)),
                                  delta)
    ok = bool(low <= eps)
    print(f"\n### dp_accounting pull request #414: {k} of {t} steps, σ = {sigma}, δ = {delta:g}: dp_accounting ε = "
          f"{eps}, jaxpriv [{float(low):.4f}, {float(up):.4f}] ({100 * (float(up) / eps - 1):+.2f}%), {wall:.1f} s "
          f"({cpu:.1f} CPU s); consistent: {'yes' if ok else 'NO'}")
    return {"lower": float(low), "upper": float(up), "published": eps}, ok


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", help="write the results to this file")
    args = parser.parse_args(argv)
    print(f"load average at start: {os.getloadavg()[0]:.2f}; {os.cpu_count()} cores")
    results, ok = {}, True
    for name, part in (("table_11", table_11), ("tables_4_6", tables_4_6), ("pr_414", pull_request_414)):
        results[name], good = part()
        ok &= good
    print(f"\nload average at end: {os.getloadavg()[0]:.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2, default=float)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
