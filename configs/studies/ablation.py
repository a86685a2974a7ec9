"""What each choice of the Concrete VAE is worth: the full model, then each choice reverted alone.

Every arm trains the same seeds (0, 1, 2), so that each pairs with the full
model, "concrete (all choices)", seed by seed; one population per (setting,
arm), at two settings of the hyperparameters. The default study: the 16-ary
model with ST-GS, 10,000 steps, IWAE M = 1000 on the fixed 500 validation and
500 test images.

  python -m experiments.study --study=configs/studies/ablation.py --out=runs/ablation \
      --data_root=../shared/data

``configs/studies/ablation.py:binary`` asks whether the encoder's width and the
training length account for the binary model's distance to the paper: the
784-wide encoder trained 100,000 steps (its validation bound also measured at
50,000) against the default model at 50,000 steps (the KL study's sampled-KL
ST-GS arm, kept once in records/kl), at the depth study's draw.

Expected (records/ablation/binary): width and length together +0.03 ± 0.45 nats
on the binary test bound; 33 minutes on the 2-core CPU.
"""

from experiments.studies import compare
from experiments.studies.runner import Arm, Report, Study

# Each arm reverts one choice of the default (Concrete) model to its alternative.
ARMS = {
  "concrete (all choices)": (),
  "relu": ("activation=relu",),
  "lecun_normal init": ("kernel_init=lecun_normal",),
  "zero output bias": ("decoder_output_bias=zeros",),
  "no centring": ("center_inputs=none",),
  "uniform prior": ("prior=uniform",),
  "784-wide encoder": ("encoder_widths=(784,784)",),
  "pathwise KL": ("kl_estimate=pathwise",),
  "analytic KL": ("kl_estimate=analytic",),
}
SETTINGS = {
  "lr5e-3_m0.4_tau0.64": ("learning_rate=0.005", "momentum=0.4", "tau=0.64", "weight_decay=0.0"),
  "lr1e-3_m0.9_tau0.5": ("learning_rate=0.001", "momentum=0.9", "tau=0.5", "weight_decay=0.0"),
}
EVALUATION = ("num_eval_samples=1000", "num_eval_examples=500", "variance_every=0")


def _slug(name: str) -> str:
  return "".join(c if c.isalnum() or c in ".-" else "_" for c in name)


def _default_arms():
  for setting, draw in SETTINGS.items():
    for arm, changes in ARMS.items():
      yield Arm(
        name=f"{setting}/{_slug(arm)}",
        config="configs/vae_16ary.py",
        overrides=(
          *draw,
          "estimator=st_gs",
          "num_steps=10000",
          *EVALUATION,
          "eval_every=0",
          *changes,
        ),
        seeds=(0, 1, 2),
        dataset_dir="binarized_mnist",
        labels={"group": setting, "arm": arm},
      )


BINARY_DRAW = SETTINGS["lr5e-3_m0.4_tau0.64"]
BINARY_ARMS = (
  Arm(
    name="binary/concrete__all_choices_",
    config="configs/vae_2ary.py",
    overrides=(*BINARY_DRAW, "estimator=st_gs", "kl_estimate=sampled", "num_steps=50000")
    + (*EVALUATION, "eval_every=0"),
    seeds=(0, 1, 2),
    dataset_dir="binarized_mnist",
    labels={"group": "binary ST-GS", "arm": "concrete (all choices), 50,000 steps"},
    records="records/kl/binary/st_gs/sampled",
  ),
  Arm(
    name="binary/784-wide_encoder",
    config="configs/vae_2ary.py",
    overrides=(*BINARY_DRAW, "estimator=st_gs", "num_steps=100000", *EVALUATION)
    + ("eval_every=50000", "periodic_eval_samples=1000", "encoder_widths=(784,784)"),
    seeds=(0, 1, 2),
    dataset_dir="binarized_mnist",
    labels={"group": "binary ST-GS", "arm": "784-wide encoder, 100,000 steps"},
  ),
)
REFERENCE, WIDE = (arm.name for arm in BINARY_ARMS)
BINARY_PAIRS = [
  ("784-wide − default, validation at 50,000 steps", REFERENCE, WIDE, "valid_nll", None, 50_000),
  ("784-wide: 100,000 − 50,000 steps, validation", WIDE, WIDE, "valid_nll", 50_000, None),
  ("width + length: 784-wide at 100,000 − default at 50,000, test", REFERENCE, WIDE),
]


def _report(readings, pairs) -> Report:
  table, data = compare.bounds_table(readings)
  lines = [
    "Bounds (IWAE M = 1000, 500 images each); each arm against its group's first arm, paired by"
    " seed:",
    "",
    *table,
  ]
  if pairs:
    lines += ["", "Paired by seed:", "", *compare.pair_lines(readings, pairs)]
  return Report("\n".join(lines + readings.missing_lines()) + "\n", data)


def get_study(arg: str = "") -> Study:
  if arg not in ("", "binary"):
    raise ValueError(f"configs/studies/ablation.py takes '' or 'binary'; got {arg!r}")
  arms, pairs = (BINARY_ARMS, BINARY_PAIRS) if arg == "binary" else (tuple(_default_arms()), [])
  return Study(
    name="ablation" + (f"_{arg}" if arg else ""),
    arms=arms,
    report=lambda readings: _report(readings, pairs),
    records="records/ablation",
  )
