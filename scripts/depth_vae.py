"""Does Gumbel-Rao's advantage survive a second stochastic layer? One layer against two, paired.

For each arity (``--arities``) and estimator (``--estimators``), the one-layer
model (``configs/vae_<n>ary.py``, the Concrete 240H~784V) and the two-layer
model (``configs/vae_two_layer_<n>ary.py``, 240H~240H~784V) are trained at the
same fixed draws and seeds: learning rate 5e-3, momentum 0.4, no weight decay
(the one-layer ST-GS selection of Table 2) at each of ``--taus`` (0.64, that
selection's; 0.25, where GR's one-layer gains were largest), seeds
``--seeds``. One population per (arity, depth, estimator): the taus x seeds
(``population.search='lists'``) in ``OUT/<n>ary/<depth>/<estimator>``; finished
populations are read, interrupted ones resume, so the command can be rerun
until it completes (``--run=false`` only tabulates what has finished). The
bounds are the IWAE bound with M = 1000 on fixed 500 validation and 500 test
images; the inference networks' gradient variance is measured at steps 0,
10,000, ..., (per layer in the two-layer model).

``OUT/depth.md`` and ``OUT/depth.json``: per arity, draw and estimator, the
test bound at each depth and two minus one layer, paired by seed; each
estimator against ST-GS at the same depth, paired by seed; the gradient
variance by step and layer; with ``--ladder``, the test bound's ladder
-ELBO (M = 1, the mean of 20 draws) >= IWAE-10 (4 draws) >= IWAE-100 >=
IWAE-1000 and the ELBO-to-IWAE-1000 gap, recomputed from the checkpoints.

  python scripts/depth_vae.py --out=runs/depth --data_dir=../shared/data/binarized_mnist
"""

import _clone  # noqa: F401, I001  (the clone's experiments/ and configs/ on sys.path)
import json
import pathlib
import statistics

import formatting
import launch
from absl import app, flags

_OUT = flags.DEFINE_string("out", None, "Directory for the runs and the tables.", required=True)
_RECORDS = launch.define_records_flag("records/depth")
_DATA_DIR = flags.DEFINE_string("data_dir", "", "The binarized MNIST directory (config.data_dir).")
_ARITIES = flags.DEFINE_list("arities", ["16", "2"], "Arities (2, 4, 8, 16).")
_ESTIMATORS = flags.DEFINE_list(
  "estimators",
  ["st_gs", "gr_mc100", "gr_mc10", "zgr", "reinmax"],
  "Estimators (ST-GS first: the others are compared with it).",
)
_TAUS = flags.DEFINE_list("taus", ["0.64", "0.25"], "The fixed draws' temperatures.")
_SEEDS = flags.DEFINE_list("seeds", ["0", "1", "2"], "Seeds (the same at every depth).")
_STEPS = flags.DEFINE_integer("steps", 50_000, "Training steps (the paper's protocol: 50,000).")
_VARIANCE_EVERY = flags.DEFINE_integer(
  "variance_every", 10_000, "Steps between gradient-variance measurements (and at step 0)."
)
_RUN = flags.DEFINE_bool("run", True, "Train what is missing (false: only tabulate).")
_LADDER = flags.DEFINE_bool(
  "ladder",
  False,
  "Also each finished population's test bound at M = 1 (the ELBO), 10 and 100 beside M = 1000:"
  " where a model's IWAE gain comes from (minutes per population on a CPU).",
)
_SET = flags.DEFINE_multi_string("set", [], "FIELD=VALUE overrides for every run.")

DEPTHS = {
  "one_layer": "configs/vae_{arity}ary.py",
  "two_layer": "configs/vae_two_layer_{arity}ary.py",
}
DRAW = ["learning_rate=0.005", "momentum=0.4", "weight_decay=0.0"]


def _overrides(estimator: str) -> list[str]:
  overrides = [
    *DRAW,
    f"estimator={estimator}",
    f"num_steps={_STEPS.value}",
    "population.search=lists",
    f"population.tau=({','.join(_TAUS.value)},)",
    f"population.seed=({','.join(_SEEDS.value)},)",
    "num_eval_samples=1000",
    "num_eval_examples=500",
    f"variance_every={_VARIANCE_EVERY.value}",
    "eval_every=0",
    "log_every=1000",
    *_SET.value,
  ]
  return overrides + ([f"data_dir={_DATA_DIR.value}"] if _DATA_DIR.value else [])


def _members(workdir: pathlib.Path) -> dict[tuple[float, int], dict] | None:
  """A finished population's members by (tau, seed), with their variance measurements."""
  try:
    results = json.loads((workdir / "results.json").read_text())
  except (OSError, ValueError):
    return None
  members = {(m["tau"], m["seed"]): dict(m, variance={}) for m in results["members"]}
  by_index = {m["member"]: m for m in members.values()}
  for line in (workdir / "metrics.jsonl").read_text().splitlines():
    record = json.loads(line)
    for name, value in record.items():
      if name.startswith("log10_grad_variance") and record.get("member") in by_index:
        layer = name[len("log10_grad_variance") :].lstrip("_") or "all"
        by_index[record["member"]]["variance"].setdefault(layer, {})[record["step"]] = value
  return members


def _paired(a: dict, b: dict, tau: float, field: str) -> list[float]:
  """b - a for each seed that both populations hold at ``tau``."""
  return [b[tau, s][field] - a[tau, s][field] for (t, s) in sorted(a) if t == tau and (t, s) in b]


def _values(members: dict, tau: float, field: str) -> list[float]:
  return [m[field] for (t, _), m in sorted(members.items()) if t == tau]


# M and the draws averaged for each rung below the runs' own M = 1000 bound.
LADDER = ((1, 20), (10, 4), (100, 1))


def _ladder(workdir: pathlib.Path, members: dict) -> None:
  """Adds ``ladder`` ({M: test bound}, nats) to each member: its checkpoint's test bound at each
  M of LADDER on the run's test images, and its own M = 1000 one."""
  import jax
  import jax.numpy as jnp

  from experiments.vae.evaluation import eval_subset
  from experiments.vae.trained import load_trained

  compiled = {}  # one compilation per rung for the population's members (they share the model)
  for member in members.values():
    try:
      config, state, task, data, _ = load_trained(
        workdir, member["member"], data_dir=_DATA_DIR.value
      )
    except FileNotFoundError as e:  # e.g. a population read from its records: no checkpoint
      raise SystemExit(
        f"error: --ladder needs {workdir}'s trained checkpoints: {e} Delete {workdir} to train"
        " it again, or run without --ladder."
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
      bound = compiled[num_samples](state["params"], state["input_mean"], test, keys)
      ladder[num_samples] = -float(bound)
    member["ladder"] = {**ladder, 1000: member["test_nll"]}


def main(argv):
  del argv
  out = pathlib.Path(_OUT.value)
  runs: dict[tuple[str, str, str], dict | None] = {}
  for arity in _ARITIES.value:
    for estimator in _ESTIMATORS.value:
      for depth, config in DEPTHS.items():
        workdir = out / f"{arity}ary" / depth / estimator
        if _RUN.value:
          records = launch.records_for(_RECORDS.value, out, workdir)
          launch.train(config.format(arity=arity), workdir, _overrides(estimator), records)
        runs[arity, depth, estimator] = _members(workdir)
        if _LADDER.value and runs[arity, depth, estimator]:
          _ladder(workdir, runs[arity, depth, estimator])
  taus = [float(t) for t in _TAUS.value]
  bounds = [
    "| arity | tau | estimator | one layer, test | two layers, test | two - one (paired) |"
    " one layer, valid | two layers, valid |",
    "|---|---|---|---|---|---|---|---|",
  ]
  against = [
    f"| arity | tau | depth | estimator | test | estimator - {_ESTIMATORS.value[0]} (paired) |"
    f" below {_ESTIMATORS.value[0]} |",
    "|---|---|---|---|---|---|---|",
  ]
  variance = [
    "| arity | tau | depth | estimator | layer | "
    + " | ".join(f"step {s:,}" for s in range(0, _STEPS.value + 1, _VARIANCE_EVERY.value))
    + " |",
    "|---|---|---|---|---|" + "---|" * (_STEPS.value // _VARIANCE_EVERY.value + 1),
  ]
  ladder = [
    "| arity | tau | depth | estimator | -ELBO (M = 1) | IWAE-10 | IWAE-100 | IWAE-1000 |"
    " ELBO - IWAE-1000 gap |",
    "|---|---|---|---|---|---|---|---|---|",
  ]
  table = []
  spread = lambda values: formatting.spread(values) if values else "-"  # noqa: E731
  for arity in _ARITIES.value:
    for tau in taus:
      for estimator in _ESTIMATORS.value:
        one, two = runs[arity, "one_layer", estimator], runs[arity, "two_layer", estimator]
        if one is None and two is None:
          continue
        cells = [_values(m, tau, "test_nll") if m else [] for m in (one, two)]
        difference = _paired(one, two, tau, "test_nll") if one and two else []
        valid = [_values(m, tau, "valid_nll") if m else [] for m in (one, two)]
        bounds.append(
          f"| {arity} | {tau} | {estimator} | {spread(cells[0])} | {spread(cells[1])} |"
          f" {spread(difference)} | {spread(valid[0])} | {spread(valid[1])} |"
        )
        table.append(
          {
            "arity": int(arity),
            "tau": tau,
            "estimator": estimator,
            "one_layer_test": cells[0],
            "two_layer_test": cells[1],
            "two_minus_one": difference,
            "one_layer_valid": valid[0],
            "two_layer_valid": valid[1],
          }
        )
      for depth in DEPTHS:
        reference = runs[arity, depth, _ESTIMATORS.value[0]]
        for estimator in _ESTIMATORS.value:
          members = runs[arity, depth, estimator]
          if members is None:
            continue
          if estimator != _ESTIMATORS.value[0] and reference:
            difference = _paired(reference, members, tau, "test_nll")
            below = f"{sum(d < 0 for d in difference)} of {len(difference)}"
            test = spread(_values(members, tau, "test_nll"))
            against.append(
              f"| {arity} | {tau} | {depth} | {estimator} | {test} | {spread(difference)} |"
              f" {below} |"
            )
          rungs = [
            m["ladder"] for (t, _), m in sorted(members.items()) if t == tau and "ladder" in m
          ]
          if rungs:
            cells = [spread([r[k] for r in rungs]) for k in (1, 10, 100, 1000)]
            gap = spread([r[1] - r[1000] for r in rungs])
            ladder.append(
              f"| {arity} | {tau} | {depth} | {estimator} | {' | '.join(cells)} | {gap} |"
            )
          for layer in sorted({k for m in members.values() for k in m["variance"]}):
            steps = range(0, _STEPS.value + 1, _VARIANCE_EVERY.value)
            means = []
            for step in steps:
              values = [
                m["variance"].get(layer, {}).get(step) for (t, _), m in members.items() if t == tau
              ]
              values = [v for v in values if v is not None]
              means.append(f"{statistics.mean(values):.2f}" if values else "-")
            variance.append(
              f"| {arity} | {tau} | {depth} | {estimator} | {layer} | {' | '.join(means)} |"
            )
  text = "\n\n".join(
    [
      "Test bounds (IWAE M = 1000, 500 images), one layer against two, paired by seed:",
      "\n".join(bounds),
      f"Each estimator against {_ESTIMATORS.value[0]} at the same depth, paired by seed:",
      "\n".join(against),
      "log10 trace of the inference networks' gradient covariance (mean over seeds):",
      "\n".join(variance),
    ]
    + (
      [
        "Test bounds at each M (nats, 500 images; mean ± sd over seeds), from the checkpoints:",
        "\n".join(ladder),
      ]
      if _LADDER.value
      else []
    )
  )
  out.mkdir(parents=True, exist_ok=True)
  (out / "depth.md").write_text(text + "\n")
  (out / "depth.json").write_text(
    json.dumps(
      {
        "bounds": table,
        "runs": {
          "/".join(key): list(members.values()) if members else None
          for key, members in runs.items()
        },
      },
      indent=1,
    )
    + "\n"
  )
  print(text)


if __name__ == "__main__":
  app.run(main)
