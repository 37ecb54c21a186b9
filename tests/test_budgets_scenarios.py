"""Budget scenarios (jaxpriv.budgets): each law against an oracle CDF / moments written here, at tolerances
a correct generator meets with overwhelming probability (5 standard errors, KS p > 1e-4)."""

import math

import numpy as np
import pytest
from scipy import integrate, stats

from jaxpriv.budgets import SCENARIOS, scenario
from jaxpriv.shuffle.budgets import budgets

N = 100_000


def normal_mixture(components):
    """(weight, mean, sd) triples → (cdf, pdf) of the untruncated mixture."""
    cdf = lambda x: sum(w * stats.norm.cdf(x, m, s) for w, m, s in components)
    pdf = lambda x: sum(w * stats.norm.pdf(x, m, s) for w, m, s in components)
    return cdf, pdf


def per_component_truncated_cdf(components, lo, hi):
    def cdf(x):
        x = np.clip(x, lo, hi)
        total = 0.0
        for w, m, s in components:
            a, b = stats.norm.cdf(lo, m, s), stats.norm.cdf(hi, m, s)
            total = total + w * (stats.norm.cdf(x, m, s) - a) / (b - a)
        return total
    return cdf


def assert_within(sample_mean, mean, variance, n, k=5.0):
    assert abs(sample_mean - mean) <= k * math.sqrt(variance / n), (sample_mean, mean)


def assert_fraction(sample, p, n, k=5.0):
    assert abs(sample - p) <= k * math.sqrt(p * (1 - p) / n) + 1e-12, (sample, p)


def test_every_scenario_is_listed_and_bounded():
    bounds = {"ThreeLevels": (0.1, 10), "BoundedMixGauss": (0.1, 10), "BoundedPareto": (0.1, 10),
              "Uniform1": (0.05, 0.5), "Uniform2": (0.05, 1), "Uniform3": (0.05, 3), "Gauss1": (0.05, 0.5),
              "Gauss2": (0.05, 1), "Gauss3": (0.05, 3), "MixGauss1": (0.05, 0.5), "MixGauss2": (0.05, 1),
              "MixGauss3": (0.05, 3)}
    assert set(SCENARIOS) == set(bounds)
    for name, (lo, hi) in bounds.items():
        for bounding in ("clip", "truncate"):
            eps = scenario(name, 20_000, seed=7, bounding=bounding)
            assert eps.shape == (20_000,) and eps.dtype == np.float64
            assert np.all(eps >= lo) and np.all(eps <= hi), name


def test_three_levels_proportions():
    eps = scenario("ThreeLevels", N, seed=11)
    assert set(np.unique(eps)) == {0.1, 1.0, 5.0}
    for value, p in [(0.1, 0.7), (1.0, 0.2), (5.0, 0.1)]:
        assert_fraction(np.mean(eps == value), p, N)


MIX = [(0.7, 0.1, math.sqrt(0.01)), (0.2, 1.0, math.sqrt(0.05)), (0.1, 5.0, math.sqrt(0.5))]


def test_bounded_mix_gauss_truncated_matches_oracle_cdf_and_mean():
    eps = scenario("BoundedMixGauss", N, seed=3)
    cdf = per_component_truncated_cdf(MIX, 0.1, 10.0)
    assert stats.kstest(eps, cdf).pvalue > 1e-4
    # the published weights survive truncation: the third component is the only mass above 3
    assert_fraction(np.mean(eps > 3.0), 0.1 * (1 - stats.norm.cdf(3.0, 5.0, math.sqrt(0.5))), N)
    # moments by quadrature of the truncated mixture density
    pdf = lambda x: sum(w * stats.norm.pdf(x, m, s) / (stats.norm.cdf(10, m, s) - stats.norm.cdf(0.1, m, s))
                        for w, m, s in MIX)
    pts = [0.1, 0.5, 1.0, 2.0, 5.0]
    mean = integrate.quad(lambda x: x * pdf(x), 0.1, 10, points=pts)[0]
    second = integrate.quad(lambda x: x * x * pdf(x), 0.1, 10, points=pts)[0]
    assert_within(eps.mean(), mean, second - mean**2, N)


def test_bounded_mix_gauss_reads_variances():
    # records above 3 come from N(5, 0.5): their spread is sd √0.5 ≈ 0.707 (not 0.5)
    top = scenario("BoundedMixGauss", N, seed=5)
    top = top[top > 3.0]
    sd = math.sqrt(0.5)
    a = (3.0 - 5.0) / sd
    law = stats.truncnorm(a, (10 - 5.0) / sd, loc=5.0, scale=sd)
    assert abs(top.std() - law.std()) <= 5 * law.std() / math.sqrt(2 * top.size)
    assert abs(top.std() - 0.5) > 0.1


def test_bounded_mix_gauss_clipped_has_atom_at_lower_bound():
    eps = scenario("BoundedMixGauss", N, seed=3, bounding="clip")
    cdf, _ = normal_mixture(MIX)
    assert_fraction(np.mean(eps == 0.1), cdf(0.1), N)  # ≈ 0.35: half of the first component


def test_bounded_pareto_is_the_bounded_pareto_law():
    eps = scenario("BoundedPareto", N, seed=9)
    cdf = lambda x: (1 - 0.1 / np.clip(x, 0.1, 10)) / (1 - 0.01)
    assert stats.kstest(eps, cdf).pvalue > 1e-4
    mean = 0.1 * 10 * math.log(100) / (10 - 0.1)  # E X = L·H·ln(H/L)/(H − L) for shape 1
    second = 0.1 * (10 - 0.1) / (1 - 0.01)  # E X² = ∫ x² · L/x² dx / (1 − L/H)
    assert_within(eps.mean(), mean, second - mean**2, N)


def test_bounded_pareto_clipped_puts_the_tail_at_ten():
    eps = scenario("BoundedPareto", N, seed=9, bounding="clip")
    assert_fraction(np.mean(eps == 10.0), 0.1 / 10, N)


@pytest.mark.parametrize("name, hi", [("Uniform1", 0.5), ("Uniform2", 1.0), ("Uniform3", 3.0)])
def test_apes_uniform(name, hi):
    eps = scenario(name, N, seed=2)
    assert stats.kstest(eps, stats.uniform(0.05, hi - 0.05).cdf).pvalue > 1e-4


@pytest.mark.parametrize("name, components, hi", [
    ("Gauss1", [(1.0, 0.1, 1.0)], 0.5),
    ("Gauss2", [(1.0, 0.2, 1.0)], 1.0),
    ("Gauss3", [(1.0, 0.5, 1.0)], 3.0),
    ("MixGauss1", [(0.9, 0.1, 1.0), (0.1, 0.5, 1.0)], 0.5),
    ("MixGauss2", [(0.9, 0.2, 1.0), (0.1, 1.0, 1.0)], 1.0),
    ("MixGauss3", [(0.9, 0.5, 1.0), (0.1, 3.0, 1.0)], 3.0),
])
def test_apes_clipped_gaussians(name, components, hi):
    lo = 0.05
    eps = scenario(name, N, seed=4)
    cdf, pdf = normal_mixture(components)
    p_lo, p_hi = cdf(lo), 1 - cdf(hi)
    assert_fraction(np.mean(eps == lo), p_lo, N)
    assert_fraction(np.mean(eps == hi), p_hi, N)
    inside = eps[(eps > lo) & (eps < hi)]
    conditional = lambda x: (cdf(np.clip(x, lo, hi)) - p_lo) / (cdf(hi) - p_lo)
    assert stats.kstest(inside, conditional).pvalue > 1e-4
    mean = lo * p_lo + hi * p_hi + integrate.quad(lambda x: x * pdf(x), lo, hi)[0]
    second = lo**2 * p_lo + hi**2 * p_hi + integrate.quad(lambda x: x * x * pdf(x), lo, hi)[0]
    assert_within(eps.mean(), mean, second - mean**2, N)


def test_seeded_and_prefix_stable():
    a = scenario("BoundedMixGauss", 1000, seed=42)
    np.testing.assert_array_equal(a, scenario("BoundedMixGauss", 1000, seed=42))
    np.testing.assert_array_equal(a[:10], scenario("BoundedMixGauss", 10, seed=42))
    assert not np.array_equal(a, scenario("BoundedMixGauss", 1000, seed=43))
    assert scenario("Gauss2", 1).shape == (1,)


def test_budgets_spec_delegates_to_scenario():
    np.testing.assert_array_equal(budgets("scenario:BoundedPareto,seed=3", 500),
                                  np.sort(scenario("BoundedPareto", 500, seed=3)))
    np.testing.assert_array_equal(budgets("scenario:Gauss2", 50), np.sort(scenario("Gauss2", 50, seed=0)))
    np.testing.assert_array_equal(budgets("scenario: ThreeLevels , seed = 1", 50),
                                  np.sort(scenario("ThreeLevels", 50, seed=1)))


@pytest.mark.parametrize("spec, match", [
    ("scenario:Nope", "name must be one of ThreeLevels, BoundedMixGauss"),
    ("scenario:Gauss2,seed=x", "seed"),
    ("scenario:Gauss2,seed=-1", "seed"),
    ("scenario:Gauss2,sed=1", "seed"),
    ("nonsense:1", "scenario:NAME"),
])
def test_budgets_spec_errors(spec, match):
    with pytest.raises(ValueError, match=match):
        budgets(spec, 10)


@pytest.mark.parametrize("kwargs, match", [
    ({"name": "threelevels"}, "name must be one of .*BoundedPareto.*MixGauss3"),
    ({"name": 3}, "name must be one of"),
    ({"n": 0}, r"n must lie in \[1"),
    ({"n": 2.5}, "n must be an integer"),
    ({"n": "10"}, "n must be an integer"),
    ({"n": True}, "n must be an integer"),
    ({"seed": -1}, "seed must be an integer"),
    ({"seed": 1.5}, "seed must be an integer"),
    ({"bounding": "reject"}, "bounding must be"),
])
def test_bad_input(kwargs, match):
    args = {"name": "ThreeLevels", "n": 10, "seed": 0} | kwargs
    with pytest.raises(ValueError, match=match):
        scenario(**args)
