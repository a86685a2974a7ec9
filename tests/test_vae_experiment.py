"""Integration tests of experiments/vae/ through the real CLI on synthetic data."""

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

import jax
import numpy as np
import pytest
from flax import nnx

from configs import vae_16ary
from experiments import (
  bookkeeping,
  checkpoints,
  config_checks,
  driver,
  population,
  rng,
  search,
  workdir,
)
from experiments.vae import data as vae_data
from experiments.vae import experiment as vae
from experiments.vae.evaluation import Scorer
from experiments.vae.task import VAETask
from gr_jax.models import vae as vae_model
from tests import tensorboard_events
from tests.cli import ROOT, main_command, run_main

# Integration tests (the real CLI, subprocesses, whole runs): `pytest -m "not slow"` skips them.
pytestmark = pytest.mark.slow

TINY = (
  "dataset=synthetic",
  "encoder_widths=(32,)",
  "decoder_widths=(32,)",
  "checkpoint_every=2",
  "log_every=1",
  "eval_every=2",
  "variance_every=2",
  "variance_draws=4",
  "mse_every=2",
  "mse_reference_draws=8",
  "num_eval_samples=20",
  "periodic_eval_samples=3",
  "eval_batch_size=25",
  "iwae_chunk_size=10",
)


def _members(workdir, step):
  """The checkpointed member states: parameters (the learned prior's too), optimizer, baseline,
  input_mean."""
  return checkpoints.read_checkpoint(workdir / "checkpoints" / str(step) / "default")["members"]


def test_two_step_run_writes_outputs(tmp_path):
  result = run_main("configs/vae_16ary.py", tmp_path, *TINY, "num_steps=2", "estimator=gr_mc10")
  # A progress line at every log_every step (not one per steps_per_call block), each ETA with
  # the final evaluation in it from the first.
  progress = [line for line in result.stderr.splitlines() if "steps/s  ETA" in line]
  assert ["step 1/2" in progress[0], "step 2/2" in progress[1]] == [True, True]
  assert all("+ final evaluation ~" in line for line in progress), progress
  config = json.loads((tmp_path / "config.json").read_text())
  assert config["num_steps"] == 2 and config["estimator"] == "gr_mc10"
  assert config["data_used"] == {
    "train": "synthetic data",
    "valid": "synthetic data",
    "test": "synthetic data",
  }
  records = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
  # Step 0: the untrained model's gradient measurements (variance_every > 0).
  assert {r["step"] for r in records} == {0, 1, 2}
  assert any("log10_grad_variance" in r for r in records if r["step"] == 0)
  assert any("log10_grad_mse" in r and "log10_grad_squared_bias" in r for r in records)
  assert any(r["split"] == "test" and r["nll"] > 0 for r in records)
  assert (tmp_path / "checkpoints" / "2").is_dir()
  results = json.loads((tmp_path / "results.json").read_text())
  for key in ("valid_nll", "test_nll", "steps", "estimator", "tau", "batch_size", "seed"):
    assert key in results
  assert results["steps"] == 2 and np.isfinite(results["test_nll"])
  # The run's record: versions, the clone's commit, this process's training time; no lock left.
  assert (
    set(results["versions"]) == {"jax", "jaxlib", "flax", "optax"}
    and results["versions"]["jax"] == jax.__version__
  )
  assert (ROOT / ".git").exists() <= (len(results.get("git_commit", "")) >= 40)
  assert results["training_wall_time_s"] > 0 and results["training_wall_time_steps"] == [0, 2]
  summary = (tmp_path / "summary.md").read_text()
  assert summary.startswith(
    "Run: estimator gr_mc10, 2 steps, batch size 20, bounds: IWAE M = 20 on 50 images"
  )
  assert not (tmp_path / ".lock").exists()


def test_exponential_tau_schedule(tmp_path):
  """The temperature decays per step to its floor and reaches the estimator (ZGR ignores it;
  GR-QMC uses it): logged tau follows max(tau_min, tau exp(-r t))."""
  run_main(
    "configs/vae_16ary.py",
    tmp_path,
    *TINY,
    "num_steps=4",
    "estimator=gr_qmc10",
    "tau=1.0",
    "tau_schedule=exponential",
    "tau_decay_rate=0.5",
    "tau_decay_every=1",
    "tau_min=0.2",
    "variance_every=0",
    "mse_every=0",
    "eval_every=0",
  )
  taus = {
    r["step"]: r["tau"]
    for r in map(json.loads, (tmp_path / "metrics.jsonl").read_text().splitlines())
    if "tau" in r
  }
  assert taus == pytest.approx({t: max(0.2, np.exp(-0.5 * t)) for t in range(1, 5)}, rel=1e-5)


# The two-layer model's own fields, tiny like TINY's.
TWO_LAYER = ("upper_encoder_widths=(32,)", "upper_decoder_widths=(32,)")
# The Bernoulli models (their widths are their names'): dynamically binarized grey images, with
# the DisARM code's variance column (its moving averages are checkpointed state).
BERNOULLI = (
  "dataset=synthetic_grey",
  "batch_size=10",
  "variance_ema_decay=0.999",
  *(s for s in TINY if not s.startswith(("dataset", "encoder_widths", "decoder_widths"))),
)


def _settings(config: str) -> tuple[str, ...]:
  if "bernoulli" in config:
    return BERNOULLI
  return (*TINY, *(TWO_LAYER if "two_layer" in config else ()))


@pytest.mark.parametrize(
  "config,estimator",
  [
    ("configs/vae_16ary.py", "st_gs"),
    ("configs/vae_16ary.py", "reinforce"),
    ("configs/vae_two_layer_4ary.py", "gr_mc10"),
    ("configs/vae_two_layer_4ary.py", "reinforce"),
    ("configs/bernoulli_vae_linear.py", "disarm"),
    ("configs/bernoulli_vae_nonlinear.py", "rloo2"),
  ],
)
def test_resumed_run_equals_uninterrupted_run(tmp_path, config, estimator):
  """Also with dynamic binarization (the Bernoulli configs): the resumed run draws the training
  pixels the uninterrupted one drew."""
  whole, parts = tmp_path / "whole", tmp_path / "parts"
  settings = (*_settings(config), f"estimator={estimator}")
  run_main(config, whole, *settings, "num_steps=6")
  # The interrupted run: stopped after step 4 (its last checkpoint), started again.
  run_main(config, parts, *settings, "num_steps=4")
  second = run_main(config, parts, *settings, "num_steps=6")
  assert "resumed from the checkpoint at step 4" in second.stderr
  whole_members, parts_members = _members(whole, 6), _members(parts, 6)
  assert (
    set(whole_members) >= {"params", "input_mean"} and "prior_logits" in whole_members["params"]
  )
  assert np.abs(whole_members["params"]["prior_logits"]).max() > 0  # the prior has trained
  # Every inference input's running average (the image's; the two-layer model's h1 too) has moved.
  assert all(np.abs(mean).max() > 0 for mean in jax.tree.leaves(whole_members["input_mean"]))
  assert json.loads((whole / "config.json").read_text())["binarization"] == (
    "dynamic" if "bernoulli" in config else "fixed"
  )
  assert len(jax.tree.leaves(whole_members["input_mean"])) == (2 if "two_layer" in config else 1)
  for a, b in zip(jax.tree.leaves(whole_members), jax.tree.leaves(parts_members), strict=True):
    np.testing.assert_array_equal(a, b)
  results = [json.loads((d / "results.json").read_text()) for d in (whole, parts)]
  assert results[0]["test_nll"] == results[1]["test_nll"]
  train_lines = lambda d: [
    line for line in (d / "metrics.jsonl").read_text().splitlines() if '"train"' in line
  ]
  assert train_lines(whole) == train_lines(parts)
  logged = any("ema_grad_variance" in line for line in train_lines(whole))
  assert logged == ("bernoulli" in config)


def test_the_categorical_protocol_runs_and_resumes_from_the_cli(tmp_path):
  """configs/categorical_vae.py on grey-level targets, RLOO-2 with PyTorch's Adam: a run stopped
  after step 2 and resumed equals the uninterrupted one."""
  config = "configs/categorical_vae.py:8x4"
  settings = (
    "dataset=synthetic_grey",
    "estimator=rloo2",
    "batch_size=10",
    "steps_per_call=2",
    "log_every=2",
    "checkpoint_every=2",
    "num_eval_examples=20",
    "eval_batch_size=10",
    "extra_test_samples=(5,)",
  )
  whole, parts = tmp_path / "whole", tmp_path / "parts"
  run_main(config, whole, *settings, "num_steps=4")
  run_main(config, parts, *settings, "num_steps=2")
  assert (
    "resumed from the checkpoint at step 2"
    in run_main(config, parts, *settings, "num_steps=4").stderr
  )
  saved = json.loads((whole / "config.json").read_text())
  assert (saved["binarization"], saved["train_split"], saved["optimizer"]) == (
    "none",
    "train+valid",
    "torch_adam",
  )
  for a, b in zip(
    jax.tree.leaves(_members(whole, 4)), jax.tree.leaves(_members(parts, 4)), strict=True
  ):
    np.testing.assert_array_equal(a, b)
  results = [json.loads((d / "results.json").read_text()) for d in (whole, parts)]
  assert results[0]["test_nll"] == results[1]["test_nll"] and np.isfinite(results[0]["test_nll"])


@pytest.mark.parametrize(
  "override,field",
  [
    ("estimator=gr_mc0", "config.estimator"),
    ("tau=-0.5", "config.tau"),
    ("arity=6", "config.arity"),
    ("batch_size=100000", "config.batch_size"),
    ("momentum=1.5", "config.momentum"),
    ("estimator=gr_exact", "config.estimator"),  # arity 16, not 2
    ("tau_schedule=cosine", "config.tau_schedule"),
    ("tau=inf", "config.tau"),
    ("selection_eval_samples=-1", "config.selection_eval_samples"),
    ("model=concrete_3_layers", "config.model"),
    ("dataset=mnist_typo", "config.dataset"),
    ("kl_estimate=exact", "config.kl_estimate"),
  ],
)
def test_bad_config_values_name_the_field(tmp_path, override, field):
  config = vae_16ary.get_config()
  config.dataset = "synthetic"
  name, value = override.split("=")
  config[name] = type(config[name])(value) if name != "estimator" else value
  with pytest.raises(config_checks.ConfigError, match=field.replace(".", r"\.")):
    vae.train_and_evaluate(config, str(tmp_path))
  assert not (tmp_path / "checkpoints").exists()  # stopped before any compute


def test_missing_fashion_mnist_offline_and_binary_data_made_dynamic_are_one_line(tmp_path):
  env = {**os.environ, "GR_JAX_DATA": str(tmp_path / "nowhere")}
  missing = subprocess.run(
    main_command("configs/bernoulli_vae_linear.py", tmp_path / "a", "download=False"),
    cwd=ROOT,
    env=env,
    capture_output=True,
    text=True,
    timeout=600,
  )
  assert missing.returncode == 1 and "Traceback" not in missing.stderr
  assert (
    missing.stderr.strip()
    .splitlines()[-1]
    .startswith("error: Fashion-MNIST not found: looked for train-images-idx3-ubyte[.gz] and")
  )
  binary = run_main(
    "configs/bernoulli_vae_linear.py", tmp_path / "b", "dataset=binarized_mnist", check=False
  )
  assert binary.returncode == 1 and binary.stderr.strip().splitlines()[-1].startswith(
    "error: config.binarization must be 'fixed' for 'binarized_mnist'"
  )
  assert not (tmp_path / "b" / "checkpoints").exists()


def test_a_zero_width_is_one_line_naming_the_field(tmp_path):
  result = run_main("configs/vae_16ary.py", tmp_path, "encoder_widths=(0,240)", check=False)
  assert result.returncode == 1 and "Traceback" not in result.stderr
  assert result.stderr.strip().splitlines()[-1] == (
    "error: config.encoder_widths must be a tuple of ints >= 1 (the hidden layers' widths; ()"
    " for none); got (0, 240)."
  )


def test_cli_error_is_one_line(tmp_path):
  result = run_main(
    "configs/vae_16ary.py", tmp_path, "dataset=synthetic", "estimator=foo", check=False
  )
  assert result.returncode != 0
  last = result.stderr.strip().splitlines()[-1]
  assert last.startswith("error: config.estimator") and "valid names" in last
  assert "Traceback" not in result.stderr


def test_missing_data_error(tmp_path):
  result = run_main(
    "configs/vae_16ary.py", tmp_path, f"data_dir={tmp_path / 'none'}", "download=False", check=False
  )
  last = result.stderr.strip().splitlines()[-1]
  assert last.startswith("error: binarized MNIST not found") and "--config.data_dir" in last


def test_resume_drops_a_partial_metrics_line_and_library_logs_stay_quiet(tmp_path):
  """A metrics.jsonl cut off mid-line (a crash, a full disk) does not stop the resume;
  orbax's and jax's INFO lines are hidden unless --verbosity=1."""
  run_main("configs/vae_16ary.py", tmp_path, *TINY, "num_steps=2", "estimator=st_gs")
  metrics = tmp_path / "metrics.jsonl"
  metrics.write_text(metrics.read_text() + '{"step": 3, "split": "tr')
  second = run_main("configs/vae_16ary.py", tmp_path, *TINY, "num_steps=4", "estimator=st_gs")
  assert "dropping a partial last line" in second.stderr
  records = [json.loads(line) for line in metrics.read_text().splitlines()]
  assert {r["step"] for r in records} == {0, 1, 2, 3, 4}
  assert "step 4/4" in second.stderr
  assert "checkpoint_manager.py" not in second.stderr and "xla_bridge.py" not in second.stderr


def test_config_typo_and_bad_data_are_one_line_errors(tmp_path):
  typo = run_main("configs/vae_16ary.py", tmp_path / "a", "tua=0.3", check=False)
  assert typo.returncode != 0 and "Traceback" not in typo.stderr
  hint = " (python -m experiments.main --config=FILE --list_fields lists them)"
  assert (
    typo.stderr.strip().splitlines()[-1]
    == f"error: --config.tua: the config has no field 'tua'; did you mean tau?{hint}"
  )
  for given, expected in [
    ("estimater=st_gs", "'estimater'; did you mean estimator, kl_estimate?"),
    ("population.sise=2", "'population.sise'; did you mean population.size"),
    ("populaton.size=4", "'populaton.size'; did you mean population.size"),  # the parent misspelt
    ("seed=-1", "config.seed must be an int in [0, 2**31); got -1."),
    ("seed=99999999999999999999", "config.seed must be an int in [0, 2**31); got 9999"),
  ]:
    typo = run_main("configs/vae_16ary.py", tmp_path / "a", given, check=False)
    (last,) = typo.stderr.strip().splitlines()
    assert expected in last and "\\n" not in last and "\\'" not in last, last
  data_dir = tmp_path / "data"
  data_dir.mkdir()
  np.savez(
    data_dir / "binarized_mnist.npz",
    **{s: np.full((30, 784), 0.5, np.float32) for s in ("train", "valid", "test")},
  )
  bad = run_main(
    "configs/vae_16ary.py", tmp_path / "b", f"data_dir={data_dir}", "download=False", check=False
  )
  last = bad.stderr.strip().splitlines()[-1]
  assert bad.returncode != 0 and "Traceback" not in bad.stderr
  assert last.startswith("error: ") and "exactly 0 or 1" in last and "'train'" in last


def test_restart_with_another_config_is_refused_and_a_finished_run_is_not_redone(tmp_path):
  run_main("configs/vae_16ary.py", tmp_path, *TINY, "num_steps=2", "estimator=st_gs")
  lines = (tmp_path / "metrics.jsonl").read_text()
  again = run_main(
    "configs/vae_16ary.py", tmp_path, *TINY, "num_steps=2", "estimator=st_gs", "log_every=2"
  )
  assert "is finished (2 steps)" in again.stderr
  assert (tmp_path / "metrics.jsonl").read_text() == lines  # no second final evaluation
  other = run_main(
    "configs/vae_16ary.py",
    tmp_path,
    *TINY,
    "num_steps=1",
    "estimator=gr_mc10",
    "tau=0.3",
    check=False,
  )
  last = other.stderr.strip().splitlines()[-1]
  assert other.returncode != 0 and "Traceback" not in other.stderr
  assert last.startswith("error: --workdir") and "estimator (saved 'st_gs', now 'gr_mc10')" in last
  assert "tau (saved 0.5, now 0.3)" in last and "num_steps (saved 2, now 1)" in last
  assert json.loads((tmp_path / "config.json").read_text())["estimator"] == "st_gs"
  listops_run = run_main("configs/listops_L10.py", tmp_path, "dataset=synthetic", check=False)
  assert listops_run.stderr.strip().splitlines()[-1] == (
    f"error: --workdir {tmp_path} holds a vae run, and this"
    " config is a listops run: use another --workdir."
  )
  # vmap and lax.map give different float32 numbers (the order of the arithmetic): not safe to
  # change.
  vectorized = run_main(
    "configs/vae_16ary.py",
    tmp_path,
    *TINY,
    "num_steps=3",
    "estimator=st_gs",
    "population.vectorize=vmap",
    check=False,
  )
  assert (
    vectorized.returncode != 0
    and "population.vectorize (saved 'auto', now 'vmap')" in vectorized.stderr
  )


@contextlib.contextmanager
def _read_only(path):
  """``path`` made read-only for this test's subprocesses (root ignores modes: a read-only bind
  mount then)."""
  if os.geteuid() != 0:
    path.chmod(0o555)
    try:
      yield
    finally:
      path.chmod(0o755)
    return
  if (
    not shutil.which("mount")
    or subprocess.run(["mount", "--bind", str(path), str(path)]).returncode
  ):
    pytest.skip("a read-only workdir for root needs mount --bind")
  try:
    subprocess.run(["mount", "-o", "remount,ro,bind", str(path)], check=True)
    yield
  finally:
    subprocess.run(["umount", str(path)], check=True)


def test_config_and_backup_edited_alike_are_refused_by_the_checkpoint(tmp_path):
  run_main("configs/vae_16ary.py", tmp_path, *TINY, "num_steps=2", "estimator=st_gs")
  # Both copies of the config edited: they agree with the command, the checkpoint does not.
  for name in ("config.json", "config.backup.json"):
    config = json.loads((tmp_path / name).read_text())
    (tmp_path / name).write_text(json.dumps({**config, "tau": 0.7}))
  edited = run_main(
    "configs/vae_16ary.py",
    tmp_path,
    *TINY,
    "num_steps=4",
    "estimator=st_gs",
    "tau=0.7",
    check=False,
  )
  assert edited.returncode == 1 and "Traceback" not in edited.stderr
  assert edited.stderr.strip().splitlines()[-1] == (
    f"error: --workdir {tmp_path}: its checkpoint at step 2 trained member 0 with other values than"
    " this config gives it (tau 0.5 vs 0.7; checkpoint vs config): the run's config.json was"
    " edited after it started. Put back the values it was started with, or use another --workdir."
  )
  assert json.loads((tmp_path / "results.json").read_text())["tau"] == 0.5


def test_a_finished_run_keeps_its_config_and_answers_from_a_read_only_workdir(tmp_path):
  run_main("configs/vae_16ary.py", tmp_path, *TINY, "num_steps=2", "estimator=st_gs")
  saved = (tmp_path / "config.json").read_text()
  again = run_main(
    "configs/vae_16ary.py", tmp_path, *TINY, "num_steps=2", "estimator=st_gs", "num_eval_samples=7"
  )
  assert "num_eval_samples=7 (its results: 20) not applied" in again.stderr
  assert (
    tmp_path / "config.json"
  ).read_text() == saved  # still the config results.json was measured with
  with _read_only(tmp_path):
    read_only = run_main("configs/vae_16ary.py", tmp_path, *TINY, "num_steps=2", "estimator=st_gs")
  assert "is finished (2 steps)" in read_only.stderr


def test_finished_population_is_extended_and_the_selected_member_evaluated_with_more_samples(
  tmp_path,
):
  """A finished run resumes when num_steps grows, with new evaluation fields; with
  selection_eval_samples every member is scored with that M and only the member
  selected on validation gets num_eval_samples. The IWAE bound tightens with M in
  expectation (Burda et al. 2016), and from M = 2 to 200 on an untrained model the
  gain is several nats, far above the noise of 50 images: so the final numbers
  must be the lower ones."""
  population_of_3 = (
    "population.size=3",
    "estimator=st_gs",
    "variance_every=0",
    "mse_every=0",
    "eval_every=0",
  )
  run_main("configs/vae_16ary.py", tmp_path, *TINY, *population_of_3, "num_steps=2")
  extended = run_main(
    "configs/vae_16ary.py",
    tmp_path,
    *TINY,
    *population_of_3,
    "num_steps=4",
    "selection_eval_samples=2",
    "num_eval_samples=200",
    "num_eval_examples=50",
  )
  assert "resumed from the checkpoint at step 2" in extended.stderr
  results = json.loads((tmp_path / "results.json").read_text())
  assert (
    results["steps"] == 4
    and results["selection_eval_samples"] == 2
    and results["num_eval_samples"] == 200
  )
  members = results["members"]
  selected = min(members, key=lambda m: m["valid_nll"])
  assert results["selected_member"] == selected["member"]
  assert [m["member"] for m in members if "final" in m] == [selected["member"]]
  assert results["valid_nll"] == selected["final"]["valid_nll"] < selected["valid_nll"]
  assert results["test_nll"] == selected["final"]["test_nll"] < selected["test_nll"]
  lines = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
  precise = [(line["member"], line["split"]) for line in lines if line.get("num_samples") == 200]
  assert precise == [(selected["member"], "valid"), (selected["member"], "test")]


def _start(workdir, *overrides):
  command = [
    sys.executable,
    "-m",
    "experiments.main",
    f"--config={ROOT / 'configs/vae_16ary.py'}",
    f"--workdir={workdir}",
  ] + [f"--config.{o}" for o in overrides]
  return subprocess.Popen(command, cwd=ROOT, stderr=subprocess.PIPE, text=True)


def test_sigterm_saves_a_checkpoint_and_the_run_resumes(tmp_path):
  """SIGTERM (a scheduler's preemption) mid-training: one line, exit 143, a checkpoint
  at the step reached (none was due before step 10,000), and the next start resumes there
  (and stops the same way on Ctrl-C)."""
  long_run = (
    *TINY,
    "num_steps=100000",
    "checkpoint_every=10000",
    "log_every=5",
    "eval_every=0",
    "variance_every=0",
    "mse_every=0",
    "estimator=st_gs",
    "steps_per_call=5",
  )
  process = _start(tmp_path, *long_run)
  for line in process.stderr:
    if "step 10/" in line:
      break
  process.send_signal(signal.SIGTERM)
  rest = process.stderr.read()
  assert process.wait(timeout=120) == 128 + signal.SIGTERM
  last = rest.strip().splitlines()[-1]
  assert last.startswith("interrupted: stopped by SIGTERM at step ") and "Traceback" not in rest
  step = int(last.split("at step ")[1].split(";")[0])
  assert step >= 10 and (tmp_path / "checkpoints" / str(step)).is_dir()
  resumed = _start(tmp_path, *long_run)
  for line in resumed.stderr:
    if "resumed from the checkpoint" in line:
      break
  assert f"resumed from the checkpoint at step {step}" in line
  resumed.send_signal(signal.SIGINT)  # Ctrl-C
  rest = resumed.stderr.read()
  assert resumed.wait(timeout=120) == 128 + signal.SIGINT
  assert rest.strip().splitlines()[-1].startswith("interrupted: stopped by SIGINT at step ")


def test_ctrl_c_is_answered_at_once_and_twice_quits_at_once(tmp_path):
  """Blocks of 4,000 steps (seconds each): the first SIGINT is answered with a line while the block
  computes, naming the step it will stop at; a second SIGINT quits at once (exit 130) keeping the
  last checkpoint, from which the run resumes."""
  long_blocks = (
    *TINY,
    "num_steps=400000",
    "checkpoint_every=4000",
    "log_every=4000",
    "eval_every=0",
    "variance_every=0",
    "mse_every=0",
    "estimator=st_gs",
    "steps_per_call=4000",
  )
  process = _start(tmp_path, *long_blocks)
  for line in process.stderr:
    if "step 4000/400000" in line:
      break
  deadline = time.monotonic() + 120  # its checkpoint saved (a slow machine takes seconds) ...
  while not (tmp_path / "checkpoints" / "4000").is_dir() and time.monotonic() < deadline:
    time.sleep(0.05)
  time.sleep(0.5)  # ... then inside the second block
  process.send_signal(signal.SIGINT)
  answer = process.stderr.readline()
  assert answer.startswith("SIGINT: stopping after this block at step 8000"), answer
  asked = time.monotonic()
  process.send_signal(signal.SIGINT)
  rest = process.stderr.read()
  assert process.wait(timeout=60) == 130 and time.monotonic() - asked < 5
  assert "SIGINT again: quitting now; the last saved checkpoint stays." in rest
  assert "Traceback" not in rest
  assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir() if p.name.isdigit()) == [
    "4000"
  ]
  resumed = _start(tmp_path, *long_blocks)
  for line in resumed.stderr:
    if "resumed from" in line or "starting" in line:
      break
  resumed.kill()
  resumed.wait()
  assert "resumed from the checkpoint at step 4000" in line


def test_second_run_on_a_workdir_is_refused(tmp_path):
  workdir.lock_workdir(tmp_path)  # this test process holds the workdir
  other = run_main("configs/vae_16ary.py", tmp_path, *TINY, "num_steps=2", check=False)
  last = other.stderr.strip().splitlines()[-1]
  assert other.returncode != 0 and "Traceback" not in other.stderr
  assert (
    last == f"error: --workdir {tmp_path.resolve()} is in use by another run (pid {os.getpid()} on"
    f" {socket.gethostname()}); wait"
    " for it to end or use another --workdir."
  )


def test_unwritable_workdir_is_one_line(tmp_path):
  blocker = tmp_path / "file"
  blocker.write_text("")
  result = run_main("configs/vae_16ary.py", blocker / "run", *TINY, "num_steps=2", check=False)
  last = result.stderr.strip().splitlines()[-1]
  assert result.returncode != 0 and "Traceback" not in result.stderr
  assert last.startswith(f"error: --workdir {blocker / 'run'} cannot be created (Not a directory")


@pytest.mark.parametrize("kind", ["file", "symlink_loop", "dangling_symlink"])
def test_a_workdir_that_is_no_directory_is_one_line(tmp_path, kind):
  path = tmp_path / "run"
  if kind == "file":
    path.write_text("")
  else:
    path.symlink_to(path if kind == "symlink_loop" else tmp_path / "gone")
  with pytest.raises(config_checks.ConfigError) as info:
    workdir.prepare_workdir(str(path), vae_16ary.get_config())
  what = "a file" if kind == "file" else "a symbolic link that leads nowhere (or to itself)"
  assert str(info.value) == f"--workdir {path} is {what}, not a directory: give another --workdir."


def test_damaged_latest_checkpoint_falls_back_to_the_previous_one(tmp_path):
  run_main("configs/vae_16ary.py", tmp_path, *TINY, "num_steps=4", "estimator=st_gs")
  for data in (tmp_path / "checkpoints" / "4" / "default").glob("ocdbt.process_*/d/*"):
    data.write_bytes(
      b"\x07" * 100
    )  # garbage: tensorstore's reads fail after orbax closed their event loop
  (tmp_path / "results.json").unlink()
  resumed = run_main("configs/vae_16ary.py", tmp_path, *TINY, "num_steps=4", "estimator=st_gs")
  assert "skipping the checkpoint at step 4, which does not restore" in resumed.stderr
  assert "resumed from the checkpoint at step 2" in resumed.stderr
  assert "Traceback" not in resumed.stderr and "Exception ignored" not in resumed.stderr
  assert json.loads((tmp_path / "results.json").read_text())["steps"] == 4
  assert (tmp_path / "checkpoints" / "4" / "default").is_dir()  # saved again by the resumed run
  assert len(list((tmp_path / "damaged_checkpoints").iterdir())) == 1  # kept, not deleted
  for step in (2, 4):  # nothing restores: one line
    shutil.rmtree(tmp_path / "checkpoints" / str(step) / "default", ignore_errors=True)
  (tmp_path / "results.json").unlink()
  broken = run_main(
    "configs/vae_16ary.py", tmp_path, *TINY, "num_steps=4", "estimator=st_gs", check=False
  )
  last = broken.stderr.strip().splitlines()[-1]
  assert broken.returncode != 0 and last.startswith("error: none of the checkpoints [4, 2]")
  assert "Traceback" not in broken.stderr


def _mount_tmpfs(path, megabytes: float) -> bool:
  path.mkdir(exist_ok=True)
  remount = ["-o", "remount"] if os.path.ismount(path) else []
  size = f"size={round(megabytes * 1024)}k"
  command = ["mount", "-t", "tmpfs", *remount, "-o", size, "tmpfs", str(path)]
  return (
    os.geteuid() == 0
    and shutil.which("mount")
    and subprocess.run(command, capture_output=True).returncode == 0
  )


# 8-16 KiB fill up at config.json / TensorBoard's first events, 20 KiB at orbax's metadata, 64 KiB
# in the checkpoint's arrays.
@pytest.mark.parametrize("kibibytes", [8, 16, 20, 64])
def test_a_disk_full_at_the_start_is_one_line_and_the_run_starts_once_space_is_freed(
  tmp_path, kibibytes
):
  disk = tmp_path / "disk"
  if not _mount_tmpfs(disk, kibibytes / 1024):
    pytest.skip("a small disk needs root and mount (tmpfs)")
  try:
    settings = (*TINY[:1], *TINY[3:], "num_steps=4", "estimator=st_gs", "num_eval_samples=5")
    full = run_main("configs/vae_16ary.py", disk / "run", *settings, check=False)
    lines = [line for line in full.stderr.strip().splitlines() if not line.startswith("I")]
    assert full.returncode == 1 and len(lines) == 1, full.stderr[-3000:]
    assert lines[0].startswith("error: no space left on the device of "), lines
    assert "free some space and run the same command again" in lines[0]
    assert _mount_tmpfs(disk, 64)
    run_main("configs/vae_16ary.py", disk / "run", *settings)
    assert json.loads((disk / "run" / "results.json").read_text())["steps"] == 4
  finally:
    subprocess.run(["umount", str(disk)], capture_output=True)


def test_a_full_disk_is_one_line_and_the_run_resumes_once_space_is_freed(tmp_path):
  disk = tmp_path / "disk"
  if not _mount_tmpfs(disk, 3):  # the default model's checkpoint takes 6 MiB
    pytest.skip("a small disk needs root and mount (tmpfs)")
  try:
    settings = (*TINY[:1], *TINY[3:], "num_steps=4", "estimator=st_gs", "num_eval_samples=5")
    full = run_main("configs/vae_16ary.py", disk / "run", *settings, check=False)
    assert (
      full.returncode == 1
      and "Traceback" not in full.stderr
      and "Exception ignored" not in full.stderr
    )
    assert (
      full.stderr.strip()
      .splitlines()[-1]
      .startswith(
        f"error: no space left on the device of {disk / 'run' / 'checkpoints'} while saving the"
        " checkpoint of step 2:"
        " a checkpoint needs about 6."
      )
    )
    assert _mount_tmpfs(disk, 64)
    run_main("configs/vae_16ary.py", disk / "run", *settings)
    run_main("configs/vae_16ary.py", tmp_path / "uninterrupted", *settings)
    resumed, uninterrupted = (
      json.loads((path / "results.json").read_text())
      for path in (disk / "run", tmp_path / "uninterrupted")
    )
    assert resumed["test_nll"] == uninterrupted["test_nll"]
  finally:
    subprocess.run(["umount", str(disk)], capture_output=True)


def _tiny_scorer():
  """(config, trainer, scorer) of a one-member population of a tiny 16-ary VAE on synthetic data,
  evaluated in batches of 10 images."""
  config = vae_16ary.get_config()
  config.dataset, config.encoder_widths, config.decoder_widths = "synthetic", (16,), (16,)
  config.eval_batch_size = 10
  task = VAETask(config, vae.validate(config))
  members = search.members(config, vae.HYPERPARAMETERS, vae.paper_search)
  trainer = population.Trainer(
    population.Task(task.init_member, task.train_step, np.zeros((40, 784), np.uint8), 20, 1),
    members,
  )
  return config, trainer, Scorer(task, trainer)


def test_long_evaluations_report_progress(caplog):
  config, trainer, scorer = _tiny_scorer()
  scorer.report_every_seconds = 0.0
  images = vae_data.load(config).test[:40]
  with caplog.at_level("INFO"):
    nll = scorer.nll(
      trainer.init_state(), images, 50_000, 3, "test"
    )  # a late step: the key salt fits
  lines = [r.getMessage() for r in caplog.records if "evaluating test" in r.getMessage()]
  # One line per batch after the first (which compiles: the rate leaves it out).
  assert nll.shape == (1,) and np.isfinite(nll).all() and len(lines) == 3
  assert (
    lines[-1].startswith("evaluating test (M=3, 1 member): 40/40 images,") and "ETA 0s" in lines[-1]
  )


def test_an_interrupted_evaluation_resumes_at_its_last_saved_batch(tmp_path, caplog):
  """Stopped after two of five batches, the evaluation saves its sums; resumed, it evaluates the
  last three batches alone and returns the uninterrupted bound bit for bit. Another checkpoint's
  step, another batch size or a damaged file start at the first image; a finished evaluation is
  not evaluated again."""
  config, trainer, scorer = _tiny_scorer()
  state, images = trainer.init_state(), vae_data.load(config).test[:50]
  evaluate = lambda step: scorer.nll(
    state,
    images,
    rng.Evaluation.FINAL_TEST,
    3,
    progress=bookkeeping.EvaluationProgress(tmp_path, step),
  )
  uninterrupted = scorer.nll(state, images, rng.Evaluation.FINAL_TEST, 3)
  batches, stop_at = [], [3]

  def count_batches_and_stop_at_the_third():
    batches.append(1)
    if len(batches) in stop_at:
      raise bookkeeping.Interrupted(signal.SIGINT, 7)

  scorer.check_stop = count_batches_and_stop_at_the_third
  with pytest.raises(bookkeeping.Interrupted):
    evaluate(7)
  stop_at.clear()
  saved = json.loads((tmp_path / bookkeeping.EvaluationProgress.FILE).read_text())
  assert saved["step"] == 7 and [e["done"] for e in saved["entries"].values()] == [20]
  batches.clear()
  with caplog.at_level("INFO"):
    resumed = evaluate(7)
  assert len(batches) == 3 and "resuming at image 20 of 50" in caplog.text
  assert np.array_equal(resumed, uninterrupted)  # the same sums in the same order: exact
  batches.clear()
  assert np.array_equal(evaluate(7), uninterrupted) and not batches  # finished: nothing to do
  assert np.array_equal(evaluate(8), uninterrupted) and len(batches) == 5  # another step: anew
  batches.clear()
  config.eval_batch_size = 25  # the saved sums are of batches of 10: anew
  in_batches_of_25 = scorer.nll(state, images, rng.Evaluation.FINAL_TEST, 3)
  batches.clear()
  assert np.array_equal(evaluate(7), in_batches_of_25) and len(batches) == 2
  config.eval_batch_size = 10
  (tmp_path / bookkeeping.EvaluationProgress.FILE).write_text('{"step": 7, "entr')
  batches.clear()
  with caplog.at_level("WARNING"):
    assert np.array_equal(evaluate(7), uninterrupted) and len(batches) == 5
  assert "evaluations start at their first image" in caplog.text


def test_output_bias_and_input_centring_switches():
  """decoder_output_bias='data_log_odds' starts the decoder at the pixels' log-odds (so the
  initial reconstruction is the mean image) and 'zeros' at 0; center_inputs='pixel_means' feeds
  the encoder x minus the fixed means, 'running_average' an average that a step updates and an
  evaluation only reads."""
  config = vae_16ary.get_config()
  config.dataset, config.encoder_widths, config.decoder_widths = "synthetic", (16,), (16,)
  means = np.linspace(0.01, 0.99, 784).astype(np.float32)
  hyperparameters = {k: config[k] for k in vae.HYPERPARAMETERS}
  config.decoder_output_bias, config.center_inputs = "zeros", "none"
  plain = VAETask(config, vae.validate(config), means).init_member(
    jax.random.key(0), hyperparameters, 0
  )
  assert not np.any(plain["params"]["decoder"]["layers"][1]["bias"]) and not np.any(
    plain["input_mean"]
  )
  config.decoder_output_bias, config.center_inputs = "data_log_odds", "pixel_means"
  task = VAETask(config, vae.validate(config), means)
  member = task.init_member(jax.random.key(0), hyperparameters, 0)
  bias = member["params"]["decoder"]["layers"][1]["bias"]
  np.testing.assert_allclose(jax.nn.sigmoid(bias), means, rtol=1e-5)
  np.testing.assert_array_equal(
    member["params"]["encoder"]["layers"][0]["kernel"],
    plain["params"]["encoder"]["layers"][0]["kernel"],
  )  # only the bias differs
  x = jax.numpy.asarray(np.random.default_rng(0).random((4, 784)) < 0.3, jax.numpy.float32)
  model = task.model(member["params"])
  np.testing.assert_allclose(
    task.iwae(member, 0, x, 0, 0, 3),
    model.iwae_bound(
      x,
      jax.random.fold_in(jax.random.fold_in(jax.random.fold_in(jax.random.key(0), 3), 0), 0),
      3,
      config.iwae_chunk_size,
      means,
    ),
    rtol=1e-6,
  )
  after, _ = task.train_step(member, hyperparameters, x, jax.random.key(1), 1)
  np.testing.assert_array_equal(after["input_mean"], means)  # fixed means are never updated
  config.center_inputs = "running_average"
  task = VAETask(config, vae.validate(config), means)
  member = task.init_member(jax.random.key(0), hyperparameters, 0)
  after, _ = task.train_step(member, hyperparameters, x, jax.random.key(1), 1)
  np.testing.assert_allclose(
    after["input_mean"], 0.1 * np.asarray(x).mean(axis=0), rtol=1e-6
  )  # rate 0.9 from 0
  for bad in (
    "decoder_output_bias=ones",
    "center_inputs=yes",
    "centering_decay=1.0",
    "prior=beta",
    "kernel_init=he",
    "activation=gelu",
  ):
    field, value = bad.split("=")
    broken = vae_16ary.get_config()
    broken[field] = type(broken[field])(value)
    with pytest.raises(config_checks.ConfigError, match=rf"config\.{field}"):
      vae.validate(broken)


def test_learned_prior_enters_the_bound():
  """log_weight = log p(x | D) + sum_j <D_j, log softmax(prior_j) - log q(D_j | x)>, written out."""
  model = vae_model.DiscreteVAE(3, 4, encoder_widths=(8,), decoder_widths=(8,), rngs=nnx.Rngs(0))
  prior = jax.random.normal(jax.random.key(1), (3, 4))
  model.prior_logits.set_value(prior)
  x = jax.numpy.asarray(np.random.default_rng(0).random((5, 784)) < 0.3, jax.numpy.float32)
  logits = model.encode(x)
  sample = jax.nn.one_hot(jax.random.categorical(jax.random.key(2), logits), 4)
  expected = vae_model.bernoulli_log_likelihood(model.decode(sample), x) + np.sum(
    np.asarray(sample)
    * (np.asarray(jax.nn.log_softmax(prior)) - np.asarray(jax.nn.log_softmax(logits))),
    axis=(1, 2),
  )
  np.testing.assert_allclose(model.log_weight(x, logits, sample), expected, rtol=1e-6)
  uniform = vae_model.DiscreteVAE(
    3, 4, encoder_widths=(8,), decoder_widths=(8,), prior="uniform", rngs=nnx.Rngs(0)
  )
  assert uniform.prior_logits is None and float(uniform.log_prior()) == pytest.approx(-np.log(4))


def test_an_old_model_checkpoint_is_refused_by_the_new_default(tmp_path):
  """A workdir of the ReLU 512/256 model, restarted with the Concrete default: one line naming the
  fields."""
  # Its choices at TINY's widths: the one-layer model of any choices is "concrete".
  run_main(
    "configs/vae_relu_mlp.py", tmp_path, *TINY, "num_steps=1", "estimator=st_gs", "model=concrete"
  )
  again = run_main(
    "configs/vae_16ary.py", tmp_path, *TINY, "num_steps=2", "estimator=st_gs", check=False
  )
  last = again.stderr.strip().splitlines()[-1]
  assert again.returncode != 0 and "Traceback" not in again.stderr
  for field in ("activation", "kernel_init", "decoder_output_bias", "center_inputs", "prior"):
    assert f"{field} (saved" in last, field


def test_a_diverged_member_is_written_as_strict_json(tmp_path):
  """A diverged member's non-finite metrics are JSON null (strict parsers reject a bare NaN), with
  its divergence step beside them."""
  run_main(
    "configs/vae_16ary.py",
    tmp_path,
    *TINY,
    "num_steps=2",
    "estimator=st_gs",
    "activation=relu",
    "population.search=lists",
    "population.learning_rate=(0.001,1e30)",
  )

  def strict(text):
    return json.loads(text, parse_constant=lambda name: pytest.fail(f"bare {name} in JSON"))

  results = strict((tmp_path / "results.json").read_text())
  diverged = results["members"][1]
  assert diverged["diverged_at_step"] in (1, 2) and results["selected_member"] == 0
  records = [strict(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
  assert any(r.get("member") == 1 and "neg_elbo" in r and r["neg_elbo"] is None for r in records)


def test_every_member_diverged_is_a_failure_naming_the_field(tmp_path):
  """No member trained (the learning rates overflow at step 1): not the untrained model as a result
  with status 0, but one line naming the field; a rerun of the finished run says the same."""
  settings = (*TINY, "num_steps=2", "estimator=st_gs", "activation=relu", "population.search=lists")
  for _ in range(2):
    result = run_main(
      "configs/vae_16ary.py",
      tmp_path,
      *settings,
      "population.learning_rate=(1e30,1e31)",
      check=False,
    )
    last = result.stderr.strip().splitlines()[-1]
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert last.startswith("error: no member trained: every member diverged (member ")
    assert last.endswith("Change the config: lower learning_rate (the largest is 1e+31).")
  assert json.loads((tmp_path / "results.json").read_text())["selected_member"] is None


@pytest.mark.parametrize("empty", ["valid", "test"])
def test_an_empty_split_is_refused_before_training(tmp_path, empty):
  """A 0-row evaluation split would end in a NaN bound (test) or a division by zero (valid): the
  loader refuses the empty file, and the experiment any empty split a loader passes, in one line."""
  data = tmp_path / "data"
  data.mkdir()
  rows = np.random.default_rng(0).integers(0, 2, (30, 784))
  for split in ("train", "valid", "test"):
    np.savetxt(data / f"binarized_mnist_{split}.amat", rows[: 0 if split == empty else 30], "%d")
  result = run_main(
    "configs/vae_16ary.py",
    tmp_path / "run",
    *TINY[1:],
    "dataset=binarized_mnist",
    f"data_dir={data}",
    "num_steps=2",
    check=False,
  )
  last = result.stderr.strip().splitlines()[-1]
  assert result.returncode == 1 and "Traceback" not in result.stderr
  assert last.startswith(f"error: {data / f'binarized_mnist_{empty}.amat'}: expected 0/1 images")
  assert not (tmp_path / "run" / "checkpoints").exists()
  splits = {"train": np.zeros((3, 784)), "valid": np.zeros((3, 784)), "test": np.zeros((3, 784))}
  splits[empty] = np.zeros((0, 784))
  refusal = f"^the {empty} split holds no examples \\(read from x\\)"
  with pytest.raises(config_checks.ConfigError, match=refusal):
    driver.require_examples(splits, {empty: "x"})


def test_a_workdir_deleted_mid_run_stops_the_run_in_one_line(tmp_path):
  """Its files gone, a run that went on would end with status 0 and nothing to show; a rerun
  would then start afresh. It stops at the next block, nonzero."""
  workdir = tmp_path / "run"
  command = main_command(
    "configs/vae_16ary.py",
    workdir,
    *TINY,
    "num_steps=100000",
    "steps_per_call=50",
    "estimator=st_gs",
    "variance_every=0",
    "mse_every=0",
    "eval_every=0",
    "checkpoint_every=1000",
  )
  process = subprocess.Popen(command, cwd=ROOT, stderr=subprocess.PIPE, text=True)
  for line in process.stderr:
    if "steps/s" in line:
      break
  shutil.rmtree(workdir)
  _, rest = process.communicate(timeout=300)
  assert process.returncode == 1 and "Traceback" not in rest
  assert (
    rest.strip()
    .splitlines()[-1]
    .startswith(f"error: --workdir {workdir} was deleted, moved or replaced while the run trained")
  )


def test_a_signal_after_results_json_leaves_a_finished_run_finished(tmp_path):
  """SIGINT after results.json is written (a scheduler's, a user's late Ctrl-C) lands in the
  interpreter's shutdown: the run is finished and says so by exiting 0, not -2 or 130."""
  command = main_command("configs/vae_16ary.py", tmp_path, *TINY, "num_steps=2", "estimator=st_gs")
  process = subprocess.Popen(command, cwd=ROOT, stderr=subprocess.PIPE, text=True)
  reader = threading.Thread(target=process.stderr.read)  # keeps the pipe from filling
  reader.start()
  while not (tmp_path / "results.json").exists():
    assert process.poll() is None, "the run ended without results.json"
    time.sleep(0.005)
  while process.poll() is None:
    process.send_signal(signal.SIGINT)
    time.sleep(0.01)
  reader.join()
  assert process.returncode == 0


def test_an_interrupted_final_evaluation_leaves_no_duplicate_lines(tmp_path):
  """Killed after the final evaluation wrote its lines but before results.json (the last write): the
  rerun evaluates again and metrics.jsonl equals the uninterrupted run's; an extension keeps no
  end-of-run lines of the shorter run."""
  run_main("configs/vae_16ary.py", tmp_path, *TINY, "num_steps=2", "estimator=st_gs")
  uninterrupted = (tmp_path / "metrics.jsonl").read_text()
  (tmp_path / "results.json").unlink()
  run_main("configs/vae_16ary.py", tmp_path, *TINY, "num_steps=2", "estimator=st_gs")
  assert (tmp_path / "metrics.jsonl").read_text() == uninterrupted
  run_main("configs/vae_16ary.py", tmp_path, *TINY, "num_steps=4", "estimator=st_gs")
  records = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
  assert sorted({r["step"] for r in records if r.get("final")}) == [4]


def test_damaged_or_missing_workdir_files(tmp_path):
  """A missing config.json is read from its backup (a restart under other hyperparameters is still
  refused); with both unreadable the restart is refused in one line; a damaged metrics line is
  dropped with a warning; an empty results.json is evaluated again."""
  run_main("configs/vae_16ary.py", tmp_path, *TINY, "num_steps=2", "estimator=st_gs")
  (tmp_path / "config.json").unlink()
  changed = run_main(
    "configs/vae_16ary.py",
    tmp_path,
    *TINY,
    "num_steps=2",
    "estimator=st_gs",
    "learning_rate=0.01",
    check=False,
  )
  assert (
    changed.returncode != 0
    and "learning_rate (saved 0.001, now 0.01)" in changed.stderr.splitlines()[-1]
  )
  metrics = tmp_path / "metrics.jsonl"
  lines = metrics.read_text().splitlines()
  metrics.write_text("\n".join([lines[0], "{garbage", *lines[1:]]) + "\n")
  (tmp_path / "results.json").write_text("")
  again = run_main("configs/vae_16ary.py", tmp_path, *TINY, "num_steps=2", "estimator=st_gs")
  assert "dropping a damaged line 2" in again.stderr and "results.json is damaged" in again.stderr
  assert (
    metrics.read_text().splitlines() == lines
    and json.loads((tmp_path / "results.json").read_text())["steps"] == 2
  )
  (tmp_path / "config.json").write_text('{"truncat')
  (tmp_path / "config.backup.json").unlink()
  refused = run_main(
    "configs/vae_16ary.py", tmp_path, *TINY, "num_steps=2", "estimator=st_gs", check=False
  )
  last = refused.stderr.strip().splitlines()[-1]
  assert refused.returncode != 0 and "Traceback" not in refused.stderr
  assert (
    last.startswith(f"error: --workdir {tmp_path} holds a run") and "missing or damaged" in last
  )


def test_a_signal_in_the_last_block_or_the_final_evaluation_stops_cleanly(tmp_path):
  """SIGTERM during the last training block is honoured (not ignored into the final evaluation);
  SIGINT during the final evaluation stops with the one line (no segfault); a rerun finishes."""
  quiet = (
    *TINY,
    "estimator=st_gs",
    "num_steps=300",
    "steps_per_call=300",
    "checkpoint_every=0",
    "eval_every=0",
    "variance_every=0",
    "mse_every=0",
    "log_every=300",
  )

  def interrupt(signum, wait_for, *overrides):
    log = tmp_path / f"log{signum}.txt"
    with open(log, "w") as stderr:
      process = subprocess.Popen(
        [
          sys.executable,
          "-m",
          "experiments.main",
          f"--config={ROOT / 'configs/vae_16ary.py'}",
          f"--workdir={tmp_path / 'run'}",
          *[f"--config.{o}" for o in (*quiet, *overrides)],
        ],
        cwd=ROOT,
        stderr=stderr,
        stdout=subprocess.DEVNULL,
      )
      deadline = time.time() + 120
      while wait_for not in log.read_text() and time.time() < deadline and process.poll() is None:
        time.sleep(0.05)
      process.send_signal(signum)
      process.wait(timeout=120)
    return process.returncode, log.read_text()

  code, text = interrupt(signal.SIGTERM, "steps 1..300")
  assert code == 143 and text.strip().splitlines()[-1].startswith(
    "interrupted: stopped by SIGTERM at step 300"
  )
  assert (tmp_path / "run" / "checkpoints" / "300").is_dir() and not (
    tmp_path / "run" / "results.json"
  ).exists()
  # Many short evaluation batches: a signal is seen between batches.
  code, text = interrupt(
    signal.SIGINT,
    "final evaluation:",
    "num_eval_samples=5000",
    "eval_batch_size=1",
    "iwae_chunk_size=100",
  )
  assert code == 130 and "Fatal Python error" not in text and "Traceback" not in text
  assert text.strip().splitlines()[-1].startswith("interrupted: stopped by SIGINT at step 300")
  assert not (tmp_path / "run" / "results.json").exists()
  # The evaluation's sums so far are saved (the rerun resumes from them), and dropped at its end.
  progress = tmp_path / "run" / bookkeeping.EvaluationProgress.FILE
  assert json.loads(progress.read_text())["step"] == 300
  run_main("configs/vae_16ary.py", tmp_path / "run", *quiet)
  assert not progress.exists()
  assert json.loads((tmp_path / "run" / "results.json").read_text())["steps"] == 300


def test_list_fields_prints_every_field_with_its_comment(tmp_path):
  command = [
    sys.executable,
    "-m",
    "experiments.main",
    "--config=configs/vae_16ary.py",
    "--list_fields",
    "--config.tau=0.3",
  ]
  listing = subprocess.run(
    command, cwd=ROOT, capture_output=True, text=True, timeout=300, check=True
  ).stdout
  lines = dict(line.split(" = ", 1) for line in listing.splitlines())
  assert lines["tau"] == "0.3" and lines["estimator"].startswith(
    "'gr_mc100'  # Estimator: a name accepted by"
  )
  assert lines["population.vectorize"].startswith("'auto'  # ") and "kernel_init" in lines
  assert not (tmp_path / "run").exists()


def _tensorboard_scalars(run_dir):
  """{tag: {step: value}} from a TensorBoard run directory's event files."""
  scalars, texts = {}, set()
  for event in tensorboard_events.events(run_dir):
    for value in event.summary.value:
      if value.HasField("simple_value"):
        scalars.setdefault(value.tag, {})[event.step] = value.simple_value
      else:
        texts.add(value.tag)
  return scalars, texts


def _hparams_session(run_dir):
  """The HParams plugin's SessionStartInfo written in a run directory."""
  from tensorboardX.proto import plugin_hparams_pb2

  for event in tensorboard_events.events(run_dir):
    for value in event.summary.value:
      if value.tag == "_hparams_/session_start_info":
        content = value.metadata.plugin_data.content
        return plugin_hparams_pb2.HParamsPluginData.FromString(content).session_start_info
  raise AssertionError(f"no HParams session in {run_dir}")


def test_tensorboard_events_are_averaged_with_the_final_bound_apart(tmp_path):
  """Train curves average the log_every steps (metrics.jsonl holds the same numbers); the final
  bounds are their own tags; num_samples is not plotted; hyperparameters, steps/s and the config."""
  run_main(
    "configs/vae_16ary.py",
    tmp_path,
    *TINY,
    "num_steps=4",
    "log_every=2",
    "checkpoint_every=4",
    "eval_every=2",
    "variance_every=0",
    "mse_every=0",
    "estimator=st_gs",
  )
  scalars, texts = _tensorboard_scalars(tmp_path / "tensorboard" / "member_0")
  records = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
  train = {r["step"]: r for r in records if r["split"] == "train" and "neg_elbo" in r}
  assert sorted(train) == sorted(scalars["train/neg_elbo"]) == [2, 4]
  for step in (2, 4):
    # One sign for every bound: the training curve is the negative ELBO (nats, > 0), on the axis
    # of the final NLL bounds.
    assert scalars["train/neg_elbo"][step] == pytest.approx(train[step]["neg_elbo"], rel=1e-6)
    assert train[step]["neg_elbo"] > 0
  assert (
    sorted(scalars["valid/nll"]) == [2] and "valid/num_samples" not in scalars
  )  # not at the last step
  assert set(scalars["final/valid_nll"]) == set(scalars["final/test_nll"]) == {4}
  assert scalars["hyperparameters/learning_rate"] == {0: pytest.approx(1e-3)}
  # The HParams plugin's session: the member's hyperparameters beside the final bounds.
  assert {"_hparams_/experiment", "_hparams_/session_start_info"} <= texts
  start = _hparams_session(tmp_path / "tensorboard" / "member_0")
  assert start.hparams["learning_rate"].number_value == pytest.approx(1e-3)
  assert start.hparams["estimator"].string_value == "st_gs"
  top, top_texts = _tensorboard_scalars(tmp_path / "tensorboard")
  assert sorted(top["progress/steps_per_second"]) == [2, 4] and any(
    "config" in t for t in top_texts
  )
  # The averaging: a 2-step interval's bound is the mean of the two steps' bounds, which a run
  # logging every step writes (same seed, same data, same steps).
  every_step = tmp_path / "every_step"
  run_main(
    "configs/vae_16ary.py",
    every_step,
    *TINY,
    "num_steps=4",
    "log_every=1",
    "checkpoint_every=4",
    "eval_every=2",
    "variance_every=0",
    "mse_every=0",
    "estimator=st_gs",
  )
  single = {
    r["step"]: r["neg_elbo"]
    for r in map(json.loads, (every_step / "metrics.jsonl").read_text().splitlines())
    if r["split"] == "train" and "neg_elbo" in r
  }
  assert train[4]["neg_elbo"] == pytest.approx((single[3] + single[4]) / 2, rel=1e-6)


def test_a_one_layer_run_and_a_two_layer_config_do_not_mix(tmp_path):
  """A workdir keeps its model: a one-layer run resumed with the two-layer config, and the other
  way round, is one line naming model."""
  one, two = tmp_path / "one", tmp_path / "two"
  run_main("configs/vae_4ary.py", one, *TINY, "num_steps=1", "estimator=st_gs")
  two_layer = (*TINY, *TWO_LAYER)
  run_main("configs/vae_two_layer_4ary.py", two, *two_layer, "num_steps=1", "estimator=st_gs")
  for config, run, saved, now in (
    ("configs/vae_two_layer_4ary.py", one, "concrete", "concrete_two_layer"),
    ("configs/vae_4ary.py", two, "concrete_two_layer", "concrete"),
  ):
    extra = TWO_LAYER if "two_layer" in config else ()
    result = run_main(config, run, *TINY, *extra, "num_steps=2", "estimator=st_gs", check=False)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines()[-1] == (
      f"error: --workdir {run} holds a run of config.model={saved!r}, and this config trains"
      f" model {now!r}: use another --workdir (a run keeps its model)."
    )
