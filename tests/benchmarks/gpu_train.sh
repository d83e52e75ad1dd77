#!/bin/bash
# Train the shipped checkpoints on one GPU, all at once (tiny models are launch-bound, so
# several processes share the card well). Usage: gpu_train.sh OUTDIR [LIMIT_S] [TRAIN_S] [NAME_REGEX]
# TRAIN_S: each run stops after this many seconds; its sidecar's command then says --stop-after.
# Each line of ROSTER is: NAME PRESET ARGS...; the sidecar of each keeps its exact command.
# tiny-softmax-mqar as shipped was trained on the CPU (its sidecar says --device cpu); the
# *-segmented-gone three were trained by segmented_trials.sh (set gone, seed 0, TRAIN_S 480, six
# runs at once; files renamed from gone-*-s0): here they need TRAIN_S of about 480 to finish.
# The device gives back at most 8 files: the weights and sidecars come back as OUTDIR/w.tar.
set -u
out=${1:?outdir}; limit=${2:-420}; train_s=${3:-300}; only=${4:-.}
mkdir -p "$out/w" "$out/log"
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1
ROSTER=$(cat <<'R'
tiny-softmax-mqar tiny-softmax --task mqar --pairs 64 --pairs-min 4 --steps 800 --batch 64 --lr 3e-3
tiny-linear-mqar tiny-linear --task mqar --pairs 64 --pairs-min 4 --steps 4000 --batch 128 --lr 1e-3
tiny-deltanet-mqar tiny-deltanet --task mqar --pairs 64 --pairs-min 4 --steps 4000 --batch 128 --lr 3e-3
tiny-gated-deltanet-mqar tiny-gated-deltanet --task mqar --pairs 64 --pairs-min 4 --steps 4000 --batch 128 --lr 3e-3 --seed 2
tiny-kda-mqar tiny-kda --task mqar --pairs 64 --pairs-min 4 --steps 4000 --batch 128 --lr 3e-3
tiny-gated-deltanet-segmented tiny-gated-deltanet --task segmented --steps 3000 --batch 128 --lr 3e-3 --seed 1
tiny-kda-segmented tiny-kda --task segmented --steps 3000 --batch 128 --lr 3e-3
tiny-deltanet-segmented tiny-deltanet --task segmented --steps 3000 --batch 128 --lr 3e-3
tiny-linear-segmented tiny-linear --task segmented --steps 3000 --batch 128 --lr 1e-3
tiny-deltanet-segmented-gone tiny-deltanet --task segmented --pairs 8 --segments 12 --gone 8 --steps 3000 --batch 128 --lr 3e-3
tiny-gated-deltanet-segmented-gone tiny-gated-deltanet --task segmented --pairs 8 --segments 12 --gone 8 --steps 3000 --batch 128 --lr 3e-3
tiny-kda-segmented-gone tiny-kda --task segmented --pairs 8 --segments 12 --gone 8 --steps 3000 --batch 128 --lr 3e-3
tiny-kda-two-timescales tiny-kda --task two_timescales --steps 3000 --batch 128 --lr 3e-3
k3-mini-text k3-mini --task text --mix 0.25 --pairs 16 --steps 1500 --batch 32 --lr 2e-3 --checkpoint-every 100
R
)
while read -r name preset rest; do
  [ -z "$name" ] && continue
  [[ "$name" =~ $only ]] || continue
  timeout "$limit" python3 -m lineage.cli.main train "$preset" $rest --device cuda --time-limit "$train_s" -o "$out/w/$name.safetensors" \
    > "$out/log/$name.log" 2>&1 &
done <<< "$ROSTER"
wait
tar -C "$out" -cf "$out/w.tar" w
