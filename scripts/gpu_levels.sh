#!/usr/bin/env bash
# The GPU runs of the "levels" issues, in priority order within one time budget:
#   1. Table 2, 16-ary, B = 20, the paper's search (20 draws, 50,000 steps, members compared at
#      M = 1000, the selected one at M = 5000 on the full validation and test sets): ST-GS,
#      GR-MC10, GR-MC100;
#   2. Table 1, L <= 10, tau = 0.01, the full learning-rate grid x 5 seeds on the 90,000-line
#      training set: ST-GS, GR-MC10;
#   3. Table 2 as in 1 for ST, GS, REINFORCE, then GR-MC1000; then Table 1 for GR-MC100.
# A step starts only while time is left, and is stopped (a checkpoint saved: rerun to resume)
# when the budget runs out. Evaluation matmuls run in full float32 (no TF32).
#
#   bash scripts/gpu_levels.sh OUT DATA_ROOT [SECONDS]
# DATA_ROOT holds binarized_mnist/ and listops/; OUT gets table2/, table1/ (workdirs, tables).
set -u
out=$1
data=$2
end=$((SECONDS + ${3:-540}))
export JAX_DEFAULT_MATMUL_PRECISION=highest PYTHONUNBUFFERED=1

step() {
  local left=$((end - SECONDS))
  if [ "$left" -lt 45 ]; then echo "skipped (budget spent): $*"; return; fi
  echo "== $(date +%T) ($left s left): $*"
  timeout --signal=TERM --kill-after=60 "$left" python3 scripts/reproduce.py "$@" 2>&1 | grep -v "^I[0-9]"
}

table2() {
  step --table=2 --out="$out/table2" --arities=16 --batch_sizes=20 --draws=20 --data_dir="$data/binarized_mnist" \
    --set=selection_eval_samples=1000 --set=variance_every=0 --set=eval_every=0 --set=eval_batch_size=500 "$@"
}
table1() {
  step --table=1 --out="$out/table1" --lengths=10 --taus=0.01 --seeds=5 --data_dir="$data/listops" "$@"
}

table2 --estimators=st_gs,gr_mc10,gr_mc100 --name=table2_B20
table1 --estimators=st_gs,gr_mc10 --name=table1_L10_tau0.01
table2 --estimators=st,gs,reinforce --name=table2_B20_more
table2 --estimators=gr_mc1000 --name=table2_B20_gr_mc1000
table1 --estimators=gr_mc100 --name=table1_L10_tau0.01_gr_mc100
echo "== $(date +%T) done"
