#!/usr/bin/env bash
# The accelerator numbers of the population loop (issue 20), within one time budget (~8 minutes):
#   1. scripts/bench_population.py: the 16-ary VAE (B = 20) for ST-GS, GR-MC10 and GR-MC100, and
#      ListOps (L <= 10) for ST-GS and GR-MC10, at P = 1, 8, 20 and 64 members, over members by
#      vmap and by lax.map; "x P=1" is the target's ratio (>= 10x at P = 20, >= 25x at P = 64);
#      a profiler trace of each largest population goes to OUT/traces;
#   2. scripts/bench_estimators.py (B = 20, 200; K = 10, 100, 1000).
# Each step is stopped when the budget runs out; its table so far is kept in OUT.
#
#   bash scripts/gpu_populations.sh OUT [SECONDS] [SIZES]
# e.g. on a CPU, to try the script: bash scripts/gpu_populations.sh /tmp/gpu_try 300 1,2
set -u
out=$1
end=$((SECONDS + ${2:-480}))
sizes=${3:-1,8,20,64}
mkdir -p "$out"
export PYTHONUNBUFFERED=1

step() {
  local name=$1 share=$2; shift 2
  local left=$((end - SECONDS))
  local limit=$((left * share / 100))
  if [ "$limit" -lt 20 ]; then echo "skipped (budget spent): $name"; return; fi
  echo "== $(date +%T) $name ($limit s of the $left s left)"
  timeout --signal=TERM --kill-after=10 "$limit" python3 "$@" 2>&1 | grep -v "^[IW][0-9]" | tee "$out/$name.txt"
}

nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>/dev/null | tee "$out/device.txt"
step vae_population 55 -m scripts.bench_population --experiments=vae --estimators=st_gs,gr_mc10,gr_mc100 \
  --sizes="$sizes" --modes=vmap,map --trace_dir="$out/traces"
step listops_population 60 -m scripts.bench_population --experiments=listops --estimators=st_gs,gr_mc10 \
  --sizes="$sizes" --modes=vmap,map
step estimators 100 -m scripts.bench_estimators --inner_draws=0
echo "== $(date +%T) done"
