"""A run's workdir: its config, metrics, checkpoints and results; how a run stops and resumes.

A workdir holds ``config.json``, ``metrics.jsonl`` (one JSON object per logged
step), TensorBoard events (when tensorboardX is installed), ``checkpoints/``
(orbax) and, at the end, ``results.json``.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import inspect
import json
import logging as python_logging
import math
import os
import pathlib
import shutil
import signal
import sys
import time
from typing import Any

import jax
import numpy as np
import orbax.checkpoint as ocp
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


class MetricsWriter:
  """Appends ``{"step": s, "split": name, ["member": i,] metric: value, ...}`` lines to
  metrics.jsonl.

  Each line is flushed and fsync'ed, so an interrupted run keeps everything it
  logged. The same values go to TensorBoard event files (tensorboardX), one
  TensorBoard run per population member (``tensorboard/member_<i>``): tags
  ``SPLIT/NAME`` for the curves, ``final/SPLIT_NAME`` for the end-of-run
  evaluation, ``hyperparameters/NAME`` at the first step, the config as text and
  ``progress/steps_per_second`` in the top-level run. A resumed run purges the
  events after its checkpoint's step (TensorBoard's ``purge_step``). In a
  multi-process job only process 0 writes (the others' writers do nothing).
  """

  # Bookkeeping values kept in metrics.jsonl but not plotted.
  NOT_PLOTTED = frozenset({"num_samples", "epoch"})

  def __init__(self, workdir: pathlib.Path, start_step: int = 0):
    self.path = workdir / "metrics.jsonl"
    self._tensorboard_dir = workdir / "tensorboard"
    self._start_step = start_step
    self._tb = {}
    self._file = self._summary_writer = None
    if not is_writer():
      return
    self._file = open(self.path, "a")
    try:
      from tensorboardX import SummaryWriter

      self._summary_writer = SummaryWriter
    except ImportError:
      self._summary_writer = None
      logging.info(
        "TensorBoard event files are off (tensorboardX is not installed): pip install tensorboardX"
        " to write them; metrics.jsonl has every value."
      )

  def _board(self, member: int | None):
    if member not in self._tb:
      run = self._tensorboard_dir / (f"member_{member}" if member is not None else "")
      self._tb[member] = self._summary_writer(str(run), purge_step=self._start_step or None)
    return self._tb[member]

  def truncate_after(self, step: int) -> None:
    """Drops lines of steps after ``step`` and the final evaluation's lines (``"final": true``): a
    resumed run logs them again, identically, and an extended run evaluates at its new end."""
    if self._file is None:
      return
    self._file.close()
    lines = [
      line
      for line in (self.path.read_text().splitlines() if self.path.exists() else [])
      if line.strip()
    ]
    kept = []
    for number, line in enumerate(lines, 1):
      try:
        record = json.loads(line)
      except json.JSONDecodeError:
        # A crash or a full disk leaves a last line cut off mid-write; elsewhere the file was
        # damaged.
        what = "a partial last line" if number == len(lines) else f"a damaged line {number}"
        logging.warning("dropping %s of %s: %r", what, self.path, line[:80])
        continue
      if record["step"] <= step and not record.get("final"):
        kept.append(line)
    write_text_atomic(self.path, "".join(line + "\n" for line in kept))
    self._file = open(self.path, "a")

  def write(
    self, step: int, split: str, member: int | None = None, final: bool = False, **metrics: float
  ) -> None:
    """One line; ``final`` marks the end-of-run evaluation's lines (dropped on resume, see
    truncate_after)."""
    if self._file is None:
      return
    record = {"step": int(step), "split": split}
    if member is not None:
      record["member"] = int(member)
    if final:
      record["final"] = True
    record.update(strict_json({k: float(v) for k, v in metrics.items()}))
    self._file.write(json.dumps(record, allow_nan=False) + "\n")
    self._file.flush()
    os.fsync(self._file.fileno())
    if self._summary_writer is not None:
      board = self._board(member)
      for name, value in metrics.items():
        if name not in self.NOT_PLOTTED:
          board.add_scalar(
            f"final/{split}_{name}" if final else f"{split}/{name}", float(value), int(step)
          )
      board.flush()

  def describe_run(self, config: dict, hyperparameters: dict[int, dict[str, float]]) -> None:
    """TensorBoard: the config (text, top-level run) and each member's hyperparameters (scalars at
    the first step)."""
    if self._summary_writer is None:
      return
    self._board(None).add_text(
      "config",
      "```\n" + json.dumps(strict_json(config), indent=2, sort_keys=True) + "\n```",
      self._start_step,
    )
    for member, values in hyperparameters.items():
      for name, value in values.items():
        self._board(member).add_scalar(f"hyperparameters/{name}", float(value), self._start_step)

  def write_progress(self, step: int, steps_per_second: float) -> None:
    if self._summary_writer is not None and math.isfinite(steps_per_second):
      self._board(None).add_scalar("progress/steps_per_second", steps_per_second, int(step))

  def close(self) -> None:
    if self._file is not None:
      self._file.close()
    for writer in self._tb.values():
      writer.close()


def _is_orbax_coroutine(obj: Any) -> bool:
  return inspect.iscoroutine(obj) and f"{os.sep}orbax{os.sep}" in obj.cr_code.co_filename


def _drop_closed_event_loop_noise() -> None:
  """Silences tensorstore callbacks that fire after orbax closed their asyncio loop.

  When a checkpoint fails to write or to restore (a full disk, a damaged file),
  the writes and reads still in flight complete later and try to call back into
  orbax's closed event loop, or into an interpreter shutting down, and orbax's
  abandoned read coroutines, closed by the garbage collector, turn the
  GeneratorExit into an exception of their own; Python prints each as an
  "Exception ignored" traceback (dozens, after the one line that says what
  happened). Every other unraisable exception still reaches the default hook.
  """
  if getattr(sys.unraisablehook, "drops_closed_event_loops", False):
    return
  previous = sys.unraisablehook

  def hook(unraisable):
    message = str(unraisable.exc_value)
    if (
      unraisable.exc_type is RuntimeError
      and message == "Event loop is closed"
      or unraisable.exc_type is ImportError
      and "Python is likely shutting down" in message
      or _is_orbax_coroutine(getattr(unraisable, "object", None))
    ):
      return
    previous(unraisable)

  hook.drops_closed_event_loops = True
  sys.unraisablehook = hook


class Checkpointer:
  """Orbax checkpoints of a pytree under ``workdir/checkpoints``.

  Orbax writes each checkpoint to a temporary directory and renames it when
  complete, so a run killed while saving keeps the previous checkpoint.
  """

  def __init__(self, workdir: pathlib.Path, max_to_keep: int = 2):
    _drop_closed_event_loop_noise()
    self._manager = ocp.CheckpointManager(
      (workdir / "checkpoints").absolute(),
      options=ocp.CheckpointManagerOptions(
        max_to_keep=max_to_keep, create=True, enable_async_checkpointing=False
      ),
    )

  @property
  def directory(self) -> pathlib.Path:
    return pathlib.Path(self._manager.directory)

  def all_steps(self) -> list[int]:
    return list(self._manager.all_steps())

  def latest_step(self) -> int | None:
    return self._manager.latest_step()

  def save(self, step: int, state: Any) -> None:
    """Saves ``state`` as the checkpoint of ``step`` (once per step).

    Raises:
      OSError: the disk is full (one line naming the directory, the space a
        checkpoint needs and the space free); the previous checkpoints are kept.
    """
    if self._manager.latest_step() == step:
      return
    quiet = _OnlyOwnRecords()
    logging.get_absl_handler().addFilter(quiet)  # orbax logs each failed write with its traceback
    try:
      self._manager.save(step, args=ocp.args.StandardSave(state))
      self._manager.wait_until_finished()
    except ValueError as e:  # tensorstore reports ENOSPC as ValueError("RESOURCE_EXHAUSTED: ...")
      if "RESOURCE_EXHAUSTED" not in str(e) and "No space left" not in str(e):
        raise
      needed = sum(leaf.nbytes for leaf in jax.tree.leaves(state) if hasattr(leaf, "nbytes"))
      free = shutil.disk_usage(self.directory).free
      raise OSError(
        errno.ENOSPC,
        f"no space left on the device of {self.directory} while saving the checkpoint of step"
        f" {step}:"
        f" a checkpoint needs about {needed / 2**20:.1f} MiB, {free / 2**20:.1f} MiB are free. The"
        " previous checkpoints are kept: free some space and run the same command again to resume",
      ) from None
    finally:
      logging.get_absl_handler().removeFilter(quiet)

  def restore(self, step: int, template: Any) -> Any:
    return self._manager.restore(step, args=ocp.args.StandardRestore(template))

  def close(self) -> None:
    self._manager.close()


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


_LOCKS: dict[pathlib.Path, Any] = {}


def _lock_name() -> str:
  return ".lock" if jax.process_count() == 1 else f".lock.process{jax.process_index()}"


def lock_workdir(path: pathlib.Path) -> None:
  """Takes an exclusive lock on ``path/.lock`` for the rest of this process.

  The operating system releases it when the process ends, however it ends, so
  a lock left by a dead run never blocks. A second run on the same workdir is
  refused with one line. The processes of a multi-process job each take their
  own (``.lock.process<i>``).
  """
  path = path.resolve()
  if path in _LOCKS:
    return
  handle = open(path / _lock_name(), "a+")
  try:
    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
  except BlockingIOError:
    handle.seek(0)
    holder = handle.read().strip() or "another process"
    handle.close()
    raise ConfigError(
      f"--workdir {path} is in use by another run ({holder}); wait for it to end or use another"
      " --workdir."
    ) from None
  handle.seek(0)
  handle.truncate()
  handle.write(f"pid {os.getpid()}")
  handle.flush()
  _LOCKS[path] = handle


def unlock_workdirs() -> None:
  """Removes this process's workdir locks (a run that ended normally leaves no .lock behind)."""
  for path, handle in list(_LOCKS.items()):
    with contextlib.suppress(OSError):
      (path / _lock_name()).unlink()
    handle.close()
    del _LOCKS[path]


def prepare_workdir(
  workdir: str,
  config: ConfigDict,
  safe_to_change: frozenset[str] = SAFE_TO_CHANGE,
  data_used: dict[str, str] | None = None,
  steps: int | None = None,
  evaluation_fields: tuple[str, ...] = (),
) -> tuple[pathlib.Path, dict | None]:
  """Creates the workdir, or checks that the run it holds is this config's; writes config.json.

  ``safe_to_change``: the experiment's fields a restart may change. ``data_used``
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
  path.mkdir(parents=True, exist_ok=True)
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
    differing = [
      f"{field} (saved {saved.get(field)!r}, now {new.get(field)!r})"
      for field in sorted(set(saved) | set(new))
      if saved.get(field) != new.get(field)
      and field not in safe_to_change
      and not (
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


def _holds_run(path: pathlib.Path) -> bool:
  checkpoints = path / "checkpoints"
  has_checkpoint = checkpoints.is_dir() and any(p.name.isdigit() for p in checkpoints.iterdir())
  return (
    has_checkpoint
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


def read_checkpoint(path: pathlib.Path) -> Any:
  """A checkpoint's pytree as saved, on this process's first device, whatever devices saved it.

  ``path`` is a step's item directory (``checkpoints/STEP/default``). A population
  split over several devices (the CPU's cores, or accelerators) is read whole.
  """
  checkpointer = ocp.StandardCheckpointer()
  device = jax.sharding.SingleDeviceSharding(jax.local_devices()[0])
  metadata = checkpointer.metadata(path.absolute()).item_metadata.tree
  target = jax.tree.map(lambda m: jax.ShapeDtypeStruct(m.shape, m.dtype, sharding=device), metadata)
  return checkpointer.restore(path.absolute(), target)


class _OnlyOwnRecords(python_logging.Filter):
  """Drops other libraries' log records (orbax's tracebacks while a checkpoint fails to restore)."""

  def filter(self, record: python_logging.LogRecord) -> bool:
    return record.pathname == __file__


def _restore_latest_good(path: pathlib.Path, template: Any) -> tuple[Checkpointer, Any, int]:
  """A checkpointer and the newest checkpoint that restores, with its step.

  A checkpoint that does not restore is moved to ``path/damaged_checkpoints/``
  (kept, not deleted) with a warning line, and the next older one is tried,
  each with a fresh orbax manager (a failed restore leaves a manager confused).

  Raises:
    ConfigError: there were checkpoints and none restores (one line).
  """
  quiet = _OnlyOwnRecords()
  skipped = []
  while True:
    checkpointer = Checkpointer(path)
    step = checkpointer.latest_step()
    if step is None and skipped:
      checkpointer.close()
      raise ConfigError(
        f"none of the checkpoints {skipped} in {path / 'checkpoints'} restores (see the lines"
        " above;"
        f" they are kept in {path / 'damaged_checkpoints'}); run again to start from step 0."
      )
    if step is None:
      return checkpointer, template, 0
    logging.get_absl_handler().addFilter(quiet)
    try:
      return checkpointer, checkpointer.restore(step, template), step
    except Exception as e:  # orbax raises many kinds for damaged files
      reason = f"{type(e).__name__}: {(str(e).strip().splitlines() or [''])[0][:200]}"
    finally:
      logging.get_absl_handler().removeFilter(quiet)
    checkpointer.close()
    aside = path / "damaged_checkpoints" / f"{step}-{int(time.time())}"
    if is_writer():
      aside.parent.mkdir(exist_ok=True)
      os.replace(checkpointer.directory / str(step), aside)
    # The other processes look for the next checkpoint once it is set aside.
    if jax.process_count() > 1:
      multihost_utils.sync_global_devices(f"checkpoint {step} set aside")
    skipped.append(step)
    logging.warning(
      "skipping the checkpoint at step %d, which does not restore (%s); moved to %s",
      step,
      reason,
      aside,
    )


def start_or_resume(
  path: pathlib.Path, init_state: Any
) -> tuple[Checkpointer, MetricsWriter, Any, int]:
  """The workdir's checkpointer and metrics writer, the state to train from, and its step.

  The state is the newest checkpoint that restores (restored into the
  structure of ``init_state``; damaged ones are moved aside with a warning),
  else ``init_state`` at step 0. Metrics logged after that step by an interrupted
  run are dropped: the resumed run logs them again.
  """
  checkpointer, state, start = _restore_latest_good(path, init_state)
  writer = MetricsWriter(path, start)
  if start:
    logging.info("resumed from the checkpoint at step %d", start)
  else:
    logging.info("starting a new run in %s", path)
  writer.truncate_after(start)
  return checkpointer, writer, state, start


class Interrupted(Exception):
  """Training stopped on SIGINT or SIGTERM after saving a checkpoint."""

  def __init__(self, signum: int, step: int):
    super().__init__(
      f"stopped by {signal.Signals(signum).name} at step {step}; the checkpoint of that step is"
      " saved. Run the same command again to resume."
    )
    self.signum = signum


class StopSignals:
  """Turns SIGINT and SIGTERM (what batch schedulers send before preemption) into a flag.

  The training loop checks ``requested`` between steps, saves a checkpoint and
  raises :class:`Interrupted`; a second signal while saving is not lost.
  """

  def __init__(self):
    self.signum = None
    self._previous = {}
    for signum in (signal.SIGINT, signal.SIGTERM):
      try:
        self._previous[signum] = signal.signal(signum, self._handle)
      except ValueError:  # not the main thread: leave the default handlers
        pass

  def _handle(self, signum, frame):
    del frame
    self.signum = signum

  @property
  def requested(self) -> bool:
    """Whether a signal arrived; in a multi-process job, at any process (so that all stop at the
    same step)."""
    if jax.process_count() > 1:  # every process asks at the same points of the loop
      received = multihost_utils.process_allgather(np.array(self.signum or 0))  # [processes]
      self.signum = self.signum or next((int(s) for s in received.ravel() if s), None)
    return self.signum is not None

  def stop(self, checkpointer: Checkpointer, writer: MetricsWriter, step: int, state: Any) -> None:
    """Saves ``state`` at ``step``, closes the outputs and raises Interrupted."""
    checkpointer.save(step, state)
    writer.close()
    checkpointer.close()
    self.restore()
    raise Interrupted(self.signum, step)

  def restore(self) -> None:
    for signum, handler in self._previous.items():
      signal.signal(signum, handler)


class ProgressLogger:
  """Logs step, steps/s since the start and the ETA.

  The rate is wall-clock steps per second since the start, so periodic work
  (evaluations, variance measurements, checkpoints) is in the ETA; an estimate
  of the final evaluation, when the experiment sets ``final_seconds``, is
  added to it.
  """

  def __init__(self, first_step: int, last_step: int):
    self.last_step = last_step
    self.final_seconds = None
    self._t0, self._s0 = time.perf_counter(), first_step

  def log(self, step: int, note: str = "", **metrics: float) -> float:
    """Logs the progress line; returns the rate (steps/s)."""
    elapsed = time.perf_counter() - self._t0
    rate = (step - self._s0) / elapsed if elapsed > 0 else float("nan")
    eta = (self.last_step - step) / rate if rate > 0 else float("nan")
    final = (
      f" (training {eta:.0f}s + final evaluation ~{self.final_seconds:.0f}s)"
      if self.final_seconds
      else ""
    )
    eta_total = eta + (self.final_seconds or 0.0)
    values = " ".join(f"{k}={v:.4f}" for k, v in metrics.items())
    logging.info(
      "step %d/%d  %.1f steps/s  ETA %.0fs%s  %s%s",
      step,
      self.last_step,
      rate,
      eta_total,
      final,
      note,
      values,
    )
    return rate
