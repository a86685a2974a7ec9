"""Figure 1 of the paper from a toy-QP workdir: variance heat maps on the simplex and SGD curves.

Reads ``variance_tau*.npz``, ``variance_summary.json``, ``optimization.json``
and ``config.json`` written by ``python -m experiments.main
--config=configs/toy_qp.py``; writes ``toy_variance_difference.png``,
``toy_objective.png`` and ``toy_optimization.png`` into ``--out_dir``.

  python -m scripts.plot_toy_qp --workdir=runs/toy_qp --out_dir=docs/figures
"""

import json
import pathlib

import matplotlib.tri as mtri
import numpy as np
from absl import app, flags

from gr_jax import toy_qp
from scripts import plot_common

_WORKDIR = flags.DEFINE_string("workdir", None, "A toy-QP run directory.")
_OUT_DIR = flags.DEFINE_string("out_dir", "docs/figures", "Where the PNGs go.")
flags.mark_flag_as_required("workdir")


def _frame(ax, corners):
  ax.plot(*np.vstack([corners, corners[:1]]).T, color="black", lw=0.8)
  for k, label in enumerate(("$p_1 = 1$", "$p_2 = 1$", "$p_3 = 1$")):
    ax.annotate(label, corners[k], ha="center", va="top" if k < 2 else "bottom", fontsize=8)
  ax.set_aspect("equal")
  ax.axis("off")


def main(argv):
  del argv
  workdir, out = pathlib.Path(_WORKDIR.value), pathlib.Path(_OUT_DIR.value)
  files = sorted(
    workdir.glob("variance_tau*.npz"), key=lambda f: float(f.stem.removeprefix("variance_tau"))
  )
  if not files:
    raise SystemExit(
      f"error: no variance_tau*.npz in {workdir}; run the toy_qp experiment there first."
    )
  names = list(json.loads((workdir / "config.json").read_text())["estimators"])
  summary = json.loads((workdir / "variance_summary.json").read_text())
  curves = json.loads((workdir / "optimization.json").read_text())
  plt = plot_common.plt
  corners = toy_qp.to_ternary(np.eye(3))

  fig, axes = plt.subplots(1, len(files), figsize=(4.2 * len(files), 3.8), squeeze=False)
  for ax, file in zip(axes[0], files):
    tau = file.stem.removeprefix("variance_tau")
    with np.load(file) as saved:
      points, difference = saved["points"], saved[names[0]] - saved[names[1]]
    xy = toy_qp.to_ternary(points)
    contour = ax.tricontourf(
      mtri.Triangulation(xy[:, 0], xy[:, 1]), difference, levels=20, cmap="inferno"
    )
    fig.colorbar(
      contour, ax=ax, shrink=0.8, label=rf"$\Delta \log_{{10}}$ Var ({names[0]} $-$ {names[1]})"
    )
    frac = summary[tau]["fraction_lower"]
    ax.set_title(rf"$\tau$ = {tau}: {names[1]} lower at {100 * frac:.0f}% of points", fontsize=9)
    _frame(ax, corners)
  plot_common.save(fig, out / "toy_variance_difference.png")

  q, c = toy_qp.paper_problem()
  objective = np.array([float(toy_qp.objective(p, q, c)) for p in points])
  fig, ax = plt.subplots(figsize=(4.2, 3.8))
  contour = ax.tricontourf(
    mtri.Triangulation(xy[:, 0], xy[:, 1]), objective, levels=20, cmap="viridis"
  )
  fig.colorbar(contour, ax=ax, shrink=0.8, label=r"$(p - c)^\top Q (p - c)$")
  ax.set_title("Objective on the simplex", fontsize=9)
  _frame(ax, corners)
  plot_common.save(fig, out / "toy_objective.png")

  fig, ax = plt.subplots(figsize=(5.5, 3.8))
  for name, values in curves.items():
    ax.plot(np.arange(len(values)), values, label=name)
  ax.set_yscale("log")
  ax.set_xlabel("SGD step")
  ax.set_ylabel(r"objective $(p - c)^\top Q (p - c)$")
  ax.set_title("Optimization from a fixed start", fontsize=9)
  ax.legend()
  plot_common.save(fig, out / "toy_optimization.png")


if __name__ == "__main__":
  app.run(main)
