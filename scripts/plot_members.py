"""Every member's validation curve in a population workdir, its divergence marked (Table 1's collapse question).

One panel per workdir (e.g. one per estimator); one line per member, coloured
by learning rate, drawn up to the member's divergence (its first non-finite
training loss), where a cross marks the step. Works on finished and
interrupted populations (it reads config.json and metrics.jsonl only).

  python scripts/plot_members.py --runs=runs/table1/L10_tau0.01_noclip/st_gs,runs/table1/L10_tau0.01_noclip/gr_mc10 \
      --out=docs/figures/table1_L10_tau0.01_members.png
"""

import math
from collections import defaultdict

import numpy as np
from absl import app, flags

import plot_common

_RUNS = flags.DEFINE_list("runs", None, "Population workdirs (glob patterns), one panel each.", required=True)
_METRIC = flags.DEFINE_string("metric", "accuracy", "The metric of the curves.")
_SPLIT = flags.DEFINE_string("split", "valid", "The split of the curves.")
_OUT = flags.DEFINE_string("out", "members.png", "Output PNG.")


def member_curves(records, split, metric):
  """{member: (steps, values)} of the split's metric, and {member: first step with a non-finite training loss}."""
  curves, diverged = defaultdict(list), {}
  for r in records:
    member = r.get("member", 0)
    if r.get("split") == "train" and member not in diverged and any(
        isinstance(v, float) and not math.isfinite(v) for k, v in r.items() if k not in ("step", "member")):
      diverged[member] = r["step"]
    if r.get("split") == split and metric in r:
      curves[member].append((r["step"], r[metric]))
  return {m: tuple(zip(*sorted(points))) for m, points in curves.items()}, diverged


def main(argv):
  del argv
  runs = plot_common.load_runs(_RUNS.value)
  fig, axes = plot_common.plt.subplots(1, len(runs), figsize=(5.5 * len(runs), 4), sharey=True, squeeze=False)
  for ax, (config, records) in zip(axes[0], runs):
    curves, diverged = member_curves(records, _SPLIT.value, _METRIC.value)
    rates = config["population"]["learning_rate"] or [config["learning_rate"]]
    colours = dict(zip(sorted(set(rates)), plot_common.plt.cm.viridis(np.linspace(0, 0.9, len(set(rates))))))
    member_rate = [rate for rate in rates for _ in (config["population"]["seed"] or [config["seed"]])]
    for member, (steps, values) in sorted(curves.items()):
      end = diverged.get(member, math.inf)
      kept = [(s, v) for s, v in zip(steps, values) if s < end]
      colour = colours[member_rate[member]] if member < len(member_rate) else "grey"
      if kept:
        ax.plot(*zip(*kept), color=colour, lw=1, alpha=0.8)
      if member in diverged:
        ax.plot(end, kept[-1][1] if kept else 0.0, "x", color=colour, ms=5)
    for rate, colour in colours.items():
      ax.plot([], [], color=colour, label=f"lr {rate:g}")
    alive = len(curves) - len(diverged)
    ax.set_title(f"{plot_common.estimator_label(config['estimator'])}, tau={config['tau']:g}: "
                 f"{len(diverged)} of {len(curves)} diverged (x), {alive} alive")
    ax.set_xlabel("step")
    ax.legend(fontsize=7, ncol=2)
  axes[0][0].set_ylabel(f"{_SPLIT.value} {_METRIC.value}")
  plot_common.save(fig, _OUT.value)


if __name__ == "__main__":
  app.run(main)
