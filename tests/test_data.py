"""Tests of gr_jax/data/__init__.py: datasets by name through one search order."""

import numpy as np
import pytest

import gr_jax.data as gr_data
from gr_jax.data import listops, mnist


def _write_listops(directory, valid="valid_d20s_1k.tsv", test="test_d20s.tsv"):
  directory.mkdir(parents=True, exist_ok=True)
  lines = listops.generate(6, seed=0)
  (directory / valid).write_text("\n".join(lines[:3]) + "\n")
  (directory / test).write_text("\n".join(lines[3:]) + "\n")
  return lines


def test_unknown_name_lists_the_datasets():
  with pytest.raises(ValueError, match=r"unknown dataset 'typo'; the datasets are .*binarized"):
    gr_data.load("typo")


def test_search_order_data_dir_then_root_then_cache(tmp_path, monkeypatch):
  """data_dir first, then $GR_JAX_DATA/<name>, then the cache; the source says which."""
  lines = _write_listops(tmp_path / "root" / "listops")
  monkeypatch.setenv(gr_data.DATA_ROOT_VARIABLE, str(tmp_path / "root"))
  splits, source = gr_data.load("listops", cache_dir=tmp_path / "cache")
  assert source == str(tmp_path / "root" / "listops")
  assert splits["valid"] == lines[:3] and splits["test"] == lines[3:]
  _write_listops(tmp_path / "mine", valid="v.tsv", test="t.tsv")
  _, source = gr_data.load("listops", tmp_path / "mine", valid_file="v.tsv", test_file="t.tsv")
  assert source == str(tmp_path / "mine")
  monkeypatch.delenv(gr_data.DATA_ROOT_VARIABLE)
  _write_listops(tmp_path / "cache")
  _, source = gr_data.load("listops", cache_dir=tmp_path / "cache")
  assert source == str(tmp_path / "cache")


def test_not_found_is_one_line_saying_what_where_and_how(tmp_path, monkeypatch):
  monkeypatch.delenv(gr_data.DATA_ROOT_VARIABLE, raising=False)
  with pytest.raises(gr_data.DataNotFoundError) as info:
    gr_data.load("listops", tmp_path / "nowhere", cache_dir=tmp_path / "cache", download=True)
  message = str(info.value)
  assert "\n" not in message
  assert "ListOps not found: looked for test_d20s.tsv and valid_d20s_1k.tsv in" in message
  assert str(tmp_path / "nowhere") in message and str(tmp_path / "cache") in message
  assert "it has no download" in message and "scripts.generate_listops" in message
  with pytest.raises(gr_data.DataNotFoundError, match="; download is off. Point"):
    gr_data.load("binarized_mnist", tmp_path / "nowhere", cache_dir=tmp_path / "cache")


def test_binarized_mnist_by_name_is_the_mnist_loader(tmp_path):
  images = (np.random.default_rng(0).random((4, 784)) < 0.5).astype(np.uint8)
  np.savez(tmp_path / mnist.NPZ_NAME, train=images, valid=images[:2], test=images[2:])
  splits, source = gr_data.load("binarized_mnist", tmp_path, cache_dir=tmp_path / "cache")
  np.testing.assert_array_equal(splits["train"], images)
  assert source == str(tmp_path)
  np.testing.assert_array_equal(mnist.load(str(tmp_path))["test"], images[2:])


@pytest.mark.parametrize("name", ["binarized_mnist", "fashion_mnist", "listops"])
def test_a_data_dir_that_is_a_file_is_one_line(tmp_path, name):
  a_file = tmp_path / "data.txt"
  a_file.write_text("")
  with pytest.raises(gr_data.DataNotFoundError) as info:
    gr_data.load(name, a_file, cache_dir=tmp_path / "cache")
  assert str(info.value).startswith(f"data_dir {a_file} is a file, not a directory: point")
