"""Which code trained a run: its identity, and the segments of steps each (re)start trained.

The identity of the code is the clone's git commit (``-dirty`` with uncommitted
changes), a SHA-256 of the Python sources of ``gr_jax/`` and ``experiments/``
(which tells two checkouts apart even without git, or with the same commit and
different edits), and the versions of jax, jaxlib, flax and optax. The
processes of a multi-process job must agree on it
(distributed.check_same_config); a run resumed on other code records both
(``code_segments.json`` in the workdir, results.json's ``code_segments``) and
says so in one line; a merge of slices trained on other code refuses unless
asked to accept them (``--accept_mixed_code`` of scripts/merge_population.py and of
``experiments.study --slice``). Code is other code when its sources or versions
differ: a commit that changes neither is recorded but is not other code.
"""

from __future__ import annotations

import functools
import hashlib
import json
import pathlib
import subprocess

from absl import logging

from experiments import workdir

ROOT = pathlib.Path(__file__).resolve().parents[1]
SEGMENTS_FILE = "code_segments.json"
# The packages whose sources decide what a run computes.
_SOURCES = ("gr_jax", "experiments")


@functools.cache
def code_identity() -> dict:
  """``{"git_commit": ..., "source_sha256": ..., "versions": {...}}`` of this process (git_commit
  only when run from a clone)."""
  import flax
  import jax
  import jaxlib
  import optax

  identity = {"source_sha256": _source_digest()}
  commit = _git_commit()
  if commit:
    identity["git_commit"] = commit
  identity["versions"] = {
    "jax": jax.__version__,
    "jaxlib": jaxlib.__version__,
    "flax": flax.__version__,
    "optax": optax.__version__,
  }
  return identity


def _source_digest() -> str:
  digest = hashlib.sha256()
  for package in _SOURCES:
    for source in sorted((ROOT / package).rglob("*.py")):
      digest.update(str(source.relative_to(ROOT)).encode() + b"\0" + source.read_bytes() + b"\0")
  return digest.hexdigest()


def _git_commit() -> str | None:
  if not (ROOT / ".git").exists():
    return None

  def git(*args):
    try:
      result = subprocess.run(
        ["git", "-C", str(ROOT), *args], capture_output=True, text=True, timeout=30
      )
    except (OSError, subprocess.TimeoutExpired):
      return None
    return result.stdout.strip() if result.returncode == 0 else None

  commit = git("rev-parse", "HEAD")
  if commit and git("status", "--porcelain", "--untracked-files=no"):
    commit += "-dirty"
  return commit


def flat(identity: dict) -> dict:
  """``{"git_commit": ..., "source_sha256": ..., "jax": ..., ...}``: one level, for comparison."""
  return {
    **{k: v for k, v in identity.items() if k not in ("versions", "from_step", "to_step")},
    **identity.get("versions", {}),
  }


def differences(a: dict, b: dict) -> list[str]:
  """``["jax 0.4.30 -> 0.4.31", "sources (sha256 ab12.. -> cd34..)"]``: what differs from a to
  b (identities or segments).

  Another git commit with the same sources is the same code: such a commit changed only files
  no run executes (records, docs, tests; a config is read into the run's config.json), so it
  is named only beside a change of the sources or of a version. Without a recorded digest, the
  commit is all there is to compare.
  """
  a, b = flat(a), flat(b)
  names = set(a) | set(b)
  if a.get("source_sha256") and all(a.get(n) == b.get(n) for n in names - {"git_commit"}):
    return []
  said = []
  for name in sorted(names):
    if a.get(name) != b.get(name):
      before, after = a.get(name), b.get(name)
      if name == "source_sha256":
        said.append(
          f"the sources of gr_jax/ and experiments/ (sha256 {str(before)[:12]} ->"
          f" {str(after)[:12]})"
        )
      else:
        said.append(f"{name} {before} -> {after}")
  return said


def record_start(path: pathlib.Path, start: int) -> list[dict]:
  """Records that this process's code trains ``path``'s run from step ``start``; returns the
  segments.

  Segments that began at or after ``start`` trained nothing that was kept (their
  steps are trained again from the checkpoint at ``start``) and are dropped. A
  resume on other code than the previous segment's is said in one warning line.
  """
  segments = read_segments(path)
  kept = [s for s in segments if s["from_step"] < start]
  identity = code_identity()
  if kept:
    kept[-1]["to_step"] = start
    changed = differences(kept[-1], identity)
    if changed:
      logging.warning(
        "resuming at step %d on other code than steps %d..%d were trained with (%s); both are"
        " recorded (%s, results.json's code_segments).",
        start,
        kept[-1]["from_step"],
        start,
        "; ".join(changed),
        SEGMENTS_FILE,
      )
  kept.append({"from_step": start, "to_step": None, **identity})
  workdir.write_json_atomic(path / SEGMENTS_FILE, kept)
  return kept


def read_segments(path: pathlib.Path) -> list[dict]:
  """The workdir's segments (none for a run that predates them, or a damaged file)."""
  try:
    segments = json.loads((path / SEGMENTS_FILE).read_text())
  except (OSError, json.JSONDecodeError, UnicodeDecodeError):
    return []
  return segments if isinstance(segments, list) else []


def finished_segments(segments: list[dict], last_step: int) -> list[dict]:
  """results.json's ``code_segments``: the last one closed at ``last_step``; adjacent segments on
  the same code joined."""
  joined = []
  for segment in segments:
    segment = {**segment}
    if joined and not differences(joined[-1], segment):
      joined[-1]["to_step"] = segment["to_step"]
      continue
    joined.append(segment)
  if joined:
    joined[-1]["to_step"] = last_step
  return joined
