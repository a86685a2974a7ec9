"""What a quiet run (``--verbosity 0``) leaves out of its stderr: XLA's slow-operation alarms.

XLA's C++ logging writes an E-line from ``slow_operation_alarm.cc`` and its banner ("Very slow
compile? ...", "Constant folding an instruction is taking > 1s") to the process's stderr directly,
past Python's logging filters, though a long compilation is no error of the run. So a
single-process run passes its stderr (file descriptor 2, C++ included) through a small filter
process (:func:`start`), and a multi-process job through its supervisor
(:mod:`experiments.distributed`); both drop those lines and keep every other line, in order. The
filter process reads until the run's end of the pipe closes, however the run ends (a signal, a
crash, ``os._exit``): nothing the run wrote is lost.

This file runs as the filter process itself (``python log_filter.py``): it imports nothing of the
project.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

# A log line (absl's format, Python's or C++'s) and its source file.
LOG_LINE = re.compile(r"^[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+\s+\d+ ([\w.]+):\d+\]")
_ALARM = re.compile(r"slow_operation_alarm")
_ALARM_END = "attach the results"  # the last sentence of each of XLA's alarm messages
_ASTERISKS = re.compile(r"^\*+\s*$")
_MAX_ALARM_LINES = 12
# Lines the project's own code starts with: never taken for the continuation of a library's line.
_OWN_LINE = re.compile(r"^(Traceback|Fatal Python error|error:|interrupted:|finished:|warning:)")


class AlarmFilter:
  """Line by line: whether a line is part of XLA's slow-operation alarm.

  An alarm is its E-line and the message's lines after it, which end with "... and attach the
  results." (the slow-compile banner adds a closing line of asterisks); a log line, a line of the
  project's own, or _MAX_ALARM_LINES lines end it too, so that no other output is lost with it.
  """

  def __init__(self):
    self._lines_left = 0  # > 0: inside an alarm
    self._closing = False  # its last text line was seen: only a line of asterisks may follow

  def keeps(self, line: str) -> bool:
    logged = LOG_LINE.match(line)
    if logged and _ALARM.search(logged.group(1)):
      self._lines_left, self._closing = _MAX_ALARM_LINES, False
      return False
    if logged or _OWN_LINE.match(line) or self._closing and not _ASTERISKS.match(line):
      self._lines_left = 0
    if self._lines_left <= 0:
      return True
    self._lines_left -= 1
    self._closing = self._closing or _ALARM_END in line
    if self._closing and _ASTERISKS.match(line):
      self._lines_left = 0
    return False


def start() -> None:
  """Routes this process's stderr through a filter process that drops XLA's alarms (see the
  module's docstring); leaves stderr as it is when the filter cannot start."""
  read, write = os.pipe()
  try:
    subprocess.Popen(
      [sys.executable, "-S", os.path.abspath(__file__)],
      stdin=read,
      stdout=sys.stderr.fileno(),
      # Its own session: a terminal's Ctrl-C, or a kill of the run's process group, does not end
      # it before it has passed on the run's last lines.
      start_new_session=True,
    )
  except OSError:
    os.close(write)
    return
  finally:
    os.close(read)
  sys.stderr.flush()
  os.dup2(write, sys.stderr.fileno())
  os.close(write)


def _filter(source, sink) -> None:
  alarms = AlarmFilter()
  for line in source:
    if alarms.keeps(line.decode(errors="replace")):
      sink.write(line)
      sink.flush()


if __name__ == "__main__":
  try:
    _filter(sys.stdin.buffer, sys.stdout.buffer)
  except (BrokenPipeError, KeyboardInterrupt):  # whoever read the run's stderr has gone
    pass
