#!/usr/bin/env bash
# The spine's H200 benchmark: the real duo (learner + spawned collector, CUDA IPC replay and weight
# board) with --sim mjwarp on CUDA, 4096 envs of pendulum_swingup. Two learner settings:
#   small: the task's own defaults (batch 256, 4 updates/iteration, [128,128] nets)
#   fastsac: the FastSAC humanoid learner settings (batch 8192, 8 updates/iteration, default nets)
# Run on the GPU machine from the repo root, after staging the wheels (../shared/tools/device-wheels.sh):
#   bash benchmarks/scripts/spine_mjwarp_pendulum.sh OUT_DIR
set -euo pipefail
out=${1:?OUT_DIR}
source "$(dirname "$0")/device_env.sh"
record_device "$out"
common=(--algo sac --task pendulum_swingup --sim mjwarp training.num_envs=4096 algo.max_iterations=300
        training.log_interval=10 training.progress=false algo.save_interval=100000)
declare -A arms=(
  [small]=""
  [fastsac]="algo.batch_size=8192 algo.updates_per_step=8 algo.policy_frequency=4 algo.actor_hidden_dims=[512,256,128] algo.critic_hidden_dims=[768,384,192]"
)
for arm in small fastsac; do
  run=/tmp/duorl-bench-$arm
  rm -rf "$run"
  cmd=(python3 -m duorl train "${common[@]}" training.log_dir=$run ${arms[$arm]})
  echo "+ ${cmd[*]}" | tee "$out/$arm.log"
  /usr/bin/time -v "${cmd[@]}" >> "$out/$arm.log" 2>&1
  python3 -m duorl metrics "$run" --last 20 --json > "$out/${arm}_metrics_last20.json"
  cp "$run/run_summary.json" "$out/${arm}_run_summary.json"
done
