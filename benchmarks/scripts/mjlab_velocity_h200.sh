#!/usr/bin/env bash
# duorl's sac against mjlab's own PPO (rsl_rl) on an mjlab velocity task, side by side by wall time (issue
# #40's learning half). One device call lasts at most 600 s, so a run starts detached and a later call
# waits for it and collects:
#   bash benchmarks/scripts/mjlab_velocity_h200.sh TASK SEED TRAINER MINUTES OUT   # starts (setsid), returns
#   bash benchmarks/scripts/mjlab_velocity_h200.sh wait OUT [MAX_WAIT_S]            # waits (default 540 s), collects
#   python3 benchmarks/scripts/mjlab_velocity_plot.py plot OUT1 OUT2 ... --png curves.png --md table.md
# TASK: an mjlab task id (Mjlab-Velocity-Flat-Unitree-G1); TRAINER: duorl | ppo; MINUTES: wall budget,
# start-up included. Run on the GPU machine from the repo root, after staging the mjlab wheels
# (../shared/tools/device-mjlab.md). Example, 10 minutes each, one after the other on one GPU:
#   bash benchmarks/scripts/mjlab_velocity_h200.sh Mjlab-Velocity-Flat-Unitree-G1 1 duorl 10 /tmp/v/duorl1
#   bash benchmarks/scripts/mjlab_velocity_h200.sh wait /tmp/v/duorl1 590   # next call (and the one after)
# duorl: python3 -m duorl train --task mjlab:TASK --algo sac --sim mjwarp training.devices=[0]
#   training.seed=SEED training.max_wall_minutes=MINUTES (its own clean stop: a final checkpoint, a
#   completed run), training.log_dir=OUT/run; a SIGINT 120 s past the budget if it overruns.
# ppo: cd /tmp && python3 -m mjlab.scripts.train TASK --env.scene.num-envs $NUM_ENVS --agent.logger
#   tensorboard --agent.seed SEED --agent.max-iterations 1000000 --log-root OUT/ppo --gpu-ids [0], stopped
#   by SIGINT at MINUTES (SIGKILL 30 s later if it hangs): rsl_rl has no wall budget.
# Env vars: NUM_ENVS (default 4096, both trainers), DUORL_EXTRA (more duorl key=value overrides, e.g. a
# tiny CPU config), DEVICE_ENV (default 1: source device_env.sh; 0 keeps PYTHONPATH as is, for a CPU dry
# run), PPO_GPU_IDS (default 0; None runs mjlab's trainer on the CPU), PYTHON (default python3).
# Writes into OUT: run.env (trainer, task, seed, minutes, start_epoch), train.log, pid, rc (the trainer's
# exit status: 124 is ppo stopped by the wall budget, as meant), and after `wait`: curve.csv (wall_s,
# iteration, mean_episode_return, mean_episode_length), duorl's metrics.jsonl.gz or ppo's event file.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
py=${PYTHON:-python3}

if [ "${1:-}" = wait ]; then
  out=$(realpath "${2:?OUT}")
  max=${3:-540}
  t0=$(date +%s)
  while [ ! -f "$out/rc" ] && [ $(( $(date +%s) - t0 )) -lt "$max" ]; do sleep 5; done
  if [ ! -f "$out/rc" ]; then
    echo "still running after ${max} s (pid $(cat "$out/pid" 2>/dev/null)): call wait again"; tail -3 "$out/train.log"; exit 3
  fi
  echo "finished: rc $(cat "$out/rc"), waited $(( $(date +%s) - t0 )) s"
  [ "${DEVICE_ENV:-1}" = 1 ] && source "$here/device_env.sh"
  "$py" "$here/mjlab_velocity_plot.py" collect "$out" || exit 4
  [ -f "$out/run/metrics.jsonl" ] && gzip -c "$out/run/metrics.jsonl" > "$out/metrics.jsonl.gz"
  find "$out/ppo" -name 'events.out.tfevents.*' -exec cp {} "$out/" \; 2>/dev/null
  tail -2 "$out/curve.csv"
  exit 0
fi

task=${1:?TASK}; seed=${2:?SEED}; trainer=${3:?TRAINER duorl|ppo}; minutes=${4:?MINUTES}; out=${5:?OUT}
[ -e "$out" ] && { echo "error: $out exists"; exit 2; }
mkdir -p "$out" && out=$(realpath "$out")
secs=$("$py" -c "import math; print(math.ceil(float('$minutes') * 60))")
n=${NUM_ENVS:-4096}
printf 'trainer=%s\ntask=%s\nseed=%s\nminutes=%s\nnum_envs=%s\nstart_epoch=%s\n' \
  "$trainer" "$task" "$seed" "$minutes" "$n" "$(date +%s.%N)" > "$out/run.env"
setup="cd '$repo'"
[ "${DEVICE_ENV:-1}" = 1 ] && setup="$setup && source '$here/device_env.sh' && export MUJOCO_GL=glfw"
case $trainer in
  duorl)
    # shellcheck disable=SC2086
    cmd="timeout -s INT -k 30 $(( secs + 120 )) $py -m duorl train --task mjlab:$task --algo sac --sim mjwarp \
training.devices=[0] training.num_envs=$n training.seed=$seed training.max_wall_minutes=$minutes \
training.progress=false training.log_dir='$out/run' ${DUORL_EXTRA:-}";;
  ppo)
    cmd="cd /tmp && timeout -s INT -k 30 $secs $py -m mjlab.scripts.train $task --env.scene.num-envs $n \
--agent.logger tensorboard --agent.seed $seed --agent.max-iterations 1000000 --log-root '$out/ppo' --gpu-ids ${PPO_GPU_IDS:-0}";;
  *) echo "error: TRAINER is duorl or ppo, not $trainer"; exit 2;;
esac
echo "+ $cmd" > "$out/train.log"
setsid bash -c "$setup && $cmd; echo \$? > '$out/rc.tmp'; mv '$out/rc.tmp' '$out/rc'" >> "$out/train.log" 2>&1 < /dev/null &
echo $! > "$out/pid"
echo "started $trainer on $task, seed $seed, ${minutes} min (pid $(cat "$out/pid")): $out"
