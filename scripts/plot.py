"""The figures, drawn from run directories (config.json + metrics.jsonl) or a toy-QP workdir.

``--figure`` picks one:

* ``variance``: Figure 2a, log10 trace of the gradient covariance over training
  (``--runs``);
* ``mse_vs_tau``: Figure 2b, log10 MSE against a REINFORCE reference versus tau
  (``--runs``);
* ``convergence``: Figure 2c, iterations to reach validation thresholds
  (``--runs``, ``--thresholds``);
* ``members``: every member's curve in population workdirs, divergences marked,
  Table 1's collapse question (``--runs``, ``--metric``, ``--split``, ``--table``);
* ``toy_qp``: Figure 1 from a toy-QP workdir (``--workdir``, ``--out_dir``): the
  variance heat maps on the simplex, the objective and the SGD curves;
* ``categorical``: each estimator's test bound against the latent shape, from the
  categorical study's table (``--study_json=OUT/categorical_measured.json``, ``--column``).

  python -m scripts.plot --figure=variance --runs='runs/vae16_b20/*' --out=figures/variance.png
  python -m scripts.plot --figure=convergence --runs='runs/vae16_b20/*' --thresholds=130,125,122
  python -m scripts.plot --figure=members \
      --runs=runs/table1/L10_tau0.01_noclip/st_gs,runs/table1/L10_tau0.01_noclip/gr_mc10 \
      --out=docs/figures/table1_L10_tau0.01_members.png
  python -m scripts.plot --figure=toy_qp --workdir=runs/toy_qp --out_dir=docs/figures
  python -m scripts.plot --figure=categorical \
      --study_json=runs/categorical/categorical_measured.json
"""

import glob
import json
import logging
import math
import pathlib
from collections import defaultdict

import matplotlib
import numpy as np
from absl import app, flags
from ml_collections import ConfigDict

from experiments import search
from experiments.registry import EXPERIMENTS
from gr_jax import toy_qp as toy_qp_problem

# JAX's backend probe ("Unable to initialize backend 'tpu'") is not news to someone plotting.
logging.getLogger("jax._src.xla_bridge").setLevel(logging.WARNING)

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.tri as mtri  # noqa: E402

FIGURES = ("variance", "mse_vs_tau", "convergence", "members", "toy_qp", "categorical")
_FIGURE = flags.DEFINE_enum("figure", None, FIGURES, "The figure to draw.")
_RUNS = flags.DEFINE_list("runs", None, "Run directories, or population workdirs (glob patterns).")
_OUT = flags.DEFINE_string("out", "", "Output PNG (default: FIGURE.png).")
_THRESHOLDS = flags.DEFINE_list(
  "thresholds", [], "convergence: validation NLL thresholds (nats); default: 4 quantiles."
)
_METRIC = flags.DEFINE_string("metric", "accuracy", "members: the metric of the curves.")
_SPLIT = flags.DEFINE_string("split", "valid", "members: the split of the curves.")
_TABLE = flags.DEFINE_string(
  "table", "", "members: if set, write the per-learning-rate markdown table here."
)
_WORKDIR = flags.DEFINE_string("workdir", None, "toy_qp: a toy-QP run directory.")
_OUT_DIR = flags.DEFINE_string("out_dir", "docs/figures", "toy_qp: where the PNGs go.")
_STUDY_JSON = flags.DEFINE_string(
  "study_json", None, "categorical: the table data the categorical study wrote (OUT/NAME.json)."
)
_COLUMN = flags.DEFINE_string("column", "test IWAE-1000", "categorical: the bound to plot.")
flags.mark_flag_as_required("figure")


def _out() -> str:
  return _OUT.value or f"{_FIGURE.value}.png"


def load_runs(patterns):
  """[(config dict, [metric records])] for every run directory matching the patterns."""
  runs = []
  for pattern in patterns:
    for directory in sorted(glob.glob(pattern)):
      path = pathlib.Path(directory)
      if (path / "metrics.jsonl").is_file() and (path / "config.json").is_file():
        runs.append((_config(path / "config.json"), _records(path / "metrics.jsonl")))
  if not runs:
    raise SystemExit(
      f"error: no run directory (with config.json and metrics.jsonl) matches {patterns}"
    )
  return runs


def _config(path: pathlib.Path) -> dict:
  try:
    config = json.loads(path.read_text())
  except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
    raise SystemExit(f"error: {path} is damaged ({e}): that run cannot be plotted.") from None
  if not isinstance(config, dict):
    raise SystemExit(f"error: {path} is damaged (not a JSON object): that run cannot be plotted.")
  return config


def _records(path: pathlib.Path) -> list[dict]:
  """metrics.jsonl's records; damaged lines (a disk that filled, an edit) are skipped, and said."""
  records, damaged = [], []
  for number, line in enumerate(path.read_bytes().decode(errors="replace").splitlines(), 1):
    if not line.strip():
      continue
    try:
      record = json.loads(line)
    except json.JSONDecodeError:
      record = None
    if isinstance(record, dict) and isinstance(record.get("step"), int):
      records.append(record)
    else:
      damaged.append(number)
  if damaged:
    print(
      f"warning: {path}: skipped {len(damaged)} damaged line(s) (line {damaged[0]}"
      f"{', ...' if len(damaged) > 1 else ''}); the plot uses the other {len(records)}."
    )
  return records


def series(records, metric, split="train"):
  """Sorted (steps, values) of a metric, finite values only; the final evaluation's records
  (``"final": true``, another M on other images) are no curve point."""
  points = sorted(
    (r["step"], r[metric])
    for r in records
    if r.get("split") == split
    and not r.get("final")
    and metric in r
    and r[metric] is not None
    and math.isfinite(r[metric])
  )
  return [p[0] for p in points], [p[1] for p in points]


def estimator_label(name):
  return {"st": "ST", "st_gs": "ST-GS", "gs": "GS", "reinforce": "REINFORCE"}.get(
    name, name.upper().replace("GR_MC", "GR-MC")
  )


def save(fig, out):
  pathlib.Path(out).parent.mkdir(parents=True, exist_ok=True)
  fig.tight_layout()
  fig.savefig(out, dpi=120)
  plt.close(fig)
  print(f"wrote {out}")


def member_hyperparameters(workdir: pathlib.Path, config: dict) -> dict[int, dict]:
  """{member: its own hyperparameters and seed}: results.json's members once the population has
  finished; before, the members its config's search draws (the same: they depend on the config
  alone)."""
  results = workdir / "results.json"
  if results.is_file():
    try:
      return {m["member"]: m for m in json.loads(results.read_text())["members"]}
    except (UnicodeDecodeError, ValueError, KeyError, TypeError) as e:
      raise SystemExit(
        f"error: {results} is damaged ({type(e).__name__}: {e}): rerun the population's command"
        " to rewrite it."
      ) from None
  experiment = EXPERIMENTS[config["experiment"]]
  lists = {k: tuple(v) if isinstance(v, list) else v for k, v in config["population"].items()}
  chosen = search.members(
    ConfigDict({**config, "population": lists}),
    experiment.HYPERPARAMETERS,
    experiment.paper_search,
  )
  return {m.index: {**m.hyperparameters, "seed": m.seed} for m in chosen}


def variance():
  """Figure 2a: log10 trace of the gradient covariance over training, per estimator (the
  ``log10_grad_variance`` records of ``config.variance_every``; seeds averaged, range shaded)."""
  by_estimator = defaultdict(list)
  for config, records in load_runs(_RUNS.value):
    steps, values = series(records, "log10_grad_variance")
    if steps:
      by_estimator[config["estimator"]].append(dict(zip(steps, values)))
  if not by_estimator:
    raise SystemExit(
      "error: no log10_grad_variance records in these runs (set config.variance_every)"
    )
  fig, ax = plt.subplots(figsize=(5.5, 3.8))
  for estimator, runs in sorted(by_estimator.items()):
    steps = sorted(set.intersection(*(set(r) for r in runs)))
    values = np.array([[r[s] for s in steps] for r in runs])
    (line,) = ax.plot(
      steps,
      values.mean(0),
      marker="o",
      ms=3,
      label=f"{estimator_label(estimator)} ({len(runs)} runs)",
    )
    ax.fill_between(steps, values.min(0), values.max(0), color=line.get_color(), alpha=0.2)
  ax.set_xlabel("training step")
  ax.set_ylabel(r"$\log_{10}$ trace Cov of the encoder gradient")
  ax.set_title("Gradient variance over training")
  ax.legend()
  save(fig, _out())


def mse_vs_tau():
  """Figure 2b: log10 MSE of the gradient against a REINFORCE reference, versus tau (each run
  the mean of its ``log10_grad_mse`` records; runs of one (estimator, tau) averaged, with SEs)."""
  values = defaultdict(lambda: defaultdict(list))
  for config, records in load_runs(_RUNS.value):
    _, mse = series(records, "log10_grad_mse")
    if mse:
      values[config["estimator"]][config["tau"]].append(float(np.mean(mse)))
  if not values:
    raise SystemExit("error: no log10_grad_mse records in these runs (set config.mse_every)")
  fig, ax = plt.subplots(figsize=(5.5, 3.8))
  for estimator, by_tau in sorted(values.items()):
    taus = sorted(by_tau)
    means = [np.mean(by_tau[t]) for t in taus]
    errors = [
      np.std(by_tau[t], ddof=1) / np.sqrt(len(by_tau[t])) if len(by_tau[t]) > 1 else 0.0
      for t in taus
    ]
    ax.errorbar(taus, means, yerr=errors, marker="o", capsize=3, label=estimator_label(estimator))
  ax.set_xscale("log")
  ax.set_xlabel(r"temperature $\tau$")
  ax.set_ylabel(r"$\log_{10}$ MSE of the encoder gradient")
  ax.set_title("Gradient MSE against a REINFORCE reference")
  ax.legend()
  save(fig, _out())


def first_step_below(steps, values, threshold):
  return next((s for s, v in zip(steps, values) if v <= threshold), None)


def convergence():
  """Figure 2c: iterations to reach validation thresholds (``valid`` ``nll`` records), per
  estimator: the mean over the runs that reached each, its SE, and how many reached it."""
  curves = defaultdict(list)
  for config, records in load_runs(_RUNS.value):
    steps, nll = series(records, "nll", split="valid")
    if steps:
      curves[config["estimator"]].append((steps, nll))
  if not curves:
    raise SystemExit(
      "error: these runs have no periodic validation bound (config.eval_every = 0; the final"
      " evaluation is no curve): train with --config.eval_every=N to draw this figure."
    )
  if _THRESHOLDS.value:
    try:
      thresholds = sorted(map(float, _THRESHOLDS.value), reverse=True)
    except ValueError:
      raise SystemExit(
        f"error: --thresholds must be numbers (nats); got {','.join(_THRESHOLDS.value)}."
      ) from None
  else:
    finals = [min(v) for runs in curves.values() for _, v in runs]
    starts = [v[0] for runs in curves.values() for _, v in runs]
    thresholds = sorted(set(np.linspace(np.median(starts), max(finals), 4)), reverse=True)
    if len(thresholds) < 2:
      raise SystemExit(
        "error: every run's validation curve is one value: no thresholds to draw (more periodic"
        " validations: a smaller --config.eval_every; or give --thresholds)."
      )
  fig, ax = plt.subplots(figsize=(5.5, 3.8))
  offsets = np.linspace(-0.15, 0.15, len(curves))
  for offset, (estimator, runs) in zip(offsets, sorted(curves.items())):
    xs, means, errors, counts = [], [], [], []
    for i, threshold in enumerate(thresholds):
      reached = [s for s in (first_step_below(st, v, threshold) for st, v in runs) if s is not None]
      if reached:
        xs.append(i + offset)
        means.append(np.mean(reached))
        errors.append(np.std(reached, ddof=1) / np.sqrt(len(reached)) if len(reached) > 1 else 0.0)
        counts.append(f"{len(reached)}/{len(runs)}")
    bars = ax.errorbar(xs, means, yerr=errors, fmt="o", capsize=3, label=estimator_label(estimator))
    for x, y, count in zip(xs, means, counts):
      ax.annotate(
        count,
        (x, y),
        textcoords="offset points",
        xytext=(4, 4),
        fontsize=7,
        color=bars[0].get_color(),
      )
  ax.set_xticks(range(len(thresholds)), [f"{t:.1f}" for t in thresholds])
  ax.set_xlabel("validation negative bound threshold (nats)")
  ax.set_ylabel("iterations to reach it")
  ax.set_title("Iterations to reach validation thresholds")
  ax.legend()
  save(fig, _out())


def divergence_steps(workdir: pathlib.Path, records) -> dict[int, int]:
  """{member: step of divergence}: results.json's exact steps, else the first logged non-finite
  training metric."""
  results = workdir / "results.json"
  if results.is_file():
    return {
      m["member"]: m["diverged_at_step"]
      for m in json.loads(results.read_text())["members"]
      if m["diverged_at_step"] is not None
    }
  return member_curves(records, "train", "")[1]


METRICS = {"accuracy": ("valid", "test"), "nll": ("valid", "test"), "neg_elbo": ("train",)}
_KEYS = {"step", "split", "member", "final", "num_samples"}  # a metrics line's fields, not metrics


def _title_part(name: str, values) -> str:
  values = sorted(set(values))
  return f"{name}={values[0]:g}" if len(values) == 1 else f"{name} {values[0]:g}-{values[-1]:g}"


def member_curves(records, split, metric):
  """{member: (steps, values)} of the split's metric, and {member: first step with a non-finite
  training metric}."""
  curves, diverged = defaultdict(list), {}
  for r in records:
    member = r.get("member", 0)
    if (
      r.get("split") == "train"
      and member not in diverged
      and any(  # null (or, in older files, NaN)
        v is None or (isinstance(v, float) and not math.isfinite(v))
        for k, v in r.items()
        if k not in ("step", "member")
      )
    ):
      diverged[member] = r["step"]
    if r.get("split") == split and metric in r:
      curves[member].append((r["step"], r[metric]))
  return {m: tuple(zip(*sorted(points))) for m, points in curves.items()}, diverged


def member_table(config, records, curves, diverged) -> list[str]:
  """Markdown rows: per learning rate, each member's best-while-alive and last test accuracy (%)."""
  tests = {m: dict(zip(*c)) for m, c in member_curves(records, "test", "accuracy")[0].items()}
  rates = config["population"]["learning_rate"] or [config["learning_rate"]]
  seeds = config["population"]["seed"] or [config["seed"]]
  last_step = max(r["step"] for r in records)
  rows = [
    f"{config['estimator']}, tau={config['tau']:g}, last logged step {last_step}:",
    "",
    "| lr | test % at best valid (mean ± std) | per seed | last evaluation per seed | diverged at"
    " step |",
    "|---|---|---|---|---|",
  ]
  for index, rate in enumerate(rates):
    best, last, steps = [], [], []
    for member in range(index * len(seeds), (index + 1) * len(seeds)):
      end = diverged.get(member, math.inf)
      alive = [(v, s) for s, v in zip(*curves.get(member, ((), ()))) if s < end]
      # The earliest of the best validation evaluations, as experiments/listops/ selects.
      best.append(
        100 * tests[member][max(alive, key=lambda vs: (vs[0], -vs[1]))[1]] if alive else 0.0
      )
      last.append(100 * tests[member][max(tests[member])] if tests.get(member) else float("nan"))
      steps.append("-" if end == math.inf else str(end))
    spread = (
      f"{np.mean(best):.1f} ± {np.std(best, ddof=1):.1f}" if len(best) > 1 else f"{best[0]:.1f}"
    )
    rows.append(
      f"| {rate:g} | {spread} | {', '.join(f'{b:.1f}' for b in best)} | "
      f"{', '.join(f'{v:.1f}' for v in last)} | {', '.join(steps)} |"
    )
  return rows + [""]


def members():
  """Every member's curve per population workdir, its divergence marked; ``--table``: each
  member's test accuracy at its best validation evaluation while alive, per learning rate."""
  if _METRIC.value not in METRICS or _SPLIT.value not in METRICS[_METRIC.value]:
    allowed = "; ".join(f"{m} ({', '.join(s)})" for m, s in METRICS.items())
    raise app.UsageError(
      f"--metric={_METRIC.value} --split={_SPLIT.value}: the curves are one of {allowed}."
    )
  workdirs = [pathlib.Path(d) for pattern in _RUNS.value for d in sorted(glob.glob(pattern))]
  runs = load_runs([str(d) for d in workdirs])
  fig, axes = plt.subplots(1, len(runs), figsize=(5.5 * len(runs), 4), sharey=True, squeeze=False)
  for ax, workdir, (config, records) in zip(axes[0], workdirs, runs):
    curves = member_curves(records, _SPLIT.value, _METRIC.value)[0]
    if not curves:  # e.g. the default accuracy on a VAE run: say so, no empty figure
      logged = sorted({k for r in records if r.get("split") == _SPLIT.value for k in r} - _KEYS)
      raise app.UsageError(
        f"{workdir} logged no {_SPLIT.value} {_METRIC.value} (its {_SPLIT.value} metrics:"
        f" {', '.join(logged) or 'none'}): give --metric and --split of a curve it has."
      )
    diverged = divergence_steps(workdir, records)
    members = member_hyperparameters(workdir, config)
    rates = sorted({m["learning_rate"] for m in members.values()})
    colours = dict(zip(rates, plt.cm.viridis(np.linspace(0, 0.9, len(rates)))))
    for member, (steps, values) in sorted(curves.items()):
      end = diverged.get(member, math.inf)
      kept = [(s, v) for s, v in zip(steps, values) if s < end]
      colour = colours[members[member]["learning_rate"]] if member in members else "grey"
      if kept:
        ax.plot(*zip(*kept), color=colour, lw=1, alpha=0.8)
      if member in diverged:
        ax.plot(end, kept[-1][1] if kept else 0.0, "x", color=colour, ms=5)
    for rate, colour in colours.items():
      ax.plot([], [], color=colour, label=f"lr {rate:g}")
    alive = len(curves) - len(diverged)
    ax.set_title(
      f"{estimator_label(config['estimator'])},"
      f" {_title_part('tau', [m['tau'] for m in members.values()])}: "
      f"{len(diverged)} of {len(curves)} diverged (x), {alive} alive"
    )
    ax.set_xlabel("step")
    ax.legend(fontsize=7, ncol=2)
  axes[0][0].set_ylabel(f"{_SPLIT.value} {_METRIC.value}")
  save(fig, _out())
  if _TABLE.value:
    lines = []
    for workdir, (config, records) in zip(workdirs, runs):
      lines += member_table(
        config,
        records,
        member_curves(records, "valid", "accuracy")[0],
        divergence_steps(workdir, records),
      )
    pathlib.Path(_TABLE.value).write_text("\n".join(lines))
    print("\n".join(lines))


def _frame(ax, corners):
  ax.plot(*np.vstack([corners, corners[:1]]).T, color="black", lw=0.8)
  for k, label in enumerate(("$p_1 = 1$", "$p_2 = 1$", "$p_3 = 1$")):
    ax.annotate(label, corners[k], ha="center", va="top" if k < 2 else "bottom", fontsize=8)
  ax.set_aspect("equal")
  ax.axis("off")


def toy_qp():
  """Figure 1 from a toy-QP workdir: the variance heat maps, the objective, the SGD curves."""
  workdir, out = pathlib.Path(_WORKDIR.value), pathlib.Path(_OUT_DIR.value)
  files = sorted(
    workdir.glob("variance_tau*.npz"), key=lambda f: float(f.stem.removeprefix("variance_tau"))
  )
  if not files:
    raise SystemExit(
      f"error: no variance_tau*.npz in {workdir}; run the toy_qp experiment there first."
    )
  names = list(json.loads((workdir / "config.json").read_text())["estimators"])
  summary = json.loads((workdir / "variance_summary.json").read_text())
  curves = json.loads((workdir / "optimization.json").read_text())
  corners = toy_qp_problem.to_ternary(np.eye(3))

  fig, axes = plt.subplots(1, len(files), figsize=(4.2 * len(files), 3.8), squeeze=False)
  for ax, file in zip(axes[0], files):
    tau = file.stem.removeprefix("variance_tau")
    with np.load(file) as saved:
      points, difference = saved["points"], saved[names[0]] - saved[names[1]]
    xy = toy_qp_problem.to_ternary(points)
    contour = ax.tricontourf(
      mtri.Triangulation(xy[:, 0], xy[:, 1]), difference, levels=20, cmap="inferno"
    )
    fig.colorbar(
      contour, ax=ax, shrink=0.8, label=rf"$\Delta \log_{{10}}$ Var ({names[0]} $-$ {names[1]})"
    )
    frac = summary[tau]["fraction_lower"]
    ax.set_title(rf"$\tau$ = {tau}: {names[1]} lower at {100 * frac:.0f}% of points", fontsize=9)
    _frame(ax, corners)
  save(fig, out / "toy_variance_difference.png")

  q, c = toy_qp_problem.paper_problem()
  objective = np.array([float(toy_qp_problem.objective(p, q, c)) for p in points])
  fig, ax = plt.subplots(figsize=(4.2, 3.8))
  contour = ax.tricontourf(
    mtri.Triangulation(xy[:, 0], xy[:, 1]), objective, levels=20, cmap="viridis"
  )
  fig.colorbar(contour, ax=ax, shrink=0.8, label=r"$(p - c)^\top Q (p - c)$")
  ax.set_title("Objective on the simplex", fontsize=9)
  _frame(ax, corners)
  save(fig, out / "toy_objective.png")

  fig, ax = plt.subplots(figsize=(5.5, 3.8))
  for name, values in curves.items():
    ax.plot(np.arange(len(values)), values, label=name)
  ax.set_yscale("log")
  ax.set_xlabel("SGD step")
  ax.set_ylabel(r"objective $(p - c)^\top Q (p - c)$")
  ax.set_title("Optimization from a fixed start", fontsize=9)
  ax.legend()
  save(fig, out / "toy_optimization.png")


def categorical():
  """Each estimator's test bound (mean over seeds, their standard deviation as bars) against the
  latent shape, the shapes in the study's order."""
  rows = json.loads(pathlib.Path(_STUDY_JSON.value).read_text())
  shapes = list(dict.fromkeys(row["shape"] for row in rows))
  by_estimator = defaultdict(dict)
  for row in rows:
    values = [v for v in row.get(_COLUMN.value, {}).values() if v is not None]
    if values:
      by_estimator[row["estimator"]][row["shape"]] = (np.mean(values), np.std(values))
  if not by_estimator:
    raise app.UsageError(f"{_STUDY_JSON.value}: no values of column {_COLUMN.value!r}")
  fig, ax = plt.subplots(figsize=(7, 4))
  for offset, (estimator, points) in enumerate(by_estimator.items()):
    xs = [shapes.index(shape) + 0.04 * (offset - len(by_estimator) / 2) for shape in points]
    means, stds = zip(*points.values())
    ax.errorbar(xs, means, yerr=stds, marker="o", capsize=2, label=estimator_label(estimator))
  ax.set_xticks(range(len(shapes)), shapes)
  ax.set(xlabel="latent shape (categories x variables)", ylabel=f"{_COLUMN.value} (nats)")
  ax.legend(fontsize=8)
  save(fig, _out())


DRAW = {
  "variance": variance,
  "mse_vs_tau": mse_vs_tau,
  "convergence": convergence,
  "members": members,
  "toy_qp": toy_qp,
  "categorical": categorical,
}


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  needs = {"toy_qp": "workdir", "categorical": "study_json"}.get(_FIGURE.value, "runs")
  if getattr(flags.FLAGS, needs) is None:
    raise app.UsageError(f"--figure={_FIGURE.value} needs --{needs}")
  DRAW[_FIGURE.value]()


if __name__ == "__main__":
  app.run(main)
