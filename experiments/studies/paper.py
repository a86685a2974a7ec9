"""The paper's Tables 1 (ListOps) and 2 (the discrete VAE): its numbers, and the reports of ours.

Table 1 (appendix D.3): per L, tau and estimator, one population of the
learning-rate grid {0.1, ..., 1.0} x seeds; the learning rate with the best
mean validation accuracy over seeds is selected and its test accuracy reported
as mean ± sd over the seeds (a diverged member stays in the mean). Table 2
(appendix D.2): per arity, batch size and estimator, one population of the
random search's draws; the member with the best validation bound is reported
with its test bound. Each row gives the paper's number, the selection, the
device, the recorded wall time (training + final evaluation) and every
departure from the paper's protocol (the study's ``--set`` overrides, fewer
seeds, draws or learning rates).
"""

from __future__ import annotations

import statistics

from experiments.studies import records, tables
from experiments.studies.runner import Readings, Report

# The paper's Table 1 (test accuracy, %, mean over 5 seeds) and Table 2 (test bound, nats).
PAPER_TAUS = (0.01, 0.1, 1.0)
PAPER_TABLE1 = {  # (estimator, L) -> accuracy at each of PAPER_TAUS
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
# estimator -> {(arity, batch size): nats}, over arities (2, 4, 8, 16) x batch sizes (20, 200).
_CELLS = [(a, b) for a in (2, 4, 8, 16) for b in (20, 200)]
PAPER_TABLE2 = {
  name: dict(zip(_CELLS, values))
  for name, values in {
    "gs": (98.2, 96.4, 95.7, 93.8, 95.5, 92.3, 96.8, 94.3),
    "reinforce": (202.6, 121.4, 173.7, 122.2, 203.9, 124.9, 169.4, 129.5),
    "st": (105.5, 103.1, 106.2, 104.5, 107.2, 105.1, 108.2, 104.5),
    "st_gs": (100.7, 97.1, 99.1, 93.7, 98.0, 92.8, 98.8, 92.6),
    "gr_mc10": (100.7, 97.4, 97.8, 93.8, 97.4, 93.1, 97.9, 92.4),
    "gr_mc100": (100.6, 96.8, 97.5, 94.0, 96.8, 92.2, 97.3, 92.4),
    "gr_mc1000": (100.5, 97.0, 97.6, 93.5, 96.5, 92.5, 96.8, 92.2),
  }.items()
}
PAPER_LEARNING_RATES = tuple(round(0.1 * k, 1) for k in range(1, 11))
PAPER_SEEDS = 5
PAPER_DRAWS = 20


def wall_seconds(run: records.Run) -> float | None:
  """Training + final evaluation, as the run recorded them (None where it recorded no training)."""
  training = records.finite(run.results.get("training_wall_time_s"))
  evaluation = records.finite(run.results.get("final_eval_seconds")) or 0.0
  return training + evaluation if training and training >= 1 else None


def _departures(readings: Readings, extra: list[str]) -> str:
  return "; ".join([f"--set={o}" for o in readings.overrides] + extra) or "none"


def table1_report(readings: Readings) -> Report:
  rows, data = [], []
  for name, run in readings.runs.items():
    labels = readings.arms[name].labels
    by_rate: dict[float, list[records.Member]] = {}
    for member in run.members:
      by_rate.setdefault(member.results["learning_rate"], []).append(member)
    valid = lambda rate: tables.mean(m.value("valid_accuracy") for m in by_rate[rate])  # noqa: E731
    best = max(by_rate, key=lambda rate: valid(rate) if valid(rate) is not None else -1.0)
    chosen = sorted(by_rate[best], key=lambda m: m.seed)
    test = [100 * m.value("test_accuracy") for m in chosen if m.value("test_accuracy") is not None]
    extra = []
    if sorted(by_rate) != list(PAPER_LEARNING_RATES):
      rates = ", ".join(f"{r:g}" for r in sorted(by_rate))
      extra.append(f"learning rates {{{rates}}} of the paper's grid {{0.1, ..., 1.0}}")
    if len(chosen) != PAPER_SEEDS:
      extra.append(f"{len(chosen)} seeds per learning rate (the paper: {PAPER_SEEDS})")
    if labels.get("clip"):
      extra.append(f"gradient clipping at global norm {labels['clip']:g}")
    paper = PAPER_TABLE1.get((run.estimator, labels["L"]))
    tau = run.config["tau"]
    row = {
      "L": labels["L"],
      "tau": tau,
      "clip": labels.get("clip", 0),
      "estimator": run.estimator,
      "test_accuracy_values": test,
      "selected_learning_rate": best,
      "valid_accuracy_mean": 100 * (valid(best) or float("nan")),
      "diverged": sum(m.results.get("diverged_at_step") is not None for m in run.members),
      "members": len(run.members),
      "paper": paper[PAPER_TAUS.index(tau)] if paper and tau in PAPER_TAUS else None,
      "device": run.results.get("device", "not recorded"),
      "wall_seconds": wall_seconds(run),
      "departures": _departures(readings, extra),
    }
    data.append(row)
    rows.append(
      [
        row["L"],
        f"{tau:g}",
        f"{row['clip']:g}" if row["clip"] else "none",
        run.estimator,
        f"{tables.spread(test, 1)} ({tables.seeds(len(test))})",
        "-" if row["paper"] is None else row["paper"],
        f"{best:g} ({row['valid_accuracy_mean']:.1f})",
        f"{row['diverged']}/{row['members']}",
        row["device"],
        tables.duration(row["wall_seconds"]),
        row["departures"],
      ]
    )
  header = ["L", "tau", "clipping", "estimator", "test accuracy % (mean ± std over seeds)", "paper"]
  header += ["selected lr (valid %)", "diverged members", "device", "wall"]
  header += ["departures from the paper"]
  lines = tables.markdown_table(header, rows) + readings.missing_lines()
  return Report("\n".join(lines) + "\n", data)


def _draw_spread(draw: dict | None) -> str:
  """The test cell's note for a selected member whose draw has several seeds (mean ± sd)."""
  if not draw or draw.get("test_nll") is None:
    return ""
  sd = draw.get("test_nll_sd")
  spread = f"{draw['test_nll']:.1f}" + ("" if sd is None else f" ± {sd:.1f}")
  return f" (its draw: {spread} over {draw['seeds'] - draw['diverged']} seeds)"


def _samples(results) -> str:
  """The final M, and the cheaper M every member was selected with where that differs."""
  final = results["num_eval_samples"]
  selection = results.get("selection_eval_samples") or final
  return str(final) if final == selection else f"{final} (selection: {selection})"


def table2_report(readings: Readings) -> Report:
  rows, data = [], []
  for name, run in readings.runs.items():
    labels, results = readings.arms[name].labels, run.results
    draws = results.get("population_size", len(run.members))
    per_draw = run.config.get("population", {}).get("seeds_per_draw", 1)
    extra = []
    if draws // per_draw != PAPER_DRAWS:
      extra.append(f"{draws // per_draw} random-search draws (the paper: {PAPER_DRAWS})")
    if per_draw > 1:
      extra.append(f"{per_draw} seeds per draw ({draws} members; the best member selected)")
    finite = [m.value("test_nll") for m in run.members if m.value("valid_nll") is not None]
    finite = [v for v in finite if v is not None]
    selected = {k: results[k] for k in ("learning_rate", "momentum", "weight_decay", "tau", "seed")}
    row = {
      "arity": labels["arity"],
      "batch_size": labels["batch_size"],
      "estimator": run.estimator,
      "test_nll": results["test_nll"],
      "valid_nll": results["valid_nll"],
      "selected_draw": results.get("selected_draw"),
      "selected": selected,
      "members": len(run.members),
      "median_member_test_nll": statistics.median(finite) if finite else None,
      "diverged": sum(m.results.get("diverged_at_step") is not None for m in run.members),
      "paper": PAPER_TABLE2.get(run.estimator, {}).get((labels["arity"], labels["batch_size"])),
      "steps": run.steps,
      "device": results.get("device", "not recorded"),
      "wall_seconds": wall_seconds(run),
      "departures": _departures(readings, extra),
    }
    data.append(row)
    rows.append(
      [
        row["arity"],
        row["batch_size"],
        run.estimator,
        f"{row['test_nll']:.1f}{_draw_spread(row['selected_draw'])}",
        "-" if row["paper"] is None else row["paper"],
        f"{row['valid_nll']:.1f}",
        f"{selected['learning_rate']:.4f} / {selected['momentum']:.3f} /"
        f" {selected['weight_decay']:g} / {selected['tau']:.3f}",
        tables.significant(row["median_member_test_nll"], 4),
        f"{row['diverged']}/{row['members']}",
        row["steps"],
        f"{_samples(results)} / {results['num_eval_examples']}",
        row["device"],
        tables.duration(row["wall_seconds"]),
        row["departures"],
      ]
    )
  header = ["arity", "B", "estimator", "test bound (selected member)", "paper", "valid bound"]
  header += ["selected lr / momentum / weight decay / tau", "median member test (selection M)"]
  header += ["diverged", "steps", "M / images", "device", "wall", "departures from the paper"]
  lines = tables.markdown_table(header, rows) + _paired_draws(readings) + readings.missing_lines()
  return Report("\n".join(lines) + "\n", data)


def _paired_draws(readings: Readings) -> list[str]:
  """Per cell, every two estimators on the same draws (the search's member i is draw i for every
  estimator of a cell): the member test bounds' differences at the selection's M."""
  cells: dict[tuple, list[records.Run]] = {}
  for name, run in readings.runs.items():
    labels = readings.arms[name].labels
    cells.setdefault((labels["arity"], labels["batch_size"]), []).append(run)
  rows = []
  for (arity, batch_size), runs in cells.items():
    for i, a in enumerate(runs):
      for b in runs[i + 1 :]:
        by_draw = lambda run: {m.index: m.value("test_nll") for m in run.members}  # noqa: E731
        difference = tables.paired(by_draw(a), by_draw(b))
        if not difference.differences:
          continue
        d = difference.differences
        rows.append(
          [arity, batch_size, f"{b.estimator} − {a.estimator}", len(d)]
          + [f"{difference.lower} of {len(d)}", f"{statistics.median(d):+.2f}"]
          + [f"{statistics.mean(d):+.2f}", f"{min(d):+.2f} to {max(d):+.2f}"]
        )
  if not rows:
    return []
  header = ["arity", "B", "difference (left − right)", "draws", "left lower on", "median", "mean"]
  header += ["range"]
  intro = "Paired by draw (each member's test bound at the selection's M, nats):"
  return ["", intro, "", *tables.markdown_table(header, rows)]
