"""The field's benchmark: the DisARM protocol's Bernoulli VAEs, every estimator, seeds paired.

For each setting (``--settings``) and estimator (``--estimators``), one
population of the seeds ``--seeds`` (``population.search='lists'``) in
``OUT/<setting>/<estimator>``, ``--steps`` steps (the protocol's 10^6; 100,000
by default on a CPU); finished populations are read, interrupted ones resume,
so the command can be rerun until it completes. Then ``scripts/leaderboard.py``
writes the table from the workdirs.

Settings: ``nonlinear_fashion_mnist`` (configs/bernoulli_vae_nonlinear.py,
dynamically binarized Fashion-MNIST), ``linear_fashion_mnist``
(configs/bernoulli_vae_linear.py), ``nonlinear_static_mnist``
(configs/bernoulli_vae_nonlinear.py:binarized_mnist, the fixed binarization).

Every estimator runs at the protocol's tau (1.0) except those in ``TEMPERATURES``,
whose authors advise another on this very protocol; their workdir names the
temperature (``OUT/<setting>/reinmax_tau1.1``).

  python scripts/field_benchmark.py --out=runs/field --data_root=../shared/data
"""

import _clone  # noqa: F401, I001  (the clone's experiments/ and configs/ on sys.path)
import pathlib

import launch
import flag_checks
from absl import app, flags


SETTINGS = {
  "nonlinear_fashion_mnist": ("configs/bernoulli_vae_nonlinear.py", "fashion_mnist"),
  "linear_fashion_mnist": ("configs/bernoulli_vae_linear.py", "fashion_mnist"),
  "nonlinear_static_mnist": (
    "configs/bernoulli_vae_nonlinear.py:binarized_mnist",
    "binarized_mnist",
  ),
}
ESTIMATORS = [
  "disarm",
  "rloo2",
  "st_gs",
  "gr_mc10",
  "gr_exact",
  "reinmax",
  "zgr",
  "reinforce",
  "gr_mc100",
]
# ReinMax at tau = 1 is ZGR (docs/estimators.md); its authors run the 200-bit binary VAE on MNIST
# and Fashion-MNIST at tau = 1.1 (Liu et al. 2023, launcher mnist_vae/reinmax_2_200_rodeo.sh).
TEMPERATURES = {"reinmax": 1.1}

_OUT = flags.DEFINE_string("out", None, "Directory for the runs.", required=True)
_RECORDS = launch.define_records_flag("records/field")
_DATA_ROOT = flags.DEFINE_string(
  "data_root", "", "A directory holding fashion_mnist/ and binarized_mnist/ (as $GR_JAX_DATA)."
)
_SETTINGS = flags.DEFINE_list("settings", list(SETTINGS), f"Settings: {', '.join(SETTINGS)}.")
_ESTIMATORS = flags.DEFINE_list("estimators", ESTIMATORS, "Estimators (registry names).")
_SEEDS = flags.DEFINE_list("seeds", ["0", "1", "2"], "Seeds (one population of these each).")
_STEPS = flags.DEFINE_integer("steps", 100_000, "Training steps (the protocol: 1,000,000).")
_SET = flags.DEFINE_multi_string("set", [], "FIELD=VALUE overrides for every run.")
flag_checks.choices(_SETTINGS, SETTINGS)
flag_checks.estimator_names(_ESTIMATORS)
flag_checks.numbers(_SEEDS, int, minimum=0)
flag_checks.at_least(_STEPS, 1)


def main(argv):
  del argv
  out = pathlib.Path(_OUT.value)
  for setting in _SETTINGS.value:
    config, dataset = SETTINGS[setting]
    for estimator in _ESTIMATORS.value:
      overrides = [
        f"estimator={estimator}",
        f"num_steps={_STEPS.value}",
        "population.search=lists",
        f"population.seed=({','.join(_SEEDS.value)},)",
      ]
      name = estimator
      if estimator in TEMPERATURES:
        overrides.append(f"tau={TEMPERATURES[estimator]}")
        name = f"{estimator}_tau{TEMPERATURES[estimator]}"
      overrides += _SET.value
      if _DATA_ROOT.value:
        overrides.append(f"data_dir={pathlib.Path(_DATA_ROOT.value) / dataset}")
      workdir = out / setting / name
      launch.train(config, workdir, overrides, launch.records_for(_RECORDS.value, out, workdir))


if __name__ == "__main__":
  app.run(main)
