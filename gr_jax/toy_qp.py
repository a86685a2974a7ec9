r"""The toy quadratic program on the simplex (Paulus et al. 2021, section 5.1, Figure 1).

Minimize :math:`(p - c)^\top Q (p - c)` over the simplex, recast as a
stochastic problem in a categorical D ~ Cat(p):

.. math::
  E_{D \sim p}\left[(D - c)^\top A(p) (D - c)\right], \quad
  A_{ii} = \frac{(p_i - c_i)^2 Q_{ii}}{p_i - 2 p_i c_i + c_i^2}, \quad
  A_{ij} = \frac{(p_i - c_i)(p_j - c_j) Q_{ij}}{c_i c_j - p_i c_j - c_i p_j},

which equals the quadratic wherever the denominators are nonzero (expand
:math:`\sum_i p_i (e_i - c)^\top A (e_i - c)` with :math:`\sum_i p_i = 1`).
As in the paper, A(p) is evaluated at the current p and held constant when
differentiating. With :math:`Q_{ij} = e^{-2|i - j|}` and :math:`c_i = 1/3`
(n = 3) the off-diagonal denominators vanish on the lines
:math:`p_i + p_j = 1/3`, where A and the gradient variance blow up.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np


def paper_problem(n: int = 3) -> tuple[jax.Array, jax.Array]:
  """(Q, c) of the paper: Q_ij = exp(-2 |i - j|), c_i = 1/3."""
  i = jnp.arange(n)
  q = jnp.exp(-2.0 * jnp.abs(i[:, None] - i[None, :]))
  return q, jnp.full((n,), 1.0 / 3.0)


def objective(p: jax.Array, q: jax.Array, c: jax.Array) -> jax.Array:
  """(p - c)^T Q (p - c)."""
  d = p - c
  return d @ q @ d


def recast_matrix(p: jax.Array, q: jax.Array, c: jax.Array) -> jax.Array:
  """A(p) of the stochastic recast (formulas in the module docstring)."""
  d = p - c
  off = jnp.outer(d, d) * q / (jnp.outer(c, c) - jnp.outer(p, c) - jnp.outer(c, p))
  diag = d**2 * jnp.diag(q) / (p - 2.0 * p * c + c**2)
  n = p.shape[-1]
  return jnp.where(jnp.eye(n, dtype=bool), jnp.diag(diag), off)


def stochastic_loss(sample: jax.Array, p: jax.Array, q: jax.Array, c: jax.Array) -> jax.Array:
  """(D - c)^T A(p) (D - c) with A(p) held constant (no gradient through A)."""
  a = jax.lax.stop_gradient(recast_matrix(p, q, c))
  d = sample - c
  return d @ a @ d


def simplex_grid(resolution: int, margin: float = 0.02) -> np.ndarray:
  """Points of the 2-simplex on a barycentric grid, at least ``margin`` from the edges.

  Points closer than ``margin / 2`` to a singular line p_i + p_j = 1/3 or to
  the centre c = (1/3, 1/3, 1/3), where A(p) = 0 and every estimator is exactly
  zero, are left out.
  """
  points = []
  for i in range(resolution + 1):
    for j in range(resolution + 1 - i):
      p = np.array([i, j, resolution - i - j], np.float64) / resolution
      p = margin + (1 - 3 * margin) * p
      sums = p[[0, 0, 1]] + p[[1, 2, 2]]
      away_from_centre = np.max(np.abs(p - 1.0 / 3.0)) > margin / 2
      if np.min(np.abs(sums - 1.0 / 3.0)) > margin / 2 and away_from_centre:
        points.append(p)
  return np.array(points)


def to_ternary(p: np.ndarray) -> np.ndarray:
  """Barycentric ``[..., 3]`` -> 2-D coordinates in the equilateral triangle."""
  x = p[..., 1] + 0.5 * p[..., 2]
  y = (np.sqrt(3) / 2) * p[..., 2]
  return np.stack([x, y], axis=-1)
