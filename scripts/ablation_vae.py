"""What each choice of the Concrete VAE is worth: the full model, then each choice reverted alone.

For every setting of the hyperparameters (``--settings``) and every arm, one
population of ``--seeds`` (same seeds in every arm, so the arms pair up) is
trained with ``python -m experiments.main`` in ``OUT/<setting>/<arm>``;
finished populations are not redone and interrupted ones resume. The table —
each arm's validation and test bounds (mean ± std over seeds) and its paired
difference from the full model on test — is printed and written to
``OUT/table.md`` and ``OUT/table.json``.

  python scripts/ablation_vae.py --out=runs/ablation --data_dir=../shared/data/binarized_mnist
"""

import json
import pathlib

import formatting
import launch
from absl import app, flags

# Each arm reverts one choice of the default (Concrete) model to its alternative.
ARMS = {
  "concrete (all choices)": [],
  "relu": ["activation=relu"],
  "lecun_normal init": ["kernel_init=lecun_normal"],
  "zero output bias": ["decoder_output_bias=zeros"],
  "no centring": ["center_inputs=none"],
  "uniform prior": ["prior=uniform"],
  "784-wide encoder": ["encoder_widths=(784,784)"],
  "pathwise KL": ["kl_estimate=pathwise"],
  "analytic KL": ["kl_estimate=analytic"],
}
SETTINGS = {
  "lr5e-3_m0.4_tau0.64": ["learning_rate=0.005", "momentum=0.4", "tau=0.64", "weight_decay=0.0"],
  "lr1e-3_m0.9_tau0.5": ["learning_rate=0.001", "momentum=0.9", "tau=0.5", "weight_decay=0.0"],
}

_OUT = flags.DEFINE_string("out", None, "Directory for the runs and the table.", required=True)
_DATA_DIR = flags.DEFINE_string("data_dir", "", "The binarized MNIST directory (config.data_dir).")
_CONFIG = flags.DEFINE_string("config", "configs/vae_16ary.py", "Config file.")
_SETTINGS = flags.DEFINE_list("settings", list(SETTINGS), "Hyperparameter settings (names above).")
_ARMS = flags.DEFINE_list("arms", list(ARMS), "Arms (names above).")
_SEEDS = flags.DEFINE_list("seeds", ["0", "1", "2"], "Seeds (one population of these per arm).")
_SET = flags.DEFINE_multi_string(
  "set",
  [
    "estimator=st_gs",
    "num_steps=10000",
    "num_eval_samples=1000",
    "num_eval_examples=500",
    "variance_every=0",
    "eval_every=0",
  ],
  "FIELD=VALUE overrides for every run.",
)


def _slug(name: str) -> str:
  return "".join(c if c.isalnum() or c in ".-" else "_" for c in name)


def main(argv):
  del argv
  out = pathlib.Path(_OUT.value)
  shared = [*_SET.value, "population.search=lists", f"population.seed=({','.join(_SEEDS.value)},)"]
  if _DATA_DIR.value:
    shared.append(f"data_dir={_DATA_DIR.value}")
  table, lines = (
    [],
    [
      "| setting | arm | seeds | valid bound | test bound | test - full model (paired) |",
      "|---|---|---|---|---|---|",
    ],
  )
  for setting in _SETTINGS.value:
    full_test = None
    for arm in _ARMS.value:
      workdir = out / setting / _slug(arm)
      print(f"{setting} / {arm}: training in {workdir}", flush=True)
      launch.train(_CONFIG.value, workdir, [*shared, *SETTINGS[setting], *ARMS[arm]])
      members = json.loads((workdir / "results.json").read_text())["members"]
      valid = [m["valid_nll"] for m in members]
      test = [m["test_nll"] for m in members]
      full_test = full_test or test
      diff = [a - b for a, b in zip(test, full_test)]
      entry = {
        "setting": setting,
        "arm": arm,
        "seeds": [m["seed"] for m in members],
        "valid_nll": valid,
        "test_nll": test,
        "test_minus_full": diff,
        "diverged": sum(m["diverged_at_step"] is not None for m in members),
      }
      table.append(entry)
      lines.append(
        f"| {setting} | {arm} | {formatting.seeds(len(members))} | {formatting.spread(valid)} |"
        f" {formatting.spread(test)} | {'-' if arm == _ARMS.value[0] else formatting.spread(diff)}"
        " |"
      )
      print(lines[-1], flush=True)
  (out / "table.json").write_text(json.dumps(table, indent=1) + "\n")
  (out / "table.md").write_text("\n".join(lines) + "\n")
  print("\n".join(lines))


if __name__ == "__main__":
  app.run(main)
