"""Grey-scale 28x28 image datasets in the IDX format: Fashion-MNIST and MNIST; their binarizations.

``gr_jax.data.load("fashion_mnist", ...)`` and ``load("mnist", ...)`` look (the
search order of :mod:`gr_jax.data`) for the release's image files,
``train-images-idx3-ubyte`` and ``t10k-images-idx3-ubyte`` (gzip-compressed
with ``.gz``, or not), and return uint8 grey levels 0..255 ``[N, 784]``:

* ``train``: the first 50,000 training images; ``valid``: the last 10,000
  (tensorflow-datasets' ``train[:50000]`` / ``train[50000:]``, the split of the
  DisARM protocol's code); ``test``: the 10,000 test images.

Every file is checked (its IDX header, 28x28 images, the release's image
count) and against the sha256 of the release's decompressed files
(:data:`FASHION_MNIST_SHA256`, :data:`MNIST_SHA256`): one dataset's files under
the other's name are refused in one line (``$GR_JAX_UNVERIFIED_DATA=mnist``
reads a variant of one's own unchecked). With ``download=True``
and no files found, tensorflow-datasets' ``fashion_mnist`` / ``mnist`` (the
same split) is used when it is installed (``pip install gr_jax[tfds]``).

Binarization (:func:`binarize`): each pixel is 1 with probability its grey
level / 255. ``fixed``: once, with a documented seed per split
(:data:`BINARIZATION_SEEDS`), so that bounds are comparable across runs and
estimators; ``dynamic`` (the DisARM protocol's training data): a fresh draw
each time an image is used, which the experiments make inside their jitted
loop (:func:`binarize_batch`), the validation and test images binarized once.
"""

from __future__ import annotations

import gzip
import hashlib
import pathlib

import jax
import numpy as np

from gr_jax.data._common import (
  Dataset,
  DownloadFailed,
  InvalidDataError,
  not_the_release,
  unverified,
)

IMAGE_FILES = {"train": "train-images-idx3-ubyte", "test": "t10k-images-idx3-ubyte"}
IMAGE_COUNTS = {"train": 60_000, "test": 10_000}
NUM_TRAIN = 50_000  # the first 50,000 training images train; the last 10,000 validate
IMAGE_MAGIC = 0x00000803
# sha256 of Fashion-MNIST's decompressed image files (Xiao, Rasul & Vollgraf 2017).
FASHION_MNIST_SHA256 = {
  "train": "c59f468a2f672dc815687fe0f83887768d799fd8a3f3276145d20f83aa44d888",
  "test": "5b4141f0afbad91edebe8549f8fcffe087ea10ca49f1dbef5c9a5cd8815ce37b",
}
# sha256 of MNIST's decompressed image files (LeCun et al. 1998), as ../shared/data's README lists.
MNIST_SHA256 = {
  "train": "ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db",
  "test": "0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7",
}
# The fixed binarization's seed of each split (numpy's default_rng).
BINARIZATION_SEEDS = {"train": 0, "valid": 1, "test": 2}


def read_idx_images(path: pathlib.Path) -> tuple[np.ndarray, bytes]:
  """An IDX image file (gzip-compressed or not) as uint8 ``[N, rows * columns]``, and its
  decompressed bytes.

  Raises:
    InvalidDataError: not an IDX file of uint8 images (one line naming it).
  """
  try:
    raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
  except (OSError, EOFError, gzip.BadGzipFile) as e:
    raise InvalidDataError(f"{path} does not read ({type(e).__name__}: {e}).") from None
  if len(raw) < 16 or int.from_bytes(raw[:4], "big") != IMAGE_MAGIC:
    raise InvalidDataError(
      f"{path} is not an IDX image file: its header does not start with 0x{IMAGE_MAGIC:08x}."
    )
  count, rows, columns = (int.from_bytes(raw[4 * i : 4 * i + 4], "big") for i in (1, 2, 3))
  if (rows, columns) != (28, 28) or len(raw) != 16 + count * rows * columns:
    raise InvalidDataError(
      f"{path}: expected {count} images of 28x28 after the header, got {rows}x{columns} and"
      f" {len(raw) - 16} bytes."
    )
  return np.frombuffer(raw, np.uint8, offset=16).reshape(count, rows * columns), raw


def _find(directory: pathlib.Path, name: str) -> pathlib.Path | None:
  for candidate in (directory / f"{name}.gz", directory / name):
    if candidate.is_file():
      return candidate
  return None


def _split(train: np.ndarray, test: np.ndarray) -> dict[str, np.ndarray]:
  return {"train": train[:NUM_TRAIN], "valid": train[NUM_TRAIN:], "test": test}


def _reader(name: str, title: str, checksums: dict[str, str]):
  """Reads a directory holding a release's two image files (None when it does not), checked against
  the release's checksums (unless ``$GR_JAX_UNVERIFIED_DATA`` names the dataset)."""

  def read(directory: pathlib.Path) -> dict[str, np.ndarray] | None:
    paths = {split: _find(directory, name) for split, name in IMAGE_FILES.items()}
    if any(path is None for path in paths.values()):
      return None
    images = {}
    for split, path in paths.items():
      images[split], raw = read_idx_images(path)
      if len(images[split]) != IMAGE_COUNTS[split]:
        raise InvalidDataError(
          f"{path}: {len(images[split])} images, the release's {split} file has"
          f" {IMAGE_COUNTS[split]}."
        )
      digest = hashlib.sha256(raw).hexdigest()
      if digest != checksums[split] and not unverified(name):
        raise not_the_release(
          str(path),
          title,
          name,
          f"the sha256 of its decompressed {split} images is {digest[:16]}..., the release's"
          f" {checksums[split][:16]}...",
        )
    return _split(images["train"], images["test"])

  return read


def _tfds_download(name: str):
  def download(cache: pathlib.Path) -> tuple[dict[str, np.ndarray], str]:
    del cache  # tensorflow-datasets keeps its own
    try:
      import tensorflow_datasets as tfds  # optional extra: pip install gr_jax[tfds]
    except ImportError:
      raise DownloadFailed(
        "tensorflow-datasets is not installed (pip install gr_jax[tfds])"
      ) from None
    try:
      splits = {}
      for ours, theirs in (("train", "train"), ("test", "test")):
        rows = tfds.as_numpy(tfds.load(name, split=theirs, shuffle_files=False))
        splits[ours] = np.stack([row["image"].reshape(-1) for row in rows]).astype(np.uint8)
    except Exception as e:  # noqa: BLE001 - tfds raises many kinds without a network
      raise DownloadFailed(f"tensorflow-datasets {name}: {type(e).__name__}: {e}") from None
    for split, count in IMAGE_COUNTS.items():
      if splits[split].shape != (count, 784):
        raise InvalidDataError(
          f"tensorflow-datasets {name}: split {split!r} has shape {splits[split].shape},"
          f" expected ({count}, 784)."
        )
    return _split(splits["train"], splits["test"]), f"tensorflow-datasets {name}"

  return download


_FILES = "train-images-idx3-ubyte[.gz] and t10k-images-idx3-ubyte[.gz]"
FASHION_MNIST = Dataset(
  name="fashion_mnist",
  title="Fashion-MNIST",
  files=_FILES,
  read=_reader("fashion_mnist", "Fashion-MNIST", FASHION_MNIST_SHA256),
  download=_tfds_download("fashion_mnist"),
  how_to_get=(
    "The files are the Fashion-MNIST release's (Xiao, Rasul & Vollgraf 2017; Debian's package"
    " dataset-fashion-mnist ships them); the download goes through tensorflow-datasets."
  ),
  images=True,
  grey=True,
)
MNIST = Dataset(
  name="mnist",
  title="MNIST (grey-scale)",
  files=_FILES,
  read=_reader("mnist", "MNIST", MNIST_SHA256),
  download=_tfds_download("mnist"),
  how_to_get=(
    "The files are the MNIST release's (LeCun et al. 1998); the download goes through"
    " tensorflow-datasets. Binarized MNIST (fixed binarization) is the dataset binarized_mnist."
  ),
  images=True,
  grey=True,
)


def binarize(images: np.ndarray, seed: int) -> np.ndarray:
  """A fixed binarization of uint8 grey levels: pixel = 1 with probability level / 255
  (``numpy.random.default_rng(seed)``), uint8 0/1 of the same shape."""
  rng = np.random.default_rng(seed)
  return (rng.random(images.shape) < images / 255.0).astype(np.uint8)


def binarize_batch(key, images):
  """A fresh binarization of uint8 grey levels (traceable, for the training loop): float32 0/1,
  pixel = 1 with probability level / 255, drawn from ``key``."""
  probabilities = images.astype(np.float32) / 255.0
  return jax.random.bernoulli(key, probabilities).astype(np.float32)


def synthetic(num_train: int = 200, num_valid: int = 50, num_test: int = 50, seed: int = 0):
  """Random grey-scale images with some structure (two prototypes of grey levels plus noise), uint8
  ``[N, 784]``, for tests."""
  rng = np.random.default_rng(seed)
  prototypes = rng.random((2, 784)) ** 3 * 255.0

  def make(n):
    noise = rng.normal(0.0, 20.0, (n, 784))
    return np.clip(prototypes[rng.integers(0, 2, n)] + noise, 0, 255).astype(np.uint8)

  return {"train": make(num_train), "valid": make(num_valid), "test": make(num_test)}
