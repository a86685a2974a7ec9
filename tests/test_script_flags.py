"""scripts/flag_checks.py: the scripts refuse a bad flag value up front, in absl's one line naming
the flag and what it accepts (no traceback, no row or figure made of the bad value)."""

import subprocess
import sys

import pytest

from tests.cli import ROOT


@pytest.mark.parametrize(
  "script, flag, expected",
  [
    ("bench_population.py", "--modes=foo", "list of vmap, map"),
    ("bench_population.py", "--experiments=foo", "list of vae, listops"),
    ("bench_population.py", "--sizes=0", "list of ints >= 1"),
    ("bench_estimators.py", "--batch_sizes=abc", "list of ints >= 1"),
    ("bench_estimators.py", "--ks=-1", "list of ints >= 1"),
    ("compare_estimators.py", "--draws=0", "must be >= 2"),
    ("compare_estimators.py", "--taus=abc", "list of numbers >= 1e-06"),
    ("figure_2b.py", "--figure_taus=x", "list of numbers >= 1e-06"),
    ("reproduce.py", "--lengths=7", "list of 10, 25, 50"),
    ("reproduce.py", "--seeds=0", "must be >= 1"),
    ("reproduce.py", "--learning_rates=0.1,x", "'paper' or a comma-separated list of numbers"),
    ("run_grid.py", "--sweep=bad", "each --sweep must be FIELD=VALUE1,VALUE2,..."),
    ("bench_vae.py", "--models=foo", "list of concrete, relu_mlp, two_layer"),
    ("bench_vae.py", "--estimators=foo", "unknown estimator 'foo'; valid names: st, st_gs"),
    ("reproduce.py", "--estimators=gr_mcx", "unknown estimator 'gr_mcx'"),
  ],
)
def test_a_bad_flag_is_one_line_before_any_work(tmp_path, script, flag, expected):
  required = {
    "reproduce.py": ["--table=1", f"--out={tmp_path}"],
    "run_grid.py": ["--config=configs/vae_16ary.py", f"--out={tmp_path}"],
  }.get(script, [])
  result = subprocess.run(
    [sys.executable, str(ROOT / "scripts" / script), *required, flag],
    cwd=ROOT,
    capture_output=True,
    text=True,
    timeout=300,
  )
  assert result.returncode != 0 and "Traceback" not in result.stderr
  refusal = next(line for line in result.stderr.splitlines() if "Flags parsing error" in line)
  assert f"flag {flag.split('=')[0]}=" in refusal and expected in refusal, refusal
  assert not list(tmp_path.iterdir())  # nothing made


def test_reproduce_refuses_an_out_it_cannot_make_in_one_line(tmp_path):
  blocker = tmp_path / "file"
  blocker.write_text("")
  result = subprocess.run(
    [sys.executable, str(ROOT / "scripts" / "reproduce.py"), "--table=2", f"--out={blocker}/out"],
    cwd=ROOT,
    capture_output=True,
    text=True,
    timeout=300,
  )
  assert result.returncode != 0 and "Traceback" not in result.stderr
  assert (
    result.stderr.strip()
    .splitlines()[-1]
    .startswith(f"error: --out={blocker}/out cannot be made a directory (")
  )
