"""Helpers shared by the benchmark scripts: timing, the machine header, markdown output."""

from __future__ import annotations

import datetime
import json
import os
import platform
import resource
import subprocess
import time

import jax
import numpy as np

#: the random DP-SGD settings of the accounting benches: q log-uniform, σ uniform
Q_RANGE, SIGMA_RANGE = (1e-3, 0.1), (0.6, 3.0)


def random_dpsgd(n: int, rng, steps_range: tuple[float, float] | None = None):
    """(q, σ) of ``n`` random DP-SGD settings, and T log-uniform in ``steps_range`` (rounded) where given;
    drawn in that order from ``rng``."""
    q = np.exp(rng.uniform(np.log(Q_RANGE[0]), np.log(Q_RANGE[1]), n))
    sigma = rng.uniform(*SIGMA_RANGE, n)
    if steps_range is None:
        return q, sigma
    return q, sigma, np.round(np.exp(rng.uniform(np.log(steps_range[0]), np.log(steps_range[1]), n)))


def timed(fn):
    """(seconds, result) of one call; ``fn`` must block on its result (np.asarray)."""
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def first_and_repeats(fn, repeats: int):
    """Time the first call (compilation included) and then ``repeats`` more calls."""
    first, out = timed(fn)
    times = [timed(fn)[0] for _ in range(repeats)]
    return first, times, out


def checkouts(parser, args, this: tuple[str, str]) -> dict[str, str]:
    """The arms of a side-by-side run, {name: checkout}: ``this`` (name, root) and, with ``--baseline DIR``,
    that checkout; ``--repeats`` and ``--baseline`` are checked first (a parser error names them)."""
    if args.repeats < 1:
        parser.error(f"--repeats must be an integer ≥ 1, got {args.repeats}")
    if args.baseline and not os.path.isfile(os.path.join(args.baseline, "jaxpriv", "__init__.py")):
        parser.error(f"--baseline must be a checkout of jaxpriv (no jaxpriv/__init__.py in {args.baseline!r})")
    return dict([this, *([("baseline", os.path.abspath(args.baseline))] if args.baseline else [])])


def child_process(argv: list[str], env: dict, cwd: str, timeout: float = 900):
    """Run ``argv`` as a fresh process; return (its CPU seconds: user + system of it and its children,
    wall seconds, the CompletedProcess)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=timeout, cwd=cwd)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), wall, done


def say(text=""):
    print(text, flush=True)


def machine_info(versions: dict, jaxpriv_path: str) -> dict:
    """What a reader needs to compare timings: machine, load, devices, package versions."""
    uname = platform.uname()
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count()
    try:
        load = os.getloadavg()
    except OSError:
        load = None
    return {
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "platform": platform.platform(),
        "machine": f"{uname.system} {uname.release} {uname.machine}",
        "processor": platform.processor() or uname.machine,
        "cpu_count": os.cpu_count(),
        "cpus_usable": usable,
        "load_average_at_start": load,
        "python": platform.python_version(),
        "jax_backend": jax.default_backend(),
        "jax_devices": [str(d) for d in jax.devices()],
        "versions": versions,
        "jaxpriv_path": jaxpriv_path,
    }


def header_rows(info: dict, mode: str) -> list[list[str]]:
    """The rows of the machine table printed at the top of every benchmark."""
    v = info["versions"]
    return [
        ["date", info["date"]],
        ["mode", mode],
        ["platform", info["platform"]],
        ["processor", f"{info['processor']} ({info['machine']})"],
        ["CPUs", f"{info['cpu_count']} ({info['cpus_usable']} usable)"],
        ["load average at start", " / ".join(f"{x:.2f}" for x in info["load_average_at_start"] or [])],
        ["JAX backend / devices", f"{info['jax_backend']}: {', '.join(info['jax_devices'])}"],
        ["versions", ", ".join(f"{k} {val}" for k, val in v.items()) + f", python {info['python']}"],
        ["jaxpriv from", info["jaxpriv_path"]],
    ]


def print_header(info: dict, mode: str, title: str, note: str) -> None:
    """The benchmark's title, the machine table and a note on how to read the timings."""
    say(f"# {title}")
    say()
    lines = ["|  |  |", "|---|---|"] + [f"| {k} | {v} |" for k, v in header_rows(info, mode)]
    say("\n".join(lines))
    say()
    say(note)
    say()


def table(header, rows, cell=str) -> str:
    """A markdown table; ``cell`` formats every non-string entry."""
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(c if isinstance(c, str) else cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def ms(seconds) -> str:
    """A duration in ms below one second, in s above; "–" for None."""
    if seconds is None:
        return "–"
    return f"{seconds * 1e3:.3g} ms" if seconds < 1 else f"{seconds:.3g} s"


def finish(results: dict, checks: dict, t_start: float, json_path: str | None) -> int:
    """Record the total time and end-of-run load, write ``json_path`` if given; exit status 1 if a check failed."""
    results["checks"] = checks
    results["total_s"] = time.perf_counter() - t_start
    try:
        results["machine"]["load_average_at_end"] = os.getloadavg()
    except (OSError, KeyError):
        pass
    say(f"\nTotal benchmark time: {results['total_s']:.0f} s.")
    if json_path:
        with open(json_path, "w") as f:
            json.dump(results, f, indent=1, default=float)
        say(f"Results written to {json_path}.")
    return 0 if all(checks.values()) else 1
