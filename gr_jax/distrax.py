r"""distrax distributions whose samples are exact one-hots and whose gradients are gr_jax's.

``pip install "gr_jax[distrax]"``. :class:`OneHotCategorical` and :class:`Bernoulli` are
``distrax.OneHotCategorical`` and ``distrax.Bernoulli`` with the sampler replaced: ``sample``
(``sample_and_log_prob``) draws the exact discrete value :math:`D =
\mathrm{onehot}(\arg\max(\theta + G))` as float32 and differentiating through it runs
``estimator``'s backward pass (Paulus, Maddison & Krause, ICLR 2021). distrax's ``log_prob``
is linear in the value, so a loss that scores the sample, such as
:math:`\log p(x, D) - \log q_\theta(D)`, passes its gradient on to the estimator; that
gradient is the one :mod:`gr_jax.numpyro`'s docstring states (the estimator's pathwise term
plus the mean-zero direct term of :math:`\log q_\theta`). The allowed names and the refusals
are :func:`gr_jax.numpyro.straight_through_estimator`'s.
"""

from __future__ import annotations

import distrax
from jax import numpy as jnp

from gr_jax import estimators
from gr_jax._adapters import straight_through_estimator

__all__ = ["Bernoulli", "OneHotCategorical"]


def _checked(estimator: str, num_categories: int) -> estimators.Estimator:
  chosen = straight_through_estimator(estimator)
  if chosen is None:
    raise ValueError("estimator=None: use distrax's own distribution for no gradient.")
  if chosen.binary_only and num_categories != 2:
    raise ValueError(
      f"estimator={estimator!r} is for two categories; logits have {num_categories}."
    )
  return chosen


def _one_hot(estimator, tau, key, logits):
  tau = jnp.asarray(tau)
  tau = tau[..., None] if tau.ndim else tau  # one temperature per variable
  return estimators.get(estimator)(key, logits, tau=tau)


class OneHotCategorical(distrax.OneHotCategorical):
  """``distrax.OneHotCategorical`` whose float32 samples carry ``estimator``'s gradient.

  Args:
    logits: ``[*batch, n]``; or ``probs``.
    estimator: a name :func:`gr_jax.numpyro.straight_through_estimator` accepts, e.g.
      "gr_mc10".
    tau: the estimator's temperature, > 0, a number or an array over the batch shape.
  """

  def __init__(self, logits=None, probs=None, *, estimator: str, tau=1.0):
    super().__init__(logits=logits, probs=probs, dtype=jnp.float32)
    _checked(estimator, self.num_categories)
    self.estimator = estimator
    self.tau = tau

  def _sample_n(self, key, n):
    logits = jnp.broadcast_to(self.logits, (n, *self.logits.shape))
    return _one_hot(self.estimator, self.tau, key, logits)


class Bernoulli(distrax.Bernoulli):
  """``distrax.Bernoulli`` whose float32 samples carry ``estimator``'s gradient (the
  two-category one-hot of logits (0, l) read at its second category).

  Args:
    logits: ``[*batch]`` finite log-odds; or ``probs``.
    estimator, tau: as :class:`OneHotCategorical`'s ("gr_exact" integrates GR exactly).
  """

  def __init__(self, logits=None, probs=None, *, estimator: str, tau=1.0):
    super().__init__(logits=logits, probs=probs, dtype=jnp.float32)
    _checked(estimator, 2)
    self.estimator = estimator
    self.tau = tau

  def _sample_n(self, key, n):
    logits = jnp.broadcast_to(self.logits, (n, *self.logits.shape))
    two_logits = jnp.stack([jnp.zeros_like(logits), logits], axis=-1)
    return _one_hot(self.estimator, self.tau, key, two_logits)[..., 1]
