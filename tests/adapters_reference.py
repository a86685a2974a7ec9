"""Exact references for the adapters' tests (tests/test_numpyro.py, tests/test_distrax.py).

A small problem with two discrete latents and one observation x ~ Normal(mu(D), 1): the
estimator's expected gradient of f(D) = log p(x, D) - log q(D) from enumerating the latents and a
float64 numpy Monte Carlo of the tempered softmax's Jacobian over plain Gumbels (the method of
tests/estimators/reference.py), and the true ELBO gradient from enumeration. No gr_jax code.
"""

import itertools

import numpy as np

from tests.estimators.reference import softmax_np

TAU = 0.5
X = 1.3  # the observation; x ~ Normal(mu(D), 1)

# Two categorical latents with three categories; mu(D) = <D0, W0> + <D1, W1> + D0^T A D1, so
# that df/dD of each latent depends on both (the estimators' conditional expectations matter).
PRIOR = np.array([[0.2, -0.3, 0.1], [0.0, 0.5, -0.5]])
THETA = np.array([[0.6, -0.4, 1.1], [0.3, 0.0, -0.8]])
W = np.array([[1.0, -1.5, 0.5], [0.5, 2.0, -1.0]])
A = np.array([[1.0, -2.0, 0.5], [0.0, 2.0, -1.0], [2.0, 0.5, -3.0]])

# Two binary latents: mu(v) = <W_BIN, v> + A_BIN v0 v1.
PRIOR_BIN = np.array([0.3, -0.2])
LOGITS_BIN = np.array([0.5, -0.7])
W_BIN = np.array([1.0, -1.5])
A_BIN = 2.5


def log_normal(mu):
  return -0.5 * (X - mu) ** 2 - 0.5 * np.log(2 * np.pi)


def log_softmax_np(x):
  return np.log(softmax_np(x))


def categorical_reference():
  """Per latent j: h_j(i) = E[df/dD_j | D_j = i] (over D_{-j}), q_j, and the true gradient."""
  lp, lq, q = log_softmax_np(PRIOR), log_softmax_np(THETA), softmax_np(THETA)
  eye = np.eye(3)
  h = np.zeros((2, 3, 3))
  true_grad = np.zeros((2, 3))
  for i0, i1 in itertools.product(range(3), range(3)):
    d0, d1 = eye[i0], eye[i1]
    mu = d0 @ W[0] + d1 @ W[1] + d0 @ A @ d1
    f = log_normal(mu) + d0 @ (lp[0] - lq[0]) + d1 @ (lp[1] - lq[1])
    weight = q[0, i0] * q[1, i1]
    h[0, i0] += q[1, i1] * ((X - mu) * (W[0] + A @ d1) + lp[0] - lq[0])
    h[1, i1] += q[0, i0] * ((X - mu) * (W[1] + A.T @ d0) + lp[1] - lq[1])
    # grad E_q[f] = E_q[f grad log q] + E_q[grad f |_D] and the latter, -E_q[grad log q], is 0.
    true_grad += weight * f * (np.stack([d0, d1]) - q)
  return h, q, true_grad


def binary_reference():
  """As categorical_reference for the binary model: h_j(v_j), P(v_j = 1), the true gradient."""
  p = 1 / (1 + np.exp(-LOGITS_BIN))
  h = np.zeros((2, 2))
  true_grad = np.zeros(2)
  for v in itertools.product((0.0, 1.0), repeat=2):
    v = np.array(v)
    mu = v @ W_BIN + A_BIN * v[0] * v[1]
    log_q = v * LOGITS_BIN - np.logaddexp(0, LOGITS_BIN)
    log_p = v * PRIOR_BIN - np.logaddexp(0, PRIOR_BIN)
    f = log_normal(mu) + np.sum(log_p - log_q)
    weight = np.prod(np.where(v == 1, p, 1 - p))
    df_dv = (X - mu) * (W_BIN + A_BIN * v[::-1]) + PRIOR_BIN - LOGITS_BIN
    for j in range(2):
      other = p[1 - j] if v[1 - j] == 1 else 1 - p[1 - j]
      h[j, int(v[j])] += other * df_dv[j]
    true_grad += weight * f * (v - p)
  return h, p, true_grad


def expected_stgs(logits, h, num=2_000_000, seed=7):
  """E[J_tau(logits + G)^T h(argmax)] and its standard error, by float64 numpy Monte Carlo.

  J_tau is the tempered softmax's Jacobian; GR-MCK's expectation is the same (the paper's
  Rao-Blackwellization), and ST's is J_tau(logits)^T E[h(D)], the same with G = 0.
  """
  rng = np.random.default_rng(seed)
  y = logits + rng.gumbel(size=(num, logits.shape[-1]))
  s = softmax_np(y / TAU)
  g = h[y.argmax(-1)]
  v = s * (g - (g * s).sum(-1, keepdims=True)) / TAU
  return v.mean(0), v.std(0) / np.sqrt(num)


def expected_st(logits, h, probs):
  s = softmax_np(logits / TAU)
  g = probs @ h
  return s * (g - g @ s) / TAU, np.zeros_like(s)
