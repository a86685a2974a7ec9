"""A population's results: member reports, the selection on validation, results.json, summary.md."""

from __future__ import annotations

import math
import pathlib
import statistics
from typing import Sequence

import jax
from absl import logging
from ml_collections import ConfigDict

from experiments import provenance, workdir
from experiments.search import HYPERPARAMETERS, Member, population_size


def device_name() -> str:
  """E.g. "NVIDIA H200 x1 (gpu)" or "cpu x1 (cpu)": what trained the population."""
  return f"{jax.devices()[0].device_kind} x{len(jax.devices())} ({jax.default_backend()})"


def member_report(member: Member, results: dict, diverged_at: int) -> dict:
  """A ``members`` entry of results.json."""
  return {
    "member": member.index,
    **({"draw": member.draw} if member.draw is not None else {}),
    "seed": member.seed,
    **member.hyperparameters,
    **results,
    "diverged_at_step": diverged_at if diverged_at >= 0 else None,
  }


def select(reports: Sequence[dict], metric: str, mode: str) -> dict | None:
  """The member with the best finite ``metric`` (the paper's model selection on validation).

  A diverged member (evaluated in its last finite state) is never chosen over one that trained to
  the end; when every member diverged, none is (see :func:`no_member_trained`).
  """
  finite = [r for r in reports if r.get(metric) is not None and math.isfinite(r[metric])]
  trained = [r for r in finite if r.get("diverged_at_step") is None]
  if not trained:
    return None
  return (min if mode == "min" else max)(trained, key=lambda r: r[metric])


class NoMemberTrained(Exception):
  """Every member of the population diverged: there is no result to report."""


def no_member_trained(results: dict) -> NoMemberTrained | None:
  """Every member diverged: one line naming them, their steps and the fields to change."""
  members = results["members"]
  if not members or any(m["diverged_at_step"] is None for m in members):
    return None
  first = min(members, key=lambda m: m["diverged_at_step"])
  values = ", ".join(f"{f}={first[f]:.3g}" for f in HYPERPARAMETERS if f in first)
  return NoMemberTrained(
    f"no member trained: every member diverged (member {first['member']} first, at step"
    f" {first['diverged_at_step']}, with {values}; results.json lists them all). "
    + divergence_advice(members)
  )


def divergence_advice(members: Sequence[dict]) -> str:
  """What to change: the fields whose values are far outside what trains (a temperature near 0
  overflows the relaxation's gradient; a large learning rate or weight decay the updates)."""

  def largest(field):
    return max((m[field] for m in members if field in m), default=None)

  advice = []
  tau = min((m["tau"] for m in members if "tau" in m), default=None)
  if tau is not None and tau < 1e-2:
    advice.append(f"raise tau (the smallest is {tau:.3g}; the paper's are 0.1 to 1)")
  if (largest("weight_decay") or 0) > 1e-2:
    advice.append(f"lower weight_decay (the largest is {largest('weight_decay'):.3g})")
  lr = largest("learning_rate")
  if lr is not None and (lr > 1 or not advice):
    advice.append(f"lower learning_rate (the largest is {lr:.3g})")
  return "Change the config: " + "; ".join(advice) + "."


def log_selection(results: dict, metric: str, names: Sequence[str]) -> None:
  """The results line of the selected member, or one line saying why no member could be selected."""
  if results["selected_member"] is not None:
    logging.info(
      "results: %s (%s)",
      " ".join(f"{n} {results[n]:.4g}" for n in names),
      selected_member_phrase(results),
    )
    return
  diverged = [
    m["diverged_at_step"] for m in results["members"] if m["diverged_at_step"] is not None
  ]
  why = (
    f"every member diverged (at steps {diverged})"
    if len(diverged) == len(results["members"])
    else f"no member has a finite {metric}"
  )
  logging.warning(
    "no member could be selected on %s: %s; the members' results are in results.json.", metric, why
  )


def selected_member_phrase(results: dict) -> str:
  """ "member 2 of 3" for a whole population; "member 2 of 3, slice 2 of 3 holds 2-2" for a slice.

  The member is its index in the whole population, so a slice's line gives the population's size
  and the members the slice holds, never the slice's own count.
  """
  phrase = (
    f"member {results['selected_member']} of"
    f" {results.get('population_size', len(results['members']))}"
  )
  index, count = results.get("shard", (0, 1))
  if count <= 1:
    return phrase
  held = [m["member"] for m in results["members"]]
  return f"{phrase}, slice {index} of {count} holds {min(held)}-{max(held)}"


def finish(
  path: pathlib.Path,
  config: ConfigDict,
  reports: list[dict],
  metric: str,
  mode: str,
  common_results: dict,
  columns: Sequence[str],
) -> dict:
  """Writes results.json (the selected member's results, plus every member's) and summary.md."""
  common_results = {
    **common_results,
    "population_size": population_size(config),
    "shard": [config.population.shard_index, config.population.num_shards],
    "device": device_name(),
    **provenance.code_identity(),
  }
  return write_results(path, reports, metric, mode, common_results, columns)


def write_results(
  path: pathlib.Path,
  reports: list[dict],
  metric: str,
  mode: str,
  common_results: dict,
  columns: Sequence[str],
) -> dict:
  """results.json (``common_results``, the selected member's results, ``members``), summary.md."""
  selected = select(reports, metric, mode)
  # A member evaluated again more precisely (the VAE's selection_eval_samples) reports those
  # numbers.
  results = {
    **common_results,
    **(selected or {metric: None}),
    **(selected or {}).get("final", {}),
    "members": reports,
    "selected_by": [metric, mode],
    "summary_columns": list(columns),
  }
  results["selected_member"] = selected["member"] if selected else None
  results.pop("member", None)
  results.pop("final", None)
  draws = draw_spreads(reports, columns)
  if draws:
    results["draws"] = draws
    results.pop("draw", None)
    if selected:
      results["selected_draw"] = next(d for d in draws if d["draw"] == selected["draw"])
  workdir.write_json_atomic(path / "results.json", results)
  workdir.write_text_atomic(
    path / "summary.md",
    run_line(common_results)
    + summary_table(reports, metric, mode, columns)
    + (draws_table(draws, metric, mode, columns) if draws else ""),
  )
  return results


def draw_spreads(reports: Sequence[dict], columns: Sequence[str]) -> list[dict]:
  """Per draw of a search with several seeds per draw (``population.seeds_per_draw``): its
  hyperparameters, and each column's mean and sample standard deviation over the seeds that
  trained to the end (a diverged seed is counted in ``diverged``); [] when members have no draw."""
  by_draw: dict[int, list[dict]] = {}
  for report in reports:
    if "draw" in report:
      by_draw.setdefault(report["draw"], []).append(report)
  spreads = []
  for draw, members in sorted(by_draw.items()):
    trained = [m for m in members if m.get("diverged_at_step") is None]
    entry = {
      "draw": draw,
      "members": [m["member"] for m in members],
      **{h: members[0][h] for h in HYPERPARAMETERS if h in members[0]},
      "seeds": len(members),
      "diverged": len(members) - len(trained),
    }
    for column in columns:
      values = [m[column] for m in trained if _finite(m.get(column))]
      entry[column] = statistics.fmean(values) if values else None
      entry[f"{column}_sd"] = statistics.stdev(values) if len(values) > 1 else None
    spreads.append(entry)
  return spreads


def _finite(value) -> bool:
  return isinstance(value, (int, float)) and math.isfinite(value)


def draws_table(draws: Sequence[dict], metric: str, mode: str, columns: Sequence[str]) -> str:
  """Markdown: one row per draw, mean +- sd over its seeds, sorted by the mean of ``metric``."""
  ordered = sorted(
    draws,
    key=lambda d: (
      (0, d[metric] if mode == "min" else -d[metric]) if _finite(d[metric]) else (1, 0.0)
    ),
  )
  hyperparameters = [h for h in HYPERPARAMETERS if h in draws[0]]
  fields = ["draw", *hyperparameters, "seeds", "diverged", *columns]
  lines = [
    "",
    "Per draw: mean +- sd over the seeds that trained to the end.",
    "",
    "| " + " | ".join(fields) + " |",
    "|" + "---|" * len(fields),
  ]
  for draw in ordered:
    cells = [str(draw["draw"])]
    cells += [f"{draw[h]:.4g}" for h in hyperparameters]
    cells += [str(draw["seeds"]), str(draw["diverged"])]
    for column in columns:
      mean, sd = draw[column], draw[f"{column}_sd"]
      cells.append("-" if mean is None else f"{mean:.4g}" + ("" if sd is None else f" +- {sd:.2g}"))
    lines.append("| " + " | ".join(cells) + " |")
  return "\n".join(lines) + "\n"


def run_line(common_results: dict) -> str:
  """summary.md's first line: what the run was (so that the file can be read alone)."""
  parts = [f"estimator {common_results['estimator']}"] if "estimator" in common_results else []
  parts += [f"{common_results['steps']} steps"] if "steps" in common_results else []
  parts += [f"{common_results['num_epochs']} epochs"] if "num_epochs" in common_results else []
  parts += [f"batch size {common_results['batch_size']}"] if "batch_size" in common_results else []
  if "num_eval_samples" in common_results:
    parts.append(
      f"bounds: IWAE M = {common_results['num_eval_samples']} on"
      f" {common_results['num_eval_examples']}"
      " images per split"
    )
  return ("Run: " + ", ".join(parts) + ".\n\n") if parts else ""


def summary_table(reports: Sequence[dict], metric: str, mode: str, columns: Sequence[str]) -> str:
  """Markdown: one row per member, sorted by ``metric`` (best first; diverged last)."""

  def order(r):
    value = r.get(metric)
    if value is None or not math.isfinite(value):
      return (1, 0.0)
    return (0, value if mode == "min" else -value)

  fields = [
    "member",
    *(["draw"] if "draw" in reports[0] else []),
    "seed",
    *[h for h in HYPERPARAMETERS if h in reports[0]],
    *columns,
    "diverged_at_step",
  ]
  lines = ["| " + " | ".join(fields) + " |", "|" + "---|" * len(fields)]
  for report in sorted(reports, key=order):
    cells = []
    for field in fields:
      value = report.get(field)
      cells.append(
        "-" if value is None else f"{value:.6g}" if isinstance(value, float) else str(value)
      )
    lines.append("| " + " | ".join(cells) + " |")
  return (
    f"Members sorted by {metric} ({'lower' if mode == 'min' else 'higher'} is better).\n\n"
    + "\n".join(lines)
    + "\n"
  )
