#!/usr/bin/env bash
# H200 benchmarks of data parallel at world size 1 (issues #17, #18, #19):
# 1. the learner at the G1 walk settings (sac, g1_walk_flat: symmetry, batch 8192, 8 updates): plain graph
#    and eager, DP graph and DP eager (world size 1, NCCL), fp32 and bf16 wire;
# 2. duorl bench dp with one device: the plain run against the same run through the launcher (world size 1);
# 3. a DP run at world size 1 with CUDA MPS (a daemon in a directory of its own), its evidence.
#   bash benchmarks/2026-12-01_dp_h200/bench.sh OUT_DIR [learner|dp|mps ...]
set -uo pipefail
out=${1:?OUT_DIR}; shift
parts=${*:-learner dp mps}
source "$(dirname "$0")/../scripts/device_env.sh"
record_device "$out"
for part in $parts; do
  case $part in
  learner|learner_dp)
    [ "$part" = learner ] && python3 -m duorl bench learner --algo sac --task g1_walk_flat --iters 30 --out "$out/learner_plain.json" > /dev/null
    python3 -m duorl bench learner --algo sac --task g1_walk_flat --iters 30 --data-parallel --out "$out/learner_dp_fp32.json" > /dev/null
    python3 -m duorl bench learner --algo sac --task g1_walk_flat --iters 30 --data-parallel \
      training.dp_gradient_wire_dtype=bfloat16 --out "$out/learner_dp_bf16.json" > /dev/null
    python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
for arm in ("plain", "dp_fp32", "dp_bf16"):
    r = json.load(open(f"{out}/learner_{arm}.json"))
    print(f"{arm:8s} graph {r['graph_ms_per_iteration']['median']:.3f} ms  eager {r['eager_ms_per_iteration']['median']:.3f} ms",
          f" allreduce round {r['data_parallel']['allreduce_round_ms'] if r['data_parallel'] else '-'} ms")
PY
    ;;
  dp)
    python3 -m duorl bench dp --algo sac --task g1_walk_flat --sim mjwarp --devices 0 --iterations 250 \
      --ignore-first 50 --report-last 200 --out "$out/bench_dp_ws1.json" > "$out/bench_dp_ws1.log" 2>&1
    python3 - "$out" <<'PY'
import json, sys
r = json.load(open(f"{sys.argv[1]}/bench_dp_ws1.json"))
for arm, v in r["arms"].items():
    print(arm, round(v["env_steps_per_s"] or 0), "steps/s", round(v["iteration_ms"] or 0, 3), "ms/it")
print("efficiency (DP world size 1 / plain):", r["efficiency"])
PY
    ;;
  mps)
    export CUDA_MPS_PIPE_DIRECTORY=/tmp/duorl-mps-dp/pipe CUDA_MPS_LOG_DIRECTORY=/tmp/duorl-mps-dp/log
    mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
    nvidia-cuda-mps-control -d
    python3 -m duorl train --algo sac --task g1_walk_flat --sim mjwarp training.log_dir=/tmp/dp-mps \
      training.devices=[0] training.data_parallel=true training.cuda_process_sharing=mps algo.max_iterations=60 \
      training.progress=false training.log_interval=10 > "$out/dp_mps_train.log" 2>&1
    echo "exit $?" >> "$out/dp_mps_train.log"
    echo quit | nvidia-cuda-mps-control
    cp /tmp/dp-mps/run_summary.json "$out/dp_mps_run_summary.json"
    python3 - "$out" <<'PY'
import json, sys
s = json.load(open(f"{sys.argv[1]}/dp_mps_run_summary.json"))
m = s["runtime_manifest"]; c = m["cuda_process_sharing"]
print("status", s["status"], "validated", c["validated"], "effective", c["effective"], "ranks", len(c["ranks"]),
      "servers", c["servers"], "dp graph active", m["whole_cycle_cuda_graph"].get("active"))
PY
    ;;
  esac
done
