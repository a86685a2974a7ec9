"""experiments/studies/records.py: the one reader refuses, in one line, every record that would put
a wrong number into a table (the fifth fault battery's cases), and keeping records never loses
the longer run."""

import json
import os

import pytest

from experiments.studies import records
from tests.studies.canned import simple_run


def _refusal(workdir, expect=None, error=records.RecordError) -> str:
  with pytest.raises(error) as info:
    records.read_run(workdir, expect)
  message = str(info.value)
  assert "\n" not in message
  return message


def test_a_finished_run_is_read_with_its_members_and_curves(tmp_path):
  run = records.read_run(simple_run(tmp_path / "run", seeds=(0, 2)), {"estimator": "st_gs"})
  assert run.steps == 200 and run.seeds == (0, 2) and run.estimator == "st_gs"
  assert run.by_seed("test_nll") == {0: 100.0, 2: 102.0}
  # A column is read by its result name or by a function of the member, alike.
  assert run.by_seed(lambda member: member.results["test_nll"] + member.seed) == {
    0: 100.0,
    2: 104.0,
  }
  assert run.members[1].curve("neg_elbo") == {100: 112.0, 200: 102.0}
  assert run.members[0].curve("nll", "test") == {}  # the final evaluation's lines are left out


def test_records_of_another_config_under_an_arms_folder_are_refused(tmp_path):
  """A mistaken `cp -r`: RLOO-2's records under ST-GS's folder were labelled ST-GS."""
  workdir = simple_run(tmp_path / "st_gs", estimator="rloo2")
  message = _refusal(workdir, {"estimator": "st_gs"})
  assert "estimator='rloo2' where this arm expects 'st_gs'" in message
  assert "tau=" in _refusal(simple_run(tmp_path / "t", tau=0.5), {"tau": 1.0})
  assert "model=" in _refusal(simple_run(tmp_path / "m", model="concrete"), {"model": "x"})
  # Machine fields (the data directory, intervals) and equal numbers are the same arm.
  records.read_run(workdir, {"data_dir": "/elsewhere", "estimator": "rloo2", "tau": 1})


def test_a_cut_or_empty_metrics_file_is_refused(tmp_path):
  workdir = simple_run(tmp_path / "run")
  metrics = workdir / "metrics.jsonl"
  lines = metrics.read_text().splitlines(keepends=True)
  metrics.write_text("".join(lines[:-3]) + lines[-3][:20])  # cut mid-line
  assert "is not a whole metrics record" in _refusal(workdir)
  # Whole lines cut: member 1's curve ends at step 100 of 200.
  metrics.write_text("".join(line for line in lines if '"step": 200' not in line))
  assert "training curve ends at 100, the run logged to step 200" in _refusal(workdir)
  metrics.write_text("")
  assert "ends at no step" in _refusal(workdir)
  metrics.unlink()
  assert "no metrics.jsonl" in _refusal(workdir)


def test_missing_or_damaged_files_are_one_line_each(tmp_path):
  workdir = simple_run(tmp_path / "run")
  (workdir / "results.json").write_text('{"steps": 2')
  assert "results.json: damaged JSON" in _refusal(workdir)
  (workdir / "results.json").unlink()
  assert "no results.json (the run has not finished)" in _refusal(workdir, error=records.Unfinished)
  (workdir / "config.json").unlink()
  assert "no config.json" in _refusal(workdir)
  assert "no such run" in _refusal(tmp_path / "nothing", error=records.Unfinished)
  # An arm training in slices (study --slice) holds only slices/ until the last one merges them.
  (tmp_path / "sliced" / "slices" / "0-of-2").mkdir(parents=True)
  assert "training in slices" in _refusal(tmp_path / "sliced", error=records.Unfinished)


def test_a_diverged_member_stays_counted_not_dropped(tmp_path):
  workdir = simple_run(tmp_path / "run", seeds=(0, 1, 2))
  results = json.loads((workdir / "results.json").read_text())
  results["members"][1]["test_nll"] = float("nan")
  (workdir / "results.json").write_text(json.dumps(results))  # NaN, as json writes it
  run = records.read_run(workdir)
  assert run.by_seed("test_nll") == {0: 100.0, 1: None, 2: 102.0}


def test_an_extended_run_that_has_not_finished_again_is_refused(tmp_path):
  workdir = simple_run(tmp_path / "run", steps=200)
  config = json.loads((workdir / "config.json").read_text())
  (workdir / "config.json").write_text(json.dumps({**config, "num_steps": 400}))
  assert "results.json is of 200 steps and config.json asks for 400" in _refusal(workdir)


def test_keeping_never_replaces_longer_or_newer_records(tmp_path):
  runs, into = tmp_path / "runs", tmp_path / "records"
  long = simple_run(runs / "long", steps=400, seeds=(0, 1, 2))
  assert records.keep(long, into / "arm")
  assert not records.keep(long, into / "arm")  # unchanged: nothing to copy
  for name, kwargs in (("short", {"steps": 200, "seeds": (0, 1, 2)}), ("few", {"seeds": (0,)})):
    run = simple_run(runs / name, **{"steps": 400, **kwargs})
    with pytest.raises(records.RecordError, match="not replaced"):
      records.keep(run, into / "arm")
  assert json.loads((into / "arm" / "results.json").read_text())["steps"] == 400
  older = simple_run(runs / "older", steps=400, seeds=(0, 1, 2), tau=0.5)
  os.utime(older / "results.json", (1, 1))
  with pytest.raises(records.RecordError, match="an older run of the same length"):
    records.keep(older, into / "arm")
  damaged = simple_run(runs / "damaged", steps=800, seeds=(0, 1, 2))
  (damaged / "results.json").write_text("{")
  with pytest.raises(records.RecordError, match="damaged JSON"):
    records.keep(damaged, into / "arm")
  assert json.loads((into / "arm" / "config.json").read_text())["tau"] == 1.0


def test_keep_all_copies_finished_runs_only_and_refuses_to_nest(tmp_path):
  runs, into = tmp_path / "runs", tmp_path / "records"
  simple_run(runs / "setting" / "st_gs")
  (runs / "setting" / "gr_mc10" / "checkpoints").mkdir(parents=True)  # not finished
  # A slice of a population trained as a job array: its merge is the run kept, not the slice.
  piece = simple_run(runs / "setting" / "st_gs" / "slices" / "0-of-2", seeds=(0,))
  results = json.loads((piece / "results.json").read_text())
  (piece / "results.json").write_text(json.dumps({**results, "shard": [0, 2]}))
  assert records.keep_all(runs, into) == [runs / "setting" / "st_gs"]
  assert sorted(p.name for p in (into / "setting" / "st_gs").iterdir()) == [
    "config.json",
    "metrics.jsonl",
    "results.json",
  ]
  with pytest.raises(records.RecordError, match="lies inside"):
    records.keep_all(runs, runs / "kept")
  assert records.keep_all(runs, runs) == []  # the runs themselves: nothing to copy


def test_an_unwritable_folder_is_refused_before_any_work(tmp_path):
  blocker = tmp_path / "file"
  blocker.write_text("")
  with pytest.raises(records.RecordError, match=r"--records=.* cannot be written"):
    records.check_writable(blocker / "records", "--records")
  records.check_writable(tmp_path / "fine", "--out")
  assert list((tmp_path / "fine").iterdir()) == []
