"""The depth study's report: one stochastic layer against two, each estimator against a reference.

Arms are labelled ``arity``, ``depth`` ("one_layer" / "two_layer") and
``estimator``; each population holds the taus x seeds of the fixed draw. The
report: per arity, tau and estimator the test bound at each depth and two minus
one layer, paired by seed; each estimator against the first (the reference) at
the same depth, paired by seed; the inference networks' gradient variance by
step and layer (mean over seeds); with the ladder, each population's test bound
at M = 1 (the ELBO), 10 and 100 beside its M = 1000 one.
"""

from __future__ import annotations

import json
import pathlib
import statistics

from experiments.studies import records, tables
from experiments.studies.runner import Readings, Report

DEPTHS = ("one_layer", "two_layer")


def _variance(member: records.Member) -> dict[str, dict[int, float]]:
  """layer ("all", "layer1", ...) -> {step: log10 trace of the gradient covariance}."""
  curves = member.curves.get("train", {})
  return {
    (name[len("log10_grad_variance") :].lstrip("_") or "all"): values
    for name, values in curves.items()
    if name.startswith("log10_grad_variance")
  }


def report(
  readings: Readings,
  arities: tuple[int, ...],
  estimators: tuple[str, ...],
  taus: tuple[float, ...],
  steps: int,
  variance_every: int,
) -> Report:
  runs = {}
  for name, run in readings.runs.items():
    labels = readings.arms[name].labels
    runs[labels["arity"], labels["depth"], labels["estimator"]] = run
  reference = estimators[0]
  bounds, against, variance, data = [], [], [], []
  values = lambda run, tau, field: list(run.by_seed(field, tau=tau).values()) if run else []  # noqa: E731
  for arity in arities:
    for tau in taus:
      for estimator in estimators:
        one, two = (
          runs.get((arity, "one_layer", estimator)),
          runs.get((arity, "two_layer", estimator)),
        )
        if one is None and two is None:
          continue
        difference = (
          tables.paired(one.by_seed("test_nll", tau=tau), two.by_seed("test_nll", tau=tau))
          if one and two
          else tables.Paired((), (), ())
        )
        cells = [values(one, tau, "test_nll"), values(two, tau, "test_nll")]
        valid = [values(one, tau, "valid_nll"), values(two, tau, "valid_nll")]
        bounds.append(
          [arity, tau, estimator, tables.spread(cells[0]), tables.spread(cells[1])]
          + [
            tables.spread(difference.differences),
            tables.spread(valid[0]),
            tables.spread(valid[1]),
          ]
        )
        data.append(
          {
            "arity": arity,
            "tau": tau,
            "estimator": estimator,
            "one_layer_test": cells[0],
            "two_layer_test": cells[1],
            "two_minus_one": list(difference.differences),
            "one_layer_valid": valid[0],
            "two_layer_valid": valid[1],
          }
        )
      for depth in DEPTHS:
        base = runs.get((arity, depth, reference))
        for estimator in estimators:
          run = runs.get((arity, depth, estimator))
          if run is None:
            continue
          if estimator != reference and base:
            difference = tables.paired(
              base.by_seed("test_nll", tau=tau), run.by_seed("test_nll", tau=tau)
            )
            against.append(
              [arity, tau, depth, estimator, tables.spread(values(run, tau, "test_nll"))]
              + [
                tables.spread(difference.differences),
                f"{difference.lower} of {len(difference.seeds)}",
              ]
            )
          members = run.select(tau=tau)
          for layer in sorted({k for m in members for k in _variance(m)}):
            means = []
            for step in range(0, steps + 1, variance_every):
              logged = [_variance(m).get(layer, {}).get(step) for m in members]
              logged = [v for v in logged if v is not None]
              means.append(f"{statistics.mean(logged):.2f}" if logged else "-")
            variance.append([arity, tau, depth, estimator, layer, *means])
  step_columns = [f"step {s:,}" for s in range(0, steps + 1, variance_every)]
  text = "\n\n".join(
    [
      "Test bounds (IWAE M = 1000, 500 images), one layer against two, paired by seed:",
      "\n".join(
        tables.markdown_table(
          ["arity", "tau", "estimator", "one layer, test", "two layers, test"]
          + ["two - one (paired)", "one layer, valid", "two layers, valid"],
          bounds,
        )
      ),
      f"Each estimator against {reference} at the same depth, paired by seed:",
      "\n".join(
        tables.markdown_table(
          ["arity", "tau", "depth", "estimator", "test", f"estimator - {reference} (paired)"]
          + [f"below {reference}"],
          against,
        )
      ),
      "log10 trace of the inference networks' gradient covariance (mean over seeds):",
      "\n".join(
        tables.markdown_table(
          ["arity", "tau", "depth", "estimator", "layer", *step_columns], variance
        )
      ),
    ]
  )
  text += "\n" + "\n".join(readings.missing_lines())
  return Report(text.rstrip("\n") + "\n", {"bounds": data})


# M and the draws averaged for each rung below the runs' own M = 1000 bound.
LADDER = ((1, 20), (10, 4), (100, 1))
LADDER_FILE = "ladder.json"  # kept with the records: the ladder's table regenerates from them


def _ladder(run: records.Run) -> dict[int, dict[int, float]]:
  """{member index: {M: test bound}}: from the run's ladder.json, else computed from its
  checkpoint on the run's test images (and written to ladder.json)."""
  path = pathlib.Path(run.workdir) / LADDER_FILE
  if path.is_file():
    saved = json.loads(path.read_text())
    return {int(i): {int(m): b for m, b in rungs.items()} for i, rungs in saved.items()}
  import jax
  import jax.numpy as jnp

  from experiments.vae.evaluation import eval_subset
  from experiments.vae.trained import load_trained

  compiled, ladders = {}, {}
  for member in run.members:
    try:
      config, state, task, data, _ = load_trained(run.workdir, member.index)
    except FileNotFoundError as e:  # e.g. a run read from its records: no checkpoint
      raise records.RecordError(
        f"the ladder needs {run.workdir}'s checkpoints ({e}); train the arm in --out first"
      ) from None
    test = jnp.asarray(
      eval_subset(data["test"], config.num_eval_examples, config.seed), jnp.float32
    )
    ladder = {}
    for num_samples, draws in LADDER:
      if num_samples not in compiled:

        def mean_bound(params, input_mean, x, keys, num_samples=num_samples):
          model = task.model(params)
          bound = lambda key: model.iwae_bound(
            x, key, num_samples, config.iwae_chunk_size, input_mean
          )
          return jnp.mean(jax.vmap(bound)(keys))

        compiled[num_samples] = jax.jit(mean_bound)
      keys = jax.vmap(jax.random.key)(jnp.arange(draws))  # draw d with key(d)
      ladder[num_samples] = -float(
        compiled[num_samples](state["params"], state["input_mean"], test, keys)
      )
    ladders[member.index] = {**ladder, 1000: member.value("test_nll")}
  path.write_text(json.dumps(ladders, indent=1) + "\n")
  return ladders


def ladder_table(readings: Readings, estimators: tuple[str, ...], taus: tuple[float, ...]) -> str:
  """The test bound's ladder -ELBO (M = 1, 20 draws) >= IWAE-10 (4 draws) >= IWAE-100 >=
  IWAE-1000 per population and tau, and the ELBO-to-IWAE-1000 gap."""
  rows = []
  for name, run in readings.runs.items():
    labels = readings.arms[name].labels
    ladders = _ladder(run)
    for tau in taus:
      rungs = [ladders[m.index] for m in run.select(tau=tau) if m.index in ladders]
      if rungs:
        cells = [tables.spread([r[k] for r in rungs]) for k in (1, 10, 100, 1000)]
        gap = tables.spread([r[1] - r[1000] for r in rungs])
        rows.append([labels["arity"], tau, labels["depth"], labels["estimator"], *cells, gap])
  header = ["arity", "tau", "depth", "estimator", "-ELBO (M = 1)", "IWAE-10", "IWAE-100"]
  header += ["IWAE-1000", "ELBO - IWAE-1000 gap"]
  return "\n".join(
    [
      "Test bounds at each M (nats, 500 images; mean ± sd over seeds), from the checkpoints:",
      "",
      *tables.markdown_table(header, rows),
    ]
  )
