"""Deprecated home of UDP-FL's Harmonizer: it calibrates with the accountants, so it lives with the other
calibration code in :mod:`jaxpriv.calibrate.harmonizer`; this alias keeps old imports working."""

import warnings

from ..calibrate.harmonizer import MECHANISMS, Harmonized, harmonize

__all__ = ["MECHANISMS", "Harmonized", "harmonize"]

warnings.warn("jaxpriv.mechanisms.harmonizer moved to jaxpriv.calibrate.harmonizer", DeprecationWarning, stacklevel=2)
