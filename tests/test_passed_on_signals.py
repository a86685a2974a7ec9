"""experiments/passed_on_signals.py: a parent's stop signals reach its child once it exists."""

import os
import signal
import threading

from experiments import passed_on_signals

# A child without handlers of its own: the signal that reaches it ends it, and its exit status
# (-signum) names that signal.
_CHILD = ["sleep", "60"]


def test_a_signal_before_the_child_exists_is_sent_to_it_once_it_does():
  with passed_on_signals.PassOn({signal.SIGTERM: signal.SIGTERM}) as pass_on:
    os.kill(os.getpid(), signal.SIGTERM)  # handled here (at the next bytecode), kept pending
    child = pass_on.start(_CHILD)
    assert child.wait(timeout=60) == -signal.SIGTERM
  assert pass_on.received == [signal.SIGTERM]


def test_a_signal_is_passed_on_renamed_with_its_note(capsys):
  renamed = {signal.SIGHUP: signal.SIGTERM}
  with passed_on_signals.PassOn(renamed, {signal.SIGHUP: "hung up: stopping"}) as pass_on:
    child = pass_on.start(_CHILD)
    os.kill(os.getpid(), signal.SIGHUP)
    assert child.wait(timeout=60) == -signal.SIGTERM
  assert pass_on.received == [signal.SIGHUP]
  assert capsys.readouterr().err == "hung up: stopping\n"


def test_the_child_has_its_own_process_group():
  with passed_on_signals.PassOn({signal.SIGTERM: signal.SIGTERM}) as pass_on:
    child = pass_on.start(_CHILD)
    try:
      assert os.getpgid(child.pid) == child.pid != os.getpgid(0)
    finally:
      child.kill()
      child.wait()


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
