#!/usr/bin/env bash
# MPS mode evidence on the GPU machine (run from the repo root; wheels of mujoco + omegaconf in .mpswhl):
#   bash benchmarks/scripts/mps_evidence_h200.sh OUT_DIR
# 1) doctor and a train with cuda_process_sharing=mps and no daemon (must fail closed, < 5 s)
# 2) duorl mps start, doctor, a train with mps (learner + collector on cuda:0; env on MuJoCo CPU),
#    mps status while nothing runs, mps stop.
set -uo pipefail
out=${1:?OUT_DIR}
mkdir -p "$out"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .mpswhl/*.whl
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1 DUORL_MPS_HOME=/tmp/duorl-mps-home
unset CUDA_MPS_PIPE_DIRECTORY
train=(python3 -m duorl train --algo sac --task pendulum_swingup --sim mujoco 'training.devices=[0]'
       training.cuda_process_sharing=mps training.num_envs=256 algo.max_iterations=60 training.log_interval=10
       training.progress=false sim.nthread=4)
{
  echo "== doctor, no daemon"; python3 -m duorl mps doctor; echo "rc=$?"
  echo "== train with mps, no daemon: ${train[*]} training.log_dir=/tmp/r_nodaemon"
  s=$(date +%s.%N); "${train[@]}" training.log_dir=/tmp/r_nodaemon; rc=$?; e=$(date +%s.%N)
  echo "rc=$rc seconds=$(python3 -c "print(round($e-$s,2))")"
  echo "== mps start"; python3 -m duorl mps start --name h200; echo "rc=$?"
  export CUDA_MPS_PIPE_DIRECTORY=/tmp/duorl-mps-home/h200/pipe
  ls -la "$CUDA_MPS_PIPE_DIRECTORY"
  python3 -c "
import socket, os
p = os.environ['CUDA_MPS_PIPE_DIRECTORY'] + '/control'
for name in ('SOCK_STREAM', 'SOCK_SEQPACKET', 'SOCK_DGRAM'):
    s = socket.socket(socket.AF_UNIX, getattr(socket, name))
    try:
        s.connect(p); print(name, 'connects')
    except OSError as e:
        print(name, 'errno', e.errno, e.strerror)
    s.close()"
  echo "== doctor, daemon running"; python3 -m duorl mps doctor; echo "rc=$?"
  echo "== train with mps: ${train[*]} training.log_dir=/tmp/r_mps"
  "${train[@]}" training.log_dir=/tmp/r_mps; echo "rc=$?"
  echo "== mps status"; python3 -m duorl mps status --name h200
  echo "== mps stop"; python3 -m duorl mps stop --name h200; echo "rc=$?"
  echo "== doctor after stop"; python3 -m duorl mps doctor; echo "rc=$?"
} > "$out/mps_evidence.log" 2>&1
cp /tmp/r_mps/run_summary.json "$out/mps_run_summary.json" 2>/dev/null
python3 -c "import json;d=json.load(open('/tmp/r_mps/run_summary.json'));print(json.dumps(d['runtime_manifest']['cuda_process_sharing'],indent=1)); print(d['status'])" 2>&1
tail -40 "$out/mps_evidence.log"
