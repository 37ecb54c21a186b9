"""Multi-process (multi-host) runs: join every process's devices into one set before any JAX work.

After :func:`initialize`, ``jax.devices()`` lists the devices of every process, and the library's data-
parallel paths use all of them with no other change (JAX's multi-controller model: every process runs
the same program on the same inputs):

* the DP-SGD step (:func:`jaxpriv.train.dpsgd.train`, :mod:`jaxpriv.train.private`) shards each batch's
  examples over every process's devices; the clipped sums are added by one all-reduce and the noise is
  drawn from the same replicated key, so the update — and the privacy analysis — is that of one machine;
* the accounting sweeps (``jaxpriv.dpsgd_epsilon``, :mod:`jaxpriv.calibrate`, the PLD accountant) shard
  their configurations over every process's devices, and every process receives every answer.

The coordinator (process 0 hosts it) is named by the arguments or, when they are absent, by the
environment: ``JAX_COORDINATOR_ADDRESS`` (``host:port``, as JAX documents), ``JAX_NUM_PROCESSES`` and
``JAX_PROCESS_ID``. On CPU the processes exchange data with Gloo.

Example (two processes on one machine; run the same script with ``JAX_PROCESS_ID=0`` and ``=1``)::

    import jaxpriv.distributed
    jaxpriv.distributed.initialize("127.0.0.1:1234", num_processes=2)   # process id from JAX_PROCESS_ID
    import jaxpriv
    print(jaxpriv.dpsgd_epsilon(q=[0.01, 0.02], sigma=1.1, steps=1000, delta=1e-5))  # same in both
"""

from __future__ import annotations

import os
import socket
import time

__all__ = ["initialize", "resolve"]


def _integer(name: str, value, env: str, lo: int, hi: int | None) -> int:
    if value is None:
        value = os.environ.get(env)
        if value is None:
            raise ValueError(f"{name} is required: pass it or set {env}")
        try:
            value = int(value)
        except ValueError:
            raise ValueError(f"{env} must be an integer, got {os.environ[env]!r}") from None
    if isinstance(value, bool) or not isinstance(value, int) or value < lo or (hi is not None and value > hi):
        valid = f"[{lo}, {hi}]" if hi is not None else f"[{lo}, inf)"
        raise ValueError(f"{name} must be an integer in {valid}, got {value!r}")
    return value


def _address(value) -> tuple[str, str, int]:
    """(the address as given, host, port)."""
    if value is None:
        value = os.environ.get("JAX_COORDINATOR_ADDRESS")
        if value is None:
            raise ValueError("coordinator_address is required: pass it ('host:port') or set JAX_COORDINATOR_ADDRESS")
    host, _, port = str(value).rpartition(":")
    if not host or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise ValueError(f"coordinator_address must be 'host:port' with a port in [1, 65535], got {value!r}")
    return str(value), host.strip("[]"), int(port)  # "[::1]:80": JAX takes the brackets, sockets do not


def _wait_for(host: str, port: int, timeout: float) -> None:
    """Return once the coordinator accepts a TCP connection; raise if it does not within ``timeout`` s.
    (JAX's own client aborts the whole process with a C++ check failure instead.)"""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection((host, port), timeout=min(2.0, timeout)):
                return
        except OSError as error:
            if time.monotonic() >= deadline:
                raise RuntimeError(
                    f"could not reach the coordinator at {host}:{port} within {timeout:g} s ({error}); start "
                    "process 0 first, or check the address, the port and the firewall") from None
        time.sleep(0.2)


def resolve(coordinator_address: str | None = None, num_processes: int | None = None,
            process_id: int | None = None) -> tuple[str, int, int]:
    """The run's ``("host:port", num_processes, process_id)`` from the arguments, each missing one from the
    environment (``JAX_COORDINATOR_ADDRESS``, ``JAX_NUM_PROCESSES``, ``JAX_PROCESS_ID``); checks only,
    no JAX (the command line calls it before importing JAX).

    Raises:
      ValueError: naming the missing or out-of-range argument.

    Example:
      >>> from jaxpriv import distributed
      >>> distributed.resolve("127.0.0.1:1234", 2, 1)
      ('127.0.0.1:1234', 2, 1)
    """
    address, _, _ = _address(coordinator_address)
    num_processes = _integer("num_processes", num_processes, "JAX_NUM_PROCESSES", 1, None)
    process_id = _integer("process_id", process_id, "JAX_PROCESS_ID", 0, num_processes - 1)
    return address, num_processes, process_id


def initialize(coordinator_address: str | None = None, num_processes: int | None = None,
               process_id: int | None = None, *, timeout: float = 60.0) -> None:
    """Join a run of ``num_processes`` processes coordinated by process 0 at ``coordinator_address``
    (``jax.distributed.initialize``, with the checks and the bounded wait it lacks).

    Call it once per process, before any other JAX call (JAX fixes its devices at its first use).

    Args:
      coordinator_address: ``"host:port"`` of process 0 (default: ``JAX_COORDINATOR_ADDRESS``).
      num_processes: the number of processes, ≥ 1 (default: ``JAX_NUM_PROCESSES``).
      process_id: this process's index in [0, num_processes − 1] (default: ``JAX_PROCESS_ID``).
      timeout: seconds, > 0, to wait for the coordinator (other processes) and for every process to join.

    Raises:
      ValueError: an argument is missing (and not in the environment) or out of range.
      RuntimeError: process ``process_id`` ≥ 1 cannot reach the coordinator within ``timeout``.

    Example:
      >>> from jaxpriv import distributed
      >>> distributed.initialize("127.0.0.1:1234", num_processes=2, process_id=2)
      Traceback (most recent call last):
      ...
      ValueError: process_id must be an integer in [0, 1], got 2
    """
    address, num_processes, process_id = resolve(coordinator_address, num_processes, process_id)
    _, host, port = _address(address)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout < float("inf"):
        raise ValueError(f"timeout must be a number of seconds in (0, inf), got {timeout!r}")
    if process_id > 0:
        _wait_for(host, port, timeout)
    import jax

    jax.config.update("jax_cpu_collectives_implementation", "gloo")  # CPU devices talk over Gloo (no-op on GPUs)
    jax.distributed.initialize(coordinator_address=address, num_processes=num_processes,
                               process_id=process_id, initialization_timeout=max(1, int(round(timeout))))
