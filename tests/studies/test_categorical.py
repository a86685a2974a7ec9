"""configs/studies/categorical.py: the categorical grid as published, then as measured."""

import json

import pytest

from configs import categorical_vae
from configs.studies import categorical
from experiments.studies import launch, page


def test_the_published_grid_trains_each_estimator_at_its_shapes_published_row():
  study = page.load_study("configs/studies/categorical.py")
  assert len(study.arms) == len(categorical.SHAPES) * len(categorical.ESTIMATORS) + 1  # + exact
  for arm in study.arms:
    shape, estimator = arm.labels["shape"], arm.labels["estimator"]
    config = launch.load_config(arm.config, arm.command_overrides())
    row = "reinmax" if estimator == "exact" else estimator
    learning_rate, tau, optimizer = categorical_vae.published_hyperparameters(row, shape)
    assert (config.learning_rate, config.tau, config.optimizer) == (learning_rate, tau, optimizer)
    # 8x4: the bias and variance against the exact gradient every 16 epochs.
    assert (config.mse_reference, config.mse_every) == (
      ("exact", 9600) if shape == "8x4" else ("reinforce", 0)
    )
    assert (config.likelihood_gradient == "exact") == (estimator == "exact")
    assert (config.binarization, config.train_split, config.num_steps) == (
      "none",
      "train+valid",
      96_000,
    )
    assert config.population.seed == (0, 1, 2)
  # The first shapes run first, as the issue orders them.
  shapes = [arm.labels["shape"] for arm in study.arms]
  assert sorted(set(shapes), key=shapes.index)[:3] == ["8x4", "16x12", "10x30"]


def _kept_search(folder, valid_by_tau):
  """A finished tau search (seed 0) with these validation bounds, as records."""
  folder.mkdir(parents=True)
  steps = 80_000
  config = launch.load_config("configs/categorical_vae.py:8x4", list(categorical.MEASURED))
  (folder / "config.json").write_text(json.dumps({**config.to_dict(), "estimator": "st_gs"}))
  members = [
    {"member": i, "seed": 0, "tau": tau, "valid_nll": valid, "test_nll": valid + 1}
    for i, (tau, valid) in enumerate(valid_by_tau.items())
  ]
  (folder / "results.json").write_text(json.dumps({"steps": steps, "members": members}))
  lines = [
    {"step": steps, "split": "train", "member": m["member"], "neg_elbo": 1.0} for m in members
  ]
  (folder / "metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))


def test_the_measured_phase_declares_fresh_seeds_at_the_searched_tau(tmp_path):
  names = [arm.name for arm in categorical._measured_arms(str(tmp_path))]
  assert "measured/8x4/search/st_gs" in names and "measured/8x4/st_gs" not in names
  assert "measured/8x4/zgr" in names  # no temperature: fresh seeds at once
  _kept_search(tmp_path / "measured/8x4/search/st_gs", {0.1: 120.0, 0.5: 110.0, 1.0: 111.0})
  (fresh,) = [
    a for a in categorical._measured_arms(str(tmp_path)) if a.name == "measured/8x4/st_gs"
  ]
  config = launch.load_config(fresh.config, fresh.command_overrides())
  assert config.tau == 0.5 and config.population.seed == (1, 2, 3)
  assert (config.binarization, config.train_split, config.num_steps) == ("dynamic", "train", 80_000)


def test_an_unknown_phase_is_one_line():
  with pytest.raises(ValueError, match="takes '', 'published' or 'measured'; got 'x'"):
    page.load_study("configs/studies/categorical.py:x")
