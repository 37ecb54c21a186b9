"""The public accounting and calibration kernels compile a fixed, small set of programs whatever the batch
size (issue 14), and training and the federated systems compile theirs once per structure, whatever the privacy
numbers (issue 29): a sweep of any length pads its settings to one of a few chunk sizes
(:func:`jaxpriv._batching.padded_batch_size`: 1, 16 and 256 settings on the CPU), so once sizes 1, 10, 1000
and 10⁵ have run, no other size lowers a new program.

Counted: every executable JAX obtains in this process (the ``backend_compile`` event fires once per new
function and shape, whether XLA compiles it or the persistent cache supplies it), so eager helper
operations that would compile per shape are caught too; except, where a test says so, the optimised form
of a program asked for the ninth time with one structure (:mod:`jaxpriv._tiers`), counted apart. Orders are a short custom list, which keeps each
kernel small to compile; the kernels' structure does not depend on the list.
"""

import dataclasses
import json

import jax
import numpy as np
import optax
import pytest
from flax import nnx

import jaxpriv
from jaxpriv import _batching, _tiers, accounting, calibrate, events, rdp
from jaxpriv.budgets import scenario
from jaxpriv.federated import apes, gspa, partition, rpdp, simulator, udpfl
from jaxpriv.train import data, dpsgd, make_private

ORDERS = (1.5, 2.0, 3.0, 8.0, 32.0)
FIRST = (1, 10, 1000, 100_000)
LATER = (3, 200, 4000, 30_000)
DELTA = 1e-5
_lowered = [0]
_names: list = []  # the compiled programs' names, in order


def _count(name, seconds, **kwargs):
    # One event per executable XLA builds or reads from the compilation cache: a program. (Counting
    # lowerings instead would count a saved program's export and its call as two, jaxpriv._saved_programs.)
    if name.endswith("backend_compile_duration"):
        _lowered[0] += 1
        _names.append(kwargs.get("fun_name"))


jax.monitoring.register_event_duration_secs_listener(_count)


def settings(n: int, seed: int = 0):
    rng = np.random.default_rng(seed + n)
    return 10 ** rng.uniform(-3, -1, n), rng.uniform(0.8, 3.0, n), rng.uniform(1.0, 8.0, n)


CASES = {
    "rdp.subsampled_gaussian": lambda q, s, e: rdp.subsampled_gaussian(q, s, ORDERS),
    "dpsgd_epsilon": lambda q, s, e: jaxpriv.dpsgd_epsilon(q, s, 1000, DELTA, orders=ORDERS, progress=False),
    "accounting.epsilon (RDP)": lambda q, s, e: accounting.epsilon(
        events.SelfComposed(events.PoissonSampled(q, events.Gaussian(s)), 1000), DELTA,
        accountant=accounting.RDP(ORDERS), progress=False),
    "calibrate.noise_multiplier": lambda q, s, e: calibrate.noise_multiplier(e, 0.01, 1000, DELTA, orders=ORDERS,
                                                                             progress=False),
    "calibrate.sampling_rate": lambda q, s, e: calibrate.sampling_rate(e, 1.0, 1000, DELTA, orders=ORDERS,
                                                                       progress=False),
    "calibrate.steps": lambda q, s, e: calibrate.steps(e, 0.01, 1.0, DELTA, orders=ORDERS, progress=False),
}


@pytest.mark.parametrize("name", CASES)
def test_no_new_program_for_a_new_batch_size(name):
    fn = CASES[name]
    before = _lowered[0]
    for n in FIRST:
        out = np.asarray(fn(*settings(n)))
        assert out.shape[0] == n and np.all(np.isfinite(out))
    first = _lowered[0] - before
    assert first >= 1  # the listener sees this process's programs
    before = _lowered[0]
    for n in LATER:
        fn(*settings(n, seed=1))
    assert _lowered[0] - before == 0, f"{name}: {_lowered[0] - before} programs lowered for new batch sizes"


@pytest.mark.parametrize("devices", [1, 4])
@pytest.mark.parametrize("alone_below", [1, 3, 8])
def test_the_call_plan_covers_every_setting_once_in_one_compiled_size(devices, alone_below):
    """call_plan cuts n settings into calls of one padded size: single rows below ``alone_below``, pieces of the
    16-row program for small queries (at most MAX_PIECES of them), otherwise whole chunks."""
    chunk = 256
    piece = _batching.padded_batch_size(16, chunk, devices)
    for n in range(1, 1200):
        plan = _batching.call_plan(n, chunk, devices, alone_below)
        assert [c[0] for c in plan] == [0] + [c[1] for c in plan[:-1]] and plan[-1][1] == n  # contiguous, complete
        sizes = {c[2] for c in plan}
        assert len(sizes) == 1 and all(c[1] - c[0] <= c[2] for c in plan)
        (size,) = sizes
        if n < alone_below or n == 1:
            assert size == _batching.padded_batch_size(1, chunk, devices) and len(plan) == n
        elif piece < n < chunk and n <= _batching.MAX_PIECES * piece:
            assert size == piece
        else:
            assert size == _batching.padded_batch_size(n, chunk, devices)


def test_a_small_batch_runs_in_pieces():
    """64 settings run as four 16-row calls (not one padded 256-row call), each setting's answer in its place;
    fewer settings than ``alone_below`` run one by one."""
    q, s, _ = settings(64, seed=2)
    calls = []

    def kernel(q, s):
        calls.append(q.shape[0])
        return (q * 2.0 + s,)

    (out,) = _batching.map_chunked(kernel, [q, s], shard=False)
    assert calls == [16, 16, 16, 16]
    np.testing.assert_array_equal(out, q * 2.0 + s)
    calls.clear()
    (out,) = _batching.map_chunked(kernel, [q[:5], s[:5]], shard=False, alone_below=8)
    assert calls == [1] * 5
    np.testing.assert_array_equal(out, q[:5] * 2.0 + s[:5])


def test_new_pld_questions_compile_one_program_per_grid_size(monkeypatch):
    """The PLD accountant's programs are keyed on structure and grid size only (issue 28): after two
    questions, 20 new DP-SGD settings — ε and δ queries, upper ends and intervals, both neighbouring
    directions each — lower at most one program per grid size (a power of two) they reach that the first
    two had not, and at most 6 in all; besides them, a grid size's programs asked for the ninth time are
    compiled again optimised, once (jaxpriv._tiers). σ, q, T, h, the direction and the query are data."""
    from jaxpriv.accounting import pld

    rungs = []
    plan = pld._plan

    def recording(*args, **kwargs):
        out = plan(*args, **kwargs)
        rungs.extend(int(n) for n in out["N"])
        return out

    monkeypatch.setattr(pld, "_plan", recording)

    def dpsgd(q, sigma, steps):
        return events.SelfComposed(events.PoissonSampled(q, events.Gaussian(sigma)), steps)

    accounting.epsilon(dpsgd(0.01, 1.1, 1000), DELTA, accountant="pld")
    accounting.delta_interval(dpsgd(0.02, 1.3, 300), 1.0)
    seen, before, hot = set(rungs), _lowered[0], _tiers.tier_up_compiles()
    rng = np.random.default_rng(28)
    for i in range(20):
        event = dpsgd(10 ** rng.uniform(-3, -1), rng.uniform(0.8, 2.9), int(10 ** rng.uniform(2, 3.3)))
        if i % 4 == 0:
            out = accounting.epsilon(event, DELTA, accountant="pld")
        elif i % 4 == 1:
            out = accounting.delta(event, rng.uniform(0.5, 4.0), accountant="pld")
        elif i % 4 == 2:
            out = accounting.epsilon_interval(event, 10 ** rng.uniform(-8, -4))[1]
        else:
            out = accounting.delta_interval(event, rng.uniform(0.5, 4.0))[1]
        assert np.isfinite(out)
    hot = _tiers.tier_up_compiles() - hot  # a program asked for the 9th time, compiled optimised (once)
    new = _lowered[0] - before - hot
    reached = set(rungs) - seen
    assert new <= len(reached) and new + hot <= 6, (new, hot, sorted(seen), sorted(reached))



def test_a_second_large_pld_query_with_other_numbers_compiles_only_new_grid_sizes(monkeypatch):
    """40 DP-SGD settings by PLD in one call (a large query: optimised programs, whole chunks), then 40 others
    (q and σ 10% higher): the second lowers a program only for a grid size the first did not reach (here its
    refined settings land on 2^16 where the first's landed on 2^15), at most one per such size; its probe
    and its 64-row evaluations on the common grid sizes reuse the first's. Each program is counted against
    the grid size being evaluated when it was obtained, so a size an earlier test already compiled (0 new
    programs) passes as well as a fresh process (1)."""
    from jaxpriv.accounting import pld_grid

    sizes, by_size = [], {}
    real = pld_grid.evaluate

    def counted(*a, **k):
        sizes.append(k["N"])
        before = _lowered[0]
        out = real(*a, **k)
        by_size[k["N"]] = by_size.get(k["N"], 0) + _lowered[0] - before
        return out

    monkeypatch.setattr(pld_grid, "evaluate", counted)

    def ask(scale):
        sizes.clear()
        by_size.clear()
        q, sigma = np.geomspace(0.005, 0.05, 40) * scale, np.linspace(0.8, 2.0, 40) * scale
        eps = accounting.epsilon(events.SelfComposed(events.PoissonSampled(q, events.Gaussian(sigma)), 1000),
                                 DELTA, accountant="pld")
        return eps, set(sizes)

    (first, first_sizes), _ = _lowered_by(lambda: ask(1.0))
    (second, second_sizes), new = _lowered_by(lambda: ask(1.1))
    only_new = second_sizes - first_sizes
    assert only_new and 1 << 14 in first_sizes & second_sizes  # the case the docstring describes
    assert new == sum(by_size.values()), (new, by_size)  # every program obtained inside an evaluation
    assert all(by_size[n] == 0 for n in second_sizes & first_sizes), by_size
    assert all(by_size[n] <= 1 for n in only_new), by_size
    assert np.all(np.isfinite(second)) and np.all(second < first)  # more noise, lower ε (q rises by 10% too)


def test_a_second_shuffle_question_with_other_numbers_compiles_nothing():
    """The shuffled clone pair by PLD (a symmetric event: one row a call) at several round counts, and Girgis
    et al.'s RDP: asked again with another ε₀, n (in the same window rung) and round counts, nothing new."""
    from jaxpriv.shuffle import bounds

    def ask(eps0, n, rounds):
        pld = accounting.epsilon(events.SelfComposed(events.Shuffled(eps0, n=n), np.array(rounds)), 1e-6,
                                 accountant="pld")
        return pld, bounds.girgis_rdp(eps0, n, np.arange(2, 65))

    _lowered_by(lambda: ask(1.0, 1000, [10, 100]))
    second, new = _lowered_by(lambda: ask(1.05, 1100, [20, 300]))
    assert new == 0
    assert np.all(np.isfinite(second[0])) and second[0][0] < second[0][1]

@pytest.mark.parametrize("refine, orders, steps", [(False, "default", "1299"), (True, "dp_accounting", "1300")])
def test_the_epsilon_commands_rdp_rows_are_one_program(capsys, refine, orders, steps):
    """``jaxpriv epsilon``'s two RDP rows, the improved conversion (refined or not) and the classic one, come
    from one compiled program (issue 28): the curve is computed once and converted both ways, where the classic
    row used to recompute it through rdp.compose and rdp.to_epsilon (two more programs, and four eager
    one-operation ones). The CLT row's μ and ε are the only other programs, and nothing is lowered eagerly.
    Both rows are bit for bit the separate computations. The in-memory caches are cleared first, so every
    program the command needs is lowered here whatever ran before (the persistent cache spares compiling it)."""
    from jaxpriv.cli import main
    from jaxpriv.report import ORDER_SETS

    argv = ["epsilon", "--q", "0.013", "--sigma", "1.2", "--steps", steps, "--delta", "1e-6", "--orders", orders,
            "--accountant", "rdp", "--json", *(["--refine"] if refine else [])]
    jax.clear_caches()
    before = len(_names)
    assert main(argv) == 0
    lowered = _names[before:]
    data = json.loads(capsys.readouterr().out)
    assert sorted(lowered) == ["jit(_clt_kernel)", "jit(_dpsgd_conversions_program)", "jit(_epsilon_kernel)"], lowered
    q, sigma, count, delta, grid = 0.013, 1.2, float(steps), 1e-6, ORDER_SETS[orders]
    eps, order = jaxpriv.dpsgd_epsilon(q, sigma, count, delta, orders=grid, return_order=True, refine=refine)
    curve = rdp.compose(rdp.subsampled_gaussian(q, sigma, grid), counts=[count])
    eps_classic, order_classic = rdp.to_epsilon(curve, grid, delta, conversion="classic")
    assert (data["epsilon_rdp"], data["best_order"]) == (float(eps), float(order))
    assert (data["epsilon_classic"], data["best_order_classic"]) == (float(eps_classic), float(order_classic))
    assert data["epsilon"] == data["epsilon_rdp"] < data["epsilon_classic"]


# --------------------------------------------------------------------------------------------------
# training and the federated systems: programs keyed on structure, never on numbers (issue 29)
# --------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cancer():
    return data.load("breast_cancer", seed=0)


def _lowered_by(fn):
    """``fn()`` and the programs it obtained, less the optimised forms of programs that had run their quick
    calls (jaxpriv._tiers: the same program, compiled again once it is asked for often)."""
    before, hot = _lowered[0], _tiers.tier_up_compiles()
    out = fn()
    return out, _lowered[0] - before - (_tiers.tier_up_compiles() - hot)


def test_a_second_train_with_another_epsilon_compiles_nothing(cancer):
    """Two train() calls on the same architecture and optimizer object, ε = 1 then ε = 8 (other σ, other
    seed, other clip norm): the second lowers no program at all (its step, evaluation and accounting all
    reuse the first's) and reports the step programs it used without having traced any."""
    sgd = optax.sgd(0.5)
    model = lambda: dpsgd.MLP(30, (12,), 2, rngs=nnx.Rngs(0))  # noqa: E731
    config = dpsgd.DPSGDConfig(epochs=2, batch_size=48, epsilon=1.0, delta=1e-5, seed=0)
    first, lowered = _lowered_by(lambda: dpsgd.train(model(), sgd, cancer, config, progress=False))
    assert lowered >= 1 and first.new_programs == 1 and first.compiled_steps == len(first.buckets) == 1
    again = dataclasses.replace(config, epsilon=8.0, clip_norm=0.3, seed=1)
    second, lowered = _lowered_by(lambda: dpsgd.train(model(), sgd, cancer, again, progress=False))
    assert second.plan.noise_parameter[0] < first.plan.noise_parameter[0] and second.epsilon <= 8.0
    assert lowered == 0, f"{lowered} programs lowered by the second run"
    assert second.new_programs == 0 and second.compiled_steps == len(second.buckets) == 1
    # an optimizer built again with the same numbers is the same structure; another learning rate is not
    third, lowered = _lowered_by(lambda: dpsgd.train(model(), optax.sgd(0.5), cancer, again, progress=False))
    assert lowered == 0 and third.new_programs == 0
    fourth = dpsgd.train(model(), optax.sgd(0.25), cancer, again, progress=False)
    assert fourth.new_programs == 1


def test_a_second_bandmf_train_with_another_epsilon_compiles_nothing(cancer):
    """BandMF's step takes σ, Δ, the batch size and the strategy's bands as arguments (issue 32): a second
    run with another ε (another σ), clip norm and seed, the same number of steps and bands, lowers no
    program at all (step, sampler, evaluation, accounting, strategy), as DP-SGD's second run."""
    sgd = optax.sgd(0.5)
    model = lambda: dpsgd.MLP(30, (12,), 2, rngs=nnx.Rngs(0))  # noqa: E731
    config = dpsgd.DPSGDConfig(epochs=2, batch_size=48, epsilon=1.0, delta=1e-5, seed=0, mechanism="bandmf", bands=2)
    first, lowered = _lowered_by(lambda: dpsgd.train(model(), sgd, cancer, config, progress=False))
    assert lowered >= 1 and first.new_programs == 1
    again = dataclasses.replace(config, epsilon=8.0, clip_norm=0.3, seed=1)
    before = len(_names)
    second, lowered = _lowered_by(lambda: dpsgd.train(model(), sgd, cancer, again, progress=False))
    assert second.plan.noise_parameter[0] < first.plan.noise_parameter[0] and second.epsilon <= 8.0
    assert lowered == 0, f"{lowered} programs lowered by the second run: {_names[before:]}"
    assert second.new_programs == 0 and second.compiled_steps == len(second.buckets) >= 1


def test_a_second_balls_in_bins_train_with_another_epsilon_compiles_nothing(cancer, monkeypatch):
    """train() with sampling="balls_in_bins" (MATH §11): it draws allocation batches, reports the ε of
    random allocation by PLD (within 1% of the target, never above), and a second run with another ε (σ
    calibrated again by PLD) lowers no training, sampling or evaluation program. The PLD accountant's grid
    program is keyed on its grid size (a power of two in [2¹², 2²²]): a σ that needs a finer grid than the
    first run's lowers it at that size, and nothing else (here ε = 6: σ = 0.74 needs 2¹⁴–2¹⁶ nodes)."""
    from jaxpriv.train.plan import AllocationAccountant
    from jaxpriv.train.sampling import AllocationSampler

    drawn = []
    block = AllocationSampler.sample_block
    monkeypatch.setattr(AllocationSampler, "sample_block", lambda self, *a: drawn.append(a) or block(self, *a))
    sgd = optax.sgd(0.5)
    model = lambda: dpsgd.MLP(30, (12,), 2, rngs=nnx.Rngs(0))  # noqa: E731
    config = dpsgd.DPSGDConfig(epochs=2, batch_size=48, epsilon=2.0, delta=1e-5, sampling="balls_in_bins")
    first, lowered = _lowered_by(lambda: dpsgd.train(model(), sgd, cancer, config, progress=False))
    plan = first.plan
    assert drawn and first.steps == 2 * plan.steps_per_epoch and first.stopped == "completed"
    event = AllocationAccountant.run_event(plan.steps_per_epoch, float(plan.noise_parameter[0]), 2)
    assert 0.99 * 2.0 < first.epsilon == float(accounting.epsilon(event, 1e-5, accountant="pld")) <= 2.0
    assert first.history[0].epsilon < first.epsilon and first.test_accuracy > 0.8
    again = dataclasses.replace(config, epsilon=6.0, clip_norm=0.3, seed=1)
    before = len(_names)
    second, lowered = _lowered_by(lambda: dpsgd.train(model(), sgd, cancer, again, progress=False))
    assert second.plan.noise_parameter[0] < plan.noise_parameter[0] and second.epsilon <= 6.0
    assert set(_names[before:]) <= {"jit(evaluate)"} and lowered <= 4, _names[before:]
    assert second.new_programs == 0


def test_make_private_with_another_target_compiles_nothing(cancer):
    def run(eps, clip):
        model = nnx.Linear(30, 2, rngs=nnx.Rngs(1))
        trainer = make_private(model, optax.sgd(1.0), cancer.x_train, cancer.y_train, target_epsilon=eps, delta=1e-5,
                               batch_size=64, epochs=2, max_grad_norm=clip, seed=int(eps))
        return trainer, trainer.run()

    (first, eps1), lowered = _lowered_by(lambda: run(2.0, 1.0))
    assert lowered >= 1 and eps1 <= 2.0
    (second, eps2), lowered = _lowered_by(lambda: run(6.0, 0.5))
    assert second.noise_multiplier < first.noise_multiplier and eps2 <= 6.0
    assert lowered == 0, f"{lowered} programs lowered by the second make_private run"


def test_a_second_federated_run_with_other_privacy_numbers_compiles_nothing(cancer):
    """rPDP-FL (σ, clip norm, budgets, learning rate), GSPA (budgets, clip), APES (budgets, clip) and UDP-FL
    (budgets, clip, sampling rate) each run
    twice on one model shape with other privacy numbers: the second run lowers no round program."""
    part = partition.iid(cancer.y_train, 4, seed=0)
    mlp = lambda: dpsgd.MLP(30, (6,), 2, rngs=nnx.Rngs(0))  # noqa: E731

    budgets = scenario("ThreeLevels", cancer.n_train, seed=0)

    def rpdp_run(sigma, clip, budgets, lr):
        cfg = rpdp.RPDPConfig(rounds=2, local_steps=2, client_rate=1.0, sigma=sigma, clip_norm=clip, delta=1e-3,
                              learning_rate=lr)
        return rpdp.train(mlp(), cancer.x_train, cancer.y_train, part, budgets, cfg)

    _, lowered = _lowered_by(lambda: rpdp_run(1.0, 1.0, budgets, 0.5))
    assert lowered >= 1
    before = simulator.ROUND_PROGRAMS.builds
    _, lowered = _lowered_by(lambda: rpdp_run(2.0, 0.4, 2.0 * budgets, 0.2))
    assert simulator.ROUND_PROGRAMS.builds == before
    assert lowered == 0, f"{lowered} programs lowered by the second rPDP-FL run"

    clients = partition.stack(cancer.x_train, cancer.y_train, part)

    def gspa_run(eps, clip):
        model = mlp()
        local, agg, sig = gspa.build(model, dpsgd.cross_entropy_loss, eps, 1e-5, clip=clip, learning_rate=0.1,
                                     batch_size=int(np.asarray(clients.mask).shape[1]))
        return simulator.run(model, local, clients, rounds=2, aggregator=agg, client_state=sig, progress=False)

    _, lowered = _lowered_by(lambda: gspa_run(np.array([0.5, 1.0, 0.25, 0.8]), 1.0))
    assert lowered >= 1
    _, lowered = _lowered_by(lambda: gspa_run(np.array([0.2, 0.3, 0.9, 1.0]), 0.25))
    assert lowered == 0, f"{lowered} programs lowered by the second GSPA run"

    def apes_run(eps, clip):
        return apes.train("apes", cancer, eps, rounds=2, clip=clip)

    _, lowered = _lowered_by(lambda: apes_run(np.array([0.5, 1.0, 2.0, 4.0]), 0.05))
    assert lowered >= 1
    _, lowered = _lowered_by(lambda: apes_run(np.array([1.5, 0.7, 3.0, 2.0]), 0.02))
    assert lowered == 0, f"{lowered} programs lowered by the second APES run"

    def udpfl_run(eps, clip, q):
        model = mlp()
        cfg = udpfl.build(model, dpsgd.cross_entropy_loss, ["gaussian", "laplace", "gaussian", "laplace"], eps, 1e-5,
                          clip=clip, learning_rate=0.3, local_steps=2, q=q, rounds=2)
        return simulator.run(model, cfg.local_update, clients, rounds=2, aggregator=cfg.aggregator,
                             client_state=cfg.client_state, progress=False)

    _, lowered = _lowered_by(lambda: udpfl_run(np.array([1.0, 2.0, 4.0, 8.0]), 1.0, 0.2))
    assert lowered >= 1
    _, lowered = _lowered_by(lambda: udpfl_run(np.array([3.0, 0.5, 2.0, 6.0]), 0.3, 0.3))
    assert lowered == 0, f"{lowered} programs lowered by the second UDP-FL run"
