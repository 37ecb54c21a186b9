"""DP-SGD training on Flax NNX + Optax (SPEC §6).

:mod:`.clipping` — per-example clipped gradient sums (vmap, and ghost clipping for Linear/Conv/Embed);
:mod:`.sampling` — Poisson sampling, uniform or per record, padded to fixed buckets with a mask;
:mod:`.noise` — Optax noise transforms built on :mod:`jaxpriv.mechanisms`;
:mod:`.dpsgd` — the trainer, its privacy plan (target ε, IDP-SGD "sample"/"scale") and accountant;
:mod:`.data` — the bundled digits and breast-cancer datasets, and synthetic stand-ins.
"""
