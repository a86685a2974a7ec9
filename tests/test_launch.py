"""scripts/launch.py: how the scripts start a run."""

import json
import sys

import pytest

from tests.cli import ROOT

sys.path.insert(0, str(ROOT / "scripts"))

import launch  # noqa: E402

pytestmark = pytest.mark.slow  # trains a tiny run through the CLI

TINY = ["dataset=synthetic", "encoder_widths=(8,)", "decoder_widths=(8,)", "num_steps=2"]
TINY += ["num_eval_samples=5", "eval_batch_size=25", "iwae_chunk_size=5"]


def test_a_run_uses_this_clones_code_from_inside_another_checkout(tmp_path, monkeypatch):
  """`python -m` puts the working directory first on sys.path: started from another checkout,
  the run would import that checkout's experiments/ (here, one that fails at once)."""
  other = tmp_path / "other_checkout"
  (other / "experiments").mkdir(parents=True)
  (other / "experiments" / "__init__.py").write_text("")
  (other / "experiments" / "main.py").write_text('raise SystemExit("the other checkout ran")\n')
  monkeypatch.chdir(other)
  workdir = tmp_path / "run"
  launch.train(str(ROOT / "configs" / "vae_16ary.py"), workdir, TINY)
  assert json.loads((workdir / "results.json").read_text())["members"]


def test_a_run_whose_records_are_kept_is_read_from_them_not_retrained(tmp_path, capsys):
  """A fresh clone has the tracked records (records/...) but no runs/: the drivers must read a
  kept population, not spend hours retraining it."""
  config = str(ROOT / "configs" / "vae_16ary.py")
  trained, records = tmp_path / "trained", tmp_path / "records"
  launch.train(config, trained, TINY, records)  # trains, then keeps its records
  assert sorted(p.name for p in records.iterdir()) == sorted(launch.RECORDS)
  capsys.readouterr()  # the training run's lines

  fresh = tmp_path / "fresh_clone_run"
  launch.train(config, fresh, TINY, records)
  assert (fresh / "results.json").read_text() == (records / "results.json").read_text()
  assert not (fresh / "checkpoints").exists()  # nothing trained
  assert "is finished (2 steps)" in (fresh / "log.txt").read_text()
  printed = capsys.readouterr().out
  assert f"records copied from {records}" in printed
  assert f"{fresh}: checking the copied run" in printed and ": training (" not in printed

  # Records of another config are not taken for this one's: the run says which field differs,
  # and the error says where the copied files came from.
  other = tmp_path / "other_config_run"
  with pytest.raises(SystemExit, match=rf"encoder_widths.*copied from {records}"):
    launch.train(config, other, [*TINY, "encoder_widths=(4,)"], records)


def test_a_workdirs_own_run_comes_before_the_records(tmp_path):
  records, workdir = tmp_path / "records", tmp_path / "run"
  records.mkdir()
  (records / "results.json").write_text('{"steps": 2}')
  (workdir / "checkpoints" / "1").mkdir(parents=True)  # a run to resume
  assert not launch._restore_records(records, workdir)
  assert not (workdir / "results.json").exists()
