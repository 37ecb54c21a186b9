"""Shuffle-amplification benchmark: jaxpriv's exact clone bound vs a plain numpy/scipy sum, in one process.

    python bench/shuffle.py [--quick] [--json OUT]

Both sides evaluate the same quantity, the exact δ(ε) of the FMT22 clone dominating pair (MATH §3.1,
c = e^{−ε₀}), and its inverse ε(δ):

* **plain numpy/scipy**: Σ_{C=0}^{n−1} Pr[C] (α Pr[B_C ≥ a*−1] − β Pr[B_C ≥ a*]) over *every* C, vectorised
  (``scipy.stats.binom.pmf``/``sf`` on arrays of length n); ε(δ) by ``scipy.optimize.brentq`` on
  δ(ε) − δ on [0, ε₀] (xtol 1e-12, rtol 1e-10), i.e. a good root finder, not bisection.
* **jaxpriv**: ``jaxpriv.shuffle.clones_delta`` / ``clones_epsilon`` (windowed sum with the dropped mass
  added, float64, jit-compiled). First call (trace + compile) reported separately, then the median.

At n = 10⁴, 10⁵ and 10⁶ (ε₀ = 1, δ = 1e-8). With ``--quick`` the plain sum is timed at 10⁴ and 10⁵ only
(its ε(δ) at 10⁶ takes tens of seconds); jaxpriv still runs at 10⁶. Then a batch of 64 (ε₀, δ)
configurations at n = 10⁵ in one call; APES Theorem 4 (``apes_theorem4``, S in O(n log n)) against the
direct O(n²) numpy double sum for S at n = 10⁴ and alone at 10⁶ and 10⁷; and each user's own central ε
(``personalized_epsilon(per_user=True)``) for 10⁵ users with continuous budgets, at the default grid and a
coarser one. Finally the multinomial TV bound of GSPA / E-APES (``lattice_gaussian_tv``, MATH §3.3): the
jitted JAX kernels against the previous numpy/scipy evaluation (kept below as the anchor), cold and warm,
at n = 10³, 10⁴, 10⁵ (``--quick``: 10³, 10⁴). Many rounds: the exact pair composed by the PLD accountant
beside the RDP accountant (uniform ε₀ = 1, n = 10⁶, T = 1000), per-user ε after 100 rounds for 10⁵ users
(``--quick``: 10⁴), and every composition at the seeds' settings for T = 10, 100, 1000. Prints markdown tables and, with ``--json OUT``, writes every number to OUT; exits with
status 1 if a check fails.
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
from _common import first_and_repeats, ms, say, table, timed  # noqa: E402

import jax  # noqa: E402
import scipy  # noqa: E402
from scipy import optimize, stats  # noqa: E402

from jaxpriv.shuffle import apes_echo_sum, apes_theorem4, clones_delta, clones_epsilon, personalized_epsilon  # noqa: E402
from jaxpriv.shuffle import multinomial  # noqa: E402
from jaxpriv.shuffle.poisson_binomial import poisson_binomial_logpmf  # noqa: E402

EPS0 = 1.0
DELTA = 1e-8
SIZES = [10_000, 100_000, 1_000_000]
REFERENCE = {1_000: 0.230556, 10_000: 0.068880}  # shared/reference/README.md (ε₀ = 1, δ = 1e-8)


# --------------------------------------------------------------------------------------------------
# the plain numpy/scipy implementation (every C, no window)
# --------------------------------------------------------------------------------------------------


def scipy_delta(eps0: float, n: int, eps: float) -> float:
    if eps >= eps0:
        return 0.0
    alpha = np.exp(eps) * np.expm1(eps0 - eps) / (1.0 + np.exp(eps0))
    beta = np.expm1(eps + eps0) / (1.0 + np.exp(eps0))
    t = beta / alpha
    c = np.arange(n)
    a_star = np.floor(t * (c + 1) / (1 + t)) + 1
    inner = alpha * stats.binom.sf(a_star - 2, c, 0.5) - beta * stats.binom.sf(a_star - 1, c, 0.5)
    return float(np.sum(stats.binom.pmf(c, n - 1, np.exp(-eps0)) * inner))


def scipy_epsilon(eps0: float, n: int, delta: float) -> tuple[float, int]:
    """(ε, number of δ evaluations): brentq on δ(ε) − δ over [0, ε₀]."""
    calls = 0

    def gap(eps):
        nonlocal calls
        calls += 1
        return scipy_delta(eps0, n, eps) - delta

    if gap(0.0) <= 0:
        return 0.0, calls
    return float(optimize.brentq(gap, 0.0, eps0, xtol=1e-12, rtol=1e-10)), calls


# --------------------------------------------------------------------------------------------------
# helpers (same conventions as bench/accounting.py)
# --------------------------------------------------------------------------------------------------










def machine_info() -> dict:
    return common.machine_info(
        {
            "jax": jax.__version__,
            "jaxlib": importlib.metadata.version("jaxlib"),
            "numpy": np.__version__,
            "scipy": scipy.__version__,
            "jaxpriv": jaxpriv.__version__,
        },
        os.path.dirname(os.path.abspath(jaxpriv.__file__)),
    )


def print_header(info: dict, mode: str):
    common.print_header(info, mode, 'jaxpriv vs numpy/scipy: exact shuffle amplification (clone dominating pair)',
                        'Timings are wall-clock (time.perf_counter); jaxpriv results are numpy arrays (computation finished). On a loaded machine they are noisy: read the medians.')


# --------------------------------------------------------------------------------------------------
# measurements
# --------------------------------------------------------------------------------------------------


def bench_size(n: int, repeats: int, with_scipy: bool) -> dict:
    out = {"n": n, "eps0": EPS0, "delta": DELTA}
    f_eps, t_eps, eps = first_and_repeats(lambda: float(clones_epsilon(EPS0, n, DELTA)), repeats)
    f_del, t_del, d_at = first_and_repeats(lambda: float(clones_delta(EPS0, n, eps)), repeats)
    out["jaxpriv"] = {
        "epsilon": eps, "delta_at_epsilon": d_at,
        "epsilon_first_call_s": f_eps, "epsilon_times_s": t_eps, "epsilon_median_s": float(np.median(t_eps)),
        "delta_first_call_s": f_del, "delta_times_s": t_del, "delta_median_s": float(np.median(t_del)),
    }
    out["jaxpriv"]["epsilon_compile_s"] = f_eps - out["jaxpriv"]["epsilon_median_s"]
    out["jaxpriv"]["delta_compile_s"] = f_del - out["jaxpriv"]["delta_median_s"]
    if with_scipy:
        reps = 3 if n >= 10**6 else 5
        d_times = []
        for _ in range(reps):
            t, d_sp = timed(lambda: scipy_delta(EPS0, n, eps))
            d_times.append(t)
        t_eps_sp, (eps_sp, calls) = timed(lambda: scipy_epsilon(EPS0, n, DELTA))
        out["scipy"] = {"delta_at_jaxpriv_epsilon": d_sp, "delta_times_s": d_times,
                        "delta_median_s": float(np.median(d_times)),
                        "epsilon": eps_sp, "epsilon_s": t_eps_sp, "epsilon_delta_evals": calls}
        out["agreement"] = {
            "delta_rel_diff": (d_at - d_sp) / d_sp,
            "epsilon_rel_diff": (eps - eps_sp) / eps_sp,
        }
        out["ratio"] = {
            "delta": out["scipy"]["delta_median_s"] / out["jaxpriv"]["delta_median_s"],
            "epsilon": t_eps_sp / out["jaxpriv"]["epsilon_median_s"],
        }
    out["checks"] = {"delta_at_epsilon_le_target": d_at <= DELTA}
    if with_scipy:
        out["checks"]["delta_agrees_1e-8"] = abs(out["agreement"]["delta_rel_diff"]) <= 1e-8
        # brentq stops within ~1e-10 of its root; the scipy δ itself is good to ~1e-12 here
        out["checks"]["epsilon_agrees_1e-6"] = abs(out["agreement"]["epsilon_rel_diff"]) <= 1e-6
    if n in REFERENCE:
        out["checks"]["reference_value"] = round(eps, 6) == REFERENCE[n]
    return out


def bench_batch(repeats: int) -> dict:
    n = 100_000
    eps0 = np.geomspace(0.1, 4.0, 8)[:, None]
    delta = np.geomspace(1e-12, 1e-5, 8)[None, :]
    first, times, eps = first_and_repeats(lambda: np.asarray(clones_epsilon(eps0, n, delta)), repeats)
    achieved = np.asarray(clones_delta(eps0, n, eps))
    return {"n": n, "configs": int(eps.size), "first_call_s": first, "times_s": times,
            "median_s": float(np.median(times)), "per_config_s": float(np.median(times)) / eps.size,
            "checks": {"all_delta_le_target": bool(np.all(achieved <= delta))}}


def numpy_echo_sum(eps: np.ndarray) -> float:
    """S = Σ_{i≠t} Σ_j p_ij / n straight from the matrix p_ij (O(n²)), worst target t = the largest row."""
    one_minus = -np.expm1(-eps)
    rows = np.empty(eps.size)
    for start in range(0, eps.size, 1000):  # 1000 rows at a time: bounded memory
        e_i = eps[start:start + 1000, None]
        p = (e_i / eps) * (one_minus / -np.expm1(-e_i)) * np.exp(-np.maximum(e_i, eps))
        rows[start:start + 1000] = p.sum(axis=1)
    return float((rows.sum() - rows.max()) / eps.size)


def bench_apes(repeats: int, quick: bool) -> dict:
    rng = np.random.default_rng(0)
    out = {"delta_s": DELTA, "sizes": []}
    for n in [10_000, 1_000_000] + ([] if quick else [10_000_000]):
        eps = rng.uniform(0.05, 1.0, n)
        first, times, (eps_c, delta_c) = first_and_repeats(lambda: apes_theorem4(eps, DELTA), repeats)
        row = {"n": n, "first_call_s": first, "median_s": float(np.median(times)), "times_s": times,
               "eps_c": float(eps_c), "delta_c": float(delta_c)}
        if n == 10_000:
            t_np, s_np = timed(lambda: numpy_echo_sum(eps))
            s_jp = float(apes_echo_sum(eps))
            row.update({"numpy_s": t_np, "numpy_S": s_np, "jaxpriv_S": s_jp,
                        "ratio": t_np / row["median_s"], "S_rel_diff": (s_jp - s_np) / s_np})
        out["sizes"].append(row)
    big = [r for r in out["sizes"] if r["n"] >= 10**6]
    out["checks"] = {"apes_1e6_under_1s": all(r["median_s"] < 1.0 for r in big if r["n"] == 10**6),
                     # S is rounded down by (2n + 32) ulp (its summation-error bound), never up
                     "S_within_its_rounding_bound_and_not_above": all(
                         -(2 * r["n"] + 64) * np.finfo(float).eps <= r["S_rel_diff"] <= 0
                         for r in out["sizes"] if "S_rel_diff" in r)}
    return out


def bench_per_user(quick: bool) -> dict:
    n = 10_000 if quick else 100_000
    eps = np.random.default_rng(1).uniform(0.05, 1.0, n)
    out = {"n": n, "delta": DELTA, "runs": []}
    for grid in [1e-3, 1e-2]:
        def run():
            return personalized_epsilon(eps, DELTA, per_user=True, grid_rtol=grid)

        first, _ = timed(run)
        t, per_user = timed(run)
        worst = float(personalized_epsilon(eps, DELTA))
        out["runs"].append({"grid_rtol": grid, "first_call_s": first, "second_call_s": t,
                            "min": float(per_user.min()), "median": float(np.median(per_user)),
                            "max": float(per_user.max()), "worst_case": worst,
                            "max_le_worst_case": bool(per_user.max() <= worst * (1 + 1e-9))})
    # Only the default grid is compared with the (unbinned) worst case: a coarser grid rounds budgets up
    # further, so its per-user values may exceed it, which is the safe direction.
    out["checks"] = {"default grid: per-user ≤ worst case": out["runs"][0]["max_le_worst_case"]}
    return out


def bench_rounds(repeats: int, quick: bool) -> dict:
    """Many rounds: the exact pair composed by PLD (uniform ε₀ = 1 at n = 10⁶, T = 1000; per-user ε for 10⁵
    continuous budgets, T = 100) with the RDP accountant (Girgis et al.) beside it, and every composition
    at the seeds' settings for T = 10, 100, 1000."""
    from jaxpriv import accounting, events
    from jaxpriv.calibrate.shuffle_rounds import rounds_epsilon, rounds_summary

    out = {}
    uniform = events.SelfComposed(events.Shuffled(1.0, n=1_000_000), 1000)
    runs = {}
    for name in ("pld", "rdp"):
        first, times, value = first_and_repeats(lambda: accounting.epsilon(uniform, DELTA, accountant=name), repeats)
        runs[name] = {"first_call_s": first, "median_s": float(np.median(times)), "epsilon": float(value)}
    out["uniform"] = {"n": 1_000_000, "rounds": 1000, "delta": DELTA, **runs}
    n = 10_000 if quick else 100_000
    eps = np.random.default_rng(1).uniform(0.05, 1.0, n)
    first, per_user = timed(lambda: rounds_epsilon(eps, DELTA, 100, per_user=True, progress=False))
    second, _ = timed(lambda: rounds_epsilon(eps, DELTA, 100, per_user=True, progress=False))
    worst = float(rounds_epsilon(eps, DELTA, 100))
    out["per_user"] = {"n": n, "rounds": 100, "first_call_s": first, "second_call_s": second,
                       "min": float(per_user.min()), "median": float(np.median(per_user)), "max": float(per_user.max()),
                       "worst_case": worst}
    settings = {"APES Table 3: n = 10⁴, ε_i evenly in [0.05, 1], δ = 1e-8": (np.linspace(0.05, 1.0, 10_000), 1e-8),
                "GSPA: uniform ε₀ = 1, n = 10⁴, δ = 1e-6": (np.ones(10_000), 1e-6)}
    out["gains"] = {name: {k: {"epsilon": v["epsilon"].tolist(), "kind": v["kind"]}
                           for k, v in rounds_summary(e, d, [1, 10, 100, 1000]).items()}
                    for name, (e, d) in settings.items()}
    out["checks"] = {"uniform n=1e6, T=1000 under 2 s warm": runs["pld"]["median_s"] < 2.0,
                     "PLD below RDP": runs["pld"]["epsilon"] < runs["rdp"]["epsilon"],
                     "per-user ≤ worst case": out["per_user"]["max"] <= worst * (1 + 1e-9),
                     f"per-user {n:,} users under 30 s": first < 30.0}
    return out


def report_rounds(res: dict):
    u = res["uniform"]
    say(f"## Many rounds: the exact pair composed by PLD (ε₀ = 1, n = {u['n']:,}, T = {u['rounds']:,}, δ = {u['delta']:g})")
    say()
    say(table(["accountant", "ε", "first call", "median"],
              [[name, f"{u[name]['epsilon']:.5f}", ms(u[name]["first_call_s"]), ms(u[name]["median_s"])]
               for name in ("pld", "rdp")]))
    say()
    p = res["per_user"]
    say(f"Per-user ε after T = {p['rounds']} rounds for {p['n']:,} users with budgets U[0.05, 1] (GSPA model, "
        f"at most 128 target budgets, each user's rounded up): first call {ms(p['first_call_s'])}, second "
        f"{ms(p['second_call_s'])}; ε from {p['min']:.4f} (median {p['median']:.4f}) to {p['max']:.4f}, "
        f"worst case {p['worst_case']:.4f}.")
    say()
    for name, rows in res["gains"].items():
        say(f"### {name}")
        say()
        say(table(["method", "T = 1", "T = 10", "T = 100", "T = 1000", "kind"],
                  [[k, *[f"{x:.4g}" for x in v["epsilon"]], v["kind"]] for k, v in rows.items()]))
        say()


def report_apes_and_per_user(apes: dict, per_user: dict):
    say(f"## APES Theorem 4 (uniform budgets in [0.05, 1], δ_s = {apes['delta_s']:g})")
    say()
    rows = []
    for r in apes["sizes"]:
        rows.append([f"{r['n']:,}", f"{r['eps_c']:.6f}", ms(r["first_call_s"]), ms(r["median_s"]),
                     ms(r["numpy_s"]) if "numpy_s" in r else "–",
                     f"**{r['ratio']:,.0f}×**" if "ratio" in r else "–",
                     f"{r['S_rel_diff']:.1e}" if "S_rel_diff" in r else "–"])
    say(table(["n", "ε^c", "jaxpriv first call", "jaxpriv median", "numpy O(n²) echo sum S", "ratio",
               "(S_jp − S_np)/S_np"], rows))
    say()
    say("The numpy column computes only the echo sum S from the n×n matrix p_ij (the rest of Theorem 4 is "
        "a closed form); at 10⁶ it would take ~10⁴× longer, so it runs at 10⁴ only. jaxpriv's S is rounded "
        "down by its summation-error bound, hence the small negative difference.")
    say()
    say(f"## Per-user central ε, {per_user['n']:,} users with continuous budgets U[0.05, 1], δ = {per_user['delta']:g}")
    say()
    rows = [[f"{r['grid_rtol']:g}", ms(r["first_call_s"]), ms(r["second_call_s"]), f"{r['min']:.5f}",
             f"{r['median']:.5f}", f"{r['max']:.5f}", f"{r['worst_case']:.5f}"] for r in per_user["runs"]]
    say(table(["grid_rtol", "first call", "second call", "min ε_t", "median ε_t", "max ε_t",
               "worst-case ε (all users)"], rows))
    say()
    say("Budgets are rounded up to a geometric grid of relative step grid_rtol (safe side) when there are "
        "more distinct values than `max_groups`; a coarser grid is faster and slightly more conservative.")
    say()


# --------------------------------------------------------------------------------------------------
# multinomial TV bound (GSPA / E-APES): the previous numpy/scipy path vs the jitted JAX kernels
# --------------------------------------------------------------------------------------------------


def numpy_lattice_tv(p: np.ndarray) -> tuple[float, float]:
    """(τ, ½Σ|P − Q|) the way jaxpriv computed it before the JAX port: the same window, count law and
    quadrature order, with P from scipy's binomial log-pmf on the full W × W grid and Q by a numpy
    Gauss–Legendre rule with scipy's ndtr (both tails evaluated, the non-cancelling one kept)."""
    from scipy.special import ndtr

    law_c = poisson_binomial_logpmf(p)
    c_off, log_c = law_c.lo, law_c.logpmf
    c_max = c_off + log_c.size - 1
    mean, var = p.sum() / 2, float(np.sum(p / 2 * (1 - p / 2)))
    t = multinomial._bernstein_radius(var, multinomial._WINDOW_TAIL)
    lo, hi = max(0, int(np.floor(mean - t))), min(c_max, int(np.ceil(mean + t)))
    outside = law_c.dropped + (2 * multinomial._WINDOW_TAIL if lo > 0 or hi < c_max else 0.0)
    x = np.arange(lo, hi + 1)
    c = x[:, None] + x[None, :]
    inside = (c >= c_off) & (c <= c_max)
    cc = np.where(inside, c, c_off)
    with np.errstate(divide="ignore"):
        pk = np.where(inside, np.exp(log_c[cc - c_off] + stats.binom.logpmf(x[:, None], cc, 0.5)), 0.0)
    g = multinomial._matched_gaussian(p)
    order, per = multinomial._quad_order(g, 1.0, 1.0, x.size**2, 1e-13)
    nodes, weights = np.polynomial.legendre.leggauss(order)
    edges = x - 0.5
    q = np.empty_like(pk)
    for start in range(0, x.size, 64):
        u = edges[start:start + 64, None] + 0.5 * (nodes[None, :] + 1)
        w = 0.5 * weights[None, :] * np.exp(-0.5 * ((u - g.mean) / g.sd) ** 2) / (g.sd * np.sqrt(2 * np.pi))
        cm = g.mean + g.slope * (u - g.mean)
        a, b = (edges[None, None, :] - cm[:, :, None]) / g.cond_sd, (edges[None, None, :] + 1 - cm[:, :, None]) / g.cond_sd
        q[start:start + 64] = np.einsum("ig,igj->ij", w, np.where(a > 0, ndtr(-a) - ndtr(-b), ndtr(b) - ndtr(a)))
    body = 0.5 * float(np.abs(pk - q).sum())
    err = per * x.size**2 + multinomial._rounding_allowance(g, 1.0, float(q.sum()), x.size**2) + (4 * p.size + 64) * np.finfo(float).eps
    return min(1.0, body + 0.5 * outside + 0.5 * max(0.0, 1 - float(q.sum())) + err), body


def bench_multinomial(repeats: int, quick: bool) -> dict:
    out = {"sizes": []}
    for n in [1_000, 10_000] + ([] if quick else [100_000]):
        p = np.full(n - 1, float(multinomial.clone_probabilities(1.0)))  # ε_i = 1, δ_i = 0
        reps = 3 if n >= 100_000 else repeats
        f_jx, t_jx, (tau, parts) = first_and_repeats(lambda: multinomial.lattice_gaussian_tv(p, return_parts=True), reps)
        f_np, t_np, (tau_np, body_np) = first_and_repeats(lambda: numpy_lattice_tv(p), min(reps, 3))
        out["sizes"].append({
            "n": n, "window": parts["window"][1], "tau_jax": float(tau), "tau_numpy": tau_np,
            "body_diff": parts["half_abs_sum"] - body_np, "tau_diff": float(tau) - tau_np,
            "jax_first_call_s": f_jx, "jax_median_s": float(np.median(t_jx)),
            "numpy_first_call_s": f_np, "numpy_median_s": float(np.median(t_np)),
            "ratio_cold": f_np / f_jx, "ratio_warm": float(np.median(t_np)) / float(np.median(t_jx)),
        })
    out["checks"] = {
        # same quantity up to rounding; the JAX τ adds a summation allowance (≤ 1e-12 here) on top
        "TV sums agree to 1e-12": all(abs(r["body_diff"]) <= 1e-12 for r in out["sizes"]),
        "JAX τ ≥ numpy τ, within 1e-11": all(0 <= r["tau_diff"] <= 1e-11 for r in out["sizes"]),
    }
    return out


def report_multinomial(res: dict):
    say("## Multinomial TV bound τ (GSPA / E-APES, `lattice_gaussian_tv`), ε_i = 1, previous numpy path vs JAX")
    say()
    rows = [[f"{r['n']:,}", f"{r['window']:,}²", f"{r['tau_jax']:.12f}", f"{r['tau_diff']:.1e}",
             ms(r["numpy_first_call_s"]), ms(r["jax_first_call_s"]), f"{r['ratio_cold']:.1f}×",
             ms(r["numpy_median_s"]), ms(r["jax_median_s"]), f"**{r['ratio_warm']:.1f}×**"] for r in res["sizes"]]
    say(table(["n", "window", "τ (JAX)", "τ_jax − τ_numpy", "numpy first", "JAX first (compile)", "ratio cold",
               "numpy median", "JAX median", "ratio warm"], rows))
    say()
    say("Both include the Poisson-binomial count law (a shared JAX routine). The numpy column is the "
        "pre-port algorithm (scipy binomial log-pmf and ndtr on the full window); JAX streams blocks of rows "
        "through one jitted kernel on a statically padded window, so p of similar size reuse its compilation.")
    say()


def report(results: dict, quick: bool):
    say(f"## ε(δ) and δ(ε) at ε₀ = {EPS0:g}, δ = {DELTA:g}")
    say()
    rows = []
    for r in results["sizes"]:
        jp, sp = r["jaxpriv"], r.get("scipy")
        rows.append([
            f"{r['n']:,}", f"{jp['epsilon']:.6f}",
            f"{sp['epsilon']:.6f}" if sp else "not run",
            ms(jp["epsilon_compile_s"]), ms(jp["epsilon_median_s"]),
            f"{ms(sp['epsilon_s'])} ({sp['epsilon_delta_evals']} δ evals)" if sp else "–",
            f"**{r['ratio']['epsilon']:,.0f}×**" if sp else "–",
            ms(jp["delta_median_s"]), ms(sp["delta_median_s"]) if sp else "–",
            f"**{r['ratio']['delta']:,.0f}×**" if sp else "–",
        ])
    say(table(["n", "ε jaxpriv", "ε scipy", "jaxpriv compile (ε)", "jaxpriv ε(δ) median",
               "scipy ε(δ) (brentq)", "ratio ε", "jaxpriv δ(ε) median", "scipy δ(ε) median", "ratio δ"], rows))
    say()
    say("Ratio = scipy time / jaxpriv median (jaxpriv after compilation; the compile column is first call "
        "minus median, paid once per window size and batch shape per process). jaxpriv's δ(ε) call has its "
        "own compilation (first call minus median: " + ", ".join(
            f"n = {r['n']:,}: {ms(r['jaxpriv']['delta_compile_s'])}" for r in results["sizes"]) + ").")
    if quick:
        say()
        say("`--quick`: the plain numpy/scipy sum was timed at n = 10⁴ and 10⁵ only; at n = 10⁶ its δ(ε) "
            "takes about a second and its ε(δ) tens of seconds (run without `--quick`).")
    say()
    rows = []
    for r in results["sizes"]:
        a = r.get("agreement")
        rows.append([f"{r['n']:,}", f"{r['jaxpriv']['delta_at_epsilon']:.10e}",
                     f"{a['delta_rel_diff']:.2e}" if a else "–", f"{a['epsilon_rel_diff']:.2e}" if a else "–"])
    say("Agreement (δ of both at jaxpriv's ε; ε of both at δ = 1e-8). jaxpriv's δ includes the dropped "
        "window mass and a rounding allowance (≤ 1e-10 relative), so it sits at or just above the plain sum:")
    say()
    say(table(["n", "jaxpriv δ(ε_jaxpriv)", "(δ_jp − δ_scipy)/δ_scipy", "(ε_jp − ε_scipy)/ε_scipy"], rows))
    say()
    b = results["batch"]
    say(f"## Batch: {b['configs']} configurations (ε₀ ∈ geomspace(0.1, 4, 8) × δ ∈ geomspace(1e-12, 1e-5, 8)) "
        f"at n = {b['n']:,} in one `clones_epsilon` call")
    say()
    say(f"First call {ms(b['first_call_s'])}, then median {ms(b['median_s'])} "
        f"({ms(b['per_config_s'])} per configuration). A batch smaller than a chunk runs in pieces of 16 "
        "settings (`jaxpriv._batching.call_plan`), not padded to a 256-row chunk; `bench/batching.py` compares "
        "batches with single calls of the same settings.")
    say()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="skip the plain sum at n = 10⁶ (~10 s in all)")
    parser.add_argument("--json", metavar="OUT", help="write all results to this JSON file")
    parser.add_argument("--repeats", type=int, default=7, help="timed jaxpriv calls per measurement")
    args = parser.parse_args(argv)

    t_start = time.perf_counter()
    info = machine_info()
    mode = "quick" if args.quick else "full"
    print_header(info, mode)
    results = {"machine": info, "mode": mode, "repeats": args.repeats}
    results["sizes"] = [bench_size(n, args.repeats, with_scipy=not (args.quick and n > 100_000)) for n in SIZES]
    results["batch"] = bench_batch(args.repeats)
    results["apes"] = bench_apes(args.repeats, args.quick)
    results["per_user"] = bench_per_user(args.quick)
    results["multinomial"] = bench_multinomial(args.repeats, args.quick)
    results["rounds"] = bench_rounds(min(args.repeats, 3), args.quick)
    report(results, args.quick)
    report_apes_and_per_user(results["apes"], results["per_user"])
    report_multinomial(results["multinomial"])
    report_rounds(results["rounds"])
    checks = {f"n={r['n']}: {k}": v for r in results["sizes"] for k, v in r["checks"].items()}
    checks.update({f"batch: {k}": v for k, v in results["batch"]["checks"].items()})
    checks.update({f"apes: {k}": v for k, v in results["apes"]["checks"].items()})
    checks.update({f"per-user: {k}": v for k, v in results["per_user"]["checks"].items()})
    checks.update({f"multinomial: {k}": v for k, v in results["multinomial"]["checks"].items()})
    checks.update({f"rounds: {k}": v for k, v in results["rounds"]["checks"].items()})
    results["checks"] = checks
    say("Checks: " + ", ".join(f"{k}: {'ok' if v else 'FAILED'}" for k, v in checks.items()))
    return common.finish(results, checks, t_start, args.json)


if __name__ == "__main__":
    sys.exit(main())
