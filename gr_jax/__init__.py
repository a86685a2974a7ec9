"""gr_jax: Gumbel-Rao and other single-evaluation gradient estimators in JAX.

The public API lives in the submodules: ``gr_jax.estimators`` (the estimators),
``gr_jax.diagnostics`` (variance, bias and MSE of gradient estimators).
"""

from gr_jax import estimators
from gr_jax.estimators import (
    BaselineState,
    Estimator,
    RunningMeanBaseline,
    categorical_log_prob,
    conditional_gumbel,
    gapped_straight_through,
    get,
    gumbel_rao,
    gumbel_rao_exact,
    gumbel_rao_qmc,
    gumbel_softmax,
    lattice_points,
    reinforce,
    reinmax,
    score_function_surrogate,
    st_gumbel_softmax,
    straight_through,
    zgr,
)

__all__ = [
    "BaselineState",
    "Estimator",
    "RunningMeanBaseline",
    "categorical_log_prob",
    "conditional_gumbel",
    "estimators",
    "gapped_straight_through",
    "get",
    "gumbel_rao",
    "gumbel_rao_exact",
    "gumbel_rao_qmc",
    "gumbel_softmax",
    "lattice_points",
    "reinforce",
    "reinmax",
    "score_function_surrogate",
    "st_gumbel_softmax",
    "straight_through",
    "zgr",
]
__version__ = "0.1.0"
