"""Runs the paper's protocol for its Table 1 (ListOps) or Table 2 (VAE) and writes the table.

Table 1 (appendix D.3): for each L, tau, estimator (and gradient clipping
setting: the paper has none, ``--clip=5`` is our variant), one population of
the learning-rate grid {0.1, ..., 1.0} x ``--seeds`` seeds, plain SGD, weight
decay 1e-4, batch size L, 10 epochs. Per estimator the learning rate with the
best mean validation accuracy over seeds is selected, and its test accuracy is
reported as mean ± standard deviation over the seeds (a diverged member is a
result: it stays in the mean).

Table 2 (appendix D.2): for each arity, batch size and estimator, one
population of ``--draws`` random-search draws (learning rate, momentum, weight
decay, tau from the paper's sets), 50,000 steps, IWAE bound with M = 5000; the
member with the best validation bound is reported with its test bound.

Each population is ``python -m experiments.main`` in
``OUT/<setting>/<estimator>`` (log in ``log.txt``): finished ones are read,
interrupted ones resume, so the command can be rerun until it completes, and
a finished one continues from its last checkpoint when ``--set=num_steps=``
grows (evaluation fields such as ``num_eval_samples`` may change too). With
``--records=DIR`` each finished population's records (config, results,
metrics, summary; no checkpoints) are kept in ``DIR`` in the same layout, and
a fresh clone reads a kept population from them instead of retraining it.
``OUT/table<N>.md`` (and ``.json``; ``--name`` renames them) lists, per cell, the paper's number and
ours, the selected hyperparameters, the device, the wall time and every
departure from the paper's protocol (``--set`` overrides, fewer seeds, draws
or learning rates, clipping).

  python scripts/reproduce.py --table=1 --out=runs/table1 --data_dir=../shared/data/listops
  python scripts/reproduce.py --table=2 --out=runs/table2 --data_dir=../shared/data/binarized_mnist
"""

import _clone  # noqa: F401, I001  (the clone's experiments/ and configs/ on sys.path)
from experiments import start_up_signals

start_up_signals.quit_while_loading()  # first, before jax loads

import datetime
import json
import pathlib
import re
import statistics
import sys

import flag_checks
import formatting
import launch
from absl import app, flags

from experiments.listops import experiment as listops

_TABLE = flags.DEFINE_enum(
  "table", None, ["1", "2"], "The paper's table to reproduce.", required=True
)
_OUT = flags.DEFINE_string(
  "out", None, "Directory for the populations and the table.", required=True
)
_RECORDS = launch.define_records_flag("records/table2_binary")
_DATA_DIR = flags.DEFINE_string("data_dir", "", "config.data_dir for every run.")
_ESTIMATORS = flags.DEFINE_list("estimators", None, "Estimators (default: the paper's rows).")
_SET = flags.DEFINE_multi_string(
  "set", [], "FIELD=VALUE config overrides for every run (departures: listed)."
)
_NAME = flags.DEFINE_string("name", "", "Base name of the table files in --out (default table<N>).")
_RUN = flags.DEFINE_bool(
  "run", True, "Train what is missing (False: only tabulate finished populations)."
)
_CONFIG = flags.DEFINE_string(
  "config",
  "",
  "Config file with {L} / {arity} for the cell ('' = configs/listops_L{L}.py or"
  " configs/vae_{arity}ary.py; the earlier models: configs/listops_flax_init.py:{L},"
  " configs/vae_relu_mlp.py:{arity}).",
)
# Table 1.
_LENGTHS = flags.DEFINE_list("lengths", ["10"], "Table 1: maximum lengths L (10, 25, 50).")
_TAUS = flags.DEFINE_list("taus", ["0.01", "0.1", "1.0"], "Table 1: temperatures.")
_LEARNING_RATES = flags.DEFINE_list(
  "learning_rates", ["paper"], "Table 1: 'paper' (0.1, ..., 1.0) or a subset."
)
_SEEDS = flags.DEFINE_integer("seeds", 5, "Table 1: seeds per learning rate (the paper: 5).")
_CLIP = flags.DEFINE_list(
  "clip", ["0"], "Table 1: grad_clip_norm values (0 = the paper's protocol)."
)
# Table 2.
_ARITIES = flags.DEFINE_list("arities", ["16"], "Table 2: arities (2, 4, 8, 16).")
_BATCH_SIZES = flags.DEFINE_list("batch_sizes", ["20", "200"], "Table 2: batch sizes.")
_DRAWS = flags.DEFINE_integer("draws", 20, "Table 2: random-search draws per cell (the paper: 20).")
_SEEDS_PER_DRAW = flags.DEFINE_integer(
  "seeds_per_draw",
  1,
  "Table 2: seeds of each draw in the same population (draws x seeds members): the selected draw's"
  " bound gets a spread over seeds (the paper: 1).",
)

PAPER_LEARNING_RATES = [str(rate) for rate in listops.PAPER_LEARNING_RATES]
# The paper's Table 1 (test accuracy, %, mean over 5 seeds) and Table 2 (test bound, nats).
PAPER_TABLE1 = {
  ("st_gs", 10): (38.8, 59.3, 65.8),
  ("gr_mc10", 10): (66.4, 66.9, 66.7),
  ("gr_mc100", 10): (65.6, 66.3, 65.9),
  ("gr_mc1000", 10): (66.5, 67.1, 67.0),
  ("st_gs", 25): (41.2, 57.1, 60.2),
  ("gr_mc10", 25): (60.7, 60.8, 60.9),
  ("gr_mc100", 25): (60.0, 61.3, 61.2),
  ("gr_mc1000", 25): (60.2, 60.9, 61.2),
  ("st_gs", 50): (46.8, 56.8, 59.6),
  ("gr_mc10", 50): (58.7, 59.1, 59.6),
  ("gr_mc100", 50): (59.6, 59.1, 59.6),
  ("gr_mc1000", 50): (60.0, 59.8, 59.9),
}
PAPER_TAUS = ("0.01", "0.1", "1.0")
PAPER_TABLE2 = {  # estimator -> {(arity, B): nats}
  "gs": {
    (2, 20): 98.2,
    (2, 200): 96.4,
    (4, 20): 95.7,
    (4, 200): 93.8,
    (8, 20): 95.5,
    (8, 200): 92.3,
    (16, 20): 96.8,
    (16, 200): 94.3,
  },
  "reinforce": {
    (2, 20): 202.6,
    (2, 200): 121.4,
    (4, 20): 173.7,
    (4, 200): 122.2,
    (8, 20): 203.9,
    (8, 200): 124.9,
    (16, 20): 169.4,
    (16, 200): 129.5,
  },
  "st": {
    (2, 20): 105.5,
    (2, 200): 103.1,
    (4, 20): 106.2,
    (4, 200): 104.5,
    (8, 20): 107.2,
    (8, 200): 105.1,
    (16, 20): 108.2,
    (16, 200): 104.5,
  },
  "st_gs": {
    (2, 20): 100.7,
    (2, 200): 97.1,
    (4, 20): 99.1,
    (4, 200): 93.7,
    (8, 20): 98.0,
    (8, 200): 92.8,
    (16, 20): 98.8,
    (16, 200): 92.6,
  },
  "gr_mc10": {
    (2, 20): 100.7,
    (2, 200): 97.4,
    (4, 20): 97.8,
    (4, 200): 93.8,
    (8, 20): 97.4,
    (8, 200): 93.1,
    (16, 20): 97.9,
    (16, 200): 92.4,
  },
  "gr_mc100": {
    (2, 20): 100.6,
    (2, 200): 96.8,
    (4, 20): 97.5,
    (4, 200): 94.0,
    (8, 20): 96.8,
    (8, 200): 92.2,
    (16, 20): 97.3,
    (16, 200): 92.4,
  },
  "gr_mc1000": {
    (2, 20): 100.5,
    (2, 200): 97.0,
    (4, 20): 97.6,
    (4, 200): 93.5,
    (8, 20): 96.5,
    (8, 200): 92.5,
    (16, 20): 96.8,
    (16, 200): 92.2,
  },
}
_TIMESTAMP = re.compile(r"^[IWEF](\d{4}) (\d\d:\d\d:\d\d\.\d+)")
flag_checks.choices(_LENGTHS, ("10", "25", "50"))
flag_checks.estimator_names(_ESTIMATORS)
flag_checks.numbers(_TAUS, float, minimum=1e-6)
flags.register_validator(
  _LEARNING_RATES,
  lambda v: v == ["paper"] or all(flag_checks.parses(float, 1e-12, x) for x in v),
  message="must be 'paper' or a comma-separated list of numbers > 0",
)
flag_checks.at_least(_SEEDS, 1)
flag_checks.choices(_ARITIES, ("2", "4", "8", "16"))
flag_checks.numbers(_BATCH_SIZES, int, minimum=1)
flag_checks.at_least(_DRAWS, 1)
flag_checks.at_least(_SEEDS_PER_DRAW, 1)


def _run(config: str, workdir: pathlib.Path, overrides: list[str]) -> dict | None:
  """The population's results.json, training it first (or resuming it, or reading it from
  --records) when --run, and keeping its records when it finishes."""
  results = workdir / "results.json"
  if _RUN.value:
    launch.train(
      config,
      workdir,
      overrides,
      launch.records_for(_RECORDS.value, pathlib.Path(_OUT.value), workdir),
    )
  return json.loads(results.read_text()) if results.exists() else None


def wall_seconds(log: pathlib.Path) -> float | None:
  """Training + evaluation wall time from log.txt: each process's span, from its start (or resume)
  line to its results line or its last line, summed (a process that only read finished results adds
  nothing). None when no process of this log trained or evaluated: a population read from its
  kept records (--records) has its wall time where it was trained."""
  if not log.exists():
    return None
  total, first, last, spans = 0.0, None, None, 0
  for line in log.read_text().splitlines():
    match = _TIMESTAMP.match(line)
    if not match:
      continue
    moment = datetime.datetime.strptime("2000" + match[1] + " " + match[2], "%Y%m%d %H:%M:%S.%f")
    if "starting a new run" in line or "resumed from the checkpoint" in line:
      if first is not None:
        total += (last - first).total_seconds()
      first, spans = moment, spans + 1
    if first is not None:
      last = moment
      if "] results: " in line:
        total += (last - first).total_seconds()
        first = None
  if first is not None:
    total += (last - first).total_seconds()
  return total if spans else None


def _samples(row: dict) -> str:
  """The final M, and the cheaper M every member was selected with where that differs."""
  final, selection = row["num_eval_samples"], row["selection_eval_samples"]
  return str(final) if final == selection else f"{final} (selection: {selection})"


def _departures(extra: list[str]) -> list[str]:
  return [f"--config.{o}" for o in _SET.value] + extra


def _mean_std(values: list[float]) -> tuple[float, float]:
  return statistics.mean(values), statistics.stdev(values) if len(values) > 1 else 0.0


def table1(out: pathlib.Path) -> tuple[list[dict], list[str]]:
  estimators = _ESTIMATORS.value or ["st_gs", "gr_mc10", "gr_mc100", "gr_mc1000"]
  rates = PAPER_LEARNING_RATES if _LEARNING_RATES.value == ["paper"] else _LEARNING_RATES.value
  seeds = list(range(_SEEDS.value))
  lists = [
    f"population.learning_rate=({','.join(rates)},)",
    f"population.seed=({','.join(map(str, seeds))},)",
  ]
  extra = []
  if rates != PAPER_LEARNING_RATES:
    extra.append(f"learning rates {{{', '.join(rates)}}} of the paper's grid {{0.1, ..., 1.0}}")
  if len(seeds) != 5:
    extra.append(f"{len(seeds)} seeds per learning rate (the paper: 5)")
  rows = []
  for length in map(int, _LENGTHS.value):
    for tau in _TAUS.value:
      for clip in _CLIP.value:
        setting = f"L{length}_tau{tau}_{'noclip' if float(clip) == 0 else f'clip{float(clip):g}'}"
        for estimator in estimators:
          overrides = [
            *_SET.value,
            f"estimator={estimator}",
            f"tau={tau}",
            "population.search=lists",
            *lists,
          ]
          if _DATA_DIR.value:
            overrides.append(f"data_dir={_DATA_DIR.value}")
          if float(clip):
            overrides.append(f"grad_clip_norm={clip}")
          workdir = out / setting / estimator
          results = _run(
            (_CONFIG.value or "configs/listops_L{L}.py").format(L=length), workdir, overrides
          )
          if results is None:
            continue
          by_rate = {}
          for member in results["members"]:
            by_rate.setdefault(member["learning_rate"], []).append(member)
          best_rate = max(
            by_rate, key=lambda r: statistics.mean(m["valid_accuracy"] for m in by_rate[r])
          )
          chosen = by_rate[best_rate]
          test = _mean_std([100 * m["test_accuracy"] for m in chosen])
          paper = PAPER_TABLE1.get((estimator, length))
          rows.append(
            {
              "L": length,
              "tau": float(tau),
              "clip": float(clip),
              "estimator": estimator,
              "test_accuracy_mean": test[0],
              "test_accuracy_std": test[1],
              "seeds": len(chosen),
              "test_accuracy_values": [100 * m["test_accuracy"] for m in chosen],
              "selected_learning_rate": best_rate,
              "valid_accuracy_mean": 100 * statistics.mean(m["valid_accuracy"] for m in chosen),
              "diverged": sum(m["diverged_at_step"] is not None for m in results["members"]),
              "members": len(results["members"]),
              "paper": paper[PAPER_TAUS.index(tau)] if paper and tau in PAPER_TAUS else None,
              "device": results.get("device", "not recorded"),
              "wall_seconds": wall_seconds(workdir / "log.txt"),
              "workdir": str(workdir),
              "num_train_examples": results["num_train_examples"],
              "steps": results["steps"],
              "departures": _departures(
                extra
                + ([f"gradient clipping at global norm {float(clip):g}"] if float(clip) else [])
              ),
            }
          )
  lines = [
    "| L | tau | clipping | estimator | test accuracy % (mean ± std over seeds) | paper | selected"
    " lr"
    " (valid %) | diverged members | device | wall | departures from the paper |",
    "|---|---|---|---|---|---|---|---|---|---|---|",
  ]
  for r in rows:
    clipping = f"{r['clip']:g}" if r["clip"] else "none"
    lines.append(
      f"| {r['L']} | {r['tau']:g} | {clipping} | {r['estimator']} |"
      f" {formatting.spread(r['test_accuracy_values'], 1)} ({formatting.seeds(r['seeds'])}) |"
      f" {'-' if r['paper'] is None else r['paper']} | {r['selected_learning_rate']:g}"
      f" ({r['valid_accuracy_mean']:.1f})"
      f" | {r['diverged']}/{r['members']} | {r['device']} |"
      f" {formatting.duration(r['wall_seconds'])} |"
      f" {'; '.join(r['departures']) or 'none'} |"
    )
  return rows, lines


def _draw_spread(draw: dict | None) -> str:
  """The test cell's note for a selected member whose draw has several seeds (mean ± sd)."""
  if not draw or draw.get("test_nll") is None:
    return ""
  sd = draw.get("test_nll_sd")
  spread = f"{draw['test_nll']:.1f}" + ("" if sd is None else f" ± {sd:.1f}")
  return f" (its draw: {spread} over {draw['seeds'] - draw['diverged']} seeds)"


def table2(out: pathlib.Path) -> tuple[list[dict], list[str]]:
  estimators = _ESTIMATORS.value or [
    "gs",
    "reinforce",
    "st",
    "st_gs",
    "gr_mc10",
    "gr_mc100",
    "gr_mc1000",
  ]
  extra = [] if _DRAWS.value == 20 else [f"{_DRAWS.value} random-search draws (the paper: 20)"]
  per_draw = _SEEDS_PER_DRAW.value
  if per_draw > 1:
    extra.append(
      f"{per_draw} seeds per draw ({_DRAWS.value * per_draw} members; the best member selected)"
    )
  rows = []
  for arity in map(int, _ARITIES.value):
    for batch_size in map(int, _BATCH_SIZES.value):
      for estimator in estimators:
        overrides = [
          *_SET.value,
          f"estimator={estimator}",
          f"batch_size={batch_size}",
          "population.search=paper",
          f"population.size={_DRAWS.value * per_draw}",
          *([f"population.seeds_per_draw={per_draw}"] if per_draw > 1 else []),
        ]
        if _DATA_DIR.value:
          overrides.append(f"data_dir={_DATA_DIR.value}")
        workdir = out / f"{arity}ary_B{batch_size}" / estimator
        results = _run(
          (_CONFIG.value or "configs/vae_{arity}ary.py").format(arity=arity), workdir, overrides
        )
        if results is None:
          continue
        finite = [m["test_nll"] for m in results["members"] if m["valid_nll"] is not None]
        rows.append(
          {
            "arity": arity,
            "batch_size": batch_size,
            "estimator": estimator,
            "test_nll": results["test_nll"],
            "valid_nll": results["valid_nll"],
            # The selected member's draw over its seeds (population.seeds_per_draw > 1).
            "selected_draw": results.get("selected_draw"),
            "selected": {
              k: results[k] for k in ("learning_rate", "momentum", "weight_decay", "tau", "seed")
            },
            "members": len(results["members"]),
            "median_member_test_nll": statistics.median(finite) if finite else None,
            "diverged": sum(m["diverged_at_step"] is not None for m in results["members"]),
            "paper": PAPER_TABLE2.get(estimator, {}).get((arity, batch_size)),
            "steps": results["steps"],
            "num_eval_samples": results["num_eval_samples"],
            "selection_eval_samples": results.get(
              "selection_eval_samples", results["num_eval_samples"]
            ),
            "num_eval_examples": results["num_eval_examples"],
            "device": results.get("device", "not recorded"),
            "wall_seconds": wall_seconds(workdir / "log.txt"),
            "workdir": str(workdir),
            "departures": _departures(extra),
          }
        )
  lines = [
    "| arity | B | estimator | test bound (selected member) | paper | valid bound | selected lr /"
    " momentum /"
    " weight decay / tau | median member test (selection M) | diverged | steps | M / images |"
    " device | wall |"
    " departures from the paper |",
    "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
  ]
  for r in rows:
    s = r["selected"]
    lines.append(
      f"| {r['arity']} | {r['batch_size']} | {r['estimator']} | {r['test_nll']:.1f}"
      f"{_draw_spread(r['selected_draw'])} |"
      f" {'-' if r['paper'] is None else r['paper']} | {r['valid_nll']:.1f} |"
      f" {s['learning_rate']:.4f} /"
      f" {s['momentum']:.3f} / {s['weight_decay']:g} / {s['tau']:.3f} |"
      f" {r['median_member_test_nll']:.1f} |"
      f" {r['diverged']}/{r['members']} | {r['steps']} | {_samples(r)} / {r['num_eval_examples']} |"
      f" {r['device']} | {formatting.duration(r['wall_seconds'])} |"
      f" {'; '.join(r['departures']) or 'none'} |"
    )
  return rows, lines


def main(argv):
  del argv
  start_up_signals.interrupt_while_starting()
  try:
    _reproduce()
  except KeyboardInterrupt:
    print(
      "interrupted: the finished runs are kept (each in its workdir under --out); run the same"
      " command again to go on.",
      file=sys.stderr,
    )
    sys.exit(130)


def _reproduce():
  out = pathlib.Path(_OUT.value)
  try:
    out.mkdir(parents=True, exist_ok=True)
  except OSError as e:
    sys.exit(f"error: --out={out} cannot be made a directory ({e.strerror}): choose another --out.")
  rows, lines = (table1 if _TABLE.value == "1" else table2)(out)
  command = "python scripts/reproduce.py " + " ".join(a for a in sys.argv[1:])
  text = "\n".join([f"Command: `{command}`", "", *lines]) + "\n"
  name = _NAME.value or f"table{_TABLE.value}"
  (out / f"{name}.md").write_text(text)
  (out / f"{name}.json").write_text(json.dumps(rows, indent=1) + "\n")
  print(text)


if __name__ == "__main__":
  app.run(main)
