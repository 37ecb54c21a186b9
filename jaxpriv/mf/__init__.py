"""Correlated noise by matrix factorization: banded strategies for DP-FTRL / BandMF (MATH §12).

The matrix mechanism adds to the gradient of step t the noise (C⁻¹Z)_t instead of DP-SGD's independent
Z_t, so that the noise partly cancels in the running sum of updates. This package holds the strategy
math (jax and numpy only): :func:`banded_strategy` optimises a b-banded lower-triangular C for n steps,
:func:`expected_error` is the papers' objective ‖A C⁻¹‖_F² · max_j ‖C[:, j]‖² for the prefix-sum
workload A. The noise itself is :func:`jaxpriv.train.noise.banded_noise_transform`; its privacy, with
cyclic Poisson sampling over b partitions, is :class:`jaxpriv.events.AmplifiedBandMF`.

Example:
  >>> import numpy as np
  >>> from jaxpriv import mf
  >>> mf.expected_error(np.eye(16))                  # DP-SGD: n(n + 1)/2
  136.0
  >>> C = mf.banded_strategy(16, bands=4, cache=False)
  >>> mf.bands_of(C), mf.expected_error(C) < 136.0
  (4, True)
"""

from .strategy import (banded_strategy, banded_toeplitz_strategy, bands_of, column_norms, expected_error, prefix_workload,
                       strategy_cache_dir)

__all__ = ["banded_strategy", "banded_toeplitz_strategy", "expected_error", "bands_of", "column_norms", "prefix_workload",
           "strategy_cache_dir"]
