"""How the grid and reproduction scripts start a run: ``python -m experiments.main`` in its workdir."""

import pathlib
import subprocess
import sys


def train_unless_finished(config: str, workdir: pathlib.Path, overrides: list[str]) -> None:
  """Trains (or resumes) the run in ``workdir`` unless it wrote results.json; its output goes to log.txt."""
  if (workdir / "results.json").exists():
    return
  workdir.mkdir(parents=True, exist_ok=True)
  command = [sys.executable, "-m", "experiments.main", f"--config={config}", f"--workdir={workdir}"]
  command += [f"--config.{o}" for o in overrides]
  with open(workdir / "log.txt", "a") as log:
    subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, check=True)
