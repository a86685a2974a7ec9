"""A population's members: the searched hyperparameters and their rules, the searches, the slices.

A *member* is one run of a population (:mod:`experiments.population`): its
index in the whole population, its seed and its hyperparameters. The
hyperparameters a population may vary per member are data, not program:
:data:`HYPERPARAMETERS` states each one's rule once, and both the config's own
value (``config.learning_rate``) and the population's lists
(``config.population.learning_rate``) are checked against it.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from typing import Callable, Sequence

import numpy as np
from ml_collections import ConfigDict

from experiments import config_checks

SEARCHES = ("none", "paper", "lists")
VECTORIZE = ("auto", "vmap", "map")


@dataclasses.dataclass(frozen=True)
class Rule:
  """What a hyperparameter's value must be: ``allowed`` says it, ``test`` checks it (a float)."""

  allowed: str
  test: Callable[[float], bool]


# Every hyperparameter a population may vary per member, and its rule.
# The members train in float32: a value it rounds to 0 or to inf (tau = 1e-300, a learning rate of
# 1e39) is refused here rather than met as every member diverged at step 1.
_FLOAT32_TINY, _FLOAT32_MAX = float(np.finfo(np.float32).tiny), float(np.finfo(np.float32).max)
HYPERPARAMETERS = {
  "learning_rate": Rule(
    f"a number in [{_FLOAT32_TINY:.3g}, {_FLOAT32_MAX:.3g}] (float32, > 0)",
    lambda v: _FLOAT32_TINY <= v <= _FLOAT32_MAX,
  ),
  "momentum": Rule("a number in [0, 1)", lambda v: 0 <= v < 1),
  "weight_decay": Rule(
    f"0 or a number in [{_FLOAT32_TINY:.3g}, {_FLOAT32_MAX:.3g}] (float32)",
    lambda v: v == 0 or _FLOAT32_TINY <= v <= _FLOAT32_MAX,
  ),
  "tau": Rule(
    f"a number in [{_FLOAT32_TINY:.3g}, {_FLOAT32_MAX:.3g}] (float32, > 0)",
    lambda v: _FLOAT32_TINY <= v <= _FLOAT32_MAX,
  ),
}


@dataclasses.dataclass(frozen=True)
class Member:
  """One run of a population: its index in the whole population, seed and hyperparameters."""

  index: int
  seed: int
  hyperparameters: dict[str, float]
  draw: int | None = None  # the paper search's draw, when each draw has several seeds


# A paper search: (member index, search seed, config) -> (seed, hyperparameters).
PaperSearch = Callable[[int, int, ConfigDict], tuple[int, dict[str, float]]]


def check(config: ConfigDict, hyperparameters: Sequence[str]) -> None:
  """Checks the experiment's ``hyperparameters`` (the config's values), ``config.population`` and
  ``steps_per_call`` (ConfigError names the field)."""
  for field in hyperparameters:
    rule = HYPERPARAMETERS[field]
    config_checks.require(
      config_checks.is_number(config[field]) and rule.test(config[field]),
      field,
      rule.allowed,
      config[field],
    )
  pop = config.population
  config_checks.require_int(config, "steps_per_call", minimum=1)
  ok = isinstance(pop.size, int) and not isinstance(pop.size, bool) and pop.size >= 1
  config_checks.require(ok, "population.size", "an int >= 1", pop.size)
  config_checks.require(
    pop.search in SEARCHES, "population.search", f"one of {SEARCHES}", pop.search
  )
  config_checks.require(
    pop.vectorize in VECTORIZE, "population.vectorize", f"one of {VECTORIZE}", pop.vectorize
  )
  config_checks.require(
    config_checks.is_seed(pop.search_seed),
    "population.search_seed",
    config_checks.SEED_ALLOWED,
    pop.search_seed,
  )
  for field in (*HYPERPARAMETERS, "seed"):
    values = tuple(pop[field])
    if not values:
      continue
    config_checks.require(
      pop.search == "lists", f"population.{field}", "empty unless population.search='lists'", values
    )
    if field == "seed":
      config_checks.require(
        all(config_checks.is_seed(v) for v in values),
        "population.seed",
        f"a list of ints, each {config_checks.SEED_ALLOWED[3:]}",
        values,
      )
      continue
    config_checks.require(
      field in hyperparameters,
      f"population.{field}",
      f"empty: this experiment's hyperparameters are {tuple(hyperparameters)}",
      values,
    )
    rule = HYPERPARAMETERS[field]
    config_checks.require(
      all(config_checks.is_number(v) and rule.test(v) for v in values),
      f"population.{field}",
      f"a list of {rule.allowed}s",
      values,
    )
  seeds_per_draw = pop.get("seeds_per_draw", 1)
  config_checks.require(
    isinstance(seeds_per_draw, int)
    and not isinstance(seeds_per_draw, bool)
    and seeds_per_draw >= 1,
    "population.seeds_per_draw",
    "an int >= 1",
    seeds_per_draw,
  )
  if seeds_per_draw > 1:
    config_checks.require(
      pop.search == "paper",
      "population.seeds_per_draw",
      "1 unless population.search='paper' (the seeds of each of its draws)",
      seeds_per_draw,
    )
    config_checks.require(
      pop.size % seeds_per_draw == 0,
      "population.size",
      f"a multiple of population.seeds_per_draw = {seeds_per_draw} (draws x seeds)",
      pop.size,
    )
  if pop.search == "lists":
    lists = [tuple(pop[f]) for f in (*HYPERPARAMETERS, "seed")]
    combinations = math.prod(len(v) for v in lists if v)
    config_checks.require(
      any(lists),
      "population.search",
      "'none' or 'paper' when every population list is empty"
      " (with 'lists', give e.g. --config.population.learning_rate='(0.1,0.5)')",
      pop.search,
    )
    config_checks.require(
      pop.size in (1, combinations),
      "population.size",
      f"1 or {combinations} (the number of combinations of the lists)",
      pop.size,
    )
  size = population_size(config)
  config_checks.require(
    isinstance(pop.num_shards, int) and 1 <= pop.num_shards <= size,
    "population.num_shards",
    f"an int in [1, {size}] (the population's size)",
    pop.num_shards,
  )
  config_checks.require(
    isinstance(pop.shard_index, int) and 0 <= pop.shard_index < pop.num_shards,
    "population.shard_index",
    f"an int in [0, {pop.num_shards - 1}]",
    pop.shard_index,
  )


def population_size(config: ConfigDict) -> int:
  pop = config.population
  if pop.search == "lists":
    return math.prod(len(pop[f]) for f in (*HYPERPARAMETERS, "seed") if len(pop[f]))
  return pop.size


def members(
  config: ConfigDict, hyperparameters: Sequence[str], paper_search: PaperSearch
) -> list[Member]:
  """This job's members (all of them unless ``population.num_shards`` > 1).

  Member i of the whole population has a seed and hyperparameters that depend
  on i, the config and ``population.search_seed`` alone, so the slices of a job
  array together make up exactly the population a single job would train.
  """
  pop = config.population
  base = {name: float(config[name]) for name in hyperparameters}
  everyone = []
  if pop.search == "lists":
    fields = [f for f in (*HYPERPARAMETERS, "seed") if len(pop[f])]
    for index, values in enumerate(itertools.product(*(tuple(pop[f]) for f in fields))):
      chosen = dict(zip(fields, values))
      seed = int(chosen.pop("seed", config.seed))
      everyone.append(Member(index, seed, {**base, **{k: float(v) for k, v in chosen.items()}}))
  else:
    per_draw = pop.get("seeds_per_draw", 1)
    for index in range(pop.size):
      if pop.search == "paper" and per_draw > 1:
        draw, repeat = divmod(index, per_draw)
        seed, drawn = paper_search(draw, pop.search_seed, config)
        seed += repeat * (pop.size // per_draw)
        everyone.append(Member(index, seed, {**base, **drawn}, draw))
      elif pop.search == "paper":
        seed, drawn = paper_search(index, pop.search_seed, config)
        everyone.append(Member(index, seed, {**base, **drawn}))
      else:
        everyone.append(Member(index, config.seed + index, dict(base)))
  return list(np.array_split(np.array(everyone, dtype=object), pop.num_shards)[pop.shard_index])
