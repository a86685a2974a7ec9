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
  assert {lane for lane, _, _ in lanes} == {"1", "2", "3", "4", "5", "6"}
  for _, lane_study, arms in lanes:
    name, colon, arg = lane_study.partition(":")
    study = page.load_study(f"configs/studies/{name}.py{colon}{arg}")
    assert study.select(arms.split(","))  # raises ValueError for a name that is no arm's
