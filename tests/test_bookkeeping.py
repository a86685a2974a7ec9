"""Tests of experiments/bookkeeping.py, checkpoints.py and workdir.py: metrics, checkpoints, atomic
files, the workdir's config."""

import errno
import functools
import json
import logging
import os
import shutil
import subprocess
import sys
import threading
import time
import types

import jax.numpy as jnp
import numpy as np
import pytest

from configs import listops_L10
from experiments import bookkeeping, checkpoints, config_checks, provenance, workdir
from tests import tensorboard_events


def test_metrics_writer_appends_and_truncates(tmp_path):
  writer = bookkeeping.MetricsWriter(tmp_path)
  for step in (1, 2, 3):
    writer.write(step, "train", loss=float(step))
  writer.truncate_after(2)
  writer.write(3, "train", loss=30.0)
  writer.close()
  records = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
  assert [(r["step"], r["loss"]) for r in records] == [(1, 1.0), (2, 2.0), (3, 30.0)]


def _visible_tensorboard_scalars(run_dir):
  """{tag: {step: value}} as TensorBoard shows a run directory's event files: a session START
  event at step T hides every event read before it whose step is T or later (TensorBoard's restart
  purge, tensorboardX's ``purge_step``)."""
  from tensorboardX.proto import event_pb2

  scalars = {}
  for event in tensorboard_events.events(run_dir):
    if event.session_log.status == event_pb2.SessionLog.START:
      for series in scalars.values():
        for step in [s for s in series if s >= event.step]:
          del series[step]
    for value in event.summary.value:
      scalars.setdefault(value.tag, {})[event.step] = value.simple_value
  return scalars


def _interrupted_run(path, steps, checkpoint_at=None):
  """A run that logs ``steps`` (from where it starts), saves a checkpoint at ``checkpoint_at``,
  then stops; returns the step it started from."""
  # tensorboardX names an event file by the second it opens (a later one sorts after it; one of
  # the same second is overwritten): each run of a real job is a process, seconds to start.
  time.sleep(1.05)
  checkpointer, writer, _, start = bookkeeping.start_or_resume(path, {"w": jnp.zeros(2)})
  for step in steps:
    writer.write(step, "train", 0, loss=float(step + 10 * start))
    if step == checkpoint_at:
      checkpointer.save(step, {"w": jnp.full(2, float(step))})
  writer.close()
  checkpointer.close()
  return start


def test_a_resumed_run_keeps_what_was_logged_up_to_its_checkpoint(tmp_path):
  # Steps 1-3 logged, the checkpoint at 2: the resumed run logs 3 again, and both metrics.jsonl
  # and TensorBoard show 1 and 2 of the first run (2 is the checkpoint's own step), 3 of the second.
  assert _interrupted_run(tmp_path, (1, 2, 3), checkpoint_at=2) == 0
  assert _interrupted_run(tmp_path, (3,)) == 2
  expected = {1: 1.0, 2: 2.0, 3: 23.0}
  records = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
  assert {r["step"]: r["loss"] for r in records} == expected and len(records) == 3
  visible = _visible_tensorboard_scalars(tmp_path / "tensorboard" / "member_0")
  assert visible["train/loss"] == expected


def test_a_run_restarted_from_step_0_logs_the_untrained_state_once(tmp_path):
  # Nothing was checkpointed: the restarted run measures step 0 again, and only its lines stand.
  assert _interrupted_run(tmp_path, (0, 1)) == 0
  assert _interrupted_run(tmp_path, (0,)) == 0
  records = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
  assert [(r["step"], r["loss"]) for r in records] == [(0, 0.0)]
  visible = _visible_tensorboard_scalars(tmp_path / "tensorboard" / "member_0")
  assert visible["train/loss"] == {0: 0.0}


def test_checkpointer_saves_restores_and_keeps_two(tmp_path):
  checkpointer = checkpoints.Checkpointer(tmp_path)
  template = {"w": jnp.zeros(3), "step": jnp.asarray(0)}
  for step in (1, 2, 3):
    checkpointer.save(step, {"w": jnp.full(3, float(step)), "step": jnp.asarray(step)})
  checkpointer.save(
    3, {"w": jnp.full(3, -1.0), "step": jnp.asarray(-1)}
  )  # same step: kept as it was
  assert checkpointer.all_steps() == [2, 3] and checkpointer.latest_step() == 3
  restored = checkpointer.restore(3, template)
  np.testing.assert_array_equal(restored["w"], [3.0, 3.0, 3.0])
  checkpointer.close()


def test_a_workdir_replaced_by_a_file_while_saving_is_the_documented_line(tmp_path):
  """The workdir gone under orbax's write (deleted, then a file in its place) gave orbax's raw
  "[Errno 2] ... orbax-checkpoint-tmp"; it is the line every other place of the run gives."""
  workdir = tmp_path / "run"
  workdir.mkdir()
  (workdir / provenance.SEGMENTS_FILE).write_text("[]")
  checkpointer = checkpoints.Checkpointer(workdir)
  checkpointer.save(1, {"w": jnp.zeros(10)})
  shutil.rmtree(workdir)
  workdir.write_text("not a workdir")
  with pytest.raises(FileNotFoundError, match=r"^--workdir .* was deleted, moved or replaced"):
    checkpointer.save(2, {"w": jnp.ones(10)})


def test_a_full_disk_while_saving_is_one_oserror_naming_the_space(tmp_path, monkeypatch):
  checkpointer = checkpoints.Checkpointer(tmp_path)
  checkpointer.save(1, {"w": jnp.zeros(1000)})

  def full_disk(*args, **kwargs):  # what orbax raises when tensorstore meets ENOSPC
    raise ValueError(
      'RESOURCE_EXHAUSTED: Error writing "w/0": Failed to write 4000 bytes to file 25: No space'
      " left on device [os_error_code='28']"
    )

  monkeypatch.setattr(checkpointer._manager, "save", full_disk)
  with pytest.raises(
    OSError,
    match=r"saving the checkpoint of step 2: a checkpoint needs about 0.0 MiB, .* MiB are"
    r" free",
  ) as raised:
    checkpointer.save(2, {"w": jnp.zeros(1000)})
  assert raised.value.errno == errno.ENOSPC and raised.value.filename is None
  assert checkpointer.all_steps() == [1]
  checkpointer.close()


def test_a_writer_thread_on_a_full_disk_stops_the_run_at_the_next_write_without_a_traceback(
  tmp_path, monkeypatch, capsys
):
  """tensorboardX flushes from its own thread: on a full disk that thread died with a traceback
  on stderr (beside the run's one line), and once its queue of 10 events was full the run would
  block forever. Its error is raised in the run's thread at the writer's next use instead."""
  import tensorboardX
  from tensorboardX import record_writer

  monkeypatch.setattr(threading, "excepthook", threading.excepthook)  # restored after the test
  # The thread flushes every event (not every 120 s), so that it meets the full disk at once.
  monkeypatch.setattr(
    tensorboardX, "SummaryWriter", functools.partial(tensorboardX.SummaryWriter, flush_secs=0)
  )
  flush = record_writer.RecordWriter.flush
  failed = []

  def full_disk_in_the_writer_thread(self):
    if threading.current_thread() is not threading.main_thread():
      failed.append(threading.current_thread())
      raise OSError(errno.ENOSPC, "No space left on device")
    flush(self)

  monkeypatch.setattr(record_writer.RecordWriter, "flush", full_disk_in_the_writer_thread)
  writer = bookkeeping.MetricsWriter(tmp_path)
  writer.write(0, "valid", loss=1.0)
  deadline = time.monotonic() + 60
  while not failed and time.monotonic() < deadline:
    time.sleep(0.01)
  (thread,) = failed
  thread.join(timeout=60)  # it ends on the full disk
  assert not thread.is_alive()
  with pytest.raises(OSError) as raised:
    writer.write(1, "valid", loss=1.0)
  assert raised.value.errno == errno.ENOSPC
  writer.close()  # returns: it does not wait on the dead thread
  assert "Traceback" not in capsys.readouterr().err


def test_other_threads_failures_still_reach_the_previous_excepthook(tmp_path, monkeypatch):
  seen = []
  monkeypatch.setattr(threading, "excepthook", lambda failure: seen.append(failure.exc_value))
  bookkeeping.MetricsWriter(tmp_path).close()
  full_disk = OSError(errno.ENOSPC, "No space left on device")

  def fail():
    raise full_disk

  thread = threading.Thread(target=fail)
  thread.start()
  thread.join()
  assert seen == [full_disk]


def test_only_closed_event_loop_noise_is_dropped(monkeypatch):
  seen = []
  monkeypatch.setattr(sys, "unraisablehook", seen.append)
  checkpoints._drop_closed_event_loop_noise()
  hook = sys.unraisablehook
  for error in (
    RuntimeError("Event loop is closed"),
    ImportError("sys.meta_path is None, Python is likely shutting down"),
    RuntimeError("something else"),
  ):
    hook(types.SimpleNamespace(exc_type=type(error), exc_value=error, object=None))
  # orbax's read coroutines raise their own Exception when the garbage collector closes them
  # after a failed restore; a coroutine of any other package still reaches the default hook.
  for filename in (f"{os.sep}site-packages{os.sep}orbax{os.sep}io.py", "mine.py"):
    namespace = {}
    exec(compile("async def read(): pass", filename, "exec"), namespace)
    coroutine = namespace["read"]()
    hook(types.SimpleNamespace(exc_type=Exception, exc_value=Exception(filename), object=coroutine))
    coroutine.close()
  assert [str(u.exc_value) for u in seen] == ["something else", "mine.py"]


def test_unretrieved_orbax_task_exceptions_are_not_logged():
  """A failed write's orbax tasks, collected later, are not logged with their tracebacks; other
  tasks' are."""
  checkpoints._drop_closed_event_loop_noise()
  logger = logging.getLogger("asyncio")
  for filename in (f"{os.sep}site-packages{os.sep}orbax{os.sep}serialization.py", "mine.py"):
    namespace = {}
    exec(compile("def write(): raise ValueError('No space left')", filename, "exec"), namespace)
    try:
      namespace["write"]()
    except ValueError:
      exc_info = sys.exc_info()
    record = logger.makeRecord(
      "asyncio", logging.ERROR, filename, 1, "Task exception was never retrieved", (), exc_info
    )
    assert logger.filter(record) == (filename == "mine.py")
  plain = logger.makeRecord("asyncio", logging.ERROR, "x.py", 1, "another message", (), None)
  assert logger.filter(plain)


def test_atomic_path_leaves_the_old_file_when_the_write_fails(tmp_path):
  target = tmp_path / "results.json"
  workdir.write_json_atomic(target, {"a": 1})
  with pytest.raises(RuntimeError):
    with workdir.atomic_path(target) as tmp:
      tmp.write_text("partial")
      raise RuntimeError("crash while writing")
  assert json.loads(target.read_text()) == {"a": 1}
  assert sorted(p.name for p in tmp_path.iterdir()) == ["results.json"]


def test_what_a_run_wrote_into_its_deleted_workdir_is_refused_naming_no_file_to_restore(tmp_path):
  """A workdir deleted while its run trained can come back holding only what the run wrote after
  (a checkpoint): its config files went with it, so the rerun's advice cannot be to restore them.
  A damaged config.json (the file is there) keeps the advice to restore it."""
  (tmp_path / "checkpoints" / "40").mkdir(parents=True)
  config = listops_L10.get_config()
  with pytest.raises(config_checks.ConfigError) as refused:
    workdir.prepare_workdir(str(tmp_path), config)
  message = str(refused.value)
  assert "neither config.json nor config.backup.json" in message
  assert "Use a new --workdir, or delete this one" in message
  (tmp_path / "config.json").write_text('{"truncat')
  with pytest.raises(config_checks.ConfigError, match="restore config.json, or use a new"):
    workdir.prepare_workdir(str(tmp_path), config)


def test_a_checkpoint_is_not_saved_into_a_workdir_deleted_under_the_run(tmp_path):
  """orbax would create the workdir again to hold the checkpoint alone; the save stops the run in
  the documented line instead, and nothing is created."""
  run = tmp_path / "run"
  run.mkdir()
  checkpointer = checkpoints.Checkpointer(run)
  shutil.rmtree(run)
  with pytest.raises(FileNotFoundError, match="was deleted, moved or replaced while the run"):
    checkpointer.save(3, {"members": np.zeros(2)})
  assert not run.exists()


def test_prepare_workdir_allows_safe_changes_only(tmp_path):
  config = listops_L10.get_config()
  workdir.prepare_workdir(str(tmp_path), config)
  config.log_every, config.num_epochs = 7, config.num_epochs + 5  # safe: logging, more training
  workdir.prepare_workdir(str(tmp_path), config)
  assert json.loads((tmp_path / "config.json").read_text())["log_every"] == 7
  config.learning_rate = 0.9
  with pytest.raises(config_checks.ConfigError, match=r"learning_rate \(saved 0.5, now 0.9\)"):
    workdir.prepare_workdir(str(tmp_path), config)


_SAVE_SHARDED = """
import pathlib, sys, jax, numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec
from experiments import checkpoints
mesh = Mesh(np.array(jax.devices()), ("devices",))
sharding = NamedSharding(mesh, PartitionSpec("devices"))
members = jax.device_put(np.arange(8.0).reshape(4, 2), sharding)
checkpointer = checkpoints.Checkpointer(pathlib.Path(sys.argv[1]))
checkpointer.save(3, {"members": members})
checkpointer.close()
"""


def test_a_checkpoint_saved_over_two_devices_reads_on_one(tmp_path):
  """What compare_estimators / figure_2b / the notebook do with a population trained on 2 cores."""
  flags = f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count=2"
  env = {**os.environ, "XLA_FLAGS": flags}
  saved = subprocess.run(
    [sys.executable, "-c", _SAVE_SHARDED, str(tmp_path)], env=env, capture_output=True, text=True
  )
  assert saved.returncode == 0, saved.stderr[-2000:]
  restored = checkpoints.read_checkpoint(tmp_path / "checkpoints" / "3" / "default")
  np.testing.assert_array_equal(restored["members"], np.arange(8.0).reshape(4, 2))


def test_evaluation_progress_keeps_the_sums_exactly(tmp_path):
  """The saved sums come back bit for bit, a diverged member's infinite or NaN sum included (JSON
  has neither: they are hexadecimal floats); a save within a minute of the last waits unless forced;
  the entries of another checkpoint step, image count or batch size are not resumed."""
  sums = np.array([1 / 3, -np.inf, np.nan, 2.0**-1074])
  progress = bookkeeping.EvaluationProgress(tmp_path, step=40)
  progress.save("valid", 100, 10, 30, sums, force=True)
  progress.save("test", 100, 10, 10, sums)  # too soon after the last save: not written
  done, resumed = bookkeeping.EvaluationProgress(tmp_path, step=40).resume("valid", 100, 10, 4)
  assert done == 30 and resumed.tobytes() == sums.tobytes()
  for step, images, batch_size in ((41, 100, 10), (40, 90, 10), (40, 100, 20)):
    again = bookkeeping.EvaluationProgress(tmp_path, step).resume("valid", images, batch_size, 4)
    assert again[0] == 0 and not again[1].any()
  assert bookkeeping.EvaluationProgress(tmp_path, 40).resume("test", 100, 10, 4)[0] == 0
  progress.clear()
  assert not (tmp_path / bookkeeping.EvaluationProgress.FILE).exists()


def test_the_stop_answers_say_what_a_second_signal_keeps():
  """Before the first checkpoint is saved, neither answer speaks of one: a second Ctrl-C keeps
  nothing (and the rerun starts anew)."""
  import signal as signals

  from experiments import bookkeeping

  for saved, first, second in (
    (True, "keeping the last saved checkpoint.", "the last saved checkpoint stays"),
    (
      False,
      "before any checkpoint is saved.",
      "before the run's first checkpoint: nothing is saved",
    ),
  ):
    stop = bookkeeping.StopSignals(lambda: " at step 8", saved=lambda saved=saved: saved)
    try:
      assert stop.answer(signals.SIGINT, 1).startswith(
        "SIGINT: stopping after this block at step 8"
      )
      assert stop.answer(signals.SIGINT, 1).endswith(first)
      assert second in stop.answer(signals.SIGTERM, 2)
    finally:
      stop.restore()


def test_a_signal_while_the_processes_agree_is_announced_at_the_next_blocks_end(monkeypatch):
  """In a two-process job, SIGTERM to process 0 while the processes gathered their signals
  (before block 150..200) was announced as "at step 150" and the job stopped at 200: it missed
  that gather. The answer given during the gather now names the step the job stops at."""
  import signal as signals
  import types

  from experiments import population

  run = types.SimpleNamespace(
    _block=(100, 150),
    _next_block=(150, 200),
    progress=types.SimpleNamespace(seconds_to=lambda last, first: 1.0),
  )
  run.stop = bookkeeping.StopSignals(lambda: population.Run._where(run))
  answers = []

  def gather(own):
    answers.append(run.stop.answer(signals.SIGTERM, 1))  # the signal, while the gather runs
    return np.array([own, 0])

  monkeypatch.setattr(bookkeeping.jax, "process_count", lambda: 2)
  monkeypatch.setattr(bookkeeping.multihost_utils, "process_allgather", gather)
  try:
    assert not run.stop.requested  # nobody had a signal when the values were taken
    assert answers[0].startswith("SIGTERM: stopping after the next block at step 200 (its end")
    # Outside the gather (during a block), the block in progress is the one announced.
    assert run.stop.answer(signals.SIGTERM, 1).startswith(
      "SIGTERM: stopping after this block at step 150 (this block's end"
    )
  finally:
    run.stop.restore()
