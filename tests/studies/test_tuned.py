"""configs/studies/tuned.py: the temperature search, then fresh seeds at the tau it selects."""

from experiments.studies import launch, page, runner
from tests.cli import ROOT


def test_a_kept_search_declares_its_fresh_seeds_at_the_selected_tau(tmp_path):
  """The committed ST-GS search on non-linear Fashion-MNIST selects tau 0.5 (validation
  IWAE-100 241.24, the lowest of the five): its fresh arm trains seeds 1, 2, 3 there."""
  study = page.load_study("configs/studies/tuned.py")
  arms = {arm.name: arm for arm in study.arms}
  fresh = arms["nonlinear_fashion_mnist/fresh/st_gs"]
  config = launch.load_config(fresh.config, fresh.command_overrides())
  assert (config.tau, config.population.seed, config.num_steps) == (0.5, (1, 2, 3), 100_000)
  assert (
    "nonlinear_fashion_mnist/fresh/reinmax" not in arms
    or (ROOT / "records/tuned/nonlinear_fashion_mnist/search/reinmax").is_dir()
  )
  readings = runner.read(study, tmp_path / "no_runs", ROOT / study.records)
  report = study.report(readings).markdown
  assert "| nonlinear_fashion_mnist/search/st_gs | 0.5 (selected) | 241.24 |" in report
