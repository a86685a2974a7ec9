"""Reading run directories (config.json + metrics.jsonl) for the plot_*.py scripts."""

import glob
import json
import logging
import math
import pathlib

import matplotlib

# JAX's backend probe ("Unable to initialize backend 'tpu'") is not news to someone plotting.
logging.getLogger("jax._src.xla_bridge").setLevel(logging.WARNING)

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def load_runs(patterns):
  """[(config dict, [metric records])] for every run directory matching the patterns."""
  runs = []
  for pattern in patterns:
    for directory in sorted(glob.glob(pattern)):
      path = pathlib.Path(directory)
      if (path / "metrics.jsonl").is_file() and (path / "config.json").is_file():
        config = json.loads((path / "config.json").read_text())
        records = [
          json.loads(line)
          for line in (path / "metrics.jsonl").read_text().splitlines()
          if line.strip()
        ]
        runs.append((config, records))
  if not runs:
    raise SystemExit(
      f"error: no run directory (with config.json and metrics.jsonl) matches {patterns}"
    )
  return runs


def series(records, metric, split="train"):
  """Sorted (steps, values) of a metric, finite values only; the final evaluation's records
  (``"final": true``, another M on other images) are no curve point."""
  points = sorted(
    (r["step"], r[metric])
    for r in records
    if r.get("split") == split
    and not r.get("final")
    and metric in r
    and r[metric] is not None
    and math.isfinite(r[metric])
  )
  return [p[0] for p in points], [p[1] for p in points]


def estimator_label(name):
  return {"st": "ST", "st_gs": "ST-GS", "gs": "GS", "reinforce": "REINFORCE"}.get(
    name, name.upper().replace("GR_MC", "GR-MC")
  )


def save(fig, out):
  pathlib.Path(out).parent.mkdir(parents=True, exist_ok=True)
  fig.tight_layout()
  fig.savefig(out, dpi=120)
  plt.close(fig)
  print(f"wrote {out}")
