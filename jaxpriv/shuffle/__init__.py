"""Privacy amplification by shuffling (MATH §3).

:mod:`jaxpriv.shuffle.clones` — the exact clone dominating pair: δ(ε) and ε(δ) (MATH §3.1).
:mod:`jaxpriv.shuffle.bounds` — closed forms and baselines: FMT22, Erlingsson et al. 2019, APES
Theorem 4 (O(n log n)), S-APES Proposition 1, GSPA μ, the simplified Girgis RDP (MATH §1.6, §3.2-3.3).
:mod:`jaxpriv.shuffle.personalized` — personalized budgets: worst-case and per-user central ε (GSPA and
APES/EoN clone models) on the exact sum, with C a Poisson-binomial (:mod:`.poisson_binomial`).
:mod:`jaxpriv.shuffle.multinomial` — the 2-D lattice law and its TV distance to the matched Gaussian;
:mod:`jaxpriv.shuffle.eapes` — the E-APES trade-off / (ε, δ) curve with that computed τ (MATH §3.3).
:mod:`jaxpriv.shuffle.estimators` — GSPA's personalized mean and frequency estimators (Alg. 1-2).
Many rounds (the exact pair composed by PLD beside the seeds' compositions) and the side-by-side summary compose
these kernels with the accountants: they live in the calibration layer, :mod:`jaxpriv.calibrate.shuffle_rounds`
and :mod:`jaxpriv.calibrate.shuffle_summary` (``rounds_epsilon``/``rounds_summary`` here, and the modules
``jaxpriv.shuffle.rounds``/``.summary``, are deprecated aliases).
:mod:`jaxpriv.shuffle.budgets` — budget distributions (uniform, clipped Gaussian, levels, CSV).
"""

from .._lazy import lazy_attributes

#: Each public name and the submodule it lives in; submodules load on first use (the budget
#: specifications, .budgets, need no JAX).
_HOMES = {
    **{name: "bounds" for name in ("fmt22_closed_form", "erlingsson19", "apes_echo_sum", "apes_theorem4",
                                   "sapes_proposition1", "gspa_mu", "gspa_mu_composed", "girgis_rdp",
                                   "girgis_rdp_simplified", "girgis_rdp_lower")},
    "clones_delta": "clones", "clones_epsilon": "clones",
    "personalized_epsilon": "personalized",
    "poisson_binomial_logpmf": "poisson_binomial",
    "lattice_gaussian_tv": "multinomial", "gspa_eq14": "multinomial", "eapes_epsilon": "eapes",
    "mean_estimation": "estimators", "frequency_estimation": "estimators", "Estimate": "estimators",
    "rounds_epsilon": "rounds", "rounds_summary": "rounds",  # deprecated aliases (the module warns)
}
__all__ = list(_HOMES)
__getattr__, __dir__ = lazy_attributes(__name__, _HOMES)
