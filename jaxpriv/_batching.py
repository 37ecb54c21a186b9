"""Chunked, sharded evaluation of a vectorised kernel over many configurations (MATH §0.5).

A sweep of 10⁷ settings is cut into fixed-size chunks (one compiled shape, bounded memory), each chunk is
laid out over every available device with ``jax.sharding`` (data parallel along the batch axis), and the
results are gathered into preallocated numpy arrays. A progress bar appears for sweeps of several chunks.
"""

from __future__ import annotations

from typing import Callable, Sequence

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from . import _tiers


def default_chunk() -> int:
    """Configurations per compiled chunk when the caller names none: 256 on the CPU, 4096 on an accelerator.

    Every padded size is a compiled program (:func:`padded_batch_size`), so on the CPU a query of any size
    compiles at most three per kernel (1, 16, 256 rows). The CPU kernels walk their batch in blocks of 128
    configurations anyway, so 256-row chunks sweep as fast as 4096-row ones (a 10⁵-setting ε sweep: 9,881
    against 10,043 configurations/s on a 2-core CPU); an accelerator wants wide batches.
    """
    return 256 if jax.default_backend() == "cpu" else 4096


def padded_batch_size(n: int, chunk: int, multiple: int) -> int:
    """Padded batch size: 1 or 16 for small queries, then powers of two from 256, at most ``chunk``.

    Every distinct size is a separate compilation of a large kernel, so small sizes are coarse; large
    ones waste at most half a batch.
    """
    size = 1 if n <= 1 else 16 if n <= 16 else max(256, 1 << (n - 1).bit_length())
    size = min(size, chunk)
    return -(-size // multiple) * multiple


#: A query smaller than one chunk runs as pieces of the 16-row program while it needs at most this many:
#: on the CPU a 16-row call costs 1/17 to 1/6 of a 256-row call of the same kernel (clone sums, the
#: calibrators' root finders, the exact-RDP ε; 2-core CPU), so 11 pieces never cost more per setting
#: than the settings asked one by one, while padding 17 settings to 256 rows cost up to 7× that.
MAX_PIECES = 11


def call_plan(n: int, chunk: int, devices: int = 1, alone_below: int = 3) -> list[tuple[int, int, int]]:
    """How :func:`map_chunked` cuts ``n`` settings into kernel calls: ``(start, stop, padded size)`` each.

    A query of fewer than ``alone_below`` settings runs row by row (the 1-row program): a 16-row call costs
    at least two single ones on every kernel measured (the exact-RDP ε: 2.3), about 8 for a root finder,
    whose callers pass 8. A query smaller than a chunk runs in pieces of the 16-row program when it needs
    at most :data:`MAX_PIECES` of them (the last one padded), otherwise in one padded chunk; a larger query
    runs in whole chunks, the last one padded. Each query uses one of :func:`padded_batch_size`'s sizes, so
    no query compiles a new program, and none compiles two.

    Example:
      >>> from jaxpriv._batching import call_plan
      >>> call_plan(40, 256)
      [(0, 16, 16), (16, 32, 16), (32, 40, 16)]
      >>> call_plan(2, 256)
      [(0, 1, 1), (1, 2, 1)]
    """
    full = padded_batch_size(n, chunk, devices)
    piece = padded_batch_size(16, chunk, devices)
    if n < alone_below:
        single = padded_batch_size(1, chunk, devices)
        return [(start, start + 1, single) for start in range(n)]
    if n <= piece or n >= chunk or chunk <= piece or n > MAX_PIECES * piece:
        return [(start, min(start + full, n), full) for start in range(0, n, full)]
    return [(start, min(start + piece, n), piece) for start in range(0, n, piece)]


def power_of_two(x: int) -> int:
    """The smallest power of two ≥ x (≥ 1): a static shape that changes only when x doubles."""
    return 1 << max(0, (int(x) - 1).bit_length())


#: Fewest rows of a row-padded kernel call: a single setting and a batch of up to four share one compiled
#: program (a row costs microseconds, a program seconds to compile).
MIN_ROWS = 4


def row_bucket(rows: int, most: int) -> int:
    """The static row count a call with ``rows`` rows is padded to: the power of two ≥ ``rows``, at least
    :data:`MIN_ROWS` and at most ``most`` (the caller's chunk)."""
    return min(most, max(MIN_ROWS, power_of_two(rows)))


def static_size(x: int) -> int:
    """Round a static length (a window, a group or row count) up to the ladder 64, 96, 128, 192, 256, … (2^k
    and 3·2^(k−1)): every distinct static shape is a separate compilation (seconds), so inputs that differ
    by up to half share one program, at most 1.5× the work of an exact fit."""
    if x <= 64:
        return 64
    power = 1 << (x - 1).bit_length()  # the power of two ≥ x
    return power * 3 // 4 if x <= power * 3 // 4 else power


def status_bar(description: str, total: int, completed: int = 0):
    """A started rich progress bar (description, bar, done/total, elapsed and remaining time, a free
    ``status`` field): the package's one progress display, for loops over steps, rounds or chunks (the
    trainer, the federated simulator and the systems built on it, PLD accounting, :func:`map_chunked`);
    returns ``(bar, task)``. The caller updates it and calls ``bar.stop()``."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    bar = Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed:,.0f}/{task.total:,.0f}"),
                   TimeElapsedColumn(), TimeRemainingColumn(), TextColumn("{task.fields[status]}"))
    bar.start()
    return bar, bar.add_task(description, total=total, completed=completed, status="")


def map_rows(fn, *rows):
    """``fn`` applied to each row (the leading axis) of the arrays in ``rows``, inside a traced program.

    On the CPU, a loop over rows (``lax.map``): one row of a grid kernel already fills the vector units, so
    batching rows buys no speed there and the batching interpreter costs time: on the PLD programs (2-core
    CPU, interleaved fresh processes) a first ε took 0.82× the CPU of the vmapped program and 64 settings
    warm 0.77× (bench/README, "Rows in a loop"). Rows sharded over several CPU devices are looped over on
    each device (``shard_map``), so every row runs the same loop body whatever the device count (the
    answers agree to 1e-13 relative, tests/test_distributed.py). On accelerators, ``vmap`` keeps rows parallel.

    >>> import jax.numpy as jnp
    >>> map_rows(lambda a, b: a @ b, jnp.ones((3, 2)), jnp.arange(6.0).reshape(3, 2)).tolist()
    [1.0, 5.0, 9.0]
    """
    if jax.default_backend() != "cpu":
        return jax.vmap(fn)(*rows)

    def loop(*local):
        return jax.lax.map(lambda row: fn(*row), local)

    devices = jax.device_count()
    if devices == 1 or jax.tree_util.tree_leaves(rows)[0].shape[0] % devices:  # one device, or unshardable rows
        return loop(*rows)
    by_row = (PartitionSpec("batch"),) * len(rows)
    return jax.shard_map(loop, mesh=batch_sharding().mesh, in_specs=by_row, out_specs=PartitionSpec("batch"),
                         check_vma=False)(*rows)


def batch_sharding() -> NamedSharding:
    """A 1-D mesh over all devices, sharding the leading (batch) axis."""
    devices = np.asarray(jax.devices())
    return NamedSharding(Mesh(devices, ("batch",)), PartitionSpec("batch"))


def to_devices(tree, sharding: NamedSharding):
    """Place numpy arrays (identical in every process) on ``sharding``. In a multi-process run (see
    :mod:`jaxpriv.distributed`) each process supplies only its own devices' shards of the global array."""
    if jax.process_count() == 1:
        return jax.device_put(tree, sharding)

    def place(x):
        x = np.asarray(x)
        return jax.make_array_from_callback(x.shape, sharding, lambda index: x[index])

    return jax.tree_util.tree_map(place, tree)


def to_host(x) -> np.ndarray:
    """A JAX array as numpy; one spread over several processes' devices is gathered in every process."""
    if getattr(x, "is_fully_addressable", True) or x.is_fully_replicated:
        return np.asarray(x)
    from jax.experimental import multihost_utils

    return np.asarray(multihost_utils.process_allgather(x, tiled=True))


def map_chunked(
    kernel: Callable[..., tuple],
    inputs: Sequence[np.ndarray],
    *,
    chunk_size: int | None = None,
    progress: bool | None = None,
    description: str = "evaluating",
    shard: bool = True,
    alone_below: int = 3,
) -> tuple[np.ndarray, ...]:
    """Apply ``kernel`` (jitted, batch-parallel along axis 0) to flat float64 ``inputs`` of equal length.

    Args:
      kernel: maps arrays of shape (B,) to a tuple of arrays of shape (B,) (or (B, ...)).
      inputs: 1-D numpy arrays of the same length N (already validated and broadcast), or of length 1
        for a value shared by every configuration (expanded one chunk at a time, not N times).
      chunk_size: configurations per chunk (rounded up to a multiple of the device count); bounds
        memory. Defaults to :func:`default_chunk` (256 on the CPU, 4096 on an accelerator).
      progress: show a progress bar; default: only when there is more than one chunk.
      description: label of the progress bar.
      shard: lay each chunk out over every device (the default). ``False`` hands the kernel the numpy
        chunk itself, padded to a size that does not depend on the device count: for a kernel that works
        eagerly on the host, whose results then agree bit for bit on any number of devices and processes.
      alone_below: a query of fewer settings than this runs row by row (:func:`call_plan`); a root
        finder, whose 16-row call costs about 8 single ones, passes 8 (the clone sums, 16).

    Returns:
      Tuple of numpy arrays of length N, one per kernel output.
    """
    if chunk_size is not None and (isinstance(chunk_size, bool) or not isinstance(chunk_size, (int, np.integer))
                                   or chunk_size < 1):
        raise ValueError(f"chunk_size must be None or an integer in [1, inf), got {chunk_size!r}")
    n = max(int(x.shape[0]) for x in inputs)
    devices = jax.device_count() if shard else 1
    chunk = chunk_size or default_chunk()
    plan = call_plan(n, chunk, devices, alone_below)
    sharding = batch_sharding() if shard else None
    show = progress if progress is not None else n > chunk
    outputs: list[np.ndarray] | None = None

    def run(start: int, stop: int, size: int) -> None:
        nonlocal outputs
        # Pad a short call by repeating its last configuration: valid input, one of the compiled shapes.
        padded = [
            np.broadcast_to(x, (size,) + x.shape[1:]) if x.shape[0] == 1
            else np.concatenate([x[start:stop], np.repeat(x[stop - 1 : stop], size - (stop - start), axis=0)])
            for x in inputs
        ]
        # a sweep's full chunks run the kernels' optimised programs at once (jaxpriv._tiers)
        with _tiers.optimised(when=size >= _tiers.SWEEP_SETTINGS):
            result = [to_host(r) for r in kernel(*(to_devices(padded, sharding) if shard else padded))]
        if outputs is None:
            outputs = [np.empty((n,) + r.shape[1:], dtype=r.dtype) for r in result]
        for out, r in zip(outputs, result):
            out[start:stop] = r[: stop - start]

    if show:
        bar, task = status_bar(description, n)
        try:
            for call in plan:
                run(*call)
                bar.update(task, advance=call[1] - call[0])
        finally:
            bar.stop()
    else:
        for call in plan:
            run(*call)
    return tuple(outputs)
