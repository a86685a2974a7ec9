#!/usr/bin/env bash
# The GPU window of issue 34, in priority order within one time budget (15 minutes of device time
# in all: the default leaves the start-up and the copy back theirs):
#   1. population scaling: scripts/bench_population.py, the 16-ary VAE (B = 20; ST-GS, GR-MC100)
#      at P = 1, 20, 64, 256 members by vmap; "x P=1" is the target's ratio (>= 10x at P = 20,
#      >= 25x at P = 64); ListOps (L <= 10; ST-GS, GR-MC10) by vmap and lax.map; the Bernoulli
#      VAE's steps (scripts/bench_vae.py, B = 50) at tau 0.5 and 1 with each PRNG implementation;
#   2. scripts/bench_estimators.py (B = 20, 200; K = 10, 100, 1000), with the PyTorch reference
#      (scripts/bench_pytorch_reference.py) beside it when torch and gumbel-rao-pytorch are there;
#   3. Table 2, 16-ary, B = 20, the paper's search (20 draws, 50,000 steps, members compared at
#      M = 1000, the selected one at M = 5000 on the full validation and test sets): GR-MC1000,
#      ST, GS, REINFORCE; then the two-layer model (configs/vae_two_layer_16ary.py) for ST-GS and
#      GR-MC100; then the B = 200 column; 3 seeds of each draw in the same population (60
#      members: a population of 20 leaves the GPU idle), so that every cell carries a spread;
#   4. Table 1, L <= 10, tau = 0.1 and 1.0, the learning-rate grid x 5 seeds on the 90,000-line
#      training set: ST-GS, GR-MC10.
# A step starts only while time is left, and is stopped (a checkpoint saved: rerun to resume) when
# the budget runs out; what each step finished (tables, results.json, members' tables, its
# output) is under OUT as it goes. Evaluation matmuls run in full float32 (no TF32).
#
#   bash scripts/gpu_levels.sh OUT DATA_ROOT [SECONDS]
# DATA_ROOT holds binarized_mnist/ and listops/. To try every line on a CPU at tiny sizes first:
#   GR_JAX_TRY=1 bash scripts/gpu_levels.sh /tmp/gpu_try ../shared/data 900
set -u
out=$1
data=$2
end=$((SECONDS + ${3:-660}))
mkdir -p "$out"
export JAX_DEFAULT_MATMUL_PRECISION=highest PYTHONUNBUFFERED=1

# Sizes: the real ones, or (GR_JAX_TRY=1) tiny ones that run the same lines in seconds.
sizes=1,20,64,256
bench_sizes=(--batch_sizes=20,200 --ks=10,100,1000)
bench_repeats=()
reference_repeats=100
tiny_vae=()
tiny_listops=()
if [ "${GR_JAX_TRY:-0}" = 1 ]; then
  sizes=1,2
  bench_sizes=(--batch_sizes=2 --ks=2 --repeats=2)
  bench_repeats=(--repeats=2)
  reference_repeats=2
  tiny_vae=(--set=population.size=6 --set=num_steps=4 --set=checkpoint_every=2
    --set=num_eval_samples=4 --set=selection_eval_samples=4 --set=num_eval_examples=20
    --set=encoder_widths='(8,)' --set=decoder_widths='(8,)')
  tiny_listops=(--set='population.seed=(0,)' --set='population.learning_rate=(0.1,)'
    --set=num_train_examples=200 --set=num_epochs=1 --set=embed_dim=8 --set=hidden_dim=8
    --set=classifier_hidden_dim=8)
fi

# step NAME COMMAND...: runs COMMAND with the time left, its output (less info lines) also in
# OUT/NAME.txt.
step() {
  local name=$1; shift
  local left=$((end - SECONDS))
  if [ "$left" -lt 45 ]; then echo "not run (budget spent): $name: $*" | tee -a "$out/not_run.txt"; return; fi
  echo "== $(date +%T) ($left s left) $name"
  timeout --signal=TERM --kill-after=60 "$left" "$@" 2>&1 | grep -v "^[IW][0-9]" | tee "$out/$name.txt"
}

# table2 NAME STUDY_ARG ARMS [FLAGS...]: Table 2 cells (configs/studies/table2.py, 3 seeds per draw).
table2() {
  local name=$1 variant=$2 arms=$3; shift 3
  step "$name" python3 -m experiments.study --study="configs/studies/table2.py:seeds_per_draw=3$variant" \
    --out="$out/table2${variant//[,=]/_}" --records= --data_root="$data" --arms="$arms" \
    --set=eval_batch_size=500 "$@" "${tiny_vae[@]}"
}
table1() {
  local name=$1 arms=$2; shift 2
  step "$name" python3 -m experiments.study --study=configs/studies/table1.py --out="$out/table1" \
    --records= --data_root="$data" --arms="$arms" "$@" "${tiny_listops[@]}"
}

nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>/dev/null | tee "$out/device.txt"
step population_scaling python3 -m scripts.bench_population --experiments=vae \
  --estimators=st_gs,gr_mc100 --sizes="$sizes" --modes=vmap
step listops_population python3 -m scripts.bench_population --experiments=listops \
  --estimators=st_gs,gr_mc10 --sizes="$sizes" --modes=vmap,map
step bench_bernoulli python3 -m scripts.bench_vae --models=bernoulli_nonlinear --batch_sizes=50 \
  --estimators=st_gs,disarm,rloo2,gr_exact,gr_mc10,gr_mc100 --taus=0.5,1.0 \
  --prng_impls=threefry2x32,rbg,unsafe_rbg --eval_images=0 "${bench_repeats[@]}"
step estimators python3 -m scripts.bench_estimators --inner_draws=0 "${bench_sizes[@]}"
if python3 -c "import torch, gumbel_rao" 2>/dev/null; then
  step pytorch_reference python3 -m scripts.bench_pytorch_reference --repeats="$reference_repeats"
else
  echo "not run: pytorch_reference (no torch / gumbel-rao-pytorch on the path)" | tee -a "$out/not_run.txt"
fi
table2 table2_B20_rest "" 16ary_B20/gr_mc1000,16ary_B20/st,16ary_B20/gs,16ary_B20/reinforce
# Its own --out (table2_two_layer): the two-layer populations have the one-layer ones' names.
table2 table2_B20_two_layer ",two_layer" 16ary_B20/st_gs,16ary_B20/gr_mc10,16ary_B20/gr_mc100
table2 table2_B200 "" 16ary_B200/st_gs,16ary_B200/gr_mc10,16ary_B200/gr_mc100
table1 table1_L10_tau0.1_1.0 \
  L10_tau0.1_noclip/st_gs,L10_tau0.1_noclip/gr_mc10,L10_tau1.0_noclip/st_gs,L10_tau1.0_noclip/gr_mc10
echo "== $(date +%T) done"
