"""One entry point for every experiment.

  python -m experiments.main --config=configs/vae_16ary.py --workdir=/tmp/run \
      [--config.tau=0.3 ...]

``config.experiment`` picks the experiment ("vae", "listops", "toy_qp"). Started
again with the same workdir, a run resumes from its latest checkpoint.
"""

import importlib
import sys

from absl import app, flags, logging
from ml_collections import config_flags

from experiments import common

EXPERIMENTS = {"vae": "experiments.vae", "listops": "experiments.listops", "toy_qp": "experiments.toy_qp"}

_CONFIG = config_flags.DEFINE_config_file("config", None, "Path to a config file (configs/*.py).")
_WORKDIR = flags.DEFINE_string("workdir", None, "Directory for metrics, checkpoints and results.")
flags.mark_flags_as_required(["config", "workdir"])


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  config = _CONFIG.value
  experiment = config.get("experiment")
  if experiment not in EXPERIMENTS:
    sys.exit(f"error: config.experiment must be one of {sorted(EXPERIMENTS)}; got {experiment!r}.")
  module = importlib.import_module(EXPERIMENTS[experiment])
  try:
    module.train_and_evaluate(config, _WORKDIR.value)
  except (common.ConfigError, FileNotFoundError) as e:
    logging.flush()
    sys.exit(f"error: {e}")


if __name__ == "__main__":
  app.run(main)
