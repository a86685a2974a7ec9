"""How the grid and reproduction scripts start a run: ``python -m experiments.main``."""

import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import threading
import time

import formatting
from absl import flags

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
_ROOT = pathlib.Path(__file__).resolve().parents[1]


def train(
  config: str, workdir: pathlib.Path, overrides: list[str], records: pathlib.Path | None = None
) -> None:
  """Trains, resumes or extends (num_steps grown) the run in ``workdir``; its output goes to
  log.txt. With ``records`` (a directory), the finished run's records are kept there.

  A run that already finished with this config is not redone: experiments.main
  only reads its results. Neither is one whose ``records`` (the directory
  keep_records fills for it) hold a finished results.json while ``workdir``
  holds no run: the records are copied into ``workdir`` first, so a fresh
  clone reads the kept populations instead of retraining them, and
  experiments.main checks that they were trained with this config (and
  retrains, from step 0, one that must run longer: records hold no
  checkpoint). SIGINT / SIGTERM received meanwhile (in the main
  thread) are passed on to the run, which saves a checkpoint and stops, and
  waited for: no run is left behind as an orphan. A run that fails or is
  stopped ends this program with one line: the run's own last line.
  """
  workdir.mkdir(parents=True, exist_ok=True)
  restored = records is not None and _restore_records(records, workdir)
  start = time.perf_counter()
  action = "checking the copied run" if restored else "training"
  print(f"{workdir}: {action} (progress in {workdir / 'log.txt'}) ...", flush=True)
  # -P: the working directory is not put first on sys.path, so the run imports
  # this clone's gr_jax/, experiments/ and configs/ (PYTHONPATH below) even when
  # started from inside another checkout.
  command = [sys.executable, "-P", "-m", "experiments.main"]
  command += [f"--config={config}", f"--workdir={workdir}", *(f"--config.{o}" for o in overrides)]
  with open(workdir / "log.txt", "a") as log:
    # The clone's experiments/ and configs/ (pip installs the gr_jax library only).
    path = os.pathsep.join(filter(None, [str(_ROOT), os.environ.get("PYTHONPATH")]))
    process = subprocess.Popen(
      command, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONPATH": path}
    )
    previous = {}
    if threading.current_thread() is threading.main_thread():
      previous = {
        s: signal.signal(s, lambda signum, frame: process.send_signal(signum)) for s in STOP_SIGNALS
      }
    try:
      code = process.wait()
    finally:
      for stop_signal, handler in previous.items():
        signal.signal(stop_signal, handler)
  if code:
    lines = (workdir / "log.txt").read_text(errors="replace").strip().splitlines()
    raise SystemExit(
      f"error: the run in {workdir} stopped (exit {code}): {lines[-1] if lines else 'no output'}"
      f" (its log: {workdir / 'log.txt'})"
      + (
        f"; its config.json and results.json were copied from {records}: to train this config"
        f" instead, delete {workdir} and give another --records"
        if restored
        else ""
      )
    )
  print(
    f"{workdir}: done in {formatting.duration(time.perf_counter() - start)};"
    f" {_results_line(workdir)}",
    flush=True,
  )
  if records is not None:
    keep_records(workdir, records)


def define_records_flag(example: str) -> flags.FlagHolder:
  """The drivers' ``--records`` flag; ``example`` names the tracked directory a driver uses."""
  return flags.DEFINE_string(
    "records",
    "",
    f"A tracked directory (e.g. {example}) that keeps each finished run's records as it finishes"
    " (scripts/keep_records.py), so that the tables regenerate on any clone; a run whose records"
    " hold a finished results.json and whose workdir is empty is read from them (copied into"
    " --out), not retrained.",
  )


def records_for(records: str, out: pathlib.Path, workdir: pathlib.Path) -> pathlib.Path | None:
  """Where ``--records=records`` keeps the run in ``workdir``: at its place below ``out``."""
  return pathlib.Path(records) / workdir.relative_to(out) if records else None


# The selected member's numbers that a progress line shows, when results.json has them.
_SHOWN = ("valid_nll", "test_nll", "valid_accuracy", "test_accuracy")


def _results_line(workdir: pathlib.Path) -> str:
  try:
    results = json.loads((workdir / "results.json").read_text())
  except (OSError, ValueError):
    return "no results.json"
  shown = [f"{name} {formatting.significant(results[name])}" for name in _SHOWN if name in results]
  members = len(results.get("members", []))
  return f"selected member {results.get('selected_member')} of {members}: " + (
    ", ".join(shown) or "-"
  )


# What the table scripts read of a run; scripts/keep_records.py says why they are kept.
RECORDS = ("config.json", "results.json", "metrics.jsonl", "summary.md")


def _restore_records(records: pathlib.Path, workdir: pathlib.Path) -> bool:
  """Copies a finished run's kept records into ``workdir`` when it holds nothing of a run yet;
  returns whether it did."""
  if not (records / "results.json").is_file() or records.resolve() == workdir.resolve():
    return False
  if any((workdir / name).exists() for name in (*RECORDS, "checkpoints")):
    return False  # the workdir's own run (finished, or to resume) comes first
  _copy_records(records, workdir)
  print(f"{workdir}: a finished run's records copied from {records}", flush=True)
  return True


def keep_records(runs: pathlib.Path, into: pathlib.Path) -> list[pathlib.Path]:
  """Copies each finished run's records from ``runs`` to ``into``; returns the workdirs kept."""
  if not runs.is_dir():
    raise SystemExit(f"error: {runs} is not a directory: no runs to keep.")
  kept = []
  for results in sorted(runs.rglob("results.json")):
    workdir = results.parent
    target = into / workdir.relative_to(runs)
    if target.resolve() == workdir.resolve():  # --records naming the runs themselves
      continue
    target.mkdir(parents=True, exist_ok=True)
    _copy_records(workdir, target)
    kept.append(workdir)
  return kept


def _copy_records(source: pathlib.Path, target: pathlib.Path) -> None:
  for name in RECORDS:
    if (source / name).is_file():
      shutil.copyfile(source / name, target / name)
