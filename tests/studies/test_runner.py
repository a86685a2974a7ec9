"""experiments/studies/runner.py and the study command: arms, reading, refusals, SLURM arrays."""

import fcntl
import json
import os
import re
import subprocess
import sys

import pytest

from experiments.studies import launch, runner
from experiments.studies import records as records_lib
from tests.cli import ROOT
from tests.studies.canned import simple_run

TINY = (
  "dataset=synthetic",
  "encoder_widths=(8,)",
  "decoder_widths=(8,)",
  "num_steps=2",
  "num_eval_samples=5",
  "eval_batch_size=25",
  "iwae_chunk_size=5",
)

STUDY = '''
"""A tiny study: two estimators, two seeds, the test bound paired by seed."""

from experiments.studies import figures, tables
from experiments.studies.runner import Arm, Report, Study

TINY = {tiny!r}


def report(readings):
  a, b = readings.get("st_gs"), readings.get("gr_mc10")
  rows = [[n, tables.spread(run.by_seed("test_nll").values())] for n, run in readings.runs.items()]
  lines = tables.markdown_table(["arm", "test"], rows)
  if a and b:
    difference = tables.paired(a.by_seed("test_nll"), b.by_seed("test_nll"))
    lines.append("gr_mc10 - st_gs " + difference.cell())
  lines += readings.missing_lines()
  return Report("\\n".join(lines), {{n: r.by_seed("test_nll") for n, r in readings.runs.items()}})


def draw(readings, directory):
  rows = [
    figures.BudgetCurve(n, run.members[0].curve("neg_elbo"), evaluations=1)
    for n, run in readings.runs.items()
  ]
  return [figures.budget_curves(directory / "tiny.png", "tiny", rows)]


def get_study():
  arms = tuple(
    Arm(name, "configs/vae_16ary.py", (f"estimator={{name}}", *TINY), seeds=(0, 1))
    for name in ("st_gs", "gr_mc10")
  )
  return Study("tiny", arms, report, records="{records}", figures=draw)
'''


def _study_file(tmp_path, records):
  path = tmp_path / "tiny_study.py"
  path.write_text(STUDY.format(tiny=TINY, records=records))
  return path


def _study(*args, env=None):
  return subprocess.run(
    [sys.executable, "-m", "experiments.study", *args],
    cwd=ROOT,
    capture_output=True,
    text=True,
    timeout=900,
    env={**os.environ, **(env or {})},
  )


def test_an_arm_trains_its_seeds_as_one_population_and_expects_its_fields():
  arm = runner.Arm(
    "s/st_gs", "c.py", ("estimator=st_gs", "tau=0.5"), seeds=(0, 2), lists={"tau": (1, 2)}
  )
  assert arm.command_overrides(["num_steps=5"], data_root="/data") == [
    "estimator=st_gs",
    "tau=0.5",
    "population.search=lists",
    "population.tau=(1,2,)",
    "population.seed=(0,2,)",
    "num_steps=5",
    "data_dir=/data",
  ]
  assert arm.expect(["num_steps=5", "population.size=3"]) == {
    "estimator": "st_gs",
    "tau": 0.5,
    "num_steps": 5,
  }


def test_arms_are_selected_by_name_or_prefix_and_a_wrong_name_is_one_line():
  study = runner.Study(
    "s", (runner.Arm("a/x", "c"), runner.Arm("a/y", "c"), runner.Arm("b", "c")), None
  )
  assert [a.name for a in study.select(["a/"])] == ["a/x", "a/y"]
  assert [a.name for a in study.select(["b", "a/x"])] == ["b", "a/x"]
  with pytest.raises(ValueError, match="'c' is not an arm of study s; its arms: a/x, a/y, b"):
    study.select(["c"])
  with pytest.raises(ValueError, match="arm names must be unique"):
    runner.Study("s", (runner.Arm("a", "c"), runner.Arm("a", "c")), None)


def test_reading_prefers_the_workdir_then_the_records_and_lists_what_is_missing(tmp_path):
  arms = tuple(runner.Arm(n, "c", (f"estimator={n}",)) for n in ("st_gs", "gr_mc10", "zgr"))
  study = runner.Study("s", arms, None)
  simple_run(tmp_path / "records" / "st_gs", estimator="st_gs")
  simple_run(tmp_path / "out" / "st_gs", estimator="st_gs", seeds=(5,))
  simple_run(tmp_path / "records" / "gr_mc10", estimator="gr_mc10")
  readings = runner.read(study, tmp_path / "out", tmp_path / "records")
  assert readings.get("st_gs").seeds == (5,)  # the workdir's own run
  assert readings.get("gr_mc10").seeds == (0, 1)
  assert readings.missing == {"zgr": "no such run (not trained, and no records kept)"}
  simple_run(tmp_path / "records" / "zgr", estimator="st_gs")  # a mistaken copy
  with pytest.raises(Exception, match="estimator='st_gs' where this arm expects 'zgr'"):
    runner.read(study, tmp_path / "out", tmp_path / "records")


def test_a_bad_config_file_argument_or_override_is_one_line():
  with pytest.raises(launch.LaunchError) as info:
    launch.load_config("configs/bernoulli_vae_nonlinear.py:bad_arg", [])
  assert "\n" not in str(info.value) and "bad_arg" in str(info.value)
  with pytest.raises(launch.LaunchError, match="config.estimater"):
    launch.load_config("configs/vae_16ary.py", ["estimater=st_gs"])
  assert launch.load_config("configs/vae_16ary.py", ["num_steps=7"]).num_steps == 7


@pytest.mark.parametrize(
  "args, message",
  [
    (["--study=configs/studies/nothing.py"], "no such file"),
    (["--study=configs/studies/field.py", "--arms=x"], "'x' is not an arm of study leaderboard"),
    (["--study=configs/studies/field.py", "--set=estimater=st_gs"], "config.estimater"),
    (["--study=configs/studies/field.py", "--records=OUT"], "lies in the records folder"),
    (["--study=configs/studies/field.py", "--slice=3/3"], "--slice=3/3: give I/N with 0 <= I < N"),
    (["--study=configs/studies/field.py", "--slice=1"], "--slice=1: give I/N"),
    (
      ["--study=configs/studies/field.py", "--slice=0/2", "--slurm=OUT/a.sh"],
      "--slurm writes one array task per arm: give it without --slice",
    ),
  ],
)
def test_the_command_refuses_bad_flags_in_one_line_before_any_work(tmp_path, args, message):
  out = tmp_path / "out"
  args = [a.replace("OUT", str(out)) for a in args]
  result = _study(*args, f"--out={out}")
  assert result.returncode == 1, result.stderr
  assert result.stderr.startswith("error: ") and message in result.stderr
  assert len(result.stderr.strip().splitlines()) == 1 and not out.exists()


def test_an_unwritable_records_folder_is_refused_before_training(tmp_path):
  blocker = tmp_path / "file"
  blocker.write_text("")
  study = _study_file(tmp_path, blocker / "records")
  result = _study(f"--study={study}", f"--out={tmp_path / 'out'}")
  assert (
    result.returncode == 1
    and "--records=" in result.stderr
    and "cannot be written" in result.stderr
  )
  assert not (tmp_path / "out" / "st_gs").exists()


@pytest.mark.slow
def test_a_study_trains_keeps_records_and_a_slurm_array_gives_the_same_tables(tmp_path):
  records = tmp_path / "records"
  study = _study_file(tmp_path, records)
  one = _study(f"--study={study}", f"--out={tmp_path / 'one'}")
  assert one.returncode == 0, one.stderr[-3000:]
  table = (tmp_path / "one" / "tiny.md").read_text()
  assert "| st_gs |" in table and "gr_mc10 - st_gs" in table and "(lower on" in table
  assert sorted(p.name for p in (records / "gr_mc10").iterdir()) == [
    "config.json",
    "metrics.jsonl",
    "results.json",
    "summary.md",
  ]
  # A fresh clone: no runs, the records kept; the tables are read from them, nothing trained.
  again = _study(f"--study={study}", f"--out={tmp_path / 'fresh'}", "--run=false")
  assert again.returncode == 0 and (tmp_path / "fresh" / "tiny.md").read_text() == table
  # The study's figures, drawn from the records after the tables (OUT/figures by default).
  assert (tmp_path / "fresh" / "figures" / "tiny.png").read_bytes()[:4] == b"\x89PNG"
  assert f"drew {tmp_path / 'fresh' / 'figures' / 'tiny.png'}" in again.stdout
  # The SLURM array: each task trains its arm, then the tables job; the tables are the same.
  script = tmp_path / "array.sh"
  array_out = tmp_path / "array"
  made = _study(f"--study={study}", f"--out={array_out}", "--records=", f"--slurm={script}")
  assert made.returncode == 0, made.stderr
  text = script.read_text()
  assert "#SBATCH --array=0-1" in text and "source .venv/bin/activate" in text
  assert "GR_JAX_DATA" in text and "sbatch --dependency=afterok:$array" in text
  env = {"GR_JAX_CLONE": str(ROOT), "PATH": f"{ROOT / '.venv' / 'bin'}:{os.environ['PATH']}"}
  for task in ("0", "1"):
    done = subprocess.run(
      ["bash", str(script)],
      env={**os.environ, **env, "SLURM_ARRAY_TASK_ID": task},
      capture_output=True,
      text=True,
      timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert not (array_out / "tiny.md").exists()  # the tasks write no tables
  done = subprocess.run(
    ["bash", str(script), "tables"], env={**os.environ, **env}, capture_output=True, text=True
  )
  assert done.returncode == 0, done.stderr[-3000:]
  assert (array_out / "tiny.md").read_text() == table


@pytest.mark.slow
def test_an_arm_trained_in_slices_side_by_side_is_merged_and_kept_as_one_population(tmp_path):
  """``--slice=I/N``: each command trains its slice of the arm's seeds; the last to finish merges
  them into the arm's run and keeps its records, which hold what the population trained whole
  holds (each number within float32 rounding: a slice's program batches fewer members)."""
  records = tmp_path / "records"
  study = _study_file(tmp_path, records)
  sliced = lambda i, *args: _study(
    f"--study={study}", f"--out={tmp_path / 'sliced'}", "--arms=st_gs", f"--slice={i}/2", *args
  )
  first = sliced(1, "--tables=false")
  assert first.returncode == 0, first.stderr[-3000:]
  assert "slice 1-of-2 finished; the last slice to finish merges them" in first.stdout
  assert "waiting for 0-of-2 (not finished)" in first.stdout and not (records / "st_gs").exists()
  # Two slices finishing together merge once: while another command holds the merge lock, this
  # one trains its slice and leaves the merge to it.
  with open(tmp_path / "sliced" / "st_gs" / runner.MERGE_LOCK, "a") as lock:
    fcntl.flock(lock, fcntl.LOCK_EX)
    merging = sliced(0, "--tables=false")
  assert merging.returncode == 0, merging.stderr[-3000:]
  assert "slice 0-of-2 finished; another slice's command merges them" in merging.stdout
  assert not (tmp_path / "sliced" / "st_gs" / "results.json").exists()
  # A slice trained on other code (here: another jax) is refused, in one line naming the flag
  # that merges it all the same; with it, the kept records hold each slice's code.
  slice_1 = tmp_path / "sliced" / "st_gs" / "slices" / "1-of-2" / "results.json"
  results = json.loads(slice_1.read_text())
  other = [{**s, "versions": {**s["versions"], "jax": "0.0.1"}} for s in results["code_segments"]]
  slice_1.write_text(json.dumps({**results, "code_segments": other}))
  refused = sliced(0, "--tables=false")
  assert refused.returncode == 1 and refused.stderr.startswith("error: "), refused.stderr[-3000:]
  assert "its slices could not be merged" in refused.stderr and "(jax " in refused.stderr
  assert "pass --accept_mixed_code" in refused.stderr and not (records / "st_gs").exists()
  last = sliced(0, "--accept_mixed_code")
  assert last.returncode == 0, last.stderr[-3000:]
  assert "its 2 slices merged into one population's records" in last.stdout
  assert f"warning: {slice_1.parent} was trained (in part) on other code" in last.stdout
  by_slice = json.loads((records / "st_gs" / "results.json").read_text())["code_segments_by_slice"]
  assert by_slice[str(slice_1.parent)] == other
  # The merge starts a jax backend; its INFO lines stay out of the study's own.
  assert not re.search(r"^I\d{4} ", last.stdout + last.stderr, re.M), last.stderr[-3000:]
  assert sorted(p.name for p in (records / "st_gs").iterdir()) == [
    "config.json",
    "metrics.jsonl",
    "results.json",
    "summary.md",
  ]
  assert "| st_gs |" in (tmp_path / "sliced" / "tiny.md").read_text()
  whole = _study(f"--study={study}", f"--out={tmp_path / 'whole'}", "--arms=st_gs", "--records=")
  assert whole.returncode == 0, whole.stderr[-3000:]
  kept = records_lib.read_run(records / "st_gs")
  trained_whole = records_lib.read_run(tmp_path / "whole" / "st_gs")
  assert kept.seeds == trained_whole.seeds == (0, 1)
  for name in ("valid_nll", "test_nll"):
    assert kept.by_seed(name) == pytest.approx(trained_whole.by_seed(name), rel=1e-4)
  for a, b in zip(kept.members, trained_whole.members):
    assert a.curve("neg_elbo") == pytest.approx(b.curve("neg_elbo"), rel=1e-4)
  # Run again, a slice's command reads the finished arm and trains nothing; the records stay.
  before = (records / "st_gs" / "results.json").read_bytes()
  again = sliced(1, "--tables=false")
  assert again.returncode == 0 and "slices/" not in again.stdout and "merged" not in again.stdout
  assert (records / "st_gs" / "results.json").read_bytes() == before
  # More slices than the arm has members is one line before any work.
  too_many = _study(f"--study={study}", f"--out={tmp_path / 'more'}", "--slice=0/3")
  assert too_many.returncode == 1 and too_many.stderr.startswith("error: --slice=0/3: arm st_gs")
  assert "has 2 members, so at most 2 slices" in too_many.stderr
  assert not (tmp_path / "more" / "st_gs").exists()
