"""Partitions of a labelled dataset into clients: every record exactly once, the sizes each scheme
promises, label skew that follows α (checked against numpy counts), padded stacks equal to a plain
numpy gather, determinism, and every bad input."""

import numpy as np
import pytest

from jaxpriv.federated.partition import (
    ClientData,
    Partition,
    dirichlet,
    iid,
    label_counts,
    per_client,
    shards,
    stack,
)
from jaxpriv.train import data


@pytest.fixture(scope="module")
def digits():
    return data.load("digits", seed=0)


def _assert_covers_exactly_once(p: Partition, n: int):
    everything = np.concatenate(p.indices)
    np.testing.assert_array_equal(np.sort(everything), np.arange(n))


def _labels_per_client(labels, p):
    return np.array([np.unique(labels[idx]).size for idx in p.indices])


@pytest.mark.parametrize("num_clients", [1, 7, 100, 1438])
def test_iid_covers_every_record_once_with_near_equal_sizes(digits, num_clients):
    y = digits.y_train
    p = iid(y, num_clients, seed=3)
    _assert_covers_exactly_once(p, y.size)
    assert p.num_clients == num_clients
    assert p.sizes.max() - p.sizes.min() <= 1 and p.sizes.sum() == y.size


def test_iid_label_mix_matches_the_dataset(digits):
    y = digits.y_train
    p = iid(y, 4, seed=0)
    global_freq = np.bincount(y, minlength=10) / y.size
    counts = label_counts(y, p, 10)
    # each client is a uniform sample of ~360 records: frequencies within a few standard errors
    freq = counts / counts.sum(1, keepdims=True)
    se = np.sqrt(global_freq * (1 - global_freq) / p.sizes[:, None])
    assert np.all(np.abs(freq - global_freq) < 5 * se)


@pytest.mark.parametrize("alpha", [0.01, 0.5, 100.0])
def test_dirichlet_covers_every_record_once_with_equal_sizes(digits, alpha):
    y = digits.y_train
    p = dirichlet(y, 20, alpha, seed=1)
    _assert_covers_exactly_once(p, y.size)
    assert p.sizes.max() - p.sizes.min() <= 1 and p.sizes.min() > 0


def test_dirichlet_skew_follows_alpha(digits):
    y = digits.y_train
    labels_small = _labels_per_client(y, dirichlet(y, 50, 0.01, seed=0))
    labels_mid = _labels_per_client(y, dirichlet(y, 50, 1.0, seed=0))
    labels_large = _labels_per_client(y, dirichlet(y, 50, 1e4, seed=0))
    # α → 0: one class per client (more only where a class ran out, mostly for the last clients filled);
    # α → ∞: all ten classes
    assert labels_small.mean() <= 1.5 and np.mean(labels_small == 1) >= 0.7
    assert labels_small.mean() < labels_mid.mean() < labels_large.mean()
    assert labels_large.mean() >= 8.5  # ~29 records from ten classes (the last clients get the leftovers)


def test_dirichlet_large_alpha_is_close_to_the_global_label_distribution(digits):
    y = digits.y_train
    p = dirichlet(y, 4, 1e6, seed=2)
    counts = label_counts(y, p, 10)
    freq = counts / counts.sum(1, keepdims=True)
    global_freq = np.bincount(y, minlength=10) / y.size
    tv = 0.5 * np.abs(freq - global_freq).sum(1)
    assert np.all(tv < 0.1)


def test_dirichlet_with_more_clients_than_a_class_can_serve_never_leaves_a_client_empty():
    y = np.repeat(np.arange(3), [2, 3, 95])  # tiny classes run out at once
    p = dirichlet(y, 30, 0.001, seed=5)
    _assert_covers_exactly_once(p, y.size)
    assert p.sizes.min() >= 3


@pytest.mark.parametrize("per", [1, 2, 5])
def test_shards_cover_once_and_give_few_labels(digits, per):
    y = digits.y_train
    p = shards(y, 100, per, seed=0)
    _assert_covers_exactly_once(p, y.size)
    assert p.sizes.max() - p.sizes.min() <= per  # every shard has ⌊n/S⌋ or ⌈n/S⌉ records
    # a shard of ~14 records cut from label-sorted data straddles at most two labels
    assert _labels_per_client(y, p).max() <= 2 * per
    assert np.mean(_labels_per_client(y, p)) <= 1.3 * per


def test_shards_follow_the_label_sorted_cut():
    """Oracle: with one shard per client, the shards are exactly the label-sorted array cut in pieces."""
    y = np.repeat(np.arange(5), 4)
    p = shards(y, 5, 1, seed=0)
    assert sorted(tuple(np.unique(y[idx])) for idx in p.indices) == [(0,), (1,), (2,), (3,), (4,)]


def test_partitions_are_deterministic_functions_of_the_seed(digits):
    y = digits.y_train
    for make in (lambda s: iid(y, 9, seed=s), lambda s: dirichlet(y, 9, 0.3, seed=s),
                 lambda s: shards(y, 9, 2, seed=s)):
        a, b, c = make(4), make(4), make(5)
        assert all(np.array_equal(u, v) for u, v in zip(a.indices, b.indices))
        assert not all(np.array_equal(u, v) for u, v in zip(a.indices, c.indices))


def test_stack_matches_a_numpy_gather(digits):
    x, y = digits.x_train, digits.y_train
    p = dirichlet(y, 13, 0.5, seed=0)
    p = Partition(p.indices[:-1] + (p.indices[-1][:3],), p.num_records)  # an uneven hand-made split
    d = stack(x, y, p)
    assert isinstance(d, ClientData)
    width = p.sizes.max()
    assert d.x.shape == (13, width, 64) and d.y.shape == (13, width) and d.mask.shape == (13, width)
    assert d.x.dtype == x.dtype and d.y.dtype == y.dtype and d.mask.dtype == bool and d.size.dtype == np.int32
    for k, idx in enumerate(p.indices):
        n = idx.size
        np.testing.assert_array_equal(d.x[k, :n], x[idx])
        np.testing.assert_array_equal(d.y[k, :n], y[idx])
        assert d.mask[k, :n].all() and not d.mask[k, n:].any() and d.size[k] == n
        assert not d.x[k, n:].any() and not d.y[k, n:].any()


def test_per_client_pads_with_the_fill_value():
    p = Partition(([3, 0], [], [1, 2, 4]), 5)
    q = np.array([0.1, 0.2, 0.3, 0.4, 0.5])
    out = per_client(q, p, fill_value=np.nan)
    np.testing.assert_array_equal(out, [[0.4, 0.1, np.nan], [np.nan] * 3, [0.2, 0.3, 0.5]])
    d = stack(np.zeros((5, 2)), np.zeros(5), p)
    assert d.size.tolist() == [2, 0, 3] and np.array_equal(d.mask, ~np.isnan(out))


def test_label_counts_equal_numpy_bincount(digits):
    y = digits.y_train
    p = shards(y, 10, 3, seed=1)
    counts = label_counts(y, p, num_classes=12)
    assert counts.shape == (10, 12)
    for k, idx in enumerate(p.indices):
        np.testing.assert_array_equal(counts[k], np.bincount(y[idx], minlength=12))
    np.testing.assert_array_equal(counts.sum(1), p.sizes)


# --------------------------------------------------------------------------------------------------
# bad inputs
# --------------------------------------------------------------------------------------------------

LABELS = np.array([0, 1, 0, 1, 2, 2])


@pytest.mark.parametrize(
    "call,match",
    [
        (lambda: iid(LABELS.reshape(2, 3), 2), "labels"),
        (lambda: iid([0, 1, -1], 2), "labels"),
        (lambda: iid([0, 1.5, 1], 2), "labels"),
        (lambda: iid([], 1), "labels"),
        (lambda: iid(LABELS, 0), "num_clients"),
        (lambda: iid(LABELS, 7), "num_clients"),
        (lambda: iid(LABELS, 2.5), "num_clients"),
        (lambda: iid(LABELS, 2, seed=-1), "seed"),
        (lambda: dirichlet(LABELS, 2, 0.0), "alpha"),
        (lambda: dirichlet(LABELS, 2, np.inf), "alpha"),
        (lambda: dirichlet(LABELS, 2, np.nan), "alpha"),
        (lambda: dirichlet(LABELS, 9, 1.0), "num_clients"),
        (lambda: shards(LABELS, 2, 0), "shards_per_client"),
        (lambda: shards(LABELS, 4, 2), "num_clients"),
        (lambda: Partition(([0, 5],), 3), r"indices\[0\]"),
        (lambda: Partition(([[0, 1]],), 3), r"indices\[0\]"),
        (lambda: Partition((), 3), "indices"),
        (lambda: Partition(([0],), 0), "num_records"),
        (lambda: stack(np.zeros((5, 2)), LABELS, iid(LABELS, 2)), "x"),
        (lambda: stack(np.zeros((6, 2)), LABELS[:5], iid(LABELS, 2)), "y"),
        (lambda: stack(np.zeros((6, 2)), LABELS, [np.arange(6)]), "partition"),
        (lambda: per_client(np.zeros(5), iid(LABELS, 2)), "values"),
        (lambda: per_client(np.zeros(6), None), "partition"),
        (lambda: label_counts(LABELS[:4], iid(LABELS, 2)), "labels"),
        (lambda: label_counts(LABELS, iid(LABELS, 2), num_classes=2), "num_classes"),
        (lambda: label_counts(LABELS, "p"), "partition"),
    ],
)
def test_bad_input(call, match):
    with pytest.raises(ValueError, match=match):
        call()
