r"""The rank-1 lattice of GR-QMC: Korobov's generating vector and the points (Sloan & Joe 1994).

Part of :mod:`gr_jax.estimators` (its docstring states the conventions).
"""

from __future__ import annotations

import functools
import math

import numpy as np

# The lattice's index k * z_j mod K is computed in int32: K * K < 2**31.
MAX_LATTICE_POINTS = 46_340
# The generating vector's search scores the first coordinates only: the P2
# criterion of more is dominated by the point k = 0 (every factor at its
# maximum 1 + pi^2 / 3) and no longer tells candidates apart (it overflowed
# float64 from n ~ 490).
_SEARCH_DIMENSIONS = 64
_SEARCH_CANDIDATES = 256
# The search evaluates the criterion at candidates x K x coordinates points, at most this many
# (with at least 16 candidates): all 256 candidates up to K = 4096 (64 coordinates), fewer above,
# so that the search takes about a second or two at any K (17 s at K = 46,340 with 256).
_SEARCH_WORK = 2**26
_MIN_CANDIDATES = 16


@functools.lru_cache(maxsize=None)
def korobov_vector(num_points: int, dim: int) -> np.ndarray:
  r"""The generating vector :math:`z_j = a^j \bmod K`, ``j < dim``, of :func:`lattice_points`.

  ``a`` is chosen among candidates coprime to K (256 of them, spread evenly,
  while K x 256 x d <= 2**26: K <= 4096 at d = 64; fewer, at least 16, above,
  which bounds the search to a second or two at trace time) to minimise the
  :math:`P_2` criterion :math:`-1 + \frac1K \sum_k \prod_{j < d} (1 + 2\pi^2
  B_2(\{k z_j / K\}))`, :math:`B_2(x) = x^2 - x + 1/6` (Sloan & Joe 1994), over
  the first :math:`d = \min(\mathrm{dim}, 64)` coordinates. For more
  coordinates the powers continue: they repeat with period ord(a) < K, so when
  dim >= K two categories can share a column (each category's coordinate still
  runs over the whole grid :math:`\{k / K\}` and has its own random shift).

  Returns:
    int64 array ``[dim]``.
  """
  if not 1 <= num_points <= MAX_LATTICE_POINTS:
    raise ValueError(
      f"the lattice needs 1 <= num_points <= {MAX_LATTICE_POINTS} (k * z mod K is computed"
      f" in int32); got num_points={num_points}. Use gumbel_rao (gr_mc<K>) for larger K."
    )
  if num_points < 3:
    return np.ones(dim, np.int64)
  coprime = np.array([a for a in range(1, num_points) if math.gcd(a, num_points) == 1], np.int64)
  search_dim = min(dim, _SEARCH_DIMENSIONS)
  budget = max(_MIN_CANDIDATES, min(_SEARCH_CANDIDATES, _SEARCH_WORK // (num_points * search_dim)))
  candidates = coprime[:: max(1, len(coprime) // budget)]
  k = np.arange(num_points, dtype=np.int64)[:, None, None]
  criteria = []
  for batch in np.array_split(candidates, max(1, len(candidates) // 16)):
    z = _powers(batch, search_dim, num_points)  # [C, d]
    x = (k * z[None] % num_points) / num_points  # [K, C, d]
    criteria.append(
      np.mean(np.prod(1.0 + 2.0 * np.pi**2 * (x * x - x + 1.0 / 6.0), axis=-1), axis=0)
    )
  best = candidates[int(np.argmin(np.concatenate(criteria)))]
  return _powers(np.array([best]), dim, num_points)[0]


def _powers(bases: np.ndarray, dim: int, modulus: int) -> np.ndarray:
  """``[len(bases), dim]`` bases ** j mod modulus, by repeated multiplication (no overflow)."""
  out = np.ones((len(bases), dim), np.int64)
  for j in range(1, dim):
    out[:, j] = out[:, j - 1] * bases % modulus
  return out


def lattice_points(num_points: int, dim: int) -> np.ndarray:
  r"""The unshifted rank-1 lattice :math:`\{k z / K \bmod 1\}_{k < K}` in ``[0, 1)^dim``.

  With Korobov's generating vector ``z`` (:func:`korobov_vector`). The backward
  pass of :func:`gumbel_rao_qmc` computes these points from ``z`` as it needs
  them; this table is for inspection.

  Returns:
    float64 array ``[num_points, dim]``.
  """
  z = korobov_vector(num_points, dim)
  return (np.arange(num_points)[:, None] * z % num_points) / num_points
