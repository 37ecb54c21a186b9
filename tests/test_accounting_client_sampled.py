"""The PLD accountant on rPDP-FL's client sampling (events.ClientSampled, MATH §1.5, §7) against oracles.

A client-sampled round releases its local run with probability λ and nothing otherwise, so T rounds have
δ(ε) = Σ_k Bin(k; T, λ)·δ_k(ε), δ_k the run composed k times (per neighbouring direction; the worse
direction is reported):

* local runs of τ Gaussian steps: δ_k is the GDP formula with μ = √(kτ)/σ (closed form);
* one Poisson-subsampled Gaussian step per round, T ≤ 2: δ_k by the (nested) quadrature of
  tests/test_accounting_pld.py;
* λ = 1 is plain composition; the RDP accountant (rPDP-FL's Lemma 6) is never tighter.
"""

import jax
import numpy as np
import pytest
from scipy import optimize, stats
from test_accounting_pld import gaussian_delta, sub_gaussian_delta

from jaxpriv import accounting
from jaxpriv import events as ev


@pytest.fixture(autouse=True)
def x64_stays_off():
    assert not jax.config.jax_enable_x64
    yield
    assert not jax.config.jax_enable_x64


def client_rounds(rate, run, rounds):
    return ev.SelfComposed(ev.ClientSampled(rate, run), rounds)


def mixture_delta(rate, rounds, delta_k):
    """Σ_k Bin(k; T, λ)·δ_k(ε) (δ_0 = 0 for ε ≥ 0)."""
    return sum(stats.binom.pmf(k, rounds, rate) * delta_k(k) for k in range(1, rounds + 1))


GAUSS = [  # (λ, σ, τ, T)
    (0.3, 2.0, 5, 20),
    (0.05, 1.0, 3, 40),
    (0.8, 6.0, 10, 8),
    (0.3, 10.0, 400, 3),  # a long local run: its dominated PLD is moved up by a non-zero Hoeffding shift
]


def gauss_delta(rate, sigma, tau, rounds, eps):
    return mixture_delta(rate, rounds, lambda k: gaussian_delta(np.sqrt(k * tau) / sigma, eps))


@pytest.fixture(scope="module")
def gauss_intervals():
    rate, sigma, tau, rounds = (np.array(c) for c in zip(*GAUSS))
    run = ev.SelfComposed(ev.Gaussian(sigma), tau)
    return accounting.epsilon_interval(client_rounds(rate, run, rounds), 1e-5)


@pytest.mark.parametrize("i", range(len(GAUSS)))
def test_gaussian_runs_against_the_binomial_mixture(gauss_intervals, i):
    rate, sigma, tau, rounds = GAUSS[i]
    exact = optimize.brentq(lambda e: gauss_delta(rate, sigma, tau, rounds, e) - 1e-5, 1e-9, 100.0, xtol=1e-13)
    lower, upper = gauss_intervals[0][i], gauss_intervals[1][i]
    assert lower <= exact <= upper, (lower, exact, upper)
    assert upper - lower <= 0.01 * upper


def test_gaussian_runs_delta_interval():
    rate, sigma, tau, rounds = GAUSS[0]
    eps = np.array([0.5, 2.0, 8.0])
    event = client_rounds(rate, ev.SelfComposed(ev.Gaussian(sigma), tau), rounds)
    lower, upper = accounting.delta_interval(event, eps)
    exact = np.array([gauss_delta(rate, sigma, tau, rounds, e) for e in eps])
    assert np.all(lower <= exact) and np.all(exact <= upper), (lower, exact, upper)
    assert np.all(upper <= exact * 1.01 + 1e-12)


SUB = [  # (λ, q, σ, T, ε): one Poisson-subsampled Gaussian step per round
    (0.5, 0.1, 1.0, 1, 0.5),
    (0.3, 0.5, 2.0, 1, 0.1),
    (0.4, 0.3, 1.5, 2, 0.3),
]


@pytest.mark.parametrize("i", range(len(SUB)))
def test_subsampled_runs_by_quadrature(i):
    rate, q, sigma, rounds, eps = SUB[i]
    by_direction = {d: mixture_delta(rate, rounds, lambda k: sub_gaussian_delta(q, sigma, k, eps, d))
                    for d in ("remove", "add")}
    exact = max(by_direction.values())
    event = client_rounds(rate, ev.PoissonSampled(q, ev.Gaussian(sigma)), rounds)
    lower, upper = accounting.delta_interval(event, eps)
    assert lower <= exact * (1 + 1e-6) and exact * (1 - 1e-6) <= upper, (lower, exact, upper)
    assert upper <= 1.01 * exact


def test_full_participation_is_plain_composition():
    run = ev.SelfComposed(ev.PoissonSampled(0.02, ev.Gaussian(0.9)), 10)
    nested = accounting.epsilon_interval(client_rounds(1.0, run, 20), 1e-5)
    plain = accounting.epsilon_interval(ev.SelfComposed(ev.PoissonSampled(0.02, ev.Gaussian(0.9)), 200), 1e-5)
    # both intervals hold the same true ε; the nested one pays a little for its inner grid
    assert nested[0] <= plain[1] and plain[0] <= nested[1]
    assert nested[1] == pytest.approx(plain[1], rel=1e-3)


def test_tighter_than_rdp_and_batched_like_single():
    from jaxpriv import _tiers

    rate = np.array([0.1, 0.5])
    run = ev.SelfComposed(ev.PoissonSampled(0.05, ev.Gaussian(1.0)), 5)
    event = client_rounds(rate, run, 30)
    # every call in one tier (jaxpriv._tiers): a program's quick and optimised forms round differently, and
    # which one a call runs depends on how often the process has called it (this test alone, or after others)
    with _tiers.optimised():
        pld = accounting.epsilon(event, 1e-5, accountant="pld")
        rdp = accounting.epsilon(event, 1e-5, accountant="rdp")
        assert pld.shape == (2,) and np.all(pld < rdp)
        one = accounting.epsilon(client_rounds(0.5, run, 30), 1e-5, accountant="pld")
        assert float(one) == pytest.approx(pld[1], rel=1e-12)
        assert accounting.epsilon(event, 1e-5) == pytest.approx(pld, rel=1e-12)  # "best" takes the PLD


def test_client_sampling_inside_poisson_sampling_is_refused():
    event = ev.PoissonSampled(0.1, ev.ClientSampled(0.5, ev.Gaussian(1.0)))
    with pytest.raises(ValueError, match="ClientSampled inside PoissonSampled"):
        accounting.epsilon(event, 1e-5, accountant="pld")


def test_composed_with_other_steps():
    """A client-sampled stage composed with a plain Gaussian release: δ is the binomial mixture of GDP
    terms with the extra Gaussian's μ added in quadrature (closed form)."""
    rate, sigma, tau, rounds, extra = 0.4, 3.0, 4, 6, 5.0
    event = ev.Composed((client_rounds(rate, ev.SelfComposed(ev.Gaussian(sigma), tau), rounds), ev.Gaussian(extra)))

    def delta(eps):
        return sum(stats.binom.pmf(k, rounds, rate) * gaussian_delta(np.sqrt(k * tau / sigma**2 + 1 / extra**2), eps)
                   for k in range(rounds + 1))

    exact = optimize.brentq(lambda e: delta(e) - 1e-5, 1e-9, 100.0, xtol=1e-13)
    lower, upper = accounting.epsilon_interval(event, 1e-5)
    assert lower <= exact <= upper and upper - lower <= 0.01 * upper, (lower, exact, upper)
