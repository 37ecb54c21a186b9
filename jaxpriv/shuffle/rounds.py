"""Deprecated home of the shuffle rounds: it composes rounds with the accountants, so it lives in the
calibration layer as :mod:`jaxpriv.calibrate.shuffle_rounds`; this alias keeps old imports working."""

import warnings

from ..calibrate.shuffle_rounds import MAX_TARGETS, rounds_epsilon, rounds_summary

__all__ = ["MAX_TARGETS", "rounds_epsilon", "rounds_summary"]

warnings.warn("jaxpriv.shuffle.rounds moved to jaxpriv.calibrate.shuffle_rounds", DeprecationWarning, stacklevel=2)
