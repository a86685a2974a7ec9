"""Training speed of the 16-ary VAE per estimator, and the cost of the final evaluation.

Median ms per jitted training step (after warm-up) at B = 20 and 200 for
ST-GS, GR-MC10 and GR-MC100, every step of every model timed in the same
rounds (each round runs each step once), so that the ratios between rows and
between models are measured side by side; beside each GR row the
random-number floor of its K samples (the time to draw and sum B*60*16*K uniforms) and the target
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
in the same run (the targets: RLOO-2 and DisARM at most 2.2x ST-GS). The categorical track's
VAE (``categorical_<C>x<L>``, configs/categorical_vae.py) is timed per latent shape. ``--out``
writes every row as JSON (the leaderboard's and the categorical tables' ms per step). An item
``NAME@TAU`` of ``--estimators`` times that estimator at that temperature alone (the tuned
study's rows at their selected temperatures, records/bench_tuned.json). The item ``exact`` times
the categorical track's exact row (ST's sample, the encoder's likelihood gradient enumerated:
``likelihood_gradient=exact``) on the shapes that can be enumerated, and is skipped, with a line,
on the others and the other models.

  python -m scripts.bench_vae [--repeats=50] [--eval_images=200] [--models=concrete,two_layer]
  python -m scripts.bench_vae --models=bernoulli_nonlinear,bernoulli_linear --batch_sizes=50 \
    --out=records/bench_bernoulli.json --estimators=st_gs,rloo2,disarm,gr_mc10,gr_mc100,gr_exact,\
zgr,reinmax,reinforce,gs,st_gs_x2,gr_mc10_x2,gr_exact_x2,zgr_x2
  python -m scripts.bench_vae \
    --models=categorical_8x4,categorical_4x24,categorical_8x16,categorical_16x12,\
categorical_64x8,categorical_10x30 \
    --batch_sizes=100 --eval_images=0 --out=records/bench_categorical.json \
    --estimators=st,st_gs,gr_mc100,gst,reinmax,zgr,gr_mc10,gr_qmc100,rloo2,exact
"""

import functools
import json
import pathlib
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np
from absl import app, flags

from configs import (
  bernoulli_vae_linear,
  bernoulli_vae_nonlinear,
  categorical_vae,
  vae_16ary,
  vae_relu_mlp,
  vae_two_layer_16ary,
)
from experiments.vae import experiment as vae
from experiments.vae.task import VAETask
from gr_jax import estimators
from gr_jax.models import categorical_vae as categorical_vae_model
from scripts import common

_BATCH_SIZES = flags.DEFINE_list("batch_sizes", ["20", "200"], "Batch sizes.")
_ESTIMATORS = flags.DEFINE_list(
  "estimators",
  ["st_gs", "gr_mc10", "gr_mc100"],
  "Estimators; NAME@TAU times that one at that temperature alone (row NAME@TAU); 'exact' the"
  " categorical exact row.",
)
_REPEATS = flags.DEFINE_integer("repeats", 50, "Timed steps (median reported).")
_EVAL_IMAGES = flags.DEFINE_integer(
  "eval_images", 200, "Images for the M=5000 evaluation (-1 = 10000, 0 = no evaluation)."
)
_MODELS = flags.DEFINE_list(
  "models",
  ["concrete", "two_layer"],
  "concrete (the default), relu_mlp, two_layer, bernoulli_linear, bernoulli_nonlinear and/or"
  " categorical_<shape> (8x4, 4x24, 8x16, 16x12, 64x8, 10x30).",
)
_TEST_SIZE = 10_000
_OUT = flags.DEFINE_string("out", "", "Write every row as JSON to this file.")
_TAUS = flags.DEFINE_list(
  "taus", None, "Temperatures: every estimator at each (rows est@tau); unset: the config's."
)
_PRNG_IMPLS = flags.DEFINE_list(
  "prng_impls",
  None,
  "PRNG implementations of the step keys (rows est/impl), e.g. threefry2x32,rbg.",
)
CONFIGS = {
  "concrete": vae_16ary.get_config,
  "relu_mlp": vae_relu_mlp.get_config,
  "two_layer": vae_two_layer_16ary.get_config,
  "bernoulli_linear": bernoulli_vae_linear.get_config,
  "bernoulli_nonlinear": bernoulli_vae_nonlinear.get_config,
  # The categorical track's VAE, one entry per latent shape (C categories x L variables).
  **{
    f"categorical_{shape}": functools.partial(categorical_vae.get_config, shape)
    for shape in categorical_vae.SHAPES
  },
}
# Every flag value is known before anything is timed (one line otherwise).
common.choices(_MODELS, CONFIGS)
# The categorical track's exact row: ST's sample, the encoder's likelihood gradient enumerated.
EXACT = "exact"
common.estimator_names(_ESTIMATORS, at_tau=True, extra=(EXACT,))
common.numbers(_BATCH_SIZES, int, minimum=1)
common.at_least(_REPEATS, 1)
common.numbers(_TAUS, float, minimum=0.0)
common.choices(_PRNG_IMPLS, ("threefry2x32", "rbg", "unsafe_rbg"))


def _interleaved_medians(fns, repeats):
  """Median seconds of each function, timed in ``repeats`` rounds that call every function once
  (after two warm-up calls each): a slow spell of the machine falls on all rows alike, so the
  ratios between rows hold although the absolute times move."""
  for fn in fns.values():
    fn()
    fn()
  times = {name: [] for name in fns}
  for _ in range(repeats):
    for name, fn in fns.items():
      start = time.perf_counter()
      fn()
      times[name].append(time.perf_counter() - start)
  return {name: statistics.median(t) for name, t in times.items()}


def main(argv):
  del argv
  rng = np.random.default_rng(0)
  print(f"device: {jax.devices()[0].device_kind} ({jax.default_backend()}), jax {jax.__version__}")
  steps, floors, compiles = {}, {}, {}
  for model in _MODELS.value:
    model_steps, model_floors, model_compiles = train_steps(CONFIGS[model], rng)
    steps |= {(model, row): fn for row, fn in model_steps.items()}
    floors |= {(model, row): fn for row, fn in model_floors.items()}
    compiles[model] = model_compiles
  step_seconds = _interleaved_medians(steps, _REPEATS.value)
  floor_seconds = _interleaved_medians(floors, 10)
  times = {}
  for model in _MODELS.value:
    print(f"\nmodel: {model}")
    times[model] = {row: 1e3 * s for (m, row), s in step_seconds.items() if m == model}
    print_table(
      times[model],
      {row: 1e3 * s for (m, row), s in floor_seconds.items() if m == model},
      compiles[model],
    )
    if _EVAL_IMAGES.value:
      times[model]["M=5000 per image"] = evaluation_ms_per_image(CONFIGS[model], rng)
  if "concrete" in times and "two_layer" in times:
    print("\ntwo layers / one layer, same run (target <= 2.2x for ST-GS and GR-MC100):")
    for row, ms in times["two_layer"].items():
      print(f"  {row}: {ms / times['concrete'][row]:.2f}x")
  for model in (m for m in times if m.startswith(("bernoulli", "categorical"))):
    target = " (target <= 2.2x for RLOO-2 and DisARM)" if model.startswith("bernoulli") else ""
    print(f"\n{model}: each estimator / ST-GS, same run{target}:")
    for row, ms in times[model].items():
      reference = None if row.startswith("M=") else times[model].get(_st_gs_row(row))
      if reference:
        print(f"  {row}: {ms / reference:.2f}x")
  if len(_PRNG_IMPLS.value or ()) > 1:
    first = _PRNG_IMPLS.value[0]
    print(f"\neach PRNG implementation / {first}, same run:")
    for model, rows in times.items():
      for row, ms in rows.items():
        if row.endswith(f"/{first}") and not row.startswith("M="):
          for impl in _PRNG_IMPLS.value[1:]:
            other = rows[row.removesuffix(first) + impl]
            print(f"  {model} {row.removesuffix('/' + first)}: {impl} {other / ms:.2f}x")
  if _OUT.value:
    device = f"{jax.devices()[0].device_kind} ({jax.default_backend()})"
    rows = [
      {"model": model, "row": row, "ms": ms, "device": device, "jax": jax.__version__}
      for model, rows in times.items()
      for row, ms in rows.items()
    ]
    pathlib.Path(_OUT.value).write_text(json.dumps(rows, indent=1) + "\n")


def _st_gs_row(row: str) -> str:
  """The ST-GS row timed beside ``row`` ("B=50 gr_exact@0.5/rbg" -> "B=50 st_gs@0.5/rbg")."""
  batch, name = row.split()
  suffix = name[len(name.split("@")[0].split("/")[0]) :]
  return f"{batch} st_gs{suffix}"


def train_steps(get_config, rng):
  """The model's jitted training steps, one per batch size and estimator (``"B=20 st_gs"``), each
  a call that runs one step; the RNG floor of each GR-MCK row; and a function returning how many
  times each step compiled."""
  steps, floors, jitted = {}, {}, {}
  for batch_size in map(int, _BATCH_SIZES.value):
    x = jnp.asarray(rng.random((batch_size, 784)) < 0.13, jnp.float32)
    variants = [
      (name, tau, impl)
      for name, _, own_tau in (entry.partition("@") for entry in _ESTIMATORS.value)
      for tau in ([f"{float(own_tau):g}"] if own_tau else _TAUS.value or [None])
      for impl in _PRNG_IMPLS.value or [None]
    ]
    for name, tau, impl in variants:
      row = f"B={batch_size} {name}" + (f"@{tau}" if tau else "") + (f"/{impl}" if impl else "")
      config = get_config()
      config.estimator, config.batch_size = name, batch_size
      if name == EXACT:
        if not _enumerable(config):
          limit = categorical_vae_model.MAX_CONFIGURATIONS
          print(f"{row}: skipped (an exact row needs the categorical VAE at C ** L <= {limit})")
          continue
        config.estimator, config.likelihood_gradient = "st", "exact"
      if tau:
        config.tau = float(tau)
      if config.dataset != "binarized_mnist":  # the Bernoulli models: no data is read here
        config.dataset = "synthetic_grey"
      estimator = vae.validate(config)
      task = VAETask(config, estimator)
      hyperparameters = {k: jnp.float32(config[k]) for k in vae.HYPERPARAMETERS}
      jitted[row] = jax.jit(task.train_step, donate_argnums=0)
      make_key = lambda seed, impl=impl: jax.random.key(seed, impl=impl)  # noqa: E731
      holder = {"state": task.init_member(make_key(0), hyperparameters, 0), "step": 0}

      def step(
        train_step=jitted[row], holder=holder, hyperparameters=hyperparameters, x=x, key=make_key
      ):
        holder["step"] += 1
        holder["state"], metrics = train_step(
          holder["state"], hyperparameters, x, key(holder["step"]), holder["step"]
        )
        jax.block_until_ready(metrics)

      steps[row] = step
      if estimator.fn is estimators.gumbel_rao and not impl:
        # The uniforms of K samples of every variable of every stochastic layer, every draw.
        layers = len(task.inference_networks)
        samples = estimator.conditional_samples * estimator.draws
        size = batch_size * config.num_vars * config.arity * samples * layers
        if config.arity == 2:  # binary GR draws one uniform per variable and sample
          size //= 2
        floor = jax.jit(lambda key, n=size: jnp.sum(jax.random.uniform(key, (n,))))
        floors[row] = lambda floor=floor: jax.block_until_ready(floor(jax.random.key(0)))
  return steps, floors, lambda: {row: fn._cache_size() for row, fn in jitted.items()}


def _enumerable(config) -> bool:
  """Whether the model has the exact row: the categorical VAE at C ** L <= MAX_CONFIGURATIONS."""
  return "likelihood_gradient" in config and categorical_vae_model.enumerable(
    config.num_vars, config.arity
  )


def print_table(ms, floor_ms, compiles) -> None:
  """One row per batch size and estimator; beside each GR row its RNG floor and the target
  (ST-GS's step + 1.5 x the floor)."""
  width = max(10, *(len(row.split()[1]) for row in ms))
  print(
    f"{'B':>4} {'estimator':<{width}} {'ms/step':>9} {'steps/s':>8} {'RNG floor ms':>13}"
    f" {'target ms':>10} {'met':>4}"
  )
  compiled = compiles()
  for row, step_ms in ms.items():
    batch_size, name = row[2:].split()
    line = f"{batch_size:>4} {name:<{width}} {step_ms:>9.2f} {1e3 / step_ms:>8.1f}"
    stgs_ms = ms.get(_st_gs_row(row))
    if row in floor_ms and stgs_ms is not None:
      target = stgs_ms + 1.5 * floor_ms[row]
      met = "yes" if step_ms <= target else "no"
      line += f" {floor_ms[row]:>13.2f} {target:>10.2f} {met:>4}"
    print(line + f"   (train step compiled {compiled[row]}x)", flush=True)


def evaluation_ms_per_image(get_config, rng) -> float:
  """The M = 5000 test evaluation's wall time per image (printed for the full split)."""
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
  if images == _TEST_SIZE:
    print(f"\ntest evaluation, M = 5000, 10000 images: {seconds:.1f} s")
  else:
    print(
      f"\ntest evaluation, M = 5000: {seconds:.1f} s for {images} images;"
      f" extrapolated to 10000 images: {seconds * _TEST_SIZE / images:.0f} s"
    )
  return 1e3 * seconds / images


if __name__ == "__main__":
  app.run(main)
