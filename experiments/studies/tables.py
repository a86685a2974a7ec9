"""Numbers as the studies' tables print them: spreads over seeds, differences paired by seed.

One convention for every table: mean ± sample standard deviation over seeds
("± n/a" for one seed); a member whose value is missing or not finite (a
diverged run) is left out of the mean and counted beside it ("1 not finite");
two populations are compared only on the seeds both hold, with the count of
seeds where the second is lower.
"""

from __future__ import annotations

import dataclasses
import json
import math
import pathlib
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any


def significant(value: float | None, digits: int = 4) -> str:
  """A number to ``digits`` significant digits ("-" for None); JSON files keep full precision."""
  if value is None:
    return "-"
  return f"{value:.{digits}g}" if math.isfinite(value) else str(value)


def seeds(count: int) -> str:
  return f"{count} seed" + "s" * (count != 1)


def duration(seconds: float | None) -> str:
  """Wall time in the unit that reads best: seconds, minutes or hours."""
  if seconds is None:
    return "-"
  if seconds < 120:
    return f"{seconds:.0f} s"
  if seconds < 2 * 3600:
    return f"{seconds / 60:.1f} min"
  return f"{seconds / 3600:.2f} h"


def _finite(values: Iterable[float | None]) -> tuple[list[float], int]:
  values = list(values)
  kept = [float(v) for v in values if v is not None and math.isfinite(v)]
  return kept, len(values) - len(kept)


def spread(values: Iterable[float | None], decimals: int = 2) -> str:
  """mean ± sd of the finite values ("± n/a" for one, "-" for none), and how many were not."""
  kept, dropped = _finite(values)
  if not kept:
    text = "-"
  elif len(kept) < 2:
    text = f"{kept[0]:.{decimals}f} ± n/a"
  else:
    text = f"{statistics.mean(kept):.{decimals}f} ± {statistics.stdev(kept):.{decimals}f}"
  return text + (f" ({dropped} not finite)" if dropped else "")


def mean(values: Iterable[float | None]) -> float | None:
  kept, _ = _finite(values)
  return statistics.mean(kept) if kept else None


@dataclasses.dataclass(frozen=True)
class Paired:
  """b - a on each seed both hold with finite values."""

  differences: tuple[float, ...]
  seeds: tuple[int, ...]
  unpaired: tuple[int, ...]  # seeds of either side with no finite partner

  @property
  def lower(self) -> int:
    """Seeds where b is lower than a."""
    return sum(d < 0 for d in self.differences)

  def cell(self, decimals: int = 2) -> str:
    """ "mean ± sd (lower on k of n)", the unpaired seeds named."""
    if not self.differences:
      return "-"
    text = f"{spread(self.differences, decimals)} (lower on {self.lower} of {len(self.seeds)})"
    return text + (f"; seeds {list(self.unpaired)} unpaired" if self.unpaired else "")

  def by_seed(self, decimals: int = 2) -> str:
    return ", ".join(f"{d:+.{decimals}f}" for d in self.differences)


def paired(a: Mapping[int, float | None], b: Mapping[int, float | None]) -> Paired:
  """b - a for each seed both ``{seed: value}`` hold with finite values."""
  both = [
    s for s in sorted(set(a) & set(b)) if None not in (a[s], b[s]) and math.isfinite(a[s] + b[s])
  ]
  unpaired = sorted((set(a) | set(b)) - set(both))
  return Paired(tuple(b[s] - a[s] for s in both), tuple(both), tuple(unpaired))


def ranking(means: Mapping[str, float | None]) -> list[str]:
  """The names with a finite mean, lowest (best bound) first."""
  kept = {name: m for name, m in means.items() if m is not None and math.isfinite(m)}
  return sorted(kept, key=kept.__getitem__)


def same_order(a: Sequence[str], b: Sequence[str]) -> tuple[int, int]:
  """(k, n): of the n pairs of names both rankings hold, the k they put in the same order."""
  common = [name for name in a if name in b]
  pairs = [(x, y) for i, x in enumerate(common) for y in common[i + 1 :]]
  agree = sum((a.index(x) < a.index(y)) == (b.index(x) < b.index(y)) for x, y in pairs)
  return agree, len(pairs)


def search_rows(
  search: Any,
  columns: Mapping[str, str | Callable[[Any], float | None]],
  cell: Callable[[Any], str],
) -> tuple[list[list[str]], list[dict[str, Any]]]:
  """A temperature search's rows in tau's order: tau, "(selected)" on the member that validation
  IWAE-100 selects (``search.best("tau")``), then each column's ``cell``; and each row's values
  ({"tau", "selected", column: value}). A column is a result name or a function of the member."""
  selected = search.best("tau")
  rows, values = [], []
  for member in sorted(search.members, key=lambda m: m.results["tau"]):
    tau = member.results["tau"]
    read = {name: member.read(column) for name, column in columns.items()}
    rows.append([f"{tau:g}" + " (selected)" * (tau == selected), *map(cell, read.values())])
    values.append({"tau": tau, "selected": tau == selected, **read})
  return rows, values


def markdown_table(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> list[str]:
  lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
  return lines + ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]


def write(
  out: pathlib.Path, name: str, markdown: str, data: Any
) -> tuple[pathlib.Path, pathlib.Path]:
  """Writes ``out/name.md`` and ``out/name.json``; returns their paths."""
  out.mkdir(parents=True, exist_ok=True)
  md, js = out / f"{name}.md", out / f"{name}.json"
  md.write_text(markdown.rstrip("\n") + "\n")
  js.write_text(json.dumps(data, indent=1, default=str) + "\n")
  return md, js
