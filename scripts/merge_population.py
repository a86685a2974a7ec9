"""Merges a population trained as a job array into one run's records (config.json, results.json,
metrics.jsonl, summary.md).

Each job of the array trains a slice of the members
(``--config.population.shard_index=I --config.population.num_shards=N``) in its
own workdir; experiments/merge.py checks that the slices belong to one
population and together cover it, then selects the best member on validation as
a single job would have.

  python -m scripts.merge_population --out=runs/search runs/search_shard0 runs/search_shard1
"""

from experiments import start_up_signals

start_up_signals.quit_while_loading()  # first, before jax loads

import pathlib
import sys

from absl import app, flags

from experiments import merge

_OUT = flags.DEFINE_string(
  "out",
  None,
  "Directory for the merged records (a new one, or an earlier merge's, which is replaced).",
  required=True,
)

_ACCEPT_MIXED_CODE = flags.DEFINE_bool(
  "accept_mixed_code",
  False,
  "Merge slices trained (or resumed) on other code (sources, jax / jaxlib / flax /"
  " optax versions); results.json then records each slice's code segments.",
)


def main(argv):
  start_up_signals.interrupt_while_starting()
  try:
    results = merge.merge(
      [pathlib.Path(a) for a in argv[1:]], pathlib.Path(_OUT.value), _ACCEPT_MIXED_CODE.value
    )
  except merge.MergeError as e:
    sys.exit(f"error: {e}")
  except KeyboardInterrupt:
    print("interrupted: the slices are unchanged; run the same command again.", file=sys.stderr)
    sys.exit(130)
  print((pathlib.Path(_OUT.value) / "summary.md").read_text())
  print(f"selected member {results['selected_member']} by {' '.join(results['selected_by'])}")


if __name__ == "__main__":
  app.run(main)
