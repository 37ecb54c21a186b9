"""One question asked by two arms in alternating fresh processes: the side-by-side figure of one change.

An arm is a checkout (``.`` for this one, or a ``git worktree`` of another commit) and optional environment
settings, written ``PATH`` or ``PATH:NAME=VALUE,NAME=VALUE``. Each pair runs arm A then arm B, each in a fresh
Python process with that checkout first on ``PYTHONPATH``; the CPU figure is the child's user + system
seconds (``getrusage``), the whole process (imports included). ``--cache cold`` gives every process a new
empty ``JAXPRIV_CACHE_DIR``; ``--cache warm`` gives each arm one directory, warmed by one unmeasured run.
Questions ending in ``-new`` ask about a new DP-SGD setting in every pair (seeded, the same for both arms:
q log-uniform in [1e-3, 0.1], σ uniform in [0.8, 2.9], T log-uniform in [132, 10⁴], δ = 1e-5).

    python bench/pairs.py rdp-new --a .:JAXPRIV_SAVED_PROGRAMS=0 --b . --pairs 6
    git worktree add /tmp/before 9cf54c6 && python bench/pairs.py pld-corner0 --a /tmp/before --b . --pairs 3
    python bench/pairs.py steps-best --a /tmp/before --b . --cache warm --pairs 3
    python bench/pairs.py tests --tests tests/test_train_clipping.py tests/test_fdp.py --a /tmp/before --b . --pairs 2
    python bench/pairs.py reproduce-quick --a /tmp/before --b . --pairs 2   # the README's main command
    python bench/pairs.py system-udpfl --a /tmp/before --b . --pairs 3      # one seed system of it

Prints each pair (A, B, B − A, the load average) and the medians of A, B and of the pair differences.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import tempfile

import numpy as np

from _common import child_process

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_PLD = "from jaxpriv import accounting, events as e\nprint(float(accounting.epsilon(e.SelfComposed(" \
       "e.PoissonSampled({q}, e.Gaussian({s})), {T}), 1e-5, accountant='pld')))"
#: name → program (a template of q, s, T for the "-new" questions)
QUESTIONS = {
    "rdp-new": "import jaxpriv\nprint(float(jaxpriv.dpsgd_epsilon({q}, {s}, {T}, 1e-5)))",
    "pld-new": _PLD,
    "pld-corner0": _PLD.format(q=1e-6, s=0.3, T=1),
    "pld-corner2": _PLD.format(q=0.5, s=0.3, T=1_000_000),
    "pld-2^16": _PLD.format(q=0.01, s=1.1, T=1000),
    "pld-2^18": _PLD.format(q=0.001, s=0.8, T=10_000),
    "steps-best": "from jaxpriv import calibrate\n"
                  "print(float(calibrate.steps(100.0, 0.01, 0.3, 1e-5, accountant='best')))",
    # the four exact-pair rows of the main command's many-rounds tables (reproduce/rounds.py): 10,000 users,
    # T = 1, 10, 100, 1000, both clone models, at a spread of budgets (APES's Uniform2-like) and at ε₀ = 1 (GSPA's)
    "rounds-tables": "import numpy as np\nfrom jaxpriv.calibrate.shuffle_rounds import rounds_epsilon\n"
                     "runs = [(np.linspace(0.01, 2.0, 10_000), 1e-8), (np.ones(10_000), 1e-6)]\n"
                     "print([round(float(rounds_epsilon(e, d, [1, 10, 100, 1000], model=m)[-1]), 6) "
                     "for e, d in runs for m in ('gspa', 'apes')])",
    # `jaxpriv shuffle` with its figures (the ε-vs-n figure compiles clone-sum programs per population size);
    # the answer is the exact pair's ε after 1 and 10 rounds
    "shuffle-figures": "import contextlib, io, json, tempfile\nfrom jaxpriv.cli import main\n"
                       "buffer = io.StringIO()\n"
                       "with tempfile.TemporaryDirectory() as out, contextlib.redirect_stdout(buffer):\n"
                       "    main(['shuffle', '--budgets', 'uniform:0.5,1', '--n', '500', '--delta', '1e-6', '--rounds', "
                       "'10,1', '--dims', '2', '--json', '--out', out])\n"
                       "rows = json.loads(buffer.getvalue())['rounds']['methods']\n"
                       "print([row['epsilon'] for row in rows if row['name'] == 'exact pair by PLD, APES'])",
    # the README's main command (`jaxpriv reproduce --quick`) in one process; the answer is its verdicts' count
    "reproduce-quick": "import collections, contextlib, io, json, os, tempfile\nfrom jaxpriv.cli import main\n"
                       "with tempfile.TemporaryDirectory() as out:\n"
                       "    with contextlib.redirect_stdout(io.StringIO()):\n"
                       "        code = main(['reproduce', '--quick', '--out', out])\n"
                       "    lines = json.load(open(os.path.join(out, 'systems.json')))['headlines']\n"
                       "print(code, sorted(collections.Counter(line['status'] for line in lines).items()))",
    # the test modules named by --tests, run as the README's test command runs them (pytest-xdist workers
    # included in the CPU figure); the answer is pytest's summary line
    "tests": "import subprocess, sys\n"
             "done = subprocess.run([sys.executable, '-m', 'pytest', '-q', '-p', 'no:cacheprovider', *{modules}], "
             "capture_output=True, text=True)\n"
             "print(done.stdout.strip().splitlines()[-1])\n"
             "if done.returncode: sys.exit(done.stdout[-3000:] + done.stderr[-2000:])",
}
# one seed system's quick reproduction (reproduce/<name>.py) in one process; the answer is its headline values
for _name in ("apes", "gspa", "rpdp", "udpfl"):
    QUESTIONS[f"system-{_name}"] = ("import tempfile\nfrom jaxpriv.reproduce import " + _name + " as system\n"
                                    "with tempfile.TemporaryDirectory() as out:\n"
                                    "    result = system.reproduce(True, out)\n"
                                    "print([row.get('ours_value') for row in result['headlines']])")


def parse_arm(text: str) -> tuple[str, dict]:
    path, _, settings = text.partition(":")
    env = dict(item.split("=", 1) for item in settings.split(",") if item)
    path = os.path.abspath(path)
    if not os.path.isdir(os.path.join(path, "jaxpriv")):
        raise SystemExit(f"{path} is not a checkout of jaxpriv (no jaxpriv/ in it)")
    return path, env


def run(program: str, arm: tuple[str, dict], cache: str) -> tuple[float, str]:
    path, settings = arm
    # the test suite's conftest.py takes its cache from JAXPRIV_TEST_CACHE (and hands it to JAXPRIV_CACHE_DIR)
    env = {**os.environ, **settings, "PYTHONPATH": path, "JAXPRIV_CACHE_DIR": cache, "JAXPRIV_TEST_CACHE": cache}
    cpu, _, done = child_process([sys.executable, "-c", program], env, path, timeout=None)
    if done.returncode:
        raise SystemExit(f"the question failed in {path}:\n{done.stderr[-2000:]}")
    return cpu, done.stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("question", choices=sorted(QUESTIONS))
    parser.add_argument("--a", required=True, help="arm A: PATH or PATH:NAME=VALUE,...")
    parser.add_argument("--b", required=True, help="arm B: PATH or PATH:NAME=VALUE,...")
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--cache", choices=("cold", "warm"), default="cold")
    parser.add_argument("--tests", nargs="+", default=[], metavar="MODULE",
                        help="the test modules of the question 'tests' (paths relative to the checkout)")
    args = parser.parse_args()
    if (args.question == "tests") != bool(args.tests):
        parser.error("--tests names the modules of the question 'tests', and only of it")
    if args.pairs < 1:
        parser.error(f"--pairs must be an integer in [1, inf), got {args.pairs}")
    arms = {"A": parse_arm(args.a), "B": parse_arm(args.b)}
    template = QUESTIONS[args.question]
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as scratch:
        warm = {name: os.path.join(scratch, f"warm-{name}") for name in arms}
        if args.cache == "warm":
            for name, arm in arms.items():
                run(template.format(q=0.01, s=1.1, T=1000, modules=list(args.tests)), arm, warm[name])
        cpu = {"A": [], "B": []}
        for pair in range(1, args.pairs + 1):
            setting = dict(q=round(10 ** rng.uniform(-3, -1), 5), s=round(rng.uniform(0.8, 2.9), 3),
                           T=int(10 ** rng.uniform(math.log10(132), 4)))
            program = template.format(**setting, modules=list(args.tests))
            answers = {}
            for name, arm in arms.items():
                cache = warm[name] if args.cache == "warm" else tempfile.mkdtemp(dir=scratch)
                seconds, answers[name] = run(program, arm, cache)
                cpu[name].append(seconds)
            load = os.getloadavg()[0]
            print(f"pair {pair}: A {cpu['A'][-1]:.2f} s, B {cpu['B'][-1]:.2f} s, B − A {cpu['B'][-1] - cpu['A'][-1]:+.2f} s"
                  f"  (answers {answers['A']} / {answers['B']}; load {load:.2f})", flush=True)
    diffs = [b - a for a, b in zip(cpu["A"], cpu["B"])]
    print(f"{args.question}, {args.cache} cache, {args.pairs} pairs: median CPU A {statistics.median(cpu['A']):.2f} s, "
          f"B {statistics.median(cpu['B']):.2f} s, pair differences {statistics.median(diffs):+.2f} s "
          f"(B / A {statistics.median(cpu['B']) / statistics.median(cpu['A']):.2f})")


if __name__ == "__main__":
    main()
