"""GSPA as a federated system: shuffled SGD with personalized Gaussian noise (seed 003; SPEC §3.3, §6).

Chen, Cao, Ge, "A Generalized Shuffle Framework for Privacy Amplification" (GSPA, seed 003), Alg. 3 "SGD
with GSPA": n clients, client i holds m records and a budget (ε_i, δ_i). In every epoch the clients are
visited in a random order without replacement (a fresh permutation per epoch); client i computes the mean
of its m per-example gradients, each clipped to L2 norm C (:func:`jaxpriv.train.clipping.split_clipped_grad_sum`),
adds N(0, σ_i² I) with

    σ_i = (2C/m) √(2 log(1.25/δ_i)) / ε_i      (classical calibration, Dwork & Roth Thm A.1, ε_i ≤ 1)

(:func:`jaxpriv.mechanisms.gaussian.classical_sigma`, which raises for ε_i > 1; ``calibration="analytic"``
uses :func:`jaxpriv.mechanisms.gaussian.analytic_sigma`, valid for every ε_i), and the model steps by
−η(g̃_i + b_i). The paper clips the *mean* gradient to C, whose sensitivity is 2C, not 2C/m; clipping every
example to C makes the mean's sensitivity to replacing one record exactly 2C/m, so the σ_i above is
correct. ``unit="client"`` calibrates to Δ = 2C instead (any change of the client's whole data).

Two runners share one :func:`local_update`: :func:`shuffled_sgd` is Alg. 3 itself (sequential, each
client starts from the previous client's model), and :func:`build` gives the simulator configuration
(each round every client reports its perturbed step from the same global model, the shuffler permutes
the reports and the server adds them: the sum does not depend on the order, so the shuffle is implicit).

Accounting (:func:`accounting`): the paper's √T·μ (:func:`jaxpriv.shuffle.gspa_mu_composed`,
an approximation, not a bound) converted with :func:`jaxpriv.fdp.gdp_epsilon`, and the exact personalized
clone accountant (:func:`jaxpriv.shuffle.personalized_epsilon`, ``model="gspa"`` with the local δ_i) for
one epoch, composed over T epochs by the better of basic composition (ε₀ at δ/T per epoch: Tε₀, δ) and
advanced composition (Dwork, Rothblum, Vadhan 2010; Dwork & Roth 2014 Thm 3.20: ε₀ at δ/(2T) per epoch,
ε = ε₀√(2T log(2/δ)) + Tε₀(e^{ε₀} − 1), total δ/2 + δ/2). Both are valid (ε, δ) bounds for the
T-fold adaptive composition, so their minimum is too. Premise of both shuffle accountants: every
client's report is an (ε_i, δ_i)-LDP randomizer of its input; with ``unit="record"`` (the SPEC / paper
calibration) it is (ε_i, δ_i)-DP only with respect to one record of the client, so the shuffle numbers
are the paper's model, not a proven guarantee; with ``unit="client"`` the premise holds. The sequential
Alg. 3 is adaptive inside an epoch (client i sees the model after the earlier clients), which the
non-adaptive shuffle theorem does not cover either; the parallel configuration (:func:`build`) is the
one the shuffle model describes.
"""

from __future__ import annotations

import math
import os
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from .. import fdp
from .._numerics import check_array, float64
from ..mechanisms import gaussian
from ..shuffle import bounds, personalized
from ..train.clipping import split_clipped_grad_sum
from .partition import ClientData
from .simulator import Aggregator, LocalResult, mean_aggregator

__all__ = ["CALIBRATIONS", "UNITS", "client_sigmas", "local_update", "shuffle_aggregator", "build",
           "shuffled_sgd", "ShuffledResult", "Accounting", "accounting", "advanced_composition", "reproduce"]

CALIBRATIONS = ("classical", "analytic")
UNITS = ("record", "client")


def _check_clip_m(clip, batch_size):
    clip = float(check_array("clip", clip, 0.0, np.inf, lo_open=True))
    if isinstance(batch_size, bool):
        raise ValueError(f"batch_size must be an integer ≥ 1, got {batch_size!r}")
    m = int(check_array("batch_size", batch_size, 1.0, np.inf, integer=True))
    return clip, m


def client_sigmas(local_epsilons, local_deltas, clip, batch_size, calibration: str = "classical",
                  unit: str = "record"):
    """Per-client Gaussian noise std σ_i of GSPA's shuffled SGD (seed 003 Alg. 3 line 7; SPEC §6).

    σ_i = Δ √(2 log(1.25/δ_i)) / ε_i with Δ = 2C/m (``unit="record"``) or 2C (``unit="client"``),
    from :func:`jaxpriv.mechanisms.gaussian.classical_sigma` (ε_i ≤ 1, raises beyond) or the exact
    :func:`jaxpriv.mechanisms.gaussian.analytic_sigma` (``calibration="analytic"``, any ε_i > 0).

    Args:
      local_epsilons: ε_i > 0 per client (1-D).
      local_deltas: δ_i ∈ (0, 1), per client or one shared value.
      clip: per-example L2 clip norm C > 0.
      batch_size: m, the records per client (integer ≥ 1); the mean divides by m.
      calibration: ``"classical"`` or ``"analytic"``.
      unit: ``"record"`` or ``"client"`` (see the module docstring).

    Returns:
      float64 array of σ_i, the shape of ``local_epsilons``.

    Example:
      >>> round(float(client_sigmas([1.0], 1e-5, clip=1.0, batch_size=2)[0]), 6)  # Δ = 2C/m = 1
      4.844805
    """
    if calibration not in CALIBRATIONS:
        raise ValueError(f"calibration must be one of {CALIBRATIONS}, got {calibration!r}")
    if unit not in UNITS:
        raise ValueError(f"unit must be one of {UNITS}, got {unit!r}")
    clip, m = _check_clip_m(clip, batch_size)
    eps = np.asarray(check_array("local_epsilons", local_epsilons, 0.0, np.inf, lo_open=True), np.float64)
    if eps.ndim != 1:
        raise ValueError(f"local_epsilons must be 1-D (one per client), got shape {eps.shape}")
    sensitivity = 2.0 * clip / (m if unit == "record" else 1)
    calibrate = gaussian.classical_sigma if calibration == "classical" else gaussian.analytic_sigma
    return np.asarray(calibrate(eps, local_deltas, sensitivity), np.float64).reshape(eps.shape)


def local_update(loss_fn, graphdef, clip, learning_rate, batch_size, *, rest=None):
    """GSPA's client step as a :class:`~jaxpriv.federated.simulator.LocalUpdate` (seed 003 Alg. 3 lines 7-13).

    ``client_state`` is the client's σ_i (a scalar, kept unchanged). The update is
    −η (Σ_j clip_C(∇ℓ(w, x_j)) / m + N(0, σ_i² I)), the clipped sum over the client's real records
    divided by the fixed m (never by the realised count, so the sensitivity stays 2C/m).

    Args:
      loss_fn: per-example loss ``(model, x, y, key) → (B,)``.
      graphdef: the model's GraphDef (``nnx.split(model, nnx.Param, ...)``).
      clip: C > 0. learning_rate: η > 0. batch_size: m ≥ 1.
      rest: the non-Param state of the split (``None`` when empty).

    Returns:
      a LocalUpdate with metrics ``{"loss": mean loss of the client's records}``.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> from flax import nnx
      >>> from jaxpriv.train.dpsgd import cross_entropy_loss
      >>> model = nnx.Linear(4, 3, rngs=nnx.Rngs(0))
      >>> graphdef, params, rest = nnx.split(model, nnx.Param, ...)
      >>> step = local_update(cross_entropy_loss, graphdef, 1.0, 0.1, 8, rest=rest)
      >>> data = ClientData(jnp.ones((8, 4)), jnp.zeros(8, jnp.int32), jnp.ones(8, bool), jnp.int32(8))
      >>> res = step(params, jnp.float32(0.0), data, jax.random.key(0))  # σ = 0: the clipped mean step
      >>> bool(jnp.sqrt(sum(jnp.sum(v ** 2) for v in jax.tree.leaves(res.update))) <= 0.1 + 1e-6)
      True
    """
    clip, m = _check_clip_m(clip, batch_size)
    lr = float(check_array("learning_rate", learning_rate, 0.0, np.inf, lo_open=True))

    def update(global_params, sigma, data: ClientData, key):
        out = split_clipped_grad_sum(loss_fn, graphdef, global_params, rest, data.x, data.y, clip_norm=clip,
                                     mask=data.mask, method="vmap")
        leaves, treedef = jax.tree.flatten(out.grads)
        keys = jax.random.split(key, len(leaves))
        # unit normal times σ (σ may be a traced 0 for a noise-free baseline)
        noisy = [g / m + sigma * gaussian.sample(k, 1.0, g.shape, g.dtype) for k, g in zip(keys, leaves)]
        step = jax.tree.unflatten(treedef, [-lr * v for v in noisy])
        return LocalResult(step, sigma, {"loss": out.loss})

    return update


def shuffle_aggregator() -> Aggregator:
    """The shuffler + server of the parallel configuration: the sum of the participants' reports.

    The shuffler hands the server the multiset of reports in a uniformly random order; the server adds
    them (one epoch of Alg. 3 adds n/m steps), and a sum does not depend on the order, so no permutation
    is materialised (seed 003 Alg. 3; SPEC §6). It is :func:`~jaxpriv.federated.simulator.mean_aggregator`
    with the fixed denominator 1.

    Returns:
      :class:`~jaxpriv.federated.simulator.Aggregator`.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> agg = shuffle_aggregator()
      >>> c = lambda u: agg.contribute({"w": jnp.float32(u)}, ClientData(None, None, None, jnp.int32(5)))
      >>> float(agg.finalize(jax.tree.map(jnp.add, c(1.0), c(2.0)), jax.random.key(0))["w"])
      3.0
    """
    return mean_aggregator("uniform", denominator=1.0)


def build(model, loss_fn, local_epsilons, local_deltas, *, clip, learning_rate, batch_size,
          calibration: str = "classical", unit: str = "record"):
    """The simulator configuration of GSPA: ``(local_update, aggregator, client_state)`` for
    :func:`jaxpriv.federated.simulator.run` (``client_state`` = the float32 σ_i of :func:`client_sigmas`).

    Args: as :func:`client_sigmas` and :func:`local_update`; ``model`` is the Flax NNX model.

    Returns:
      ``(LocalUpdate, Aggregator, np.ndarray σ)``.

    Example:
      >>> from flax import nnx
      >>> from jaxpriv.train.dpsgd import cross_entropy_loss
      >>> local, agg, sig = build(nnx.Linear(4, 3, rngs=nnx.Rngs(0)), cross_entropy_loss, [0.5, 1.0], 1e-5,
      ...                         clip=1.0, learning_rate=0.1, batch_size=10)
      >>> [round(float(v), 3) for v in sig]
      [1.938, 0.969]
    """
    graphdef, _, rest = nnx.split(model, nnx.Param, ...)
    sig = client_sigmas(local_epsilons, local_deltas, clip, batch_size, calibration, unit)
    local = local_update(loss_fn, graphdef, clip, learning_rate, batch_size, rest=rest)
    return local, shuffle_aggregator(), sig.astype(np.float32)


class ShuffledResult(NamedTuple):
    """Outcome of :func:`shuffled_sgd`: final parameters, each epoch's client order and test accuracy."""

    params: Any
    orders: list
    accuracies: list


def shuffled_sgd(model, local, clients: ClientData, sigmas, *, epochs: int, seed: int = 0, test_data=None):
    """GSPA Alg. 3 itself: each epoch visits the clients in a fresh random order, sequentially.

    Epoch t draws a uniform permutation π_t of the clients (``jax.random.permutation`` of
    ``fold_in(key(seed), t)``); client π_t(i) applies ``local`` to the model left by π_t(i−1) with the
    key ``fold_in(fold_in(key(seed), t), π_t(i))``. ``model`` is updated in place at the end.

    Args:
      model: Flax NNX model. local: :func:`local_update`. clients: stacked ClientData (C clients).
      sigmas: (C,) noise std per client. epochs: T ≥ 1. seed: integer ≥ 0.
      test_data: Dataset or (x, y) for the test accuracy after every epoch, or None.

    Returns:
      :class:`ShuffledResult`.

    Example:
      >>> import numpy as np
      >>> from jaxpriv.federated import partition
      >>> from jaxpriv.train import data, dpsgd
      >>> d = data.load("digits", seed=0)
      >>> clients = partition.stack(d.x_train, d.y_train, partition.iid(d.y_train, 20, seed=0))
      >>> model = dpsgd.MLP(64, (32,), 10, rngs=nnx.Rngs(0))
      >>> local, _, sig = build(model, dpsgd.cross_entropy_loss, np.ones(20), 1e-5, clip=1.0,
      ...                       learning_rate=0.5, batch_size=72)
      >>> res = shuffled_sgd(model, local, clients, sig, epochs=3, test_data=d)
      >>> res.accuracies[-1] > 0.3, sorted(res.orders[0].tolist()) == list(range(20))
      (True, True)
    """
    from ..train.dpsgd import _make_evaluate, _padded_test_set
    from .simulator import _check_clients, _test_arrays

    c = _check_clients(clients)
    epochs = int(check_array("epochs", epochs, 1.0, np.inf, integer=True))
    seed = int(check_array("seed", seed, 0.0, np.inf, integer=True))
    sig = np.asarray(check_array("sigmas", sigmas, 0.0, np.inf), np.float32)
    if sig.shape != (c,):
        raise ValueError(f"sigmas must have shape ({c},) (one per client), got {sig.shape}")
    test = _test_arrays(test_data)
    graphdef, params, rest = nnx.split(model, nnx.Param, ...)
    stacked = jax.tree.map(jnp.asarray, clients)
    sig = jnp.asarray(sig)

    @jax.jit
    def epoch(params, key):
        order = jax.random.permutation(key, c)

        def visit(p, k):
            data = jax.tree.map(lambda a: a[k], stacked)
            res = local(p, sig[k], data, jax.random.fold_in(key, k))
            return jax.tree.map(lambda w, u: (w + u).astype(w.dtype), p, res.update), None

        return jax.lax.scan(visit, params, order)[0], order

    base = jax.random.key(seed)
    if test is not None:
        evaluate = _make_evaluate(graphdef, 512)
        test_arrays = _padded_test_set(test, 512)
    orders, accuracies = [], []
    for t in range(epochs):
        params, order = epoch(params, jax.random.fold_in(base, t))
        orders.append(np.asarray(order))
        if test is not None:
            accuracies.append(float(evaluate(params, rest, *test_arrays)[0]))
    nnx.update(model, params)
    return ShuffledResult(params, orders, accuracies)


# --------------------------------------------------------------------------------------------------
# accounting
# --------------------------------------------------------------------------------------------------


def advanced_composition(epsilon, delta_prime, rounds):
    """ε of the T-fold adaptive composition of (ε₀, δ₀)-DP mechanisms, at total δ = Tδ₀ + δ'.

    ε = ε₀ √(2T log(1/δ')) + T ε₀ (e^{ε₀} − 1)  (Dwork, Rothblum, Vadhan 2010; Dwork & Roth 2014, Thm 3.20).

    Args:
      epsilon: ε₀ ≥ 0 (array). delta_prime: δ' ∈ (0, 1). rounds: T ≥ 1 (integer).

    Returns:
      float64 array of ε (``inf`` where ε₀ is).

    Example:
      >>> round(float(advanced_composition(0.1, 1e-6, 100)), 4)
      6.3082
    """
    with float64():
        e = np.asarray(check_array("epsilon", epsilon, 0.0, np.inf, allow_inf=True), np.float64)
        dp = float(check_array("delta_prime", delta_prime, 0.0, 1.0, lo_open=True, hi_open=True))
        t = float(check_array("rounds", rounds, 1.0, np.inf, integer=True))
        with np.errstate(invalid="ignore", over="ignore"):
            out = e * math.sqrt(2.0 * t * math.log(1.0 / dp)) + t * e * np.expm1(e)
        return np.where(np.isinf(e), np.inf, out)


class Accounting(NamedTuple):
    """Result of :func:`accounting` (central guarantees after T epochs at total δ).

    Attributes:
      mu: the paper's per-epoch μ; mu_composed: √T·μ; epsilon_gdp: ε of √T·μ-GDP at δ (approximate).
      epsilon_basic: T·ε₀(δ/T) by the exact clone sum; epsilon_advanced: advanced composition of
      ε₀(δ/(2T)) at δ' = δ/2; epsilon_exact: the smaller of the two (a valid bound; per user when asked).
    """

    mu: float
    mu_composed: float
    epsilon_gdp: float
    epsilon_basic: Any
    epsilon_advanced: Any
    epsilon_exact: Any


def accounting(local_epsilons, local_deltas, rounds, delta, per_user: bool = False) -> Accounting:
    """GSPA's central privacy after T shuffled epochs: the paper's √T·μ and the exact clone accountant.

    Per epoch, the exact ε₀(δ₀) is :func:`jaxpriv.shuffle.personalized_epsilon` (``model="gspa"``, clone
    probabilities 2(1−δ_i)/(1+e^{ε_i}), SPEC §3.1); composed by basic composition at δ₀ = δ/T and by
    advanced composition at δ₀ = δ/(2T), δ' = δ/2 (:func:`advanced_composition`); the smaller is
    reported. ε₀ is ``inf`` when δ₀ ≤ the target's own δ_t: the exact route needs δ > T·max δ_i.
    The μ route is GSPA Thm 5 (seed 003): √T·μ (:func:`jaxpriv.shuffle.gspa_mu_composed`) → ε by
    :func:`jaxpriv.fdp.gdp_epsilon` (an approximation, SPEC §3.3).

    Args:
      local_epsilons: 1-D ε_i ≥ 0 (n ≥ 2). local_deltas: δ_i ∈ [0, 1), per client or shared.
      rounds: T ≥ 1 (integer). delta: total δ ∈ (0, 1). per_user: per-user ε (arrays) or the worst case.

    Returns:
      :class:`Accounting`.

    Example:
      >>> import numpy as np
      >>> acc = accounting(np.ones(1000), 0.0, rounds=10, delta=1e-6)
      >>> round(acc.mu_composed, 4), bool(acc.epsilon_exact < acc.epsilon_gdp)
      (0.2728, False)
    """
    eps = np.asarray(check_array("local_epsilons", local_epsilons, 0.0, np.inf), np.float64)
    if eps.ndim != 1 or eps.size < 2:
        raise ValueError(f"local_epsilons must be a 1-D array of at least 2 budgets, got shape {eps.shape}")
    deltas = np.broadcast_to(np.asarray(check_array("local_deltas", local_deltas, 0.0, 1.0, hi_open=True),
                                        np.float64), eps.shape)
    t = int(check_array("rounds", rounds, 1.0, np.inf, integer=True))
    delta = float(check_array("delta", delta, 0.0, 1.0, lo_open=True, hi_open=True))
    mu = float(bounds.gspa_mu(eps, deltas))
    mu_t = float(bounds.gspa_mu_composed(eps, t, deltas))
    eps_gdp = float(fdp.gdp_epsilon(mu_t, delta))
    one = lambda d0: np.asarray(personalized.personalized_epsilon(eps, d0, "gspa", deltas, per_user), np.float64)
    basic = t * one(delta / t)
    adv = advanced_composition(one(delta / (2 * t)), delta / 2, t)
    exact = np.minimum(basic, adv)
    if not per_user:
        basic, adv, exact = float(basic), float(adv), float(exact)
    return Accounting(mu, mu_t, eps_gdp, basic, adv, exact)


# --------------------------------------------------------------------------------------------------
# reproduce
# --------------------------------------------------------------------------------------------------


def _bounds_table(ns, eps0, delta):
    from ..shuffle import clones_epsilon

    rows = []
    for n in ns:
        mu = float(bounds.gspa_mu(np.full(n, eps0)))
        rows.append({
            "n": n,
            "gspa_mu_eps": float(fdp.gdp_epsilon(mu, delta)),
            "exact_clone": float(personalized.personalized_epsilon(np.full(n, eps0), delta, "gspa")),
            "fmt22_exact": float(clones_epsilon(eps0, n, delta, "fmt22")),
            "fmt22_closed": float(bounds.fmt22_closed_form(eps0, n, delta)),
            "erlingsson19": float(bounds.erlingsson19(eps0, n, delta)),
        })
    return rows


def reproduce(quick: bool = True, out_dir: str = ".", seeds=(0, 1, 2)) -> dict:
    """Regenerate GSPA's headline results: bound comparison over n, the E-APES Eq. 14 / TV figure and a
    small shuffled-SGD accuracy run on digits (personalized ε_i ~ U(0.5, 1), δ_i = 1e-6).

    Args:
      quick: fewer n values, epochs and seeds (well under a minute). out_dir: where the PNGs go.
      seeds: seeds of the accuracy runs.

    Returns:
      dict with ``title, paper, ours, why_different, figures, table_markdown``.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ..shuffle import multinomial
    from ..train import data, dpsgd
    from . import partition

    os.makedirs(out_dir, exist_ok=True)
    seeds = list(seeds)[:1] if quick else list(seeds)
    ns = [100, 1000, 10_000] if quick else [100, 300, 1000, 3000, 10_000, 100_000]
    table = _bounds_table(ns, 0.5, 1e-6)
    tv_ns = [100, 1000, 3000] if quick else [100, 300, 1000, 3000, 10_000]
    tv = []
    for n in tv_ns:
        p = multinomial.clone_probabilities(np.full(n - 1, 0.1), 1.0 / n)
        tv.append((n, float(multinomial.gspa_eq14(p)), float(multinomial.lattice_gaussian_tv(p))))

    fig, ax = plt.subplots(1, 2, figsize=(10, 4))
    for key, label in [("gspa_mu_eps", "GSPA μ-GDP (approx.)"), ("exact_clone", "exact strong clones"),
                       ("fmt22_exact", "FMT22 exact"), ("fmt22_closed", "FMT22 closed form"),
                       ("erlingsson19", "Erlingsson+19")]:
        ax[0].loglog(ns, [r[key] for r in table], marker="o", label=label)
    ax[0].set(xlabel="n", ylabel="central ε (δ=1e-6)", title="ε₀ = 0.5, one round")
    ax[0].legend(fontsize=7)
    ax[1].loglog([r[0] for r in tv], [r[1] for r in tv], marker="o", label="paper Eq. 14 (not a TV)")
    ax[1].loglog([r[0] for r in tv], [r[2] for r in tv], marker="s", label="true TV bound τ")
    ax[1].set(xlabel="n", title="ε₀ = 0.1, δ₀ = 1/n")
    ax[1].legend(fontsize=7)
    fig.tight_layout()
    fig_bounds = os.path.join(out_dir, "gspa_bounds.png")
    fig.savefig(fig_bounds, dpi=100)
    plt.close(fig)

    d = data.load("digits", seed=0)
    n_clients, epochs = 10, (8 if quick else 20)
    m = int(np.ceil(d.n_train / n_clients))
    rng = np.random.default_rng(0)
    local_eps = rng.uniform(0.5, 1.0, n_clients)
    acc = {"gspa": [], "non_private": []}
    for s in seeds:
        clients = partition.stack(d.x_train, d.y_train, partition.iid(d.y_train, n_clients, seed=s))
        for name, scale in (("gspa", 1.0), ("non_private", 0.0)):
            model = dpsgd.MLP(64, (16,), 10, rngs=nnx.Rngs(s))
            local, _, sig = build(model, dpsgd.cross_entropy_loss, local_eps, 1e-6, clip=1.0, learning_rate=0.5,
                                  batch_size=m)
            res = shuffled_sgd(model, local, clients, sig * scale, epochs=epochs, seed=s, test_data=d)
            acc[name].append(res.accuracies[-1])
    acct = accounting(local_eps, 1e-6, epochs, 1e-3)
    md = ["| n | GSPA μ→ε | exact clone | FMT22 exact | FMT22 closed | Erlingsson19 |", "|---|---|---|---|---|---|"]
    md += [f"| {r['n']} | {r['gspa_mu_eps']:.4f} | {r['exact_clone']:.4f} | {r['fmt22_exact']:.4f} | "
           f"{r['fmt22_closed']:.4f} | {r['erlingsson19']:.4f} |" for r in table]
    md += ["", "| n | Eq. 14 | TV bound |", "|---|---|---|"] + [f"| {n} | {a:.4f} | {b:.4f} |" for n, a, b in tv]
    md += ["", f"Shuffled SGD on digits ({n_clients} clients, m = {m}, {epochs} epochs, ε_i ~ U(0.5, 1), "
           f"δ_i = 1e-6): accuracy {np.mean(acc['gspa']):.3f} (non-private {np.mean(acc['non_private']):.3f}); "
           f"central ε at δ = 1e-3: √T·μ → {acct.epsilon_gdp:.3f} (approx.), exact clone + composition "
           f"{acct.epsilon_exact:.3f}."]
    return {
        "title": "GSPA (seed 003): shuffled personalized Gaussian SGD",
        "paper": "Eq. 14 quantity 0.0206 at ε₀ = 0.1, δ₀ = 1/n; Alg. 3 'approximately satisfies √T·μ-GDP'; "
                 "96.78% on MNIST after ~50 epochs",
        "ours": {"bounds": table, "eq14_tv": tv, "accuracy_gspa": acc["gspa"],
                 "accuracy_non_private": acc["non_private"], "epsilon_gdp": acct.epsilon_gdp,
                 "epsilon_exact": acct.epsilon_exact},
        "why_different": "The paper does not state n for 0.0206; Eq. 14 is a quarter-box sup, not a TV, and "
                         "our true TV bound is reported beside it. √T·μ drops a Berry–Esseen term (not a bound); "
                         "the exact clone sum with composition is a bound (and needs δ > T·max δ_i). Digits "
                         "(1437 records) replaces MNIST; per-example clipping makes σ_i's 2C/m sensitivity correct, "
                         "and the shuffle accountants assume each report is LDP (record-level calibration is the paper's model).",
        "figures": [fig_bounds],
        "table_markdown": "\n".join(md),
    }
