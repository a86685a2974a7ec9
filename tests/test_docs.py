"""README.md and docs/: every relative link resolves, and the Python blocks of the API pages run."""

import contextlib
import json
import os
import pathlib
import re
import shlex
import signal
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _anchors(page: pathlib.Path) -> set[str]:
  """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens."""
  headings = [
    line.lstrip("#").strip() for line in page.read_text().splitlines() if line.startswith("#")
  ]
  return {re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-") for h in headings}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page):
  broken = []
  for target in LINK.findall(page.read_text()):
    if re.match(r"[a-z]+://", target) or target.startswith("mailto:"):
      continue
    path, _, anchor = target.partition("#")
    file = (page.parent / path).resolve() if path else page
    if not file.exists():
      broken.append(target)
    elif anchor and file.suffix == ".md" and anchor not in _anchors(file):
      broken.append(target)
  assert not broken, broken


@pytest.mark.parametrize("page", ["README.md", "docs/estimators.md"])
def test_python_blocks_run(page):
  for block in re.findall(r"```python\n(.*?)```", (ROOT / page).read_text(), re.S):
    exec(compile(block, page, "exec"), {})


def _bash_blocks(page: str) -> list[str]:
  return re.findall(r"```bash\n(.*?)```", (ROOT / page).read_text(), re.S)


def _run_bash(script: str) -> None:
  """Runs a (rewritten) documentation block from the clone; it must exit 0. The block runs in
  its own process group, killed whole on a timeout: a block's background (nohup) runs would
  otherwise outlive the test."""
  with subprocess.Popen(
    ["bash", "-c", script],
    cwd=ROOT,
    stdout=subprocess.PIPE,
    stderr=subprocess.PIPE,
    text=True,
    start_new_session=True,
  ) as block:
    try:
      _, stderr = block.communicate(timeout=900)
    except subprocess.TimeoutExpired:
      with contextlib.suppress(ProcessLookupError):  # the whole group ended meanwhile
        os.killpg(block.pid, signal.SIGKILL)
      raise
  assert block.returncode == 0, stderr[-3000:]


def test_the_cluster_scripts_say_where_what_and_how_long():
  """Every SLURM script of docs/populations.md goes to the clone, activates the environment, names
  the data, bounds its time; the array's merge runs as a job that depends on it."""
  scripts = [b for b in _bash_blocks("docs/populations.md") if "#SBATCH" in b]
  assert len(scripts) == 2
  for script in scripts:
    for line in ('cd "$HOME/gr_jax"', "source .venv/bin/activate", "GR_JAX_DATA=", "--time="):
      assert line in script, (line, script)
  submit = [b for b in _bash_blocks("docs/populations.md") if "sbatch --parsable" in b]
  assert len(submit) == 1 and "--dependency=afterok:$array" in submit[0]
  assert "scripts.merge_population" in submit[0]


@pytest.mark.slow
def test_the_one_machine_blocks_of_populations_run_as_written(tmp_path):
  """The blocks that run on one machine: the searches' commands parse as written (--list_fields),
  and the two-process job runs as written (from the clone, beside ../shared), its workdir in a
  temporary directory instead of runs/, shortened to 40 steps and 100 images per split at M = 10
  (600 steps and 500 images at M = 100 took four minutes of the suite)."""
  blocks = [
    b
    for b in _bash_blocks("docs/populations.md")
    if "#SBATCH" not in b and "sbatch" not in b and "srun" not in b and "taskset" not in b
  ]
  assert len(blocks) == 2
  searches, two_processes = blocks
  commands = re.findall(r"^python -m experiments\.main .*?(?<!\\)$", searches, re.S | re.M)
  assert len(commands) == 3
  for command in commands:
    listed = subprocess.run(
      [
        *shlex.split(command.replace("\\\n", " ").replace("python", sys.executable, 1)),
        "--list_fields",
      ],
      cwd=ROOT,
      capture_output=True,
      text=True,
      timeout=300,
    )
    assert listed.returncode == 0 and "population.search = " in listed.stdout, listed.stderr[-2000:]
  if not (ROOT.parent / "shared" / "data" / "binarized_mnist").is_dir():
    pytest.skip("the two-process job reads ../shared/data (a clone beside the project's shared/)")
  shortened = {
    "--config.num_steps=600": "--config.num_steps=40",
    "--config.num_eval_samples=100": "--config.num_eval_samples=10",
    "--config.num_eval_examples=500": "--config.num_eval_examples=100",
  }
  script = two_processes.replace("runs/", f"{tmp_path}/").replace(
    ".venv/bin/python", sys.executable
  )
  for written, short in shortened.items():
    assert written in script, written
    script = script.replace(written, short)
  _run_bash(script)
  results = json.loads((tmp_path / "two_processes" / "results.json").read_text())
  assert len(results["members"]) == 4 and results["num_eval_examples"] == 100
  assert results["steps"] == 40


@pytest.mark.slow
def test_the_pinned_background_run_of_populations_runs_as_written(tmp_path):
  """The block that pins a background run to one core with single-threaded XLA runs as written,
  shortened to one tiny population (its output in a temporary directory instead of runs/)."""
  (block,) = [b for b in _bash_blocks("docs/populations.md") if "taskset" in b]
  if not (ROOT.parent / "shared" / "data" / "fashion_mnist").is_dir():
    pytest.skip("the block reads ../shared/data (a clone beside the project's shared/)")
  tiny = (
    " --arms=nonlinear_fashion_mnist/disarm,nonlinear_fashion_mnist/reinmax_tau1.1"
    " --set=num_steps=2 --set=num_eval_examples=20 --set=variance_every=0 --set=checkpoint_every=2"
  )
  script = (
    block.replace("records/field", "RECORDS")
    .replace("runs/", f"{tmp_path}/")
    .replace("RECORDS", f"{tmp_path}/records")
    .replace("--data_root=../shared/data", "--data_root=../shared/data" + tiny)
    .replace("python ", f"{sys.executable} ", 1)
    + "wait\n"
  )
  _run_bash(script)
  results = json.loads((tmp_path / "field/nonlinear_fashion_mnist/disarm/results.json").read_text())
  assert results["steps"] == 2 and len(results["members"]) == 3
  assert "done in" in (tmp_path / "field.log").read_text()
  # --records kept the finished population's records, without its checkpoints.
  kept = tmp_path / "records" / "nonlinear_fashion_mnist" / "disarm"
  assert json.loads((kept / "results.json").read_text()) == results
  assert not (kept / "checkpoints").exists()
  # ReinMax runs at its authors' temperature for this protocol, named in its workdir (at the
  # protocol's tau = 1 it would be ZGR).
  config = json.loads(
    (tmp_path / "field/nonlinear_fashion_mnist/reinmax_tau1.1/config.json").read_text()
  )
  assert config["tau"] == 1.1 and config["estimator"] == "reinmax"
  assert (tmp_path / "records/nonlinear_fashion_mnist/reinmax_tau1.1/results.json").is_file()
