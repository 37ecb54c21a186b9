"""Batches of bounded size: fixed-size samples and truncated Poisson samples of Gaussian steps (MATH §11.5-11.6).

Both are reduced, by a coupling of the two neighbouring datasets' batches, to Poisson-subsampled Gaussian
pairs whose sensitivity is 1 where the example only joins the batch and 2 where it also displaces another:

* ``SampledWithoutReplacement(b, n, Gaussian(σ))``: a uniform batch of b of the n records. Dominated by
  ``PoissonSampled(b/n, Gaussian(σ/2))`` in both directions (add/remove of one record).
* ``TruncatedPoissonSampled(q, max_batch, Gaussian(σ), dataset_size=n)``: a Poisson sample of rate q, of
  which a uniform subset of ``max_batch`` records is kept when it is larger. Dominated by the pair that
  reveals whether the other records' sample alone filled the batch: with p = Pr[Bin(n − 1, q) ≥ max_batch],
  the subsampled Gaussian of sensitivity 1 with probability 1 − p and of sensitivity 2 with probability p.
  Without ``dataset_size``, p = 1 (any step may truncate): ``PoissonSampled(q, Gaussian(σ/2))``.

Both accountants interpret them (RDP: the label-revealing mixture's curve, log((1 − p)e^{(α−1)ρ₁} +
p e^{(α−1)ρ₂})/(α − 1)).

Example:
  >>> from jaxpriv import accounting, events
  >>> fixed = events.SampledWithoutReplacement(256, 60_000, events.Gaussian(1.1))
  >>> poisson = events.PoissonSampled(256 / 60_000, events.Gaussian(0.55))
  >>> eps = [float(accounting.epsilon(events.SelfComposed(e, 1000), 1e-5, accountant="rdp")) for e in (fixed, poisson)]
  >>> eps[0] == eps[1]
  True
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
import numpy as np
from jax.scipy import special

from .. import rdp as rdp_curves
from .._numerics import as_output, float64
from . import laws
from .base import Event, Parameter, event_type
from .noise import check_counted_gaussian, require_gaussian

__all__ = ["SampledWithoutReplacement", "TruncatedPoissonSampled", "batch_parameters"]


def batch_parameters(owner: str) -> tuple:
    """The ``PARAMETERS`` of a batch of b = ``batch_size`` of the n = ``dataset_size`` records (integers ≥ 1),
    named for the event type ``owner`` (with :func:`.noise.check_counted_gaussian` for b ≤ n)."""
    return (Parameter("batch_size", f"{owner} batch_size b", 1.0, integer=True),
            Parameter("dataset_size", f"{owner} dataset_size n", 1.0, integer=True))


@event_type(("batch_size", "dataset_size", "event"))
class SampledWithoutReplacement(Event):
    """A uniform batch of b = ``batch_size`` of the n = ``dataset_size`` records (1 ≤ b ≤ n); ``event`` the
    Gaussian step on it."""

    batch_size: Any
    dataset_size: Any
    event: Any

    PARAMETERS = batch_parameters("SampledWithoutReplacement")
    CHILD = "event"

    def check(self):
        check_counted_gaussian(self, "the coupling doubles its sensitivity", "batch_size", "dataset_size",
                               "batch_size b must be at most dataset_size n")

    def _rate(self):
        return self.batch_size / self.dataset_size

    def rdp(self, orders):
        return rdp_curves.subsampled_gaussian(self._rate(), self.event.noise_multiplier / 2, orders)

    def pld_law(self, add):
        return laws.poisson_sampled(self._rate(), laws.gaussian(self.event.noise_multiplier / 2), add)

    def pld_symmetric(self):
        return False


@event_type(("rate", "max_batch", "event", "dataset_size"))
class TruncatedPoissonSampled(Event):
    """A Poisson sample of rate q, cut to a uniform subset of ``max_batch`` records when larger; ``event``
    the Gaussian step on it. ``dataset_size`` n (optional) bounds how often the cut happens."""

    rate: Any
    max_batch: Any
    event: Any
    dataset_size: Any = None

    PARAMETERS = (Parameter("rate", "TruncatedPoissonSampled rate q", 0.0, 1.0),
                  Parameter("max_batch", "TruncatedPoissonSampled max_batch", 1.0, integer=True),
                  Parameter("dataset_size", "TruncatedPoissonSampled dataset_size n", 1.0, integer=True))
    CHILD = "event"

    def check(self):
        require_gaussian("TruncatedPoissonSampled", self.event, "the coupling doubles its sensitivity")

    def displaced(self):
        """p = Pr[Bin(n − 1, q) ≥ max_batch]: how often the other records alone fill the batch (1 without n)."""
        with float64():  # the tail enters RDP multiplied by e^{(α−1)ρ}: it needs its relative precision
            q = jnp.asarray(self.rate, jnp.float64)
            if self.dataset_size is None:
                return jnp.ones_like(q)
            others, cap = jnp.asarray(self.dataset_size, jnp.float64) - 1.0, jnp.asarray(self.max_batch, jnp.float64)
            # Pr[Bin(N, q) ≥ k] = I_q(k, N − k + 1), 0 where k > N
            full = special.betainc(cap, jnp.maximum(others - cap + 1.0, 1.0), q)
            # ε grows with p: round it up past betainc's error (~1e-10 relative, checked against scipy)
            return jnp.where(cap > others, 0.0, jnp.minimum(full * (1.0 + 1e-8), 1.0))

    def rdp(self, orders):
        sigma, p = self.event.noise_multiplier, jnp.asarray(self.displaced())[..., None]
        alone = rdp_curves.subsampled_gaussian(self.rate, sigma, orders)
        displacing = rdp_curves.subsampled_gaussian(self.rate, sigma / 2, orders)
        with float64():
            a = jnp.asarray(orders, jnp.float64) - 1.0
            return as_output(jnp.logaddexp(jnp.log1p(-p) + a * alone, jnp.log(p) + a * displacing) / a)

    def pld_law(self, add):
        sigma = self.event.noise_multiplier
        alone = laws.poisson_sampled(self.rate, laws.gaussian(sigma), add)
        displacing = laws.poisson_sampled(self.rate, laws.gaussian(sigma / 2), add)
        return laws.mixture(self.displaced(), alone, displacing)

    def pld_symmetric(self):
        return False

    def releases_nothing(self, size):
        return np.broadcast_to(np.asarray(self.rate, np.float64), (size,)) == 0.0
