"""scripts/keep_records.py: the records rule of experiments/studies/records.py, from the shell."""

import subprocess

from tests.cli import ROOT, script_command
from tests.studies.canned import simple_run


def _keep(runs, into):
  return subprocess.run(
    [*script_command("keep_records.py"), f"--runs={runs}", f"--into={into}"],
    cwd=ROOT,
    capture_output=True,
    text=True,
    timeout=300,
  )


def test_finished_runs_are_kept_and_a_shorter_run_is_refused_in_one_line(tmp_path):
  runs, into = tmp_path / "runs", tmp_path / "records"
  simple_run(runs / "setting" / "st_gs", steps=400)
  done = _keep(runs, into)
  assert done.returncode == 0 and "kept the records of 1 finished runs" in done.stdout
  shorter = tmp_path / "shorter"
  simple_run(shorter / "setting" / "st_gs", steps=200)
  refused = _keep(shorter, into)
  assert refused.returncode == 1 and len(refused.stderr.strip().splitlines()) == 1
  assert "not replaced" in refused.stderr
  assert '"steps": 400' in (into / "setting" / "st_gs" / "results.json").read_text()


def test_a_missing_runs_directory_is_one_line(tmp_path):
  result = _keep(tmp_path / "no", tmp_path / "records")
  assert result.returncode == 1
  assert result.stderr.strip() == f"error: {tmp_path / 'no'} is not a directory: no runs to keep"
  assert not (tmp_path / "records").exists()
