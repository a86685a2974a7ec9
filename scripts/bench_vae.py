"""Training speed of the 16-ary VAE per estimator, and the cost of the final evaluation.

Median ms per jitted training step (after warm-up) at B = 20 and 200 for
ST-GS, GR-MC10 and GR-MC100; beside each GR row the random-number floor of its
K samples (the time to draw and sum B*60*16*K uniforms) and the target
ST-GS step + 1.5 x floor. It checks that the train step compiled once. Then
the wall time of the test evaluation with M = 5000 importance samples on
``--eval_images`` images (all 10000 with -1; otherwise the full-split time is
extrapolated linearly and labelled so). Synthetic images of MNIST's shape.
``--models`` times the default Concrete model (``concrete``), the earlier
ReLU 512/256 one (``relu_mlp``) and the two-stochastic-layer Concrete model
(``two_layer``, 240H~240H~784V) in the same run; with ``concrete`` and
``two_layer`` both, the two-layer model's time over the one-layer model's is
printed per row (the target: at most 2.2x for ST-GS and GR-MC100). The DisARM
protocol's Bernoulli VAEs (``bernoulli_linear``, ``bernoulli_nonlinear``) time
every estimator of ``--estimators`` (the multi-sample ones too) against ST-GS
in the same run (the targets: RLOO-2 and DisARM at most 2.2x ST-GS). ``--out``
writes every row as JSON (the leaderboard's ms per step).

  python scripts/bench_vae.py [--repeats=50] [--eval_images=200] [--models=concrete,two_layer]
  python scripts/bench_vae.py --models=bernoulli_nonlinear,bernoulli_linear --batch_sizes=50 \
    --estimators=st_gs,rloo2,disarm,gr_mc10,gr_mc100,gr_exact,zgr,reinmax,reinforce
"""

import _clone  # noqa: F401, I001  (the clone's experiments/ and configs/ on sys.path)
import json
import pathlib
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np
import flag_checks
from absl import app, flags

from configs import (
  bernoulli_vae_linear,
  bernoulli_vae_nonlinear,
  vae_16ary,
  vae_relu_mlp,
  vae_two_layer_16ary,
)
from experiments.vae import experiment as vae
from experiments.vae.task import VAETask

_BATCH_SIZES = flags.DEFINE_list("batch_sizes", ["20", "200"], "Batch sizes.")
_ESTIMATORS = flags.DEFINE_list("estimators", ["st_gs", "gr_mc10", "gr_mc100"], "Estimators.")
_REPEATS = flags.DEFINE_integer("repeats", 50, "Timed steps (median reported).")
_EVAL_IMAGES = flags.DEFINE_integer(
  "eval_images", 200, "Images for the M=5000 evaluation (-1 = 10000)."
)
_MODELS = flags.DEFINE_list(
  "models", ["concrete", "two_layer"], "concrete (the default), relu_mlp and/or two_layer."
)
_TEST_SIZE = 10_000
_OUT = flags.DEFINE_string("out", "", "Write every row as JSON to this file.")
CONFIGS = {
  "concrete": vae_16ary.get_config,
  "relu_mlp": vae_relu_mlp.get_config,
  "two_layer": vae_two_layer_16ary.get_config,
  "bernoulli_linear": bernoulli_vae_linear.get_config,
  "bernoulli_nonlinear": bernoulli_vae_nonlinear.get_config,
}
# Every flag value is known before anything is timed (one line otherwise).
flag_checks.choices(_MODELS, CONFIGS)
flag_checks.estimator_names(_ESTIMATORS)
flag_checks.numbers(_BATCH_SIZES, int, minimum=1)
flag_checks.at_least(_REPEATS, 1)


def _median_seconds(fn, repeats):
  fn()
  fn()
  times = []
  for _ in range(repeats):
    start = time.perf_counter()
    fn()
    times.append(time.perf_counter() - start)
  return statistics.median(times)


def main(argv):
  del argv
  rng = np.random.default_rng(0)
  print(f"device: {jax.devices()[0].device_kind} ({jax.default_backend()}), jax {jax.__version__}")
  times = {}
  for model in _MODELS.value:
    print(f"\nmodel: {model}")
    times[model] = bench_model(CONFIGS[model], rng)
  if "concrete" in times and "two_layer" in times:
    print("\ntwo layers / one layer, same run (target <= 2.2x for ST-GS and GR-MC100):")
    for row, ms in times["two_layer"].items():
      print(f"  {row}: {ms / times['concrete'][row]:.2f}x")
  for model in (m for m in times if m.startswith("bernoulli")):
    print(f"\n{model}: each estimator / ST-GS, same run (target <= 2.2x for RLOO-2 and DisARM):")
    for row, ms in times[model].items():
      reference = times[model].get(f"{row.split()[0]} st_gs")
      if reference and not row.startswith("M="):
        print(f"  {row}: {ms / reference:.2f}x")
  if _OUT.value:
    device = f"{jax.devices()[0].device_kind} ({jax.default_backend()})"
    rows = [
      {"model": model, "row": row, "ms": ms, "device": device, "jax": jax.__version__}
      for model, rows in times.items()
      for row, ms in rows.items()
    ]
    pathlib.Path(_OUT.value).write_text(json.dumps(rows, indent=1) + "\n")


def bench_model(get_config, rng) -> dict[str, float]:
  """Prints the model's table; returns the ms of each row (``"B=20 st_gs"``, ``"M=5000 per
  image"``)."""
  times = {}
  print(
    f"{'B':>4} {'estimator':<10} {'ms/step':>9} {'steps/s':>8} {'RNG floor ms':>13}"
    f" {'target ms':>10} {'met':>4}"
  )
  for batch_size in map(int, _BATCH_SIZES.value):
    x = jnp.asarray(rng.random((batch_size, 784)) < 0.13, jnp.float32)
    stgs_ms = None
    for name in _ESTIMATORS.value:
      config = get_config()
      config.estimator, config.batch_size = name, batch_size
      if config.dataset != "binarized_mnist":  # the Bernoulli models: no data is read here
        config.dataset = "synthetic_grey"
      task = VAETask(config, vae.validate(config))
      hyperparameters = {k: jnp.float32(config[k]) for k in vae.HYPERPARAMETERS}
      train_step = jax.jit(task.train_step, donate_argnums=0)
      holder = {"state": task.init_member(jax.random.key(0), hyperparameters, 0), "step": 0}

      def step():
        holder["step"] += 1
        holder["state"], metrics = train_step(
          holder["state"], hyperparameters, x, jax.random.key(holder["step"]), holder["step"]
        )
        jax.block_until_ready(metrics)

      ms = 1e3 * _median_seconds(step, _REPEATS.value)
      times[f"B={batch_size} {name}"] = ms
      compiles = train_step._cache_size()
      row = f"{batch_size:>4} {name:<10} {ms:>9.2f} {1e3 / ms:>8.1f}"
      if name == "st_gs":
        stgs_ms = ms
      elif name.startswith("gr_mc") and stgs_ms is not None:
        k = int(name[5:])
        # The uniforms of K samples of every variable of every stochastic layer.
        layers = len(task.inference_networks)
        size = batch_size * config.num_vars * config.arity * k * layers
        floor = jax.jit(lambda key, n=size: jnp.sum(jax.random.uniform(key, (n,))))
        floor_ms = 1e3 * _median_seconds(
          lambda: jax.block_until_ready(floor(jax.random.key(0))), 10
        )
        target = stgs_ms + 1.5 * floor_ms
        row += f" {floor_ms:>13.2f} {target:>10.2f} {'yes' if ms <= target else 'no':>4}"
      print(row + f"   (train step compiled {compiles}x)", flush=True)

  config = get_config()
  config.dataset = "synthetic" if config.dataset == "binarized_mnist" else "synthetic_grey"
  task = VAETask(config, vae.validate(config))
  member = task.init_member(
    jax.random.key(0), {k: jnp.float32(config[k]) for k in vae.HYPERPARAMETERS}, 0
  )
  iwae = jax.jit(task.iwae, static_argnums=5)
  images = _TEST_SIZE if _EVAL_IMAGES.value < 0 else _EVAL_IMAGES.value
  test = (rng.random((images, 784)) < 0.13).astype(np.float32)

  def evaluate():
    for start in range(0, len(test), config.eval_batch_size):
      jax.block_until_ready(
        iwae(member, 0, test[start : start + config.eval_batch_size], 0, start, 5000)
      )

  # Compile, and wait: an unawaited warm-up call would still be running inside the timed loop.
  jax.block_until_ready(iwae(member, 0, test[: config.eval_batch_size], 0, 0, 5000))
  start = time.perf_counter()
  evaluate()
  seconds = time.perf_counter() - start
  times["M=5000 per image"] = 1e3 * seconds / images
  if images == _TEST_SIZE:
    print(f"\ntest evaluation, M = 5000, 10000 images: {seconds:.1f} s")
  else:
    print(
      f"\ntest evaluation, M = 5000: {seconds:.1f} s for {images} images;"
      f" extrapolated to 10000 images: {seconds * _TEST_SIZE / images:.0f} s"
    )
  return times


if __name__ == "__main__":
  app.run(main)
