"""Stop signals that a parent passes on to the child process running its training.

A study's arm (``experiments.studies.launch.train``) and a multi-process job's training process
(``experiments.distributed.supervise``) are children in their own process group, so a signal meant
for the job reaches them only through their parent. :class:`PassOn` installs the parent's handlers
*before* the child is started: a signal that comes while the child's process is being created is
kept and sent once it exists, so none is lost to the parent alone (which would leave the child
training, an orphan, after the parent is gone).
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
from collections.abc import Mapping


class PassOn:
  """Within its ``with`` block, each signal in ``signals`` is sent on to the child that
  :meth:`start` starts, as the signal it maps to (``{SIGHUP: SIGTERM}`` renames one).

  Args:
    signals: received signal -> the signal the child is sent.
    notes: received signal -> a line written to stderr when it is received (why it is renamed).

  ``received`` lists the signals received in the block, in order. Outside the main thread no
  handler can be installed: the block then passes nothing on, and the parent's own handling stays.
  The previous handlers come back when the block ends.
  """

  def __init__(self, signals: Mapping[int, int], notes: Mapping[int, str] | None = None):
    self._signals = dict(signals)
    self._notes = dict(notes or {})
    self._child: subprocess.Popen | None = None
    self._pending: list[int] = []
    self._previous: dict[int, object] = {}
    self.received: list[int] = []

  def _handle(self, signum, frame):
    del frame
    self.received.append(signum)
    if signum in self._notes:
      print(self._notes[signum], file=sys.stderr, flush=True)
    if self._child is None:
      self._pending.append(self._signals[signum])
    else:
      self._child.send_signal(self._signals[signum])

  def start(self, command: list[str], **popen_kwargs) -> subprocess.Popen:
    """Starts the child (``subprocess.Popen(command, **popen_kwargs)``) in its own process group:
    a signal sent to the whole job (a scheduler's, a terminal's Ctrl-C) reaches it once, passed on
    from here, not twice (a second stop signal quits at once, before its checkpoint). The signals
    received so far are sent to it now, the later ones at once."""
    child = subprocess.Popen(command, process_group=0, **popen_kwargs)
    self._child = child
    while self._pending:
      child.send_signal(self._pending.pop(0))
    return child

  def __enter__(self) -> PassOn:
    if threading.current_thread() is threading.main_thread():
      self._previous = {s: signal.signal(s, self._handle) for s in self._signals}
    return self

  def __exit__(self, *exc_info) -> None:
    for signum, handler in self._previous.items():
      signal.signal(signum, handler)
