#!/usr/bin/env bash
# The full fault matrix (issue #21; tests/runtime/faults.py, docs/exit_codes.md) on the GPU machine:
# {learner, collector} x {SIGKILL, SIGTERM, SIGINT, SIGSTOP} x {building env, compiling or capturing,
# steady state, writing a checkpoint}, each a real `duorl train` on CUDA (mjwarp envs with the captured,
# compiled tick and the learner's whole-cycle CUDA graph: the compile and capture phases are real).
#
# Run from the repo root after the wheels are staged (../shared/tools/device-wheels.sh):
#   bash benchmarks/scripts/fault_matrix.sh OUT_DIR [PYTEST_K]
# PYTEST_K selects cases (pytest -k), e.g. "learner" and "collector" in two commands: each half is
# 16 real runs of 20-60 s on an H200 (the SIGSTOP cases of the long phases wait for
# DUORL_FAULT_LONG_S), about 8 minutes. FAULT_TASK=g1_walk_flat runs the G1 walk instead of the
# pendulum (slower start: the G1's tick compiles for about 90 s cold).
# FAULT_WORKERS=N runs N cases at once (pytest-xdist; staged with the wheels: device-wheels.sh
# pytest-xdist==3.8.0 execnet==2.1.2), sharing the GPU: each case's 30 s bound then holds under load.
# Writes OUT_DIR/fault_matrix_<K>.log (pytest -rA, durations) and .xml (JUnit), gpu.txt, commit.txt.
set -uo pipefail
out=${1:?OUT_DIR}
k=${2:-}
source benchmarks/scripts/device_env.sh
record_device "$out"
task=${FAULT_TASK:-pendulum_swingup}
envs=${FAULT_NUM_ENVS:-1024}
export DUORL_FAULT_MATRIX=1
# the run's own bounds, short enough for the matrix and above this machine's real long phases with a
# warm compiler cache (the first case warms it; DUORL_FAULT_START_S covers a cold first start)
export DUORL_FAULT_STEADY_S=${DUORL_FAULT_STEADY_S:-10} DUORL_FAULT_LONG_S=${DUORL_FAULT_LONG_S:-120}
export DUORL_FAULT_SLOW_S=${DUORL_FAULT_SLOW_S:-10} DUORL_FAULT_START_S=${DUORL_FAULT_START_S:-600}
export DUORL_FAULT_ARGS="--algo sac --task $task --sim mjwarp training.devices=[0] training.num_envs=$envs training.progress=false"
# a file name from the selection: letters, digits, - and _ only (results with other characters in their
# names do not come back from the GPU machine)
name=fault_matrix${k:+_$(echo "$k" | tr -c 'A-Za-z0-9_-' '_' | sed 's/__*/_/g; s/_$//')}
echo "DUORL_FAULT_ARGS=$DUORL_FAULT_ARGS steady=$DUORL_FAULT_STEADY_S long=$DUORL_FAULT_LONG_S slow=$DUORL_FAULT_SLOW_S" > "$out/$name.log"
workers=${FAULT_WORKERS:-1}
xd=(); [ "$workers" -gt 1 ] && xd=(-n "$workers")
echo "FAULT_WORKERS=$workers" >> "$out/$name.log"
python3 -m pytest -p no:cacheprovider -q -rA --durations=0 "${xd[@]}" tests/runtime/test_faults.py ${k:+-k "$k"} \
  --junitxml="$out/$name.xml" >> "$out/$name.log" 2>&1
rc=$?
echo "rc=$rc" >> "$out/$name.log"
tail -n 40 "$out/$name.log"
exit $rc
