"""Canned records (config.json, results.json, metrics.jsonl) for the studies' tests: no training."""

import json
import pathlib

CONFIG = {
  "experiment": "vae",
  "estimator": "st_gs",
  "model": "bernoulli_nonlinear",
  "dataset": "fashion_mnist",
  "binarization": "dynamic",
  "batch_size": 50,
  "optimizer": "adam",
  "learning_rate": 1e-4,
  "prior_learning_rate": 0.01,
  "tau": 1.0,
  "num_steps": 200,
  "log_every": 100,
  "num_eval_samples": 100,
  "extra_test_samples": [1000],
  "data_dir": "/somewhere/fashion_mnist",
}


def write_run(
  workdir: pathlib.Path, members, *, steps: int = 200, member_results=(), **config
) -> pathlib.Path:
  """A finished population: ``members`` are (seed, train curve {step: neg_elbo}, variances
  {step: log10 var}, test bound, test bound at M = 1000); ``member_results``, one dict per member
  when given, adds fields to each member's results (e.g. a search's ``tau``)."""
  workdir.mkdir(parents=True)
  (workdir / "config.json").write_text(json.dumps({**CONFIG, "num_steps": steps, **config}))
  extra = list(member_results) or [{}] * len(members)
  entries, lines = [], []
  for i, ((seed, curve, variance, test, test_1000), more) in enumerate(
    zip(members, extra, strict=True)
  ):
    entries.append(
      {"member": i, "seed": seed, "test_nll": test, "test_nll_M1000": test_1000, **more}
    )
    for step, value in variance.items():
      lines.append({"step": step, "split": "train", "member": i, "log10_grad_variance": value})
    for step, value in curve.items():
      lines.append({"step": step, "split": "train", "member": i, "neg_elbo": value, "kl": 1.0})
    lines.append({"step": steps, "split": "test", "member": i, "nll": test, "final": True})
  (workdir / "results.json").write_text(json.dumps({"steps": steps, "members": entries}))
  (workdir / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
  return workdir


def simple_run(workdir: pathlib.Path, seeds=(0, 1), steps: int = 200, **config) -> pathlib.Path:
  """A run whose every member has test bound 100 + seed and a curve to the last step."""
  members = [(s, {steps // 2: 110.0 + s, steps: 100.0 + s}, {}, 100.0 + s, 99.0 + s) for s in seeds]
  return write_run(workdir, members, steps=steps, **config)
