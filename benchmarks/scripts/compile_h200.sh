#!/usr/bin/env bash
# Compiled tensor code on the H200, before/after ratios in one call:
#  1. collector-only g1_walk_flat throughput, captured ticks with the env's step tensor code compiled
#     (sim.tick_compile, the default with the tick graph) vs not compiled, at 4096 and 8192 envs;
#  2. the sac learner at the G1 walk settings (batch 8192, 8 updates): this tree vs the tree before the
#     critic target/loss were compiled (BEFORE_SRC: the `src` folder of an older tree, made here with
#     `mkdir bench_old && git archive bb5aed1 src | tar -x -C bench_old`; untracked, so it travels).
# Run on the GPU machine from the repo root, after staging the wheels (../shared/tools/device-wheels.sh):
#   bash benchmarks/scripts/compile_h200.sh OUT_DIR [BEFORE_SRC]        # e.g. BEFORE_SRC=bench_old/src
set -uo pipefail
out=${1:?OUT_DIR}
before=${2:-}
source "$(dirname "$0")/device_env.sh"
record_device "$out"
log="$out/bench.log"
run() { echo "+ $*" >> "$log"; timeout 300 "$@" >> "$log" 2>&1; echo "rc=$?" >> "$log"; }
run python3 -m duorl bench collector --algo sac --task g1_walk_flat --sim mjwarp --num-envs 4096 8192 --modes graph \
  --ticks 200 --warmup 10 --out "$out/collector_compiled.json" training.devices=[0]
run python3 -m duorl bench collector --algo sac --task g1_walk_flat --sim mjwarp --num-envs 4096 --modes graph \
  --ticks 200 --warmup 10 --out "$out/collector_not_compiled.json" training.devices=[0] sim.tick_compile=false
run python3 -m duorl bench learner --algo sac --iters 50 --out "$out/learner_sac_after.json"
if [ -n "$before" ]; then
  PYTHONPATH=/tmp/duorl-site:$PWD/$before run python3 -m duorl bench learner --algo sac --iters 50 --out "$out/learner_sac_before.json"
fi
grep -E '^\+|rc=|steps_per_s"|ms_per_tick|median|first_graph|speedup|Error' "$log" | tail -40
