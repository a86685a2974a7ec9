"""ListOps (Nangia & Bowman 2018), d20s release: parsing, generation, batching.

A line is ``label<TAB>expression``; the expression is a fully bracketed binary
tree, ``( ( ( [MAX a ) b ) ] )`` for ``[MAX a b ]``. Models read the token
sequence with the parentheses removed; its length L defines the L <= 10 / 25 /
50 subsets.

The original ~90k-line training file is not distributed with this project, so
:func:`generate` re-implements the generating process: operators ``[MIN``,
``[MAX``, ``[MED`` (int of numpy's median: the floor of the mean of the two
middle values for an even count), ``[SM`` (sum mod 10) chosen uniformly; values
0-9; a node at depth d < 20 (root d = 1) is an operator with probability 0.25,
else a digit, and at d = 20 a digit; an operator takes 2 to 5 arguments.
"""

from __future__ import annotations

import pathlib
import random
from typing import NamedTuple, Sequence, Union

import numpy as np

from gr_jax.data._common import Dataset, InvalidDataError

OPERATORS = ("[MIN", "[MAX", "[MED", "[SM")
CLOSE = "]"
DIGITS = tuple(str(d) for d in range(10))
PAD = "<pad>"
VOCAB = (PAD, *OPERATORS, CLOSE, *DIGITS)
TOKEN_ID = {t: i for i, t in enumerate(VOCAB)}
NUM_CLASSES = 10
MAX_DEPTH = 20
OPERATOR_PROBABILITY = 0.25
# Bumped whenever generate() would draw other lines for the same (size, seed): caches name it.
GENERATOR_VERSION = 2
MIN_ARGS, MAX_ARGS = 2, 5

Tree = Union[int, tuple]  # a digit, or (operator, [children])


class Example(NamedTuple):
  label: int
  tokens: tuple[str, ...]


def _check_structure(tokens: Sequence[str]) -> str | None:
  """What is wrong with a prefix expression (None if it is one well-formed expression)."""
  open_counts: list[int] = []  # arguments so far of each open operator
  roots = 0
  for token in tokens:
    if token in OPERATORS:
      open_counts.append(0)
      continue
    if token == CLOSE:
      if not open_counts:
        return "a ']' closes no operator"
      if open_counts.pop() == 0:
        return "an operator has no arguments"
    if open_counts:
      open_counts[-1] += 1
    else:
      roots += 1
  if open_counts:
    return f"{len(open_counts)} operator(s) not closed by ']'"
  if roots != 1:
    return f"{roots} top-level expressions instead of one"
  return None


def parse_line(line: str, where: str = "") -> Example:
  """``"label<TAB>bracketed expression"`` -> Example(label, tokens without parentheses).

  The line is checked: one tab, a label in 0..9, known tokens, one well-formed
  expression, and a label equal to the expression's value (our evaluator).

  Args:
    line: one line of a ListOps TSV file.
    where: ``"file:line"`` for the error message.

  Raises:
    InvalidDataError: naming ``where`` and what is wrong.
  """
  prefix = f"{where}: " if where else ""

  def bad(what):
    return InvalidDataError(f"{prefix}{what}; the line is {line.rstrip()[:120]!r}")

  fields = line.rstrip("\n").split("\t")
  if len(fields) != 2:
    raise bad(f"a ListOps line is 'label<TAB>expression' (one tab), found {len(fields) - 1} tabs")
  label, expression = fields
  if label.strip() not in DIGITS:  # not isdigit(): it takes "²", which int() refuses
    raise bad(f"the label must be an integer in 0..{NUM_CLASSES - 1}, got {label!r}")
  tokens = tuple(t for t in expression.split() if t not in "()")
  unknown = sorted({t for t in tokens if t not in TOKEN_ID})
  if unknown:
    raise bad(f"unknown tokens {unknown} (known: {' '.join(VOCAB[1:])})")
  if not tokens:
    raise bad("the expression is empty")
  problem = _check_structure(tokens)
  if problem:
    raise bad(f"the expression is malformed: {problem}")
  value = evaluate_tokens(tokens)
  if value != int(label):
    raise bad(f"the label {int(label)} disagrees with the expression's value {value}")
  return Example(int(label), tokens)


def parse_lines(lines: Sequence[str], source: str) -> list[Example]:
  """Every non-blank line parsed and checked; errors name ``source`` and the line number."""
  return [
    parse_line(line, f"{source}:{number}") for number, line in enumerate(lines, 1) if line.strip()
  ]


def read_lines(path: str | pathlib.Path) -> list[str]:
  """The file's lines as UTF-8 text (a leading byte-order mark is dropped).

  Raises:
    InvalidDataError: a line is not UTF-8, naming the file, the line and the byte.
  """
  lines = []
  for number, raw in enumerate(pathlib.Path(path).read_bytes().splitlines(), 1):
    try:
      lines.append(raw.decode("utf-8-sig" if number == 1 else "utf-8"))
    except UnicodeDecodeError as e:
      raise InvalidDataError(
        f"{path}:{number}: not UTF-8 text (byte 0x{raw[e.start]:02x} at column {e.start + 1})"
      ) from None
  return lines


def load_tsv(path: str | pathlib.Path) -> list[Example]:
  return parse_lines(read_lines(path), str(path))


def apply_operator(operator: str, values: Sequence[int]) -> int:
  if operator == "[MIN":
    return min(values)
  if operator == "[MAX":
    return max(values)
  if operator == "[MED":
    return int(np.median(values))
  if operator == "[SM":
    return sum(values) % 10
  raise ValueError(f"unknown operator {operator!r}")


def evaluate(tree: Tree) -> int:
  if isinstance(tree, int):
    return tree
  operator, children = tree
  return apply_operator(operator, [evaluate(c) for c in children])


def evaluate_tokens(tokens: Sequence[str]) -> int:
  """Value of a prefix token sequence such as ``[MIN 6 3 5 0 ]``."""
  stack: list[list] = []
  value = None
  for token in tokens:
    if token in OPERATORS:
      stack.append([token])
    elif token == CLOSE:
      operator, *args = stack.pop()
      value = apply_operator(operator, args)
      if stack:
        stack[-1].append(value)
    else:
      value = int(token)
      if stack:
        stack[-1].append(value)
  return value


def generate_tree(rng: random.Random, depth: int = 1) -> Tree:
  """One random expression tree (root at depth 1)."""
  if depth < MAX_DEPTH and rng.random() < OPERATOR_PROBABILITY:
    operator = rng.choice(OPERATORS)
    num_args = rng.randint(MIN_ARGS, MAX_ARGS)
    return (operator, [generate_tree(rng, depth + 1) for _ in range(num_args)])
  return rng.randint(0, 9)


def to_bracketed(tree: Tree) -> str:
  """The d20s release's left-branching bracketing: ``( ( ( [MAX a ) b ) ] )``."""
  if isinstance(tree, int):
    return str(tree)
  operator, children = tree
  text = operator
  for child in children:
    text = f"( {text} {to_bracketed(child)} )"
  return f"( {text} {CLOSE} )"


def generate(num_examples: int, seed: int, exclude: set[str] = frozenset()) -> list[str]:
  """``num_examples`` distinct TSV lines, none of whose expressions is in ``exclude``.

  Deduplicates on the expression (most roots are single digits, so many more
  trees are drawn than kept).
  """
  rng = random.Random(seed)
  seen: set[str] = set(exclude)
  lines = []
  while len(lines) < num_examples:
    tree = generate_tree(rng)
    expression = to_bracketed(tree)
    if expression in seen:
      continue
    seen.add(expression)
    lines.append(f"{evaluate(tree)}\t{expression}")
  return lines


def expressions(path: str | pathlib.Path) -> set[str]:
  return {line.split("\t")[1] for line in read_lines(path) if line.strip()}


def length_statistics(examples: Sequence[Example], thresholds=(10, 25, 50)) -> dict[int, float]:
  """Fraction of examples with L <= threshold."""
  lengths = np.array([len(e.tokens) for e in examples])
  return {t: float(np.mean(lengths <= t)) for t in thresholds}


class Batch(NamedTuple):
  tokens: np.ndarray  # [B, L] int32 ids, PAD-padded
  lengths: np.ndarray  # [B] int32
  labels: np.ndarray  # [B] int32


def subset(examples: Sequence[Example], max_length: int) -> list[Example]:
  return [e for e in examples if len(e.tokens) <= max_length]


def encode(examples: Sequence[Example], max_length: int) -> Batch:
  """Pads every example to ``max_length`` (the subset's maximum length)."""
  tokens = np.zeros((len(examples), max_length), np.int32)
  for row, example in enumerate(examples):
    if len(example.tokens) > max_length:
      raise ValueError(f"example of length {len(example.tokens)} exceeds max_length={max_length}")
    tokens[row, : len(example.tokens)] = [TOKEN_ID[t] for t in example.tokens]
  lengths = np.array([len(e.tokens) for e in examples], np.int32)
  labels = np.array([e.label for e in examples], np.int32)
  return Batch(tokens, lengths, labels)


def _read_evaluation_files(
  directory: pathlib.Path, valid_file: str = "valid_d20s_1k.tsv", test_file: str = "test_d20s.tsv"
) -> dict[str, list[str]] | None:
  """The validation and test lines, when ``directory`` holds both files."""
  paths = {"valid": directory / valid_file, "test": directory / test_file}
  if not all(path.is_file() for path in paths.values()):
    return None
  return {split: read_lines(path) for split, path in paths.items()}


# The evaluation files (training data is generated: generate()); options valid_file, test_file.
DATASET = Dataset(
  name="listops",
  title="ListOps",
  files=lambda valid_file="valid_d20s_1k.tsv", test_file="test_d20s.tsv": (
    f"{test_file} and {valid_file}"
  ),
  read=_read_evaluation_files,
  how_to_get=(
    "They are the d20s release of Nangia & Bowman 2018 (--config.valid_file /"
    " --config.test_file name them); a validation split can also be generated with"
    " python -m scripts.generate_listops --out_dir=DIR."
  ),
)
