"""Privacy events: what a mechanism released, described once, as data (MATH §1, §3, §7).

An event is a small frozen dataclass registered as a JAX pytree. Its numbers may be arrays: one event
with array leaves describes a whole batch of settings (all numeric leaves broadcast together), so
``PoissonSampled(q_grid, Gaussian(sigma_grid))`` is a sweep and ``PoissonSampled(q_per_record, ...)`` is one
setting per record. Accountants (:mod:`jaxpriv.accounting`) interpret events by walking their tree; each
event type declares, in its own class and nowhere else, its parameters and ranges, its RDP curve, its PLD
loss law and its dp_accounting mapping (:mod:`.base` says how; a new type is one new class).

=====================================  ===============================================================
event                                  what was released
=====================================  ===============================================================
``Gaussian(noise_multiplier)``         f(D) + N(0, σ²Δ₂²)  (σ = noise std / L2 sensitivity)
``Laplace(scale)``                     f(D) + Lap(bΔ₁)  (b = noise scale / L1 sensitivity; pure ε = 1/b)
``Staircase(epsilon, gamma, dimension)``  staircase noise (Geng & Viswanath), MATH §4.2; ``dimension`` > 1:
                                       per-coordinate noise under an L1 bound (RDP only)
``RandomizedResponse(epsilon, k)``     k-ary randomized response
``PoissonSampled(rate, event)``        ``event`` on a Poisson sample with inclusion probability q
``RandomAllocation(k, t, event)``      each example in k of t Gaussian ``event`` steps, chosen uniformly
                                       (k = 1: balls in bins; PLD only, MATH §11)
``SampledWithoutReplacement(b, n, e)``  a uniform batch of b of n records (Gaussian ``e``; MATH §11.5)
``TruncatedPoissonSampled(q, m, e, n)``  a Poisson sample cut to a uniform m of it when larger (Gaussian
                                       ``e``; n the dataset size, optional; MATH §11.6)
``ShuffledBatches(b, n, e)``            one epoch of shuffled batches of b of n records (Gaussian ``e``): a
                                       certified *lower* bound only, refused as an upper one (MATH §11.7)
``ClientSampled(rate, event)``         rPDP-FL's client sampling: ``event`` (a client's whole local run)
                                       happens with probability λ (MATH §1.5)
``SelfComposed(event, count)``         ``event`` repeated T times
``Composed(events)``                   the events in sequence
``Shuffled(epsilon0, n, clones)``      n shuffled ε₀-LDP reports (MATH §3.1)
``PersonalizedShuffled(eps_i, model)``  shuffled reports with one local budget per user (a population, not a
                                       batch); ``Shuffled(eps_i, model=...)`` is its deprecated spelling
``AmplifiedBandMF(σ, q, n, b)``        n steps of b-banded matrix-factorization noise (``noise_multiplier``
                                       σ, ``sampling_rate`` q, ``steps`` n, ``bands`` b) with cyclic Poisson
                                       sampling over b partitions (MATH §12.2): ⌈n/b⌉ subsampled Gaussians
=====================================  ===============================================================

Modules: :mod:`.base` (the declaration every type makes, the generic walks), :mod:`.noise` (the noise
mechanisms), :mod:`.sampling`, :mod:`.allocation`, :mod:`.bounded_batches`, :mod:`.shuffled_batches`,
:mod:`.composition`, :mod:`.shuffled`, :mod:`.correlated` (correlated noise), and :mod:`.laws` (the loss-law
kernels the PLD declarations use).

dp_accounting's DpEvents convert both ways (:func:`from_dp_accounting`, :func:`to_dp_accounting`); that
package stays optional.

Example:
  >>> from jaxpriv import accounting, events
  >>> step = events.PoissonSampled(0.01, events.Gaussian(1.1))
  >>> round(float(accounting.epsilon(events.SelfComposed(step, 10_000), 1e-5, accountant="rdp")), 3)
  5.632
"""

from __future__ import annotations

from .base import (Event, Parameter, batch_shape, broadcast_numbers, children, event_type, event_types,
                   from_dp_accounting, leaves, map_numbers, to_dp_accounting, unsupported, validate, walk)
from .allocation import RandomAllocation
from .bounded_batches import SampledWithoutReplacement, TruncatedPoissonSampled
from .composition import Composed, SelfComposed
from .correlated import AmplifiedBandMF
from .noise import (NOISE_MECHANISMS, Gaussian, Laplace, NoiseFamily, RandomizedResponse, Staircase,
                    noise_family, noise_mechanism, sensitivity_norm)
from .sampling import ClientSampled, PoissonSampled
from .shuffled import SHUFFLE_CLONES, SHUFFLE_MODELS, PersonalizedShuffled, Shuffled
from .shuffled_batches import ShuffledBatches

__all__ = [
    "Gaussian",
    "Laplace",
    "Staircase",
    "RandomizedResponse",
    "PoissonSampled",
    "RandomAllocation",
    "SampledWithoutReplacement",
    "TruncatedPoissonSampled",
    "ShuffledBatches",
    "ClientSampled",
    "SelfComposed",
    "Composed",
    "Shuffled",
    "PersonalizedShuffled",
    "AmplifiedBandMF",
    "Event",
    "Parameter",
    "event_type",
    "event_types",
    "NOISE_MECHANISMS",
    "NoiseFamily",
    "noise_family",
    "noise_mechanism",
    "sensitivity_norm",
    "validate",
    "unsupported",
    "batch_shape",
    "leaves",
    "map_numbers",
    "broadcast_numbers",
    "children",
    "walk",
    "from_dp_accounting",
    "to_dp_accounting",
]
