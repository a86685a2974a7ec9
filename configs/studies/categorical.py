"""The categorical track: the GST / ReinMax MNIST-VAE grid as they ran it, then as it should be
measured, with GR-MC10, GR-QMC100, ZGR and RLOO-2 beside their estimators.

Model and protocol: configs/categorical_vae.py (784-512-256 ReLU, C categories x L variables,
uniform prior, exact KL, grey-level targets, batch 100, 160 epochs, PyTorch's Adam / RAdam).

``published`` (the default): all 60,000 training images and grey-level targets, each estimator
at its published (learning rate, tau, optimizer) for the shape (configs/categorical_vae.py
PUBLISHED; ZGR, GR-MC10, GR-QMC100 and RLOO-2 at the nearest published row, NEAREST there),
seeds 0, 1, 2. Reported as they do: the mean over seeds of the last epoch's training -ELBO, and
the test set's single-sample -ELBO; beside them the test IWAE-100 and IWAE-1000.

On 8x4 the grid has their exact method as a reference row (the encoder's likelihood gradient
enumerated over the 4096 configurations, the decoder at the sample), and every arm measures its
encoder gradient's variance, squared bias and MSE against the exact gradient every 16 epochs
(``mse_reference=exact``).

``measured``: dynamic binarization, the last 10,000 training images as a validation split, tau
searched over TAUS on validation IWAE-100 (seed 0, one population per shape and estimator) at
the estimator's published learning rate and optimizer; then seeds 1, 2, 3 at the selected tau
(arms declared once the search's records are kept), reported by test IWAE-100 and IWAE-1000.

  python -m experiments.study --study=configs/studies/categorical.py --out=runs/categorical \
      --data_root=../shared/data [--arms=published/8x4/]
  python -m experiments.study --study=configs/studies/categorical.py:measured \
      --out=runs/categorical --data_root=../shared/data

Shapes in the order they are run: 8x4, 16x12, 10x30, then 4x24, 8x16, 64x8. Each table gives
each estimator's cost: loss evaluations per step, and the population's training milliseconds per
step on the machine its records name.
"""

import dataclasses
import pathlib

from configs import categorical_vae
from experiments.studies import records, tables
from experiments.studies.runner import Arm, Report, Study
from gr_jax import estimators

SHAPES = ("8x4", "16x12", "10x30", "4x24", "8x16", "64x8")
ESTIMATORS = (
  *categorical_vae.PUBLISHED,  # st, st_gs, gr_mc100, gst, reinmax
  "zgr",
  "gr_mc10",
  "gr_qmc100",
  "rloo2",
)
SEEDS = (0, 1, 2)
FRESH_SEEDS = (1, 2, 3)
TAUS = (0.1, 0.25, 0.5, 1.0, 1.5)  # the tuned leaderboard's grid (configs/studies/tuned.py)
RECORDS = "records/categorical"
MEASURED = (
  "binarization=dynamic",
  "train_split=train",
  "num_steps=80000",  # 160 epochs of the 50,000 training images
  "num_eval_samples=100",
  "extra_test_samples=(1000,)",
)


def _has_temperature(estimator: str) -> bool:
  return estimator not in ("zgr", "rloo2")


def _published_arm(shape: str, estimator: str, phase: str, name: str = "", **fields) -> Arm:
  """An arm at the estimator's published (learning rate, tau, optimizer) for the shape."""
  learning_rate, tau, optimizer = categorical_vae.published_hyperparameters(estimator, shape)
  return Arm(
    name=name or f"{phase}/{shape}/{estimator}",
    config=f"configs/categorical_vae.py:{shape}",
    overrides=(
      f"estimator={estimator}",
      f"learning_rate={learning_rate}",
      f"tau={tau}",
      f"optimizer={optimizer}",
      *fields.pop("overrides", ()),
    ),
    dataset_dir="mnist",
    labels={"shape": shape, "estimator": estimator, "phase": phase},
    **fields,
  )


# On the 8x4 shape, where C ** L = 4096 configurations are enumerated: every estimator's encoder
# gradient variance, squared bias and MSE against the exact gradient every 16 epochs.
BIAS_EVERY = 16 * 600
BIAS = (f"variance_every={BIAS_EVERY}", f"mse_every={BIAS_EVERY}", "mse_reference=exact")


def _published_arms():
  for shape in SHAPES:
    for estimator in ESTIMATORS:
      overrides = BIAS if shape == "8x4" else ()
      yield _published_arm(shape, estimator, "published", seeds=SEEDS, overrides=overrides)
    if shape == "8x4":
      yield _exact_arm()


def _exact_arm() -> Arm:
  """Their exact method on 8x4: the encoder's likelihood gradient enumerated (4096 decoder
  passes per step, shared by the batch's images), the decoder at ST's sample, ReinMax's
  published row (their README's bias runs use it)."""
  arm = _published_arm("8x4", "reinmax", "published", seeds=SEEDS, overrides=BIAS)
  overrides = (*arm.overrides, "estimator=st", "likelihood_gradient=exact")
  labels = {**arm.labels, "estimator": "exact"}
  return dataclasses.replace(arm, name="published/8x4/exact", overrides=overrides, labels=labels)


def _measured_arms(records_dir: str):
  for shape in SHAPES:
    for estimator in ESTIMATORS:
      if not _has_temperature(estimator):
        yield _published_arm(shape, estimator, "measured", seeds=FRESH_SEEDS, overrides=MEASURED)
        continue
      search = _published_arm(
        shape,
        estimator,
        "measured",
        name=f"measured/{shape}/search/{estimator}",
        seeds=(0,),
        lists={"tau": TAUS},
        overrides=MEASURED,
      )
      yield search
      tau = records.best_of_kept(pathlib.Path(records_dir, search.name), "tau")
      if tau is not None:
        yield _published_arm(
          shape,
          estimator,
          "measured",
          seeds=FRESH_SEEDS,
          overrides=(*MEASURED, f"tau={tau}"),
        )


def _last_epoch_neg_elbo(member: records.Member) -> float | None:
  curve = member.curve("neg_elbo")
  return records.finite(curve[max(curve)]) if curve else None


def _ms_per_step(run: records.Run) -> str:
  """The population's training time per step, and the machine it ran on."""
  seconds, steps = (
    run.results.get("training_wall_time_s"),
    run.results.get("training_wall_time_steps"),
  )
  if not seconds or not steps:
    return "—"
  return (
    f"{1000 * seconds / steps:.1f} ({run.results.get('device', '?')}, {len(run.members)} members)"
  )


def _published_report(readings) -> Report:
  lines, data = [], []
  for shape in SHAPES:
    rows = []
    for estimator in (*ESTIMATORS, "exact"):
      run = readings.get(f"published/{shape}/{estimator}")
      if run is None:
        continue
      learning_rate, tau, optimizer = categorical_vae.published_hyperparameters(
        "reinmax" if estimator == "exact" else estimator, shape
      )
      train = run.by_seed(_last_epoch_neg_elbo)
      columns = {
        "train -ELBO (last epoch)": train,
        "test -ELBO (1 sample)": run.by_seed("test_nll"),
        "test IWAE-100": run.by_seed("test_nll_M100"),
        "test IWAE-1000": run.by_seed("test_nll_M1000"),
      }
      rows.append(
        [
          estimator,
          f"{learning_rate:g}, {tau:g}, {optimizer.removeprefix('torch_')}",
          "4096 (enumerated)"
          if estimator == "exact"
          else estimators.get(estimator).loss_evaluations,
          _ms_per_step(run),
          *(tables.spread(values.values()) for values in columns.values()),
        ]
      )
      data.append({"shape": shape, "estimator": estimator, **columns})
    if rows:
      header = ["estimator", "lr, tau, optimizer", "evaluations / step", "ms / step", *columns]
      lines += [f"### {shape} (C categories x L variables)", ""]
      lines += tables.markdown_table(header, rows) + [""]
  lines += [
    "Their published numbers are not set beside these: no public copy of the ReinMax paper's"
    " results table was read here.",
    *readings.missing_lines(),
  ]
  return Report("\n".join(lines) + "\n", data)


def _measured_report(readings) -> Report:
  lines, data = [], []
  for shape in SHAPES:
    rows = []
    for estimator in ESTIMATORS:
      run = readings.get(f"measured/{shape}/{estimator}")
      search = readings.get(f"measured/{shape}/search/{estimator}")
      if run is None:
        continue
      tau = search.best("tau") if search else None
      columns = {
        "test IWAE-100": run.by_seed("test_nll"),
        "test IWAE-1000": run.by_seed("test_nll_M1000"),
      }
      rows.append(
        [
          estimator,
          "—" if tau is None else f"{tau:g}",
          *(tables.spread(values.values()) for values in columns.values()),
        ]
      )
      data.append({"shape": shape, "estimator": estimator, "tau": tau, **columns})
    if rows:
      lines += [f"### {shape}", ""]
      lines += tables.markdown_table(["estimator", "selected tau", *columns], rows) + [""]
  lines += list(readings.missing_lines())
  return Report("\n".join(lines) + "\n", data)


def get_study(arg: str = "") -> Study:
  if arg not in ("", "published", "measured"):
    raise ValueError(
      f"configs/studies/categorical.py takes '', 'published' or 'measured'; got {arg!r}"
    )
  if arg == "measured":
    return Study(
      name="categorical_measured",
      arms=tuple(_measured_arms(RECORDS)),
      report=_measured_report,
      records=RECORDS,
    )
  return Study(
    name="categorical_published",
    arms=tuple(_published_arms()),
    report=_published_report,
    records=RECORDS,
  )
