"""Integration tests of experiments/listops/ through the real CLI on generated data."""

import json
import math
import re

import pytest

from configs import listops_L10
from experiments import config_checks
from experiments.listops import experiment as listops_experiment
from gr_jax.data import InvalidDataError, listops
from tests.cli import run_main

# Integration tests (the real CLI, subprocesses, whole runs): `pytest -m "not slow"` skips them.
pytestmark = pytest.mark.slow

TINY = (
  "dataset=synthetic",
  "num_train_examples=80",
  "embed_dim=8",
  "hidden_dim=8",
  "classifier_hidden_dim=8",
  "log_every=1",
  "checkpoint_every=1",
  "eval_batch_size=16",
)


def test_tiny_run_writes_outputs(tmp_path):
  run_main(
    "configs/listops_L10.py", tmp_path, *TINY, "num_epochs=2", "estimator=gr_mc10", "tau=0.01"
  )
  results = json.loads((tmp_path / "results.json").read_text())
  for key in (
    "valid_accuracy",
    "test_accuracy",
    "best_epoch",
    "estimator",
    "tau",
    "batch_size",
    "seed",
    "num_train_examples_requested",
    "num_train_examples",
  ):
    assert key in results
  correct, total = map(int, results["test_correct"].split("/"))
  assert results["test_accuracy"] == correct / total  # exact, not float32-rounded
  assert results["num_train_examples_requested"] == 80 >= results["num_train_examples"]
  assert 1 <= results["best_epoch"] <= 2 and 0 <= results["test_accuracy"] <= 1
  records = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
  assert {r["split"] for r in records} == {"train", "valid", "test"}
  assert json.loads((tmp_path / "config.json").read_text())["max_length"] == 10


def test_exponential_tau_schedule_with_a_newer_estimator(tmp_path):
  """tau_t = max(tau_min, tau exp(-r N floor(t / N))), logged every step; ZGR trains the tree."""
  run_main(
    "configs/listops_L10.py",
    tmp_path,
    *TINY,
    "num_epochs=1",
    "estimator=reinmax",
    "tau=2.0",
    "tau_schedule=exponential",
    "tau_decay_rate=0.1",
    "tau_decay_every=2",
    "tau_min=1.5",
  )
  taus = [
    r["tau"]
    for r in map(json.loads, (tmp_path / "metrics.jsonl").read_text().splitlines())
    if r["split"] == "train"
  ]
  expected = [max(1.5, 2.0 * math.exp(-0.1 * 2 * (t // 2))) for t in range(1, len(taus) + 1)]
  assert taus == pytest.approx(expected, rel=1e-5)
  results = json.loads((tmp_path / "results.json").read_text())
  assert results["tau_schedule"] == "exponential" and results["final_tau"] == pytest.approx(1.5)


def test_resumed_run_equals_uninterrupted_run(tmp_path):
  whole, parts = tmp_path / "whole", tmp_path / "parts"
  run_main("configs/listops_L10.py", whole, *TINY, "num_epochs=2", "estimator=st_gs")
  run_main("configs/listops_L10.py", parts, *TINY, "num_epochs=1", "estimator=st_gs")
  second = run_main("configs/listops_L10.py", parts, *TINY, "num_epochs=2", "estimator=st_gs")
  assert "resumed from the checkpoint" in second.stderr
  results = [json.loads((d / "results.json").read_text()) for d in (whole, parts)]
  # The record of each process's training (its wall time and steps) differs by construction.
  assert results[1]["training_wall_time_steps"] == [4, 8]
  for r in results:
    del r["training_wall_time_s"], r["training_wall_time_steps"]
  assert results[0] == results[1]
  train = lambda d: [
    line for line in (d / "metrics.jsonl").read_text().splitlines() if '"train"' in line
  ]
  assert train(whole) == train(parts)


@pytest.mark.parametrize(
  "field,value",
  [
    ("estimator", "gs"),  # a relaxation cannot build a tree
    ("estimator", "reinforce"),
    ("estimator", "gr_exact"),  # binary variables only
    ("tau", 0.0),
    ("tau", float("inf")),
    ("tau_schedule", "linear"),
    ("tau_decay_rate", -1.0),
    ("max_length", 1),
    ("batch_size", 10_000),
    ("learning_rate", -0.1),
  ],
)
def test_bad_config_values_name_the_field(tmp_path, field, value):
  config = listops_L10.get_config()
  config.dataset = "synthetic"
  config.num_train_examples = 80
  config[field] = value
  with pytest.raises(config_checks.ConfigError, match=f"config\\.{field}"):
    listops_experiment.train_and_evaluate(config, str(tmp_path))


def test_missing_data_is_a_one_line_error(tmp_path):
  result = run_main("configs/listops_L10.py", tmp_path, f"data_dir={tmp_path}", check=False)
  last = result.stderr.strip().splitlines()[-1]
  assert result.returncode != 0 and last.startswith("error: ListOps") and "data_dir" in last


def test_a_bad_line_in_an_evaluation_file_is_one_line(tmp_path):
  data_dir = tmp_path / "data"
  data_dir.mkdir()
  good = listops.generate(40, 5)
  (data_dir / "test_d20s.tsv").write_text("\n".join(good[:20]) + "\n")
  (data_dir / "valid_d20s_1k.tsv").write_text(
    "\n".join(good[20:25] + ["12\t[MAX 3 1 ]"] + good[25:]) + "\n"
  )
  result = run_main(
    "configs/listops_L10.py",
    tmp_path / "run",
    f"data_dir={data_dir}",
    "num_train_examples=80",
    f"cache_dir={tmp_path / 'cache'}",
    check=False,
  )
  last = result.stderr.strip().splitlines()[-1]
  assert result.returncode != 0 and "Traceback" not in result.stderr
  assert last.startswith(
    f"error: {data_dir / 'valid_d20s_1k.tsv'}:6: the label must be an integer in 0..9"
  )


def _data_dir(tmp_path):
  data_dir = tmp_path / "data"
  data_dir.mkdir()
  good = listops.generate(40, 5)
  (data_dir / "test_d20s.tsv").write_text("\n".join(good[:20]) + "\n")
  (data_dir / "valid_d20s_1k.tsv").write_text("\n".join(good[20:]) + "\n")
  return data_dir


def test_too_few_generated_examples_for_one_batch_names_num_train_examples(tmp_path):
  config = listops_L10.get_config()
  config.data_dir, config.cache_dir, config.num_train_examples = (
    str(_data_dir(tmp_path)),
    str(tmp_path / "c"),
    3,
  )
  with pytest.raises(
    config_checks.ConfigError, match=r"^config\.num_train_examples=3 gives \d+ training examples"
  ):
    listops_experiment.load_data(config)


def test_a_stale_training_cache_is_regenerated(tmp_path, caplog):
  """The cache names the generator's version (an older one is another file); a cache of the
  wrong size (a truncated or hand-edited file) is generated again, with a warning."""
  config = listops_L10.get_config()
  config.data_dir, config.cache_dir, config.num_train_examples = (
    str(_data_dir(tmp_path)),
    str(tmp_path / "c"),
    50,
  )
  fresh = listops_experiment.load_data(config)[0]["train"]
  (cache,) = (tmp_path / "c").iterdir()
  assert cache.name.endswith(f"_generator{listops.GENERATOR_VERSION}.tsv")
  cache.write_text("\n".join(cache.read_text().splitlines()[:7]) + "\n")
  with caplog.at_level("WARNING"):
    again = listops_experiment.load_data(config)[0]["train"]
  assert again == fresh and any("holds 7 lines, not 50" in r.getMessage() for r in caplog.records)
  assert len(cache.read_text().splitlines()) == 50


def test_no_validation_example_of_the_length_is_caught_at_start(tmp_path):
  data_dir = _data_dir(tmp_path)
  long_lines = [
    line for line in listops.generate(400, 9) if len(listops.parse_line(line).tokens) > 10
  ][:5]
  (data_dir / "valid_d20s_1k.tsv").write_text("\n".join(long_lines) + "\n")
  result = run_main(
    "configs/listops_L10.py",
    tmp_path / "run",
    f"data_dir={data_dir}",
    "num_train_examples=80",
    f"cache_dir={tmp_path / 'cache'}",
    check=False,
  )
  last = result.stderr.strip().splitlines()[-1]
  assert result.returncode != 0 and "Traceback" not in result.stderr
  assert last == (
    f"error: {data_dir / 'valid_d20s_1k.tsv'}: no valid example of length <= 10 (the model is"
    " selected"
    " on valid and reported on test): give a file with such lines."
  )
  assert not (tmp_path / "run" / "checkpoints").exists()


def test_bad_bytes_labels_and_caches_are_one_line_each(tmp_path):
  """Non-UTF-8 bytes and a label like '²' are file:line errors; a byte-order mark is read; a damaged
  cache says that it may be deleted; an unwritable cache_dir names the field."""
  data_dir = _data_dir(tmp_path)
  valid = data_dir / "valid_d20s_1k.tsv"
  good = valid.read_bytes()
  config = listops_L10.get_config()
  config.data_dir, config.cache_dir, config.num_train_examples = (
    str(data_dir),
    str(tmp_path / "c"),
    50,
  )
  valid.write_bytes(good.replace(b"\t", b"\t\xff", 1))
  with pytest.raises(
    InvalidDataError, match=rf"^{re.escape(str(valid))}:1: not UTF-8 text \(byte 0xff"
  ):
    listops_experiment.load_data(config)
  valid.write_bytes("²".encode() + good[1:])
  with pytest.raises(
    InvalidDataError, match=rf"^{re.escape(str(valid))}:1: the label must be an integer in 0..9"
  ):
    listops_experiment.load_data(config)
  valid.write_bytes(b"\xef\xbb\xbf" + good)
  assert len(listops_experiment.load_data(config)[0]["valid"]) > 0
  (cache,) = (tmp_path / "c").iterdir()
  cache.write_text("x\tbroken\n" * 50)
  with pytest.raises(
    InvalidDataError, match="a cache of generated data: delete it to generate it again"
  ):
    listops_experiment.load_data(config)
  blocked = tmp_path / "file"
  blocked.write_text("")
  config.cache_dir = str(blocked / "sub")
  with pytest.raises(config_checks.ConfigError, match=r"^config\.cache_dir="):
    listops_experiment.load_data(config)


def test_gr_jax_data_finds_listops_and_config_json_records_the_data(tmp_path, monkeypatch):
  """The data root convention of MNIST: $GR_JAX_DATA/listops when data_dir is empty."""
  root = tmp_path / "root"
  root.mkdir()
  _data_dir(tmp_path).rename(root / "listops")
  monkeypatch.setenv("GR_JAX_DATA", str(root))
  config = listops_L10.get_config()
  config.data_dir, config.cache_dir, config.num_train_examples = "", str(tmp_path / "c"), 60
  data, sources = listops_experiment.load_data(config)
  assert (
    sources["test"] == str((root / "listops" / "test_d20s.tsv").resolve()) and len(data["test"]) > 0
  )
  monkeypatch.setenv("GR_JAX_DATA", str(tmp_path / "elsewhere"))
  with pytest.raises(
    FileNotFoundError,
    match=r"looked for test_d20s.tsv and valid_d20s_1k.tsv in .*elsewhere/listops, .*/c;"
    r" it has no download\. Point --config\.data_dir",
  ):
    listops_experiment.load_data(config)
  monkeypatch.setenv("GR_JAX_DATA", str(root))
  workdir = tmp_path / "run"
  run_main(
    "configs/listops_L10.py",
    workdir,
    *TINY,
    "dataset=listops",
    "num_epochs=1",
    "data_dir=",
    f"cache_dir={tmp_path / 'c'}",
  )
  recorded = json.loads((workdir / "config.json").read_text())["data_used"]
  assert recorded["valid"] == str((root / "listops" / "valid_d20s_1k.tsv").resolve())
  assert str(tmp_path / "c") in recorded["train"]
