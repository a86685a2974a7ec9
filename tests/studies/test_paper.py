"""The paper's Tables 1 and 2 as studies (configs/studies/table{1,2}.py) on tiny synthetic runs:
the selection, the spreads, the departures from the protocol, a fresh clone reading the records,
and a stopped run's one line."""

import json
import re
import signal
import statistics
import subprocess
import sys
import time

import pytest

from tests.cli import ROOT

pytestmark = pytest.mark.slow  # trains tiny populations through the study command

TINY_LISTOPS = [
  "--set=dataset=synthetic",
  "--set=num_train_examples=80",
  "--set=embed_dim=8",
  "--set=hidden_dim=8",
  "--set=classifier_hidden_dim=8",
  "--set=num_epochs=1",
]
TINY_VAE = [
  "--set=dataset=synthetic",
  "--set=encoder_widths=(8,)",
  "--set=decoder_widths=(8,)",
  "--set=num_steps=2",
  "--set=num_eval_samples=4",
]


def _study(*args, check=True):
  result = subprocess.run(
    [sys.executable, "-m", "experiments.study", *args],
    cwd=ROOT,
    capture_output=True,
    text=True,
    timeout=900,
  )
  if check:
    assert result.returncode == 0, result.stderr[-3000:]
  return result


def test_table1_selects_the_learning_rate_on_mean_validation_in_one_population(tmp_path):
  _study(
    "--study=configs/studies/table1.py",
    f"--out={tmp_path}",
    "--records=",
    "--arms=L10_tau0.1_noclip/st_gs",
    "--set=population.learning_rate=(0.1,1.0,)",
    "--set=population.seed=(0,1,)",
    *TINY_LISTOPS,
  )
  workdir = tmp_path / "L10_tau0.1_noclip" / "st_gs"
  members = json.loads((workdir / "results.json").read_text())["members"]
  assert sorted((m["learning_rate"], m["seed"]) for m in members) == [
    (0.1, 0),
    (0.1, 1),
    (1.0, 0),
    (1.0, 1),
  ]
  by_rate = {r: [m for m in members if m["learning_rate"] == r] for r in (0.1, 1.0)}
  best = max(by_rate, key=lambda r: statistics.mean(m["valid_accuracy"] for m in by_rate[r]))
  (row,) = json.loads((tmp_path / "table1.json").read_text())
  assert row["selected_learning_rate"] == best and row["paper"] == 59.3
  tests = [100 * m["test_accuracy"] for m in sorted(by_rate[best], key=lambda m: m["seed"])]
  assert row["test_accuracy_values"] == pytest.approx(tests)
  assert "2 seeds per learning rate (the paper: 5)" in row["departures"]
  assert "learning rates {0.1, 1} of the paper's grid" in row["departures"]
  assert "--set=dataset=synthetic" in row["departures"] and row["wall_seconds"] > 0
  assert "| 10 | 0.1 | none | st_gs |" in (tmp_path / "table1.md").read_text()


def test_table2_with_seeds_per_draw_reports_the_selected_draws_spread(tmp_path):
  records = tmp_path / "records"
  command = [
    "--study=configs/studies/table2.py:seeds_per_draw=2",
    f"--records={records}",
    "--arms=16ary_B20/st_gs",
    "--set=population.size=4",
    "--set=selection_eval_samples=0",
    *TINY_VAE,
  ]
  _study(*command, f"--out={tmp_path / 'one'}")
  results = json.loads((tmp_path / "one" / "16ary_B20" / "st_gs" / "results.json").read_text())
  assert [(m["draw"], m["member"]) for m in results["members"]] == [(0, 0), (0, 1), (1, 2), (1, 3)]
  draw = results["selected_draw"]
  same_draw = [m["test_nll"] for m in results["members"] if m["draw"] == draw["draw"]]
  assert draw["test_nll"] == pytest.approx(statistics.mean(same_draw))
  (row,) = json.loads((tmp_path / "one" / "table2_seeds2.json").read_text())
  assert "2 random-search draws (the paper: 20)" in row["departures"]
  assert "2 seeds per draw (4 members; the best member selected)" in row["departures"]
  cell = f"(its draw: {draw['test_nll']:.1f} ± {draw['test_nll_sd']:.1f} over 2 seeds)"
  table = (tmp_path / "one" / "table2_seeds2.md").read_text()
  assert cell in table and row["wall_seconds"] > 0
  # A fresh clone (another --out, the same records) reads the kept population and trains nothing;
  # the wall time is the one the records hold.
  _study(*command, f"--out={tmp_path / 'fresh'}")
  assert not (tmp_path / "fresh" / "16ary_B20" / "st_gs" / "checkpoints").exists()
  assert (tmp_path / "fresh" / "table2_seeds2.md").read_text() == table


def _sigint_at_its_default():
  """As from a terminal: under nohup (or as a background job) the suite starts SIGINT ignored."""
  signal.signal(signal.SIGINT, signal.SIG_DFL)


# SIGTERM (a scheduler's preemption) while the run trains; SIGINT (Ctrl-C) as soon as the run's
# process exists, while it loads: the moment that a fast machine reaches within the first second.
@pytest.mark.parametrize(
  "stop_signal, wait_for", [(signal.SIGTERM, "steps 1..100000"), (signal.SIGINT, "")]
)
def test_a_stopped_run_is_one_line_and_the_signal_reaches_the_run(tmp_path, stop_signal, wait_for):
  """The study passes the stop signal on to its training run (which saves a checkpoint and stops,
  so no orphan keeps training) and ends as interrupted (status 128 + signal) with the run's own
  last line, not a traceback."""
  command = [
    sys.executable,
    "-m",
    "experiments.study",
    "--study=configs/studies/table2.py",
    f"--out={tmp_path}",
    "--records=",
    "--arms=16ary_B20/st_gs",
    "--set=population.size=1",
    "--set=dataset=synthetic",
    "--set=num_steps=100000",
    "--set=steps_per_call=10",
    "--set=encoder_widths=(16,)",
    "--set=decoder_widths=(16,)",
  ]
  process = subprocess.Popen(
    command,
    cwd=ROOT,
    stdout=subprocess.PIPE,
    stderr=subprocess.PIPE,
    text=True,
    preexec_fn=_sigint_at_its_default,
  )
  log = tmp_path / "16ary_B20" / "st_gs" / "log.txt"
  deadline = time.time() + 120
  while time.time() < deadline and not (log.exists() and wait_for in log.read_text()):
    time.sleep(0.05)
  process.send_signal(stop_signal)
  _, stderr = process.communicate(timeout=120)
  last = stderr.strip().splitlines()[-1]
  assert process.returncode == 128 + stop_signal and "Traceback" not in stderr, stderr[-3000:]
  # The run's own "interrupted: ..." line; stopped before its handlers were set up, the signal's
  # name; while its interpreter itself started, Python's KeyboardInterrupt.
  run = re.escape(str(log.parent))
  said = f"(interrupted: |{stop_signal.name} before it wrote anything|KeyboardInterrupt)"
  assert re.match(f"interrupted: the run in {run} stopped: {said}", last), last
  assert last.endswith("the finished arms are kept; run the same command again to go on."), last
  # The run's own advice to run its command again is left out: the study's line gives it once.
  assert last.lower().count("run the same command again") == 1, last
  if stop_signal == signal.SIGTERM:
    assert (log.parent / "checkpoints").is_dir()


@pytest.mark.parametrize(
  "study, message",
  [
    ("table1.py:clip=x", "takes clip=NORM"),
    ("table2.py:seeds_per_draw=0", "takes seeds_per_draw=N"),
  ],
)
def test_a_bad_study_argument_is_one_line(tmp_path, study, message):
  result = _study(f"--study=configs/studies/{study}", f"--out={tmp_path}", check=False)
  assert result.returncode == 1 and message in result.stderr
  assert len(result.stderr.strip().splitlines()) == 1
