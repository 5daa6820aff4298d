#!/usr/bin/env bash
# The full fault matrix (issues #21, #31; tests/runtime/faults.py, docs/exit_codes.md).
#
#   bash benchmarks/scripts/fault_matrix.sh OUT_DIR [PYTEST_K]
#
# FAULT_DEVICE=cpu (the default): every case on this machine's CPU, tiny runs (pendulum, MuJoCo CPU
# backend, SAC): the single-process matrix {learner, collector} x {SIGKILL, SIGTERM, SIGINT, SIGSTOP} x
# {building env, compiling or capturing, steady state, writing a checkpoint}, a learner killed right
# after spawning its collector, stops at any moment, --help and refusals without torch, a failed
# write and a full disk (a 1.5 MB tmpfs, root only), and the data-parallel cases on two CPU ranks over
# gloo (a rank's part killed, the launcher killed, rank 0's learner killed, a clean stop's timing,
# stops during start-up, a frozen rank, a refusal before joining and a torchrun agent killed, two
# torchrun "nodes" on loopback; issue #39: a device refused on one node, the failing rank in rank 0's summary, no
# torchelastic tree left, a frozen learner named once within its bound). Run from the repo root with the venv's python first on PATH.
#
# FAULT_DEVICE=cuda: the single-process matrix on the GPU machine (after ../shared/tools/device-wheels.sh):
# mjwarp envs with the captured, compiled tick and the learner's whole-cycle CUDA graph, so the compile
# and capture phases are real. PYTEST_K selects cases (pytest -k), e.g. "learner" and "collector" in two
# commands: each half is 16 real runs of 20-60 s on an H200, about 8 minutes. FAULT_TASK=g1_walk_flat
# runs the G1 walk instead (its tick compiles for about 90 s cold). FAULT_WORKERS=N runs N cases at once
# (pytest-xdist), sharing the GPU.
#
# Writes OUT_DIR/fault_matrix_<K>.log (pytest -rA, durations) and .xml (JUnit), commit.txt (and gpu.txt).
set -uo pipefail
out=${1:?OUT_DIR}
k=${2:-}
device=${FAULT_DEVICE:-cpu}
mkdir -p "$out"
export DUORL_FAULT_MATRIX=1
if [ "$device" = cuda ]; then
  source benchmarks/scripts/device_env.sh
  record_device "$out"
  task=${FAULT_TASK:-pendulum_swingup}
  envs=${FAULT_NUM_ENVS:-1024}
  # the run's own bounds, short enough for the matrix and above this machine's real long phases with a
  # warm compiler cache (the first case warms it; DUORL_FAULT_START_S covers a cold first start)
  export DUORL_FAULT_STEADY_S=${DUORL_FAULT_STEADY_S:-10} DUORL_FAULT_LONG_S=${DUORL_FAULT_LONG_S:-120}
  export DUORL_FAULT_SLOW_S=${DUORL_FAULT_SLOW_S:-10} DUORL_FAULT_START_S=${DUORL_FAULT_START_S:-600}
  export DUORL_FAULT_ARGS="--algo sac --task $task --sim mjwarp training.devices=[0] training.num_envs=$envs training.progress=false"
  tests=(tests/runtime/test_faults.py)
else
  export PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH} OMP_NUM_THREADS=1 PYTHONUNBUFFERED=1
  git rev-parse HEAD > "$out/commit.txt" 2>/dev/null || true
  tests=(tests/runtime/test_faults.py tests/distributed/test_dp_faults.py tests/distributed/test_dp_fault_causes.py)
fi
# a file name from the selection: letters, digits, - and _ only (results with other characters in their
# names do not come back from the GPU machine)
name=fault_matrix${k:+_$(echo "$k" | tr -c 'A-Za-z0-9_-' '_' | sed 's/__*/_/g; s/_$//')}
{
  echo "FAULT_DEVICE=$device DUORL_FAULT_ARGS=${DUORL_FAULT_ARGS:-(tiny CPU runs)} steady=${DUORL_FAULT_STEADY_S:-3} long=${DUORL_FAULT_LONG_S:-20} slow=${DUORL_FAULT_SLOW_S:-6}"
  echo "FAULT_WORKERS=${FAULT_WORKERS:-1}"
} > "$out/$name.log"
workers=${FAULT_WORKERS:-1}
xd=(); [ "$workers" -gt 1 ] && xd=(-n "$workers")
python3 -m pytest -p no:cacheprovider -q -rA --durations=0 "${xd[@]}" "${tests[@]}" ${k:+-k "$k"} \
  --junitxml="$out/$name.xml" >> "$out/$name.log" 2>&1
rc=$?
echo "rc=$rc" >> "$out/$name.log"
tail -n 40 "$out/$name.log"
exit $rc
