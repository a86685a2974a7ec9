"""The leaderboard report: every estimator of a setting in one table, and the paired comparisons.

Per setting (an arm's ``labels["setting"]``; its row name is ``labels["row"]``):
loss evaluations per step (the registry's), steps, seeds, the training negative
ELBO (the mean of the last 1 % of steps), the test bounds, the inference
network's gradient variance at fixed steps (and, where the setting's runs log it, the
DisARM code's moving-average variance at the same steps) and ms per step (a bench file's);
then, paired by seed, DisARM against RLOO-2, every row at equal loss evaluations
and at equal wall time, each GR row against the unbiased estimators, and the
test bound's differences seed by seed. Rows are compared only with rows of the
setting's length and seeds (the most common); the others are listed as not
compared.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import math
import pathlib
import re
import statistics
from collections.abc import Mapping

from experiments.studies import figures, records, tables
from experiments.studies.runner import Readings, Report
from gr_jax import estimators

MODELS = {"bernoulli_linear": "linear", "bernoulli_nonlinear": "non-linear"}
DATASETS = {
  "fashion_mnist": "Fashion-MNIST",
  "mnist": "MNIST",
  "binarized_mnist": "static binarized MNIST",
}
VARIANCE_STEPS = (10_000, -1)  # -1: the last step
# The field's row names of an estimator at another tau or averaged over M draws.
_VARIANT = re.compile(r"(_tau[0-9.]+|_x[0-9]+)$")


def _final_neg_elbo(member: records.Member, steps: int) -> float | None:
  """The mean training negative ELBO over the last 1 % of the steps (the logged intervals there)."""
  window = [v for s, v in member.curve("neg_elbo").items() if s > steps - max(1, steps // 100)]
  return statistics.mean(window) if window else None


def _at(curve: Mapping[int, float], step: float) -> float | None:
  """The curve at the logged step nearest below ``step``."""
  logged = [s for s in curve if s <= step]
  return curve[max(logged)] if logged else None


def _read_at(run: records.Run, step: float) -> dict[int, float | None]:
  return {m.seed: _at(m.curve("neg_elbo"), step) for m in run.members}


def _seconds(seconds: float) -> str:
  return tables.duration(seconds) if seconds >= 120 else f"{seconds:.2f} s"


def read_bench(*paths: str | pathlib.Path) -> dict[tuple[str, str], tuple[float, str]]:
  """``scripts/bench_vae.py --out`` rows: (model, "B=<batch> <estimator>") -> (ms, device), from
  each file that exists, a later file's row replacing an earlier one's."""
  timings = {}
  for path in paths:
    if path and pathlib.Path(path).is_file():
      rows = json.loads(pathlib.Path(path).read_text())
      timings |= {(r["model"], r["row"]): (r["ms"], r["device"]) for r in rows}
  return timings


def _cells(values: Mapping[str, Mapping[int, float | None]]) -> str:
  return "; ".join(f"{name} {tables.spread(by_seed.values())}" for name, by_seed in values.items())


def _gr_rows(runs: Mapping[str, records.Run]) -> list[str]:
  """The rows of the registry's Gumbel-Rao family (GR-MCK, GR-QMCK, GR-exact)."""
  return [n for n, r in runs.items() if estimators.get(r.estimator).family == "gumbel_rao"]


def _by_setting(readings: Readings) -> dict[str, dict[str, records.Run]]:
  settings: dict[str, dict[str, records.Run]] = {}
  for name in sorted(readings.runs):
    labels = readings.arms[name].labels
    settings.setdefault(labels["setting"], {})[labels["row"]] = readings.runs[name]
  return settings


def _timings(bench: str | tuple[str, ...]) -> dict[tuple[str, str], tuple[float, str]]:
  return read_bench(*([bench] if isinstance(bench, str) else bench))


def bench_timing(timings_by_row, config: Mapping, row: str) -> tuple[float, str] | None:
  """The bench's (ms per step, device) of the row ``row`` (an estimator, ``name@tau`` for one
  timed at that tau) at the config's model and batch size."""
  return timings_by_row.get((config["model"], f"B={config['batch_size']} {row}"))


@dataclasses.dataclass(frozen=True)
class Budgets:
  """Each row's training −ELBO by seed, read on its training curve at the loss evaluations and at
  the seconds of training steps the cheapest row spends in its whole run."""

  evaluations: int
  seconds: float | None  # None: no row timed by the bench
  device: str | None
  untimed: tuple[str, ...]  # rows the bench has not timed: no wall-time reading
  relaxed: tuple[str, ...]  # rows trained on a relaxed objective (GS): no reading
  readings: dict[str, dict[str, dict[int, float | None]]]  # budget -> row -> seed -> −ELBO


def is_relaxed(run: records.Run) -> bool:
  """Whether the run's training curve is a relaxed objective (GS: the decoder at the relaxed
  sample), not the discrete bound the other rows' curves are."""
  return estimators.get(run.estimator).relaxed


def equal_budgets(runs: Mapping[str, records.Run], timings: Mapping) -> Budgets:
  """``runs`` at equal loss evaluations (the registry's per step) and, for the rows ``timings``
  holds a (ms per step, device) for, at equal wall time; a row trained on a relaxed objective is
  not read (its curve is not the discrete bound)."""
  relaxed = tuple(n for n, r in runs.items() if is_relaxed(r))
  runs = {n: r for n, r in runs.items() if n not in relaxed}
  evaluations = {n: estimators.get(r.estimator).loss_evaluations for n, r in runs.items()}
  budget = min(r.steps * evaluations[n] for n, r in runs.items())
  readings = {
    "equal loss evaluations": {n: _read_at(r, budget / evaluations[n]) for n, r in runs.items()}
  }
  timed = {n: timings[n] for n in runs if timings.get(n)}
  seconds = device = None
  if timed:
    seconds = min(runs[n].steps * timed[n][0] / 1e3 for n in timed)
    device = next(iter(timed.values()))[1]
    readings["equal wall time"] = {n: _read_at(runs[n], seconds * 1e3 / timed[n][0]) for n in timed}
  untimed = tuple(n for n in runs if n not in timed)
  return Budgets(budget, seconds, device, untimed, relaxed, readings)


def _variances(run: records.Run, step: int, metric: str = "log10_grad_variance") -> list[float]:
  """Each member's ``metric`` at ``step`` (-1: the last), where it was measured (a step not
  measured is no value, not a divergence)."""
  at = run.steps if step < 0 else step
  return [v for m in run.members if (v := m.curve(metric).get(at)) is not None]


def log10_ema_variance(run: records.Run, step: int) -> str:
  """The DisARM code's variance column (``ema_grad_variance``) at ``step`` (-1: the last), log10,
  mean ± sd over the members that logged it."""
  return tables.spread(math.log10(v) for v in _variances(run, step, "ema_grad_variance") if v > 0)


def _title(config: Mapping) -> str:
  model = MODELS.get(config["model"], config["model"])
  return f"{model}, {DATASETS.get(config['dataset'], config['dataset'])}"


def _compared(runs: Mapping[str, records.Run]) -> dict[str, records.Run]:
  """The rows of the setting's length and seeds (the most common)."""
  shape = collections.Counter((r.steps, r.seeds) for r in runs.values()).most_common(1)[0][0]
  return {n: r for n, r in runs.items() if (r.steps, r.seeds) == shape}


def report(
  readings: Readings,
  header: list[str],
  footer: list[str],
  bench: str | tuple[str, ...] = (),
  variance_steps: tuple[int, ...] = VARIANCE_STEPS,
) -> Report:
  """The leaderboard page: ``header`` lines, one section per setting, the arms not measured,
  ``footer`` lines; the gradient variance at ``variance_steps`` (-1: the last)."""
  timings_by_row = _timings(bench)
  lines, data = list(header), {}
  for setting, runs in _by_setting(readings).items():
    section, data[setting] = _section(runs, timings_by_row, variance_steps)
    figure = f"figures/leaderboard_{setting}.png"
    relaxed = [n for n, r in _compared(runs).items() if is_relaxed(r)]
    section += [
      "",
      f"Training curves against loss evaluations and against seconds: [{figure}]({figure})"
      + (f" (not drawn, trained on a relaxed objective: {', '.join(relaxed)})" if relaxed else "")
      + ".",
    ]
    lines += section
  lines += readings.missing_lines() + footer
  return Report("\n".join(lines) + "\n", data)


def _section(runs, timings_by_row, variance_steps):
  # The setting's temperature: most rows'; a row at another one is labelled with its own.
  tau = statistics.mode(r.config["tau"] for r in runs.values())
  config = next(r for r in runs.values() if r.config["tau"] == tau).config
  # Rows are compared at the setting's length and seeds (the most common); others are listed.
  compared = _compared(runs)
  shape = next(iter(compared.values())).steps, next(iter(compared.values())).seeds
  title = _title(config)
  extra = (config.get("extra_test_samples") or [None])[0]
  timings = {n: bench_timing(timings_by_row, config, r.estimator) for n, r in runs.items()}
  lines = [
    "",
    f"## {title} ({config['binarization']} binarization)",
    "",
    f"Batch {config['batch_size']}, optimizer {config['optimizer']} (lr {config['learning_rate']},"
    f" prior {config['prior_learning_rate']}), τ {tau}.",
    "",
  ]
  header = ["estimator", "loss evals / step", "steps", "seeds", "train −ELBO"]
  header += [f"test IWAE-{config['num_eval_samples']}", f"test IWAE-{extra}"]
  at = lambda step: "end" if step < 0 else f"{step:,}"  # noqa: E731
  header += [f"log10 Var at {at(s)}" for s in variance_steps]
  # The DisARM code's own column where the setting's runs log it (variance_ema_decay > 0).
  ema = any(m.curve("ema_grad_variance") for r in runs.values() for m in r.members)
  if ema:
    header += [f"log10 EMA Var at {at(s)}" for s in variance_steps]
  rows, data = [], {}
  for name, run in runs.items():
    label = run.estimator + (f" (τ {run.config['tau']})" if run.config["tau"] != tau else "")
    variance = [tables.spread(_variances(run, s)) for s in variance_steps]
    if ema:
      variance += [log10_ema_variance(run, s) for s in variance_steps]
    ms = f"{timings[name][0]:.2f}" if timings[name] else "-"
    rows.append(
      [
        label,
        estimators.get(run.estimator).loss_evaluations,
        f"{run.steps:,}",
        len(run.members),
        tables.spread(_final_neg_elbo(m, run.steps) for m in run.members)
        + (" (relaxed)" if is_relaxed(run) else ""),
        tables.spread(m.value("test_nll") for m in run.members),
        tables.spread(m.value(f"test_nll_M{extra}") for m in run.members),
        *variance,
        ms,
      ]
    )
    data[name] = {
      "estimator": run.estimator,
      "tau": run.config["tau"],
      "steps": run.steps,
      "seeds": list(run.seeds),
      "test_nll": run.by_seed("test_nll"),
      "train_neg_elbo": {m.seed: _final_neg_elbo(m, run.steps) for m in run.members},
      "ms_per_step": timings[name][0] if timings[name] else None,
    }
  lines += tables.markdown_table([*header, "ms / step"], rows)
  devices = sorted({timing[1] for timing in timings.values() if timing})
  if devices:
    lines += ["", f"ms / step: `scripts/bench_vae.py` on {', '.join(devices)}."]
  others = sorted(set(runs) - set(compared))
  if others:
    lines += [
      "",
      f"Not compared below (not of the setting's {shape[0]:,} steps and seeds {list(shape[1])}): "
      + ", ".join(f"{n} ({runs[n].steps:,} steps, seeds {list(runs[n].seeds)})" for n in others)
      + ".",
    ]
  lines += _claims(compared, {n: timings[n] for n in compared})
  lines += _test_by_seed(compared, config["num_eval_samples"], list(shape[1]))
  return lines, data


def draw_budgets(
  readings: Readings, directory: pathlib.Path, bench: str | tuple[str, ...] = ()
) -> list[pathlib.Path]:
  """Per setting, ``leaderboard_<setting>.png``: each compared row's training negative ELBO (mean
  over seeds) against loss evaluations and against seconds at the bench's ms per step: the curves
  behind the equal-evaluation and equal-wall-time lines."""
  timings_by_row = _timings(bench)
  # One colour per row in every setting's figure: its place in the study's declared rows; a row
  # at another tau or averaged over draws (reinmax_tau1.1, st_gs_x2): its estimator's, dashed.
  declared = [arm.labels["row"] for arm in readings.arms.values()]
  variants = {row: base for row in declared if (base := _VARIANT.sub("", row)) != row}
  paths = []
  for setting, runs in _by_setting(readings).items():
    rows = []
    for name, run in _compared(runs).items():
      if is_relaxed(run):
        continue  # its curve is not the discrete bound the figure's curves are
      curves = [m.curve("neg_elbo") for m in run.members]
      steps = sorted(set.intersection(*(set(c) for c in curves)))
      timing = bench_timing(timings_by_row, run.config, run.estimator)
      rows.append(
        figures.BudgetCurve(
          label=name,
          curve={s: statistics.mean(c[s] for c in curves) for s in steps},
          evaluations=estimators.get(run.estimator).loss_evaluations,
          ms_per_step=timing[0] if timing else None,
        )
      )
    title = _title(next(iter(runs.values())).config)
    path = directory / f"leaderboard_{setting}.png"
    paths.append(figures.budget_curves(path, title, rows, declared, variants))
  return paths


def _claims(runs, timings) -> list[str]:
  """The paired DisARM - RLOO-2 line, the equal-evaluation and equal-wall-time lines, and each GR
  row against RLOO-2 and DisARM paired by seed at those budgets."""
  lines = []
  if "disarm" in runs and "rloo2" in runs:
    rloo, disarm = runs["rloo2"], runs["disarm"]
    variance_of = lambda run, step: {  # noqa: E731
      m.seed: m.curve("log10_grad_variance").get(step) for m in run.members
    }
    steps = sorted({s for m in rloo.members for s in m.curve("log10_grad_variance")})
    variance = {s: tables.paired(variance_of(rloo, s), variance_of(disarm, s)) for s in steps if s}
    elbo = tables.paired(
      {m.seed: _final_neg_elbo(m, rloo.steps) for m in rloo.members},
      {m.seed: _final_neg_elbo(m, disarm.steps) for m in disarm.members},
    )
    test = tables.paired(rloo.by_seed("test_nll"), disarm.by_seed("test_nll"))
    pairs = [d for p in variance.values() for d in p.differences]
    lines += [
      "",
      "DisARM − RLOO-2 at equal evaluations (two per step), paired by seed: log10 Var "
      + ", ".join(
        f"{tables.spread(p.differences)} at {s:,}" for s, p in variance.items() if p.differences
      )
      + f" (DisARM's lower at {sum(d < 0 for d in pairs)} of the {len(pairs)} (seed, step)"
      f" pairs); train −ELBO {tables.spread(elbo.differences)}; test IWAE-100"
      f" {tables.spread(test.differences)} (negative: DisARM lower).",
    ]
  budgets = equal_budgets(runs, timings)
  at_budget = budgets.readings
  lines += [
    "",
    f"Train −ELBO at equal loss evaluations ({budgets.evaluations:,} each, read on the training"
    " curves): "
    + _cells(at_budget["equal loss evaluations"])
    + (
      f"; not read, trained on a relaxed objective: {', '.join(budgets.relaxed)}"
      if budgets.relaxed
      else ""
    )
    + ".",
  ]
  # A row the bench has not timed leaves the wall-time line, named there; the others keep it.
  if budgets.seconds is not None:
    untimed = budgets.untimed
    lines += [
      "",
      f"Train −ELBO at equal wall time ({_seconds(budgets.seconds)} of training steps at the"
      f" bench's ms per step, {budgets.device}): "
      + _cells(at_budget["equal wall time"])
      + (f"; not timed by the bench: {', '.join(untimed)}" if untimed else "")
      + ".",
    ]
  unbiased = [n for n in ("rloo2", "disarm") if n in runs]
  for name in _gr_rows(runs) if unbiased else []:
    cells = [
      f"{name} − {other}"
      f" {tables.spread(tables.paired(values[other], values[name]).differences)} at {budget_name}"
      for other in unbiased
      for budget_name, values in at_budget.items()
      if name in values and other in values
    ]
    lines += [
      "",
      f"{name} against the unbiased estimators, train −ELBO paired by seed: "
      + "; ".join(cells)
      + " (negative: GR lower).",
    ]
  return lines


def _test_by_seed(runs, num_samples: int, seeds: list) -> list[str]:
  """The test bound's differences seed by seed: every row against DisARM, the row with the lowest
  mean against every other, each GR row against ST-GS."""
  test = {n: r.by_seed("test_nll") for n, r in runs.items()}
  means = {n: tables.mean(t.values()) for n, t in test.items()}
  best = min((n for n in means if means[n] is not None), key=means.get)
  groups = []
  if "disarm" in runs:
    groups.append(("against DisARM", [(n, "disarm") for n in runs if n != "disarm"]))
  groups.append((f"the lowest ({best}) against the others", [(best, n) for n in runs if n != best]))
  # Each GR row against the ST-GS row of as many draws per step (gr_exact_x2 - st_gs_x2).
  draws = {n: estimators.get(runs[n].estimator).draws for n in _gr_rows(runs)}
  st_gs_of = {n: "st_gs" if d == 1 else f"st_gs_x{d}" for n, d in draws.items()}
  groups.append(("GR against ST-GS", [(n, s) for n, s in st_gs_of.items() if s in runs]))
  lines = []
  # A setting with one row kept has no pairs: no line, rather than an empty one.
  for title, pairs in (group for group in groups if group[1]):
    cells = []
    for b, a in pairs:
      difference = tables.paired(test[a], test[b])
      cells.append(
        f"{b} − {a} {difference.by_seed()} ({b} lower on {difference.lower} of"
        f" {len(difference.seeds)})"
      )
    lines += [
      "",
      f"Test IWAE-{num_samples} by seed ({', '.join(map(str, seeds))}), {title}: "
      + "; ".join(cells)
      + ".",
    ]
  return lines
