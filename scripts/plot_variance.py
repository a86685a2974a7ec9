"""Figure 2a: log10 trace of the gradient covariance over training, per estimator.

Reads the ``log10_grad_variance`` records that runs log every
``config.variance_every`` steps; runs of one estimator (seeds) are averaged,
with their range shaded.

  python -m scripts.plot_variance --runs='runs/vae16_b20/*' --out=figures/variance.png
"""

from collections import defaultdict

import numpy as np
from absl import app, flags

from scripts import plot_common

_RUNS = flags.DEFINE_list("runs", None, "Run directories (glob patterns).", required=True)
_OUT = flags.DEFINE_string("out", "variance.png", "Output PNG.")


def main(argv):
  del argv
  by_estimator = defaultdict(list)
  for config, records in plot_common.load_runs(_RUNS.value):
    steps, values = plot_common.series(records, "log10_grad_variance")
    if steps:
      by_estimator[config["estimator"]].append(dict(zip(steps, values)))
  if not by_estimator:
    raise SystemExit(
      "error: no log10_grad_variance records in these runs (set config.variance_every)"
    )
  fig, ax = plot_common.plt.subplots(figsize=(5.5, 3.8))
  for estimator, runs in sorted(by_estimator.items()):
    steps = sorted(set.intersection(*(set(r) for r in runs)))
    values = np.array([[r[s] for s in steps] for r in runs])
    (line,) = ax.plot(
      steps,
      values.mean(0),
      marker="o",
      ms=3,
      label=f"{plot_common.estimator_label(estimator)} ({len(runs)} runs)",
    )
    ax.fill_between(steps, values.min(0), values.max(0), color=line.get_color(), alpha=0.2)
  ax.set_xlabel("training step")
  ax.set_ylabel(r"$\log_{10}$ trace Cov of the encoder gradient")
  ax.set_title("Gradient variance over training")
  ax.legend()
  plot_common.save(fig, _OUT.value)


if __name__ == "__main__":
  app.run(main)
