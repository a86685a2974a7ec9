"""configs/studies/categorical.py: the categorical grid as published, then as measured."""

import dataclasses
import importlib.util
import json

import pytest

from configs import categorical_vae
from configs.studies import categorical
from experiments.studies import launch, page, runner, tables


def test_the_published_grid_trains_each_estimator_at_its_shapes_published_row():
  study = page.load_study("configs/studies/categorical.py")
  # GR-MC10 at ST-GS's row where GR-MC100's row is not ST-GS's (the transcribed table: 8x4
  # 0.0005 against 0.0003, 16x12 Adam against RAdam, 0.0005 against 0.0007 and tau 1 against
  # 0.7, 10x30 tau 1 against 0.5, 8x16 0.0007 against 0.0005, 64x8 Adam against RAdam; on 4x24
  # the two rows are one), and the exact row.
  at_row = [arm.name for arm in study.arms if "@" in arm.name]
  assert at_row == [
    f"published/{shape}/gr_mc10@st_gs" for shape in ("8x4", "16x12", "10x30", "8x16", "64x8")
  ]
  assert len(study.arms) == len(categorical.SHAPES) * len(categorical.ESTIMATORS) + 5 + 1
  for arm in study.arms:
    shape, estimator = arm.labels["shape"], arm.labels["estimator"]
    config = launch.load_config(arm.config, arm.command_overrides())
    assert config.estimator == ("st" if estimator == "exact" else estimator)
    row = arm.labels.get("row", estimator)  # the exact row: ReinMax's
    learning_rate, tau, optimizer = categorical_vae.published_hyperparameters(row, shape)
    assert (config.learning_rate, config.tau, config.optimizer) == (learning_rate, tau, optimizer)
    # 8x4: the bias and variance against the exact gradient every 16 epochs.
    assert (config.mse_reference, config.mse_every) == (
      ("exact", 9600) if shape == "8x4" else ("reinforce", 0)
    )
    assert (config.likelihood_gradient == "exact") == (estimator == "exact")
    assert (config.binarization, config.train_split, config.num_steps) == (
      "none",
      "train+valid",
      96_000,
    )
    assert config.population.seed == (0, 1, 2)
  # The first shapes run first, as the issue orders them.
  shapes = [arm.labels["shape"] for arm in study.arms]
  assert sorted(set(shapes), key=shapes.index)[:3] == ["8x4", "16x12", "10x30"]


def _kept_measured(records_dir, arm, members):
  """Records of a measured arm: each member's (seed, tau, valid IWAE-100, test IWAE-100); its
  test IWAE-1000 one nat lower."""
  config = launch.load_config(arm.config, arm.command_overrides()).to_dict()
  folder = records_dir / arm.name
  folder.mkdir(parents=True)
  (folder / "config.json").write_text(json.dumps(config))
  results = [
    {"member": i, "seed": seed, "tau": tau, "valid_nll": valid, "test_nll": test}
    | {"test_nll_M1000": test - 1}
    for i, (seed, tau, valid, test) in enumerate(members)
  ]
  steps = config["num_steps"]
  (folder / "results.json").write_text(json.dumps({"steps": steps, "members": results}))
  lines = [
    {"step": steps, "split": "train", "member": m["member"], "neg_elbo": 1.0} for m in results
  ]
  (folder / "metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))


def test_the_measured_phase_declares_fresh_seeds_at_the_searched_tau(tmp_path):
  names = [arm.name for arm in categorical._measured_arms(str(tmp_path))]
  assert "measured/8x4/search/st_gs" in names and "measured/8x4/st_gs" not in names
  assert "measured/8x4/zgr" in names  # no temperature: fresh seeds at once
  # Tau is searched here, so GR-MC10 at ST-GS's row trains only where the learning rate or the
  # optimizer differs: on 10x30 (tau alone) it would repeat GR-MC10's own search.
  assert [n for n in names if "/search/gr_mc10@" in n] == [
    f"measured/{shape}/search/gr_mc10@st_gs" for shape in ("8x4", "16x12", "8x16", "64x8")
  ]
  (search,) = [
    a for a in categorical._measured_arms(str(tmp_path)) if a.name == "measured/8x4/search/st_gs"
  ]
  valid_by_tau = {0.1: 120.0, 0.5: 110.0, 1.0: 111.0}
  _kept_measured(tmp_path, search, [(0, tau, v, v + 1) for tau, v in valid_by_tau.items()])
  (fresh,) = [
    a for a in categorical._measured_arms(str(tmp_path)) if a.name == "measured/8x4/st_gs"
  ]
  config = launch.load_config(fresh.config, fresh.command_overrides())
  assert config.tau == 0.5 and config.population.seed == (1, 2, 3)
  assert (config.binarization, config.train_split, config.num_steps) == ("dynamic", "train", 80_000)
  # GR-MC10 searches tau at ST-GS's 16x12 learning rate and optimizer too (0.0007, RAdam; its
  # own row's are 0.0005, Adam).
  (at_row,) = [
    a for a in categorical._measured_arms(str(tmp_path)) if "16x12/search/gr_mc10@" in a.name
  ]
  config = launch.load_config(at_row.config, at_row.command_overrides())
  assert (config.estimator, config.learning_rate, config.optimizer) == (
    "gr_mc10",
    0.0007,
    "torch_radam",
  )
  assert config.population.tau == categorical.TAUS and at_row.name.endswith("gr_mc10@st_gs")


def test_the_measured_page_has_gr_at_st_gs_row_with_its_own_searched_tau(tmp_path):
  def arm(name):
    (found,) = [a for a in categorical._measured_arms(str(tmp_path)) if a.name == name]
    return found

  # ST-GS selects tau 0.5, GR-MC10 at ST-GS's row 1.0 (the lowest validation bound).
  for key, valid in (("st_gs", (110.0, 111.0)), ("gr_mc10@st_gs", (109.0, 108.0))):
    search = arm(f"measured/16x12/search/{key}")
    _kept_measured(tmp_path, search, [(0, 0.5, valid[0], 0.0), (0, 1.0, valid[1], 0.0)])
  arms = [arm("measured/16x12/search/st_gs"), arm("measured/16x12/search/gr_mc10@st_gs")]
  fresh = {"st_gs": (100.0, 101.0, 102.0), "gr_mc10@st_gs": (99.0, 101.0, 100.0)}
  for key, tests in fresh.items():
    arms.append(arm(f"measured/16x12/{key}"))
    tau = launch.load_config(arms[-1].config, arms[-1].command_overrides()).tau
    _kept_measured(tmp_path, arms[-1], [(s, tau, 0.0, t) for s, t in zip((1, 2, 3), tests)])
  study = dataclasses.replace(categorical.get_study("measured"), arms=tuple(arms))
  text = study.report(runner.read(study, tmp_path / "no_runs", tmp_path)).markdown
  assert "| gr_mc10@st_gs | 1 | 1 |" in text and "| st_gs | 0.5 | 1 |" in text
  assert "gr_mc10@st_gs: gr_mc10 at st_gs's published row (learning rate, optimizer; tau" in text
  # Paired by seed on test IWAE-100: -1, 0, -2.
  assert "| gr_mc10@st_gs − st_gs | -1.00 ± 1.00 (lower on 2 of 3) |" in text


def test_a_kept_search_is_tabulated_before_its_fresh_seeds_train(tmp_path):
  (search,) = [
    a for a in categorical._measured_arms(str(tmp_path)) if a.name == "measured/8x4/search/st_gs"
  ]
  _kept_measured(tmp_path, search, [(0, 1.0, 111.0, 112.0), (0, 0.5, 110.0, 111.5)])
  study = dataclasses.replace(categorical.get_study("measured"), arms=(search,))
  report = study.report(runner.read(study, tmp_path / "no_runs", tmp_path))
  shape = report.markdown.split("### 8x4")[1]
  # Each tau's bounds in tau's order, the lowest validation bound's tau marked.
  assert "| estimator | tau | valid IWAE-100 | test IWAE-100 | train -ELBO (last epoch) |" in shape
  rows = "| st_gs | 0.5 (selected) | 110.00 | 111.50 | 1.00 |\n| st_gs | 1 | 111.00 | 112.00 |"
  assert rows in shape
  assert "\n\n\n" not in report.markdown
  assert [row["selected"] for row in report.data] == [True, False]


def test_an_unknown_phase_is_one_line():
  with pytest.raises(ValueError, match="takes '', 'published' or 'measured'; got 'x'"):
    page.load_study("configs/studies/categorical.py:x")


def _kept_published(records_dir, study, estimator, train, test, gradient=None, shape="8x4"):
  """Published records of ``estimator`` on ``shape``: per seed (0, 1, 2) the last-epoch training
  bound ``train[seed]``, the test bounds ``test[seed]`` (1 sample; IWAE-100 one nat lower,
  IWAE-1000 two), and at steps 0 and 9600 the gradient metrics ``gradient[seed]`` (log10; a
  squared bias or variance of None is logged as null, as a log10 of 0 or less is, and the MSE is
  then the variance)."""
  (arm,) = [a for a in study.arms if a.name == f"published/{shape}/{estimator}"]
  config = launch.load_config(arm.config, arm.command_overrides()).to_dict()
  folder = records_dir / arm.name
  folder.mkdir(parents=True)
  (folder / "config.json").write_text(json.dumps(config))
  steps = config["num_steps"]
  members, lines = [], []
  for seed in (0, 1, 2):
    members.append(
      {
        "member": seed,
        "seed": seed,
        "test_nll": test[seed],
        "test_nll_M100": test[seed] - 1,
        "test_nll_M1000": test[seed] - 2,
      }
    )
    lines += [{"step": steps, "split": "train", "member": seed, "neg_elbo": train[seed]}]
    for step in (0, 9600) if gradient else ():
      bias, variance = gradient[seed]
      lines.append(
        {
          "step": step,
          "split": "train",
          "member": seed,
          "log10_grad_squared_bias": bias,
          # 1 higher at the second checkpoint
          "log10_grad_variance": None if variance is None else variance + step / 9600,
          "log10_grad_mse": variance if bias is None else bias + 1,
        }
      )
  (folder / "results.json").write_text(json.dumps({"steps": steps, "members": members}))
  (folder / "metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))


def test_the_published_page_pairs_gr_by_seed_ranks_both_ways_and_tabulates_the_gradient(
  tmp_path, monkeypatch
):
  study = categorical.get_study()
  study = dataclasses.replace(study, arms=study.select(["published/8x4/"]))
  # The bench's row of ST-GS on 8x4 at batch 100 (the others: none).
  bench = [{"model": "categorical_8x4", "row": "B=100 st_gs", "ms": 2.0, "device": "cpu (cpu)"}]
  monkeypatch.setattr(categorical, "BENCH", tmp_path / "bench.json")
  categorical.BENCH.write_text(json.dumps(bench))
  # ST-GS's training bound is the lowest, GR-MC100's test bound the lowest: the rankings differ.
  _kept_published(tmp_path, study, "st_gs", {0: 100, 1: 101, 2: 102}, {0: 110, 1: 111, 2: 112})
  _kept_published(
    tmp_path,
    study,
    "gr_mc100",
    {0: 101, 1: 103, 2: 102},  # GR − ST-GS: +1, +2, 0
    {0: 109, 1: 109, 2: 113},  # -1, -2, +1
    gradient={0: (-3.0, -4.0), 1: (-3.5, -4.5), 2: (-4.0, -5.0)},
  )
  _kept_published(tmp_path, study, "reinmax", {0: 104, 1: 104, 2: 104}, {0: 120, 1: 121, 2: 122})
  _kept_published(tmp_path, study, "zgr", {0: 105, 1: 105, 2: 105}, {0: 125, 1: 125, 2: 125})
  readings = runner.read(study, tmp_path / "no_runs", tmp_path)
  text = study.report(readings).markdown
  assert (
    "| gr_mc100 − st_gs | 1.00 ± 1.00 (lower on 0 of 3) | -0.67 ± 1.53 (lower on 2 of 3) |"
    in (text)
  )
  assert "| gr_mc100 − reinmax | -2.00 ± 1.00 (lower on 3 of 3) |" in text
  assert "| st_gs | 0.0003, 0.5, adam | 1 | 2.0 | 101.00 ± 1.00 |" in text
  assert text.count("timed on `cpu (cpu)` (jax's device kind and backend)") == 1  # once a table
  assert "| gr_mc100 | 0.0005, 0.5, adam | 1 | — |" in text  # not benched
  assert "| zgr | 0.0005, -, adam | 1 | — |" in text  # no temperature: the row's tau unused
  assert "gr_mc10 −" not in text and "gst" not in text.split("Not in the tables")[0]
  assert (
    "Ranked by train -ELBO (last epoch) (mean over seeds, best first): st_gs, gr_mc100, reinmax,"
    " zgr;"
    " by test IWAE-100: gr_mc100, st_gs, reinmax, zgr; 5 of 6 pairs in the same order." in text
  )
  # Each seed's mean over its 2 checkpoints (variance -4 and -3 on seed 0: -3.5), then over seeds.
  assert "each seed's mean over its 2 measurements" in text
  assert "| gr_mc100 | -3.50 ± 0.50 | -4.00 ± 0.50 | -2.50 ± 0.50 |" in text
  assert "| st_gs | -" not in text.split("The encoder's gradient")[1]  # not measured: no row
  assert "exact is not a row" not in text  # no exact run kept
  assert study.figures(readings, tmp_path / "figures") == []  # one shape: no curve to draw
  if importlib.util.find_spec("matplotlib"):
    more = categorical.get_study().select(["published/16x12/"])
    study = dataclasses.replace(study, arms=(*study.arms, *more))
    _kept_published(tmp_path, study, "st", *[{0: 90, 1: 91, 2: 92}] * 2, shape="16x12")
    readings = runner.read(study, tmp_path / "no_runs", tmp_path)
    (drawn,) = study.figures(readings, tmp_path / "figures")
    assert drawn.name == "categorical_published.png" and drawn.stat().st_size > 0


def test_gr_at_st_gs_row_is_its_own_row_paired_with_st_gs(tmp_path, monkeypatch):
  study = categorical.get_study()
  study = dataclasses.replace(study, arms=study.select(["published/16x12/"]))
  # The bench's GR-MC10 on 16x12: the row at ST-GS's hyperparameters costs what GR-MC10 costs.
  bench = [{"model": "categorical_16x12", "row": "B=100 gr_mc10", "ms": 7.0, "device": "cpu (cpu)"}]
  monkeypatch.setattr(categorical, "BENCH", tmp_path / "bench.json")
  categorical.BENCH.write_text(json.dumps(bench))
  kept = {0: 100, 1: 101, 2: 102}
  _kept_published(tmp_path, study, "st_gs", kept, kept, shape="16x12")
  # GR − ST-GS at the same row: -1, -1, -2 (training), -1, 0, -2 (test).
  _kept_published(
    tmp_path,
    study,
    "gr_mc10@st_gs",
    {0: 99, 1: 100, 2: 100},
    {0: 99, 1: 101, 2: 100},
    shape="16x12",
  )
  text = study.report(runner.read(study, tmp_path / "no_runs", tmp_path)).markdown
  # ST-GS's published 16x12 row, GR-MC10's one evaluation and its bench time.
  assert "| st_gs | 0.0007, 0.7, radam | 1 | — | 101.00 ± 1.00 |" in text
  assert "| gr_mc10@st_gs | 0.0007, 0.7, radam | 1 | 7.0 | 99.67 ± 0.58 |" in text
  assert "gr_mc10@st_gs: gr_mc10 at st_gs's published row (learning rate, tau, optimizer)" in text
  assert "| gr_mc10@st_gs − st_gs | -1.33 ± 0.58 (lower on 3 of 3) | -1.00 ± 1.00" in text
  assert "by test IWAE-100: gr_mc10@st_gs, st_gs; 1 of 1 pairs in the same order." in text


def test_a_squared_bias_within_noise_is_counted_not_averaged_away(tmp_path):
  study = categorical.get_study()
  study = dataclasses.replace(study, arms=study.select(["published/8x4/"]))
  # RLOO-2 is unbiased: its squared bias less the Monte Carlo variance is <= 0 (logged as null) on
  # seeds 0 and 2 at both checkpoints. A log10 mean of seed 1's alone would read -5.00.
  unbiased = {0: (None, -4.0), 1: (-5.0, -4.0), 2: (None, -4.0)}
  _kept_published(tmp_path, study, "rloo2", *[{0: 90, 1: 91, 2: 92}] * 2, gradient=unbiased)
  _kept_published(
    tmp_path,
    study,
    "st_gs",
    *[{0: 90, 1: 91, 2: 92}] * 2,
    gradient={s: (-3.0, -4.0) for s in (0, 1, 2)},
  )
  # The exact gradient's variance and squared bias are 0: their log10 is logged as null.
  exact = {seed: (None, None) for seed in (0, 1, 2)}
  _kept_published(tmp_path, study, "exact", *[{0: 90, 1: 91, 2: 92}] * 2, gradient=exact)
  text = study.report(runner.read(study, tmp_path / "no_runs", tmp_path)).markdown
  assert "| exact | 0.0005, -, adam | 4096 (enumerated) |" in text  # ReinMax's row, tau unused
  assert "| exact |" not in text.split("The encoder's gradient")[1]  # nothing to tabulate
  assert "exact is not a row: it is the reference" in text
  assert "each seed's mean over its 2 measurements" in text
  assert "| rloo2 | ~0 at 4 of 6 | -3.50 ± 0.00 | -4.00 ± 0.00 |" in text
  assert "| st_gs | -3.00 ± 0.00 | -3.50 ± 0.00 | -2.00 ± 0.00 |" in text
  assert "~0 at k of n: at k of the seeds' n measurements" in text


def test_an_exact_row_with_a_logged_gradient_is_tabulated_not_called_the_reference(tmp_path):
  # Were the exact arm's gradient against itself ever logged as finite (a fault), its row shows it
  # and the page does not also say it is absent.
  study = categorical.get_study()
  study = dataclasses.replace(study, arms=study.select(["published/8x4/"]))
  finite = {seed: (-3.0, -4.0) for seed in (0, 1, 2)}
  _kept_published(tmp_path, study, "exact", *[{0: 90, 1: 91, 2: 92}] * 2, gradient=finite)
  text = study.report(runner.read(study, tmp_path / "no_runs", tmp_path)).markdown
  assert "| exact | -3.00 ± 0.00 |" in text.split("The encoder's gradient")[1]
  assert "exact is not a row" not in text


def test_rankings_agree_pair_by_pair():
  assert tables.ranking({"a": 3.0, "b": 1.0, "c": None, "d": float("nan")}) == ["b", "a"]
  assert tables.same_order(["a", "b", "c"], ["a", "b", "c"]) == (3, 3)
  assert tables.same_order(["a", "b", "c"], ["c", "b", "a"]) == (0, 3)
  assert tables.same_order(["a", "b", "c", "d"], ["b", "a", "d"]) == (2, 3)  # c in one only
