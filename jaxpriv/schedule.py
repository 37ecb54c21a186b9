"""DP-SGD's sampling rate and number of steps from a training schedule: dataset size, batch size, epochs.

The accounting functions take (q, T) — the Poisson sampling rate and the number of steps — while a
training run is usually described by its dataset size N, (expected) batch size B and number of epochs
E. :func:`sampling_and_steps` converts with the convention of TensorFlow Privacy's
``compute_dp_sgd_privacy_lib`` (``compute_dp_sgd_privacy`` and ``compute_noise``, which account with
dp_accounting's ``PoissonSampledDpEvent``), also used by Opacus's ``compute_dp_sgd_privacy`` script:

    q = B / N,    T = ⌈E · N / B⌉

Numpy only (no JAX): the command line converts its ``--dataset-size/--batch-size/--epochs`` options with
it before importing JAX.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from ._checks import check_scalar

__all__ = ["sampling_and_steps"]


def sampling_and_steps(dataset_size: int, batch_size: float, epochs: float) -> tuple[float, int]:
    """The Poisson sampling rate q and the number of steps T of E epochs of DP-SGD over N records with
    expected batch size B: q = B/N and T = ⌈E·N/B⌉.

    Convention of TensorFlow Privacy's ``compute_dp_sgd_privacy_lib`` (``q = batch_size / n``,
    ``steps = int(math.ceil(epochs * n / batch_size))``, accounted with dp_accounting's
    ``PoissonSampledDpEvent``) and Opacus's ``compute_dp_sgd_privacy``: an epoch is N/B steps, the last
    partial step of the run is counted as a whole one. The ceiling is taken on the numbers as written
    (exact decimal arithmetic), so float rounding never adds a step: 0.3 epochs of 1000 records in
    batches of 100 is 3 steps (``math.ceil(0.3 * 1000 / 100)`` would give 4).

    Note that :func:`jaxpriv.train.dpsgd.train` plans E·round(N/B) steps for an integer E (whole epochs
    of equal length); the two agree whenever B divides N.

    Args:
      dataset_size: number of training records N, an integer ≥ 1.
      batch_size: expected batch size B = qN, in (0, N] (Poisson sampling: real values allowed).
      epochs: number of epochs E > 0 (fractional allowed).

    Returns:
      ``(q, steps)``: a float in (0, 1] and an int ≥ 1 — the rate of the Poisson-subsampled Gaussian
      (MATH §1.3) and the count of its composition (§1.7) — ready for :func:`jaxpriv.dpsgd_epsilon`,
      :func:`jaxpriv.calibrate.noise_multiplier` and the events of :mod:`jaxpriv.events`.

    Example:
      >>> import jaxpriv
      >>> from jaxpriv.schedule import sampling_and_steps
      >>> q, steps = sampling_and_steps(dataset_size=60_000, batch_size=256, epochs=60)
      >>> round(q, 6), steps
      (0.004267, 14063)
      >>> round(float(jaxpriv.dpsgd_epsilon(q, 1.12, steps, 1e-5)), 2)  # ε of noise multiplier 1.12
      2.52
      >>> round(float(jaxpriv.calibrate.noise_multiplier(3.0, q, steps, 1e-5)), 4)  # σ for ε = 3
      1.014
    """
    n = check_scalar("dataset_size", dataset_size, 1.0, np.inf, integer=True)
    b = check_scalar("batch_size", batch_size, 0.0, n, lo_open=True)
    e = check_scalar("epochs", epochs, 0.0, np.inf, lo_open=True)
    steps = math.ceil(Fraction(repr(e)) * int(n) / Fraction(repr(b)))
    return b / n, int(steps)
