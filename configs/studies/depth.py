"""Does Gumbel-Rao's advantage survive a second stochastic layer? One layer against two, paired.

For each arity and estimator, the one-layer model (configs/vae_<n>ary.py, the
Concrete 240H~784V) and the two-layer model (configs/vae_two_layer_<n>ary.py,
240H~240H~784V) train at the same fixed draw: learning rate 5e-3, momentum
0.4, no weight decay (the one-layer ST-GS selection of Table 2), at tau 0.64
(that selection's) and 0.25 (where GR's one-layer gains were largest), seeds
0, 1, 2, 50,000 steps; one population per (arity, depth, estimator) holds the
taus x seeds. Bounds: IWAE M = 1000 on fixed 500 validation and 500 test
images; the inference networks' gradient variance at steps 0, 10,000, ...

  python -m experiments.study --study=configs/studies/depth.py --out=runs/depth \
      --data_root=../shared/data

``--study=configs/studies/depth.py:ladder`` adds each population's test bound at
M = 1 (the ELBO), 10 and 100 beside M = 1000, recomputed from the checkpoints in
--out (minutes per population on a CPU) and kept as ladder.json with the records.

Expected (records/depth): binary test bound one layer -> two layers, ST-GS
108.47 -> 103.32 and GR-MC10 107.43 -> 103.17 at tau 0.64; about 10 minutes
per population of 6 members on the 2-core CPU (one-layer ST-GS).
"""

from experiments.studies import depth
from experiments.studies.runner import Arm, Report, Study

ARITIES = (16, 2)
ESTIMATORS = ("st_gs", "gr_mc10", "gr_mc100", "zgr", "reinmax")  # the first is the reference
TAUS = (0.64, 0.25)
SEEDS = (0, 1, 2)
STEPS = 50_000
VARIANCE_EVERY = 10_000
CONFIGS = {
  "one_layer": "configs/vae_{arity}ary.py",
  "two_layer": "configs/vae_two_layer_{arity}ary.py",
}
OVERRIDES = (
  "learning_rate=0.005",
  "momentum=0.4",
  "weight_decay=0.0",
  f"num_steps={STEPS}",
  "num_eval_samples=1000",
  "num_eval_examples=500",
  f"variance_every={VARIANCE_EVERY}",
  "eval_every=0",
  "log_every=1000",
)


def _arms():
  for arity in ARITIES:
    for estimator in ESTIMATORS:
      for layers, config in CONFIGS.items():
        yield Arm(
          name=f"{arity}ary/{layers}/{estimator}",
          config=config.format(arity=arity),
          overrides=(*OVERRIDES[:3], f"estimator={estimator}", *OVERRIDES[3:]),
          seeds=SEEDS,
          lists={"tau": TAUS},
          dataset_dir="binarized_mnist",
          labels={"arity": arity, "depth": layers, "estimator": estimator},
        )


def _report(readings, ladder: bool) -> Report:
  report = depth.report(readings, ARITIES, ESTIMATORS, TAUS, STEPS, VARIANCE_EVERY)
  if not ladder:
    return report
  return Report(
    report.markdown + "\n" + depth.ladder_table(readings, ESTIMATORS, TAUS) + "\n", report.data
  )


def get_study(arg: str = "") -> Study:
  if arg not in ("", "ladder"):
    raise ValueError(f"configs/studies/depth.py takes '' or 'ladder'; got {arg!r}")
  return Study(
    name="depth",
    arms=tuple(_arms()),
    report=lambda readings: _report(readings, ladder=arg == "ladder"),
    records="records/depth",
  )
