"""Tests of gr_jax.data.listops: semantics, the bracketed format, generation, batching."""

import pathlib
import random

import numpy as np
import pytest

from gr_jax.data import InvalidDataError, listops

SHARED = pathlib.Path(__file__).resolve().parents[2] / "shared" / "data" / "listops"


@pytest.mark.parametrize(
  "tokens,value",
  [
    ("[MIN 6 3 5 0 ]", 0),
    ("[MAX 6 3 5 0 ]", 6),
    ("[MED 6 3 5 ]", 5),
    ("[MED 1 2 3 8 ]", 2),  # even count: int(2.5) = 2
    ("[MED 1 4 ]", 2),  # int(2.5)
    ("[MED 7 9 ]", 8),
    ("[SM 6 5 9 0 ]", 0),  # 20 mod 10
    ("[SM 9 9 ]", 8),
    ("[MAX 2 [MIN 8 3 ] [SM 4 7 ] ]", 3),
    ("7", 7),
  ],
)
def test_semantics_hand_checked(tokens, value):
  assert listops.evaluate_tokens(tokens.split()) == value


def test_parse_line_strips_brackets():
  example = listops.parse_line("0\t( ( ( ( ( [MIN 6 ) 3 ) 5 ) 0 ) ] )")
  assert example == listops.Example(0, ("[MIN", "6", "3", "5", "0", "]"))
  with pytest.raises(ValueError, match="label<TAB>expression"):
    listops.parse_line("no tab here")


def test_bracketing_matches_the_release_format():
  tree = ("[MIN", [6, 3, 5, 0])
  assert listops.to_bracketed(tree) == "( ( ( ( ( [MIN 6 ) 3 ) 5 ) 0 ) ] )"
  nested = ("[MAX", [2, ("[SM", [4, 7])])
  text = listops.to_bracketed(nested)
  assert text == "( ( ( [MAX 2 ) ( ( ( [SM 4 ) 7 ) ] ) ) ] )"
  example = listops.parse_line(f"{listops.evaluate(nested)}\t{text}")
  assert example.tokens == tuple("[MAX 2 [SM 4 7 ] ]".split()) and example.label == 2


def _depth(tree):
  return 0 if isinstance(tree, int) else 1 + max(_depth(c) for c in tree[1])


def test_generator_respects_depth_cap_and_arity():
  rng = random.Random(0)
  trees = [listops.generate_tree(rng) for _ in range(20_000)]
  assert max(_depth(t) for t in trees) <= listops.MAX_DEPTH - 1  # digits only at depth 20

  def arities(tree):
    if isinstance(tree, int):
      return []
    return [len(tree[1])] + [a for c in tree[1] for a in arities(c)]

  counts = np.bincount([a for t in trees for a in arities(t)])
  assert counts[:2].sum() == 0 and len(counts) == 6  # 2..5 arguments, all used
  # Operators appear with probability 0.25 at every depth < 20: at the root
  # the fraction is 0.25 within 5 binomial standard errors.
  roots = np.mean([not isinstance(t, int) for t in trees])
  assert abs(roots - 0.25) < 5 * np.sqrt(0.25 * 0.75 / len(trees))


def test_generate_is_deduplicated_seeded_and_excludes():
  lines = listops.generate(500, seed=3)
  assert len(set(lines)) == 500 and lines == listops.generate(500, seed=3)
  expressions = {line.split("\t")[1] for line in lines}
  again = listops.generate(500, seed=4, exclude=expressions)
  assert not expressions & {line.split("\t")[1] for line in again}
  for line in lines:
    example = listops.parse_line(line)
    assert listops.evaluate_tokens(example.tokens) == example.label


@pytest.mark.slow
def test_generated_length_statistics_match_the_release():
  """About 35% / 65% / 80% at L <= 10 / 25 / 50 (the test file: 35.3 / 64.8 / 79.7).

  Deduplication removes short expressions more often the more are drawn, so
  the statistics are those of a release-sized set (90k lines).
  """
  n, n_test = 90_000, 10_000
  stats = listops.length_statistics(
    [listops.parse_line(line) for line in listops.generate(n, seed=1)]
  )
  for threshold, expected in ((10, 0.353), (25, 0.648), (50, 0.797)):
    # 5 standard errors of the difference of two binomial proportions (90k vs the 10k test file).
    se = np.sqrt(expected * (1 - expected) * (1 / n + 1 / n_test))
    assert abs(stats[threshold] - expected) < 5 * se


def test_encode_pads_and_masks():
  examples = [listops.Example(3, ("[MIN", "3", "4", "]")), listops.Example(7, ("7",))]
  batch = listops.encode(examples, max_length=6)
  assert batch.tokens.shape == (2, 6)
  np.testing.assert_array_equal(batch.lengths, [4, 1])
  np.testing.assert_array_equal(batch.tokens[1, 1:], listops.TOKEN_ID[listops.PAD])
  assert listops.subset(examples, 2) == [examples[1]]
  with pytest.raises(ValueError, match="max_length"):
    listops.encode(examples, max_length=3)


@pytest.mark.parametrize(
  "line, what",
  [
    ("3 [MAX 3 1 ]", "one tab"),
    ("3\t[MAX 3 1 ]\textra", "one tab"),
    ("x\t[MAX 3 1 ]", "label must be an integer in 0..9, got 'x'"),
    ("12\t[MAX 3 1 ]", "label must be an integer in 0..9, got '12'"),
    ("-1\t[MAX 3 1 ]", "label must be an integer in 0..9, got '-1'"),
    ("3\t[MAX 3 one ]", "unknown tokens ['one']"),
    ("3\t( ( ) )", "the expression is empty"),
    ("3\t[MAX 3 1", "malformed: 1 operator(s) not closed"),
    ("3\t[MAX 3 1 ] ]", "malformed: a ']' closes no operator"),
    ("3\t[MAX ]", "malformed: an operator has no arguments"),
    ("3\t3 4", "malformed: 2 top-level expressions"),
    ("4\t[MAX 3 1 ]", "the label 4 disagrees with the expression's value 3"),
  ],
)
def test_bad_lines_name_the_file_the_line_and_the_problem(tmp_path, line, what):
  path = tmp_path / "bad.tsv"
  path.write_text("0\t[MIN 6 3 5 0 ]\n\n" + line + "\n")
  with pytest.raises(InvalidDataError) as info:
    listops.load_tsv(path)
  message = str(info.value)
  assert message.startswith(f"{path}:3: ") and what in message, message


def test_the_shared_evaluation_files_pass_the_checks():
  """Our evaluator agrees with every label of the released files, when they are here."""
  for name, count in (("test_d20s.tsv", 10_000), ("valid_d20s_1k.tsv", 1_000)):
    path = SHARED / name
    if not path.is_file():
      pytest.skip(f"{path} is not on this machine (it is not part of the repository)")
    assert len(listops.load_tsv(path)) == count
