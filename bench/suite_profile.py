"""Where the test suite's time goes, per module and per test: a pytest plugin and its report (issue 29).

Loaded into every pytest-xdist worker, the plugin records for each test its wall and CPU seconds, JAX's
trace/lower/compile seconds (JAX's monitoring events) and the name and compile time of every program it
compiled (cache hits included, they are fast), one JSON line per test in ``$SUITE_PROFILE_DIR`` (default:
``jaxpriv-suite-profile`` in the temporary directory). The
report sums them per module, per program name ("family") and lists the slowest tests:

    SUITE_PROFILE_DIR=/tmp/sp PYTHONPATH=bench python -m pytest -q -p suite_profile   # the README's command + plugin
    python bench/suite_profile.py /tmp/sp --top 30

Module setup (module-scoped fixtures) counts with the module's first test. Tests that run the command
line in a subprocess show their wall time only (CPU and compiles of the child are not seen).
"""

from __future__ import annotations

import argparse
import collections
import glob
import json
import os
import re
import tempfile
import time

_current = {"events": collections.Counter(), "compiles": []}


def _install_listeners():
    from jax._src import compiler, monitoring
    from jax._src.lib.mlir import ir

    monitoring.register_event_duration_secs_listener(
        lambda event, duration, **_: _current["events"].__setitem__(event, _current["events"][event] + duration))
    compile_or_get_cached = compiler.compile_or_get_cached

    def timed(backend, computation, *args, **kwargs):  # one program: its name and its (possibly cached) compile
        name = ir.StringAttr(computation.operation.attributes["sym_name"]).value
        start = time.perf_counter()
        try:
            return compile_or_get_cached(backend, computation, *args, **kwargs)
        finally:
            _current["compiles"].append((name, time.perf_counter() - start))

    compiler.compile_or_get_cached = timed


def pytest_configure(config):
    _install_listeners()


def _write(item, wall0: float, cpu0: float):
    record = {"id": item.nodeid, "wall": time.perf_counter() - wall0, "cpu": time.process_time() - cpu0,
              "events": dict(_current["events"]), "compiles": list(_current["compiles"])}
    out = os.environ.get("SUITE_PROFILE_DIR") or os.path.join(tempfile.gettempdir(), "jaxpriv-suite-profile")
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, os.environ.get("PYTEST_XDIST_WORKER", "main") + ".jsonl"), "a") as f:
        f.write(json.dumps(record) + "\n")


try:  # the hook wrapper needs pytest's hookimpl marker (absent when this file runs as the report)
    import pytest

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(item, nextitem):  # setup, call and teardown of one test
        _current["events"].clear()
        _current["compiles"].clear()
        wall0, cpu0 = time.perf_counter(), time.process_time()
        yield
        _write(item, wall0, cpu0)
except ImportError:  # pragma: no cover
    pass

_COMPILE = "/jax/core/compile/backend_compile_duration"
_LOWER = "/jax/core/compile/jaxpr_to_mlir_module_duration"
_TRACE = "/jax/core/compile/jaxpr_trace_duration"


def report(directory: str, top: int) -> None:
    records = [json.loads(line) for path in glob.glob(os.path.join(directory, "*.jsonl")) for line in open(path)]
    if not records:
        raise SystemExit(f"no records in {directory}")
    modules = collections.defaultdict(collections.Counter)
    families = collections.defaultdict(lambda: [0, 0.0])
    for r in records:
        m = modules[r["id"].split("::")[0]]
        m.update(wall=r["wall"], cpu=r["cpu"], tests=1, programs=len(r["compiles"]), compile=r["events"].get(_COMPILE, 0.0),
                 lower=r["events"].get(_LOWER, 0.0), trace=r["events"].get(_TRACE, 0.0))
        for name, seconds in r["compiles"]:
            family = families[re.sub(r"^jit_", "", name)]
            family[0] += 1
            family[1] += seconds
    total = sum(modules.values(), collections.Counter())
    print(f"{len(records)} tests: {total['wall']:.0f} worker-s wall, {total['cpu']:.0f} CPU; JAX compile "
          f"{total['compile']:.0f} s, lower {total['lower']:.0f} s, trace {total['trace']:.0f} s; "
          f"{total['programs']:.0f} programs\n")
    print(f"{'module':44s} {'wall':>6s} {'cpu':>6s} {'compile':>7s} {'lower':>6s} {'trace':>6s} {'progs':>6s} tests")
    for name, m in sorted(modules.items(), key=lambda kv: -kv[1]["wall"])[:top]:
        print(f"{name[-44:]:44s} {m['wall']:6.0f} {m['cpu']:6.0f} {m['compile']:7.0f} {m['lower']:6.0f} "
              f"{m['trace']:6.0f} {m['programs']:6.0f} {m['tests']:5.0f}")
    print(f"\n{'program family':50s} {'count':>6s} {'compile s':>9s}")
    for name, (count, seconds) in sorted(families.items(), key=lambda kv: -kv[1][1])[:top]:
        print(f"{name[:50]:50s} {count:6d} {seconds:9.1f}")
    print(f"\n{'wall':>6s} {'compile':>7s} {'progs':>5s} slowest tests")
    for r in sorted(records, key=lambda r: -r["wall"])[:top]:
        print(f"{r['wall']:6.1f} {r['events'].get(_COMPILE, 0.0):7.1f} {len(r['compiles']):5d} {r['id'][-110:]}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("directory", help="the plugin's output directory ($SUITE_PROFILE_DIR of the run)")
    parser.add_argument("--top", type=int, default=30, help="rows per table (default 30)")
    args = parser.parse_args(argv)
    if args.top < 1:
        parser.error(f"--top must be an integer in [1, inf), got {args.top}")
    report(args.directory, args.top)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
