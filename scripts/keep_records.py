"""Copies the records of every finished run under ``--runs`` into ``--into``, a tracked folder.

A workdir under ``runs/`` lives on the machine that ran it (git ignores it); a
machine that comes back new has lost it, and with it the numbers the tables
were made from. The records the table scripts read (config.json,
results.json, metrics.jsonl, summary.md: tens of kB a run, no checkpoints) are
copied, in the same layout, so that ``scripts/leaderboard.py`` and
``scripts/depth_vae.py --run=false`` regenerate their tables on any clone:

  python scripts/keep_records.py --runs=runs/field --into=records/field
  python scripts/leaderboard.py --runs=records/field ...

A run is finished when its workdir holds results.json; unfinished ones are
left alone, and a record already kept is replaced by the run's newer one.
"""

import pathlib

import launch
from absl import app, flags

_RUNS = flags.DEFINE_string("runs", None, "A directory of run workdirs (any depth).", required=True)
_INTO = flags.DEFINE_string("into", None, "The tracked directory to copy into.", required=True)


def main(argv):
  del argv
  kept = launch.keep_records(pathlib.Path(_RUNS.value), pathlib.Path(_INTO.value))
  print(f"kept the records of {len(kept)} finished runs in {_INTO.value}")
  for workdir in kept:
    print(f"  {workdir}")


if __name__ == "__main__":
  app.run(main)
