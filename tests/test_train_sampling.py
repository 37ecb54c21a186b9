"""Poisson sampling with padded buckets: inclusion rates against the binomial law, bucket sizes against
the exact binomial tail (scipy), padding invariants, determinism, and every bad input."""

import math

import numpy as np
import pytest
from scipy import stats

from jaxpriv.train.sampling import (
    PoissonSampler,
    bucket_sizes,
    expected_batch_size,
    inclusion_probability,
)


def test_expected_batch_size_is_the_sum_of_rates():
    rates = np.random.default_rng(0).uniform(0, 0.1, size=1000)
    assert expected_batch_size(rates) == pytest.approx(math.fsum(rates), rel=1e-15)


def test_inclusion_probability_never_exceeds_the_rate():
    q = np.concatenate([[0.0, 1.0, 0.5, 2.0**-33, 1 - 2.0**-40], np.random.default_rng(1).uniform(0, 1, 500)])
    p = inclusion_probability(q)
    assert np.all(p <= q)
    assert np.all(p > q - 2.0**-32)
    assert p[0] == 0.0 and p[1] == 1.0 and p[2] == 0.5
    assert p[3] == 0.0  # below one unit of 2⁻³²: never sampled rather than sampled too often


def test_empirical_inclusion_rates_match_per_record_rates():
    rates = np.concatenate([[0.0, 1.0], np.linspace(0.01, 0.9, 62)])
    steps = 1500
    sampler = PoissonSampler(rates, seed=3)
    counts = np.zeros(rates.size)
    for t in range(steps):
        batch = sampler.sample(t)
        idx = np.asarray(batch.indices)[np.asarray(batch.mask)]
        counts[idx] += 1
    assert counts[0] == 0 and counts[1] == steps
    inner = slice(2, None)
    mean, sd = steps * rates[inner], np.sqrt(steps * rates[inner] * (1 - rates[inner]))
    z = (counts[inner] - mean) / sd
    # each record: a 5-sigma binomial band (two-sided p ≈ 6e-7 per record)
    assert np.all(np.abs(z) < 5), z
    # all records together: Σ z² is χ² with 62 degrees of freedom
    assert np.sum(z**2) < stats.chi2.ppf(1 - 1e-6, df=z.size)


def test_batch_is_padded_masked_and_consistent():
    sampler = PoissonSampler(0.05, seed=0, n=2000)
    for t in range(20):
        batch = sampler.sample(t)
        idx, mask = np.asarray(batch.indices), np.asarray(batch.mask)
        assert idx.shape == mask.shape == (sampler.buckets[0],)
        assert mask.sum() == batch.size
        assert np.all(mask[: batch.size]) and not np.any(mask[batch.size :])  # valid entries first
        chosen = idx[mask]
        assert np.all(np.diff(chosen) > 0)  # distinct records, no duplicates
        assert np.all((chosen >= 0) & (chosen < 2000))


def test_sampling_is_a_function_of_seed_and_step():
    a, b = PoissonSampler(0.1, seed=7, n=500), PoissonSampler(0.1, seed=7, n=500)
    c = PoissonSampler(0.1, seed=8, n=500)
    ia, ib = np.asarray(a.sample(5).indices), np.asarray(b.sample(5).indices)
    np.testing.assert_array_equal(ia, ib)
    assert not np.array_equal(np.asarray(a.sample(6).indices), ia)
    assert not np.array_equal(np.asarray(c.sample(5).indices), ia)


def test_oversized_batch_moves_to_a_bigger_bucket_never_dropped():
    sampler = PoissonSampler(0.5, seed=0, n=50, buckets=(2, 4, 50))
    batch = sampler.sample(0)
    assert batch.size > 4
    assert batch.indices.shape == (50,)
    assert int(np.asarray(batch.mask).sum()) == batch.size
    assert sampler.bucket_for(3) == 4 and sampler.bucket_for(5) == 50


def test_full_rate_selects_everyone():
    batch = PoissonSampler(1.0, seed=0, n=33).sample(0)
    assert batch.size == 33
    np.testing.assert_array_equal(np.sort(np.asarray(batch.indices)[np.asarray(batch.mask)]), np.arange(33))


@pytest.mark.parametrize("n,q", [(1000, 0.064), (60_000, 256 / 60_000), (300, 0.5)])
def test_first_bucket_covers_the_binomial_quantile(n, q):
    overflow = 1e-6
    sizes = bucket_sizes(np.full(n, q), overflow=overflow, multiple=8)
    first = sizes[0]
    assert first % 8 == 0
    assert stats.binom.sf(first, n, q) <= overflow  # exact binomial tail: P(S > first)
    assert first <= n * q + 10 * math.sqrt(n * q * (1 - q)) + 16  # and not wastefully large
    assert sizes[-1] == n
    assert all(b == 2 * a for a, b in zip(sizes[:-2], sizes[1:-1]))
    assert all(a < b for a, b in zip(sizes, sizes[1:]))


@pytest.mark.parametrize("n,q", [(1024, 0.25), (60_000, 256 / 60_000), (1797, 64 / 1797)])
def test_finer_buckets_sit_at_the_standard_deviations(n, q):
    plain = bucket_sizes(np.full(n, q))
    fine = bucket_sizes(np.full(n, q), below=(1, 3))
    sd = math.sqrt(n * q * (1 - q))
    assert fine[-len(plain):] == plain  # the bound bucket and its doublings are unchanged
    extra = fine[:-len(plain)]
    assert len(extra) == 2 and all(b % 8 == 0 for b in extra)
    assert n * q + sd <= extra[0] < n * q + sd + 8 and n * q + 3 * sd <= extra[1] < n * q + 3 * sd + 8
    # the exact binomial law: most steps fit the first, almost all the second
    assert stats.binom.cdf(extra[0], n, q) >= 0.8 and stats.binom.cdf(extra[1], n, q) >= 0.998


def test_sample_block_draws_the_batches_of_sample():
    rates = np.random.default_rng(0).uniform(0, 0.2, 3000)
    sampler = PoissonSampler(rates, seed=7, buckets=bucket_sizes(rates, below=(0, 1, 3)))
    block = sampler.sample_block(11, 9)
    assert [b.step for b in block] == list(range(11, 20))
    for b in block:
        one = sampler.sample(b.step)
        assert b.size == one.size and int(np.asarray(b.mask).sum()) == b.size
        np.testing.assert_array_equal(np.asarray(b.indices), np.asarray(one.indices))
        np.testing.assert_array_equal(np.asarray(b.mask), np.asarray(one.mask))
    assert len({b.indices.shape[0] for b in block}) > 1  # several buckets in one block


# --------------------------------------------------------------------------------------------------
# bad inputs
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("below, match", [((-1.0,), "below must lie in"), ((np.nan,), "below contains NaN"),
                                          (("one",), "below must be standard-deviation offsets")])
def test_bad_below(below, match):
    with pytest.raises(ValueError, match=match):
        bucket_sizes([0.1, 0.2], below=below)


@pytest.mark.parametrize("start, count, match", [(-1, 2, "start must lie"), (0, 0, "count must lie"),
                                                 (0, 1.5, "count must be an integer"), (2.5, 1, "start must be")])
def test_bad_sample_block(start, count, match):
    with pytest.raises(ValueError, match=match):
        PoissonSampler(0.1, seed=0, n=10).sample_block(start, count)


@pytest.mark.parametrize("rates", [[0.1, 1.5], [-0.1, 0.2], [np.nan, 0.1], [], [0.0, 0.0]])
def test_bad_rates(rates):
    with pytest.raises(ValueError, match="rates"):
        expected_batch_size(rates)
    with pytest.raises(ValueError, match="rates"):
        PoissonSampler(rates, seed=0)


def test_rates_must_be_one_dimensional():
    with pytest.raises(ValueError, match="rates must be a 1-D"):
        bucket_sizes(np.full((2, 3), 0.1))


@pytest.mark.parametrize("overflow", [0.0, 1.0, -1e-3, np.nan])
def test_bad_overflow(overflow):
    with pytest.raises(ValueError, match="overflow"):
        bucket_sizes([0.1, 0.2], overflow=overflow)


@pytest.mark.parametrize("multiple", [0, 2.5])
def test_bad_multiple(multiple):
    with pytest.raises(ValueError, match="multiple"):
        bucket_sizes([0.1, 0.2], multiple=multiple)


@pytest.mark.parametrize("seed", [-1, 0.5])
def test_bad_seed(seed):
    with pytest.raises(ValueError, match="seed"):
        PoissonSampler(0.1, seed=seed, n=10)


def test_scalar_rate_needs_n():
    with pytest.raises(ValueError, match="n .the number of records. is required"):
        PoissonSampler(0.1, seed=0)
    with pytest.raises(ValueError, match="n must lie"):
        PoissonSampler(0.1, seed=0, n=0)


@pytest.mark.parametrize("buckets", [(8, 4, 10), (4, 8), (0, 10)])
def test_bad_buckets(buckets):
    with pytest.raises(ValueError, match="buckets"):
        PoissonSampler(0.1, seed=0, n=10, buckets=buckets)


def test_bad_step():
    with pytest.raises(ValueError, match="step"):
        PoissonSampler(0.1, seed=0, n=10).sample(-1)
