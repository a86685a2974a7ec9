"""Multi-process jobs (``GR_JAX_DISTRIBUTED=1``): start-up, one config for all, a lost process in
one line.

Every process runs the same command; JAX joins them into one job
(``jax.distributed``) whose devices form one mesh. The population's members are
split over all the devices; process 0 alone writes the workdir's metrics,
results and logs, every process writes its own shards of each checkpoint.

When one process dies, the others cannot go on: JAX stops them (a failed
collective, or the coordination service's missed heartbeats). So that this
ends in one line saying which process was lost, rather than in the C++ abort
and stack dump JAX prints, the command runs as a small supervisor around the
training process (:func:`supervise`), which passes its output through and
replaces such an abort by that line.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time

import jax
import numpy as np
from absl import logging
from jax.experimental import multihost_utils
from ml_collections import ConfigDict

from experiments import config_checks, log_filter, passed_on_signals, provenance, workdir

REQUESTED = "GR_JAX_DISTRIBUTED"
_WORKER = "GR_JAX_WORKER"  # set by the supervisor in the training process it starts
# (environment variable, jax.distributed.initialize argument, type). The timeouts bound how long a
# process waits for the others at start-up and how soon a silent (dead or hung) process is noticed.
_SETTINGS = (
  ("JAX_COORDINATOR_ADDRESS", "coordinator_address", str),
  ("JAX_NUM_PROCESSES", "num_processes", int),
  ("JAX_PROCESS_ID", "process_id", int),
  ("GR_JAX_INIT_TIMEOUT_S", "initialization_timeout", int),
  ("GR_JAX_HEARTBEAT_TIMEOUT_S", "heartbeat_timeout_seconds", int),
)
# What JAX prints when the coordination service stops a process because another one failed.
_FATAL = "Terminating process because the JAX distributed service detected fatal errors"
_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
# The coordination service's source files (in log lines: log_filter.LOG_LINE).
_COORDINATION = re.compile(r"coordination|preemption|client\.h")
# Gloo's connection lines (stdout), which a quiet job (--verbosity 0) leaves out, as it does XLA's
# slow-operation alarms (log_filter) and the libraries' INFO lines.
_GLOO = re.compile(r"^\[Gloo\] ")


def requested() -> bool:
  return os.environ.get(REQUESTED) == "1"


def _who() -> str:
  return (
    f"process {os.environ.get('JAX_PROCESS_ID', '?')} of {os.environ.get('JAX_NUM_PROCESSES', '?')}"
  )


def initialize() -> None:
  """``jax.distributed.initialize`` from the environment (see _SETTINGS); on CPUs, collectives over
  gloo.

  On Cloud TPU pods and under SLURM / Open MPI, JAX finds the coordinator and
  the process's index by itself; elsewhere JAX_COORDINATOR_ADDRESS,
  JAX_NUM_PROCESSES and JAX_PROCESS_ID say them.

  Raises:
    config_checks.ConfigError: a setting is not a number, or the job did not come
      together within the initialization timeout (one line).
  """
  if jax.distributed.is_initialized():
    return
  given = {}
  for name, argument, kind in _SETTINGS:
    if os.environ.get(name):
      try:
        given[argument] = kind(os.environ[name])
      except ValueError:
        raise config_checks.ConfigError(f"{name}={os.environ[name]!r} must be an integer") from None
  if given.get("process_id") == 0 and given.get("coordinator_address"):
    _require_free_port(given["coordinator_address"])
  jax.config.update("jax_cpu_collectives_implementation", "gloo")
  # Said before the wait: a process whose peers never come prints nothing else until the timeout.
  logging.info(
    "%s: joining the job (coordinator %s); waiting up to %d s for every process"
    " (GR_JAX_INIT_TIMEOUT_S)",
    _who(),
    given.get("coordinator_address", "found by JAX"),
    given.get("initialization_timeout", 300),
  )
  try:
    jax.distributed.initialize(**given)
    jax.devices()  # the processes exchange their devices here: fails when one is missing
  except (RuntimeError, ValueError) as e:
    first = (str(e).strip().splitlines() or [""])[0][:300]
    raise config_checks.ConfigError(
      f"{_who()}: the multi-process job did not start ({type(e).__name__}: {first}). Start every"
      " process"
      " with the same JAX_COORDINATOR_ADDRESS (host:port of process 0, reachable from each host),"
      " JAX_NUM_PROCESSES and its own JAX_PROCESS_ID (0 .. JAX_NUM_PROCESSES - 1); the wait is"
      f" GR_JAX_INIT_TIMEOUT_S (now {given.get('initialization_timeout', 300)} s)."
    ) from None


def _require_free_port(address: str) -> None:
  """Process 0 serves the coordinator on the port of ``address``: refuses one in use on this host
  (JAX's own message is "Failed to start RPC server", after a C++ error line)."""
  port = address.rpartition(":")[2]
  if not port.isdigit():
    raise config_checks.ConfigError(
      f"JAX_COORDINATOR_ADDRESS={address!r} must be host:port (the host of process 0)"
    )
  with socket.socket() as probe:
    probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the coordinator's server
    try:
      probe.bind(("", int(port)))
    except OSError as e:
      raise config_checks.ConfigError(
        f"{_who()}: the coordinator's port {port} (JAX_COORDINATOR_ADDRESS={address!r}) cannot be"
        f" served on this host ({e.strerror}): another job or program holds it. Pick a free port"
        " (e.g. python -c \"import socket; s = socket.socket(); s.bind(('', 0));"
        ' print(s.getsockname()[1])") and start every process with it.'
      ) from None


def check_same_config(config: ConfigDict, workdir_path: str) -> None:
  """Every process must run the same code (provenance.code_identity) on the same config in the
  same workdir.

  Raises:
    config_checks.ConfigError: in every process, when one was started from other
      code, or with another config or workdir, than process 0 (one line naming
      the processes and what differs).
  """
  if jax.process_count() == 1:
    return
  mine = {
    "code": provenance.flat(provenance.code_identity()),
    "config": {
      **workdir.flatten(json.loads(json.dumps(config.to_dict(), default=str))),
      "--workdir": workdir_path,
    },
  }
  text = np.frombuffer(json.dumps(mine, sort_keys=True).encode(), np.uint8)
  digests = multihost_utils.process_allgather(
    np.frombuffer(hashlib.sha256(text).digest(), np.uint8)
  )
  if (digests == digests[0]).all():
    return
  # The settings themselves (padded to one length) say what differs.
  length = int(multihost_utils.process_allgather(np.array([len(text)])).max())
  texts = multihost_utils.process_allgather(np.pad(text, (0, length - len(text))))
  settings = [json.loads(bytes(t).rstrip(b"\0")) for t in texts]
  changed = {
    process: provenance.differences(settings[0]["code"], theirs["code"])
    for process, theirs in enumerate(settings[1:], 1)
  }
  code = [f"process {process}: {'; '.join(said)}" for process, said in changed.items() if said]
  if code:
    raise config_checks.ConfigError(
      f"the processes of this job run other code than process 0's ({'; '.join(code)}, from"
      " process 0's to theirs). Start every process from the same checkout, in the same"
      " environment."
    )
  differing = []
  for process, theirs in enumerate(settings[1:], 1):
    ours, theirs = settings[0]["config"], theirs["config"]
    fields = [
      f"{field} ({ours.get(field)!r} vs {theirs.get(field)!r})"
      for field in sorted(set(theirs) | set(ours))
      if theirs.get(field) != ours.get(field)
    ]
    if fields:
      differing.append(f"process {process}: {', '.join(fields)}")
  if not differing:  # only the git commits differ, over the same sources: the same code
    return
  raise config_checks.ConfigError(
    f"the processes of this job were started with other configs than process 0's"
    f" ({'; '.join(differing)}). Start every process with the same command."
  )


def lost_peer(error: Exception) -> str | None:
  """The one line for a collective that failed because another process is gone, else None."""
  text = str(error)
  if jax.process_count() == 1 or not re.search(
    r"Gloo|Connection closed|connection reset|UNAVAILABLE", text
  ):
    return None
  others = [i for i in range(jax.process_count()) if i != jax.process_index()]
  lost = others[0] if len(others) == 1 else "another process"
  return (
    f"error: {_who()} stopped: process {lost} of the job is gone (a collective with it failed: "
    f"{text.strip().splitlines()[0][:160]}). Run the job again (every process) to resume from its"
    " last"
    " checkpoint."
  )


def _why_stopped(lines: list[str]) -> str:
  """Why JAX's coordination service stopped the training process (which process it lost), from its
  last lines."""
  text = "\n".join(lines)
  if "RegisterTask" in text:
    return (
      f"the job did not come together within GR_JAX_INIT_TIMEOUT_S ="
      f" {os.environ.get('GR_JAX_INIT_TIMEOUT_S', 300)} s: start every process (JAX_PROCESS_ID 0 .."
      f" JAX_NUM_PROCESSES - 1), with JAX_COORDINATOR_ADDRESS ="
      f" {os.environ.get('JAX_COORDINATOR_ADDRESS')!r} the host:port of process 0, reachable from"
      " each host (if process 0 stopped with an error, its own message says why)"
    )
  dead = re.findall(r"Task (\d+) heartbeat timeout", text)
  unhealthy = re.search(
    r"tasks are unhealthy \(stopped sending heartbeats\):\s*\n((?:\d+\s*\n?)+)", text
  )
  if unhealthy:
    dead += unhealthy.group(1).split()
  if dead:
    what = f"process {', '.join(sorted(set(dead)))} stopped sending heartbeats (it died, or hangs)"
  elif "Socket closed" in text or "Connection refused" in text:
    what = "the connection to process 0 (the coordinator) is lost: process 0 died"
  else:
    what = "another process of the job died"
  return (
    f"{what}; JAX stops every process of the job when one is lost. Run the job again (every"
    " process) to"
    " resume from its last checkpoint"
  )


class _StderrFilter:
  """Decides, line by line, what of the training process's stderr the supervisor shows.

  The coordination service's lines are held back (and dropped if they end in JAX's abort, which
  the supervisor replaces by one line); a quiet run drops XLA's slow-operation alarms. A log
  line's continuation lines (not log lines themselves) go with it.
  """

  def __init__(self, quiet: bool):
    self.quiet = quiet
    self.alarms = log_filter.AlarmFilter()
    self.held: list[str] = []
    self.aborted = False

  def feed(self, line: str) -> str:
    """What to write for ``line`` now ('' while it is held or dropped)."""
    self.aborted = self.aborted or _FATAL in line
    if self.aborted:
      return ""
    if not self.alarms.keeps(line) and self.quiet:
      return ""
    logged = log_filter.LOG_LINE.match(line)
    if logged and _COORDINATION.search(logged.group(1)) or self.held and not logged:
      self.held.append(line)
      return ""
    shown, self.held = "".join(self.held) + line, []
    return shown

  def rest(self) -> str:
    """What is still held when the process has ended without JAX's abort."""
    return "" if self.aborted else "".join(self.held)


def _pass_stdout(stream, quiet: bool) -> None:
  for line in stream:
    if not (quiet and _GLOO.match(line)):
      sys.stdout.write(line)
      sys.stdout.flush()


def supervise(argv: list[str], quiet: bool) -> int:
  """Runs this command again as the training process and returns its exit status.

  Its output passes through (less, when ``quiet``, XLA's alarms and gloo's lines);
  SIGINT / SIGTERM are passed on, SIGHUP as SIGTERM (the run saves a checkpoint and stops). If
  JAX aborts it because another process failed, the abort's dump is replaced by one line naming
  the lost process.
  """
  command = [sys.executable, "-m", "experiments.main", *argv[1:]]
  signals = {s: s for s in _STOP_SIGNALS}
  # A closed terminal (SIGHUP, unless nohup ignores it) stops the job as SIGTERM does, with a
  # checkpoint in every process, rather than killing this process and losing it to the others.
  if signal.getsignal(signal.SIGHUP) is not signal.SIG_IGN:
    signals[signal.SIGHUP] = signal.SIGTERM
  note = {signal.SIGHUP: "SIGHUP (the terminal closed): stopping the job as for SIGTERM."}
  # The handlers first: a signal while the process is being started is sent to it once it exists.
  with passed_on_signals.PassOn(signals, note) as pass_on:
    process = pass_on.start(
      command,
      stdout=subprocess.PIPE,
      stderr=subprocess.PIPE,
      text=True,
      errors="replace",
      env={**os.environ, _WORKER: str(os.getpid())},
    )
    stdout = threading.Thread(target=_pass_stdout, args=(process.stdout, quiet), daemon=True)
    stdout.start()
    shown = _StderrFilter(quiet)
    recent: list[str] = []
    for line in process.stderr:
      recent = (recent + [line])[-200:]
      sys.stderr.write(shown.feed(line))
      sys.stderr.flush()
    code = process.wait()
    sys.stderr.write(shown.rest())
    stdout.join()
  if shown.aborted:
    print(f"error: {_who()} stopped: {_why_stopped(recent)}.", file=sys.stderr)
    return 1
  if code < 0:
    print(
      f"error: {_who()}: its training process was killed ({signal.Signals(-code).name}). Run the"
      " job again"
      " (every process) to resume from its last checkpoint.",
      file=sys.stderr,
    )
    return 128 - code
  return code


def in_worker() -> bool:
  return bool(os.environ.get(_WORKER))


_PR_SET_PDEATHSIG = 1  # linux/prctl.h


def stop_with_supervisor() -> None:
  """In the training process: exits at once if the supervisor is killed (no process left behind).

  The supervisor started it in its own process group, so a SIGKILL to the supervisor's group does
  not reach it: on Linux the kernel kills it with its parent (no step is trained, no checkpoint
  written after the supervisor's end); elsewhere a thread notices within a second.
  """
  supervisor = int(os.environ[_WORKER])
  if sys.platform.startswith("linux"):
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)

  def watch():
    while os.getppid() == supervisor:
      time.sleep(1.0)
    os._exit(1)

  threading.Thread(target=watch, daemon=True, name="supervisor-watch").start()
