"""Orbax checkpoints of a run: saving (a full disk in one line), resuming from the newest checkpoint
that restores, and reading one whatever devices wrote it."""

from __future__ import annotations

import errno
import inspect
import logging as python_logging
import os
import pathlib
import shutil
import sys
import time
import traceback
import warnings
from typing import Any, Sequence

import jax
import numpy as np
import orbax.checkpoint as ocp
from absl import logging
from jax.experimental import multihost_utils

from experiments import provenance, search
from experiments.config_checks import ConfigError
from experiments.workdir import is_full_disk, is_writer, require_workdir


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
  happened), and the write coroutines it abandons warn "was never awaited" when
  collected. Every other unraisable exception and warning still reaches its hook.
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
  # The write coroutines a failed save abandons, collected unawaited (at times only at exit).
  warnings.filterwarnings(
    "ignore", message=r"coroutine 'async_serialize_from_host", category=RuntimeWarning
  )
  asyncio_logger = python_logging.getLogger("asyncio")
  if not any(isinstance(f, _OrbaxTaskNoise) for f in asyncio_logger.filters):
    asyncio_logger.addFilter(_OrbaxTaskNoise())


class _OrbaxTaskNoise(python_logging.Filter):
  """Drops asyncio's "Task exception was never retrieved" records of orbax's write tasks.

  A checkpoint that fails to write (a full disk) leaves orbax's write tasks
  with their exception; when the garbage collector later finds them, asyncio
  logs each with its traceback, after the one line that said what happened.
  Records of other tasks pass.
  """

  def filter(self, record: python_logging.LogRecord) -> bool:
    if not record.getMessage().startswith("Task exception was never retrieved"):
      return True
    frames = traceback.extract_tb(record.exc_info[2]) if record.exc_info else []
    return not any(f"{os.sep}orbax{os.sep}" in frame.filename for frame in frames)


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
    if not self.directory.parent.is_dir():
      # The workdir was deleted (or replaced by a file): orbax would create it again, holding a
      # checkpoint and none of the run's records.
      require_workdir(self.directory.parent / provenance.SEGMENTS_FILE, step)
    quiet = _OnlyOwnRecords()
    logging.get_absl_handler().addFilter(quiet)  # orbax logs each failed write with its traceback
    try:
      self._manager.save(step, args=ocp.args.StandardSave(state))
      self._manager.wait_until_finished()
    # tensorstore reports ENOSPC as ValueError("RESOURCE_EXHAUSTED: ..."), orbax's metadata writes
    # as OSError.
    except (ValueError, OSError) as e:
      if not (is_full_disk(e) or "RESOURCE_EXHAUSTED" in str(e) or "No space left" in str(e)):
        # A workdir deleted, moved or replaced by a file while orbax wrote into it: say that,
        # not orbax's "[Errno 2] ... orbax-checkpoint-tmp".
        require_workdir(self.directory.parent / provenance.SEGMENTS_FILE, step)
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


def to_host(tree: Any) -> Any:
  """Numpy copies of (possibly sharded, possibly multi-host) arrays."""
  if jax.process_count() > 1:
    return multihost_utils.process_allgather(tree, tiled=True)
  return jax.tree.map(np.asarray, tree)


def check_restored_members(
  state: dict, chosen: Sequence[search.Member], path: pathlib.Path, step: int
) -> None:
  """A restored checkpoint must hold the members the config describes (their hyperparameters and
  seeds): config.json, and its backup, edited alike would otherwise report hyperparameters the
  run did not train with.

  Raises:
    ConfigError: one line naming the first member that differs and its values.
  """
  saved = {name: to_host(values) for name, values in state["hyperparameters"].items()}
  seeds = to_host(state["seed"])
  for i, member in enumerate(chosen):
    differ = [
      f"{name} {float(saved[name][i]):.6g} vs {float(np.float32(value)):.6g}"
      for name, value in member.hyperparameters.items()
      if name in saved and saved[name][i] != np.float32(value)
    ]
    if seeds[i] != member.seed:
      differ.append(f"seed {seeds[i]} vs {member.seed}")
    if differ:
      raise ConfigError(
        f"--workdir {path}: its checkpoint at step {step} trained member {member.index} with other"
        f" values than this config gives it ({', '.join(differ)}; checkpoint vs config): the run's"
        " config.json was edited after it started. Put back the values it was started with, or"
        " use another --workdir."
      )


class _OnlyOwnRecords(python_logging.Filter):
  """Drops other libraries' log records (orbax's tracebacks while a checkpoint fails to restore)."""

  def filter(self, record: python_logging.LogRecord) -> bool:
    return record.pathname == __file__


def restore_latest_good(path: pathlib.Path, template: Any) -> tuple[Checkpointer, Any, int]:
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
