"""Figure 2b: log10 MSE of the gradient against a REINFORCE reference, versus tau.

Each run contributes the mean of its ``log10_grad_mse`` records (logged every
``config.mse_every`` steps, against ``config.mse_reference_draws`` REINFORCE
draws); runs of one (estimator, tau) are averaged, with standard errors.

  python -m scripts.plot_mse_vs_tau --runs='runs/mse/*' --out=figures/mse_vs_tau.png
"""

from collections import defaultdict

import numpy as np
from absl import app, flags

from scripts import plot_common

_RUNS = flags.DEFINE_list("runs", None, "Run directories (glob patterns).", required=True)
_OUT = flags.DEFINE_string("out", "mse_vs_tau.png", "Output PNG.")


def main(argv):
  del argv
  values = defaultdict(lambda: defaultdict(list))
  for config, records in plot_common.load_runs(_RUNS.value):
    _, mse = plot_common.series(records, "log10_grad_mse")
    if mse:
      values[config["estimator"]][config["tau"]].append(float(np.mean(mse)))
  if not values:
    raise SystemExit("error: no log10_grad_mse records in these runs (set config.mse_every)")
  fig, ax = plot_common.plt.subplots(figsize=(5.5, 3.8))
  for estimator, by_tau in sorted(values.items()):
    taus = sorted(by_tau)
    means = [np.mean(by_tau[t]) for t in taus]
    errors = [
      np.std(by_tau[t], ddof=1) / np.sqrt(len(by_tau[t])) if len(by_tau[t]) > 1 else 0.0
      for t in taus
    ]
    ax.errorbar(
      taus, means, yerr=errors, marker="o", capsize=3, label=plot_common.estimator_label(estimator)
    )
  ax.set_xscale("log")
  ax.set_xlabel(r"temperature $\tau$")
  ax.set_ylabel(r"$\log_{10}$ MSE of the encoder gradient")
  ax.set_title("Gradient MSE against a REINFORCE reference")
  ax.legend()
  plot_common.save(fig, _OUT.value)


if __name__ == "__main__":
  app.run(main)
