"""The VAE's evaluation: the members' IWAE bounds (:class:`Scorer`), the final evaluation and model
selection, and the periodic measurements (the encoder gradient's variance and MSE, a validation
bound) as evaluators."""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
from absl import logging
from ml_collections import ConfigDict

from experiments import bookkeeping, population, reporting, rng, search
from experiments.evaluators import Evaluator, Values, describe
from experiments.vae.task import VAETask

# Model selection (the paper's): the member with the lowest validation bound. The final
# evaluation and results.json must select the same member.
SELECTION = ("valid_nll", "min")


class Scorer:
  """The members' IWAE bounds and gradient measurements (jitted over the population)."""

  report_every_seconds = 30.0

  def __init__(self, task: VAETask, trainer: population.Trainer):
    self.task, self.trainer = task, trainer
    self._iwae = {}
    self._measure = {}
    self.check_stop = lambda: None  # between eval batches: raise to stop (Run.check_stop)

  def nll(
    self,
    state,
    images: np.ndarray,
    evaluation: int,
    num_samples: int,
    label: str = "",
    member: int | None = None,
    progress: bookkeeping.EvaluationProgress | None = None,
  ) -> np.ndarray:
    """``[P]`` mean negative IWAE bounds (nats) over ``images``, in eval batches.

    With ``member`` (an index into the population), that member's alone, as a
    ``[1]`` array. With a ``label``, a progress line (images done, rate, ETA)
    every ``report_every_seconds`` (30). With ``progress``, the running sums are
    saved there and an interrupted evaluation resumes from them.
    """
    one = member is not None
    if (num_samples, one) not in self._iwae:
      fn = lambda member, seed, x, evaluation, start: self.task.iwae(
        member, seed, x, evaluation, start, num_samples
      )
      self._iwae[num_samples, one] = jax.jit(fn if one else self.trainer.parallel(fn, shared=3))
    iwae = self._iwae[num_samples, one]
    members, seeds = state["members"], state["seed"]
    if one:
      members, seeds = jax.tree.map(lambda a: a[member], members), seeds[member]
    size = self.task.config.eval_batch_size
    count = 1 if one else self.trainer.size
    key = f"evaluation {evaluation}, M={num_samples}, " + (f"member {member}" if one else "all")
    first, total = (
      progress.resume(key, len(images), size, count) if progress else (0, np.zeros(count))
    )

    def save(done: int, force: bool = False) -> None:
      if progress is not None:
        progress.save(key, len(images), size, done, total, force)

    last_report = time.perf_counter()
    warm = None  # (time, images) after the first batch, which compiles: the rate leaves it out
    for start in range(first, len(images), size):
      try:
        self.check_stop()
      except bookkeeping.Interrupted:
        save(start, force=True)
        raise
      x = jnp.asarray(images[start : start + size], jnp.float32)
      bounds = iwae(
        members, seeds, x, jnp.asarray(evaluation, jnp.int32), jnp.asarray(start, jnp.int32)
      )
      total += population.to_host(bounds).astype(np.float64).reshape(count, -1).sum(axis=1)
      now, done = time.perf_counter(), start + len(x)
      save(done, force=done == len(images))
      if warm is None:
        warm = (now, done)
      elif label and now - last_report > self.report_every_seconds:
        rate = (done - warm[1]) / (now - warm[0])
        who = f"member {member}" if one else f"{count} member{'s' * (count > 1)}"
        logging.info(
          "evaluating %s (M=%d, %s): %d/%d images, %.1f images/s, ETA %s",
          label,
          num_samples,
          who,
          done,
          len(images),
          rate,
          bookkeeping.duration((len(images) - done) / rate),
        )
        last_report = now
    return -total / len(images)

  def gradient_measurements(self, state, x, step: int, mse: bool) -> dict[str, np.ndarray]:
    if mse not in self._measure:
      fn = lambda member, tau, seed, x, step: self.task.gradient_measurements(
        member, tau, seed, x, step, mse
      )
      self._measure[mse] = jax.jit(self.trainer.parallel(fn, shared=2))
    out = self._measure[mse](
      state["members"], state["hyperparameters"]["tau"], state["seed"], x, jnp.asarray(step)
    )
    return population.to_host(out)


def eval_subset(images: np.ndarray, count: int, seed: int) -> np.ndarray:
  """All images, or a fixed random subset (the splits are sorted by class)."""
  if count < 0 or count >= len(images):
    return images
  return images[np.random.default_rng(seed).permutation(len(images))[:count]]


def selection_samples(config: ConfigDict) -> int:
  """The IWAE M with which every member is scored (``num_eval_samples`` unless a cheaper one is
  set)."""
  if search.population_size(config) > 1 and config.selection_eval_samples:
    return config.selection_eval_samples
  return config.num_eval_samples


class FinalEvaluationEstimate:
  """Sets the progress line's estimate of the final evaluation from a timed evaluation of the
  population (called with its seconds, images and M): the IWAE cost is linear in images x M x
  members."""

  def __init__(self, config: ConfigDict, size: int, valid, test, run: population.Run):
    self.config, self.size, self.run = config, size, run
    self.images, self.test_images = len(valid) + len(test), len(test)

  def __call__(self, seconds: float, num_images: int, num_samples: int) -> None:
    per_sample = seconds / (num_images * num_samples * self.size)
    samples = selection_samples(self.config)
    num_eval_samples = self.config.num_eval_samples
    per_image = self.size * samples + (num_eval_samples if samples != num_eval_samples else 0)
    extra = self.size * sum(self.config.extra_test_samples) * self.test_images
    self.run.progress.final_seconds = per_sample * (self.images * per_image + extra)


def final_evaluation(config, scorer, state, chosen, valid, test, run) -> list[dict]:
  """The ``members`` reports: every member's IWAE bounds on valid and test (and on test with each
  M of ``extra_test_samples``: ``test_nll_M<M>``).

  With ``selection_eval_samples`` (and several members) every member is scored
  with that M, and the one best on validation is evaluated again with
  ``num_eval_samples`` (fresh samples); its report then holds those numbers
  under ``final``, which results.json reports for the selected member.
  """
  size, samples = len(chosen), selection_samples(config)
  logging.info(
    "final evaluation: IWAE bound with M=%d on %d valid and %d test images%s",
    samples,
    len(valid),
    len(test),
    ""
    if samples == config.num_eval_samples
    else f"; then M={config.num_eval_samples} for the member selected on valid",
  )
  # Hours at M=1000 on a CPU: an interrupted evaluation resumes at its last saved batch.
  progress = bookkeeping.EvaluationProgress(run.path, run.last_step)
  nll = {
    "valid": scorer.nll(
      state, valid, rng.Evaluation.FINAL_VALID, samples, "valid", progress=progress
    ),
    "test": scorer.nll(state, test, rng.Evaluation.FINAL_TEST, samples, "test", progress=progress),
  }
  for split in ("valid", "test"):
    run.write(
      run.last_step, split, {"nll": nll[split], "num_samples": np.full(size, samples)}, final=True
    )
  extra = {}
  for num_samples in config.extra_test_samples:
    extra[num_samples] = scorer.nll(
      state,
      test,
      rng.extra_test(num_samples),
      num_samples,
      f"test, M={num_samples}",
      progress=progress,
    )
    run.write(
      run.last_step,
      "test",
      {"nll": extra[num_samples], "num_samples": np.full(size, num_samples)},
      final=True,
    )
  diverged_at = population.to_host(state["diverged_at"])
  reports = [
    reporting.member_report(
      member,
      {
        "valid_nll": float(nll["valid"][i]),
        "test_nll": float(nll["test"][i]),
        **{f"test_nll_M{m}": float(values[i]) for m, values in extra.items()},
        "final_tau": float(scorer.task.tau_at(member.hyperparameters["tau"], run.last_step)),
      },
      int(diverged_at[i]),
    )
    for i, member in enumerate(chosen)
  ]
  selected = reporting.select(reports, *SELECTION)
  if samples != config.num_eval_samples and selected is not None:
    i = reports.index(selected)
    final = {"num_eval_samples": config.num_eval_samples}
    for evaluation, split, images in (
      (rng.Evaluation.SELECTED_VALID, "valid", valid),
      (rng.Evaluation.SELECTED_TEST, "test", test),
    ):
      final[f"{split}_nll"] = float(
        scorer.nll(
          state, images, evaluation, config.num_eval_samples, split, member=i, progress=progress
        )[0]
      )
      run.writer.write(
        run.last_step,
        split,
        member=selected["member"],
        final=True,
        nll=final[f"{split}_nll"],
        num_samples=config.num_eval_samples,
      )
    selected["final"] = final
  progress.clear()
  return reports


@dataclasses.dataclass
class Inputs:
  """What the VAE's evaluators measure with.

  Attributes:
    scorer: the population's jitted IWAE bounds and gradient measurements
      (:class:`Scorer`).
    valid: the validation images ``[N, 784]``.
    fixed_batch: the training batch the gradients are measured on ``[B, 784]``.
    timed_evaluation: called with the seconds an IWAE evaluation of the
      population took, its number of images and its M (the progress line's
      estimate of the final evaluation).
  """

  scorer: Any
  valid: np.ndarray
  fixed_batch: jax.Array
  timed_evaluation: Callable[[float, int, int], None]


class GradientMeasurements(Evaluator):
  """The encoder gradient's variance every ``variance_every`` steps and its MSE against REINFORCE
  every ``mse_every`` steps (the paper's Figure 2), on a fixed batch, ``variance_draws`` draws;
  also at step 0 (the untrained model). With several stochastic layers, each layer's inference
  network apart too."""

  name = "encoder gradient"
  at_start = True

  def __init__(self, config: ConfigDict, inputs: Inputs):
    super().__init__(math.gcd(config.variance_every, config.mse_every))
    self.config, self.inputs = config, inputs

  def _mse_due(self, step: int) -> bool:
    return bool(self.config.mse_every) and step % self.config.mse_every == 0

  def due(self, step: int, last_step: int) -> bool:
    variance = self.config.variance_every and step % self.config.variance_every == 0
    return bool(variance) or self._mse_due(step)

  def run(self, step: int, state: dict) -> Values:
    mse = self._mse_due(step)
    logging.info(
      "step %d: measuring the encoder gradient's variance%s (%d draws)",
      step,
      " and MSE" * mse,
      self.config.variance_draws,
    )
    return {
      "train": self.inputs.scorer.gradient_measurements(state, self.inputs.fixed_batch, step, mse)
    }


class ValidationBound(Evaluator):
  """The IWAE bound on the validation images with ``periodic_eval_samples`` samples every
  ``eval_every`` steps (not at the last step: the final evaluation follows)."""

  name = "validation"
  at_last_step = False

  def __init__(self, config: ConfigDict, inputs: Inputs):
    super().__init__(config.eval_every)
    self.num_samples, self.inputs = config.periodic_eval_samples, inputs

  def run(self, step: int, state: dict) -> Values:
    t0 = time.perf_counter()
    nll = self.inputs.scorer.nll(state, self.inputs.valid, step, self.num_samples, "valid")
    self.inputs.timed_evaluation(time.perf_counter() - t0, len(self.inputs.valid), self.num_samples)
    return {"valid": {"nll": nll, "num_samples": np.full(len(nll), self.num_samples)}}

  def summary(self, values: Values) -> str:
    return f"nll (M={self.num_samples}) {describe(values['valid']['nll'])}"
