"""Writes seeded ListOps train/valid TSVs with the d20s generating process.

Expressions that appear in the test file are dropped, the splits are disjoint
and deduplicated, and the length statistics are printed beside the test file's
(the original release: about 35% / 65% / 80% of examples at L <= 10 / 25 / 50).

  python -m scripts.generate_listops --out_dir=data/listops \
      --test_file=../shared/data/listops/test_d20s.tsv --num_train=90000 --num_valid=1000
"""

import pathlib

from absl import app, flags

from gr_jax.data import listops

_OUT_DIR = flags.DEFINE_string("out_dir", None, "Output directory.", required=True)
_TEST_FILE = flags.DEFINE_string("test_file", "", "Test TSV whose expressions are excluded.")
_NUM_TRAIN = flags.DEFINE_integer("num_train", 90_000, "Training examples.")
_NUM_VALID = flags.DEFINE_integer("num_valid", 1_000, "Validation examples.")
_SEED = flags.DEFINE_integer("seed", 0, "Generator seed.")


def main(argv):
  del argv
  out = pathlib.Path(_OUT_DIR.value)
  out.mkdir(parents=True, exist_ok=True)
  exclude = listops.expressions(_TEST_FILE.value) if _TEST_FILE.value else set()
  lines = listops.generate(_NUM_TRAIN.value + _NUM_VALID.value, _SEED.value, exclude)
  splits = {"train": lines[: _NUM_TRAIN.value], "valid": lines[_NUM_TRAIN.value :]}
  for split, split_lines in splits.items():
    (out / f"{split}_d20s_generated.tsv").write_text("\n".join(split_lines) + "\n")
  stats = {
    name: listops.length_statistics([listops.parse_line(line) for line in ls])
    for name, ls in splits.items()
  }
  if _TEST_FILE.value:
    stats["test (file)"] = listops.length_statistics(listops.load_tsv(_TEST_FILE.value))
  print(f"{'split':<12} {'L<=10':>7} {'L<=25':>7} {'L<=50':>7}")
  for name, fractions in stats.items():
    print(f"{name:<12} " + " ".join(f"{fractions[t]:>7.3f}" for t in (10, 25, 50)))


if __name__ == "__main__":
  app.run(main)
