"""scripts/common.py: the scripts refuse a bad flag value up front, in absl's one line naming
the flag and what it accepts (no traceback, no row or figure made of the bad value)."""

import subprocess

import pytest

from tests.cli import ROOT, script_command


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
    ("bench_vae.py", "--models=foo", "list of concrete, relu_mlp, two_layer"),
    ("bench_vae.py", "--estimators=foo", "unknown estimator 'foo'; valid names: st, st_gs"),
    ("bench_vae.py", "--estimators=st_gs@hot", "'st_gs@hot': after '@' a number >= 1e-06"),
    ("bench_vae.py", "--estimators=foo@0.5", "unknown estimator 'foo'"),
    ("bench_population.py", "--estimators=st_gs@0.5", "after '@' no temperature here"),
  ],
)
def test_a_bad_flag_is_one_line_before_any_work(tmp_path, script, flag, expected):
  required = {}.get(script, [])
  result = subprocess.run(
    [*script_command(script), *required, flag],
    cwd=ROOT,
    capture_output=True,
    text=True,
    timeout=300,
  )
  assert result.returncode != 0 and "Traceback" not in result.stderr
  refusal = next(line for line in result.stderr.splitlines() if "Flags parsing error" in line)
  assert f"flag {flag.split('=')[0]}=" in refusal and expected in refusal, refusal
  assert not list(tmp_path.iterdir())  # nothing made
