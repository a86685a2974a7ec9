"""Input pipelines, and every dataset by name: ``load(name, ...)``.

Datasets (:data:`DATASETS`): ``binarized_mnist`` (:mod:`~gr_jax.data.mnist`),
``fashion_mnist`` and ``mnist`` (grey-scale, :mod:`~gr_jax.data.idx_images`,
with their binarizations), ``listops`` (its evaluation files,
:mod:`~gr_jax.data.listops`; training data is generated). :func:`load` finds a
dataset's files through one search order:

1. ``data_dir``;
2. ``$GR_JAX_DATA/<name>`` (a data root holding one directory per dataset,
   like the repository's ``../shared/data``);
3. ``cache_dir`` (default ``~/.cache/gr_jax/<name>``);
4. with ``download=True``, the dataset's download (where it has one), into
   the cache and verified before use.

Files that are found are checked (:class:`InvalidDataError` names the file and
the place); nothing found raises :class:`DataNotFoundError`, one line saying
what is missing, where it looked and how to get it.
"""

from __future__ import annotations

import os

from gr_jax.data import idx_images, listops, mnist
from gr_jax.data._common import (
  DATA_ROOT_VARIABLE,
  DataNotFoundError,
  Dataset,
  InvalidDataError,
  Splits,
  find,
)

DATASETS = {
  dataset.name: dataset
  for dataset in (mnist.DATASET, idx_images.FASHION_MNIST, idx_images.MNIST, listops.DATASET)
}


def load(
  name: str,
  data_dir: str | os.PathLike | None = None,
  *,
  cache_dir: str | os.PathLike | None = None,
  download: bool = False,
  **options,
) -> tuple[Splits, str]:
  """The dataset ``name``'s splits, and where they were found.

  Args:
    name: one of :data:`DATASETS`.
    data_dir: the first directory looked in (see the module docstring).
    cache_dir: the cache (default ``~/.cache/gr_jax/<name>``), where downloads go.
    download: fetch the dataset when it is not found locally (needs a network).
    **options: the dataset's own (ListOps: ``valid_file``, ``test_file``).

  Returns:
    ``(splits, source)``: ``{split: data}`` and the directory (or download) it
    came from.

  Raises:
    ValueError: an unknown name (listing the names).
    DataNotFoundError: nothing found.
    InvalidDataError: a file holds something else.
  """
  if name not in DATASETS:
    raise ValueError(f"unknown dataset {name!r}; the datasets are {', '.join(DATASETS)}.")
  return find(DATASETS[name], data_dir, cache_dir=cache_dir, download=download, **options)


__all__ = [
  "DATASETS",
  "DATA_ROOT_VARIABLE",
  "DataNotFoundError",
  "Dataset",
  "InvalidDataError",
  "load",
]
