"""How the grid and reproduction scripts start a run: ``python -m experiments.main`` in its workdir."""

import pathlib
import subprocess
import sys


def train(config: str, workdir: pathlib.Path, overrides: list[str]) -> None:
  """Trains, resumes or extends (num_steps grown) the run in ``workdir``; its output goes to log.txt.

  A run that already finished with this config is not redone: experiments.main
  only reads its results.
  """
  workdir.mkdir(parents=True, exist_ok=True)
  command = [sys.executable, "-m", "experiments.main", f"--config={config}", f"--workdir={workdir}"]
  command += [f"--config.{o}" for o in overrides]
  with open(workdir / "log.txt", "a") as log:
    subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, check=True)
