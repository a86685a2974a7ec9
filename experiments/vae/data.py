"""The VAE experiment's data: a dataset by name (``gr_jax.data``), its binarization, its pixel
means.

``config.dataset``: ``binarized_mnist`` (already binary: the fixed binarization
of Salakhutdinov & Murray), ``fashion_mnist`` and ``mnist`` (grey-scale), or
``synthetic`` / ``synthetic_grey`` (small generated sets, for tests).
``config.binarization`` for the grey-scale sets: ``dynamic`` (the DisARM
protocol's: every training image is binarized afresh each time it is used,
inside the jitted loop from the member's data stream, so that a resumed run
draws what the uninterrupted one drew; the validation and test images once,
with the seeds of ``gr_jax.data.idx_images.BINARIZATION_SEEDS``) or ``fixed``
(every split once, with those seeds), or ``none`` (the grey levels / 255 as targets in [0, 1],
every split: GST's and ReinMax's protocol, for a model whose likelihood reads grey levels).
The binary sets take ``fixed`` only. ``config.train_split``: ``train`` (the first 50,000
images; the last 10,000 validate) or ``train+valid`` (all 60,000 train, GST's and ReinMax's
protocol, which has no validation split: the validation bound is then of trained images).
"""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp
import numpy as np
from ml_collections import ConfigDict

from experiments import config_checks
from gr_jax import data as datasets
from gr_jax.data import idx_images, mnist

# The image datasets of gr_jax.data (binary or grey-scale, as their entries say), and the tests'
# synthetic ones.
_IMAGES = [d for d in datasets.DATASETS.values() if d.images]
BINARY = (*(d.name for d in _IMAGES if not d.grey), "synthetic")
GREY = (*(d.name for d in _IMAGES if d.grey), "synthetic_grey")
DATASETS = BINARY + GREY
BINARIZATIONS = ("fixed", "dynamic", "none")
TRAIN_SPLITS = ("train", "train+valid")


@dataclasses.dataclass
class VAEData:
  """The splits as the experiment uses them.

  Attributes:
    train: uint8 ``[N, 784]``: 0/1, or grey levels 0..255 when ``dynamic``; float32 grey
      levels in [0, 1] when ``binarization="none"``.
    valid, test: uint8 0/1 ``[N, 784]`` (float32 in [0, 1] when ``binarization="none"``).
    pixel_means: ``[784]`` the training images' pixel probabilities (grey
      levels / 255 for grey-scale sets).
    dynamic: the training images are binarized afresh at every use.
    sources: split -> where it came from (config.json's ``data_used``).
  """

  train: np.ndarray
  valid: np.ndarray
  test: np.ndarray
  pixel_means: np.ndarray
  dynamic: bool
  sources: dict[str, str]


def check(config: ConfigDict) -> None:
  """The dataset and its binarization (ConfigError names the field)."""
  config_checks.require(config.dataset in DATASETS, "dataset", f"one of {DATASETS}", config.dataset)
  config_checks.require(
    config.binarization in BINARIZATIONS,
    "binarization",
    f"one of {BINARIZATIONS}",
    config.binarization,
  )
  config_checks.require(
    config.train_split in TRAIN_SPLITS, "train_split", f"one of {TRAIN_SPLITS}", config.train_split
  )
  if config.dataset in BINARY:
    config_checks.require(
      config.binarization == "fixed",
      "binarization",
      f"'fixed' for {config.dataset!r}, whose images are already binary (dynamic binarization"
      f" needs grey levels: one of {GREY})",
      config.binarization,
    )


def load(config: ConfigDict) -> VAEData:
  """The config's dataset, binarized as it says."""
  if config.dataset == "synthetic":
    splits, source = mnist.synthetic(), "synthetic data"
  elif config.dataset == "synthetic_grey":
    splits, source = idx_images.synthetic(), "synthetic grey-scale data"
  else:
    splits, source = datasets.load(
      config.dataset, config.data_dir or None, download=config.download
    )
  if config.train_split == "train+valid":
    splits = {**splits, "train": np.concatenate([splits["train"], splits["valid"]])}
  config_checks.require_batch_fits(config, len(splits["train"]), "training images")
  sources = {split: source for split in splits}
  if config.dataset in BINARY:
    return VAEData(
      **splits, pixel_means=splits["train"].mean(axis=0), dynamic=False, sources=sources
    )
  if config.binarization == "none":
    grey = {
      split: (images / np.float32(255.0)).astype(np.float32) for split, images in splits.items()
    }
    return VAEData(**grey, pixel_means=grey["train"].mean(axis=0), dynamic=False, sources=sources)
  seeds = idx_images.BINARIZATION_SEEDS
  dynamic = config.binarization == "dynamic"
  binarized = {
    split: images if split == "train" and dynamic else idx_images.binarize(images, seeds[split])
    for split, images in splits.items()
  }
  return VAEData(
    **binarized,
    pixel_means=splits["train"].mean(axis=0) / 255.0,
    dynamic=dynamic,
    sources=sources,
  )


def fixed_batch(data: VAEData, config: ConfigDict) -> jnp.ndarray:
  """The training batch the gradient measurements use: fixed rows, binarized once when the
  training images are grey."""
  rows = np.random.default_rng([config.seed, 1]).permutation(len(data.train))[: config.batch_size]
  images = data.train[rows]
  if data.dynamic:
    images = idx_images.binarize(images, idx_images.BINARIZATION_SEEDS["train"])
  return jnp.asarray(images, jnp.float32)
