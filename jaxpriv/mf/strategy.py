"""Banded matrix-factorization strategies for the prefix-sum workload (MATH §12.1).

The matrix mechanism releases A(G + C⁻¹Z) for the n×n workload A (here the prefix sums: lower-triangular
ones, so A G is the running sum of the n gradients that SGD's iterates are), a strategy C and Gaussian
noise Z: the noise added to the gradient of step t is (C⁻¹Z)_t (:mod:`jaxpriv.train.noise`,
:func:`~jaxpriv.train.noise.banded_noise_transform`). A strategy is *b-banded* when C is lower triangular
with C[i, j] = 0 unless 0 ≤ i − j < b; its inverse is then applied online with a buffer of b − 1 past
noise vectors, and with cyclic Poisson sampling over b partitions it is amplified as DP-SGD is
(MATH §12.2, :class:`jaxpriv.events.AmplifiedBandMF`).

The papers' objective (Choquette-Choo et al., NeurIPS 2023, arXiv:2306.08153; Denisov et al. 2022) is
the expected total squared error of the released prefix sums per unit of noise variance, times the
squared sensitivity (the largest column norm of C, one participation per b steps):

    err(C) = ‖A C⁻¹‖_F² · max_j ‖C[:, j]‖²          (:func:`expected_error`; err(I) = n(n + 1)/2)

:func:`banded_strategy` minimises it over b-banded C by L-BFGS (optax) in float64. The parameters are
the b diagonals of C only, and the column-norm constraint is handled inside the objective: each column is
divided by its norm, so every candidate has unit column norms and err(C) = ‖A C⁻¹‖_F². C⁻¹ is computed by
block forward substitution over b×b blocks (:mod:`._banded`): O(n²·b) time and O(n²) memory per
iteration, against a dense triangular solve's O(n³) (kept as :func:`_optimise`, the reference the bench
compares with). One compiled optimiser per (n, b).
"""

from __future__ import annotations

import functools
import hashlib
import os

import jax
import jax.numpy as jnp
import numpy as np

from .._numerics import float64
from . import _banded

__all__ = ["banded_strategy", "banded_toeplitz_strategy", "expected_error", "prefix_workload", "bands_of", "column_norms", "strategy_cache_dir"]

#: bump when the optimiser changes, so that strategies cached by an older version are not reused
_CACHE_VERSION = 2
#: L-BFGS iterations at most, and the relative gradient-norm tolerance that stops them
MAX_ITERATIONS = 500
TOLERANCE = 1e-9


def _check_int(name: str, value, lo: int, hi: int) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or not lo <= value <= hi:
        raise ValueError(f"{name} must be an integer in [{lo}, {hi}], got {value!r}")
    return int(value)


def prefix_workload(n: int) -> np.ndarray:
    """The prefix-sum workload A: the n×n lower-triangular matrix of ones (float64).

    Example:
      >>> from jaxpriv import mf
      >>> mf.prefix_workload(3)
      array([[1., 0., 0.],
             [1., 1., 0.],
             [1., 1., 1.]])
    """
    n = _check_int("n", n, 1, 2**31 - 1)
    return np.tril(np.ones((n, n)))


def column_norms(C) -> np.ndarray:
    """The L2 norms of the columns of ``C`` (float64): one participation's sensitivity of C G per column.

    Example:
      >>> import numpy as np
      >>> from jaxpriv import mf
      >>> mf.column_norms(np.array([[3.0, 0.0], [4.0, 1.0]]))
      array([5., 1.])
    """
    C = np.asarray(C, np.float64)
    return np.sqrt(np.sum(C * C, axis=0))


def _check_square_lower(C) -> np.ndarray:
    C = np.asarray(C, np.float64)
    if C.ndim != 2 or C.shape[0] != C.shape[1] or C.shape[0] == 0:
        raise ValueError(f"strategy must be a non-empty square matrix, got shape {C.shape}")
    if not np.all(np.isfinite(C)):
        raise ValueError("strategy must be finite")
    if np.any(np.triu(C, 1) != 0):
        raise ValueError("strategy must be lower triangular (C[i, j] = 0 for j > i)")
    if np.any(np.diag(C) == 0):
        raise ValueError("strategy must have a nonzero diagonal (C invertible)")
    return C


def bands_of(C) -> int:
    """The number of bands b of a lower-triangular strategy: 1 + the largest i − j with C[i, j] ≠ 0.

    ``ValueError`` when ``C`` is not square, lower triangular, finite and invertible (nonzero diagonal).

    Example:
      >>> import numpy as np
      >>> from jaxpriv import mf
      >>> mf.bands_of(np.eye(4)), mf.bands_of(np.tril(np.ones((4, 4))))
      (1, 4)
    """
    C = _check_square_lower(C)
    rows, cols = np.nonzero(C)
    return int(np.max(rows - cols)) + 1


def expected_error(C) -> float:
    """The papers' objective for the prefix-sum workload: ‖A C⁻¹‖_F² · max_j ‖C[:, j]‖² (MATH §12.1).

    The expected total squared error of the n released prefix sums of the matrix mechanism with strategy
    C and unit noise multiplier, at sensitivity max_j ‖C[:, j]‖ (one participation in every b steps; b =
    1: DP-SGD). A C⁻¹ is computed by a triangular solve in float64 (``jax.scipy.linalg.solve_triangular``).

    Args:
      C: an n×n lower-triangular matrix with a nonzero diagonal.

    Returns:
      a Python float; the identity (DP-SGD) gives n(n + 1)/2.

    Example:
      >>> import numpy as np
      >>> from jaxpriv import mf
      >>> mf.expected_error(np.eye(4))
      10.0
    """
    C = _check_square_lower(C)
    with float64():
        return float(_error(jnp.asarray(C), jnp.asarray(np.tril(np.ones(C.shape)))))


def _error(C, A):
    """‖A C⁻¹‖_F² · max_j ‖c_j‖²; A C⁻¹ = Xᵀ with Cᵀ X = Aᵀ (one triangular solve)."""
    X = jax.scipy.linalg.solve_triangular(C, A.T, lower=True, trans=1)
    return jnp.sum(X * X) * jnp.max(jnp.sum(C * C, axis=0))


def _normalised(P, mask):
    """The band parameters masked to the band, each column divided by its norm (unit column norms)."""
    C = jnp.where(mask, P, 0.0)
    return C / jnp.sqrt(jnp.sum(C * C, axis=0, keepdims=True))


@functools.partial(jax.jit, static_argnames=("iterations",))
def _optimise(P0, mask, A, tolerance, iterations: int):
    """L-BFGS (optax, zoom line search) on ‖A Ĉ⁻¹‖_F², Ĉ the column-normalised band of P."""

    def loss(P):
        C = _normalised(P, mask)
        X = jax.scipy.linalg.solve_triangular(C, A.T, lower=True, trans=1)
        return jnp.sum(X * X)

    P, used = _banded.lbfgs(loss, P0, tolerance, iterations, mask=mask)
    return _normalised(P, mask), loss(P), used


def _initial(n: int, bands: int) -> np.ndarray:
    """The start: the square-root factorization of A (Toeplitz, coefficients of (1 − x)^(−1/2):
    r_0 = 1, r_k = r_{k−1}(2k − 1)/(2k)), truncated to the band."""
    r = np.ones(n)
    for k in range(1, n):
        r[k] = r[k - 1] * (2 * k - 1) / (2 * k)
    i, j = np.indices((n, n))
    lag = i - j
    return np.where((lag >= 0) & (lag < bands), r[np.clip(lag, 0, n - 1)], 0.0)


@functools.partial(jax.jit, static_argnames=("n", "bands", "iterations"))
def _optimise_banded_jit(D0, tolerance, n: int, bands: int, iterations: int):
    _, valid, lags, columns, inside = _banded.layout(n, bands)  # numpy constants of the program
    return _banded.optimise(D0, jnp.asarray(valid), lags, columns, inside, n, tolerance, iterations)


def _optimise_banded(n: int, bands: int) -> np.ndarray:
    """The O(n²·b)-per-iteration optimiser over the b diagonals (:mod:`._banded`), from the square-root
    factorization truncated to the band; the n×n result in float64 with unit columns."""
    _, valid, _, _, _ = _banded.layout(n, bands)
    r = _initial(bands, bands)[:, 0]  # the square root's first b coefficients
    D0 = np.where(valid, r[:, None], 0.0)
    with float64():
        D, _, _ = _optimise_banded_jit(jnp.asarray(D0), jnp.asarray(TOLERANCE), n=n, bands=bands,
                                       iterations=MAX_ITERATIONS)
        D = np.asarray(D, np.float64)
    C = _banded.dense(D[:, :n], n)
    return C / column_norms(C)  # unit columns in float64 again after the device's rounding


@functools.partial(jax.jit, static_argnames=("n", "iterations"))
def _optimise_toeplitz_jit(c0, tolerance, n: int, iterations: int):
    return _banded.optimise_toeplitz(c0, n, tolerance, iterations)


def banded_toeplitz_strategy(n: int, *, bands: int) -> np.ndarray:
    """An optimised b-banded *Toeplitz* strategy for n steps: C[i, j] = c_{i−j} for 0 ≤ i − j < b, with b
    free coefficients (Choquette-Choo et al., NeurIPS 2023, arXiv:2306.08153, §"banded Toeplitz"; the
    objective of :func:`banded_strategy`). ‖c‖ = 1, which is the largest column norm (the last b − 1
    columns are shorter, so their norms are below 1). Each evaluation of the objective costs O(n·b) (C⁻¹
    is Toeplitz: the power series 1/c(x)), so n in the tens of thousands is cheap; its error is never below
    :func:`banded_strategy`'s optimum up to the optimiser's tolerance (a Toeplitz C is a banded C). Not cached.

    Args:
      n: the number of steps, an integer ≥ 1.
      bands: b, an integer in [1, n].

    Returns:
      float64 numpy array (n, n); ``bands=1`` is the identity.

    Example:
      >>> import numpy as np
      >>> from jaxpriv import mf
      >>> C = mf.banded_toeplitz_strategy(8, bands=2)
      >>> bool(np.all(np.diag(C, -1) == C[1, 0])), mf.bands_of(C)
      (True, 2)
      >>> mf.expected_error(C) < 36.0
      True
    """
    n = _check_int("n", n, 1, 2**31 - 1)
    bands = _check_int("bands", bands, 1, n)
    if bands == 1:
        return np.eye(n)
    c0 = _initial(bands, bands)[:, 0]
    with float64():
        c, _, _ = _optimise_toeplitz_jit(jnp.asarray(c0), jnp.asarray(TOLERANCE), n=n, iterations=MAX_ITERATIONS)
        c = np.asarray(c, np.float64)
    c = c / np.linalg.norm(c)
    return sum(np.diag(np.full(n - k, c[k]), -k) for k in range(bands))


def strategy_cache_dir() -> str | None:
    """Where :func:`banded_strategy` caches optimised strategies: ``$JAXPRIV_CACHE_DIR/mf`` when that
    variable is set (the empty string: no cache), else ``~/.cache/jaxpriv/mf`` (``XDG_CACHE_HOME``
    respected); None when caching is off.

    Example:
      >>> from jaxpriv import mf
      >>> d = mf.strategy_cache_dir()
      >>> d is None or d.endswith("mf")
      True
    """
    configured = os.environ.get("JAXPRIV_CACHE_DIR")
    if configured is not None:
        return os.path.join(configured, "mf") if configured else None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "jaxpriv", "mf")


def _cache_path(n: int, bands: int) -> str | None:
    folder = strategy_cache_dir()
    if folder is None:
        return None
    tag = hashlib.sha256(f"{_CACHE_VERSION}:{MAX_ITERATIONS}:{TOLERANCE}".encode()).hexdigest()[:8]
    return os.path.join(folder, f"banded_n{n}_b{bands}_{tag}.npy")


def _load(path: str, n: int, bands: int) -> np.ndarray | None:
    """A cached strategy, if it is there and still has the shape, band and unit column norms asked for."""
    try:
        C = np.load(path, allow_pickle=False)
        if (C.shape == (n, n) and C.dtype == np.float64 and bands_of(C) <= bands
                and np.allclose(column_norms(C), 1.0, rtol=0, atol=1e-12)):
            return C
    except (OSError, ValueError):
        pass
    return None


def _save(path: str, C: np.ndarray) -> None:
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        temporary = f"{path}.{os.getpid()}.tmp.npy"
        np.save(temporary, C, allow_pickle=False)
        os.replace(temporary, path)  # atomic: a concurrent reader sees the old file or the whole new one
    except OSError:  # a read-only home: run without the cache
        pass


def banded_strategy(n: int, *, bands: int, cache: bool = True) -> np.ndarray:
    """An optimised b-banded strategy C for n steps of the prefix-sum workload (MATH §12.1).

    Minimises :func:`expected_error` over n×n lower-triangular C with C[i, j] = 0 unless 0 ≤ i − j < b
    (Choquette-Choo et al., "(Amplified) Banded Matrix Factorization", NeurIPS 2023, arXiv:2306.08153;
    the objective of Denisov et al., NeurIPS 2022), by L-BFGS in float64 from the square-root
    factorization truncated to the band, with every column normalised inside the objective. The result
    has unit column norms (so its largest column norm, the sensitivity, is 1). ``bands=1`` is the
    identity exactly (DP-SGD): for a diagonal C the error Σ_j (n − j)/c_j² is smallest at c_j = 1, so no
    optimisation runs. A local optimum: the objective is not convex in C (it is in CᵀC, whose banded
    Cholesky factors are not all banded).

    Optimised strategies are cached on disk by (n, b) (:func:`strategy_cache_dir`), unless ``cache`` is
    False; a cached file that is unreadable or not a unit-column b-banded n×n matrix is recomputed.

    Args:
      n: the number of steps, an integer ≥ 1.
      bands: b, an integer in [1, n].
      cache: read and write the on-disk cache.

    Returns:
      float64 numpy array (n, n).

    Example:
      >>> import numpy as np
      >>> from jaxpriv import mf
      >>> C = mf.banded_strategy(8, bands=2, cache=False)
      >>> bool(np.all(np.triu(C, 1) == 0) and np.all(np.tril(C, -2) == 0))
      True
      >>> round(float(mf.column_norms(C).max()), 12)
      1.0
      >>> mf.expected_error(C) < mf.expected_error(np.eye(8)) == 36.0
      True
    """
    n = _check_int("n", n, 1, 2**31 - 1)
    bands = _check_int("bands", bands, 1, n)
    if not isinstance(cache, (bool, np.bool_)):
        raise ValueError(f"cache must be True or False, got {cache!r}")
    if bands == 1:
        return np.eye(n)
    path = _cache_path(n, bands) if cache else None
    if path is not None and os.path.exists(path):
        found = _load(path, n, bands)
        if found is not None:
            return found
    C = _optimise_banded(n, bands)
    if path is not None:
        _save(path, C)
    return C
