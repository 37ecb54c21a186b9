"""Shuffled batches: a certified lower bound, never an upper one (MATH §11.7).

Oracles written here, independent of the implementation:

* T = 1 (one batch holds everything): the pair is N(2, σ²) against N(1, σ²), whose δ(ε) is the Gaussian's
  closed form; the lower bound lies below it, and within 1% of it (the accountant's default tolerance).
* Monte Carlo of the adversarial pair itself (mixtures of Gaussians on R^T, its exact likelihood ratio,
  reshuffled epochs composed): the lower bound never exceeds the upper confidence bound of the estimate of
  δ(ε). Monte Carlo of the statistic the bound reads (the largest coordinate of each epoch): the bound is
  not far below its lower confidence bound (the discretisation costs little).
* The one-set test of Chua et al. (δ ≥ P(max > C) − e^ε Q(max > C), closed form, best C): the lower bound
  of one epoch is at least that.
* The papers' claim on our numbers: at σ = 0.5 and 100 steps of one epoch, shuffling's lower bound lies
  above the certified Poisson ε at rate 1/100.
"""

import numpy as np
import pytest
from scipy import special, stats

from jaxpriv import accounting, events as ev
from jaxpriv.mechanisms import shuffled_batches

G = ev.Gaussian


def _mc_delta(sigma, steps, used, epochs, epsilons, statistic, n=200_000, seed=0):
    """(mean, sd/√n) of the Monte Carlo estimate of δ(ε) = E_P[(1 − e^{ε−L})₊] for the remove pair (P: the
    example's coordinate shifted by 2, Q: by 1, with probability ``used``), L the loss of the whole output
    (``statistic`` False: the exact likelihood ratio of the mixtures) or of each epoch's largest coordinate."""
    rng = np.random.default_rng(seed)
    s2 = sigma * sigma
    loss = np.zeros(n)
    for _ in range(epochs):
        x = rng.normal(0.0, sigma, size=(n, steps))
        hit = rng.random(n) < used
        x[np.arange(n), rng.integers(0, steps, n)] += 2.0 * hit
        if statistic:  # the density of M = max_t x_t under each hypothesis, as a ratio
            m = x.max(1) / sigma

            def density(shift):
                head = stats.norm.logpdf(m - shift) + (steps - 1) * special.log_ndtr(m)
                if steps > 1:
                    head = np.logaddexp(head, np.log(steps - 1) + special.log_ndtr(m - shift) + stats.norm.logpdf(m)
                                        + (steps - 2) * special.log_ndtr(m))
                alone = np.log(steps) + stats.norm.logpdf(m) + (steps - 1) * special.log_ndtr(m)
                return np.logaddexp(np.log(used) + head, np.log1p(-used) + alone) if used < 1 else head

            loss += density(2.0 / sigma) - density(1.0 / sigma)
        else:  # log of (γ·mean_t e^{(μx_t − μ²/2)/σ²} + 1 − γ) for μ = 2 and μ = 1
            def ratio(mu):
                mean = special.logsumexp((mu * x - mu * mu / 2) / s2, axis=1) - np.log(steps)
                return np.logaddexp(np.log(used) + mean, np.log1p(-used)) if used < 1 else mean

            loss += ratio(2.0) - ratio(1.0)
    out = [np.maximum(-np.expm1(e - loss), 0.0) for e in epsilons]
    return np.array([o.mean() for o in out]), np.array([o.std() / np.sqrt(n) for o in out])


# one batched question serves the oracles: (σ, T, γ, epochs) per setting, the lower bound at three ε each
SETTINGS = [(0.8, 8, 1.0, 1), (0.8, 8, 1.0, 3), (0.6, 3, 0.9, 2)]  # T = 3 of n = 10 records in batches of 3
EPSILONS = np.array([0.5, 1.0, 2.0])


@pytest.fixture(scope="module")
def lower_deltas():
    sigma, steps, used, epochs = (np.array(c, dtype=float) for c in zip(*SETTINGS))
    batch = np.where(used < 1, 3, 1)
    n = np.where(used < 1, 10, steps)
    event = ev.SelfComposed(ev.ShuffledBatches(batch[:, None], n[:, None], G(sigma[:, None])), epochs[:, None])
    return accounting.delta_lower_bound(event, EPSILONS[None, :])


@pytest.mark.parametrize("i", range(len(SETTINGS)))
def test_lower_bound_is_below_monte_carlo_of_the_pair(lower_deltas, i):
    sigma, steps, used, epochs = SETTINGS[i]
    mean, se = _mc_delta(sigma, steps, used, epochs, EPSILONS, statistic=False, seed=i)
    assert np.all(lower_deltas[i] <= mean + 5 * se), (lower_deltas[i], mean, se)


@pytest.mark.parametrize("i", range(len(SETTINGS)))
def test_lower_bound_is_close_to_the_statistic_it_reads(lower_deltas, i):
    sigma, steps, used, epochs = SETTINGS[i]
    mean, se = _mc_delta(sigma, steps, used, epochs, EPSILONS, statistic=True, seed=10 + i)
    assert np.all(lower_deltas[i] <= mean + 5 * se)
    assert np.all(lower_deltas[i] >= 0.99 * (mean - 5 * se)), (lower_deltas[i], mean, se)


def test_one_epoch_is_at_least_the_papers_one_set_test(lower_deltas):
    sigma, steps, _, _ = SETTINGS[0]
    caps = np.linspace(-2.0, 8.0, 20_001)
    tail = lambda shift: -np.expm1(special.log_ndtr((caps - shift) / sigma)  # noqa: E731
                                   + (steps - 1) * special.log_ndtr(caps / sigma))
    one_set = np.array([np.max(tail(2.0) - np.exp(e) * tail(1.0)) for e in EPSILONS])
    # within the accountant's default tolerance (1% of the interval it computes)
    assert np.all(lower_deltas[0] >= one_set * (1 - 1e-2)), (lower_deltas[0], one_set)


def test_one_batch_is_the_gaussian_and_the_bound_is_tight():
    sigma, epochs = np.array([0.5, 1.0, 2.0]), 4
    event = ev.SelfComposed(ev.ShuffledBatches(64, 64, G(sigma)), epochs)
    lower = accounting.delta_lower_bound(event, 1.0)
    mu = np.sqrt(epochs) / sigma  # N(2, σ²) against N(1, σ²), four times: one Gaussian of μ = 2/σ
    exact = stats.norm.cdf(mu / 2 - 1.0 / mu) - np.e * stats.norm.cdf(-mu / 2 - 1.0 / mu)
    assert np.all(lower <= exact) and np.all(lower >= exact * (1 - 1e-2)), (lower, exact)


def test_shuffling_lower_bound_exceeds_the_poisson_epsilon():
    """Chua et al.'s claim, on our numbers: one epoch of 100 shuffled steps at σ = 0.5 is certainly less
    private than the Poisson accounting at rate 1/100 says (the certified upper end of its ε)."""
    shuffled = ev.ShuffledBatches(10, 1000, G(0.5))
    poisson = ev.SelfComposed(ev.PoissonSampled(0.01, G(0.5)), 100)
    floor = float(accounting.epsilon_lower_bound(shuffled, 1e-5))
    claim = float(accounting.epsilon(poisson, 1e-5, accountant="pld"))
    assert floor > 1.5 * claim, (floor, claim)


@pytest.mark.parametrize("ask", [
    lambda e: accounting.epsilon(e, 1e-5),
    lambda e: accounting.epsilon(e, 1e-5, accountant="pld"),
    lambda e: accounting.epsilon(e, 1e-5, accountant="rdp"),
    lambda e: accounting.delta(e, 1.0),
    lambda e: accounting.epsilon_interval(e, 1e-5),
    lambda e: accounting.delta_interval(e, 1.0),
    lambda e: accounting.PLD().interval(e, np.array([1e-5]), "epsilon"),
    lambda e: accounting.delta_profile(e, [1.0]),
])
def test_never_an_upper_bound(ask):
    shuffled = ev.ShuffledBatches(10, 1000, G(1.0))
    for event in (shuffled, ev.Composed((ev.PoissonSampled(0.01, G(1.0)), ev.SelfComposed(shuffled, 3)))):
        with pytest.raises(ValueError, match="ShuffledBatches is a lower bound only"):
            ask(event)


@pytest.mark.parametrize("event, match", [
    (ev.ShuffledBatches(0, 100, G(1.0)), r"ShuffledBatches batch_size b must lie in \[1.0, inf\)"),
    (ev.ShuffledBatches(2.5, 100, G(1.0)), "ShuffledBatches batch_size b must be an integer"),
    (ev.ShuffledBatches(10, 0, G(1.0)), r"ShuffledBatches dataset_size n must lie in \[1.0, inf\)"),
    (ev.ShuffledBatches(10, 99.5, G(1.0)), "ShuffledBatches dataset_size n must be an integer"),
    (ev.ShuffledBatches(200, 100, G(1.0)), "batch_size b must be at most dataset_size n"),
    (ev.ShuffledBatches(10, 100, G(0.0)), r"noise_multiplier sigma must lie in \(0.0, inf\)"),
    (ev.ShuffledBatches(10, 100, ev.Laplace(1.0)), "ShuffledBatches"),
])
def test_bad_input(event, match):
    with pytest.raises(ValueError, match=match):
        accounting.epsilon_lower_bound(event, 1e-5)


def test_lower_bound_of_an_unreadable_event_is_refused_with_the_reason():
    with pytest.raises(ValueError, match="cannot bound this event from below: Staircase with dimension > 1"):
        accounting.epsilon_lower_bound(ev.Staircase(1.0, dimension=3), 1e-5)


@pytest.mark.parametrize("args, match", [
    ((0.0, 4), "sigma must be a finite number > 0"),
    ((1.0, 0), "steps must be an integer >= 1"),
    ((1.0, 4, 0.0), r"used must lie in \(0.0, 1.0\]"),
])
def test_epoch_laws_bad_input(args, match):
    with pytest.raises(ValueError, match=match):
        shuffled_batches.epoch_laws(*args)


# --------------------------------------------------------------------------------------------------
# jaxpriv epsilon --sampling shuffle
# --------------------------------------------------------------------------------------------------


def test_cli_shows_the_lower_bound_beside_the_certified_schemes(capsys):
    import json

    from jaxpriv.cli import main

    argv = ["epsilon", "--q", "0.1", "--sigma", "0.8", "--steps", "30", "--delta", "1e-5", "--sampling", "shuffle"]
    assert main([*argv, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)["sampling"]
    assert (out["scheme"], out["steps_per_epoch"], out["epochs"], out["epsilon"]) == ("shuffle", 10, 3, None)
    floor, poisson = out["shuffle"]["epsilon_lower_bound"], out["poisson"]
    assert floor > poisson["epsilon_pld_upper"] > out["balls_in_bins"]["epsilon_pld_upper"]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "shuffled batches: no certified ε; ε ≥" in text and "the Poisson ε below is false for them" in text
    assert "shuffled batches (chosen)" in text and "lower bound only" in text


@pytest.mark.parametrize("argv, message", [
    (["--q", "0.03", "--steps", "1000"], "--sampling shuffle needs 1/q to be an integer"),
    (["--q", "0.1", "--steps", "1005"], "multiple of t = 1/q = 10"),
])
def test_cli_shuffle_bad_input(argv, message, capsys):
    from jaxpriv.cli import main

    assert main(["epsilon", "--sigma", "1.0", "--delta", "1e-5", "--sampling", "shuffle", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
