#!/usr/bin/env bash
# FastSAC learns g1_walk_flat on one H200 inside a wall-time budget: the published FastSAC humanoid
# settings (algo/sac.yaml: 4096 envs, batch 8192, 8 updates/iteration, gamma 0.97, ...) with the task's
# defaults (task/g1_walk_flat.yaml: the joint_limits action range, target entropy -2.0 per dimension),
# MuJoCo Warp, collector ticks and learner iterations as CUDA graphs. Criterion (issue #3): over the last 100
# iterations mean episode length >= 80% of the maximum and mean Task/lin_vel_error <= 0.3 m/s.
# Run on the GPU machine from the repo root, after staging the wheels (../shared/tools/device-wheels.sh):
#   bash benchmarks/scripts/g1_walk_fastsac_h200.sh OUT_DIR [MINUTES [key=value ...]]   # train, then collect (one call)
# A budget longer than one device command (10 min) takes two calls, the second within the warm window:
#   bash benchmarks/scripts/g1_walk_fastsac_h200.sh --start OUT_DIR MINUTES [key=value ...]  # train in its own session
#   bash benchmarks/scripts/g1_walk_fastsac_h200.sh --collect OUT_DIR            # wait for it, then collect
# Two runs side by side on a two-GPU machine (one GPU each; --launch returns at once):
#   bash benchmarks/scripts/g1_walk_fastsac_h200.sh --launch $OUT/a 14.5 training.devices=[0] [key=value ...]
#   bash benchmarks/scripts/g1_walk_fastsac_h200.sh --start $OUT/b 14.5 training.devices=[1] [key=value ...]
#   then, next call: DUORL_WALK_TAR=1 bash ... --collect $OUT/a; DUORL_WALK_TAR=1 bash ... --collect $OUT/b
#   (DUORL_WALK_TAR=1 packs each OUT_DIR into OUT_DIR.tgz: a device call returns at most 8 files)
# Each OUT_DIR's name keys its run directory and log under /tmp, so runs with different names never mix.
# DUORL_WALK_ALGO=flashsac|warpsac trains that algorithm instead of sac (FastSAC), with its own defaults.
# 256 of the 4096 envs act deterministically (training.eval_envs=256): the policy's own walking is
# logged as Eval/* beside the exploring envs' Task/* and Train/* (override with training.eval_envs=0).
set -uo pipefail
mode=all
case "${1:-}" in --start) mode=start; shift ;; --launch) mode=launch; shift ;; --collect) mode=collect; shift ;; esac
out=${1:?OUT_DIR}
minutes=${2:-9}
shift $(( $# < 2 ? $# : 2 ))  # what is left: configuration overrides, appended to the train command
mkdir -p "$out"
source "$(dirname "$0")/device_env.sh"
name=$(basename "$out")
run=/tmp/duorl-g1-walk-$name
log=/tmp/duorl-g1-walk-$name.log
cmd=(python3 -m duorl train --algo "${DUORL_WALK_ALGO:-sac}" --task g1_walk_flat --sim mjwarp training.devices=[0]
     training.max_wall_minutes=$minutes training.log_interval=5 training.progress=false training.log_dir=$run training.eval_envs=256 "$@")
if [ "$mode" != collect ]; then
  rm -rf "$run"
  echo "+ ${cmd[*]}" > "$log"
  if [ "$mode" = start ] || [ "$mode" = launch ]; then
    setsid nohup bash -c '"$@" >> '"$log"' 2>&1; echo "train rc=$?" >> '"$log" _ "${cmd[@]}" > /dev/null 2>&1 &
    echo "started $name; collect with: bash benchmarks/scripts/g1_walk_fastsac_h200.sh --collect $out"
    [ "$mode" = launch ] && exit 0
    # keep this call (and so the machine) busy while it trains; return early if the run ends
    for _ in $(seq 112); do sleep 5; grep -q "train rc=" "$log" && break; done
    tail -5 "$log"
    exit 0
  fi
  "${cmd[@]}" >> "$log" 2>&1
  echo "train rc=$?" >> "$log"
fi
while ! grep -q "train rc=" "$log"; do sleep 5; done
cp "$log" "$out/train.log"
python3 -m duorl metrics "$run" --last 20 --json > "$out/metrics_last20.json" 2>>"$out/train.log"
cp "$run/run_summary.json" "$out/run_summary.json"
cp "$run/startup.json" "$out/startup.json" 2>/dev/null || echo "no startup.json" >> "$out/train.log"
gzip -c "$run/metrics.jsonl" > "$out/metrics.jsonl.gz"
cp "$run/plots/learning_curves.png" "$out/learning_curves.png" 2>/dev/null || echo "no plot" >> "$out/train.log"
tail -4 "$out/train.log"
python3 - "$out/metrics_last20.json" "$out/metrics.jsonl.gz" <<'PY'
import gzip, json, sys
m = json.load(open(sys.argv[1]))
m = m.get("mean", m)
# the course: every 60 s of wall time, and the best 100-iteration window of the velocity error
rows = [r for r in map(json.loads, gzip.open(sys.argv[2], "rt")) if "Task/lin_vel_error" in r]
ev = "Eval/lin_vel_error" in (rows[-1] if rows else {})
print("wall_s  iteration  ep_length  lin_vel_error  ang_vel_error  penalty_scale"
      + ("  eval: ep_length  lin_vel_error  ang_vel_error" if ev else ""))
for t in range(60, int(rows[-1]["wall_s"]) + 60, 60) if rows else ():
    r = min(rows, key=lambda r: abs(r["wall_s"] - t))
    line = (f"{r['wall_s']:6.0f} {r['iteration']:10d} {r.get('Train/mean_episode_length', float('nan')):10.1f} "
            f"{r['Task/lin_vel_error']:14.3f} {r['Task/ang_vel_error']:14.3f} {r['Task/penalty_scale']:14.3f}")
    if ev:
        line += (f" {r.get('Eval/mean_episode_length', float('nan')):16.1f} {r['Eval/lin_vel_error']:14.3f} "
                 f"{r['Eval/ang_vel_error']:14.3f}")
    print(line)
for prefix in ("Task", "Eval") if ev else ("Task",):
    key = f"{prefix}/lin_vel_error"
    windows = [(sum(x[key] for x in w) / len(w), w[0]) for w in
               (rows[i:i + 20] for i in range(0, max(len(rows) - 19, 0))) if w[-1]["iteration"] - w[0]["iteration"] < 100]
    if windows:
        best, first = min(windows, key=lambda v: v[0])
        print(f"best 100-iteration window of {key}: {best:.3f} from iteration {first['iteration']} "
              f"({first['wall_s']:.0f} s, penalty scale {first['Task/penalty_scale']:.2f})")
for k in ("Train/mean_episode_length", "Task/lin_vel_error", "Task/ang_vel_error", "Task/penalty_scale",
          "Eval/mean_episode_length", "Eval/lin_vel_error", "Eval/ang_vel_error",
          "Train/mean_episode_return", "Eval/mean_episode_return", "Perf/env_steps_per_s", "Perf/iteration_ms",
          "Perf/learner_train_ms", "Perf/collector_tick_ms"):
    print(k, m.get(k))
for k in sorted(m):
    if k.startswith(("Task/rew_", "Eval/rew_")):
        print(k, round(m[k], 5))
PY
if [ "${DUORL_WALK_TAR:-0}" = 1 ]; then
  tar -C "$(dirname "$out")" -czf "$out.tgz" "$(basename "$out")" && rm -rf "$out" && echo "packed $out.tgz"
fi
