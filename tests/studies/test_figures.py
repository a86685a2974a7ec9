"""experiments/studies/figures.py and the figures the tuned and field studies draw from records."""

import json
import subprocess
import sys

import pytest

from experiments.studies import figures, leaderboard, page, runner
from tests.cli import ROOT
from tests.studies.canned import simple_run, write_run

PNG = b"\x89PNG\r\n\x1a\n"


def _capture(monkeypatch, name):
  calls = []
  monkeypatch.setattr(
    figures, name, lambda path, title, *args, **_: calls.append((path, *args)) or path
  )
  return calls


def test_the_tuned_figure_is_the_kept_search_its_selection_and_the_fields_bands(
  tmp_path, monkeypatch
):
  """Read from the committed records: the ST-GS search on non-linear Fashion-MNIST (seed 0,
  test IWAE-100 241.97 at its selected tau 0.5) and DisARM's band: its three seeds of
  records/field and its seed 3, trained by the tuned study (records/tuned, reference_seed3)."""
  study = page.load_study("configs/studies/tuned.py")
  readings = runner.read(study, tmp_path / "no_runs", ROOT / study.records)
  calls = _capture(monkeypatch, "temperature_curves")
  study.figures(readings, tmp_path)
  (path, curves, bands), *_ = calls
  assert path == tmp_path / "tuned_nonlinear_fashion_mnist.png"
  st_gs = next(c for c in curves if c.label == "st_gs")
  assert st_gs.selected == 0.5 and sorted(st_gs.search) == [0.1, 0.25, 0.5, 1.0, 1.5]
  assert st_gs.search[0.5] == pytest.approx(241.97052, abs=1e-5)
  disarm = next(b for b in bands if b.label == "disarm")
  field_seeds, seed_3 = [242.692018, 242.822127, 242.862223], 243.296583
  assert sorted(disarm.values) == pytest.approx([*field_seeds, seed_3], abs=1e-6)
  assert {b.label for b in bands} == {"disarm", "rloo2", "zgr", "reinforce"}
  # The tables leave the bands to the leaderboard.
  assert "reference/" not in study.report(readings).markdown.split("Not in the tables")[0]


def test_the_budget_figure_puts_each_compared_row_on_evaluations_and_seconds(tmp_path, monkeypatch):
  setting = tmp_path / "records" / "nonlinear_fashion_mnist"
  curve = lambda base: {100: base + 10.0, 200: base}  # noqa: E731
  write_run(setting / "disarm", [(0, curve(100.0), {}, 99, 98), (1, curve(102.0), {}, 99, 98)])
  write_run(setting / "st_gs", [(0, curve(104.0), {}, 99, 98), (1, curve(106.0), {}, 99, 98)])
  # One seed only: not of the setting's seeds, so not compared and not drawn.
  write_run(setting / "zgr", [(0, curve(90.0), {}, 99, 98)])
  for name in ("disarm", "st_gs", "zgr"):
    config = json.loads((setting / name / "config.json").read_text())
    (setting / name / "config.json").write_text(json.dumps({**config, "estimator": name}))
  arms = [
    runner.Arm(f"nonlinear_fashion_mnist/{row}", "unused.py", labels={"setting": "s", "row": row})
    for row in ("disarm", "st_gs", "zgr")
  ]
  study = runner.Study("leaderboard", tuple(arms), report=lambda r: None)
  readings = runner.read(study, tmp_path / "out", tmp_path / "records")
  bench = tmp_path / "bench.json"
  bench.write_text(
    json.dumps([{"model": "bernoulli_nonlinear", "row": "B=50 disarm", "ms": 2.0, "device": "cpu"}])
  )
  calls = _capture(monkeypatch, "budget_curves")
  leaderboard.draw_budgets(readings, tmp_path / "figures", str(bench))
  [(path, rows, declared, variants)] = calls
  assert path == tmp_path / "figures" / "leaderboard_s.png"
  # The colours follow the study's declared rows, whichever are drawn.
  assert (declared, variants) == (["disarm", "st_gs", "zgr"], {})
  by_label = {row.label: row for row in rows}
  assert sorted(by_label) == ["disarm", "st_gs"]
  # Mean over the two seeds; DisARM's two evaluations a step; ST-GS has no bench row.
  assert by_label["disarm"].curve == {100: 111.0, 200: 101.0}
  assert (by_label["disarm"].evaluations, by_label["disarm"].ms_per_step) == (2, 2.0)
  assert (by_label["st_gs"].evaluations, by_label["st_gs"].ms_per_step) == (1, None)


def test_the_figures_are_pngs(tmp_path):
  search = {0.1: 245.0, 0.5: 242.0, 1.0: 243.0}
  curves = [figures.TemperatureCurve("st_gs", search, selected=0.5, fresh=(242.3, 242.6, 242.1))]
  bands = [figures.Band("disarm", (242.7, 242.8, 242.9)), figures.Band("one seed", (250.0,))]
  drawn = figures.temperature_curves(tmp_path / "a" / "t.png", "title", curves, bands)
  rows = [
    figures.BudgetCurve("disarm", {100: 300.0, 1000: 250.0}, evaluations=2, ms_per_step=2.0),
    figures.BudgetCurve("st_gs", {100: 290.0, 1000: 255.0}, evaluations=1),
  ]
  budgets = figures.budget_curves(tmp_path / "b.png", "title", rows)
  for path in (drawn, budgets):
    assert path.read_bytes()[:8] == PNG and path.stat().st_size > 10_000


def _drawn_colours(monkeypatch, draw):
  """{label: (colour, linestyle)} of each figure ``draw`` makes, from its first axes' lines (an
  error bar's label is its container's)."""
  drawn = []
  monkeypatch.setattr(figures, "_save", lambda figure, path: drawn.append(figure) or path)
  draw()
  style = lambda line: (line.get_color(), line.get_linestyle())  # noqa: E731
  colours = []
  for figure in drawn:
    axes = figure.axes[0]
    by_label = {line.get_label(): style(line) for line in axes.get_lines()}
    by_label |= {bars.get_label(): style(bars.lines[0]) for bars in axes.containers}
    colours.append(by_label)
  return colours


def _cycle():
  return figures._pyplot().rcParams["axes.prop_cycle"].by_key()["color"]


def test_an_estimator_keeps_its_colour_whichever_rows_are_drawn(tmp_path, monkeypatch):
  """A row added to a study's figure does not repaint the others (the colour is the label's place
  in the study's order, not the row's)."""
  search = {0.1: 245.0, 0.5: 242.0}
  order = ("st_gs", "gs", "gr_exact", "disarm")
  gr_exact = figures.TemperatureCurve("gr_exact", search, selected=0.5)
  disarm = figures.Band("disarm", (242.7, 242.8))

  def draw():
    for curves in ([gr_exact], [figures.TemperatureCurve("st_gs", search), gr_exact]):
      figures.temperature_curves(tmp_path / "t.png", "t", curves, [disarm], colour_order=order)

  colours = _drawn_colours(monkeypatch, draw)
  cycle = _cycle()
  for by_label in colours:
    assert by_label["gr_exact"][0] == cycle[2] and by_label["disarm (no τ)"][0] == cycle[3]
  assert colours[1]["st_gs"][0] == cycle[0]


def _budget(label):
  return figures.BudgetCurve(label, {100: 300.0, 1000: 250.0}, evaluations=1, ms_per_step=2.0)


def _shape(label):
  return figures.ShapeCurve(label, {"8x4": {0: 110.0, 1: 111.0}, "16x12": {0: 100.0, 1: 101.0}})


def test_the_leaderboard_and_categorical_figures_keep_an_estimators_colour(tmp_path, monkeypatch):
  """The twins of the temperature figure's fix: the budget and shape figures coloured rows by
  their index among the rows drawn, so a kept row repainted the ones after it."""
  order = ("disarm", "rloo2", "st_gs", "gr_exact")
  cycle = _cycle()

  def draw():
    for labels in (["gr_exact"], ["st_gs", "gr_exact"]):
      figures.budget_curves(
        tmp_path / "b.png", "t", [_budget(x) for x in labels], colour_order=order
      )
      figures.shape_curves(
        tmp_path / "s.png", "t", ["8x4", "16x12"], [_shape(x) for x in labels], colour_order=order
      )

  for by_label in _drawn_colours(monkeypatch, draw):
    assert by_label["gr_exact"][0] == cycle[3]
    assert by_label.get("st_gs", (cycle[2],))[0] == cycle[2]


def test_the_shape_figures_second_panel_pairs_each_row_with_the_reference_by_seed(
  tmp_path, monkeypatch
):
  """The shape moves every bound by tens of nats and the rows differ by a few: the second panel
  draws each row minus ST-GS on the seeds both have (seed 2 of gr_mc100 has no ST-GS twin)."""
  st_gs = figures.ShapeCurve("st_gs", {"8x4": {0: 120.0, 1: 122.0}, "16x12": {0: 95.0}})
  gr = figures.ShapeCurve("gr_mc100", {"8x4": {0: 119.0, 1: 119.0, 2: 0.0}, "16x12": {1: 96.0}})
  assert figures.paired_differences(gr, st_gs) == {"8x4": [-1.0, -3.0]}
  drawn = []
  monkeypatch.setattr(figures, "_save", lambda figure, path: drawn.append(figure) or path)
  figures.shape_curves(tmp_path / "s.png", "t", ["8x4", "16x12"], [st_gs, gr], reference="st_gs")
  [figure] = drawn
  bounds, against = figure.axes
  by_label = {bars.get_label(): bars.lines[0].get_ydata() for bars in against.containers}
  assert list(by_label["gr_mc100"]) == [-2.0]  # the mean of -1 and -3, on 8x4 only
  assert list(by_label["st_gs"]) == [0.0, 0.0]
  assert against.get_yscale() == "symlog"
  gr_bounds = next(b for b in bounds.containers if b.get_label() == "gr_mc100")
  assert list(gr_bounds.lines[0].get_ydata()) == pytest.approx([238 / 3, 96.0])


def test_a_row_at_another_tau_or_averaged_takes_its_estimators_colour_dashed(tmp_path, monkeypatch):
  """st_gs_x2 was drawn in RLOO-2's colour (dashed: the 12th row): a variant of an estimator
  (the field's ``_tau<t>`` and ``_x<M>`` rows) now takes that estimator's colour, dashed."""
  estimator_of = {"disarm": "disarm", "st_gs": "st_gs", "st_gs_x2": "st_gs_x2"}
  estimator_of |= {"reinmax": "reinmax", "reinmax_tau1.1": "reinmax"}
  arms = []
  for row, estimator in estimator_of.items():
    simple_run(tmp_path / "records" / "s" / row, estimator=estimator)
    arms.append(runner.Arm(f"s/{row}", "unused.py", labels={"setting": "s", "row": row}))
  study = runner.Study("leaderboard", tuple(arms), report=lambda r: None)
  readings = runner.read(study, tmp_path / "out", tmp_path / "records")
  calls = _capture(monkeypatch, "budget_curves")
  leaderboard.draw_budgets(readings, tmp_path / "figures")
  [(_, _, declared, variants)] = calls
  assert variants == {"st_gs_x2": "st_gs", "reinmax_tau1.1": "reinmax"}
  monkeypatch.undo()
  labels = ("st_gs_x2", "reinmax_tau1.1")  # drawn without their estimators: the colours hold
  [by_label] = _drawn_colours(
    monkeypatch,
    lambda: figures.budget_curves(
      tmp_path / "b.png", "t", [_budget(x) for x in labels], declared, variants
    ),
  )
  cycle = _cycle()
  assert by_label == {"st_gs_x2": (cycle[1], "--"), "reinmax_tau1.1": (cycle[2], "--")}
  # The categorical figure's GR-MC10 at ST-GS's row: GR-MC10's colour, dashed.
  [by_label] = _drawn_colours(
    monkeypatch,
    lambda: figures.shape_curves(
      tmp_path / "s.png",
      "t",
      ["8x4", "16x12"],
      [_shape("gr_mc10@st_gs")],
      colour_order=("st_gs", "gr_mc10"),
      variants={"gr_mc10@st_gs": "gr_mc10"},
    ),
  )
  assert by_label["gr_mc10@st_gs"] == (cycle[1], "--")


def test_once_the_colours_repeat_the_lines_are_dashed(tmp_path, monkeypatch):
  labels = [f"row{i}" for i in range(12)]
  cycle = _cycle()
  assert len(cycle) == 10  # matplotlib's default cycle: rows 10 and 11 reuse colours 0 and 1
  [by_label] = _drawn_colours(
    monkeypatch,
    lambda: figures.budget_curves(tmp_path / "b.png", "t", [_budget(x) for x in labels]),
  )
  assert by_label["row1"] == (cycle[1], "-")
  assert by_label["row11"] == (cycle[1], "--")


def test_without_matplotlib_the_figures_are_one_line(tmp_path, monkeypatch):
  monkeypatch.setitem(sys.modules, "matplotlib", None)
  with pytest.raises(ValueError, match=r'pip install "gr_jax\[plots\]"'):
    figures.budget_curves(tmp_path / "b.png", "title", [])


@pytest.mark.slow
def test_the_study_command_without_matplotlib_writes_its_tables_and_says_the_figures_are_not_drawn(
  tmp_path,
):
  command = (
    "import runpy, sys; sys.modules['matplotlib'] = None;"
    " sys.argv = ['study', '--study=configs/studies/field.py', sys.argv[1], '--run=false'];"
    " runpy.run_module('experiments.study', run_name='__main__')"
  )
  result = subprocess.run(
    [sys.executable, "-c", command, f"--out={tmp_path}"],
    cwd=ROOT,
    capture_output=True,
    text=True,
    timeout=300,
  )
  assert result.returncode == 0, result.stderr[-2000:]
  assert (tmp_path / "leaderboard.md").is_file() and not (tmp_path / "figures").exists()
  assert 'figures not drawn: they need matplotlib (pip install "gr_jax[plots]")' in result.stdout
