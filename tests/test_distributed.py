"""Data parallelism over devices and processes (jaxpriv.distributed): one process with 4 forced CPU devices,
and two processes on 127.0.0.1 with two CPU devices each, against one process with one device, same seed
(each run a fresh interpreter: the device count is fixed when JAX starts).

The 4-device step really is partitioned: its compiled program adds the devices' clipped sums with an
all-reduce. Each process trains the same DP-SGD model (its batches sharded over the 4 devices of both processes) and
runs two accounting sweeps sharded the same way (``dpsgd_epsilon`` over 8 configurations, the PLD
accountant over 4). Every process must end with the single-process model (float32 rounding: only the
order of the clipped sum's additions differs), the same ε and the same sweep answers (to 1e-13 relative). An unreachable
coordinator fails with a clear message within the timeout, and bad arguments name themselves.
"""

import json
import socket
import subprocess
import sys
import time

import jax
import numpy as np
import pytest

from cli_helpers import host_devices_env
from jaxpriv import distributed

_RUN = """
import json, os, sys
from jaxpriv import distributed
if int(os.environ.get("JAX_NUM_PROCESSES", "1")) > 1:
    distributed.initialize(process_id=int(sys.argv[1]), timeout=120)  # address and count: environment
import jax, numpy as np, optax
from flax import nnx
import jaxpriv
from jaxpriv import accounting, events
from jaxpriv.train import data, dpsgd

d = data.load("breast_cancer", seed=0)
model = dpsgd.MLP(30, (16,), 2, rngs=nnx.Rngs(3))  # as `jaxpriv train --seed 3 --hidden 16` builds it
config = dpsgd.DPSGDConfig(epochs=2, batch_size=64, epsilon=3.0, delta=1e-5, seed=3)
result = dpsgd.train(model, optax.sgd(0.5), d, config, progress=False)
params = nnx.state(model, nnx.Param)
graphdef, _, rest = nnx.split(model, nnx.Param, ...)
step = dpsgd.make_step(graphdef, rest, optax.sgd(0.1), dpsgd.cross_entropy_loss, None, 1.0)
x, y = np.asarray(d.x_train), np.asarray(d.y_train)
program = step.lower(params, optax.sgd(0.1).init(params), x, y, np.ones(x.shape[0]), np.arange(64), np.ones(64, bool),
                     jax.random.key(0)).compile().as_text()
sweep = jaxpriv.dpsgd_epsilon(q=np.geomspace(1e-3, 0.1, 8), sigma=1.1, steps=1000, delta=1e-5)
step = events.PoissonSampled(np.array([0.01, 0.02, 0.05, 0.1]), events.Gaussian(1.5))
pld = accounting.epsilon(events.SelfComposed(step, 100), 1e-5, accountant="pld")
print(json.dumps({"process": jax.process_index(), "devices": jax.device_count(), "epsilon": result.epsilon,
                  "accuracy": result.test_accuracy, "all_reduce": "all-reduce" in program,
                  "steps": result.steps, "sweep": np.asarray(sweep).tolist(), "pld": np.asarray(pld).tolist(),
                  "sharding": str(jax.tree_util.tree_leaves(params)[0].sharding),
                  "params": np.concatenate([np.ravel(p) for p in jax.tree_util.tree_leaves(params)]).tolist()}))
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(devices: int, **extra) -> dict:
    # One tier of the PLD programs in every process (jaxpriv._tiers): which calls of a process run the quick
    # form depends on how its sweep is cut into chunks, and the tiers' answers differ in the last bits.
    return host_devices_env(devices, JAXPRIV_CACHE_DIR=jax.config.jax_compilation_cache_dir or "",
                            JAXPRIV_QUICK_TIER="0", **extra)


def _two_processes(command, env: dict) -> list[subprocess.CompletedProcess]:
    """Start ``command(i)`` for processes i = 0, 1 at once (they wait for each other) and collect both."""
    procs = [subprocess.Popen(command(i), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
             for i in range(2)]
    try:
        outs = [p.communicate(timeout=600) for p in procs]
    finally:
        for p in procs:
            p.kill()
    return [subprocess.CompletedProcess(p.args, p.returncode, *out) for p, out in zip(procs, outs)]


def _result(done: subprocess.CompletedProcess) -> dict:
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def runs():
    single = _result(subprocess.run([sys.executable, "-c", _RUN], capture_output=True, text=True, env=_env(1),
                                    timeout=600))
    address = f"127.0.0.1:{_free_port()}"
    multi = _two_processes(lambda i: [sys.executable, "-c", _RUN, str(i)],
                           _env(2, JAX_COORDINATOR_ADDRESS=address, JAX_NUM_PROCESSES="2"))
    four = _result(subprocess.run([sys.executable, "-c", _RUN], capture_output=True, text=True, env=_env(4),
                                  timeout=600))
    return single, [_result(done) for done in multi], four


def test_four_devices_train_the_single_device_model_with_one_all_reduce(runs):
    single, _, four = runs
    assert four["devices"] == 4 and four["all_reduce"] and not single["all_reduce"]
    assert four["epsilon"] == single["epsilon"] and four["steps"] == single["steps"]
    np.testing.assert_allclose(four["params"], single["params"], rtol=0, atol=1e-6)
    np.testing.assert_allclose(four["sweep"], single["sweep"], rtol=1e-13, atol=0)


def test_two_processes_train_the_single_process_model(runs):
    single, multi, _ = runs
    assert single["devices"] == 1 and [r["devices"] for r in multi] == [4, 4]
    assert sorted(r["process"] for r in multi) == [0, 1]
    for r in multi:
        assert r["all_reduce"]
        assert "'batch': 4" in r["sharding"]  # the parameters live on the 4-device mesh of both processes
        assert r["epsilon"] == single["epsilon"] and r["steps"] == single["steps"]
        np.testing.assert_allclose(r["params"], single["params"], rtol=0, atol=1e-6)


def test_two_processes_answer_the_accounting_sweeps_like_one(runs):
    single, multi, _ = runs
    # Configurations are independent, but each device runs a smaller compiled shape, whose vectorised sums
    # may round a last bit differently (each answer is a certified upper bound either way).
    for r in multi:
        np.testing.assert_allclose(r["sweep"], single["sweep"], rtol=1e-13, atol=0)
        np.testing.assert_allclose(r["pld"], single["pld"], rtol=1e-13, atol=0)


def test_the_command_line_trains_over_two_processes(tmp_path, runs):
    address = f"127.0.0.1:{_free_port()}"
    # the run of `runs` (same model, data, seed and optimizer: its compiled programs are in the shared cache)
    argv = ["train", "--dataset", "breast_cancer", "--epsilon", "3", "--epochs", "2", "--batch-size", "64",
            "--hidden", "16", "--lr", "0.5", "--momentum", "0", "--seed", "3", "--quiet",
            "--coordinator", address, "--num-processes", "2"]
    done = _two_processes(lambda i: [sys.executable, "-m", "jaxpriv", *argv, "--process-id", str(i),
                                     "--json", str(tmp_path / f"run{i}.json")], _env(2))
    assert [d.returncode for d in done] == [0, 0], [d.stderr[-2000:] for d in done]
    summary = json.loads((tmp_path / "run0.json").read_text())
    library = runs[1][0]
    assert summary["epsilon"] == library["epsilon"] and summary["steps"] == library["steps"]
    assert summary["test_accuracy"] == library["accuracy"]
    assert not (tmp_path / "run1.json").exists() and "test accuracy" not in done[1].stdout  # process 0 alone reports
    assert "test accuracy" in done[0].stdout


def test_an_unreachable_coordinator_fails_clearly_and_in_bounded_time():
    code = ("from jaxpriv import distributed\n"
            f"distributed.initialize('127.0.0.1:{_free_port()}', num_processes=2, process_id=1, timeout=3)")
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert time.monotonic() - started < 30
    assert done.returncode == 1
    assert "RuntimeError: could not reach the coordinator at 127.0.0.1:" in done.stderr
    assert "within 3 s" in done.stderr


@pytest.mark.parametrize("kwargs, message", [
    (dict(coordinator_address="localhost", num_processes=2, process_id=0), "coordinator_address must be 'host:port'"),
    (dict(coordinator_address="h:70000", num_processes=2, process_id=0), r"port in \[1, 65535\]"),
    (dict(coordinator_address="h:1", num_processes=0, process_id=0), r"num_processes must be an integer in \[1, inf\)"),
    (dict(coordinator_address="h:1", num_processes=2.0, process_id=0), "num_processes must be an integer"),
    (dict(coordinator_address="h:1", num_processes=2, process_id=-1), r"process_id must be an integer in \[0, 1\]"),
    (dict(coordinator_address="h:1", num_processes=2, process_id=0, timeout=0), r"timeout must be .* \(0, inf\)"),
    (dict(coordinator_address="h:1", num_processes=2, process_id=0, timeout=True), "timeout must be"),
])
def test_bad_arguments_name_themselves(kwargs, message):
    with pytest.raises(ValueError, match=message):
        distributed.initialize(**kwargs)


def test_missing_arguments_point_to_the_environment(monkeypatch):
    for name in ("JAX_COORDINATOR_ADDRESS", "JAX_NUM_PROCESSES", "JAX_PROCESS_ID"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(ValueError, match="set JAX_COORDINATOR_ADDRESS"):
        distributed.initialize()
    with pytest.raises(ValueError, match="set JAX_NUM_PROCESSES"):
        distributed.initialize("h:1")
    monkeypatch.setenv("JAX_NUM_PROCESSES", "two")
    with pytest.raises(ValueError, match="JAX_NUM_PROCESSES must be an integer, got 'two'"):
        distributed.initialize("h:1")
