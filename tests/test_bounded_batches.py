"""Fixed-size and truncated Poisson batches (events.SampledWithoutReplacement, TruncatedPoissonSampled; MATH
§11.5-11.6) against the exact output laws of small worst-case datasets, computed here by enumeration.

The worst case for a sum query of clip norm 1: the added record x contributes +1 and every other record −1
along one axis, so an example that displaces another moves the sum by 2. Enumerating which records are
sampled and kept gives each neighbouring dataset's output as a finite Gaussian mixture on that axis; δ(ε)
of the pair follows by quadrature, the Rényi divergence too. The events' bounds must lie above both, in
both directions; for fixed-size batches the worst case attains the bound.
"""

import itertools
import math

import numpy as np
import pytest
from scipy import integrate, special, stats

from jaxpriv import accounting
from jaxpriv import events as ev


def mixture_pdf(weights: dict, sigma: float):
    return lambda x: sum(w * stats.norm.pdf(x, loc=mu, scale=sigma) for mu, w in weights.items())


def hockey_stick(p, q, eps):
    """∫ (p − e^ε q)₊ by quadrature over the means' span ± 12σ."""
    return integrate.quad(lambda x: max(p(x) - math.exp(eps) * q(x), 0.0), -40, 40, limit=500, epsabs=1e-13)[0]


def log_mixture_pdf(weights: dict, sigma: float):
    means, logw = np.array(list(weights)), np.log(np.array(list(weights.values())))
    return lambda x: special.logsumexp(logw + stats.norm.logpdf(x, loc=means, scale=sigma))


def renyi(weights_p, weights_q, sigma, alpha):
    """D_α(P‖Q) = log ∫ p^α q^{1−α} / (α − 1), the integrand in log space over the means' span ± 20σ."""
    log_p, log_q = log_mixture_pdf(weights_p, sigma), log_mixture_pdf(weights_q, sigma)
    span = max(abs(m) for m in (*weights_p, *weights_q)) + 20 * sigma
    integrand = lambda x: math.exp(alpha * log_p(x) + (1 - alpha) * log_q(x))  # noqa: E731
    return math.log(integrate.quad(integrand, -span, span, limit=500, epsabs=0, epsrel=1e-10)[0]) / (alpha - 1)


def without_replacement_laws(batch, n):
    """Output means of the sum with x (n records: x and n − 1 others) and without it (the n − 1 others)."""
    with_x = {}
    for chosen in itertools.combinations(range(n), batch):  # record 0 is x
        mean = sum(1 if i == 0 else -1 for i in chosen)
        with_x[mean] = with_x.get(mean, 0.0) + 1 / math.comb(n, batch)
    return with_x, {-batch: 1.0}


def truncated_laws(q, cap, n):
    """Output means with x (and n − 1 others) and without it: each record sampled with probability q, a
    uniform ``cap`` of the sample kept when larger."""
    def law(records):  # records: +1 for x, −1 for the others
        out = {}
        for mask in itertools.product((0, 1), repeat=len(records)):
            prob = math.prod(q if m else 1 - q for m in mask)
            sample = [r for r, m in zip(records, mask) if m]
            kept = list(itertools.combinations(sample, cap)) if len(sample) > cap else [tuple(sample)]
            for subset in kept:
                out[sum(subset)] = out.get(sum(subset), 0.0) + prob / len(kept)
        return out

    return law([1] + [-1] * (n - 1)), law([-1] * (n - 1))


def both_directions(with_x, without_x, sigma, eps):
    p, q = mixture_pdf(with_x, sigma), mixture_pdf(without_x, sigma)
    return max(hockey_stick(p, q, eps), hockey_stick(q, p, eps))


@pytest.mark.parametrize("batch, n, sigma", [(2, 5, 1.0), (1, 3, 2.0)])
def test_without_replacement_is_attained_by_the_worst_case(batch, n, sigma):
    with_x, without_x = without_replacement_laws(batch, n)
    event = ev.SampledWithoutReplacement(batch, n, ev.Gaussian(sigma))
    for eps in (0.3, 1.0):
        exact = both_directions(with_x, without_x, sigma, eps)
        lower, upper = accounting.delta_interval(event, eps)
        assert lower <= exact * (1 + 1e-6) and exact <= upper <= exact * 1.01 + 1e-12


@pytest.mark.parametrize("q, cap, n, sigma", [(0.5, 2, 5, 1.0), (0.3, 1, 4, 1.5)])
def test_truncated_poisson_bounds_the_enumerated_worst_case(q, cap, n, sigma):
    with_x, without_x = truncated_laws(q, cap, n)
    assert abs(sum(with_x.values()) - 1) < 1e-12 and abs(sum(without_x.values()) - 1) < 1e-12
    for size in (n, None):  # with the dataset size, and without (every step may truncate)
        event = ev.TruncatedPoissonSampled(q, cap, ev.Gaussian(sigma), size)
        for eps in (0.3, 1.0):
            _, upper = accounting.delta_interval(event, eps)
            assert upper >= both_directions(with_x, without_x, sigma, eps)
        orders = np.array([2.0, 4.0])
        curve = np.asarray(ev.TruncatedPoissonSampled(q, cap, ev.Gaussian(sigma), size).rdp(orders))
        for alpha, bound in zip(orders, curve):
            assert bound >= max(renyi(with_x, without_x, sigma, alpha), renyi(without_x, with_x, sigma, alpha))


def test_truncation_probability_is_the_binomial_tail():
    event = ev.TruncatedPoissonSampled(0.004, 300, ev.Gaussian(1.0), 60_000)
    assert abs(float(event.displaced()) - stats.binom.sf(299, 59_999, 0.004)) < 1e-6
    # a cap above the other records: never displaced; no dataset size: always may be
    assert float(ev.TruncatedPoissonSampled(0.5, 10, ev.Gaussian(1.0), 5).displaced()) == 0.0
    assert float(ev.TruncatedPoissonSampled(0.5, 10, ev.Gaussian(1.0)).displaced()) == 1.0
    assert special.betainc(1.0, 1.0, 0.3) == pytest.approx(0.3)  # the identity the code uses, at its simplest


def test_rare_truncation_costs_little_and_frequent_truncation_costs_the_doubled_step():
    """PLD: a cut that happens with probability 2e-21 per step moves ε by less than the interval's width (RDP
    cannot say so: a rare doubled step dominates its high orders)."""
    step, delta = ev.Gaussian(1.1), 1e-5
    poisson_lower, poisson_upper = accounting.epsilon_interval(
        ev.SelfComposed(ev.PoissonSampled(0.004, step), 1000), delta)
    rare = ev.SelfComposed(ev.TruncatedPoissonSampled(0.004, 400, step, 60_000), 1000)
    rare_lower, rare_upper = accounting.epsilon_interval(rare, delta)
    assert poisson_lower <= rare_upper and rare_lower <= poisson_upper
    always = ev.SelfComposed(ev.TruncatedPoissonSampled(0.004, 400, step), 1000)
    doubled = ev.SelfComposed(ev.PoissonSampled(0.004, ev.Gaussian(0.55)), 1000)
    assert accounting.epsilon(always, delta, accountant="rdp") == pytest.approx(
        accounting.epsilon(doubled, delta, accountant="rdp"), rel=1e-9)


@pytest.mark.parametrize("event, match", [
    (ev.SampledWithoutReplacement(5, 4, ev.Gaussian(1.0)), "batch_size b must be at most dataset_size n"),
    (ev.SampledWithoutReplacement(0, 4, ev.Gaussian(1.0)), r"batch_size b must lie in \[1.0, inf\)"),
    (ev.SampledWithoutReplacement(2, 4.5, ev.Gaussian(1.0)), "dataset_size n must be an integer"),
    (ev.SampledWithoutReplacement(2, 4, ev.Laplace(1.0)), "must be a Gaussian step"),
    (ev.TruncatedPoissonSampled(1.5, 4, ev.Gaussian(1.0)), r"rate q must lie in \[0.0, 1.0\]"),
    (ev.TruncatedPoissonSampled(0.5, 0, ev.Gaussian(1.0)), r"max_batch must lie in \[1.0, inf\)"),
    (ev.TruncatedPoissonSampled(0.5, 2.5, ev.Gaussian(1.0)), "max_batch must be an integer"),
    (ev.TruncatedPoissonSampled(0.5, 2, ev.Gaussian(1.0), 0), r"dataset_size n must lie in \[1.0, inf\)"),
    (ev.TruncatedPoissonSampled(0.5, 2, ev.Laplace(1.0)), "must be a Gaussian step"),
])
def test_bad_input(event, match):
    for accountant in ("rdp", "pld"):
        with pytest.raises(ValueError, match=match):
            accounting.epsilon(event, 1e-5, accountant=accountant)
