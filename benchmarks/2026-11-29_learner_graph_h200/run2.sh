#!/usr/bin/env bash
# Second H200 pass: GPU tests (graph vs eager, with and without torch.compile) and the learner benchmark
# with the default torch_compile (on for CUDA learners). Same setup as run.sh.
set -uo pipefail
out=${1:?OUT_DIR}
mkdir -p "$out"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD/src:$PWD PYTHONUNBUFFERED=1 MUJOCO_GL=disable
{ nvidia-smi -L; python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'; } > "$out/gpu.txt" 2>&1
for algo in sac flashsac; do
  timeout 70 python3 -m duorl bench learner --algo "$algo" --iters 30 --out "$out/bench_$algo.json" > /dev/null 2>> "$out/bench.log"
  echo "bench $algo rc=$?" >> "$out/bench.log"
done
timeout 110 python3 -m pytest -m cuda -q -rA --tb=short -p no:cacheprovider tests/gpu/test_graphs_cuda.py > "$out/pytest_cuda.log" 2>&1
echo "pytest rc=$?" >> "$out/pytest_cuda.log"
