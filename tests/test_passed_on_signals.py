"""experiments/passed_on_signals.py: a parent's stop signals reach its child once it exists."""

import os
import signal
import subprocess
import sys
import threading

from experiments import passed_on_signals

# The child writes the name of each signal it receives and ends at the first; it says "ready" once
# its handlers are set, so a signal sent after that line is answered by them.
_CHILD = """
import signal, sys
def answer(signum, frame):
  print(signal.Signals(signum).name, flush=True)
  sys.exit(0)
for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
  signal.signal(s, answer)
print("ready", flush=True)
signal.pause()
"""


def _start_child() -> subprocess.Popen:
  child = subprocess.Popen(
    [sys.executable, "-c", _CHILD], stdout=subprocess.PIPE, text=True, process_group=0
  )
  assert child.stdout.readline() == "ready\n"
  return child


def test_a_signal_before_the_child_exists_is_sent_to_it_once_it_does():
  with passed_on_signals.PassOn({signal.SIGTERM: signal.SIGTERM}) as pass_on:
    os.kill(os.getpid(), signal.SIGTERM)  # handled here (at the next bytecode), kept pending
    child = _start_child()
    pass_on.to(child)
    said, _ = child.communicate(timeout=60)
  assert said == "SIGTERM\n"
  assert pass_on.received == [signal.SIGTERM]


def test_a_signal_is_passed_on_renamed_with_its_note(capsys):
  renamed = {signal.SIGHUP: signal.SIGTERM}
  with passed_on_signals.PassOn(renamed, {signal.SIGHUP: "hung up: stopping"}) as pass_on:
    child = _start_child()
    pass_on.to(child)
    os.kill(os.getpid(), signal.SIGHUP)
    said, _ = child.communicate(timeout=60)
  assert said == "SIGTERM\n"
  assert pass_on.received == [signal.SIGHUP]
  assert capsys.readouterr().err == "hung up: stopping\n"


def test_the_previous_handlers_come_back():
  def mine(signum, frame):
    del signum, frame

  previous = signal.signal(signal.SIGTERM, mine)
  try:
    with passed_on_signals.PassOn({signal.SIGTERM: signal.SIGTERM}):
      assert signal.getsignal(signal.SIGTERM) is not mine
    assert signal.getsignal(signal.SIGTERM) is mine
  finally:
    signal.signal(signal.SIGTERM, previous)


def test_outside_the_main_thread_nothing_is_installed():
  before = signal.getsignal(signal.SIGTERM)
  seen = []

  def in_a_thread():
    with passed_on_signals.PassOn({signal.SIGTERM: signal.SIGTERM}):
      seen.append(signal.getsignal(signal.SIGTERM))

  thread = threading.Thread(target=in_a_thread)
  thread.start()
  thread.join()
  assert seen == [before]
