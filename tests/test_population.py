"""Tests of experiments/population.py: populations of runs in one program.

The references are written out independently of the population code: a
Python loop of plain optax steps with the config's constants (the single-run
semantics the population loop replaced), and size-1 populations for "a member
equals the run it would be alone". float32 tolerances: the same arithmetic in
another order (vmap's batched matmuls, a data-parallel gradient sum) differs by
a few ulps per step; after 7 SGD steps with momentum, 1e-4 relative is ~100x
that, and a wrong batch, key or hyperparameter changes parameters by > 1e-2.
"""

import contextlib
import fcntl
import io
import json
import math
import os
import pathlib
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from configs import listops_L10, vae_16ary
from experiments import (
  config_checks,
  driver,
  merge,
  population,
  reporting,
  schedules,
  search,
  workdir,
)
from experiments.listops import experiment as listops
from experiments.studies import records as study_records
from experiments.vae import experiment as vae
from experiments.vae.task import VAETask
from tests.cli import ROOT, run_main

# Integration tests (whole runs, subprocesses): `pytest -m "not slow"` skips them.
pytestmark = pytest.mark.slow

RTOL, ATOL = 1e-4, 1e-5


def _config(**overrides):
  config = vae_16ary.get_config()
  config.dataset = "synthetic"
  config.encoder_widths, config.decoder_widths = (16,), (16,)
  config.num_vars = 6
  config.estimator = "gr_mc10"
  for field, value in overrides.items():
    if field.startswith("population_"):
      config.population[field.removeprefix("population_")] = value
    else:
      config[field] = value
  return config


_DATA = (np.random.default_rng(0).random((60, 784)) < 0.3).astype(
  np.uint8
)  # 3 batches of 20 per epoch


def _trainer(config, num_steps=7):
  task = VAETask(config, vae.validate(config))
  chosen = search.members(config, vae.HYPERPARAMETERS, vae.paper_search)
  return population.Trainer(
    population.Task(task.init_member, task.train_step, _DATA, config.batch_size, num_steps),
    chosen,
    config.population.vectorize,
  )


def _train(config, blocks=((1, 7),)):
  """The trainer, its state and the last block's metrics after the blocks of steps (two epoch
  boundaries)."""
  trainer = _trainer(config)
  state = trainer.init_state()
  for first, count in blocks:
    state, metrics = trainer.run_block(state, first, count)
  return trainer, state, metrics


def _reference_params(config, num_steps=7):
  """The single-run semantics, written out: a Python loop of optax SGD steps with the config's
  constants."""
  task = VAETask(config, vae.validate(config))
  key = jax.random.key(config.seed)
  hyper = {k: config[k] for k in vae.HYPERPARAMETERS}
  params = task.init_member(jax.random.fold_in(key, 0), hyper, config.seed)["params"]
  optimizer = optax.chain(
    optax.add_decayed_weights(config.weight_decay),
    optax.sgd(config.learning_rate, momentum=config.momentum),
  )
  opt_state, baseline = optimizer.init(params), task.baseline.init()
  input_mean = jnp.zeros(784)  # center_inputs="running_average": used, then updated at rate 0.9
  per_epoch = len(_DATA) // config.batch_size
  # Jitted once: eager op-by-op gradients of GR-MC10 took a minute.
  grad = jax.jit(jax.grad(task.loss, has_aux=True))
  for step in range(1, num_steps + 1):
    epoch, index = divmod(step - 1, per_epoch)
    order = np.asarray(
      jax.random.permutation(jax.random.fold_in(jax.random.fold_in(key, 2), epoch), len(_DATA))
    )
    x = jnp.asarray(
      _DATA[order[index * config.batch_size : (index + 1) * config.batch_size]], jnp.float32
    )
    step_key = jax.random.fold_in(jax.random.fold_in(key, 1), step)
    grads, result = grad(params, x, step_key, baseline.mean, config.tau, input_mean)
    input_mean = 0.9 * input_mean + 0.1 * x.mean(axis=0)
    updates, opt_state = optimizer.update(grads, opt_state, params)
    params = optax.apply_updates(params, updates)
    baseline = task.baseline.update(baseline, -result.bound)
  return params


def _assert_close(a, b):
  for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
    np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=RTOL, atol=ATOL)


def _member(params, i):
  return jax.tree.map(lambda a: a[i], params)


@pytest.mark.parametrize("estimator", ["gr_mc10", "reinforce"])
def test_size_one_population_equals_the_single_run_loop(estimator):
  config = _config(
    estimator=estimator, learning_rate=3e-3, momentum=0.5, weight_decay=1e-3, tau=0.7, seed=3
  )
  _, state, metrics = _train(
    config, blocks=((1, 4), (5, 3))
  )  # an epoch boundary inside a block, one between
  _assert_close(_member(state["members"]["params"], 0), _reference_params(config))
  assert metrics["neg_elbo"].shape == (1, 3)
  assert np.all(np.asarray(metrics["tau"]) == np.float32(0.7))


@pytest.mark.parametrize("vectorize", ["map", "vmap"])
def test_members_equal_the_runs_they_would_be_alone(vectorize):
  config = _config(
    population_search="lists",
    population_learning_rate=(1e-3, 5e-3),
    population_tau=(0.3, 1.0),
    population_seed=(0, 7),
    population_vectorize=vectorize,
    estimator="st_gs",
  )
  trainer, state, _ = _train(config)
  assert trainer.size == 8 and trainer.vectorize == vectorize
  for i in (0, 7):  # they differ in every listed field (a compile per alone run: two suffice)
    member = trainer.chosen[i]
    alone = _config(seed=member.seed, estimator="st_gs", **member.hyperparameters)
    _, alone_state, _ = _train(alone)
    _assert_close(
      _member(state["members"]["params"], i), _member(alone_state["members"]["params"], 0)
    )


def _two_member_toy(train_step):
  """Members at learning rates 1 and 2 (the rate only names them) of a 3-weight toy task whose
  weights start at 0, 5 steps an epoch."""
  config = _config(population_search="lists", population_learning_rate=(1.0, 2.0))
  task = population.Task(
    lambda key, hyperparameters, seed: {"w": jnp.zeros(3)}, train_step, _DATA, 20, 5
  )
  return population.Trainer(
    task,
    search.members(config, vae.HYPERPARAMETERS, vae.paper_search),
    config.population.vectorize,
  )


def test_a_step_that_makes_the_state_non_finite_freezes_the_member_before_it():
  """Metrics describe the state a step starts from: a step whose loss is finite but whose update
  overflows must not be kept (the frozen state is the last finite one, which evaluates)."""

  def train_step(member, hyperparameters, batch, key, step):
    del batch, key
    blown_up = jnp.where((hyperparameters["learning_rate"] == 2.0) & (step == 3), jnp.inf, 1.0)
    return {"w": member["w"] * blown_up + 1.0}, {"loss": jnp.sum(member["w"])}

  trainer = _two_member_toy(train_step)
  state, _ = trainer.run_block(trainer.init_state(), 1, 5)
  assert np.asarray(state["alive"]).tolist() == [True, False]
  assert np.asarray(state["diverged_at"]).tolist() == [-1, 3]
  np.testing.assert_array_equal(
    np.asarray(state["members"]["w"]), [[5.0] * 3, [2.0] * 3]
  )  # after steps 1-2


def test_a_state_that_is_non_finite_for_one_step_still_freezes_the_member():
  """While every member is alive a block runs without the guard's select; a step that was not
  finite sends the block back to its start, guarded. Here member 1's state is infinite after step
  3 only (step 4 resets it), so the block's last state is finite: the guard must still freeze it
  at step 2's state, and the metrics are the guarded block's (its loss at steps 4-5 is the frozen
  state's)."""

  def train_step(member, hyperparameters, batch, key, step):
    del batch, key
    w = member["w"]
    blown_up = jnp.where((hyperparameters["learning_rate"] == 2.0) & (step == 3), jnp.inf, 1.0)
    new = jnp.where(jnp.isfinite(w), w * blown_up + 1.0, 0.0)
    return {"w": new}, {"loss": jnp.sum(jnp.where(jnp.isfinite(w), w, 0.0))}

  trainer = _two_member_toy(train_step)
  state, metrics = trainer.run_block(trainer.init_state(), 1, 5)
  assert np.asarray(state["alive"]).tolist() == [True, False]
  assert np.asarray(state["diverged_at"]).tolist() == [-1, 3]
  np.testing.assert_array_equal(np.asarray(state["members"]["w"]), [[5.0] * 3, [2.0] * 3])
  # Loss of the state each step starts from: member 1 at w = 0, 1, 2, then frozen at 2.
  np.testing.assert_array_equal(np.asarray(metrics["loss"]), [[0, 3, 6, 9, 12], [0, 3, 6, 6, 6]])
  # The next block starts with a frozen member, so it runs guarded from the start.
  state, _ = trainer.run_block(state, 6, 2)
  np.testing.assert_array_equal(np.asarray(state["members"]["w"]), [[7.0] * 3, [2.0] * 3])
  assert sorted(trainer._blocks) == [(2, True), (5, False), (5, True)]


@pytest.mark.parametrize("vectorize", ["map", "vmap"])
def test_an_unguarded_block_equals_the_guarded_one_bit_for_bit(vectorize):
  """The select the unguarded block leaves out keeps every new state of a finite step, so the two
  programs give the same bits (the VAE's GR-MC10 step, two members, an epoch boundary inside)."""
  config = _config(
    population_search="lists",
    population_learning_rate=(1e-3, 5e-3),
    population_vectorize=vectorize,
  )
  trainer = _trainer(config)
  start = trainer.init_state()
  first = jnp.asarray(2, jnp.int32)
  copy = lambda tree: jax.tree.map(jnp.copy, tree)
  guarded = trainer._block(5, guarded=True)(copy(start), first, trainer.train_data)
  unguarded = trainer._block(5, guarded=False)(start, first, trainer.train_data)
  for a, b in zip(jax.tree.leaves(guarded), jax.tree.leaves(unguarded), strict=True):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
  assert np.asarray(unguarded[0]["alive"]).all()


def test_a_diverging_member_is_frozen_and_recorded_while_the_others_train():
  config = _config(
    population_search="lists",
    population_learning_rate=(1e-3, 1e30),
    estimator="st_gs",
    activation="relu",
  )  # tanh saturates: its outputs stay finite at any weights
  trainer, state, metrics = _train(config)
  alive, diverged_at = np.asarray(state["alive"]), np.asarray(state["diverged_at"])
  assert alive.tolist() == [True, False] and diverged_at[0] == -1 and 1 <= diverged_at[1] <= 7
  frozen = _member(state["members"]["params"], 1)
  assert all(np.isfinite(leaf).all() for leaf in jax.tree.leaves(frozen))  # its last finite state
  _, alone, _ = _train(_config(learning_rate=1e-3, estimator="st_gs", activation="relu"))
  _assert_close(_member(state["members"]["params"], 0), _member(alone["members"]["params"], 0))
  assert np.isfinite(np.asarray(metrics["neg_elbo"])[0]).all()


def test_paper_searches_draw_only_from_the_papers_sets():
  config = _config(population_search="paper", population_size=200, population_search_seed=4)
  chosen = search.members(config, vae.HYPERPARAMETERS, vae.paper_search)
  assert [m.index for m in chosen] == list(range(200)) and len({m.seed for m in chosen}) == 200
  lr = {m.hyperparameters["learning_rate"] for m in chosen}
  assert lr <= set(vae.PAPER_LEARNING_RATES) and len(lr) > 30
  assert {m.hyperparameters["weight_decay"] for m in chosen} == set(vae.PAPER_WEIGHT_DECAYS)
  assert all(
    0 < m.hyperparameters["momentum"] < 1 and 0.1 <= m.hyperparameters["tau"] <= 1 for m in chosen
  )
  # A job array's slices draw exactly what one job draws.
  config.population.num_shards, config.population.shard_index = 3, 2
  assert search.members(config, vae.HYPERPARAMETERS, vae.paper_search) == chosen[134:]
  grid = listops_L10.get_config()
  grid.population.search, grid.population.size = "paper", 30
  members = search.members(grid, listops.HYPERPARAMETERS, listops.paper_search)
  assert [m.hyperparameters["learning_rate"] for m in members[:10]] == [
    0.1,
    0.2,
    0.3,
    0.4,
    0.5,
    0.6,
    0.7,
    0.8,
    0.9,
    1.0,
  ]
  assert sorted({(m.seed, m.hyperparameters["learning_rate"]) for m in members}) == sorted(
    (s, lr) for s in (0, 1, 2) for lr in listops.PAPER_LEARNING_RATES
  )


def test_seeds_per_draw_repeat_each_paper_draw_with_distinct_seeds():
  """Draw d of a search with k seeds per draw is member d of the plain search (its hyperparameters
  and seed), repeated with seeds seed + d + r * draws; the seeds are distinct."""
  config = _config(population_search="paper", population_size=12, population_seeds_per_draw=3)
  repeated = search.members(config, vae.HYPERPARAMETERS, vae.paper_search)
  plain = search.members(
    _config(population_search="paper", population_size=4), vae.HYPERPARAMETERS, vae.paper_search
  )
  assert [m.draw for m in repeated] == [0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3]
  for member in repeated:
    assert member.hyperparameters == plain[member.draw].hyperparameters
  assert [m.seed for m in repeated[:3]] == [plain[0].seed, plain[0].seed + 4, plain[0].seed + 8]
  assert len({m.seed for m in repeated}) == 12
  assert all(m.draw is None for m in plain)
  # A config saved before the field existed is this config's run (seeds_per_draw = 1).
  saved = workdir.flatten(_config(population_search="paper", population_size=4).to_dict())
  del saved["population.seeds_per_draw"]
  new = workdir.flatten(_config(population_search="paper", population_size=4).to_dict())
  assert workdir.differing_fields(saved, new, added_fields=vae.VAEExperiment.ADDED_FIELDS) == []
  assert workdir.differing_fields(
    saved, {**new, "population.seeds_per_draw": 2}, added_fields=vae.VAEExperiment.ADDED_FIELDS
  ) == ["population.seeds_per_draw"]


def test_draw_spreads_are_the_mean_and_sd_over_each_draws_trained_seeds():
  reports = [
    {"member": 0, "draw": 0, "tau": 0.5, "valid_nll": 1.0, "diverged_at_step": None},
    {"member": 1, "draw": 0, "tau": 0.5, "valid_nll": 2.0, "diverged_at_step": None},
    {"member": 2, "draw": 0, "tau": 0.5, "valid_nll": 3.0, "diverged_at_step": None},
    {"member": 3, "draw": 1, "tau": 0.9, "valid_nll": 5.0, "diverged_at_step": None},
    {"member": 4, "draw": 1, "tau": 0.9, "valid_nll": 0.5, "diverged_at_step": 7},
  ]
  zero, one = reporting.draw_spreads(reports, ["valid_nll"])
  # 1, 2, 3: mean 2, sample sd 1; draw 1's diverged seed is left out (one seed: no sd).
  assert zero == {
    "draw": 0,
    "members": [0, 1, 2],
    "tau": 0.5,
    "seeds": 3,
    "diverged": 0,
    "valid_nll": 2.0,
    "valid_nll_sd": 1.0,
  }
  assert one["valid_nll"] == 5.0 and one["valid_nll_sd"] is None and one["diverged"] == 1
  table = reporting.draws_table([zero, one], "valid_nll", "min", ["valid_nll"])
  assert "| 0 | 0.5 | 3 | 0 | 2 +- 1 |" in table and "| 1 | 0.9 | 2 | 1 | 5 |" in table
  assert reporting.draw_spreads([{"member": 0, "valid_nll": 1.0}], ["valid_nll"]) == []


def test_selection_takes_the_best_finite_validation_member():
  reports = [
    {"member": 0, "valid_nll": 100.0},
    {"member": 1, "valid_nll": float("nan")},
    {"member": 2, "valid_nll": 95.0},
    {"member": 3, "valid_nll": None},
  ]
  assert reporting.select(reports, "valid_nll", "min")["member"] == 2
  assert reporting.select(reports, "valid_nll", "max")["member"] == 0
  assert reporting.select(reports[1:2], "valid_nll", "min") is None


@pytest.mark.parametrize(
  "overrides, field",
  [
    ({"population_size": 0}, "population.size"),
    ({"population_search": "grid"}, "population.search"),
    ({"population_search": "lists"}, "population.search"),  # every list empty
    (
      {"population_learning_rate": (0.1,)},
      "population.learning_rate",
    ),  # a list without search='lists'
    (
      {"population_search": "lists", "population_learning_rate": (0.1, -1.0)},
      "population.learning_rate",
    ),
    (
      {"population_search": "lists", "population_tau": (0.5, 1.0), "population_size": 3},
      "population.size",
    ),
    (
      {"population_size": 4, "population_num_shards": 2, "population_shard_index": 2},
      "population.shard_index",
    ),
    ({"population_size": 2, "population_num_shards": 3}, "population.num_shards"),
    ({"population_vectorize": "pmap"}, "population.vectorize"),
    ({"population_size": 4, "population_seeds_per_draw": 2}, "population.seeds_per_draw"),
    (
      {"population_search": "paper", "population_size": 5, "population_seeds_per_draw": 2},
      "population.size",
    ),
    (
      {"population_search": "paper", "population_size": 4, "population_seeds_per_draw": 0},
      "population.seeds_per_draw",
    ),
    ({"steps_per_call": 0}, "steps_per_call"),
    (
      {
        "population_search": "paper",
        "population_size": 4,
        "tau_schedule": "exponential",
        "tau_min": 0.5,
      },
      "tau_min",
    ),  # above a drawn tau
    (
      {"tau_schedule": "exponential", "tau_min": 0.9},
      "tau_min",
    ),  # above the single run's tau (0.5)
    (
      {
        "population_search": "lists",
        "population_tau": (0.8, 0.2),
        "tau_schedule": "exponential",
        "tau_min": 0.3,
      },
      "tau_min",
    ),  # above one listed tau
  ],
)
def test_bad_population_configs_name_the_field(tmp_path, overrides, field):
  with pytest.raises(config_checks.ConfigError, match=f"config\\.{field.replace('.', '[.]')}"):
    vae.train_and_evaluate(_config(**overrides), str(tmp_path))
  assert not (tmp_path / "checkpoints").exists()


def test_listops_has_no_momentum_to_search(tmp_path):
  config = listops_L10.get_config()
  config.population.search, config.population.momentum = "lists", (0.5,)
  with pytest.raises(
    config_checks.ConfigError, match=r"config\.population\.momentum must be empty"
  ):
    listops.train_and_evaluate(config, str(tmp_path))


_SHARDED = """
import sys, json, numpy as np, jax
sys.path.insert(0, {root!r})
from tests import test_population as t
from experiments import config_checks, population
assert len(jax.devices()) == 4
out = {{}}
for name, config in t.sharding_cases().items():
  trainer, state, metrics = t._train(config)
  out[name] = [np.asarray(x).tolist() for x in jax.tree.leaves(state["members"]["params"])]
  out[name + "_layout"] = [trainer.member_sharded, trainer.data_parallel]
try:
  t._trainer(t._config(population_size=3))
except config_checks.ConfigError as e:
  out["uneven"] = str(e)
print(json.dumps(out))
"""


def sharding_cases():
  return {
    "population": _config(
      population_search="lists",
      population_learning_rate=(1e-3, 5e-3),
      population_seed=(0, 1),
      estimator="st_gs",
    ),
    "single": _config(learning_rate=5e-3),
  }


def test_sharded_over_four_devices_equals_one_device():
  """A population of 4 split over 4 (forced host) devices, and one member data-parallel over them,
  give one device's numbers; a population that does not divide evenly is refused in one line."""
  env = {
    **os.environ,
    # The suite's flags (tests/conftest.py) too: the programs compiled as this process's.
    "XLA_FLAGS": f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count=4",
    "JAX_PLATFORMS": "cpu",
  }
  result = subprocess.run(
    [sys.executable, "-c", _SHARDED.format(root=str(ROOT))],
    cwd=ROOT,
    env=env,
    capture_output=True,
    text=True,
    timeout=900,
  )
  assert result.returncode == 0, result.stderr[-3000:]
  sharded = json.loads(result.stdout.strip().splitlines()[-1])
  assert sharded["population_layout"] == [True, False] and sharded["single_layout"] == [False, True]
  for name, config in sharding_cases().items():
    _, state, _ = _train(config)
    for mine, theirs in zip(
      jax.tree.leaves(state["members"]["params"]), sharded[name], strict=True
    ):
      np.testing.assert_allclose(
        np.asarray(mine), np.asarray(theirs, np.float32), rtol=RTOL, atol=ATOL
      )
  assert sharded["uneven"].startswith(
    "config.population.size: this job's 3 members do not divide evenly over its 4"
  )


TINY_CLI = (
  "dataset=synthetic",
  "encoder_widths=(16,)",
  "decoder_widths=(16,)",
  "num_vars=6",
  "estimator=st_gs",
  "checkpoint_every=2",
  "log_every=1",
  "eval_every=2",
  "variance_every=2",
  "variance_draws=4",
  "num_eval_samples=10",
  "periodic_eval_samples=3",
  "eval_batch_size=25",
  "steps_per_call=3",
  "population.search=paper",
  "population.size=3",
)


def test_population_resume_equals_uninterrupted_and_writes_members(tmp_path):
  whole, parts = tmp_path / "whole", tmp_path / "parts"
  run_main("configs/vae_16ary.py", whole, *TINY_CLI, "num_steps=6")
  run_main("configs/vae_16ary.py", parts, *TINY_CLI, "num_steps=4")
  second = run_main("configs/vae_16ary.py", parts, *TINY_CLI, "num_steps=6")
  assert "resumed from the checkpoint at step 4" in second.stderr
  lines = lambda d: [
    line for line in (d / "metrics.jsonl").read_text().splitlines() if '"train"' in line
  ]
  assert lines(whole) == lines(parts)
  results = [json.loads((d / "results.json").read_text()) for d in (whole, parts)]
  assert results[0]["members"] == results[1]["members"]
  members = results[0]["members"]
  assert [m["member"] for m in members] == [0, 1, 2] and results[0]["population_size"] == 3
  for m in members:
    assert {
      "learning_rate",
      "momentum",
      "weight_decay",
      "tau",
      "seed",
      "valid_nll",
      "test_nll",
      "diverged_at_step",
    } <= set(m)
  best = min(members, key=lambda m: m["valid_nll"])
  assert (
    results[0]["selected_member"] == best["member"] and results[0]["test_nll"] == best["test_nll"]
  )
  records = [json.loads(line) for line in lines(whole)]
  assert sorted({r["member"] for r in records}) == [0, 1, 2]
  summary = (whole / "summary.md").read_text().splitlines()
  assert summary[0].startswith("Run: estimator ")
  assert summary[6].startswith(f"| {best['member']} |")  # sorted by validation, best first


def _merge(out, *workdirs):
  """scripts/merge_population.py's work in this process: its exit status, output and last line."""
  accept = "--accept_mixed_code" in workdirs
  paths = [pathlib.Path(w) for w in workdirs if w != "--accept_mixed_code"]
  output = io.StringIO()
  try:
    with contextlib.redirect_stdout(output):
      merge.merge(paths, pathlib.Path(out), accept)
  except merge.MergeError as e:
    return subprocess.CompletedProcess([], 1, output.getvalue(), f"error: {e}\n")
  return subprocess.CompletedProcess([], 0, output.getvalue(), "")


def test_job_array_slices_merge_into_the_whole_population(tmp_path):
  whole = run_main("configs/vae_16ary.py", tmp_path / "whole", *TINY_CLI, "num_steps=2")
  del whole
  shards = [tmp_path / f"shard{i}" for i in range(2)]
  for i, shard in enumerate(shards):
    slice_run = run_main(
      "configs/vae_16ary.py",
      shard,
      *TINY_CLI,
      "num_steps=2",
      f"population.shard_index={i}",
      "population.num_shards=2",
    )
    # 3 members in 2 contiguous slices: 0-1 and 2 (np.array_split); the results line says so.
    held = "0-1" if i == 0 else "2-2"
    assert f"of 3, slice {i} of 2 holds {held})" in slice_run.stderr
  merge_command = lambda out, *workdirs: subprocess.run(
    [sys.executable, "-m", "scripts.merge_population", f"--out={out}", *map(str, workdirs)],
    cwd=ROOT,
    capture_output=True,
    text=True,
    timeout=300,
    env={**os.environ, "PYTHONPATH": str(ROOT)},
  )
  # The command once each way (merged; refused in one line), the other cases in this process.
  assert merge_command(tmp_path / "merged", *shards).returncode == 0
  merged = json.loads((tmp_path / "merged" / "results.json").read_text())
  single = json.loads((tmp_path / "whole" / "results.json").read_text())
  assert [m["member"] for m in merged["members"]] == [0, 1, 2]
  for a, b in zip(merged["members"], single["members"]):
    assert a["learning_rate"] == b["learning_rate"] and a["valid_nll"] == pytest.approx(
      b["valid_nll"], rel=1e-4
    )
  assert merged["selected_member"] == single["selected_member"]
  # The merged directory is a run's records as the single job's: its config (the whole
  # population's), every member's metrics lines (each value within float32 rounding of the single
  # job's: the slices' programs batch fewer members), read by the studies' reader.
  merged_config = json.loads((tmp_path / "merged" / "config.json").read_text())
  single_config = json.loads((tmp_path / "whole" / "config.json").read_text())
  assert merged_config["population"] == single_config["population"]
  assert {k: v for k, v in merged_config.items() if k != "population"} == {
    k: v for k, v in single_config.items() if k != "population"
  }

  def metrics(run):
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    key = lambda r: (r.get("final", False), r["step"], r["split"], r["member"])
    return {key(r): r for r in records}

  merged_metrics, single_metrics = metrics(tmp_path / "merged"), metrics(tmp_path / "whole")
  assert merged_metrics.keys() == single_metrics.keys()
  assert {split for _, _, split, _ in merged_metrics} >= {"train", "valid", "test"}
  for key, record in single_metrics.items():
    values = {k: v for k, v in record.items() if k not in ("step", "split", "member", "final")}
    theirs = merged_metrics[key]
    assert theirs.keys() == record.keys(), key
    for name, value in values.items():
      assert (value is None and theirs[name] is None) or theirs[name] == pytest.approx(
        value, rel=1e-4, abs=1e-6
      ), (key, name)
  lines = (tmp_path / "merged" / "metrics.jsonl").read_text().splitlines()
  order = [(json.loads(line).get("final", False), json.loads(line)["step"]) for line in lines]
  assert order == sorted(order)  # by step, the final evaluation's lines last
  read = study_records.read_run(tmp_path / "merged")
  assert [m.seed for m in read.members] == [m["seed"] for m in single["members"]]
  assert [len(s) for s in merged["slice_times"]] == [3, 3] and "training_wall_time_s" not in merged
  # A merge again into an earlier merge's directory replaces it (a slice retrained).
  assert _merge(tmp_path / "merged", *shards).returncode == 0
  partial = merge_command(tmp_path / "partial", shards[0])
  assert (
    partial.returncode != 0
    and "do not cover the population" in partial.stderr.strip().splitlines()[-1]
  )
  last_line = lambda result: result.stderr.strip().splitlines()[-1]
  # --out pointed at a slice (or any run's workdir) would overwrite its results.json.
  results_before = (shards[0] / "results.json").read_text()
  onto_slice = _merge(shards[0], *shards)
  assert onto_slice.returncode != 0 and "is a run's workdir" in last_line(onto_slice)
  assert (shards[0] / "results.json").read_text() == results_before
  # A slice whose extension to more steps was interrupted holds the shorter run's results.
  config = json.loads((shards[1] / "config.json").read_text())
  (shards[1] / "config.json").write_text(json.dumps({**config, "num_steps": 4}))
  stale = _merge(tmp_path / "stale", *shards)
  assert stale.returncode != 0 and "Traceback" not in stale.stderr
  assert last_line(stale).startswith(
    f"error: {shards[1] / 'results.json'} is stale: it reports steps=2 but the"
    " slice's config asks for num_steps=4"
  )
  # A field a restart may change (log_every) may differ between slices; a damaged slice (its
  # results or a line of its metrics), no slice and an unwritable --out are one line each.
  (shards[1] / "config.json").write_text(json.dumps({**config, "log_every": 7}))
  assert _merge(tmp_path / "safe", *shards).returncode == 0
  assert (
    json.loads((tmp_path / "safe" / "results.json").read_text())["code_segments"]
    == single["code_segments"]
  )
  # A slice trained on other code (here: another jax) is refused, or merged when accepted, with
  # each slice's code recorded.
  results = json.loads((shards[1] / "results.json").read_text())
  other = [{**s, "versions": {**s["versions"], "jax": "0.0.1"}} for s in results["code_segments"]]
  (shards[1] / "results.json").write_text(json.dumps({**results, "code_segments": other}))
  mixed = _merge(tmp_path / "mixed", *shards)
  assert mixed.returncode != 0 and "Traceback" not in mixed.stderr
  assert last_line(mixed).startswith(
    f"error: {shards[1]} was trained (in part) on other code than the first steps of {shards[0]}"
    f" (jax {jax.__version__} -> 0.0.1)"
  )
  accepted = _merge(tmp_path / "mixed", "--accept_mixed_code", *shards)
  assert accepted.returncode == 0 and "warning: " in accepted.stdout
  by_slice = json.loads((tmp_path / "mixed" / "results.json").read_text())["code_segments_by_slice"]
  assert by_slice == {str(shards[0]): single["code_segments"], str(shards[1]): other}
  (shards[1] / "results.json").write_text(json.dumps(results))
  # A path that is no slice, a slice whose job is still training (it holds the workdir's lock),
  # and runs of two experiments are one line each, saying which.
  missing = _merge(tmp_path / "missing", shards[0], tmp_path / "shard9")
  assert last_line(missing).startswith(f"error: {tmp_path / 'shard9'} is not a directory")
  with open(shards[1] / workdir.LOCK_FILE, "w") as lock:
    lock.write("pid 12345 on a-host")
    lock.flush()
    fcntl.flock(lock, fcntl.LOCK_EX)
    running = _merge(tmp_path / "running", *shards)
  assert last_line(running).startswith(
    f"error: {shards[1]} is still training (pid 12345 on a-host): merge once every slice's job"
  )
  (shards[1] / workdir.LOCK_FILE).unlink()
  (shards[1] / "config.json").write_text(json.dumps({**config, "experiment": "listops"}))
  two = _merge(tmp_path / "two", *shards)
  assert len(last_line(two)) < 400 and last_line(two).startswith(
    f"error: the slices are runs of different experiments ({shards[0]}: vae, {shards[1]}: listops)"
  )
  (shards[1] / "config.json").write_text(json.dumps({**config, "log_every": 7}))
  metrics = (shards[1] / "metrics.jsonl").read_text()
  (shards[1] / "metrics.jsonl").write_text(metrics + '{"step": "two"}\n')
  cut = _merge(tmp_path / "cut", *shards)
  lines = len(metrics.splitlines()) + 1
  assert cut.returncode != 0 and "Traceback" not in cut.stderr
  assert last_line(cut).startswith(
    f"error: {shards[1] / 'metrics.jsonl'} is damaged at line {lines}: run that slice's job again"
  )
  (shards[1] / "metrics.jsonl").write_text(metrics)
  unwritable = _merge(tmp_path / "safe" / "summary.md" / "x", *shards)
  (shards[1] / "results.json").write_text("{")
  for result, expected in (
    (unwritable, "error: cannot write the merged"),
    (_merge(tmp_path / "damaged", *shards), f"error: {shards[1] / 'results.json'} is damaged"),
    (_merge(tmp_path / "none"), "error: give the workdirs"),
  ):
    assert (
      result.returncode != 0
      and "Traceback" not in result.stderr
      and last_line(result).startswith(expected)
    )


def test_no_selectable_member_is_said_in_one_line(caplog):
  members = [
    {"member": i, "valid_nll": None, "test_nll": None, "diverged_at_step": 4 + i} for i in range(2)
  ]
  with caplog.at_level("INFO"):
    reporting.log_selection(
      {"selected_member": None, "members": members}, "valid_nll", ("valid_nll", "test_nll")
    )
    reporting.log_selection(
      {"selected_member": None, "members": [{**members[0], "diverged_at_step": None}]},
      "valid_nll",
      (),
    )
  assert [r.getMessage() for r in caplog.records] == [
    "no member could be selected on valid_nll: every member diverged (at steps [4, 5]); the"
    " members' results are"
    " in results.json.",
    "no member could be selected on valid_nll: no member has a finite valid_nll; the members'"
    " results are in"
    " results.json.",
  ]


def test_a_diverged_member_is_never_selected_over_a_trained_one():
  """A member evaluated in its last finite state (diverged at step 3) has the best number here, yet
  the member that trained to the end is the result; when every member diverged, none is, and the
  run's error names the field to change."""
  trained = {"member": 0, "valid_nll": 120.0, "diverged_at_step": None, "learning_rate": 1e-3}
  diverged = {"member": 1, "valid_nll": 90.0, "diverged_at_step": 3, "learning_rate": 1e30}
  assert reporting.select([trained, diverged], "valid_nll", "min") is trained
  assert reporting.select([diverged], "valid_nll", "min") is None
  assert reporting.no_member_trained({"members": [trained, diverged]}) is None
  failure = str(reporting.no_member_trained({"members": [diverged]}))
  assert failure.startswith("no member trained: every member diverged (member 1 first, at step 3")
  assert failure.endswith("Change the config: lower learning_rate (the largest is 1e+30).")
  cold = {**diverged, "learning_rate": 1e-3, "tau": 1e-20, "weight_decay": 0.0}
  assert "raise tau (the smallest is 1e-20" in str(reporting.no_member_trained({"members": [cold]}))


@pytest.mark.parametrize(
  "field, value",
  [("tau", 1e-300), ("tau", float("inf")), ("learning_rate", float("inf")), ("weight_decay", 1e39)],
)
def test_hyperparameters_float32_rounds_to_zero_or_inf_are_refused(field, value):
  """float32 holds neither: the members would diverge at step 1 (every one of them)."""
  config = vae_16ary.get_config()
  config[field] = value
  with pytest.raises(config_checks.ConfigError, match=rf"^config\.{field} must be .*float32"):
    search.check(config, vae.HYPERPARAMETERS)


@pytest.mark.parametrize(
  "members, cores, devices",
  [(20, 2, 2), (3, 2, 1), (1, 16, 1), (20, 16, 10), (8, 16, 8), (7, 4, 1)],
)
def test_auto_splits_the_members_over_the_most_cores_that_divide_them(members, cores, devices):
  assert driver.cpu_devices_for(members, cores) == devices


def test_tau_schedule_exponential_decay_to_a_floor():
  config = vae_16ary.get_config()
  config.tau, config.tau_schedule, config.tau_min = 1.0, "exponential", 0.3
  config.tau_decay_rate, config.tau_decay_every = 0.01, 10
  schedule = schedules.tau_schedule(config)
  for step in (0, 9, 10, 55, 200):
    expected = max(0.3, math.exp(-0.01 * 10 * (step // 10)))
    assert float(schedule(1.0, step)) == pytest.approx(expected, rel=1e-6)
    # tau is data: a member with another tau decays from its own.
    assert float(schedule(0.5, step)) == pytest.approx(
      max(0.3, 0.5 * math.exp(-0.01 * 10 * (step // 10))), rel=1e-6
    )
  config.tau_schedule = "constant"
  assert float(schedules.tau_schedule(config)(1.0, 10_000)) == 1.0
