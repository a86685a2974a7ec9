"""Ctrl-C while a command starts, before its training loop answers it (bookkeeping.StopSignals).

:func:`quit_while_loading` (the entry points call it first, before jax loads) makes SIGINT end the
process at once with one line: while modules load nothing is written, and Python's own answer, a
KeyboardInterrupt raised wherever the main thread is, often lands inside a library's callback
(jax's garbage-collection callback), which swallows it: the command would run on and end 0.
:func:`interrupt_while_starting` then takes over until the training loop's handler does.
"""

import gc
import os
import signal
import sys
import threading

_received: list[int] = []
_command = []  # [True] once a command-line entry point took over the signals


def _quit_at_once(signum, frame):
  del frame
  print(
    f"interrupted: {signal.Signals(signum).name} while the command was starting; nothing was"
    " written. Run the same command again.",
    file=sys.stderr,
    flush=True,
  )
  os._exit(128 + signum)


def _in_gc_callback(frame) -> bool:
  callbacks = {getattr(callback, "__code__", None) for callback in gc.callbacks}
  while frame is not None:
    if frame.f_code in callbacks:
      return True
    frame = frame.f_back
  return False


def _interrupt(signum, frame):
  _received.append(signum)
  if not _in_gc_callback(frame):
    raise KeyboardInterrupt
  # Raised here, it would be swallowed (and printed as "Exception ignored"): sent again shortly,
  # unless the training loop's handler has taken over by then (it reads received()).
  threading.Timer(0.05, _send_again, args=(signum,)).start()


def _send_again(signum: int) -> None:
  if signal.getsignal(signum) is _interrupt:
    os.kill(os.getpid(), signum)


def quit_while_loading() -> None:
  """Until :func:`interrupt_while_starting`: SIGINT ends the process at once, with one line."""
  _install(_quit_at_once)


def _install(handler) -> None:
  # A SIGINT ignored by whoever started us (a shell's background job, nohup) stays ignored.
  if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
    signal.signal(signal.SIGINT, handler)


def interrupt_while_starting() -> None:
  """From here (files may be written, so no exit at once): SIGINT raises KeyboardInterrupt, the
  command's own handling, and is remembered (:func:`received`), so that one swallowed by a
  library's callback still stops the run, before its first step."""
  _command.append(True)
  _install(_interrupt)


def in_command() -> bool:
  """Whether this process is a command-line entry point's (not a notebook's or a test's)."""
  return bool(_command)


def received() -> int | None:
  """The stop signal received since :func:`interrupt_while_starting`, if any."""
  return _received[0] if _received else None
