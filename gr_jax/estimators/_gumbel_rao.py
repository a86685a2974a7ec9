r"""Gumbel-Rao (GR-MCK, GR-QMC): conditional Gumbels and the chunked backward pass (Paulus et al.
2021, section 3 and Appendix A); the lattice is in ``_lattice``, GR-exact in ``_gumbel_rao_exact``.

Part of :mod:`gr_jax.estimators` (its docstring states the conventions).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.custom_batching import custom_vmap

from gr_jax.estimators._core import (
  Array,
  _check_logits,
  _check_num_samples,
  _check_one_hot,
  _check_tau,
  _compute_dtype,
  _first_derivatives_only,
  _one_hot_estimator,
  _public,
  _typed_key,
  _uniform_open,
)
from gr_jax.estimators._lattice import MAX_LATTICE_POINTS, korobov_vector

# Upper bound, per backend, on the number of elements (num_samples x
# logits.size, counting every vmapped batch) that the Gumbel-Rao backward passes
# process at once; larger K is scanned in chunks. 2**20 elements (4 MiB per
# float32 temporary) are fastest on CPU; an accelerator wants larger chunks:
# GR-MC1000 forward+backward on an H200 (scripts/bench_estimators.py
# --chunk_sweep) took 0.65 / 0.40 / 0.40 / 0.39 ms at logits (20, 60, 16) and
# 5.18 / 3.61 / 2.76 / 2.57 ms at (200, 60, 16) with 2**20 / 2**22 / 2**24 /
# 2**26 elements (256 MiB per float32 temporary at 2**26).
CHUNK_ELEMENTS = {"cpu": 2**20, "default": 2**26}

# logZ - logits_j is split as head + tail with head <= _HEAD_LOG_RATIO; see
# `_gr_chunk_vjp`. Any value in about [45, 70] keeps float32 from overflowing
# and the tail formula free of cancellation.
_HEAD_LOG_RATIO = 60.0

# `jax.random.fold_in(key, _BACKWARD_STREAM)` seeds a backward pass's randomness.
_BACKWARD_STREAM = 1


# ---------------------------------------------------------------------------
# Gumbel-Rao (GR-MCK).
# ---------------------------------------------------------------------------


def _sample_uniforms(key: Array, start, size: int, shape, dtype) -> Array:
  """U(0, 1) draws ``[size, *shape]``, in (0, 1), of samples start, ..., start + size - 1.

  Sample k is drawn from ``fold_in(key, k)``: the draws depend on the key and
  the sample's index only, not on how the K samples are chunked or batched.
  """
  keys = jax.vmap(lambda k: jax.random.fold_in(key, k))(start + jnp.arange(size))
  return jax.vmap(lambda k: _uniform_open(k, shape, dtype))(keys)


def _sample_exponentials(key: Array, start, size: int, shape, dtype) -> Array:
  """Exp(1) draws ``[size, *shape]``: -log of `_sample_uniforms`."""
  return -jnp.log(_sample_uniforms(key, start, size, shape, dtype))


@_public
def conditional_gumbel(key: Array, logits: Array, sample: Array, num_samples: int) -> Array:
  r"""K samples of ``logits + G`` conditioned on ``argmax(logits + G) = sample``.

  With :math:`i` the index of the one-hot ``sample``,
  :math:`\log Z = \mathrm{logsumexp}(\theta)` and :math:`E_j \sim
  \mathrm{Exp}(1)` i.i.d. (Maddison et al. 2014; Paulus et al. 2021, eq. 8):

  .. math::
    (\theta + G)_j \mid D \overset{d}{=} \begin{cases}
      \log Z - \log E_i & j = i, \\
      -\log\left(E_j e^{-\theta_j} + E_i e^{-\log Z}\right) & j \ne i,
    \end{cases}

  computed in log space (``logaddexp``), so it is finite for logits of any
  scale; ``-inf`` logits give ``-inf``. Sample k uses the uniforms
  ``jax.random.uniform(fold_in(key, k), logits.shape)`` (:math:`E = -\log U`):
  for n > 2 the backward pass of :func:`gumbel_rao` called with ``key``
  evaluates the Jacobian at ``conditional_gumbel(fold_in(key, 1), logits, D,
  K)`` (for n = 2 it draws one uniform per variable and sample instead, the
  odds ratio of the two exponentials: the same law, other numbers).

  Args:
    key: a PRNG key.
    logits: float array ``[..., n]``.
    sample: one-hot array of the shape of ``logits`` (the conditioning value).
      Concrete values are checked to be one-hot; under ``jit`` they cannot be,
      and a sample that is not one-hot gives meaningless values.
    num_samples: K, a Python int >= 1.

  Returns:
    Array ``[K, ..., n]`` in the compute dtype of ``logits`` (float32 for
    low-precision logits) whose argmax over the last axis equals ``sample``.
  """
  _check_logits(logits)
  _check_one_hot(logits, sample)
  _check_num_samples(num_samples)
  dtype = _compute_dtype(logits.dtype)
  logits = logits.astype(dtype)
  is_top = sample.astype(bool)
  log_exp = jnp.log(_sample_exponentials(key, 0, num_samples, logits.shape, dtype))
  log_z = jax.nn.logsumexp(logits, axis=-1, keepdims=True)
  log_exp_top = jnp.sum(jnp.where(is_top, log_exp, 0.0), axis=-1, keepdims=True)
  top = log_z - log_exp_top
  others = -jnp.logaddexp(log_exp - logits, log_exp_top - log_z)
  return jnp.where(is_top, top, others)


def _gr_chunk_vjp(exps, exp_top, head, tail, is_top, is_masked, cotangent, tau, is_sample):
  r"""Sum over a chunk of conditional samples of s * (g - <g, s>), one batch row.

  Under the conditioning argmax = i, with E ~ Exp(1) i.i.d. and
  :math:`r_j = (E_j / E_i) e^{\log Z - \theta_j}`,

  .. math::
    \mathrm{softmax}_\tau(\theta + G)_j \propto (1 + r_j)^{-1/\tau} \;(j \ne i),
    \qquad 1 \;(j = i),

  which follows from `conditional_gumbel` by subtracting the top coordinate.
  With :math:`\log Z - \theta_j = a_j + b_j`, :math:`a_j = \min(\log Z -
  \theta_j, 60)`, the logarithm is computed exactly for every tau and logit
  scale, without overflow, as

  .. math::
    \log(1 + r_j) = b_j + \mathrm{log1p}\!\left(E_j \tfrac{e^{a_j}}{E_i}
      + \mathrm{expm1}(-b_j)\right):

  b_j = 0 (the usual case) is the plain log1p(r_j), and b_j > 0 only where
  :math:`E_j e^{a_j} / E_i > e^{60 - 21}` dwarfs the offset in (-1, 0]. Two
  transcendental operations per element here (log1p and exp) and no
  log-sum-exp over K. Masked categories are set to exactly zero.

  Args:
    exps: ``[c, V, n]`` the exponentials E_j of the chunk's c samples.
    exp_top: ``[c, V, 1]`` the exponential E_i of the sampled category.
    head: ``[V, n]`` exp(a), the capped part of exp(logZ - logits).
    tail: ``[V, n]`` b >= 0, the rest of logZ - logits.
    is_top, is_masked: ``[V, n]`` booleans (the sample; ``-inf`` logits).
    cotangent: ``[V, n]`` upstream cotangent g.
    tau: ``[V, 1]`` temperatures.
    is_sample: ``[c]`` booleans, False for the padding past the K-th sample.

  Returns:
    ``[V, n]`` sum over the chunk's samples of ``s_k * (g - <g, s_k>)``.
  """
  log1p_ratio = tail + jnp.log1p(exps * (head / exp_top) + jnp.expm1(-tail))
  unnormalized = jnp.exp(-log1p_ratio / tau)
  unnormalized = jnp.where(is_top, 1.0, jnp.where(is_masked, 0.0, unnormalized))
  # Materialize once: otherwise XLA fuses (and so recomputes) the random
  # number generation into each of the reductions below.
  unnormalized = jax.lax.optimization_barrier(unnormalized)
  inv_norm = jnp.where(is_sample[:, None], 1.0 / jnp.sum(unnormalized, axis=-1), 0.0)  # [c, V]
  inner = jnp.einsum("cvn,vn->cv", unnormalized, cotangent) * inv_norm  # <g, s_k>
  # sum_k s_k * (g - <g, s_k>) with s_k = u_k / z_k, as one contraction over k
  # with two weights: 1 / z_k and <g, s_k> / z_k.
  weights = jnp.stack([inv_norm, inner * inv_norm], axis=-1)  # [c, V, 2]
  weight_sum, weighted_inner = jnp.einsum("cvn,cvw->wvn", unnormalized, weights)
  return cotangent * weight_sum - weighted_inner


def _gr_binary_chunk_vjp(uniforms, head, tail, is_top, is_masked, cotangent, tau, is_sample):
  r"""`_gr_chunk_vjp` for two categories, from one uniform per variable and sample.

  With i the sampled category and j the other, the conditional softmax
  depends on the exponentials only through their ratio :math:`W = E_j / E_i`,
  whose law :math:`P(W \le w) = w / (1 + w)` is that of :math:`U / (1 - U)`
  for :math:`U \sim U(0, 1)` (:math:`\log W` is Logistic(0, 1)): so

  .. math::
    \log(1 + r_j) = \log \frac{(1 - U) + U e^{\log Z - \theta_j}}{1 - U},

  computed with ``head`` and ``tail`` as in `_gr_chunk_vjp` (no overflow), and with
  :math:`u = (1 + r_j)^{-1/\tau}` the conditional softmax is :math:`s_i = 1 / (1 + u)`,
  :math:`s_j = u / (1 + u)`, and

  .. math::
    s \odot (g - \langle g, s \rangle) = s_i s_j (g_i - g_j) \,(e_i - e_j),
    \qquad s_i s_j = u / (1 + u)^2:

  one random number, a log, an exp and two divisions per variable and sample:
  half the random numbers of the general case's two exponentials, and no log
  to turn them into exponentials.

  Args:
    uniforms: ``[c, V]`` the chunk's U in (0, 1), one per variable and sample.
    head, tail, is_top, is_masked, cotangent, tau, is_sample: as in `_gr_chunk_vjp`.
  """
  other = lambda x: jnp.sum(jnp.where(is_top, 0.0, x), axis=-1)  # noqa: E731
  tail_other = other(tail)  # [V]
  complement = 1.0 - uniforms  # exact in floating point for U in [1/2, 1)
  log1p_ratio = tail_other + jnp.log(
    (complement * jnp.exp(-tail_other) + uniforms * other(head)) / complement
  )
  u = jnp.exp(-log1p_ratio / tau[:, 0])
  u = jnp.where(jnp.any(is_masked, axis=-1), 0.0, u)
  weight = jnp.sum(jnp.where(is_sample[:, None], u / jnp.square(1.0 + u), 0.0), axis=0)  # [V]
  difference = jnp.sum(jnp.where(is_top, cotangent, -cotangent), axis=-1)  # g_i - g_j
  return jnp.where(is_top, 1.0, -1.0) * (weight * difference)[:, None]


def _top_exponential(exps, is_top):
  """``[c, V, 1]`` the sampled category's exponential, from materialized ``exps``."""
  # Without the barrier XLA fuses the draws into this reduction and into their
  # other use, computing every exponential twice.
  exps = jax.lax.optimization_barrier(exps)
  return exps, jnp.sum(jnp.where(is_top, exps, 0.0), axis=-1, keepdims=True)


def _lattice_uniforms(generator, tent, shift, start, size):
  """``[c, V, m]`` the shifted lattice points [start, start + size) of one row.

  ``shift`` is the row's ``[V, m]`` uniform shift, m the lattice's dimension.
  """
  num_points, z = generator
  # Modulo K: the padding past the last point (weighted zero) wraps round, and
  # k * z stays within int32.
  k = (start + jnp.arange(size, dtype=jnp.int32)) % num_points
  rows = (k[:, None] * z[None, :] % num_points).astype(shift.dtype) / num_points  # [c, m]
  u = rows[:, None, :] + shift[None]
  u = u - jnp.floor(u)  # each marginally U[0, 1)
  if tent:
    u = 1.0 - jnp.abs(2.0 * u - 1.0)  # baker's transform: still uniform
  dtype = u.dtype
  return jnp.clip(u, jnp.finfo(dtype).tiny, 1.0 - jnp.finfo(dtype).epsneg)


def _monte_carlo_noise(binary, dtype, key, start, size, is_top):
  """The chunk's random numbers for one batch row: binary ``[c, V]`` uniforms, else
  ``(exps, exp_top)`` Exp(1) draws."""
  if binary:
    return _sample_uniforms(key, start, size, is_top.shape[:-1], dtype)
  return _top_exponential(_sample_exponentials(key, start, size, is_top.shape, dtype), is_top)


def _lattice_noise(binary, generator, tent, shift, start, size, is_top):
  """`_monte_carlo_noise` from the shifted lattice (binary: one coordinate, z = 1)."""
  u = _lattice_uniforms(generator, tent, shift, start, size)
  if binary:
    return u[..., 0]
  return _top_exponential(-jnp.log(u), is_top)


def max_chunk_elements() -> int:
  """Elements of one backward-pass chunk on the default backend (see CHUNK_ELEMENTS)."""
  return CHUNK_ELEMENTS.get(jax.default_backend(), CHUNK_ELEMENTS["default"])


def _gr_batched_grad(num_samples, sampler, chunk_elements, keys, logits, sample, cotangent, tau):
  """Gumbel-Rao gradients of a batch: keys ``[B]``, logits ``[B, V, n]``, tau ``[B, V, 1]``.

  Chunks of K are sized from the whole batch (B * V * n elements a sample), so
  that the memory bound holds however the caller batched the estimator.
  ``sampler`` is "mc" (i.i.d. exponentials) or "qmc" / "qmc_tent" (a randomly
  shifted rank-1 lattice, one uniform shift per variable and category).
  """
  num_categories = logits.shape[-1]
  log_ratio = jax.nn.logsumexp(logits, axis=-1, keepdims=True) - logits  # >= 0
  head_log_ratio = jnp.minimum(log_ratio, _HEAD_LOG_RATIO)
  is_top = sample.astype(bool)
  rows = (
    jnp.exp(head_log_ratio),
    log_ratio - head_log_ratio,
    is_top,
    jnp.isneginf(logits),
    cotangent,
    tau,
  )
  binary = num_categories == 2
  if sampler == "mc":
    noise_state, noise = keys, functools.partial(_monte_carlo_noise, binary, logits.dtype)
  else:
    # Binary variables need one coordinate (the odds ratio), the general case one per category.
    dimension = 1 if binary else num_categories
    generator = (num_samples, jnp.asarray(korobov_vector(num_samples, dimension), jnp.int32))
    noise = functools.partial(_lattice_noise, binary, generator, sampler == "qmc_tent")
    shift_shape = logits.shape[1:-1] + (dimension,)
    noise_state = jax.vmap(lambda k: jax.random.uniform(k, shift_shape, logits.dtype))(keys)

  # K in equal chunks, as few as the memory bound allows, the last one padded
  # with samples weighted zero (fewer than one per chunk): one compiled chunk,
  # and no remainder. A chunk of 54 and a remainder of 46 (K = 100 at logits
  # (20, 60, 16) on CPU) made the two-layer VAE's GR-MC100 step 2.8x the
  # one-layer's; 1.8x in equal chunks.
  max_chunk_size = max(1, min(num_samples, chunk_elements // max(1, logits.size)))
  num_chunks = -(-num_samples // max_chunk_size)
  chunk_size = -(-num_samples // num_chunks)

  def chunk_vjp(start):
    def one_row(state, head, tail, top, masked, cot, row_tau):
      is_sample = start + jnp.arange(chunk_size) < num_samples
      if binary:
        uniforms = noise(state, start, chunk_size, top)
        return _gr_binary_chunk_vjp(uniforms, head, tail, top, masked, cot, row_tau, is_sample)
      exps, exp_top = noise(state, start, chunk_size, top)
      return _gr_chunk_vjp(exps, exp_top, head, tail, top, masked, cot, row_tau, is_sample)

    return jax.vmap(one_row)(noise_state, *rows)

  if num_chunks == 1:
    total = chunk_vjp(0)
  else:

    def body(total, index):
      return total + chunk_vjp(index * chunk_size), None

    total, _ = jax.lax.scan(body, jnp.zeros_like(logits), jnp.arange(num_chunks))
  return total / (num_samples * tau)


# The public function behind each sampler, named by the second-derivative error.
_SAMPLER_FUNCTIONS = {"mc": "gumbel_rao", "qmc": "gumbel_rao_qmc", "qmc_tent": "gumbel_rao_qmc"}


@functools.lru_cache(maxsize=None)
def _gr_grad_fn(num_samples: int, sampler: str, chunk_elements: int):
  """The batched GR gradient for K = num_samples, with its vmap and JVP rules."""

  @custom_vmap
  def grad_fn(keys, logits, sample, cotangent, tau):
    return _gr_batched_grad(
      num_samples, sampler, chunk_elements, keys, logits, sample, cotangent, tau
    )

  @grad_fn.def_vmap
  def _merge_batch_axes(axis_size, in_batched, *args):
    # Fold the vmapped axis into the batch axis, so that chunks see every row.
    args = [
      a if batched else jnp.broadcast_to(a, (axis_size, *a.shape))
      for a, batched in zip(args, in_batched)
    ]
    merged = grad_fn(*(a.reshape(-1, *a.shape[2:]) for a in args))
    return merged.reshape(axis_size, -1, *merged.shape[1:]), True

  return _first_derivatives_only(grad_fn, _SAMPLER_FUNCTIONS[sampler])


def _gumbel_rao_backward(key, logits, sample, cotangent, tau, num_samples, sampler):
  num_categories = logits.shape[-1]
  as_rows = lambda x: x.reshape(1, -1, num_categories)
  row_tau = jnp.broadcast_to(jnp.asarray(tau, logits.dtype), logits.shape[:-1] + (1,)).reshape(
    1, -1, 1
  )
  backward_key = jax.random.fold_in(_typed_key(key), _BACKWARD_STREAM)
  grad = _gr_grad_fn(num_samples, sampler, max_chunk_elements())(
    backward_key[None], as_rows(logits), as_rows(sample), as_rows(cotangent), row_tau
  )
  return grad.reshape(logits.shape)


_gumbel_rao = _one_hot_estimator(_gumbel_rao_backward)


@_public
def gumbel_rao(
  key: Array, logits: Array, *, tau: float | Array = 1.0, num_samples: int = 10
) -> Array:
  r"""Gumbel-Rao Monte Carlo estimator (GR-MCK), Paulus et al. 2021.

  Forward: an exact one-hot sample :math:`D \sim
  \mathrm{Categorical}(\mathrm{softmax}(\theta))` (the same ``D`` as
  ``st_gumbel_softmax`` with the same key). Backward: the upstream cotangent
  times the Monte Carlo average of the tempered-softmax Jacobian at K
  conditional Gumbel samples:

  .. math::
    \nabla_{\mathrm{GRMC}K} = \frac{\partial f(D)}{\partial D}\,
      \frac{1}{K} \sum_{k=1}^{K} J_\tau(\theta + G^k), \qquad
    J_\tau(x) = \frac{d\, \mathrm{softmax}_\tau(x)}{dx},
    \quad \theta + G^k \overset{iid}{\sim} \theta + G \mid D.

  The :math:`G^k` are held fixed: the Jacobian is evaluated at the conditional
  samples and no derivative is taken through the conditional sampling path.
  This is the paper's Appendix A pseudo-code and the estimator that its
  Propositions 1-3 are about: since :math:`E[J_\tau(\theta + G) \mid D]` is
  estimated without bias, :math:`E[\nabla_{\mathrm{GRMC}K} \mid D] =
  E[\nabla_{\mathrm{STGS}} \mid D]`, and for K = 1 the estimator has exactly
  the distribution of ST-GS. The sentence of the paper's section 3.2 that takes
  the *total* derivative through :math:`G^k` (which depends on
  :math:`\theta` through the reparameterization of eq. 8) describes a
  different estimator: its mean is not ST-GS's, and since the conditional
  tempered softmax tends to the constant ``D`` as tau -> 0, its total
  derivative, and with it the mean, tends to 0. For the same reason the
  backward pass is not differentiable: second derivatives raise ValueError.

  The backward pass is exact for every tau and logit scale (see
  ``_gr_chunk_vjp``): no ratio of probabilities is capped.

  Cost and memory: the vector-Jacobian product is
  :math:`\frac{1}{\tau} s^k \odot (g - \langle g, s^k \rangle)`, O(K n) per
  variable. The residuals saved for the backward pass are the key, the logits
  and the sample; the K conditional samples are regenerated from
  ``fold_in(key, 1)`` in the backward pass, at most ``max_chunk_elements()``
  of the ``K x logits.size`` elements at a time (``CHUNK_ELEMENTS``: 2**20 on
  CPU, 2**26 on accelerators), scanned over chunks. The chunks are sized for
  the whole batch also under ``jax.vmap`` (a custom batching rule folds the
  vmapped axes into the rows), so the backward pass holds O(min(K, c) * size +
  size) floats with ``c = max(1, max_chunk_elements() // size)`` and ``size``
  the number of logits in the whole (vmapped) batch: a few 4 MiB float32
  buffers on CPU for any K (about 28 MiB in all for K = 1000 at logits
  (200, 60, 16), measured by ``scripts/bench_estimators.py``), a few 256 MiB
  buffers on a GPU.

  The backward pass is written with an explicit K axis (one chunk of samples
  as an array) and two contractions over it, rather than as ``jax.vmap`` over
  K of a per-sample VJP: it computes ``sum_k s_k`` and ``sum_k s_k <g, s_k>``
  and forms ``g * sum_k s_k - sum_k s_k <g, s_k>`` once per variable instead
  of once per sample. The tests keep the ``vmap`` form as the reference
  (``tests/test_estimators.py``), and ``scripts/bench_estimators.py`` times
  both.

  Args:
    key: a PRNG key.
    logits: float array ``[..., n]`` (float32, bfloat16, float16 or float64;
      low precision is computed in float32); ``-inf`` marks impossible
      categories.
    tau: temperature > 0 of the surrogate softmax, a number or an array
      broadcastable to ``logits.shape[:-1] + (1,)`` (may be traced).
    num_samples: K >= 1, the number of conditional Gumbel samples.

  Returns:
    An exact one-hot sample of the shape and dtype of ``logits``.
  """
  _check_logits(logits)
  tau = _check_tau(tau, logits)
  _check_num_samples(num_samples)
  return _gumbel_rao(key, logits, tau, (num_samples, "mc"))


@_public
def gumbel_rao_qmc(
  key: Array, logits: Array, *, tau: float | Array = 1.0, num_samples: int = 100, tent: bool = True
) -> Array:
  r"""Gumbel-Rao with randomized quasi-Monte Carlo conditional samples (GR-QMCK).

  The same estimator as :func:`gumbel_rao` (an unbiased estimate of
  :math:`E[\nabla_{\mathrm{STGS}} \mid D]`), with the K conditional samples
  built from a randomly shifted rank-1 lattice instead of i.i.d. uniforms:
  for each variable, one uniform shift :math:`\Delta \in [0, 1)^n` and

  .. math::
    u^k = \phi(\{k z / K + \Delta\}), \quad E^k_j = -\log u^k_j, \quad
    k = 0, \dots, K - 1,

  with Korobov's generating vector ``z`` (:func:`lattice_points`) and
  :math:`\phi` the tent (baker's) transform :math:`\phi(u) = 1 - |2u - 1|`
  (or the identity with ``tent=False``). Every point is marginally uniform, so
  each term, and the average, has the conditional mean of GR-MCK: the
  estimator stays unbiased for :math:`E[\nabla_{\mathrm{STGS}} \mid D]`, while
  the lattice spreads the K points evenly and cuts the inner (given D)
  variance well below Monte Carlo's at equal K. It draws n random numbers per
  variable instead of K n (binary variables: one lattice coordinate, the odds
  ratio of the two exponentials, and one random shift). This is the
  "well-known variance reduction" the paper's section 3.3 suggests; the
  lattice rule is standard (Sloan & Joe 1994; L'Ecuyer & Lemieux 2000), the
  construction is ours.

  Args:
    key: a PRNG key (the sample ``D`` is the same as ``gumbel_rao``'s).
    logits: float array ``[..., n]``; ``-inf`` marks impossible categories.
    tau: temperature > 0, a number or an array broadcastable to
      ``logits.shape[:-1] + (1,)`` (may be traced).
    num_samples: K, the number of lattice points, 1 <= K <= 46,340
      (``MAX_LATTICE_POINTS``: the lattice index is computed in int32). Its
      generating vector is searched once per K, at trace time
      (:func:`korobov_vector`: about a second up to K = 4096, a few seconds at
      the largest K on a 2-core CPU).
    tent: apply the tent transform (default True; registry names
      ``gr_qmc<K>`` and, without it, ``gr_qmc<K>_no_tent``).

  Returns:
    An exact one-hot sample of the shape and dtype of ``logits``.
  """
  _check_logits(logits)
  tau = _check_tau(tau, logits)
  _check_num_samples(num_samples, MAX_LATTICE_POINTS)
  sampler = "qmc_tent" if tent else "qmc"
  return _gumbel_rao(key, logits, tau, (num_samples, sampler))
