"""Shuffled events in the PLD accountant and many-round shuffle accounting (MATH §3.1, §7).

The oracle is independent of jaxpriv: the one-round clone pair enumerated state by state with scipy's
binomial pmf (or a direct Poisson-binomial convolution), states with the same likelihood ratio merged
(lossless: the ratio is a sufficient statistic), and the T-fold product's δ(ε) = Σ max(0, ΠP − e^ε ΠQ)
summed exactly: T = 1, 2 directly, T = 3, 4 as a sum over one factor of sorted suffix sums over the other.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import optimize, stats

from jaxpriv import _tiers, accounting
from jaxpriv import events as ev
from jaxpriv.calibrate.shuffle_rounds import rounds_epsilon, rounds_summary
from jaxpriv.shuffle import clones_delta, clones_epsilon, personalized_epsilon


def _pair(clone_pmf, eps_t):
    """Merged (loss, P, Q) of the one-round pair: C ~ clone_pmf, a | C as in MATH §3.1."""
    q = 1.0 / (1.0 + math.exp(-eps_t))
    merged = {}
    for c, pc in enumerate(clone_pmf):
        if pc == 0.0:
            continue
        a = np.arange(c + 2)
        b_prev = stats.binom.pmf(a - 1, c, 0.5)
        b_here = stats.binom.pmf(a, c, 0.5)
        p = pc * (q * b_prev + (1 - q) * b_here)
        qq = pc * ((1 - q) * b_prev + q * b_here)
        for ai, pi, qi in zip(a, p, qq):
            g = math.gcd(int(ai), int(c + 1 - ai))
            key = (int(ai) // g, int(c + 1 - ai) // g)
            old = merged.get(key, (0.0, 0.0))
            merged[key] = (old[0] + pi, old[1] + qi)
    p = np.array([v[0] for v in merged.values()])
    qq = np.array([v[1] for v in merged.values()])
    return np.log(p) - np.log(qq), p, qq


def _product(pair, times):
    loss, p, q = pair
    out = (np.zeros(1), np.ones(1), np.ones(1))
    for _ in range(times):
        out = ((out[0][:, None] + loss[None, :]).ravel(), (out[1][:, None] * p[None, :]).ravel(),
               (out[2][:, None] * q[None, :]).ravel())
    return out


def _exact_delta(pair, rounds, eps):
    """δ(ε) of the T-fold product pair: Σ_i P_i Σ_{j: L_i + L_j > ε} (P_j − e^{ε − L_i} Q_j)."""
    left = _product(pair, rounds // 2)
    right = _product(pair, rounds - rounds // 2)
    order = np.argsort(right[0])
    loss_r, p_r, q_r = right[0][order], right[1][order], right[2][order]
    suffix_p = np.concatenate([np.cumsum(p_r[::-1])[::-1], [0.0]])
    suffix_q = np.concatenate([np.cumsum(q_r[::-1])[::-1], [0.0]])
    first = np.searchsorted(loss_r, eps - left[0], side="right")
    terms = left[1] * suffix_p[first] - math.exp(eps) * left[2] * suffix_q[first]
    return float(np.sum(np.maximum(terms, 0.0)))


def _exact_epsilon(pair, rounds, delta):
    return optimize.brentq(lambda e: _exact_delta(pair, rounds, e) - delta, 0.0, 50.0, xtol=1e-12, rtol=1e-12)


def _uniform_pair(eps0, n, clones):
    c = math.exp(-eps0) if clones == "fmt22" else 2.0 / (math.exp(eps0) + 1.0)
    return _pair(stats.binom.pmf(np.arange(n), n - 1, c), eps0)


def _poisson_binomial(probs):
    pmf = np.ones(1)
    for p in probs:
        pmf = np.convolve(pmf, [1.0 - p, p])
    return pmf


@pytest.mark.parametrize("eps0, n, clones, rounds, delta", [
    (1.0, 20, "fmt22", 1, 1e-3),
    (1.0, 60, "fmt22", 2, 1e-4),
    (0.5, 40, "strong", 3, 1e-3),
    (2.0, 30, "fmt22", 4, 1e-2),
])
def test_uniform_rounds_match_the_enumerated_product_pair(eps0, n, clones, rounds, delta):
    pair = _uniform_pair(eps0, n, clones)
    event = ev.SelfComposed(ev.Shuffled(eps0, n=n, clones=clones), rounds)
    exact_eps = _exact_epsilon(pair, rounds, delta)
    lower, upper = accounting.epsilon_interval(event, delta)
    assert lower <= exact_eps <= upper
    assert upper <= 1.01 * exact_eps
    d_lo, d_up = accounting.delta_interval(event, exact_eps)
    assert d_lo <= _exact_delta(pair, rounds, exact_eps) <= d_up


@pytest.mark.parametrize("model, rounds, n", [("gspa", 1, 24), ("gspa", 3, 24), ("apes", 2, 24), ("gspa", 2, 2),
                                             ("apes", 1, 4)])
def test_personalized_rounds_match_the_enumerated_product_pair(model, rounds, n):
    eps = np.random.default_rng(3).uniform(0.3, 1.5, n)
    from jaxpriv.shuffle.personalized import clone_probabilities  # the model's c_i (tested in its own file)

    c, eps_star = clone_probabilities(eps, model)
    others = np.delete(c, np.argmax(c))  # the worst-case clone count: all but the largest c (MATH §3.1)
    pair = _pair(_poisson_binomial(others), eps_star)
    delta = 1e-3
    exact_eps = _exact_epsilon(pair, rounds, delta)
    lower, upper = accounting.epsilon_interval(ev.SelfComposed(ev.PersonalizedShuffled(eps, model=model), rounds), delta)
    assert lower <= exact_eps <= upper <= 1.01 * exact_eps


@pytest.mark.parametrize("eps0, n, delta, clones", [(1.0, 10_000, 1e-8, "fmt22"), (1.0, 1000, 1e-8, "fmt22"),
                                                     (0.5, 3000, 1e-6, "strong"), (4.0, 500, 1e-5, "fmt22")])
def test_one_round_is_never_below_the_exact_clone_sum(eps0, n, delta, clones):
    exact = float(clones_epsilon(eps0, n, delta, clones=clones))  # carries 1e-9 relative headroom itself
    lower, upper = accounting.epsilon_interval(ev.Shuffled(eps0, n=n, clones=clones), delta)
    assert lower <= exact and exact * (1 - 2e-9) <= upper <= exact * 1.001
    assert float(clones_delta(eps0, n, upper, clones=clones)) <= delta  # safe by the exact sum


def test_personalized_one_round_brackets_the_exact_personalized_sum():
    eps = np.random.default_rng(0).uniform(0.05, 1.0, 3000)
    for model in ("gspa", "apes"):
        exact = float(personalized_epsilon(eps, 1e-8, model=model))
        lower, upper = accounting.epsilon_interval(ev.PersonalizedShuffled(eps, model=model), 1e-8)
        assert lower <= exact and exact * (1 - 2e-9) <= upper <= exact * 1.001


def test_many_rounds_compose_subsampling_and_other_mechanisms():
    round_ = ev.Shuffled(1.0, n=1000)
    sampled = ev.SelfComposed(ev.PoissonSampled(0.1, round_), 50)
    full = ev.SelfComposed(round_, 50)
    e_sampled = float(accounting.epsilon(sampled, 1e-6, accountant="pld"))
    e_full = float(accounting.epsilon(full, 1e-6, accountant="pld"))
    assert 0 < e_sampled < e_full
    lower, upper = accounting.epsilon_interval(sampled, 1e-6)
    assert lower <= upper <= 1.01 * lower
    both = ev.Composed((full, ev.Gaussian(5.0)))
    assert float(accounting.epsilon(both, 1e-6, accountant="pld")) > e_full
    # a batch over n gives each setting its own answer
    batch = accounting.epsilon(ev.SelfComposed(ev.Shuffled(1.0, n=np.array([1000, 10_000])), 50), 1e-6,
                               accountant="pld")
    # (equal up to the rounding of the batch's wider static windows)
    assert batch[0] == pytest.approx(e_full, rel=1e-7) and batch[1] < batch[0]


def test_pld_is_tighter_than_rdp_and_best_takes_it():
    event = ev.SelfComposed(ev.Shuffled(1.0, n=10_000), 100)
    pld = float(accounting.epsilon(event, 1e-8, accountant="pld"))
    rdp = float(accounting.epsilon(event, 1e-8, accountant="rdp"))
    assert pld < rdp / 3 and float(accounting.epsilon(event, 1e-8)) == pld
    # personalized budgets have no RDP curve: "best" uses the PLD accountant alone
    personal = ev.PersonalizedShuffled(np.linspace(0.5, 1.0, 100), model="gspa")
    assert float(accounting.epsilon(personal, 1e-6)) == float(accounting.epsilon(personal, 1e-6, accountant="pld"))


def test_rounds_epsilon_per_user_is_safe_and_below_the_worst_case():
    eps = np.random.default_rng(1).uniform(0.2, 1.0, 200)
    with _tiers.optimised():  # one tier for both: the quick and optimised forms differ by rounding (jaxpriv._tiers)
        worst = rounds_epsilon(eps, 1e-6, [1, 5])
        mine = rounds_epsilon(eps, 1e-6, [1, 5], per_user=True, max_targets=8)
    assert mine.shape == (2, 200) and np.all(mine <= worst[:, None] * (1 + 1e-12))
    exact_one = personalized_epsilon(eps, 1e-6, per_user=True)
    # the one-round per-user values: never below the exact per-user sum (budgets rounded up, smaller C)
    assert np.all(mine[0] >= exact_one * (1 - 1e-9))
    assert np.corrcoef(mine[1], eps)[0, 1] > 0.95  # a larger own budget, a larger central ε
    apes = rounds_epsilon(eps, 1e-6, 5, model="apes", per_user=True)
    assert apes.shape == (200,) and np.all(apes == apes[0])  # every APES target answers at max ε


def test_rounds_summary_rows_and_dims():
    eps = np.linspace(0.05, 1.0, 2000)
    rows = rounds_summary(eps, 1e-8, [1, 10], dims=2)
    exact = rows["exact pair by PLD, APES"]["epsilon"]
    assert np.all(np.diff(exact) > 0)
    assert exact[0] == pytest.approx(float(rounds_epsilon(eps, 1e-8, 2, model="apes")), rel=1e-12)
    for name in ("Girgis RDP, ε₀ = max", "S-APES Prop. 1"):
        assert rows[name]["kind"] == "bound" and np.all(rows[name]["epsilon"] > exact)


@pytest.mark.parametrize("kwargs, message", [
    (dict(rounds=0), r"rounds must lie in \[1\.0, inf\)"),
    (dict(rounds=2.5), r"rounds must be an integer"),
    (dict(dims=0), r"dims must lie in \[1\.0, inf\)"),
    (dict(local_epsilons=np.array([0.5, 0.0])), r"local_epsilons must lie in \(0\.0, inf\)"),
    (dict(local_epsilons=np.array([0.5, np.nan])), r"local_epsilons"),
    (dict(local_epsilons=np.array([0.5])), r"at least n = 2"),
    (dict(delta=0.0), r"delta must lie in \(0\.0, 1\.0\)"),
    (dict(model="x"), r"model must be one of"),
    (dict(max_targets=0, per_user=True), r"max_targets must be an integer in \[1, inf\)"),
])
def test_rounds_epsilon_bad_input(kwargs, message):
    args = dict(local_epsilons=np.array([0.5, 1.0, 2.0]), delta=1e-6, rounds=3)
    args.update(kwargs)
    with pytest.raises(ValueError, match=message):
        rounds_epsilon(args.pop("local_epsilons"), args.pop("delta"), args.pop("rounds"), **args)


@pytest.mark.parametrize("event, message", [
    (ev.Shuffled(1.0, n=1), r"Shuffled n must lie in \[2\.0, inf\)"),
    (ev.PersonalizedShuffled(np.array([1.0, np.nan]), model="gspa"), r"Shuffled local_epsilons"),
    (ev.PersonalizedShuffled(np.ones(3), model="apes", target_epsilon=1.0), r"target_epsilon is only defined for model='gspa'"),
    (ev.PersonalizedShuffled(np.ones(3), model="gspa", target_epsilon=-1.0), r"Shuffled target_epsilon must lie in \(0\.0, inf\)"),
    (ev.Shuffled(1.0, n=10, target_epsilon=1.0), r"target_epsilon is only defined for personalized budgets"),
    (ev.SelfComposed(ev.Shuffled(1.0, n=10), -1), r"SelfComposed count T must lie in \[0\.0, inf\)"),
])
def test_shuffled_event_bad_input(event, message):
    with pytest.raises(ValueError, match=message):
        accounting.epsilon(event, 1e-6, accountant="pld")


@pytest.mark.parametrize("kwargs, message", [
    (dict(rounds=[1, 0]), r"rounds must lie in \[1\.0, inf\)"),
    (dict(rounds=[[1, 2]]), r"rounds must be an integer or a 1-D array"),
    (dict(dims=1.5), r"dims must be an integer"),
    (dict(local_epsilons=np.array([0.5, -1.0])), r"local_epsilons must lie in \(0\.0, inf\)"),
    (dict(delta=1.0), r"delta must lie in \(0\.0, 1\.0\)"),
])
def test_rounds_summary_bad_input(kwargs, message):
    args = dict(local_epsilons=np.array([0.5, 1.0, 2.0]), delta=1e-6, rounds=[1, 10], dims=1)
    args.update(kwargs)
    with pytest.raises(ValueError, match=message):
        rounds_summary(args["local_epsilons"], args["delta"], args["rounds"], dims=args["dims"])


@pytest.mark.parametrize("eps, model, message", [
    (np.array([0.5, 1.0]), "x", r"model must be one of"),
    (np.array([0.5, np.nan]), "gspa", r"local_epsilons"),
    (np.array([0.5, 0.0]), "apes", r"local_epsilons must lie in \(0\.0, inf\)"),
    (np.array([0.5]), "gspa", r"at least 2 per-user budgets"),
])
def test_clone_probabilities_bad_input(eps, model, message):
    from jaxpriv.shuffle.personalized import clone_probabilities

    with pytest.raises(ValueError, match=message):
        clone_probabilities(eps, model)


def test_the_old_homes_of_rounds_and_summary_warn_and_alias_the_calibration_modules(monkeypatch):
    """shuffle/rounds.py and shuffle/summary.py moved to the calibration layer; the old module paths warn and
    hand out the same objects, and ``jaxpriv.shuffle.rounds_epsilon`` still resolves."""
    import importlib
    import sys

    import jaxpriv.shuffle

    for old, new in (("jaxpriv.shuffle.rounds", "jaxpriv.calibrate.shuffle_rounds"),
                     ("jaxpriv.shuffle.summary", "jaxpriv.calibrate.shuffle_summary")):
        monkeypatch.delitem(sys.modules, old, raising=False)
        with pytest.warns(DeprecationWarning, match=new):
            alias = importlib.import_module(old)
        moved = importlib.import_module(new)
        assert alias.__all__ and all(getattr(alias, name) is getattr(moved, name) for name in alias.__all__)
    assert jaxpriv.shuffle.rounds_epsilon is rounds_epsilon
