"""Training examples/s of the Gumbel Tree-LSTM on ListOps, per length and estimator.

For L in {10, 25, 50} (batch size = L, sequences padded to L, generated
expressions of length <= L), the median time of a jitted training step after
warm-up, as examples/s, for ST-GS and GR-MC100, and the share of the GR-MC100
step that its estimator adds over ST-GS.

  python -m scripts.bench_listops [--lengths=10,25,50] [--repeats=20]
"""

import statistics
import time

import jax
import jax.numpy as jnp
from absl import app, flags

from configs import listops_common
from experiments import config_checks
from experiments.listops import experiment as listops_experiment
from experiments.listops.task import ListOpsTask
from gr_jax.data import listops

_LENGTHS = flags.DEFINE_list("lengths", ["10", "25", "50"], "Maximum lengths L.")
_ESTIMATORS = flags.DEFINE_list("estimators", ["st_gs", "gr_mc100"], "Estimators.")
_REPEATS = flags.DEFINE_integer("repeats", 20, "Timed steps (median reported).")


def _step_seconds(length: int, estimator: str, repeats: int) -> float:
  config = listops_common.listops_config(length)
  config.estimator = estimator
  task = ListOpsTask(config, config_checks.check_estimator(config))
  hyperparameters = {k: jnp.float32(config[k]) for k in listops_experiment.HYPERPARAMETERS}
  train_step = jax.jit(task.train_step, donate_argnums=0)
  examples = listops.subset(
    [listops.parse_line(line) for line in listops.generate(4000, seed=0)], length
  )
  # Full-length sequences first: the step's cost does not depend on the lengths (fixed padding).
  encoded = listops.encode(examples[:length], length)
  batch = {"tokens": encoded.tokens, "lengths": encoded.lengths, "labels": encoded.labels}
  state = task.init_member(jax.random.key(0), hyperparameters, 0)
  times = []
  for i in range(repeats + 2):
    start = time.perf_counter()
    state, metrics = train_step(state, hyperparameters, batch, jax.random.key(i), i)
    jax.block_until_ready(metrics)
    if i >= 2:  # after compilation and one warm step
      times.append(time.perf_counter() - start)
  return statistics.median(times)


def main(argv):
  del argv
  print(f"device: {jax.devices()[0].device_kind} ({jax.default_backend()}), jax {jax.__version__}")
  print(f"{'L':>3} {'estimator':<10} {'ms/step':>9} {'examples/s':>11}")
  for length in map(int, _LENGTHS.value):
    seconds = {}
    for estimator in _ESTIMATORS.value:
      seconds[estimator] = _step_seconds(length, estimator, _REPEATS.value)
      print(
        f"{length:>3} {estimator:<10} {1e3 * seconds[estimator]:>9.2f}"
        f" {length / seconds[estimator]:>11.1f}",
        flush=True,
      )
    if {"st_gs", "gr_mc100"} <= seconds.keys():
      extra = (seconds["gr_mc100"] - seconds["st_gs"]) / seconds["gr_mc100"]
      print(f"{'':>3} GR-MC100's estimator adds {100 * extra:.1f}% of its step over ST-GS")


if __name__ == "__main__":
  app.run(main)
