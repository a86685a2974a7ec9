"""scripts/figure_2b.py on a tiny synthetic run: the MSE per estimator and tau, one-line errors."""

import json
import subprocess

import pytest

from experiments.vae import gradients as vae_gradients
from tests.cli import ROOT, run_main, script_command

pytestmark = pytest.mark.slow  # trains a tiny run and runs the script


def _script(name, *args):
  result = subprocess.run(
    [*script_command(name), *args],
    cwd=ROOT,
    capture_output=True,
    text=True,
    timeout=900,
  )
  assert result.returncode == 0, result.stderr[-3000:]
  return result


def test_figure_2b_measures_mse_per_estimator_and_tau(tmp_path):
  workdir = tmp_path / "vae"
  run_main(
    "configs/vae_16ary.py",
    workdir,
    "dataset=synthetic",
    "encoder_widths=(16,)",
    "decoder_widths=(16,)",
    "num_steps=2",
    "estimator=st_gs",
    "eval_every=0",
    "variance_every=0",
    "num_eval_samples=5",
    "eval_batch_size=25",
    "population.size=2",
  )
  _script(
    "figure_2b.py",
    f"--vae_workdir={workdir}",
    "--vae_member=1",
    f"--out_dir={tmp_path / 'out'}",
    "--figure_estimators=st_gs,gr_mc10",
    "--figure_taus=0.5,1.0",
    "--figure_draws=4",
    "--reference_draws=8",
  )
  results = json.loads((tmp_path / "out" / "figure_2b.json").read_text())
  assert results["member"] == 1 and results["checkpoint_step"] == 2
  for name in ("st_gs", "gr_mc10"):
    for tau in ("0.5", "1.0"):
      cell = results["mse"][name][tau]
      assert (
        cell["mse"] == pytest.approx(cell["variance"] + cell["squared_bias"])
        and cell["variance"] > 0
      )
  assert (tmp_path / "out" / "figures" / "figure_2b.png").read_bytes()[:4] == b"\x89PNG"
  # A member the workdir does not hold, no run, a ListOps run: one line each, naming the flags.
  listops_run = tmp_path / "listops"
  listops_run.mkdir()
  (listops_run / "config.json").write_text(json.dumps({"experiment": "listops"}))
  cases = (
    ((workdir, 2), "this workdir holds population members 0-1"),
    ((tmp_path / "none", 0), "holds no run"),
    ((listops_run, 0), "holds a listops run; load_trained reads VAE runs"),
  )
  # The script's one line and exit status once; the other cases where it comes from.
  (bad_member, expected), *others = cases
  result = subprocess.run(
    [*script_command("figure_2b.py"), f"--vae_workdir={workdir}", "--vae_member=2"],
    cwd=ROOT,
    capture_output=True,
    text=True,
    timeout=300,
  )
  last = result.stderr.strip().splitlines()[-1]
  assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr[-2000:]
  assert last.startswith(f"error: --vae_workdir={workdir}, --vae_member=2") and expected in last
  for (where, member), expected in others:
    with pytest.raises(SystemExit) as stopped:
      vae_gradients.setup(where, member)
    message = str(stopped.value)
    assert message.startswith(f"error: --vae_workdir={where}, --vae_member={member}: ")
    assert expected in message
