"""Latency of a first answer: one question asked in a fresh Python process, jaxpriv vs dp_accounting.

Most users ask one question per training run (the ε of their run, or the σ for their budget), so the
time that matters to them is a fresh process's: imports, tracing, compilation and the answer. Every
figure here is measured in its own fresh interpreter (``subprocess``), as CPU time (user + system, from
``getrusage`` of the children) and wall time, and repeated with the cases interleaved; medians are
reported.

jaxpriv runs twice per repeat: *cold* (an empty compilation cache, ``JAXPRIV_CACHE_DIR`` set to a new
directory) and *warm* (the same directory again: what every later run of the user sees). The command
line runs the same way. dp_accounting (``pip install -e ".[bench]"``) answers the same questions.

    python bench/latency.py                 # 3 repeats, ~3-4 min on 2 CPU cores
    python bench/latency.py --repeats 5 --json latency.json
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import jaxpriv
from _common import finish, machine_info, print_header, say, table

Q, SIGMA, STEPS, DELTA, TARGET = 0.01, 1.1, 10_000, 1e-5, 3.0

# name → (jaxpriv program, dp_accounting program answering the same question)
QUESTIONS = {
    "one ε, RDP": (
        f"import jaxpriv; print(float(jaxpriv.dpsgd_epsilon({Q}, {SIGMA}, {STEPS}, {DELTA})))",
        "import dp_accounting as d\n"
        "a = d.rdp.RdpAccountant(); a.compose(d.PoissonSampledDpEvent("
        f"{Q}, d.GaussianDpEvent({SIGMA})), {STEPS}); print(a.get_epsilon({DELTA}))",
    ),
    "one ε, PLD (h = 1e-4)": (
        "from jaxpriv import accounting, events as e\n"
        f"event = e.SelfComposed(e.PoissonSampled({Q}, e.Gaussian({SIGMA})), {STEPS})\n"
        f"print(float(accounting.epsilon(event, {DELTA}, accountant=accounting.PLD(1e-4))))",
        "import dp_accounting as d\n"
        "a = d.pld.PLDAccountant(d.NeighboringRelation.ADD_OR_REMOVE_ONE, value_discretization_interval=1e-4)\n"
        f"a.compose(d.PoissonSampledDpEvent({Q}, d.GaussianDpEvent({SIGMA})), {STEPS}); print(a.get_epsilon({DELTA}))",
    ),
    "one σ calibration, RDP": (
        f"from jaxpriv import calibrate; print(float(calibrate.noise_multiplier({TARGET}, {Q}, {STEPS}, {DELTA})))",
        "import dp_accounting as d\n"
        f"make = lambda s: d.PoissonSampledDpEvent({Q}, d.GaussianDpEvent(s))\n"
        f"event = lambda s: d.SelfComposedDpEvent(make(s), {STEPS})\n"
        f"print(d.calibrate_dp_mechanism(d.rdp.RdpAccountant, event, {TARGET}, {DELTA}, "
        "d.mechanism_calibration.LowerEndpointAndGuess(0.3, 1.0)))",
    ),
}
CLI = ["epsilon", "--q", str(Q), "--sigma", str(SIGMA), "--steps", str(STEPS), "--delta", str(DELTA)]
CLI_ERROR = ["epsilon", "--q", "1.5", "--sigma", str(SIGMA), "--steps", str(STEPS), "--delta", str(DELTA)]


def fresh(argv: list[str], cache: str | None = None, expect: int = 0) -> dict:
    """CPU and wall seconds of one fresh process (``cache``: its JAXPRIV_CACHE_DIR)."""
    env = dict(os.environ)
    if cache is not None:
        env["JAXPRIV_CACHE_DIR"] = cache
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    run = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=900)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if run.returncode != expect:
        raise RuntimeError(f"{argv} exited {run.returncode}:\n{run.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"cpu": cpu, "wall": wall, "stdout": run.stdout.strip().splitlines()[-1] if run.stdout.strip() else ""}


def python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", metavar="OUT")
    args = parser.parse_args()
    t_start = time.perf_counter()
    info = machine_info({name: importlib.metadata.version(name) for name in ("jaxpriv", "dp-accounting", "jax")},
                        os.path.dirname(jaxpriv.__file__))
    print_header(info, f"{args.repeats} repeats", "Latency of a first answer: jaxpriv vs dp_accounting",
                 "Each figure: a fresh Python process; CPU = user + system seconds; median over repeats, "
                 "the cases interleaved. cold = empty compilation cache, warm = the same cache again.")
    cli = [sys.executable, "-m", "jaxpriv"]
    samples: dict[str, list[dict]] = {}

    def record(name, result):
        samples.setdefault(name, []).append(result)

    for repeat in range(args.repeats):
        say(f"repeat {repeat + 1}/{args.repeats} …")
        for question, (ours, theirs) in QUESTIONS.items():
            cache = tempfile.mkdtemp(prefix="jaxpriv-latency-")
            try:
                record((question, "jaxpriv cold"), fresh(python(ours), cache))
                record((question, "jaxpriv warm"), fresh(python(ours), cache))
            finally:
                shutil.rmtree(cache, ignore_errors=True)
            record((question, "dp_accounting"), fresh(python(theirs)))
        cache = tempfile.mkdtemp(prefix="jaxpriv-latency-")
        try:
            record(("`jaxpriv epsilon …`", "jaxpriv cold"), fresh(cli + CLI, cache))
            record(("`jaxpriv epsilon …`", "jaxpriv warm"), fresh(cli + CLI, cache))
        finally:
            shutil.rmtree(cache, ignore_errors=True)
        record(("`jaxpriv epsilon --q 1.5 …` (error)", "jaxpriv"), fresh(cli + CLI_ERROR, expect=2))
        record(("`import jax` alone", "python"), fresh(python("import jax, jax.numpy")))

    median = {key: {k: statistics.median(s[k] for s in runs) for k in ("cpu", "wall")} for key, runs in samples.items()}
    rows, checks = [], {}
    for question in QUESTIONS:
        dpa = median[(question, "dp_accounting")]["cpu"]
        for who in ("jaxpriv cold", "jaxpriv warm", "dp_accounting"):
            m = median[(question, who)]
            rows.append([question, who, f"{m['cpu']:.2f}", f"{m['wall']:.2f}", f"{m['cpu'] / dpa:.2f}×",
                         samples[(question, who)][0]["stdout"]])
        checks[f"{question}: cold CPU ≤ dp_accounting's"] = median[(question, "jaxpriv cold")]["cpu"] <= dpa
        checks[f"{question}: warm CPU ≤ 0.5 × dp_accounting's"] = median[(question, "jaxpriv warm")]["cpu"] <= 0.5 * dpa
    for key in (("`jaxpriv epsilon …`", "jaxpriv cold"), ("`jaxpriv epsilon …`", "jaxpriv warm"),
                ("`jaxpriv epsilon --q 1.5 …` (error)", "jaxpriv"), ("`import jax` alone", "python")):
        m = median[key]
        rows.append([*key, f"{m['cpu']:.2f}", f"{m['wall']:.2f}", "", ""])
    checks["`jaxpriv epsilon …` cold ≤ 3 s wall"] = median[("`jaxpriv epsilon …`", "jaxpriv cold")]["wall"] <= 3.0
    checks["CLI argument error < 1.5 s wall"] = median[("`jaxpriv epsilon --q 1.5 …` (error)", "jaxpriv")]["wall"] < 1.5
    say()
    say(table(["question", "who", "CPU s", "wall s", "CPU / dp_accounting", "answer"], rows))
    say()
    say("| goal | met |\n|---|---|\n" + "\n".join(f"| {k} | {'yes' if v else 'NO'} |" for k, v in checks.items()))
    results = {"machine": info, "samples": {" / ".join(k): v for k, v in samples.items()},
               "medians": {" / ".join(k): v for k, v in median.items()}}
    return finish(results, checks, t_start, args.json)


if __name__ == "__main__":
    sys.exit(main())
