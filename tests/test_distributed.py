"""Multi-process populations through the real CLI: two processes on 127.0.0.1, JAX's runtime over
gloo.

Each test starts the processes the way the README documents (GR_JAX_DISTRIBUTED=1 and
JAX_COORDINATOR_ADDRESS / JAX_NUM_PROCESSES / JAX_PROCESS_ID), each with one CPU device, so
that the population's members are split over a mesh of two devices in two processes.
"""

import contextlib
import io
import json
import os
import signal
import socket
import subprocess
import time

import pytest

from experiments import distributed
from tests.cli import ROOT, copy_of_the_code, edited_copy_of_the_code, main_command, run_main
from tests.test_listops_experiment import TINY as LISTOPS_TINY
from tests.test_vae_experiment import TINY as VAE_TINY

pytestmark = pytest.mark.slow

# A silent process is noticed by the coordination service within this many seconds.
HEARTBEAT_TIMEOUT_S = 10
# Start-up and compilation of a tiny model in two processes sharing two cores takes ~20 s.
TIMEOUT_S = 300


def _free_port() -> int:
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


def _start(
  config: str,
  workdir,
  *overrides: str,
  num_processes: int = 2,
  port: int | None = None,
  process_ids=None,
  environment=None,
  cwd=ROOT,
) -> list[subprocess.Popen]:
  """The job's processes (each in its own session: a test can kill one with its children)."""
  port = port or _free_port()
  command = main_command(config, workdir, *overrides)
  processes = []
  for i in range(num_processes) if process_ids is None else process_ids:
    env = {
      **os.environ,
      "GR_JAX_DISTRIBUTED": "1",
      "JAX_COORDINATOR_ADDRESS": f"127.0.0.1:{port}",
      "JAX_NUM_PROCESSES": str(num_processes),
      "JAX_PROCESS_ID": str(i),
      "GR_JAX_HEARTBEAT_TIMEOUT_S": str(HEARTBEAT_TIMEOUT_S),
      **(environment or {}),
    }
    processes.append(
      subprocess.Popen(
        command,
        cwd=cwd,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        # SIGHUP's default action, even when the tests run under nohup (which ignores it, and the
        # job then rightly ignores it too): the tests send it.
        preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_DFL),
      )
    )
  return processes


def _finish(processes: list[subprocess.Popen], timeout: float = TIMEOUT_S) -> list[tuple[int, str]]:
  """Each process's exit status and stderr; every process ends by itself within ``timeout``."""
  deadline = time.monotonic() + timeout
  results = []
  for process in processes:
    try:
      _, stderr = process.communicate(timeout=max(1.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
      stderrs = [stderr for _, stderr in results]  # of the processes that ended: read already
      for p in processes:
        with contextlib.suppress(ProcessLookupError):  # a group whose processes all ended
          os.killpg(p.pid, signal.SIGKILL)
      stderrs += [p.communicate()[1] for p in processes[len(results) :]]
      tails = [f"process {i}: ...{stderr[-2000:]}" for i, stderr in enumerate(stderrs)]
      raise AssertionError(f"the job did not end within {timeout} s\n" + "\n".join(tails))
    results.append((process.returncode, stderr))
  return results


def _run_job(config: str, workdir, *overrides: str) -> list[str]:
  results = _finish(_start(config, workdir, *overrides))
  for i, (code, stderr) in enumerate(results):
    assert code == 0, f"process {i}: {stderr[-3000:]}"
  return [stderr for _, stderr in results]


def _outputs(workdir) -> tuple[list[dict], dict]:
  """metrics.jsonl's records and results.json less what differs by machine (timings, device,
  shards)."""
  records = [json.loads(line) for line in (workdir / "metrics.jsonl").read_text().splitlines()]
  results = json.loads((workdir / "results.json").read_text())
  for name in ("device", "training_wall_time_s", "training_wall_time_steps", "final_eval_seconds"):
    results.pop(name, None)
  return records, results


def _wait_until(condition, processes, what: str, timeout: float = TIMEOUT_S) -> None:
  """Polls ``condition`` while every process runs; fails naming ``what`` after ``timeout``."""
  deadline = time.monotonic() + timeout
  while not condition():
    assert time.monotonic() < deadline and all(p.poll() is None for p in processes), what
    time.sleep(0.2)


def _wait_for(path, processes) -> None:
  _wait_until(path.exists, processes, f"no {path}")


def _checkpoint_steps(workdir) -> list[int]:
  directory = workdir / "checkpoints"
  if not directory.is_dir():
    return []
  return sorted(int(p.name) for p in directory.iterdir() if p.name.isdigit())


def _wait_for_a_new_checkpoint(workdir, processes) -> None:
  """Waits until the job (just started) has written a checkpoint: its processes have joined and
  train.

  A checkpoint that existed before the start says nothing: a stop's step depends on the moment the
  signal met the job, so a fixed step may have been written by an earlier round already.
  """
  before = max(_checkpoint_steps(workdir), default=0)
  _wait_until(
    lambda: max(_checkpoint_steps(workdir), default=0) > before,
    processes,
    f"no checkpoint after step {before} in {workdir}",
  )


def _kill(process: subprocess.Popen) -> None:
  os.killpg(process.pid, signal.SIGKILL)
  process.wait()


VAE = (
  "configs/vae_16ary.py",
  *VAE_TINY,
  "population.size=4",
  "estimator=st_gs",
  "variance_every=0",
  "mse_every=0",
  "eval_every=0",
  # Far more steps than the stops below need: each round must stop the job before its end.
  "num_steps=3000",
  "steps_per_call=100",
  "log_every=100",
  "checkpoint_every=100",
)


def test_vae_population_over_two_processes_equals_one_process_and_resumes_after_stops(tmp_path):
  run_main(*VAE[:1], tmp_path / "one", *VAE[1:])
  job = tmp_path / "two"
  # Both processes killed (SIGKILL) once a checkpoint exists.
  processes = _start(*VAE[:1], job, *VAE[1:])
  _wait_for_a_new_checkpoint(job, processes)
  for process in processes:
    _kill(process)
  # Resumed; SIGTERM (a scheduler's preemption) to one process, at several moments: all stop at
  # the same step. Process 0 decides with process 1 from the signals gathered at the same point.
  # SIGHUP (a closed terminal) to process 0 stops the job as SIGTERM does. (Each round signals once
  # the resumed job has written a checkpoint of its own.)
  for signalled, delay, sent in (
    (1, 0.0, signal.SIGTERM),
    (0, 0.2, signal.SIGTERM),
    (0, 0.5, signal.SIGHUP),
  ):
    processes = _start(*VAE[:1], job, *VAE[1:])
    _wait_for_a_new_checkpoint(job, processes)
    time.sleep(delay)
    processes[signalled].send_signal(sent)
    stopped = _finish(processes)
    if sent == signal.SIGHUP:
      assert "SIGHUP (the terminal closed): stopping the job as for SIGTERM." in stopped[0][1]
    lasts = [stderr.strip().splitlines()[-1] for _, stderr in stopped]
    assert [code for code, _ in stopped] == [128 + signal.SIGTERM] * 2, lasts
    assert lasts[0] == lasts[1] and lasts[0].startswith("interrupted: stopped by SIGTERM at step ")
    assert not any("Traceback" in stderr or "Fatal Python" in stderr for _, stderr in stopped)
    assert not (job / "results.json").exists(), "the job ended before the signal: raise num_steps"
  # Resumed; then process 1 alone dies: process 0 stops by itself, in one line naming it.
  processes = _start(*VAE[:1], job, *VAE[1:])
  _wait_for_a_new_checkpoint(job, processes)
  lost_at = time.monotonic()
  _kill(processes[1])
  ((code, stderr),) = _finish(processes[:1], timeout=120)
  stopped_after = time.monotonic() - lost_at
  last = stderr.strip().splitlines()[-1]
  assert code == 1 and "Traceback" not in stderr and "Check failure" not in stderr
  assert (
    last.startswith("error: process 0 of 2 stopped: process 1 ")
    and "resume from its last checkpoint" in last
  )
  assert stopped_after < HEARTBEAT_TIMEOUT_S + 30
  assert not (job / "results.json").exists(), "the job ended before process 1 died: raise num_steps"
  # Resumed again to the end: the same numbers as the uninterrupted one-process run.
  last_checkpoint = max(_checkpoint_steps(job))
  zero, one = _run_job(*VAE[:1], job, *VAE[1:])
  assert f"resumed from the checkpoint at step {last_checkpoint}" in zero
  # Process 0 alone logs the progress.
  assert "step 3000/3000" in zero and "step 3000/3000" not in one
  assert _outputs(job) == _outputs(tmp_path / "one")
  assert sorted(p.name for p in job.iterdir() if p.name.startswith(".lock")) == []


def test_listops_population_over_two_processes_equals_one_process_and_continues_in_one(tmp_path):
  settings = ("configs/listops_L10.py", *LISTOPS_TINY, "population.size=2", "estimator=st_gs")
  run_main(*settings[:1], tmp_path / "one", *settings[1:], "num_epochs=2")
  _run_job(*settings[:1], tmp_path / "two", *settings[1:], "num_epochs=2")
  assert _outputs(tmp_path / "two") == _outputs(tmp_path / "one")
  # The two processes' checkpoint (each wrote its shards) restores into one process with one device.
  for workdir in (tmp_path / "one", tmp_path / "two"):
    run_main(*settings[:1], workdir, *settings[1:], "num_epochs=3")
  assert _outputs(tmp_path / "two") == _outputs(tmp_path / "one")


def test_a_process_started_from_a_copy_of_the_same_sources_runs_in_the_job(tmp_path):
  """The same sources and versions are the same code, whatever the git commit (here: none, in
  the copy); only the sources or versions tell other code apart (next test)."""
  tiny = ("configs/vae_16ary.py", *VAE_TINY, "num_steps=2")
  copy = copy_of_the_code(tmp_path / "copy")
  port = _free_port()
  processes = _start(*tiny[:1], tmp_path / "run", *tiny[1:], port=port, process_ids=[0])
  processes += _start(*tiny[:1], tmp_path / "run", *tiny[1:], port=port, process_ids=[1], cwd=copy)
  results = _finish(processes)
  assert [code for code, _ in results] == [0, 0], results[1][1][-2000:]
  assert json.loads((tmp_path / "run" / "results.json").read_text())["steps"] == 2


def _one_line_each(results: list[tuple[int, str]], *expected: str) -> None:
  for code, stderr in results:
    last = stderr.strip().splitlines()[-1]
    assert code != 0 and "Traceback" not in stderr and "Check failure" not in stderr, stderr[-2000:]
    assert all(part in last for part in expected), last


def test_bad_multi_process_jobs_are_one_line_each(tmp_path):
  tiny = ("configs/vae_16ary.py", *VAE_TINY, "num_steps=2")
  # Members that do not divide over the job's devices.
  _one_line_each(
    _finish(_start(*tiny[:1], tmp_path / "a", *tiny[1:], "population.size=3")),
    "this job's 3 members do not divide evenly over its 2 devices",
  )
  # A process started with another config.
  port = _free_port()
  processes = _start(*tiny[:1], tmp_path / "b", *tiny[1:], port=port, process_ids=[0])
  processes += _start(*tiny[:1], tmp_path / "b", *tiny[1:], "tau=0.7", port=port, process_ids=[1])
  _one_line_each(_finish(processes), "other configs than process 0's (process 1: tau (0.5 vs 0.7))")
  # A process started from other code (its sources edited).
  copy = edited_copy_of_the_code(tmp_path / "copy")
  port = _free_port()
  processes = _start(*tiny[:1], tmp_path / "code", *tiny[1:], port=port, process_ids=[0])
  processes += _start(*tiny[:1], tmp_path / "code", *tiny[1:], port=port, process_ids=[1], cwd=copy)
  _one_line_each(
    _finish(processes),
    "run other code than process 0's (process 1: ",
    "the sources of gr_jax/ and experiments/ (sha256 ",
  )
  assert not (tmp_path / "code" / "checkpoints").exists()
  # A workdir that a single-process run holds: the job is refused (one lock for every kind of run).
  single = subprocess.Popen(
    main_command(*tiny[:1], tmp_path / "held", *tiny[1:-1], "num_steps=100000"),
    cwd=ROOT,
    stdout=subprocess.DEVNULL,
    stderr=subprocess.DEVNULL,
    start_new_session=True,
  )
  try:
    _wait_for(tmp_path / "held" / "metrics.jsonl", [single])
    _one_line_each(
      _finish(_start(*tiny[:1], tmp_path / "held", *tiny[1:-1], "num_steps=100000")),
      f"--workdir {tmp_path / 'held'} is in use by another run (pid {single.pid} on ",
    )
  finally:
    _kill(single)
  # A coordinator that nobody starts: process 1 alone gives up after GR_JAX_INIT_TIMEOUT_S.
  started = time.monotonic()
  alone = _finish(
    _start(
      *tiny[:1],
      tmp_path / "c",
      *tiny[1:],
      process_ids=[1],
      environment={"GR_JAX_INIT_TIMEOUT_S": "5"},
    ),
    timeout=120,
  )
  _one_line_each(alone, "the job did not come together within GR_JAX_INIT_TIMEOUT_S = 5 s")
  # While it waited, it said so.
  assert "process 1 of 2: joining the job (coordinator 127.0.0.1:" in alone[0][1]
  assert "waiting up to 5 s for every process (GR_JAX_INIT_TIMEOUT_S)" in alone[0][1]
  assert time.monotonic() - started < 60


# XLA's alarm as its C++ logging writes it: an E-line from slow_operation_alarm.cc and its banner.
_SLOW_COMPILE = (
  "E1127 19:00:00.123456   1234 slow_operation_alarm.cc:140] \n",
  "********************************\n",
  "[Compiling module jit_train_block] Very slow compile? If you want to file a bug, run with envvar"
  " XLA_FLAGS=--xla_dump_to=/tmp/foo and attach the results.\n",
  "********************************\n",
)
_PROGRESS = "I1127 19:00:01.000000 140287944907648 bookkeeping.py:354] step 1/4  ...\n"


def _shown(lines, quiet):
  shown = distributed._StderrFilter(quiet)
  return "".join(shown.feed(line) for line in lines) + shown.rest()


def test_a_quiet_job_leaves_out_xlas_slow_operation_alarm_and_keeps_everything_else():
  lines = [_PROGRESS, *_SLOW_COMPILE, _PROGRESS]
  assert _shown(lines, quiet=True) == _PROGRESS * 2
  assert _shown(lines, quiet=False) == "".join(lines)  # --verbosity=1 shows it
  # A Python traceback right after the alarm is the run's own output: never dropped with it.
  traceback = ["Traceback (most recent call last):\n", '  File "x.py", line 1\n', "ValueError\n"]
  assert _shown([*_SLOW_COMPILE, *traceback], quiet=True) == "".join(traceback)
  assert _shown([*_SLOW_COMPILE, "error: one line\n"], quiet=True) == "error: one line\n"


def test_a_quiet_job_leaves_out_gloos_connection_lines(capsys):
  stdout = (
    "[Gloo] Rank 0 is connected to 1 peer ranks. Expected number of connected peer ranks is : 1\n"
  )
  distributed._pass_stdout(io.StringIO(stdout + "a line of the run\n"), quiet=True)
  assert capsys.readouterr().out == "a line of the run\n"
  distributed._pass_stdout(io.StringIO(stdout), quiet=False)
  assert capsys.readouterr().out == stdout


def test_a_coordinator_port_in_use_is_one_line_before_jax_starts(tmp_path):
  with socket.socket() as holder:
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    port = holder.getsockname()[1]
    tiny = ("configs/vae_16ary.py", *VAE_TINY, "num_steps=2")
    started = time.monotonic()
    _one_line_each(
      _finish(_start(*tiny[:1], tmp_path, *tiny[1:], port=port, process_ids=[0]), timeout=120),
      f"the coordinator's port {port} (JAX_COORDINATOR_ADDRESS='127.0.0.1:{port}') cannot be"
      " served on this host",
      "Pick a free port",
    )
    assert time.monotonic() - started < 60  # refused at once, not after the start-up timeout
