#!/usr/bin/env bash
# The GPU window of round 5's categorical track (#66): the arms the 2-core CPU has not yet trained,
# as LANES of study commands run side by side on one GPU (each lane one process at a time, its
# commands in order), within one time budget (the device's 15 minutes less its start and the copy
# back), most needed first:
#   1-5. categorical as published: 8x4 (with the exact row), 16x12, 10x30, 4x24, then 8x16 and
#      64x8, a shape a lane;
#   6. categorical as it should be measured (categorical:measured): 8x4's temperature searches,
#      then their fresh seeds and the tau-free rows.
# An arm whose records are kept is not trained again, so the same command goes on where the CPU
# (or an earlier window) stopped.
# Each finished arm's records are kept in records/ as on any machine (no tables: the lanes share
# workdirs, and the pages are regenerated from the records where they are unpacked); at the end (or
# when the budget runs out: a running arm is stopped with SIGTERM, its checkpoint left behind) the
# records written by this run are packed into OUT/records.tgz and every lane's log into
# OUT/logs.tgz: unpack the records at the repository's root here (`tar xzf records.tgz`), then
# regenerate the pages (docs/results.md, docs/leaderboard.md) as after any kept run.
#
#   bash scripts/gpu_studies.sh OUT DATA_ROOT [SECONDS]
# DATA_ROOT holds mnist/ (its four gzip IDX files). The arms' workdirs go to $GR_JAX_RUNS (default
# /tmp/gr_jax_gpu_runs). To try every lane on a CPU at tiny sizes first, in a scratch clone whose
# records/ takes the tiny runs' records (the kept categorical ones moved out, or the tiny runs would
# be refused their place):
#   git clone . /tmp/try && rm -r /tmp/try/records/categorical && \
#     GR_JAX_TRY=1 bash /tmp/try/scripts/gpu_studies.sh /tmp/try_out ../shared/data 600
# On the device (`run`; ml_collections and tensorboardX as wheels in .whl/, MNIST copied to .data/,
# both ignored through .git/info/exclude and named in carry), prepared here by
#   printf '/.whl/\n/.data/\n' >> .git/info/exclude && mkdir -p .data && \
#     cp -r ../shared/data/mnist .data/ && \
#     python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
#       --platform manylinux2014_x86_64 -d .whl ml_collections tensorboardX
# and run there as
#   python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
#     --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site && \
#     bash scripts/gpu_studies.sh $OUT .data 480
set -u
out=$(mkdir -p "$1" && cd "$1" && pwd)
data=$(cd "$2" && pwd)
end=$((SECONDS + ${3:-660}))
runs=${GR_JAX_RUNS:-/tmp/gr_jax_gpu_runs}
runs=$(mkdir -p "$runs" && cd "$runs" && pwd)  # absolute: the lanes run from the repository root
cd "$(dirname "$0")/.."
# Several processes share the GPU: each takes memory as it needs it, not 75 % up front.
export XLA_PYTHON_CLIENT_PREALLOCATE=false JAX_DEFAULT_MATMUL_PRECISION=highest PYTHONUNBUFFERED=1
started="$runs/.started"
touch "$started"

tiny=()
if [ "${GR_JAX_TRY:-0}" = 1 ]; then
  tiny=(--set=num_steps=40 --set=steps_per_call=10 --set=log_every=10 --set=checkpoint_every=20
    --set=variance_every=20 --set=variance_draws=4 --set=num_eval_samples=4
    --set='extra_test_samples=(8,)' --set=num_eval_examples=20 --set=eval_batch_size=10)
fi

# study LANE STUDY[:ARG] ARMS: one study command of a lane, stopped at the budget's end.
study() {
  local lane=$1 spec=$2 arms=$3
  local name=${spec%%:*}
  local left=$((end - SECONDS))
  if [ "$left" -lt 60 ]; then echo "not run (budget spent): $spec --arms=$arms" >>"$runs/lane$lane.log"; return; fi
  echo "== lane $lane, $left s left: $spec --arms=$arms" >>"$runs/lane$lane.log"
  timeout --signal=TERM --kill-after=60 "$left" python3 -m experiments.study \
    --study="configs/studies/$name.py${spec#"$name"}" --out="$runs/$name" --data_root="$data" \
    --arms="$arms" --tables=false "${tiny[@]}" >>"$runs/lane$lane.log" 2>&1
  echo "== lane $lane: exit $?" >>"$runs/lane$lane.log"
}

nvidia-smi --query-gpu=name,memory.total --format=csv,noheader >"$runs/device.txt" 2>&1
(
  study 1 categorical published/8x4/
) &
(
  study 2 categorical published/16x12/
) &
(
  study 3 categorical published/10x30/
) &
(
  study 4 categorical published/4x24/
) &
(
  study 5 categorical published/8x16/
  study 5 categorical published/64x8/
) &
(
  study 6 categorical:measured measured/8x4/search/
  study 6 categorical:measured measured/8x4/ # fresh seeds at the kept searches' selections
) &
wait

# What this run kept (records/ files newer than its start), and every lane's log.
find records -type f -newer "$started" | tar czf "$out/records.tgz" -T -
(cd "$runs" && tar czf "$out/logs.tgz" device.txt lane*.log)
tar tzf "$out/records.tgz" | grep -c results.json | sed 's/^/populations kept: /' | tee "$out/kept.txt"
grep -h "^== \|^not run" "$runs"/lane*.log
