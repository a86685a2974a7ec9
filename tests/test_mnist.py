"""Tests of gr_jax.data.mnist: the three sources and the error when data is absent."""

import numpy as np
import pytest

from gr_jax.data import mnist


def _fake_splits(rng):
  return {s: (rng.random((n, 784)) < 0.2).astype(np.uint8) for s, n in zip(mnist.SPLITS, (30, 10, 10))}


def test_loads_npz(tmp_path):
  splits = _fake_splits(np.random.default_rng(0))
  np.savez(tmp_path / mnist.NPZ_NAME, **splits)
  data = mnist.load(str(tmp_path), cache_dir=tmp_path / "cache")
  for s in mnist.SPLITS:
    np.testing.assert_array_equal(data[s], splits[s])


def test_loads_amat(tmp_path):
  splits = _fake_splits(np.random.default_rng(1))
  for s, images in splits.items():
    np.savetxt(tmp_path / f"binarized_mnist_{s}.amat", images, fmt="%d")
  data = mnist.load(str(tmp_path), cache_dir=tmp_path / "cache")
  for s in mnist.SPLITS:
    np.testing.assert_array_equal(data[s], splits[s])
    assert data[s].dtype == np.uint8


def test_missing_data_error_says_where_and_how(tmp_path):
  with pytest.raises(mnist.DataNotFoundError) as info:
    mnist.load(str(tmp_path / "nowhere"), cache_dir=tmp_path / "cache")
  message = str(info.value)
  assert str(tmp_path / "nowhere") in message and str(tmp_path / "cache") in message
  assert "--config.data_dir" in message and "download" in message


def test_bad_shape_is_rejected(tmp_path):
  np.savez(tmp_path / mnist.NPZ_NAME, train=np.zeros((3, 10)), valid=np.zeros((3, 10)), test=np.zeros((3, 10)))
  with pytest.raises(ValueError, match="784"):
    mnist.load(str(tmp_path), cache_dir=tmp_path / "cache")


def test_synthetic():
  data = mnist.load(synthetic_data=True)
  assert data["train"].shape == (200, 784) and set(np.unique(data["train"])) == {0, 1}


@pytest.mark.parametrize("bad_value, dtype", [(0.5, np.float32), (0.9, np.float64), (2, np.uint8), (-1, np.int32)])
def test_non_binary_pixels_are_rejected_naming_file_split_and_value(tmp_path, bad_value, dtype):
  """A cast to uint8 would turn 0.5 into 0 and train on blank images without a word."""
  splits = {s: images.astype(dtype) for s, images in _fake_splits(np.random.default_rng(2)).items()}
  splits["valid"][3, 17] = bad_value
  np.savez(tmp_path / mnist.NPZ_NAME, **splits)
  with pytest.raises(mnist.InvalidDataError) as info:
    mnist.load(str(tmp_path), cache_dir=tmp_path / "cache")
  message = str(info.value)
  assert mnist.NPZ_NAME in message and "'valid'" in message and "image 3, pixel 17" in message
  assert repr(dtype(bad_value)) in message or str(bad_value) in message


def test_non_binary_amat_is_rejected(tmp_path):
  splits = _fake_splits(np.random.default_rng(3))
  for s, images in splits.items():
    np.savetxt(tmp_path / f"binarized_mnist_{s}.amat", images * (0.5 if s == "test" else 1.0), fmt="%g")
  with pytest.raises(mnist.InvalidDataError, match="binarized_mnist_test.amat.*exactly 0 or 1"):
    mnist.load(str(tmp_path), cache_dir=tmp_path / "cache")
