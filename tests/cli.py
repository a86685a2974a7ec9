"""Runs the real CLI (python -m experiments.main) in a subprocess, for tests."""

import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]


def run_main(
  config: str, workdir, *overrides: str, check: bool = True
) -> subprocess.CompletedProcess:
  command = [
    sys.executable,
    "-m",
    "experiments.main",
    f"--config={ROOT / config}",
    f"--workdir={workdir}",
  ]
  command += [f"--config.{o}" for o in overrides]
  result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=900)
  if check and result.returncode != 0:
    raise AssertionError(f"{' '.join(command)} failed:\n{result.stderr[-4000:]}")
  return result
