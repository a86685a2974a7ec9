"""experiments/studies/leaderboard.py on canned records whose table is worked out by hand below,
and docs/leaderboard.md regenerated from the committed records."""

import json

from experiments.studies import leaderboard, page, runner
from tests.cli import ROOT
from tests.studies.canned import simple_run, write_run


def _arm(setting, row):
  return runner.Arm(f"{setting}/{row}", "unused.py", labels={"setting": setting, "row": row})


def _page(tmp_path, arms, variance_steps=(100, -1)):
  study = runner.Study("leaderboard", tuple(arms), report=lambda r: None)
  readings = runner.read(study, tmp_path / "out", tmp_path / "records")
  bench = tmp_path / "bench.json"
  bench.write_text(
    json.dumps(
      [
        {"model": "bernoulli_nonlinear", "row": f"B=50 {name}", "ms": ms, "device": "cpu (cpu)"}
        for name, ms in (
          ("disarm", 2.0),
          ("rloo2", 2.0),
          ("gr_mc10", 4.0),
          ("reinmax", 2.0),
          ("st_gs", 4.0),
        )
      ]
    )
  )
  footer = ["", "Nothing of theirs is typed in by hand."]
  return leaderboard.report(readings, ["# title"], footer, str(bench), variance_steps).markdown


def test_the_table_and_the_paired_claims(tmp_path):
  setting = tmp_path / "records" / "nonlinear_fashion_mnist"
  rows = {
    "disarm": [
      (0, {100: 110.0, 200: 100.0}, {0: 3.0, 100: 2.0, 200: 1.0}, 99.0, 98.0),
      (1, {100: 112.0, 200: 102.0}, {0: 3.0, 100: 2.0, 200: 1.2}, 101.0, 100.0),
    ],
    "rloo2": [
      (0, {100: 111.0, 200: 101.0}, {0: 3.0, 100: 2.5, 200: 1.5}, 100.0, 99.0),
      (1, {100: 113.0, 200: 104.0}, {0: 3.0, 100: 2.5, 200: 1.5}, 103.0, 101.0),
    ],
    "gr_mc10": [
      (0, {100: 105.0, 200: 95.0}, {0: 2.0, 100: 1.0, 200: 0.5}, 96.0, 95.0),
      (1, {100: 107.0, 200: 97.0}, {0: 2.0, 100: 1.0, 200: 0.7}, 98.0, 97.0),
    ],
    "st_gs": [
      (0, {100: 106.0, 200: 96.0}, {}, 96.5, 95.5),
      (1, {100: 108.0, 200: 98.0}, {}, 98.5, 97.5),
    ],
  }
  for row, members in rows.items():
    write_run(setting / row, members, estimator=row)
  # A row at a temperature other than the setting's is labelled with its own.
  write_run(
    setting / "reinmax_tau1.1",
    [(0, {100: 108.0, 200: 99.0}, {}, 97.0, 96.0), (1, {100: 110.0, 200: 101.0}, {}, 99.0, 98.0)],
    estimator="reinmax",
    tau=1.1,
  )
  arms = [_arm("nonlinear_fashion_mnist", row) for row in [*rows, "reinmax_tau1.1"]]
  text = _page(tmp_path, arms)
  # disarm: train 100, 102; test 99, 101; IWAE-1000 98, 100; Var at 100: 2, 2; at 200: 1, 1.2.
  assert (
    "| disarm | 2 | 200 | 2 | 101.00 ± 1.41 | 100.00 ± 1.41 | 99.00 ± 1.41 | 2.00 ± 0.00 |"
    " 1.10 ± 0.14 | 2.00 |"
  ) in text
  assert "ms / step: `scripts/bench_vae.py` on cpu (cpu)." in text
  # The setting's temperature is most rows' (1.0); the ReinMax row names its own.
  assert "prior 0.01), τ 1.0." in text
  assert (
    "| reinmax (τ 1.1) | 1 | 200 | 2 | 100.00 ± 1.41 | 98.00 ± 1.41 | 97.00 ± 1.41 | - | - | 2.00 |"
  ) in text
  assert "| gr_mc10 | 1 | 200 | 2 | 96.00 ± 1.41 | 97.00 ± 1.41 | 96.00 ± 1.41 |" in text
  # DisARM - RLOO-2 by seed: Var at 100: -0.5, -0.5; at 200: -0.5, -0.3; train -1, -2; test -1, -2.
  assert "log10 Var -0.50 ± 0.00 at 100, -0.40 ± 0.14 at 200" in text
  assert "(DisARM's lower at 4 of the 4 (seed, step) pairs)" in text
  assert "train −ELBO -1.50 ± 0.71; test IWAE-100 -1.50 ± 0.71" in text
  # Equal evaluations: 200 x 1 (GR-MC10) against 200 x 2: every one read at 200 evaluations, i.e.
  # DisARM and RLOO-2 at step 100, GR-MC10 at step 200.
  assert "(200 each" in text
  assert (
    "disarm 111.00 ± 1.41; gr_mc10 96.00 ± 1.41; reinmax_tau1.1 100.00 ± 1.41; rloo2 112.00"
  ) in text
  # Equal wall time: min(200 x 2 ms x 3, 200 x 4 ms) = 0.4 s: GR-MC10 at step 100.
  assert "equal wall time (0.40 s" in text
  assert "gr_mc10 106.00 ± 1.41" in text.split("equal wall time")[1]
  # GR-MC10 against each unbiased estimator, by seed, at both budgets. Equal evaluations: GR at
  # step 200 (95, 97), RLOO-2 at 100 (111, 113), DisARM at 100 (110, 112); equal wall time: GR at
  # step 100 (105, 107), RLOO-2 at 200 (101, 104), DisARM at 200 (100, 102).
  assert (
    "gr_mc10 against the unbiased estimators, train −ELBO paired by seed:"
    " gr_mc10 − rloo2 -16.00 ± 0.00 at equal loss evaluations;"
    " gr_mc10 − rloo2 3.50 ± 0.71 at equal wall time;"
    " gr_mc10 − disarm -15.00 ± 0.00 at equal loss evaluations;"
    " gr_mc10 − disarm 5.00 ± 0.00 at equal wall time (negative: GR lower)."
  ) in text
  # Test bounds by seed: disarm 99, 101; gr_mc10 96, 98 (the lowest mean); reinmax 97, 99;
  # rloo2 100, 103; st_gs 96.5, 98.5.
  assert (
    "Test IWAE-100 by seed (0, 1), against DisARM: gr_mc10 − disarm -3.00, -3.00 (gr_mc10 lower"
    " on 2 of 2); reinmax_tau1.1 − disarm -2.00, -2.00 (reinmax_tau1.1 lower on 2 of 2);"
    " rloo2 − disarm +1.00, +2.00 (rloo2 lower on 0 of 2); st_gs − disarm -2.50, -2.50"
  ) in text
  assert (
    "the lowest (gr_mc10) against the others: gr_mc10 − disarm -3.00, -3.00 (gr_mc10 lower on 2"
    " of 2); gr_mc10 − reinmax_tau1.1 -1.00, -1.00 (gr_mc10 lower on 2 of 2); gr_mc10 − rloo2"
    " -4.00, -5.00 (gr_mc10 lower on 2 of 2); gr_mc10 − st_gs -0.50, -0.50"
  ) in text
  assert "GR against ST-GS: gr_mc10 − st_gs -0.50, -0.50 (gr_mc10 lower on 2 of 2)." in text
  assert "Nothing of theirs is typed in by hand" in text


def test_rows_of_other_lengths_or_seeds_are_shown_but_not_compared(tmp_path):
  """A 300-step, one-seed test row was paired against the 100,000-step rows ("gr_exact - st_gs
  -88.40"): now it is listed as not compared, and no claim line names it."""
  setting = tmp_path / "records" / "s"
  for row in ("disarm", "rloo2", "st_gs"):
    simple_run(setting / row, estimator=row)
  simple_run(setting / "gr_exact", seeds=(0,), steps=300, estimator="gr_exact")
  text = _page(tmp_path, [_arm("s", r) for r in ("disarm", "rloo2", "st_gs", "gr_exact")])
  assert "| gr_exact | 1 | 300 | 1 |" in text
  assert (
    "Not compared below (not of the setting's 200 steps and seeds [0, 1]): gr_exact (300" in text
  )
  claims = text.split("Not compared below")[1].split("\n", 1)[1]
  assert "gr_exact" not in claims


def test_a_row_the_bench_has_not_timed_leaves_only_its_own_wall_time_reading(tmp_path):
  """An untimed row (st_gs_x2, kept before the bench timed it) took the equal-wall-time line and
  every GR row's wall-time pairing off the page: now only that row leaves them, named."""
  setting = tmp_path / "records" / "s"
  for row in ("disarm", "rloo2", "gr_mc10", "st_gs_x2"):
    simple_run(setting / row, estimator=row)
  text = _page(tmp_path, [_arm("s", r) for r in ("disarm", "rloo2", "gr_mc10", "st_gs_x2")])
  assert "| st_gs_x2 | 2 | 200 | 2 |" in text
  # min(200 x 2 ms, 200 x 4 ms) = 0.4 s: DisARM and RLOO-2 at step 200 (100, 101), GR-MC10 at
  # step 100 (110, 111).
  assert (
    "Train −ELBO at equal wall time (0.40 s of training steps at the bench's ms per step,"
    " cpu (cpu)): disarm 100.50 ± 0.71; gr_mc10 110.50 ± 0.71; rloo2 100.50 ± 0.71;"
    " not timed by the bench: st_gs_x2."
  ) in text
  assert "gr_mc10 − disarm 10.00 ± 0.00 at equal wall time" in text


def test_a_setting_with_one_row_kept_has_no_empty_pair_lines(tmp_path):
  """Non-linear dynamic MNIST with only DisARM kept printed "Test IWAE-100 by seed (0, 1, 2),
  against DisARM: ." and the same for the lowest row: a line needs a pair."""
  simple_run(tmp_path / "records" / "s" / "disarm", estimator="disarm")
  text = _page(tmp_path, [_arm("s", "disarm")])
  assert "| disarm | 2 | 200 | 2 |" in text
  assert "by seed" not in text


def test_an_averaged_gr_row_is_paired_with_the_averaged_st_gs_row(tmp_path):
  """gr_mc10_x2 (two draws a step) against ST-GS of one draw would mix budgets: it is paired with
  st_gs_x2, the single-draw GR row with st_gs."""
  setting = tmp_path / "records" / "s"
  rows = ("disarm", "st_gs", "st_gs_x2", "gr_mc10", "gr_mc10_x2")
  for row in rows:
    simple_run(setting / row, estimator=row)
  text = _page(tmp_path, [_arm("s", r) for r in rows])
  line = next(x for x in text.splitlines() if "GR against ST-GS" in x)
  assert "gr_mc10 − st_gs +0.00, +0.00" in line and "gr_mc10_x2 − st_gs_x2 +0.00, +0.00" in line
  assert "gr_mc10_x2 − st_gs " not in line


def test_the_disarm_codes_variance_column_is_shown_where_the_settings_runs_log_it(tmp_path):
  """A setting whose runs log ema_grad_variance (variance_ema_decay > 0) gets the DisARM code's
  column beside the trace column, log10 at the same steps; a row that did not log it reads "-",
  and a setting where no run logs it has no such column."""
  for setting in ("logged", "not_logged"):
    for row in ("disarm", "st_gs"):
      simple_run(tmp_path / "records" / setting / row, estimator=row)
  metrics = tmp_path / "records/logged/disarm/metrics.jsonl"
  ema = [
    {"step": step, "split": "train", "member": member, "ema_grad_variance": value}
    for step, member, value in ((100, 0, 100.0), (100, 1, 100.0), (200, 0, 10.0), (200, 1, 1000.0))
  ]
  metrics.write_text(metrics.read_text() + "".join(json.dumps(x) + "\n" for x in ema))
  arms = [_arm(s, r) for s in ("logged", "not_logged") for r in ("disarm", "st_gs")]
  logged, not_logged = _page(tmp_path, arms).split("## ")[1:3]
  assert (
    "| log10 Var at 100 | log10 Var at end | log10 EMA Var at 100 | log10 EMA Var at end |"
    in (logged)
  )
  # log10 of 100, 100 at step 100; of 10 and 1000 at the end (mean 2, sd sqrt(2)).
  assert "| disarm | 2 | 200 | 2 | 100.50 ± 0.71 | 100.50 ± 0.71 | 99.50 ± 0.71 | - | - |" in logged
  assert "| - | - | 2.00 ± 0.00 | 2.00 ± 1.41 | 2.00 |" in logged
  assert (
    "| st_gs | 1 | 200 | 2 | 100.50 ± 0.71 | 100.50 ± 0.71 | 99.50 ± 0.71 | - | - | - | - |"
    in (logged)
  )
  assert "EMA" not in not_logged


def test_a_relaxed_rows_training_objective_is_marked_and_read_at_no_budget(tmp_path):
  """GS trains on its relaxed objective (the decoder at the relaxed sample), not the discrete
  bound of the other rows' curves: its train cell is marked, no equal-budget line reads it, and
  the training-curve figure leaves it out, saying so."""
  setting = tmp_path / "records" / "s"
  rows = ("disarm", "rloo2", "gs")
  for row in rows:
    simple_run(setting / row, estimator=row)
  text = _page(tmp_path, [_arm("s", r) for r in rows])
  assert "| gs | 1 | 200 | 2 | 100.50 ± 0.71 (relaxed) |" in text
  line = next(x for x in text.splitlines() if x.startswith("Train −ELBO at equal loss evaluations"))
  assert line.endswith("; not read, trained on a relaxed objective: gs.") and " gs " not in line
  assert "(not drawn, trained on a relaxed objective: gs)." in text


def test_an_arm_not_finished_is_listed_not_silently_dropped(tmp_path):
  setting = tmp_path / "records" / "s"
  for row in ("disarm", "rloo2"):
    simple_run(setting / row, estimator=row)
  text = _page(tmp_path, [_arm("s", r) for r in ("disarm", "rloo2", "st_gs")])
  assert "Not in the tables (1 of 3 arms):" in text
  assert "- no such run (not trained, and no records kept): `s/st_gs`" in text


def test_the_committed_page_is_generated_from_the_committed_records(tmp_path):
  study = page.load_study("configs/studies/field.py")
  readings = runner.read(study, tmp_path / "no_runs", ROOT / study.records)
  # Declared rows without kept records are listed on the page as not trained; nothing else is.
  assert set(readings.missing.values()) <= {"no such run (not trained, and no records kept)"}
  generated = study.report(readings).markdown
  assert generated == (ROOT / study.page).read_text()
