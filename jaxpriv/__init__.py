"""jaxpriv — a JAX numerical engine for differential privacy.

Privacy events as data (:mod:`jaxpriv.events`), interpreted by two accountants with one interface
(:mod:`jaxpriv.accounting`: exact Rényi DP and a certified PLD accountant in JAX), exact Rényi-DP curves
(:mod:`jaxpriv.rdp`), f-DP / Gaussian DP (:mod:`jaxpriv.fdp`), calibration of any monotone event family
to a target ε (:mod:`jaxpriv.calibrate`) and an RDP ledger (:mod:`jaxpriv.accounting.ledger`), all float64 and
vectorised, without changing the caller's global JAX settings. A run described by its dataset size,
batch size and epochs converts to DP-SGD's (q, T) with :func:`jaxpriv.sampling_and_steps`. The
mathematical reference behind every number ships with the package: :func:`jaxpriv.math_reference`.

Example:
  >>> import jaxpriv
  >>> round(float(jaxpriv.dpsgd_epsilon(q=0.01, sigma=1.1, steps=10_000, delta=1e-5)), 4)
  5.632
"""

from ._lazy import lazy_attributes

# Submodules load on first use, so ``import jaxpriv`` (and the command line's argument checks) cost no
# JAX import.
__getattr__, __dir__ = lazy_attributes(__name__, {
    **{name: name for name in ("events", "accounting", "rdp", "fdp", "calibrate", "shuffle",
                               "mechanisms", "budgets", "schedule", "distributed", "audit", "mf")},
    "Accountant": "accounting.ledger",
    "dpsgd_epsilon": "accounting.dpsgd",
    "sampling_and_steps": "schedule",
    "math_reference": "_reference",
    "math_sections": "_reference",
})

__version__ = "0.1.0"
__all__ = ["events", "accounting", "rdp", "fdp", "calibrate", "shuffle", "mechanisms", "budgets",
           "schedule", "distributed", "audit", "mf", "Accountant", "dpsgd_epsilon", "sampling_and_steps",
           "math_reference", "math_sections", "__version__"]
