"""configs/studies/concrete_choices.py: the Concrete paper's choices as arms of the binary model."""

from experiments.studies import launch, page, runner
from experiments.vae import experiment as vae_experiment
from tests.cli import ROOT


def test_the_references_are_the_kl_studys_kept_runs_and_each_arm_changes_its_choices(tmp_path):
  study = page.load_study("configs/studies/concrete_choices.py")
  readings = runner.read(study, tmp_path / "no_runs", ROOT / study.records)
  # The kept references read as these arms' runs: their configs match the arms' overrides (the
  # arms trained since are read from records/concrete_choices beside them).
  assert {"ST-GS/default", "GS/default"} <= set(readings.runs)
  assert readings.arms["ST-GS/default"].records == "records/kl/binary/st_gs/pathwise"
  changed = {}
  for arm in study.arms:
    config = launch.load_config(arm.config, list(arm.command_overrides(())))
    vae_experiment.validate(config)  # every arm's config is valid as declared
    changed[arm.name] = {
      field: config[field]
      for field in ("binary_logits", "encoder_input", "relaxed_kl", "loss_reduction")
      if config[field] != launch.load_config(arm.config, [])[field]
    }
  assert changed["ST-GS/one_logit_per_latent"] == {"binary_logits": "one"}
  assert changed["ST-GS/2x-1_input"] == {"encoder_input": "2x-1"}
  assert changed["ST-GS/loss_summed_over_the_batch"] == {"loss_reduction": "sum"}
  assert len(changed["ST-GS/the_three_together"]) == 3
  assert changed["GS/Concrete_densities__prior_tau_0.5"] == {"relaxed_kl": "concrete"}
