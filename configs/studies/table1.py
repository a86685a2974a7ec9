"""The paper's Table 1: ListOps test accuracy per L, tau and estimator (Gumbel Tree-LSTM).

Appendix D.3's protocol: per cell one population of the learning-rate grid
{0.1, ..., 1.0} x 5 seeds, plain SGD, weight decay 1e-4, batch size L, 10
epochs; the learning rate with the best mean validation accuracy is selected
and its test accuracy reported over the seeds. Arms are named
``L<L>_tau<tau>_<clipping>/<estimator>``; ``--arms=L10_tau0.01_noclip/`` trains
one cell; ``configs/studies/table1.py:clip=5`` adds gradient clipping at global
norm 5 (our variant; the paper clips nothing).

  python -m experiments.study --study=configs/studies/table1.py --out=runs/table1 \
      --data_root=../shared/data --arms=L10_tau0.01_noclip/

Expected: L = 10, tau 0.01 test accuracy ST-GS about 39-40 %, GR-MC10 about 64 %
(the paper: 38.8 and 66.4); hours per cell on a CPU, minutes on a GPU.
"""

from experiments.studies import paper
from experiments.studies.runner import Arm, Study

LENGTHS = (10, 25, 50)
TAUS = ("0.01", "0.1", "1.0")
ESTIMATORS = ("st_gs", "gr_mc10", "gr_mc100", "gr_mc1000")


def _arms(clips: tuple[float, ...]):
  for length in LENGTHS:
    for tau in TAUS:
      for clip in clips:
        setting = f"L{length}_tau{tau}_{'noclip' if clip == 0 else f'clip{clip:g}'}"
        for estimator in ESTIMATORS:
          yield Arm(
            name=f"{setting}/{estimator}",
            config=f"configs/listops_L{length}.py",
            overrides=(f"estimator={estimator}", f"tau={tau}")
            + ((f"grad_clip_norm={clip:g}",) if clip else ()),
            seeds=tuple(range(paper.PAPER_SEEDS)),
            lists={"learning_rate": paper.PAPER_LEARNING_RATES},
            dataset_dir="listops",
            labels={"L": length, "clip": clip, "estimator": estimator},
          )


def get_study(arg: str = "") -> Study:
  clips = (0.0,)
  if arg:
    field, _, value = arg.partition("=")
    try:
      clips = (0.0, float(value)) if field == "clip" and float(value) > 0 else None
    except ValueError:
      clips = None
    if clips is None:
      raise ValueError(f"configs/studies/table1.py takes clip=NORM (NORM > 0); got {arg!r}")
  return Study(
    name="table1", arms=tuple(_arms(clips)), report=paper.table1_report, records="records/table1"
  )
