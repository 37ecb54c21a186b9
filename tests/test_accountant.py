"""Event ledger, the DP-SGD sweep kernel, chunking and multi-device sharding."""

import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from cli_helpers import host_devices_env
import jaxpriv
from jaxpriv import rdp
from jaxpriv.accounting.ledger import Accountant, Composed, Gaussian, Laplace, PoissonSampled, SelfComposed, Staircase
from jaxpriv.mechanisms import staircase

dp_accounting = pytest.importorskip("dp_accounting")


def test_ledger_equals_the_direct_curve():
    acc = Accountant().compose(PoissonSampled(0.01, Gaussian(1.1)), count=10_000)
    direct = float(jaxpriv.dpsgd_epsilon(0.01, 1.1, 10_000, 1e-5))
    assert acc.epsilon(1e-5) == pytest.approx(direct, rel=1e-12)
    assert acc.epsilon(1e-5) <= 5.632010670  # dp_accounting's value on its upper-bound curve
    assert acc.best_order(1e-5) == pytest.approx(4.7)


def test_dp_accounting_events_are_accepted():
    event = dp_accounting.SelfComposedDpEvent(
        dp_accounting.PoissonSampledDpEvent(0.01, dp_accounting.GaussianDpEvent(1.1)), 10_000
    )
    ours = Accountant().compose(event).epsilon(1e-5)
    assert ours == pytest.approx(float(jaxpriv.dpsgd_epsilon(0.01, 1.1, 10_000, 1e-5)), rel=1e-12)
    composed = dp_accounting.ComposedDpEvent([dp_accounting.LaplaceDpEvent(2.0), dp_accounting.NoOpDpEvent()])
    assert Accountant().compose(composed).epsilon(1e-5) == Accountant().compose(Laplace(2.0)).epsilon(1e-5)


def test_integer_orders_match_dp_accounting_for_a_heterogeneous_composition():
    orders = np.arange(2.0, 64.0)
    ours = Accountant(orders)
    theirs = dp_accounting.rdp.RdpAccountant(list(orders))
    for q, sigma, count in [(0.01, 1.1, 500), (0.05, 2.0, 100), (1.0, 5.0, 3)]:
        ours.compose(PoissonSampled(q, Gaussian(sigma)), count)
        theirs.compose(dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(sigma)), count)
    assert ours.epsilon(1e-6) == pytest.approx(theirs.get_epsilon(1e-6), rel=1e-10)
    assert ours.delta(1.0) == pytest.approx(theirs.get_delta(1.0), rel=1e-9)


def test_composed_and_self_composed_add_curves():
    a = Accountant().compose(Composed((Gaussian(2.0), Laplace(1.0))), count=3)
    b = Accountant().compose(SelfComposed(Gaussian(2.0), 3)).compose(SelfComposed(Laplace(1.0), 3))
    np.testing.assert_allclose(a.rdp, b.rdp, rtol=1e-14)
    assert a.delta(a.epsilon(1e-6)) <= 1e-6 * (1 + 1e-9)


@pytest.mark.parametrize(
    "event,count,match",
    [
        ("not an event", 1, "event"),
        (PoissonSampled(0.1, "not an event"), 1, "event"),
        (PoissonSampled(0.1, Laplace(-1.0)), 1, "b"),
        (PoissonSampled(-0.1, Laplace(1.0)), 1, "q"),
        (Staircase(0.0), 1, "epsilon"),
        (Staircase(1.0, 1.5), 1, "gamma"),
        (Gaussian(1.0), -1, "count"),
        (Gaussian(1.0), 1.5, "count"),
        (Gaussian(-1.0), 1, "sigma"),
        (Laplace(0.0), 1, "b"),
        (PoissonSampled(1.5, Gaussian(1.0)), 1, "q"),
    ],
)
def test_bad_events_raise(event, count, match):
    with pytest.raises(ValueError, match=match):
        Accountant().compose(event, count)


def test_poisson_sampled_laplace_and_staircase_use_the_general_bound():
    orders = np.array([1.5, 2.0, 3.0, 8.5, 32.0])
    acc = Accountant(orders).compose(PoissonSampled(0.05, Laplace(2.0)), count=100)
    want = 100 * np.asarray(rdp.subsampled(0.05, lambda a: rdp.laplace(2.0, a), orders))
    np.testing.assert_allclose(acc.rdp, want, rtol=1e-14)
    acc = Accountant(orders).compose(PoissonSampled(0.05, Staircase(0.5)), count=100)
    want = 100 * np.asarray(rdp.subsampled(0.05, lambda a: staircase.rdp(0.5, None, a), orders))
    np.testing.assert_allclose(acc.rdp, want, rtol=1e-14)
    # subsampling a composite event bounds the composite's curve; a Gaussian alone stays exact
    inner = Composed((Laplace(2.0), SelfComposed(Staircase(0.3, 0.2), 2)))
    acc = Accountant(orders).compose(PoissonSampled(0.1, inner))
    base = lambda a: rdp.laplace(2.0, a) + 2 * staircase.rdp(0.3, 0.2, a)
    np.testing.assert_allclose(acc.rdp, rdp.subsampled(0.1, base, orders), rtol=1e-14)
    exact = Accountant(orders).compose(PoissonSampled(0.1, Gaussian(1.0)))
    np.testing.assert_array_equal(exact.rdp, rdp.subsampled_gaussian(0.1, 1.0, orders))


def test_staircase_event_and_dp_accounting_poisson_laplace():
    orders = np.array([2.0, 4.0, 16.0])
    acc = Accountant(orders).compose(Staircase(1.0), count=3)
    np.testing.assert_allclose(acc.rdp, 3 * np.asarray(staircase.rdp(1.0, None, orders)), rtol=1e-15)
    event = dp_accounting.PoissonSampledDpEvent(0.05, dp_accounting.LaplaceDpEvent(2.0))
    ours = Accountant(orders).compose(event, count=10)
    mine = Accountant(orders).compose(PoissonSampled(0.05, Laplace(2.0)), count=10)
    np.testing.assert_array_equal(ours.rdp, mine.rdp)
    # dp_accounting's RDP accountant does not support Poisson-sampled Laplace at all
    assert not dp_accounting.rdp.RdpAccountant(list(orders)).supports(event)


def test_accountant_bad_orders_and_delta():
    with pytest.raises(ValueError, match="orders"):
        Accountant(orders=[1.0, 2.0])
    with pytest.raises(ValueError, match="delta"):
        Accountant().compose(Gaussian(1.0)).epsilon(0.0)
    with pytest.raises(ValueError, match="epsilon"):
        Accountant().compose(Gaussian(1.0)).delta(-1.0)


def test_dpsgd_epsilon_broadcasts_and_matches_scalar_calls():
    q = np.array([0.001, 0.01, 0.1])[:, None]
    sigma = np.array([0.8, 1.1, 2.0, 4.0])[None, :]
    grid = np.asarray(jaxpriv.dpsgd_epsilon(q, sigma, 1000, 1e-5))
    assert grid.shape == (3, 4)
    one = float(jaxpriv.dpsgd_epsilon(0.01, 2.0, 1000, 1e-5))
    assert grid[1, 2] == pytest.approx(one, rel=1e-13)
    assert np.all(np.diff(grid, axis=0) > 0) and np.all(np.diff(grid, axis=1) < 0)


def test_chunked_sweep_equals_unchunked_and_shows_progress(capsys):
    rng = np.random.default_rng(0)
    q, sigma = rng.uniform(1e-3, 0.1, 40), rng.uniform(0.6, 3.0, 40)
    whole = np.asarray(jaxpriv.dpsgd_epsilon(q, sigma, 1000, 1e-5))
    chunked = np.asarray(jaxpriv.dpsgd_epsilon(q, sigma, 1000, 1e-5, chunk_size=16, progress=True))
    np.testing.assert_array_equal(whole, chunked)
    assert "ε sweep" in capsys.readouterr().out


def test_dpsgd_epsilon_is_differentiable_inside_jit():
    f = jax.jit(jax.grad(lambda s: jaxpriv.dpsgd_epsilon(0.01, s, 1000.0, 1e-5)))
    with jax.enable_x64(True):
        g = float(f(jnp.float64(1.1)))
    h = 1e-6
    fd = (float(jaxpriv.dpsgd_epsilon(0.01, 1.1 + h, 1000, 1e-5)) - float(jaxpriv.dpsgd_epsilon(0.01, 1.1 - h, 1000, 1e-5))) / (2 * h)
    assert g < 0 and g == pytest.approx(fd, rel=1e-5)


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(q=-0.1, sigma=1.0, steps=10, delta=1e-5), "q"),
        (dict(q=0.1, sigma=0.0, steps=10, delta=1e-5), "sigma"),
        (dict(q=0.1, sigma=1.0, steps=-1, delta=1e-5), "steps"),
        (dict(q=0.1, sigma=1.0, steps=10, delta=1.0), "delta"),
        (dict(q=[0.1, 0.2], sigma=[1.0, 2.0, 3.0], steps=10, delta=1e-5), "shapes"),
        (dict(q=0.1, sigma=1.0, steps=10, delta=1e-5, orders=[]), "orders"),
        (dict(q=0.1, sigma=1.0, steps=10, delta=1e-5, orders=[[2.0, 3.0]]), "orders"),
    ],
)
def test_dpsgd_epsilon_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        jaxpriv.dpsgd_epsilon(**kwargs)


def test_sweep_is_sharded_over_four_cpu_devices():
    script = textwrap.dedent(
        """
        import jax, numpy as np, jaxpriv
        assert jax.device_count() == 4, jax.devices()
        q = np.linspace(0.001, 0.1, 37); s = np.linspace(0.7, 3.0, 37)
        eps = np.asarray(jaxpriv.dpsgd_epsilon(q, s, 1000, 1e-5, orders=[2.0, 3.5, 8.0, 32.0], chunk_size=16))
        print(repr(eps.tolist()))
        """
    )
    env = host_devices_env(4, JAX_PLATFORMS="cpu")
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    sharded = np.array(eval(out.stdout.strip().splitlines()[-1]))
    q = np.linspace(0.001, 0.1, 37)
    s = np.linspace(0.7, 3.0, 37)
    single = np.asarray(jaxpriv.dpsgd_epsilon(q, s, 1000, 1e-5, orders=[2.0, 3.5, 8.0, 32.0]))
    np.testing.assert_allclose(sharded, single, rtol=1e-13)


def test_refined_order_is_never_worse_and_consistent():
    q = np.array([1e-3, 0.01, 0.05, 0.3, 1.0])
    sigma = np.array([0.8, 1.1, 2.0, 5.0, 3.0])
    grid, _ = jaxpriv.dpsgd_epsilon(q, sigma, 1000, 1e-6, return_order=True)
    refined, order = jaxpriv.dpsgd_epsilon(q, sigma, 1000, 1e-6, return_order=True, refine=True)
    assert np.all(refined <= grid) and np.any(refined < grid)
    for i in range(q.size):
        # the refined value is the exact ε at the order it reports, and no nearby order beats it
        at_order = float(jaxpriv.dpsgd_epsilon(q[i], sigma[i], 1000, 1e-6, orders=[order[i]]))
        assert refined[i] == pytest.approx(at_order, rel=1e-12)
        for nearby in (order[i] - 0.01, order[i] + 0.01):
            assert float(jaxpriv.dpsgd_epsilon(q[i], sigma[i], 1000, 1e-6, orders=[nearby])) >= refined[i] * (1 - 1e-12)


def test_jit_with_x64_off_compiles_best_order_and_calibration():
    assert not jax.config.jax_enable_x64
    orders = [2.0, 3.0]
    eps, order = jax.jit(lambda s: rdp.to_epsilon(rdp.gaussian(s, orders) * 10, orders, 1e-5))(1.0)
    assert float(order) == 3.0 and np.isfinite(float(eps))
    sigma = jax.jit(lambda t: jaxpriv.calibrate.noise_multiplier(t, 0.01, 1e4, 1e-5))(1.0)
    assert float(sigma) == pytest.approx(4.1258, abs=2e-4)


def test_grad_with_x64_off_for_non_contiguous_fractional_orders():
    g = jax.grad(lambda s: jaxpriv.dpsgd_epsilon(0.01, s, 1e4, 1e-5, orders=[1.3, 2.1, 2.5]))(1.1)
    assert np.isfinite(float(g)) and float(g) < 0


def test_traced_invalid_input_gives_nan_not_a_number():
    with jax.enable_x64(True):
        delta, _ = jax.jit(lambda r: rdp.to_delta(r, [2.0, 3.0], 1.0))(jnp.array([jnp.nan, 5.0]))
        assert np.isnan(float(delta))
        for bad in (jnp.nan, -0.1, 1.5):
            assert np.isnan(float(jax.jit(lambda q: jaxpriv.dpsgd_epsilon(q, 1.1, 1e4, 1e-5))(bad)))
        assert np.isnan(float(jax.jit(lambda d: jaxpriv.dpsgd_epsilon(0.01, 1.1, 1e4, d))(1.5)))


def test_refine_with_unsorted_duplicated_orders():
    messy = jaxpriv.dpsgd_epsilon(0.01, 1.1, 1e4, 1e-5, orders=[32, 4.7, 2, 4.7, 8.5, 2.0], refine=True)
    clean = jaxpriv.dpsgd_epsilon(0.01, 1.1, 1e4, 1e-5, orders=[2, 4.7, 8.5, 32], refine=True)
    assert float(messy) == pytest.approx(float(clean), rel=1e-13) and float(messy) < 5.6319


def test_steps_without_nan_when_rho_underflows():
    assert float(jaxpriv.calibrate.steps(1.0, q=1e-300, sigma=1.0, delta=1e-200)) > 0
