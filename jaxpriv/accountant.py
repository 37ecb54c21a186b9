"""Deprecated home of the RDP ledger and the DP-SGD sweep: they live in :mod:`jaxpriv.accounting.ledger` and
:mod:`jaxpriv.accounting.dpsgd` (``jaxpriv.Accountant`` and ``jaxpriv.dpsgd_epsilon`` are unchanged)."""

import warnings

from .accounting.dpsgd import dpsgd_epsilon
from .accounting.ledger import Accountant, Composed, Event, Gaussian, Laplace, PoissonSampled, SelfComposed, Staircase

__all__ = ["Gaussian", "Laplace", "Staircase", "PoissonSampled", "SelfComposed", "Composed", "Event", "Accountant",
           "dpsgd_epsilon"]

warnings.warn("jaxpriv.accountant moved to jaxpriv.accounting.ledger (Accountant) and jaxpriv.accounting.dpsgd "
              "(dpsgd_epsilon)", DeprecationWarning, stacklevel=2)
