r"""The basic Gumbel Tree-LSTM of Choi, Yoo & Lee (2018), in Flax NNX.

Leaves: a linear map of each token embedding to (h, c) (no leaf RNN, no
intra-attention, no dropout). Each of the L - 1 merge steps composes every
adjacent pair with the binary Tree-LSTM cell

.. math::
  c = \sigma(f_l + 1) c_l + \sigma(f_r + 1) c_r + \sigma(i) \tanh(u), \quad
  h = \sigma(o) \tanh(c),

scores each candidate parent with a learned query, :math:`\langle q, h
\rangle / \sqrt{d}`, masks positions that would merge padding with ``-inf``,
selects one merge (an estimator from ``gr_jax.estimators`` in training, the
argmax in evaluation) and forms the next layer as

.. math::
  h'_k = [k < s]\, h_k + [k = s]\, \mathrm{parent}_k + [k > s]\, h_{k+1}

with the masks computed from the one-hot selection (cumulative sums), so that
straight-through gradients reach the scores. The loop is a ``lax.scan`` over
a fixed padded length.

Initialization (each layer's its own argument) defaults to Choi et al.'s code
(``jihunchoi/unsupervised-treelstm``: ``sst/model.py``, ``snli/model.py``,
``model/treelstm.py``): word embeddings N(0, 0.01^2); the leaf projection, the
composition layer and the classifier's hidden layer Kaiming-normal (std
sqrt(2 / fan_in), as PyTorch's ``kaiming_normal``); the classifier's output
layer uniform in +-0.002 (``snli/model.py``; the SST model draws +-0.005 and
then overwrites it with Kaiming-normal); the composition query N(0, 0.01^2);
every bias 0. ``lecun_normal``, ``flax_embed`` and ``orthogonal`` are Flax's
defaults and the orthogonal composition layer used before
(``configs/listops_flax_init.py``).
"""

from __future__ import annotations

import math
from typing import Callable

import jax
import jax.numpy as jnp
from flax import nnx

# (key, logits [B, P]) -> one-hot selection [B, P]
SelectFn = Callable[[jax.Array, jax.Array], jax.Array]


def _symmetric_uniform(scale: float):
  """U(-scale, scale), as PyTorch's ``init.uniform(w, -scale, scale)``."""
  return lambda key, shape, dtype=jnp.float32: (
    nnx.initializers.uniform(2 * scale)(key, shape, dtype) - scale
  )


INITIALIZERS = {
  "normal_0.01": nnx.initializers.normal(0.01),
  "kaiming_normal": nnx.initializers.variance_scaling(2.0, "fan_in", "normal"),
  "uniform_0.002": _symmetric_uniform(0.002),
  "orthogonal": nnx.initializers.orthogonal(),
  "lecun_normal": nnx.initializers.lecun_normal(),
  # nnx.Embed's default: variance scaling 1.0, fan-in over the features, normal.
  "flax_embed": nnx.initializers.variance_scaling(1.0, "fan_in", "normal", out_axis=0),
}


def initializer(name: str):
  """The named initializer (a key of INITIALIZERS), or ValueError naming the allowed ones."""
  if name not in INITIALIZERS:
    raise ValueError(f"initializer must be one of {sorted(INITIALIZERS)}; got {name!r}.")
  return INITIALIZERS[name]


def greedy_select(key, logits):
  del key
  return jax.nn.one_hot(jnp.argmax(logits, axis=-1), logits.shape[-1], dtype=logits.dtype)


def merge_masks(select: jax.Array) -> tuple[jax.Array, jax.Array]:
  """(left, right) masks of a one-hot selection: 1 before / after the selected index."""
  cumulative = jnp.cumsum(select, axis=-1)
  return 1.0 - cumulative, cumulative - select


class GumbelTreeLSTM(nnx.Module):
  def __init__(
    self,
    vocab_size: int,
    num_classes: int,
    *,
    embed_dim: int = 128,
    hidden_dim: int = 128,
    classifier_hidden_dim: int = 128,
    embed_init: str = "normal_0.01",
    leaf_init: str = "kaiming_normal",
    compose_init: str = "kaiming_normal",
    classifier_init: str = "kaiming_normal",
    output_init: str = "uniform_0.002",
    rngs: nnx.Rngs,
  ):
    self.hidden_dim = hidden_dim
    self.embed = nnx.Embed(vocab_size, embed_dim, embedding_init=initializer(embed_init), rngs=rngs)
    self.leaf = nnx.Linear(embed_dim, 2 * hidden_dim, kernel_init=initializer(leaf_init), rngs=rngs)
    self.compose = nnx.Linear(
      2 * hidden_dim, 5 * hidden_dim, kernel_init=initializer(compose_init), rngs=rngs
    )
    self.query = nnx.Param(0.01 * jax.random.normal(rngs.params(), (hidden_dim,)))
    self.hidden = nnx.Linear(
      hidden_dim, classifier_hidden_dim, kernel_init=initializer(classifier_init), rngs=rngs
    )
    self.output = nnx.Linear(
      classifier_hidden_dim, num_classes, kernel_init=initializer(output_init), rngs=rngs
    )

  def compose_pairs(self, h, c):
    """Tree-LSTM parents of every adjacent pair: ``[B, L, d]`` -> ``[B, L - 1, d]``."""
    gates = self.compose(jnp.concatenate([h[:, :-1], h[:, 1:]], axis=-1))
    i, f_left, f_right, u, o = jnp.split(gates, 5, axis=-1)
    parent_c = (
      jax.nn.sigmoid(f_left + 1.0) * c[:, :-1]
      + jax.nn.sigmoid(f_right + 1.0) * c[:, 1:]
      + jax.nn.sigmoid(i) * jnp.tanh(u)
    )
    return jax.nn.sigmoid(o) * jnp.tanh(parent_c), parent_c

  def merge_logits(self, parent_h, num_nodes):
    """Scores of the candidate parents, ``-inf`` where a merge would touch padding.

    An example already reduced to its root (num_nodes <= 1) gets position 0
    only, a placeholder whose result is discarded.
    """
    scores = parent_h @ self.query.get_value() / math.sqrt(self.hidden_dim)
    positions = jnp.arange(parent_h.shape[1])[None, :]
    valid = (positions < (num_nodes - 1)[:, None]) | ((num_nodes <= 1)[:, None] & (positions == 0))
    return jnp.where(valid, scores, -jnp.inf)

  def encode(self, tokens, lengths, key, select: SelectFn):
    """Root states ``[B, d]`` and the merge selections ``[L - 1, B, L - 1]``."""
    h, c = jnp.split(self.leaf(self.embed(tokens)), 2, axis=-1)

    def step(carry, t):
      h, c = carry
      parent_h, parent_c = self.compose_pairs(h, c)
      num_nodes = lengths - t
      chosen = select(jax.random.fold_in(key, t), self.merge_logits(parent_h, num_nodes))
      left, right = merge_masks(chosen)
      left, chosen_, right = left[..., None], chosen[..., None], right[..., None]
      new_h = left * h[:, :-1] + chosen_ * parent_h + right * h[:, 1:]
      new_c = left * c[:, :-1] + chosen_ * parent_c + right * c[:, 1:]
      # Keep the padded length fixed: the last slot is padding from here on.
      new_h = jnp.concatenate([new_h, h[:, -1:]], axis=1)
      new_c = jnp.concatenate([new_c, c[:, -1:]], axis=1)
      done = (num_nodes <= 1)[:, None, None]
      return (jnp.where(done, h, new_h), jnp.where(done, c, new_c)), chosen

    (h, _), selections = jax.lax.scan(step, (h, c), jnp.arange(tokens.shape[1] - 1))
    return h[:, 0], selections

  def __call__(self, tokens, lengths, key, select: SelectFn = greedy_select):
    """Class logits ``[B, num_classes]`` for ``[B, L]`` tokens of the given lengths."""
    root, _ = self.encode(tokens, lengths, key, select)
    return self.output(jax.nn.relu(self.hidden(root)))
