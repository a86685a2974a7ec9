"""Table 2's binary column: four choices of the Concrete paper the binary model does not make.

The Gumbel-Rao paper's binary model is "as in Maddison et al. (2017)" with 240 binary latents;
the Concrete paper makes four choices that the default model (configs/vae_2ary.py) does not, each
a config value of model "concrete" (gr_jax.models.vae.DiscreteVAE, experiments/vae/task.py):

1. ``binary_logits=one``: one logit per binary latent (their appendices B and C.3: a binary node
   is one log-odds with logistic noise), not a two-category softmax with two free logits;
2. ``encoder_input=2x-1``: the encoder's input in (-1, 1) minus its running average (their
   appendix D.4 centres "the activity in (-1, 1)^d"), twice the default x minus its average;
3. ``relaxed_kl=concrete``: GS's latent term the Binary Concrete densities of the logistic
   pre-sigmoid variable (appendix C.2's first objective), with the prior's temperature
   ``relaxed_prior_tau`` apart (appendix C.4); GS only (on n-ary latents the ExpConcrete
   densities of the log-sample, ``gr_jax.models.vae.exp_concrete_log_density``);
4. ``loss_reduction=sum``: the loss summed over the batch of 20, not averaged (a 20 times larger
   step at the same learning rate).

Every arm trains at the depth study's draw (learning rate 5e-3, momentum 0.4, tau 0.64, no weight
decay), seeds 0, 1, 2, 50,000 steps, IWAE M = 1000 on the fixed 500 validation and 500 test
images, and pairs by seed with the default model: binary ST-GS with ``kl_estimate=pathwise`` (the KL
study's arm, records/kl/binary/st_gs/pathwise) plus each of 1, 2, 4 alone and the three
together; GS (records/kl/binary/gs/sampled) with 3, its prior at the posterior's tau and at 0.5.

  python -m experiments.study --study=configs/studies/concrete_choices.py \
      --out=runs/concrete_choices --data_root=../shared/data

About 6-8 minutes an arm on the 2-core CPU (the KL study's arms, the same model and length).
"""

from experiments.studies import compare
from experiments.studies.runner import Arm, Report, Study

DRAW = ("learning_rate=0.005", "momentum=0.4", "tau=0.64", "weight_decay=0.0")
BOUNDS = ("num_steps=50000", "num_eval_samples=1000", "num_eval_examples=500", "variance_every=0")
ST_GS = ("estimator=st_gs", "kl_estimate=pathwise")
GS = ("estimator=gs", "kl_estimate=sampled")
ONE_LOGIT, SIGNED_INPUT, SUMMED = "binary_logits=one", "encoder_input=2x-1", "loss_reduction=sum"
CONCRETE_KL = "relaxed_kl=concrete"
# group -> (its reference: (arm, overrides, kept records)), then (arm, overrides) for each choice.
GROUPS = {
  "ST-GS": (
    ("default", ST_GS, "records/kl/binary/st_gs/pathwise"),
    ("one logit per latent", (*ST_GS, ONE_LOGIT)),
    ("2x-1 input", (*ST_GS, SIGNED_INPUT)),
    ("loss summed over the batch", (*ST_GS, SUMMED)),
    ("the three together", (*ST_GS, ONE_LOGIT, SIGNED_INPUT, SUMMED)),
  ),
  "GS": (
    ("default", GS, "records/kl/binary/gs/sampled"),
    ("Concrete densities", (*GS, CONCRETE_KL)),
    ("Concrete densities, prior tau 0.5", (*GS, CONCRETE_KL, "relaxed_prior_tau=0.5")),
  ),
}


def _slug(name: str) -> str:
  return "".join(c if c.isalnum() or c in ".-" else "_" for c in name)


def _arms():
  for group, (reference, *choices) in GROUPS.items():
    for arm, overrides, *kept in (reference, *choices):
      yield Arm(
        name=f"{_slug(group)}/{_slug(arm)}",
        config="configs/vae_2ary.py",
        # The KL study's order of overrides, so that its kept reference runs are these arms'.
        overrides=(*DRAW, *overrides[:2], *BOUNDS, "eval_every=0", *overrides[2:]),
        seeds=(0, 1, 2),
        dataset_dir="binarized_mnist",
        labels={"group": f"binary {group}", "arm": arm},
        records=kept[0] if kept else "",
      )


def _report(readings) -> Report:
  table, data = compare.bounds_table(readings)
  lines = [
    "Test and validation bounds of the binary model (IWAE M = 1000, 500 images each), 50,000"
    " steps at learning rate 5e-3, momentum 0.4, tau 0.64; each arm against its group's first"
    " (the default model), paired by seed:",
    "",
    *table,
    *readings.missing_lines(),
  ]
  return Report("\n".join(lines) + "\n", data)


def get_study() -> Study:
  return Study(
    name="concrete_choices",
    arms=tuple(_arms()),
    report=_report,
    records="records/concrete_choices",
  )
