"""jaxpriv — a JAX numerical engine for differential privacy.

Privacy events as data (:mod:`jaxpriv.events`), interpreted by two accountants with one interface
(:mod:`jaxpriv.accounting`: exact Rényi DP and a certified PLD accountant in JAX), exact Rényi-DP curves
(:mod:`jaxpriv.rdp`), f-DP / Gaussian DP (:mod:`jaxpriv.fdp`), calibration of any monotone event family
to a target ε (:mod:`jaxpriv.calibrate`) and an RDP ledger (:mod:`jaxpriv.accountant`), all float64 and
vectorised, without changing the caller's global JAX settings.

Example:
  >>> import jaxpriv
  >>> round(float(jaxpriv.dpsgd_epsilon(q=0.01, sigma=1.1, steps=10_000, delta=1e-5)), 4)
  5.632
"""

from ._lazy import lazy_attributes

# Submodules load on first use, so ``import jaxpriv`` (and the command line's argument checks) cost no
# JAX import.
__getattr__, __dir__ = lazy_attributes(__name__, {
    **{name: name for name in ("events", "accounting", "rdp", "fdp", "calibrate", "accountant", "shuffle",
                               "mechanisms", "budgets")},
    "Accountant": "accountant",
    "dpsgd_epsilon": "accountant",
})

__version__ = "0.1.0"
__all__ = ["events", "accounting", "rdp", "fdp", "calibrate", "accountant", "shuffle", "mechanisms", "budgets", "Accountant", "dpsgd_epsilon", "__version__"]
