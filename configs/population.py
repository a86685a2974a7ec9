"""The ``population`` sub-config of the VAE and ListOps configs (read by experiments/population)."""

import ml_collections


def population_config() -> ml_collections.ConfigDict:
  """The ``population`` sub-config, shared by the experiments' configs."""
  config = ml_collections.ConfigDict()
  config.size = 1
  # "none": size runs differing only in seed (seed, seed + 1, ...); "paper": the
  # paper's search (VAE: random draws from its appendix's sets; ListOps: its
  # learning-rate grid times seeds); "lists": every combination of the
  # non-empty lists below (size = 1 or the number of combinations).
  config.search = "none"
  config.search_seed = 0
  # With search="paper": each draw of the search trains with this many seeds (a spread per draw):
  # members d*k .. d*k+k-1 share draw d's hyperparameters, seeds seed + d + r*size/k (r < k).
  # size counts members: size / seeds_per_draw draws.
  config.seeds_per_draw = 1
  config.learning_rate = ()
  config.momentum = ()
  config.weight_decay = ()
  config.tau = ()
  config.seed = ()
  # Job arrays: this job trains the shard_index-th of num_shards contiguous slices of the
  # members (np.array_split: 4 members in 2 slices are 0-1 and 2-3).
  config.shard_index = 0
  config.num_shards = 1
  # "auto": a sequential lax.map over members on the CPU, jax.vmap elsewhere.
  config.vectorize = "auto"
  return config
