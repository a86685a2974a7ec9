"""One entry point for every experiment.

  python -m experiments.main --config=configs/vae_16ary.py --workdir=/tmp/run \
      [--config.tau=0.3 ...]

``config.experiment`` picks the experiment ("vae", "listops", "toy_qp"). Started
again with the same workdir, a run resumes from its latest checkpoint.
"""

import difflib
import importlib.util
import logging as python_logging
import pathlib
import sys

from absl import app, flags, logging
from ml_collections import config_flags

from experiments import common, listops, population, toy_qp, vae
from gr_jax.data import InvalidDataError

EXPERIMENTS = {"vae": vae, "listops": listops, "toy_qp": toy_qp}

_CONFIG = config_flags.DEFINE_config_file("config", None, "Path to a config file (configs/*.py).")
_WORKDIR = flags.DEFINE_string("workdir", None, "Directory for metrics, checkpoints and results.")
flags.mark_flags_as_required(["config", "workdir"])


_PROJECT_DIRS = tuple(str(pathlib.Path(__file__).resolve().parents[1] / d) for d in ("experiments", "gr_jax"))


class _ProjectInfoOnly(python_logging.Filter):
  """Keeps warnings and errors, and the project's own info lines.

  Libraries (orbax logs ~40 INFO lines a checkpoint, jax its backend probes)
  speak through the same absl logger; their INFO lines come back with
  --verbosity=1.
  """

  def filter(self, record: python_logging.LogRecord) -> bool:
    return record.levelno >= python_logging.WARNING or record.pathname.startswith(_PROJECT_DIRS)


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  if flags.FLAGS.verbosity < 1:
    logging.get_absl_handler().addFilter(_ProjectInfoOnly())
  population.initialize_distributed()  # GR_JAX_DISTRIBUTED=1: a multi-host job
  config = _CONFIG.value
  experiment = config.get("experiment")
  if experiment not in EXPERIMENTS:
    sys.exit(f"error: config.experiment must be one of {sorted(EXPERIMENTS)}; got {experiment!r}.")
  try:
    EXPERIMENTS[experiment].train_and_evaluate(config, _WORKDIR.value)
  except (common.ConfigError, FileNotFoundError, InvalidDataError) as e:
    logging.flush()
    sys.exit(f"error: {e}")
  except OSError as e:  # a workdir that cannot be written, a full disk
    logging.flush()
    sys.exit(f"error: cannot write the run's files in --workdir {_WORKDIR.value}: {e}")
  except common.Interrupted as e:
    logging.flush()
    print(f"interrupted: {e}", file=sys.stderr)
    sys.exit(128 + e.signum)
  except KeyboardInterrupt:
    logging.flush()
    print("interrupted: what the run has saved is kept (after training, the trained model's"
          " checkpoint); run the same command again to resume.", file=sys.stderr)
    sys.exit(130)


def _config_fields(argv) -> list[str]:
  """The dotted field names of the config file named by --config (for suggestions)."""
  paths = [a.split("=", 1)[1] for a in argv if a.startswith("--config=")]
  if not paths:
    return []
  spec = importlib.util.spec_from_file_location("_config_for_suggestions", paths[-1])
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return list(module.get_config().to_dict())


def _parse_flags(argv):
  """absl's flag parsing, with an unknown --config.FIELD reported in one line."""
  try:
    return flags.FLAGS(argv)
  except AttributeError as e:  # ml_collections: no such field
    unknown = str(e).strip("\"'")
    close = difflib.get_close_matches(unknown, _config_fields(argv), n=3)
    hint = f"; did you mean {', '.join(close)}?" if close else "."
    sys.exit(f"error: --config.{unknown}: the config has no field {unknown!r}{hint}")
  except flags.Error as e:
    sys.exit(f"error: {e}")


if __name__ == "__main__":
  app.run(main, flags_parser=_parse_flags)
