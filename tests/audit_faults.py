"""Planted faults for the audit tests and ``bench/audit.py``: context managers that break one thing in the
trainer's own code path (by replacing a public function the trainer calls), so that an audit of a run
inside them should exceed the run's claimed ε.

* ``half_noise`` — the noise's scale on the clipped sum is halved (``dpsgd.noise_numbers``).
* ``wrong_sensitivity`` — the noise is scaled by the per-layer clip norm C/√L instead of the sum's
  sensitivity C (L = 4 layers: what per-layer clipping's norm would be), i.e. by a wrong Δ.
* ``skip_clip`` — the first example of every batch is not clipped (``clipping.split_clipped_grad_sum``).
* ``rounding_amplified`` — each example's clipping factor min(1, C/‖g‖) carries its float32 rounding error
  (at most u = 2⁻²⁴ relative) amplified 2²⁴-fold: factor × (1 + 2²⁴·u), a clipped norm of 2C.

The clipping faults need fresh step programs (the trainer caches them by structure): the context swaps in
an empty program cache and restores the old one after, so no faulty program outlives the context.
"""

from __future__ import annotations

import contextlib
import math

FAULTS = ("half_noise", "wrong_sensitivity", "skip_clip", "rounding_amplified")
#: unit roundoff of float32 and the amplification of the rounding fault
UNIT_ROUNDOFF, AMPLIFICATION = 2.0**-24, 2.0**24
#: layers L of the wrong-sensitivity fault (C/√L taken for C)
LAYERS = 4


@contextlib.contextmanager
def planted(fault: str):
    """Run the trainer with ``fault`` (one of :data:`FAULTS`) inside this context."""
    import jax

    from jaxpriv.train import clipping, dpsgd, programs

    if fault not in FAULTS:
        raise ValueError(f"fault must be one of {FAULTS}, got {fault!r}")
    saved = []

    def patch(obj, name, value):
        saved.append((obj, name, getattr(obj, name)))
        setattr(obj, name, value)

    numbers, split = dpsgd.noise_numbers, clipping.split_clipped_grad_sum
    if fault == "half_noise":
        def half(event, **kwargs):
            args = numbers(event, **kwargs)
            return args._replace(event=type(args.event)(args.event.noise_multiplier * 0.5))

        patch(dpsgd, "noise_numbers", half)
    elif fault == "wrong_sensitivity":
        def wrong(event, *, sensitivity, **kwargs):
            return numbers(event, sensitivity=sensitivity / math.sqrt(LAYERS), **kwargs)

        patch(dpsgd, "noise_numbers", wrong)
    else:
        patch(dpsgd, "STEP_PROGRAMS", programs.ProgramCache(dpsgd.STEP_PROGRAMS._build))
        if fault == "skip_clip":
            def skip(loss_fn, graphdef, params, rest, inputs, labels, *, clip_norm, mask=None, **kwargs):
                out = split(loss_fn, graphdef, params, rest, inputs, labels, clip_norm=clip_norm, mask=mask, **kwargs)
                first = [split(loss_fn, graphdef, params, rest, inputs[:1], labels[:1], clip_norm=c,
                               mask=None if mask is None else mask[:1], **kwargs).grads for c in (1e30, clip_norm)]
                extra = jax.tree.map(lambda free, clipped: free - clipped, *first)
                return out._replace(grads=jax.tree.map(lambda g, e: g + e, out.grads, extra))

            patch(clipping, "split_clipped_grad_sum", skip)
        else:
            def amplified(*args, clip_norm, **kwargs):
                return split(*args, clip_norm=clip_norm * (1.0 + AMPLIFICATION * UNIT_ROUNDOFF), **kwargs)

            patch(clipping, "split_clipped_grad_sum", amplified)
    try:
        yield
    finally:
        for obj, name, value in reversed(saved):
            setattr(obj, name, value)
