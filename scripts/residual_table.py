"""What a model change and a longer run are worth, paired by seed: Table 2's residual.

Reads populations that ``scripts/ablation_vae.py`` trained to one length with the
validation bound also measured at a midpoint on the way (``--set=num_steps=100000
--set=eval_every=50000 --set=periodic_eval_samples=1000``): every arm directory
under the given setting directories (``OUT/<setting>``). Seeds may be spread
over several of them (seed 0 trained alone in one ``--out``, seeds 1-2 in
another: a member's trajectory does not depend on its population), but each
arm must hold the same seeds, so that every difference pairs up. Prints, as
Markdown, each arm's bounds and then the account on validation: the arm
against the reference at the midpoint and at the end, the second half of the
training for each arm, and both together (the arm at the end against the
reference at the midpoint). Mean ± standard deviation over the seeds.

  python scripts/residual_table.py --midpoint=50000 \\
    runs/ablation_gr100_seed0/lr5e-3_m0.4_tau0.64 runs/ablation_gr100_seeds12/lr5e-3_m0.4_tau0.64
"""

import json
import pathlib

import formatting
from absl import app, flags

_REFERENCE = flags.DEFINE_string(
  "reference",
  "concrete__all_choices_",
  "The arm directory the others are compared with (ablation_vae.py's name for the default model).",
)
_MIDPOINT = flags.DEFINE_integer(
  "midpoint", 50000, "Step of the periodic validation bound measured on the way."
)


class TableError(ValueError):
  """The runs cannot be read as one paired table (the message says what and where)."""


def read_arm(workdir: pathlib.Path, midpoint: int) -> tuple[int, dict[int, dict[str, float]]]:
  """Steps trained and, per seed, the validation bound at ``midpoint`` and the final bounds."""
  try:
    results = json.loads((workdir / "results.json").read_text())
  except FileNotFoundError:
    raise TableError(f"{workdir}: no results.json (the run has not finished)") from None
  if not 0 < midpoint < results["steps"]:
    raise TableError(
      f"--midpoint={midpoint}: must lie strictly between 0 and the {results['steps']} steps "
      f"trained in {workdir}"
    )
  at_midpoint = {}
  with open(workdir / "metrics.jsonl") as metrics:
    for line in metrics:
      record = json.loads(line)
      if record.get("split") == "valid" and record["step"] == midpoint:
        at_midpoint[record["member"]] = record["nll"]
  bounds = {}
  for member in results["members"]:
    if member["member"] not in at_midpoint:
      raise TableError(
        f"{workdir / 'metrics.jsonl'}: no validation bound at step {midpoint} for member "
        f"{member['member']} (train with --set=eval_every={midpoint})"
      )
    bounds[member["seed"]] = {
      "midpoint": at_midpoint[member["member"]],
      "valid": member["valid_nll"],
      "test": member["test_nll"],
    }
  return results["steps"], bounds


def collect(setting_dirs: list[pathlib.Path], midpoint: int) -> tuple[int, dict]:
  """Every arm's bounds by seed, merged over ``setting_dirs``; one length, the same seeds."""
  arms: dict[str, dict[int, dict[str, float]]] = {}
  lengths = {}
  for setting_dir in setting_dirs:
    workdirs = (
      sorted(p for p in setting_dir.iterdir() if p.is_dir()) if setting_dir.is_dir() else []
    )
    if not workdirs:
      raise TableError(f"{setting_dir}: no arm directories (expected OUT/<setting>/<arm>/)")
    for workdir in workdirs:
      lengths[workdir], by_seed = read_arm(workdir, midpoint)
      for seed, bounds in by_seed.items():
        if seed in arms.setdefault(workdir.name, {}):
          raise TableError(f"{workdir}: seed {seed} of arm {workdir.name} appears twice")
        arms[workdir.name][seed] = bounds
  if len(set(lengths.values())) > 1:
    raise TableError(
      f"the runs differ in length: {', '.join(f'{w}: {s}' for w, s in lengths.items())}"
    )
  seed_sets = {name: sorted(seeds) for name, seeds in arms.items()}
  if len({tuple(seeds) for seeds in seed_sets.values()}) > 1:
    raise TableError(f"the arms hold different seeds, so they do not pair up: {seed_sets}")
  return next(iter(lengths.values())), arms


def table(steps: int, arms: dict, reference: str, midpoint: int) -> list[str]:
  """The Markdown lines: each arm's bounds, then the account on validation (arm minus reference)."""
  if reference not in arms:
    raise TableError(f"--reference={reference}: not among the arms ({', '.join(sorted(arms))})")
  seeds = sorted(arms[reference])
  others = [name for name in sorted(arms) if name != reference]

  def values(arm, key):
    return [arms[arm][seed][key] for seed in seeds]

  def paired(arm_a, key_a, arm_b, key_b):
    return formatting.spread([a - b for a, b in zip(values(arm_a, key_a), values(arm_b, key_b))])

  lines = [
    f"| arm | seeds | valid, {midpoint:,} steps | valid, {steps:,} | test, {steps:,} |"
    " test − reference (paired) |",
    "|---|---|---|---|---|---|",
  ]
  for arm in [reference, *others]:
    lines.append(
      f"| {arm} | {formatting.seeds(len(seeds))} | {formatting.spread(values(arm, 'midpoint'))} |"
      f" {formatting.spread(values(arm, 'valid'))} | {formatting.spread(values(arm, 'test'))} |"
      f" {'-' if arm == reference else paired(arm, 'test', reference, 'test')} |"
    )
  lines += ["", f"| account on validation, paired by seed (seeds {seeds}) | nats |", "|---|---|"]
  for arm in others:
    lines.append(
      f"| {arm} − {reference}, at {midpoint:,} steps |"
      f" {paired(arm, 'midpoint', reference, 'midpoint')} |"
    )
    lines.append(
      f"| {arm} − {reference}, at {steps:,} steps | {paired(arm, 'valid', reference, 'valid')} |"
    )
  for arm in [reference, *others]:
    lines.append(
      f"| {arm}: {steps:,} − {midpoint:,} steps | {paired(arm, 'valid', arm, 'midpoint')} |"
    )
  for arm in others:
    lines.append(
      f"| together: {arm} at {steps:,} − {reference} at {midpoint:,} |"
      f" {paired(arm, 'valid', reference, 'midpoint')} |"
    )
  return lines


def main(argv):
  if len(argv) < 2:
    raise app.UsageError("give one or more setting directories (OUT/<setting> of ablation_vae.py)")
  try:
    steps, arms = collect([pathlib.Path(a) for a in argv[1:]], _MIDPOINT.value)
    print("\n".join(table(steps, arms, _REFERENCE.value, _MIDPOINT.value)))
  except TableError as error:
    raise SystemExit(f"error: {error}") from None


if __name__ == "__main__":
  app.run(main)
