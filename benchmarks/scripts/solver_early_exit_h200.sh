#!/usr/bin/env bash
# sim.solver_early_exit on the H200: MuJoCo Warp's solver loop as a conditional node of the tick graph
# (envs/backends/warp_conditional.py) against the fixed 10 iterations.
#   1. correctness: tests/runtime/test_tick_cuda.py -k early_exit (the two captured ticks agree to 1e-4)
#   2. collector-only throughput of g1_walk_flat at 4096 and 8192 envs, captured compiled ticks (the
#      defaults), fixed iterations first, then the early exit, each its own process, one call
# Run on the GPU machine from the repo root, after staging the wheels (../shared/tools/device-wheels.sh):
#   bash benchmarks/scripts/solver_early_exit_h200.sh OUT_DIR [--bench-only]
# (CUDA_VISIBLE_DEVICES picks the GPU on a machine of several.)
set -uo pipefail
out=${1:?OUT_DIR}
source "$(dirname "$0")/device_env.sh"
record_device "$out"
if [ "${2:-}" != --bench-only ]; then
  timeout 240 python3 -m pytest -m cuda -q -x tests/runtime/test_tick_cuda.py -k early_exit -p no:cacheprovider \
    > "$out/pytest_early_exit.log" 2>&1
  echo "pytest rc=$?" >> "$out/pytest_early_exit.log"
  tail -3 "$out/pytest_early_exit.log"
fi
for arm in fixed early_exit; do
  value=$([ $arm = fixed ] && echo false || echo true)
  cmd=(python3 -m duorl bench collector --algo sac --task g1_walk_flat --sim mjwarp --num-envs 4096 8192
       --modes graph --ticks 200 --warmup 10 --out "$out/collector_$arm.json" training.devices=[0]
       sim.solver_early_exit=$value)
  echo "+ ${cmd[*]}" > "$out/bench_$arm.log"
  timeout 240 "${cmd[@]}" >> "$out/bench_$arm.log" 2>&1
  echo "bench rc=$?" >> "$out/bench_$arm.log"
done
python3 - "$out" <<'PY'
import json, sys
from pathlib import Path
out = Path(sys.argv[1])
arms = {}
for arm in ("fixed", "early_exit"):
    try:
        arms[arm] = {r["num_envs"]: r for r in json.loads((out / f"collector_{arm}.json").read_text())["runs"]}
    except (OSError, KeyError, ValueError) as e:
        print(arm, "missing:", e)
for n in sorted(arms.get("fixed", {})):
    f, e = arms["fixed"][n], arms.get("early_exit", {}).get(n)
    line = f"{n} envs: fixed {f['collector_env_steps_per_s']:,.0f} steps/s ({f['ms_per_tick']:.2f} ms/tick)"
    if e:
        line += (f", early exit {e['collector_env_steps_per_s']:,.0f} ({e['ms_per_tick']:.2f} ms/tick), "
                 f"ratio {e['collector_env_steps_per_s'] / f['collector_env_steps_per_s']:.3f}")
    print(line)
PY
