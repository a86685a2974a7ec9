"""Merging the slices of a population trained as a job array into one run's records.

Each job of the array trains a slice of the members
(``population.shard_index=I``, ``population.num_shards=N``) in its own workdir;
:func:`merge` checks that the slices belong to one population, trained on one
code, and together cover it, then selects the best member on validation as a
single job would have (``scripts/merge_population.py`` is its command line).
The merged directory holds what a single job's records hold: ``config.json``
(the whole population's), ``results.json``, ``summary.md`` and every member's
``metrics.jsonl`` lines, so a study reads and keeps it as any other run.
"""

import json
import pathlib

from experiments import provenance, reporting, workdir
from experiments.registry import POPULATION_EXPERIMENTS


class MergeError(ValueError):
  """The slices cannot be merged; the message says why and what to do."""


# Keys that differ between the slices of one population.
_PER_SLICE = {
  "members",
  "shard",
  "selected_member",
  "final_eval_seconds",
  "trained_steps",
  "code_segments",
  "draws",
  "selected_draw",
  "training_wall_time_s",
  "training_wall_time_steps",
}


# Each slice's times, kept per slice in the merged results (one slice's are not the population's).
_SLICE_TIMES = ("training_wall_time_s", "training_wall_time_steps", "final_eval_seconds")


# (config field, results.json field) that a finished slice's results must match: a slice whose
# extension (num_steps / num_epochs grown) was interrupted still holds the shorter run's results.
_LENGTH_FIELDS = (("num_steps", "steps"), ("num_epochs", "num_epochs"))


def _is_run_workdir(path: pathlib.Path) -> bool:
  return any((path / name).exists() for name in ("config.json", "checkpoints", "metrics.jsonl"))


def _is_merged(path: pathlib.Path) -> bool:
  """Whether ``path`` holds an earlier merge's output (which a new merge may replace)."""
  try:
    results = json.loads((path / "results.json").read_text())
  except (OSError, ValueError):
    return False
  return (
    isinstance(results, dict) and "merged_from" in results and not (path / "checkpoints").exists()
  )


def _merged_metrics(workdirs: list[pathlib.Path]) -> str:
  """Every slice's metrics.jsonl lines in a single job's order: by step (slice by slice within
  a step), the end-of-run evaluation's lines last."""
  keyed = []
  for slice_dir in workdirs:
    path = slice_dir / "metrics.jsonl"
    try:
      text = path.read_text()
    except (OSError, UnicodeDecodeError) as e:
      raise MergeError(f"{path} cannot be read ({e}): run that slice's job again.") from None
    for number, line in enumerate(text.splitlines(), 1):
      if not line.strip():
        continue
      try:
        record = json.loads(line)
        key = (bool(record.get("final")), int(record["step"]))
      except (ValueError, TypeError, KeyError, AttributeError):
        raise MergeError(
          f"{path} is damaged at line {number}: run that slice's job again."
        ) from None
      keyed.append((key, line))
  keyed.sort(key=lambda pair: pair[0])  # stable: the slices' order within a step
  return "".join(line + "\n" for _, line in keyed)


def _read_json(path: pathlib.Path) -> dict:
  try:
    return json.loads(path.read_text())
  except FileNotFoundError:
    if path.name == "config.json":
      raise MergeError(
        f"{path.parent} holds no run (no config.json): give the workdir each slice was"
        " trained in (--workdir of its job)."
      ) from None
    raise MergeError(
      f"{path} does not exist: that slice has not finished (run its job again)."
    ) from None
  except (json.JSONDecodeError, UnicodeDecodeError) as e:
    raise MergeError(
      f"{path} is damaged ({e}): run that slice's job again to rewrite it."
    ) from None


def _code_segments(results: dict) -> list[dict]:
  """A slice's code segments (a run from before they were recorded: its one identity)."""
  return results.get("code_segments") or [
    {k: results[k] for k in ("git_commit", "source_sha256", "versions") if k in results}
  ]


def _check_code(workdirs: list[pathlib.Path], slices: list[dict], accept_mixed: bool) -> dict:
  """results.json's record of the code the slices were trained with; refuses mixed code unless
  ``accept_mixed``."""
  segments = [_code_segments(results) for results in slices]
  reference = segments[0][0]
  for workdir_path, theirs in zip(workdirs, segments):
    changed = []
    for segment in theirs:
      changed = changed or provenance.differences(reference, segment)
    if changed and not accept_mixed:
      raise MergeError(
        f"{workdir_path} was trained (in part) on other code than the first steps of"
        f" {workdirs[0]} ({'; '.join(changed)}): its members would not be comparable. Retrain it"
        " on one code, or pass --accept_mixed_code to merge them all the same (each slice's code"
        " is recorded)."
      )
    if changed:
      print(f"warning: {workdir_path} was trained (in part) on other code: {'; '.join(changed)}")
  if all(s == segments[0] for s in segments):
    return {"code_segments": segments[0]}
  return {"code_segments_by_slice": {str(w): s for w, s in zip(workdirs, segments)}}


def merge(workdirs: list[pathlib.Path], out: pathlib.Path, accept_mixed_code: bool = False) -> dict:
  if not workdirs:
    raise MergeError("give the workdirs of the slices to merge (every shard's, once).")
  if out.resolve() in {w.resolve() for w in workdirs} or (
    _is_run_workdir(out) and not _is_merged(out)
  ):
    raise MergeError(
      f"--out={out} is a run's workdir (one of the slices, or another run): its results.json"
      " would be overwritten; give a new directory (or an earlier merge's, which is replaced)."
    )
  for slice_dir in workdirs:
    if not slice_dir.is_dir():
      raise MergeError(
        f"{slice_dir} is not a directory: give the workdir each slice was trained in"
        " (--workdir of its job)."
      )
    holder = workdir.held_by(slice_dir)
    if holder:
      raise MergeError(
        f"{slice_dir} is still training ({holder}): merge once every slice's job has ended."
      )
  configs = [_read_json(w / "config.json") for w in workdirs]
  experiments = {w: c.get("experiment", "vae") for w, c in zip(workdirs, configs)}
  if len(set(experiments.values())) > 1:
    raise MergeError(
      "the slices are runs of different experiments"
      f" ({', '.join(f'{w}: {e}' for w, e in experiments.items())}): merge the slices of one"
      " population."
    )
  slices = [_read_json(slice_dir / "results.json") for slice_dir in workdirs]
  first = slices[0]
  for slice_dir, config, results in zip(workdirs, configs, slices):
    for config_field, results_field in _LENGTH_FIELDS:
      if (
        config_field in config
        and results.get(results_field, config[config_field]) != config[config_field]
      ):
        raise MergeError(
          f"{slice_dir / 'results.json'} is stale: it reports"
          f" {results_field}={results[results_field]} but the"
          f" slice's config asks for {config_field}={config[config_field]} (an extension that did"
          " not finish):"
          " run that slice's job again."
        )
  reference = workdir.flatten(configs[0])
  experiment = POPULATION_EXPERIMENTS.get(configs[0].get("experiment"))
  # Fields that may differ between slices: the shard, and what a restart may change (logging,
  # evaluation).
  safe_to_change = {"population.shard_index"} | (
    experiment.SAFE_TO_CHANGE if experiment else workdir.SAFE_TO_CHANGE
  )
  added_fields = experiment.ADDED_FIELDS if experiment else {}
  for workdir_path, config in zip(workdirs[1:], configs[1:]):
    flat = workdir.flatten(config)
    mismatch = workdir.differing_fields(reference, flat, safe_to_change, added_fields)
    if mismatch:
      raise MergeError(
        f"{workdir_path} is not a slice of the population in {workdirs[0]}:"
        f" {', '.join(mismatch)} differ."
      )
  code = _check_code(workdirs, slices, accept_mixed_code)
  reports = sorted((m for s in slices for m in s["members"]), key=lambda m: m["member"])
  indices = [m["member"] for m in reports]
  if indices != list(range(first["population_size"])):
    missing = sorted(set(range(first["population_size"])) - set(indices))
    raise MergeError(
      f"the slices do not cover the population of {first['population_size']}: members"
      f" {missing or 'repeated'} (give every shard's workdir once)."
    )
  metric, mode = first["selected_by"]
  columns = first["summary_columns"]
  common_results = {k: v for k, v in first.items() if k not in _PER_SLICE and k not in reports[0]}
  common_results.update(
    shard=[0, 1],
    merged_from=[str(w) for w in workdirs],
    trained_steps=min(s["trained_steps"] for s in slices),
    slice_times=[{k: s.get(k) for k in _SLICE_TIMES} for s in slices],
    **code,
  )
  # The whole population's config: the one a single job would have trained with.
  population = {**configs[0].get("population", {}), "shard_index": 0, "num_shards": 1}
  metrics = _merged_metrics(workdirs)
  try:
    out.mkdir(parents=True, exist_ok=True)
    workdir.write_json_atomic(out / "config.json", {**configs[0], "population": population})
    workdir.write_text_atomic(out / "metrics.jsonl", metrics)
    return reporting.write_results(out, reports, metric, mode, common_results, columns)
  except OSError as e:
    raise MergeError(f"cannot write the merged results in --out={out}: {e}") from None
