"""A run's workdir: its config (checked on restart), locks, atomic writes and the finished run's
results.

A workdir holds ``config.json`` (and ``config.backup.json``), ``metrics.jsonl``,
TensorBoard events, ``checkpoints/`` (:mod:`experiments.checkpoints`) and, at
the end, ``results.json``.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import math
import os
import pathlib
import socket
from typing import Any, Mapping

import jax
import numpy as np
from absl import logging
from jax.experimental import multihost_utils
from ml_collections import ConfigDict

from experiments.config_checks import ConfigError


@contextlib.contextmanager
def atomic_path(path: pathlib.Path):
  """Yields a temporary path beside ``path``; renames it onto ``path`` if the block succeeds.

  A reader, or a crash, never sees a partial file: the rename is atomic. The
  temporary name keeps the suffix (``x.tmp.npz`` for ``x.npz``) for writers
  such as np.savez that add one.
  """
  tmp = path.with_name(f"{path.stem}.tmp{path.suffix}")
  try:
    yield tmp
    os.replace(tmp, path)
  finally:
    tmp.unlink(missing_ok=True)


def is_full_disk(error: BaseException | None) -> bool:
  """Whether ``error`` is the OSError of a full disk (ENOSPC)."""
  return isinstance(error, OSError) and error.errno == errno.ENOSPC


def is_writer() -> bool:
  """Whether this process writes the workdir's files: in a multi-process job, process 0 alone."""
  return jax.process_index() == 0


def write_text_atomic(path: pathlib.Path, text: str) -> None:
  """Writes ``path`` atomically (see atomic_path); in a multi-process job only process 0 writes."""
  if not is_writer():
    return
  with atomic_path(path) as tmp:
    tmp.write_text(text)


def strict_json(obj: Any) -> Any:
  """``obj`` with every non-finite float (a diverged member's metric) as None: JSON null, not a bare
  NaN that strict parsers reject. (Files written before this, with NaN, still read: Python's json
  takes it.)"""
  if isinstance(obj, float):
    return obj if math.isfinite(obj) else None
  if isinstance(obj, dict):
    return {k: strict_json(v) for k, v in obj.items()}
  if isinstance(obj, (list, tuple)):
    return [strict_json(v) for v in obj]
  return obj


def write_json_atomic(path: pathlib.Path, obj: Any) -> None:
  """Writes strict JSON so that a reader (or a crash) never sees a partial file."""
  write_text_atomic(
    path, json.dumps(strict_json(obj), indent=2, sort_keys=True, allow_nan=False) + "\n"
  )


# Config fields any experiment's restart may change: they affect logging and checkpoint
# intervals, not the trained model; each experiment adds its own (its SAFE_TO_CHANGE).
# num_steps and num_epochs may only grow (training continues); every other field defines the run.
SAFE_TO_CHANGE = frozenset(
  {
    "log_every",
    "checkpoint_every",
    "steps_per_call",
    # Where the data was found (config.json's "data_used", a record, not a setting).
    "data_used.train",
    "data_used.valid",
    "data_used.test",
  }
)
MAY_GROW = ("num_steps", "num_epochs")


def _as_json(value: Any) -> Any:
  return json.loads(json.dumps(value))


def flatten(tree: dict, prefix: str = "") -> dict:
  """{"population": {"size": 1}} -> {"population.size": 1}."""
  flat = {}
  for key, value in tree.items():
    if isinstance(value, dict):
      flat.update(flatten(value, f"{prefix}{key}."))
    else:
      flat[f"{prefix}{key}"] = value
  return flat


def differing_fields(
  saved: Mapping[str, Any],
  new: Mapping[str, Any],
  safe_to_change: frozenset[str] = SAFE_TO_CHANGE,
  added_fields: Mapping[str, tuple] | None = None,
) -> list[str]:
  """The flattened fields whose values differ and define the run (sorted).

  A field of ``safe_to_change`` may differ; a field of ``added_fields`` that one
  side lacks matches the values listed for it (a config saved before the field
  existed trained what those values train).
  """
  added_fields = added_fields or {}
  differing = []
  for field in sorted(set(saved) | set(new)):
    if saved.get(field) == new.get(field) or field in safe_to_change:
      continue
    one_side = new if field in new else saved
    if field in added_fields and (field in saved) != (field in new):
      if one_side[field] in added_fields[field]:
        continue
    differing.append(field)
  return differing


_LOCKS: dict[pathlib.Path, Any] = {}


LOCK_FILE = ".lock"
_HOLDER_BYTES = 256  # process 0 tells the others who holds the lock in at most this many bytes


def lock_workdir(path: pathlib.Path) -> None:
  """Takes an exclusive lock on ``path/.lock`` for the rest of this process.

  The operating system releases it when the process ends, however it ends, so
  a lock left by a dead run never blocks. A second run on the same workdir is
  refused with one line. In a multi-process job, process 0 takes the lock for
  the job (one protocol for every kind of run: a single-process run and a job
  on one workdir exclude each other), and every process learns whether it got it.
  """
  path = path.resolve()
  if path in _LOCKS:
    return
  refused = None
  if is_writer():
    handle = open(path / LOCK_FILE, "a+")
    try:
      fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
      handle.seek(0)
      refused = handle.read().strip() or "another process"
      handle.close()
    else:
      handle.seek(0)
      handle.truncate()
      who = f" (process 0 of a {jax.process_count()}-process job)" * (jax.process_count() > 1)
      handle.write(f"pid {os.getpid()} on {socket.gethostname()}{who}")
      handle.flush()
      _LOCKS[path] = handle
  if jax.process_count() > 1:  # every process learns process 0's answer: who holds the lock
    text = (refused or "").encode()[: _HOLDER_BYTES - 1]
    message = np.zeros(_HOLDER_BYTES, np.int32)
    message[0], message[1 : 1 + len(text)] = len(text), list(text)
    message = np.asarray(multihost_utils.broadcast_one_to_all(message))
    refused = bytes(message[1 : 1 + message[0]].tolist()).decode(errors="replace") or None
  if refused:
    raise ConfigError(
      f"--workdir {path} is in use by another run ({refused}); wait for it to end or use another"
      " --workdir."
    )


def held_by(path: pathlib.Path) -> str | None:
  """Who holds ``path``'s lock (a run training in it now: "pid N on host"), or None."""
  try:
    handle = open(path / LOCK_FILE)
  except OSError:  # no lock file: no run ever held it, or one that ended normally
    return None
  with handle:
    try:
      fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
      return handle.read().strip() or "another process"
    fcntl.flock(handle, fcntl.LOCK_UN)
    return None


def require_workdir(marker: pathlib.Path, step: int) -> None:
  """Raises FileNotFoundError (one line) when the run's workdir was deleted, moved or replaced (by
  a file, or by another directory) while it trained: nothing more it writes could be found again.

  Args:
    marker: a file the run wrote in its workdir when it started (``code_segments.json``).
    step: the last step trained.
  """
  if not marker.is_file():
    raise FileNotFoundError(
      f"--workdir {marker.parent} was deleted, moved or replaced while the run trained (its"
      f" {marker.name} is gone); the run stopped after step {step}, saving nothing more. Start"
      " it again in a workdir that stays (a copy of the old one resumes from its last checkpoint)."
    )


def unlock_workdirs() -> None:
  """Removes the workdir locks this process took (a run that ended normally leaves no .lock)."""
  for path, handle in list(_LOCKS.items()):
    with contextlib.suppress(OSError):
      (path / LOCK_FILE).unlink()
    handle.close()
    del _LOCKS[path]


def _make_workdir(path: pathlib.Path) -> None:
  """Creates ``path`` (and its parents), or raises ConfigError in one line saying why it cannot be
  the workdir."""
  try:
    path.mkdir(parents=True, exist_ok=True)
  except FileExistsError:  # a file, or a symbolic link to nothing or to itself
    what = "a symbolic link that leads nowhere (or to itself)" if path.is_symlink() else "a file"
    raise ConfigError(
      f"--workdir {path} is {what}, not a directory: give another --workdir."
    ) from None
  except OSError as e:
    raise ConfigError(
      f"--workdir {path} cannot be created ({e.strerror}: {e.filename}): give a --workdir in a"
      " directory you can write (e.g. runs/NAME under the clone)."
    ) from None


def prepare_workdir(
  workdir: str,
  config: ConfigDict,
  safe_to_change: frozenset[str] = SAFE_TO_CHANGE,
  data_used: dict[str, str] | None = None,
  steps: int | None = None,
  evaluation_fields: tuple[str, ...] = (),
  added_fields: Mapping[str, tuple] | None = None,
) -> tuple[pathlib.Path, dict | None]:
  """Creates the workdir, or checks that the run it holds is this config's; writes config.json.

  ``safe_to_change``: the experiment's fields a restart may change;
  ``added_fields``: fields the experiment's config gained after the saved run
  (a field the saved config lacks matches the values listed for it). ``data_used``
  (split -> where its data was found) is recorded in config.json under
  "data_used". A run already finished at ``steps`` steps is only read:
  config.json stays the one its results.json was measured with (a changed
  field of ``evaluation_fields`` is named in a warning), and the workdir may be
  read-only.

  Returns:
    The workdir's path, and the finished run's results.json (None if the run
    has not finished ``steps`` steps).

  Raises:
    ConfigError: the workdir holds a run whose defining fields differ (one line
      naming each field, its saved and its new value).
  """
  path = pathlib.Path(workdir)
  _make_workdir(path)
  finished = None if steps is None else _finished_results(path, steps)
  if finished is None:
    lock_workdir(path)
  record = new = _as_json({**config.to_dict(), **({"data_used": data_used} if data_used else {})})
  saved = _saved_config(path)
  if saved is not None and saved.get("experiment") != new.get("experiment"):
    raise ConfigError(
      f"--workdir {path} holds a {saved.get('experiment')} run, and this config is a"
      f" {new.get('experiment')} run: use another --workdir."
    )
  if saved is not None:
    saved = flatten(saved)
    new = flatten(new)
    fields = differing_fields(saved, new, safe_to_change, added_fields)
    if "model" in fields:
      raise ConfigError(
        f"--workdir {path} holds a run of config.model={saved.get('model')!r}, and this config"
        f" trains model {new.get('model')!r}: use another --workdir (a run keeps its model)."
      )
    differing = [
      f"{field} (saved {saved.get(field)!r}, now {new.get(field)!r})"
      for field in fields
      if not (
        field in MAY_GROW
        and isinstance(saved.get(field), int)
        and new.get(field, -1) > saved[field]
      )
    ]
    if differing:
      raise ConfigError(
        f"--workdir {path} holds a run with another config: {'; '.join(differing)}. Use a new"
        " --workdir, or change only fields that are safe to change (logging and evaluation"
        " intervals, data paths; num_steps / num_epochs may grow)."
      )
  if finished is not None:
    unapplied = [
      f"{field}={new.get(field)!r} (its results: {saved.get(field)!r})"
      for field in evaluation_fields
      if saved is not None and saved.get(field) != new.get(field)
    ]
    if unapplied:
      logging.warning(
        "the run in %s is finished: %s not applied, so that config.json and results.json agree;"
        " delete results.json to evaluate the trained model again with them.",
        path,
        ", ".join(unapplied),
      )
    logging.info(
      "the run in %s is finished (%d steps); its results are in %s. Delete results.json to"
      " evaluate it again.",
      path,
      steps,
      path / "results.json",
    )
    return path, finished
  write_json_atomic(path / "config.json", record)
  write_json_atomic(path / CONFIG_BACKUP, record)
  return path, None


# A second copy of config.json: the run's config must survive the loss of one file, since the
# checkpoint alone (hyperparameters in the state) cannot say which config it was trained with.
CONFIG_BACKUP = "config.backup.json"


def has_checkpoint(path: pathlib.Path) -> bool:
  """Whether the workdir holds a saved checkpoint (a step's directory under checkpoints/)."""
  checkpoints = path / "checkpoints"
  try:
    return checkpoints.is_dir() and any(p.name.isdigit() for p in checkpoints.iterdir())
  except OSError:  # the workdir went away meanwhile
    return False


def _holds_run(path: pathlib.Path) -> bool:
  return (
    has_checkpoint(path)
    or (path / "metrics.jsonl").is_file()
    and (path / "metrics.jsonl").stat().st_size > 0
  )


def _saved_config(path: pathlib.Path) -> dict | None:
  """The workdir's saved config (config.json, else its backup), None for a new workdir.

  Raises:
    ConfigError: the workdir holds a run but neither file reads.
  """
  for name in ("config.json", CONFIG_BACKUP):
    file = path / name
    if not file.exists():
      continue
    try:
      saved = json.loads(file.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
      logging.warning("%s is damaged (%s)", file, e)
      continue
    if name == CONFIG_BACKUP:
      logging.warning(
        "%s/config.json is missing or damaged: the run's config is read from %s", path, file
      )
    return saved
  if _holds_run(path) and not any((path / n).exists() for n in ("config.json", CONFIG_BACKUP)):
    raise ConfigError(
      f"--workdir {path} holds checkpoints or metrics but neither config.json nor"
      f" {CONFIG_BACKUP} (as a workdir deleted while its run trained, the run writing on, leaves"
      " it): the run cannot resume from it. Use a new --workdir, or delete this one (or put back"
      " a copy of its config.json)."
    )
  if _holds_run(path):
    raise ConfigError(
      f"--workdir {path} holds a run (checkpoints or metrics) but its config.json is missing or"
      " damaged and"
      f" {CONFIG_BACKUP} does not read either: restore config.json, or use a new --workdir."
    )
  return None


def _finished_results(path: pathlib.Path, steps: int) -> dict | None:
  """results.json of a run that already trained for ``steps`` steps, else None."""
  results_path = path / "results.json"
  if not results_path.exists():
    return None
  try:
    results = json.loads(results_path.read_text())
  except (json.JSONDecodeError, UnicodeDecodeError) as e:
    logging.warning(
      "%s is damaged (%s): the run is evaluated again from its last checkpoint", results_path, e
    )
    return None
  return results if results.get("steps") == steps else None
