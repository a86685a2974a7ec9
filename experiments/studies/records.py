"""The one reader of a run's records, and the rule that keeps them.

A run's records are the files a table is made from: ``config.json`` (what was
trained), ``results.json`` (each member's final bounds), ``metrics.jsonl`` (the
curves) and ``summary.md``; tens of kB a run, no checkpoints. A workdir under
``runs/`` lives on the machine that trained it; its records are copied into a
tracked folder (``records/<study>/``) as each population finishes, so that a
fresh clone regenerates every table without training.

Every way a record could put a wrong number into a table is a one-line
:class:`RecordError` here: records of another estimator, temperature, model or
dataset under an arm's folder, a metrics file cut short or mid-line, a missing
or damaged file. A member whose bound is not finite (diverged) stays in the run
and is counted by the tables, never silently dropped.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import pathlib
import shutil
from collections.abc import Callable, Mapping
from typing import Any

# ladder.json: bounds a study computed from a run's checkpoints (experiments/studies/depth.py).
RECORD_FILES = ("config.json", "results.json", "metrics.jsonl", "summary.md", "ladder.json")

# Config fields that say where and how a run was computed, not what: records that differ in them
# are records of the same arm (a data directory on another machine, a checkpoint interval).
MACHINE_FIELDS = frozenset(
  {
    "data_dir",
    "data_used",
    "download",
    "checkpoint_every",
    "log_every",
    "steps_per_call",
    "eval_batch_size",
    "iwae_chunk_size",
  }
)


class RecordError(Exception):
  """A run's files cannot be read as the records of its arm; the message says what and where."""


# Where ``study --slice`` trains an arm's slices (``OUT/<arm>/slices/I-of-N``) until they merge.
SLICES_DIR = "slices"


class Unfinished(RecordError):
  """The workdir holds no results.json: the run has not finished (or was never started)."""


def _read_json(path: pathlib.Path) -> Any:
  try:
    text = path.read_text()
  except FileNotFoundError:
    if path.name == "results.json":
      raise Unfinished(f"{path.parent}: no results.json (the run has not finished)") from None
    raise RecordError(f"{path.parent}: no {path.name}: not a run's records") from None
  except (OSError, UnicodeDecodeError) as e:
    raise RecordError(f"{path}: unreadable ({e})") from None
  try:
    return json.loads(text)
  except json.JSONDecodeError as e:
    raise RecordError(f"{path}: damaged JSON ({e.msg} at line {e.lineno})") from None


def finite(value: Any) -> float | None:
  """``value`` as a float when it is a finite number, else None (missing, NaN, inf: diverged)."""
  if isinstance(value, bool) or not isinstance(value, (int, float)):
    return None
  return float(value) if math.isfinite(value) else None


@dataclasses.dataclass(frozen=True)
class Member:
  """One member of a population: its entry of results.json and its logged curves."""

  index: int
  seed: int
  results: Mapping[str, Any]
  # split -> metric -> {step: value}, from metrics.jsonl (the final evaluation's lines left out).
  curves: Mapping[str, Mapping[str, Mapping[int, float]]]

  def value(self, name: str) -> float | None:
    """A final result of the member (e.g. ``test_nll``), None when missing or not finite."""
    return finite(self.results.get(name))

  def read(self, column: str | Callable[[Member], Any]) -> Any:
    """``column`` read off the member: a result name (as ``value``) or a function of the member."""
    return self.value(column) if isinstance(column, str) else column(self)

  def curve(self, name: str, split: str = "train") -> dict[int, float]:
    return dict(self.curves.get(split, {}).get(name, {}))


@dataclasses.dataclass(frozen=True)
class Run:
  """A finished population's records, read and checked."""

  workdir: pathlib.Path
  config: Mapping[str, Any]
  results: Mapping[str, Any]
  members: tuple[Member, ...]

  @property
  def steps(self) -> int:
    return int(self.results["steps"])

  @property
  def estimator(self) -> str:
    return str(self.config["estimator"])

  @property
  def seeds(self) -> tuple[int, ...]:
    return tuple(sorted(m.seed for m in self.members))

  def select(self, **fields: Any) -> list[Member]:
    """The members whose results hold each of ``fields`` (e.g. ``tau=0.25``), by seed."""
    chosen = [m for m in self.members if all(_same(m.results.get(f), v) for f, v in fields.items())]
    return sorted(chosen, key=lambda m: m.seed)

  def best(self, field: str, by: str = "valid_nll") -> Any:
    """The ``field`` (e.g. ``tau``) of the member with the lowest finite ``by`` (None: none)."""
    scored = [(m.value(by), m.results.get(field)) for m in self.members]
    finite = [(value, chosen) for value, chosen in scored if value is not None]
    return min(finite, key=lambda pair: pair[0])[1] if finite else None

  def by_seed(self, value: str | Callable[[Member], Any], **fields: Any) -> dict[int, float | None]:
    """{seed: value(member)} over the selected members; ``value`` a result name or a function."""
    return {m.seed: m.read(value) for m in self.select(**fields)}


def _same(a: Any, b: Any) -> bool:
  """Config values equal as a study means them: lists and tuples alike, numbers to 1e-9."""
  if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
    return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
  numbers = (int, float)
  if isinstance(a, numbers) and isinstance(b, numbers) and not isinstance(a, bool | str):
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12) or (a != a and b != b)
  return a == b


def check_config(workdir: pathlib.Path, config: Mapping[str, Any], expect: Mapping[str, Any]):
  """Raises RecordError unless the run's config holds each expected field's value."""
  for field, wanted in expect.items():
    if field in MACHINE_FIELDS or field not in config:
      continue
    if not _same(config[field], wanted):
      raise RecordError(
        f"{workdir}: its config.json has {field}={config[field]!r} where this arm expects"
        f" {wanted!r}: the records of another run under this arm's folder (a copy?); move them"
        " out, or delete the folder to train the arm"
      )


def _read_metrics(path: pathlib.Path) -> dict[int, dict[str, dict[str, dict[int, float]]]]:
  """member -> split -> metric -> {step: value}; the final evaluation's lines left out."""
  curves: dict = {}
  try:
    text = path.read_text()
  except FileNotFoundError:
    raise RecordError(f"{path.parent}: no metrics.jsonl: not a run's whole records") from None
  except (OSError, UnicodeDecodeError) as e:
    raise RecordError(f"{path}: unreadable ({e})") from None
  for number, line in enumerate(text.splitlines(), start=1):
    try:
      record = json.loads(line)
      step, member = int(record["step"]), int(record.get("member", 0))
    except (json.JSONDecodeError, KeyError, TypeError, ValueError):
      raise RecordError(
        f"{path}: line {number} is not a whole metrics record (the file was cut, or damaged):"
        f" {line[:60]!r}"
      ) from None
    if record.get("final"):
      continue
    split = curves.setdefault(member, {}).setdefault(record.get("split", "train"), {})
    for name, value in record.items():
      if name not in ("step", "member", "split") and finite(value) is not None:
        split.setdefault(name, {})[step] = float(value)
  return curves


def read_run(workdir: pathlib.Path | str, expect: Mapping[str, Any] | None = None) -> Run:
  """A finished run's records, checked: raises :class:`Unfinished` when it has no results.json,
  :class:`RecordError` (one line) when its files are damaged, cut short, or of a config other
  than ``expect`` (fields a study's arm sets; machine fields are not compared)."""
  workdir = pathlib.Path(workdir)
  if not workdir.is_dir():
    raise Unfinished(f"{workdir}: no such run (not trained, and no records kept)")
  if (workdir / SLICES_DIR).is_dir() and not (workdir / "config.json").exists():
    raise Unfinished(f"{workdir}: training in slices (study --slice), not merged yet")
  config = _read_json(workdir / "config.json")
  results = _read_json(workdir / "results.json")
  if not isinstance(config, dict) or not isinstance(results, dict):
    raise RecordError(f"{workdir}: config.json and results.json must each hold a JSON object")
  check_config(workdir, config, expect or {})
  if "steps" not in results or not isinstance(results.get("members"), list):
    raise RecordError(f"{workdir / 'results.json'}: no steps or members: not a population's")
  if not _same(config.get("num_steps", results["steps"]), results["steps"]):
    raise RecordError(
      f"{workdir}: results.json is of {results['steps']} steps and config.json asks for"
      f" {config['num_steps']}: the run was extended and has not finished again"
    )
  curves = _read_metrics(workdir / "metrics.jsonl")
  members = []
  for entry in results["members"]:
    index = int(entry.get("member", len(members)))
    members.append(
      Member(
        index=index, seed=int(entry.get("seed", 0)), results=entry, curves=curves.get(index, {})
      )
    )
  _check_curves_reach_the_end(workdir, config, int(results["steps"]), members)
  return Run(workdir=workdir, config=config, results=results, members=tuple(members))


def best_of_kept(workdir: pathlib.Path | str, field: str, by: str = "valid_nll") -> Any:
  """``field`` (e.g. ``tau``) of the best member of the records kept in ``workdir`` (None when no
  records are kept there): how a search's selection declares the arms that follow it."""
  workdir = pathlib.Path(workdir)
  return read_run(workdir).best(field, by) if (workdir / "results.json").is_file() else None


def _check_curves_reach_the_end(workdir, config, steps: int, members: list[Member]) -> None:
  """Each member's training curve must run to the last logged interval: whole lines cut from the
  end of metrics.jsonl would otherwise be read as a shorter curve (and its last value as the
  run's)."""
  log_every = config.get("log_every") or 0
  if not isinstance(log_every, int) or log_every <= 0 or steps < log_every:
    return
  last_interval = steps - steps % log_every
  for member in members:
    logged = [s for values in member.curves.get("train", {}).values() for s in values]
    if not logged or max(logged) < last_interval:
      reached = max(logged) if logged else "no step"
      raise RecordError(
        f"{workdir / 'metrics.jsonl'}: member {member.index}'s training curve ends at {reached},"
        f" the run logged to step {last_interval}: the file was cut short"
      )


# ---------------------------------------------------------------------------
# Keeping records.
# ---------------------------------------------------------------------------


def check_writable(directory: pathlib.Path | str, flag: str) -> None:
  """Raises RecordError unless ``directory`` can be made and written (before any training)."""
  directory = pathlib.Path(directory)
  try:
    directory.mkdir(parents=True, exist_ok=True)
    probe = directory / f".write_test_{os.getpid()}"
    probe.write_text("")
    probe.unlink()
  except OSError as e:
    raise RecordError(
      f"{flag}={directory} cannot be written ({e.strerror or e}): choose another {flag}"
    ) from None


def _length(results: Mapping[str, Any]) -> tuple[int, int]:
  return int(results.get("steps", 0)), len(results.get("members", []))


def keep(workdir: pathlib.Path, into: pathlib.Path) -> bool:
  """Copies a finished run's records into ``into``; returns whether it did.

  Kept records are never replaced by a run of fewer steps or members, by an
  older run of the same length (its results.json older than the kept one), or
  by one whose results.json does not parse: each is a RecordError. Records
  already kept unchanged are left alone (False).
  """
  results = _read_json(workdir / "results.json")
  if not isinstance(results, dict) or not isinstance(results.get("members"), list):
    raise RecordError(f"{workdir / 'results.json'}: not a population's results")
  kept_file = into / "results.json"
  try:
    kept = json.loads(kept_file.read_text()) if kept_file.exists() else None
  except (OSError, ValueError):
    kept = None  # damaged kept records are replaced by a run that parses
  if isinstance(kept, dict):
    (steps, members), (kept_steps, kept_members) = _length(results), _length(kept)
    if steps < kept_steps or members < kept_members:
      raise RecordError(
        f"{workdir}: a run of {steps} steps and {members} members would replace the kept records"
        f" in {into} ({kept_steps} steps, {kept_members} members): not replaced; delete {into}"
        " to keep the shorter run"
      )
    files = [n for n in RECORD_FILES if (workdir / n).is_file() or (into / n).is_file()]
    if all(_same_file(workdir / n, into / n) for n in files):
      return False
    if (steps, members) == (kept_steps, kept_members) and (
      (workdir / "results.json").stat().st_mtime < kept_file.stat().st_mtime
    ):
      raise RecordError(
        f"{workdir}: an older run of the same length as the records kept in {into}: not"
        f" replaced; delete {into} to keep this run instead"
      )
  copy_records(workdir, into)
  return True


def copy_records(source: pathlib.Path, target: pathlib.Path) -> None:
  """Copies the record files ``source`` holds into ``target``, with their file times ("older"
  compares them)."""
  target.mkdir(parents=True, exist_ok=True)
  for name in RECORD_FILES:
    if (source / name).is_file():
      shutil.copy2(source / name, target / name)


def _same_file(a: pathlib.Path, b: pathlib.Path) -> bool:
  return a.is_file() and b.is_file() and a.read_bytes() == b.read_bytes()


def _is_slice(results: pathlib.Path) -> bool:
  """Whether ``results`` is a job array slice's (its population's merge is the run to keep)."""
  try:
    shard = json.loads(results.read_text()).get("shard")
  except (OSError, ValueError, AttributeError):
    return False
  return isinstance(shard, list) and len(shard) == 2 and shard[1] != 1


def keep_all(runs: pathlib.Path, into: pathlib.Path) -> list[pathlib.Path]:
  """Keeps the records of every finished run under ``runs`` (any depth) in the same layout under
  ``into``, job array slices left out (their merge is kept); returns the workdirs whose records
  were copied."""
  if not runs.is_dir():
    raise RecordError(f"{runs} is not a directory: no runs to keep")
  runs_resolved, into_resolved = runs.resolve(), into.resolve()
  if into_resolved != runs_resolved and into_resolved.is_relative_to(runs_resolved):
    raise RecordError(
      f"{into} lies inside {runs}: its copies would be kept again inside themselves; keep the"
      " records outside the runs' folder"
    )
  kept = []
  for results in sorted(runs.rglob("results.json")):
    workdir = results.parent
    target = into / workdir.relative_to(runs)
    if target.resolve() == workdir.resolve() or _is_slice(results):
      continue
    if keep(workdir, target):
      kept.append(workdir)
  return kept
