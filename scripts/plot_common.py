"""Reading run directories (config.json + metrics.jsonl) for the plot_*.py scripts."""

import glob
import json
import logging
import math
import pathlib

import matplotlib
from ml_collections import ConfigDict

from experiments import search
from experiments.registry import EXPERIMENTS

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
        runs.append((_config(path / "config.json"), _records(path / "metrics.jsonl")))
  if not runs:
    raise SystemExit(
      f"error: no run directory (with config.json and metrics.jsonl) matches {patterns}"
    )
  return runs


def _config(path: pathlib.Path) -> dict:
  try:
    config = json.loads(path.read_text())
  except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
    raise SystemExit(f"error: {path} is damaged ({e}): that run cannot be plotted.") from None
  if not isinstance(config, dict):
    raise SystemExit(f"error: {path} is damaged (not a JSON object): that run cannot be plotted.")
  return config


def _records(path: pathlib.Path) -> list[dict]:
  """metrics.jsonl's records; damaged lines (a disk that filled, an edit) are skipped, and said."""
  records, damaged = [], []
  for number, line in enumerate(path.read_bytes().decode(errors="replace").splitlines(), 1):
    if not line.strip():
      continue
    try:
      record = json.loads(line)
    except json.JSONDecodeError:
      record = None
    if isinstance(record, dict) and isinstance(record.get("step"), int):
      records.append(record)
    else:
      damaged.append(number)
  if damaged:
    print(
      f"warning: {path}: skipped {len(damaged)} damaged line(s) (line {damaged[0]}"
      f"{', ...' if len(damaged) > 1 else ''}); the plot uses the other {len(records)}."
    )
  return records


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


def member_hyperparameters(workdir: pathlib.Path, config: dict) -> dict[int, dict]:
  """{member: its own hyperparameters and seed}: results.json's members once the population has
  finished; before, the members its config's search draws (the same: they depend on the config
  alone)."""
  results = workdir / "results.json"
  if results.is_file():
    try:
      return {m["member"]: m for m in json.loads(results.read_text())["members"]}
    except (UnicodeDecodeError, ValueError, KeyError, TypeError) as e:
      raise SystemExit(
        f"error: {results} is damaged ({type(e).__name__}: {e}): rerun the population's command"
        " to rewrite it."
      ) from None
  experiment = EXPERIMENTS[config["experiment"]]
  lists = {k: tuple(v) if isinstance(v, list) else v for k, v in config["population"].items()}
  chosen = search.members(
    ConfigDict({**config, "population": lists}),
    experiment.HYPERPARAMETERS,
    experiment.paper_search,
  )
  return {m.index: {**m.hyperparameters, "seed": m.seed} for m in chosen}
