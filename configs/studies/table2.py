"""The paper's Table 2: the discrete VAE's test bound per arity, batch size and estimator.

Appendix D.2's protocol: per cell one population of 20 draws of the paper's random
search (learning rate, momentum, weight decay, tau from its sets), 50,000
steps; every member compared on validation at M = 1000 (the one departure: the
paper does not say, and M = 5000 on every member costs 5x), the selected member's
bounds at M = 5000 on the full validation and test sets (10,000 images each).
Arms are named ``<arity>ary_B<batch>/<estimator>``: ``--arms=2ary_B20/`` trains
the binary column at B = 20.

  python -m experiments.study --study=configs/studies/table2.py --out=runs/table2 \
      --data_root=../shared/data --arms=2ary_B20/

``configs/studies/table2.py:seeds_per_draw=3`` trains 3 seeds of each draw (60
members, which cost a GPU about what 20 do), so that each cell carries the
selected draw's spread over seeds (records/table2_seeds3); ``:two_layer`` the
240H~240H~784V model (configs/vae_two_layer_<n>ary.py), and both together
``:two_layer,seeds_per_draw=3``.

Expected (records/table2, CPU): binary B = 20 test bounds GS 101.0, ST-GS 105.5,
GR-MC10 104.9, gr_exact 104.6 (the paper: 98.2, 100.7, 100.7, GR-MC1000 100.5);
about 5 h of both cores per population on the 2-core CPU (training 40-70 min,
the selection's evaluation the rest).
"""

from experiments.studies import paper
from experiments.studies.runner import Arm, Study

ARITIES = (2, 4, 8, 16)
BATCH_SIZES = (20, 200)
ESTIMATORS = ("gs", "reinforce", "st", "st_gs", "gr_mc10", "gr_mc100", "gr_mc1000")
BINARY_ONLY = ("gr_exact",)  # GR-MC-infinity, exact for two categories
PROTOCOL = ("selection_eval_samples=1000", "variance_every=0", "eval_every=0")


def _arms(seeds_per_draw: int, two_layer: bool):
  size = paper.PAPER_DRAWS * seeds_per_draw
  per_draw = (f"population.seeds_per_draw={seeds_per_draw}",) if seeds_per_draw > 1 else ()
  config = "configs/vae_two_layer_{arity}ary.py" if two_layer else "configs/vae_{arity}ary.py"
  for arity in ARITIES:
    for batch_size in BATCH_SIZES:
      for estimator in ESTIMATORS + (BINARY_ONLY if arity == 2 else ()):
        yield Arm(
          name=f"{arity}ary_B{batch_size}/{estimator}",
          config=config.format(arity=arity),
          overrides=(f"estimator={estimator}", f"batch_size={batch_size}", *PROTOCOL)
          + (f"population.size={size}", *per_draw),
          search="paper",
          dataset_dir="binarized_mnist",
          labels={"arity": arity, "batch_size": batch_size, "estimator": estimator},
        )


def get_study(arg: str = "") -> Study:
  """``arg``: "" (the paper's), or a comma-separated list of seeds_per_draw=N and two_layer."""
  seeds_per_draw, two_layer = 1, False
  for item in filter(None, arg.split(",")):
    field, _, value = item.partition("=")
    if field == "seeds_per_draw" and value.isdigit() and int(value) >= 1:
      seeds_per_draw = int(value)
    elif item == "two_layer":
      two_layer = True
    else:
      raise ValueError(
        f"configs/studies/table2.py takes seeds_per_draw=N (N >= 1) and two_layer; got {item!r}"
      )
  suffix = ("_two_layer" if two_layer else "") + (
    f"_seeds{seeds_per_draw}" if seeds_per_draw > 1 else ""
  )
  return Study(
    name="table2" + suffix,
    arms=tuple(_arms(seeds_per_draw, two_layer)),
    report=paper.table2_report,
    records="records/table2" + suffix,
  )
