"""Per-client datasets for federated simulation: IID and non-IID partitions of a labelled dataset, and
their fixed-shape padded stack (MATH §6; federated learning is a vmap over clients).

A :class:`Partition` is one array of record indices per client. Three ways to make one:

* :func:`iid` — a uniform random split into near-equal parts (McMahan et al. 2017, "IID");
* :func:`dirichlet` — label skew: each client's class proportions drawn from Dir(α·p), p the dataset's
  class frequencies (Hsu, Qi, Brown 2019, "Measuring the effects of non-identical data distribution",
  §3); α → ∞ is IID, α → 0 gives one class per client;
* :func:`shards` — the pathological non-IID split of McMahan et al. 2017 (§3): records sorted by label,
  cut into equal shards, a few shards per client (rPDP-FL's "MNIST-NIID" follows it).

:func:`stack` turns a partition into :class:`ClientData`: arrays with a leading client axis, padded to
the largest client (``x`` (C, max_n, ...), ``y`` (C, max_n)) with a boolean ``mask`` and the ``size`` of
each client, so every client runs the same compiled program under ``jax.vmap``. :func:`per_client` pads
any per-record array the same way (per-record sampling rates or budgets for rPDP-FL).
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import numpy as np

from .._docs import fill_doc
from .._numerics import check_array

#: the Args/Returns of a non-IID partitioner (``{clients}``: the num_clients rule, ``{shape}``: its own
#: argument)
_NON_IID_ARGS = """
    Args:
      labels: 1-D array of non-negative integer labels, one per record.
      num_clients: number of clients{clients}.
      {shape}
      seed: integer ≥ 0.

    Returns:
      :class:`Partition` covering every record exactly once."""

__all__ = ["Partition", "ClientData", "iid", "dirichlet", "shards", "per_client", "stack", "label_counts"]


# --------------------------------------------------------------------------------------------------
# data structures
# --------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, eq=False)
class Partition:
    """Record indices of every client.

    Attributes:
      indices: tuple of 1-D int64 arrays, client k's records (indices into the dataset's first axis).
      num_records: size of the partitioned dataset (every index is in [0, num_records)).

    A partition made by :func:`iid`, :func:`dirichlet` or :func:`shards` covers every record exactly
    once; one built by hand (a natural split, e.g. one client per hospital) only needs valid indices.

    Example:
      >>> from jaxpriv.federated.partition import Partition
      >>> p = Partition(([0, 2], [1]), num_records=3)
      >>> p.num_clients, p.sizes.tolist()
      (2, [2, 1])
    """

    indices: tuple
    num_records: int

    def __post_init__(self):
        n = int(check_array("num_records", self.num_records, 1.0, np.inf, integer=True))
        if len(self.indices) == 0:
            raise ValueError("indices must hold at least one client")
        arrays = []
        for k, idx in enumerate(self.indices):
            arr = np.asarray(idx)
            if arr.ndim != 1:
                raise ValueError(f"indices[{k}] must be a 1-D array of record indices, got shape {arr.shape}")
            if arr.size:
                check_array(f"indices[{k}]", arr, 0.0, n - 1.0, integer=True)
            arrays.append(arr.astype(np.int64))
        object.__setattr__(self, "indices", tuple(arrays))
        object.__setattr__(self, "num_records", n)

    @property
    def num_clients(self) -> int:
        return len(self.indices)

    @property
    def sizes(self) -> np.ndarray:
        """(C,) number of records of every client."""
        return np.array([idx.size for idx in self.indices], dtype=np.int64)


class ClientData(NamedTuple):
    """Padded per-client arrays, a pytree that ``jax.vmap`` maps over the leading client axis.

    Stacked (from :func:`stack`): ``x`` (C, max_n, ...), ``y`` (C, max_n), ``mask`` (C, max_n) bool —
    True on real records, which come first — and ``size`` (C,) int32 = ``mask.sum(1)``. Inside a
    :class:`~jaxpriv.federated.simulator.LocalUpdate` the same fields hold one client's slice.
    """

    x: Any
    y: Any
    mask: Any
    size: Any


# --------------------------------------------------------------------------------------------------
# validation
# --------------------------------------------------------------------------------------------------


def _check_labels(labels) -> np.ndarray:
    arr = np.asarray(labels)
    if arr.ndim != 1:
        raise ValueError(f"labels must be a 1-D array with one label per record, got shape {arr.shape}")
    check_array("labels", arr, 0.0, np.inf, integer=True)
    return arr.astype(np.int64)


def _check_num_clients(num_clients, n: int, per_client_min: int = 1) -> int:
    top = n // per_client_min
    return int(check_array("num_clients", num_clients, 1.0, float(top), integer=True))


def _check_seed(seed) -> int:
    return int(check_array("seed", seed, 0.0, 2.0**63 - 1, integer=True))


def _split_sizes(n: int, parts: int) -> np.ndarray:
    """Sizes of ``parts`` near-equal parts of n (the first n mod parts are one larger)."""
    return np.full(parts, n // parts, dtype=np.int64) + (np.arange(parts) < n % parts)


# --------------------------------------------------------------------------------------------------
# partitions
# --------------------------------------------------------------------------------------------------


def iid(labels, num_clients: int, seed: int = 0) -> Partition:
    """IID partition: a uniformly random permutation of the records cut into ``num_clients`` parts whose
    sizes differ by at most one (McMahan et al. 2017, AISTATS, §3 "IID").

    Args:
      labels: 1-D array of non-negative integer labels, one per record (only its length is used).
      num_clients: number of clients, an integer in [1, number of records].
      seed: integer ≥ 0; the partition is a function of (number of records, num_clients, seed).

    Returns:
      :class:`Partition` covering every record exactly once; each client's indices sorted.

    Example:
      >>> from jaxpriv.federated.partition import iid
      >>> p = iid([0, 1, 0, 1, 1], num_clients=2, seed=0)
      >>> p.sizes.tolist(), sorted(int(i) for idx in p.indices for i in idx)
      ([3, 2], [0, 1, 2, 3, 4])
    """
    labels = _check_labels(labels)
    num_clients = _check_num_clients(num_clients, labels.size)
    rng = np.random.default_rng(_check_seed(seed))
    order = rng.permutation(labels.size)
    cuts = np.cumsum(_split_sizes(labels.size, num_clients))[:-1]
    return Partition(tuple(np.sort(part) for part in np.split(order, cuts)), labels.size)


@fill_doc(args=_NON_IID_ARGS.format(clients=", an integer in [1, number of records]",
                                     shape="alpha: concentration α > 0 (finite)."))
def dirichlet(labels, num_clients: int, alpha: float, seed: int = 0) -> Partition:
    """Label-skewed partition: client k's class proportions are π_k ~ Dir(α·p), p the dataset's class
    frequencies (Hsu, Qi, Brown 2019, "Measuring the effects of non-identical data distribution for
    federated visual classification", §3). Clients have equal sizes (differing by at most one).

    Clients are filled one after another, in a random order, by drawing their class counts from
    Multinomial(size, π_k) without replacement from the records left; when a class runs out, the missing
    records are redrawn from π_k restricted to the classes left (renormalised). So every record is used
    exactly once and no client is empty, whatever α; with α small most clients hold one or two classes
    (π_k without mass on the classes left puts it all on one of them, picked ∝ p: the α → 0 limit), with
    α large their label distribution is close to p.

    {args}

    Example:
      >>> import numpy as np
      >>> from jaxpriv.federated.partition import dirichlet, label_counts
      >>> labels = np.repeat(np.arange(4), 25)
      >>> p = dirichlet(labels, num_clients=4, alpha=0.01, seed=0)
      >>> p.sizes.tolist(), int((label_counts(labels, p) > 0).sum(1).max()) <= 2
      ([25, 25, 25, 25], True)
    """
    labels = _check_labels(labels)
    num_clients = _check_num_clients(num_clients, labels.size)
    alpha = float(check_array("alpha", alpha, 0.0, np.inf, lo_open=True))
    rng = np.random.default_rng(_check_seed(seed))
    classes, inverse = np.unique(labels, return_inverse=True)
    pools = [rng.permutation(np.flatnonzero(inverse == c)) for c in range(classes.size)]
    prior = np.array([pool.size for pool in pools], dtype=np.float64) / labels.size
    left = np.array([pool.size for pool in pools], dtype=np.int64)
    used = np.zeros(classes.size, dtype=np.int64)
    sizes = _split_sizes(labels.size, num_clients)
    clients: list = [None] * num_clients
    for k in rng.permutation(num_clients):
        # Dir(α·p) through normalised gammas; a draw that underflows to all zeros means "one class",
        # picked from p (the α → 0 limit), instead of a 0/0.
        gamma = rng.standard_gamma(alpha * prior)
        total = gamma.sum()
        share = gamma / total if total > 0 else np.eye(classes.size)[rng.choice(classes.size, p=prior)]
        take = np.zeros(classes.size, dtype=np.int64)
        need = int(sizes[k])
        while need > 0:
            avail = left - take
            weight = np.where(avail > 0, share, 0.0)
            if weight.sum() <= 0:
                # π_k has (numerically) no mass on the classes left: as in the α → 0 limit of Dir(α·p)
                # conditioned on those classes, all of it goes to one of them, picked with odds ∝ p.
                odds = np.where(avail > 0, prior, 0.0)
                weight = np.eye(classes.size)[rng.choice(classes.size, p=odds / odds.sum())]
            draw = np.minimum(rng.multinomial(need, weight / weight.sum()), avail)
            take += draw
            need -= int(draw.sum())
        clients[k] = np.sort(np.concatenate([pools[c][used[c]:used[c] + take[c]] for c in range(classes.size)]))
        used += take
        left -= take
    return Partition(tuple(clients), labels.size)


@fill_doc(args=_NON_IID_ARGS.format(
    clients=" ≥ 1, with num_clients · shards_per_client ≤ number of records",
    shape="shards_per_client: shards per client, an integer ≥ 1."))
def shards(labels, num_clients: int, shards_per_client: int, seed: int = 0) -> Partition:
    """Pathological non-IID partition of McMahan et al. 2017 (AISTATS, §3): sort the records by label,
    cut them into ``num_clients · shards_per_client`` shards of near-equal size, and give every client
    ``shards_per_client`` shards at random (so each client sees only a few labels; 2 shards per client
    on MNIST in the paper).

    Records of one label are in random order before the cut, so which records share a shard depends on
    ``seed`` too.

    {args}

    Example:
      >>> import numpy as np
      >>> from jaxpriv.federated.partition import shards, label_counts
      >>> labels = np.repeat(np.arange(10), 20)
      >>> p = shards(labels, num_clients=10, shards_per_client=2, seed=0)
      >>> p.sizes.tolist() == [20] * 10, int((label_counts(labels, p) > 0).sum(1).max()) <= 2
      (True, True)
    """
    labels = _check_labels(labels)
    per = int(check_array("shards_per_client", shards_per_client, 1.0, float(labels.size), integer=True))
    num_clients = _check_num_clients(num_clients, labels.size, per)
    rng = np.random.default_rng(_check_seed(seed))
    shuffled = rng.permutation(labels.size)
    order = shuffled[np.argsort(labels[shuffled], kind="stable")]
    count = num_clients * per
    pieces = np.split(order, np.cumsum(_split_sizes(labels.size, count))[:-1])
    assignment = rng.permutation(count).reshape(num_clients, per)
    return Partition(tuple(np.sort(np.concatenate([pieces[s] for s in row])) for row in assignment), labels.size)


# --------------------------------------------------------------------------------------------------
# padded stacks
# --------------------------------------------------------------------------------------------------


def per_client(values, partition: Partition, fill_value=0) -> np.ndarray:
    """Any per-record array laid out per client: (num_records, ...) → (C, max_n, ...), client k's records
    first in row k (in the partition's order), the rest ``fill_value``.

    Use it for per-record quantities a local update needs beside the data (rPDP-FL's per-record
    sampling rates, per-record budgets); the layout matches :func:`stack`'s ``mask``.

    Args:
      values: array whose first axis has length ``partition.num_records``.
      partition: a :class:`Partition`.
      fill_value: value of the padding entries.

    Returns:
      numpy array of shape (C, max_n) + values.shape[1:], dtype of ``values``.

    Example:
      >>> from jaxpriv.federated.partition import Partition, per_client
      >>> per_client([0.5, 0.1, 0.2], Partition(([0, 2], [1]), 3), fill_value=-1).tolist()
      [[0.5, 0.2], [0.1, -1.0]]
    """
    if not isinstance(partition, Partition):
        raise ValueError(f"partition must be a Partition, got {type(partition).__name__}")
    values = np.asarray(values)
    if values.ndim == 0 or values.shape[0] != partition.num_records:
        raise ValueError(f"values must have a first axis of length partition.num_records = {partition.num_records}, "
                         f"got shape {values.shape}")
    width = max(1, int(partition.sizes.max()))
    out = np.full((partition.num_clients, width) + values.shape[1:], fill_value, dtype=values.dtype)
    for k, idx in enumerate(partition.indices):
        out[k, :idx.size] = values[idx]
    return out


def stack(x, y, partition: Partition) -> ClientData:
    """Per-client datasets as one padded pytree of numpy arrays (:class:`ClientData`), so that all
    clients share one compiled program (federated learning is a vmap over clients).

    Args:
      x: features, shape (num_records, ...).
      y: labels (or targets), shape (num_records, ...).
      partition: a :class:`Partition` of the same records.

    Returns:
      :class:`ClientData` with ``x`` (C, max_n, ...), ``y`` (C, max_n, ...) (zeros in the padding),
      ``mask`` (C, max_n) bool and ``size`` (C,) int32.

    Example:
      >>> import numpy as np
      >>> from jaxpriv.federated.partition import iid, stack
      >>> x, y = np.ones((5, 3), np.float32), np.arange(5, dtype=np.int32)
      >>> data = stack(x, y, iid(y, num_clients=2, seed=0))
      >>> data.x.shape, data.mask.sum(1).tolist(), data.size.tolist()
      ((2, 3, 3), [3, 2], [3, 2])
    """
    if not isinstance(partition, Partition):
        raise ValueError(f"partition must be a Partition, got {type(partition).__name__}")
    x, y = np.asarray(x), np.asarray(y)
    for name, arr in (("x", x), ("y", y)):
        if arr.ndim == 0 or arr.shape[0] != partition.num_records:
            raise ValueError(f"{name} must have a first axis of length partition.num_records = "
                             f"{partition.num_records}, got shape {arr.shape}")
    sizes = partition.sizes
    width = max(1, int(sizes.max()))
    mask = np.arange(width)[None, :] < sizes[:, None]
    return ClientData(per_client(x, partition), per_client(y, partition), mask, sizes.astype(np.int32))


def label_counts(labels, partition: Partition, num_classes: int | None = None) -> np.ndarray:
    """How many records of each label every client holds: a (C, num_classes) int64 matrix (to inspect a
    partition's skew; row sums are the client sizes).

    Args:
      labels: 1-D array of non-negative integer labels of the partitioned records.
      partition: a :class:`Partition` of those records.
      num_classes: number of columns (default: max label + 1).

    Returns:
      (C, num_classes) int64 array.

    Example:
      >>> from jaxpriv.federated.partition import Partition, label_counts
      >>> label_counts([0, 1, 1], Partition(([0, 1], [2]), 3)).tolist()
      [[1, 1], [0, 1]]
    """
    labels = _check_labels(labels)
    if not isinstance(partition, Partition):
        raise ValueError(f"partition must be a Partition, got {type(partition).__name__}")
    if labels.size != partition.num_records:
        raise ValueError(f"labels must have one label per record of the partition ({partition.num_records}), "
                         f"got {labels.size}")
    top = int(labels.max()) + 1
    if num_classes is None:
        num_classes = top
    num_classes = int(check_array("num_classes", num_classes, float(top), np.inf, integer=True))
    return np.stack([np.bincount(labels[idx], minlength=num_classes) for idx in partition.indices])
