"""Runs the real CLI (python -m experiments.main) in a subprocess, for tests."""

import pathlib
import shutil
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]


def script_command(name: str) -> list[str]:
  """``python -m scripts.NAME`` (run it with ``cwd=ROOT``): a program of scripts/."""
  return [sys.executable, "-m", f"scripts.{name.removesuffix('.py')}"]


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


def copy_of_the_code(directory: pathlib.Path) -> pathlib.Path:
  """A copy of the code (gr_jax/, experiments/, configs/) outside the clone: the same sources,
  no git commit. Run the CLI in it with ``cwd=`` the copy."""
  for package in ("gr_jax", "experiments", "configs"):
    shutil.copytree(
      ROOT / package, directory / package, ignore=shutil.ignore_patterns("__pycache__")
    )
  return directory


def edited_copy_of_the_code(directory: pathlib.Path) -> pathlib.Path:
  """A copy of the code whose sources differ from the clone's by one comment: "other code" for
  provenance checks."""
  copy_of_the_code(directory)
  with open(directory / "gr_jax" / "__init__.py", "a") as source:
    source.write("# an edit\n")
  return directory
