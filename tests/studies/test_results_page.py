"""docs/results.md: every table is its study's report (or its record file) regenerated from the
committed records, and no decimal number of its prose is typed outside those tables."""

import pytest

from experiments.studies import page
from tests.cli import ROOT

RESULTS = ROOT / "docs" / "results.md"


def test_every_block_of_the_results_page_is_regenerated_from_the_records():
  text = RESULTS.read_text()
  assert text.count("<!-- end -->") >= 10
  refreshed = page.refresh(text)
  assert refreshed == text, "run python -m experiments.study --refresh=docs/results.md"


def test_every_number_of_the_prose_stands_in_its_sections_tables():
  assert page.prose_numbers_not_in_blocks(RESULTS.read_text()) == []


def test_the_prose_check_can_fail():
  text = "## A\n\nThe bound is 101.3 at τ 0.64.\n\n<!-- record: x -->\n| 101.35 |\n<!-- end -->\n"
  assert page.prose_numbers_not_in_blocks(text) == [("## A", "101.3")]
  assert page.prose_numbers_not_in_blocks(text.replace("101.3 ", "101.35 ")) == []


def test_a_study_block_names_its_arms(tmp_path):
  with pytest.raises(ValueError, match="is not an arm of study table2"):
    page.render("study", "configs/studies/table2.py arms=3ary_B20/")
