"""The categorical track: the GST / ReinMax MNIST-VAE grid as they ran it, then as it should be
measured, with GR-MC10, GR-QMC100, ZGR and RLOO-2 beside their estimators.

Model and protocol: configs/categorical_vae.py (784-512-256 ReLU, C categories x L variables,
uniform prior, exact KL, grey-level targets, batch 100, 160 epochs, PyTorch's Adam / RAdam).

``published`` (the default): all 60,000 training images and grey-level targets, each estimator
at its published (learning rate, tau, optimizer) for the shape (configs/categorical_vae.py
PUBLISHED; ZGR, GR-MC10, GR-QMC100 and RLOO-2 at the nearest published row, NEAREST there),
seeds 0, 1, 2. Reported as they do: the mean over seeds of the last epoch's training -ELBO, and
the test set's single-sample -ELBO; beside them the test IWAE-100 and IWAE-1000. Where
GR-MC100's published row is not ST-GS's (every shape but 4x24), GR-MC10 also trains at ST-GS's
row (``<shape>/gr_mc10@st_gs``): paired with ST-GS, it differs in the estimator alone.

On 8x4 the grid has their exact method as a reference row (the encoder's likelihood gradient
enumerated over the 4096 configurations, the decoder at the sample), and every arm measures its
encoder gradient's variance, squared bias and MSE against the exact gradient every 16 epochs
(``mse_reference=exact``).

``measured``: dynamic binarization, the last 10,000 training images as a validation split, tau
searched over TAUS on validation IWAE-100 (seed 0, one population per shape and estimator) at
the estimator's published learning rate and optimizer (GR-MC10's second row at ST-GS's); then
seeds 1, 2, 3 at the selected tau (arms declared once the search's records are kept), reported by
test IWAE-100 and IWAE-1000.

  python -m experiments.study --study=configs/studies/categorical.py --out=runs/categorical \
      --data_root=../shared/data [--arms=published/8x4/]
  python -m experiments.study --study=configs/studies/categorical.py:measured \
      --out=runs/categorical --data_root=../shared/data

Shapes in the order they are run: 8x4, 16x12, 10x30, then 4x24, 8x16, 64x8. Each table gives
each estimator's cost: loss evaluations per step, and the milliseconds of one training step at
batch 100 from the bench kept in records/bench_categorical.json (its machine named):

  python -m scripts.bench_vae \
      --models=categorical_8x4,categorical_4x24,categorical_8x16,categorical_16x12,\
categorical_64x8,categorical_10x30 \
      --batch_sizes=100 --eval_images=0 --out=records/bench_categorical.json \
      --repeats=20 --estimators=st,st_gs,gr_mc100,gst,reinmax,zgr,gr_mc10,gr_qmc100,rloo2,exact
"""

import dataclasses
import pathlib

from configs import categorical_vae
from experiments.studies import figures, leaderboard, records, tables
from experiments.studies.runner import Arm, Report, Study
from gr_jax import estimators

SHAPES = ("8x4", "16x12", "10x30", "4x24", "8x16", "64x8")
ESTIMATORS = (
  *categorical_vae.PUBLISHED,  # st, st_gs, gr_mc100, gst, reinmax
  "zgr",
  "gr_mc10",
  "gr_qmc100",
  "rloo2",
)
SEEDS = (0, 1, 2)
FRESH_SEEDS = (1, 2, 3)
TAUS = (0.1, 0.25, 0.5, 1.0, 1.5)  # the tuned leaderboard's grid (configs/studies/tuned.py)
RECORDS = "records/categorical"
MEASURED = (
  "binarization=dynamic",
  "train_split=train",
  "num_steps=80000",  # 160 epochs of the 50,000 training images
  "num_eval_samples=100",
  "extra_test_samples=(1000,)",
)


def _has_temperature(estimator: str) -> bool:
  # The exact row's encoder gradient is enumerated and its sample (ST's) is a categorical draw, so
  # the tau of ReinMax's row, which it takes, goes unused as ZGR's and RLOO-2's does.
  return estimator not in ("zgr", "rloo2", "exact")


def _key(estimator: str, row: str) -> str:
  """An arm's row name: the estimator's, ``<estimator>@<row>`` at another estimator's row."""
  return f"{estimator}@{row}" if row else estimator


def _published_arm(
  shape: str, estimator: str, phase: str, name: str = "", row: str = "", **fields
) -> Arm:
  """An arm at the published (learning rate, tau, optimizer) for the shape of ``row``: the
  estimator's own (or its nearest) by default; another estimator's row names the arm
  ``<estimator>@<row>``."""
  learning_rate, tau, optimizer = categorical_vae.published_hyperparameters(row or estimator, shape)
  return Arm(
    name=name or f"{phase}/{shape}/{_key(estimator, row)}",
    config=f"configs/categorical_vae.py:{shape}",
    overrides=(
      f"estimator={estimator}",
      f"learning_rate={learning_rate}",
      f"tau={tau}",
      f"optimizer={optimizer}",
      *fields.pop("overrides", ()),
    ),
    dataset_dir="mnist",
    labels={
      "shape": shape,
      "estimator": estimator,
      "phase": phase,
      **({"row": row} if row else {}),
    },
    **fields,
  )


# GR-MC10 at ST-GS's published row: paired with ST-GS, the two differ in the estimator alone (GR
# Rao-Blackwellizes ST-GS at the same tau), where at GR-MC100's row they differ in learning rate,
# tau or optimizer as well. GR-MC10 stands within a seed's spread of GR-MC100 on 8x4 and 16x12,
# at under half its cost on 16x12 (records/bench_categorical.json).
AT_ROW = ("gr_mc10", "st_gs")
AT_ROW_KEY = _key(*AT_ROW)


def _at_row_shapes(phase: str) -> tuple[str, ...]:
  """The shapes where GR-MC100's published row is not ST-GS's: its (learning rate, tau,
  optimizer) as published, its learning rate or optimizer as measured (where tau is searched)."""

  def row(estimator, shape):
    learning_rate, tau, optimizer = categorical_vae.published_hyperparameters(estimator, shape)
    return (learning_rate, optimizer) if phase == "measured" else (learning_rate, tau, optimizer)

  return tuple(shape for shape in SHAPES if row("gr_mc100", shape) != row(AT_ROW[1], shape))


# On the 8x4 shape, where C ** L = 4096 configurations are enumerated: every estimator's encoder
# gradient variance, squared bias and MSE against the exact gradient every 16 epochs.
BIAS_EVERY = 16 * 600
BIAS = (f"variance_every={BIAS_EVERY}", f"mse_every={BIAS_EVERY}", "mse_reference=exact")


def _rows(shape: str, phase: str):
  """The shape's (estimator, row) pairs in the phase: each estimator at its own row (row ""),
  then GR-MC10 at ST-GS's where that row differs from GR's."""
  yield from ((estimator, "") for estimator in ESTIMATORS)
  if shape in _at_row_shapes(phase):
    yield AT_ROW


def _published_arms():
  for shape in SHAPES:
    overrides = BIAS if shape == "8x4" else ()
    for estimator, row in _rows(shape, "published"):
      yield _published_arm(shape, estimator, "published", row=row, seeds=SEEDS, overrides=overrides)
    if shape == "8x4":
      yield _exact_arm()


def _exact_arm() -> Arm:
  """Their exact method on 8x4: the encoder's likelihood gradient enumerated (4096 decoder
  passes per step, shared by the batch's images), the decoder at ST's sample, ReinMax's
  published row (their README's bias runs use it)."""
  arm = _published_arm("8x4", "reinmax", "published", seeds=SEEDS, overrides=BIAS)
  overrides = (*arm.overrides, "estimator=st", "likelihood_gradient=exact")
  labels = {**arm.labels, "estimator": "exact", "row": "reinmax"}
  return dataclasses.replace(arm, name="published/8x4/exact", overrides=overrides, labels=labels)


def _measured_arms(records_dir: str):
  for shape in SHAPES:
    for estimator, row in _rows(shape, "measured"):
      if not _has_temperature(estimator):
        yield _published_arm(
          shape, estimator, "measured", row=row, seeds=FRESH_SEEDS, overrides=MEASURED
        )
        continue
      search = _published_arm(
        shape,
        estimator,
        "measured",
        name=f"measured/{shape}/search/{_key(estimator, row)}",
        row=row,
        seeds=(0,),
        lists={"tau": TAUS},
        overrides=MEASURED,
      )
      yield search
      tau = records.best_of_kept(pathlib.Path(records_dir, search.name), "tau")
      if tau is not None:
        yield _published_arm(
          shape,
          estimator,
          "measured",
          row=row,
          seeds=FRESH_SEEDS,
          overrides=(*MEASURED, f"tau={tau}"),
        )


def _last_epoch_neg_elbo(member: records.Member) -> float | None:
  curve = member.curve("neg_elbo")
  return records.finite(curve[max(curve)]) if curve else None


TRAIN = ("train -ELBO (last epoch)", _last_epoch_neg_elbo)
# GR's rows and what each is paired against, seed by seed.
GR = ("gr_mc10", "gr_mc100", "gr_qmc100", AT_ROW_KEY)
OTHERS = ("st_gs", "gst", "reinmax", "zgr")


# The bench's ms per step (scripts/bench_vae.py --models=categorical_<shape> --out=...), measured
# alone and side by side (the command is in the results page's section).
BENCH = pathlib.Path(__file__).resolve().parents[2] / "records/bench_categorical.json"


def _ms_per_step(timings, shape: str, estimator: str, run: records.Run, devices: set) -> str:
  """The bench's milliseconds per training step at the run's batch size; its machine is added
  to ``devices``, named once under the table."""
  # The bench names the model by its shape (categorical_<shape>); the run's config says
  # "categorical".
  bench_config = {**run.config, "model": f"categorical_{shape}"}
  timing = leaderboard.bench_timing(timings, bench_config, estimator)
  if timing is None:
    return "—"
  devices.add(timing[1])
  return f"{timing[0]:.1f}"


def _bench_line(devices: set) -> list[str]:
  if not devices:
    return []
  return [
    "bench ms / step: one training step at batch 100, one member, timed on "
    + ", ".join(f"`{device}`" for device in sorted(devices))
    + f" (jax's device kind and backend); {BENCH.relative_to(BENCH.parents[1])}.",
    "",
  ]


def _paired_lines(runs: dict[str, records.Run], columns: dict) -> list[str]:
  """GR against ST-GS, GST, ReinMax and ZGR on each column, paired by seed."""
  rows = [
    [
      f"{gr} − {other}",
      *(
        tables.paired(runs[other].by_seed(value), runs[gr].by_seed(value)).cell()
        for value in columns.values()
      ),
    ]
    for gr in GR
    for other in OTHERS
    if gr in runs and other in runs
  ]
  if not rows:
    return []
  return [
    "GR against the others, paired by seed (GR − other: negative where GR's bound is lower):",
    "",
    *tables.markdown_table(["pair", *columns], rows),
    "",
  ]


def _ranking_line(runs: dict[str, records.Run], by_train, by_held_out) -> list[str]:
  """The estimators ranked by their training bound and by their held-out bound, and how far the
  two orders agree."""
  if len(runs) < 2:
    return []
  orders = [
    tables.ranking({e: tables.mean(run.by_seed(value).values()) for e, run in runs.items()})
    for _, value in (by_train, by_held_out)
  ]
  agree, pairs = tables.same_order(*orders)
  return [
    f"Ranked by {by_train[0]} (mean over seeds, best first): {', '.join(orders[0])}; by"
    f" {by_held_out[0]}: {', '.join(orders[1])}; {agree} of {pairs} pairs in the same order.",
    "",
  ]


GRADIENT = {
  "log10 squared bias": "log10_grad_squared_bias",
  "log10 variance": "log10_grad_variance",
  "log10 MSE": "log10_grad_mse",
}


def _unresolved_bias(run: records.Run) -> tuple[int, int]:
  """(measurements whose squared bias is <= 0, measurements): the squared bias is logged less its
  Monte Carlo variance, so an unbiased estimator's is <= 0 about half the time, and its log10 is
  logged as null. A measurement is a step where the variance was logged."""
  unresolved = measured = 0
  for member in run.members:
    bias = member.curve(GRADIENT["log10 squared bias"])
    steps = member.curve(GRADIENT["log10 variance"])
    measured += len(steps)
    unresolved += sum(step not in bias for step in steps)
  return unresolved, measured


def _gradient_lines(runs: dict[str, records.Run]) -> list[str]:
  """The encoder gradient against the exact one, measured at every checkpoint of each seed."""
  rows, checkpoints, unresolved_rows = [], set(), False
  for estimator, run in runs.items():
    if not any(member.curve(metric) for member in run.members for metric in GRADIENT.values()):
      continue  # not measured (only the 8x4 arms measure it)
    columns = []
    for metric in GRADIENT.values():
      per_seed = {}
      for member in run.members:
        curve = member.curve(metric)
        if curve and metric == GRADIENT["log10 variance"]:
          checkpoints.add(len(curve))
        per_seed[member.seed] = tables.mean(curve.values())
      columns.append(tables.spread(per_seed.values()))
    unresolved, measured = _unresolved_bias(run)
    if unresolved:
      # A mean of the log10 over the positive estimates alone would overstate the bias.
      columns[0] = f"~0 at {unresolved} of {measured}"
      unresolved_rows = True
    rows.append([estimator, *columns])
  if not rows:
    return []
  counts = "/".join(str(n) for n in sorted(checkpoints))
  lines = [
    "The encoder's gradient against the exact gradient (4096 configurations enumerated), every"
    f" {BIAS_EVERY:,} steps: each seed's mean over its {counts} measurements, then mean ± sd"
    " over seeds:",
    "",
    *tables.markdown_table(["estimator", *GRADIENT], rows),
    "",
  ]
  if unresolved_rows:
    lines += [
      "~0 at k of n: at k of the seeds' n measurements the squared bias, less its Monte Carlo"
      " variance, is ≤ 0 (zero within the noise of the draws), so no log10 mean is given.",
      "",
    ]
  if "exact" in runs and "exact" not in (row[0] for row in rows):
    lines += [
      "exact is not a row: it is the reference, its squared bias and variance against itself"
      " are 0 at every measurement (log10 −inf, logged as null).",
      "",
    ]
  return lines


def _shape_runs(readings, phase: str, shape: str) -> dict[str, records.Run]:
  """The shape's kept runs by row name (``_rows``' order)."""
  keys = [_key(*pair) for pair in _rows(shape, phase)]
  runs = {key: readings.get(f"{phase}/{shape}/{key}") for key in keys}
  return {key: run for key, run in runs.items() if run is not None}


def _estimator_and_row(readings, name: str) -> tuple[str, str]:
  """The arm's (estimator, the estimator whose published row it trains at), as declared."""
  labels = readings.arms[name].labels
  return labels["estimator"], labels.get("row", labels["estimator"])


def _at_row_line(runs: dict[str, records.Run], what: str) -> list[str]:
  """What the row named ``<estimator>@<row>`` is, under a table that has it."""
  if AT_ROW_KEY not in runs:
    return []
  return [
    f"{AT_ROW_KEY}: {AT_ROW[0]} at {AT_ROW[1]}'s published row ({what}), so that it and"
    f" {AT_ROW[1]} differ in the estimator alone.",
    "",
  ]


def _published_report(readings) -> Report:
  lines, data, timings = [], [], leaderboard.read_bench(BENCH)
  for shape in SHAPES:
    runs = _shape_runs(readings, "published", shape)
    exact = readings.get(f"published/{shape}/exact")
    rows, devices = [], set()
    for key, run in (*runs.items(), *((("exact", exact),) if exact else ())):
      estimator, row = _estimator_and_row(readings, f"published/{shape}/{key}")
      learning_rate, tau, optimizer = categorical_vae.published_hyperparameters(row, shape)
      columns = {
        TRAIN[0]: run.by_seed(TRAIN[1]),
        "test -ELBO (1 sample)": run.by_seed("test_nll"),
        "test IWAE-100": run.by_seed("test_nll_M100"),
        "test IWAE-1000": run.by_seed("test_nll_M1000"),
      }
      # ZGR, RLOO-2 and the exact row take the row's tau but have no temperature to use it.
      tau_text = f"{tau:g}" if _has_temperature(estimator) else "-"
      rows.append(
        [
          key,
          f"{learning_rate:g}, {tau_text}, {optimizer.removeprefix('torch_')}",
          "4096 (enumerated)"
          if estimator == "exact"
          else estimators.get(estimator).loss_evaluations,
          _ms_per_step(timings, shape, estimator, run, devices),
          *(tables.spread(values.values()) for values in columns.values()),
        ]
      )
      data.append({"shape": shape, "estimator": key, **columns})
    if rows:
      header = [
        "estimator",
        "lr, tau, optimizer",
        "evaluations / step",
        "bench ms / step",
        *columns,
      ]
      lines += [f"### {shape} (C categories x L variables)", ""]
      lines += tables.markdown_table(header, rows) + [""] + _bench_line(devices)
      lines += _at_row_line(runs, "learning rate, tau, optimizer")
      lines += _paired_lines(
        runs,
        {
          TRAIN[0]: TRAIN[1],
          "test -ELBO (1 sample)": "test_nll",
          "test IWAE-100": "test_nll_M100",
        },
      )
      lines += _ranking_line(runs, TRAIN, ("test IWAE-100", "test_nll_M100"))
      lines += _gradient_lines({**runs, **({"exact": exact} if exact else {})})
  lines += [
    "Their published numbers are not set beside these: no public copy of the ReinMax paper's"
    " results table could be read here (the grid follows its launchers and its table of"
    " selected hyperparameters).",
    *readings.missing_lines(),
  ]
  return Report("\n".join(lines) + "\n", data)


def _search_lines(readings, shape: str) -> tuple[list[str], list[dict]]:
  """The shape's temperature searches (seed 0): each tau's bounds, the selected one marked; the
  table's lines and its rows' data."""
  columns = {
    "valid IWAE-100": "valid_nll",
    "test IWAE-100": "test_nll",
    TRAIN[0]: TRAIN[1],
  }
  cell = lambda v: "-" if v is None else f"{v:.2f}"  # noqa: E731
  rows, data = [], []
  for key in (_key(*pair) for pair in _rows(shape, "measured")):
    search = readings.get(f"measured/{shape}/search/{key}")
    if search is None:
      continue
    search_rows, values = tables.search_rows(search, columns, cell)
    rows += [[key, *row] for row in search_rows]
    data += [{"shape": shape, "search": key, **v} for v in values]
  if not rows:
    return [], data
  lines = [
    "Temperature search (seed 0; tau selected by validation IWAE-100):",
    "",
    *tables.markdown_table(["estimator", "tau", *columns], rows),
    "",
  ]
  return lines, data


def _measured_report(readings) -> Report:
  lines, data, timings = [], [], leaderboard.read_bench(BENCH)
  for shape in SHAPES:
    runs = _shape_runs(readings, "measured", shape)
    searches, search_data = _search_lines(readings, shape)
    data += search_data
    rows, devices = [], set()
    for key, run in runs.items():
      estimator, _ = _estimator_and_row(readings, f"measured/{shape}/{key}")
      searched = readings.get(f"measured/{shape}/search/{key}") is not None
      tau = run.config["tau"] if searched else None  # the fresh seeds' tau: the one selected
      columns = {
        "test IWAE-100": run.by_seed("test_nll"),
        "test IWAE-1000": run.by_seed("test_nll_M1000"),
      }
      rows.append(
        [
          key,
          "—" if tau is None else f"{tau:g}",
          estimators.get(estimator).loss_evaluations,
          _ms_per_step(timings, shape, estimator, run, devices),
          *(tables.spread(values.values()) for values in columns.values()),
        ]
      )
      data.append({"shape": shape, "estimator": key, "tau": tau, **columns})
    if rows or searches:
      lines += [f"### {shape}", ""]
    if rows:
      header = ["estimator", "selected tau", "evaluations / step", "bench ms / step", *columns]
      lines += tables.markdown_table(header, rows) + [""] + _bench_line(devices)
      lines += _at_row_line(runs, "learning rate, optimizer; tau searched")
      lines += _paired_lines(
        runs, {"test IWAE-100": "test_nll", "test IWAE-1000": "test_nll_M1000"}
      )
      lines += _ranking_line(runs, TRAIN, ("test IWAE-100", "test_nll"))
    lines += searches
  while lines and not lines[-1]:
    lines.pop()  # the missing arms' lines open with their own blank line
  lines += readings.missing_lines()
  return Report("\n".join(lines) + "\n", data)


def _figure(phase: str, bound: str, ylabel: str):
  """The figure of item 3: each estimator's test bound against the latent shape."""

  def draw(readings, directory: pathlib.Path) -> list[pathlib.Path]:
    curves = []
    for key in dict.fromkeys(_key(*pair) for shape in SHAPES for pair in _rows(shape, phase)):
      values = {
        shape: {seed: v for seed, v in run.by_seed(bound).items() if v is not None}
        for shape in SHAPES
        if (run := readings.get(f"{phase}/{shape}/{key}")) is not None
      }
      if any(values.values()):
        curves.append(figures.ShapeCurve(key, values))
    if len({shape for curve in curves for shape, v in curve.values.items() if v}) < 2:
      return []  # a curve needs two shapes
    path = directory / f"categorical_{phase}.png"
    title = f"Categorical MNIST VAE, {phase} protocol"
    # ST-GS is the estimator GR Rao-Blackwellizes: the panel of differences pairs each row
    # with it, seed by seed. GR-MC10 at ST-GS's row is GR-MC10's colour, dashed.
    return [
      figures.shape_curves(
        path,
        title,
        SHAPES,
        curves,
        ylabel,
        colour_order=ESTIMATORS,
        reference="st_gs",
        variants={AT_ROW_KEY: AT_ROW[0]},
      )
    ]

  return draw


def get_study(arg: str = "") -> Study:
  if arg not in ("", "published", "measured"):
    raise ValueError(
      f"configs/studies/categorical.py takes '', 'published' or 'measured'; got {arg!r}"
    )
  if arg == "measured":
    return Study(
      name="categorical_measured",
      arms=tuple(_measured_arms(RECORDS)),
      report=_measured_report,
      records=RECORDS,
      figures=_figure("measured", "test_nll", "test IWAE-100 (nats, dynamic binarization)"),
    )
  return Study(
    name="categorical_published",
    arms=tuple(_published_arms()),
    report=_published_report,
    records=RECORDS,
    figures=_figure("published", "test_nll_M100", "test IWAE-100 (nats, grey-level targets)"),
  )
