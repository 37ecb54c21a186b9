"""Deprecated home of the shuffle summary: it reports the bounds beside the composed rounds, so it lives in the
calibration layer as :mod:`jaxpriv.calibrate.shuffle_summary`; this alias keeps old imports working."""

import warnings

from ..calibrate.shuffle_summary import (epsilon_versus_n, plot_budgets, plot_epsilon_versus_n,
                                        plot_epsilon_versus_rounds, shuffle_summary)

__all__ = ["epsilon_versus_n", "plot_budgets", "plot_epsilon_versus_n", "plot_epsilon_versus_rounds",
           "shuffle_summary"]

warnings.warn("jaxpriv.shuffle.summary moved to jaxpriv.calibrate.shuffle_summary", DeprecationWarning, stacklevel=2)
