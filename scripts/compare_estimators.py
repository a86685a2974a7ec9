r"""Efficiency of every estimator: squared bias, variance and MSE of its gradient, and its time.

For each estimator of ``gr_jax.estimators.get`` (REINFORCE included) and two
temperatures it measures, over R independent draws,

.. math::
  \mathrm{Bias}^2 = \|E\hat g - \nabla\|^2, \quad \mathrm{Var} = E\|\hat g -
  E\hat g\|^2, \quad \mathrm{MSE} = \mathrm{Var} + \mathrm{Bias}^2

(``gr_jax.diagnostics.GradientStats``, Monte Carlo bias of the plug-in removed),
against an exact reference on small problems (enumeration):

* ``categorical``: one 4-ary variable, :math:`f(D) = D^\top A D`;
* ``toy_qp@p``: the paper's quadratic program on the simplex (section 5.1) at a
  few points p (its recast loss, A(p) held fixed, logits log p);
* ``binary``: three binary variables with a coupled quadratic loss (the only
  problem where ``gr_exact`` applies);

and against a high-sample REINFORCE reference for the encoder gradient of the
16-ary VAE at a trained checkpoint (``--vae_workdir``; B = 20 fixed training
images), the paper's Figure 2b protocol. The time is one jitted forward+backward
of the VAE's loss at B = 20 (median), and the work-normalised efficiency is
MSE x time (lower is better). REINFORCE on the small problems uses the exact
mean loss as its baseline; in the VAE, the checkpoint's running-mean baseline.

Writes ``--out_dir``/estimator_comparison.{json,md} and a figure of MSE against
time (one point per estimator, VAE encoder gradient). The JSON is written after
every small-problem row, and a rerun with the same flags reuses those rows.

  python -m scripts.compare_estimators --vae_workdir=runs/vae16_stgs_10k \
      --data_dir=../shared/data/binarized_mnist --out_dir=docs
"""

from __future__ import annotations

import json
import math
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
from absl import app, flags

from experiments.vae import gradients as vae_gradients
from gr_jax import diagnostics, estimators, toy_qp
from scripts import common
from scripts.common import median_ms

_NAMES = flags.DEFINE_list(
  "estimators",
  [*estimators.names(num_samples=10, multi_sample=False), "gr_mc100", "gr_mc1000", "gr_qmc100"],
  "Estimator names.",
)
_TAUS = flags.DEFINE_list("taus", ["0.5", "1.0"], "Temperatures.")
_DRAWS = flags.DEFINE_integer("draws", 20_000, "Draws per estimator on the small problems.")
_VAE_WORKDIR = flags.DEFINE_string(
  "vae_workdir", "", "A trained 16-ary VAE workdir ('' = skip the VAE)."
)
_DATA_DIR = flags.DEFINE_string("data_dir", "", "Binarized MNIST directory (for the VAE batch).")
_VAE_DRAWS = flags.DEFINE_integer("vae_draws", 200, "Estimator draws of the VAE encoder gradient.")
_REFERENCE_DRAWS = flags.DEFINE_integer(
  "reference_draws", 20_000, "REINFORCE draws of the VAE reference."
)
_VAE_MEMBER = flags.DEFINE_integer(
  "vae_member", 0, "The population member of --vae_workdir to measure."
)
_OUT_DIR = flags.DEFINE_string("out_dir", "docs", "Where the table, JSON and figure go.")

_A = np.array(
  [[1.0, -2.0, 0.5, 3.0], [0.0, 2.0, -1.0, 1.0], [2.0, 0.5, -3.0, 0.0], [1.0, 1.0, 0.0, -1.0]]
)
_CATEGORICAL_LOGITS = np.array([[0.6, -0.4, 1.1, 0.0]])
_QP_POINTS = ((0.6, 0.3, 0.1), (0.2, 0.2, 0.6), (0.45, 0.45, 0.1))
_BINARY_LOGITS = np.array([[0.5, -0.5], [0.0, 1.2], [-0.8, 0.3]])
_BINARY_W = np.random.default_rng(0).normal(size=(6, 6))
common.numbers(_TAUS, float, minimum=1e-6)
for _holder in (_DRAWS, _VAE_DRAWS, _REFERENCE_DRAWS):
  common.at_least(_holder, 2)  # a variance needs two draws


def _problems():
  """name -> (logits [m, n], loss(sample [m, n]) -> scalar)."""
  a = jnp.asarray(_A, jnp.float32)
  problems = {"categorical": (_CATEGORICAL_LOGITS, lambda d: d[0] @ a @ d[0])}
  q, c = toy_qp.paper_problem()
  for point in _QP_POINTS:
    p = jnp.asarray(point, jnp.float32)
    problems[f"toy_qp@{point}"] = (
      np.log(np.array([point])),
      lambda d, p=p: toy_qp.stochastic_loss(d[0], p, q, c),
    )
  w = jnp.asarray(_BINARY_W + _BINARY_W.T, jnp.float32)
  problems["binary"] = (_BINARY_LOGITS, lambda d: d.reshape(-1) @ w @ d.reshape(-1) / 4.0)
  return problems


def _applies(estimator, logits) -> bool:
  return not estimator.binary_only or logits.shape[-1] == 2


def _small_problem_stats(estimator, logits, loss, tau, key, draws):
  logits = jnp.asarray(logits, jnp.float32)
  exact = diagnostics.exact_gradient(lambda d, t: loss(d), logits)
  mean_loss = diagnostics.exact_expectation(lambda d, t: loss(d), logits)

  def draw(draw_key):
    def objective(theta):
      sample = estimator(draw_key, theta, tau=tau)
      value = loss(sample)
      if estimator.score_function:
        log_prob = jnp.sum(estimators.categorical_log_prob(theta, sample))
        value = value + estimators.score_function_surrogate(log_prob, value, mean_loss)
      return value

    return jax.grad(objective)(logits)

  stats = jax.jit(
    lambda k: diagnostics.gradient_stats(draw, k, draws, chunk_size=math.gcd(draws, 1000))
  )(key)
  return vae_gradients.mse_summary(stats, exact, 0.0)


def _plot(path: pathlib.Path, rows, tau):
  import matplotlib

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt

  # A legend, not labels beside the points: close estimators (gr_qmc100 / gr_mc100, zgr / reinmax)
  # made labels overlap.
  fig, ax = plt.subplots(figsize=(7.6, 4.2))
  markers = "osD^v<>phX*P"
  for i, row in enumerate(rows):
    ax.scatter(row["ms"], row["mse"], s=24, marker=markers[i % len(markers)], label=row["name"])
  ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
  ax.set_xscale("log")
  ax.set_yscale("log")
  ax.set_xlabel("one forward+backward, B = 20 (ms)")
  ax.set_ylabel("MSE of the encoder gradient")
  ax.set_title(f"16-ary VAE at a trained checkpoint, tau = {tau}", fontsize=9)
  fig.tight_layout()
  fig.savefig(path, dpi=130)
  plt.close(fig)


def _markdown(results) -> str:
  lines = [
    f"Device: {results['device']}. Draws: {results['draws']} per estimator on the small problems"
    f" (exact gradients by enumeration); VAE: {results.get('vae', {}).get('draws', '-')} draws"
    " against"
    f" {results.get('vae', {}).get('reference_draws', '-')} REINFORCE draws. log10 values; '~0' ="
    " a squared bias"
    " below the Monte Carlo resolution (its bias-corrected estimate is <= 0); '-' = not"
    " applicable (gr_exact needs binary variables).",
    "",
  ]
  for problem, per_tau in results["small"].items():
    lines += [
      f"### {problem}",
      "",
      "| estimator | " + " | ".join(f"tau={tau}: bias^2 / var / MSE" for tau in per_tau) + " |",
      "|---|" + "---|" * len(per_tau),
    ]
    names = list(next(iter(per_tau.values())))
    for name in names:
      cells = []
      for tau in per_tau:
        s = per_tau[tau][name]
        cells.append(
          "-"
          if s is None
          else " / ".join(
            vae_gradients.log10_cell(s[k]) for k in ("squared_bias", "variance", "mse")
          )
        )
      lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines.append("")
  if "vae" in results:
    vae = results["vae"]
    lines += [
      f"### 16-ary VAE encoder gradient (checkpoint step {vae['checkpoint_step']}, B = 20)",
      "",
      "| estimator | ms | "
      + " | ".join(f"tau={tau}: bias^2 / var / MSE / MSE x ms" for tau in vae["stats"])
      + " |",
      "|---|---|" + "---|" * len(vae["stats"]),
    ]
    for name, ms in vae["ms"].items():
      cells = []
      for tau, per_name in vae["stats"].items():
        s = per_name[name]
        cells.append(
          " / ".join(vae_gradients.log10_cell(s[k]) for k in ("squared_bias", "variance", "mse"))
          + f" / {vae_gradients.log10_cell(s['mse'] * ms)}"
        )
      lines.append(f"| {name} | {ms:.2f} | " + " | ".join(cells) + " |")
  return "\n".join(lines) + "\n"


def main(argv):
  del argv
  out = pathlib.Path(_OUT_DIR.value)
  (out / "figures").mkdir(parents=True, exist_ok=True)
  taus = [float(t) for t in _TAUS.value]
  chosen = {name: estimators.get(name) for name in _NAMES.value}
  results = {
    "device": f"{jax.devices()[0].device_kind} ({jax.default_backend()})",
    "draws": _DRAWS.value,
    "taus": taus,
    "small": {},
  }
  key = jax.random.key(0)
  saved_path = out / "estimator_comparison.json"
  saved = json.loads(saved_path.read_text()) if saved_path.exists() else {}
  for p_index, (problem, (logits, loss)) in enumerate(_problems().items()):
    results["small"][problem] = {}
    for t_index, tau in enumerate(taus):
      previous = saved.get("small", {}).get(problem, {}).get(str(tau))
      if (
        saved.get("draws") == _DRAWS.value and previous is not None and set(previous) == set(chosen)
      ):
        results["small"][problem][str(tau)] = previous  # measured by an earlier, interrupted run
        continue
      row = {}
      for e_index, (name, estimator) in enumerate(chosen.items()):
        draw_key = jax.random.fold_in(key, 10_000 * p_index + 100 * t_index + e_index)
        row[name] = (
          _small_problem_stats(estimator, logits, loss, tau, draw_key, _DRAWS.value)
          if _applies(estimator, logits)
          else None
        )
      results["small"][problem][str(tau)] = row
      print(
        problem,
        tau,
        {n: None if s is None else round(diagnostics.log10(s["mse"]), 2) for n, s in row.items()},
        flush=True,
      )
      saved_path.write_text(json.dumps({**saved, **results}, indent=1) + "\n")  # resumable
  if _VAE_WORKDIR.value:
    config, member, x, step = vae_gradients.setup(
      pathlib.Path(_VAE_WORKDIR.value), _VAE_MEMBER.value, _DATA_DIR.value
    )
    vae_key = jax.random.key(1)
    reference, reference_mean_variance = vae_gradients.reinforce_reference(
      config, member, x, vae_key, _REFERENCE_DRAWS.value
    )
    vae = {
      "checkpoint_step": step,
      "draws": _VAE_DRAWS.value,
      "reference_draws": _REFERENCE_DRAWS.value,
      "ms": {},
      "stats": {},
    }
    for t_index, tau in enumerate(taus):
      vae["stats"][str(tau)] = {}
      for e_index, name in enumerate(
        n for n, e in chosen.items() if _applies(e, np.zeros((1, 16)))
      ):
        stats, task = vae_gradients.encoder_stats(
          config,
          name,
          member,
          x,
          jax.random.fold_in(vae_key, 100 * t_index + e_index),
          tau,
          _VAE_DRAWS.value,
        )
        vae["stats"][str(tau)][name] = vae_gradients.mse_summary(
          stats, reference.mean, reference_mean_variance
        )
        if t_index == 0:
          grad = jax.jit(
            jax.grad(
              lambda p, k: task.loss(p, x, k, member["baseline"].mean, tau, member["input_mean"])[0]
            )
          )
          vae["ms"][name] = median_ms(grad, member["params"], jax.random.key(2), repeats=20)
        print("vae", tau, name, vae["stats"][str(tau)][name], vae["ms"][name], flush=True)
    results["vae"] = vae
    for tau in taus:
      rows = [{"name": n, "ms": vae["ms"][n], **s} for n, s in vae["stats"][str(tau)].items()]
      _plot(out / "figures" / f"estimator_efficiency_tau{tau}.png", rows, tau)
  (out / "estimator_comparison.json").write_text(json.dumps(results, indent=1) + "\n")
  (out / "estimator_comparison.md").write_text(_markdown(results))
  print(_markdown(results))


if __name__ == "__main__":
  app.run(main)
