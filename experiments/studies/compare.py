"""Reports that compare arms with a reference arm, paired by seed (ablations, KL arms, variants).

An arm's ``labels["group"]`` names its group (e.g. "binary ST-GS") and
``labels["arm"]`` its row; the group's first arm is its reference. The bounds
table gives each arm's validation and test bound (mean ± sd over seeds) and its
test bound minus the reference's, paired by seed, for an arm of the reference's
length (another length is compared only by a declared pair); :func:`pair_lines` states
declared differences between any two arms; :func:`variance_table` the inference
network's gradient variance at the logged steps.
"""

from __future__ import annotations

from collections.abc import Sequence

from experiments.studies import records, tables
from experiments.studies.runner import Readings


def _groups(readings: Readings) -> dict[str, list[str]]:
  groups: dict[str, list[str]] = {}
  for name in readings.arms:
    groups.setdefault(readings.arms[name].labels["group"], []).append(name)
  return groups


def bounds_table(readings: Readings, field: str = "test_nll") -> tuple[list[str], list[dict]]:
  """One row per measured arm: seeds, valid, test, and test minus its group's reference."""
  rows, data = [], []
  for group, names in _groups(readings).items():
    reference = readings.get(names[0])
    for name in names:
      run = readings.get(name)
      if run is None:
        continue
      difference = (
        tables.paired(reference.by_seed(field), run.by_seed(field))
        if reference and name != names[0] and run.steps == reference.steps
        else None
      )
      label = readings.arms[name].labels["arm"]
      if difference is not None:
        cell = difference.cell()
      elif reference and name != names[0]:  # a declared pair (pair_lines) may still compare them
        cell = f"not compared ({run.steps:,} steps against {reference.steps:,})"
      else:
        cell = "—"
      rows.append(
        [
          group,
          label,
          tables.seeds(len(run.members)),
          f"{run.steps:,}",
          tables.spread(run.by_seed("valid_nll").values()),
          tables.spread(run.by_seed(field).values()),
          cell,
        ]
      )
      data.append(
        {
          "group": group,
          "arm": label,
          "steps": run.steps,
          "valid_nll": run.by_seed("valid_nll"),
          field: run.by_seed(field),
          "minus_reference": list(difference.differences) if difference else None,
        }
      )
  header = ["group", "arm", "seeds", "steps", "valid", "test", "test − reference (paired)"]
  return tables.markdown_table(header, rows), data


def bound_at(run: records.Run, field: str, step: int | None = None) -> dict[int, float | None]:
  """{seed: the bound ``field`` (valid_nll / test_nll) at ``step``}: the final one at the run's
  last step (None), else the periodic validation bound logged at ``step``."""
  if step is None or step == run.steps:
    return run.by_seed(field)
  if field != "valid_nll":
    raise ValueError(f"only the validation bound is logged on the way; {field} at step {step}")
  return {m.seed: m.curve("nll", "valid").get(step) for m in run.members}


def pair_lines(readings: Readings, pairs: Sequence[tuple], field: str = "test_nll") -> list[str]:
  """``label: b − a`` paired by seed for each declared pair whose arms are measured: (label, a, b),
  or (label, a, b, field, step_a, step_b) for bounds at given steps (see :func:`bound_at`)."""
  lines = []
  for label, a, b, *at in pairs:
    pair_field, step_a, step_b = at or (field, None, None)
    run_a, run_b = readings.get(a), readings.get(b)
    if run_a and run_b:
      difference = tables.paired(
        bound_at(run_a, pair_field, step_a), bound_at(run_b, pair_field, step_b)
      )
      lines.append(f"- {label}: {difference.cell()} (by seed {difference.by_seed()})")
  return lines


def variance_table(readings: Readings, names: Sequence[str]) -> list[str]:
  """log10 trace of the inference network's gradient covariance at each logged step, mean ± sd
  over seeds, for the named arms that logged it."""
  rows, steps = [], set()
  curves = {}
  for name in names:
    run = readings.get(name)
    if run is None:
      continue
    curves[name] = [m.curve("log10_grad_variance") for m in run.members]
    steps |= {s for curve in curves[name] for s in curve}
  steps = sorted(steps)
  for name, member_curves in curves.items():
    labels = readings.arms[name].labels
    cells = [tables.spread([c[s] for c in member_curves if s in c]) for s in steps]
    rows.append([labels["group"], labels["arm"], *cells])
  return tables.markdown_table(["group", "arm", *(f"step {s:,}" for s in steps)], rows)
