"""A run's outputs while it trains: metrics.jsonl and TensorBoard, progress lines, stop signals.

:func:`start_or_resume` opens a workdir for training (its checkpointer, its
metrics writer, the state to start from).
"""

from __future__ import annotations

import json
import math
import os
import pathlib
import signal
import sys
import threading
import time
from typing import Any, Callable

import jax
import numpy as np
from absl import logging
from jax.experimental import multihost_utils

from experiments import start_up_signals
from experiments.checkpoints import Checkpointer, restore_latest_good
from experiments.workdir import (
  is_full_disk,
  is_writer,
  strict_json,
  write_json_atomic,
  write_text_atomic,
)

# Full-disk errors of TensorBoard writer threads (tensorboardX's), in the order they happened.
_full_disks_in_writer_threads: list[OSError] = []


def _keep_writer_threads_full_disk(previous: Callable) -> Callable:
  """A threading.excepthook: a tensorboardX writer thread that fails on a full disk ends quietly
  and its error is kept for the run's own thread (see MetricsWriter); anything else goes to
  ``previous``."""

  def hook(failure) -> None:
    if type(failure.thread).__module__.startswith("tensorboardX") and is_full_disk(
      failure.exc_value
    ):
      _full_disks_in_writer_threads.append(failure.exc_value)
    else:
      previous(failure)

  hook.keeps_writer_threads_full_disk = True
  return hook


class MetricsWriter:
  """Appends ``{"step": s, "split": name, ["member": i,] metric: value, ...}`` lines to
  metrics.jsonl.

  Each line is flushed and fsync'ed, so an interrupted run keeps everything it
  logged. The same values go to TensorBoard event files (tensorboardX), one
  TensorBoard run per population member (``tensorboard/member_<i>``): tags
  ``SPLIT/NAME`` for the curves, ``final/SPLIT_NAME`` for the end-of-run
  evaluation, ``hyperparameters/NAME`` at the first step, the config as text and
  ``progress/steps_per_second`` in the top-level run. A resumed run purges the
  events after its checkpoint's step, a run from step 0 all earlier ones (TensorBoard's
  ``purge_step``). In a multi-process job only process 0 writes (the others' writers do
  nothing). A TensorBoard writer thread that fails on a full disk (it flushes in the background)
  stops the run at the writer's next use with that OSError, as a full metrics.jsonl does.
  """

  # Bookkeeping values kept in metrics.jsonl but not plotted.
  NOT_PLOTTED = frozenset({"num_samples", "epoch"})

  def __init__(self, workdir: pathlib.Path, start_step: int = 0):
    self.path = workdir / "metrics.jsonl"
    self._tensorboard_dir = workdir / "tensorboard"
    self._start_step = start_step
    # The first step this run logs: a resumed run logs every step after its checkpoint's, and a
    # run from step 0 measures the untrained state again.
    self.first_step = start_step + 1 if start_step else 0
    self._tb = {}
    self._file = self._summary_writer = None
    self._full_disks_before = len(_full_disks_in_writer_threads)
    if not is_writer():
      return
    self._file = open(self.path, "a")
    try:
      from tensorboardX import SummaryWriter

      self._summary_writer = SummaryWriter
      if not getattr(threading.excepthook, "keeps_writer_threads_full_disk", False):
        threading.excepthook = _keep_writer_threads_full_disk(threading.excepthook)
    except ImportError:
      self._summary_writer = None
      logging.info(
        "TensorBoard event files are off (tensorboardX is not installed): pip install tensorboardX"
        " to write them; metrics.jsonl has every value."
      )

  def _writer_thread_met_a_full_disk(self) -> bool:
    return len(_full_disks_in_writer_threads) > self._full_disks_before

  def _board(self, member: int | None):
    # Raised here, in the run's thread: the run stops with its one full-disk line, rather than
    # blocking once the dead thread's queue (10 events) is full.
    if self._writer_thread_met_a_full_disk():
      raise _full_disks_in_writer_threads[-1]
    if member not in self._tb:
      run = self._tensorboard_dir / (f"member_{member}" if member is not None else "")
      self._tb[member] = self._summary_writer(str(run), purge_step=self.first_step)
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
        # A non-finite value is null in metrics.jsonl and no point of the curve (as in the plots).
        if name not in self.NOT_PLOTTED and math.isfinite(float(value)):
          board.add_scalar(
            f"final/{split}_{name}" if final else f"{split}/{name}", float(value), int(step)
          )
      board.flush()

  def describe_run(
    self,
    config: dict,
    hyperparameters: dict[int, dict[str, float]],
    metric_tags: tuple[str, ...] = (),
  ) -> None:
    """TensorBoard: the config (text, top-level run) and each member's hyperparameters (scalars at
    the first step, and the HParams plugin's session with ``metric_tags`` as its metrics, so that
    a population's members compare in its table)."""
    if self._summary_writer is None:
      return
    from tensorboardX.summary import hparams

    self._board(None).add_text(
      "config",
      "```\n" + json.dumps(strict_json(config), indent=2, sort_keys=True) + "\n```",
      self._start_step,
    )
    for member, values in hyperparameters.items():
      board = self._board(member)
      for name, value in values.items():
        board.add_scalar(f"hyperparameters/{name}", float(value), self._start_step)
      described = {
        **{name: float(value) for name, value in values.items()},
        "member": member,
        "estimator": str(config.get("estimator")),
      }
      for summary in hparams(described, dict.fromkeys(metric_tags, 0.0)):
        board.file_writer.add_summary(summary)
      board.flush()

  def write_progress(self, step: int, steps_per_second: float) -> None:
    if self._summary_writer is not None and math.isfinite(steps_per_second):
      self._board(None).add_scalar("progress/steps_per_second", steps_per_second, int(step))

  def close(self) -> None:
    if self._file is not None:
      self._file.close()
    if self._writer_thread_met_a_full_disk():
      return  # a writer's close would wait on its dead thread; each write() flushed its events
    for writer in self._tb.values():
      writer.close()


def start_or_resume(
  path: pathlib.Path, init_state: Any
) -> tuple[Checkpointer, MetricsWriter, Any, int]:
  """The workdir's checkpointer and metrics writer, the state to train from, and its step.

  The state is the newest checkpoint that restores (restored into the
  structure of ``init_state``; damaged ones are moved aside with a warning),
  else ``init_state`` at step 0. Metrics logged after that step by an interrupted
  run are dropped (and, from step 0, those of the untrained state): the run logs them again.
  """
  checkpointer, state, start = restore_latest_good(path, init_state)
  writer = MetricsWriter(path, start)
  if start:
    logging.info("resumed from the checkpoint at step %d", start)
  else:
    logging.info("starting a new run in %s", path)
  writer.truncate_after(writer.first_step - 1)
  return checkpointer, writer, state, start


class EvaluationProgress:
  """A long evaluation's running sums, kept in the workdir (``evaluation_progress.json``) so that
  an evaluation stopped by a signal, a crash or a lost machine resumes at its last saved batch
  instead of at its first image.

  An evaluation is a sum over fixed batches whose samples depend only on the
  evaluation and the batch's first image, so the resumed sum equals the
  uninterrupted one bit for bit (the sums are saved exactly, as hexadecimal
  floats). The entries belong to the checkpoint ``step`` they evaluate; any other
  step's are ignored. Sums are saved at most every ``save_every_seconds`` (60),
  at the end of each evaluation and when it is stopped; :meth:`clear` drops the
  file once the run's final lines are written.
  """

  FILE = "evaluation_progress.json"
  save_every_seconds = 60.0

  def __init__(self, workdir: pathlib.Path, step: int):
    self.path, self.step = workdir / self.FILE, int(step)
    self._entries = self._read()
    self._last_save = time.perf_counter()

  def _read(self) -> dict:
    try:
      saved = json.loads(self.path.read_text())
    except FileNotFoundError:
      return {}
    except (OSError, ValueError) as error:
      logging.warning("ignoring %s (%s): evaluations start at their first image", self.path, error)
      return {}
    if not isinstance(saved, dict) or saved.get("step") != self.step:
      return {}
    entries = saved.get("entries")
    return entries if isinstance(entries, dict) else {}

  def resume(
    self, key: str, num_images: int, batch_size: int, count: int
  ) -> tuple[int, np.ndarray]:
    """(images done, ``[count]`` float64 sums) saved for evaluation ``key`` over ``num_images``
    images in batches of ``batch_size``; (0, zeros) when none is saved. In a multi-process job
    every process gets process 0's."""
    done, sums = 0, np.zeros(count)
    entry = self._entries.get(key)
    try:
      if entry["images"] == num_images and entry["batch_size"] == batch_size:
        saved = np.array([float.fromhex(s) for s in entry["sums"]])
        if saved.shape == (count,) and 0 <= entry["done"] <= num_images:
          done, sums = int(entry["done"]), saved
    except (TypeError, KeyError, ValueError):
      pass  # none saved, or not of this evaluation: it starts at its first image
    if jax.process_count() > 1:  # int32 words: a float64 broadcast would be cut to float32
      words = np.concatenate([np.array([done], np.int64), sums.view(np.int64)]).view(np.int32)
      words = np.asarray(multihost_utils.broadcast_one_to_all(words)).view(np.int64)
      done, sums = int(words[0]), words[1:].view(np.float64).copy()
    if done:
      logging.info(
        "%s: resuming at image %d of %d (saved by an interrupted run)", key, done, num_images
      )
    return done, sums

  def save(
    self,
    key: str,
    num_images: int,
    batch_size: int,
    done: int,
    sums: np.ndarray,
    force: bool = False,
  ) -> None:
    """Saves evaluation ``key``'s sums after ``done`` images (``force``: whatever the time since
    the last save)."""
    if not force and time.perf_counter() - self._last_save < self.save_every_seconds:
      return
    self._entries[key] = {
      "images": int(num_images),
      "batch_size": int(batch_size),
      "done": int(done),
      "sums": [float(s).hex() for s in sums],
    }
    write_json_atomic(self.path, {"step": self.step, "entries": self._entries})
    self._last_save = time.perf_counter()

  def clear(self) -> None:
    if is_writer():
      self.path.unlink(missing_ok=True)


def duration(seconds: float) -> str:
  """A progress line's time: "42s" under a minute, "h:mm:ss" above."""
  if not math.isfinite(seconds):
    return "?"
  if seconds < 60:
    return f"{seconds:.0f}s"
  whole = int(round(seconds))
  return f"{whole // 3600}:{whole % 3600 // 60:02d}:{whole % 60:02d}"


class Interrupted(Exception):
  """Training stopped on SIGINT or SIGTERM after saving a checkpoint."""

  def __init__(self, signum: int, step: int):
    name = signal.Signals(signum).name
    if step == 0:
      message = (
        f"stopped by {name} before the first step (nothing was trained, nothing saved); run the"
        " same command again to start."
      )
    else:
      message = (
        f"stopped by {name} at step {step}; the checkpoint of that step is saved. Run the same"
        " command again to resume."
      )
    super().__init__(message)
    self.signum = signum


class StopSignals:
  """Turns SIGINT and SIGTERM (what batch schedulers send before preemption) into a flag.

  The training loop checks ``requested`` between blocks, saves a checkpoint and
  raises :class:`Interrupted`. The first signal is answered at once with a
  line saying where the run will stop (``where()``: e.g. " at step 4000, in
  ~0:01:10"), even while a block is computing; a second one quits at once,
  keeping the last saved checkpoint (every file the run writes is complete or
  absent: checkpoints are renamed into place, metrics lines are flushed whole).
  """

  def __init__(
    self, where: Callable[[], str] = lambda: "", saved: Callable[[], bool] = lambda: True
  ):
    # The signal received by this process (one swallowed while the command started, too).
    self.signum = start_up_signals.received()
    self.agreed = None  # the signal the job stops for (``requested``)
    # True while a multi-process job gathers its signals: one arriving now counts at the next.
    self.deciding = False
    self._where = where
    self._saved = saved  # whether a checkpoint is on disk yet (the messages say what stays)
    self._previous = {}
    for signum in (signal.SIGINT, signal.SIGTERM):
      try:
        self._previous[signum] = signal.signal(signum, self._handle)
      except ValueError:  # not the main thread: leave the default handlers
        pass
    self._wakeup = None
    if self._previous:
      # Python runs a signal handler only between bytecodes, after a jitted block returns: the C
      # level writes each signal's number to this pipe at once, and a thread answers from it.
      read, write = os.pipe()
      os.set_blocking(write, False)
      self._previous_wakeup = signal.set_wakeup_fd(write, warn_on_full_buffer=False)
      self._wakeup = (read, write)
      threading.Thread(target=self._answer, args=(read,), daemon=True).start()

  def _answer(self, read: int) -> None:
    received = 0
    while True:
      try:
        data = os.read(read, 64)
      except OSError:
        return
      if not data:
        return
      for signum in data:
        if signum not in (signal.SIGINT, signal.SIGTERM):
          continue
        received += 1
        print(self.answer(signum, received), file=sys.stderr, flush=True)
        if received > 1:
          os._exit(128 + signum)

  def answer(self, signum: int, received: int) -> str:
    """The line that answers the ``received``-th stop signal: where the run stops, and what a
    second signal keeps (the last checkpoint, or nothing when none is saved yet)."""
    name = signal.Signals(signum).name
    saved = self._saved()
    if received == 1:
      kept = "keeping the last saved checkpoint" if saved else "before any checkpoint is saved"
      # In a multi-process job gathering its signals, this one counts at the next gather.
      block = "the next block" if self.deciding else "this block"
      return (
        f"{name}: stopping after {block}{self._where()}, with a checkpoint; {name} again"
        f" quits at once, {kept}."
      )
    if saved:
      return (
        f"{name} again: quitting now; the last saved checkpoint stays. Run the same command"
        " again to resume from it."
      )
    return (
      f"{name} again: quitting now, before the run's first checkpoint: nothing is saved. Run the"
      " same command again to start anew."
    )

  def _handle(self, signum, frame):
    del frame
    self.signum = signum

  @property
  def requested(self) -> bool:
    """Whether a signal arrived; in a multi-process job, at any process (so that all stop at the
    same step).

    Every process asks at the same points of the loop and decides from the
    gathered values alone: a signal that arrives here after the gather counts at
    the next question, in every process alike.
    """
    if self.agreed is None and jax.process_count() > 1:
      own = np.array(self.signum or 0)
      self.deciding = True  # after ``own``: a signal from here on is not in this gather
      try:
        received = multihost_utils.process_allgather(own)  # [processes]
      finally:
        self.deciding = False
      self.agreed = next((int(s) for s in received.ravel() if s), None)
    elif self.agreed is None:
      self.agreed = self.signum
    return self.agreed is not None

  def stop(self, checkpointer: Checkpointer, writer: MetricsWriter, step: int, state: Any) -> None:
    """Saves ``state`` at ``step`` (nothing before the first step), closes the outputs and raises
    Interrupted."""
    if step:
      checkpointer.save(step, state)
    writer.close()
    checkpointer.close()
    self.restore()
    raise Interrupted(self.agreed, step)

  def ignore(self) -> None:
    """From here on the run is finished (its results are being written): SIGINT / SIGTERM are
    ignored, so that a late signal cannot fail a finished run; in the command line's process also
    after :meth:`restore` (used as a library, in a notebook, the caller's handlers come back)."""
    for signum in self._previous:
      signal.signal(signum, signal.SIG_IGN)
      if start_up_signals.in_command():
        self._previous[signum] = signal.SIG_IGN

  def restore(self) -> None:
    for signum, handler in self._previous.items():
      signal.signal(signum, handler)
    if self._wakeup is not None:
      signal.set_wakeup_fd(self._previous_wakeup)
      for fd in reversed(self._wakeup):  # the write end first: the answering thread sees the end
        os.close(fd)
      self._wakeup = None


class ProgressLogger:
  """Logs step, steps/s and the ETA (in h:mm:ss past a minute).

  The rate is wall-clock steps per second, so periodic work (evaluations,
  variance measurements, checkpoints) is in the ETA, but not the compilation:
  from the second line on it is measured from the first line (the first block
  compiles); an estimate of the final evaluation, when the experiment sets
  ``final_seconds``, is added to it.
  """

  def __init__(self, first_step: int, last_step: int):
    self.last_step = last_step
    self.final_seconds = None
    self.rate = float("nan")
    self._start = (time.perf_counter(), first_step)
    self._warm = None  # (time, step) of the first line

  def log(self, step: int, note: str = "", **metrics: float) -> float:
    """Logs the progress line; returns the rate (steps/s)."""
    now = time.perf_counter()
    since = self._warm if self._warm is not None and step > self._warm[1] else self._start
    elapsed = now - since[0]
    self.rate = rate = (step - since[1]) / elapsed if elapsed > 0 else float("nan")
    if self._warm is None:
      self._warm = (now, step)
    eta = (self.last_step - step) / rate if rate > 0 else float("nan")
    final = (
      f" (training {duration(eta)} + final evaluation ~{duration(self.final_seconds)})"
      if self.final_seconds
      else ""
    )
    eta_total = eta + (self.final_seconds or 0.0)
    values = " ".join(f"{k}={v:.4f}" for k, v in metrics.items())
    logging.info(
      "step %d/%d  %.1f steps/s  ETA %s%s  %s%s",
      step,
      self.last_step,
      rate,
      duration(eta_total),
      final,
      note,
      values,
    )
    return rate

  def seconds_to(self, step: int, now_step: int) -> float:
    """The time to train from ``now_step`` to ``step`` at the last rate (nan before a line)."""
    return (step - now_step) / self.rate if self.rate > 0 else float("nan")
