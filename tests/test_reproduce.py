"""scripts/reproduce.py (the paper's tables) and scripts/figure_2b.py on tiny synthetic runs."""

import json
import signal
import statistics
import subprocess
import sys
import time

import pytest

from tests.cli import ROOT, run_main

sys.path.insert(0, str(ROOT / "scripts"))
import reproduce  # noqa: E402  (a script, imported for its helpers)

# Integration tests (the real CLI, subprocesses, whole runs): `pytest -m "not slow"` skips them.
pytestmark = pytest.mark.slow


def _script(name, *args):
  result = subprocess.run(
    [sys.executable, str(ROOT / "scripts" / name), *args],
    cwd=ROOT,
    capture_output=True,
    text=True,
    timeout=900,
  )
  assert result.returncode == 0, result.stderr[-3000:]
  return result


def test_table1_selects_the_learning_rate_on_mean_validation_and_reports_seeds(tmp_path):
  _script(
    "reproduce.py",
    "--table=1",
    f"--out={tmp_path}",
    "--estimators=st_gs",
    "--taus=0.1",
    "--seeds=2",
    "--learning_rates=0.1,1.0",
    "--set=dataset=synthetic",
    "--set=num_train_examples=80",
    "--set=embed_dim=8",
    "--set=hidden_dim=8",
    "--set=classifier_hidden_dim=8",
    "--set=num_epochs=1",
  )
  members = json.loads((tmp_path / "L10_tau0.1_noclip" / "st_gs" / "results.json").read_text())[
    "members"
  ]
  assert sorted((m["learning_rate"], m["seed"]) for m in members) == [
    (0.1, 0),
    (0.1, 1),
    (1.0, 0),
    (1.0, 1),
  ]
  by_rate = {r: [m for m in members if m["learning_rate"] == r] for r in (0.1, 1.0)}
  best = max(by_rate, key=lambda r: statistics.mean(m["valid_accuracy"] for m in by_rate[r]))
  row = json.loads((tmp_path / "table1.json").read_text())[0]
  assert row["selected_learning_rate"] == best and row["seeds"] == 2 and row["paper"] == 59.3
  tests = [100 * m["test_accuracy"] for m in by_rate[best]]
  assert row["test_accuracy_mean"] == pytest.approx(statistics.mean(tests))
  assert row["test_accuracy_std"] == pytest.approx(statistics.stdev(tests))
  assert row["wall_seconds"] > 0 and "2 seeds per learning rate (the paper: 5)" in row["departures"]
  table = (tmp_path / "table1.md").read_text()
  assert (
    table.startswith("Command: `python scripts/reproduce.py --table=1")
    and "| 10 | 0.1 | none | st_gs |" in table
  )


def test_table2_with_seeds_per_draw_reports_the_selected_draws_spread(tmp_path):
  records = tmp_path / "records"
  command = [
    "reproduce.py",
    "--table=2",
    f"--records={records}",
    "--arities=16",
    "--batch_sizes=20",
    "--estimators=st_gs",
    "--draws=2",
    "--seeds_per_draw=2",
    "--set=dataset=synthetic",
    "--set=encoder_widths=(8,)",
    "--set=decoder_widths=(8,)",
    "--set=num_steps=2",
    "--set=eval_every=0",
    "--set=variance_every=0",
    "--set=num_eval_samples=4",
  ]
  _script(*command, f"--out={tmp_path}")
  results = json.loads((tmp_path / "16ary_B20" / "st_gs" / "results.json").read_text())
  assert [(m["draw"], m["member"]) for m in results["members"]] == [(0, 0), (0, 1), (1, 2), (1, 3)]
  draw = results["selected_draw"]
  same_draw = [m["test_nll"] for m in results["members"] if m["draw"] == draw["draw"]]
  assert results["selected_member"] in draw["members"]
  assert draw["test_nll"] == pytest.approx(statistics.mean(same_draw))
  assert draw["test_nll_sd"] == pytest.approx(statistics.stdev(same_draw))
  row = json.loads((tmp_path / "table2.json").read_text())[0]
  assert "2 seeds per draw (4 members; the best member selected)" in row["departures"]
  cell = f"(its draw: {draw['test_nll']:.1f} ± {draw['test_nll_sd']:.1f} over 2 seeds)"
  assert cell in (tmp_path / "table2.md").read_text()
  assert row["wall_seconds"] > 0

  # A fresh clone (another --out, the same --records) reads the kept population, trains nothing,
  # and has no wall time of its own to report.
  fresh = tmp_path / "fresh_clone"
  _script(*command, f"--out={fresh}")
  assert not (fresh / "16ary_B20" / "st_gs" / "checkpoints").exists()
  again = json.loads((fresh / "table2.json").read_text())[0]
  assert again["test_nll"] == row["test_nll"] and again["wall_seconds"] is None
  assert cell in (fresh / "table2.md").read_text()


def test_wall_time_sums_the_processes_that_trained(tmp_path):
  log = tmp_path / "log.txt"
  log.write_text(
    "I1126 06:00:00.000000 1 common.py:1] starting a new run in x\n"
    "I1126 06:00:30.500000 1 common.py:1] step 10/20\n"
    "error: interrupted\n"
    "I1126 07:00:00.000000 2 common.py:1] resumed from the checkpoint at step 10\n"
    "I1126 07:00:10.000000 2 common.py:1] results: ...\n"
    # A process that only read the finished results, then one that extended the run.
    "I1126 08:00:00.000000 3 common.py:1] the run in x is finished (20 steps)\n"
    "I1126 09:00:00.000000 4 common.py:1] resumed from the checkpoint at step 20\n"
    "I1126 09:00:05.000000 4 common.py:1] results: ...\n"
    "I1126 09:30:00.000000 5 common.py:1] the run in x is finished (30 steps)\n"
  )
  assert reproduce.wall_seconds(log) == pytest.approx(45.5)
  # Only read (a population copied from its kept records): no wall time measured here.
  log.write_text("I1126 08:00:00.000000 3 common.py:1] the run in x is finished (20 steps)\n")
  assert reproduce.wall_seconds(log) is None


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
  for flags, expected in (
    ((f"--vae_workdir={workdir}", "--vae_member=2"), "this workdir holds population members 0-1"),
    ((f"--vae_workdir={tmp_path / 'none'}",), "holds no run"),
    ((f"--vae_workdir={listops_run}",), "holds a listops run; load_trained reads VAE runs"),
  ):
    result = subprocess.run(
      [sys.executable, str(ROOT / "scripts" / "figure_2b.py"), *flags, f"--out_dir={tmp_path}"],
      cwd=ROOT,
      capture_output=True,
      text=True,
      timeout=300,
    )
    last = result.stderr.strip().splitlines()[-1]
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert last.startswith(f"error: {flags[0]}, --vae_member=") and expected in last, last


def test_a_failed_or_stopped_run_is_one_line_and_sigterm_reaches_the_run(tmp_path):
  """reproduce.py passes SIGTERM on to its training run (which saves a checkpoint and stops, so no
  orphan keeps training) and ends with the run's own last line, not a traceback."""
  command = [
    sys.executable,
    str(ROOT / "scripts" / "reproduce.py"),
    "--table=2",
    f"--out={tmp_path}",
    "--arities=16",
    "--batch_sizes=20",
    "--draws=1",
    "--estimators=st_gs",
    "--set=dataset=synthetic",
    "--set=num_steps=100000",
    "--set=steps_per_call=10",
    "--set=encoder_widths=(16,)",
    "--set=decoder_widths=(16,)",
    "--set=variance_every=0",
    "--set=eval_every=0",
  ]
  process = subprocess.Popen(
    command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
  )
  log = tmp_path / "16ary_B20" / "st_gs" / "log.txt"
  deadline = time.time() + 120
  while time.time() < deadline and "steps 1..100000" not in (
    log.read_text() if log.exists() else ""
  ):
    time.sleep(0.5)
  process.send_signal(signal.SIGTERM)
  _, stderr = process.communicate(timeout=120)
  last = stderr.strip().splitlines()[-1]
  assert process.returncode == 1 and "Traceback" not in stderr
  assert last.startswith(
    f"error: the run in {log.parent} stopped (exit 143): interrupted: stopped by SIGTERM"
  )
  assert (log.parent / "checkpoints").is_dir()
