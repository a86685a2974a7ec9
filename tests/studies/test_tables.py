"""experiments/studies/tables.py: spreads over seeds and differences paired by seed."""

import math
import pathlib

from experiments.studies import records, tables


def test_spread_counts_what_is_not_finite_instead_of_failing():
  assert tables.spread([1.0, 3.0]) == "2.00 ± 1.41"
  assert tables.spread([2.0]) == "2.00 ± n/a"
  assert tables.spread([1.0, 3.0, math.nan, None]) == "2.00 ± 1.41 (2 not finite)"
  assert tables.spread([math.nan]) == "- (1 not finite)"
  assert tables.spread([]) == "-"


def test_paired_differences_use_the_seeds_both_hold_and_name_the_others():
  a = {0: 10.0, 1: 11.0, 2: 12.0, 3: 5.0}
  b = {0: 9.0, 1: 12.0, 2: math.nan, 4: 1.0}
  difference = tables.paired(a, b)
  assert difference.differences == (-1.0, 1.0) and difference.seeds == (0, 1)
  assert difference.unpaired == (2, 3, 4)
  assert difference.lower == 1
  assert difference.cell() == "0.00 ± 1.41 (lower on 1 of 2); seeds [2, 3, 4] unpaired"
  assert difference.by_seed() == "-1.00, +1.00"
  assert tables.paired({0: 1.0}, {1: 2.0}).cell() == "-"


def test_a_search_lists_its_members_in_tau_order_and_marks_the_validation_choice():
  # tau 0.5 has the lowest validation bound; tau 2's is missing (a diverged member), so it is
  # shown as "-" and cannot be selected even though its test bound is the lowest.
  results = [(1.0, 101.0, 103.0), (0.5, 100.0, 104.0), (2.0, None, 90.0)]
  members = tuple(
    records.Member(i, 0, {"tau": tau, "valid_nll": valid, "test_nll": test}, {})
    for i, (tau, valid, test) in enumerate(results)
  )
  search = records.Run(pathlib.Path("."), {}, {}, members)
  # A column is a result name or a function of the member: both read the same test bound.
  columns = {
    "valid_nll": "valid_nll",
    "test_nll": "test_nll",
    "test_nll, read by a function": lambda m: m.results["test_nll"],
  }
  rows, values = tables.search_rows(search, columns, tables.significant)
  assert rows == [
    ["0.5 (selected)", "100", "104", "104"],
    ["1", "101", "103", "103"],
    ["2", "-", "90", "90"],
  ]
  assert values[0] == {
    "tau": 0.5,
    "selected": True,
    "valid_nll": 100.0,
    "test_nll": 104.0,
    "test_nll, read by a function": 104.0,
  }
  assert [v["selected"] for v in values] == [True, False, False]


def test_write_makes_the_markdown_and_json_files(tmp_path):
  md, js = tables.write(tmp_path / "out", "table", "| a |\n", {"a": 1})
  assert md.read_text() == "| a |\n" and js.read_text() == '{\n "a": 1\n}\n'
