"""DP-SGD throughput: jaxpriv's DP step vs the non-private JAX step, jax_privacy and Opacus, in one process.

    python bench/dpsgd_throughput.py [--quick] [--model cnn|transformer] [--json OUT]

Every contender trains the same MNIST-shaped CNN (the Opacus / TF-Privacy tutorial model: conv 8×8/2
16 → max-pool 2/1 → conv 4×4/2 32 → max-pool 2/1 → dense 32 → dense 10, ReLU, 26,010 parameters; the
JAX side max-pools by four shifted views, see ``max_pool_2x2``, or with ``--pool standard`` by
``nnx.max_pool``) on the
same synthetic data (28×28×1 standard normal images, uniform labels over 10 classes), batch 256, one
SGD step per iteration (learning rate 0.1). ``--model transformer`` trains jaxpriv's tiny
``Transformer`` instead (the image's 28 rows as tokens, width 32, 4 heads, 2 blocks; the anchors are
skipped: their models are the CNN). The DP variants clip each example's gradient to C = 1 and
add Gaussian noise N(0, σ²C²), σ = 1, to the clipped sum, divided by the batch size:

* **jaxpriv DP** — ``jaxpriv.train.clipping.split_clipped_grad_sum`` (``method="auto"``, and the
  ``"ghost"`` and ``"vmap"`` paths separately) + ``jaxpriv.train.noise.gaussian_noise`` + ``optax.sgd``,
  one ``jax.jit``-compiled step.
* **jaxpriv train() step** — the public trainer's step (``make_step``): a Poisson batch of expected size 256
  from the bench's 1024 images, padded to its bucket (a long run's: 256, 272, 304 or 336 rows), the batches drawn in blocks of steps
  as ``train()`` draws them (goal: ≤ 1.1× the bare DP step above). With
  ``--chunk N`` also the same step processing the batch in physical chunks of N examples (a loop that stops
  after the last chunk holding a sampled example: the logical-batch path, ``DPSGDConfig.microbatch_size``).
* **JAX non-private** — ``jax.grad`` of the mean loss + ``optax.sgd``, same model, one jitted step.
* **jax_privacy** (if importable) — ``jax_privacy.clipping.clipped_grad`` (vmap per-example gradients)
  + ``jax_privacy.noise_addition.gaussian_privatizer`` + ``optax.sgd``, one jitted step.
* **Opacus** (if importable) — ``PrivacyEngine.make_private`` (hooks, fixed batches) on the same model in
  PyTorch (CPU), ``forward / backward / optimizer.step``; and the plain PyTorch step for reference.

Timing: after a warm-up (compilation), each round times a block of steps of every contender in turn
(interleaved, so a change in machine load hits all of them alike); the reported step time is the median
over rounds. The working memory of the DP and non-private steps at batch 1024 is read from XLA's compiled
programs (temporary buffers). Goals (CPU, issue 15): memory ≤ 1.3× the non-private step's; the DP step ≤ 1.25× the non-private JAX step on the CNN (≤ 1.5× on the
transformer), ≥ 1.5× Opacus's throughput and ≥ jax_privacy's. Checks (exit status 1 if one fails): jaxpriv's clipped sum (noise off) equals the vmap
path, a Python loop over examples, jax_privacy's and Opacus's on the same weights.

The anchors are optional and live outside the main environment, e.g.

    python -m venv --system-site-packages /work/anchors-venv
    /work/anchors-venv/bin/pip install torch==2.13.0 opacus      # the CPU wheel
    /work/anchors-venv/bin/pip install --no-deps jax-privacy     # keeps jax/flax/optax as they are
    /work/anchors-venv/bin/python bench/dpsgd_throughput.py --quick --json out.json

In the main environment a missing anchor is skipped with the reason printed. The torch images are made
contiguous in NCHW (``torch_images``): with channels_last strides Opacus 1.6 returns wrong per-sample
gradients for the second convolution.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import sys
import time
import warnings

import numpy as np

# Benchmark the checkout this script lives in, not whatever `jaxpriv` happens to be installed.
_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if os.path.isfile(os.path.join(_ROOT, "jaxpriv", "__init__.py")):
    sys.path.insert(0, _ROOT)
import jaxpriv  # noqa: E402

import _common as common  # noqa: E402  (bench/ is the script's directory)
from _common import say, table  # noqa: E402

import flax  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import optax  # noqa: E402
from flax import nnx  # noqa: E402

from jaxpriv.train.clipping import split_clipped_grad_sum  # noqa: E402

# PyTorch warns on every Opacus backward that the first layer's input needs no gradient; Opacus warns about
# its non-secure RNG. Neither concerns the timing.
warnings.filterwarnings("ignore", message="Full backward hook is firing")
warnings.filterwarnings("ignore", module="opacus")

BATCH = 256
CLIP = 1.0
SIGMA = 1.0
LR = 0.1
CLASSES = 10
IMAGE = (28, 28, 1)
MEMORY_BATCH = 1024


# --------------------------------------------------------------------------------------------------
# the model, the data, the loss
# --------------------------------------------------------------------------------------------------


def max_pool_2x2(x):
    """Max-pool with a 2×2 window and stride 1 (torch's MaxPool2d(2, 1)) as the maximum of four shifted
    views. The same function as ``nnx.max_pool(x, (2, 2), strides=(1, 1))``, but its gradient is an
    elementwise select: XLA's CPU select-and-scatter (the gradient of reduce_window max) takes ~18 ms
    for the first pool at batch 256, more than half of the whole non-private step."""
    return jnp.maximum(jnp.maximum(x[:, :-1, :-1], x[:, 1:, :-1]), jnp.maximum(x[:, :-1, 1:], x[:, 1:, 1:]))


def standard_max_pool(x):
    """``nnx.max_pool`` with a 2×2 window and stride 1: what a user writes (``--pool standard``)."""
    return nnx.max_pool(x, (2, 2), strides=(1, 1))


class CNN(nnx.Module):
    """The Opacus / TF-Privacy MNIST tutorial CNN, channels last."""

    pool = staticmethod(max_pool_2x2)

    def __init__(self, rngs):
        self.conv1 = nnx.Conv(1, 16, (8, 8), strides=2, padding=3, rngs=rngs)
        self.conv2 = nnx.Conv(16, 32, (4, 4), strides=2, padding="VALID", rngs=rngs)
        self.fc1 = nnx.Linear(32 * 4 * 4, 32, rngs=rngs)
        self.fc2 = nnx.Linear(32, CLASSES, rngs=rngs)

    def __call__(self, x):
        x = self.pool(nnx.relu(self.conv1(x)))
        x = self.pool(nnx.relu(self.conv2(x)))
        x = x.reshape(x.shape[0], -1)
        return self.fc2(nnx.relu(self.fc1(x)))


def per_example_loss(model, x, y, key=None):
    logits = model(x)
    return optax.softmax_cross_entropy_with_integer_labels(logits, y)


def synthetic_batches(n_batches: int, seed: int):
    """MNIST-shaped data shared by every contender (NHWC here; the torch side transposes to NCHW)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n_batches, BATCH) + IMAGE, dtype=np.float32)
    y = rng.integers(0, CLASSES, size=(n_batches, BATCH)).astype(np.int32)
    return x, y


def gaussian_noise_transform(seed: int):
    """jaxpriv's Gaussian noise transformation: N(0, (σC)²) on the clipped sum, divided by the batch size.

    Returns (transformation, note): while ``jaxpriv.train.noise`` is not importable, a stand-in with the
    same arithmetic (one normal draw per parameter, a key split per step) and a note saying so.
    """
    try:
        from jaxpriv.train.noise import gaussian_noise
    except ImportError as err:
        note = f"jaxpriv.train.noise not importable ({err}): the jaxpriv DP step uses a stand-in Gaussian noise"

        def init(params):
            return jax.random.key(seed)

        def update(updates, key, params=None):
            key, sub = jax.random.split(key)
            leaves, tree = jax.tree.flatten(updates)
            keys = jax.random.split(sub, len(leaves))
            noisy = [(g + SIGMA * CLIP * jax.random.normal(k, g.shape, g.dtype)) / BATCH for g, k in zip(leaves, keys)]
            return jax.tree.unflatten(tree, noisy), key

        return optax.GradientTransformation(init, update), note
    return gaussian_noise(SIGMA * CLIP, seed=seed, normalize_by=float(BATCH)), None


# --------------------------------------------------------------------------------------------------
# the JAX contenders: (init_state, jitted step) pairs sharing the same initial parameters
# --------------------------------------------------------------------------------------------------


def jaxpriv_dp(graphdef, params, rest, method: str, seed: int):
    tx = optax.chain(gaussian_noise_transform(seed)[0], optax.sgd(LR))

    @jax.jit
    def step(state, x, y):
        params, opt_state = state
        out = split_clipped_grad_sum(per_example_loss, graphdef, params, rest, x, y, clip_norm=CLIP, method=method)
        updates, opt_state = tx.update(out.grads, opt_state, params)
        return (optax.apply_updates(params, updates), opt_state), out.loss

    return (params, tx.init(params)), step


def jax_nonprivate(graphdef, params, rest):
    tx = optax.sgd(LR)

    @jax.jit
    def step(state, x, y):
        params, opt_state = state
        loss_of = lambda p: jnp.mean(per_example_loss(nnx.merge(graphdef, p, rest), x, y))  # noqa: E731
        loss, grads = jax.value_and_grad(loss_of)(params)
        updates, opt_state = tx.update(grads, opt_state, params)
        return (optax.apply_updates(params, updates), opt_state), loss

    return (params, tx.init(params)), step


def import_jax_privacy():
    try:
        import jax_privacy  # noqa: F401
        from jax_privacy import clipping, noise_addition
    except Exception as err:  # noqa: BLE001 — any import failure means "skip this anchor"
        return None, f"{type(err).__name__}: {err}"
    return (clipping, noise_addition), None


def jax_privacy_clipped_sum(clipping, graphdef, rest):
    """jax_privacy's clipped gradient sum of the same loss (per-example vmap inside)."""

    def batch_loss(params, x, y):  # called by jax_privacy on a batch of one example
        return jnp.sum(per_example_loss(nnx.merge(graphdef, params, rest), x, y))

    return clipping.clipped_grad(batch_loss, l2_clip_norm=CLIP, batch_argnums=(1, 2), keep_batch_dim=True)


def jax_privacy_dp(modules, graphdef, params, rest, seed: int):
    clipping, noise_addition = modules
    grad_fn = jax_privacy_clipped_sum(clipping, graphdef, rest)
    privatizer = noise_addition.gaussian_privatizer(stddev=SIGMA * CLIP, prng_key=jax.random.key(seed))
    tx = optax.chain(optax.scale(1.0 / BATCH), optax.sgd(LR))

    @jax.jit
    def step(state, x, y):
        params, noise_state, opt_state = state
        noisy, noise_state = privatizer.update(grad_fn(params, x, y), noise_state)
        updates, opt_state = tx.update(noisy, opt_state, params)
        return (optax.apply_updates(params, updates), noise_state, opt_state), jnp.zeros(())

    return (params, privatizer.init(params), tx.init(params)), step


# --------------------------------------------------------------------------------------------------
# Opacus (PyTorch)
# --------------------------------------------------------------------------------------------------


def import_opacus():
    try:
        import torch
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import opacus
    except Exception as err:  # noqa: BLE001
        return None, f"{type(err).__name__}: {err}"
    return (torch, opacus), None


def torch_images(torch, x):
    """NHWC numpy images as an NCHW tensor with standard (contiguous_format) strides.

    Transposing (N, 28, 28, 1) gives strides that torch also reads as channels_last (the channel axis has
    size 1), and Opacus 1.6's convolution grad sampler then returns wrong per-sample gradients for the
    second convolution (up to ~90% off; found by the agreement check below). A clone in contiguous_format
    avoids it; the JAX side is unaffected.
    """
    return torch.from_numpy(x.transpose(0, 3, 1, 2)).clone(memory_format=torch.contiguous_format).to(torch_device(torch))


def torch_labels(torch, y):
    return torch.from_numpy(y.astype(np.int64)).to(torch_device(torch))


def torch_device(torch) -> str:
    """Where the torch contenders run: the GPU when this machine has one (as the JAX side does), else the CPU."""
    return "cuda" if torch.cuda.is_available() else "cpu"


def torch_model(torch, params):
    """The same CNN in PyTorch (NCHW), with the JAX model's weights."""
    nn = torch.nn
    model = nn.Sequential(
        nn.Conv2d(1, 16, 8, 2, padding=3), nn.ReLU(), nn.MaxPool2d(2, 1),
        nn.Conv2d(16, 32, 4, 2), nn.ReLU(), nn.MaxPool2d(2, 1),
        nn.Flatten(), nn.Linear(32 * 4 * 4, 32), nn.ReLU(), nn.Linear(32, CLASSES),
    )
    p = {k: np.array(v) for k, v in _flat(params).items()}  # writable copies
    # HWIO → OIHW; dense (in, out) → (out, in); fc1's input rows come in (h, w, c) order in NHWC and
    # (c, h, w) order after torch's NCHW flatten.
    fc1 = p["fc1/kernel"].reshape(4, 4, 32, 32).transpose(2, 0, 1, 3).reshape(512, 32)
    weights = [
        (model[0], p["conv1/kernel"].transpose(3, 2, 0, 1), p["conv1/bias"]),
        (model[3], p["conv2/kernel"].transpose(3, 2, 0, 1), p["conv2/bias"]),
        (model[7], fc1.T, p["fc1/bias"]),
        (model[9], p["fc2/kernel"].T, p["fc2/bias"]),
    ]
    with torch.no_grad():
        for layer, w, b in weights:
            layer.weight.copy_(torch.from_numpy(np.ascontiguousarray(w)))
            layer.bias.copy_(torch.from_numpy(np.ascontiguousarray(b)))
    return model.to(torch_device(torch)), weights


def _flat(state) -> dict:
    return {"/".join(map(str, path)): var.get_value() for path, var in nnx.to_flat_state(state)}


def opacus_step_fn(torch, opacus, params, xs, ys, sigma: float, lr: float, ghost: bool = False):
    """A make_private model/optimizer pair (fixed batch of 256, no Poisson sampling) and its step; with
    ``ghost``, Opacus's ghost clipping (``grad_sample_mode="ghost"``: its loss wrapper runs both backward
    passes), else its per-sample-gradient hooks."""
    model, _ = torch_model(torch, params)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(xs[0], ys[0]), batch_size=BATCH)
    criterion = torch.nn.CrossEntropyLoss()
    mode = dict(criterion=criterion, grad_sample_mode="ghost") if ghost else {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        engine = opacus.PrivacyEngine()
        wrapped = engine.make_private(module=model, optimizer=optimizer, data_loader=loader, noise_multiplier=sigma,
                                      max_grad_norm=CLIP, poisson_sampling=False, **mode)
    model, optimizer = wrapped[:2]
    if ghost:
        criterion = wrapped[2]
    return model, optimizer, _torch_sgd_step(torch, model, optimizer, criterion)


def _torch_sgd_step(torch, model, optimizer, loss_fn=None):
    """One optimizer step on a cross-entropy batch (Opacus' wrapped optimizer or plain SGD alike)."""
    loss_fn = loss_fn or torch.nn.CrossEntropyLoss()

    def step(x, y):
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        return loss

    return step


def torch_nonprivate_step_fn(torch, params):
    model, _ = torch_model(torch, params)
    return _torch_sgd_step(torch, model, torch.optim.SGD(model.parameters(), lr=LR))


# --------------------------------------------------------------------------------------------------
# agreement checks (noise off, one batch)
# --------------------------------------------------------------------------------------------------


def rel_diff(a: dict, b: dict) -> float:
    """max |a − b| / max |b| over all parameters."""
    num = max(float(np.max(np.abs(np.asarray(a[k]) - np.asarray(b[k])))) for k in b)
    den = max(float(np.max(np.abs(np.asarray(b[k])))) for k in b)
    return num / den


def loop_reference(graphdef, params, rest, x, y) -> dict:
    """Σ_i g_i min(1, C/‖g_i‖) by a Python loop over examples (float64 accumulation)."""
    grad_one = jax.jit(jax.grad(lambda p, xi, yi: per_example_loss(nnx.merge(graphdef, p, rest), xi, yi)[0]))
    total = None
    for i in range(x.shape[0]):
        g = {k: np.asarray(v, np.float64) for k, v in _flat(grad_one(params, x[i:i + 1], y[i:i + 1])).items()}
        norm = np.sqrt(sum(np.sum(v * v) for v in g.values()))
        scaled = {k: v * min(1.0, CLIP / norm) for k, v in g.items()}
        total = scaled if total is None else {k: total[k] + scaled[k] for k in total}
    return total


def agreement(graphdef, params, rest, x, y, jp_mods, op_mods) -> dict:
    sums = {}
    for method in ("auto", "ghost", "vmap"):
        fn = jax.jit(lambda p, x, y, m=method: split_clipped_grad_sum(per_example_loss, graphdef, p, rest, x, y,
                                                                    clip_norm=CLIP, method=m).grads)
        sums[method] = _flat(fn(params, x, y))
    out = {"ghost_vs_vmap": rel_diff(sums["ghost"], sums["vmap"]), "auto_vs_vmap": rel_diff(sums["auto"], sums["vmap"])}
    n_loop = 32
    loop = loop_reference(graphdef, params, rest, x[:n_loop], y[:n_loop])
    head = jax.jit(lambda p, x, y: split_clipped_grad_sum(per_example_loss, graphdef, p, rest, x, y, clip_norm=CLIP).grads)
    out[f"auto_vs_python_loop_{n_loop}_examples"] = rel_diff(_flat(head(params, x[:n_loop], y[:n_loop])), loop)
    if jp_mods is not None:
        jp_sum = jax.jit(jax_privacy_clipped_sum(jp_mods[0], graphdef, rest))(params, x, y)
        out["auto_vs_jax_privacy"] = rel_diff(sums["auto"], _flat(jp_sum))
    if op_mods is not None:
        torch, opacus = op_mods
        xs, ys = torch_images(torch, x), torch_labels(torch, y)
        model, optimizer, step = opacus_step_fn(torch, opacus, params, [xs], [ys], sigma=0.0, lr=0.0)
        step(xs, ys)  # noise 0, learning rate 0: p.grad is Opacus's clipped sum / batch size
        layers = [model._module[i] for i in (0, 3, 7, 9)]
        got = [(layer.weight.grad.cpu().numpy() * BATCH, layer.bias.grad.cpu().numpy() * BATCH) for layer in layers]
        _, weights = torch_model(torch, _unflat_like(params, sums["auto"]))  # our sum in torch's layout
        want = [(w, b) for _, w, b in weights]
        num = max(float(np.max(np.abs(g - w))) for pair_g, pair_w in zip(got, want) for g, w in zip(pair_g, pair_w))
        den = max(float(np.max(np.abs(w))) for pair in want for w in pair)
        out["auto_vs_opacus"] = num / den
    return out


def _unflat_like(params, flat: dict):
    return nnx.from_flat_state([(path, var.replace(jnp.asarray(flat["/".join(map(str, path))])))
                                for path, var in nnx.to_flat_state(params)])


# --------------------------------------------------------------------------------------------------
# timing
# --------------------------------------------------------------------------------------------------


class JaxContender:
    def __init__(self, name, state, step, xs, ys):
        self.name, self.state, self.step = name, state, step
        self.xs, self.ys = [jnp.asarray(v) for v in xs], [jnp.asarray(v) for v in ys]
        self.i = 0

    def run(self, n: int):
        for _ in range(n):
            self.state, loss = self.step(self.state, self.xs[self.i % len(self.xs)], self.ys[self.i % len(self.ys)])
            self.i += 1
        jax.block_until_ready((self.state, loss))


class TrainerContender:
    """The public trainer's step (:func:`jaxpriv.train.dpsgd.make_step`, as ``train()`` runs it): a Poisson batch
    of expected size 256 drawn by the trainer's sampler (:func:`jaxpriv.train.dpsgd.trainer_sampler`, in blocks
    of steps as ``train()`` draws them) from the bench's 1024 images, padded to its bucket, gathered on device,
    clipped, noised, applied."""

    def __init__(self, name, graphdef, params, rest, xs, ys, seed: int, chunk: int | None = None):
        from jaxpriv.train.dpsgd import make_step, sample_block_size, trainer_sampler

        self.name = name
        self.x = jnp.asarray(np.concatenate(xs))
        self.y = jnp.asarray(np.concatenate(ys))
        n = self.x.shape[0]
        # a long run's buckets
        self.sampler = trainer_sampler(np.full(n, BATCH / n), seed, steps=10_000)
        self.block, self.queue = sample_block_size(n), []
        self.tx = optax.chain(gaussian_noise_transform(seed)[0], optax.sgd(LR))
        self.step = make_step(graphdef, rest, self.tx, per_example_loss, chunk, CLIP)
        self.params, self.opt_state = params, self.tx.init(params)
        self.clip, self.key, self.t = jnp.full(n, CLIP), jax.random.key(seed), 0
        # compile every bucket a step needs in practice (those under the bound bucket; the bound one comes
        # once in 10³ steps), as a long train() run has: the timed steps measure steps, not compiles
        from jaxpriv.train.sampling import bucket_sizes

        bound = bucket_sizes(np.full(n, BATCH / n))[0]
        for size in (b for b in self.sampler.buckets if b < bound):
            rows = jnp.zeros(size, jnp.int32)
            jax.block_until_ready(self.step(params, self.opt_state, self.x, self.y, self.clip, rows,
                                            rows.astype(bool), self.key))

    def run(self, n: int):
        for _ in range(n):
            if not self.queue:  # as train() draws them: a block of steps' batches at once
                self.queue = self.sampler.sample_block(self.t, self.block)
            batch = self.queue.pop(0)
            self.params, self.opt_state = self.step(self.params, self.opt_state, self.x, self.y, self.clip,
                                                    batch.indices, batch.mask, jax.random.fold_in(self.key, self.t))
            self.t += 1
        jax.block_until_ready(self.params)


class TorchContender:
    def __init__(self, name, step, xs, ys, torch):
        self.name, self.step, self.xs, self.ys, self.torch = name, step, xs, ys, torch
        self.i = 0

    def run(self, n: int):
        for _ in range(n):
            self.step(self.xs[self.i % len(self.xs)], self.ys[self.i % len(self.ys)])
            self.i += 1
        if self.torch.cuda.is_available():  # as the JAX contenders block on their results
            self.torch.cuda.synchronize()


def time_contenders(contenders, rounds: int, steps: int, warmup: int) -> dict:
    results = {}
    for c in contenders:
        start = time.perf_counter()
        c.run(warmup)
        results[c.name] = {"warmup_s": time.perf_counter() - start, "warmup_steps": warmup, "step_s": []}
    for _ in range(rounds):
        for c in contenders:  # interleaved: load changes hit every contender alike
            start = time.perf_counter()
            c.run(steps)
            results[c.name]["step_s"].append((time.perf_counter() - start) / steps)
    for r in results.values():
        r["median_step_s"] = float(np.median(r["step_s"]))
        r["steps_per_s"] = 1.0 / r["median_step_s"]
        r["examples_per_s"] = BATCH * r["steps_per_s"]
    return results


# --------------------------------------------------------------------------------------------------
# report
# --------------------------------------------------------------------------------------------------



def step_memory(graphdef, params, rest, batch: int) -> dict:
    """XLA's temporary-buffer bytes (the compiled program's working memory beyond its inputs and outputs)
    of the DP step (auto, vmap) and the non-private step at ``batch`` examples: measured from the compiled
    programs, not estimated."""
    x = jnp.zeros((batch,) + IMAGE, jnp.float32)
    y = jnp.zeros((batch,), jnp.int32)
    steps = {f"jaxpriv DP ({m})": jaxpriv_dp(graphdef, params, rest, m, 0) for m in ("auto", "vmap")}
    steps["JAX non-private"] = jax_nonprivate(graphdef, params, rest)
    return {name: int(step.lower(state, x, y).compile().memory_analysis().temp_size_in_bytes)
            for name, (state, step) in steps.items()}


def versions(jp_mods, op_mods) -> dict:
    v = {"jax": jax.__version__, "jaxlib": importlib.metadata.version("jaxlib"), "flax": flax.__version__,
         "optax": optax.__version__, "numpy": np.__version__, "jaxpriv": jaxpriv.__version__}
    if jp_mods is not None:
        v["jax_privacy"] = importlib.metadata.version("jax-privacy")
    if op_mods is not None:
        v["torch"] = op_mods[0].__version__
        v["opacus"] = op_mods[1].__version__
    return v


def main(argv=None) -> int:
    global BATCH  # --batch: every contender, the data and the noise normalisation read it
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer timed rounds (~1–2 min on 2 CPU cores)")
    parser.add_argument("--json", metavar="OUT", help="write all results to this JSON file")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--torch-threads", type=int, metavar="N",
                        help="torch.set_num_threads(N) for Opacus and PyTorch (default: torch's own choice)")
    parser.add_argument("--pool", choices=("shifted", "standard"), default="shifted",
                        help="the CNN's max-pool: four shifted views (default) or nnx.max_pool")
    parser.add_argument("--model", choices=("cnn", "transformer"), default="cnn",
                        help="the CNN (all contenders) or jaxpriv's tiny Transformer (JAX contenders only)")
    parser.add_argument("--chunk", type=int, metavar="N",
                        help="also time the train() step with its Poisson batch processed in physical chunks of N "
                             "examples (the logical-batch loop, DPSGDConfig.microbatch_size)")
    parser.add_argument("--rounds", type=int, help="timed rounds per contender (default 7, 3 with --quick)")
    parser.add_argument("--steps", type=int, help="steps per timed round (default 10, 4 with --quick)")
    parser.add_argument("--batch", type=int, default=BATCH, metavar="B",
                        help=f"examples per step (default {BATCH}; the issue's GPU goal is stated at 1024)")
    args = parser.parse_args(argv)
    mode = "quick" if args.quick else "full"
    rounds = args.rounds or (3 if args.quick else 7)
    steps = args.steps or (4 if args.quick else 10)
    if args.chunk is not None and args.chunk < 1:
        parser.error(f"--chunk must be an integer ≥ 1, got {args.chunk}")
    if args.batch < 1:
        parser.error(f"--batch must be an integer ≥ 1, got {args.batch}")
    BATCH = args.batch
    t_start = time.perf_counter()

    jp_mods, jp_why = import_jax_privacy()
    op_mods, op_why = import_opacus()
    if args.model == "transformer":  # the anchors' models (torch, jax_privacy's wrapper) are the CNN's
        jp_mods, jp_why = None, "--model transformer: the anchors run the CNN only"
        op_mods, op_why = None, jp_why
    info = common.machine_info(versions(jp_mods, op_mods), os.path.dirname(os.path.abspath(jaxpriv.__file__)))
    if op_mods is not None:
        if args.torch_threads:
            op_mods[0].set_num_threads(args.torch_threads)
        info["torch_threads"] = op_mods[0].get_num_threads()
    common.print_header(info, mode, "DP-SGD throughput: jaxpriv vs non-private JAX, jax_privacy and Opacus",
                        "Step times are wall-clock medians over interleaved rounds (jax results blocked on); "
                        "compare ratios from the same run, not absolute times across runs.")
    described = ("MNIST-shaped CNN (conv 8×8/2 16, max-pool 2/1, conv 4×4/2 32, max-pool 2/1, dense 32, dense 10; "
                 f"{args.pool} max-pool)"
                 if args.model == "cnn" else
                 "jaxpriv.train.models.Transformer on MNIST-shaped images (28 row tokens of 28 pixels, width 32, "
                 "4 heads, 2 pre-norm blocks)")
    say(f"Model: {described}, batch {BATCH}, clip C = {CLIP:g}, noise σ = {SIGMA:g}, SGD lr {LR:g}; "
        f"{rounds} rounds × {steps} steps.")
    say()
    skipped = {}
    if jp_mods is None:
        skipped["jax_privacy"] = jp_why
    if op_mods is None:
        skipped["opacus"] = op_why
    for name, why in skipped.items():
        say(f"- {name} skipped (not importable here: {why}).")
    noise_note = gaussian_noise_transform(0)[1]
    if noise_note:
        say(f"- {noise_note}.")
    if skipped or noise_note:
        say()

    if args.model == "cnn":
        CNN.pool = staticmethod(max_pool_2x2 if args.pool == "shifted" else standard_max_pool)
        model = CNN(nnx.Rngs(args.seed))
    else:
        from jaxpriv.train.models import Transformer

        model = Transformer(IMAGE[0], IMAGE[1] * IMAGE[2], CLASSES, rngs=nnx.Rngs(args.seed))
    graphdef, params, rest = nnx.split(model, nnx.Param, ...)
    n_params = sum(int(np.size(v)) for v in jax.tree.leaves(params))
    xs, ys = synthetic_batches(4, args.seed)

    results = {"machine": info, "mode": mode, "model": args.model, "pool": args.pool, "seed": args.seed, "rounds": rounds, "steps_per_round": steps,
               "batch": BATCH, "clip_norm": CLIP, "noise_multiplier": SIGMA, "parameters": n_params,
               "skipped": skipped, "noise_note": noise_note}

    say(f"## 1. Agreement of the clipped sums (noise off, one batch of {BATCH})")
    say()
    agree = agreement(graphdef, params, rest, xs[0], ys[0], jp_mods, op_mods)
    results["agreement_max_rel_diff"] = agree
    say(table(["comparison", "max |Δ| / max |reference|"], [[k, f"{v:.2e}"] for k, v in agree.items()]))
    say()

    contenders = []
    for method in ("auto", "ghost", "vmap"):
        state, step = jaxpriv_dp(graphdef, params, rest, method, args.seed)
        contenders.append(JaxContender(f"jaxpriv DP ({method})", state, step, xs, ys))
    state, step = jax_nonprivate(graphdef, params, rest)
    contenders.append(JaxContender("JAX non-private", state, step, xs, ys))
    contenders.append(TrainerContender("jaxpriv train() step", graphdef, params, rest, xs, ys, args.seed))
    if args.chunk:
        contenders.append(TrainerContender(f"jaxpriv train() step, chunks of {args.chunk}", graphdef, params, rest,
                                           xs, ys, args.seed, chunk=args.chunk))
    if jp_mods is not None:
        state, step = jax_privacy_dp(jp_mods, graphdef, params, rest, args.seed)
        contenders.append(JaxContender("jax_privacy clipped_grad", state, step, xs, ys))
    if op_mods is not None:
        torch = op_mods[0]
        txs = [torch_images(torch, x) for x in xs]
        tys = [torch_labels(torch, y) for y in ys]
        _, _, step = opacus_step_fn(torch, op_mods[1], params, txs, tys, SIGMA, LR)
        contenders.append(TorchContender("Opacus", step, txs, tys, torch))
        _, _, step = opacus_step_fn(torch, op_mods[1], params, txs, tys, SIGMA, LR, ghost=True)
        contenders.append(TorchContender("Opacus ghost", step, txs, tys, torch))
        contenders.append(TorchContender("PyTorch non-private", torch_nonprivate_step_fn(torch, params), txs, tys, torch))

    say("## 2. Step throughput")
    say()
    timing = time_contenders(contenders, rounds, steps, warmup=2)
    results["timing"] = timing
    ref = timing.get("jaxpriv DP (auto)")
    rows = []
    for name, r in timing.items():
        ratio = f"{r['steps_per_s'] / ref['steps_per_s']:.2f}" if ref else "–"
        rows.append([name, f"{r['warmup_s']:.2f}", f"{1e3 * r['median_step_s']:.1f}",
                     f"{1e3 * min(r['step_s']):.1f}", f"{r['steps_per_s']:.2f}", f"{r['examples_per_s']:,.0f}", ratio])
    say(table(["contender", "warm-up incl. compile (s)", "median step (ms)", "min step (ms)", "steps/s",
               "examples/s", "throughput / jaxpriv DP"], rows))
    say()

    def sps(name):
        return timing[name]["steps_per_s"] if name in timing else None

    dp, nonpriv, jp, op = sps("jaxpriv DP (auto)"), sps("JAX non-private"), sps("jax_privacy clipped_grad"), sps("Opacus")
    op_ghost = sps("Opacus ghost")
    trainer = sps("jaxpriv train() step")
    results.update({"dp_steps_per_s": dp, "nonprivate_steps_per_s": nonpriv})
    if op is not None:
        results["opacus_steps_per_s"] = op
    if jp is not None:
        results["jax_privacy_steps_per_s"] = jp
    goals = {}
    if dp is not None:
        bound = 1.25 if args.model == "cnn" else 1.5
        goals[f"dp_step_time_over_nonprivate (goal ≤ {bound:g})"] = (nonpriv / dp, bound)
        goals["train_step_time_over_bare_dp_step (goal ≤ 1.1)"] = (dp / trainer, 1.1)
        if op is not None:
            goals["dp_throughput_over_opacus (goal ≥ 1.5)"] = (dp / op, 1.5)
        if op_ghost is not None:
            goals["dp_throughput_over_opacus_ghost (goal ≥ 1.5)"] = (dp / op_ghost, 1.5)
        if jp is not None:
            goals["dp_throughput_over_jax_privacy (goal ≥ 1)"] = (dp / jp, 1.0)
    met = {k: (v <= bound if "≤" in k else v >= bound) for k, (v, bound) in goals.items()}
    goals = {k: v for k, (v, _) in goals.items()}
    results["ratios"] = goals
    results["goals_met"] = met
    checks = {f"{k} ≤ 1e-4": v <= 1e-4 for k, v in agree.items()}
    results["checks"] = checks

    say(f"## 3. Working memory at batch {MEMORY_BATCH} (XLA temporary buffers of the compiled step)")
    say()
    memory = step_memory(graphdef, params, rest, MEMORY_BATCH)
    results["memory_bytes"] = memory
    say(table(["step", "MiB", "/ non-private"], [[k, f"{v / 2**20:.1f}", f"{v / memory['JAX non-private']:.2f}"]
                                                 for k, v in memory.items()]))
    say()
    goals["dp_memory_over_nonprivate_at_1024 (goal ≤ 1.3)"] = memory["jaxpriv DP (auto)"] / memory["JAX non-private"]
    met["dp_memory_over_nonprivate_at_1024 (goal ≤ 1.3)"] = goals["dp_memory_over_nonprivate_at_1024 (goal ≤ 1.3)"] <= 1.3

    say("## Summary")
    say()
    say(table(["ratio", "value", "goal met"], [[k, f"{v:.2f}", "yes" if met[k] else "**no**"] for k, v in goals.items()]))
    say()
    say(table(["check", "passed"], [[k, "yes" if v else "**no**"] for k, v in checks.items()]))
    return common.finish(results, checks, t_start, args.json)


if __name__ == "__main__":
    sys.exit(main())
