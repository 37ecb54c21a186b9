"""Correlated-noise events: the amplified banded matrix-factorization mechanism (MATH §12.2).

``AmplifiedBandMF(σ, q, n, b)``: n steps of DP-FTRL with a b-banded strategy C (lower triangular,
C[i, j] = 0 unless 0 ≤ i − j < b) whose columns have norm ≤ 1, noise multiplier σ, and cyclic Poisson
sampling: the data are split into b fixed partitions and at step t the partition t mod b is
Poisson-sampled at rate q (so a record can take part only in the steps t ≡ k (mod b) of its partition k,
at most ⌈n/b⌉ of them, each b apart). Choquette-Choo et al. (NeurIPS 2023, arXiv:2306.08153) prove that
under add/remove-one adjacency this mechanism is dominated by ⌈n/b⌉ compositions of the
Poisson-subsampled Gaussian mechanism PoissonSampled(q, Gaussian(σ)): the record's contributions at
steps b apart are multiplied by disjoint row blocks of C, so releasing C G + Z is post-processing of
⌈n/b⌉ adaptively chosen subsampled Gaussian releases (the derivation is in MATH §12.2).

So the event's interpretations are those of ``SelfComposed(PoissonSampled(q, Gaussian(σ)), ⌈n/b⌉)``
(:meth:`AmplifiedBandMF.dominating`): its RDP curve, its PLD components (both directions; not
symmetric), its dp_accounting DpEvent. With b = 1 (C diagonal with unit columns: the identity, DP-SGD)
it is exactly DP-SGD's event.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._numerics import is_concrete
from .base import Event, Parameter, event_type
from .composition import SelfComposed
from .noise import Gaussian
from .sampling import PoissonSampled

__all__ = ["AmplifiedBandMF"]


@event_type(("noise_multiplier", "sampling_rate", "steps", "bands"))
class AmplifiedBandMF(Event):
    """n steps of b-banded matrix-factorization noise (column norms ≤ 1) with cyclic Poisson sampling at
    rate q over b partitions (MATH §12.2): dominated by ⌈n/b⌉ Poisson-subsampled Gaussians of noise
    multiplier σ (Choquette-Choo et al., NeurIPS 2023, arXiv:2306.08153; add/remove-one adjacency).

    Fields: ``noise_multiplier`` σ > 0 (noise std on C G over the clip norm), ``sampling_rate`` q ∈ [0, 1]
    (each record of the step's partition is included with probability q), ``steps`` n ≥ 1 and ``bands``
    b ∈ [1, n], integers. Numbers may be arrays (a batch of settings), as for every event.

    Example:
      >>> from jaxpriv import accounting, events
      >>> dpsgd = events.SelfComposed(events.PoissonSampled(0.01, events.Gaussian(1.1)), 1000)
      >>> band = events.AmplifiedBandMF(noise_multiplier=1.1, sampling_rate=0.01, steps=1000, bands=1)
      >>> bool(accounting.epsilon(band, 1e-5, accountant="rdp") == accounting.epsilon(dpsgd, 1e-5, accountant="rdp"))
      True
      >>> events.AmplifiedBandMF(1.1, 0.01, 1000, 4).dominating()   # ⌈1000/4⌉ participations
      SelfComposed(event=PoissonSampled(rate=0.01, event=Gaussian(noise_multiplier=1.1)), count=250.0)
    """

    noise_multiplier: Any
    sampling_rate: Any
    steps: Any
    bands: Any

    PARAMETERS = (Parameter("noise_multiplier", "AmplifiedBandMF noise_multiplier sigma", lo_open=True),
                  Parameter("sampling_rate", "AmplifiedBandMF sampling_rate q", 0.0, 1.0),
                  Parameter("steps", "AmplifiedBandMF steps n", 1.0, integer=True),
                  Parameter("bands", "AmplifiedBandMF bands b", 1.0, integer=True))

    def check(self):
        """bands ≤ steps (the ranges of each are the Parameters'); concrete numbers only."""
        if not is_concrete((self.steps, self.bands)):
            return
        steps, bands = np.broadcast_arrays(np.asarray(self.steps, np.float64), np.asarray(self.bands, np.float64))
        too_many = bands > steps  # NaN compares False: the Parameters name it
        if np.any(too_many):
            raise ValueError(f"AmplifiedBandMF bands b must lie in [1, steps n], got b = {float(bands[too_many][0])!r} "
                             f"with n = {float(steps[too_many][0])!r}")

    def participations(self):
        """⌈n/b⌉: the most steps one record takes part in (cyclic sampling over b partitions), float64."""
        steps, bands = np.asarray(self.steps, np.float64), np.asarray(self.bands, np.float64)
        count = np.ceil(steps / bands)  # exact: n/b is correctly rounded, and ≥ 1/b from any other integer
        return count if count.ndim else float(count)

    def dominating(self) -> SelfComposed:
        """The event this one is interpreted as: SelfComposed(PoissonSampled(q, Gaussian(σ)), ⌈n/b⌉)."""
        return SelfComposed(PoissonSampled(self.sampling_rate, Gaussian(self.noise_multiplier)),
                            self.participations())

    def rdp(self, orders):
        return self.dominating().rdp(orders)

    def pld_components(self, count):
        return self.dominating().pld_components(count)

    def pld_symmetric(self):
        return False

    def to_dp_accounting(self, convert):
        import dp_accounting

        count = int(self.participations())
        return dp_accounting.SelfComposedDpEvent(
            dp_accounting.PoissonSampledDpEvent(float(self.sampling_rate),
                                                dp_accounting.GaussianDpEvent(float(self.noise_multiplier))), count)
