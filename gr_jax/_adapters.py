"""What the NumPyro and distrax adapters share: which estimators can be a sample's gradient."""

from __future__ import annotations

from gr_jax import estimators


def straight_through_estimator(name: str | None) -> estimators.Estimator | None:
  """The registry's estimator for ``name``, if it can be a discrete site's gradient.

  Args:
    name: a name of :func:`gr_jax.estimators.get` whose estimator returns an exact one-hot and
      evaluates the loss once ("st", "st_gs", "gr_mc<K>", "gr_qmc<K>", "gr_exact", "zgr",
      "reinmax", "gst", "gst_p", or an import path of one's own), or None (no gradient
      through the sample).

  Returns:
    The :class:`gr_jax.estimators.Estimator`, or None for None.

  Raises:
    ValueError: one line naming ``estimator``, the reason and the allowed names, for GS,
      REINFORCE, RLOO, DisARM and ``<name>_x<M>``; the registry's error for unknown names.
  """
  if name is None:
    return None
  estimator = estimators.get(name)
  refusals = (
    (estimator.relaxed, "its sample is a relaxed point of the simplex, not a one-hot"),
    (
      estimator.score_function,
      "it is a score-function estimator: use NumPyro's own Categorical or Bernoulli with"
      " numpyro.infer.TraceGraph_ELBO, which adds the score term",
    ),
    (
      estimator.multi_sample,
      "it evaluates the loss itself (an objective, not a reparameterization): call"
      f" gr_jax.estimators.{estimator.fn.__name__}(key, logits, f=loss) with your loss",
    ),
    (
      estimator.draws > 1,
      f"it averages {estimator.draws} draws per step: use the single-draw name with"
      f" Trace_ELBO(num_particles={estimator.draws})",
    ),
  )
  for refused, reason in refusals:
    if refused:
      raise ValueError(
        f"estimator={name!r} cannot be a distribution's gradient: {reason}. Allowed:"
        f" {', '.join(estimators.name_patterns(straight_through=True))}, an import path, or"
        " None."
      )
  return estimator
