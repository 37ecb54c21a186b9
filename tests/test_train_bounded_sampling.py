"""The trainers' random-allocation (k of t) and fixed-size samplers (MATH §11, §11.5): the batches they draw
are the ones their events assume (statistical tests on the draws), the ε reported is
``accounting.epsilon`` of that event, and every bad input is a ValueError naming the parameter.

Cheap on purpose: the samplers are checked on their own, the trainers on a 4-feature linear model (the
shapes of tests/test_allocation.py's make_private test) and the CLI on tests/test_cli_train.py's run.
"""

import itertools
import json

import numpy as np
import optax
import pytest
from flax import nnx
from scipy import stats

from jaxpriv import accounting
from jaxpriv.train import make_private
from jaxpriv.train.dpsgd import DPSGDConfig, plan_privacy
from jaxpriv.train.plan import AllocationAccountant, FixedSizeAccountant
from jaxpriv.train.sampling import AllocationSampler, FixedSizeSampler

P_FLOOR = 1e-6  # a correct sampler fails a test below once in a million runs


def _records(batch) -> np.ndarray:
    return np.asarray(batch.indices)[np.asarray(batch.mask)]


# --------------------------------------------------------------------------------------------------
# the samplers' draws
# --------------------------------------------------------------------------------------------------


def test_random_allocation_puts_every_record_in_a_uniform_k_subset_of_each_epoch():
    """k = 2 of t = 5: per epoch every record is in exactly 2 steps, and its pair of steps is uniform over
    the C(5, 2) = 10 pairs (χ² over 600 records × 4 epochs), independently of the epoch before (χ² of the
    10 × 10 table of consecutive epochs' pairs)."""
    n, t, k, epochs = 600, 5, 2, 4
    sampler = AllocationSampler(n, steps_per_epoch=t, seed=7, steps_per_example=k)
    member = np.zeros((epochs, n, t), int)
    for batch in sampler.sample_block(0, epochs * t):
        member[batch.step // t, _records(batch), batch.step % t] += 1
        assert batch.size == int(np.asarray(batch.mask).sum())
    assert member.max() == 1 and np.all(member.sum(axis=2) == k)
    pairs = {p: i for i, p in enumerate(itertools.combinations(range(t), k))}
    which = np.array([[pairs[tuple(np.flatnonzero(member[e, i]))] for i in range(n)] for e in range(epochs)])
    counts = np.bincount(which.ravel(), minlength=len(pairs))
    assert stats.chisquare(counts).pvalue > P_FLOOR, counts
    table = np.zeros((len(pairs), len(pairs)))
    np.add.at(table, (which[:-1].ravel(), which[1:].ravel()), 1)
    assert stats.chi2_contingency(table).pvalue > P_FLOOR
    # drawn step by step or in a block, the same batches; k = t puts every record in every step
    for step in (3, 11):
        assert np.array_equal(_records(sampler.sample(step)), np.flatnonzero(member[step // t, :, step % t]))
    every = AllocationSampler(20, steps_per_epoch=3, seed=0, steps_per_example=3)
    assert [b.size for b in every.sample_block(0, 6)] == [20] * 6


def test_fixed_size_batches_are_uniform_subsets_of_exactly_b():
    """b = 4 of n = 10, 3,000 steps: every batch holds 4 distinct records (no padding); every record is in
    Bin(3000, 0.4) of them (χ²), and the C(10, 4) = 210 subsets are drawn uniformly (χ²), independently
    across steps (consecutive batches share Hypergeometric(10, 4, 4) records)."""
    n, b, steps = 10, 4, 3000
    sampler = FixedSizeSampler(n, batch_size=b, seed=3)
    batches = sampler.sample_block(0, steps)
    drawn = np.stack([np.asarray(batch.indices) for batch in batches])
    assert drawn.shape == (steps, b) and all(batch.size == b and np.asarray(batch.mask).all() for batch in batches)
    assert np.all(np.sort(drawn, axis=1)[:, 1:] > np.sort(drawn, axis=1)[:, :-1]) and drawn.min() >= 0
    assert drawn.max() < n
    assert stats.chisquare(np.bincount(drawn.ravel(), minlength=n)).pvalue > P_FLOOR
    subsets = {s: i for i, s in enumerate(itertools.combinations(range(n), b))}
    counts = np.bincount([subsets[tuple(sorted(row))] for row in drawn.tolist()], minlength=len(subsets))
    assert stats.chisquare(counts).pvalue > P_FLOOR
    shared = [len(set(a) & set(c)) for a, c in zip(drawn[:-1].tolist(), drawn[1:].tolist())]
    law = stats.hypergeom(n, b, b)
    expected = (steps - 1) * law.pmf(np.arange(b + 1))
    assert expected.min() > 5  # every χ² cell has enough mass
    assert stats.chisquare(np.bincount(shared, minlength=b + 1), expected).pvalue > P_FLOOR
    assert np.array_equal(np.asarray(sampler.sample(17).indices), drawn[17])


# --------------------------------------------------------------------------------------------------
# the plans and the trainers: the ε reported is the event's
# --------------------------------------------------------------------------------------------------


def test_plans_of_random_allocation_and_fixed_size():
    plan = plan_privacy(DPSGDConfig(epochs=3, batch_size=100.0, noise_multiplier=1.5, sampling="random_allocation",
                                    steps_per_example=2), n=1000)
    assert (plan.sampling, plan.steps_per_epoch, plan.total_steps, plan.steps_per_example) == ("random_allocation", 20,
                                                                                               60, 2)
    assert plan.rate[0] == 0.1 and plan.expected_batch_size == pytest.approx(100.0)
    assert plan.scalars()["steps_per_example"] == 2
    config = DPSGDConfig(epochs=3, batch_size=100.0, epsilon=3.0, sampling="fixed_size")
    plan = plan_privacy(config, n=1000)
    assert (plan.sampling, plan.steps_per_epoch, plan.total_steps, plan.mode) == ("fixed_size", 10, 30, "σ for ε")
    assert plan.rate[0] == 0.1 and plan.expected_batch_size == 100.0
    sigma = float(plan.noise_parameter[0])
    spent = float(accounting.epsilon(FixedSizeAccountant.run_event(100, 1000, sigma, 30), 1e-5,
                                     accountant=accounting.RDP()))
    assert 0.999 * 3.0 < spent <= 3.0
    assert FixedSizeAccountant(100, 1000, sigma, 1e-5).epsilon(30)[0] == spent
    # the configurations of before these samplings keep their fingerprint fields
    assert "steps_per_example" not in DPSGDConfig(epsilon=1.0).to_json()


def _linear_task():
    x = np.random.default_rng(0).normal(size=(256, 4)).astype(np.float32)
    return x, (x[:, 0] > 0).astype(np.int32)


def _record_blocks(private) -> list:
    """Every batch the trainer's sampler hands it from now on, in a list."""
    drawn, block = [], private._sampler.sample_block

    def recorded(*args):
        batches = block(*args)
        drawn.extend(batches)
        return batches

    private._sampler.sample_block = recorded
    return drawn


def test_make_private_fixed_size_draws_b_records_and_reports_their_epsilon():
    x, y = _linear_task()
    model = nnx.Linear(4, 2, rngs=nnx.Rngs(0))
    private = make_private(model, optax.sgd(1.0), x, y, target_epsilon=4.0, delta=1e-5, batch_size=64, epochs=4,
                           sampling="fixed_size")
    assert private.sampling == "fixed_size" and private.total_steps == 16 and private.sample_rate == 0.25
    assert isinstance(private.accountant, FixedSizeAccountant)
    drawn = _record_blocks(private)
    epsilon = private.run()
    used = {b.step: b for b in drawn}
    assert set(range(16)) <= set(used)
    assert all(b.indices.shape == (64,) and len(set(np.asarray(b.indices).tolist())) == 64 for b in used.values())
    event = FixedSizeAccountant.run_event(64, 256, private.noise_multiplier, 16)
    assert epsilon == float(accounting.epsilon(event, 1e-5, accountant=accounting.RDP()))
    assert 0.999 * 4.0 < epsilon <= 4.0
    assert float(np.mean(np.argmax(model(x), -1) == y)) > 0.9


def test_make_private_random_allocation_draws_k_of_t_and_reports_their_epsilon():
    x, y = _linear_task()
    model = nnx.Linear(4, 2, rngs=nnx.Rngs(0))
    private = make_private(model, optax.sgd(1.0), x, y, noise_multiplier=1.5, delta=1e-5, batch_size=64, epochs=2,
                           sampling="random_allocation", steps_per_example=2)
    t = 8  # round(k·N/B) = round(2 · 256 / 64): B stays the expected batch size
    assert private.sampling == "random_allocation" and private.total_steps == 2 * t and private.sample_rate == 0.25
    drawn = _record_blocks(private)
    epsilon = private.run()
    used = {b.step: b for b in drawn}
    for epoch in range(2):  # the batches the trainer used: every record in exactly 2 of the epoch's 8 steps
        seen = np.concatenate([_records(used[epoch * t + j]) for j in range(t)])
        assert np.array_equal(np.bincount(seen, minlength=256), np.full(256, 2))
    event = AllocationAccountant.run_event(t, 1.5, 2, steps_per_example=2)
    assert epsilon == float(accounting.epsilon(event, 1e-5, accountant="pld"))


def test_cli_train_random_allocation_and_fixed_size(capsys, tmp_path):
    from test_cli_train import BASE, run

    out_json = tmp_path / "run.json"
    code, out, err = run(capsys, *BASE, "--noise-multiplier", "1.5", "--sampling", "random_allocation",
                         "--steps-per-example", "2", "--json", str(out_json))
    assert code == 0, err
    summary = json.loads(out_json.read_text())
    plan = summary["plan"]
    assert plan["sampling"] == "random_allocation" and plan["steps_per_example"] == 2
    assert summary["config"]["steps_per_example"] == 2 and plan["steps_per_epoch"] == 14  # round(2 · 456 / 64)
    event = AllocationAccountant.run_event(14, 1.5, 2, steps_per_example=2)
    assert summary["epsilon"] == float(accounting.epsilon(event, 1e-5, accountant="pld"))
    assert "random allocation" in out
    code, out, err = run(capsys, *BASE, "--epsilon", "3", "--sampling", "fixed_size", "--json", str(out_json))
    assert code == 0, err
    summary = json.loads(out_json.read_text())
    group = summary["plan"]["groups"][0]
    event = FixedSizeAccountant.run_event(64, 456, group["noise_multiplier"], summary["steps"])
    assert summary["epsilon"] == float(accounting.epsilon(event, 1e-5, accountant=accounting.RDP())) <= 3.0
    assert summary["steps"] == 2 * 7 and "fixed-size batches" in out


# --------------------------------------------------------------------------------------------------
# bad input
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kwargs, match", [
    (dict(sampling="random_allocation", steps_per_example=0), r"steps_per_example must lie in \[1.0, inf\)"),
    (dict(sampling="random_allocation", steps_per_example=1.5), "steps_per_example must be an integer"),
    (dict(steps_per_example=2), "steps_per_example > 1 needs sampling 'random_allocation'"),
    (dict(sampling="fixed_size", steps_per_example=2), "steps_per_example > 1 needs sampling 'random_allocation'"),
    (dict(sampling="fixed_size", batch_size=50.5), "batch_size must be an integer"),
    (dict(sampling="fixed_size", mechanism="laplace"), "sampling 'fixed_size' is accounted for Gaussian noise only"),
    (dict(sampling="random_allocation", mechanism="bandmf"), "accounted for Gaussian noise only"),
    (dict(sampling="fixed_size", epsilon=None, budgets=np.full(1000, 2.0)), "use sampling 'poisson' with budgets"),
    (dict(sampling="random_allocation", epsilon=None, budgets=np.full(1000, 2.0)), "use sampling 'poisson'"),
    (dict(sampling="fixed_size", noise_multiplier=1.0), "q = b/N is fixed by the batch size"),
    (dict(sampling="random_allocation", noise_multiplier=1.0), "give epsilon or noise_multiplier, not both"),
])
def test_bad_configurations(kwargs, match):
    with pytest.raises(ValueError, match=match):
        plan_privacy(DPSGDConfig(**({"epochs": 2, "batch_size": 50.0, "epsilon": 2.0} | kwargs)), n=1000)


@pytest.mark.parametrize("kwargs, match", [
    (dict(sampling="fixed_size", batch_size=8.5), "batch_size must be an integer"),
    (dict(sampling="random_allocation", steps_per_example=0), r"steps_per_example must lie in \[1.0, inf\)"),
    (dict(sampling="random_allocation", steps_per_example=2, epochs=1.5), "epochs must be an integer"),
    (dict(sampling="poisson", steps_per_example=2), "steps_per_example > 1 needs sampling 'random_allocation'"),
])
def test_make_private_bad_input(kwargs, match):
    x, y = np.zeros((32, 2), np.float32), np.zeros(32, np.int32)
    with pytest.raises(ValueError, match=match):
        make_private(nnx.Linear(2, 2, rngs=nnx.Rngs(0)), optax.sgd(0.1), x, y, noise_multiplier=1.0, delta=1e-5,
                     **({"batch_size": 8, "epochs": 2} | kwargs))


@pytest.mark.parametrize("make, match", [
    (lambda: AllocationSampler(10, steps_per_epoch=4, seed=0, steps_per_example=5),
     r"steps_per_example must lie in \[1.0, 4.0\]"),
    (lambda: AllocationSampler(10, steps_per_epoch=4, seed=0, steps_per_example=0), "steps_per_example must lie"),
    (lambda: FixedSizeSampler(0, batch_size=1, seed=0), r"n must lie in \[1.0, inf\)"),
    (lambda: FixedSizeSampler(10, batch_size=11, seed=0), r"batch_size must lie in \[1.0, 10.0\]"),
    (lambda: FixedSizeSampler(10, batch_size=2.5, seed=0), "batch_size must be an integer"),
    (lambda: FixedSizeSampler(10, batch_size=2, seed=-1), "seed must lie in"),
    (lambda: FixedSizeSampler(10, batch_size=2, seed=0).sample(-1), "step must lie in"),
    (lambda: FixedSizeSampler(10, batch_size=2, seed=0).sample_block(0, 0), "count must lie in"),
    (lambda: AllocationAccountant(4, 1.0, 1e-5, steps_per_example=5), r"steps_per_example must lie in \[1.0, 4.0\]"),
    (lambda: FixedSizeAccountant(11, 10, 1.0, 1e-5), r"batch_size must lie in \[1.0, 10.0\]"),
    (lambda: FixedSizeAccountant(2, 0, 1.0, 1e-5), r"dataset_size must lie in \[1.0, inf\)"),
    (lambda: FixedSizeAccountant(2, 10, 0.0, 1e-5), r"sigma must lie in \(0.0, inf\)"),
    (lambda: FixedSizeAccountant(2, 10, 1.0, 1.0), r"delta must lie in \(0.0, 1.0\)"),
    (lambda: FixedSizeAccountant(2, 10, 1.0, 1e-5, steps=-1), r"steps must lie in \[0.0, inf\)"),
])
def test_samplers_and_accountants_bad_input(make, match):
    with pytest.raises(ValueError, match=match):
        make()


@pytest.mark.parametrize("extra, message", [
    (["--noise-multiplier", "1", "--sampling", "random_allocation", "--steps-per-example", "0"],
     "steps_per_example must lie"),
    (["--noise-multiplier", "1", "--steps-per-example", "2"], "needs sampling 'random_allocation'"),
    (["--epsilon", "1", "--sampling", "fixed_size", "--batch-size", "64.5"], "batch_size must be an integer"),
    (["--epsilon", "1", "--sampling", "fixed_size", "--mechanism", "bandmf"], "accounted for Gaussian noise only"),
])
def test_cli_train_bad_arguments(capsys, extra, message):
    from test_cli_train import BASE, run

    code, _, err = run(capsys, *BASE, *extra)
    assert code == 2 and message in err
