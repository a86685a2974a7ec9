r"""The paper's Figure 2b: MSE of the encoder gradient against a REINFORCE reference, versus tau.

At a trained 16-ary VAE checkpoint (``--vae_workdir``, population member
``--vae_member``) and a fixed batch of 20 training images, for each estimator
and temperature,

.. math:: \mathrm{MSE} = E\|\hat g - g\|^2 = \mathrm{Var} + \mathrm{Bias}^2,

with g the mean of ``--reference_draws`` REINFORCE draws (unbiased for the
gradient of the expected bound, whatever tau; its own Monte Carlo variance is
removed from the squared bias) and the moments of ``--draws`` draws of the
estimator (``gr_jax.diagnostics.GradientStats``).

Writes ``--out_dir``/figure_2b.{json,md} and figures/figure_2b.png.

  python -m scripts.figure_2b --vae_workdir=runs/table2/16ary_B20/st_gs \
      --data_dir=../shared/data/binarized_mnist --out_dir=docs
"""

import json
import logging
import pathlib

import jax
from absl import app, flags

from experiments.vae import gradients as vae_gradients
from gr_jax import diagnostics
from scripts import common

# JAX's backend probe ("Unable to initialize backend 'tpu'") is not news to someone plotting.
logging.getLogger("jax._src.xla_bridge").setLevel(logging.WARNING)

_ESTIMATORS = flags.DEFINE_list(
  "figure_estimators", ["st_gs", "gr_mc10", "gr_mc100", "gr_mc1000"], "Estimators."
)
_FIGURE_TAUS = flags.DEFINE_list(
  "figure_taus", ["0.1", "0.2", "0.3", "0.5", "0.7", "1.0"], "Temperatures."
)
_DRAWS = flags.DEFINE_integer("figure_draws", 200, "Estimator draws per (estimator, tau).")
_VAE_WORKDIR = flags.DEFINE_string("vae_workdir", "", "A trained 16-ary VAE workdir.")
_VAE_MEMBER = flags.DEFINE_integer(
  "vae_member", 0, "The population member of --vae_workdir to measure."
)
_DATA_DIR = flags.DEFINE_string("data_dir", "", "Binarized MNIST directory (for the batch).")
_REFERENCE_DRAWS = flags.DEFINE_integer("reference_draws", 20_000, "REINFORCE reference draws.")
_OUT_DIR = flags.DEFINE_string("out_dir", "docs", "Where the table, JSON and figure go.")
common.numbers(_FIGURE_TAUS, float, minimum=1e-6)
for _holder in (_DRAWS, _REFERENCE_DRAWS):
  common.at_least(_holder, 2)  # a variance needs two draws


def main(argv):
  del argv
  workdir = pathlib.Path(_VAE_WORKDIR.value)
  out = pathlib.Path(_OUT_DIR.value)
  (out / "figures").mkdir(parents=True, exist_ok=True)
  config, member, x, step = vae_gradients.setup(workdir, _VAE_MEMBER.value, _DATA_DIR.value)
  key = jax.random.key(2)
  reference, reference_mean_variance = vae_gradients.reinforce_reference(
    config, member, x, key, _REFERENCE_DRAWS.value
  )
  taus = [float(t) for t in _FIGURE_TAUS.value]
  rows = {}
  for e_index, name in enumerate(_ESTIMATORS.value):
    rows[name] = {}
    for t_index, tau in enumerate(taus):
      stats, _ = vae_gradients.encoder_stats(
        config, name, member, x, jax.random.fold_in(key, 100 * e_index + t_index), tau, _DRAWS.value
      )
      rows[name][str(tau)] = vae_gradients.mse_summary(
        stats, reference.mean, reference_mean_variance
      )
      print(
        name,
        tau,
        {
          k: round(diagnostics.log10(v), 3) if v > 0 else v for k, v in rows[name][str(tau)].items()
        },
        flush=True,
      )
  results = {
    "workdir": str(workdir),
    "member": _VAE_MEMBER.value,
    "checkpoint_step": step,
    "draws": _DRAWS.value,
    "reference_draws": _REFERENCE_DRAWS.value,
    "device": f"{jax.devices()[0].device_kind} ({jax.default_backend()})",
    "mse": rows,
  }
  (out / "figure_2b.json").write_text(json.dumps(results, indent=1) + "\n")
  lines = [
    f"Checkpoint {workdir} (member {results['member']}, step {step}); {_DRAWS.value} draws per"
    " cell against"
    f" {results['reference_draws']} REINFORCE draws; device {results['device']}. log10 MSE (log10"
    " squared bias).",
    "",
    "| estimator | " + " | ".join(f"tau={t:g}" for t in taus) + " |",
    "|---|" + "---|" * len(taus),
  ]
  for name, per_tau in rows.items():
    cells = [
      f"{vae_gradients.log10_cell(s['mse'])} ({vae_gradients.log10_cell(s['squared_bias'])})"
      for s in per_tau.values()
    ]
    lines.append(f"| {name} | " + " | ".join(cells) + " |")
  (out / "figure_2b.md").write_text("\n".join(lines) + "\n")
  print("\n".join(lines))

  import matplotlib

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt

  fig, ax = plt.subplots(figsize=(5.5, 3.8))
  for name, per_tau in rows.items():
    ax.plot(taus, [diagnostics.log10(per_tau[str(t)]["mse"]) for t in taus], marker="o", label=name)
  ax.set_xscale("log")
  ax.set_xlabel(r"temperature $\tau$")
  ax.set_ylabel(r"$\log_{10}$ MSE of the encoder gradient")
  ax.set_title(f"16-ary VAE, trained checkpoint (step {step}), B = 20", fontsize=9)
  ax.legend()
  fig.tight_layout()
  fig.savefig(out / "figures" / "figure_2b.png", dpi=130)
  plt.close(fig)


if __name__ == "__main__":
  app.run(main)
