"""Tests of gr_jax/data/idx_images.py: Fashion-MNIST and MNIST in the IDX format, their split,
checks and download path, and the binarizations."""

import gzip
import pathlib
import sys
import types

import jax
import numpy as np
import pytest

import gr_jax.data as gr_data
from gr_jax.data import idx_images

SHARED = pathlib.Path(__file__).resolve().parents[2] / "shared" / "data" / "fashion_mnist"


def _idx(images: np.ndarray) -> bytes:
  header = b"".join(int(v).to_bytes(4, "big") for v in (0x803, len(images), 28, 28))
  return header + images.astype(np.uint8).tobytes()


def _release(directory: pathlib.Path, train: np.ndarray, test: np.ndarray, compress=True):
  """A release's two image files (gzip-compressed or not) in ``directory``."""
  directory.mkdir(parents=True, exist_ok=True)
  for name, images in (("train-images-idx3-ubyte", train), ("t10k-images-idx3-ubyte", test)):
    data = _idx(images)
    if compress:
      (directory / f"{name}.gz").write_bytes(gzip.compress(data))
    else:
      (directory / name).write_bytes(data)


@pytest.fixture
def small_release(monkeypatch):
  """Releases of 60 / 10 images instead of 60,000 / 10,000 (train 50, valid 10)."""
  monkeypatch.setattr(idx_images, "IMAGE_COUNTS", {"train": 60, "test": 10})
  monkeypatch.setattr(idx_images, "NUM_TRAIN", 50)
  rng = np.random.default_rng(0)
  return rng.integers(0, 256, (60, 784)), rng.integers(0, 256, (10, 784))


@pytest.mark.parametrize("compress", [True, False])
def test_mnist_from_idx_files_split_as_the_protocol(tmp_path, small_release, compress):
  train, test = small_release
  _release(tmp_path / "mnist", train, test, compress)
  splits, source = gr_data.load("mnist", tmp_path / "mnist", cache_dir=tmp_path / "cache")
  assert source == str(tmp_path / "mnist")
  np.testing.assert_array_equal(splits["train"], train[:50])  # the first training images
  np.testing.assert_array_equal(splits["valid"], train[50:])  # the last
  np.testing.assert_array_equal(splits["test"], test)
  assert splits["train"].dtype == np.uint8


@pytest.mark.checks_data_content
@pytest.mark.parametrize("name, title", [("fashion_mnist", "Fashion-MNIST"), ("mnist", "MNIST")])
def test_files_are_checked_against_the_release(tmp_path, small_release, monkeypatch, name, title):
  """Other images under a dataset's name are refused in one line saying how to read a variant of
  one's own; that variable reads them."""
  train, test = small_release
  _release(tmp_path / "f", train, test)
  with pytest.raises(gr_data.InvalidDataError) as info:
    gr_data.load(name, tmp_path / "f", cache_dir=tmp_path / "cache")
  message = str(info.value)
  assert "\n" not in message and f"train-images-idx3-ubyte.gz does not hold {title}" in message
  assert f"set GR_JAX_UNVERIFIED_DATA={name} to read it unchecked" in message
  monkeypatch.setenv("GR_JAX_UNVERIFIED_DATA", name)
  splits, _ = gr_data.load(name, tmp_path / "f", cache_dir=tmp_path / "cache")
  np.testing.assert_array_equal(splits["test"], test)


@pytest.mark.checks_data_content
@pytest.mark.parametrize("name, folder", [("mnist", "fashion_mnist"), ("fashion_mnist", "mnist")])
def test_one_release_under_the_others_name_is_refused(name, folder):
  """dataset=mnist pointed at the Fashion-MNIST folder trained on Fashion-MNIST and recorded
  "mnist"."""
  directory = SHARED.parent / folder
  if not directory.is_dir():
    pytest.skip(f"needs {directory} (the real releases, beside the clone)")
  with pytest.raises(gr_data.InvalidDataError, match=f"does not hold .*recorded as {name}"):
    gr_data.load(name, directory)
  assert gr_data.load(folder, directory)[0]["train"].shape == (50_000, 784)


@pytest.mark.parametrize(
  "content,message",
  [
    (b"\x00\x00\x08\x01" + bytes(12), "is not an IDX image file"),
    (_idx(np.zeros((3, 784)))[:-5], "expected 3 images of 28x28"),
    (_idx(np.zeros((3, 784))), "3 images, the release's train file has 60"),
  ],
)
def test_bad_files_are_one_line(tmp_path, small_release, content, message):
  _release(tmp_path / "m", *small_release, compress=False)
  (tmp_path / "m" / "train-images-idx3-ubyte").write_bytes(content)
  with pytest.raises(gr_data.InvalidDataError, match=message) as info:
    gr_data.load("mnist", tmp_path / "m", cache_dir=tmp_path / "cache")
  assert "\n" not in str(info.value)


def test_offline_and_missing_is_one_line_saying_what_where_and_how(tmp_path, monkeypatch):
  monkeypatch.delenv(gr_data.DATA_ROOT_VARIABLE, raising=False)
  monkeypatch.setitem(sys.modules, "tensorflow_datasets", None)  # not installed
  with pytest.raises(gr_data.DataNotFoundError) as info:
    gr_data.load("fashion_mnist", tmp_path / "none", cache_dir=tmp_path / "c", download=True)
  message = str(info.value)
  assert "\n" not in message
  assert message.startswith(
    "Fashion-MNIST not found: looked for train-images-idx3-ubyte[.gz] and"
    f" t10k-images-idx3-ubyte[.gz] in {tmp_path / 'none'}, {tmp_path / 'c'}; the download failed"
    " (tensorflow-datasets is not installed"
  )
  assert "Point --config.data_dir" in message and "dataset-fashion-mnist" in message


def test_the_download_goes_through_tensorflow_datasets(tmp_path, small_release, monkeypatch):
  """A tfds-shaped stand-in (load + as_numpy, images [28, 28, 1]) takes the download path."""
  train, test = small_release
  asked = []

  def load(name, split, shuffle_files):
    asked.append((name, split, shuffle_files))
    images = {"train": train, "test": test}[split]
    return [{"image": image.reshape(28, 28, 1), "label": 0} for image in images]

  fake = types.SimpleNamespace(load=load, as_numpy=lambda rows: iter(rows))
  monkeypatch.setitem(sys.modules, "tensorflow_datasets", fake)
  monkeypatch.delenv(gr_data.DATA_ROOT_VARIABLE, raising=False)
  splits, source = gr_data.load("mnist", cache_dir=tmp_path / "cache", download=True)
  assert source == "tensorflow-datasets mnist"
  assert asked == [("mnist", "train", False), ("mnist", "test", False)]
  np.testing.assert_array_equal(splits["valid"], train[50:])


@pytest.mark.skipif(not SHARED.is_dir(), reason="the real Fashion-MNIST is in ../shared/data")
def test_the_real_fashion_mnist_loads_and_verifies():
  splits, _ = gr_data.load("fashion_mnist", SHARED)
  assert {k: v.shape for k, v in splits.items()} == {
    "train": (50_000, 784),
    "valid": (10_000, 784),
    "test": (10_000, 784),
  }
  # The release's mean pixel intensity / 255 (its data README): test 0.2868.
  assert splits["test"].mean() / 255 == pytest.approx(0.2868, abs=1e-4)


def test_fixed_binarization_is_seeded_and_dynamic_draws_the_grey_levels():
  grey = np.random.default_rng(1).integers(0, 256, (500, 784)).astype(np.uint8)
  once = idx_images.binarize(grey, 1)
  np.testing.assert_array_equal(once, idx_images.binarize(grey, 1))
  assert not np.array_equal(once, idx_images.binarize(grey, 2))
  assert set(np.unique(once)) == {0, 1}
  # Pixel means of a draw against the grey levels / 255: 392,000 Bernoulli pixels, each mean's
  # standard error <= 0.5 / sqrt(392000) < 8e-4; the pooled difference within 4e-3.
  for draw in (once, np.asarray(idx_images.binarize_batch(jax.random.key(0), grey))):
    assert abs(draw.mean() - grey.mean() / 255) < 4e-3
  fresh = [np.asarray(idx_images.binarize_batch(jax.random.key(k), grey)) for k in range(2)]
  assert not np.array_equal(*fresh)  # dynamic: another draw at every use
