#!/usr/bin/env bash
# The collector tick as one CUDA graph on the H200: the cuda-marked env and tick tests, then
# collector-only throughput of g1_walk_flat (4096 and 8192 envs), graph-captured ticks vs eager.
# Run on the GPU machine from the repo root, after staging the wheels (../shared/tools/device-wheels.sh):
#   bash benchmarks/scripts/collector_tick_h200.sh OUT_DIR
set -uo pipefail
out=${1:?OUT_DIR}
source "$(dirname "$0")/device_env.sh"
record_device "$out"
timeout 240 python3 -m pytest -m cuda -q -x tests/envs/test_cuda.py tests/runtime/test_tick_cuda.py -p no:cacheprovider \
  > "$out/pytest_tick_cuda.log" 2>&1
echo "pytest rc=$?" >> "$out/pytest_tick_cuda.log"
tail -5 "$out/pytest_tick_cuda.log"
cmd=(python3 -m duorl bench collector --algo sac --task g1_walk_flat --sim mjwarp --num-envs 4096 8192
     --ticks 200 --warmup 10 --out "$out/collector_g1_walk_flat.json" training.devices=[0])
echo "+ ${cmd[*]}" > "$out/bench_collector.log"
timeout 240 "${cmd[@]}" >> "$out/bench_collector.log" 2>&1
echo "bench rc=$?" >> "$out/bench_collector.log"
grep -E '"mode"|steps_per_s|ms_per_tick|rc=|Error|error' "$out/bench_collector.log" | tail -20
