"""UDP-FL as a federated system: per-client mechanism choice with Harmonizer-calibrated noise (seed 002;
SPEC §4.2, §5, §6).

Feng et al., "UDP-FL" (seed 002), Alg. 1: every round the selected clients run τ local DP-SGD steps from
the global model — Poisson-sample their records at rate q, clip each example's gradient, add their own
mechanism's noise, step — and send their models to the server. Client k picks a mechanism m_k ∈
{gaussian, laplace, staircase} and a budget (ε_k, δ); :func:`jaxpriv.mechanisms.harmonizer.harmonize`
calibrates its scale so that its T·τ subsampled steps meet the budget (:func:`scales`).

Sensitivity per mechanism (stated, and what the accounting assumes):

* gaussian: examples clipped to L2 norm C; noise N(0, (σC)²) per coordinate; the Harmonizer's exact
  subsampled-Gaussian RDP at rate q over T·τ steps.
* laplace: examples clipped to **L1** norm C (``norm="l1"``); noise Lap(bC) per coordinate; the vertex
  argument of :mod:`jaxpriv.train.dpsgd` makes the 1-D curve the d-dimensional worst case, subsampled at q.
* staircase: per-coordinate staircase noise is *not* bounded by the 1-D curve under an L1 constraint
  (its RDP is concave in the shift, :func:`jaxpriv.mechanisms.staircase.rdp_shift`). Every example is
  clipped to L1 norm C and one step's d-coordinate mechanism is accounted with d·ρ(C/d)
  (:func:`jaxpriv.mechanisms.staircase.rdp_l1`, the exact worst case over the L1 ball), subsampled at q
  by the Zhu-Wang bound and composed over T·τ steps: ``harmonize(..., dimension=d)``. The staircase
  still pays for the dimension (d·ρ(C/d) → C·ρ'(0) as d grows).

Client sampling (rate λ) is ignored by the accounting (each record may take part in every round): the
safe side. Optional shuffler accounting (:func:`shuffle_epsilon`): if every client's round report is
ε₀-LDP, Girgis et al.'s Theorem 1 RDP (:func:`jaxpriv.shuffle.girgis_rdp`) of n shuffled reports, T-fold,
converted by :func:`jaxpriv.rdp.to_epsilon`. Optional mode connectivity (:func:`polygonal_chain`,
:func:`fit_chain`, :func:`mode_connect`): the server joins client models pairwise by the polygonal chain
φ_θ(p) (SPEC §6), θ trained on E_{p~U(0,1)} of a loss on server-side (public) data; post-processing, no
budget spent.
"""

from __future__ import annotations

import os

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from .. import rdp
from .._numerics import check_array
from ..mechanisms._common import round_to
from ..mechanisms import gaussian, harmonizer, laplace, staircase
from ..shuffle import bounds
from ..train.clipping import split_clipped_grad_sum
from .partition import ClientData
from .simulator import LocalResult

__all__ = ["MECHANISMS", "scales", "local_update", "shuffle_epsilon", "polygonal_chain", "fit_chain",
           "mode_connect", "reproduce"]

MECHANISMS = harmonizer.MECHANISMS
_CODE = {m: i for i, m in enumerate(MECHANISMS)}


def _num_params(params) -> int:
    return int(sum(np.size(v) for v in jax.tree.leaves(params)))


def scales(mechanisms, epsilon, delta, q, steps: int, dim: int, orders=None):
    """Each client's calibrated scale for T·τ = ``steps`` local steps (Harmonizer; seed 002 §3.3, Alg. 3).

    gaussian / laplace: ``harmonize(m, ε, δ, q, steps)`` (σ, resp. b per unit sensitivity); staircase:
    ``harmonize("staircase", ε, δ, q, steps, dimension=dim)`` — the per-coordinate ε₀, accounted with the
    d-coordinate curve d·ρ(C/d) under the L1 clip (:func:`jaxpriv.mechanisms.staircase.rdp_l1`: the 1-D
    curve is not a bound because the shifted staircase RDP is concave).

    Args:
      mechanisms: one name per client (see :data:`MECHANISMS`). epsilon: ε_k > 0 per client (or shared).
      delta: δ ∈ (0, 1). q: record sampling rate in (0, 1]. steps: T·τ ≥ 1. dim: number of model
      parameters d ≥ 1. orders: Rényi orders (default of :mod:`jaxpriv.rdp`).

    Returns:
      ``(scale, achieved ε)`` float64 arrays, one per client.

    Example:
      >>> s, e = scales(["gaussian", "laplace"], 2.0, 1e-5, 0.1, 100, 50)
      >>> bool((e <= 2.0).all()), bool(s[0] > 0 and s[1] > 0)
      (True, True)
    """
    names = np.asarray(mechanisms, dtype=object).reshape(-1)
    for name in names:
        if name not in MECHANISMS:
            raise ValueError(f"mechanisms must each be one of {MECHANISMS}, got {name!r}")
    steps = int(check_array("steps", steps, 1.0, np.inf, integer=True))
    dim = int(check_array("dim", dim, 1.0, np.inf, integer=True))
    eps = np.broadcast_to(np.asarray(check_array("epsilon", epsilon, 0.0, np.inf, lo_open=True), np.float64),
                          names.shape)
    q = float(check_array("q", q, 0.0, 1.0, lo_open=True))
    return harmonizer.harmonize(names, eps, delta, q, steps, orders, dimension=dim)


def local_update(loss_fn, graphdef, clip, learning_rate, local_steps, q, *, rest=None):
    """UDP-FL's client update (seed 002 Alg. 1 lines 7-14) as a :class:`~jaxpriv.federated.simulator.LocalUpdate`.

    ``client_state`` = ``{"mechanism": int32 index into MECHANISMS, "scale": float32}``. Each of the τ
    steps Poisson-samples the client's records at rate q, clips (L2 for gaussian, L1 otherwise, to C),
    adds the client's noise (N(0,(σC)²), Lap(bC) or staircase(ε₀, Δ = C)) to the sum and divides by the
    expected batch q·n_k (never the realised one); the update is w_τ − w_global.

    Args:
      loss_fn, graphdef, rest: as :func:`jaxpriv.federated.simulator.fedavg_local_sgd`.
      clip: C > 0. learning_rate: η > 0. local_steps: τ ≥ 1. q: rate in (0, 1].

    Returns:
      the LocalUpdate; metrics ``{"loss"}``.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> from jaxpriv.train.dpsgd import cross_entropy_loss
      >>> model = nnx.Linear(4, 3, rngs=nnx.Rngs(0))
      >>> graphdef, params, rest = nnx.split(model, nnx.Param, ...)
      >>> step = local_update(cross_entropy_loss, graphdef, 1.0, 0.1, 2, 0.5, rest=rest)
      >>> data = ClientData(jnp.ones((8, 4)), jnp.zeros(8, jnp.int32), jnp.ones(8, bool), jnp.int32(8))
      >>> state = {"mechanism": jnp.int32(1), "scale": jnp.float32(1.0)}
      >>> res = step(params, state, data, jax.random.key(0))
      >>> res.update["kernel"].shape
      (4, 3)
    """
    clip = float(check_array("clip", clip, 0.0, np.inf, lo_open=True))
    lr = float(check_array("learning_rate", learning_rate, 0.0, np.inf, lo_open=True))
    tau = int(check_array("local_steps", local_steps, 1.0, np.inf, integer=True))
    q = float(check_array("q", q, 0.0, 1.0, lo_open=True))

    def noise(key, mech, scale, shape, dtype):
        kg, kl, ks = jax.random.split(key, 3)
        g = gaussian.sample(kg, 1.0, shape, dtype) * scale * clip
        lap = laplace.sample(kl, 1.0, shape, dtype) * scale * clip
        # staircase needs ε₀ > 0 to sample; a masked-out slot may carry 0
        st = staircase.sample(ks, jnp.maximum(scale, 1e-6), shape=shape, sensitivity=clip, dtype=dtype)
        return jnp.where(mech == 0, g, jnp.where(mech == 1, lap, st))

    def update(global_params, state, data: ClientData, key):
        mech, scale = state["mechanism"], state["scale"]
        expected = jnp.maximum(q * data.size.astype(jnp.float32), 1e-6)

        def step(p, t):
            sample_key, noise_key = jax.random.split(jax.random.fold_in(key, t))
            batch = data.mask & (jax.random.uniform(sample_key, data.mask.shape) < q)
            l2 = split_clipped_grad_sum(loss_fn, graphdef, p, rest, data.x, data.y, clip_norm=clip, mask=batch,
                                        method="vmap")
            l1 = split_clipped_grad_sum(loss_fn, graphdef, p, rest, data.x, data.y, clip_norm=clip, mask=batch,
                                        method="vmap", norm="l1")
            grads = jax.tree.map(lambda a, b: jnp.where(mech == 0, a, b), l2.grads, l1.grads)
            leaves, treedef = jax.tree.flatten(grads)
            keys = jax.random.split(noise_key, len(leaves))
            noisy = [g + noise(k, mech, scale, g.shape, g.dtype) for k, g in zip(keys, leaves)]
            new = jax.tree.map(lambda w, g: w - lr * g / expected, p, jax.tree.unflatten(treedef, noisy))
            return new, l2.loss

        final, losses = jax.lax.scan(step, global_params, jnp.arange(tau))
        return LocalResult(jax.tree.map(jnp.subtract, final, global_params), state, {"loss": jnp.mean(losses)})

    return update


def client_state(mechanisms, scale):
    """The ``client_state`` pytree of :func:`local_update` from mechanism names and calibrated scales.

    Example:
      >>> client_state(["gaussian", "staircase"], [1.5, 0.01])["mechanism"].tolist()
      [0, 2]
    """
    names = np.asarray(mechanisms, dtype=object).reshape(-1)
    for name in names:
        if name not in MECHANISMS:
            raise ValueError(f"mechanisms must each be one of {MECHANISMS}, got {name!r}")
    exact = np.asarray(check_array("scale", scale, 0.0, np.inf, lo_open=True), np.float64).reshape(-1)
    if exact.shape != names.shape:
        raise ValueError(f"scale must have one entry per client ({names.size}), got {exact.shape}")
    # float32 on the safe side: σ and b rounded up, the staircase's per-step ε₀ rounded down
    stair = names == "staircase"
    scale = np.where(stair, round_to(exact, np.float32, up=False), round_to(exact, np.float32))
    return {"mechanism": np.array([_CODE[n] for n in names], np.int32), "scale": scale}


def shuffle_epsilon(eps0, n, rounds, delta, orders=tuple(range(2, 65))):
    """ε after T rounds of n shuffled ε₀-LDP client reports: T × Girgis et al. Theorem 1 RDP, converted.

    Source: Girgis et al., CCS 2021, Thm 1 (:func:`jaxpriv.shuffle.girgis_rdp`, conservative constants,
    SPEC §1.6), RDP composition over rounds, :func:`jaxpriv.rdp.to_epsilon` (SPEC §1.8); UDP-FL (seed 002)
    §4.4.1. Valid only when each round's report is ε₀-LDP (pure) over the client's whole data.

    Args:
      eps0: ε₀ > 0. n: clients per round ≥ 2. rounds: T ≥ 1. delta: δ ∈ (0, 1). orders: integer α ≥ 2.

    Returns:
      float ε.

    Example:
      >>> bool(shuffle_epsilon(1.0, 10_000, 10, 1e-6) < 10 * 1.0)
      True
    """
    rounds = int(check_array("rounds", rounds, 1.0, np.inf, integer=True))
    rho = np.asarray(bounds.girgis_rdp(eps0, n, orders), np.float64) * rounds
    return float(rdp.to_epsilon(rho, np.asarray(orders, np.float64), delta)[0])  # (ε, best order)


# --------------------------------------------------------------------------------------------------
# mode connectivity (SPEC §6)
# --------------------------------------------------------------------------------------------------


def polygonal_chain(w1, w2, theta, p):
    """φ_θ(p) = 2(pθ + (½−p)w₁) for p ≤ ½, 2((p−½)w₂ + (1−p)θ) for p > ½ (SPEC §6; seed 002 Eq. 3).

    φ(0) = w₁, φ(½) = θ, φ(1) = w₂; pytrees of the same structure, p a scalar (traceable).

    Example:
      >>> import jax.numpy as jnp
      >>> [float(polygonal_chain(jnp.float32(0), jnp.float32(4), jnp.float32(1), p)) for p in (0, .25, .5, 1)]
      [0.0, 0.5, 1.0, 4.0]
    """
    p = jnp.asarray(p, jnp.float32)

    def leaf(a, b, t):
        return jnp.where(p <= 0.5, 2.0 * (p * t + (0.5 - p) * a), 2.0 * ((p - 0.5) * b + (1.0 - p) * t))

    return jax.tree.map(leaf, w1, w2, theta)


def fit_chain(loss, w1, w2, *, steps: int = 50, learning_rate: float = 0.1, seed: int = 0):
    """The bend θ minimising E_{p~U(0,1)} loss(φ_θ(p)) by SGD (seed 002 Alg. 2; SPEC §6).

    θ starts at the midpoint (w₁ + w₂)/2; each step draws p̂ ~ U(0, 1) and follows ∇_θ loss(φ_θ(p̂)).

    Args:
      loss: ``params → scalar`` (e.g. cross-entropy on server-side public data). w1, w2: end points.
      steps: ≥ 1. learning_rate: > 0. seed: integer ≥ 0.

    Returns:
      θ (a pytree like ``w1``).

    Example:
      >>> import jax.numpy as jnp
      >>> th = fit_chain(lambda w: jnp.sum((w - 1.0) ** 2), jnp.float32(0), jnp.float32(4), steps=200)
      >>> bool(abs(float(th) - 0.5) < 0.5)  # the bend is pulled toward the minimiser 1 from the midpoint 2
      True
    """
    steps = int(check_array("steps", steps, 1.0, np.inf, integer=True))
    lr = float(check_array("learning_rate", learning_rate, 0.0, np.inf, lo_open=True))
    seed = int(check_array("seed", seed, 0.0, np.inf, integer=True))
    grad = jax.grad(lambda th, p: loss(polygonal_chain(w1, w2, th, p)))

    @jax.jit
    def run(theta):
        def body(th, k):
            g = grad(th, jax.random.uniform(k))
            return jax.tree.map(lambda a, b: a - lr * b, th, g), None

        return jax.lax.scan(body, theta, jax.random.split(jax.random.key(seed), steps))[0]

    return run(jax.tree.map(lambda a, b: 0.5 * (a + b), w1, w2))


def mode_connect(loss, models, *, steps: int = 50, learning_rate: float = 0.1, seed: int = 0):
    """Seed 002 Alg. 1 lines 19-: join the models pairwise by fitted chains until one is left.

    Each pair (w_i, w_j) is replaced by its chain's bend θ_ij = φ_θ(½) (:func:`fit_chain`); an odd model
    out passes to the next level.

    Args:
      loss: ``params → scalar``. models: a non-empty list of parameter pytrees. Others as :func:`fit_chain`.

    Returns:
      the merged parameters.

    Example:
      >>> import jax.numpy as jnp
      >>> float(mode_connect(lambda w: jnp.sum(w ** 2), [jnp.float32(1.0)]))
      1.0
    """
    models = list(models)
    if not models:
        raise ValueError("models must hold at least one parameter pytree")
    level = 0
    while len(models) > 1:
        pairs = [fit_chain(loss, models[i], models[i + 1], steps=steps, learning_rate=learning_rate,
                           seed=seed + 1000 * level + i) for i in range(0, len(models) - 1, 2)]
        models = pairs + ([models[-1]] if len(models) % 2 else [])
        level += 1
    return models[0]


# --------------------------------------------------------------------------------------------------
# reproduce
# --------------------------------------------------------------------------------------------------


def reproduce(quick: bool = True, out_dir: str = ".", seeds=(0, 1, 2)) -> dict:
    """Accuracy per mechanism at equal (ε, δ) on digits, with the Harmonizer's scales (seed 002 §5).

    Every client uses the same mechanism in a run (one run per mechanism, plus non-private FedAvg-DP-free
    training with the same local loop and zero noise).

    Returns:
      dict with ``title, paper, ours, why_different, figures, table_markdown``.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ..train import data, dpsgd
    from . import partition, simulator

    os.makedirs(out_dir, exist_ok=True)
    seeds = list(seeds)[:1] if quick else list(seeds)
    d = data.load("digits", seed=0)
    n_clients, rounds, tau, q = 10, (8 if quick else 30), 2, 0.1
    eps, delta, clip, lr = 4.0, 1e-5, 1.0, 0.5
    model0 = dpsgd.MLP(64, (16,), 10, rngs=nnx.Rngs(0))
    dim = _num_params(nnx.state(model0, nnx.Param))
    results, table = {}, []
    for mech in MECHANISMS:
        s, achieved = scales([mech] * n_clients, eps, delta, q, rounds * tau, dim)
        table.append((mech, float(s[0]), float(achieved[0])))
        accs = []
        for seed in seeds:
            clients = partition.stack(d.x_train, d.y_train, partition.iid(d.y_train, n_clients, seed=seed))
            model = dpsgd.MLP(64, (16,), 10, rngs=nnx.Rngs(seed))
            graphdef, _, rest = nnx.split(model, nnx.Param, ...)
            local = local_update(dpsgd.cross_entropy_loss, graphdef, clip, lr, tau, q, rest=rest)
            res = simulator.run(model, local, clients, rounds=rounds, client_state=client_state([mech] * n_clients, s),
                                test_data=d, seed=seed, progress=False)
            accs.append(res.test_accuracy)
        results[mech] = accs
    fig, ax = plt.subplots(figsize=(5, 3.5))
    ax.bar(list(results), [np.mean(v) for v in results.values()])
    ax.set(ylabel="test accuracy", title=f"digits, ε = {eps}, δ = {delta}, T = {rounds}")
    fig.tight_layout()
    path = os.path.join(out_dir, "udpfl_mechanisms.png")
    fig.savefig(path, dpi=100)
    plt.close(fig)
    md = ["| mechanism | calibrated scale | ε achieved | accuracy |", "|---|---|---|---|"]
    md += [f"| {m} | {s:.4g} | {e:.4f} | {np.mean(results[m]):.3f} |" for m, s, e in table]
    md.append(f"\nscale: σ (gaussian), b (laplace) per unit sensitivity; per-coordinate ε₀ (staircase, accounted "
              f"over its d = {dim} coordinates as d·ρ(C/d), subsampled at q, {rounds * tau} steps). "
              f"{n_clients} clients, q = {q}, τ = {tau}.")
    return {
        "title": "UDP-FL (seed 002): per-client mechanisms with Harmonizer-calibrated noise",
        "paper": "staircase-based UDP-FL beats Gaussian DP-SGD at equal (ε, δ) (seed 002 §5)",
        "ours": {"scales": table, "accuracy": results},
        "why_different": "Under a sound accounting the per-coordinate staircase pays for the dimension d (its "
                         "RDP under an L1 constraint is not the 1-D curve), and Laplace needs L1 clipping; the "
                         "paper's staircase 'RDP' (Table 3) is not a Rényi divergence. Digits replaces MNIST.",
        "figures": [path],
        "table_markdown": "\n".join(md),
    }
