"""Binarized MNIST (the fixed binarization of Salakhutdinov & Murray 2008).

Splits of Larochelle & Murray 2011: 50000 train, 10000 valid, 10000 test images
of 784 binary pixels. ``gr_jax.data.load("binarized_mnist", ...)`` (or
:func:`load`) looks in the search order of :mod:`gr_jax.data` for
``binarized_mnist.npz`` (keys ``train``/``valid``/``test``, 0/1 values of shape
(N, 784)) or the three original ``binarized_mnist_{train,valid,test}.amat``
text files; with ``download=True`` (the configs' default) it then tries
tensorflow-datasets' ``binarized_mnist`` when it is installed, else the
original .amat files, downloaded into the cache and verified (split sizes and
the sha256 of the split's sorted, bit-packed rows, :data:`EXPECTED`) before use.

Every file is checked: shape (N, 784) and every pixel exactly 0 or 1
(:class:`~gr_jax.data.InvalidDataError`, naming the file, split and value).
Nothing found raises :class:`~gr_jax.data.DataNotFoundError` saying where it
looked and how to provide the data. ``synthetic=True`` gives a small random dataset for tests.
"""

from __future__ import annotations

import hashlib
import os
import pathlib
import shutil
import urllib.request
import zipfile

import numpy as np
from absl import logging

from gr_jax.data._common import (
  Dataset,
  DownloadFailed,
  InvalidDataError,
  default_cache,
  find,
  not_the_release,
  unverified,
)

SPLITS = ("train", "valid", "test")
NUM_PIXELS = 784
NPZ_NAME = "binarized_mnist.npz"
AMAT_URL = (
  "http://www.cs.toronto.edu/~larocheh/public/datasets/binarized_mnist/binarized_mnist_{split}.amat"
)
DEFAULT_CACHE = default_cache("binarized_mnist")
DOWNLOAD_TIMEOUT_SECONDS = 60  # per connection attempt or stalled read
# Per split: the number of images and the sha256 of its rows, bit-packed
# (np.packbits) and sorted, so that the check does not depend on row order or
# file format; measured on the copy whose file sha256 is 7a049ae3...3514b.
EXPECTED = {
  "train": (50_000, "aae6de292e6b68d898acf52062a1ac62907fc7ab417c59582d6523a1da0f9a61"),
  "valid": (10_000, "d10b4edf2e0765693846b51a5895f81f69fa37b6459b7f665bfa9c8cc9723622"),
  "test": (10_000, "87ff96664646cc41575aeb3ae4fbbabc1475ca3d42be4659d7a829d9f22c845a"),
}


DATASET_NAME = "binarized_mnist"


def _amat_name(split: str) -> str:
  return f"binarized_mnist_{split}.amat"


def _from_dir(directory: pathlib.Path) -> dict[str, np.ndarray] | None:
  """The splits of a directory's npz or .amat files, checked against the release's content
  (:data:`EXPECTED`) unless ``$GR_JAX_UNVERIFIED_DATA`` names binarized_mnist."""
  data = _read_dir(directory)
  if data is None or unverified(DATASET_NAME):
    return data
  mismatch = _mismatch(data)
  if mismatch:
    raise not_the_release(str(directory), "binarized MNIST", DATASET_NAME, mismatch)
  return data


def _read_dir(directory: pathlib.Path) -> dict[str, np.ndarray] | None:
  npz = directory / NPZ_NAME
  if npz.is_file():
    try:
      with np.load(npz, allow_pickle=False) as f:
        missing = [s for s in SPLITS if s not in f]
        if missing:
          raise InvalidDataError(f"{npz} lacks the splits {missing}; it must hold {list(SPLITS)}.")
        return {s: _check(np.asarray(f[s]), f"{npz}, split {s!r}") for s in SPLITS}
    except InvalidDataError:  # a readable npz holding the wrong arrays: its own message
      raise
    except (
      OSError,
      ValueError,
      EOFError,
      zipfile.BadZipFile,
    ) as e:  # not an npz, truncated, object arrays
      raise InvalidDataError(
        f"{npz} is not a readable npz of uint8 arrays ({type(e).__name__}: {e}); replace it"
        f" with a copy holding {list(SPLITS)}."
      ) from None
  if all((directory / _amat_name(s)).is_file() for s in SPLITS):
    return {
      s: _check(_read_amat(directory / _amat_name(s)), str(directory / _amat_name(s)))
      for s in SPLITS
    }
  return None


def _read_amat(path: pathlib.Path) -> np.ndarray:
  try:
    return np.loadtxt(path)
  except (ValueError, UnicodeDecodeError) as e:  # binary or damaged, or not numbers
    raise InvalidDataError(
      f"{path} is not an .amat file (text rows of 784 zeros and ones: {type(e).__name__}:"
      f" {str(e).splitlines()[0][:120]}); replace it with the original file."
    ) from None


def _check(images: np.ndarray, where: str) -> np.ndarray:
  """The images as uint8, after checking their shape and that every pixel is exactly 0 or 1.

  A cast alone would turn 0.5 or 0.9 into 0 and train on blank images.
  """
  if images.ndim != 2 or images.shape[1] != NUM_PIXELS:
    raise InvalidDataError(
      f"{where}: expected 0/1 images of shape (N, {NUM_PIXELS}), got shape {images.shape}."
    )
  bad = (images != 0) & (images != 1)
  if bad.any():
    row, column = np.argwhere(bad)[0]
    raise InvalidDataError(
      f"{where}: pixels must be exactly 0 or 1 (binarized MNIST); image {row}, pixel {column}"
      f" is {images[row, column]!r} (dtype {images.dtype})."
    )
  return images.astype(np.uint8)


def rows_digest(images: np.ndarray) -> str:
  """sha256 of the bit-packed rows in sorted order: a checksum independent of row order."""
  packed = np.ascontiguousarray(np.packbits(images.astype(np.uint8), axis=1))
  rows = np.sort(packed.view(np.dtype((np.void, packed.shape[1]))).ravel())
  return hashlib.sha256(rows.tobytes()).hexdigest()


def _mismatch(data: dict[str, np.ndarray]) -> str | None:
  """How the first split differs from EXPECTED (size, then checksum); None when none does."""
  for split, (count, digest) in EXPECTED.items():
    images = data[split]
    if len(images) != count:
      return f"split {split!r} has {len(images)} images, expected {count}"
    got = rows_digest(images)
    if got != digest:
      return (
        f"split {split!r} fails its checksum (sha256 of the sorted rows {got[:16]}..., expected"
        f" {digest[:16]}...)"
      )
  return None


def _verify(data: dict[str, np.ndarray], source: str) -> dict[str, np.ndarray]:
  """Checks downloaded splits against EXPECTED (size, then checksum)."""
  mismatch = _mismatch(data)
  if mismatch:
    raise InvalidDataError(f"{source}: {mismatch}.")
  return data


def _download_amat(cache_dir: pathlib.Path, url: str) -> dict[str, np.ndarray]:
  """Downloads the three .amat files into cache_dir, then loads and verifies them.

  Files that fail the checks are deleted, so that the next try downloads again.
  """
  cache_dir.mkdir(parents=True, exist_ok=True)
  for split in SPLITS:
    target = cache_dir / _amat_name(split)
    if not target.is_file():
      logging.info("downloading %s into %s", url.format(split=split), cache_dir)
      partial = target.with_suffix(".part")
      with urllib.request.urlopen(
        url.format(split=split), timeout=DOWNLOAD_TIMEOUT_SECONDS
      ) as response:
        with open(partial, "wb") as out:
          shutil.copyfileobj(response, out)
      partial.rename(target)
  try:
    data = _verify(_from_dir(cache_dir), url.format(split="*"))
  except InvalidDataError:
    for split in SPLITS:
      (cache_dir / _amat_name(split)).unlink(missing_ok=True)
    raise
  logging.info("binarized MNIST downloaded into %s and verified (sizes and checksums)", cache_dir)
  return data


def _from_tfds() -> dict[str, np.ndarray]:
  import tensorflow_datasets as tfds  # optional extra: pip install gr_jax[tfds]

  splits = {"train": "train", "valid": "validation", "test": "test"}
  return {
    ours: np.stack(
      [ex["image"].reshape(-1) for ex in tfds.as_numpy(tfds.load("binarized_mnist", split=theirs))]
    ).astype(np.uint8)
    for ours, theirs in splits.items()
  }


def synthetic(num_train: int = 200, num_valid: int = 50, num_test: int = 50, seed: int = 0):
  """Random binary images with some structure (two prototypes plus noise)."""
  rng = np.random.default_rng(seed)
  prototypes = rng.random((2, NUM_PIXELS)) < 0.3

  def make(n):
    which = rng.integers(0, 2, n)
    flips = rng.random((n, NUM_PIXELS)) < 0.05
    return (prototypes[which] ^ flips).astype(np.uint8)

  return {"train": make(num_train), "valid": make(num_valid), "test": make(num_test)}


def load(
  data_dir: str | None = None,
  *,
  cache_dir: str | os.PathLike | None = None,
  download: bool = False,
  synthetic_data: bool = False,
  url: str = AMAT_URL,
) -> dict[str, np.ndarray]:
  """Binarized MNIST as uint8 arrays ``{"train": (50000, 784), ...}``: :func:`load_with_source`'s
  data."""
  return load_with_source(
    data_dir, cache_dir=cache_dir, download=download, synthetic_data=synthetic_data, url=url
  )[0]


def _download(cache: pathlib.Path, url: str = AMAT_URL) -> tuple[dict[str, np.ndarray], str]:
  """tensorflow-datasets' copy when it is installed, else the .amat files (both verified)."""
  errors = []
  try:
    data = _verify(_from_tfds(), "tensorflow-datasets binarized_mnist")
    logging.info("binarized MNIST loaded from tensorflow-datasets and verified")
    return data, "tensorflow-datasets binarized_mnist"
  except ImportError:
    pass  # not installed: the .amat files
  except Exception as e:  # noqa: BLE001 - fall back to the .amat download
    errors.append(f"tensorflow-datasets: {type(e).__name__}: {e}")
  try:
    return _download_amat(cache, url), f"{url.format(split='*')} (cached in {cache})"
  except OSError as e:
    errors.append(f"{url.format(split='*')}: {getattr(e, 'reason', e)}")
  raise DownloadFailed("; ".join(errors))


DATASET = Dataset(
  name=DATASET_NAME,
  title="binarized MNIST",
  files=f"{NPZ_NAME} or binarized_mnist_{{train,valid,test}}.amat",
  read=lambda directory, url=AMAT_URL: _from_dir(directory),
  download=_download,
  images=True,
)


def load_with_source(
  data_dir: str | None = None,
  *,
  cache_dir: str | os.PathLike | None = None,
  download: bool = False,
  synthetic_data: bool = False,
  url: str = AMAT_URL,
) -> tuple[dict[str, np.ndarray], str]:
  """Binarized MNIST as uint8 arrays ``{"train": (50000, 784), ...}``, and where it was found.

  Looks in ``data_dir``, then ``$GR_JAX_DATA/binarized_mnist``, then the cache;
  then (``download=True``) tensorflow-datasets or the .amat files
  (``gr_jax.data.load("binarized_mnist", ...)``).

  Args:
    data_dir: a directory with ``binarized_mnist.npz`` or the three .amat files.
    cache_dir: where downloads go (default ``~/.cache/gr_jax/binarized_mnist``).
    download: fetch the data when it is not found locally (needs a network).
    synthetic_data: return :func:`synthetic` data instead (for tests).
    url: the .amat files' address, with ``{split}`` for the split name.

  Raises:
    DataNotFoundError: nothing found (the message lists where it looked).
    InvalidDataError: a file holds something else (named in the message).
  """
  if synthetic_data:
    return synthetic(), "synthetic data"
  return find(DATASET, data_dir, cache_dir=cache_dir, download=download, url=url)
