"""Runs a grid of configs (estimators x seeds [x extra values]) and writes the table.

Configs that differ only in data-valued fields — the seed and the
hyperparameters ``learning_rate``, ``momentum``, ``weight_decay``, ``tau`` —
are trained together as one population (experiments/population.py): one
``python -m experiments.main`` per estimator (and per value of any other swept
field) in its workdir ``OUT/<estimator>[_<field>=<value>]``, with
``population.search='lists'``. Populations that already wrote
``results.json`` are skipped and interrupted ones resume, so the whole grid can
be restarted. At the end the table (mean and standard deviation over seeds of
each numeric result, per setting) is printed and written to ``OUT/table.md``
and ``OUT/table.json``.

  python scripts/run_grid.py --config=configs/listops_L10.py --out=runs/listops \
      --estimators=st_gs,gr_mc10 --seeds=0,1,2 --sweep=learning_rate=0.1,0.3,0.5,1.0 \
      --metrics=valid_accuracy,test_accuracy --select_by=valid_accuracy
"""

import _clone  # noqa: F401, I001  (the clone's experiments/ and configs/ on sys.path)
import concurrent.futures
import itertools
import json
import pathlib
import statistics

import formatting
import launch
import flag_checks
from absl import app, flags

from experiments import search

_CONFIG = flags.DEFINE_string("config", None, "Config file.", required=True)
_OUT = flags.DEFINE_string("out", None, "Directory for the runs and the table.", required=True)
_ESTIMATORS = flags.DEFINE_list("estimators", ["st_gs", "gr_mc10", "gr_mc100"], "Estimators.")
_SEEDS = flags.DEFINE_list("seeds", ["0", "1", "2"], "Seeds.")
_SET = flags.DEFINE_multi_string("set", [], "FIELD=VALUE config overrides for every run.")
_SWEEP = flags.DEFINE_multi_string(
  "sweep", [], "FIELD=V1,V2,... : extra grid axes (e.g. tau=0.01,0.1 or learning_rate=0.1,0.5)."
)
_METRICS = flags.DEFINE_list("metrics", ["valid_nll", "test_nll"], "results.json keys to tabulate.")
_JOBS = flags.DEFINE_integer("jobs", 1, "Runs at a time.")
_SELECT_BY = flags.DEFINE_string(
  "select_by",
  "",
  "If set (e.g. valid_accuracy), also tabulate, per estimator, the sweep"
  " setting with the best mean of this metric (model selection on validation).",
)
_SELECT_MODE = flags.DEFINE_enum("select_mode", "max", ["max", "min"], "Best = max or min.")


# Fields a population varies per member (trained together); the others are one population each.
DATA_FIELDS = tuple(search.HYPERPARAMETERS)
flags.register_validator(
  _SWEEP,
  lambda sweeps: all("=" in s and s.split("=", 1)[1] for s in sweeps),
  message="each --sweep must be FIELD=VALUE1,VALUE2,... (e.g. --sweep=tau=0.5,1.0)",
)
flag_checks.numbers(_SEEDS, int, minimum=0)
flag_checks.at_least(_JOBS, 1)
flag_checks.estimator_names(_ESTIMATORS)


def _run(workdir: pathlib.Path, overrides: list[str]) -> dict:
  launch.train(_CONFIG.value, workdir, overrides)
  return json.loads((workdir / "results.json").read_text())


def _as_list(values: list[str]) -> str:
  return "(" + ",".join(values) + ",)"


def main(argv):
  del argv
  out = pathlib.Path(_OUT.value)
  sweeps = [(s.split("=", 1)[0], s.split("=", 1)[1].split(",")) for s in _SWEEP.value]
  data_sweeps = [(f, v) for f, v in sweeps if f in DATA_FIELDS]
  program_sweeps = [(f, v) for f, v in sweeps if f not in DATA_FIELDS]
  population_lists = [f"population.{f}={_as_list(v)}" for f, v in data_sweeps]
  population_lists.append(f"population.seed={_as_list(_SEEDS.value)}")
  jobs = {}
  with concurrent.futures.ThreadPoolExecutor(_JOBS.value) as pool:
    for estimator, *values in itertools.product(_ESTIMATORS.value, *[v for _, v in program_sweeps]):
      setting = tuple(f"{name}={value}" for (name, _), value in zip(program_sweeps, values))
      name = "_".join([estimator, *setting])
      overrides = [
        *_SET.value,
        f"estimator={estimator}",
        *setting,
        "population.search=lists",
        *population_lists,
      ]
      jobs[(estimator, setting)] = pool.submit(_run, out / name, overrides)
  rows = {}
  for (estimator, setting), job in jobs.items():
    for member in job.result()["members"]:
      data_setting = tuple(f"{f}={member[f]:g}" for f, _ in data_sweeps)
      rows.setdefault((estimator, setting + data_setting), []).append(member)
  table = []
  lines = [
    f"config: {_CONFIG.value}; overrides: {' '.join(_SET.value) or '-'}",
    "",
    "| estimator | setting | seeds | " + " | ".join(_METRICS.value) + " |",
    "|---|---|---|" + "---|" * len(_METRICS.value),
  ]
  for (estimator, setting), results in rows.items():
    entry = {"estimator": estimator, "setting": list(setting), "seeds": len(results)}
    cells = []
    for metric in _METRICS.value:
      values = [float("nan") if r[metric] is None else r[metric] for r in results]  # None: diverged
      mean = statistics.mean(values)
      std = statistics.stdev(values) if len(values) > 1 else 0.0
      entry[metric] = {"mean": mean, "std": std, "values": values}
      cells.append(formatting.spread(values))
    table.append(entry)
    lines.append(
      f"| {estimator} | {' '.join(setting) or '-'} | {formatting.seeds(len(results))} | "
      + " | ".join(cells)
      + " |"
    )
  if _SELECT_BY.value:
    choose = max if _SELECT_MODE.value == "max" else min
    lines += ["", f"selected per estimator by mean {_SELECT_BY.value} ({_SELECT_MODE.value}):", ""]
    lines += lines[2:4]
    for estimator in _ESTIMATORS.value:
      best = choose(
        (e for e in table if e["estimator"] == estimator),
        key=lambda e: e[_SELECT_BY.value]["mean"],
      )
      best["selected"] = True
      cells = [formatting.spread(best[m]["values"], 4) for m in _METRICS.value]
      lines.append(
        f"| {estimator} | {' '.join(best['setting']) or '-'} | {formatting.seeds(best['seeds'])} | "
        + " | ".join(cells)
        + " |"
      )
  (out / "table.json").write_text(json.dumps(table, indent=2) + "\n")
  (out / "table.md").write_text("\n".join(lines) + "\n")
  print("\n".join(lines))


if __name__ == "__main__":
  app.run(main)
