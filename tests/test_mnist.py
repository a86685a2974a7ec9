"""Tests of gr_jax.data.mnist: the three sources and the error when data is absent."""

import functools
import http.server
import pathlib
import re
import socket
import threading

import numpy as np
import pytest

import gr_jax.data as gr_data
from gr_jax.data import InvalidDataError, mnist


def _fake_splits(rng):
  return {
    s: (rng.random((n, 784)) < 0.2).astype(np.uint8) for s, n in zip(mnist.SPLITS, (30, 10, 10))
  }


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
  with pytest.raises(gr_data.DataNotFoundError) as info:
    mnist.load(str(tmp_path / "nowhere"), cache_dir=tmp_path / "cache")
  message = str(info.value)
  assert str(tmp_path / "nowhere") in message and str(tmp_path / "cache") in message
  assert "--config.data_dir" in message and "download" in message


def test_bad_shape_is_rejected(tmp_path):
  np.savez(
    tmp_path / mnist.NPZ_NAME,
    train=np.zeros((3, 10)),
    valid=np.zeros((3, 10)),
    test=np.zeros((3, 10)),
  )
  with pytest.raises(ValueError, match="784"):
    mnist.load(str(tmp_path), cache_dir=tmp_path / "cache")


def test_synthetic():
  data = mnist.load(synthetic_data=True)
  assert data["train"].shape == (200, 784) and set(np.unique(data["train"])) == {0, 1}


@pytest.mark.parametrize(
  "bad_value, dtype", [(0.5, np.float32), (0.9, np.float64), (2, np.uint8), (-1, np.int32)]
)
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
    np.savetxt(
      tmp_path / f"binarized_mnist_{s}.amat", images * (0.5 if s == "test" else 1.0), fmt="%g"
    )
  with pytest.raises(mnist.InvalidDataError, match="binarized_mnist_test.amat.*exactly 0 or 1"):
    mnist.load(str(tmp_path), cache_dir=tmp_path / "cache")


@pytest.fixture
def http_server(tmp_path):
  """A local HTTP server (loopback only) serving tmp_path/served; yields (directory, base URL)."""
  served = tmp_path / "served"
  served.mkdir()
  handler = functools.partial(QuietHandler, directory=str(served))
  server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
  thread = threading.Thread(target=server.serve_forever, daemon=True)
  thread.start()
  yield served, f"http://127.0.0.1:{server.server_address[1]}"
  server.shutdown()
  server.server_close()


class QuietHandler(http.server.SimpleHTTPRequestHandler):
  def log_message(self, *args):
    pass


def _serve_amat(served, splits):
  for s, images in splits.items():
    np.savetxt(served / f"binarized_mnist_{s}.amat", images, fmt="%d")


def test_download_verifies_caches_and_says_so(tmp_path, http_server, monkeypatch, caplog):
  served, base = http_server
  splits = _fake_splits(np.random.default_rng(4))
  _serve_amat(served, splits)
  monkeypatch.setattr(
    mnist, "EXPECTED", {s: (len(x), mnist.rows_digest(x)) for s, x in splits.items()}
  )
  url = base + "/binarized_mnist_{split}.amat"
  with caplog.at_level("INFO"):
    data = mnist.load(None, cache_dir=tmp_path / "cache", download=True, url=url)
  for s in mnist.SPLITS:
    np.testing.assert_array_equal(data[s], splits[s])
  assert any(
    "downloaded into" in r.getMessage() and "verified" in r.getMessage() for r in caplog.records
  )
  for f in served.iterdir():  # the next load reads the cache, not the network
    f.unlink()
  again = mnist.load(None, cache_dir=tmp_path / "cache", download=True, url=url)
  np.testing.assert_array_equal(again["test"], splits["test"])


def test_download_that_fails_its_checksum_is_rejected_and_deleted(
  tmp_path, http_server, monkeypatch
):
  served, base = http_server
  splits = _fake_splits(np.random.default_rng(5))
  monkeypatch.setattr(
    mnist, "EXPECTED", {s: (len(x), mnist.rows_digest(x)) for s, x in splits.items()}
  )
  splits["valid"][0, 0] ^= 1  # one flipped pixel on the server
  _serve_amat(served, splits)
  with pytest.raises(mnist.InvalidDataError, match="split 'valid' fails its checksum"):
    mnist.load(
      None, cache_dir=tmp_path / "cache", download=True, url=base + "/binarized_mnist_{split}.amat"
    )
  assert not list((tmp_path / "cache").glob("*.amat"))  # a later try downloads again


def test_offline_download_is_one_clear_error(tmp_path, monkeypatch):
  monkeypatch.delenv(gr_data.DATA_ROOT_VARIABLE, raising=False)
  with socket.socket() as s:  # a port with nothing listening
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
  with pytest.raises(gr_data.DataNotFoundError) as info:
    mnist.load(
      str(tmp_path / "none"),
      cache_dir=tmp_path / "cache",
      download=True,
      url=f"http://127.0.0.1:{port}/binarized_mnist_{{split}}.amat",
    )
  message = str(info.value)
  assert "\n" not in message and "the download failed" in message and "GR_JAX_DATA" in message
  assert str(tmp_path / "none") in message and str(tmp_path / "cache") in message


def test_data_root_from_the_environment(tmp_path, monkeypatch):
  splits = _fake_splits(np.random.default_rng(6))
  (tmp_path / "root" / "binarized_mnist").mkdir(parents=True)
  np.savez(tmp_path / "root" / "binarized_mnist" / mnist.NPZ_NAME, **splits)
  monkeypatch.setenv(gr_data.DATA_ROOT_VARIABLE, str(tmp_path / "root"))
  data = mnist.load(None, cache_dir=tmp_path / "cache")
  np.testing.assert_array_equal(data["train"], splits["train"])


def test_expected_checksums_match_the_shared_copy():
  """The digests in EXPECTED are those of the real data, when it is on this machine."""
  path = (
    pathlib.Path(__file__).resolve().parents[2] / "shared/data/binarized_mnist" / mnist.NPZ_NAME
  )
  if not path.is_file():
    pytest.skip(f"{path} is not on this machine (it is not part of the repository)")
  data = np.load(path)
  for s, (count, digest) in mnist.EXPECTED.items():
    assert len(data[s]) == count and mnist.rows_digest(data[s]) == digest


@pytest.mark.parametrize("damage", ["text", "truncated", "object"])
def test_a_bad_npz_container_is_one_error_naming_the_file(tmp_path, damage):
  path = tmp_path / "binarized_mnist.npz"
  if damage == "text":
    path.write_text("not an npz\n")
  elif damage == "truncated":
    splits = {s: np.zeros((2, 784), np.uint8) for s in ("train", "valid", "test")}
    np.savez(path, **splits)
    path.write_bytes(path.read_bytes()[:300])
  else:
    np.savez(
      path,
      train=np.array([{"a": 1}], dtype=object),
      valid=np.zeros((2, 784)),
      test=np.zeros((2, 784)),
    )
  with pytest.raises(InvalidDataError, match=rf"^{re.escape(str(path))} is not a readable npz"):
    mnist.load(str(tmp_path), download=False)


def test_an_empty_data_dir_that_falls_back_says_so(tmp_path, monkeypatch, caplog):
  root = tmp_path / "root"
  (root / "binarized_mnist").mkdir(parents=True)
  np.savez(root / "binarized_mnist" / mnist.NPZ_NAME, **_fake_splits(np.random.default_rng(0)))
  (tmp_path / "empty").mkdir()
  monkeypatch.setenv(gr_data.DATA_ROOT_VARIABLE, str(root))
  with caplog.at_level("INFO"):
    mnist.load(str(tmp_path / "empty"), download=False)
  messages = [r.getMessage() for r in caplog.records]
  assert (
    f"data_dir {tmp_path / 'empty'} holds no binarized MNIST; using the copy in"
    f" {root / 'binarized_mnist'}" in messages
  )
  assert f"binarized MNIST loaded from {root / 'binarized_mnist'}" in messages


def test_a_readable_npz_with_bad_pixels_keeps_its_own_message(tmp_path):
  """The container check must not swallow the pixel and split checks' messages (InvalidDataError is
  a ValueError)."""
  splits = {s: np.zeros((2, 784), np.uint8) for s in mnist.SPLITS}
  splits["train"][0, 0] = 2
  np.savez(tmp_path / mnist.NPZ_NAME, **splits)
  with pytest.raises(
    InvalidDataError, match=rf"^{re.escape(str(tmp_path / mnist.NPZ_NAME))}, split 'train': pixels"
  ):
    mnist.load(str(tmp_path), download=False)


@pytest.mark.parametrize(
  "content, reason",
  [(bytes(range(256)) * 4, "UnicodeDecodeError"), (b"0 1 0\n1 x 0\n", "could not convert")],
)
def test_an_amat_file_that_is_no_text_of_numbers_is_one_line(tmp_path, content, reason):
  for s in mnist.SPLITS:
    (tmp_path / f"binarized_mnist_{s}.amat").write_bytes(content)
  with pytest.raises(mnist.InvalidDataError) as info:
    mnist.load(str(tmp_path), cache_dir=tmp_path / "cache")
  message = str(info.value)
  assert "\n" not in message and reason in message
  assert message.startswith(f"{tmp_path / 'binarized_mnist_train.amat'} is not an .amat file")


@pytest.mark.checks_data_content
def test_local_files_are_checked_against_the_release(tmp_path, monkeypatch):
  """A binarized_mnist.npz of other images (e.g. a Fashion-MNIST binarization) is refused in one
  line, not trained on as binarized MNIST; the variable reads a variant of one's own."""
  np.savez(tmp_path / mnist.NPZ_NAME, **_fake_splits(np.random.default_rng(0)))
  with pytest.raises(mnist.InvalidDataError) as info:
    mnist.load(str(tmp_path), cache_dir=tmp_path / "cache")
  assert "\n" not in str(info.value) and "does not hold binarized MNIST" in str(info.value)
  assert "GR_JAX_UNVERIFIED_DATA=binarized_mnist" in str(info.value)
  monkeypatch.setenv("GR_JAX_UNVERIFIED_DATA", "binarized_mnist")
  assert mnist.load(str(tmp_path), cache_dir=tmp_path / "cache")["train"].shape == (30, 784)
