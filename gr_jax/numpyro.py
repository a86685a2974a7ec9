r"""NumPyro distributions whose samples are exact one-hots and whose gradients are gr_jax's.

``pip install "gr_jax[numpyro]"``. A guide site drawn from :class:`OneHotCategorical` or
:class:`Bernoulli` with ``estimator="gr_mc10"`` (any single-evaluation name of
:func:`gr_jax.estimators.get`) takes the exact discrete value :math:`D` in the forward pass,
and reverse-mode differentiation through it is that estimator's (Paulus, Maddison & Krause,
ICLR 2021). NumPyro's ELBOs then treat the site as reparameterized::

  def guide(x):
    logits = numpyro.param("logits", jnp.zeros((x.shape[0], 3)))
    with numpyro.plate("data", x.shape[0]):
      numpyro.sample("z", gnp.OneHotCategorical(logits, estimator="gr_mc10", tau=0.5))

  svi = numpyro.infer.SVI(model, guide, optax.adam(1e-2), gnp.Trace_ELBO())

with ``gnp`` this module. The model scores the one-hot value with a ``log_prob`` that is
linear in it: this module's :class:`OneHotCategorical` (``estimator=None`` for a prior) or
NumPyro's ``Bernoulli``.

**The ELBO's gradient with these sites.** With a single particle, Trace_ELBO's loss is
:math:`-f(D, \theta)`, :math:`f(D, \theta) = \log p(x, D) - \log q_\theta(D)`, at the
guide's exact sample :math:`D \sim q_\theta`. Its gradient with respect to the guide's
logits :math:`\theta` has the two parts of the surrogate loss framework of the paper's
appendix, with :math:`f`'s direct dependence on :math:`\theta` added ("follows from basic
calculus", there):

.. math::
  \widehat{\nabla_\theta}\, \mathrm{ELBO}
  = \underbrace{\Big(\frac{\partial f(D, \theta)}{\partial D}\Big)^{\!\top}
    \frac{\partial S}{\partial \theta}}_{\text{the estimator's backward pass}}
  \; - \; \nabla_\theta \log q_\theta(D)\big|_{D\ \text{fixed}},

where :math:`\partial S / \partial \theta` is the estimator's surrogate Jacobian
(ST-GS: :math:`\nabla_\theta \mathrm{softmax}_\tau(\theta + G)`; GR-MCK: its average over
K conditional Gumbels given D). The second term is a score with no weight: its expectation
is 0 for exact samples, so the expected gradient is the estimator's own expectation for
the loss :math:`f(\cdot, \theta)`: for ST-GS and GR-MCK (the same, by the paper's
Rao-Blackwellization) :math:`\mathbb{E}[(\partial f / \partial D)^\top \nabla_\theta
\mathrm{softmax}_\tau(\theta + G)]`, which differs from the true ELBO gradient (the
straight-through bias; tests/test_numpyro.py computes both by enumeration and checks the SVI
gradient's mean against the first). This is the VAE experiments' ``kl_estimate="sampled"``.

Refused, with the reason: the relaxed GS (its sample is not a one-hot), REINFORCE (use
NumPyro's own ``Categorical`` with ``TraceGraph_ELBO``, which adds the score term), RLOO and
DisARM (objectives that evaluate the loss themselves, not reparameterizations: call
``gr_jax.estimators.rloo`` / ``disarm`` with your loss), and ``<name>_x<M>`` (use
``Trace_ELBO(num_particles=M)``).
"""

from __future__ import annotations

import jax
import numpyro.infer
from jax import numpy as jnp
from numpyro import distributions as dists
from numpyro import handlers
from numpyro.distributions import constraints
from numpyro.distributions.distribution import Distribution
from numpyro.distributions.util import validate_sample

from gr_jax import estimators
from gr_jax._adapters import straight_through_estimator

__all__ = ["Bernoulli", "OneHotCategorical", "Trace_ELBO", "straight_through_estimator"]


class _StraightThrough(Distribution):
  """What the two distributions share: the estimator by name, ``tau``, ``rsample``."""

  arg_constraints = {"logits": constraints.real}
  pytree_data_fields = ("logits", "tau")
  pytree_aux_fields = ("estimator",)

  def __init__(self, logits, estimator, tau, batch_shape, event_shape, validate_args):
    straight_through_estimator(estimator)  # a bad name fails here, at the site
    self.logits = logits
    self.estimator = estimator
    self.tau = tau
    super().__init__(batch_shape, event_shape, validate_args=validate_args)

  @property
  def has_rsample(self) -> bool:
    """True with an estimator: NumPyro's ELBOs then add no score term for the site."""
    return self.estimator is not None

  @property
  def mean(self):
    return self.probs

  @property
  def variance(self):
    return self.probs * (1 - self.probs)

  def rsample(self, key, sample_shape=()):
    if self.estimator is None:
      raise NotImplementedError(
        "rsample needs a gradient estimator; this distribution has estimator=None."
      )
    return self.sample(key, sample_shape)

  def _one_hot(self, key, logits):
    """The exact one-hot sample of ``logits [..., n]``; its gradient is the estimator's."""
    if self.estimator is None:
      # The same D as every estimator draws at this key (common random numbers).
      return jax.lax.stop_gradient(estimators.straight_through(key, logits))
    tau = jnp.asarray(self.tau)
    tau = tau[..., None] if tau.ndim else tau  # one temperature per variable
    return straight_through_estimator(self.estimator)(key, logits, tau=tau)


def _logits(logits, probs, *, binary: bool):
  if (logits is None) == (probs is None):
    raise ValueError("give exactly one of logits and probs.")
  if logits is not None:
    return jnp.asarray(logits)
  probs = jnp.asarray(probs)
  return jnp.log(probs) - jnp.log1p(-probs) if binary else jnp.log(probs)


class OneHotCategorical(_StraightThrough):
  r"""A categorical over one-hot vectors whose reparameterized gradient is ``estimator``'s.

  ``sample`` (and ``rsample``) returns the exact one-hot :math:`D =
  \mathrm{onehot}(\arg\max(\theta + G))`, ``jax.random.gumbel`` noise from the key, so that
  every estimator draws the same D at the same key; differentiating through it runs the
  estimator's backward pass. ``log_prob(value)`` is :math:`\langle \mathrm{value}, \log
  \mathrm{softmax}(\theta) \rangle`, linear in the value, so that a model scoring the
  guide's sample passes its gradient on to the estimator.

  Args:
    logits: ``[*batch, n]`` the log-probabilities up to a constant; ``-inf`` marks an
      impossible category (never sampled, zero gradient).
    probs: instead of ``logits``, ``[*batch, n]`` probabilities.
    estimator: a name :func:`straight_through_estimator` accepts (e.g. "gr_mc10", "st_gs"),
      or None for a distribution without a gradient through its sample (a model's prior).
    tau: the estimator's temperature, > 0: a number or an array broadcastable to the batch
      shape (it may be traced).
    validate_args: NumPyro's argument and support checks.

  Shapes: ``batch_shape = logits.shape[:-1]``, ``event_shape = (n,)``; samples are float
  one-hots of shape ``sample_shape + batch_shape + (n,)``.
  """

  # Real or -inf (an impossible category); NaN and +inf are refused under validate_args.
  arg_constraints = {"logits": constraints.independent(constraints.less_than(jnp.inf), 1)}
  support = constraints.multinomial(1)

  def __init__(self, logits=None, probs=None, *, estimator=None, tau=1.0, validate_args=None):
    logits = _logits(logits, probs, binary=False)
    if logits.ndim < 1:
      raise ValueError(f"logits must have a category axis; got shape {logits.shape}.")
    chosen = straight_through_estimator(estimator)
    if chosen is not None and chosen.binary_only and logits.shape[-1] != 2:
      raise ValueError(
        f"estimator={estimator!r} is for two categories; logits have {logits.shape[-1]}."
      )
    super().__init__(logits, estimator, tau, logits.shape[:-1], logits.shape[-1:], validate_args)

  def sample(self, key, sample_shape=()):
    logits = jnp.broadcast_to(self.logits, tuple(sample_shape) + self.logits.shape)
    return self._one_hot(key, logits)

  @validate_sample
  def log_prob(self, value):
    log_q = jax.nn.log_softmax(self.logits, axis=-1)
    impossible = jnp.isneginf(log_q)
    # 0 * -inf would be NaN: an impossible category counts only where the value takes it.
    finite = jnp.sum(value * jnp.where(impossible, 0.0, log_q), axis=-1)
    return jnp.where(jnp.any(impossible & (value > 0), axis=-1), -jnp.inf, finite)

  @property
  def probs(self):
    return jax.nn.softmax(self.logits, axis=-1)

  def entropy(self):
    log_q = jax.nn.log_softmax(self.logits, axis=-1)
    return -jnp.sum(jnp.where(jnp.isneginf(log_q), 0.0, jnp.exp(log_q) * log_q), axis=-1)


class Bernoulli(_StraightThrough):
  r"""A Bernoulli over {0., 1.} whose reparameterized gradient is ``estimator``'s.

  The binary variable is the two-category one-hot of logits :math:`(0, \ell)` read at its
  second category: the sample is exactly 0. or 1., :math:`P(1) = \sigma(\ell)`, and its
  gradient with respect to :math:`\ell` is the estimator's at those two logits ("gr_exact"
  integrates GR exactly there). ``log_prob(value) = value * ell - softplus(ell)``, linear in
  the value.

  Args:
    logits: ``[*batch]`` finite log-odds :math:`\ell`.
    probs: instead of ``logits``, ``[*batch]`` probabilities of 1.
    estimator, tau, validate_args: as :class:`OneHotCategorical`'s.

  Shapes: ``batch_shape = logits.shape``, ``event_shape = ()``; samples are floats of shape
  ``sample_shape + batch_shape``.
  """

  support = constraints.boolean

  def __init__(self, logits=None, probs=None, *, estimator=None, tau=1.0, validate_args=None):
    logits = _logits(logits, probs, binary=True)
    super().__init__(logits, estimator, tau, logits.shape, (), validate_args)

  def sample(self, key, sample_shape=()):
    logits = jnp.broadcast_to(self.logits, tuple(sample_shape) + self.logits.shape)
    two_logits = jnp.stack([jnp.zeros_like(logits), logits], axis=-1)
    return self._one_hot(key, two_logits)[..., 1]

  @validate_sample
  def log_prob(self, value):
    return value * self.logits - jax.nn.softplus(self.logits)

  @property
  def probs(self):
    return jax.nn.sigmoid(self.logits)

  def entropy(self):
    return jax.nn.softplus(self.logits) - self.logits * self.probs


def _base(fn):
  """The distribution under NumPyro's wrappers (Independent, Masked, Expanded, ...)."""
  while hasattr(fn, "base_dist"):
    fn = fn.base_dist
  return fn


class _CheckedSites(handlers.Messenger):
  """Records the guide's straight-through sites; checks how the model scores them."""

  def __init__(self, fn, straight_through_sites, role):
    self.straight_through_sites = straight_through_sites
    self.role = role
    super().__init__(fn)

  def postprocess_message(self, msg):
    if msg["type"] != "sample" or msg.get("is_observed"):
      return
    name, fn = msg["name"], _base(msg["fn"])
    ours = isinstance(fn, _StraightThrough)
    if self.role == "guide":
      if ours and fn.estimator is not None:
        self.straight_through_sites.add(name)
      elif fn.support.is_discrete:
        raise ValueError(
          f"guide site {name!r} is discrete ({type(fn).__name__}) without a gradient"
          " estimator, so Trace_ELBO would give its parameters no gradient: draw it from"
          " gr_jax.numpyro.OneHotCategorical or Bernoulli with estimator=..., or use"
          " numpyro.infer.TraceGraph_ELBO (score function) or TraceEnum_ELBO (enumeration)."
        )
    elif name in self.straight_through_sites and not (
      ours or isinstance(fn, (dists.BernoulliLogits, dists.BernoulliProbs))
    ):
      # e.g. Categorical takes an index: its log_prob has no gradient in the one-hot value.
      raise ValueError(
        f"model site {name!r} scores the guide's one-hot sample with {type(fn).__name__},"
        " whose log_prob passes no gradient to the estimator: use"
        " gr_jax.numpyro.OneHotCategorical (or Bernoulli) there, with estimator=None."
      )


class Trace_ELBO(numpyro.infer.Trace_ELBO):
  """NumPyro's Trace_ELBO, for guides whose discrete sites carry a gr_jax estimator.

  The loss and its gradient are NumPyro's (this module's docstring states the gradient); this
  class adds checks and drops SVI's warning that Trace_ELBO cannot handle discrete latents:

  * a discrete guide site without an estimator (its parameters would get no gradient) is a
    one-line ``ValueError`` naming the site and the remedies;
  * a model site that scores a straight-through guide sample with a ``log_prob`` that does
    not pass a gradient to the sample (NumPyro's ``Categorical`` takes an index) is a
    ``ValueError`` naming the site.

  Args are NumPyro's (``num_particles``, ``vectorize_particles``, ...).
  """

  can_infer_discrete = True

  def loss_with_mutable_state(self, rng_key, param_map, model, guide, *args, **kwargs):
    sites = set()
    return super().loss_with_mutable_state(
      rng_key,
      param_map,
      _CheckedSites(model, sites, "model"),
      _CheckedSites(guide, sites, "guide"),
      *args,
      **kwargs,
    )
