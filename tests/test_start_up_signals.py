"""Ctrl-C while a command starts (experiments/start_up_signals.py): one line and status 130 at
every moment, never a traceback, never a run that goes on."""

import pathlib
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from experiments import start_up_signals
from experiments.vae import experiment as vae
from tests.cli import ROOT, main_command
from tests.test_vae_experiment import TINY


def _as_from_a_terminal():
  """The child starts with SIGINT at its default, as a command typed in a terminal does, also when
  this suite itself runs under nohup or as a shell's background job: those start it ignored, and
  start_up_signals keeps an ignored SIGINT ignored (by design), so Ctrl-C could not be tested."""
  signal.signal(signal.SIGINT, signal.SIG_DFL)


def _interrupt_once_loading(process: subprocess.Popen, delay_s: float) -> None:
  """SIGINT ``delay_s`` after the child maps numpy's extension, the first heavy module it loads:
  the entry point's first line has installed its handler by then, however long a busy machine
  takes to start the interpreter (a signal inside Python's own start-up, before a command's first
  line runs, gets Python's traceback: no command can answer it, so no fixed delay is safe)."""
  maps = pathlib.Path(f"/proc/{process.pid}/maps")
  if not maps.parent.exists():
    pytest.skip("needs /proc to see when the command starts loading its modules")
  deadline = time.monotonic() + 120
  while "_multiarray_umath" not in maps.read_text():
    assert process.poll() is None, "the command ended before it loaded numpy"
    assert time.monotonic() < deadline, "the command did not load numpy within 120 s"
    time.sleep(0.005)
  time.sleep(delay_s)
  process.send_signal(signal.SIGINT)


@pytest.fixture
def restored_sigint():
  # Python's own handler to start from, whatever an earlier test of this process left.
  previous = signal.signal(signal.SIGINT, signal.default_int_handler)
  yield
  signal.signal(signal.SIGINT, previous)
  start_up_signals._received.clear()
  start_up_signals._command.clear()


def test_a_sigint_inside_a_gc_callback_is_not_swallowed():
  """Raised inside a garbage-collection callback (as jax registers one), a KeyboardInterrupt is
  printed as "Exception ignored" and lost; the handler sends the signal again outside it. (In a
  fresh process: a test worker's signal state is whatever its earlier tests left.)"""
  program = textwrap.dedent(
    """
    import gc, signal, time
    from experiments import start_up_signals
    start_up_signals.interrupt_while_starting()
    sent = []

    def callback(phase, info):
      if phase == "start" and not sent:
        sent.append(signal.SIGINT)
        signal.raise_signal(signal.SIGINT)  # the handler runs here, inside the callback

    gc.callbacks.append(callback)
    try:
      gc.collect()
      time.sleep(10)  # the signal sent again arrives within ~50 ms
      print("not raised")
    except KeyboardInterrupt:
      print("raised", sent == [signal.SIGINT], start_up_signals.received() == signal.SIGINT)
    """
  )
  result = subprocess.run(
    [sys.executable, "-c", program],
    cwd=ROOT,
    capture_output=True,
    text=True,
    timeout=120,
    preexec_fn=_as_from_a_terminal,
  )
  assert result.stdout.split() == ["raised", "True", "True"], result.stdout + result.stderr[-2000:]
  assert "Exception ignored" not in result.stderr


def test_a_sigint_outside_gc_raises_at_once_and_is_remembered(restored_sigint):
  start_up_signals.interrupt_while_starting()
  with pytest.raises(KeyboardInterrupt):
    signal.raise_signal(signal.SIGINT)
  assert start_up_signals.received() == signal.SIGINT


# Moments after the command starts loading numpy: while jax loads (before 2 s here), while the run
# sets up its workdir and compiles (2-6 s); each lands in one of the three phases.
@pytest.mark.slow
@pytest.mark.parametrize("delay_s", [0.1, 0.8, 1.6, 2.8, 4.3])
def test_ctrl_c_at_start_up_is_one_line_and_status_130(tmp_path, delay_s):
  command = main_command(
    "configs/vae_16ary.py", tmp_path, *TINY, "num_steps=100000", "estimator=st_gs"
  )
  process = subprocess.Popen(
    command, cwd=ROOT, stderr=subprocess.PIPE, text=True, preexec_fn=_as_from_a_terminal
  )
  _interrupt_once_loading(process, delay_s)
  _, stderr = process.communicate(timeout=300)
  lines = [line for line in stderr.splitlines() if not line[:1] == "I"]  # less the progress lines
  assert process.returncode == 130, stderr[-3000:]
  assert "Traceback" not in stderr and "Exception ignored" not in stderr, stderr[-3000:]
  assert lines[-1].startswith("interrupted: "), stderr[-3000:]
  assert not (tmp_path / "results.json").exists()


@pytest.mark.slow
@pytest.mark.parametrize("script", ["-m experiments.study", "-m scripts.merge_population"])
@pytest.mark.parametrize("delay_s", [0.0, 0.4])  # while numpy and jax load
def test_ctrl_c_while_a_script_loads_is_one_line_and_status_130(tmp_path, script, delay_s):
  flags = {
    "-m experiments.study": [
      "--study=configs/studies/table2.py",
      f"--out={tmp_path}",
      "--records=",
      "--arms=16ary_B20/st_gs",
    ],
    "-m scripts.merge_population": [f"--out={tmp_path / 'merged'}", str(tmp_path)],
  }[script]
  process = subprocess.Popen(
    [sys.executable, *script.split(), *flags],
    cwd=ROOT,
    stderr=subprocess.PIPE,
    text=True,
    preexec_fn=_as_from_a_terminal,
  )
  _interrupt_once_loading(process, delay_s)
  _, stderr = process.communicate(timeout=300)
  assert process.returncode == 130 and "Traceback" not in stderr, stderr[-3000:]
  assert stderr.strip().splitlines()[-1].startswith("interrupted: "), stderr[-3000:]


def test_a_run_used_as_a_library_gives_the_callers_handlers_back(tmp_path, restored_sigint):
  """In a notebook, after a finished run, Ctrl-C interrupts the next cell again (the command line
  alone keeps ignoring signals once results.json is written)."""
  from tests.test_population import _config

  config = _config(num_steps=2, eval_every=0, variance_every=0, mse_every=0, num_eval_samples=3)
  vae.train_and_evaluate(config, str(tmp_path))
  assert (tmp_path / "results.json").is_file()
  assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
