"""One entry point for every experiment.

  python -m experiments.main --config=configs/vae_16ary.py --workdir=/tmp/run \
      [--config.tau=0.3 ...]

``config.experiment`` picks the experiment ("vae", "listops", "toy_qp"). Started
again with the same workdir, a run resumes from its latest checkpoint.
"""

from experiments import start_up_signals  # noqa: I001

start_up_signals.quit_while_loading()  # first, before jax loads

import difflib
import errno
import importlib.util
import logging as python_logging
import os
import pathlib
import re
import shutil
import signal
import sys
import threading
import time

import jax
from absl import app, flags, logging
from ml_collections import config_flags

from experiments import (
  bookkeeping,
  config_checks,
  distributed,
  log_filter,
  reporting,
  workdir,
)
from experiments.registry import EXPERIMENTS
from gr_jax.data import InvalidDataError

_CONFIG = config_flags.DEFINE_config_file("config", None, "Path to a config file (configs/*.py).")
_WORKDIR = flags.DEFINE_string("workdir", None, "Directory for metrics, checkpoints and results.")
_LIST_FIELDS = flags.DEFINE_boolean(
  "list_fields",
  False,
  "Print every field of --config (with the overrides) and its comment, then exit.",
)
flags.mark_flags_as_required(["config"])

_ROOT = pathlib.Path(__file__).resolve().parents[1]
_STARTED = time.time()
_PROJECT_DIRS = tuple(str(_ROOT / d) for d in ("experiments", "gr_jax"))


class _ProjectInfoOnly(python_logging.Filter):
  """Keeps warnings and errors, and the project's own info lines.

  Libraries (orbax logs ~40 INFO lines a checkpoint, jax its backend probes)
  speak through the same absl logger; their INFO lines come back with
  --verbosity=1.
  """

  def __init__(self, warnings: bool = True):
    super().__init__()
    self.warnings = warnings  # False: the libraries' warnings and errors are dropped too

  def filter(self, record: python_logging.LogRecord) -> bool:
    library_warning = self.warnings and record.levelno >= python_logging.WARNING
    return library_warning or record.pathname.startswith(_PROJECT_DIRS)


def main(argv):
  start_up_signals.interrupt_while_starting()
  # Everything after this line is inside the try: a Ctrl-C anywhere in the start-up (the log
  # filter's fork included) ends in the KeyboardInterrupt clause's one line and status 130.
  try:
    if len(argv) > 1:
      raise app.UsageError(f"unexpected arguments: {argv[1:]}")
    if flags.FLAGS.verbosity < 1:
      logging.get_absl_handler().addFilter(_ProjectInfoOnly())
    config = _CONFIG.value
    if _LIST_FIELDS.value:
      print(
        field_listing(config, config_flags.get_config_filename(flags.FLAGS["config"]).split(":")[0])
      )
      return
    if not _WORKDIR.value:
      sys.exit(
        "error: --workdir is required: the directory for the run's metrics, checkpoints and"
        " results."
      )
    if distributed.requested() and not distributed.in_worker():
      sys.exit(distributed.supervise(sys.argv, quiet=flags.FLAGS.verbosity < 1))
    if flags.FLAGS.verbosity < 1 and not distributed.requested():  # a job's supervisor filters
      log_filter.start()
    experiment = config.get("experiment")
    if experiment not in EXPERIMENTS:
      sys.exit(
        f"error: config.experiment must be one of {sorted(EXPERIMENTS)}; got {experiment!r}."
      )
    # One process of a multi-process job (see experiments/distributed.py).
    if distributed.requested():
      distributed.stop_with_supervisor()
      distributed.initialize()
      if jax.process_index() > 0:  # process 0 logs the run's progress
        logging.set_verbosity(logging.WARNING)
      distributed.check_same_config(config, _WORKDIR.value)
    EXPERIMENTS[experiment].train_and_evaluate(config, _WORKDIR.value)
    # Finished: results.json is written. A signal from here on (during the interpreter's shutdown)
    # must not turn the finished run into a failure for a scheduler.
    for stop_signal in (signal.SIGINT, signal.SIGTERM):
      signal.signal(stop_signal, signal.SIG_IGN)
  except (
    config_checks.ConfigError,
    FileNotFoundError,
    InvalidDataError,
    reporting.NoMemberTrained,
  ) as e:
    logging.flush()
    sys.exit(f"error: {e}")
  except OSError as e:  # a workdir that cannot be written, a full disk
    logging.flush()
    if e.errno == errno.ENOSPC:
      _quiet_about_the_full_disk()
    if e.errno == errno.ENOSPC and str(e.strerror).startswith("no space left on the device of"):
      sys.exit(f"error: {e.strerror}")  # the checkpointer's own message
    if e.errno == errno.ENOSPC:
      free = shutil.disk_usage(_WORKDIR.value).free if os.path.isdir(_WORKDIR.value) else 0
      sys.exit(
        f"error: no space left on the device of --workdir {_WORKDIR.value} ({free / 2**20:.1f} MiB"
        f" free) while writing {e.filename or 'the run' + chr(39) + 's files'}: free some space"
        " and run the same command again (what the run saved is kept)."
      )
    sys.exit(f"error: cannot write the run's files in --workdir {_WORKDIR.value}: {e}")
  except bookkeeping.Interrupted as e:
    logging.flush()
    print(f"interrupted: {e}", file=sys.stderr)
    sys.exit(128 + e.signum)
  except KeyboardInterrupt:
    for stop_signal in (signal.SIGINT, signal.SIGTERM):  # exiting now: no second interrupt
      signal.signal(stop_signal, signal.SIG_IGN)
    logging.flush()
    results = pathlib.Path(_WORKDIR.value) / "results.json"
    if results.is_file() and results.stat().st_mtime >= _STARTED:  # written by this run
      print("finished: results.json was written before the interrupt.", file=sys.stderr)
      sys.exit(0)
    print(
      "interrupted: what the run has saved is kept (after training, the trained model's"
      " checkpoint); run the same command again to resume.",
      file=sys.stderr,
    )
    sys.exit(130)
  # A collective with a lost process fails as JaxRuntimeError, or as ValueError where orbax's
  # checkpoint barrier meets it (after the ConfigError clause above: ConfigError is a ValueError).
  except (jax.errors.JaxRuntimeError, ValueError) as e:
    lost = distributed.lost_peer(e)
    if lost is None:
      raise
    logging.flush()
    print(lost, file=sys.stderr, flush=True)
    os._exit(1)  # not sys.exit: JAX's shutdown would wait for the lost process, then abort
  finally:  # a run that ended, finished or stopped, leaves no .lock (a killed one's is stale)
    workdir.unlock_workdirs()


def _quiet_about_the_full_disk() -> None:
  """After the run's one line on a full disk, the libraries' own writers fail again on it while
  the interpreter shuts down (tensorboardX's atexit flush, and its writer thread on the queue the
  failed close left closed; orbax's unawaited futures): their tracebacks would say nothing more."""
  python_logging.getLogger("asyncio").setLevel(python_logging.CRITICAL)
  logging.get_absl_handler().addFilter(_ProjectInfoOnly(warnings=False))  # orbax's thread's logs
  unraisable = sys.unraisablehook
  sys.unraisablehook = lambda what: (
    None if workdir.is_full_disk(what.exc_value) else unraisable(what)
  )
  # The run ends with its line: a library's background thread (orbax's writer, tensorboardX's)
  # failing on the same disk, whatever it raises, says nothing more.
  threading.excepthook = lambda what: None


_ASSIGNMENT = re.compile(r"^\s*config\.(\w+) = [^#]*?(?:\s+#\s*(.*))?$")


def _field_comments(config_file: str) -> dict[str, str]:
  """Each config field's comment (inline, else the comment lines just above it).

  Read from the config file and the modules of configs/ it imported. Fields of
  the ``population`` sub-config (configs/population.py) are named
  ``population.FIELD``.
  """
  configs_dir = str(_ROOT / "configs")
  imported = {getattr(m, "__file__", None) for m in list(sys.modules.values())}
  files = [pathlib.Path(config_file)]
  files += sorted(
    pathlib.Path(f) for f in imported if f and f.startswith(configs_dir) and f != config_file
  )
  comments = {}
  for file in files:
    prefix = "population." if file.stem == "population" else ""
    above: list[str] = []
    for line in file.read_text().splitlines():
      stripped = line.strip()
      if stripped.startswith("#"):
        above.append(stripped.lstrip("# "))
        continue
      match = _ASSIGNMENT.match(line)
      if match and (match.group(2) or above):
        comments.setdefault(prefix + match.group(1), match.group(2) or " ".join(above))
      above = []
  return comments


def field_listing(config, config_file: str) -> str:
  """Every field of ``config`` (dotted names), its value and its comment, one per line."""
  comments = _field_comments(config_file)
  lines = []
  for field, value in workdir.flatten(config.to_dict()).items():
    comment = comments.get(field)
    lines.append(f"{field} = {value!r}" + (f"  # {comment}" if comment else ""))
  return "\n".join(lines)


def _config_fields(argv) -> list[str]:
  """The dotted field names of the config file named by --config (for suggestions)."""
  paths = [a.split("=", 1)[1] for a in argv if a.startswith("--config=")]
  if not paths:
    return []
  spec = importlib.util.spec_from_file_location("_config_for_suggestions", paths[-1])
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return list(workdir.flatten(module.get_config().to_dict()))


def _parse_flags(argv):
  """absl's flag parsing, with an unknown --config.FIELD reported in one line."""
  try:
    return flags.FLAGS(argv)
  except (AttributeError, KeyError):  # ml_collections: no such field (KeyError: no such parent)
    fields = _config_fields(argv)
    given = [a[len("--config.") :].split("=", 1)[0] for a in argv if a.startswith("--config.")]
    unknown = next((f for f in given if f not in fields), given[-1] if given else "?")
    close = difflib.get_close_matches(unknown, fields, n=3)
    hint = f"; did you mean {', '.join(close)}?" if close else "."
    sys.exit(
      f"error: --config.{unknown}: the config has no field {unknown!r}{hint}"
      " (python -m experiments.main --config=FILE --list_fields lists them)"
    )
  except flags.Error as e:
    sys.exit(f"error: {config_checks.flag_error_line(e)}")


if __name__ == "__main__":
  app.run(main, flags_parser=_parse_flags)
