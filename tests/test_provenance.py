"""experiments/provenance.py: the code's identity, the segments a resumed run was trained under."""

import json
import subprocess

import pytest
from absl import logging

from experiments import provenance
from tests.cli import ROOT, edited_copy_of_the_code, main_command, run_main
from tests.test_vae_experiment import TINY


def _other_code(**changes) -> dict:
  identity = json.loads(json.dumps(provenance.code_identity()))
  for name, value in changes.items():
    if name in identity["versions"]:
      identity["versions"][name] = value
    else:
      identity[name] = value
  return identity


def test_the_identity_names_the_sources_versions_and_commit():
  identity = provenance.code_identity()
  assert len(identity["source_sha256"]) == 64
  assert set(identity["versions"]) == {"jax", "jaxlib", "flax", "optax"}
  assert (ROOT / ".git").exists() <= (len(identity.get("git_commit", "")) >= 40)


def test_an_edited_source_changes_the_digest(tmp_path, monkeypatch):
  clean = provenance._source_digest()
  monkeypatch.setattr(provenance, "ROOT", edited_copy_of_the_code(tmp_path))
  assert provenance._source_digest() != clean


def test_differences_name_what_changed():
  assert provenance.differences(provenance.code_identity(), provenance.code_identity()) == []
  changed = provenance.differences(
    provenance.code_identity(), _other_code(jax="0.0.1", source_sha256="ab" * 32)
  )
  assert changed[0] == f"jax {provenance.code_identity()['versions']['jax']} -> 0.0.1"
  assert changed[1].startswith("the sources of gr_jax/ and experiments/ (sha256 ")


def test_another_commit_over_the_same_sources_is_the_same_code():
  """A commit that changed only records, docs or tests trains what its parent trains."""
  this = {**provenance.code_identity(), "git_commit": "a" * 40}
  records_commit = {**this, "git_commit": "b" * 40}
  assert provenance.differences(this, records_commit) == []
  # Beside a change of the sources it is named, and so is each commit of a run recorded before
  # the sources were hashed (the commit is then all there is to compare).
  edited = {**records_commit, "source_sha256": "ab" * 32}
  assert provenance.differences(this, edited)[0] == f"git_commit {'a' * 40} -> {'b' * 40}"
  unhashed = {k: v for k, v in this.items() if k != "source_sha256"}
  assert provenance.differences(unhashed, {**unhashed, "git_commit": "b" * 40}) == [
    f"git_commit {'a' * 40} -> {'b' * 40}"
  ]


def test_segments_drop_lost_steps_and_a_resume_on_other_code_is_said(tmp_path, monkeypatch):
  warnings = []
  monkeypatch.setattr(logging, "warning", lambda message, *args: warnings.append(message % args))
  assert [s["from_step"] for s in provenance.record_start(tmp_path, 0)] == [0]
  # Restarted from step 0 (nothing was checkpointed): the first start trained nothing kept.
  assert [s["from_step"] for s in provenance.record_start(tmp_path, 0)] == [0]
  assert provenance.record_start(tmp_path, 100)[0]["to_step"] == 100 and warnings == []
  # A segment on other code, then a resume from its checkpoint at step 300.
  segments = provenance.read_segments(tmp_path)
  segments[-1] = {**segments[-1], **_other_code(jax="0.0.1")}
  (tmp_path / provenance.SEGMENTS_FILE).write_text(json.dumps(segments))
  segments = provenance.record_start(tmp_path, 300)
  assert [(s["from_step"], s["to_step"]) for s in segments] == [(0, 100), (100, 300), (300, None)]
  assert len(warnings) == 1 and warnings[0].startswith(
    "resuming at step 300 on other code than steps 100..300 were trained with (jax 0.0.1 -> "
  )
  finished = provenance.finished_segments(segments, 400)
  # The segments on this code around the other one stay apart; 0..100 and a repeat would join.
  assert [(s["from_step"], s["to_step"]) for s in finished] == [(0, 100), (100, 300), (300, 400)]
  assert provenance.finished_segments(segments[:1] + segments[:1], 50) == [
    {**segments[0], "to_step": 50}
  ]


@pytest.mark.slow
def test_a_run_resumed_on_other_code_records_both_segments(tmp_path):
  settings = (*TINY, "estimator=st_gs", "population.size=2")
  workdir = tmp_path / "run"
  copy = edited_copy_of_the_code(tmp_path / "copy")
  first = subprocess.run(
    main_command("configs/vae_16ary.py", workdir, *settings, "num_steps=2"),
    cwd=copy,
    capture_output=True,
    text=True,
    timeout=600,
  )
  assert first.returncode == 0, first.stderr[-3000:]
  first_code = json.loads((workdir / "results.json").read_text())["code_segments"]
  resumed = run_main("configs/vae_16ary.py", workdir, *settings, "num_steps=4")
  warned = [line for line in resumed.stderr.splitlines() if "on other code" in line]
  assert len(warned) == 1 and "resuming at step 2 on other code than steps 0..2" in warned[0]
  assert "the sources of gr_jax/ and experiments/" in warned[0]
  results = json.loads((workdir / "results.json").read_text())
  segments = results["code_segments"]
  assert [(s["from_step"], s["to_step"]) for s in segments] == [(0, 2), (2, 4)]
  assert segments[0]["source_sha256"] == first_code[0]["source_sha256"]
  assert segments[1]["source_sha256"] == results["source_sha256"] != segments[0]["source_sha256"]
