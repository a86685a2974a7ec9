"""How a study starts an arm's population: ``python -m experiments.main`` in its workdir.

A run that finished with its config is not redone (experiments.main only reads
its results), an interrupted one resumes from its checkpoint, and one whose
records are kept (``records``) while its workdir holds nothing of a run is read
from them instead of retrained.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import signal
import subprocess
import sys
import threading
import time

from absl import flags
from ml_collections import config_flags

from experiments import config_checks, passed_on_signals, reporting
from experiments.studies import records as records_lib
from experiments.studies import tables

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
_ROOT = pathlib.Path(__file__).resolve().parents[2]


_NO_OUTPUT = "no output"


class LaunchError(Exception):
  """A run could not be started, or stopped with an error; the message is one line."""


class Interrupted(LaunchError):
  """The run stopped on the stop signal ``signum`` passed on to it (it saved what it had)."""

  def __init__(self, message: str, signum: int):
    super().__init__(message)
    self.signum = signum


def load_config(config: str, overrides: list[str]):
  """The ConfigDict ``--config=config --config.o ...`` gives experiments.main (absl's parsing);
  a bad file, argument or override is one LaunchError line."""
  if not pathlib.Path(config.split(":", 1)[0]).is_file():
    raise LaunchError(f"--config={config}: no such config file")
  values, argv = flags.FlagValues(), ["study", f"--config={config}"]
  argv += [f"--config.{o}" for o in overrides]
  config_flags.DEFINE_config_file("config", None, "", flag_values=values, sys_argv=argv)
  try:
    values(argv)
    values.config.get("experiment")  # a file that failed to load raises here
    return values.config
  except (flags.Error, ImportError, OSError, TypeError, ValueError, AttributeError, KeyError) as e:
    if isinstance(e, (KeyError, AttributeError)):  # ml_collections: no such field
      named, hint = str(e).partition("Did you mean")[0], re.search(r'mean "([\w.]+)"', str(e))
      fields = [o.split("=")[0] for o in reversed(overrides)]
      field = next((f for f in fields if f.split(".")[-1] in named), "?")
      raise LaunchError(
        f"--config.{field}: the config {config} has no field {field!r}"
        + (f"; did you mean {hint[1]}?" if hint else "")
      ) from None
    raise LaunchError(config_checks.flag_error_line(e)) from None


def _restore_records(records: pathlib.Path, workdir: pathlib.Path, steps: int | None) -> bool:
  """Copies a finished run's kept records into ``workdir`` when it holds nothing of a run yet;
  returns whether it did. Records that cannot serve (damaged, another length) are announced:
  the run trains from step 0, since records hold no checkpoint."""
  if not (records / "results.json").is_file() or records.resolve() == workdir.resolve():
    return False
  if any((workdir / n).exists() for n in (*records_lib.RECORD_FILES, "checkpoints")):
    return False  # the workdir's own run (finished, or to resume) comes first
  try:
    kept_steps = json.loads((records / "results.json").read_text()).get("steps")
  except (OSError, ValueError, AttributeError):
    print(
      f"{workdir}: the records in {records} have a damaged results.json: training from step 0"
      " (records hold no checkpoint)",
      flush=True,
    )
    return False
  if steps is not None and kept_steps != steps:
    print(
      f"{workdir}: the records in {records} are of {kept_steps} steps and this arm asks for"
      f" {steps}: training from step 0 (records hold no checkpoint)",
      flush=True,
    )
    return False
  records_lib.copy_records(records, workdir)
  print(f"{workdir}: a finished run's records copied from {records}", flush=True)
  return True


def _copy_output(stream, log, last: list[str]) -> None:
  """Copies the run's output into its log, keeping its own last non-empty line."""
  for line in stream:
    log.write(line)
    log.flush()
    if line.strip():
      last[0] = line.rstrip("\n")


def train(
  config: str, workdir: pathlib.Path, overrides: list[str], records: pathlib.Path | None = None
) -> None:
  """Trains, resumes or extends (num_steps grown) the run in ``workdir``; its output goes to
  ``log.txt``. With ``records`` (a directory), the finished run's records are kept there.

  SIGINT / SIGTERM received meanwhile (in the main thread) are passed on to the
  run, which saves a checkpoint and stops, and waited for: :class:`Interrupted`
  when it stopped on one of them. A run that fails otherwise raises LaunchError;
  both quote the run's own last line.
  """
  steps = load_config(config, overrides).get("num_steps")  # None for an epochs experiment
  workdir.mkdir(parents=True, exist_ok=True)
  restored = records is not None and _restore_records(records, workdir, steps)
  action = "reading the copied run" if restored else "training"
  print(f"{workdir}: {action} (progress in {workdir / 'log.txt'}) ...", flush=True)
  start = time.perf_counter()
  # -P: the working directory is not put first on sys.path, so the run imports this clone's
  # gr_jax/, experiments/ and configs/ (PYTHONPATH below) even when started from another checkout.
  command = [sys.executable, "-P", "-m", "experiments.main"]
  command += [f"--config={config}", f"--workdir={workdir}", *(f"--config.{o}" for o in overrides)]
  path = os.pathsep.join(filter(None, [str(_ROOT), os.environ.get("PYTHONPATH")]))
  last = [_NO_OUTPUT]
  # The handlers first: a stop signal from here on reaches the run, also one that comes while the
  # run's process is being started (sent to it once it exists); none leaves an orphan training.
  with passed_on_signals.PassOn({s: s for s in STOP_SIGNALS}) as pass_on:
    with open(workdir / "log.txt", "a") as log:
      process = pass_on.start(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
        env={**os.environ, "PYTHONPATH": path},
      )
      copier = threading.Thread(target=_copy_output, args=(process.stdout, log, last), daemon=True)
      copier.start()
      code = process.wait()
      copier.join()
  received = pass_on.received
  # A run that a passed-on stop signal ended exits 128 + signum (its own handling), -signum (before
  # its interpreter handled signals) or 1 with Python's own KeyboardInterrupt (while the interpreter
  # itself started): stopped by the signal, whichever it is.
  if code and received:
    name = signal.Signals(received[0]).name
    said = last[0] if last[0] != _NO_OUTPUT else f"{name} before it wrote anything"
    # Its advice to run its command again is left out: the study's own line says what to run.
    said = re.sub(r"[.;,]?\s*run the same command again[^.;]*\.?$", "", said, flags=re.I)
    raise Interrupted(f"the run in {workdir} stopped: {said.rstrip('.')}", received[0])
  if code:
    raise LaunchError(
      f"the run in {workdir} stopped (exit {code}): {last[0]} (its log: {workdir / 'log.txt'})"
      + (
        f"; its config.json and results.json were copied from {records}: to train this config"
        f" instead, delete {workdir} and give another --records"
        if restored
        else ""
      )
    )
  print(
    f"{workdir}: done in {tables.duration(time.perf_counter() - start)}; {_results_line(workdir)}",
    flush=True,
  )
  if records is not None:
    records_lib.keep(workdir, records)


# The selected member's numbers that a progress line shows, when results.json has them.
_SHOWN = ("valid_nll", "test_nll", "valid_accuracy", "test_accuracy")


def _results_line(workdir: pathlib.Path) -> str:
  try:
    results = json.loads((workdir / "results.json").read_text())
  except (OSError, ValueError):
    return "no results.json"
  shown = [f"{name} {tables.significant(results[name])}" for name in _SHOWN if name in results]
  selected = (
    "no member selected"
    if results.get("selected_member") is None
    else f"selected {reporting.selected_member_phrase(results)}"
  )
  return f"{selected}: " + (", ".join(shown) or "-")
