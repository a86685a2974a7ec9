"""Member-steps per second of a population against the same runs done one after another.

For the 16-ary VAE (B = 20) and the ListOps Tree-LSTM (L <= 10, B = 10), per
estimator: "sequential" is the loop populations replaced — one jitted train
step per Python iteration, the batch gathered on the host and sent to the
device — whose member-steps/s is that of n runs done one after another (each
run has the same cost); "population" is ``experiments.population.Trainer``
with P members, ``--steps_per_call`` steps per jitted call, over members by
``jax.vmap`` and by a sequential ``lax.map``. Medians of ``--repeats`` timed
calls after compilation; synthetic data of the real shapes (the speed does not
depend on the pixel values or expressions).

  python -m scripts.bench_population [--sizes=1,8,20] [--experiments=vae,listops] [--trace_dir=DIR]

"x P=1" is the member-steps/s over that of a population of one (the issue's
target on accelerators: >= 10x at P = 20, >= 25x at P = 64). ``--trace_dir``
writes a ``jax.profiler`` trace of one call of the largest population per
estimator and mode (TensorBoard's profile plugin or Perfetto read it).
"""

import time

import jax
import jax.numpy as jnp
import numpy as np
from absl import app, flags

from configs import listops_L10, vae_16ary
from experiments import population, search
from experiments.listops import experiment as listops_experiment
from experiments.listops.task import ListOpsTask, as_arrays
from experiments.vae import experiment as vae
from experiments.vae.task import VAETask
from gr_jax.data import listops
from scripts import common
from scripts.common import median_ms

_SIZES = flags.DEFINE_list("sizes", ["1", "8", "20"], "Population sizes.")
_EXPERIMENTS = flags.DEFINE_list("experiments", ["vae", "listops"], "vae, listops.")
_ESTIMATORS = flags.DEFINE_list("estimators", ["st_gs", "gr_mc100"], "Estimators.")
_MODES = flags.DEFINE_list("modes", ["vmap", "map"], "Vectorizations over members to time.")
_STEPS = flags.DEFINE_integer("steps_per_call", 20, "Steps per jitted call of the population.")
_REPEATS = flags.DEFINE_integer("repeats", 5, "Timed calls (median reported).")
_SEQUENTIAL_STEPS = flags.DEFINE_integer(
  "sequential_steps", 50, "Timed steps of the sequential loop."
)
_CPU_DEVICES = flags.DEFINE_integer(
  "cpu_devices",
  1,
  "CPU devices (jax_num_cpu_devices) to split the members over, as population.vectorize='auto'"
  " does with one per core; the sequential runs use one.",
)
_TRACE_DIR = flags.DEFINE_string(
  "trace_dir", None, "Where to write profiler traces of the largest populations."
)
common.numbers(_SIZES, int, minimum=1)
common.choices(_EXPERIMENTS, ("vae", "listops"))
common.choices(_MODES, ("vmap", "map"))
common.estimator_names(_ESTIMATORS)
for _holder in (_STEPS, _REPEATS, _SEQUENTIAL_STEPS, _CPU_DEVICES):
  common.at_least(_holder, 1)


def _setup(experiment: str, estimator: str):
  """(config, task, hyperparameter names, training data) with the real shapes."""
  if experiment == "vae":
    config = vae_16ary.get_config()
    config.estimator = estimator
    task = VAETask(config, vae.validate(config))
    data = (np.random.default_rng(0).random((2000, 784)) < 0.13).astype(np.uint8)
    return config, task, vae.HYPERPARAMETERS, data
  config = listops_L10.get_config()
  config.estimator = estimator
  task = ListOpsTask(config, listops_experiment.validate(config))
  examples = listops.subset(
    [listops.parse_line(line) for line in listops.generate(6000, seed=0)], config.max_length
  )
  encoded = listops.encode(examples, config.max_length)
  return config, task, listops_experiment.HYPERPARAMETERS, as_arrays(encoded)


def sequential_ms(config, task, names, data) -> float:
  """Median ms per step of the replaced loop: a jitted step per Python iteration, batches from the
  host."""
  hyperparameters = {k: jnp.float32(config[k]) for k in names}
  train_step = jax.jit(task.train_step, donate_argnums=0)
  # A copy: the step donates its state, which may hold the task's own arrays (e.g. the VAE's input
  # mean).
  state = {
    "member": jax.tree.map(jnp.copy, task.init_member(jax.random.key(0), hyperparameters, 0)),
    "step": 0,
  }
  num_examples = len(jax.tree.leaves(data)[0])
  order = np.random.default_rng(0).permutation(num_examples)

  def step():
    state["step"] += 1
    start = (state["step"] * config.batch_size) % (num_examples - config.batch_size)
    batch = jax.tree.map(lambda a: a[order[start : start + config.batch_size]], data)
    state["member"], metrics = train_step(
      state["member"], hyperparameters, batch, jax.random.key(state["step"]), state["step"]
    )
    return metrics

  return median_ms(step, repeats=_SEQUENTIAL_STEPS.value, warmup=3)


def population_ms(
  config, task, names, data, size: int, mode: str, trace: str | None = None
) -> float:
  """Median ms per jitted call of ``steps_per_call`` steps of a population of ``size`` (``trace``: a
  profile of one more call is written there)."""
  config.population.search, config.population.size, config.population.vectorize = "none", size, mode
  config.steps_per_call = _STEPS.value
  chosen = search.members(config, names, lambda *a: None)
  trainer = population.Trainer(
    population.Task(
      task.init_member,
      task.train_step,
      data,
      config.batch_size,
      10**6,
      getattr(task, "records", None),
    ),
    chosen,
    mode,
  )
  state = {"state": trainer.init_state(), "first": 1}

  def call():
    state["state"], metrics = trainer.run_block(state["state"], state["first"], _STEPS.value)
    state["first"] += _STEPS.value
    return metrics

  ms = median_ms(call, repeats=_REPEATS.value, warmup=2)
  if trace:
    with jax.profiler.trace(trace):
      jax.block_until_ready(call())
  return ms


def main(argv):
  del argv
  jax.config.update("jax_num_cpu_devices", _CPU_DEVICES.value)
  device = jax.devices()[0]
  print(
    f"device: {device.device_kind} ({jax.default_backend()}, {len(jax.devices())} device(s)), jax"
    f" {jax.__version__};"
    f" {_STEPS.value} steps per call, median of {_REPEATS.value} calls; sequential: median of"
    f" {_SEQUENTIAL_STEPS.value} steps",
    flush=True,
  )
  print(
    f"{'experiment':<10} {'estimator':<9} {'P':>3} {'how':<16} {'member-steps/s':>15}"
    f" {'x sequential':>13}"
    f" {'x P=1':>7}"
  )
  t0 = time.perf_counter()
  for experiment in _EXPERIMENTS.value:
    for estimator in _ESTIMATORS.value:
      config, task, names, data = _setup(experiment, estimator)
      rate = 1e3 / sequential_ms(config, task, names, data)
      print(
        f"{experiment:<10} {estimator:<9} {'n':>3} {'sequential runs':<16} {rate:>15.1f}"
        f" {1.0:>13.2f}",
        flush=True,
      )
      sizes = list(map(int, _SIZES.value))
      one = None
      for size in sizes:
        for mode in _MODES.value if size > 1 else _MODES.value[:1]:
          trace = (
            _TRACE_DIR.value
            and size == max(sizes)
            and f"{_TRACE_DIR.value}/{experiment}_{estimator}_P{size}_{mode}"
          )
          ms = population_ms(config, task, names, data, size, mode, trace or None)
          members_rate = 1e3 * size * _STEPS.value / ms
          one = members_rate if size == 1 else one
          how = f"population {mode}" if size > 1 else "population of 1"
          versus_one = f"{members_rate / one:>7.2f}" if one else f"{'-':>7}"
          print(
            f"{experiment:<10} {estimator:<9} {size:>3} {how:<16} {members_rate:>15.1f}"
            f" {members_rate / rate:>13.2f}"
            f" {versus_one}",
            flush=True,
          )
  print(f"(benchmark wall time {time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
  app.run(main)
