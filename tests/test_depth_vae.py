"""scripts/depth_vae.py end to end on tiny synthetic runs: its tables against the runs' files."""

import json
import statistics
import subprocess
import sys

import pytest

from tests.cli import ROOT

pytestmark = pytest.mark.slow  # trains four tiny populations through the CLI


def _spread(values):
  return f"{statistics.mean(values):.2f} ± {statistics.stdev(values):.2f}"


def test_one_layer_against_two_paired_by_seed_with_the_bound_ladder(tmp_path):
  out = tmp_path / "depth"
  tiny = [
    "dataset=synthetic",
    "num_eval_examples=20",
    "eval_batch_size=10",
    "iwae_chunk_size=100",
    "variance_draws=4",
    "steps_per_call=2",
    "checkpoint_every=2",
  ]
  command = [
    sys.executable,
    "scripts/depth_vae.py",
    f"--out={out}",
    "--arities=16",
    "--estimators=st_gs,gr_mc10",
    "--taus=0.64,0.25",
    "--seeds=0,1",
    "--steps=4",
    "--variance_every=2",
    "--ladder",
    f"--records={tmp_path / 'records'}",
    *[f"--set={s}" for s in tiny],
  ]
  subprocess.run(command, cwd=ROOT, check=True, capture_output=True, text=True, timeout=1200)
  results = {
    (depth, estimator): {
      (m["tau"], m["seed"]): m
      for m in json.loads((out / "16ary" / depth / estimator / "results.json").read_text())[
        "members"
      ]
    }
    for depth in ("one_layer", "two_layer")
    for estimator in ("st_gs", "gr_mc10")
  }
  table = (out / "depth.md").read_text()
  # The paired table's reference is the first of --estimators, named in its header.
  assert "| estimator - st_gs (paired) | below st_gs |" in table
  for tau in (0.64, 0.25):
    one, two = results["one_layer", "st_gs"], results["two_layer", "st_gs"]
    tests = [[m[tau, s]["test_nll"] for s in (0, 1)] for m in (one, two)]
    paired = [b - a for a, b in zip(*tests)]
    assert (
      f"| 16 | {tau} | st_gs | {_spread(tests[0])} | {_spread(tests[1])} | {_spread(paired)} |"
      in table
    )
    # GR-MC10 against ST-GS at each depth, seed by seed.
    for depth in ("one_layer", "two_layer"):
      gr, st = results[depth, "gr_mc10"], results[depth, "st_gs"]
      against = [gr[tau, s]["test_nll"] - st[tau, s]["test_nll"] for s in (0, 1)]
      below = sum(d < 0 for d in against)
      assert f"| {_spread(against)} | {below} of 2 |" in table
  # The two-layer model's variance rows name each layer's network apart.
  assert "| 16 | 0.25 | two_layer | gr_mc10 | layer2 |" in table
  # The ladder: its M = 1000 rung is the run's own bound, and the ELBO lies below every IWAE bound
  # (a gap of several nats on a barely trained model: far beyond the 20-draw mean's noise).
  saved = json.loads((out / "depth.json").read_text())["runs"]
  for key, members in saved.items():
    for member in members:
      rungs = {int(m): value for m, value in member["ladder"].items()}
      assert rungs[1000] == member["test_nll"], key
      assert rungs[1] > rungs[10] > rungs[1000], (key, rungs)
  one = results["one_layer", "st_gs"]
  elbo = [
    next(m for m in saved["16/one_layer/st_gs"] if m["seed"] == s and m["tau"] == 0.64)["ladder"][
      "1"
    ]
    for s in (0, 1)
  ]
  assert f"| 16 | 0.64 | one_layer | st_gs | {_spread(elbo)} |" in table
  assert f"| {_spread([one[0.64, s]['test_nll'] for s in (0, 1)])} |" in table
  # The records kept as each run finished (no checkpoints) tabulate the same bounds elsewhere.
  again = [c for c in command if not c.startswith(("--out", "--ladder", "--records"))]
  again += [f"--out={tmp_path / 'records'}", "--run=false"]
  subprocess.run(again, cwd=ROOT, check=True, capture_output=True, text=True, timeout=600)
  assert not list((tmp_path / "records").rglob("checkpoints"))
  kept = (tmp_path / "records" / "depth.md").read_text().strip()
  assert kept.split("\n\n")[:6] == table.split("\n\n")[:6]  # bounds, paired, variances
