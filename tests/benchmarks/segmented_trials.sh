#!/bin/bash
# Trials of segmented designs in which a memory without a gate might need one (issue 14):
# each design trains DeltaNet (the control) beside the gated models, all at once on one GPU.
# Usage: segmented_trials.sh OUTDIR [LIMIT_S] [TRAIN_S] [SET]; weights, sidecars and logs come back as OUTDIR/w.tar.
# SET designs (2026-12-02 call 1; steps 4000, stopped by time) or gone (call 2: the p8s12g8 design, two seeds, 3000 steps).
set -u
out=${1:?outdir}; limit=${2:-500}; train_s=${3:-450}; set=${4:-designs}
mkdir -p "$out/w"
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1
steps=4000
TRIALS=$(cat <<'R'
p4s16g4-deltanet tiny-deltanet --pairs 4 --segments 16 --gone 4
p4s16g4-gdn tiny-gated-deltanet --pairs 4 --segments 16 --gone 4
p4s16g4-kda tiny-kda --pairs 4 --segments 16 --gone 4
p8s12g8-deltanet tiny-deltanet --pairs 8 --segments 12 --gone 8
p8s12g8-gdn tiny-gated-deltanet --pairs 8 --segments 12 --gone 8
p8s12g8-kda tiny-kda --pairs 8 --segments 12 --gone 8
p24s4-deltanet tiny-deltanet --pairs 24 --segments 4
p24s4-kda tiny-kda --pairs 24 --segments 4
R
)
if [ "$set" = gone ]; then
steps=3000
TRIALS=$(cat <<'R'
gone-deltanet-s0 tiny-deltanet --pairs 8 --segments 12 --gone 8 --seed 0
gone-deltanet-s1 tiny-deltanet --pairs 8 --segments 12 --gone 8 --seed 1
gone-gdn-s0 tiny-gated-deltanet --pairs 8 --segments 12 --gone 8 --seed 0
gone-gdn-s1 tiny-gated-deltanet --pairs 8 --segments 12 --gone 8 --seed 1
gone-kda-s0 tiny-kda --pairs 8 --segments 12 --gone 8 --seed 0
gone-kda-s1 tiny-kda --pairs 8 --segments 12 --gone 8 --seed 1
R
)
fi
while read -r name preset rest; do
  [ -z "$name" ] && continue
  timeout "$limit" python3 -m lineage.cli.main train "$preset" --task segmented $rest --steps $steps --batch 128 --lr 3e-3 \
    --device cuda --time-limit "$train_s" -o "$out/w/$name.safetensors" > "$out/w/$name.log" 2>&1 &
done <<< "$TRIALS"
wait
tar -C "$out" -cf "$out/w.tar" w
