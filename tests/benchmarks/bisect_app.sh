#!/usr/bin/env bash
# Autoplay speed across commits, each run from outside in a pty by this checkout's bench_app:
#   tests/benchmarks/bisect_app.sh SHA...   (run from the repository root)
# Each commit is exported (git archive, less its scenarios/weights) to .bisect/SHA first; on a
# machine without git (the device box) pass the already exported folders' names. This
# checkout's weights are linked in before the runs (the tour's checkpoint has one version).  CORES pins the app to that many
# cores (default 2, as on the development box); GPUs are hidden, so the CPU path is measured.
# PY is the interpreter (default python3). ROUNDS alternates the commits that many times, so load drifts hit them all alike.
set -u
here=$PWD; cores=${CORES:-2}; rounds=${ROUNDS:-2}
for sha in "$@"; do
  [ -d ".bisect/$sha" ] || { mkdir -p ".bisect/$sha" && git archive "$sha" -- . ':!lineage/scenarios/weights' | tar -x -C ".bisect/$sha"; }
  mkdir -p ".bisect/$sha/lineage/scenarios" && rm -rf ".bisect/$sha/lineage/scenarios/weights" && \
    ln -s "$here/lineage/scenarios/weights" ".bisect/$sha/lineage/scenarios/weights"
done
for r in $(seq "$rounds"); do
  for sha in "$@"; do
    got=$(cd ".bisect/$sha" && CUDA_VISIBLE_DEVICES= LINEAGE_CACHE_DIR=off \
          PYTHONPATH="${SITE:+$SITE:}$PWD" timeout 120 taskset -c "0-$((cores - 1))" \
          "${PY:-python3}" "$here/tests/benchmarks/bench_app.py" 2>&1 | grep -E "steps/s|per step .median|first model frame" | tr -s ' ' | tr '\n' ' ')
    echo "round $r $sha $got"
  done
done
