"""Privacy auditing: empirical LOWER bounds on ε, to compare with what the library claims (MATH §10).

:mod:`.stats` — Clopper–Pearson intervals (a beta quantile by bisection on ``betainc``) and binomial tails;
:mod:`.one_run` — one-run bounds from canaries: Steinke, Nasr & Jagielski (2023) for (ε, δ), and the
f-DP test of Mahloujifar, Melis & Chaudhuri (2025) for Gaussian DP and for any claim given by its privacy
profile (a p-value, and the strongest claims of an ordered family that one run rejects);
:mod:`.threshold` — the classic many-run bound, Clopper–Pearson at a threshold;
:mod:`.samplers` — black-box audits of every noise sampler of :mod:`jaxpriv.mechanisms`;
:mod:`.training` — white-box gradient and input canaries in one run of the DP-SGD trainer;
:mod:`.figures` — the claim's TPR-at-FPR curve beside the audit;
:mod:`.command` — ``jaxpriv audit``.
"""

from .._lazy import lazy_attributes

# Submodules load on first use: the command line imports ``jaxpriv.audit.command`` without JAX.
__getattr__, __dir__ = lazy_attributes(__name__, {
    **{name: name for name in ("stats", "one_run", "threshold", "samplers", "training", "figures", "command")},
    "clopper_pearson": "stats",
    "beta_quantile": "stats",
    "epsilon_lower_bound": "one_run",
    "gdp_lower_bound": "one_run",
    "OneRunBound": "one_run",
    "claim_test": "one_run",
    "family_bound": "one_run",
    "ClaimTest": "one_run",
    "FamilyBound": "one_run",
    "threshold_epsilon": "threshold",
    "ThresholdBound": "threshold",
    "Sampler": "samplers",
    "SamplerAudit": "samplers",
    "mechanism_sampler": "samplers",
    "audit_sampler": "samplers",
    "audit_training": "training",
    "TrainingAudit": "training",
    "claimed_tpr": "figures",
    "plot_audit": "figures",
})

__all__ = ["stats", "one_run", "threshold", "samplers", "training", "figures", "command", "clopper_pearson",
           "beta_quantile", "epsilon_lower_bound", "gdp_lower_bound", "OneRunBound", "claim_test", "family_bound",
           "ClaimTest", "FamilyBound", "threshold_epsilon",
           "ThresholdBound", "Sampler", "SamplerAudit", "mechanism_sampler", "audit_sampler", "audit_training",
           "TrainingAudit", "claimed_tpr", "plot_audit"]
