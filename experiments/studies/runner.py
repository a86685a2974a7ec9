"""Studies as declarations: arms (config + overrides + seeds), a report, claims; one runner.

A study file's ``get_study()`` returns a :class:`Study`. Each :class:`Arm` is
one population (``population.search='lists'`` over its seeds and any other
lists) trained by ``python -m experiments.main`` in ``OUT/<arm.name>``; the
report reads every arm through :mod:`experiments.studies.records` and returns
Markdown and JSON. Finished populations are read (from the workdir, else from
the kept records), interrupted ones resume, so a study's command can be rerun
until it completes. An arm's population may also train as slices of its members
side by side (``--slice=I/N``, one command per slice, on cores or machines): each
in ``OUT/<arm.name>/slices/I-of-N``, merged into ``OUT/<arm.name>`` by the last
to finish, and then read and kept as a population trained whole.
"""

from __future__ import annotations

import ast
import dataclasses
import fcntl
import json
import pathlib
import shlex
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from experiments import search
from experiments.studies import launch, records


@dataclasses.dataclass(frozen=True)
class Arm:
  """One population of a study.

  Attributes:
    name: its folder under the study's ``--out`` and ``--records`` (e.g. "setting/estimator").
    config: the config file (relative to the clone; ``FILE:ARG`` passes ARG to get_config).
    overrides: ``FIELD=VALUE`` config overrides.
    seeds: the population's seeds (``search="lists"``).
    lists: other population lists trained together with the seeds (e.g. ``{"tau": (0.64, 0.25)}``).
    search: ``population.search``: "lists" (every combination of the lists and seeds) or "paper"
      (the experiment's own random search; its size an override).
    dataset_dir: the folder under ``--data_root`` that ``data_dir`` points to ("" = none).
    labels: what the report groups and names the arm by (e.g. setting, estimator).
    records: where its records are kept, when not at ``<the study's records>/<name>`` (an arm
      shared with another study: the same population, kept once).
  """

  name: str
  config: str
  overrides: tuple[str, ...] = ()
  seeds: tuple[int, ...] = (0,)
  lists: Mapping[str, tuple] = dataclasses.field(default_factory=dict)
  dataset_dir: str = ""
  labels: Mapping[str, Any] = dataclasses.field(default_factory=dict)
  records: str = ""
  search: str = "lists"

  def kept_at(self, records_dir: pathlib.Path | None) -> pathlib.Path | None:
    """Where the arm's records are kept (None: nowhere)."""
    if self.records:
      return pathlib.Path(self.records)
    return records_dir / self.name if records_dir else None

  def command_overrides(self, extra: Sequence[str] = (), data_root: str = "") -> list[str]:
    """Every override the arm's population trains with."""
    lists = {**self.lists, "seed": self.seeds} if self.search == "lists" else {}
    population = [
      f"population.{field}=({','.join(str(v) for v in values)},)" for field, values in lists.items()
    ]
    data = [f"data_dir={pathlib.Path(data_root) / self.dataset_dir}"] if data_root else []
    # One override per field, the last given: ml_collections would append repeated tuple values.
    last = {}
    for override in [
      *self.overrides,
      f"population.search={self.search}",
      *population,
      *extra,
      *data,
    ]:
      last[override.partition("=")[0]] = override
    return list(last.values())

  def expect(self, extra: Sequence[str] = ()) -> dict[str, Any]:
    """The top-level config fields the arm's records must hold (its and ``--set``'s overrides)."""
    expected = {}
    for override in [*self.overrides, *extra]:
      field, _, value = override.partition("=")
      if "." in field:
        continue
      try:
        expected[field] = ast.literal_eval(value)
      except (ValueError, SyntaxError):
        expected[field] = value
    return expected


@dataclasses.dataclass(frozen=True)
class Readings:
  """Every arm's finished run, and why the others are not in the tables."""

  runs: Mapping[str, records.Run]
  missing: Mapping[str, str]  # arm name -> the reason (not finished, ...)
  arms: Mapping[str, Arm]
  overrides: tuple[str, ...] = ()  # the study's --set overrides (a report lists them as departures)

  def get(self, name: str) -> records.Run | None:
    return self.runs.get(name)

  def subset(self, names) -> Readings:
    """The readings of the named arms only (e.g. one table's)."""
    wanted = set(names)
    names = [n for n in self.arms if n in wanted]
    return Readings(
      runs={n: self.runs[n] for n in names if n in self.runs},
      missing={n: self.missing[n] for n in names if n in self.missing},
      arms={n: self.arms[n] for n in names},
      overrides=self.overrides,
    )

  def missing_lines(self) -> list[str]:
    """The arms not measured, one line each, for every page that tabulates the others."""
    if not self.missing:
      return []
    by_reason: dict[str, list[str]] = {}
    for name, reason in self.missing.items():
      by_reason.setdefault(reason, []).append(f"`{name}`")
    lines = ["", f"Not in the tables ({len(self.missing)} of {len(self.arms)} arms):", ""]
    return lines + [f"- {reason}: {', '.join(names)}" for reason, names in by_reason.items()]


@dataclasses.dataclass(frozen=True)
class Report:
  """What a study writes: ``OUT/<name>.md`` and ``OUT/<name>.json``."""

  markdown: str
  data: Any


@dataclasses.dataclass(frozen=True)
class Study:
  """A study: its arms, where its records are kept, and how its runs become tables.

  Attributes:
    name: the table files' base name (``OUT/<name>.md`` / ``.json``).
    arms: the populations, each with a unique name.
    report: ``Readings -> Report``.
    records: the tracked folder that keeps each finished arm's records.
    page: a docs page the report is also written to with ``--page`` (generated only).
    figures: ``(Readings, directory) -> [PNG paths]``, drawn after the tables (None: none).
  """

  name: str
  arms: tuple[Arm, ...]
  report: Callable[[Readings], Report]
  records: str = ""
  page: str = ""
  figures: Callable[[Readings, pathlib.Path], list[pathlib.Path]] | None = None

  def __post_init__(self):
    names = [arm.name for arm in self.arms]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
      raise ValueError(f"study {self.name}: arm names must be unique; repeated: {duplicates}")

  def select(self, names: Sequence[str] | None) -> tuple[Arm, ...]:
    """The arms named (each an arm's name, or a prefix of names ending in '/'); all for None."""
    if not names:
      return self.arms
    chosen = []
    for name in names:
      matching = [
        a for a in self.arms if a.name == name or a.name.startswith(name.rstrip("/") + "/")
      ]
      if not matching:
        raise ValueError(
          f"--arms: {name!r} is not an arm of study {self.name}; its arms:"
          f" {', '.join(a.name for a in self.arms)}"
        )
      chosen += [a for a in matching if a not in chosen]
    return tuple(chosen)


def check(
  arms: Sequence[Arm],
  extra: Sequence[str],
  data_root: str,
  slice_of: tuple[int, int] | None = None,
) -> None:
  """Every arm's config and overrides load (one LaunchError line otherwise), before training;
  with ``slice_of`` (I, N), every arm's population has at least N members."""
  for arm in arms:
    config = launch.load_config(arm.config, arm.command_overrides(extra, data_root))
    size = search.population_size(config)
    if slice_of and slice_of[1] > size:
      raise launch.LaunchError(
        f"--slice={slice_of[0]}/{slice_of[1]}: arm {arm.name} has {size} members, so at most"
        f" {size} slices"
      )


def train(
  arms: Sequence[Arm],
  out: pathlib.Path,
  records_dir: pathlib.Path | None,
  extra: Sequence[str] = (),
  data_root: str = "",
  slice_of: tuple[int, int] | None = None,
  accept_mixed_code: bool = False,
) -> None:
  """Trains (or resumes, or reads from records) each arm's population, in order; with
  ``slice_of`` (I, N), the I-th of N slices of each (see :func:`train_slice`;
  ``accept_mixed_code`` merges slices trained on other code)."""
  for arm in arms:
    kept = arm.kept_at(records_dir)
    overrides = arm.command_overrides(extra, data_root)
    if slice_of is None:
      launch.train(arm.config, out / arm.name, overrides, kept)
    else:
      train_slice(
        arm.config, out / arm.name, overrides, kept, *slice_of, accept_mixed_code=accept_mixed_code
      )


def slice_workdirs(whole: pathlib.Path, count: int) -> list[pathlib.Path]:
  """The workdirs of the ``count`` slices of the population whose run is ``whole``."""
  return [whole / records.SLICES_DIR / f"{index}-of-{count}" for index in range(count)]


# Taken by the slice command that merges: two slices finishing together merge once.
MERGE_LOCK = ".merge.lock"


def _finished(workdir: pathlib.Path | None, steps: int | None) -> bool:
  """Whether ``workdir`` holds a finished run (its results.json) of ``steps`` steps."""
  try:
    results = json.loads((workdir / "results.json").read_text()) if workdir else None
  except (OSError, ValueError):
    return False
  return isinstance(results, dict) and (steps is None or results.get("steps") == steps)


def train_slice(
  config: str,
  whole: pathlib.Path,
  overrides: list[str],
  kept: pathlib.Path | None,
  index: int,
  count: int,
  accept_mixed_code: bool = False,
) -> None:
  """Trains (or resumes) slice ``index`` of ``count`` of a population whose run is ``whole``,
  in ``whole/slices/<index>-of-<count>``; once every slice has finished, merges them into
  ``whole`` (config.json, results.json, metrics.jsonl, summary.md: a run's records) and keeps
  those in ``kept``. A population already finished (``whole``, or its kept records) is only read.

  Every slice's command merges when it finds the others finished and none training, so the last
  to finish merges. Two finishing together: the first to take ``whole/.merge.lock`` merges, the
  other says so and returns (or, once the merge is done, reads it). Slices trained on other code
  are refused (experiments/merge.py) unless ``accept_mixed_code``.
  """
  from experiments import merge, workdir  # jax's import: only once a slice is trained

  steps = launch.load_config(config, overrides).get("num_steps")
  if _finished(whole, steps) or _finished(kept, steps):
    launch.train(config, whole, overrides, kept)  # reads the finished run, or its kept records
    return
  if workdir.has_checkpoint(whole):
    raise launch.LaunchError(
      f"{whole} holds a population trained whole: resume it without --slice, or delete"
      f" {whole / 'checkpoints'} to train it in slices"
    )
  slices = slice_workdirs(whole, count)
  shard = [f"population.shard_index={index}", f"population.num_shards={count}"]
  launch.train(config, slices[index], [*overrides, *shard])
  waiting = []
  for piece in slices:
    holder = workdir.held_by(piece)  # probed once: the slice may finish meanwhile
    if holder or not _finished(piece, steps):
      waiting.append(f"{piece.name} ({'training' if holder else 'not finished'})")
  if waiting:
    print(
      f"{whole}: slice {index}-of-{count} finished; the last slice to finish merges them"
      f" (waiting for {', '.join(waiting)})",
      flush=True,
    )
    return
  with open(whole / MERGE_LOCK, "a") as lock:
    try:
      fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
      print(
        f"{whole}: slice {index}-of-{count} finished; another slice's command merges them",
        flush=True,
      )
      return
    if _finished(whole, steps):  # merged by another slice's command since this one looked
      launch.train(config, whole, overrides, kept)
      return
    try:
      merge.merge(slices, whole, accept_mixed_code)
    except merge.MergeError as e:
      raise launch.LaunchError(f"{whole}: its slices could not be merged: {e}") from None
    print(f"{whole}: its {count} slices merged into one population's records", flush=True)
    if kept is not None:
      records.keep(whole, kept)


def read(
  study: Study,
  out: pathlib.Path,
  records_dir: pathlib.Path | None,
  extra: Sequence[str] = (),
  selected: Sequence[str] | None = None,
) -> Readings:
  """Each arm's run from its workdir under ``out``, else from its kept records.

  The ``extra`` overrides are expected of the ``selected`` arms (default: all);
  the others are read as their study declares them (``--arms=A --set=...``
  trains A differently and reads the rest as kept). A run that has not
  finished is listed as missing with its reason; any other RecordError
  (records of another config, a cut metrics file) is raised.
  """
  runs, missing = {}, {}
  for arm in study.arms:
    overrides = extra if selected is None or arm.name in selected else ()
    expected, kept = _expected(arm, overrides), arm.kept_at(records_dir)
    for place in [out / arm.name, *([kept] if kept else [])]:
      try:
        runs[arm.name] = records.read_run(place, expected)
        break
      except records.Unfinished as e:
        reason = str(e).split(": ", 1)[-1]
    else:
      missing[arm.name] = reason  # the last place's: the records, where they are kept
  arms = {a.name: a for a in study.arms}
  return Readings(runs=runs, missing=missing, arms=arms, overrides=tuple(extra))


# The config fields that say what a run is (beside the arm's overrides): records of an arm must
# hold the values its config file gives them (a one-layer run under a two-layer arm is refused).
IDENTITY_FIELDS = ("experiment", "model", "dataset", "binarization", "arity", "num_vars")


def _expected(arm: Arm, extra: Sequence[str]) -> dict[str, Any]:
  identity = {}
  if pathlib.Path(arm.config.partition(":")[0]).is_file():  # not for the tests' canned arms
    config = launch.load_config(arm.config, arm.command_overrides(extra))
    identity = {f: config[f] for f in IDENTITY_FIELDS if f in config}
  return {**identity, **arm.expect(extra)}


def slurm_script(
  study_file: str,
  study: Study,
  arms: Sequence[Arm],
  out: str,
  records_dir: str,
  extra: Sequence[str],
  data_root: str,
  time: str = "24:00:00",
) -> str:
  """A SLURM job array (one task per arm) and, after it, the job that writes the tables."""
  base = ["python", "-m", "experiments.study", f"--study={study_file}", f"--out={out}"]
  base += [f"--records={records_dir}"] if records_dir else []
  base += [f"--set={o}" for o in extra] + ([f"--data_root={data_root}"] if data_root else [])
  names = " ".join(shlex.quote(a.name) for a in arms)
  task = shlex.join([*base, "--tables=false"]) + ' --arms="${ARMS[$SLURM_ARRAY_TASK_ID]}"'
  tables_command = shlex.join([*base, "--run=false"])
  return f"""#!/bin/bash
#SBATCH --job-name={study.name}
#SBATCH --array=0-{len(arms) - 1}
#SBATCH --time={time}
# Study {study.name}: one array task per arm; submit with
#   array=$(sbatch --parsable THIS_FILE)
#   sbatch --dependency=afterok:$array --time=00:30:00 --wrap="bash THIS_FILE tables"
cd "${{GR_JAX_CLONE:-$HOME/gr_jax}}"        # the clone
source .venv/bin/activate                  # the README's install (".[cuda]" on GPUs)
export GR_JAX_DATA="${{GR_JAX_DATA:-$HOME/data}}"  # the data root
ARMS=({names})
if [ "$1" = tables ]; then
  {tables_command}
else
  {task}
fi
"""
