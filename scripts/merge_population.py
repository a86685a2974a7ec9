"""Merges the results of a population trained as a job array into one results.json and summary.md.

Each job of the array trains a slice of the members
(``--config.population.shard_index=I --config.population.num_shards=N``) in its
own workdir; this script checks that the slices belong to one population and
together cover it, then selects the best member on validation as a single job
would have.

  python scripts/merge_population.py --out=runs/search runs/search_shard0 runs/search_shard1
"""

import json
import pathlib

from absl import app, flags

from experiments import population

_OUT = flags.DEFINE_string("out", None, "Directory for the merged results.json and summary.md.", required=True)

# Keys that differ between the slices of one population.
_PER_SLICE = {"members", "shard", "selected_member", "final_eval_seconds", "trained_steps"}


def merge(workdirs: list[pathlib.Path], out: pathlib.Path) -> dict:
  slices = []
  for workdir in workdirs:
    path = workdir / "results.json"
    if not path.is_file():
      raise SystemExit(f"error: {path} does not exist: that slice has not finished (run its job again).")
    slices.append(json.loads(path.read_text()))
  first = slices[0]
  configs = [json.loads((w / "config.json").read_text()) for w in workdirs]
  for workdir, config in zip(workdirs[1:], configs[1:]):
    mismatch = [k for k in config if k != "population" and config[k] != configs[0].get(k)]
    mismatch += [f"population.{k}" for k in config["population"]
                 if k != "shard_index" and config["population"][k] != configs[0]["population"].get(k)]
    if mismatch:
      raise SystemExit(f"error: {workdir} is not a slice of the population in {workdirs[0]}: {', '.join(mismatch)} differ.")
  reports = sorted((m for s in slices for m in s["members"]), key=lambda m: m["member"])
  indices = [m["member"] for m in reports]
  if indices != list(range(first["population_size"])):
    missing = sorted(set(range(first["population_size"])) - set(indices))
    raise SystemExit(f"error: the slices do not cover the population of {first['population_size']}: members"
                     f" {missing or 'repeated'} (give every shard's workdir once).")
  metric, mode = first["selected_by"]
  columns = first["summary_columns"]
  common_results = {k: v for k, v in first.items() if k not in _PER_SLICE and k not in reports[0]}
  common_results.update(shard=[0, 1], merged_from=[str(w) for w in workdirs],
                        trained_steps=min(s["trained_steps"] for s in slices))
  out.mkdir(parents=True, exist_ok=True)
  return population.write_results(out, reports, metric, mode, common_results, columns)


def main(argv):
  results = merge([pathlib.Path(a) for a in argv[1:]], pathlib.Path(_OUT.value))
  print((pathlib.Path(_OUT.value) / "summary.md").read_text())
  print(f"selected member {results['selected_member']} by {' '.join(results['selected_by'])}")


if __name__ == "__main__":
  app.run(main)
