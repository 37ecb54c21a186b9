"""Helpers shared by the command-line tests: run the CLI in-process, edit an argv, and run many argvs in one
fresh interpreter (to check that argument errors come before JAX is imported)."""

import json
import os
import subprocess
import sys

from jaxpriv.cli import main

_FRESH = """
import contextlib, io, json, sys, time
from jaxpriv.cli import main
results = []
for argv in json.loads(sys.argv[1]):
    out, err = io.StringIO(), io.StringIO()
    start = time.perf_counter()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    results.append({"code": code, "stdout": out.getvalue(), "stderr": err.getvalue(),
                    "seconds": time.perf_counter() - start})
print(json.dumps({"results": results, "jax_imported": "jax" in sys.modules}))
"""


def host_devices_env(devices: int, **extra) -> dict:
    """This process's environment for a subprocess that sees ``devices`` CPU devices: the device-count flag
    added to the XLA flags already set (the suite's compiler option, conftest.py, travels with them)."""
    flags = f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count={devices}".strip()
    return {**os.environ, "XLA_FLAGS": flags, **extra}


def run(capsys, *argv):
    """(exit code, stdout, stderr) of ``jaxpriv ARGV`` run in this process (numbers are passed as text)."""
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def replace_arg(argv, flag, value):
    """A copy of ``argv`` with the value after ``flag`` replaced."""
    argv = list(argv)
    argv[argv.index(flag) + 1] = value
    return argv


def run_fresh(argvs, timeout=300):
    """Run each argv in one fresh interpreter: {"results": [{code, stdout, stderr, seconds}], "jax_imported": bool}."""
    done = subprocess.run([sys.executable, "-c", _FRESH, json.dumps(argvs)], capture_output=True, text=True,
                          timeout=timeout)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)
