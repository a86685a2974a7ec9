"""The field's benchmark: the DisARM protocol's Bernoulli VAEs, every estimator, seeds paired.

Each setting x estimator is one population of seeds 0, 1, 2 trained for 100,000
steps (the protocol's 10^6 is a ``--set=num_steps=1000000`` away), at the
protocol's tau = 1.0, except ReinMax, which also runs at its authors' 1.1 for
this protocol (Liu et al. 2023, launcher ``mnist_vae/reinmax_2_200_rodeo.sh``;
at tau = 1 ReinMax is ZGR). The report is docs/leaderboard.md.

  python -m experiments.study --study=configs/studies/field.py --out=runs/field \
      --data_root=../shared/data [--arms=nonlinear_fashion_mnist/] [--page]

``field.py:ESTIMATOR[,ESTIMATOR...][@BENCH]`` adds rows of one's own estimators
(import paths, ``package.module:attribute``) on every setting, and reads their
ms per step from the bench file BENCH beside the kept one
(docs/compare_your_estimator.md).

Expected (records/field, 3 seeds): test IWAE-100 on non-linear Fashion-MNIST
DisARM 242.79 ± 0.09, ST-GS 243.44 ± 0.21, GR-MC10 243.33 ± 0.24; about
2-10 ms per step on one CPU core (scripts/bench_vae.py), so 6-30 min per
member per 100,000 steps.
"""

from experiments.studies import leaderboard
from experiments.studies.runner import Arm, Study
from gr_jax import estimators

SETTINGS = {
  "nonlinear_fashion_mnist": ("configs/bernoulli_vae_nonlinear.py", "fashion_mnist"),
  "linear_fashion_mnist": ("configs/bernoulli_vae_linear.py", "fashion_mnist"),
  "nonlinear_static_mnist": (
    "configs/bernoulli_vae_nonlinear.py:binarized_mnist",
    "binarized_mnist",
  ),
  # Dynamic MNIST: the first 50,000 training images train, the last 10,000 validate (the DisARM
  # code's tfds split "train[:50000]", "train[50000:]"), the test images the test set.
  "nonlinear_dynamic_mnist": ("configs/bernoulli_vae_nonlinear.py:mnist", "mnist"),
  "linear_dynamic_mnist": ("configs/bernoulli_vae_linear.py:mnist", "mnist"),
}
ESTIMATORS = ("disarm", "rloo2", "st_gs", "gr_mc10", "gr_exact", "reinmax", "zgr", "reinforce")
ESTIMATORS += ("gr_mc100",)
# GS, relaxed: the decoder at the relaxed sample S, the latent term the discrete bound's linear
# extension <S, log p - log q> (gr_jax.models.vae: VAE.log_weight), not the Concrete densities of
# Maddison et al. 2017 (their appendix C.2's other choice).
ESTIMATORS += ("gs",)
# Equal-evaluation rows: one-evaluation estimators averaged over two draws per step (2 loss
# evaluations, as DisARM and RLOO-2), on the non-linear settings.
AVERAGED = ("st_gs_x2", "gr_mc10_x2", "gr_exact_x2", "zgr_x2")
# (estimator, tau) rows beside tau = 1.0; ReinMax at tau = 1 is ZGR, so only where it was kept.
TEMPERATURES = {"reinmax": 1.1}
TAU_ONE_ALSO = {("nonlinear_fashion_mnist", "reinmax")}
# The DisARM code's variance column (google-research disarm's compute_grad_variance), logged as
# ema_grad_variance, on the settings first measured after it existed: the other settings' kept
# rows were trained without it, and a run resumes only on the config it started with.
EMA_VARIANCE = ("variance_ema_decay=0.999",)
EMA_SETTINGS = ("nonlinear_dynamic_mnist", "linear_dynamic_mnist")
SEEDS = (0, 1, 2)
STEPS = 100_000
BENCH = "records/bench_bernoulli.json"
COMMAND = (
  "python -m experiments.study --study=configs/studies/field.py --out=runs/field"
  " --data_root=../shared/data --page"
)


def _arms(extra_estimators=()):
  for setting, (config, dataset) in SETTINGS.items():
    averaged = AVERAGED if setting.startswith("nonlinear") else ()
    ema = EMA_VARIANCE if setting in EMA_SETTINGS else ()
    for estimator in (*ESTIMATORS, *averaged, *extra_estimators):
      rows = [(estimator, [])]
      if estimator in TEMPERATURES:
        tau = TEMPERATURES[estimator]
        rows = [(f"{estimator}_tau{tau}", [f"tau={tau}"])]
        if (setting, estimator) in TAU_ONE_ALSO:
          rows.insert(0, (estimator, []))
      for row, overrides in rows:
        yield Arm(
          name=f"{setting}/{row.replace(':', '.')}",
          config=config,
          overrides=(f"estimator={estimator}", f"num_steps={STEPS}", *ema, *overrides),
          seeds=SEEDS,
          dataset_dir=dataset,
          labels={"setting": setting, "row": row},
        )


HEADER = [
  "# Leaderboard: Bernoulli VAEs of the DisARM protocol",
  "",
  "What: every estimator on the DisARM protocol's Bernoulli VAEs, 3 seeds each; train −ELBO is"
  " the mean of the last 1 % of steps (marked relaxed: GS's relaxed training objective, the"
  " decoder at the relaxed sample, which no equal-budget line reads), test the IWAE bounds on"
  " the test images (binarized once, seeded), lower is better, mean ± sd over seeds; log10 Var"
  " the trace of the inference network's gradient covariance over 100 draws on a fixed batch;"
  " log10 EMA Var, on the settings that log it (dynamic MNIST), the DisARM code's own column:"
  " the variance per parameter from moving averages (decay 0.999) of the inference network's"
  " gradient and its square over the training steps, averaged over parameters. A row"
  " `<name>_x2` averages a one-evaluation estimator over two independent draws a step (two loss"
  " evaluations, as DisARM's and RLOO-2's).",
  "",
  f"Command: `{COMMAND}` (generated: every number below from the records).",
  "",
  "Records: [records/field/](../records/field/) (config, results, metrics of each population).",
]
FOOTER = [
  "",
  "## The published numbers",
  "",
  "Not beside ours: the stored copy of Dong, Mnih & Tucker (2020) that this project can read holds"
  " its opening and figure captions only; its results are curves (Figures 5-6) and an appendix"
  " table, neither readable here; the stored copies of RODEO (Shi et al. 2022), the other paper"
  " measured on this protocol, return its opening only. Nothing of theirs is typed in by hand.",
]


def get_study(arg: str = "") -> Study:
  """The suite; ``arg`` ``ESTIMATOR[,ESTIMATOR...][@BENCH]`` adds one's own estimators' rows."""
  names, _, bench = arg.partition("@")
  extra = tuple(name for name in names.split(",") if name)
  for name in extra:
    estimators.get(name)  # an unknown name or a broken import path: one line, before any work
  return Study(
    name="leaderboard",
    arms=tuple(_arms(extra)),
    report=lambda readings: leaderboard.report(readings, HEADER, FOOTER, bench=(BENCH, bench)),
    records="records/field",
    page="docs/leaderboard.md",
    figures=lambda readings, directory: leaderboard.draw_budgets(
      readings, directory, bench=(BENCH, bench)
    ),
  )
