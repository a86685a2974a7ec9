"""experiments/studies/launch.py: how a study starts an arm's run."""

import json

import pytest

from experiments.studies import launch, records
from tests.cli import ROOT

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
  trained, kept = tmp_path / "trained", tmp_path / "records"
  launch.train(config, trained, TINY, kept)  # trains, then keeps its records
  assert sorted(p.name for p in kept.iterdir()) == sorted(
    n for n in records.RECORD_FILES if n != "ladder.json"
  )
  capsys.readouterr()  # the training run's lines

  fresh = tmp_path / "fresh_clone_run"
  launch.train(config, fresh, TINY, kept)
  assert (fresh / "results.json").read_text() == (kept / "results.json").read_text()
  assert not (fresh / "checkpoints").exists()  # nothing trained
  assert "is finished (2 steps)" in (fresh / "log.txt").read_text()
  printed = capsys.readouterr().out
  assert f"records copied from {kept}" in printed
  assert f"{fresh}: reading the copied run" in printed and ": training (" not in printed

  # Records of another config are not taken for this one's: the run says which field differs,
  # and the error says where the copied files came from.
  other = tmp_path / "other_config_run"
  with pytest.raises(launch.LaunchError, match=rf"encoder_widths.*copied from {kept}"):
    launch.train(config, other, [*TINY, "encoder_widths=(4,)"], kept)


def test_a_workdirs_own_run_comes_before_the_records(tmp_path):
  kept, workdir = tmp_path / "records", tmp_path / "run"
  kept.mkdir()
  (kept / "results.json").write_text('{"steps": 2}')
  (workdir / "checkpoints" / "1").mkdir(parents=True)  # a run to resume
  assert not launch._restore_records(kept, workdir, 2)
  assert not (workdir / "results.json").exists()


def test_records_of_another_length_are_announced_and_the_run_trains_from_step_0(tmp_path, capsys):
  """Records hold no checkpoint: a longer run (or damaged records) trains from step 0, and says so
  instead of "checking the copied run" followed by silence."""
  kept, workdir = tmp_path / "records", tmp_path / "run"
  kept.mkdir()
  (kept / "results.json").write_text('{"steps": 2}')
  assert not launch._restore_records(kept, workdir, 4)
  assert "are of 2 steps and this arm asks for 4: training from step 0" in capsys.readouterr().out
  (kept / "results.json").write_text('{"steps": ')
  assert not launch._restore_records(kept, workdir, 2)
  assert "damaged results.json: training from step 0" in capsys.readouterr().out


def test_a_slices_done_line_gives_the_populations_size_and_the_members_it_holds(tmp_path):
  """A slice's selected member is its index in the whole population: "member 2 of 1" misread."""
  members = [{"member": 2, "valid_nll": 99.5, "test_nll": 98.25}]
  results = {"members": members, "selected_member": 2, "valid_nll": 99.5, "test_nll": 98.25}
  for shard, expected in (
    ([2, 3], "selected member 2 of 3, slice 2 of 3 holds 2-2: valid_nll 99.5, test_nll 98.25"),
    ([0, 1], "selected member 2 of 3: valid_nll 99.5, test_nll 98.25"),
  ):
    (tmp_path / "results.json").write_text(
      json.dumps({**results, "population_size": 3, "shard": shard})
    )
    assert launch._results_line(tmp_path) == expected
  (tmp_path / "results.json").write_text(json.dumps({**results, "selected_member": None}))
  assert launch._results_line(tmp_path).startswith("no member selected: ")
