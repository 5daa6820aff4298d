#!/usr/bin/env bash
# Issue #41 (end to end): the weight board's publish modes on g1_walk_flat, sac defaults, 4096 envs, one GPU.
# `sync` (the default: the learner waits for its stream before it announces W_{k+1}) against `event`
# (DUORL_WEIGHT_PUBLISH=event: the slot's interprocess CUDA event is recorded after the copy and the
# collector's stream waits for it; the learner queues its next iteration at once; runtime/weights.py).
# Arms alternate (sync event sync event ...), each a run of RUN_S seconds (default 75, start-up included)
# on the same caches (CACHE_DIR, default the startup harness's walk caches when present: warm starts);
# the steady rows are those after the first update + 20 s. A row every LOG_INTERVAL iterations (default 1,
# duorl's default: in event mode a row is read one row late, runtime/deferred_rows.py, so it waits for no
# update). Run on the GPU machine from the repo root after staging the wheels:
#   BUDGET_S=300 bash benchmarks/scripts/weight_publish_ab_h200.sh OUT_DIR
# Writes OUT_DIR/publish_ab.txt (the table: per arm the median env steps/s, iteration, learner train,
# publish, learner-waits-for-collector and collector-waits-for-learner ms of its steady rows) and
# OUT_DIR/publish_ab.jsonl (every arm's steady rows). DRY_CPU=1 runs the harness on a CPU machine (tiny
# MuJoCo C runs of pendulum_swingup, where both modes are sync: a check of the script, not a measurement).
set -uo pipefail
out=${1:?OUT_DIR}
mkdir -p "$out"
source "$(dirname "$0")/device_env.sh"
record_device "$out"
py=python3
task=g1_walk_flat
run_args=(--sim mjwarp training.devices=[0])
if [ "${DRY_CPU:-0}" = 1 ]; then  # the harness alone, on a CPU machine: tiny MuJoCo C runs (not a measurement)
  py=.venv/bin/python
  task=pendulum_swingup
  run_args=(--sim mujoco training.devices=[cpu] training.num_envs=8 training.torch_threads=1 sim.nthread=1
            algo.batch_size=64 algo.buffer_size=64 algo.actor_hidden_dims=[32] algo.critic_hidden_dims=[32]
            algo.learning_starts=4)
fi
use_caches "${CACHE_DIR:-/tmp/duorl-startup-caches/walk}"
budget=${BUDGET_S:-300}
run_s=${RUN_S:-75}
rm -rf /tmp/duorl-publish-*  # the table reads every arm of this call, and only those
t0=$(date +%s)
i=0
for mode in ${ARMS:-sync event sync event}; do
  left=$(( budget - ($(date +%s) - t0) - 15 ))
  if [ $left -lt $(( run_s + 30 )) ]; then echo "skipped $mode: ${left} s left" | tee -a "$out/publish_ab.log"; continue; fi
  i=$((i + 1))
  run=/tmp/duorl-publish-$i-$mode
  rm -rf "$run"
  echo "+ arm $i: DUORL_WEIGHT_PUBLISH=$mode for $run_s s" | tee -a "$out/publish_ab.log"
  DUORL_WEIGHT_PUBLISH=$mode timeout $(( run_s + 60 )) "$py" -m duorl train --algo sac --task $task \
    "${run_args[@]}" training.max_wall_minutes=$(python3 -c "print($run_s / 60)") \
    training.log_interval=${LOG_INTERVAL:-1} training.progress=false training.log_dir="$run" >> "$out/publish_ab.log" 2>&1
  echo "arm $i rc=$? at $(( $(date +%s) - t0 )) s" | tee -a "$out/publish_ab.log"
done
python3 - "$out" <<'PY' | tee "$out/publish_ab.txt"
import glob, json, os, statistics, sys
out = sys.argv[1]
keys = ("Perf/env_steps_per_s", "Perf/iteration_ms", "Perf/learner_train_ms", "Perf/weight_publish_ms",
        "Perf/learner_collector_wait_ms", "Perf/collector_learner_wait_ms", "Perf/collector_tick_ms")
short = ("env/s", "iter ms", "train ms", "publish ms", "L waits C", "C waits L", "tick ms")
print("weight publish A/B, g1_walk_flat, sac defaults, 4096 envs (benchmarks/scripts/weight_publish_ab_h200.sh)")
print(f"{'arm':24s}" + "".join(f"{s:>11s}" for s in short) + f"{'rows':>6s}")
with open(os.path.join(out, "publish_ab.jsonl"), "w") as f:
    for run in sorted(glob.glob("/tmp/duorl-publish-*")):
        path = os.path.join(run, "metrics.jsonl")
        rows = [json.loads(l) for l in open(path)] if os.path.exists(path) else []
        trained = [r for r in rows if "Perf/learner_train_ms" in r]
        steady = [r for r in trained if r["wall_s"] >= trained[0]["wall_s"] + 20] if trained else []
        f.write(json.dumps({"arm": os.path.basename(run), "steady": steady}) + "\n")
        med = [statistics.median(r[k] for r in steady if k in r) if any(k in r for r in steady) else float("nan") for k in keys]
        print(f"{os.path.basename(run):24s}" + "".join(f"{v:11.2f}" if k != keys[0] else f"{v:11.0f}" for k, v in zip(keys, med)) + f"{len(steady):6d}")
PY
