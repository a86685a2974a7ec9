"""Speed and memory of the estimators' forward+backward, side by side in one run.

For logits of shape (B, 60, 16) (the 16-ary VAE's latent layer) it prints, per
estimator, the median milliseconds of a jitted forward+backward (after a
warm-up), and beside each GR-MCK row the time JAX takes just to draw its
B*60*16*K uniform random numbers (drawn and summed, so that XLA cannot drop
them; the cheapest possible consumer) and the ratio, and the time of the same
estimator written as ``jax.vmap`` over K of a per-sample softmax VJP at
``conditional_gumbel`` samples (eq. 8, scanned in chunks of the same size):
the form the library's fast path is measured against. ST-GS is compared to a
plain softmax forward+backward. Peak memory is XLA's compiled buffer
assignment (arguments + outputs + temporaries) of the jitted function.

  python scripts/bench_estimators.py [--batch_sizes=20,200] [--repeats=20]
"""

import statistics
import time

import jax
import jax.numpy as jnp
from absl import app, flags

from gr_jax import estimators

_BATCH_SIZES = flags.DEFINE_list("batch_sizes", ["20", "200"], "Batch sizes B.")
_KS = flags.DEFINE_list("ks", ["10", "100", "1000"], "GR-MCK sample counts.")
_REPEATS = flags.DEFINE_integer("repeats", 20, "Timed repeats (median reported).")
_TAU = 0.5
_NUM_VARS, _ARITY = 60, 16


def _median_ms(fn, *args, repeats):
  jax.block_until_ready(fn(*args))  # compile and warm up
  jax.block_until_ready(fn(*args))
  times = []
  for _ in range(repeats):
    start = time.perf_counter()
    jax.block_until_ready(fn(*args))
    times.append(1e3 * (time.perf_counter() - start))
  return statistics.median(times)


def _forward_backward(estimator_fn):
  def loss(logits, key, cotangent):
    return jnp.sum(cotangent * estimator_fn(key, logits))

  return jax.jit(jax.grad(loss))


def _softmax_forward_backward():
  return jax.jit(jax.grad(lambda logits, key, w: jnp.sum(w * jax.nn.softmax(logits / _TAU))))


def _vmapped_gumbel_rao(num_samples):
  """GR-MCK as jax.vmap over K of the per-sample VJP, in chunks that divide K."""
  def grad(logits, key, cotangent):
    sample = estimators.st_gumbel_softmax(key, logits)  # the forward sample only
    limit = max(1, estimators.MAX_CHUNK_ELEMENTS // logits.size)
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


def main(argv):
  del argv
  repeats = _REPEATS.value
  key = jax.random.key(0)
  print(f"device: {jax.devices()[0].device_kind} ({jax.default_backend()}), jax {jax.__version__}")
  print(f"logits (B, {_NUM_VARS}, {_ARITY}), tau={_TAU}, median of {repeats} after warm-up\n")
  header = (
      f"{'B':>4} {'estimator':<12} {'fwd+bwd ms':>11} {'RNG floor ms':>13} {'ratio':>7}"
      f" {'vmap-over-K ms':>15} {'fast/vmap':>10}"
  )
  print(header)
  print("-" * len(header))
  peak = {}
  repeats_small = repeats * 10  # sub-millisecond rows need more repeats
  for batch in map(int, _BATCH_SIZES.value):
    logits = jax.random.normal(key, (batch, _NUM_VARS, _ARITY))
    cotangent = jax.random.normal(jax.random.key(1), logits.shape)
    softmax_ms = _median_ms(
        _softmax_forward_backward(), logits, key, cotangent, repeats=repeats_small
    )
    print(f"{batch:>4} {'softmax':<12} {softmax_ms:>11.3f}")
    fn = _forward_backward(lambda k, x: estimators.st_gumbel_softmax(k, x, tau=_TAU))
    stgs_ms = _median_ms(fn, logits, key, cotangent, repeats=repeats_small)
    peak[(batch, "st_gs")] = _peak_bytes(fn, logits, key, cotangent)
    floor_ms = softmax_ms + _median_ms(_rng_floor(logits.size), key, repeats=repeats_small)
    print(
        f"{batch:>4} {'st_gs':<12} {stgs_ms:>11.3f} {floor_ms:>13.3f} {stgs_ms / floor_ms:>6.2f}x"
        f"  ({stgs_ms / softmax_ms:.2f}x softmax; floor = softmax + its uniforms)"
    )
    for k in map(int, _KS.value):
      fn = _forward_backward(
          lambda key_, x, k=k: estimators.gumbel_rao(key_, x, tau=_TAU, num_samples=k)
      )
      k_repeats = max(3, repeats // (1 + k // 100))
      gr_ms = _median_ms(fn, logits, key, cotangent, repeats=k_repeats)
      floor_ms = _median_ms(_rng_floor(logits.size * k), key, repeats=k_repeats)
      vmap_ms = _median_ms(_vmapped_gumbel_rao(k), logits, key, cotangent, repeats=k_repeats)
      peak[(batch, f"gr_mc{k}")] = _peak_bytes(fn, logits, key, cotangent)
      print(
          f"{batch:>4} {f'gr_mc{k}':<12} {gr_ms:>11.3f} {floor_ms:>13.3f} {gr_ms / floor_ms:>6.2f}x"
          f" {vmap_ms:>15.3f} {gr_ms / vmap_ms:>9.2f}x"
      )
  print("\npeak memory of the jitted forward+backward (XLA buffer assignment):")
  for (batch, name), value in peak.items():
    print(f"  B={batch:<4} {name:<12} {value / 2**20:9.1f} MiB")


if __name__ == "__main__":
  app.run(main)
