"""BandMF in the trainer (issue 32, MATH §12): cyclic Poisson sampling, the plan and its accountant, runs.

Kept apart from tests/test_mf.py so that each file stays well under a minute cold: the runs here compile the
trainer's step (three structures: DP-SGD's, and BandMF's with b = 1 and b = 3, shared by every test).
"""

import jax
import numpy as np
import pytest

from jaxpriv import accounting, calibrate, events


def test_the_cyclic_sampler_samples_one_partition_per_step():
    from jaxpriv.train.sampling import CyclicPoissonSampler, PoissonSampler

    one, plain = CyclicPoissonSampler(0.3, seed=5, n=200, bands=1), PoissonSampler(0.3, seed=5, n=200)
    for a, b in zip(one.sample_block(0, 4), plain.sample_block(0, 4)):  # b = 1: Poisson sampling itself
        np.testing.assert_array_equal(a.indices, b.indices)
        np.testing.assert_array_equal(a.mask, b.mask)
    cyclic = CyclicPoissonSampler(0.3, seed=5, n=200, bands=4)
    batches = cyclic.sample_block(0, 400)
    for batch in batches:
        chosen = np.asarray(batch.indices)[np.asarray(batch.mask)]
        assert np.all(chosen % 4 == batch.step % 4)
    counts = np.zeros(200)
    for batch in batches:
        counts[np.asarray(batch.indices)[np.asarray(batch.mask)]] += 1
    # each record is offered 100 steps at rate 0.3: mean 30 per record, 6000 in all (binomial sd ≈ 32)
    assert abs(counts.sum() - 6000) < 5 * np.sqrt(200 * 100 * 0.3 * 0.7)
    assert cyclic.sample(7).size == batches[7].size
    with pytest.raises(ValueError, match="bands must be an integer"):
        CyclicPoissonSampler(0.3, seed=0, n=10, bands=0)


def test_the_plan_of_a_bandmf_run():
    from jaxpriv.train.dpsgd import DPSGDConfig, GroupAccountant, plan_privacy

    plan = plan_privacy(DPSGDConfig(epochs=4, batch_size=50, epsilon=2.0, mechanism="bandmf", bands=4), n=1000)
    assert (plan.total_steps, plan.bands, plan.expected_batch_size) == (80, 4, pytest.approx(50.0))
    assert plan.rate[0] == pytest.approx(0.2)  # B·b/N: each partition of N/b records gives B per step
    sigma = float(calibrate.noise_multiplier(2.0, 0.2, 20, 1e-5))  # ⌈80/4⌉ participations
    assert plan.noise_parameter[0] == pytest.approx(sigma, rel=1e-12)
    accountant = GroupAccountant(plan.rate, plan.noise_parameter, 1e-5, mechanism="bandmf", bands=4)
    event = events.AmplifiedBandMF(plan.noise_parameter[0], plan.rate[0], 80, 4)
    assert accountant.epsilon(80)[0] == pytest.approx(float(accounting.epsilon(event, 1e-5, accountant="rdp")),
                                                      rel=1e-9)
    assert accountant.epsilon(77)[0] == accountant.epsilon(80)[0]  # ⌈77/4⌉ = ⌈80/4⌉


@pytest.mark.parametrize("kwargs, match", [
    (dict(bands=4), "bands > 1 needs mechanism 'bandmf'"),
    (dict(mechanism="bandmf", bands=30), r"batch_size × bands must lie in \(0.0, 1000.0\], got 1500.0"),
    (dict(mechanism="bandmf", bands=2.5), "bands must be an integer"),
    (dict(mechanism="bandmf", bands=0), r"bands must lie in \[1.0, inf\)"),
])
def test_bad_bandmf_configurations(kwargs, match):
    """(bands ≤ the run's steps follows from batch_size × bands ≤ N, since an epoch has round(N/B) steps.)"""
    from jaxpriv.train.dpsgd import DPSGDConfig, plan_privacy

    with pytest.raises(ValueError, match=match):
        plan_privacy(DPSGDConfig(**({"epochs": 2, "batch_size": 50.0, "epsilon": 2.0} | kwargs)), n=1000)


def test_a_bandmf_run_one_band_is_dp_sgd_and_more_bands_keep_the_budget():
    import optax
    from flax import nnx

    from jaxpriv.train import data, dpsgd

    d = data.load("breast_cancer", seed=0)
    params = {}
    for mechanism, bands in (("gaussian", 1), ("bandmf", 1), ("bandmf", 3)):
        model = dpsgd.MLP(30, (8,), 2, rngs=nnx.Rngs(0))
        config = dpsgd.DPSGDConfig(epochs=2, batch_size=32, epsilon=3.0, mechanism=mechanism, bands=bands)
        result = dpsgd.train(model, optax.sgd(0.5), d, config, progress=False)
        assert result.stopped == "completed" and result.epsilon <= 3.0
        params[(mechanism, bands)] = jax.tree_util.tree_leaves(nnx.state(model, nnx.Param))
    for a, b in zip(params[("gaussian", 1)], params[("bandmf", 1)]):  # same sampler, same noise: same model
        np.testing.assert_array_equal(a, b)
    event = events.AmplifiedBandMF(result.plan.noise_parameter[0], result.plan.rate[0], result.steps, 3)
    assert result.epsilon == pytest.approx(float(accounting.epsilon(event, 1e-5, accountant="rdp")), rel=1e-9)


def test_a_bandmf_run_resumes_from_its_checkpoint_exactly(tmp_path):
    """The noise buffer and step counter are optimizer state: a run stopped after epoch 1 and resumed ends
    with the uninterrupted run's model, bit for bit."""
    import optax
    from flax import nnx

    from jaxpriv.train import data, dpsgd

    d = data.load("breast_cancer", seed=0)
    config = dpsgd.DPSGDConfig(epochs=2, batch_size=32, epsilon=3.0, mechanism="bandmf", bands=3)

    class Stop(Exception):
        pass

    def stop_after_first(record):
        if record.epoch == 1:
            raise Stop

    def fresh():
        return dpsgd.MLP(30, (8,), 2, rngs=nnx.Rngs(0))

    whole = fresh()
    dpsgd.train(whole, optax.sgd(0.5), d, config, progress=False)
    resumed = fresh()
    with pytest.raises(Stop):
        dpsgd.train(resumed, optax.sgd(0.5), d, config, progress=False, checkpoint_dir=str(tmp_path),
                    callback=stop_after_first)
    resumed = fresh()
    result = dpsgd.train(resumed, optax.sgd(0.5), d, config, progress=False, checkpoint_dir=str(tmp_path))
    assert result.steps == 28 and result.stopped == "completed"
    for a, b in zip(*(jax.tree_util.tree_leaves(nnx.state(m, nnx.Param)) for m in (whole, resumed))):
        np.testing.assert_array_equal(a, b)


def test_banded_noise_update_and_band_table_bad_input():
    """The argument form of the banded noise names what is wrong: a non-Gaussian event, a strategy whose
    largest column norm exceeds 1 (its sensitivity), a strategy that is not lower triangular."""
    import jax.numpy as jnp

    from jaxpriv.train import noise

    C = np.eye(3)
    state = noise.banded_noise_transform(events.Gaussian(1.0), C, seed=0).init({"w": jnp.zeros(2)})
    laplace = noise.noise_arguments(events.Laplace(1.0))
    with pytest.raises(ValueError, match=r"arguments.event must be events.Gaussian .* got Laplace"):
        noise.banded_noise_update(laplace, noise.band_table(C), {"w": jnp.ones(2)}, state)
    with pytest.raises(ValueError, match=r"strategy's largest column norm must be at most 1"):
        noise.band_table(2.0 * C)
    with pytest.raises(ValueError, match=r"strategy"):
        noise.band_table(np.triu(np.ones((3, 3))) / 3.0)


def test_a_state_or_table_that_does_not_fit_is_refused():
    """banded_noise_update checks its state against the strategy and the updates (a strategy whose shape
    does not match the run, issue 32): a state built for other bands or another model, an old pytree
    buffer, a table that is not (n, b), each a ValueError naming what is wrong."""
    import jax.numpy as jnp

    from jaxpriv import mf
    from jaxpriv.train import noise

    C2, C3 = mf.banded_strategy(6, bands=2, cache=False), mf.banded_strategy(6, bands=3, cache=False)
    args = noise.noise_arguments(events.Gaussian(1.0))
    u = {"w": jnp.ones(2), "b": jnp.ones((2, 2))}
    state = noise.banded_noise_transform(events.Gaussian(1.0), C2, seed=0).init(u)
    out, _ = noise.banded_noise_update(args, noise.band_table(C2), u, state)  # fits
    assert np.all(np.isfinite(out["w"]))
    with pytest.raises(ValueError, match=r"state.buffer\[0\] must have shape \(2, 2, 2\) .*3 bands.* got \(1, 2, 2\)"):
        noise.banded_noise_update(args, noise.band_table(C3), u, state)  # a 3-band strategy, a 2-band state
    with pytest.raises(ValueError, match=r"state.buffer\[1\] must have shape \(1, 3\) .* got \(1, 2\)"):
        noise.banded_noise_update(args, noise.band_table(C2), {"w": jnp.ones(3), "b": jnp.ones((2, 2))}, state)
    with pytest.raises(ValueError, match=r"state.buffer must be a tuple of one array per leaf of the updates \(2\)"):
        noise.banded_noise_update(args, noise.band_table(C2), u, state._replace(buffer={"b": state.buffer[0]}))
    with pytest.raises(ValueError, match=r"state.buffer must be a tuple .* got tuple of 1"):
        noise.banded_noise_update(args, noise.band_table(C2), u, state._replace(buffer=state.buffer[:1]))
    for table in (np.ones(6), np.ones((6, 0)), np.ones((2, 6, 2))):
        with pytest.raises(ValueError, match=r"table must be a strategy's \(n, b\) band table"):
            noise.banded_noise_update(args, table, u, state)
