#!/usr/bin/env bash
# Whole-cycle CUDA graph evidence on one H200: the GPU tests, the learner benchmark (eager vs graph)
# for sac (G1 walk settings) / flashsac / warpsac, and two short real duos with the graph on.
# Run on the GPU machine from the repo root, with the wheels of omegaconf, mujoco (+ glfw, PyOpenGL)
# in .whl/ (see README.md here):  bash benchmarks/2026-11-29_learner_graph_h200/run.sh OUT_DIR
set -uo pipefail
out=${1:?OUT_DIR}
mkdir -p "$out"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD/src:$PWD PYTHONUNBUFFERED=1 MUJOCO_GL=disable
{ nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader;
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'; } > "$out/gpu.txt" 2>&1
timeout 180 python3 -m pytest -m cuda -q -p no:cacheprovider tests/gpu/test_graphs_cuda.py tests/algos > "$out/pytest_cuda.log" 2>&1
echo "pytest rc=$?" >> "$out/pytest_cuda.log"
for algo in sac flashsac warpsac; do
  timeout 80 python3 -m duorl bench learner --algo "$algo" --iters 50 --out "$out/bench_$algo.json" > /dev/null 2>> "$out/bench.log"
  echo "bench $algo rc=$?" >> "$out/bench.log"
done
for algo in sac flashsac; do
  run=/tmp/duo-$algo
  timeout 60 python3 -m duorl train --algo "$algo" --task pendulum_swingup --sim mujoco 'training.devices=[0]' \
    algo.max_iterations=300 algo.save_interval=1000 training.progress=false training.log_dir=$run > "$out/duo_$algo.log" 2>&1
  echo "duo $algo rc=$?" >> "$out/duo_$algo.log"
  python3 -c "import json,sys; s=json.load(open('$run/run_summary.json')); json.dump({'status': s['status'], 'iterations': s['iterations'], 'whole_cycle_cuda_graph': s['runtime_manifest']['whole_cycle_cuda_graph'], 'final_metrics': s['final_metrics']}, sys.stdout, indent=2)" > "$out/duo_${algo}_summary.json" 2>> "$out/duo_$algo.log"
done
