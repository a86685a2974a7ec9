"""scripts/residual_table.py: the paired account read from synthetic ablation_vae.py runs."""

import json
import shutil
import subprocess
import sys

import pytest

from tests.cli import ROOT

sys.path.insert(0, str(ROOT / "scripts"))
import residual_table  # noqa: E402  (a script, imported for its helpers)

# Bounds (valid at step 50, valid / test at step 100) by arm and seed; the account's values below
# are worked out by hand from them.
_BOUNDS = {
  "default": {0: (110.0, 107.0, 108.0), 1: (112.0, 108.0, 109.0), 2: (111.0, 107.5, 108.5)},
  "wide": {0: (109.0, 105.0, 107.0), 1: (110.0, 106.0, 107.0), 2: (110.0, 106.5, 107.5)},
}


def _write_arm(workdir, seeds, steps=100, midpoint=50):
  """A finished population of ``seeds`` as experiments.main leaves it (the files read here)."""
  workdir.mkdir(parents=True)
  arm = workdir.name
  members = [
    {"member": i, "seed": s, "valid_nll": _BOUNDS[arm][s][1], "test_nll": _BOUNDS[arm][s][2]}
    for i, s in enumerate(seeds)
  ]
  (workdir / "results.json").write_text(json.dumps({"steps": steps, "members": members}))
  records = [
    {"step": midpoint, "split": "train", "member": i, "bound": -130.0} for i in range(len(seeds))
  ]
  records += [
    {"step": midpoint, "split": "valid", "member": i, "nll": _BOUNDS[arm][s][0]}
    for i, s in enumerate(seeds)
  ]
  records += [
    {"step": steps, "split": "valid", "member": i, "final": True, "nll": _BOUNDS[arm][s][1]}
    for i, s in enumerate(seeds)
  ]
  (workdir / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))


@pytest.fixture
def split_runs(tmp_path):
  """Seed 0 in one --out, seeds 1-2 in another, as the GR-MC100 account was run."""
  alone, rest = tmp_path / "alone" / "setting", tmp_path / "rest" / "setting"
  for arm in _BOUNDS:
    _write_arm(alone / arm, [0])
    _write_arm(rest / arm, [1, 2])
  return [alone, rest]


def test_account_pairs_seeds_across_directories(split_runs):
  steps, arms = residual_table.collect(split_runs, midpoint=50)
  assert steps == 100 and sorted(arms["wide"]) == [0, 1, 2]
  rows = dict(
    line.rsplit(" | ", 1)
    for line in residual_table.table(steps, arms, "default", 50)
    if " | " in line
  )
  # wide - default at step 50: -1, -2, -1 -> mean -1.33, sample std 0.58.
  assert rows["| wide − default, at 50 steps"] == "-1.33 ± 0.58 |"
  # default, step 100 - step 50: -3, -4, -3.5 -> -3.50 ± 0.50.
  assert rows["| default: 100 − 50 steps"] == "-3.50 ± 0.50 |"
  # wide at 100 - default at 50: -5, -6, -4.5 -> -5.17 ± 0.76.
  assert rows["| together: wide at 100 − default at 50"] == "-5.17 ± 0.76 |"
  # test, wide - default: -1, -2, -1 -> -1.33 ± 0.58.
  assert (
    rows["| wide | 3 seeds | 109.67 ± 0.58 | 105.83 ± 0.76 | 107.17 ± 0.29"] == "-1.33 ± 0.58 |"
  )


def _unfinished(runs):
  (runs[1] / "wide" / "results.json").unlink()
  return runs


def _seed_twice(runs):
  _write_arm(runs[0].parent / "again" / "wide", [2])
  return [*runs, runs[0].parent / "again"]


def _no_midpoint(runs):
  (runs[1] / "wide" / "metrics.jsonl").write_text("")
  return runs


def _unpaired(runs):
  shutil.rmtree(runs[1] / "wide")
  _write_arm(runs[1] / "wide", [1])
  return runs


@pytest.mark.parametrize(
  "damage,message",
  [
    (_unfinished, "no results.json"),
    (_seed_twice, "seed 2 of arm wide appears twice"),
    (_no_midpoint, "no validation bound at step 50"),
    (_unpaired, "the arms hold different seeds, so they do not pair up"),
  ],
)
def test_runs_that_do_not_pair_up_are_refused(split_runs, damage, message):
  with pytest.raises(residual_table.TableError, match=message):
    residual_table.collect(damage(split_runs), midpoint=50)


def test_cli_prints_the_table_and_refuses_a_midpoint_past_the_end(split_runs):
  command = [sys.executable, str(ROOT / "scripts" / "residual_table.py"), "--reference=default"]
  printed = subprocess.run(
    [*command, "--midpoint=50", *map(str, split_runs)], capture_output=True, text=True, check=True
  )
  assert "| together: wide at 100 − default at 50 | -5.17 ± 0.76 |" in printed.stdout
  refused = subprocess.run(
    [*command, "--midpoint=100", *map(str, split_runs)], capture_output=True, text=True
  )
  assert refused.returncode == 1
  assert "--midpoint=100: must lie strictly between 0 and the 100 steps" in refused.stderr
