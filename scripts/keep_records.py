"""Copies the records of every finished run under ``--runs`` into ``--into``, a tracked folder.

A workdir under ``runs/`` lives on the machine that trained it; its records
(config.json, results.json, metrics.jsonl, summary.md: tens of kB a run, no
checkpoints) are copied in the same layout, so that the studies regenerate
their tables on any clone (a study keeps its arms' records itself as each
finishes; this is for runs trained outside a study). Kept records are never
replaced by a shorter, smaller or older run, nor by damaged results
(experiments/studies/records.py):

  python -m scripts.keep_records --runs=runs/field --into=records/field
"""

import pathlib
import sys

from absl import app, flags

from experiments.studies import records

_RUNS = flags.DEFINE_string("runs", None, "A directory of run workdirs (any depth).", required=True)
_INTO = flags.DEFINE_string("into", None, "The tracked directory to copy into.", required=True)


def main(argv):
  del argv
  try:
    kept = records.keep_all(pathlib.Path(_RUNS.value), pathlib.Path(_INTO.value))
  except records.RecordError as e:
    sys.exit(f"error: {e}")
  print(f"kept the records of {len(kept)} finished runs in {_INTO.value}")
  for workdir in kept:
    print(f"  {workdir}")


if __name__ == "__main__":
  app.run(main)
