"""experiments/log_filter.py: a quiet run's stderr without XLA's slow-operation alarms, and
nothing else lost."""

import subprocess
import sys
import textwrap

from experiments import log_filter
from tests.cli import ROOT

# XLA's two alarms as its C++ logging writes them (slow_operation_alarm.cc).
SLOW_COMPILE = (
  "E1127 19:00:00.123456   1234 slow_operation_alarm.cc:140] \n"
  "********************************\n"
  "[Compiling module jit_train_block] Very slow compile? If you want to file a bug, run with envvar"
  " XLA_FLAGS=--xla_dump_to=/tmp/foo and attach the results.\n"
  "********************************\n"
)
CONSTANT_FOLDING = (
  "E1127 19:00:01.000000   1234 slow_operation_alarm.cc:133] Constant folding an instruction is"
  " taking > 1s:\n"
  "\n"
  "  %broadcast.1 = f32[4096,4096]{1,0} broadcast(f32[] %constant.2), dimensions={}\n"
  "\n"
  "This isn't necessarily a bug; constant-folding is inherently a trade-off between compilation"
  " time and speed at runtime.\n"
  "\n"
  "If you'd like to file a bug, run with envvar XLA_FLAGS=--xla_dump_to=/tmp/foo and attach the"
  " results.\n"
)
PROGRESS = "I1127 19:00:02.000000 140287944907648 bookkeeping.py:354] step 1/4\n"


def _kept(text: str) -> str:
  alarms = log_filter.AlarmFilter()
  return "".join(line for line in text.splitlines(keepends=True) if alarms.keeps(line))


def test_the_alarms_are_dropped_and_every_other_line_kept():
  # A warning printed right after an alarm (not a log line) is no part of it.
  warning = "/x/y.py:3: UserWarning: something\n  warnings.warn(...)\n"
  text = PROGRESS + SLOW_COMPILE + warning + CONSTANT_FOLDING + "plain text\n" + PROGRESS
  assert _kept(text) == PROGRESS + warning + "plain text\n" + PROGRESS
  traceback = "Traceback (most recent call last):\n  File 'x.py', line 1\nValueError\n"
  assert _kept(SLOW_COMPILE.split("\n", 1)[0] + "\n" + traceback) == traceback


def test_an_alarm_whose_end_is_not_recognised_drops_a_bounded_number_of_lines():
  """A reworded message (no "attach the results"): at most _MAX_ALARM_LINES lines go with it."""
  lines = "".join(f"line {i}\n" for i in range(50))
  kept = _kept(SLOW_COMPILE.split("\n", 1)[0] + "\n" + lines)
  assert kept == "".join(f"line {i}\n" for i in range(log_filter._MAX_ALARM_LINES, 50))


def test_a_filtered_process_loses_no_line_even_when_killed():
  """C++ writes (file descriptor 2) are filtered as Python's are; SIGKILL right after 3,000 lines:
  the filter process passes on every one."""
  program = textwrap.dedent(
    f"""
    import os, signal, sys
    from experiments import log_filter
    log_filter.start()
    os.write(2, {SLOW_COMPILE.encode()!r})
    os.write(2, b"written by C\\n")
    print("written by Python", file=sys.stderr)
    for i in range(3000):
      print(f"line {{i}}", file=sys.stderr)
    os.kill(os.getpid(), signal.SIGKILL)
    """
  )
  result = subprocess.run(
    [sys.executable, "-c", program], cwd=ROOT, capture_output=True, text=True, timeout=120
  )
  assert result.returncode == -9
  expected = ["written by C", "written by Python", *(f"line {i}" for i in range(3000))]
  assert result.stderr.splitlines() == expected
