"""Runs the real CLI (python -m experiments.main) in a subprocess, for tests."""

import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]


def main_command(config: str, workdir, *overrides: str) -> list[str]:
  """``python -m experiments.main`` with a config of the repository, a workdir and overrides."""
  command = [sys.executable, "-m", "experiments.main", f"--config={ROOT / config}"]
  return command + [f"--workdir={workdir}", *(f"--config.{o}" for o in overrides)]


def run_main(
  config: str, workdir, *overrides: str, check: bool = True
) -> subprocess.CompletedProcess:
  command = main_command(config, workdir, *overrides)
  result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=900)
  if check and result.returncode != 0:
    raise AssertionError(f"{' '.join(command)} failed:\n{result.stderr[-4000:]}")
  return result
