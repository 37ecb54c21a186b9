"""jaxpriv — a JAX numerical engine for differential privacy.

Exact Rényi-DP curves (:mod:`jaxpriv.rdp`), f-DP / Gaussian DP (:mod:`jaxpriv.fdp`), calibration of σ, q
and T to a target ε (:mod:`jaxpriv.calibrate`) and an event ledger (:mod:`jaxpriv.accountant`), all
float64, vectorised and differentiable, without changing the caller's global JAX settings.

Example:
  >>> import jaxpriv
  >>> round(float(jaxpriv.dpsgd_epsilon(q=0.01, sigma=1.1, steps=10_000, delta=1e-5)), 4)
  5.632
"""

from . import accountant, budgets, calibrate, fdp, mechanisms, rdp, shuffle
from .accountant import Accountant, dpsgd_epsilon

__version__ = "0.1.0"
__all__ = ["rdp", "fdp", "calibrate", "accountant", "shuffle", "mechanisms", "budgets", "Accountant", "dpsgd_epsilon", "__version__"]
