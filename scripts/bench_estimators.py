"""Speed and memory of the estimators' forward+backward, side by side in one run.

For logits of shape (B, 60, 16) (the 16-ary VAE's latent layer) it prints, per
estimator, the median milliseconds of a jitted forward+backward (after a
warm-up) and a ratio to the row it should be compared with:

* ST-GS against a plain softmax forward+backward plus its uniforms ("floor");
* ZGR, ReinMax, GST-1.0 and GST-p against ST-GS;
* GR-MCK against the time JAX takes just to draw (and sum) its B*60*16*K
  uniforms (RNG floor), and against the same estimator written as ``jax.vmap``
  over K of a per-sample softmax VJP at ``conditional_gumbel`` samples (eq. 8,
  scanned in chunks of the same size), the form the fast path is measured
  against;
* GR-QMCK against GR-MCK at the same K.

Peak memory is XLA's compiled buffer assignment (arguments + outputs +
temporaries) of the jitted function. Last, the inner (given D) variance of the
gradient of GR-MC100, GR-MC1000 and GR-QMC100 on the paper's toy quadratic
program at p = (0.6, 0.3, 0.1), tau = 0.5 (``--inner_draws`` draws each): the
part of the variance that K divides. ``--chunk_sweep`` also times GR-MC1000 with
several backward-pass chunk sizes (``estimators.CHUNK_ELEMENTS``).

  python -m scripts.bench_estimators [--batch_sizes=20,200] [--repeats=20] [--chunk_sweep]
"""

import jax
import jax.numpy as jnp
from absl import app, flags

from gr_jax import diagnostics, estimators, toy_qp
from scripts import common
from scripts.common import median_ms

_BATCH_SIZES = flags.DEFINE_list("batch_sizes", ["20", "200"], "Batch sizes B.")
_KS = flags.DEFINE_list("ks", ["10", "100", "1000"], "GR-MCK / GR-QMCK sample counts.")
_REPEATS = flags.DEFINE_integer("repeats", 20, "Timed repeats (median reported).")
_CHUNK_SWEEP = flags.DEFINE_boolean("chunk_sweep", False, "Time GR-MC1000 at several chunk sizes.")
_INNER_DRAWS = flags.DEFINE_integer(
  "inner_draws", 4000, "Draws for the inner-variance rows (0 = skip)."
)
_TAU = 0.5
_NUM_VARS, _ARITY = 60, 16
common.numbers(_BATCH_SIZES, int, minimum=1)
common.numbers(_KS, int, minimum=1)
common.at_least(_REPEATS, 1)


def _forward_backward(estimator_fn):
  # value_and_grad, as in training: the loss needs the forward sample, which
  # jax.grad alone could drop for estimators whose backward pass does not use it.
  def loss(logits, key, cotangent):
    return jnp.sum(cotangent * estimator_fn(key, logits))

  return jax.jit(jax.value_and_grad(loss))


def _named(name):
  estimator = estimators.get(name)
  return _forward_backward(lambda k, x: estimator(k, x, tau=_TAU))


def _softmax_forward_backward():
  return jax.jit(
    jax.value_and_grad(lambda logits, key, w: jnp.sum(w * jax.nn.softmax(logits / _TAU)))
  )


def _vmapped_gumbel_rao(num_samples):
  """GR-MCK as jax.vmap over K of the per-sample VJP, in chunks that divide K."""

  def grad(logits, key, cotangent):
    sample = estimators.st_gumbel_softmax(key, logits)  # the forward sample only
    limit = max(1, estimators.max_chunk_elements() // logits.size)
    chunk = max(c for c in range(1, min(num_samples, limit) + 1) if num_samples % c == 0)

    def softmax_vjp(point):
      return jax.vjp(lambda x: jax.nn.softmax(x / _TAU), point)[1](cotangent)[0]

    def body(total, chunk_key):
      points = estimators.conditional_gumbel(chunk_key, logits, sample, chunk)
      return total + jax.vmap(softmax_vjp)(points).sum(0), None

    keys = jax.random.split(key, num_samples // chunk)
    total, _ = jax.lax.scan(body, jnp.zeros_like(logits), keys)
    return total / num_samples

  return jax.jit(grad)


def _inner_variances(draws):
  """E[Var(grad | D)] on the toy QP at one point for GR-MC100, GR-MC1000 and GR-QMC100."""
  q, c = toy_qp.paper_problem()
  p = jnp.array([0.6, 0.3, 0.1])
  result = {}
  for name in ("gr_mc100", "gr_mc1000", "gr_qmc100"):
    estimator = estimators.get(name)

    def one(key, estimator=estimator):
      grad, sample = jax.grad(
        lambda t: (lambda d: (toy_qp.stochastic_loss(d, p, q, c), d))(estimator(key, t, tau=_TAU)),
        has_aux=True,
      )(jnp.log(p))
      return grad, jnp.argmax(sample)

    grads, groups = jax.jit(jax.vmap(one))(jax.random.split(jax.random.key(3), draws))
    result[name] = diagnostics.variance_decomposition(grads, groups).within
  return result


def _rng_floor(count):
  return jax.jit(lambda key: jnp.sum(jax.random.uniform(key, (count,))))


def _peak_bytes(jitted, *args):
  stats = jitted.lower(*args).compile().memory_analysis()
  if stats is None:
    return float("nan")
  return (
    stats.argument_size_in_bytes
    + stats.output_size_in_bytes
    + stats.temp_size_in_bytes
    - stats.alias_size_in_bytes
  )


def _row(batch, name, ms, reference_ms=None, reference="", extra=""):
  ratio = f"{ms / reference_ms:6.2f}x {reference}" if reference_ms else ""
  print(f"{batch:>4} {name:<12} {ms:>11.3f}  {ratio}{extra}")


def main(argv):
  del argv
  repeats = _REPEATS.value
  key = jax.random.key(0)
  print(f"device: {jax.devices()[0].device_kind} ({jax.default_backend()}), jax {jax.__version__}")
  print(
    f"logits (B, {_NUM_VARS}, {_ARITY}), tau={_TAU}, median of {repeats} after warm-up,"
    f" backward chunks of {estimators.max_chunk_elements()} elements\n"
  )
  header = f"{'B':>4} {'estimator':<12} {'fwd+bwd ms':>11}  ratio to"
  print(header)
  print("-" * 72)
  peak = {}
  repeats_small = repeats * 10  # sub-millisecond rows need more repeats
  for batch in map(int, _BATCH_SIZES.value):
    logits = jax.random.normal(key, (batch, _NUM_VARS, _ARITY))
    cotangent = jax.random.normal(jax.random.key(1), logits.shape)
    args = (logits, key, cotangent)
    softmax_ms = median_ms(_softmax_forward_backward(), *args, repeats=repeats_small)
    _row(batch, "softmax", softmax_ms)
    fn = _named("st_gs")
    stgs_ms = median_ms(fn, *args, repeats=repeats_small)
    peak[(batch, "st_gs")] = _peak_bytes(fn, *args)
    floor_ms = softmax_ms + median_ms(_rng_floor(logits.size), key, repeats=repeats_small)
    _row(
      batch,
      "st_gs",
      stgs_ms,
      floor_ms,
      "floor (softmax + its uniforms)",
      f"; {stgs_ms / softmax_ms:.2f}x softmax",
    )
    for name in estimators.names(family="deterministic"):
      _row(batch, name, median_ms(_named(name), *args, repeats=repeats_small), stgs_ms, "st_gs")
    for k in map(int, _KS.value):
      # Seconds-long CPU rows get fewer repeats; accelerator rows are fast.
      k_repeats = max(3, repeats // (1 + k // 100)) if jax.default_backend() == "cpu" else repeats
      fn = _named(f"gr_mc{k}")
      gr_ms = median_ms(fn, *args, repeats=k_repeats)
      rng_ms = median_ms(_rng_floor(logits.size * k), key, repeats=k_repeats)
      vmap_ms = median_ms(_vmapped_gumbel_rao(k), *args, repeats=k_repeats)
      peak[(batch, f"gr_mc{k}")] = _peak_bytes(fn, *args)
      _row(
        batch,
        f"gr_mc{k}",
        gr_ms,
        rng_ms,
        "RNG floor",
        f"; {gr_ms / vmap_ms:.2f}x the vmap-over-K form ({vmap_ms:.3f} ms)",
      )
      fn = _named(f"gr_qmc{k}")
      qmc_ms = median_ms(fn, *args, repeats=k_repeats)
      peak[(batch, f"gr_qmc{k}")] = _peak_bytes(fn, *args)
      _row(batch, f"gr_qmc{k}", qmc_ms, gr_ms, f"gr_mc{k}")
  if _CHUNK_SWEEP.value:
    backend = jax.default_backend()
    default = estimators.max_chunk_elements()
    print(f"\nGR-MC1000 against the backward chunk size ({backend}):")
    for batch in map(int, _BATCH_SIZES.value):
      logits = jax.random.normal(key, (batch, _NUM_VARS, _ARITY))
      args = (logits, key, jax.random.normal(jax.random.key(1), logits.shape))
      for log2 in (18, 20, 22, 24, 26):
        estimators.CHUNK_ELEMENTS[backend] = 2**log2
        ms = median_ms(_named("gr_mc1000"), *args, repeats=repeats)
        print(f"  B={batch:<4} chunk 2^{log2}: {ms:9.3f} ms")
    estimators.CHUNK_ELEMENTS[backend] = default
  print("\npeak memory of the jitted forward+backward (XLA buffer assignment):")
  for (batch, name), value in peak.items():
    print(f"  B={batch:<4} {name:<12} {value / 2**20:9.1f} MiB")
  if _INNER_DRAWS.value:
    inner = _inner_variances(_INNER_DRAWS.value)
    print(
      f"\ninner variance E[Var(grad | D)], toy QP at p = (0.6, 0.3, 0.1), tau = {_TAU},"
      f" {_INNER_DRAWS.value} draws:"
    )
    for name, value in inner.items():
      print(f"  {name:<10} {value:.3e}  ({value / inner['gr_mc1000']:.2f}x gr_mc1000)")


if __name__ == "__main__":
  app.run(main)
