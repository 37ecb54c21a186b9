"""Budget distributions: reproducible quantile populations and clear errors."""

import numpy as np
import pytest

from jaxpriv.shuffle.budgets import budgets


def test_uniform_quantiles():
    np.testing.assert_allclose(budgets("uniform:0.05,1", 4), 0.05 + 0.95 * (np.arange(4) + 0.5) / 4)


def test_gauss_clipped_matches_scipy_quantiles():
    stats = pytest.importorskip("scipy.stats")
    got = budgets("gauss:0.2,1,clip=0.05,1", 500)
    want = np.clip(stats.norm(0.2, 1).ppf((np.arange(500) + 0.5) / 500), 0.05, 1)
    np.testing.assert_allclose(got, np.sort(want), rtol=1e-12)


def test_levels_fractions():
    b = budgets("levels:0.1@0.7,1@0.2,5@0.1", 1000)
    assert [np.sum(b == e) for e in (0.1, 1.0, 5.0)] == [700, 200, 100]


def test_csv_file(tmp_path):
    path = tmp_path / "eps.csv"
    path.write_text("0.5\n1.0\n2.0\n")
    np.testing.assert_array_equal(budgets(str(path)), [0.5, 1.0, 2.0])


@pytest.mark.parametrize(
    "spec,n,match",
    [
        ("", 10, "spec"),
        ("beta:1,2", 10, "spec must be"),
        ("uniform:1", 10, "LO"),
        ("uniform:0,1", 10, "LO"),
        ("gauss:0.2,-1", 10, "SD"),
        ("gauss:0.2,1,clip=2,1", 10, "clip"),
        ("levels:0.1", 10, "levels"),
        ("levels:0.1@-1", 10, "levels"),
        ("levels:x@1", 10, "numbers"),
        ("levels:1@nan", 10, "positive finite budgets E and weights W"),
        ("levels:1@0.5,2@nan", 10, "positive finite budgets E and weights W"),
        ("levels:inf@1", 10, "positive finite budgets E and weights W"),
        ("levels:1@0.5", 10, r"weights W in \(0, 1\] summing to 1"),
        ("levels:1@0.5,2@0.7", 10, r"weights W in \(0, 1\] summing to 1"),
        ("uniform:0.1,1", 1, "n must lie"),
        ("uniform:0.1,1", 2.5, "n must be an integer"),
        ("uniform:0.1,1", None, "n"),
    ],
)
def test_bad_specs(spec, n, match):
    with pytest.raises(ValueError, match=match):
        budgets(spec, n)


def test_csv_with_a_non_positive_budget(tmp_path):
    path = tmp_path / "eps.csv"
    path.write_text("0.5\n0\n")
    with pytest.raises(ValueError, match="budgets"):
        budgets(str(path))
