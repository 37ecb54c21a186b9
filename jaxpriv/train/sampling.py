"""Poisson sampling on device, with fixed-shape padded batches (MATH §6, DP-SGD).

Every step includes record i independently with probability q_i: one rate for all records (DP-SGD),
or one per record (IDP-SGD "Sample", rPDP-FL). The realised batch has a random size, but a jitted step
needs a fixed shape, so the selected indices are padded to a *bucket* with a boolean mask. Buckets are
few fixed sizes — the first one a high quantile of the batch-size law, then doublings up to the
dataset size — so a step compiles once per bucket, the second bucket is almost never used, and no
sampled record is ever dropped.

Inclusion is decided on 32-bit random integers: record i is in the batch when its draw is below
⌊q_i·2³²⌋ (always when q_i = 1). Its inclusion probability is therefore ⌊q_i·2³²⌋/2³² ∈ (q_i − 2⁻³², q_i]:
never above q_i, so accounting at q_i (the subsampled-Gaussian RDP increases with q) stays conservative,
unlike a float32 uniform compared with q_i, which can exceed q_i by 2⁻²⁴.

Sampling is stateless: the draw of step t uses ``fold_in(key(seed), t)``, so (seed, t) is the whole
sampler state — a resumed run draws exactly the batches the uninterrupted run would have drawn.
"""

from __future__ import annotations

import dataclasses
import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

from .._numerics import check_array

__all__ = ["Batch", "PoissonSampler", "AllocationSampler", "FixedSizeSampler", "CyclicPoissonSampler",
           "expected_batch_size", "bucket_sizes", "inclusion_probability"]

_TWO32 = 2.0**32


def _check_rates(rates) -> np.ndarray:
    arr = np.asarray(check_array("rates", rates, 0.0, 1.0))
    if arr.ndim != 1:
        raise ValueError(f"rates must be a 1-D array with one rate per record, got shape {arr.shape}")
    if not np.any(arr > 0):
        raise ValueError("rates must not all be 0 (no record could ever be sampled)")
    return arr


def expected_batch_size(rates) -> float:
    """Expected batch size Σ_i q_i of Poisson sampling: the normaliser of DP-SGD's noisy sum (MATH §6;
    never the realised size, which would leak through the division).

    Args:
      rates: 1-D array of per-record rates in [0, 1], not all 0.

    Returns:
      Σ q_i as a Python float (float64 arithmetic).

    Example:
      >>> from jaxpriv.train.sampling import expected_batch_size
      >>> expected_batch_size([0.5, 0.25, 0.25])
      1.0
    """
    return float(np.sum(_check_rates(rates), dtype=np.float64))


def inclusion_probability(rates) -> np.ndarray:
    """The exact inclusion probability the sampler realises for each rate: ⌊q·2³²⌋/2³², and 1 for q = 1.

    Always in (q − 2⁻³², q] (module docstring), so privacy accounted at q is never optimistic.

    Args:
      rates: 1-D per-record rates in [0, 1], not all 0.

    Returns:
      float64 array of the realised inclusion probabilities.

    Example:
      >>> from jaxpriv.train.sampling import inclusion_probability
      >>> p = inclusion_probability([0.1, 1.0])
      >>> bool(0.1 - 2**-32 < p[0] <= 0.1), float(p[1])
      (True, 1.0)
    """
    q = _check_rates(rates)
    return np.where(q >= 1.0, 1.0, _thresholds(q).astype(np.float64) / _TWO32)


def _thresholds(q: np.ndarray) -> np.ndarray:
    # float64 holds q·2³² to well under one unit, so floor() rounds toward the safe side.
    return np.minimum(np.floor(q * _TWO32), _TWO32 - 1).astype(np.uint32)


def bucket_sizes(rates, *, overflow: float = 1e-6, multiple: int = 8, below=()) -> tuple[int, ...]:
    """Fixed padded batch sizes for Poisson sampling with these rates.

    The bound bucket b₀ holds the realised size S = Σ_i Bernoulli(q_i) with probability ≥ 1 − ``overflow``
    by Bernstein's inequality, P(S ≥ μ + t) ≤ exp(−t² / (2(v + t/3))) with μ = Σq_i, v = Σq_i(1−q_i),
    rounded up to a multiple of ``multiple``. The next buckets double b₀, and the last one is the number
    of records, so every realisation fits in some bucket (nothing is ever dropped) while b₀ is the
    largest one used in practice. ``below`` adds finer buckets under b₀ at μ + k·√v for each k (standard
    deviations of S): each is one more compiled step, and in exchange a step pads to about μ + √v rows
    on average instead of b₀ (the trainer's default, (1, 3): 84% of steps at μ + √v, 16% at μ + 3√v).

    Args:
      rates: 1-D per-record rates in [0, 1], not all 0.
      overflow: target probability in (0, 1) that a step needs more than the bound bucket b₀.
      multiple: bucket sizes are multiples of this integer ≥ 1 (except the last, the record count).
      below: standard-deviation offsets k ≥ 0 of finer buckets under b₀ (default none).

    Returns:
      Increasing tuple of bucket sizes; the last equals the number of records.

    Example:
      >>> from jaxpriv.train.sampling import bucket_sizes
      >>> bucket_sizes([0.01] * 10_000)
      (160, 320, 640, 1280, 2560, 5120, 10000)
      >>> bucket_sizes([0.25] * 1024, below=(1, 3))   # μ = 256, √v ≈ 13.9
      (272, 304, 336, 672, 1024)
    """
    q = _check_rates(rates)
    overflow = float(check_array("overflow", overflow, 0.0, 1.0, lo_open=True, hi_open=True))
    multiple = int(check_array("multiple", multiple, 1.0, np.inf, integer=True))
    try:
        offsets = np.asarray(below, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError):
        raise ValueError(f"below must be standard-deviation offsets k ≥ 0 (numbers), got {below!r}") from None
    if offsets.size:
        check_array("below", offsets, 0.0, np.inf)
    mean, var = float(q.sum()), float((q * (1.0 - q)).sum())
    log_inv = math.log(1.0 / overflow)
    t = log_inv / 3.0 + math.sqrt((log_inv / 3.0) ** 2 + 2.0 * var * log_inv)

    def rounded(size: float) -> int:
        return max(multiple, multiple * math.ceil(math.ceil(size) / multiple))

    first, n = rounded(mean + t), q.size
    sizes = sorted({rounded(mean + k * math.sqrt(var)) for k in offsets} - {first})
    sizes = [b for b in sizes if b < min(first, n)]
    size = first
    while size < n:
        sizes.append(size)
        size *= 2
    sizes.append(n)
    return tuple(sizes)


@dataclasses.dataclass(frozen=True)
class Batch:
    """One Poisson sample, padded: ``indices`` (bucket,) int32 record ids (padding points at record 0),
    ``mask`` (bucket,) bool — True for sampled records — and ``size``, the realised batch size."""

    indices: jax.Array
    mask: jax.Array
    size: int
    step: int


@jax.jit
def _draw(key, thresholds, always):
    bits = jax.random.bits(key, thresholds.shape, dtype=jnp.uint32)
    selected = (bits < thresholds) | always
    return selected, jnp.sum(selected, dtype=jnp.int32)


@jax.jit
def _draw_block(key, steps, thresholds, always):
    return jax.vmap(lambda t: _draw(jax.random.fold_in(key, t), thresholds, always))(steps)


@functools.partial(jax.jit, static_argnames=("size",))
def _pad(selected, size: int):
    (indices,) = jnp.nonzero(selected, size=size, fill_value=0)
    return indices.astype(jnp.int32), jnp.arange(size) < jnp.sum(selected)


class PoissonSampler:
    """Poisson sampling of record indices with per-record rates, padded to fixed bucket sizes.

    The draw runs on device (one uint32 per record); only the realised size crosses to the host, to
    pick the bucket. Source: DP-SGD with Poisson sampling (Abadi et al. 2016; MATH §6); per-record rates
    as in IDP-SGD "Sample" (Boenisch et al. 2023) and rPDP-FL (Liu et al., MATH §6).

    Args:
      rates: scalar rate shared by ``n`` records, or a 1-D array with one rate per record, in [0, 1].
      seed: integer ≥ 0; the batch of step t depends only on (seed, t, rates).
      n: number of records when ``rates`` is a scalar.
      buckets: increasing bucket sizes, the last ≥ the number of records (default :func:`bucket_sizes`).

    Example:
      >>> from jaxpriv.train.sampling import PoissonSampler
      >>> sampler = PoissonSampler(0.01, seed=0, n=10_000)
      >>> batch = sampler.sample(step=0)
      >>> batch.indices.shape == batch.mask.shape == (160,), int(batch.mask.sum()) == batch.size
      (True, True)
    """

    def __init__(self, rates, *, seed: int, n: int | None = None, buckets=None):
        if np.ndim(rates) == 0:
            if n is None:
                raise ValueError("n (the number of records) is required when rates is a scalar")
            n = int(check_array("n", n, 1.0, np.inf, integer=True))
            rates = np.full(n, float(check_array("rates", rates, 0.0, 1.0)))
        self.rates = _check_rates(rates)
        self.seed = int(check_array("seed", seed, 0.0, 2.0**63 - 1, integer=True))
        if buckets is None:
            buckets = bucket_sizes(self.rates)
        buckets = np.asarray(check_array("buckets", buckets, 1.0, np.inf, integer=True)).astype(int)
        if buckets.ndim != 1 or np.any(np.diff(buckets) <= 0) or buckets[-1] < self.rates.size:
            raise ValueError(
                f"buckets must be increasing and the last must be ≥ the number of records ({self.rates.size}), "
                f"got {buckets.tolist()}"
            )
        self.buckets = tuple(int(b) for b in buckets)
        self.expected_size = float(self.rates.sum())
        self._key = jax.random.key(self.seed)
        self._thresholds = jnp.asarray(_thresholds(self.rates))
        self._always = jnp.asarray(self.rates >= 1.0)

    @property
    def n(self) -> int:
        return int(self.rates.size)

    def bucket_for(self, size: int) -> int:
        """Smallest bucket that holds ``size`` records."""
        return next(b for b in self.buckets if b >= size)

    def sample(self, step: int) -> Batch:
        """The Poisson batch of step ``step`` (an integer ≥ 0), padded to its bucket."""
        step = int(check_array("step", step, 0.0, 2.0**31 - 1, integer=True))
        selected, count = _draw(jax.random.fold_in(self._key, step), self._thresholds, self._always)
        size = int(count)
        indices, mask = _pad(selected, self.bucket_for(size))
        return Batch(indices, mask, size, step)

    def sample_block(self, start: int, count: int) -> list[Batch]:
        """The batches of steps ``start``, …, ``start + count − 1``: the same batches as :meth:`sample`
        gives step by step (same keys), drawn in one call with one transfer of their sizes to the host.
        A loop that asks :meth:`sample` waits at every step for the size, so for the device to finish
        the previous step; drawing ahead lets the host queue steps while the device runs them.

        Args:
          start: first step, an integer ≥ 0.
          count: number of steps ≥ 1 (memory: ``count`` × the number of records × 5 bytes on device).

        Example:
          >>> from jaxpriv.train.sampling import PoissonSampler
          >>> sampler = PoissonSampler(0.01, seed=0, n=10_000)
          >>> [b.size for b in sampler.sample_block(3, 2)] == [sampler.sample(3).size, sampler.sample(4).size]
          True
        """
        start = int(check_array("start", start, 0.0, 2.0**31 - 1, integer=True))
        count = int(check_array("count", count, 1.0, 2.0**31 - 1 - start, integer=True))
        selected, counts = self._draw_steps(np.arange(start, start + count, dtype=np.uint32))
        sizes = np.asarray(counts).tolist()  # the one host transfer of the block
        return [Batch(*_pad(selected[i], self.bucket_for(size)), size, start + i) for i, size in enumerate(sizes)]

    def _draw_steps(self, steps):
        """On device: (selected (S, n) bool, counts (S,)) of the steps ``steps`` (uint32). Samplers that
        draw otherwise override this alone."""
        return _draw_block(self._key, steps, self._thresholds, self._always)


@functools.partial(jax.jit, static_argnames=("n",))
def _allocate(key, n: int, steps_per_epoch, step):
    """Records of ``step``: each record's step in its epoch is uniform in [0, t), drawn once per epoch."""
    epoch, slot = step // steps_per_epoch, step % steps_per_epoch
    assigned = jax.random.randint(jax.random.fold_in(key, epoch), (n,), 0, steps_per_epoch)
    selected = assigned == slot
    return selected, jnp.sum(selected, dtype=jnp.int32)


@functools.partial(jax.jit, static_argnames=("n", "k"))
def _allocate_many(key, n: int, k: int, steps_per_epoch, step):
    """Records of ``step`` when each record takes part in k of its epoch's t steps: every record's k steps
    are a uniform k-subset of [0, t), drawn once per epoch by Floyd's algorithm — for j = t − k, …, t − 1
    draw r uniform in [0, j] and add r, or j if r is already in — which is exact and costs O(k²) per record
    (no per-record permutation of the t steps)."""
    epoch, slot = step // steps_per_epoch, step % steps_per_epoch
    epoch_key = jax.random.fold_in(key, epoch)

    def add_one(i, chosen):
        j = steps_per_epoch - k + i
        r = jax.random.randint(jax.random.fold_in(epoch_key, i), (n,), 0, j + 1)
        taken = jnp.any(chosen == r[:, None], axis=1)
        return chosen.at[:, i].set(jnp.where(taken, j, r))

    chosen = jax.lax.fori_loop(0, k, add_one, jnp.full((n, k), -1, jnp.int32))
    selected = jnp.any(chosen == slot, axis=1)
    return selected, jnp.sum(selected, dtype=jnp.int32)


class AllocationSampler(PoissonSampler):
    """Random allocation: in each epoch of t steps every record takes part in exactly k of them, the k
    chosen uniformly and independently per record (k = 1: balls in bins; MATH §11). Batches are padded to
    buckets like Poisson batches of rate k/t (a record is in a given step with probability k/t, independently
    of the other records, so the sizes have the same binomial law), and drawn statelessly: the epoch e's
    allocation uses ``fold_in(key(seed), e)``. The event these batches realise is
    ``RandomAllocation(k, t, Gaussian(σ))`` per epoch.

    Args:
      n: number of records ≥ 1.
      steps_per_epoch: t ≥ 1.
      seed: integer ≥ 0.
      buckets: as for :class:`PoissonSampler` (default: its buckets at rate k/t).
      steps_per_example: k, an integer in [1, t] (default 1: balls in bins).

    Example:
      >>> from jaxpriv.train.sampling import AllocationSampler
      >>> sampler = AllocationSampler(1000, steps_per_epoch=4, seed=0)
      >>> sum(sampler.sample(step).size for step in range(4))  # one epoch: every record once
      1000
      >>> twice = AllocationSampler(1000, steps_per_epoch=4, seed=0, steps_per_example=2)
      >>> sum(twice.sample(step).size for step in range(4))  # every record in 2 of the 4 steps
      2000
    """

    def __init__(self, n: int, *, steps_per_epoch: int, seed: int, buckets=None, steps_per_example: int = 1):
        n = int(check_array("n", n, 1.0, np.inf, integer=True))
        self.steps_per_epoch = int(check_array("steps_per_epoch", steps_per_epoch, 1.0, np.inf, integer=True))
        self.steps_per_example = int(check_array("steps_per_example", steps_per_example, 1.0,
                                                 float(self.steps_per_epoch), integer=True))
        super().__init__(self.steps_per_example / self.steps_per_epoch, seed=seed, n=n, buckets=buckets)

    def _allocated(self, step):
        if self.steps_per_example == 1:  # balls in bins: one uniform step per record
            return _allocate(self._key, self.n, self.steps_per_epoch, step)
        return _allocate_many(self._key, self.n, self.steps_per_example, self.steps_per_epoch, step)

    def sample(self, step: int) -> Batch:
        """The batch of step ``step`` (an integer ≥ 0), padded to its bucket."""
        step = int(check_array("step", step, 0.0, 2.0**31 - 1, integer=True))
        selected, count = self._allocated(step)
        size = int(count)
        return Batch(*_pad(selected, self.bucket_for(size)), size, step)

    def _draw_steps(self, steps):
        return jax.vmap(self._allocated)(jnp.asarray(steps, jnp.int32))


@functools.partial(jax.jit, static_argnames=("n", "size"))
def _fixed_block(key, steps, n: int, size: int):
    """Per step t, a uniform ``size``-subset of the n records (a prefix of a uniform permutation) from
    ``fold_in(key, t)``."""
    draw = lambda t: jax.random.choice(jax.random.fold_in(key, t), n, (size,), replace=False)  # noqa: E731
    return jax.vmap(draw)(steps).astype(jnp.int32)


class FixedSizeSampler:
    """Fixed-size batches: every step draws a uniform subset of exactly b of the n records, without
    replacement within the step and independently across steps — the batches
    ``SampledWithoutReplacement(b, n, Gaussian(σ))`` accounts (MATH §11.5). No padding: every batch has
    the one shape (b,), its mask all True, so the step compiles once and no size crosses to the host.

    Args:
      n: number of records ≥ 1.
      batch_size: b, an integer in [1, n].
      seed: integer ≥ 0; the batch of step t depends only on (seed, t, n, b).

    Example:
      >>> import numpy as np
      >>> from jaxpriv.train.sampling import FixedSizeSampler
      >>> sampler = FixedSizeSampler(100, batch_size=8, seed=0)
      >>> batch = sampler.sample(step=3)
      >>> batch.size, batch.indices.shape, len(set(np.asarray(batch.indices).tolist()))
      (8, (8,), 8)
    """

    def __init__(self, n: int, *, batch_size: int, seed: int):
        self._n = int(check_array("n", n, 1.0, np.inf, integer=True))
        self.batch_size = int(check_array("batch_size", batch_size, 1.0, float(self._n), integer=True))
        self.seed = int(check_array("seed", seed, 0.0, 2.0**63 - 1, integer=True))
        self.buckets = (self.batch_size,)
        self.expected_size = float(self.batch_size)
        self._key = jax.random.key(self.seed)
        self._mask = jnp.ones(self.batch_size, bool)

    @property
    def n(self) -> int:
        return self._n

    def sample(self, step: int) -> Batch:
        """The batch of step ``step`` (an integer ≥ 0)."""
        step = int(check_array("step", step, 0.0, 2.0**31 - 1, integer=True))
        return self.sample_block(step, 1)[0]

    def sample_block(self, start: int, count: int) -> list[Batch]:
        """The batches of steps ``start``, …, ``start + count − 1``, drawn in one call (nothing is transferred
        to the host: every batch has b records).

        Example:
          >>> import numpy as np
          >>> from jaxpriv.train.sampling import FixedSizeSampler
          >>> sampler = FixedSizeSampler(100, batch_size=8, seed=0)
          >>> a, b = sampler.sample_block(3, 2)
          >>> np.array_equal(np.asarray(a.indices), np.asarray(sampler.sample(3).indices)), b.step
          (True, 4)
        """
        start = int(check_array("start", start, 0.0, 2.0**31 - 1, integer=True))
        count = int(check_array("count", count, 1.0, 2.0**31 - 1 - start, integer=True))
        indices = _fixed_block(self._key, jnp.arange(start, start + count, dtype=jnp.uint32), self._n,
                               self.batch_size)
        return [Batch(indices[i], self._mask, self.batch_size, start + i) for i in range(count)]


@jax.jit
def _draw_block_masked(key, steps, thresholds, partition, bands):
    """Per step t, the Poisson draw of :func:`_draw` restricted to the records of partition t mod b."""
    def one(t):
        own = (partition == (t % bands).astype(partition.dtype))
        return _draw(jax.random.fold_in(key, t), jnp.where(own, thresholds, jnp.uint32(0)), jnp.zeros_like(own))

    return jax.vmap(one)(steps)


class CyclicPoissonSampler(PoissonSampler):
    """Cyclic Poisson sampling over b partitions, the sampling BandMF's amplification assumes (MATH §12.2):
    record i belongs to partition i mod b (fixed by its index, never by its data), and step t
    Poisson-samples partition t mod b only, record i with probability q_i. So a record can be sampled only
    at steps b apart. With b = 1 it is :class:`PoissonSampler`, batch for batch (same keys, same draws).

    Args:
      rates: as :class:`PoissonSampler` (the rate of a record *within its partition's steps*), in [0, 1);
        rate 1 (always included) is not supported here.
      seed: integer ≥ 0; the batch of step t depends only on (seed, t, rates, b).
      bands: the number of partitions b ≥ 1 (the strategy's bands).
      n, buckets: as :class:`PoissonSampler` (default buckets: those of one partition's rates).

    Example:
      >>> import numpy as np
      >>> from jaxpriv.train.sampling import CyclicPoissonSampler
      >>> sampler = CyclicPoissonSampler(0.5, seed=0, n=12, bands=3)
      >>> [sorted(set((np.asarray(b.indices)[np.asarray(b.mask)] % 3).tolist())) for b in sampler.sample_block(0, 3)]
      [[0], [1], [2]]
    """

    def __init__(self, rates, *, seed: int, bands: int, n: int | None = None, buckets=None):
        if isinstance(bands, (bool, np.bool_)) or not isinstance(bands, (int, np.integer)) or bands < 1:
            raise ValueError(f"bands must be an integer in [1, inf), got {bands!r}")
        super().__init__(rates, seed=seed, n=n, buckets=buckets)
        if np.any(self.rates >= 1.0):
            raise ValueError("CyclicPoissonSampler rates must lie in [0, 1) (rate 1 is not supported)")
        self.bands = int(bands)
        self._partition = jnp.asarray(np.arange(self.n) % self.bands, jnp.int32)
        if buckets is None:  # the largest partition's draws: every step's batch law is at most that one
            own = np.where(np.arange(self.n) % self.bands == 0, self.rates, 0.0)
            self.buckets = bucket_sizes(own)
        self.expected_size = float(self.rates.sum()) / self.bands

    def sample(self, step: int) -> Batch:
        """The batch of step ``step``: a Poisson sample of partition ``step`` mod b, padded to its bucket."""
        step = int(check_array("step", step, 0.0, 2.0**31 - 1, integer=True))
        return self.sample_block(step, 1)[0]

    def _draw_steps(self, steps):
        return _draw_block_masked(self._key, steps, self._thresholds, self._partition, jnp.uint32(self.bands))
