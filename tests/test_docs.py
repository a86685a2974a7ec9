"""README.md and docs/: every relative link resolves, and the Python blocks of the API pages run."""

import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _anchors(page: pathlib.Path) -> set[str]:
  """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens."""
  headings = [
    line.lstrip("#").strip() for line in page.read_text().splitlines() if line.startswith("#")
  ]
  return {re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-") for h in headings}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page):
  broken = []
  for target in LINK.findall(page.read_text()):
    if re.match(r"[a-z]+://", target) or target.startswith("mailto:"):
      continue
    path, _, anchor = target.partition("#")
    file = (page.parent / path).resolve() if path else page
    if not file.exists():
      broken.append(target)
    elif anchor and file.suffix == ".md" and anchor not in _anchors(file):
      broken.append(target)
  assert not broken, broken


@pytest.mark.parametrize("page", ["README.md", "docs/estimators.md"])
def test_python_blocks_run(page):
  for block in re.findall(r"```python\n(.*?)```", (ROOT / page).read_text(), re.S):
    exec(compile(block, page, "exec"), {})
