"""docs/compare_your_estimator.md's three steps with an estimator defined outside the package:
train its arm of the field study, time it with scripts/bench_vae.py, tabulate it beside the kept
rows (tiny steps and synthetic images here, so its row is listed as not compared)."""

import os
import shutil
import subprocess
import sys

import pytest

from tests.cli import ROOT, script_command

OWN_MODULE = """
from gr_jax import estimators


def half_tau_st_gs(key, logits, *, tau=1.0):
  return estimators.st_gumbel_softmax(key, logits, tau=0.5 * tau)


HALF_TAU = estimators.Estimator("half_tau_st_gs", half_tau_st_gs, "straight_through")
"""
ARM = "nonlinear_fashion_mnist/my_estimators.HALF_TAU"
TINY = (
  "dataset=synthetic_grey",
  "num_steps=4",
  "steps_per_call=2",
  "log_every=2",
  "checkpoint_every=2",
  "variance_every=2",
  "num_eval_samples=5",
  "extra_test_samples=()",
  "eval_batch_size=25",
  "iwae_chunk_size=5",
)


@pytest.mark.slow
def test_an_estimator_of_ones_own_is_trained_timed_and_tabulated(tmp_path):
  (tmp_path / "own").mkdir()
  (tmp_path / "own" / "my_estimators.py").write_text(OWN_MODULE)
  env = {**os.environ, "PYTHONPATH": str(tmp_path / "own")}
  records = tmp_path / "records"
  shutil.copytree(ROOT / "records" / "field", records)  # the kept rows, left untouched in the clone
  bench = tmp_path / "bench_mine.json"
  study = [sys.executable, "-m", "experiments.study", f"--out={tmp_path / 'out'}"]
  study += [f"--records={records}", f"--arms={ARM}", *(f"--set={o}" for o in TINY)]
  spec = f"--study=configs/studies/field.py:my_estimators:HALF_TAU@{bench}"

  def run(command):
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout

  run([*study, spec, "--tables=false"])
  assert (records / ARM / "results.json").is_file()  # kept as it finished
  run(
    script_command("bench_vae")
    + ["--models=bernoulli_nonlinear", "--batch_sizes=50", "--repeats=2", "--eval_images=0"]
    + ["--estimators=st_gs,my_estimators:HALF_TAU", f"--out={bench}"]
  )
  page = run([*study, spec, "--run=false"])
  row = next(line for line in page.splitlines() if line.startswith("| my_estimators:HALF_TAU |"))
  cells = [cell.strip() for cell in row.strip("|").split("|")]
  assert cells[1:4] == ["1", "4", "3"]  # loss evaluations, steps, seeds
  assert float(cells[-1]) > 0  # its ms per step, from the bench file given
  assert (
    "Not compared below (not of the setting's 100,000 steps and seeds [0, 1, 2]):"
    " my_estimators:HALF_TAU (4 steps, seeds [0, 1, 2])." in page
  )
  assert "| disarm | 2 | 100,000 | 3 |" in page  # the kept rows beside it
