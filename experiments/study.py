"""Runs a study (configs/studies/*.py): trains what is missing, then writes its tables.

  python -m experiments.study --study=configs/studies/field.py --out=runs/field \
      --data_root=../shared/data [--records=records/field] [--arms=...] [--run=false]
  python -m experiments.study --refresh=docs/results.md

Each arm of the study is one population in ``OUT/<arm>``: finished ones are read
(from the workdir, else from the study's kept records), interrupted ones resume,
and each one's records are kept (``--records``, the study's own folder by
default) as it finishes. Then ``OUT/<study>.md`` and ``.json`` are written (and,
with ``--page``, the study's docs page), then the study's figures (``--figures``).
``--slurm=FILE`` writes a SLURM job array instead, one task per arm, and the job
that writes the tables after it. ``--slice=I/N`` trains the I-th of N slices of
each arm's population (its members split as a job array splits them), so that N
commands side by side train one arm; the last to finish merges the slices into
``OUT/<arm>`` and keeps its records:

  for i in 0 1 2; do python -m experiments.study --study=... --out=... --arms=ARM \
      --slice=$i/3 --tables=false & done
"""

from experiments import start_up_signals  # noqa: I001

start_up_signals.quit_while_loading()  # first, before jax loads

import importlib.util
import pathlib
import re
import signal
import sys

from absl import app, flags, logging

from experiments.studies import launch, page, records, runner, tables

_STUDY = flags.DEFINE_string(
  "study", None, "The study file (configs/studies/NAME.py; NAME.py:ARG passes ARG to get_study)."
)
_OUT = flags.DEFINE_string("out", None, "Directory for the arms' workdirs and the tables.")
_RECORDS = flags.DEFINE_string(
  "records",
  None,
  "The tracked folder that keeps each finished arm's records (default: the study's own, e.g."
  " records/field; '' keeps none).",
)
_RUN = flags.DEFINE_bool("run", True, "Train what is missing (false: only tabulate).")
_TABLES = flags.DEFINE_bool("tables", True, "Write the tables after training.")
_ARMS = flags.DEFINE_list("arms", None, "Train only these arms (names, or 'prefix/').")
_SLICE = flags.DEFINE_string(
  "slice",
  "",
  "I/N: train only the I-th of N slices (0 <= I < N) of each arm's population; the N commands run"
  " side by side (cores, machines), and the last to finish merges the slices into the arm's run.",
)
_ACCEPT_MIXED_CODE = flags.DEFINE_bool(
  "accept_mixed_code",
  False,
  "With --slice: merge slices trained (or resumed) on other code (sources, jax / jaxlib / flax /"
  " optax versions); the kept results.json records each slice's code segments.",
)
_SET = flags.DEFINE_multi_string("set", [], "FIELD=VALUE config overrides for every arm.")
_DATA_ROOT = flags.DEFINE_string("data_root", "", "A directory holding the arms' dataset folders.")
_PAGE = flags.DEFINE_bool("page", False, "Also write the study's docs page (generated only).")
_FIGURES = flags.DEFINE_string(
  "figures",
  "",
  "Where the study's figures (PNG) go: default OUT/figures, or docs/figures with --page (not"
  " drawn, and said, without matplotlib); 'none' draws none.",
)
_SLURM = flags.DEFINE_string("slurm", "", "Write a SLURM job-array script here instead of running.")
_REFRESH = flags.DEFINE_string(
  "refresh",
  "",
  "Rewrite every generated block of this results page (docs/results.md) from the records, and"
  " exit (no --study or --out).",
)


def _records_dir(study: runner.Study) -> pathlib.Path | None:
  value = study.records if _RECORDS.value is None else _RECORDS.value
  return pathlib.Path(value) if value else None


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  start_up_signals.interrupt_while_starting()
  if not flags.FLAGS["verbosity"].present:
    # The study's lines are its own prints; jax's INFO lines (a slice's merge starts a backend)
    # would be mixed into them. Each run's log keeps its own.
    logging.set_verbosity(logging.WARNING)
  try:
    _study()
  except launch.Interrupted as e:
    _interrupted(f"{e}; ", e.signum)
  except (ValueError, launch.LaunchError, records.RecordError) as e:
    sys.exit(f"error: {e}")
  except KeyboardInterrupt:
    _interrupted("", signal.SIGINT)


def _interrupted(what: str, signum: int):
  """Ends as an interrupted command does (status 128 + signum, which schedulers and shells read
  as stopped, not failed), with one line."""
  print(
    f"interrupted: {what}the finished arms are kept; run the same command again to go on.",
    file=sys.stderr,
  )
  sys.exit(128 + signum)


def _slice_of(value: str) -> tuple[int, int] | None:
  """``--slice=I/N`` as (I, N); None when not given."""
  if not value:
    return None
  match = re.fullmatch(r"(\d+)/(\d+)", value.strip())
  if not match or not int(match[1]) < int(match[2]):
    raise ValueError(f"--slice={value}: give I/N with 0 <= I < N (e.g. --slice=0/3)")
  return int(match[1]), int(match[2])


def _study():
  if _REFRESH.value:
    path = pathlib.Path(_REFRESH.value)
    path.write_text(page.refresh(path.read_text()))
    print(f"refreshed the generated blocks of {path} from the records")
    return
  if not _STUDY.value or not _OUT.value:
    raise ValueError("give --study=FILE and --out=DIR (or --refresh=PAGE)")
  study = page.load_study(_STUDY.value)
  arms = study.select(_ARMS.value)
  out, records_dir = pathlib.Path(_OUT.value), _records_dir(study)
  if records_dir and out.resolve().is_relative_to(records_dir.resolve()):
    raise ValueError(
      f"--out={out} lies in the records folder {records_dir}: the runs and tables would overwrite"
      " kept records; give another --out"
    )
  slice_of = _slice_of(_SLICE.value)
  if _SLURM.value and slice_of:
    raise ValueError("--slurm writes one array task per arm: give it without --slice")
  runner.check(arms, _SET.value, _DATA_ROOT.value, slice_of)
  if _SLURM.value:
    script = runner.slurm_script(
      _STUDY.value, study, arms, str(out), str(records_dir or ""), _SET.value, _DATA_ROOT.value
    )
    pathlib.Path(_SLURM.value).write_text(script)
    print(f"wrote {_SLURM.value}: {len(arms)} array tasks (one per arm), then its tables job")
    return
  records.check_writable(out, "--out")
  if _RUN.value:
    if records_dir:
      records.check_writable(records_dir, "--records")
    runner.train(
      arms, out, records_dir, _SET.value, _DATA_ROOT.value, slice_of, _ACCEPT_MIXED_CODE.value
    )
  if not _TABLES.value:
    return
  selected = [arm.name for arm in arms] if _ARMS.value else None
  readings = runner.read(study, out, records_dir, _SET.value, selected)
  report = study.report(readings)
  markdown, _ = tables.write(out, study.name, report.markdown, report.data)
  if _PAGE.value and study.page:
    pathlib.Path(study.page).write_text(report.markdown.rstrip("\n") + "\n")
    print(f"wrote {study.page}")
  print(report.markdown)
  print(f"(written to {markdown} and its .json)")
  if study.figures and _FIGURES.value != "none":
    if not _FIGURES.value and importlib.util.find_spec("matplotlib") is None:
      print('figures not drawn: they need matplotlib (pip install "gr_jax[plots]")')
      return
    default = pathlib.Path(study.page).parent / "figures" if _PAGE.value and study.page else None
    directory = pathlib.Path(_FIGURES.value) if _FIGURES.value else default or out / "figures"
    for path in study.figures(readings, directory):
      print(f"drew {path}")


if __name__ == "__main__":
  app.run(main)
