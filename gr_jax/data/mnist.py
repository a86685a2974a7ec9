"""Binarized MNIST (the fixed binarization of Salakhutdinov & Murray 2008).

Splits of Larochelle & Murray 2011: 50000 train, 10000 valid, 10000 test images
of 784 binary pixels. :func:`load` looks in three places, in order:

1. ``data_dir``: ``binarized_mnist.npz`` (keys ``train``/``valid``/``test``,
   uint8 0/1 of shape (N, 784)) or the three original
   ``binarized_mnist_{train,valid,test}.amat`` text files;
2. ``cache_dir`` (default ``~/.cache/gr_jax/binarized_mnist``), the same files,
   and, with ``download=True`` and a network, the original .amat files are
   downloaded there (or tensorflow-datasets' ``binarized_mnist`` is used when
   it is installed);
3. ``synthetic=True``: a small random dataset for tests, needing no files.

Nothing found raises :class:`DataNotFoundError` saying where it looked and how
to provide the data.
"""

from __future__ import annotations

import os
import pathlib
import urllib.request

import numpy as np

from gr_jax.data import InvalidDataError

SPLITS = ("train", "valid", "test")
NUM_PIXELS = 784
NPZ_NAME = "binarized_mnist.npz"
AMAT_URL = (
    "http://www.cs.toronto.edu/~larocheh/public/datasets/binarized_mnist/"
    "binarized_mnist_{split}.amat"
)
DEFAULT_CACHE = pathlib.Path(os.path.expanduser("~/.cache/gr_jax/binarized_mnist"))


class DataNotFoundError(FileNotFoundError):
  """The dataset is not in any of the places looked at."""


def _amat_name(split: str) -> str:
  return f"binarized_mnist_{split}.amat"


def _from_dir(directory: pathlib.Path) -> dict[str, np.ndarray] | None:
  npz = directory / NPZ_NAME
  if npz.is_file():
    with np.load(npz) as f:
      missing = [s for s in SPLITS if s not in f]
      if missing:
        raise InvalidDataError(f"{npz} lacks the splits {missing}; it must hold {list(SPLITS)}.")
      return {s: _check(np.asarray(f[s]), f"{npz}, split {s!r}") for s in SPLITS}
  if all((directory / _amat_name(s)).is_file() for s in SPLITS):
    return {s: _check(np.loadtxt(directory / _amat_name(s)), str(directory / _amat_name(s))) for s in SPLITS}
  return None


def _check(images: np.ndarray, where: str) -> np.ndarray:
  """The images as uint8, after checking their shape and that every pixel is exactly 0 or 1.

  A cast alone would turn 0.5 or 0.9 into 0 and train on blank images.
  """
  if images.ndim != 2 or images.shape[1] != NUM_PIXELS:
    raise InvalidDataError(f"{where}: expected 0/1 images of shape (N, {NUM_PIXELS}), got shape {images.shape}.")
  bad = (images != 0) & (images != 1)
  if bad.any():
    row, column = np.argwhere(bad)[0]
    raise InvalidDataError(
        f"{where}: pixels must be exactly 0 or 1 (binarized MNIST); image {row}, pixel {column}"
        f" is {images[row, column]!r} (dtype {images.dtype})."
    )
  return images.astype(np.uint8)


def _download_amat(cache_dir: pathlib.Path) -> None:
  cache_dir.mkdir(parents=True, exist_ok=True)
  for split in SPLITS:
    target = cache_dir / _amat_name(split)
    if not target.is_file():
      partial = target.with_suffix(".part")
      urllib.request.urlretrieve(AMAT_URL.format(split=split), partial)
      partial.rename(target)


def _from_tfds() -> dict[str, np.ndarray]:
  import tensorflow_datasets as tfds  # optional extra: pip install gr_jax[tfds]

  splits = {"train": "train", "valid": "validation", "test": "test"}
  return {
      ours: np.stack([ex["image"].reshape(-1) for ex in tfds.as_numpy(tfds.load("binarized_mnist", split=theirs))]).astype(np.uint8)
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
) -> dict[str, np.ndarray]:
  """Binarized MNIST as uint8 arrays ``{"train": (50000, 784), ...}``.

  Args:
    data_dir: a directory with ``binarized_mnist.npz`` or the three .amat files.
    cache_dir: where downloads go (default ``~/.cache/gr_jax/binarized_mnist``).
    download: fetch the data when it is not found locally (needs a network).
    synthetic_data: return :func:`synthetic` data instead (for tests).

  Raises:
    DataNotFoundError: nothing found (the message lists where it looked).
  """
  if synthetic_data:
    return synthetic()
  cache = pathlib.Path(cache_dir) if cache_dir else DEFAULT_CACHE
  looked = []
  for directory in ([pathlib.Path(data_dir)] if data_dir else []) + [cache]:
    looked.append(str(directory))
    found = _from_dir(directory)
    if found is not None:
      return found
  errors = []
  if download:
    try:
      return _from_tfds()
    except Exception as e:  # noqa: BLE001 - fall back to the .amat download
      errors.append(f"tensorflow-datasets: {type(e).__name__}: {e}")
    try:
      _download_amat(cache)
      return _from_dir(cache)
    except OSError as e:
      errors.append(f"download of {AMAT_URL.format(split='*')}: {e}")
  raise DataNotFoundError(
      f"binarized MNIST not found: looked for {NPZ_NAME} or "
      f"binarized_mnist_{{train,valid,test}}.amat in {', '.join(looked)}"
      + (f"; download failed ({'; '.join(errors)})" if errors else "; download is off")
      + ". Provide it with --config.data_dir=DIR (a directory holding those files), or set"
      " --config.download=True on a machine with a network."
  )
