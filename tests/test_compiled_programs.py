"""The public accounting and calibration kernels compile a fixed, small set of programs whatever the batch
size (issue 14): a sweep of any length pads its settings to one of a few chunk sizes
(:func:`jaxpriv._batching.padded_batch_size`: 1, 16 and 256 settings on the CPU), so once sizes 1, 10, 1000
and 10⁵ have run, no other size lowers a new program.

Counted: every program JAX lowers in this process (the ``jaxpr_to_mlir_module`` event fires once per new
function and shape, whether or not the persistent cache then skips the compilation), so eager helper
operations that would compile per shape are caught too. Orders are a short custom list, which keeps each
kernel small to compile; the kernels' structure does not depend on the list.
"""

import jax
import numpy as np
import pytest

import jaxpriv
from jaxpriv import accounting, calibrate, events, rdp

ORDERS = (1.5, 2.0, 3.0, 8.0, 32.0)
FIRST = (1, 10, 1000, 100_000)
LATER = (3, 200, 4000, 30_000)
DELTA = 1e-5
_lowered = [0]


def _count(name, seconds, **kwargs):
    if name.endswith("jaxpr_to_mlir_module_duration"):
        _lowered[0] += 1


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
