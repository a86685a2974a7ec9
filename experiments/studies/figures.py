"""The studies' figures (PNG), drawn from what a study reads from its records.

A study file turns its :class:`~experiments.studies.runner.Readings` into the
plain values below and calls one function per figure; ``python -m
experiments.study`` draws them after the tables (``--figures=DIR``). Needs
matplotlib (``pip install "gr_jax[plots]"``).
"""

from __future__ import annotations

import dataclasses
import pathlib
import statistics
from collections.abc import Mapping, Sequence

from experiments.studies import tables


@dataclasses.dataclass(frozen=True)
class TemperatureCurve:
  """One temperature-based estimator's search and its reported numbers.

  Attributes:
    label: the legend's name.
    search: {tau: test bound} of the search's one seed.
    selected: the tau the search selects on validation (None: no selection yet).
    fresh: the fresh seeds' test bounds at ``selected`` (empty: not trained yet).
  """

  label: str
  search: Mapping[float, float]
  selected: float | None = None
  fresh: Sequence[float] = ()


@dataclasses.dataclass(frozen=True)
class Band:
  """A tau-free estimator's test bound over seeds, drawn as mean ± sd across the axis."""

  label: str
  values: Sequence[float]


@dataclasses.dataclass(frozen=True)
class BudgetCurve:
  """One row's training curve and what a step costs.

  Attributes:
    label: the legend's name.
    curve: {step: the training negative ELBO, mean over seeds}.
    evaluations: loss evaluations per step (the registry's).
    ms_per_step: the bench's milliseconds per step (None: not benched; left out of the
      seconds panel).
  """

  label: str
  curve: Mapping[int, float]
  evaluations: int
  ms_per_step: float | None = None


@dataclasses.dataclass(frozen=True)
class ShapeCurve:
  """One estimator's test bound on each latent shape: {shape: {seed: value}}."""

  label: str
  values: Mapping[str, Mapping[int, float]]


def _pyplot():
  try:
    import matplotlib
  except ImportError as e:
    raise ValueError(
      'the figures need matplotlib: pip install "gr_jax[plots]" (or --figures=none)'
    ) from e
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt

  return plt


def _styles(
  plt, labels: Sequence[str], colour_order: Sequence[str], variants: Mapping[str, str] = {}
) -> dict[str, tuple[str, bool]]:
  """Each label's (colour, dashed): the colour of its place in ``colour_order`` (labels not
  there follow it), so that a study's figures draw an estimator in one colour whichever rows are
  kept; dashed once the colour cycle repeats. A label of ``variants`` (label -> its base label)
  takes its base's colour, dashed."""
  colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
  bases = [variants.get(label, label) for label in (*colour_order, *labels)]
  order = [*dict.fromkeys(bases)]
  style = {label: (colours[i % len(colours)], i >= len(colours)) for i, label in enumerate(order)}
  return {
    label: (style[variants[label]][0], True) if label in variants else style[label]
    for label in labels
  }


def _spread(values: Sequence[float]) -> tuple[float, float]:
  return statistics.mean(values), statistics.stdev(values) if len(values) > 1 else 0.0


def temperature_curves(
  path: pathlib.Path,
  title: str,
  curves: Sequence[TemperatureCurve],
  bands: Sequence[Band] = (),
  ylabel: str = "test IWAE-100 (nats)",
  colour_order: Sequence[str] = (),
) -> pathlib.Path:
  """The test bound against tau (log axis): each search's seed as a line, the selected tau
  ringed, the fresh seeds' mean ± sd there as an error bar; each band as mean ± sd.

  A label in ``colour_order`` takes the colour of its place there (``_styles``)."""
  plt = _pyplot()
  figure, axes = plt.subplots(figsize=(6.4, 4.4))
  styles = _styles(plt, [x.label for x in (*curves, *bands)], colour_order)
  for curve in curves:
    color, dashed = styles[curve.label]
    taus = sorted(curve.search)
    axes.plot(
      taus,
      [curve.search[t] for t in taus],
      "s--" if dashed else "o-",
      color=color,
      label=curve.label,
    )
    if curve.selected is not None and curve.selected in curve.search:
      axes.plot(
        curve.selected, curve.search[curve.selected], "o", ms=12, mfc="none", mec=color, mew=1.5
      )
    if curve.selected is not None and curve.fresh:
      mean, sd = _spread(curve.fresh)
      axes.errorbar(curve.selected, mean, yerr=sd, fmt="s", color=color, capsize=4, ms=7)
  for band in bands:
    color, _ = styles[band.label]
    mean, sd = _spread(band.values)
    axes.axhline(mean, color=color, ls="--", lw=1, label=f"{band.label} (no τ)")
    axes.axhspan(mean - sd, mean + sd, color=color, alpha=0.15, lw=0)
  axes.set_xscale("log")
  axes.set_xlabel("τ  (line: the search's seed; ring: selected on validation; square: fresh seeds)")
  axes.set_ylabel(ylabel)
  axes.set_title(title)
  axes.legend(fontsize=8)
  return _save(figure, path)


def budget_curves(
  path: pathlib.Path,
  title: str,
  rows: Sequence[BudgetCurve],
  colour_order: Sequence[str] = (),
  variants: Mapping[str, str] = {},
) -> pathlib.Path:
  """The training negative ELBO against loss evaluations (left) and against seconds of training
  steps at the bench's ms per step (right), one curve per row; a label in ``colour_order`` takes
  the colour of its place there, a variant its base's, dashed (``_styles``)."""
  plt = _pyplot()
  figure, (by_evaluations, by_seconds) = plt.subplots(1, 2, figsize=(11, 4.4), sharey=True)
  styles = _styles(plt, [row.label for row in rows], colour_order, variants)
  for row in rows:
    steps = sorted(row.curve)
    values = [row.curve[s] for s in steps]
    color, dashed = styles[row.label]
    style = "--" if dashed else "-"
    by_evaluations.plot(
      [s * row.evaluations for s in steps], values, style, color=color, label=row.label
    )
    if row.ms_per_step is not None:
      seconds = [s * row.ms_per_step / 1e3 for s in steps]
      by_seconds.plot(seconds, values, style, color=color)
  # The end of training is what the crossings are about: the y axis from the lowest value to
  # the highest value any row has at a tenth of its steps.
  tops = [
    next(v for s, v in sorted(row.curve.items()) if s >= max(row.curve) / 10)
    for row in rows
    if row.curve
  ]
  if tops:
    lowest = min(v for row in rows for v in row.curve.values())
    by_evaluations.set_ylim(lowest - 0.5, max(tops))
  by_evaluations.set_xlabel("loss evaluations")
  by_seconds.set_xlabel("seconds of training steps (bench ms / step)")
  by_evaluations.set_ylabel("training −ELBO (nats, mean over seeds)")
  by_evaluations.legend(fontsize=8)
  figure.suptitle(title)
  return _save(figure, path)


def paired_differences(curve: ShapeCurve, reference: ShapeCurve) -> dict[str, list[float]]:
  """{shape: curve's value minus the reference's, one per seed both have}: the difference a
  seed's shared initialisation and data order leave to the estimator (``tables.paired``)."""
  differences = {}
  for shape, values in curve.values.items():
    pair = tables.paired(reference.values.get(shape, {}), values)
    if pair.differences:
      differences[shape] = list(pair.differences)
  return differences


# Where the paired panel turns logarithmic: the rows differ by a few nats, and one that fails
# (ZGR on 8x4, +44 on IWAE-100) would otherwise flatten the others to a line.
_PAIRED_LINEAR_NATS = 2.0
_PAIRED_TICKS = sorted({sign * t for t in (0, 1, 2, 5, 10, 20, 50, 100, 200) for sign in (-1, 1)})


def shape_curves(
  path: pathlib.Path,
  title: str,
  shapes: Sequence[str],
  curves: Sequence[ShapeCurve],
  ylabel: str = "test IWAE-100 (nats)",
  colour_order: Sequence[str] = (),
  reference: str | None = None,
  variants: Mapping[str, str] = {},
) -> pathlib.Path:
  """The test bound against the latent shape (in ``shapes``' order): each estimator's mean ±
  sd over seeds, a line through the shapes it has; a label in ``colour_order`` takes the colour
  of its place there, a label of ``variants`` its base's colour, dashed (``_styles``).

  With ``reference`` (a curve's label), a second panel draws each curve minus the reference,
  paired by seed (mean ± sd of the differences; ``paired_differences``), on a scale linear
  within ±2 nats and logarithmic beyond: the shape moves every bound by tens of nats, the
  estimators differ by a few. While no curve has that label (the reference row not yet kept),
  the figure is the first panel alone."""
  plt = _pyplot()
  bounds = {
    curve.label: {s: [*seeds.values()] for s, seeds in curve.values.items()} for curve in curves
  }
  paired = next((curve for curve in curves if curve.label == reference), None)
  if paired is None:
    figure, axes = plt.subplots(figsize=(6.4, 4.4))
    panels = [(axes, bounds)]
  else:
    figure, (axes, against) = plt.subplots(1, 2, figsize=(11, 4.4))
    panels = [
      (axes, bounds),
      (against, {curve.label: paired_differences(curve, paired) for curve in curves}),
    ]
  styles = _styles(plt, [curve.label for curve in curves], colour_order, variants)
  for panel, values_by_label in panels:
    for label, values in values_by_label.items():
      held = [(x, _spread(values[s])) for x, s in enumerate(shapes) if values.get(s)]
      if held:
        color, dashed = styles[label]
        panel.errorbar(
          [x for x, _ in held],
          [m for _, (m, _) in held],
          yerr=[sd for _, (_, sd) in held],
          fmt="s--" if dashed else "o-",
          color=color,
          capsize=3,
          label=label,
        )
    panel.set_xticks(range(len(shapes)), shapes)
    panel.set_xlabel("latent shape (C categories x L variables)")
  axes.set_ylabel(ylabel)
  axes.legend(fontsize=8)
  if paired is not None:
    against.axhline(0.0, color=styles[reference][0], lw=1)
    against.set_yscale("symlog", linthresh=_PAIRED_LINEAR_NATS)
    lowest, highest = against.get_ylim()
    ticks = [t for t in _PAIRED_TICKS if lowest <= t <= highest]
    against.set_yticks(ticks, [f"{t:g}" for t in ticks])
    against.set_ylabel(
      f"minus {reference}, paired by seed (nats; log beyond ±{_PAIRED_LINEAR_NATS:g})"
    )
  figure.suptitle(title)
  return _save(figure, path)


def _save(figure, path: pathlib.Path) -> pathlib.Path:
  path.parent.mkdir(parents=True, exist_ok=True)
  figure.tight_layout()
  figure.savefig(path, dpi=110)
  _pyplot().close(figure)
  return path
