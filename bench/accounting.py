"""Accounting benchmark: jaxpriv side by side with dp_accounting, in one process.

    python bench/accounting.py [--quick] [--big] [--json OUT]

Measures, on whatever JAX backend is active (CPU or GPU):

1. ε of T = 10⁴ DP-SGD steps (δ = 1e-5) on a 25 × 40 grid of (q, σ) — 1000 configurations.
   dp_accounting: one ``RdpAccountant`` per configuration (its default 156 orders); a random subset is
   timed and the 1000-configuration time is extrapolated from the mean per-configuration time.
   jaxpriv: ``jaxpriv.dpsgd_epsilon`` on the whole grid, with dp_accounting's orders (like for like)
   and with jaxpriv's default orders; compile time (first call) and the median of repeated calls.
   Agreement: jaxpriv is exact, dp_accounting's fractional orders are an upper bound, so
   ε_jaxpriv − ε_dp_accounting ≤ 0 on every timed configuration.
2. σ calibration to a target ε (q = 0.01, T = 10⁴, δ = 1e-5): ``dp_accounting.calibrate_dp_mechanism``
   (Brent, tol 1e-6) per target vs ``jaxpriv.calibrate.noise_multiplier`` (all targets in one call, and
   one target per call). Checks ε_jaxpriv(σ_jaxpriv) ≤ target and σ_jaxpriv ≤ σ_dp_accounting.
3. A large random sweep through ``dpsgd_epsilon(chunk_size=4096, progress=True)``: throughput and peak
   RSS of a small and a 10× larger sweep (peak memory should not grow with N beyond the I/O arrays).
   10⁵ and 10⁶ configurations by default, 10⁴ and 10⁵ with ``--quick``, 10⁶ and 10⁷ with ``--big``.
4. The PLD accountant (``jaxpriv.accounting`` with ``accountant="pld"``) next to dp_accounting's
   ``PLDAccountant`` (ADD_OR_REMOVE_ONE, value_discretization_interval 1e-4, connect-the-dots,
   pessimistic) and its optimistic estimate (``from_gaussian_mechanism(..., pessimistic_estimate=False,
   use_connect_dots=False)``, privacy buckets rounded down):
   a. tightness at three reference events (jaxpriv's certified [lower, upper], its ``epsilon(...,
      accountant="pld")`` upper at h = 1e-4, dp_accounting pessimistic/optimistic, RDP ε of both);
   b. tightness on a seeded random grid of DP-SGD settings (q log-uniform in [1e-3, 0.1], σ uniform in
      [0.6, 3], T log-uniform in [100, 10⁴], δ = 1e-5): ratio jaxpriv upper / dp_accounting pessimistic
      (goal ≤ 1.005), jaxpriv upper ≥ dp_accounting optimistic, jaxpriv lower ≤ dp_accounting pessimistic,
      interval widths;
   c. speed: N settings (T = 1000) in one batched jaxpriv call (cold = first call after
      ``jax.clear_caches()``, compilation included; warm = the same call again) vs a Python loop of
      dp_accounting ``PLDAccountant``s, both at h = 1e-4;
   d. σ calibration to ε = 3 (q = 0.01, T = 10⁴, δ = 1e-5): ``jaxpriv.calibrate.calibrate(...,
      accountant="pld")`` (cold and warm) vs ``dp_accounting.calibrate_dp_mechanism`` with a PLDAccountant.
   ``--sections pld`` runs only this part; ``--pld-grid`` and ``--pld-speed`` set the two grid sizes.

Prints markdown tables and, with ``--json OUT``, writes every number to OUT.
"""

from __future__ import annotations

import argparse
import gc
import importlib.metadata
import logging
import os
import resource
import sys
import time
import warnings

import numpy as np

# Cold means cold: no persistent compilation cache (jaxpriv's default is ~/.cache/jaxpriv/xla), unless the
# caller set JAXPRIV_CACHE_DIR. Every "first call" below compiles.
os.environ.setdefault("JAXPRIV_CACHE_DIR", "")
# Benchmark the checkout this script lives in, not whatever `jaxpriv` happens to be installed.
_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if os.path.isfile(os.path.join(_ROOT, "jaxpriv", "__init__.py")):
    sys.path.insert(0, _ROOT)
import jaxpriv  # noqa: E402

import _common as common  # noqa: E402  (bench/ is the script's directory)
from _common import Q_RANGE, SIGMA_RANGE, first_and_repeats, random_dpsgd, say, timed  # noqa: E402

import jax  # noqa: E402
from jaxpriv import accounting, calibrate, events, rdp  # noqa: E402
from jaxpriv.accounting import pld as pld_mod  # noqa: E402

warnings.filterwarnings("ignore", category=DeprecationWarning)
import dp_accounting  # noqa: E402
from dp_accounting.pld import privacy_loss_distribution  # noqa: E402
from dp_accounting.pld.pld_privacy_accountant import PLDAccountant  # noqa: E402
from dp_accounting.rdp import RdpAccountant  # noqa: E402

STEPS = 10_000
DELTA = 1e-5
CAL_Q = 0.01
SWEEP_CHUNK = 4096


class _CountingHandler(logging.Handler):
    """Collects dp_accounting's absl warnings (e.g. a fractional-order series that failed to converge, after
    which dp_accounting drops that order) instead of printing them; the benchmark reports how many."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record):
        self.messages.append(record.getMessage())


DPA_WARNINGS = _CountingHandler()
_absl_logger = logging.getLogger("absl")
_absl_logger.addHandler(DPA_WARNINGS)
_absl_logger.propagate = False

ORDER_SETS = {
    # name -> (orders passed to jaxpriv, description)
    "dp_accounting": (rdp.DP_ACCOUNTING_ORDERS, f"DP_ACCOUNTING_ORDERS ({rdp.DP_ACCOUNTING_ORDERS.size})"),
    "default": (None, f"DEFAULT_ORDERS ({rdp.DEFAULT_ORDERS.size})"),
}


# --------------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------------




def rss_mib() -> dict:
    """Current and peak resident set size of this process (MiB). Peak is resettable on Linux."""
    info = {"peak": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0, "current": None}
    if sys.platform == "darwin":
        info["peak"] /= 1024.0  # bytes there, KiB on Linux
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    info["current"] = int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return info


def reset_peak_rss() -> bool:
    """Reset the kernel's peak-RSS mark (Linux ≥ 4.0), so a phase's own peak can be read afterwards."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def dpa_epsilon(q: float, sigma: float) -> float:
    accountant = RdpAccountant()  # dp_accounting's default 156 orders
    event = dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(sigma))
    accountant.compose(event, STEPS)
    return accountant.get_epsilon(DELTA)


def jaxpriv_epsilon_padded(q, sigma, orders, batch: int):
    """ε at a few points, evaluated at an already-compiled batch size (a new size recompiles)."""
    q, sigma = np.broadcast_arrays(np.asarray(q, float), np.asarray(sigma, float))
    n = q.size
    eps = jaxpriv.dpsgd_epsilon(np.resize(q, batch), np.resize(sigma, batch), STEPS, DELTA, orders=orders)
    return np.asarray(eps)[:n]


def fmt(x, digits=3):
    if x is None:
        return "–"
    if isinstance(x, str):
        return x
    if x == 0:
        return "0"
    ax = abs(x)
    if ax >= 1e4 or ax < 1e-3:
        return f"{x:.{digits - 1}e}"
    return f"{x:.{digits}g}" if ax < 100 else f"{x:,.0f}"


def table(header, rows) -> str:
    return common.table(header, rows, cell=fmt)


# --------------------------------------------------------------------------------------------------
# header
# --------------------------------------------------------------------------------------------------


def machine_info() -> dict:
    return common.machine_info(
        {
            "jax": jax.__version__,
            "jaxlib": importlib.metadata.version("jaxlib"),
            "numpy": np.__version__,
            "dp_accounting": importlib.metadata.version("dp-accounting"),
            "jaxpriv": jaxpriv.__version__,
        },
        os.path.dirname(os.path.abspath(jaxpriv.__file__)),
    )


def print_header(info: dict, mode: str):
    common.print_header(info, mode, 'jaxpriv vs dp_accounting: accounting benchmark',
                        'Timings are wall-clock (time.perf_counter); jaxpriv results are blocked on (np.asarray). On a loaded machine they are noisy: read the medians.')


# --------------------------------------------------------------------------------------------------
# 1. the 1000-configuration ε sweep
# --------------------------------------------------------------------------------------------------


def bench_sweep_1000(n_subset: int, repeats: int, rng) -> dict:
    q = np.geomspace(*Q_RANGE, 25)
    sigma = np.linspace(*SIGMA_RANGE, 40)
    Q, S = np.meshgrid(q, sigma, indexing="ij")
    n = Q.size
    say(f"## 1. ε of T = 10⁴ steps on a {q.size} × {sigma.size} (q, σ) grid ({n} configurations), δ = {DELTA:g}")
    say()
    say(f"q = geomspace({Q_RANGE[0]:g}, {Q_RANGE[1]:g}, {q.size}), σ = linspace({SIGMA_RANGE[0]:g}, "
        f"{SIGMA_RANGE[1]:g}, {sigma.size}).")
    say()

    # dp_accounting: a random subset, extrapolated to the grid.
    subset = np.sort(rng.choice(n, size=min(n_subset, n), replace=False))
    qf, sf = Q.reshape(-1), S.reshape(-1)
    dpa_eps, dpa_times, dpa_warned = [], [], []
    dpa_epsilon(0.01, 1.1)  # warm-up (imports, caches)
    for i in subset:
        n_warn = len(DPA_WARNINGS.messages)
        t, e = timed(lambda: dpa_epsilon(float(qf[i]), float(sf[i])))
        dpa_times.append(t)
        dpa_eps.append(e)
        dpa_warned.append(len(DPA_WARNINGS.messages) - n_warn)
    dpa_eps, dpa_times = np.asarray(dpa_eps), np.asarray(dpa_times)
    dpa = {
        "configs_timed": int(subset.size),
        "warnings_per_config": dpa_warned,
        "warning_examples": sorted(set(DPA_WARNINGS.messages))[:5],
        "per_config_mean_s": float(dpa_times.mean()),
        "per_config_median_s": float(np.median(dpa_times)),
        "extrapolated_total_s": float(dpa_times.mean() * n),
    }
    gc.collect()

    # jaxpriv: the whole grid in one call, for each order set.
    jp, eps_sub = {}, {}
    for name, (orders, _) in ORDER_SETS.items():
        call = lambda: np.asarray(jaxpriv.dpsgd_epsilon(Q, S, STEPS, DELTA, orders=orders))
        first, times, eps = first_and_repeats(call, repeats)
        med = float(np.median(times))
        sub = eps_sub[name] = eps.reshape(-1)[subset]
        diff = sub - dpa_eps
        rel = (dpa_eps - sub) / dpa_eps
        jp[name] = {
            "first_call_s": first,
            "times_s": times,
            "median_s": med,
            "min_s": float(np.min(times)),
            "per_config_s": med / n,
            "speedup": dpa["extrapolated_total_s"] / med,
            "break_even_configs": (first - med) / max(dpa["per_config_mean_s"] - med / n, 1e-30),
            "all_finite": bool(np.all(np.isfinite(eps))),
            "max_eps_minus_dpa": float(diff.max()),
            "max_rel_gap": float(rel.max()),
            "max_rel_gap_config": {"q": float(qf[subset[rel.argmax()]]), "sigma": float(sf[subset[rel.argmax()]]),
                                   "eps_jaxpriv": float(sub[rel.argmax()]), "eps_dpa": float(dpa_eps[rel.argmax()]),
                                   "dpa_warnings": dpa_warned[int(rel.argmax())]},
            "median_rel_gap": float(np.median(rel)),
            "min_rel_gap": float(rel.min()),
            "agrees_upper_bound": bool(np.all(diff <= 1e-12 * np.maximum(1.0, dpa_eps))),
        }
        gc.collect()

    rows = [[
        "dp_accounting RdpAccountant, one per config", "RdpAccountant default (156)", "–",
        f"{dpa['extrapolated_total_s']:.3g} (extrapolated)",
        f"{1e3 * dpa['per_config_mean_s']:.3g} mean / {1e3 * dpa['per_config_median_s']:.3g} median",
        "1×",
    ]]
    for name, r in jp.items():
        rows.append([
            "jaxpriv.dpsgd_epsilon, whole grid", ORDER_SETS[name][1], f"{r['first_call_s']:.3g}",
            f"{r['median_s']:.3g} (median of {repeats}; min {r['min_s']:.3g})",
            f"{1e3 * r['per_config_s']:.3g}", f"**{r['speedup']:.1f}×**",
        ])
    say(table(["method", "orders", "compile / first call (s)", f"time for {n} configs (s)", "per config (ms)",
               "speed-up vs dp_accounting"], rows))
    say()
    say(f"dp_accounting was timed on {subset.size} random configurations of the {n} and extrapolated to {n} "
        f"by the mean per-configuration time (median shown too). Speed-up = dp_accounting extrapolated "
        f"{n}-config time / jaxpriv median. Break-even (configs at which compile + run beats the dp_accounting "
        "loop): " + ", ".join(f"{ORDER_SETS[k][1]}: ~{r['break_even_configs']:.0f}" for k, r in jp.items()) + ".")
    say()
    say(f"Agreement on the {subset.size} timed configurations (jaxpriv is exact; dp_accounting's fractional "
        "orders give an upper bound, so ε_jaxpriv − ε_dp_accounting should be ≤ 0):")
    say()
    rows = [[ORDER_SETS[k][1], f"{r['max_eps_minus_dpa']:.3e}", f"{r['min_rel_gap']:.3e}",
             f"{r['median_rel_gap']:.3e}", f"{r['max_rel_gap']:.3e}",
             "yes" if r["agrees_upper_bound"] and r["all_finite"] else "**NO**"]
            for k, r in jp.items()]
    say(table(["jaxpriv orders", "max(ε_jp − ε_dpa)", "min rel. gap", "median rel. gap", "max rel. gap",
               "ε_jp ≤ ε_dpa everywhere"], rows))
    say()
    worst = jp["dp_accounting"]["max_rel_gap_config"]
    say(f"rel. gap = (ε_dpa − ε_jp) / ε_dpa; ε ranges {float(dpa_eps.min()):.3g} … {float(dpa_eps.max()):.4g} on "
        f"the timed subset. Largest gap (156 orders) at q = {worst['q']:.4g}, σ = {worst['sigma']:.4g}: "
        f"ε_jp = {worst['eps_jaxpriv']:.6g} vs ε_dpa = {worst['eps_dpa']:.6g}. The tolerance for "
        "'ε_jp ≤ ε_dpa' is 1e-12 relative (float64 rounding at integer orders, where both are exact).")
    say()
    for name, r in jp.items():
        bad = np.nonzero(eps_sub[name] - dpa_eps > 1e-12 * np.maximum(1.0, dpa_eps))[0]
        r["violations"] = [{"q": float(qf[subset[i]]), "sigma": float(sf[subset[i]]),
                            "eps_jaxpriv": float(eps_sub[name][i]), "eps_dpa": float(dpa_eps[i])} for i in bad]
        for v in r["violations"][:5]:
            say(f"- **ε_jp > ε_dpa** ({ORDER_SETS[name][1]}) at q = {v['q']:.6g}, σ = {v['sigma']:.6g}: "
                f"ε_jp = {v['eps_jaxpriv']:.8g}, ε_dpa = {v['eps_dpa']:.8g}")
    if any(r["violations"] for r in jp.values()):
        say()
    n_warned = sum(1 for w in dpa_warned if w)
    if n_warned:
        say(f"dp_accounting logged {sum(dpa_warned)} warnings on {n_warned} of the {subset.size} timed "
            f"configurations (suppressed above), e.g. \"{dpa['warning_examples'][0]}\" — it then drops those "
            "orders, which loosens its ε there.")
        say()
    return {"grid": {"n": n, "q": q.tolist(), "sigma": sigma.tolist(), "steps": STEPS, "delta": DELTA},
            "subset": subset.tolist(), "dp_accounting_eps": dpa_eps.tolist(), "dp_accounting": dpa,
            "jaxpriv": jp}


# --------------------------------------------------------------------------------------------------
# 2. σ calibration
# --------------------------------------------------------------------------------------------------


def dpa_calibrate(target: float):
    evals = 0

    def make_event(sigma):
        nonlocal evals
        evals += 1
        return dp_accounting.SelfComposedDpEvent(
            dp_accounting.PoissonSampledDpEvent(CAL_Q, dp_accounting.GaussianDpEvent(sigma)), STEPS)

    t, sigma = timed(lambda: dp_accounting.calibrate_dp_mechanism(
        make_fresh_accountant=RdpAccountant,
        make_event_from_param=make_event,
        target_epsilon=target,
        target_delta=DELTA,
        bracket_interval=dp_accounting.LowerEndpointAndGuess(0.0, 1.0),
        tol=1e-6,
    ))
    return t, float(sigma), evals


def bench_calibration(targets: np.ndarray, repeats: int, like_for_like: bool, eps_batch: int) -> dict:
    nt = targets.size
    say(f"## 2. σ calibration to a target ε (q = {CAL_Q:g}, T = 10⁴, δ = {DELTA:g}), {nt} targets")
    say()
    n_warn = len(DPA_WARNINGS.messages)
    dpa_rows = [dpa_calibrate(float(t)) for t in targets]
    n_warn = len(DPA_WARNINGS.messages) - n_warn
    dpa_t = np.array([r[0] for r in dpa_rows])
    dpa_sigma = np.array([r[1] for r in dpa_rows])
    dpa_evals = [r[2] for r in dpa_rows]
    gc.collect()

    call = lambda orders=None: np.asarray(calibrate.noise_multiplier(targets, CAL_Q, STEPS, DELTA, orders=orders))
    vec_first, vec_times, jp_sigma = first_and_repeats(call, repeats)
    gc.collect()

    # One target per call: compile once (batch of 1), then every target in turn, `repeats` times.
    single = lambda t: np.asarray(calibrate.noise_multiplier(float(t), CAL_Q, STEPS, DELTA))
    one_first, _ = timed(lambda: single(targets[0]))
    one_times = [timed(lambda: single(t))[0] for _ in range(max(1, repeats // 2)) for t in targets]
    gc.collect()

    jp_eps = jaxpriv_epsilon_padded(CAL_Q, jp_sigma, None, eps_batch)
    out = {
        "targets": targets.tolist(),
        "dp_accounting": {"sigma": dpa_sigma.tolist(), "times_s": dpa_t.tolist(), "epsilon_evals": dpa_evals,
                          "warnings": n_warn,
                          "per_target_mean_s": float(dpa_t.mean()), "per_target_median_s": float(np.median(dpa_t))},
        "jaxpriv_vectorised": {"sigma": jp_sigma.tolist(), "achieved_eps": jp_eps.tolist(),
                               "first_call_s": vec_first, "times_s": vec_times,
                               "median_s": float(np.median(vec_times)),
                               "per_target_s": float(np.median(vec_times)) / nt},
        "jaxpriv_single": {"first_call_s": one_first, "times_s": one_times,
                           "median_s": float(np.median(one_times))},
    }
    out["jaxpriv_vectorised"]["speedup_per_target"] = out["dp_accounting"]["per_target_mean_s"] / out["jaxpriv_vectorised"]["per_target_s"]
    out["jaxpriv_single"]["speedup_per_target"] = out["dp_accounting"]["per_target_mean_s"] / out["jaxpriv_single"]["median_s"]
    eps_ok = jp_eps <= targets * (1 + 1e-12)
    sigma_ok = jp_sigma <= dpa_sigma + 1e-6  # dp_accounting's σ is within tol = 1e-6 of its own root
    out["checks"] = {"achieved_eps_le_target": bool(eps_ok.all()), "sigma_le_dp_accounting": bool(sigma_ok.all())}

    if like_for_like:  # same orders as dp_accounting: isolates the effect of exact fractional orders
        dpa_orders = rdp.DP_ACCOUNTING_ORDERS
        first, times, s156 = first_and_repeats(lambda: call(dpa_orders), repeats)
        e156 = jaxpriv_epsilon_padded(CAL_Q, s156, dpa_orders, eps_batch)
        out["jaxpriv_vectorised_dpa_orders"] = {
            "sigma": s156.tolist(), "achieved_eps": e156.tolist(), "first_call_s": first, "times_s": times,
            "median_s": float(np.median(times)), "per_target_s": float(np.median(times)) / nt}
        out["checks"]["dpa_orders_achieved_eps_le_target"] = bool(np.all(e156 <= targets * (1 + 1e-12)))
        out["checks"]["dpa_orders_sigma_le_dp_accounting"] = bool(np.all(s156 <= dpa_sigma + 1e-6))
        gc.collect()

    rows = []
    for i, t in enumerate(targets):
        row = [f"{t:.6g}", f"{dpa_sigma[i]:.7f}", f"{dpa_t[i]:.3g}", str(dpa_evals[i]), f"{jp_sigma[i]:.7f}",
               f"{jp_eps[i]:.10g}", f"{jp_sigma[i] / dpa_sigma[i] - 1:+.2e}"]
        if like_for_like:
            s = out["jaxpriv_vectorised_dpa_orders"]["sigma"][i]
            row.append(f"{s:.7f} ({s / dpa_sigma[i] - 1:+.2e})")
        row.append("yes" if eps_ok[i] and sigma_ok[i] else "**NO**")
        rows.append(row)
    header = ["target ε", "σ dp_accounting", "dpa time (s)", "dpa ε evals", f"σ jaxpriv ({ORDER_SETS['default'][1]})",
              "ε_jaxpriv(σ_jaxpriv)", "σ_jp / σ_dpa − 1"]
    if like_for_like:
        header.append(f"σ jaxpriv ({ORDER_SETS['dp_accounting'][1]})")
    header.append("ε ≤ target and σ_jp ≤ σ_dpa")
    say(table(header, rows))
    say()
    d, v, s = out["dp_accounting"], out["jaxpriv_vectorised"], out["jaxpriv_single"]
    rows = [
        ["dp_accounting.calibrate_dp_mechanism (Brent, tol 1e-6), one per target", "–",
         f"{d['per_target_mean_s']:.3g} mean / {d['per_target_median_s']:.3g} median",
         f"{d['per_target_mean_s']:.3g}", "1×"],
        [f"jaxpriv noise_multiplier, {nt} targets in one call", f"{vec_first:.3g}",
         f"{v['median_s']:.3g} (median of {repeats})", f"{v['per_target_s']:.3g}",
         f"**{v['speedup_per_target']:.1f}×**"],
        ["jaxpriv noise_multiplier, one target per call", f"{one_first:.3g}",
         f"{s['median_s']:.3g} (median of {len(one_times)})", f"{s['median_s']:.3g}",
         f"**{s['speedup_per_target']:.1f}×**"],
    ]
    if like_for_like:
        r = out["jaxpriv_vectorised_dpa_orders"]
        rows.append([f"jaxpriv noise_multiplier, {nt} targets, {ORDER_SETS['dp_accounting'][1]}",
                     f"{r['first_call_s']:.3g}", f"{r['median_s']:.3g} (median of {repeats})",
                     f"{r['per_target_s']:.3g}", f"{d['per_target_mean_s'] / r['per_target_s']:.1f}×"])
    say(table(["method", "compile / first call (s)", "time per call (s)", "per target (s)", "speed-up per target"],
              rows))
    say()
    say("jaxpriv's σ is the smallest σ with ε(σ) ≤ target to 1e-10 relative, on exact RDP curves; "
        "dp_accounting's ε at fractional orders is an upper bound, so it needs a slightly larger σ. "
        f"dp_accounting's time per calibration is ~(ε evals) × (one accountant, ~{1e3 * d['per_target_mean_s'] / np.mean(dpa_evals):.0f} ms)"
        + (f"; it logged {n_warn} warnings (suppressed)." if n_warn else "."))
    say()
    return out


# --------------------------------------------------------------------------------------------------
# 3. large sweep: throughput and bounded memory
# --------------------------------------------------------------------------------------------------


def bench_big_sweep(sizes, rng) -> dict:
    say(f"## 3. Large random sweeps: dpsgd_epsilon(chunk_size={SWEEP_CHUNK}, progress=True)")
    say()
    say(f"q log-uniform in [{Q_RANGE[0]:g}, {Q_RANGE[1]:g}], σ uniform in [{SIGMA_RANGE[0]:g}, {SIGMA_RANGE[1]:g}], "
        f"T = 10⁴, δ = {DELTA:g}, default orders.")
    say()
    # Warm-up: compile the chunk shape once, so the sweeps below measure steady-state throughput.
    q, s = random_dpsgd(SWEEP_CHUNK, rng)
    compile_s, _ = timed(lambda: np.asarray(jaxpriv.dpsgd_epsilon(q, s, STEPS, DELTA, chunk_size=SWEEP_CHUNK,
                                                                  progress=False)))
    del q, s
    gc.collect()
    resettable = reset_peak_rss()
    runs = []
    for n in sizes:
        gc.collect()
        q, s = random_dpsgd(n, rng)
        before = rss_mib()
        if resettable:
            reset_peak_rss()
        wall, eps = timed(lambda: np.asarray(jaxpriv.dpsgd_epsilon(q, s, STEPS, DELTA, chunk_size=SWEEP_CHUNK,
                                                                   progress=True)))
        after = rss_mib()
        io_mib = 3 * n * 8 / 2**20  # q, σ in, ε out (float64)
        runs.append({
            "n": n, "chunks": -(-n // SWEEP_CHUNK), "wall_s": wall, "configs_per_s": n / wall,
            "rss_before_mib": before["current"], "rss_after_mib": after["current"],
            "peak_rss_during_mib": after["peak"] if resettable else None,
            "peak_rss_process_mib": after["peak"], "io_arrays_mib": io_mib,
            "all_finite": bool(np.all(np.isfinite(eps))), "eps_range": [float(eps.min()), float(eps.max())],
        })
        del q, s, eps
        gc.collect()
    peak_key = "peak_rss_during_mib" if resettable else "peak_rss_process_mib"
    rows = [[f"{r['n']:,}", f"{r['chunks']:,}", f"{r['wall_s']:.3g}", f"{r['configs_per_s']:,.0f}",
             fmt(r["rss_before_mib"]), fmt(r[peak_key]), fmt(r["rss_after_mib"]), f"{r['io_arrays_mib']:.3g}",
             "yes" if r["all_finite"] else "**NO**"] for r in runs]
    say(table(["N", "chunks", "wall (s)", "configs/s", "RSS before (MiB)",
               "peak RSS during sweep (MiB)" if resettable else "peak RSS of process (MiB)",
               "RSS after (MiB)", "q, σ, ε arrays (MiB)", "all ε finite"], rows))
    say()
    growth = runs[-1][peak_key] - runs[0][peak_key]
    io_growth = runs[-1]["io_arrays_mib"] - runs[0]["io_arrays_mib"]
    say(f"First call at the chunk shape (compile for a new batch size + one chunk; not in the sweeps' "
        f"times): {compile_s:.3g} s. "
        f"Peak RSS grows by {growth:.0f} MiB from N = {runs[0]['n']:,} to N = {runs[-1]['n']:,} "
        f"(the q, σ, ε arrays alone grow by {io_growth:.0f} MiB; everything per chunk is fixed-size). "
        + ("Peak = the kernel's peak-RSS mark, reset (/proc/self/clear_refs) before each sweep."
           if resettable else "Peak = ru_maxrss of the whole process (not resettable here)."))
    say()
    return {"chunk_size": SWEEP_CHUNK, "compile_s": compile_s, "peak_resettable": resettable, "runs": runs,
            "peak_growth_mib": growth, "io_growth_mib": io_growth}


# --------------------------------------------------------------------------------------------------
# 4. the PLD accountant, side by side with dp_accounting's
# --------------------------------------------------------------------------------------------------

PLD_H = 1e-4  # loss-grid spacing for both libraries (dp_accounting's value_discretization_interval)
PLD_REFERENCE = [  # (q, σ, T, δ)
    (0.01, 1.1, 10_000, 1e-5),
    (3.4e-4, 1.06, 5371, 6.3e-8),
    (1.8e-3, 2.70, 103, 1.9e-5),
]
PLD_T_RANGE = (100, 10_000)
PLD_SPEED_T = 1000
PLD_CAL_TARGET = 3.0
PLD_CAL_BOUNDS = (0.5, 5.0)
PLD_RATIO_GOAL = 1.005


def jp_event(q, sigma, steps):
    return events.SelfComposed(events.PoissonSampled(q, events.Gaussian(sigma)), steps)


def dpa_event(q, sigma, steps):
    return dp_accounting.SelfComposedDpEvent(
        dp_accounting.PoissonSampledDpEvent(float(q), dp_accounting.GaussianDpEvent(float(sigma))), int(steps))


def dpa_pld_accountant():
    return PLDAccountant(dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE, value_discretization_interval=PLD_H)


def dpa_pld_pessimistic(q, sigma, steps, delta) -> float:
    accountant = dpa_pld_accountant()
    accountant.compose(dpa_event(q, sigma, steps))
    return float(accountant.get_epsilon(delta))


def dpa_pld_optimistic(q, sigma, steps, delta) -> float:
    """dp_accounting's optimistic estimate: privacy buckets rounded down (connect-the-dots has no optimistic
    variant in dp_accounting 0.6; asking for one falls back to this with a warning)."""
    pld = privacy_loss_distribution.from_gaussian_mechanism(
        float(sigma), pessimistic_estimate=False, value_discretization_interval=PLD_H, sampling_prob=float(q),
        use_connect_dots=False)
    return float(pld.self_compose(int(steps)).get_epsilon_for_delta(delta))


def dpa_rdp_epsilon(q, sigma, steps, delta) -> float:
    accountant = RdpAccountant()
    accountant.compose(dpa_event(q, sigma, steps))
    return float(accountant.get_epsilon(delta))


def bench_pld_reference() -> dict:
    say(f"## 4a. PLD tightness at reference events (h = {PLD_H:g}, add-or-remove-one)")
    say()
    rows, out = [], []
    for q, sigma, steps, delta in PLD_REFERENCE:
        e = jp_event(q, sigma, steps)
        t_int, (lo, up) = timed(lambda: tuple(float(x) for x in accounting.epsilon_interval(e, delta)))
        t_up, up_h = timed(lambda: float(accounting.epsilon(e, delta, accountant="pld")))
        rdp_jp = float(accounting.epsilon(e, delta, accountant="rdp"))
        t_pess, pess = timed(lambda: dpa_pld_pessimistic(q, sigma, steps, delta))
        t_opt, opt = timed(lambda: dpa_pld_optimistic(q, sigma, steps, delta))
        rdp_dpa = dpa_rdp_epsilon(q, sigma, steps, delta)
        r = {"q": q, "sigma": sigma, "steps": steps, "delta": delta, "jaxpriv_lower": lo, "jaxpriv_upper": up,
             "jaxpriv_interval_s": t_int, "jaxpriv_pld_upper_h": up_h, "jaxpriv_pld_upper_s": t_up,
             "jaxpriv_rdp": rdp_jp, "dpa_pessimistic": pess, "dpa_pessimistic_s": t_pess, "dpa_optimistic": opt,
             "dpa_optimistic_s": t_opt, "dpa_rdp": rdp_dpa,
             "ok": bool(np.isfinite([lo, up, up_h]).all() and lo <= up <= up_h * (1 + 1e-12) and opt <= up
                        and lo <= pess)}
        out.append(r)
        rows.append([f"{q:g}", f"{sigma:g}", f"{steps:g}", f"{delta:g}", f"[{lo:.6g}, {up:.6g}]",
                     f"{(up - lo) / up:.2%}", f"{up_h:.6g}", f"{pess:.6g}", f"{up_h / pess:.6f}", f"{opt:.6g}",
                     f"{rdp_jp:.4g} / {rdp_dpa:.4g}", f"{t_up:.3g} / {t_int:.3g} / {t_pess:.3g}",
                     "yes" if r["ok"] else "**NO**"])
    say(table(["q", "σ", "T", "δ", "jaxpriv [lower, upper]", "width", "jaxpriv epsilon(pld)", "dpa pessimistic",
               "ratio", "dpa optimistic", "RDP ε jaxpriv / dpa", "time (s): jp pld / jp interval / dpa",
               "lower ≤ dpa pess, upper ≥ dpa opt"], rows))
    say()
    say("jaxpriv [lower, upper] = `accounting.epsilon_interval(event, δ)` (the default grid, refined where the "
        f"interval is wider than {100 * pld_mod.INTERVAL_TOLERANCE:g}% of its upper end); jaxpriv epsilon(pld) = "
        "`accounting.epsilon(event, δ, accountant=\"pld\")` (the default grid: h from the spread of one step's "
        "loss, MATH §7.3); ratio = that / dp_accounting pessimistic (h = 1e-4). Times are single calls in this "
        "process (jaxpriv's include compilation of new shapes).")
    say()
    return {"rows": out, "ok": all(r["ok"] for r in out)}


def bench_pld_grid(n: int, rng) -> dict:
    q, sigma, steps = random_dpsgd(n, rng, PLD_T_RANGE)
    say(f"## 4b. PLD tightness on {n} random DP-SGD settings (δ = {DELTA:g}; jaxpriv's default grid, "
        f"dp_accounting at h = {PLD_H:g})")
    say()
    say(f"q log-uniform in [{Q_RANGE[0]:g}, {Q_RANGE[1]:g}], σ uniform in [{SIGMA_RANGE[0]:g}, {SIGMA_RANGE[1]:g}], "
        f"T log-uniform in [{PLD_T_RANGE[0]}, {PLD_T_RANGE[1]}] (rounded); seeded.")
    say()
    e = jp_event(q, sigma, steps)
    t_up, up = timed(lambda: np.asarray(accounting.epsilon(e, DELTA, accountant="pld", progress=False)))
    t_int, (lo, up_int) = timed(lambda: tuple(np.asarray(x) for x in accounting.epsilon_interval(e, DELTA,
                                                                                               progress=False)))
    pess, opt, t_dpa = np.empty(n), np.empty(n), np.empty(n)
    for i in range(n):
        t_dpa[i], pess[i] = timed(lambda: dpa_pld_pessimistic(q[i], sigma[i], steps[i], DELTA))
        opt[i] = dpa_pld_optimistic(q[i], sigma[i], steps[i], DELTA)
    ratio = up / pess
    ratio_int = up_int / pess
    width = (up_int - lo) / up_int
    finite = bool(np.isfinite(up).all() and np.isfinite(lo).all() and np.isfinite(up_int).all())
    above_opt = up >= opt
    below_pess = lo <= pess
    worst = int(np.argmax(ratio))
    out = {
        "n": n, "q": q.tolist(), "sigma": sigma.tolist(), "steps": steps.tolist(),
        "jaxpriv_upper": up.tolist(), "jaxpriv_interval_lower": lo.tolist(), "jaxpriv_interval_upper": up_int.tolist(),
        "dpa_pessimistic": pess.tolist(), "dpa_optimistic": opt.tolist(), "dpa_times_s": t_dpa.tolist(),
        "jaxpriv_upper_s": t_up, "jaxpriv_interval_s": t_int,
        "max_ratio": float(ratio.max()), "median_ratio": float(np.median(ratio)), "min_ratio": float(ratio.min()),
        "max_ratio_setting": {"q": float(q[worst]), "sigma": float(sigma[worst]), "steps": float(steps[worst]),
                              "eps_jaxpriv": float(up[worst]), "eps_dpa": float(pess[worst])},
        "max_ratio_interval_upper": float(ratio_int.max()), "median_ratio_interval_upper": float(np.median(ratio_int)),
        "width_median": float(np.median(width)), "width_max": float(width.max()),
        "width_max_setting": {"q": float(q[np.argmax(width)]), "sigma": float(sigma[np.argmax(width)]),
                              "steps": float(steps[np.argmax(width)])},
        "all_finite": finite, "upper_ge_dpa_optimistic": bool(above_opt.all()),
        "lower_le_dpa_pessimistic": bool(below_pess.all()),
        "violations": [{"q": float(q[i]), "sigma": float(sigma[i]), "steps": float(steps[i]), "lower": float(lo[i]),
                        "upper": float(up[i]), "dpa_pess": float(pess[i]), "dpa_opt": float(opt[i])}
                       for i in np.nonzero(~above_opt | ~below_pess)[0]],
    }
    out["ratio_ok"] = out["max_ratio"] <= PLD_RATIO_GOAL
    out["gaussian"] = gaussian = bench_pld_exact_gaussian(max(n // 4, 8), rng)
    rows = [
        ["jaxpriv epsilon(pld) / dpa pessimistic", f"{ratio.min():.6f}", f"{np.median(ratio):.6f}",
         f"**{ratio.max():.6f}**", f"≤ {PLD_RATIO_GOAL}: {'yes' if out['ratio_ok'] else '**NO**'}"],
        ["jaxpriv interval upper / dpa pessimistic", f"{ratio_int.min():.6f}", f"{np.median(ratio_int):.6f}",
         f"{ratio_int.max():.6f}", "–"],
        ["dpa optimistic / dpa pessimistic", f"{(opt / pess).min():.4f}", f"{np.median(opt / pess):.4f}",
         f"{(opt / pess).max():.4f}", "–"],
        ["jaxpriv interval width (upper − lower) / upper", f"{width.min():.2e}", f"{np.median(width):.2e}",
         f"{width.max():.2e}", "–"],
    ]
    say(table(["quantity", "min", "median", "max", "goal"], rows))
    say()
    say(f"Without subsampling (q = 1), T Gaussian steps are one Gaussian with σ/√T (MATH §2.1): on "
        f"{gaussian['n']} random (σ, T) the default upper end lies within {100 * (gaussian['max_ratio'] - 1):.3f}% above "
        f"the exact ε (goal ≤ {100 * (PLD_RATIO_GOAL - 1):.1f}%), and every interval brackets it: "
        f"{'yes' if gaussian['brackets'] else '**NO**'}.")
    say()
    say(f"Worst ratio at q = {q[worst]:.4g}, σ = {sigma[worst]:.4g}, T = {steps[worst]:.0f} "
        f"(ε {up[worst]:.6g} vs {pess[worst]:.6g}). Checks: all jaxpriv values finite: {'yes' if finite else '**NO**'}; "
        f"jaxpriv upper ≥ dpa optimistic: {int(above_opt.sum())}/{n}; jaxpriv lower ≤ dpa pessimistic: "
        f"{int(below_pess.sum())}/{n}. Times: jaxpriv epsilon(pld) {t_up:.3g} s, epsilon_interval {t_int:.3g} s "
        f"(one batched call each, compilation included); dp_accounting pessimistic {t_dpa.sum():.3g} s in a loop "
        f"(slowest {t_dpa.max():.3g} s at q = {q[t_dpa.argmax()]:.3g}, σ = {sigma[t_dpa.argmax()]:.3g}, "
        f"T = {steps[t_dpa.argmax()]:.0f}).")
    say()
    return out


def exact_gaussian_epsilon(mu: float, delta: float) -> float:
    """ε(δ) of μ-GDP (one Gaussian with sensitivity/σ = μ), by root finding on the closed-form δ(ε)."""
    from scipy import optimize, stats

    def gap(eps):
        return stats.norm.cdf(-eps / mu + mu / 2) - np.exp(eps) * stats.norm.cdf(-eps / mu - mu / 2) - delta

    return float(optimize.brentq(gap, 0.0, mu * mu / 2 + 12 * mu, xtol=1e-14, rtol=1e-13))


def bench_pld_exact_gaussian(n: int, rng) -> dict:
    """The default grid on T-fold Gaussians (q = 1), against the exact ε of one Gaussian with σ/√T."""
    steps = np.round(np.exp(rng.uniform(np.log(1), np.log(10_000), n)))
    mu = np.exp(rng.uniform(np.log(0.3), np.log(6.0), n))
    sigma = np.sqrt(steps) / mu
    e = events.SelfComposed(events.Gaussian(sigma), steps)
    up = np.asarray(accounting.epsilon(e, DELTA, accountant="pld", progress=False))
    lo, up_int = (np.asarray(x) for x in accounting.epsilon_interval(e, DELTA, progress=False))
    exact = np.array([exact_gaussian_epsilon(m, DELTA) for m in mu])
    ratio = up / exact
    return {"n": n, "mu": mu.tolist(), "steps": steps.tolist(), "upper": up.tolist(), "lower": lo.tolist(),
            "exact": exact.tolist(), "max_ratio": float(ratio.max()), "median_ratio": float(np.median(ratio)),
            "brackets": bool(np.all(lo <= exact * (1 + 1e-12)) and np.all(exact <= up)
                             and np.all(exact <= up_int)),
            "ok": bool(np.all(exact <= up) and ratio.max() <= PLD_RATIO_GOAL)}


def bench_pld_speed(n: int, rng, dpa_sample: int | None = None, like_for_like: bool = True) -> dict:
    q, sigma = random_dpsgd(n, rng)
    say(f"## 4c. PLD speed: ε of {n} settings (T = {PLD_SPEED_T}, δ = {DELTA:g})")
    say()
    say(f"q log-uniform in [{Q_RANGE[0]:g}, {Q_RANGE[1]:g}], σ uniform in [{SIGMA_RANGE[0]:g}, {SIGMA_RANGE[1]:g}], "
        f"T = {PLD_SPEED_T} fixed. jaxpriv at its default accuracy (what a user gets) and at h = {PLD_H:g} "
        "(like for like); dp_accounting at h = 1e-4, its default.")
    say()
    e = jp_event(q, sigma, PLD_SPEED_T)

    def call(accountant):
        return lambda: np.asarray(accounting.epsilon(e, DELTA, accountant=accountant, progress=False))

    timings, compiles = {}, []
    jax.monitoring.register_event_duration_secs_listener(
        lambda event, seconds, **_: compiles.append(seconds) if event.endswith("backend_compile_duration") else None)
    variants = (("default", accounting.PLD()), ("h", accounting.PLD(discretization=PLD_H)))[:2 if like_for_like else 1]
    first_compiles = {}
    for name, accountant in variants:
        jax.clear_caches()  # cold: nothing compiled by earlier sections is reused (no persistent cache either)
        gc.collect()
        before = len(compiles)
        cold, eps = timed(call(accountant))
        first_compiles[name] = (len(compiles) - before, float(sum(compiles[before:])))  # XLA compilations, seconds
        warm, eps2 = timed(call(accountant))
        timings[name] = (cold, warm, eps, eps2)
        gc.collect()
    # how many settings the default refines: first-grid intervals wider than its tolerance (untimed; only
    # intervals wider than 10% are refined in this call)
    lower, upper = (np.asarray(x) for x in accounting.epsilon_interval(e, DELTA, tolerance=0.1, progress=False))
    refined = int(np.sum(upper - lower > pld_mod.INTERVAL_TOLERANCE * upper))
    dpa_pld_pessimistic(0.01, 1.1, PLD_SPEED_T, DELTA)  # warm-up (imports, caches)
    # dp_accounting on every setting, or on a random sample of them (its total extrapolated from the mean)
    sample = np.arange(n) if not dpa_sample or dpa_sample >= n else np.sort(rng.choice(n, dpa_sample, replace=False))
    t_dpa, pess = np.empty(sample.size), np.empty(sample.size)
    for j, i in enumerate(sample):
        t_dpa[j], pess[j] = timed(lambda: dpa_pld_pessimistic(q[i], sigma[i], PLD_SPEED_T, DELTA))
    total = float(t_dpa.mean() * n)
    cold, warm, eps, eps2 = timings["default"]
    ratio = eps[sample] / pess
    q, sigma = q[sample], sigma[sample]
    slow = np.argsort(t_dpa)[::-1][:3]
    out = {
        "n": n, "steps": PLD_SPEED_T, "jaxpriv_cold_s": cold, "jaxpriv_warm_s": warm,
        "jaxpriv_cold_compilations": first_compiles["default"][0], "jaxpriv_cold_compile_s": first_compiles["default"][1],
        "jaxpriv_refined_settings": refined,
        "jaxpriv_warm_per_setting_s": warm / n, "jaxpriv_cold_per_setting_s": cold / n,
        "jaxpriv_h_cold_s": timings["h"][0] if like_for_like else None,
        "jaxpriv_h_warm_s": timings["h"][1] if like_for_like else None,
        "dpa_total_s": total, "dpa_per_setting_mean_s": total / n, "dpa_per_setting_median_s": float(np.median(t_dpa)),
        "dpa_slowest": [{"q": float(q[i]), "sigma": float(sigma[i]), "s": float(t_dpa[i])} for i in slow],
        "speedup_warm": total / warm, "speedup_cold": total / cold,
        # the two calls may run a program's quick and optimised forms (jaxpriv._tiers), which differ by rounding
        "repeat_max_rel_diff": float(np.max(np.abs(eps2 - eps) / eps)),
        "same_result_twice": bool(np.allclose(eps2, eps, rtol=1e-9, atol=0)),
        "all_finite": bool(np.isfinite(eps).all()),
        "max_ratio": float(ratio.max()), "median_ratio": float(np.median(ratio)),
        "max_ratio_setting": {"q": float(q[ratio.argmax()]), "sigma": float(sigma[ratio.argmax()])},
        "ratio_ok": bool(ratio.max() <= PLD_RATIO_GOAL),
    }
    loop = f"Python loop of {n}" if sample.size == n else f"{sample.size} of {n} timed, total extrapolated"
    out["dpa_timed"] = int(sample.size)
    rows = [[f"dp_accounting PLDAccountant (h = 1e-4), {loop}", "–", f"{total:.3g}",
             f"{1e3 * total / n:.3g} mean / {1e3 * np.median(t_dpa):.3g} median", "1×", "1×"]]
    for name, label in (("default", "accounting.epsilon(PLD()), default accuracy"),
                        ("h", f"accounting.epsilon(PLD({PLD_H:g}))"))[:len(timings)]:
        c, w = timings[name][:2]
        rows.append([f"jaxpriv {label}, {n} in one call", f"{c:.3g}", f"{w:.3g}", f"{1e3 * w / n:.3g}",
                     f"**{total / c:.2f}×**", f"{total / w:.2f}×"])
    say(table(["method", "cold: first call (s)", "warm: again (s)", "per setting warm (ms)",
               "speed-up, first call", "speed-up, warm"], rows))
    say()
    say(f"Cold = first call after `jax.clear_caches()` with no persistent cache (compilation included); warm = "
        f"the identical call again. ε ratio jaxpriv (default) / dp_accounting pessimistic on these settings: "
        f"median {np.median(ratio):.6f}, max {ratio.max():.6f} (goal ≤ {PLD_RATIO_GOAL}: "
        f"{'yes' if out['ratio_ok'] else '**NO**'}); all finite: {'yes' if out['all_finite'] else '**NO**'}; "
        f"the first call compiled {first_compiles['default'][0]} XLA programs ({first_compiles['default'][1]:.1f} s); "
        f"{refined} of the {n} settings were refined (their first-grid interval wider than "
        f"{pld_mod.INTERVAL_TOLERANCE:.0%}); "
        f"the same results cold and warm (to 1e-9 relative: the tiers' rounding; largest difference "
        f"{out['repeat_max_rel_diff']:.1e}): {'yes' if out['same_result_twice'] else '**NO**'}. Slowest "
        "dp_accounting settings: " + ", ".join(f"{t_dpa[i]:.3g} s (q = {q[i]:.3g}, σ = {sigma[i]:.3g})"
                                              for i in slow) + ".")
    say()
    return out


def bench_pld_calibration() -> dict:
    q, steps, delta, target = CAL_Q, STEPS, DELTA, PLD_CAL_TARGET
    say(f"## 4d. σ calibration to ε = {target:g} with PLD (q = {q:g}, T = 10⁴, δ = {delta:g}, h = {PLD_H:g})")
    say()
    evals = 0

    def make_dpa_event(s):
        nonlocal evals
        evals += 1
        return dpa_event(q, s, steps)

    t_dpa, s_dpa = timed(lambda: float(dp_accounting.calibrate_dp_mechanism(
        make_fresh_accountant=dpa_pld_accountant, make_event_from_param=make_dpa_event, target_epsilon=target,
        target_delta=delta, bracket_interval=dp_accounting.ExplicitBracketInterval(*PLD_CAL_BOUNDS), tol=1e-6)))
    out = {"target": target, "bounds": PLD_CAL_BOUNDS,
           "dp_accounting": {"sigma": s_dpa, "time_s": t_dpa, "epsilon_evals": evals,
                             "eps_dpa_at_sigma": dpa_pld_pessimistic(q, s_dpa, steps, delta)}}
    jp_cal = getattr(calibrate, "calibrate", None)
    if jp_cal is None:
        say("`jaxpriv.calibrate.calibrate` does not exist in this checkout: jaxpriv's side skipped.")
        say()
        out["jaxpriv"] = None
        out["ok"] = True
    else:
        make_event = lambda s: jp_event(q, s, steps)  # noqa: E731  (s: an array of σ)
        run = lambda: float(np.asarray(jp_cal(make_event, target, delta, bounds=PLD_CAL_BOUNDS, accountant="pld")))
        jax.clear_caches()
        gc.collect()
        cold, s_jp = timed(run)
        warm, s_jp2 = timed(run)
        eps_jp = float(accounting.epsilon(jp_event(q, s_jp, steps), delta, accountant="pld"))
        out["jaxpriv"] = {"sigma": s_jp, "sigma_warm": s_jp2, "cold_s": cold, "warm_s": warm, "eps_jaxpriv_at_sigma": eps_jp,
                          "eps_dpa_at_sigma": dpa_pld_pessimistic(q, s_jp, steps, delta)}
        out["ok"] = bool(eps_jp <= target)
    d, j = out["dp_accounting"], out["jaxpriv"]
    rows = [["dp_accounting.calibrate_dp_mechanism, PLDAccountant (Brent, tol 1e-6)", "–", f"{t_dpa:.3g}",
             f"{s_dpa:.7f}", "–", f"{d['eps_dpa_at_sigma']:.7g}", f"{evals} ε evals"]]
    if j is not None:
        rows.append(["jaxpriv calibrate.calibrate(accountant=\"pld\")", f"{j['cold_s']:.3g}", f"{j['warm_s']:.3g}",
                     f"{s_jp:.7f} ({s_jp / s_dpa - 1:+.2e})", f"{j['eps_jaxpriv_at_sigma']:.7g}",
                     f"{j['eps_dpa_at_sigma']:.7g}", f"ε ≤ {target:g}: {'yes' if out['ok'] else '**NO**'}"])
    say(table(["method", "cold (s)", "warm (s)", "σ (rel. to dpa)", "ε jaxpriv PLD at σ", "ε dpa PLD at σ", "note"],
              rows))
    say()
    say(f"Both search σ in [{PLD_CAL_BOUNDS[0]:g}, {PLD_CAL_BOUNDS[1]:g}]. jaxpriv: cold = first call after "
        "`jax.clear_caches()`, warm = the same call again; xtol 1e-6 relative. dp_accounting has nothing to "
        "compile (one run).")
    say()
    return out


def bench_pld(n_grid: int, n_speed: int, seed: int, dpa_sample: int | None = None) -> dict:
    """Section 4; the two random grids have their own streams (independent of the other sections and sizes)."""
    res = {"reference": bench_pld_reference()}
    gc.collect()
    res["grid"] = bench_pld_grid(n_grid, np.random.default_rng([seed, 4, 2]))
    gc.collect()
    res["speed"] = bench_pld_speed(n_speed, np.random.default_rng([seed, 4, 3]), dpa_sample)
    gc.collect()
    res["calibration"] = bench_pld_calibration()
    gc.collect()
    return res



# --------------------------------------------------------------------------------------------------
# main
# --------------------------------------------------------------------------------------------------


def summary(res: dict):
    rows, checks = [], {}
    if "sweep_1000" in res:
        rows, checks = summary_rdp(res)
    if "pld_speed" in res:
        sp = res["pld_speed"]
        rows.append([f"PLD ε, {sp['n']} settings (T = {sp['steps']}), default accuracy: first call / warm",
                     f"{sp['dpa_total_s']:.3g} s", f"{sp['jaxpriv_cold_s']:.3g} s / {sp['jaxpriv_warm_s']:.3g} s",
                     f"{sp['speedup_cold']:.1f}× / {sp['speedup_warm']:.1f}×"])
        checks.update({"PLD speed grid: ε finite": sp["all_finite"],
                       f"PLD speed grid: max ratio ≤ {PLD_RATIO_GOAL}": sp["ratio_ok"]})
    if "pld" in res:
        p = res["pld"]
        g, sp, cal = p["grid"], p["speed"], p["calibration"]
        rows += [
            [f"PLD ε, {sp['n']} settings (T = {sp['steps']}), default accuracy, warm", f"{sp['dpa_total_s']:.3g} s (loop)",
             f"{sp['jaxpriv_warm_s']:.3g} s (one call)", f"{sp['speedup_warm']:.2f}×"],
            [f"PLD ε, {sp['n']} settings, cold (compilation included)", f"{sp['dpa_total_s']:.3g} s",
             f"{sp['jaxpriv_cold_s']:.3g} s", f"{sp['speedup_cold']:.2f}×"],
            [f"PLD tightness, {g['n']} random settings: max ε ratio jaxpriv / dpa pessimistic", "1",
             f"{g['max_ratio']:.6f}", "–"],
        ]
        if cal["jaxpriv"] is not None:
            j = cal["jaxpriv"]
            rows.append([f"σ calibration to ε = {cal['target']:g}, PLD", f"{cal['dp_accounting']['time_s']:.3g} s "
                         f"(σ {cal['dp_accounting']['sigma']:.6f})",
                         f"{j['warm_s']:.3g} s warm / {j['cold_s']:.3g} s cold (σ {j['sigma']:.6f})",
                         f"{cal['dp_accounting']['time_s'] / j['warm_s']:.2f}×"])
        checks.update({
            "PLD reference events: lower ≤ dpa pess, upper ≥ dpa opt": p["reference"]["ok"],
            "PLD grid: ε finite": g["all_finite"],
            f"PLD grid: max ratio ≤ {PLD_RATIO_GOAL}": g["ratio_ok"],
            "PLD grid: upper ≥ dpa optimistic": g["upper_ge_dpa_optimistic"],
            "PLD grid: lower ≤ dpa pessimistic": g["lower_le_dpa_pessimistic"],
            "PLD grid: q = 1 upper ≥ exact T-fold Gaussian, ≤ 1.005×": g["gaussian"]["ok"],
            "PLD grid: q = 1 intervals bracket the exact ε": g["gaussian"]["brackets"],
            "PLD speed grid: ε finite": sp["all_finite"],
            f"PLD speed grid: max ratio ≤ {PLD_RATIO_GOAL}": sp["ratio_ok"],
            "PLD speed: first call ≥ 10× dp_accounting's loop (CPU goal)": sp["speedup_cold"] >= 10.0,
            "PLD calibration: ε(σ) ≤ target": cal["ok"],
        })
    say("## Summary")
    say()
    say(table(["measurement", "dp_accounting", "jaxpriv", "ratio"], rows))
    say()
    say("Checks: " + ", ".join(f"{k}: {'ok' if v else 'FAILED'}" for k, v in checks.items()))
    return checks


def summary_rdp(res: dict):
    s1, s2, s3 = res["sweep_1000"], res["calibration"], res["big_sweep"]
    like = s1["jaxpriv"]["dp_accounting"]
    rows = [
        ["1000-config ε sweep, same 156 orders", f"{s1['dp_accounting']['extrapolated_total_s']:.3g} s",
         f"{like['median_s']:.3g} s (+{like['first_call_s']:.3g} s compile)", f"{like['speedup']:.1f}×"],
        ["1000-config ε sweep, jaxpriv default orders", f"{s1['dp_accounting']['extrapolated_total_s']:.3g} s",
         f"{s1['jaxpriv']['default']['median_s']:.3g} s", f"{s1['jaxpriv']['default']['speedup']:.1f}×"],
        ["σ calibration, per target (vectorised)", f"{s2['dp_accounting']['per_target_mean_s']:.3g} s",
         f"{s2['jaxpriv_vectorised']['per_target_s']:.3g} s", f"{s2['jaxpriv_vectorised']['speedup_per_target']:.1f}×"],
        ["σ calibration, one target per call", f"{s2['dp_accounting']['per_target_mean_s']:.3g} s",
         f"{s2['jaxpriv_single']['median_s']:.3g} s", f"{s2['jaxpriv_single']['speedup_per_target']:.1f}×"],
        [f"sweep throughput (N = {s3['runs'][-1]['n']:,})", f"{1 / s1['dp_accounting']['per_config_mean_s']:,.0f} configs/s",
         f"{s3['runs'][-1]['configs_per_s']:,.0f} configs/s",
         f"{s3['runs'][-1]['configs_per_s'] * s1['dp_accounting']['per_config_mean_s']:.1f}×"],
    ]
    checks = {
        "ε_jp ≤ ε_dpa (156 orders)": like["agrees_upper_bound"],
        "ε_jp ≤ ε_dpa (default orders)": s1["jaxpriv"]["default"]["agrees_upper_bound"],
        **{k: v for k, v in s2["checks"].items()},
        "sweep ε finite": all(r["all_finite"] for r in s3["runs"]),
    }
    return rows, checks


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer configs, targets and PLD settings (~3 min for sections 1–3 plus ~4 min for section 4 on 2 CPU cores)")
    parser.add_argument("--big", action="store_true", help="large sweep of 10⁶ and 10⁷ configurations (long)")
    parser.add_argument("--json", metavar="OUT", help="write all results to this JSON file")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dpa-configs", type=int, help="dp_accounting configs timed in the 1000-point sweep (default 100, 30 with --quick)")
    parser.add_argument("--sweep-sizes", type=int, nargs=2, metavar=("SMALL", "LARGE"),
                        help="sizes of the two large sweeps (overrides --quick/--big)")
    parser.add_argument("--repeats", type=int, help="timed jaxpriv calls per measurement (≥ 7 recommended)")
    parser.add_argument("--sections", choices=("all", "rdp", "pld", "pld-speed"), default="all",
                        help="rdp: sections 1–3; pld: section 4 (PLD vs dp_accounting's PLD); pld-speed: 4c alone, "
                             "at the default accuracy only; all: 1–4")
    parser.add_argument("--pld-grid", type=int, help="random settings in the PLD tightness grid (default 100, 12 with --quick)")
    parser.add_argument("--pld-speed", type=int, help="settings in the PLD speed comparison (default 1000, 24 with --quick)")
    parser.add_argument("--dpa-sample", type=int, help="time dp_accounting's PLD on this many of the speed comparison's "
                                                       "settings and extrapolate its total (default: all of them)")
    args = parser.parse_args(argv)

    quick = args.quick
    mode = "quick" if quick else "full"
    n_subset = args.dpa_configs or (30 if quick else 100)
    repeats = args.repeats or 7
    targets = np.geomspace(0.5, 8.0, 3 if quick else 8)
    if args.sweep_sizes:
        sizes = list(args.sweep_sizes)
    elif args.big:
        sizes, mode = [10**6, 10**7], mode + " + big"
    else:
        sizes = [10**4, 10**5] if quick else [10**5, 10**6]
    rng = np.random.default_rng(args.seed)

    t_start = time.perf_counter()
    info = machine_info()
    print_header(info, mode)
    results = {"machine": info, "mode": mode, "seed": args.seed, "repeats": repeats, "sections": args.sections}
    if args.sections in ("all", "rdp"):
        results["sweep_1000"] = bench_sweep_1000(n_subset, repeats, rng)
        gc.collect()
        results["calibration"] = bench_calibration(targets, repeats, like_for_like=not quick,
                                                   eps_batch=results["sweep_1000"]["grid"]["n"])
        gc.collect()
        results["big_sweep"] = bench_big_sweep(sizes, rng)
        gc.collect()
    if args.sections == "pld-speed":
        results["pld_speed"] = bench_pld_speed(args.pld_speed or (24 if quick else 1000),
                                               np.random.default_rng([args.seed, 4, 3]), args.dpa_sample, like_for_like=False)
    if args.sections in ("all", "pld"):
        if args.dpa_sample is not None and args.dpa_sample < 1:
            parser.error(f"--dpa-sample must be an integer ≥ 1, got {args.dpa_sample}")
        results["pld"] = bench_pld(args.pld_grid or (12 if quick else 100), args.pld_speed or (24 if quick else 1000),
                                   args.seed, args.dpa_sample)
        gc.collect()
    results["checks"] = summary(results)
    return common.finish(results, results["checks"], t_start, args.json)


if __name__ == "__main__":
    sys.exit(main())
