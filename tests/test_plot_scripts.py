"""scripts/plot.py's figures on small synthetic metrics files: PNGs, and one-line refusals."""

import json
import subprocess

import numpy as np
import pytest

from configs import listops_L10, vae_16ary
from experiments.vae import experiment as vae_experiment
from scripts import plot
from tests.cli import ROOT, script_command

# Integration tests (the real CLI, subprocesses, whole runs): `pytest -m "not slow"` skips them.
pytestmark = pytest.mark.slow


def _write_run(directory, estimator, tau, seed):
  directory.mkdir(parents=True)
  (directory / "config.json").write_text(
    json.dumps({"estimator": estimator, "tau": tau, "seed": seed})
  )
  rng = np.random.default_rng(seed)
  lines = []
  for step in range(1000, 6000, 1000):
    lines.append(
      {
        "step": step,
        "split": "train",
        "log10_grad_variance": 3 - step / 1e4 + rng.normal(0, 0.05),
        "log10_grad_mse": 2 + tau + rng.normal(0, 0.05),
      }
    )
    lines.append({"step": step, "split": "valid", "nll": 150 - step / 200 + rng.normal(0, 1)})
  (directory / "metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
  root = tmp_path_factory.mktemp("runs")
  for estimator in ("st_gs", "gr_mc100"):
    for tau in (0.1, 0.5, 1.0):
      for seed in range(2):
        _write_run(root / f"{estimator}_{tau}_{seed}", estimator, tau, seed)
  return root


@pytest.mark.parametrize(
  "figure,extra",
  [
    ("variance", []),
    ("mse_vs_tau", []),
    ("convergence", ["--thresholds=145,140,130"]),
    ("convergence", []),
  ],
)
def test_plot_script_writes_png(runs, tmp_path, figure, extra):
  out = tmp_path / "figure.png"
  subprocess.run(
    [*script_command("plot"), f"--figure={figure}", f"--runs={runs}/*", f"--out={out}", *extra],
    check=True,
    capture_output=True,
    cwd=ROOT,
  )
  assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 10_000


def test_plot_script_says_when_nothing_matches(tmp_path):
  result = subprocess.run(
    [*script_command("plot"), "--figure=variance", f"--runs={tmp_path}/*"],
    capture_output=True,
    text=True,
    cwd=ROOT,
  )
  assert result.returncode != 0 and "no run directory" in result.stderr


def test_plot_members_marks_divergence_and_tabulates_members(tmp_path):
  """A population of 2 learning rates x 2 seeds, written by hand: member 3 diverges at step 500
  (a null training loss) after one evaluation; the table reports each member's best-while-alive
  test accuracy (the earliest best validation) and its last evaluation."""
  run = tmp_path / "pop"
  run.mkdir()
  config = listops_L10.get_config()
  config.estimator, config.tau = "st_gs", 0.01
  config.population.search = "lists"
  config.population.learning_rate, config.population.seed = (0.1, 0.5), (0, 1)
  (run / "config.json").write_text(json.dumps(config.to_dict()))
  lines = []
  for step, valid, test in (
    (400, [0.5, 0.6, 0.4, 0.3], [0.55, 0.65, 0.45, 0.35]),
    (800, [0.5, 0.7, 0.4, 0.9], [0.60, 0.75, 0.40, 0.10]),
  ):
    for member in range(4):
      loss = None if member == 3 and step == 800 else 1.0
      lines.append({"step": step - 300, "split": "train", "member": member, "loss": loss})
      lines.append({"step": step, "split": "valid", "member": member, "accuracy": valid[member]})
      lines.append({"step": step, "split": "test", "member": member, "accuracy": test[member]})
  (run / "metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
  out, table = tmp_path / "members.png", tmp_path / "members.md"
  subprocess.run(
    [
      *script_command("plot"),
      "--figure=members",
      f"--runs={run}",
      f"--out={out}",
      f"--table={table}",
    ],
    check=True,
    capture_output=True,
    cwd=ROOT,
  )
  assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
  rows = table.read_text().splitlines()
  assert rows[4] == "| 0.1 | 65.0 ± 14.1 | 55.0, 75.0 | 60.0, 75.0 | -, - |"
  assert rows[5] == "| 0.5 | 40.0 ± 7.1 | 45.0, 35.0 | 40.0, 10.0 | -, 500 |"


def test_plot_members_on_a_run_without_the_metric_is_one_line_not_an_empty_figure(tmp_path):
  """Its default metric (accuracy) on a VAE run wrote an empty figure with status 0."""
  run = tmp_path / "vae"
  run.mkdir()
  (run / "config.json").write_text(json.dumps(vae_16ary.get_config().to_dict()))
  line = {"step": 100, "split": "valid", "member": 0, "nll": 120.0, "num_samples": 10}
  (run / "metrics.jsonl").write_text(json.dumps(line) + "\n")
  out = tmp_path / "members.png"
  result = subprocess.run(
    [*script_command("plot"), "--figure=members", f"--runs={run}", f"--out={out}"],
    capture_output=True,
    text=True,
    cwd=ROOT,
  )
  assert result.returncode != 0 and not out.exists() and "Traceback" not in result.stderr
  assert f"{run} logged no valid accuracy (its valid metrics: nll)" in result.stderr


def test_plot_members_labels_each_member_with_its_own_hyperparameters(tmp_path):
  """A searched population's members have their own draws, not the config's defaults: before
  results.json, the search's draws; after, results.json's."""
  config = vae_16ary.get_config()
  config.population.search, config.population.size = "paper", 3
  as_json = json.loads(json.dumps(config.to_dict()))
  members = plot.member_hyperparameters(tmp_path, as_json)
  for index in range(3):
    seed, drawn = vae_experiment.paper_search(index, 0, config)
    assert members[index]["seed"] == seed and members[index]["tau"] == drawn["tau"]
  assert len({m["learning_rate"] for m in members.values()}) > 1
  assert all(m["tau"] != config.tau for m in members.values())
  results = {"members": [{"member": 0, "learning_rate": 0.7, "tau": 0.2}]}
  (tmp_path / "results.json").write_text(json.dumps(results))
  assert plot.member_hyperparameters(tmp_path, as_json) == {0: results["members"][0]}
  bad = subprocess.run(
    [
      *script_command("plot"),
      "--figure=members",
      f"--runs={tmp_path}",
      "--metric=foo",
    ],
    capture_output=True,
    text=True,
    cwd=ROOT,
  )
  assert bad.returncode != 0 and "Traceback" not in bad.stderr
  assert "--metric=foo --split=valid: the curves are one of" in bad.stderr


def test_plot_convergence_ignores_the_final_evaluation(tmp_path):
  """Runs with no periodic validation (only the final evaluation's lines) draw no curve: one line
  saying which field sets it."""
  run = tmp_path / "run"
  run.mkdir()
  (run / "config.json").write_text(json.dumps({"estimator": "st_gs"}))
  lines = [
    {"step": 100, "split": "train", "neg_elbo": 120.0},
    {"step": 100, "split": "valid", "final": True, "nll": 110.0, "num_samples": 1000},
  ]
  (run / "metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
  result = subprocess.run(
    [*script_command("plot"), "--figure=convergence", f"--runs={run}"],
    capture_output=True,
    text=True,
    cwd=ROOT,
  )
  assert result.returncode != 0
  assert (
    result.stderr.strip()
    .splitlines()[-1]
    .startswith("error: these runs have no periodic validation bound (config.eval_every = 0")
  )
  bad = subprocess.run(
    [
      *script_command("plot"),
      "--figure=convergence",
      f"--runs={run}",
      "--thresholds=abc",
    ],
    capture_output=True,
    text=True,
    cwd=ROOT,
  )
  assert bad.returncode != 0 and "Traceback" not in bad.stderr


@pytest.mark.parametrize("figure", ["variance", "members", "convergence"])
def test_damaged_metrics_lines_are_skipped_and_said(tmp_path, figure):
  """A metrics.jsonl with a torn line and binary garbage (a disk that filled, a bad copy): the plot
  is drawn from the other lines, with one warning line; a damaged config.json is one error line."""
  run = tmp_path / "run"
  _write_run(run, "st_gs", 0.5, 0)
  config = json.loads((run / "config.json").read_text())
  (run / "config.json").write_text(json.dumps({**config, **vae_16ary.get_config().to_dict()}))
  with open(run / "metrics.jsonl", "ab") as metrics:
    metrics.write(b'{"step": 6000, "split"\n\x00\xff garbage\n')
  command = [*script_command("plot"), f"--figure={figure}", f"--runs={run}"]
  if figure == "members":  # the run logs a validation nll, not the default accuracy
    command.append("--metric=nll")
  result = subprocess.run(
    [*command, f"--out={tmp_path / 'a.png'}"], cwd=ROOT, capture_output=True, text=True, timeout=300
  )
  assert result.returncode == 0, result.stderr[-3000:]
  assert f"warning: {run / 'metrics.jsonl'}: skipped 2 damaged line(s) (line 11, ...)" in (
    result.stdout
  )
  assert (tmp_path / "a.png").is_file()
  (run / "config.json").write_text("[1")
  result = subprocess.run(
    [*command, f"--out={tmp_path / 'b.png'}"], cwd=ROOT, capture_output=True, text=True, timeout=300
  )
  assert result.returncode == 1 and "Traceback" not in result.stderr
  last = result.stderr.strip().splitlines()[-1]
  assert last.startswith(f"error: {run / 'config.json'} is damaged")


def test_plot_categorical_draws_each_estimators_bound_against_the_shape(tmp_path):
  rows = [
    {"shape": shape, "estimator": estimator, "test IWAE-1000": {"1": 100 + i, "2": 101 + i}}
    for i, shape in enumerate(("8x4", "16x12", "10x30"))
    for estimator in ("st_gs", "gr_mc10")
  ]
  table = tmp_path / "categorical_measured.json"
  table.write_text(json.dumps(rows))
  out = tmp_path / "categorical.png"
  command = [*script_command("plot"), "--figure=categorical", f"--study_json={table}"]
  subprocess.run([*command, f"--out={out}"], cwd=ROOT, check=True, timeout=300)
  assert out.stat().st_size > 1000
  missing = subprocess.run(
    [*command, "--column=test IWAE-5"], cwd=ROOT, capture_output=True, text=True, timeout=300
  )
  assert missing.returncode != 0 and "no values of column 'test IWAE-5'" in missing.stderr
