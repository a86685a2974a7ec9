"""gr_jax: Gumbel-Rao and other single-evaluation gradient estimators in JAX.

The public API lives in the submodules: ``gr_jax.estimators`` (the estimators),
``gr_jax.diagnostics`` (variance, bias and MSE of gradient estimators). The
estimators' public names are re-exported here too (``gr_jax.gumbel_rao``).
"""

from gr_jax import estimators
from gr_jax.estimators import *  # noqa: F403 - the estimators' public API, listed once in their __all__

__all__ = ["estimators", *estimators.__all__]
__version__ = "0.1.0"
