"""What every dataset shares: its errors, the data root variable and the one search order.

Part of :mod:`gr_jax.data` (its docstring states the search order).
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
from typing import Any, Callable

from absl import logging

DATA_ROOT_VARIABLE = "GR_JAX_DATA"  # a directory holding one directory per dataset, by name
# Dataset names (comma-separated, or "all") whose local files are read without checking that they
# are the dataset's release: for a variant of one's own under a dataset's name.
UNVERIFIED_VARIABLE = "GR_JAX_UNVERIFIED_DATA"
DEFAULT_CACHE_ROOT = pathlib.Path(os.path.expanduser("~/.cache/gr_jax"))

Splits = dict[str, Any]


def unverified(name: str) -> bool:
  """Whether ``$GR_JAX_UNVERIFIED_DATA`` waives the check of the dataset's known content."""
  names = {n.strip() for n in os.environ.get(UNVERIFIED_VARIABLE, "").split(",")}
  return name in names or "all" in names


def not_the_release(where: str, title: str, name: str, what: str) -> "InvalidDataError":
  """The one-line refusal of files that are not the dataset's release, with the way round it."""
  return InvalidDataError(
    f"{where} does not hold {title} ({what}): another dataset's files under its name would train"
    f" and be recorded as {name}. For a variant of your own, set {UNVERIFIED_VARIABLE}={name} to"
    " read it unchecked."
  )


class InvalidDataError(ValueError):
  """A data file was found but does not hold what it should; the message names the file and the
  place."""


class DataNotFoundError(FileNotFoundError):
  """The dataset is not in any of the places looked at (the message lists them)."""


class DownloadFailed(OSError):
  """A dataset's download did not work (no network, a server error); the message says why."""


@dataclasses.dataclass(frozen=True)
class Dataset:
  """A dataset that :func:`gr_jax.data.load` finds by name.

  Attributes:
    name: its name, and the name of its directory under ``$GR_JAX_DATA`` and
      the cache.
    title: how messages name it ("binarized MNIST").
    files: the files a directory must hold, for the not-found message (or a
      function of the options that says them).
    read: ``(directory, **options) -> splits``, or None when the directory
      does not hold the files; raises InvalidDataError for files that hold
      something else.
    download: ``(cache_dir, **options) -> (splits, source)`` with a network,
      verified before use; raises DownloadFailed. None: no download.
    how_to_get: a sentence for the not-found message, where to get the files.
    images: its splits are 28x28 images ``[N, 784]`` (the VAE's datasets).
    grey: the images are grey levels 0..255, binarized before use (else already 0/1).
  """

  name: str
  title: str
  files: str | Callable[..., str]
  read: Callable[..., Splits | None]
  download: Callable[..., tuple[Splits, str]] | None = None
  how_to_get: str = ""
  images: bool = False
  grey: bool = False


def default_cache(name: str) -> pathlib.Path:
  return DEFAULT_CACHE_ROOT / name


def find(
  dataset: Dataset,
  data_dir: str | os.PathLike | None = None,
  *,
  cache_dir: str | os.PathLike | None = None,
  download: bool = False,
  **options,
) -> tuple[Splits, str]:
  """The dataset's splits and where they were found, through the one search order.

  Raises:
    DataNotFoundError: nothing found (one line: what is missing, where it
      looked, how to get it).
    InvalidDataError: a file holds something else.
  """
  cache = pathlib.Path(cache_dir) if cache_dir else default_cache(dataset.name)
  files = dataset.files(**options) if callable(dataset.files) else dataset.files
  if data_dir and pathlib.Path(data_dir).exists() and not pathlib.Path(data_dir).is_dir():
    raise DataNotFoundError(
      f"data_dir {data_dir} is a file, not a directory: point --config.data_dir (data_dir in"
      f" Python) at the directory holding {dataset.title}'s {files}."
    )
  candidates = [pathlib.Path(data_dir)] if data_dir else []
  if os.environ.get(DATA_ROOT_VARIABLE):
    candidates.append(pathlib.Path(os.environ[DATA_ROOT_VARIABLE]) / dataset.name)
  candidates.append(cache)
  looked = []
  for directory in candidates:
    looked.append(str(directory))
    found = dataset.read(directory, **options)
    if found is not None:
      if data_dir and directory != candidates[0]:
        logging.warning(
          "data_dir %s holds no %s; using the copy in %s", data_dir, dataset.title, directory
        )
      logging.info("%s loaded from %s", dataset.title, directory)
      # Absolute: a record that reads from any working directory (a notebook's is notebooks/).
      return found, str(directory.resolve())
  if dataset.download is None:
    fetched = "; it has no download"
  elif not download:
    fetched = "; download is off"
  else:
    try:
      return dataset.download(cache, **options)
    except DownloadFailed as e:
      fetched = f"; the download failed ({e})"
  where = f"the environment variable {DATA_ROOT_VARIABLE}, a directory holding {dataset.name}/"
  allow = (
    ", or run with a network and --config.download=True (download=True in Python)"
    if dataset.download is not None
    else ""
  )
  raise DataNotFoundError(
    f"{dataset.title} not found: looked for {files} in {', '.join(looked)}{fetched}."
    f" Point --config.data_dir (data_dir in Python; or {where}) at a local copy{allow}."
    + (f" {dataset.how_to_get}" if dataset.how_to_get else "")
  )
