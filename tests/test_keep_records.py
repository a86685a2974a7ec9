"""scripts/keep_records.py: a finished run's records copied, nothing else."""

import subprocess
import sys

from tests.cli import ROOT

sys.path.insert(0, str(ROOT / "scripts"))
import launch  # noqa: E402  (the scripts' helpers)


def _workdir(path, finished):
  path.mkdir(parents=True)
  (path / "config.json").write_text('{"estimator": "st_gs"}')
  (path / "metrics.jsonl").write_text('{"step": 1}\n')
  (path / "log.txt").write_text("progress\n")
  (path / "checkpoints" / "1").mkdir(parents=True)
  (path / "checkpoints" / "1" / "state").write_text("weights")
  if finished:
    (path / "results.json").write_text('{"steps": 1}')


def test_finished_runs_keep_their_records_in_the_same_layout(tmp_path):
  runs, into = tmp_path / "runs", tmp_path / "records"
  _workdir(runs / "setting" / "st_gs", finished=True)
  _workdir(runs / "setting" / "gr_mc10", finished=False)
  kept = launch.keep_records(runs, into)
  assert kept == [runs / "setting" / "st_gs"]
  copied = sorted(p.relative_to(into).as_posix() for p in into.rglob("*") if p.is_file())
  assert copied == [
    "setting/st_gs/config.json",
    "setting/st_gs/metrics.jsonl",
    "setting/st_gs/results.json",
  ]
  assert (into / "setting" / "st_gs" / "results.json").read_text() == '{"steps": 1}'


def test_a_kept_record_is_replaced_by_the_runs_newer_one(tmp_path):
  runs, into = tmp_path / "runs", tmp_path / "records"
  _workdir(runs / "st_gs", finished=True)
  launch.keep_records(runs, into)
  (runs / "st_gs" / "results.json").write_text('{"steps": 2}')
  launch.keep_records(runs, into)
  assert (into / "st_gs" / "results.json").read_text() == '{"steps": 2}'


def test_records_asked_into_the_runs_themselves_are_left_as_they_are(tmp_path):
  _workdir(tmp_path / "runs" / "st_gs", finished=True)
  assert launch.keep_records(tmp_path / "runs", tmp_path / "runs") == []
  assert (tmp_path / "runs" / "st_gs" / "results.json").read_text() == '{"steps": 1}'


def test_a_missing_runs_directory_is_one_line(tmp_path):
  result = subprocess.run(
    [sys.executable, str(ROOT / "scripts" / "keep_records.py"), f"--runs={tmp_path / 'no'}"]
    + [f"--into={tmp_path / 'records'}"],
    capture_output=True,
    text=True,
  )
  assert result.returncode == 1
  assert result.stderr.strip() == f"error: {tmp_path / 'no'} is not a directory: no runs to keep."
  assert not (tmp_path / "records").exists()
