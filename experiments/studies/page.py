"""A results page whose every table is written from records: its blocks, and their refresh.

A block is a Markdown comment pair around generated text:

- ``<!-- study: configs/studies/kl.py[:ARG][ arms=A,B/] -->`` ... ``<!-- end -->``: the
  study's report (of the named arms, or prefixes), read from its kept records (no training);
- ``<!-- record: records/PATH.md -->`` ... ``<!-- end -->``: a table kept as a record
  file (the runs behind it kept no run records), included as it is.

:func:`refresh` rewrites every block from the records; a test checks that the
committed page equals its refresh, and that every decimal number in a section's
prose stands in one of that section's blocks (no number typed by hand).
"""

from __future__ import annotations

import importlib.util
import pathlib
import re

from experiments.studies import runner

_BLOCK = re.compile(r"(<!-- (study|record): (\S+(?: arms=\S+)?) -->\n)(.*?)(<!-- end -->)", re.S)
_ROOT = pathlib.Path(__file__).resolve().parents[2]


def load_study(spec: str) -> runner.Study:
  """The Study of ``FILE[:ARG]`` (FILE relative to the clone or absolute)."""
  path, _, arg = spec.partition(":")
  file = pathlib.Path(path) if pathlib.Path(path).is_file() else _ROOT / path
  if not file.is_file():
    raise ValueError(f"--study={spec}: no such file (the studies: configs/studies/*.py)")
  module_spec = importlib.util.spec_from_file_location(f"study_{file.stem}", file)
  module = importlib.util.module_from_spec(module_spec)
  module_spec.loader.exec_module(module)
  if not hasattr(module, "get_study"):
    raise ValueError(f"--study={spec}: the file defines no get_study()")
  study = module.get_study(arg) if arg else module.get_study()
  if not isinstance(study, runner.Study):
    raise ValueError(f"--study={spec}: get_study() must return an experiments.studies.runner.Study")
  return study


def render(kind: str, source: str) -> str:
  """A block's text, from the records."""
  if kind == "record":
    return (_ROOT / source).read_text().rstrip("\n") + "\n"
  spec, _, arms = source.partition(" arms=")
  study = load_study(spec)
  readings = runner.read(study, _ROOT / "runs" / "__records_only__", _ROOT / study.records)
  if arms:
    readings = readings.subset(a.name for a in study.select(arms.split(",")))
  return study.report(readings).markdown.rstrip("\n") + "\n"


def refresh(text: str) -> str:
  """``text`` with every block rewritten from the records."""
  return _BLOCK.sub(lambda m: m[1] + render(m[2], m[3]) + m[5], text)


def prose_numbers_not_in_blocks(text: str) -> list[tuple[str, str]]:
  """(section title, number) for each decimal number of a section's prose that none of the
  section's blocks holds."""
  missing = []
  for section in re.split(r"\n(?=## )", text):
    title = section.splitlines()[0] if section else ""
    blocks = " ".join(m[4] for m in _BLOCK.finditer(section))
    prose = _BLOCK.sub("", section)
    prose = re.sub(r"`[^`]*`", "", prose)  # commands and names, not results
    for match in re.finditer(r"(?<![\w.])[-−+]?\d+\.\d+", prose):
      if _SETTING.search(prose[max(0, match.start() - 16) : match.start()]):
        continue  # a setting (τ 0.64, momentum 0.4, ...), not a result
      number = match[0].lstrip("+-−")
      if not re.search(rf"(?<![\d.]){re.escape(number)}(?![\d])", blocks):
        missing.append((title, match[0]))
  return missing


# Words after which a number is a setting of the protocol rather than a measured result.
_SETTING = re.compile(r"(τ|tau|momentum|rate|M =|K =)\s*=?\s*$")
