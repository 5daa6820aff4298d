#!/usr/bin/env bash
# Issue #42 on the CPU (benchmarks/2026-12-03_startup_overlap_cpu/): one tiny `duorl train` of g1_walk_flat on
# MuJoCo Warp's CPU device (4 worlds, tiny networks, 12 iterations), its startup.json and console kept, to
# compare two trees' start-up phase timelines (the collector's env built after the learner's spawn, or
# beside the learner's build). Shared Warp cache WARP_CACHE_PATH (default /tmp/w51out/warpcache: its first
# run fills it). HOLD_S>0 holds the learner's build that much longer, as the H200's 6.5 s learner build
# does: through debug.learner_build_delay_ms where TREE has it, else through W51_LEARNER_HOLD_S, which only
# a copy of the "before" tree patched as the README says reads.
#   bash benchmarks/scripts/startup_overlap_cpu.sh TREE LABEL OUT [HOLD_S]   (from the repository root)
set -uo pipefail
tree=${1:?TREE} label=${2:?LABEL} out=${3:?OUT} hold=${4:-0}
py=${PY:-$PWD/.venv/bin/python}  # from the repository root: its venv
export WARP_CACHE_PATH=${WARP_CACHE_PATH:-/tmp/w51out/warpcache} PYTHONUNBUFFERED=1 PYTHONPATH=$tree/src
extra=()
if grep -q learner_build_delay_ms "$tree/src/duorl/config/schema.py"; then
  [ "$hold" != 0 ] && extra=("debug.learner_build_delay_ms=$(python3 -c "print(int(float('$hold')*1000))")")
else
  export W51_LEARNER_HOLD_S=$hold
fi
mkdir -p "$out"
rm -rf "$out/runs/$label"
cd "$tree" && timeout 300 "$py" -m duorl train --task g1_walk_flat --sim mjwarp training.devices=[cpu] \
  training.num_envs=4 training.torch_threads=1 algo.max_iterations=12 algo.batch_size=64 algo.buffer_size=64 \
  'algo.actor_hidden_dims=[32]' 'algo.critic_hidden_dims=[32]' training.progress=false training.log_interval=1 \
  "${extra[@]}" training.log_dir="$out/runs/$label" > "$out/$label.console.txt" 2>&1
echo "$label rc=$?"
