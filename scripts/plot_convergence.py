"""Figure 2c: iterations to reach validation thresholds, per estimator.

For each threshold (a validation negative bound in nats, from the ``valid``
``nll`` records logged every ``config.eval_every`` steps), the mean number of
iterations and its standard error over the runs that reached it; the count of
runs that reached it is written beside each point.

  python -m scripts.plot_convergence --runs='runs/vae16_b20/*' --thresholds=130,125,122 \
      --out=figures/convergence.png
"""

from collections import defaultdict

import numpy as np
from absl import app, flags

from scripts import plot_common

_RUNS = flags.DEFINE_list("runs", None, "Run directories (glob patterns).", required=True)
_THRESHOLDS = flags.DEFINE_list(
  "thresholds", [], "Validation NLL thresholds (nats); default: 4 quantiles."
)
_OUT = flags.DEFINE_string("out", "convergence.png", "Output PNG.")


def first_step_below(steps, values, threshold):
  return next((s for s, v in zip(steps, values) if v <= threshold), None)


def main(argv):
  del argv
  curves = defaultdict(list)
  for config, records in plot_common.load_runs(_RUNS.value):
    steps, nll = plot_common.series(records, "nll", split="valid")
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
  fig, ax = plot_common.plt.subplots(figsize=(5.5, 3.8))
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
    bars = ax.errorbar(
      xs, means, yerr=errors, fmt="o", capsize=3, label=plot_common.estimator_label(estimator)
    )
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
  plot_common.save(fig, _OUT.value)


if __name__ == "__main__":
  app.run(main)
