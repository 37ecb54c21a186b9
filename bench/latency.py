"""Latency of a first answer: one question asked in a fresh Python process, jaxpriv vs dp_accounting.

Most users ask one question per training run (the ε of their run, or the σ for their budget), so the
time that matters to them is a fresh process's: imports, tracing, compilation and the answer. Every
figure here is measured in its own fresh interpreter (``subprocess``), as CPU time (user + system, from
``getrusage`` of the children) and wall time, and repeated with the cases interleaved; medians are
reported.

Every repeat asks about a DP-SGD setting no process has seen (q log-uniform in [1e-3, 0.1], σ uniform in
[0.8, 2.9], T log-uniform in [132, 10⁴], δ = 1e-5; seeded), so that no answer comes from a cache of
answers. jaxpriv runs twice per repeat: *cold* (an empty compilation cache, ``JAXPRIV_CACHE_DIR`` set to a
new directory) and *warm* (the same directory again, asked about another new setting: what every later
run of the user sees). The command line runs the same way. dp_accounting (``pip install -e ".[bench]"``)
answers the same questions: its PLD at value_discretization_interval 1e-4 (its default) and its RDP;
prv_accountant (Gopi, Lee & Wutschitz 2021) the PLD question at eps_error 0.01.

    python bench/latency.py                 # 3 repeats, ~6-8 min on 2 CPU cores
    python bench/latency.py --repeats 5 --json latency.json
    python bench/latency.py --baseline ../old-checkout  # also another commit's jaxpriv, interleaved

With ``--baseline DIR`` (a checkout of another commit), every jaxpriv question is also asked of that
checkout's jaxpriv, cold and warm, right after this one's: a change's effect on a first answer, measured
side by side under the same load.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import math
import os
import shutil
import statistics
import sys
import tempfile
import time

import numpy as np

import jaxpriv
from _common import checkouts, child_process, finish, machine_info, print_header, say, table

DELTA = 1e-5
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(jaxpriv.__file__)))  # the checkout measured
EVENT = "from jaxpriv import accounting, events as e\nevent = e.SelfComposed(e.PoissonSampled({q}, e.Gaussian({s})), {T})\n"
DPA = "import dp_accounting as d\nevent = d.SelfComposedDpEvent(d.PoissonSampledDpEvent({q}, d.GaussianDpEvent({s})), {T})\n"

# name → (jaxpriv program, the anchors' programs answering the same question), each a template of q, s, T
QUESTIONS = {
    "one ε, PLD": (
        EVENT + f"print(float(accounting.epsilon(event, {DELTA}, accountant='pld')))",
        {"dp_accounting PLD (h = 1e-4)": DPA + "a = d.pld.PLDAccountant(d.NeighboringRelation.ADD_OR_REMOVE_ONE, "
                                              f"value_discretization_interval=1e-4)\na.compose(event); print(a.get_epsilon({DELTA}))",
         "prv_accountant (eps_error 0.01)": "from prv_accountant import PRVAccountant\n"
                                             "from prv_accountant.privacy_random_variables import PoissonSubsampledGaussianMechanism\n"
                                             "a = PRVAccountant(prvs=PoissonSubsampledGaussianMechanism(noise_multiplier={s}, "
                                             "sampling_probability={q}), max_self_compositions={T}, eps_error=0.01, "
                                             "delta_error=1e-9)\n"
                                             f"print(a.compute_epsilon(delta={DELTA}, num_self_compositions={{T}})[2])"}),
    "certified interval, PLD": (
        EVENT + f"print([float(x) for x in accounting.epsilon_interval(event, {DELTA})])",
        {"dp_accounting PLD (h = 1e-4)": DPA + "a = d.pld.PLDAccountant(d.NeighboringRelation.ADD_OR_REMOVE_ONE, "
                                              f"value_discretization_interval=1e-4)\na.compose(event); print(a.get_epsilon({DELTA}))"}),
    "one ε, RDP": (
        f"import jaxpriv; print(float(jaxpriv.dpsgd_epsilon({{q}}, {{s}}, {{T}}, {DELTA})))",
        {"dp_accounting RDP": DPA + f"a = d.rdp.RdpAccountant(); a.compose(event); print(a.get_epsilon({DELTA}))"}),
}
CLI = ["epsilon", "--q", "{q}", "--sigma", "{s}", "--steps", "{T}", "--delta", str(DELTA)]
CLI_ERROR = ["epsilon", "--q", "1.5", "--sigma", "1.1", "--steps", "1000", "--delta", str(DELTA)]


def fresh(argv: list[str], cache: str | None = None, expect: int = 0, cwd: str = ROOT) -> dict:
    """CPU and wall seconds of one fresh process (``cache``: its JAXPRIV_CACHE_DIR; ``cwd``: the checkout
    whose jaxpriv it imports, first on ``python -c``'s path)."""
    env = dict(os.environ)
    if cache is not None:
        env["JAXPRIV_CACHE_DIR"] = cache
    cpu, wall, run = child_process(argv, env, cwd)
    if run.returncode != expect:
        raise RuntimeError(f"{argv} exited {run.returncode}:\n{run.stderr[-2000:]}")
    return {"cpu": cpu, "wall": wall, "stdout": run.stdout.strip().splitlines()[-1] if run.stdout.strip() else ""}


def python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def settings(count: int, seed: int) -> list[dict]:
    """New DP-SGD settings, one per question asked (their numbers printed with full precision)."""
    rng = np.random.default_rng(seed)
    return [{"q": float(10 ** rng.uniform(-3, -1)), "s": float(rng.uniform(0.8, 2.9)),
             "T": int(round(10 ** rng.uniform(math.log10(132), 4)))} for _ in range(count)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=2028)
    parser.add_argument("--json", metavar="OUT")
    parser.add_argument("--baseline", metavar="DIR", help="also ask another checkout's jaxpriv, interleaved")
    args = parser.parse_args()
    arms = checkouts(parser, args, ("jaxpriv", ROOT))
    t_start = time.perf_counter()
    names = ("jaxpriv", "dp-accounting", "prv-accountant", "jax")
    info = machine_info({name: importlib.metadata.version(name) for name in names}, os.path.dirname(jaxpriv.__file__))
    print_header(info, f"{args.repeats} repeats", "Latency of a first answer: jaxpriv vs dp_accounting and prv_accountant",
                 "Each figure: a fresh Python process; CPU = user + system seconds; median over repeats, the cases "
                 "interleaved, every question about a setting no process has seen. cold = empty compilation cache, "
                 "warm = the same cache, another new setting.")
    cli = [sys.executable, "-m", "jaxpriv"]
    samples: dict[tuple, list[dict]] = {}
    pool = iter(settings(2 * (len(QUESTIONS) + 1) * args.repeats, args.seed))

    def record(key, result, setting):
        samples.setdefault(key, []).append({**result, **setting})

    for repeat in range(args.repeats):
        say(f"repeat {repeat + 1}/{args.repeats} …")
        for question, (ours, theirs) in QUESTIONS.items():
            first, second = next(pool), next(pool)
            for arm, root in arms.items():
                cache = tempfile.mkdtemp(prefix="jaxpriv-latency-")
                try:
                    record((question, f"{arm} cold"), fresh(python(ours.format(**first)), cache, cwd=root), first)
                    record((question, f"{arm} warm"), fresh(python(ours.format(**second)), cache, cwd=root), second)
                finally:
                    shutil.rmtree(cache, ignore_errors=True)
            for who, program in theirs.items():
                record((question, who), fresh(python(program.format(**first))), first)
        first, second = next(pool), next(pool)
        for arm, root in arms.items():
            cache = tempfile.mkdtemp(prefix="jaxpriv-latency-")
            try:
                record(("`jaxpriv epsilon …`", f"{arm} cold"), fresh(cli + [a.format(**first) for a in CLI], cache,
                                                                     cwd=root), first)
                record(("`jaxpriv epsilon …`", f"{arm} warm"), fresh(cli + [a.format(**second) for a in CLI], cache,
                                                                     cwd=root), second)
            finally:
                shutil.rmtree(cache, ignore_errors=True)
        record(("`jaxpriv epsilon --q 1.5 …` (error)", "jaxpriv"), fresh(cli + CLI_ERROR, expect=2), {})
        record(("`import jax` alone", "python"), fresh(python("import jax, jax.numpy")), {})

    median = {key: {k: statistics.median(s[k] for s in runs) for k in ("cpu", "wall")} for key, runs in samples.items()}
    rows, checks = [], {}
    for question, (_, theirs) in QUESTIONS.items():
        anchor = next(iter(theirs))
        dpa = median[(question, anchor)]["cpu"]
        for who in (*(f"{arm} {kind}" for arm in arms for kind in ("cold", "warm")), *theirs):
            m = median[(question, who)]
            rows.append([question, who, f"{m['cpu']:.2f}", f"{m['wall']:.2f}", f"{m['cpu'] / dpa:.2f}×",
                         samples[(question, who)][0]["stdout"][:40]])
    pld, interval, rdp = (median[(q, "jaxpriv cold")]["cpu"] for q in QUESTIONS)
    pld_dpa = median[("one ε, PLD", "dp_accounting PLD (h = 1e-4)")]["cpu"]
    checks["PLD ε cold CPU ≤ 2 × dp_accounting's PLD"] = pld <= 2.0 * pld_dpa
    checks["PLD ε warm (another new setting) CPU ≤ 0.5 × dp_accounting's PLD"] = (
        median[("one ε, PLD", "jaxpriv warm")]["cpu"] <= 0.5 * pld_dpa)
    checks["epsilon_interval cold ≤ 1.5 × the upper bound's"] = interval <= 1.5 * pld
    checks["epsilon_interval warm ≤ 1.5 × the upper bound's"] = (
        median[("certified interval, PLD", "jaxpriv warm")]["cpu"] <= 1.5 * median[("one ε, PLD", "jaxpriv warm")]["cpu"])
    checks["RDP ε cold CPU ≤ 2.5 s"] = rdp <= 2.5
    checks["RDP ε warm CPU ≤ dp_accounting's RDP"] = (median[("one ε, RDP", "jaxpriv warm")]["cpu"]
                                                     <= median[("one ε, RDP", "dp_accounting RDP")]["cpu"])
    for key in (*(("`jaxpriv epsilon …`", f"{arm} {kind}") for arm in arms for kind in ("cold", "warm")),
                ("`jaxpriv epsilon --q 1.5 …` (error)", "jaxpriv"), ("`import jax` alone", "python")):
        m = median[key]
        rows.append([*key, f"{m['cpu']:.2f}", f"{m['wall']:.2f}", "", ""])
    checks["`jaxpriv epsilon …` cold ≤ 10 s CPU"] = median[("`jaxpriv epsilon …`", "jaxpriv cold")]["cpu"] <= 10.0
    checks["`jaxpriv epsilon …` warm ≤ 3 s CPU"] = median[("`jaxpriv epsilon …`", "jaxpriv warm")]["cpu"] <= 3.0
    checks["CLI argument error < 1.5 s wall"] = median[("`jaxpriv epsilon --q 1.5 …` (error)", "jaxpriv")]["wall"] < 1.5
    say()
    say(table(["question", "who", "CPU s", "wall s", "CPU / first anchor", "answer (first repeat)"], rows))
    say()
    say("| goal | met |\n|---|---|\n" + "\n".join(f"| {k} | {'yes' if v else 'NO'} |" for k, v in checks.items()))
    results = {"machine": info, "samples": {" / ".join(k): v for k, v in samples.items()},
               "medians": {" / ".join(k): v for k, v in median.items()}}
    return finish(results, checks, t_start, args.json)


if __name__ == "__main__":
    sys.exit(main())
