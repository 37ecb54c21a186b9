"""DP-SGD training on Flax NNX + Optax (SPEC §6): per-example clipping, Poisson sampling with padded
buckets, noise from :mod:`jaxpriv.mechanisms` and RDP accounting from :mod:`jaxpriv.rdp`."""
