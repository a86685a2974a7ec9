"""The loop's evaluator interface: when evaluators run, what the loop writes, what they keep."""

import gc
import json
import weakref

import jax.numpy as jnp
import numpy as np

from experiments import evaluators, population, search

_DATA = np.zeros((4, 3), np.float32)  # 2 steps per epoch of 2 examples; the data is unused


def _counting_task(num_steps: int) -> population.Task:
  """Each member's ``w`` counts the steps taken (so an evaluator can see which step it ran at)."""
  return population.Task(
    init_member=lambda key, hyperparameters, seed: {"w": jnp.zeros(())},
    train_step=lambda member, hyperparameters, batch, key, step: (
      {"w": member["w"] + 1.0},
      {"loss": member["w"]},
    ),
    train_data=_DATA,
    batch_size=2,
    num_steps=num_steps,
    records=lambda size: {"runs": np.zeros(size, np.int32)},
  )


class StepsSeen(evaluators.Evaluator):
  """Reports each member's step count and counts its own runs in the checkpointed records."""

  name = "steps seen"

  def run(self, step, state):
    return {"valid": {"w": np.asarray(state["members"]["w"])}}

  def update(self, state, values):
    return {**state, "records": {"runs": state["records"]["runs"] + 1}}


class BeforeTheEnd(StepsSeen):
  name = "before the end"
  at_last_step = False

  def run(self, step, state):
    return {"test": {"w": np.asarray(state["members"]["w"])}}

  def update(self, state, values):
    return state


def test_evaluators_run_when_due_and_the_loop_writes_and_keeps_what_they_return(tmp_path):
  members = [search.Member(i, i, {"learning_rate": 0.1}) for i in range(2)]
  trainer = population.Trainer(_counting_task(num_steps=10), members, "map")
  # Blocks of up to 100 steps: the loop must end blocks at the evaluators' steps by itself.
  run = population.Run(trainer, tmp_path, population.Schedule(100, 0, 0), {"note": "test"})
  state = run.train([StepsSeen(3), BeforeTheEnd(5), StepsSeen(0)])  # every 0: never
  run.close()
  lines = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
  seen = [(x["step"], x["split"], x["member"], x["w"]) for x in lines if x["split"] != "train"]
  # After step s each member has taken s steps; StepsSeen at 3, 6, 9; BeforeTheEnd at 5, not 10.
  assert seen == [
    (3, "valid", 0, 3.0),
    (3, "valid", 1, 3.0),
    (5, "test", 0, 5.0),
    (5, "test", 1, 5.0),
    (6, "valid", 0, 6.0),
    (6, "valid", 1, 6.0),
    (9, "valid", 0, 9.0),
    (9, "valid", 1, 9.0),
  ]
  np.testing.assert_array_equal(population.to_host(state["records"]["runs"]), [3, 3])


class FromTheStart(BeforeTheEnd):
  name = "from the start"
  at_last_step = True
  at_start = True


def test_an_evaluator_at_start_also_measures_the_untrained_state_of_a_new_run(tmp_path):
  members = [search.Member(0, 0, {"learning_rate": 0.1})]
  for num_steps, expected in ((4, [0, 4]), (8, [8])):  # the second run resumes at step 4
    trainer = population.Trainer(_counting_task(num_steps=num_steps), members, "map")
    run = population.Run(trainer, tmp_path, population.Schedule(100, 0, 4), {"note": "test"})
    run.train([FromTheStart(4)])
    run.close()
    lines = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    seen = [(x["step"], x["w"]) for x in lines if x["split"] == "test"]
    assert seen[-len(expected) :] == [(step, float(step)) for step in expected]


def test_the_default_summary_names_each_split_and_value():
  summary = StepsSeen(1).summary({"valid": {"w": np.array([1.0, 2.0, 3.0])}})
  assert summary == "valid w min 1.0000 median 2.0000 max 3.0000 (3 members)"


def test_a_progress_line_comes_even_when_log_every_exceeds_the_run(tmp_path, caplog, monkeypatch):
  """log_every beyond the run: a progress line after a block all the same once the last one is
  PROGRESS_EVERY_SECONDS old (here 0), while metrics.jsonl keeps only its intervals (the last
  step, always logged)."""
  monkeypatch.setattr(population.Run, "PROGRESS_EVERY_SECONDS", 0.0)
  members = [search.Member(0, 0, {"learning_rate": 0.1})]
  trainer = population.Trainer(_counting_task(num_steps=6), members, "map")
  run = population.Run(trainer, tmp_path, population.Schedule(2, 1000, 0), {}, log_names=("loss",))
  with caplog.at_level("INFO"):
    run.train()
  run.close()
  progress = [r.getMessage() for r in caplog.records if r.getMessage().startswith("step ")]
  assert [line.split()[1] for line in progress] == ["2/6", "4/6", "6/6"]
  lines = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
  assert [x["step"] for x in lines if x["split"] == "train"] == [6]


class StartStateReleased(evaluators.Evaluator):
  """Sees whether the state the run started from is still held anywhere, once a block has run."""

  name = "start state released"

  def __init__(self, every, start_state):
    super().__init__(every)
    self.start_state, self.released = start_state, []

  def run(self, step, state):
    gc.collect()
    self.released.append(self.start_state() is None)
    return {}


def test_the_loop_does_not_keep_the_state_it_started_from(tmp_path):
  members = [search.Member(0, 0, {"learning_rate": 0.1})]
  trainer = population.Trainer(_counting_task(num_steps=4), members, "map")
  run = population.Run(trainer, tmp_path, population.Schedule(100, 0, 0), {"note": "test"})
  evaluator = StartStateReleased(2, weakref.ref(run.state["members"]["w"]))
  run.train([evaluator])
  run.close()
  assert evaluator.released == [True, True]
