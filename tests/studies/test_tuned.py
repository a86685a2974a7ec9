"""configs/studies/tuned.py: the temperature search, then fresh seeds at the tau it selects."""

import importlib.util
import json

from experiments.studies import launch, page, records, runner
from tests.cli import ROOT
from tests.studies.canned import write_run


def test_a_kept_search_declares_its_fresh_seeds_at_the_selected_tau(tmp_path):
  """The committed ST-GS search on non-linear Fashion-MNIST selects tau 0.5 (validation
  IWAE-100 241.24, the lowest of the five): its fresh arm trains seeds 1, 2, 3 there."""
  study = page.load_study("configs/studies/tuned.py")
  arms = {arm.name: arm for arm in study.arms}
  fresh = arms["nonlinear_fashion_mnist/fresh/st_gs"]
  config = launch.load_config(fresh.config, fresh.command_overrides())
  assert (config.tau, config.population.seed, config.num_steps) == (0.5, (1, 2, 3), 100_000)
  assert (
    "nonlinear_fashion_mnist/fresh/reinmax" not in arms
    or (ROOT / "records/tuned/nonlinear_fashion_mnist/search/reinmax").is_dir()
  )
  readings = runner.read(study, tmp_path / "no_runs", ROOT / study.records)
  report = study.report(readings).markdown
  assert "| nonlinear_fashion_mnist/search/st_gs | 0.5 (selected) | 241.24 |" in report


def test_the_dynamic_mnist_arms_log_the_disarm_codes_variance_column():
  """The settings first measured after the column existed log it on every arm (the field's,
  the tuned search's and fresh seeds', the references read from the field's records); the
  settings with rows kept without it do not, but for their protocol-length arms."""
  field = page.load_study("configs/studies/field.py")
  tuned = _tuned_module()
  arms = [*field.arms, *tuned._arms(str(ROOT / "records/tuned")), *tuned._references()]
  arms += [tuned._arm("nonlinear_dynamic_mnist", "fresh", "gs", "tau=0.5")]
  decays = {}
  for arm in arms:
    config = launch.load_config(arm.config, arm.command_overrides())
    decays.setdefault(arm.name.split("/")[0], set()).add(config.variance_ema_decay)
  assert decays == {
    "nonlinear_dynamic_mnist": {0.999},
    "linear_dynamic_mnist": {0.999},
    "nonlinear_fashion_mnist": {0.0},
    "linear_fashion_mnist": {0.0},
    "nonlinear_static_mnist": {0.0},
  }


def _tuned_module():
  spec = importlib.util.spec_from_file_location("tuned_study", ROOT / "configs/studies/tuned.py")
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


def test_the_protocol_length_runs_the_unbiased_pair_and_the_two_best_tuned_estimators(
  tmp_path, monkeypatch
):
  tuned = _tuned_module()
  setting = "nonlinear_dynamic_mnist"
  # Fresh seeds' test bounds: gs (mean 240) and reinmax (241) are the two lowest.
  fresh = {"st_gs": (242.0, 0.5), "gs": (240.0, 0.25), "reinmax": (241.0, 1.5)}
  fresh |= {"gr_mc10": (243.0, 0.5), "gr_exact": (241.5, 0.1)}
  for i, (estimator, (test, tau)) in enumerate(fresh.items()):
    members = [(s, {200: 250.0}, {}, test + d, test + d - 1) for s, d in ((1, -1), (2, 0), (3, 1))]
    write_run(tmp_path / setting / "fresh" / estimator, members, estimator=estimator, tau=tau)
    declared = {a.name: a for a in tuned._long_arms(str(tmp_path)) if setting in a.name}
    if i < len(fresh) - 1:  # not before every estimator's fresh seeds are kept
      assert sorted(declared) == [f"{setting}/long/disarm", f"{setting}/long/rloo2"]
  assert sorted(declared) == [f"{setting}/long/{e}" for e in ("disarm", "gs", "reinmax", "rloo2")]
  arm = declared[f"{setting}/long/gs"]
  config = launch.load_config(arm.config, arm.command_overrides())
  assert (config.tau, config.num_steps, config.population.seed, config.dataset) == (
    0.25,
    1_000_000,
    (0,),
    "mnist",
  )
  assert config.variance_ema_decay == 0.999  # the DisARM code's variance column
  # Its table: the test bounds at the protocol's length, the unbiased rows without a tau, the
  # same row's seed 0 at 100,000 steps (the field's DisARM; GS's search member at the long row's
  # tau, 1, not its 0.25 one), and the last step's EMA variance (log10: 1000 -> 3.00; DisARM's run
  # logged none -> "-").
  monkeypatch.setattr(tuned, "RECORDS", str(tmp_path / "tuned"))
  monkeypatch.setattr(tuned, "FIELD_RECORDS", str(tmp_path / "field"))
  write_run(
    tmp_path / "field" / setting / "disarm",
    [(0, {200: 250.0}, {}, 245.0, 244.0)],
    estimator="disarm",
  )
  search = tmp_path / "tuned" / setting / "search" / "gs"
  write_run(
    search,
    [(0, {200: 250.0}, {}, 246.0, 245.0), (0, {200: 250.0}, {}, 247.0, 246.0)],
    member_results=({"tau": 0.25}, {"tau": 1.0}),
    estimator="gs",
  )
  members = [(0, {1_000_000: 240.0}, {}, 238.5, 237.25)]
  names = {f"{setting}/long/disarm": "disarm", f"{setting}/long/gs": "gs"}
  for n, e in names.items():
    write_run(tmp_path / "out" / n, members, steps=1_000_000, estimator=e)
  metrics = tmp_path / "out" / f"{setting}/long/gs" / "metrics.jsonl"
  ema = {"step": 1_000_000, "split": "train", "member": 0, "ema_grad_variance": 1000.0}
  metrics.write_text(metrics.read_text() + json.dumps(ema) + "\n")
  runs = {n: records.read_run(tmp_path / "out" / n) for n in names}
  readings = runner.Readings(runs=runs, missing={}, arms={n: declared[n] for n in names})
  report = tuned._report(readings).markdown
  assert "At the protocol's length (1,000,000 steps):" in report
  assert "Temperature search" not in report  # no search among these readings: no empty table
  assert "| test IWAE-100 at 100,000 steps |" in report
  row = f"| {setting}/long/disarm | - | 0 | 238.50 ± n/a | 237.25 ± n/a | 245.00 ± n/a | - |"
  assert row in report
  row = f"| {setting}/long/gs | 1 | 0 | 238.50 ± n/a | 237.25 ± n/a | 247.00 ± n/a | 3.00 ± n/a |"
  assert row in report


def test_the_tuned_rows_are_paired_by_seed_against_st_gs_zgr_and_the_unbiased_rows(tmp_path):
  tuned = _tuned_module()
  setting = "nonlinear_dynamic_mnist"
  # Test bounds by seed: GR-exact's fresh seeds 1, 2, 3 against ST-GS's and the field's ZGR
  # (seeds 0, 1, 2: paired on 1 and 2).
  bounds = {
    ("fresh", "gr_exact"): {1: 240.0, 2: 241.0, 3: 239.0},
    ("fresh", "st_gs"): {1: 241.0, 2: 243.0, 3: 240.0},  # GR-exact − ST-GS: -1, -2, -1
    ("reference", "zgr"): {0: 230.0, 1: 240.5, 2: 240.0},  # -0.5, +1
  }
  report = _report_of_test_bounds(tuned, setting, bounds, tmp_path)
  assert "non-linear, dynamic MNIST: the tuned rows paired by seed" in report
  assert (
    "| gr_exact (tuned) − st_gs (tuned) | -1.33 ± 0.58 (lower on 3 of 3) |"
    " -1.33 ± 0.58 (lower on 3 of 3) |" in report
  )
  assert (
    "| gr_exact (tuned) − zgr (field) | 0.25 ± 1.06 (lower on 1 of 2); seeds [0, 3] unpaired |"
    in (report)
  )
  assert "| st_gs (tuned) − st_gs" not in report  # a row is not paired with itself
  # The lowest mean over each row's own seeds: ZGR's (236.83) with its seed 0.
  assert "The lowest mean test IWAE-100 of the 3 rows: zgr (field), 236.83." in report


def test_the_tuned_rows_meet_the_unbiased_rows_at_equal_evaluations_and_wall_time(
  tmp_path, monkeypatch
):
  """Each tuned row's training bound against DisARM's and RLOO-2's, read on the training curves
  at equal loss evaluations and at equal wall time (the tuned row timed at its own tau, in its
  model's bench file), paired on the seeds both hold."""
  tuned = _tuned_module()
  setting = "nonlinear_dynamic_mnist"
  curves = {  # train −ELBO at steps 100 and 200, by seed
    ("fresh", "gr_exact", 0.5): {s: {100: 110.0 + s, 200: 100.0 + s} for s in (1, 2, 3)},
    ("fresh", "gs", 0.5): {s: {100: 50.0, 200: 40.0} for s in (1, 2, 3)},  # relaxed: not read
    ("reference", "disarm", 1.0): {s: {100: 112.0 + s, 200: 99.0 + s} for s in (0, 1, 2)},
    ("reference", "rloo2", 1.0): {s: {100: 112.0 + s, 200: 99.0 + s} for s in (0, 1, 2)},
  }
  runs, arms = {}, {}
  for (phase, estimator, tau), by_seed in curves.items():
    name = f"{setting}/{phase}/{estimator}"
    members = [(s, curve, {}, 240.0, 239.0) for s, curve in by_seed.items()]
    runs[name] = records.read_run(write_run(tmp_path / name, members, estimator=estimator, tau=tau))
    arms[name] = tuned._arm(setting, phase, estimator, labels={"tau": tau})
  # GR-exact timed at its tau 0.5 (a row at tau 1 would not do), DisARM; RLOO-2 not timed; in the
  # non-linear model's file, which the line names.
  rows = [("B=50 gr_exact", 1.0), ("B=50 gr_exact@0.5", 4000.0), ("B=50 disarm", 2000.0)]
  bench = tmp_path / "bench_nonlinear.json"
  bench.write_text(
    json.dumps(
      [
        {"model": "bernoulli_nonlinear", "row": r, "ms": ms, "device": "cpu (cpu)"}
        for r, ms in rows
      ]
    )
  )
  monkeypatch.setattr(
    tuned, "BENCH", {"bernoulli_nonlinear": str(bench), "bernoulli_linear": "absent.json"}
  )
  readings = runner.Readings(runs=runs, missing={}, arms=arms)
  text = "\n".join(tuned._comparison_lines(readings))
  assert f"ms per step from {bench} (cpu (cpu)), each tuned row timed at its tau" in text
  assert "not timed: rloo2; not read, trained on a relaxed objective: gs (tuned))" in text
  assert "| gs (tuned)" not in text.split("train −ELBO of the tuned rows")[1]
  assert "| pair | at equal loss evaluations (200 each) | at equal wall time (6.7 min of" in text
  # Equal evaluations: GR-exact at step 200 (101, 102 on seeds 1, 2), DisARM at step 100 (113,
  # 114): -12. Equal wall time, min(200 x 4 s, 200 x 2 s) = 400 s: GR-exact at step 100 (111,
  # 112), DisARM at step 200 (100, 101): +11.
  assert (
    "| gr_exact (tuned) − disarm (field) | -12.00 ± 0.00 (lower on 2 of 2); seeds [0, 3] unpaired"
    " | 11.00 ± 0.00 (lower on 0 of 2); seeds [0, 3] unpaired |"
  ) in text
  assert (
    "| gr_exact (tuned) − rloo2 (field) | -12.00 ± 0.00 (lower on 2 of 2); seeds [0, 3] unpaired"
    " | - |"
  ) in text


def test_the_field_rows_at_seed_3_complete_the_pairs(tmp_path):
  """The field's rows hold seeds 0, 1, 2, the fresh rows 1, 2, 3: the study trains ZGR, DisARM
  and RLOO-2 at seed 3 on the field's config, and once kept the pairs are read on all three
  fresh seeds (the field's seed 0 alone unpaired)."""
  tuned = _tuned_module()
  setting = "nonlinear_fashion_mnist"
  arms = {arm.name: arm for arm in tuned._references()}
  for estimator in ("zgr", "disarm", "rloo2"):
    field = launch.load_config(*_command(arms[f"{setting}/reference/{estimator}"]))
    seed3 = launch.load_config(*_command(arms[f"{setting}/reference_seed3/{estimator}"]))
    assert (field.population.seed, seed3.population.seed) == ((0, 1, 2), (3,))
    field.population.seed = seed3.population.seed
    assert field.to_dict() == seed3.to_dict()
  assert f"{setting}/reference_seed3/reinforce" not in arms  # a band only, paired with nothing
  bounds = {
    ("fresh", "gr_exact"): {1: 240.0, 2: 241.0, 3: 239.0},
    ("reference", "zgr"): {0: 230.0, 1: 240.5, 2: 240.0},
    ("reference_seed3", "zgr"): {3: 240.0},  # -0.5, +1, -1
  }
  report = _report_of_test_bounds(tuned, setting, bounds, tmp_path)
  assert (
    "| gr_exact (tuned) − zgr (field) | -0.17 ± 1.04 (lower on 2 of 3); seeds [0] unpaired |"
    in report
  )
  # ZGR's mean over its four seeds: (230 + 240.5 + 240 + 240) / 4.
  assert "The lowest mean test IWAE-100 of the 2 rows: zgr (field), 237.62." in report
  assert "reference_seed3" not in report.split("Not in the tables")[0]  # no table of its own


def _command(arm):
  return arm.config, arm.command_overrides()


def _report_of_test_bounds(tuned, setting, bounds, directory) -> str:
  """The tuned study's report of canned runs: ``{(phase, estimator): {seed: test bound}}``."""
  runs, arms = {}, {}
  for (phase, estimator), by_seed in bounds.items():
    name = f"{setting}/{phase}/{estimator}"
    members = [(s, {200: 250.0}, {}, b, b - 1) for s, b in by_seed.items()]
    runs[name] = records.read_run(write_run(directory / name, members, estimator=estimator))
    arms[name] = tuned._arm(setting, phase, estimator, labels={"tau": 0.5})
  return tuned._report(runner.Readings(runs=runs, missing={}, arms=arms)).markdown
