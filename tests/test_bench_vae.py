"""scripts/bench_vae.py on the categorical track: the exact row is timed where C ** L can be
enumerated (8x4) and skipped, with a line, where it cannot (16x12)."""

import json
import subprocess

from tests.cli import ROOT, script_command


def test_the_exact_row_is_timed_on_8x4_and_skipped_on_16x12(tmp_path):
  out = tmp_path / "bench.json"
  done = subprocess.run(
    script_command("bench_vae")
    + ["--models=categorical_8x4,categorical_16x12", "--estimators=st_gs,exact"]
    + ["--batch_sizes=2", "--repeats=1", "--eval_images=0", f"--out={out}"],
    cwd=ROOT,
    capture_output=True,
    text=True,
    timeout=900,
  )
  assert done.returncode == 0, done.stderr[-3000:]
  rows = {(row["model"], row["row"]): row["ms"] for row in json.loads(out.read_text())}
  assert set(rows) == {
    ("categorical_8x4", "B=2 st_gs"),
    ("categorical_8x4", "B=2 exact"),
    ("categorical_16x12", "B=2 st_gs"),
  }
  assert all(ms > 0 for ms in rows.values())
  assert "B=2 exact: skipped (an exact row needs the categorical VAE at C ** L <= 16384)" in (
    done.stdout
  )
  assert "  B=2 exact: " in done.stdout.split("categorical_8x4: each estimator / ST-GS")[1]
