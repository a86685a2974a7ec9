"""The leaderboard at each estimator's best temperature: tau searched on validation.

The DisARM protocol (configs/studies/field.py) fixes the optimizer and learning
rate for every estimator, and so does this search. Each estimator with a
temperature trains one seed (0) at every tau of ``TAUS`` for the full length, as
one population (``OUT/<setting>/search/<estimator>``); the tau with the best
validation IWAE-100 is then trained again with fresh seeds (1, 2, 3), whose test
bounds are the reported numbers (no selection bias in what is reported).

  python -m experiments.study --study=configs/studies/tuned.py --out=runs/tuned \
      --data_root=../shared/data [--arms=nonlinear_fashion_mnist/]

Protocol length (``OUT/<setting>/long/<estimator>``, LONG_SETTINGS): DisARM, RLOO-2 and the
two tuned estimators with the lowest mean fresh-seed test bound (declared once all five fresh
arms of the setting are kept, at their selected tau) train LONG_STEPS steps, seed 0 first, with
the DisARM code's variance column (``variance_ema_decay=0.999``) beside the bounds; every arm
of the dynamic MNIST settings logs it as well (configs/studies/field.py: EMA_SETTINGS).

Each setting's tuned rows are read against DisARM's and RLOO-2's (the field's) at equal loss
evaluations and at equal wall time, on their training curves, each timed at its own tau (BENCH).

A search's fresh-seed arm (``OUT/<setting>/fresh/<estimator>``) is declared once the search's
records are kept (in RECORDS), at the tau they select; the tables report both phases. The
figure of each setting (``figures/tuned_<setting>.png``) draws the test bound against tau, the
fresh seeds at the selected tau, and the field's tau-free rows (REFERENCES, read from
records/field) as bands.

The rows the tuned ones are paired against (PAIRED: ZGR, DisARM, RLOO-2) hold the field's seeds
0, 1, 2, the fresh rows 1, 2, 3: this study trains the field's row at seed 3 as well
(``OUT/<setting>/reference_seed3/<estimator>``, the field's config), so that every pair is read
on the three fresh seeds; until it is kept, the pairs are read on the seeds both hold.
"""

import dataclasses
import pathlib

from configs.studies.field import EMA_SETTINGS, EMA_VARIANCE
from experiments.studies import figures, leaderboard, records, tables
from experiments.studies.runner import Arm, Report, Study

# In the order they are run: today's headline first, then dynamic MNIST, then the rest.
SETTINGS = {
  "nonlinear_fashion_mnist": ("configs/bernoulli_vae_nonlinear.py", "fashion_mnist"),
  "nonlinear_dynamic_mnist": ("configs/bernoulli_vae_nonlinear.py:mnist", "mnist"),
  "linear_dynamic_mnist": ("configs/bernoulli_vae_linear.py:mnist", "mnist"),
  "linear_fashion_mnist": ("configs/bernoulli_vae_linear.py", "fashion_mnist"),
  "nonlinear_static_mnist": (
    "configs/bernoulli_vae_nonlinear.py:binarized_mnist",
    "binarized_mnist",
  ),
}
ESTIMATORS = ("st_gs", "gs", "reinmax", "gr_mc10", "gr_exact")
TAUS = (0.1, 0.25, 0.5, 1.0, 1.5)  # the union of the regions the papers select
SEARCH_SEED = 0
FRESH_SEEDS = (1, 2, 3)
STEPS = 100_000
RECORDS = "records/tuned"
# Per model, ms per step of the tuned rows at their selected tau (rows NAME@TAU) beside DisARM's and
# RLOO-2's, timed in one run of scripts/bench_vae.py (docs/benchmarks.md): the equal-wall-time
# readings. One file per model, so that timing a model's new selections leaves the other's ratios.
BENCH = {
  "bernoulli_nonlinear": "records/bench_tuned.json",
  "bernoulli_linear": "records/bench_tuned_linear.json",
}
# The field study's rows without a temperature (configs/studies/field.py: seeds 0, 1, 2 at the
# same length), drawn as bands: the same populations, kept once in records/field.
REFERENCES = ("disarm", "rloo2", "zgr", "reinforce")
FIELD_RECORDS = "records/field"
FIELD_SEEDS = (0, 1, 2)
# What each tuned row is paired against: ST-GS at its best (the paper's claim is that GR is at
# least as good at each one's best temperature), ZGR (GR's tau -> 0 limit), DisARM and RLOO-2.
AGAINST = (
  ("fresh", "st_gs"),
  ("reference", "zgr"),
  ("reference", "disarm"),
  ("reference", "rloo2"),
)
# How a row's phase is named in the comparison: tuned here, or the field study's row.
_SOURCE = {"fresh": "tuned", "reference": "field"}
# The references paired with the tuned rows, and the fresh seed the field's rows lack.
PAIRED = tuple(estimator for phase, estimator in AGAINST if phase == "reference")
MISSING_SEEDS = tuple(s for s in FRESH_SEEDS if s not in FIELD_SEEDS)
LONG_SETTINGS = ("nonlinear_fashion_mnist", "nonlinear_dynamic_mnist")
# The protocol's length: under an hour to over two per member on one core of this CPU with the other
# core busy, final evaluation included (non-linear Fashion-MNIST's DisARM ran 48 min, its RLOO-2 59;
# non-linear dynamic MNIST's DisARM 91, its RLOO-2 131, its GS and GR-exact 86 and 85).
LONG_STEPS = 1_000_000
LONG_SEEDS = (0,)
LONG = {"steps": LONG_STEPS, "seeds": LONG_SEEDS}
UNBIASED = ("disarm", "rloo2")
TITLES = {
  "nonlinear_fashion_mnist": "non-linear, Fashion-MNIST",
  "nonlinear_dynamic_mnist": "non-linear, dynamic MNIST",
  "linear_dynamic_mnist": "linear, dynamic MNIST",
  "linear_fashion_mnist": "linear, Fashion-MNIST",
  "nonlinear_static_mnist": "non-linear, static MNIST",
}


def _arm(setting, phase, estimator, *overrides, steps=STEPS, seeds=FRESH_SEEDS, **fields) -> Arm:
  """``<setting>/<phase>/<estimator>``: the estimator on the setting's config for ``steps``."""
  config, dataset = SETTINGS[setting]
  labels = {"setting": setting, "estimator": estimator, "phase": phase}
  # The DisARM code's variance column: on the long arms (their plots are of 10^6-step runs), and
  # on every arm of the settings the field study logs it on.
  ema = EMA_VARIANCE if phase == "long" or setting in EMA_SETTINGS else ()
  return Arm(
    name=f"{setting}/{phase}/{estimator}",
    config=config,
    overrides=(f"estimator={estimator}", f"num_steps={steps}", *ema, *overrides),
    seeds=seeds,
    dataset_dir=dataset,
    labels={**labels, **fields.pop("labels", {})},
    **fields,
  )


def _arms(records_dir: str):
  for setting in SETTINGS:
    for estimator in ESTIMATORS:
      search = _arm(setting, "search", estimator, seeds=(SEARCH_SEED,), lists={"tau": TAUS})
      yield search
      tau = records.best_of_kept(pathlib.Path(records_dir, search.name), "tau")
      if tau is not None:
        yield _arm(setting, "fresh", estimator, f"tau={tau}", labels={"tau": tau})


def _best_tuned(records_dir: str, setting: str, count: int) -> list[tuple[str, float]]:
  """(estimator, tau) of the ``count`` tuned estimators with the lowest mean fresh-seed test
  bound, once every estimator's fresh arm of ``setting`` is kept (before: none)."""
  means = {}
  for estimator in ESTIMATORS:
    kept = pathlib.Path(records_dir, setting, "fresh", estimator)
    if not (kept / "results.json").is_file():
      return []
    run = records.read_run(kept)
    means[estimator] = (tables.mean(run.by_seed("test_nll").values()), run.config["tau"])
  ranked = sorted((m, e) for e, (m, _) in means.items() if m is not None)
  return [(e, means[e][1]) for _, e in ranked[:count]]


def _long_arms(records_dir: str):
  for setting in LONG_SETTINGS:
    rows = [(e, ()) for e in UNBIASED]
    rows += [(e, (f"tau={tau}",)) for e, tau in _best_tuned(records_dir, setting, 2)]
    for estimator, overrides in rows:
      yield _arm(setting, "long", estimator, *overrides, **LONG)


def _references():
  for setting in SETTINGS:
    for estimator in REFERENCES:
      kept = f"{FIELD_RECORDS}/{setting}/{estimator}"
      yield _arm(setting, "reference", estimator, seeds=FIELD_SEEDS, records=kept)
    for estimator in PAIRED:
      yield _arm(setting, "reference_seed3", estimator, seeds=MISSING_SEEDS)


def _reference(readings, setting: str, estimator: str):
  """The field's row of ``estimator`` (seeds 0, 1, 2) with this study's seed 3 of it, once kept."""
  run = readings.get(f"{setting}/reference/{estimator}")
  more = readings.get(f"{setting}/reference_seed3/{estimator}")
  if run is None or more is None:
    return run
  return dataclasses.replace(run, members=(*run.members, *more.members))


def _row(readings, setting: str, phase: str, estimator: str):
  """A row's readings: the tuned study's own, or a reference with all of its seeds."""
  if phase == "reference":
    return _reference(readings, setting, estimator)
  return readings.get(f"{setting}/{phase}/{estimator}")


def _budget_lines(readings, setting: str) -> list[str]:
  """The tuned rows' training bound against DisARM's and RLOO-2's (the field's) at equal loss
  evaluations and at equal wall time (each tuned row timed at its tau, in its model's BENCH file),
  paired by seed."""
  tuned = {f"{e} (tuned)": r for e in ESTIMATORS if (r := _row(readings, setting, "fresh", e))}
  unbiased = {f"{e} (field)": r for e in UNBIASED if (r := _row(readings, setting, "reference", e))}
  if not tuned or not unbiased:
    return []
  runs = {**tuned, **unbiased}
  bench = BENCH.get(next(iter(runs.values())).config["model"], "")
  timings = leaderboard.read_bench(bench)
  bench_rows = {
    n: r.estimator + (f"@{r.config['tau']:g}" if n in tuned else "") for n, r in runs.items()
  }
  budgets = leaderboard.equal_budgets(
    runs,
    {n: leaderboard.bench_timing(timings, runs[n].config, row) for n, row in bench_rows.items()},
  )
  header = ["pair", f"at equal loss evaluations ({budgets.evaluations:,} each)"]
  if budgets.seconds is not None:
    header.append(f"at equal wall time ({tables.duration(budgets.seconds)} of training steps)")
  rows = [
    [
      f"{name} − {other}",
      *(
        tables.paired(values[other], values[name]).cell()
        if name in values and other in values
        else "-"
        for values in budgets.readings.values()
      ),
    ]
    for name in tuned
    if name not in budgets.relaxed
    for other in unbiased
  ]
  timed = (
    f"ms per step from {bench} ({budgets.device}), each tuned row timed at its tau"
    if budgets.seconds is not None
    else f"no row timed in {bench or 'a bench file'}: no wall-time reading"
  )
  untimed = [bench_rows[n] for n in budgets.untimed] if budgets.seconds is not None else []
  return [
    "",
    f"{TITLES[setting]}: train −ELBO of the tuned rows against the unbiased rows, read on the"
    f" training curves at equal budgets, paired by seed (negative: the tuned row is lower; {timed}"
    + (f"; not timed: {', '.join(untimed)}" if untimed else "")
    + (
      f"; not read, trained on a relaxed objective: {', '.join(budgets.relaxed)}"
      if budgets.relaxed
      else ""
    )
    + "):",
    "",
    *tables.markdown_table(header, rows),
  ]


def _comparison_lines(readings) -> list[str]:
  """Per setting: each tuned row's fresh seeds against ST-GS's and the field's rows, paired by
  seed (the field's rows hold seeds 0, 1, 2 and, once kept, 3; the fresh ones 1, 2, 3), and
  the row with the lowest mean test bound; then the tuned rows' training bounds against the
  unbiased rows at equal budgets."""
  lines = []
  for setting in SETTINGS:
    rows, means = [], {}
    for phase in ("fresh", "reference"):
      for estimator in (*ESTIMATORS, *REFERENCES):
        run = _row(readings, setting, phase, estimator)
        if run is not None:
          means[f"{estimator} ({_SOURCE[phase]})"] = tables.mean(run.by_seed("test_nll").values())
    for estimator in ESTIMATORS:
      tuned = readings.get(f"{setting}/fresh/{estimator}")
      for phase, other in AGAINST:
        against = _row(readings, setting, phase, other)
        if tuned is None or against is None or (phase, other) == ("fresh", estimator):
          continue
        rows.append(
          [
            f"{estimator} (tuned) − {other} ({_SOURCE[phase]})",
            *(
              tables.paired(against.by_seed(bound), tuned.by_seed(bound)).cell()
              for bound in ("test_nll", "test_nll_M1000")
            ),
          ]
        )
    if not rows:
      continue
    best = tables.ranking(means)[0]
    lines += [
      "",
      f"{TITLES[setting]}: the tuned rows paired by seed (negative: the tuned row is lower):",
      "",
      *tables.markdown_table(["pair", "test IWAE-100", "test IWAE-1000"], rows),
      "",
      f"The lowest mean test IWAE-100 of the {len(means)} rows: {best}, {means[best]:.2f}.",
      *_budget_lines(readings, setting),
    ]
  return lines


def _at_protocol_steps(setting: str, run) -> str:
  """A long row's test IWAE-100 at STEPS on its seeds, from the kept records: the field's row for
  DisARM and RLOO-2, the search's member at the row's tau for a tuned one ("-" until kept)."""
  if run.estimator in UNBIASED:
    kept, fields = pathlib.Path(FIELD_RECORDS, setting, run.estimator), {}
  else:
    kept = pathlib.Path(RECORDS, setting, "search", run.estimator)
    fields = {"tau": run.config["tau"]}
  if not (kept / "results.json").is_file():
    return "-"
  short = records.read_run(kept).by_seed("test_nll", **fields)
  return tables.spread(short[seed] for seed in run.seeds if seed in short)


def _report(readings) -> Report:
  rows, data = [], {}
  fresh_rows = []
  long_rows = []
  for name, run in readings.runs.items():
    phase = readings.arms[name].labels["phase"]
    if phase.startswith("reference"):
      continue  # the figure's bands and the pairs' other sides; their table is the leaderboard's
    if phase == "long":
      columns = (run.by_seed("test_nll"), run.by_seed("test_nll_M1000"))
      tau = f"{run.config['tau']:g}" if run.estimator not in UNBIASED else "-"
      seeds = ", ".join(map(str, run.seeds))
      ema = leaderboard.log10_ema_variance(run, -1)
      short = _at_protocol_steps(readings.arms[name].labels["setting"], run)
      long_rows.append(
        [name, tau, seeds, *(tables.spread(c.values()) for c in columns), short, ema]
      )
      data[name] = {"tau": run.config["tau"], "steps": run.steps, "test_nll": columns[0]}
      continue
    if phase == "fresh":
      columns = (run.by_seed("test_nll"), run.by_seed("test_nll_M1000"))
      fresh_rows.append(
        [
          name,
          f"{readings.arms[name].labels['tau']:g}",
          *(tables.spread(c.values()) for c in columns),
        ]
      )
      data[name] = {"tau": readings.arms[name].labels["tau"], "test_nll": columns[0]}
      continue
    columns = {"valid_nll": "valid_nll", "test_nll": "test_nll"}
    search_rows, values = tables.search_rows(run, columns, lambda v: tables.significant(v, 5))
    rows += [[name, *row] for row in search_rows]
    data[name] = {
      "selected_tau": next((v["tau"] for v in values if v["selected"]), None),
      **{column: {v["tau"]: v[column] for v in values} for column in columns},
    }
  lines = []
  if rows:
    lines += ["Temperature search (seed 0; the selection by validation IWAE-100):", ""]
    lines += tables.markdown_table(["arm", "tau", "valid IWAE-100", "test IWAE-100"], rows)
  if fresh_rows:
    lines += ["", "At the selected tau, fresh seeds 1, 2, 3 (the reported test bounds):", ""]
    header = ["arm", "tau", "test IWAE-100", "test IWAE-1000"]
    lines += tables.markdown_table(header, fresh_rows)
  if long_rows:
    lines += ["", f"At the protocol's length ({LONG_STEPS:,} steps):", ""]
    header = ["arm", "tau", "seeds", "test IWAE-100", "test IWAE-1000"]
    header += [f"test IWAE-100 at {STEPS:,} steps", "log10 EMA Var at end (DisARM's definition)"]
    lines += tables.markdown_table(header, long_rows)
  lines += _comparison_lines(readings)
  return Report("\n".join(lines + readings.missing_lines()), data)


def _figures(readings, directory: pathlib.Path) -> list[pathlib.Path]:
  """Per setting with a search kept: the test bound against tau (figures.temperature_curves)."""
  finite = lambda values: [v for v in values if v is not None]  # noqa: E731
  paths = []
  for setting, title in TITLES.items():
    curves = []
    for estimator in ESTIMATORS:
      search = readings.get(f"{setting}/search/{estimator}")
      if search is None:
        continue
      fresh = readings.get(f"{setting}/fresh/{estimator}")
      values = {m.results["tau"]: m.value("test_nll") for m in search.members}
      curves.append(
        figures.TemperatureCurve(
          label=estimator,
          search={tau: v for tau, v in values.items() if v is not None},
          selected=search.best("tau"),
          fresh=finite(fresh.by_seed("test_nll").values()) if fresh else (),
        )
      )
    bands = [
      figures.Band(estimator, finite(run.by_seed("test_nll").values()))
      for estimator in REFERENCES
      if (run := _reference(readings, setting, estimator))
    ]
    if curves:
      path = directory / f"tuned_{setting}.png"
      # One colour per estimator in every setting's figure, whichever rows are kept.
      drawn = figures.temperature_curves(
        path, f"{title}, {STEPS:,} steps", curves, bands, colour_order=(*ESTIMATORS, *REFERENCES)
      )
      paths.append(drawn)
  return paths


def get_study() -> Study:
  return Study(
    name="tuned",
    arms=(*_arms(RECORDS), *_long_arms(RECORDS), *_references()),
    report=_report,
    records=RECORDS,
    figures=_figures,
  )
