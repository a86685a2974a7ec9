"""Writes docs/leaderboard.md from the field benchmark's workdirs (no number typed by hand).

Reads ``RUNS/<setting>/<run>`` (``scripts/field_benchmark.py``'s layout:
config.json, results.json, metrics.jsonl) and, with ``--bench``, the JSON rows
of ``scripts/bench_vae.py --out`` (ms per step). One row per estimator x model
x dataset (a row whose temperature is not the setting's shows it beside the
name): loss evaluations per step (the registry's), steps, seeds, the
training negative ELBO (the mean of the last 1 % of steps, mean and standard
deviation over seeds), the test bound (IWAE-100, the suite's; IWAE-1000
beside it), the inference network's gradient variance at fixed steps, ms per
step. Then, per setting, paired by seed: DisARM against RLOO-2 (the suite's
claim at equal evaluations, with the count of (seed, step) pairs where DisARM's
variance is the lower), every estimator at equal loss evaluations and at equal
wall time (its training curve read where the budget runs out), each GR row
against RLOO-2 and DisARM at both budgets, and the test bound's differences
seed by seed (every row against DisARM, the best row against the others, GR
against ST-GS), so that prose about the rows cites these lines rather than
typing their numbers.

  python scripts/leaderboard.py --runs=records/field \\
    --bench=records/bench_bernoulli.json --out=docs/leaderboard.md

(``records/field``: the records ``field_benchmark.py --records`` keeps;
``runs/field`` itself reads the same.)
"""

import _clone  # noqa: F401, I001  (the clone's experiments/ and configs/ on sys.path)
import json
import pathlib
import statistics

import formatting
from absl import app, flags

from gr_jax import estimators

_RUNS = flags.DEFINE_string("runs", None, "The field benchmark's --out directory.", required=True)
_BENCH = flags.DEFINE_string("bench", "", "scripts/bench_vae.py --out JSON (ms per step).")
_OUT = flags.DEFINE_string("out", "docs/leaderboard.md", "The Markdown file to write.")
_VARIANCE_STEPS = flags.DEFINE_list(
  "variance_steps", ["10000", "-1"], "Steps of the gradient-variance columns (-1: the last)."
)

MODELS = {"bernoulli_linear": "linear", "bernoulli_nonlinear": "non-linear"}
DATASETS = {
  "fashion_mnist": "Fashion-MNIST",
  "mnist": "MNIST",
  "binarized_mnist": "static binarized MNIST",
}


def _spread(values) -> str:
  values = [v for v in values if v is not None]
  return formatting.spread(values) if values else "-"


def _read_run(workdir: pathlib.Path) -> dict | None:
  """A finished run: its config, results, and per member its train curve and variances."""
  try:
    config = json.loads((workdir / "config.json").read_text())
    results = json.loads((workdir / "results.json").read_text())
  except (OSError, ValueError):
    return None
  curves, variances = {}, {}
  for line in (workdir / "metrics.jsonl").read_text().splitlines():
    record = json.loads(line)
    member = record.get("member")
    if record.get("split") != "train" or record.get("final"):
      continue
    if record.get("neg_elbo") is not None:
      curves.setdefault(member, {})[record["step"]] = record["neg_elbo"]
    if record.get("log10_grad_variance") is not None:
      variances.setdefault(member, {})[record["step"]] = record["log10_grad_variance"]
  seeds = {m["member"]: m["seed"] for m in results["members"]}
  return {
    "config": config,
    "estimator": config["estimator"],
    "results": results,
    "steps": results["steps"],
    "members": {
      seeds[m["member"]]: {
        **m,
        "curve": curves.get(m["member"], {}),
        "variance": variances.get(m["member"], {}),
      }
      for m in results["members"]
    },
  }


def _final_neg_elbo(member: dict, steps: int) -> float | None:
  """The mean training negative ELBO over the last 1 % of the steps (the logged intervals there)."""
  window = [v for s, v in member["curve"].items() if s > steps - max(1, steps // 100)]
  return statistics.mean(window) if window else None


def _at(curve: dict, step: float) -> float | None:
  """The training curve at the logged step nearest below ``step``."""
  logged = [s for s in curve if s <= step]
  return curve[max(logged)] if logged else None


def _seconds(seconds: float) -> str:
  return formatting.duration(seconds) if seconds >= 120 else f"{seconds:.2f} s"


def _bench(path: str) -> dict:
  if not path:
    return {}
  rows = json.loads(pathlib.Path(path).read_text())
  return {(r["model"], r["row"]): (r["ms"], r["device"]) for r in rows}


def main(argv):
  del argv
  runs_dir = pathlib.Path(_RUNS.value)
  bench = _bench(_BENCH.value)
  settings = {}
  for workdir in sorted(p.parent for p in runs_dir.glob("*/*/results.json")):
    run = _read_run(workdir)
    if run is not None:
      settings.setdefault(workdir.parent.name, {})[workdir.name] = run
  if not settings:
    raise SystemExit(f"error: no finished run under {runs_dir}/<setting>/<run>.")
  try:
    variance_steps = [int(s) for s in _VARIANCE_STEPS.value]
  except ValueError:
    raise app.UsageError(f"--variance_steps must be ints; got {_VARIANCE_STEPS.value}.") from None
  lines = [
    "# Leaderboard: Bernoulli VAEs of the DisARM protocol",
    "",
    "Written by `scripts/leaderboard.py` from the runs of `scripts/field_benchmark.py` (every"
    " number from their files). Train −ELBO: the mean of the last 1 % of steps; test: IWAE bounds"
    " on the test images (binarized once, seeded); lower is better everywhere; mean ± standard"
    " deviation over seeds. log10 Var: the trace of the inference network's gradient covariance"
    " over 100 draws on a fixed batch.",
  ]
  for setting, runs in settings.items():
    # The setting's temperature: most rows'; a row at another one is labelled with its own.
    tau = statistics.mode(r["config"]["tau"] for r in runs.values())
    config = next(r for r in runs.values() if r["config"]["tau"] == tau)["config"]
    model_name = MODELS.get(config["model"], config["model"])
    title = f"{model_name}, {DATASETS.get(config['dataset'], config['dataset'])}"
    extra = (config.get("extra_test_samples") or [None])[0]
    steps = {r["steps"] for r in runs.values()}
    seeds = sorted({s for r in runs.values() for s in r["members"]})
    model_bench = config["model"]
    lines += [
      "",
      f"## {title} ({config['binarization']} binarization)",
      "",
      "`python scripts/field_benchmark.py --out=runs/field --records=records/field"
      f" --data_root=../shared/data --settings={setting}"
      f" --steps={max(steps)} --seeds={','.join(map(str, seeds))}`; batch {config['batch_size']},"
      f" optimizer {config['optimizer']} (lr {config['learning_rate']}, prior"
      f" {config['prior_learning_rate']}), τ {tau}.",
      "",
      f"| estimator | loss evals / step | steps | seeds | train −ELBO |"
      f" test IWAE-{config['num_eval_samples']} | test IWAE-{extra} | "
      + " | ".join(f"log10 Var at {'end' if s < 0 else f'{s:,}'}" for s in variance_steps)
      + " | ms / step |",
      "|---|---|---|---|---|---|---|" + "---|" * len(variance_steps) + "---|",
    ]
    timings = {
      n: bench.get((model_bench, f"B={config['batch_size']} {r['estimator']}"))
      for n, r in runs.items()
    }
    for name, run in runs.items():
      members = run["members"].values()
      evaluations = estimators.get(run["estimator"]).loss_evaluations
      label = run["estimator"]
      if run["config"]["tau"] != tau:
        label += f" (τ {run['config']['tau']})"
      variance_cells = []
      for step in variance_steps:
        at = run["steps"] if step < 0 else step
        variance_cells.append(_spread([m["variance"].get(at) for m in members]))
      ms = f"{timings[name][0]:.2f}" if timings[name] else "-"
      lines.append(
        f"| {label} | {evaluations} | {run['steps']:,} | {len(members)} |"
        f" {_spread([_final_neg_elbo(m, run['steps']) for m in members])} |"
        f" {_spread([m.get('test_nll') for m in members])} |"
        f" {_spread([m.get(f'test_nll_M{extra}') for m in members])} |"
        f" {' | '.join(variance_cells)} | {ms} |"
      )
    devices = sorted({timing[1] for timing in timings.values() if timing})
    if devices:
      lines += ["", f"ms / step: `scripts/bench_vae.py` on {', '.join(devices)}."]
    lines += _claims(runs, timings)
    lines += _test_by_seed(runs, config["num_eval_samples"], seeds)
  lines += [
    "",
    "## The DisARM paper's own numbers",
    "",
    "Not beside ours: the stored copy of Dong, Mnih & Tucker (2020) that this project can read"
    " holds its opening and figure captions only; its results are curves (Figures 5-6) and an"
    " appendix table, neither readable here. Nothing of theirs is typed in by hand.",
  ]
  pathlib.Path(_OUT.value).write_text("\n".join(lines) + "\n")
  print("\n".join(lines))


def _paired(a: dict, b: dict, value) -> list[float]:
  """value(b member) - value(a member), for each seed both hold (None-free)."""
  by_seed = [{seed: value(r, m) for seed, m in r["members"].items()} for r in (a, b)]
  return _seed_differences(*by_seed)


def _read_at(run: dict, step: float) -> dict:
  """{seed: the member's training curve at ``step``}."""
  return {seed: _at(m["curve"], step) for seed, m in run["members"].items()}


def _cells(values: dict) -> str:
  return "; ".join(f"{name} {_spread(list(by_seed.values()))}" for name, by_seed in values.items())


def _seed_differences(a: dict, b: dict) -> list[float]:
  """b - a for each seed both hold (None-free)."""
  return [b[s] - a[s] for s in sorted(set(a) & set(b)) if a[s] is not None and b[s] is not None]


def _claims(runs: dict, timings: dict) -> list[str]:
  """The paired DisARM - RLOO-2 line, the equal-evaluation and equal-wall-time lines, and each GR
  row against RLOO-2 and DisARM paired by seed at those budgets; ``timings``: run -> (ms per
  step, device) from the bench, or None."""
  lines = []
  if "disarm" in runs and "rloo2" in runs:
    rloo, disarm = runs["rloo2"], runs["disarm"]
    steps = sorted({s for m in rloo["members"].values() for s in m["variance"]})
    variance = {
      s: _paired(rloo, disarm, lambda r, m, s=s: m["variance"].get(s)) for s in steps if s > 0
    }
    elbo = _paired(rloo, disarm, lambda r, m: _final_neg_elbo(m, r["steps"]))
    test = _paired(rloo, disarm, lambda r, m: m.get("test_nll"))
    pairs = [d for v in variance.values() for d in v]
    lines += [
      "",
      "DisARM − RLOO-2 at equal evaluations (two per step), paired by seed: log10 Var "
      + ", ".join(f"{_spread(v)} at {s:,}" for s, v in variance.items() if v)
      + f" (DisARM's lower at {sum(d < 0 for d in pairs)} of the {len(pairs)} (seed, step)"
      f" pairs); train −ELBO {_spread(elbo)}; test IWAE-100 {_spread(test)} (negative: DisARM"
      " lower).",
    ]
  evaluations = {n: estimators.get(r["estimator"]).loss_evaluations for n, r in runs.items()}
  budget = min(r["steps"] * evaluations[n] for n, r in runs.items())
  # Each member's train -ELBO where a budget runs out: {name: {seed: value}}.
  at_budget = {
    "equal loss evaluations": {n: _read_at(r, budget / evaluations[n]) for n, r in runs.items()}
  }
  lines += [
    "",
    f"Train −ELBO at equal loss evaluations ({budget:,} each, read on the training curves): "
    + _cells(at_budget["equal loss evaluations"])
    + ".",
  ]
  if all(timings.values()):
    seconds = min(runs[n]["steps"] * timings[n][0] / 1e3 for n in runs)
    at_budget["equal wall time"] = {
      n: _read_at(r, seconds * 1e3 / timings[n][0]) for n, r in runs.items()
    }
    lines += [
      "",
      f"Train −ELBO at equal wall time ({_seconds(seconds)} of training steps at the"
      f" bench's ms per step, {next(iter(timings.values()))[1]}): "
      + _cells(at_budget["equal wall time"])
      + ".",
    ]
  unbiased = [n for n in ("rloo2", "disarm") if n in runs]
  for name in _gr_rows(runs) if unbiased else []:
    cells = [
      f"{name} − {other} {_spread(_seed_differences(values[other], values[name]))} at {budget_name}"
      for other in unbiased
      for budget_name, values in at_budget.items()
    ]
    lines += [
      "",
      f"{name} against the unbiased estimators, train −ELBO paired by seed: "
      + "; ".join(cells)
      + " (negative: GR lower).",
    ]
  return lines


def _gr_rows(runs: dict) -> list[str]:
  """The runs of the registry's Gumbel-Rao family (GR-MCK, GR-QMCK, GR-exact)."""
  return [n for n, r in runs.items() if estimators.get(r["estimator"]).family == "gumbel_rao"]


def _test_by_seed(runs: dict, num_samples: int, seeds: list) -> list[str]:
  """The test bound's differences seed by seed, for the comparisons the status cites: every row
  against DisARM, the row with the lowest mean against every other, each GR row against ST-GS."""
  test = {n: {seed: m.get("test_nll") for seed, m in r["members"].items()} for n, r in runs.items()}
  mean = {n: statistics.mean(v for v in t.values() if v is not None) for n, t in test.items()}
  best = min(mean, key=mean.get)
  groups = []
  if "disarm" in runs:
    groups.append(("against DisARM", [(n, "disarm") for n in runs if n != "disarm"]))
  groups.append((f"the lowest ({best}) against the others", [(best, n) for n in runs if n != best]))
  if "st_gs" in runs and (gr_rows := _gr_rows(runs)):
    groups.append(("GR against ST-GS", [(n, "st_gs") for n in gr_rows]))
  lines = []
  for title, pairs in groups:
    cells = []
    for b, a in pairs:
      differences = _seed_differences(test[a], test[b])
      cells.append(
        f"{b} − {a} {', '.join(f'{d:+.2f}' for d in differences)}"
        f" ({b} lower on {sum(d < 0 for d in differences)} of {len(differences)})"
      )
    lines += [
      "",
      f"Test IWAE-{num_samples} by seed ({', '.join(map(str, seeds))}), {title}: "
      + "; ".join(cells)
      + ".",
    ]
  return lines


if __name__ == "__main__":
  app.run(main)
