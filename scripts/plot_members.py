"""Every member's validation curve in a population workdir, its divergence marked (Table 1's
collapse question).

One panel per workdir (e.g. one per estimator); one line per member, coloured
by its own learning rate (results.json's members, or, before the population
has finished, the members its search draws), titled with the members' own
temperatures, drawn up to the member's divergence (results.json's
``diverged_at_step`` once the population has finished; before, the first
logged non-finite training loss, a step of ``log_every``), where a cross marks it (at
0 for a member that diverged before its first evaluation). Works on finished
and interrupted populations (it reads config.json and metrics.jsonl only).
With ``--table``, a markdown table per workdir and learning rate: each
member's test accuracy at its best validation evaluation while alive (the
model selection of experiments/listops/; 0 when it diverged before its first
evaluation), their mean ± std, its last evaluation (a diverged member's frozen
last finite state) and its divergence step.

  python -m scripts.plot_members
  --runs=runs/table1/L10_tau0.01_noclip/st_gs,runs/table1/L10_tau0.01_noclip/gr_mc10 \
      --out=docs/figures/table1_L10_tau0.01_members.png
"""

import glob
import json
import math
import pathlib
from collections import defaultdict

import numpy as np
from absl import app, flags

from scripts import plot_common

_RUNS = flags.DEFINE_list(
  "runs", None, "Population workdirs (glob patterns), one panel each.", required=True
)
_METRIC = flags.DEFINE_string("metric", "accuracy", "The metric of the curves.")
_SPLIT = flags.DEFINE_string("split", "valid", "The split of the curves.")
_OUT = flags.DEFINE_string("out", "members.png", "Output PNG.")
_TABLE = flags.DEFINE_string(
  "table", "", "If set, write the per-learning-rate markdown table here."
)


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


def main(argv):
  del argv
  if _METRIC.value not in METRICS or _SPLIT.value not in METRICS[_METRIC.value]:
    allowed = "; ".join(f"{m} ({', '.join(s)})" for m, s in METRICS.items())
    raise app.UsageError(
      f"--metric={_METRIC.value} --split={_SPLIT.value}: the curves are one of {allowed}."
    )
  workdirs = [pathlib.Path(d) for pattern in _RUNS.value for d in sorted(glob.glob(pattern))]
  runs = plot_common.load_runs([str(d) for d in workdirs])
  fig, axes = plot_common.plt.subplots(
    1, len(runs), figsize=(5.5 * len(runs), 4), sharey=True, squeeze=False
  )
  for ax, workdir, (config, records) in zip(axes[0], workdirs, runs):
    curves = member_curves(records, _SPLIT.value, _METRIC.value)[0]
    if not curves:  # e.g. the default accuracy on a VAE run: say so, no empty figure
      logged = sorted({k for r in records if r.get("split") == _SPLIT.value for k in r} - _KEYS)
      raise app.UsageError(
        f"{workdir} logged no {_SPLIT.value} {_METRIC.value} (its {_SPLIT.value} metrics:"
        f" {', '.join(logged) or 'none'}): give --metric and --split of a curve it has."
      )
    diverged = divergence_steps(workdir, records)
    members = plot_common.member_hyperparameters(workdir, config)
    rates = sorted({m["learning_rate"] for m in members.values()})
    colours = dict(zip(rates, plot_common.plt.cm.viridis(np.linspace(0, 0.9, len(rates)))))
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
      f"{plot_common.estimator_label(config['estimator'])},"
      f" {_title_part('tau', [m['tau'] for m in members.values()])}: "
      f"{len(diverged)} of {len(curves)} diverged (x), {alive} alive"
    )
    ax.set_xlabel("step")
    ax.legend(fontsize=7, ncol=2)
  axes[0][0].set_ylabel(f"{_SPLIT.value} {_METRIC.value}")
  plot_common.save(fig, _OUT.value)
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


if __name__ == "__main__":
  app.run(main)
