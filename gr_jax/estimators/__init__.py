r"""Gradient estimators for categorical random variables: single-evaluation (one-hot samples
with their own backward pass) and multi-sample (RLOO, DisARM: they evaluate the loss).

Every estimator is a pure function of ``(key, logits, ...)``: the categories lie
on the last axis of ``logits``, any leading batch shape is allowed, and the
functions compose with ``jax.jit``, ``jax.vmap`` and ``jax.grad``. The
straight-through estimators (``straight_through``, ``st_gumbel_softmax``,
``gumbel_rao``) return an exact one-hot sample in the forward pass (every entry
is exactly 0 or 1) and replace only its backward pass, through
``jax.custom_vjp``.

Notation (Paulus, Maddison & Krause, "Rao-Blackwellizing the Straight-Through
Gumbel-Softmax Gradient Estimator", ICLR 2021): :math:`\theta` are the logits,
:math:`G` i.i.d. standard Gumbels, :math:`D = \mathrm{onehot}(\arg\max(\theta
+ G))` the sample, and :math:`\mathrm{softmax}_\tau(x) = \mathrm{softmax}(x /
\tau)`. For an upstream cotangent :math:`g = \partial f / \partial D` the
vector-Jacobian product of the tempered softmax at a point with value :math:`s`
is

.. math::
  g^\top \frac{d\, \mathrm{softmax}_\tau(x)}{d x} = \frac{1}{\tau}\,
  s \odot (g - \langle g, s \rangle),

which every estimator here uses: no :math:`n \times n` Jacobian is formed.

Conventions shared by every estimator:

* **Keys.** ``key`` is one PRNG key (``jax.random.key(seed)``, or a raw
  ``PRNGKey``); for a batch of keys, ``jax.vmap`` the estimator over them.
* **Common random numbers.** With the same key, every one-hot estimator samples
  the same ``D = onehot(argmax(logits + G))``, with ``G`` drawn as
  ``jax.random.gumbel(key, logits.shape)`` (in float32 for low-precision
  logits); ``gumbel_softmax`` relaxes the same ``G``. Randomness that a
  backward pass needs is drawn from ``jax.random.fold_in(key, 1)``; GR-MCK's
  sample k from ``fold_in(fold_in(key, 1), k)``, so that a row's gradient does
  not depend on how the call was batched or chunked.
* **Batch invariance** (``jax.vmap(f)(keys)[i] == f(keys[i])``, sample and
  gradient) holds for threefry keys, JAX's default (``jax.random.key``).
  With the ``rbg`` and ``unsafe_rbg`` implementations, JAX's own
  ``jax.random.gumbel`` draws other numbers under ``vmap`` than per key, so D
  and the gradients differ between the two (a property of JAX's generators;
  ``tests/estimators`` records it).
* **Temperature.** ``tau`` is a real number > 0 or an array of them
  broadcastable to ``logits.shape[:-1] + (1,)`` (one temperature per
  variable); it may be traced (annealing). Concrete values are checked in the
  dtype the estimator computes in (float32 for float32 and low-precision
  logits: 1e-50 is 0 there and 1e39 is inf, both refused).
* **Dtypes.** float32, bfloat16, float16 (computed in float32) and float64
  (computed in float64). Without ``jax_enable_x64``, JAX turns float64 numpy
  logits into float32 before the estimator sees them: enable x64 for float64.
* **Forward mode.** The straight-through and Gumbel-Rao estimators are
  ``jax.custom_vjp`` functions: reverse mode only (``jax.grad``, ``jax.vjp``,
  ``jax.jacrev``); ``jax.jvp`` / ``jax.jacfwd`` of them raise a one-line
  TypeError naming the function. GS and REINFORCE are ordinary functions.
* **Masks.** ``-inf`` logits mark impossible categories: they are never sampled
  and receive exactly zero gradient, whatever their cotangent (even inf).
* **Exact zeros.** Each backward pass is invariant to a constant shift of a
  row's cotangent, and the cotangent is centred on the sample first: where
  the softmaxes it evaluates are one-hot the gradient is exactly 0 at any tau,
  and every gradient row sums to 0 up to rounding.
* **Degenerate rows.** A row of logits that defines no distribution (a NaN
  entry, a ``+inf`` entry, or every entry ``-inf``) gives a sample row of NaN
  (all entries) and NaN gradients for that row, so that the problem shows in the
  loss rather than only in the gradients; other rows are unaffected.
* **Second derivatives** (with respect to the logits): each estimator's
  gradient is that of a stated surrogate, and differentiating it again gives
  that surrogate's Hessian, or raises a one-line ``ValueError`` naming the
  function (GR-MCK, GR-QMCK, GR-exact, RLOO, DisARM); the table per estimator
  is in docs/estimators.md.

The registry (:func:`get`, :func:`names`) holds every estimator by name; by
family (``names(family=...)``):
"""

from gr_jax.estimators._core import MAX_NUM_SAMPLES
from gr_jax.estimators._core import Array as Array  # the type alias, importable, not in __all__
from gr_jax.estimators._deterministic import gapped_straight_through, reinmax, zgr
from gr_jax.estimators._gumbel_rao import (
  CHUNK_ELEMENTS,
  conditional_gumbel,
  gumbel_rao,
  gumbel_rao_qmc,
  max_chunk_elements,
)
from gr_jax.estimators._gumbel_rao_exact import gumbel_rao_exact
from gr_jax.estimators._lattice import MAX_LATTICE_POINTS, korobov_vector, lattice_points
from gr_jax.estimators._multi_sample import disarm, rloo
from gr_jax.estimators._registry import FAMILIES, VALID_NAMES, Estimator, get, name_patterns, names
from gr_jax.estimators._score_function import (
  BaselineState,
  RunningMeanBaseline,
  categorical_log_prob,
  reinforce,
  score_function_surrogate,
)
from gr_jax.estimators._straight_through import gumbel_softmax, st_gumbel_softmax, straight_through

# The inventory that help() shows, written by the registry (no hand-kept list to drift).
__doc__ += "\n" + "\n".join(
  f"* {family}: {', '.join(name_patterns(family=family))}" for family in FAMILIES
)

# The package's own API (Array, the type alias, stays importable but is not listed: help() would
# print all of jax.Array's documentation).
__all__ = [
  "BaselineState",
  "CHUNK_ELEMENTS",
  "Estimator",
  "FAMILIES",
  "MAX_LATTICE_POINTS",
  "MAX_NUM_SAMPLES",
  "RunningMeanBaseline",
  "VALID_NAMES",
  "categorical_log_prob",
  "conditional_gumbel",
  "disarm",
  "gapped_straight_through",
  "get",
  "gumbel_rao",
  "gumbel_rao_exact",
  "gumbel_rao_qmc",
  "gumbel_softmax",
  "korobov_vector",
  "lattice_points",
  "max_chunk_elements",
  "name_patterns",
  "names",
  "reinforce",
  "reinmax",
  "rloo",
  "score_function_surrogate",
  "st_gumbel_softmax",
  "straight_through",
  "zgr",
]
