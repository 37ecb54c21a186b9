"""Where a cold start's time goes: the compiled programs of a pytest target or a ``jaxpriv`` command.

Runs the target in a fresh process with an empty compilation cache and JAX's compile logging on, and
prints the time spent tracing, lowering and compiling (from JAX's monitoring events) and the programs
compiled, grouped by function, most expensive first. This is the profile behind issue 14's notes (which
kernels to shrink, which tests compile most).

    python bench/compile_profile.py pytest tests/test_shuffle_rounds.py
    python bench/compile_profile.py jaxpriv shuffle --budgets uniform:0.05,1 --n 10000 --delta 1e-8 --json
    python bench/compile_profile.py --top 5 jaxpriv epsilon --q 0.01 --sigma 1.1 --steps 1000 --delta 1e-5

(``--top`` goes before the tool: everything after it is the tool's.)
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile

# Run inside the child: listeners on JAX's compile events and on its compile log, a report at exit.
_HOOK = r'''
import atexit, collections, logging, re, sys, time
import jax
events, counts, per_fn = collections.Counter(), collections.Counter(), collections.defaultdict(lambda: [0, 0.0])
def _event(name, seconds, **_):
    events[name] += seconds; counts[name] += 1
jax.monitoring.register_event_duration_secs_listener(_event)
jax.config.update("jax_log_compiles", True)
class _Log(logging.Handler):
    def emit(self, record):
        m = re.search(r"Finished XLA compilation of (.*?) in ([\d.e+-]+) ?sec", record.getMessage())
        if m:
            per_fn[m.group(1)][0] += 1; per_fn[m.group(1)][1] += float(m.group(2))
logging.getLogger("jax").addHandler(_Log())
_cpu = time.process_time()
@atexit.register
def _report():
    out = sys.__stderr__
    print(f"\n== compile profile: {time.process_time() - _cpu:.1f} s CPU in this process", file=out)
    for name in ("/jax/core/compile/jaxpr_trace_duration", "/jax/core/compile/jaxpr_to_mlir_module_duration",
                 "/jax/core/compile/backend_compile_duration"):
        print(f"   {events[name]:8.1f} s  {counts[name]:6d}  {name.rsplit('/', 1)[-1]}", file=out)
    print("   programs compiled, by function (seconds, count):", file=out)
    for fn, (n, s) in sorted(per_fn.items(), key=lambda kv: -kv[1][1])[:TOP]:
        print(f"   {s:8.1f} s  {n:6d}  {fn}", file=out)
'''


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tool", choices=("pytest", "jaxpriv"), help="what to run")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="its arguments")
    parser.add_argument("--top", type=int, default=20, help="functions to list (default 20)")
    args = parser.parse_args()
    if args.top < 1:
        parser.error(f"--top must be an integer ≥ 1, got {args.top}")
    hook = _HOOK.replace("TOP", str(args.top))
    if args.tool == "pytest":  # one process (-n 0), so every compilation is seen
        run = "import pytest; sys.exit(pytest.main(['-q', '-n', '0', '-p', 'no:cacheprovider', *ARGS]))"
    else:
        run = "from jaxpriv.cli import main; sys.exit(main(ARGS))"
    code = hook + "\nimport sys\nARGS = " + repr(args.args) + "\n" + run
    with tempfile.TemporaryDirectory() as cache:  # empty caches: a cold start
        env = {**os.environ, "JAXPRIV_CACHE_DIR": cache, "JAXPRIV_TEST_CACHE": cache}
        return subprocess.run([sys.executable, "-c", code], env=env).returncode


if __name__ == "__main__":
    sys.exit(main())
