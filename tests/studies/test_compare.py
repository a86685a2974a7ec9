"""experiments/studies/compare.py on canned records: arms against their group's reference, paired
by seed, only at equal lengths unless a pair is declared."""

from experiments.studies import compare, runner
from tests.studies.canned import simple_run


def _readings(tmp_path, arms):
  study = runner.Study("s", tuple(arms), report=None)
  return runner.read(study, tmp_path / "out", tmp_path / "records")


def test_arms_pair_with_their_reference_only_at_its_length(tmp_path):
  simple_run(tmp_path / "records" / "ref", seeds=(0, 1))
  simple_run(tmp_path / "records" / "same", seeds=(0, 1))
  simple_run(tmp_path / "records" / "longer", seeds=(0, 1), steps=400)
  arms = [runner.Arm(n, "c", labels={"group": "g", "arm": n}) for n in ("ref", "same", "longer")]
  readings = _readings(tmp_path, arms)
  table, data = compare.bounds_table(readings)
  assert "| g | same | 2 seeds | 200 |" in table[3] and "0.00 ± 0.00 (lower on 0 of 2)" in table[3]
  assert table[4].endswith("| not compared (400 steps against 200) |")
  assert data[2]["minus_reference"] is None
  # Declared explicitly, the two lengths are compared (the question a residual account asks).
  lines = compare.pair_lines(readings, [("longer − ref", "ref", "longer")])
  assert lines == ["- longer − ref: 0.00 ± 0.00 (lower on 0 of 2) (by seed +0.00, +0.00)"]


def test_a_validation_bound_on_the_way_is_read_at_its_step(tmp_path):
  run = simple_run(tmp_path / "records" / "r", seeds=(0,))
  metrics = run / "metrics.jsonl"
  metrics.write_text(
    metrics.read_text() + '{"step": 100, "split": "valid", "member": 0, "nll": 105.5}\n'
  )
  readings = _readings(tmp_path, [runner.Arm("r", "c", labels={"group": "g", "arm": "r"})])
  assert compare.bound_at(readings.get("r"), "valid_nll", 100) == {0: 105.5}
