"""experiments/studies/depth.py: the depth study's tables from the committed records, and the
ladder recomputed from checkpoints and then read from its kept ladder.json."""

import json

import pytest

from experiments.studies import depth, launch, page, records, runner
from tests.cli import ROOT
from tests.studies.test_runner import TINY


def _study(arg=""):
  return page.load_study("configs/studies/depth.py" + (f":{arg}" if arg else ""))


def test_the_committed_depth_table_is_generated_from_the_committed_records(tmp_path):
  study = _study()
  readings = runner.read(study, tmp_path / "no_runs", ROOT / study.records)
  assert not readings.missing and len(readings.runs) == 20
  assert study.report(readings).markdown == (ROOT / "records/depth/depth.md").read_text()


def test_a_one_layer_record_under_a_two_layer_arm_is_refused(tmp_path):
  """depth_vae.py tabulated one-layer records as two-layer ("two - one 0.00")."""
  study = _study()
  copy = tmp_path / "records"
  for name in ("16ary/one_layer/st_gs", "16ary/two_layer/st_gs"):
    (copy / name).mkdir(parents=True)
    for file in ("config.json", "results.json", "metrics.jsonl"):
      source = ROOT / study.records / "16ary/one_layer/st_gs" / file  # both from one layer
      (copy / name / file).write_bytes(source.read_bytes())
  with pytest.raises(records.RecordError, match="model='concrete' where this arm expects"):
    runner.read(study, tmp_path / "out", copy)


def test_an_unknown_study_argument_is_one_line():
  with pytest.raises(ValueError, match="takes '' or 'ladder'; got 'x'"):
    _study("x")


@pytest.mark.slow
def test_the_ladder_is_computed_from_checkpoints_then_read_from_its_records(tmp_path):
  arm = runner.Arm(
    "16ary/one_layer/st_gs",
    "configs/vae_16ary.py",
    ("estimator=st_gs", *TINY),
    seeds=(0, 1),
    labels={"arity": 16, "depth": "one_layer", "estimator": "st_gs"},
  )
  study = runner.Study("depth", (arm,), report=None)
  out, kept = tmp_path / "out", tmp_path / "records"
  launch.train(arm.config, out / arm.name, arm.command_overrides(), kept / arm.name)
  tau = json.loads((out / arm.name / "config.json").read_text())["tau"]
  table = depth.ladder_table(runner.read(study, out, None), ("st_gs",), (tau,))
  ladder = json.loads((out / arm.name / "ladder.json").read_text())
  assert sorted(ladder) == ["0", "1"] and sorted(ladder["0"]) == ["1", "10", "100", "1000"]
  row = next(line for line in table.splitlines() if line.startswith("| 16 |"))
  assert row.count("±") == 5
  # Kept with the records: a fresh clone (no checkpoints) regenerates the same table.
  records.keep(out / arm.name, kept / arm.name)
  assert (
    depth.ladder_table(runner.read(study, tmp_path / "none", kept), ("st_gs",), (tau,)) == table
  )
  with pytest.raises(records.RecordError, match="the ladder needs"):
    (kept / arm.name / "ladder.json").unlink()
    depth.ladder_table(runner.read(study, tmp_path / "none", kept), ("st_gs",), (tau,))
