#!/usr/bin/env bash
# One pass on a GPU box: the whole suite, then the benchmarks BENCHMARKS.md records.
# Run from the repository root; logs go to ${OUT:-/tmp/gpu_pass}. Wheels the box lacks may
# lie in .whl/ (see BENCHMARKS.md): they are installed to /tmp/site first.
set -u
out=${OUT:-/tmp/gpu_pass}; mkdir -p "$out"
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site:$PWD
else
  export PYTHONPATH=$PWD
fi
export PYTHONUNBUFFERED=1
nvidia-smi -L; date -u
python3 -c "import torch, triton, numpy, textual; print('torch', torch.__version__, 'triton', triton.__version__, 'numpy', numpy.__version__, 'textual', textual.__version__)"
echo "== suite"; timeout ${SUITE_S:-300} python3 -m pytest -q -p no:cacheprovider -rs 2>&1 | tee "$out/suite.log" | tail -25
echo "== import kda_step"; python3 -c "import time; t = time.perf_counter(); import lineage.ops.delta.fused_recurrent; print(f'import lineage.ops.delta.fused_recurrent {time.perf_counter() - t:.3f} s')"
echo "== kernels"; timeout ${KERNELS_S:-200} python3 -m tests.benchmarks.bench_kernels --rounds 3 --only step --no-compile 2>&1 | tee "$out/kernels.log" | tail -30
echo "== app, first frame"; for b in triton triton reference; do
  LINEAGE_BACKEND=$b timeout 120 python3 -m tests.benchmarks.bench_app 2>&1 | tail -6; done | tee "$out/app.log"
