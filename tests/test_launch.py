"""scripts/launch.py: how the scripts start a run."""

import json
import sys

import pytest

from tests.cli import ROOT

sys.path.insert(0, str(ROOT / "scripts"))

import launch  # noqa: E402

pytestmark = pytest.mark.slow  # trains a tiny run through the CLI


def test_a_run_uses_this_clones_code_from_inside_another_checkout(tmp_path, monkeypatch):
  """`python -m` puts the working directory first on sys.path: started from another checkout,
  the run would import that checkout's experiments/ (here, one that fails at once)."""
  other = tmp_path / "other_checkout"
  (other / "experiments").mkdir(parents=True)
  (other / "experiments" / "__init__.py").write_text("")
  (other / "experiments" / "main.py").write_text('raise SystemExit("the other checkout ran")\n')
  monkeypatch.chdir(other)
  workdir = tmp_path / "run"
  overrides = ["dataset=synthetic", "encoder_widths=(8,)", "decoder_widths=(8,)", "num_steps=2"]
  overrides += ["num_eval_samples=5", "eval_batch_size=25", "iwae_chunk_size=5"]
  launch.train(str(ROOT / "configs" / "vae_16ary.py"), workdir, overrides)
  assert json.loads((workdir / "results.json").read_text())["members"]
