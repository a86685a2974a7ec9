"""scripts/gpu_studies.sh: every lane names arms its study declares, so that a renamed arm fails
here and not in a GPU window (the window itself is tried at tiny sizes by GR_JAX_TRY=1, see its
header: it needs minutes, and a GPU for its real sizes)."""

import re
import subprocess

from experiments.studies import page
from tests.cli import ROOT

SCRIPT = ROOT / "scripts" / "gpu_studies.sh"


def test_the_script_parses():
  subprocess.run(["bash", "-n", str(SCRIPT)], check=True)


def test_every_lane_names_arms_of_its_study():
  lanes = re.findall(r"^  study (\d) ([\w:]+) (\S+)", SCRIPT.read_text(), re.M)
  assert {lane for lane, _, _ in lanes} == {"1", "2", "3", "4", "5"}
  for _, spec, arms in lanes:
    name, _, arg = spec.partition(":")
    study = page.load_study(f"configs/studies/{name}.py" + (f":{arg}" if arg else ""))
    # A search's fresh-seed arms are declared once its records are kept (by an earlier command
    # of the same lane): not yet on a clone.
    named = [spec for spec in arms.split(",") if "/fresh/" not in spec]
    if named:
      assert study.select(named)  # raises ValueError for a name that is no arm's
