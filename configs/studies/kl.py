"""The training bound's KL term: its direct gradient left out (pathwise) or the exact KL (analytic).

The bound f(D, θ) = log p(x, D) − log q(D | x) at one sample puts a direct term
∇θ log q(D | x) into the encoder's gradient: mean zero at an exact sample, noise
for ST-GS and GR. Each arm is the Concrete VAE at the depth study's draw
(learning rate 5e-3, momentum 0.4, tau 0.64, no weight decay), seeds 0, 1, 2,
50,000 steps, IWAE M = 1000 on the fixed 500 validation and 500 test images,
with ``kl_estimate`` = sampled (the default), pathwise or analytic; the
variance arms train 10,000 steps and measure the encoder gradient's variance
at steps 0, 5,000 and 10,000.

  python -m experiments.study --study=configs/studies/kl.py --out=runs/kl \
      --data_root=../shared/data

Expected (records/kl): binary ST-GS test 108.47 (sampled) and 106.77 (pathwise),
paired −1.70 ± 0.31; about 6-8 minutes an arm on the 2-core CPU.
"""

from experiments.studies import compare
from experiments.studies.runner import Arm, Report, Study

DRAW = ("learning_rate=0.005", "momentum=0.4", "tau=0.64", "weight_decay=0.0")
BOUNDS = ("num_steps=50000", "num_eval_samples=1000", "num_eval_examples=500", "variance_every=0")
VARIANCE = (
  "num_steps=10000",
  "num_eval_samples=100",
  "num_eval_examples=500",
  "variance_every=5000",
)
CONFIGS = {"binary": "configs/vae_2ary.py", "16ary": "configs/vae_16ary.py"}
NAMES = {"st_gs": "ST-GS", "gr_mc10": "GR-MC10", "gs": "GS"}
# (model, estimator) -> the KL values trained; the first is the group's reference.
BOUND_ARMS = {
  ("binary", "st_gs"): ("sampled", "pathwise", "analytic"),
  ("binary", "gr_mc10"): ("sampled", "pathwise"),
  ("binary", "gs"): ("sampled", "analytic"),
  ("16ary", "st_gs"): ("sampled", "pathwise"),
}
VARIANCE_ARMS = {
  ("binary", "st_gs"): ("sampled", "pathwise"),
  ("binary", "gr_mc10"): ("sampled", "pathwise"),
}


def _arm(folder, model, estimator, kl, fields):
  return Arm(
    name=f"{folder}/{estimator}/{kl}",
    config=CONFIGS[model],
    overrides=(*DRAW, f"estimator={estimator}", f"kl_estimate={kl}", *fields, "eval_every=0"),
    seeds=(0, 1, 2),
    dataset_dir="binarized_mnist",
    labels={"group": f"{model} {NAMES[estimator]}", "arm": kl, "model": model},
  )


def _arms():
  for (model, estimator), kls in BOUND_ARMS.items():
    yield from (_arm(model, model, estimator, kl, BOUNDS) for kl in kls)
  for (model, estimator), kls in VARIANCE_ARMS.items():
    yield from (_arm("variance", model, estimator, kl, VARIANCE) for kl in kls)


PAIRS = [
  ("ST-GS − GS, binary, sampled KL", "binary/gs/sampled", "binary/st_gs/sampled"),
  ("ST-GS (pathwise) − GS (sampled), binary", "binary/gs/sampled", "binary/st_gs/pathwise"),
  ("GR-MC10 − GS, binary, sampled KL", "binary/gs/sampled", "binary/gr_mc10/sampled"),
  ("GR-MC10 (pathwise) − GS (sampled), binary", "binary/gs/sampled", "binary/gr_mc10/pathwise"),
  ("GR-MC10 − ST-GS, binary, sampled KL", "binary/st_gs/sampled", "binary/gr_mc10/sampled"),
  ("GR-MC10 − ST-GS, binary, pathwise KL", "binary/st_gs/pathwise", "binary/gr_mc10/pathwise"),
]


def _report(readings) -> Report:
  variance = [name for name in readings.arms if name.startswith("variance/")]
  table, data = compare.bounds_table(readings.subset(set(readings.arms) - set(variance)))
  lines = [
    "Test and validation bounds (IWAE M = 1000, 500 images each), 50,000 steps; each arm against"
    " its group's sampled-KL arm, paired by seed:",
    "",
    *table,
    "",
    "Differences of the test bound between groups, paired by seed:",
    "",
    *compare.pair_lines(readings, PAIRS),
    "",
    "The encoder gradient's variance (log10 trace, 100 draws on a fixed batch), 10,000-step arms:",
    "",
    *compare.variance_table(readings, variance),
    *readings.missing_lines(),
  ]
  return Report("\n".join(lines) + "\n", data)


def get_study() -> Study:
  return Study(name="kl", arms=tuple(_arms()), report=_report, records="records/kl")
