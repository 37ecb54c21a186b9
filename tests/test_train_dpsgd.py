"""DP-SGD trainer: the step against a plain-numpy/JAX-loop oracle (clip each example, sum, add the
noise transform's noise, divide by Σq), the noise scale σC/Σq statistically, the accountant against
the core (jaxpriv.dpsgd_epsilon and the event ledger), calibration of every configuration against
jaxpriv.calibrate, the budget stop, checkpoint/resume to the bit, and every bad input.

End to end (slow, fast configuration): digits at ε = 3, δ = 1e-5 reaches ≥ 0.85 test accuracy.
"""

import dataclasses
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

import jaxpriv
from jaxpriv import accounting, calibrate, rdp
from jaxpriv._numerics import derive_seeds
from jaxpriv.report import plot_learning_curve
from jaxpriv.accounting.ledger import Accountant, Gaussian, PoissonSampled, SelfComposed
from jaxpriv.train import data, dpsgd, models, noise
from jaxpriv.train.dpsgd import DPSGDConfig, GroupAccountant, plan_privacy, train
from jaxpriv.train.sampling import PoissonSampler

DELTA = 1e-5


def _small_data(n=70, features=6, classes=3, seed=0):
    return data.synthetic((features,), n=n + n // 4 + 1, classes=classes, seed=seed)


def _params(model):
    return [np.asarray(x) for x in jax.tree_util.tree_leaves(nnx.state(model, nnx.Param))]


# --------------------------------------------------------------------------------------------------
# the accountant is the core
# --------------------------------------------------------------------------------------------------


def test_accountant_epsilon_is_the_core_epsilon():
    q = np.array([0.01, 0.05, 0.2, 1.0, 0.0])
    sigma = np.array([1.1, 0.8, 2.0, 5.0, 1.0])
    acc = GroupAccountant(q, sigma, DELTA, steps=1234)
    eps = acc.epsilon()
    # the trainer asks the library's one accountant: the same event, the same numbers, bit for bit
    event = SelfComposed(PoissonSampled(q, Gaussian(sigma)), 1234)
    np.testing.assert_array_equal(eps, accounting.epsilon(event, DELTA, accountant=accounting.RDP()))
    # ...which the fused dpsgd_epsilon kernel (separately compiled) matches to its last bit or two
    np.testing.assert_allclose(eps, jaxpriv.dpsgd_epsilon(q, sigma, 1234, DELTA), rtol=1e-15, atol=0)
    for qi, si, ei in zip(q, sigma, eps):  # and the event ledger (separately compiled: equal to rounding)
        ledger = Accountant().compose(PoissonSampled(qi, Gaussian(si)), count=1234).epsilon(DELTA)
        assert ei == pytest.approx(ledger, rel=1e-13, abs=0)
    assert eps[-1] == 0.0  # never sampled: no privacy loss


def test_accountant_reference_value():
    # MATH §1.8 reference: q = 0.01, σ = 1.1, T = 10⁴, δ = 1e-5 → ε ≤ 5.632010670 (dp_accounting's)
    eps = GroupAccountant([0.01], [1.1], DELTA, steps=10_000).epsilon()[0]
    assert eps <= 5.632010670 and eps == pytest.approx(5.632, abs=5e-4)


def test_steps_within_is_the_largest_affordable_count():
    acc = GroupAccountant([0.02, 0.1], [1.0, 3.0], DELTA, steps=50)
    budgets = np.array([2.5, 2.0])
    k = acc.steps_within(budgets, 400)
    # oracle: a linear scan with the core
    eps = lambda t: np.asarray(jaxpriv.dpsgd_epsilon([0.02, 0.1], [1.0, 3.0], t, DELTA))
    assert np.all(eps(50 + k) <= budgets) and np.any(eps(50 + k + 1) > budgets)
    assert acc.steps_within(budgets, k - 3) == k - 3  # a limit below the budget is the answer
    assert acc.steps_within([1e-3, 1e-3], 10) == 0  # already spent


# --------------------------------------------------------------------------------------------------
# planning: each configuration against jaxpriv.calibrate
# --------------------------------------------------------------------------------------------------


def test_plan_target_epsilon_calibrates_sigma():
    config = DPSGDConfig(epochs=5, batch_size=50, epsilon=2.0, delta=DELTA)
    plan = plan_privacy(config, 1000)
    assert plan.steps_per_epoch == 20 and plan.total_steps == 100
    q = 50 / 1000
    assert plan.noise_parameter[0] == calibrate.noise_multiplier(2.0, q, 100, DELTA)
    assert plan.rate[0] == q and plan.expected_batch_size == pytest.approx(50.0, rel=1e-15)
    assert plan.noise_std == plan.noise_parameter[0] * 1.0
    eps = jaxpriv.dpsgd_epsilon(q, plan.noise_parameter[0], 100, DELTA)
    assert eps <= 2.0 and eps == pytest.approx(2.0, rel=1e-8)


def test_plan_target_epsilon_with_sigma_calibrates_the_rate():
    config = DPSGDConfig(epochs=5, batch_size=50, epsilon=2.0, noise_multiplier=1.5, delta=DELTA)
    plan = plan_privacy(config, 1000)
    assert plan.rate[0] == calibrate.sampling_rate(2.0, 1.5, 100, DELTA)
    assert plan.expected_batch_size == pytest.approx(1000 * plan.rate[0], rel=1e-15)
    assert jaxpriv.dpsgd_epsilon(plan.rate[0], 1.5, 100, DELTA) <= 2.0


def test_plan_fixed_sigma_has_no_budget():
    plan = plan_privacy(DPSGDConfig(epochs=2, batch_size=10, noise_multiplier=1.2), 100)
    assert plan.budget[0] == np.inf and plan.noise_parameter[0] == 1.2 and plan.rate[0] == 0.1


def _levels(n, values=(1.0, 2.0, 4.0)):
    return np.resize(np.asarray(values), n)


def test_plan_sample_mode_idp_sgd():
    n, config = 600, DPSGDConfig(epochs=4, batch_size=30, delta=DELTA, budgets=_levels(600), personalization="sample")
    plan = plan_privacy(config, n)
    assert plan.budget.tolist() == [1.0, 2.0, 4.0] and np.all(plan.noise_parameter == plan.noise_parameter[0])
    steps = plan.total_steps
    # every group's rate is the exact inverse at the shared σ, and its ε ≤ its budget
    np.testing.assert_array_equal(plan.rate, calibrate.sampling_rate(plan.budget, plan.noise_parameter[0], steps, DELTA))
    eps = np.asarray(jaxpriv.dpsgd_epsilon(plan.rate, plan.noise_parameter, steps, DELTA))
    assert np.all(eps <= plan.budget) and np.allclose(eps, plan.budget, rtol=1e-7)
    # σ is such that the mean rate is the batch rate B/N: the expected batch size is B
    assert plan.expected_batch_size == pytest.approx(30.0, rel=1e-8)
    assert np.all(np.diff(plan.rate) > 0)  # larger budgets are sampled more often
    np.testing.assert_array_equal(plan.record_rates, plan.rate[np.searchsorted(plan.budget, config.budgets)])


def test_plan_sample_mode_with_fixed_sigma_is_rpdp_rates():
    config = DPSGDConfig(epochs=4, batch_size=30, delta=DELTA, budgets=_levels(600), noise_multiplier=1.3)
    plan = plan_privacy(config, 600)
    np.testing.assert_array_equal(plan.rate, calibrate.sampling_rate(plan.budget, 1.3, plan.total_steps, DELTA))
    assert np.all(plan.noise_parameter == 1.3)


def test_plan_scale_mode_idp_sgd():
    n, clip = 600, 0.7
    config = DPSGDConfig(epochs=4, batch_size=30, clip_norm=clip, delta=DELTA, budgets=_levels(n), personalization="scale")
    plan = plan_privacy(config, n)
    q, steps = 30 / n, plan.total_steps
    assert np.all(plan.rate == q)
    np.testing.assert_array_equal(plan.noise_parameter, calibrate.noise_multiplier(plan.budget, q, steps, DELTA))
    # one noise for all: σ_g · C_g is the same std for every group, and the mean clip norm is C
    np.testing.assert_allclose(plan.noise_parameter * plan.clip, plan.noise_std, rtol=1e-14)
    assert plan.record_clip.mean() == pytest.approx(clip, rel=1e-12)
    assert np.all(np.diff(plan.clip) > 0)  # larger budgets get larger clip norms
    eps = np.asarray(jaxpriv.dpsgd_epsilon(plan.rate, plan.noise_parameter, steps, DELTA))
    assert np.all(eps <= plan.budget)


def test_derive_seeds_is_the_seed_sequence_and_a_prefix_across_counts():
    # the trainer draws 3 seeds, the federated simulator 2: the same first two, so neither moves
    for seed in (0, 1, 7, 2**32 - 1):
        want = tuple(int(s) for s in np.random.SeedSequence(seed).generate_state(3))
        assert derive_seeds(seed, 3) == want and derive_seeds(seed, 2) == want[:2]


@pytest.mark.parametrize("seed,count,name", [(-1, 2, "seed"), (1.5, 2, "seed"), (True, 2, "seed"),
                                             (0, 0, "count"), (0, 2.0, "count")])
def test_derive_seeds_bad_input(seed, count, name):
    with pytest.raises(ValueError, match=rf"{name} must be an integer in \[\d, inf\)"):
        derive_seeds(seed, count)


# --------------------------------------------------------------------------------------------------
# the step against an oracle
# --------------------------------------------------------------------------------------------------


def _oracle_step(model, d, plan, config, lr):
    """One DP-SGD step written out: per-example gradients by a Python loop, clipped to each record's
    clip norm, summed, then the noise transform's own noise and Σq normalisation, then SGD."""
    sampler_seed, noise_seed, _ = derive_seeds(config.seed, 3)
    batch = PoissonSampler(plan.record_rates, seed=sampler_seed).sample(0)
    chosen = np.asarray(batch.indices)[np.asarray(batch.mask)]
    graphdef, params, rest = nnx.split(model, nnx.Param, ...)

    def loss(p, x, y):
        logits = nnx.merge(graphdef, p, rest)(x[None])
        return optax.softmax_cross_entropy_with_integer_labels(logits, y[None])[0]

    grad = jax.jit(jax.grad(loss))
    total = jax.tree.map(jnp.zeros_like, params)
    for i in chosen:
        g = grad(params, jnp.asarray(d.x_train[i]), jnp.asarray(d.y_train[i]))
        norm = np.sqrt(sum(float(jnp.sum(v**2)) for v in jax.tree_util.tree_leaves(g)))
        factor = min(1.0, plan.record_clip[i] / norm)
        total = jax.tree.map(lambda t, v: t + factor * v, total, g)
    tx = noise.gaussian_noise(plan.noise_std, seed=noise_seed, normalize_by=plan.expected_batch_size)
    noisy, _ = tx.update(total, tx.init(params))
    return [np.asarray(p) - lr * np.asarray(u) for p, u in zip(jax.tree_util.tree_leaves(params),
                                                                jax.tree_util.tree_leaves(noisy))], chosen.size


@pytest.mark.parametrize("mode", ["fixed", "sample", "scale"])
def test_one_step_matches_the_oracle(mode):
    d = _small_data()
    n = d.n_train
    budgets = np.where(np.arange(n) % 2 == 0, 1.0, 4.0)
    kwargs = {"fixed": dict(noise_multiplier=0.8),
              "sample": dict(budgets=budgets, personalization="sample"),
              "scale": dict(budgets=budgets, personalization="scale")}[mode]
    # B ≈ N/1.4 makes round(N/B) = 1: one step, with Poisson sampling (q < 1) and padding
    config = DPSGDConfig(epochs=1, batch_size=n / 1.4, clip_norm=0.3, delta=DELTA, seed=3, **kwargs)
    lr = 0.5
    model = dpsgd.MLP(6, (5,), 3, rngs=nnx.Rngs(1))
    plan = plan_privacy(config, n)
    assert plan.total_steps == 1
    expected, size = _oracle_step(model, d, plan, config, lr)
    assert 0 < size < n
    result = train(model, optax.sgd(lr), d, config, progress=False)
    assert result.steps == 1
    for got, want in zip(_params(model), expected):
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-6)


def test_noise_std_is_sigma_clip_over_expected_batch():
    # a loss with zero gradient: every update is pure noise, (Σ 0 + N(0, σ²C²)) / Σq, T times
    d = data.synthetic((64,), n=500, classes=10, seed=0)
    sigma, clip, batch = 1.7, 0.6, 4.0  # realised batches of ~Poisson(4): normalising by them would explode
    config = DPSGDConfig(epochs=1, batch_size=batch, clip_norm=clip, noise_multiplier=sigma, seed=0)
    model = dpsgd.MLP(64, (256,), 10, rngs=nnx.Rngs(0))
    before = np.concatenate([p.ravel() for p in _params(model)])
    zero_loss = lambda m, x, y, key: 0.0 * jnp.sum(m(x), axis=-1)  # noqa: E731
    result = train(model, optax.sgd(1.0), d, config, loss_fn=zero_loss, progress=False)
    steps = result.steps
    assert steps == round(d.n_train / batch)
    delta = np.concatenate([p.ravel() for p in _params(model)]) - before
    expected = np.sqrt(steps) * sigma * clip / batch
    k = delta.size
    # sample sd of k i.i.d. normals: relative standard error 1/√(2k); 5 standard errors
    assert abs(delta.std() / expected - 1) < 5 / np.sqrt(2 * k)
    assert abs(delta.mean()) < 5 * expected / np.sqrt(k)


# --------------------------------------------------------------------------------------------------
# training loop: compilation, budget stop, per-record ε
# --------------------------------------------------------------------------------------------------


def test_step_compiles_once_per_bucket_and_reports_per_record_epsilon():
    d = data.load("breast_cancer", seed=0)
    config = DPSGDConfig(epochs=2, batch_size=40, epsilon=2.0, delta=DELTA, budgets=None)
    result = train(dpsgd.MLP(30, (8,), 2, rngs=nnx.Rngs(0)), optax.sgd(0.2), d, config, progress=False)
    assert result.compiled_steps == len(result.buckets) == 1
    assert result.stopped == "completed" and result.steps == result.plan.total_steps
    assert result.epsilon <= 2.0 and result.epsilon == result.history[-1].epsilon
    np.testing.assert_array_equal(result.record_epsilon(), np.full(d.n_train, result.epsilon))
    assert [r.epoch for r in result.history] == [1, 2]
    assert result.history[0].epsilon < result.history[1].epsilon


def test_a_logical_batch_in_physical_chunks_trains_the_same_model():
    """Expected batch 256 of 455 records in chunks of 32: the clipped sums accumulate over the chunks, one
    noise draw and one optimizer step per logical batch, the same accounting, no sampled record dropped."""
    d = data.load("breast_cancer", seed=0)
    runs = {}
    for chunk in (None, 32):
        config = DPSGDConfig(epochs=2, batch_size=256, epsilon=2.0, delta=DELTA, microbatch_size=chunk)
        model = dpsgd.MLP(30, (8,), 2, rngs=nnx.Rngs(0))
        runs[chunk] = (train(model, optax.sgd(0.2), d, config, progress=False), _params(model))
    (whole, whole_params), (chunked, chunked_params) = runs[None], runs[32]
    assert chunked.epsilon == whole.epsilon and chunked.steps == whole.steps and chunked.buckets == whole.buckets
    for a, b in zip(chunked_params, whole_params):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-5)


def test_training_stops_when_the_budget_is_spent(monkeypatch):
    d = data.load("breast_cancer", seed=0)
    config = DPSGDConfig(epochs=3, batch_size=40, noise_multiplier=1.0, delta=DELTA)
    plan = plan_privacy(config, d.n_train)
    budget = float(GroupAccountant(plan.rate, plan.noise_parameter, DELTA).epsilon(plan.steps_per_epoch + 4)[0])
    monkeypatch.setattr(dpsgd, "plan_privacy", lambda c, n, dimension=None: dataclasses.replace(plan, budget=np.array([budget])))
    result = train(dpsgd.MLP(30, (8,), 2, rngs=nnx.Rngs(0)), optax.sgd(0.2), d, config, progress=False)
    assert result.stopped == "budget"
    assert result.steps == plan.steps_per_epoch + 4  # the last affordable step, not one more
    assert result.epsilon <= budget
    assert GroupAccountant(plan.rate, plan.noise_parameter, DELTA).epsilon(result.steps + 1)[0] > budget
    assert len(result.history) == 2


# --------------------------------------------------------------------------------------------------
# checkpoint and resume
# --------------------------------------------------------------------------------------------------


class _Killed(Exception):
    pass


def _kill_after(epoch):
    def callback(record):
        if record.epoch == epoch:
            raise _Killed

    return callback


@pytest.mark.parametrize("personalized", [False, True])
def test_resume_gives_identical_epsilon_and_parameters(tmp_path, personalized):
    d = data.load("breast_cancer", seed=1)
    extra = (dict(budgets=np.resize([1.0, 3.0], d.n_train), personalization="scale") if personalized
             else dict(epsilon=2.0))
    config = DPSGDConfig(epochs=4, batch_size=64, delta=DELTA, seed=5, **extra)
    make = lambda: dpsgd.MLP(30, (8,), 2, rngs=nnx.Rngs(2))  # noqa: E731
    opt = lambda: optax.adam(0.05)  # noqa: E731  (a stateful optimizer: its moments must be restored)

    straight_model = make()
    straight = train(straight_model, opt(), d, config, progress=False)

    with pytest.raises(_Killed):
        train(make(), opt(), d, config, progress=False, checkpoint_dir=str(tmp_path), callback=_kill_after(2))
    resumed_model = make()
    resumed = train(resumed_model, opt(), d, config, progress=False, checkpoint_dir=str(tmp_path))

    assert resumed.epsilon == straight.epsilon
    np.testing.assert_array_equal(resumed.group_epsilon, straight.group_epsilon)
    assert [r.epsilon for r in resumed.history] == [r.epsilon for r in straight.history]
    assert [r.test_accuracy for r in resumed.history] == [r.test_accuracy for r in straight.history]
    assert resumed.steps == straight.steps
    for a, b in zip(_params(resumed_model), _params(straight_model)):
        np.testing.assert_array_equal(a, b)

    # a finished run resumes to the same result without another step
    again = train(make(), opt(), d, config, progress=False, checkpoint_dir=str(tmp_path))
    assert again.steps == straight.steps and again.epsilon == straight.epsilon


def test_checkpoint_of_another_run_is_refused(tmp_path):
    d = data.load("breast_cancer", seed=1)
    config = DPSGDConfig(epochs=1, batch_size=64, noise_multiplier=1.0)
    # the model, optimizer and batch size of test_same_run_with_x64_enabled: one compiled step for both
    train(dpsgd.MLP(30, (8,), 2, rngs=nnx.Rngs(0)), optax.sgd(0.2), d, config, progress=False,
          checkpoint_dir=str(tmp_path))
    other = dataclasses.replace(config, seed=1)
    with pytest.raises(ValueError, match="checkpoint_dir .* holds a different run"):
        train(dpsgd.MLP(30, (8,), 2, rngs=nnx.Rngs(0)), optax.sgd(0.2), d, other, progress=False,
              checkpoint_dir=str(tmp_path))
    with pytest.raises(ValueError, match="checkpoint does not match the model"):
        train(dpsgd.MLP(30, (4,), 2, rngs=nnx.Rngs(0)), optax.sgd(0.2), d, config, progress=False,
              checkpoint_dir=str(tmp_path))


# --------------------------------------------------------------------------------------------------
# bad inputs
# --------------------------------------------------------------------------------------------------

BAD_CONFIGS = [
    (dict(epochs=0, epsilon=1.0), "epochs"),
    (dict(batch_size=0.0, epsilon=1.0), "batch_size"),
    (dict(batch_size=1e6, epsilon=1.0), "batch_size"),
    (dict(clip_norm=0.0, epsilon=1.0), "clip_norm"),
    (dict(delta=1.0, epsilon=1.0), "delta"),
    (dict(seed=-1, epsilon=1.0), "seed"),
    (dict(eval_batch_size=0, epsilon=1.0), "eval_batch_size"),
    (dict(microbatch_size=0, epsilon=1.0), "microbatch_size"),
    (dict(orders=[0.5, 2.0], epsilon=1.0), "orders"),
    (dict(epsilon=-1.0), "epsilon"),
    (dict(noise_multiplier=0.0), "noise_multiplier"),
    (dict(), "set epsilon"),
    (dict(epsilon=1.0, personalization="other"), "personalization"),
    (dict(budgets=np.ones(5)), "budgets must be a 1-D array with one ε per training record"),
    (dict(budgets=np.zeros(1000)), "budgets must lie"),
    (dict(budgets=np.ones(1000), epsilon=1.0), "either epsilon"),
    (dict(budgets=np.ones(1000), personalization="scale", noise_multiplier=1.0), "leave noise_multiplier unset"),
    (dict(epsilon=1.0, mechanism="uniform"), "mechanism must be one of"),
    (dict(budgets=np.ones(1000), mechanism="laplace"), "per-record budgets .* are Gaussian-only"),
    (dict(epsilon=1.0, noise_multiplier=2.0, mechanism="laplace"), "give epsilon or noise_multiplier"),
]


@pytest.mark.parametrize("kwargs,message", BAD_CONFIGS)
def test_bad_config(kwargs, message):
    with pytest.raises(ValueError, match=message):
        plan_privacy(DPSGDConfig(**kwargs), 1000)


def test_bad_n():
    with pytest.raises(ValueError, match="n must lie"):
        plan_privacy(DPSGDConfig(epsilon=1.0), 0)


def test_bad_train_arguments():
    d = _small_data()
    model, config = dpsgd.MLP(6, (5,), 3, rngs=nnx.Rngs(0)), DPSGDConfig(epochs=1, batch_size=10, noise_multiplier=1.0)
    with pytest.raises(ValueError, match="model must be a flax.nnx.Module"):
        train(lambda x: x, optax.sgd(0.1), d, config, progress=False)
    with pytest.raises(ValueError, match="optimizer must be an optax.GradientTransformation"):
        train(model, "sgd", d, config, progress=False)
    with pytest.raises(ValueError, match="config must be a DPSGDConfig"):
        train(model, optax.sgd(0.1), d, {"epochs": 1}, progress=False)
    broken = dataclasses.replace(d, y_test=d.y_test[:-1])
    with pytest.raises(ValueError, match="x_test and y_test must hold the same number of examples"):
        train(model, optax.sgd(0.1), broken, config, progress=False)


@pytest.mark.parametrize("kwargs,message", [
    (dict(rates=[1.5], sigmas=[1.0]), "rates"),
    (dict(rates=[0.1], sigmas=[0.0]), "sigmas"),
    (dict(rates=[0.1, 0.2], sigmas=[1.0]), "same length"),
    (dict(rates=[0.1], sigmas=[1.0], delta=0.0), "delta"),
    (dict(rates=[0.1], sigmas=[1.0], steps=-1), "steps"),
])
def test_bad_accountant(kwargs, message):
    kwargs = {"delta": DELTA, **kwargs}
    with pytest.raises(ValueError, match=message):
        GroupAccountant(kwargs.pop("rates"), kwargs.pop("sigmas"), **kwargs)


def test_plot_needs_history():
    with pytest.raises(ValueError, match="history is empty"):
        plot_learning_curve([], "unused.png")


# --------------------------------------------------------------------------------------------------
# evaluation: make_evaluator / padded_test_set
# --------------------------------------------------------------------------------------------------


def _numpy_accuracy_and_loss(model, x, y):
    """Oracle: the MLP's logits in float64 numpy from its parameters, then #correct and mean −log softmax_y."""
    h = np.asarray(x, np.float64)
    for layer in model.layers:
        h = np.tanh(h @ np.asarray(layer.kernel[...], np.float64) + np.asarray(layer.bias[...], np.float64))
    logits = h @ np.asarray(model.head.kernel[...], np.float64) + np.asarray(model.head.bias[...], np.float64)
    top = logits.max(1, keepdims=True)
    log_softmax = logits - top - np.log(np.exp(logits - top).sum(1, keepdims=True))
    return int(np.sum(logits.argmax(1) == y)), float(-np.mean(log_softmax[np.arange(len(y)), y]))


@pytest.mark.parametrize("batch_size", [1, 8, 37, 64])
def test_evaluator_matches_a_numpy_oracle(batch_size):
    rng = np.random.default_rng(1)
    x, y = rng.normal(size=(37, 6)).astype(np.float32), rng.integers(0, 3, 37).astype(np.int32)
    model = dpsgd.MLP(6, (5,), 3, rngs=nnx.Rngs(3))
    graphdef, params, rest = nnx.split(model, nnx.Param, ...)
    test = dpsgd.padded_test_set((x, y), batch_size)
    accuracy, loss = dpsgd.make_evaluator(graphdef, batch_size)(params, rest, *test)
    correct, want_loss = _numpy_accuracy_and_loss(model, x, y)
    assert 0 < correct < 37  # a test that can tell right from wrong
    assert float(accuracy) == float(np.float32(correct) / np.float32(37))  # the count, divided in float32
    assert float(loss) == pytest.approx(want_loss, rel=1e-5)


def test_padded_test_set_pads_with_masked_zeros():
    d = _small_data()
    n = d.x_test.shape[0]
    x, y, mask = dpsgd.padded_test_set(d, 8)
    assert x.shape == ((n + 7) // 8 * 8,) + d.x_test.shape[1:] and y.shape == mask.shape == (x.shape[0],)
    np.testing.assert_array_equal(np.asarray(x[:n]), d.x_test)
    np.testing.assert_array_equal(np.asarray(y[:n]), d.y_test)
    assert np.all(np.asarray(x[n:]) == 0) and np.all(np.asarray(y[n:]) == 0)
    np.testing.assert_array_equal(np.asarray(mask), np.arange(x.shape[0]) < n)
    for a, b in zip(dpsgd.padded_test_set((d.x_test, d.y_test), 8), (x, y, mask)):  # a tuple works alike
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    exact = dpsgd.padded_test_set((d.x_test, d.y_test), n)  # already a multiple: no padding
    assert exact[0].shape[0] == n and bool(np.all(np.asarray(exact[2])))


@pytest.mark.parametrize("batch_size", [0, 2.5, True, np.nan])
def test_bad_evaluator_batch_size(batch_size):
    graphdef, _ = nnx.split(dpsgd.MLP(6, (5,), 3, rngs=nnx.Rngs(0)), nnx.Param)
    with pytest.raises(ValueError, match="batch_size"):
        dpsgd.make_evaluator(graphdef, batch_size)
    with pytest.raises(ValueError, match="batch_size"):
        dpsgd.padded_test_set((np.zeros((3, 6)), np.zeros(3)), batch_size)


def test_bad_evaluator_graphdef():
    with pytest.raises(ValueError, match="graphdef must be the GraphDef"):
        dpsgd.make_evaluator(dpsgd.MLP(6, (5,), 3, rngs=nnx.Rngs(0)), 8)


@pytest.mark.parametrize("data", [
    np.zeros((3, 6)),  # neither a Dataset nor a pair
    (np.zeros((3, 6)), np.zeros(3), np.zeros(3)),  # three items
    (np.zeros((0, 6)), np.zeros(0)),  # empty
    (np.zeros((3, 6)), np.zeros(2)),  # one label short
    (np.float32(1.0), np.zeros(1)),  # no example axis
])
def test_bad_padded_test_set_data(data):
    with pytest.raises(ValueError, match="data must"):
        dpsgd.padded_test_set(data, 8)


# --------------------------------------------------------------------------------------------------
# end to end
# --------------------------------------------------------------------------------------------------

E2E_SEEDS = range(5)


@pytest.mark.slow
def test_digits_reaches_85_percent_at_epsilon_3():
    """Fast configuration (5 seeds × 10 epochs, ~10 s on 2 CPU cores after compilation): MLP 64-64-10,
    tanh, SGD(0.1, momentum 0.9), C = 1, expected batch 128, σ calibrated to ε = 3 at δ = 1e-5. Each
    seed reseeds the split, the initialisation, the sampler and the noise."""
    accuracies, started = [], time.perf_counter()
    for seed in E2E_SEEDS:
        d = data.load("digits", seed=seed)
        config = DPSGDConfig(epochs=10, batch_size=128, clip_norm=1.0, epsilon=3.0, delta=DELTA, seed=seed)
        result = train(dpsgd.MLP(64, (64,), 10, rngs=nnx.Rngs(seed)), optax.sgd(0.1, momentum=0.9), d, config,
                       progress=False)
        assert result.epsilon <= 3.0
        accuracies.append(result.test_accuracy)
    accuracies = np.array(accuracies)
    print(f"\ndigits, ε = 3, δ = 1e-5: test accuracy mean {accuracies.mean():.4f}, sd {accuracies.std(ddof=1):.4f}, "
          f"min {accuracies.min():.4f}, max {accuracies.max():.4f} over {len(accuracies)} seeds "
          f"({time.perf_counter() - started:.1f} s)")
    assert accuracies.mean() >= 0.85
    assert accuracies.min() >= 0.85


def test_same_run_with_x64_enabled():
    # the caller's jax_enable_x64 does not change the run: training stays float32, accounting float64
    d = data.load("breast_cancer", seed=0)
    config = DPSGDConfig(epochs=1, batch_size=64, noise_multiplier=1.0, delta=DELTA)
    models, results = [], []
    for x64 in (False, True):
        with jax.enable_x64(x64):
            model = dpsgd.MLP(30, (8,), 2, rngs=nnx.Rngs(0))
            results.append(train(model, optax.sgd(0.2), d, config, progress=False))
            models.append(_params(model))
    assert results[0].epsilon == results[1].epsilon
    for a, b in zip(*models):
        assert a.dtype == b.dtype == np.float32
        np.testing.assert_array_equal(a, b)


# --------------------------------------------------------------------------------------------------
# "scale" with many distinct budgets: one per-example pass, no cap on the number of groups
# --------------------------------------------------------------------------------------------------


def test_scale_mode_with_many_distinct_budgets_runs_one_pass():
    d = _small_data()
    budgets = np.linspace(1.0, 4.0, d.n_train)  # every record its own group (was capped at 32 groups)
    config = DPSGDConfig(epochs=1, batch_size=d.n_train / 1.4, clip_norm=0.3, delta=DELTA, seed=3,
                         budgets=budgets, personalization="scale")
    plan = plan_privacy(config, d.n_train)
    assert plan.clip.size == d.n_train
    model = dpsgd.MLP(6, (5,), 3, rngs=nnx.Rngs(1))
    expected, _ = _oracle_step(model, d, plan, config, 0.5)
    result = train(model, optax.sgd(0.5), d, config, progress=False)
    for got, want in zip(_params(model), expected):
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-6)
    assert np.all(result.group_epsilon <= plan.budget)


# --------------------------------------------------------------------------------------------------
# Laplace noise: L1 clipping, accounting by the Zhu-Wang bound of the 1-D curve, calibration
# --------------------------------------------------------------------------------------------------


def test_laplace_accountant_is_subsampled_laplace_composed_and_converted():
    from jaxpriv import rdp

    q, b, steps = np.array([0.05, 0.2]), np.array([2.0, 5.0]), 300
    orders = rdp.DEFAULT_ORDERS
    acc = GroupAccountant(q, b, DELTA, steps=steps, mechanism="laplace")
    for g in range(2):
        curve = rdp.subsampled(q[g], lambda a: rdp.laplace(b[g], a), orders)
        want = float(rdp.to_epsilon(steps * curve, orders, DELTA)[0])
        assert acc.epsilon()[g] == pytest.approx(want, rel=1e-12)
    # more noise or fewer steps: less ε; a Gaussian with the same variance 2b² is accounted differently
    assert acc.epsilon(100)[0] < acc.epsilon()[0]
    assert GroupAccountant([0.05], [4.0], DELTA, steps=steps, mechanism="laplace").epsilon()[0] < acc.epsilon()[0]


def test_laplace_plan_calibrates_b_with_the_harmonizer():
    from jaxpriv.calibrate import harmonizer

    config = DPSGDConfig(epochs=4, batch_size=50, epsilon=2.0, delta=DELTA, mechanism="laplace", clip_norm=0.5)
    plan = plan_privacy(config, 1000)
    assert plan.mechanism == "laplace" and plan.mode == "b for ε"
    b = float(plan.noise_parameter[0])
    want = float(harmonizer.harmonize("laplace", 2.0, DELTA, q=0.05, rounds=plan.total_steps).scale)
    assert b == pytest.approx(want, rel=1e-9)
    eps = GroupAccountant(plan.rate, plan.noise_parameter, DELTA, mechanism="laplace").epsilon(plan.total_steps)[0]
    assert eps <= 2.0 and eps == pytest.approx(2.0, rel=1e-8)
    assert plan.noise_std == pytest.approx(b * 0.5)  # the Laplace scale on the sum: b·C
    fixed = plan_privacy(DPSGDConfig(epochs=1, batch_size=50, noise_multiplier=3.0, mechanism="laplace"), 1000)
    assert fixed.mode == "fixed b" and fixed.noise_parameter[0] == 3.0 and np.isinf(fixed.budget[0])


def test_laplace_noise_scale_of_the_steps():
    # zero gradients: after T steps each parameter moved by Σ_t Lap(bC)/B, variance T·2(bC)²/B²
    d = data.synthetic((64,), n=500, classes=10, seed=0)
    b, clip, batch = 1.3, 0.6, 4.0
    config = DPSGDConfig(epochs=1, batch_size=batch, clip_norm=clip, noise_multiplier=b, seed=0, mechanism="laplace")
    model = dpsgd.MLP(64, (256,), 10, rngs=nnx.Rngs(0))
    before = np.concatenate([p.ravel() for p in _params(model)])
    zero_loss = lambda m, x, y, key: 0.0 * jnp.sum(m(x), axis=-1)  # noqa: E731
    result = train(model, optax.sgd(1.0), d, config, loss_fn=zero_loss, progress=False)
    delta = np.concatenate([p.ravel() for p in _params(model)]) - before
    expected = np.sqrt(result.steps * 2.0) * b * clip / batch
    k = delta.size
    # a sum of ≥ 100 Laplace draws is close to normal: sample sd within 5 standard errors
    assert abs(delta.std() / expected - 1) < 5 / np.sqrt(2 * k)


def test_laplace_digits_run_reaches_a_sane_accuracy():
    d = data.load("digits", seed=0)
    config = DPSGDConfig(epochs=20, batch_size=64, clip_norm=1.0, epsilon=3.0, delta=DELTA, mechanism="laplace")
    model = dpsgd.MLP(64, (), 10, rngs=nnx.Rngs(0))  # a linear model: Laplace noise pays ~√d against Gaussian
    result = train(model, optax.sgd(1.0), d, config, progress=False)
    assert result.epsilon <= 3.0 and result.stopped == "completed"
    assert result.test_accuracy > 0.45  # chance is 0.1; measured 0.540


def test_staircase_needs_the_dimension_and_is_accounted_over_it():
    from jaxpriv.mechanisms import staircase

    with pytest.raises(ValueError, match="dimension"):
        plan_privacy(DPSGDConfig(epsilon=1.0, mechanism="staircase"), 1000)
    plan = plan_privacy(DPSGDConfig(epochs=2, batch_size=50, epsilon=2.0, delta=DELTA, mechanism="staircase"),
                        1000, dimension=650)
    eps0, q, steps = float(plan.noise_parameter[0]), float(plan.rate[0]), plan.total_steps
    orders = rdp.DEFAULT_ORDERS
    # the per-coordinate curve over d = 650 (the 1-D curve would not be a bound: staircase.rdp_shift is concave)
    curve = rdp.subsampled(q, lambda a: staircase.rdp_l1(eps0, 650, orders=a), orders)
    direct = float(rdp.to_epsilon(steps * curve, orders, DELTA)[0])
    assert direct <= 2.0 and direct == pytest.approx(2.0, rel=1e-6)
    acc = GroupAccountant([q], [eps0], DELTA, steps=steps, mechanism="staircase", dimension=650)
    assert float(acc.epsilon()[0]) == pytest.approx(direct, rel=1e-12)
    one_d = GroupAccountant([q], [eps0], DELTA, steps=steps, mechanism="staircase", dimension=1)
    assert float(one_d.epsilon()[0]) < direct  # the dimension matters


def test_staircase_digits_run_stays_within_budget():
    d = data.load("digits", seed=0)
    config = DPSGDConfig(epochs=5, batch_size=64, clip_norm=1.0, epsilon=3.0, delta=DELTA, mechanism="staircase")
    model = dpsgd.MLP(64, (), 10, rngs=nnx.Rngs(0))
    result = train(model, optax.sgd(1.0), d, config, progress=False)
    assert result.epsilon <= 3.0 and result.stopped == "completed"
    assert np.isfinite(result.test_accuracy)


def test_a_harmonized_scale_the_accountant_rejects_is_an_error(monkeypatch):
    """The Laplace/staircase plan trusts the Harmonizer because both ask the same accountant; a scale the
    trainer's accountant finds over budget is a bug, reported, never nudged."""
    from jaxpriv.calibrate import harmonizer

    real = harmonizer.harmonize
    monkeypatch.setattr(harmonizer, "harmonize", lambda *a, **k: real(*a, **k)._replace(scale=real(*a, **k).scale / 2))
    config = DPSGDConfig(epochs=1, batch_size=50, epsilon=2.0, delta=DELTA, mechanism="laplace")
    with pytest.raises(RuntimeError, match="spends ε"):
        plan_privacy(config, 1000)


def test_the_config_mechanisms_are_the_event_mechanisms():
    from jaxpriv import events
    from jaxpriv.train.config import MECHANISMS

    assert MECHANISMS == events.NOISE_MECHANISMS
    plan = plan_privacy(DPSGDConfig(epochs=1, batch_size=50, noise_multiplier=3.0, mechanism="laplace"), 1000)
    assert plan.noise_event() == events.Laplace(3.0)
    assert GroupAccountant([0.1], [2.0], DELTA, mechanism="staircase", dimension=7).step.event.dimension == 7


def test_bad_accountant_mechanism():
    with pytest.raises(ValueError, match="mechanism must be one of"):
        GroupAccountant([0.1], [1.0], DELTA, mechanism="exponential")
    with pytest.raises(ValueError, match="dimension"):
        GroupAccountant([0.1], [1.0], DELTA, mechanism="staircase")


# --------------------------------------------------------------------------------------------------
# the built-in models: bad sizes and dtypes name themselves (not a Flax error deep inside)
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("make, message", [
    (lambda r: models.MLP(0, (8,), 2, rngs=r), r"in_features must lie in \[1, inf\), got 0"),
    (lambda r: models.MLP(4, (8, 2.5), 2, rngs=r), r"hidden must be an integer, got 2.5"),
    (lambda r: models.MLP(4, 8, 2, rngs=r), r"hidden must be a sequence of layer widths"),
    (lambda r: models.MLP(4, (8,), 0, rngs=r), r"num_classes must lie in \[1, inf\), got 0"),
    (lambda r: models.MLP(4, (8,), 2, dtype=jnp.int32, rngs=r), r"dtype must be None or a floating dtype"),
    (lambda r: models.CNN(3, rngs=r), r"side must lie in \[4, inf\), got 3"),
    (lambda r: models.CNN(8, 0, rngs=r), r"channels must lie in \[1, inf\), got 0"),
    (lambda r: models.CNN(8, 1, 10, width=-1, rngs=r), r"width must lie in \[1, inf\), got -1"),
    (lambda r: models.CNN(8, dtype="text", rngs=r), r"dtype must be None or a floating dtype"),
    (lambda r: models.TransformerBlock(10, 4, rngs=r), r"width must be a multiple of heads.*width 10 and heads 4"),
    (lambda r: models.TransformerBlock(8, 0, rngs=r), r"heads must lie in \[1, inf\), got 0"),
    (lambda r: models.Transformer(0, 8, rngs=r), r"length must lie in \[1, inf\), got 0"),
    (lambda r: models.Transformer(8, 1.5, rngs=r), r"features must be an integer, got 1.5"),
    (lambda r: models.Transformer(8, 8, 1, depth=0, rngs=r), r"depth must lie in \[1, inf\), got 0"),
    (lambda r: models.Transformer(8, 8, 10, width=30, heads=4, rngs=r), r"width must be a multiple of heads"),
])
def test_bad_model_sizes_and_dtypes(make, message):
    with pytest.raises(ValueError, match=message):
        make(nnx.Rngs(0))


def test_models_accept_numpy_integer_sizes_and_bfloat16():
    model = models.Transformer(np.int64(8), np.int32(8), 10, width=16, heads=4, dtype="bfloat16", rngs=nnx.Rngs(0))
    assert model(jnp.ones((2, 64))).dtype == jnp.bfloat16
