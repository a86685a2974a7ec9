"""One training loop for every experiment: a population of runs in one jitted program.

A *population* is a set of training runs (members) that share the program —
estimator, K, model widths, batch size — and differ in data: their seed and
their hyperparameters (``learning_rate``, ``momentum``, ``weight_decay``,
``tau``). The loop stacks the members' states on a leading member axis and runs
blocks of ``steps_per_call`` steps in one jitted ``lax.scan``; each member's
batches are gathered in the graph from its own per-epoch permutation of the
training set, which sits on the device once. Per step, the members go through
``jax.vmap`` (accelerators) or a sequential ``lax.map`` (the CPU, where XLA's
batched matmuls are slower than separate ones): ``population.vectorize``.
With several devices the member axis is split over them (``shard_map``); a
single member splits its batch over them instead (data parallel).

A member whose step gives a non-finite metric or state is frozen at its last
finite state and its divergence step recorded; the others go on. (While every
member is alive a block runs without the per-step select this takes, and runs
again from its start, guarded, if one of its steps was not finite.) Between
blocks the loop logs, runs the experiment's evaluators
(``experiments.evaluators``: validation bounds, accuracies, gradient-variance
measurements) and saves checkpoints; SIGINT / SIGTERM stop it with a
checkpoint, and a restarted run resumes exactly where it stopped.

Who the members are (the searches, the hyperparameters' rules) is
:mod:`experiments.search`; the experiments drive the loop through
:mod:`experiments.driver`.
"""

from __future__ import annotations

import dataclasses
import functools
import pathlib
import time
from typing import TYPE_CHECKING, Any, Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from absl import logging
from jax.sharding import Mesh, NamedSharding, PartitionSpec
from ml_collections import ConfigDict

from experiments import (
  bookkeeping,
  checkpoints,
  config_checks,
  provenance,
  rng,
  workdir,
)
from experiments.checkpoints import to_host
from experiments.search import Member
from experiments.workdir import require_workdir

if TYPE_CHECKING:
  from experiments.evaluators import Evaluator

AXIS = "devices"


@dataclasses.dataclass(frozen=True)
class Schedule:
  """When the loop returns to the host: blocks of up to ``steps_per_call`` steps, each ending at
  the next multiple of ``log_every`` and ``checkpoint_every`` (0 = off) and of every evaluator's
  ``every``."""

  steps_per_call: int
  log_every: int
  checkpoint_every: int

  @classmethod
  def from_config(cls, config: ConfigDict) -> Schedule:
    return cls(config.steps_per_call, config.log_every, config.checkpoint_every)


@dataclasses.dataclass
class Task:
  """What an experiment gives the loop.

  Attributes:
    init_member: ``(key, hyperparameters, seed) -> member state``, pure.
    train_step: ``(member state, hyperparameters, batch, key, step) -> (member
      state, metrics)`` for one member, pure; ``metrics`` is a dict of scalars
      (every one must be finite, else the member has diverged).
    train_data: a pytree of arrays whose leading axis is the training examples.
    batch_size: examples per step.
    num_steps: the run's length.
    records: ``size -> dict of arrays [size, ...]`` the experiment's evaluators
      keep in the checkpointed state (e.g. the best validation epoch), or None.
    prepare_batch: ``(batch, key) -> batch``, pure: random draws of a step's
      batch (dynamic binarization), from the member's ``rng.Stream.DATA_DRAWS``
      at that step; or None.
  """

  init_member: Callable[..., Any]
  train_step: Callable[..., tuple[Any, dict]]
  train_data: Any
  batch_size: int
  num_steps: int
  records: Callable[[int], dict] | None = None
  prepare_batch: Callable[[Any, jax.Array], Any] | None = None

  @property
  def num_examples(self) -> int:
    return len(jax.tree.leaves(self.train_data)[0])

  @property
  def steps_per_epoch(self) -> int:
    return self.num_examples // self.batch_size


class Trainer:
  """Trains the members of a population together; see the module docstring.

  The population state (what is checkpointed) is a dict:
    ``members``: the stacked member states (leading axis: member);
    ``hyperparameters``: ``{name: [P] float32}``; ``seed``: ``[P] int32``;
    ``alive``: ``[P] bool``; ``diverged_at``: ``[P] int32`` (-1 = never);
    ``records``: the experiment's arrays (``Task.records``).
  """

  def __init__(self, task: Task, chosen: Sequence[Member], vectorize: str = "auto"):
    """``vectorize``: "vmap", "map" or "auto" (``config.population.vectorize``, see the module
    docstring)."""
    self.task, self.chosen = task, list(chosen)
    self.size = len(self.chosen)
    devices = jax.devices()
    self.mesh = Mesh(np.array(devices), (AXIS,))
    self.member_sharded = len(devices) > 1 and self.size > 1
    if self.member_sharded and self.size % len(devices):
      raise config_checks.ConfigError(
        f"config.population.size: this job's {self.size} members do not divide evenly over its"
        f" {len(devices)} devices; use a multiple of {len(devices)} (or population.num_shards)."
      )
    self.data_parallel = len(devices) > 1 and self.size == 1
    if self.data_parallel and task.batch_size % len(devices):
      logging.warning(
        "batch_size %d does not divide over %d devices: the single member runs unsplit",
        task.batch_size,
        len(devices),
      )
      self.data_parallel = False
    if vectorize == "auto":
      vectorize = "map" if jax.default_backend() == "cpu" else "vmap"
    self.vectorize = vectorize
    replicated = NamedSharding(self.mesh, PartitionSpec())
    self._member_sharding = (
      NamedSharding(self.mesh, PartitionSpec(AXIS)) if self.member_sharded else replicated
    )
    self.train_data = jax.device_put(task.train_data, replicated)
    self._blocks = {}
    self._init = jax.jit(self.parallel(self._init_one), out_shardings=self._member_sharding)

  # -- vectorization over members ------------------------------------------------

  def over_members(self, fn: Callable) -> Callable:
    """``fn`` of one member's arguments, applied to stacked arguments (vmap or lax.map)."""
    if self.vectorize == "vmap":
      return jax.vmap(fn)
    return lambda *args: jax.lax.map(lambda a: fn(*a), args)

  def parallel(self, fn: Callable, shared: int = 0) -> Callable:
    """``fn(*member_args, *shared_args)`` applied to every member (not jitted).

    The first arguments carry a leading member axis; the last ``shared`` ones
    are the same for every member. With several devices the members are split
    over them; with one member, ``fn`` runs on its unstacked arguments.
    """

    def apply(*args):
      split = len(args) - shared
      member_args, shared_args = args[:split], args[split:]
      if self.size == 1:
        out = fn(*jax.tree.map(lambda a: a[0], member_args), *shared_args)
        return jax.tree.map(lambda a: a[None], out)
      return self.over_members(lambda *m: fn(*m, *shared_args))(*member_args)

    if not self.member_sharded:
      return apply

    def sharded(*args):
      specs = (PartitionSpec(AXIS),) * (len(args) - shared) + (PartitionSpec(),) * shared
      # Members are independent (no collectives): the per-device values need no varying-axis types.
      return jax.shard_map(
        apply, mesh=self.mesh, in_specs=specs, out_specs=PartitionSpec(AXIS), check_vma=False
      )(*args)

    return sharded

  # -- state -----------------------------------------------------------------------

  def _init_one(self, seed, hyperparameters):
    return self.task.init_member(rng.member_key(seed, rng.Stream.INIT), hyperparameters, seed)

  def init_state(self) -> dict:
    """The population state at step 0 (a function of the members' seeds and hyperparameters)."""
    names = list(self.chosen[0].hyperparameters)
    hyperparameters = {
      n: np.array([m.hyperparameters[n] for m in self.chosen], np.float32) for n in names
    }
    seed = np.array([m.seed for m in self.chosen], np.int32)
    put = lambda tree: jax.device_put(tree, self._member_sharding)
    records = self.task.records(self.size) if self.task.records else {}
    return {
      "members": self._init(put(seed), put(hyperparameters)),
      "hyperparameters": put(hyperparameters),
      "seed": put(seed),
      "alive": put(np.ones(self.size, bool)),
      "diverged_at": put(np.full(self.size, -1, np.int32)),
      "records": put(records),
    }

  # -- training --------------------------------------------------------------------

  def _member_block(
    self, member, hyperparameters, seed, alive, diverged_at, steps, train_data, *, guarded
  ):
    """One member's block of steps (a lax.scan): state, alive flag, divergence step, metrics.

    ``guarded``: a step whose metrics or new state are not finite leaves the member at its last
    finite state and frozen there. Unguarded, every step's state is kept, and the alive flag and
    divergence step say whether and where the guard would have frozen the member (the two agree
    up to that step).
    """
    task = self.task
    per_epoch, batch_size = task.steps_per_epoch, task.batch_size
    data_key = rng.member_key(seed, rng.Stream.DATA_ORDER)
    train_key = rng.member_key(seed, rng.Stream.TRAIN)
    draws_key = rng.member_key(seed, rng.Stream.DATA_DRAWS)
    permutation = lambda epoch: jax.random.permutation(
      jax.random.fold_in(data_key, epoch), task.num_examples
    )

    def body(carry, step):
      member, alive, diverged_at, order = carry
      epoch, index = jnp.divmod(step - 1, per_epoch)
      order = jax.lax.cond(
        (index == 0) & (step != steps[0]), lambda: permutation(epoch), lambda: order
      )
      rows = jax.lax.dynamic_slice_in_dim(order, index * batch_size, batch_size)
      if self.data_parallel:
        rows = jax.lax.with_sharding_constraint(rows, NamedSharding(self.mesh, PartitionSpec(AXIS)))
      batch = jax.tree.map(lambda a: jnp.take(a, rows, axis=0), train_data)
      if task.prepare_batch is not None:
        batch = task.prepare_batch(batch, jax.random.fold_in(draws_key, step))
      new, metrics = task.train_step(
        member, hyperparameters, batch, jax.random.fold_in(train_key, step), step
      )
      # The metrics describe the state before the step; the new state must be finite too, so that a
      # frozen member keeps a state that evaluates.
      checked = [
        *metrics.values(),
        *(a for a in jax.tree.leaves(new) if jnp.issubdtype(a.dtype, jnp.inexact)),
      ]
      finite = alive & jnp.all(jnp.stack([jnp.all(jnp.isfinite(v)) for v in checked]))
      if guarded:
        member = jax.tree.map(lambda n, o: jnp.where(finite, n, o), new, member)
      else:
        member = new
      diverged_at = jnp.where(alive & ~finite, step, diverged_at)
      return (member, finite, diverged_at, order), metrics

    order = permutation((steps[0] - 1) // per_epoch)
    (member, alive, diverged_at, _), metrics = jax.lax.scan(
      body, (member, alive, diverged_at, order), steps
    )
    return member, alive, diverged_at, metrics

  def _block(self, num_steps: int, guarded: bool):
    if (num_steps, guarded) not in self._blocks:
      run = self.parallel(functools.partial(self._member_block, guarded=guarded), shared=2)

      def block(state, first_step, train_data):
        steps = first_step + jnp.arange(num_steps)
        member, alive, diverged_at, metrics = run(
          state["members"],
          state["hyperparameters"],
          state["seed"],
          state["alive"],
          state["diverged_at"],
          steps,
          train_data,
        )
        return {**state, "members": member, "alive": alive, "diverged_at": diverged_at}, metrics

      # The unguarded block keeps its start state, which the guarded one replays.
      self._blocks[num_steps, guarded] = jax.jit(block, donate_argnums=0 if guarded else ())
    return self._blocks[num_steps, guarded]

  def run_block(self, state: dict, first_step: int, num_steps: int) -> tuple[dict, dict]:
    """Steps ``first_step .. first_step + num_steps - 1``; metrics ``{name: [P, num_steps]}``.

    While every member is alive the block runs unguarded, which saves a select over the whole
    state each step; if a member's step was not finite, the block is run again from its start
    state with the guard, so the result is the guarded block's either way.
    """
    first_step = jnp.asarray(first_step, jnp.int32)
    if to_host(state["alive"]).all():
      new_state, metrics = self._block(num_steps, guarded=False)(state, first_step, self.train_data)
      if to_host(new_state["alive"]).all():
        return new_state, metrics
    return self._block(num_steps, guarded=True)(state, first_step, self.train_data)


class Run:
  """The loop itself: blocks, logging, evaluators, checkpoints, stop signals.

  Construction resumes from the workdir's newest good checkpoint (or starts);
  :meth:`train` runs to ``task.num_steps``. ``described``: the run's settings,
  shown with the members' hyperparameters on TensorBoard; ``log_names``: the
  train metrics the progress lines show; ``metric_tags``: the TensorBoard tags
  the HParams plugin's table shows beside the hyperparameters.
  """

  def __init__(
    self,
    trainer: Trainer,
    path: pathlib.Path,
    schedule: Schedule,
    described: dict,
    log_names: Sequence[str] = (),
    metric_tags: Sequence[str] = (),
  ):
    self.trainer, self.path, self.schedule = trainer, path, schedule
    self.log_names = tuple(log_names)
    self._block = None  # (first step, last step) of the block being computed
    self._next_block = None  # the block that follows if the processes agree not to stop now
    self._last_progress = time.perf_counter()
    # From here on, SIGINT / SIGTERM stop with a checkpoint (and are answered at once).
    self.stop = bookkeeping.StopSignals(self._where, saved=lambda: workdir.has_checkpoint(path))
    self.checkpointer, self.writer, self.state, self.start = bookkeeping.start_or_resume(
      path, trainer.init_state()
    )
    if self.start:
      try:
        checkpoints.check_restored_members(self.state, trainer.chosen, path, self.start)
      except config_checks.ConfigError:
        self.close()
        raise
    self.segments = provenance.record_start(path, self.start)
    self.member_ids = [m.index for m in trainer.chosen]
    self.progress = bookkeeping.ProgressLogger(self.start, trainer.task.num_steps)
    self.last_step = self.start
    self.writer.describe_run(
      described,
      {m.index: {**m.hyperparameters, "seed": m.seed} for m in trainer.chosen},
      tuple(metric_tags),
    )
    self.train_seconds = (
      0.0  # this process's training (a resumed run's earlier sessions are not counted)
    )

  def train(self, evaluators: Sequence[Evaluator] = ()) -> dict:
    """Trains to ``task.num_steps`` (or until every member diverged), running each evaluator when
    it is due; returns the final state."""
    trainer, schedule = self.trainer, self.schedule
    last, state, step = trainer.task.num_steps, self.state, self.start
    # The loop holds the state from here on: kept here too, the state the run started or resumed
    # from would stay in memory through the whole run beside the current one.
    self.state = None
    t0 = time.perf_counter()
    # Blocks end where periodic work is due, and at every log_every step, so that the
    # console shows progress at the interval asked for.
    boundaries = [e.every for e in evaluators if e.every] + [
      e for e in (schedule.checkpoint_every, schedule.log_every) if e
    ]
    for evaluator in evaluators:
      if step == 0 and evaluator.at_start and evaluator.due(0, last):
        state = self._evaluate(evaluator, 0, state)
    while step < last:
      end = min(last, step + schedule.steps_per_call)
      for every in boundaries:
        end = min(end, (step // every + 1) * every)
      self._next_block = (step, end)
      if self.stop.requested:
        self.stop.stop(self.checkpointer, self.writer, step, state)
      if step == self.start:
        # Said after the first block's stop check: a signal seen after this line stops the run at
        # the block's end, never before its first step.
        self._announce()
      self._block = (step, end)
      state, metrics = trainer.run_block(state, step + 1, end - step)
      alive = to_host(state["alive"])
      require_workdir(self.path / provenance.SEGMENTS_FILE, end)
      self._log(step + 1, end, to_host(metrics), alive, schedule.log_every)
      step = end
      for evaluator in evaluators:
        if evaluator.due(step, last):
          state = self._evaluate(evaluator, step, state)
      if schedule.checkpoint_every and step % schedule.checkpoint_every == 0:
        self.checkpointer.save(step, state)
      if not alive.any():
        logging.error("every member diverged by step %d; stopping.", step)
        break
    self._block = self._next_block = None
    if self.stop.requested:  # a signal during the last block
      self.stop.stop(self.checkpointer, self.writer, step, state)
    self.checkpointer.save(step, state)
    self.state, self.last_step = state, step
    self.train_seconds = time.perf_counter() - t0
    return state

  def _announce(self) -> None:
    """Logs what the run trains: its members, how they are spread, its steps and blocks."""
    trainer = self.trainer
    devices = len(jax.devices())
    logging.info(
      "%d member%s (%s over members, %d device%s%s), steps %d..%d in blocks of up to %d",
      trainer.size,
      "s" * (trainer.size > 1),
      trainer.vectorize,
      devices,
      "s" * (devices > 1),
      ", data parallel" if trainer.data_parallel else "",
      self.start + 1,
      trainer.task.num_steps,
      self.schedule.steps_per_call,
    )

  def _evaluate(self, evaluator: Evaluator, step: int, state: dict) -> dict:
    """Runs ``evaluator``, writes and logs its values; returns the state it keeps its records in."""
    t0 = time.perf_counter()
    values = evaluator.run(step, state)
    for split, named in values.items():
      self.write(step, split, named)
    logging.info(
      "step %d %s: %s (%.0fs)",
      step,
      evaluator.name,
      evaluator.summary(values),
      time.perf_counter() - t0,
    )
    return evaluator.update(state, values)

  def _where(self) -> str:
    """Where a stop signal will stop the run (StopSignals' first answer)."""
    if self.stop.deciding and self._next_block is not None:
      # The job's processes are agreeing whether to stop before the next block, without this
      # signal: they stop after it.
      first, last = self._next_block
      eta = bookkeeping.duration(self.progress.seconds_to(last, first))
      return f" at step {last} (its end, ~{eta} after it begins)"
    if self._block is None:
      return " (between blocks, or at the final evaluation's next batch of images)"
    first, last = self._block
    eta = bookkeeping.duration(self.progress.seconds_to(last, first))
    return f" at step {last} (this block's end, ~{eta} after it began)"

  def record(self) -> dict:
    """results.json's record of the training: this process's wall time and the steps it covers;
    the code each segment of the steps was trained with."""
    return {
      "training_wall_time_s": round(self.train_seconds, 3),
      "training_wall_time_steps": [self.start, self.last_step],
      "code_segments": provenance.finished_segments(self.segments, self.last_step),
    }

  def check_stop(self) -> None:
    """After training (the final evaluation): raises Interrupted if SIGINT / SIGTERM arrived; the
    trained model's checkpoint is saved, so a rerun evaluates it again."""
    if self.stop.requested:
      self.close()
      raise bookkeeping.Interrupted(self.stop.agreed, self.last_step)

  # Logged at their value at the step; every other train metric is averaged over the
  # log_every steps up to it (one minibatch alone makes a noisy curve).
  POINT_METRICS = ("tau", "ema_grad_variance")  # an average over steps already (VAE)
  # A progress line at least this often while training, even between log_every steps.
  PROGRESS_EVERY_SECONDS = 30.0

  def _log(self, first: int, last: int, metrics: dict, alive: np.ndarray, every: int):
    steps = [
      s
      for s in range(first, last + 1)
      if (every and s % every == 0) or s == self.trainer.task.num_steps
    ]
    # Every multiple of log_every in the block is logged, so an interval starts here.
    previous = first - 1
    for step in steps:
      window = slice(previous - first + 1, step - first + 1)
      values = {
        k: v[:, step - first] if k in self.POINT_METRICS else v[:, window].mean(axis=1)
        for k, v in metrics.items()
      }
      for i, member in enumerate(self.member_ids):
        self.writer.write(step, "train", member=member, **{k: v[i] for k, v in values.items()})
      previous = step
    quiet = time.perf_counter() - self._last_progress > self.PROGRESS_EVERY_SECONDS
    if not steps and quiet:
      # log_every beyond this block (or the run): a progress line all the same, the block's means
      # (shown, not written: metrics.jsonl keeps its log_every intervals).
      values = {k: v.mean(axis=1) for k, v in metrics.items()}
    if steps or quiet:
      shown = {
        k: float(np.mean(values[k][alive])) if alive.any() else float("nan") for k in self.log_names
      }
      note = (
        f"{alive.sum()}/{len(alive)} members alive, their mean: " if self.trainer.size > 1 else ""
      )
      step = steps[-1] if steps else last
      rate = self.progress.log(step, note=note, **shown)
      if steps:
        self.writer.write_progress(step, rate)
      self._last_progress = time.perf_counter()

  def write(
    self, step: int, split: str, values: dict[str, np.ndarray], final: bool = False
  ) -> None:
    """One metrics line per member: ``values`` maps names to ``[P]`` arrays (``final``: see
    MetricsWriter.write)."""
    for i, member in enumerate(self.member_ids):
      self.writer.write(
        step, split, member=member, final=final, **{k: v[i] for k, v in values.items()}
      )

  def close(self) -> None:
    self.writer.close()
    self.checkpointer.close()
    self.stop.restore()
