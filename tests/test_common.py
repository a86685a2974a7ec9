"""Tests of experiments/common.py: metrics, checkpoints, atomic files, config checks."""

import errno
import json
import math
import sys
import types

import jax.numpy as jnp
import numpy as np
import pytest
from ml_collections import ConfigDict

from configs import listops_L10, vae_16ary
from experiments import common


def test_metrics_writer_appends_and_truncates(tmp_path):
  writer = common.MetricsWriter(tmp_path)
  for step in (1, 2, 3):
    writer.write(step, "train", loss=float(step))
  writer.truncate_after(2)
  writer.write(3, "train", loss=30.0)
  writer.close()
  records = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
  assert [(r["step"], r["loss"]) for r in records] == [(1, 1.0), (2, 2.0), (3, 30.0)]


def test_checkpointer_saves_restores_and_keeps_two(tmp_path):
  checkpointer = common.Checkpointer(tmp_path)
  template = {"w": jnp.zeros(3), "step": jnp.asarray(0)}
  for step in (1, 2, 3):
    checkpointer.save(step, {"w": jnp.full(3, float(step)), "step": jnp.asarray(step)})
  checkpointer.save(
    3, {"w": jnp.full(3, -1.0), "step": jnp.asarray(-1)}
  )  # same step: kept as it was
  assert checkpointer.all_steps() == [2, 3] and checkpointer.latest_step() == 3
  restored = checkpointer.restore(3, template)
  np.testing.assert_array_equal(restored["w"], [3.0, 3.0, 3.0])
  checkpointer.close()


def test_a_full_disk_while_saving_is_one_oserror_naming_the_space(tmp_path, monkeypatch):
  checkpointer = common.Checkpointer(tmp_path)
  checkpointer.save(1, {"w": jnp.zeros(1000)})

  def full_disk(*args, **kwargs):  # what orbax raises when tensorstore meets ENOSPC
    raise ValueError(
      'RESOURCE_EXHAUSTED: Error writing "w/0": Failed to write 4000 bytes to file 25: No space'
      " left on device [os_error_code='28']"
    )

  monkeypatch.setattr(checkpointer._manager, "save", full_disk)
  with pytest.raises(
    OSError,
    match=r"saving the checkpoint of step 2: a checkpoint needs about 0.0 MiB, .* MiB are"
    r" free",
  ) as raised:
    checkpointer.save(2, {"w": jnp.zeros(1000)})
  assert raised.value.errno == errno.ENOSPC and raised.value.filename is None
  assert checkpointer.all_steps() == [1]
  checkpointer.close()


def test_only_closed_event_loop_noise_is_dropped(monkeypatch):
  seen = []
  monkeypatch.setattr(sys, "unraisablehook", seen.append)
  common._drop_closed_event_loop_noise()
  hook = sys.unraisablehook
  for error in (
    RuntimeError("Event loop is closed"),
    ImportError("sys.meta_path is None, Python is likely shutting down"),
    RuntimeError("something else"),
  ):
    hook(types.SimpleNamespace(exc_type=type(error), exc_value=error))
  assert [str(u.exc_value) for u in seen] == ["something else"]


def test_atomic_path_leaves_the_old_file_when_the_write_fails(tmp_path):
  target = tmp_path / "results.json"
  common.write_json_atomic(target, {"a": 1})
  with pytest.raises(RuntimeError):
    with common.atomic_path(target) as tmp:
      tmp.write_text("partial")
      raise RuntimeError("crash while writing")
  assert json.loads(target.read_text()) == {"a": 1}
  assert sorted(p.name for p in tmp_path.iterdir()) == ["results.json"]


def test_tau_schedule_exponential_decay_to_a_floor():
  config = vae_16ary.get_config()
  config.tau, config.tau_schedule, config.tau_min = 1.0, "exponential", 0.3
  config.tau_decay_rate, config.tau_decay_every = 0.01, 10
  schedule = common.tau_schedule(config)
  for step in (0, 9, 10, 55, 200):
    expected = max(0.3, math.exp(-0.01 * 10 * (step // 10)))
    assert float(schedule(1.0, step)) == pytest.approx(expected, rel=1e-6)
    # tau is data: a member with another tau decays from its own.
    assert float(schedule(0.5, step)) == pytest.approx(
      max(0.3, 0.5 * math.exp(-0.01 * 10 * (step // 10))), rel=1e-6
    )
  config.tau_schedule = "constant"
  assert float(common.tau_schedule(config)(1.0, 10_000)) == 1.0


@pytest.mark.parametrize(
  "name, straight_through_only, num_categories, ok",
  [
    ("zgr", True, None, True),
    ("gr_qmc50", True, None, True),
    ("gs", True, None, False),
    ("reinforce", True, None, False),
    ("gr_exact", False, 2, True),
    ("gr_exact", False, 16, False),
  ],
)
def test_check_estimator_by_family(name, straight_through_only, num_categories, ok):
  config = ConfigDict({"estimator": name})
  if ok:
    common.check_estimator(
      config, straight_through_only=straight_through_only, num_categories=num_categories
    )
  else:
    with pytest.raises(common.ConfigError, match="config.estimator"):
      common.check_estimator(
        config, straight_through_only=straight_through_only, num_categories=num_categories
      )


def test_prepare_workdir_allows_safe_changes_only(tmp_path):
  config = listops_L10.get_config()
  common.prepare_workdir(str(tmp_path), config)
  config.log_every, config.num_epochs = 7, config.num_epochs + 5  # safe: logging, more training
  common.prepare_workdir(str(tmp_path), config)
  assert json.loads((tmp_path / "config.json").read_text())["log_every"] == 7
  config.learning_rate = 0.9
  with pytest.raises(common.ConfigError, match=r"learning_rate \(saved 0.5, now 0.9\)"):
    common.prepare_workdir(str(tmp_path), config)
