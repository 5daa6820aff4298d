#!/usr/bin/env bash
# mjlab's tasks at duorl's speed (issue #40), one GPU call: the collector tick of
# mjlab:Mjlab-Velocity-Flat-Unitree-G1 at 4096 envs profiled eager (mjlab's own env.step) and staged
# (sim.mjlab_staged_step: envs/mjlab/staged_step.py, its stages as CUDA graphs), then short training
# runs of the G1 and the Go1 velocity tasks on the staged step and on mjlab's own, and a table of what came out.
# Run on the GPU machine from the repo root, after staging the mjlab wheels (../shared/tools/device-mjlab.md):
#   bash benchmarks/scripts/mjlab_tick_h200.sh OUT_DIR [BUDGET_S]
# BUDGET_S (default 410) bounds the whole call, the first mjlab env build included (about 130 s with a
# cold warp cache): every step gets what is left of it and the training runs shrink or are skipped to
# fit; the table is printed whatever finished. DUORL_MJLAB_PYTEST=1 first runs the GPU equality test
# (tests/envs/mjlab/test_staged_step_cuda.py, about 3 minutes cold: give BUDGET_S 600 then; =last runs it
# after the training runs in what is left of BUDGET_S; or run it alone:
#   python3 -m pytest -m cuda -q tests/envs/mjlab/test_staged_step_cuda.py -p no:cacheprovider -s).
# PROFILE_ARMS (default "eager staged staged_reset_graphs"; empty skips the profile) picks the profile's
# arms, TRAIN_TASKS (default "g1 go1"; empty skips training; "g1reset" adds a G1 run with
# sim.mjlab_reset_graphs=true, "g1host" one with DUORL_MJLAB_SCALAR_WRITES=host, each RESET_MINUTES long,
# default 1.2) the training pairs. The profile builds every
# arm first, then times them in MJLAB_TICK_ROUNDS rounds (default 5) of MJLAB_TICK_ROUND_TICKS ticks each
# (default 30), the order alternating (ABC CBA ...), and reports per arm the median and min-max of the
# rounds and the ratio to eager within each round; its torch.profiler passes run once per arm after them.
# The tick profile alone (about 200-300 s with a cold warp cache, three G1 envs of 4096 alive at once):
#   TRAIN_TASKS= MJLAB_TICK_ROUNDS=5 bash benchmarks/scripts/mjlab_tick_h200.sh OUT_DIR 330
# Writes (flat; the device returns at most 8 files, so pick the arms to fit): env.txt (GPU, driver, tree), profile.json and profile.log
# (benchmarks/scripts/mjlab_tick_profile.py --device cuda: ms per tick, GPU busy, kernels and host syncs
# per tick and stage, both arms), train.log (the runs' output), metrics_{g1,g1eager,g1reset,g1host,go1,go1eager}.jsonl.gz,
# summary.txt (the table), and pytest_cuda.log when asked for.
set -uo pipefail
out=${1:?OUT_DIR}
budget=${2:-410}
mkdir -p "$out"
source "$(dirname "$0")/device_env.sh"
export MUJOCO_GL=glfw
# mjlab imports imageio_ffmpeg only to hand mediapy an ffmpeg path (../shared/tools/device-mjlab.md, step 2)
if [ ! -f /tmp/duorl-site/imageio_ffmpeg/__init__.py ]; then
  mkdir -p /tmp/duorl-site/imageio_ffmpeg
  printf 'def get_ffmpeg_exe():\n    return "ffmpeg"\n' > /tmp/duorl-site/imageio_ffmpeg/__init__.py
fi
t0=$(date +%s)
left() { echo $(( budget - ($(date +%s) - t0) )); }
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  git rev-parse HEAD 2>/dev/null || echo "no git"; git status --short 2>/dev/null | head -20; } > "$out/env.txt"
G1=Mjlab-Velocity-Flat-Unitree-G1
GO1=Mjlab-Velocity-Flat-Unitree-Go1

if [ "${DUORL_MJLAB_PYTEST:-0}" = 1 ]; then
  timeout $(( $(left) - 150 > 60 ? $(left) - 150 : 60 )) python3 -m pytest -m cuda -q -s -p no:cacheprovider \
    tests/envs/mjlab/test_staged_step_cuda.py > "$out/pytest_cuda.log" 2>&1
  echo "pytest rc=$? at $(( $(date +%s) - t0 )) s" | tee -a "$out/pytest_cuda.log"
fi

# 1. the tick profile, both arms (each builds its env: the first build pays the cold warp cache)
arms=${PROFILE_ARMS-eager staged staged_reset_graphs}
train_tasks=${TRAIN_TASKS-g1 go1}
if [ -n "$arms" ]; then
  reserve=10; [ -n "$train_tasks" ] && reserve=130  # what the training runs need at least
  cap=$(( $(left) - reserve ))
  [ $cap -gt 360 ] && cap=360
  echo "+ profile $arms (limit ${cap} s)" | tee "$out/profile.log"
  # shellcheck disable=SC2086
  timeout "$cap" python3 benchmarks/scripts/mjlab_tick_profile.py --device cuda --task $G1 --num-envs 4096 \
    --arms $arms --ticks 30 --warmup 10 --rounds "${MJLAB_TICK_ROUNDS:-5}" \
    --round-ticks "${MJLAB_TICK_ROUND_TICKS:-30}" --out "$out/profile.json" >> "$out/profile.log" 2>&1
  echo "profile rc=$? at $(( $(date +%s) - t0 )) s" | tee -a "$out/profile.log"
fi

# 2. training, the staged step (sim.mjlab_staged_step=true) and mjlab's own step (false), what time is left
train() {  # TASK TAG MINUTES [KEY=VALUE ...]
  local secs=$(( $(left) - 25 ))
  local want=$(python3 -c "print(int($3 * 60))")
  [ $secs -gt $want ] && secs=$want
  if [ $secs -lt 45 ]; then echo "skipped $1: ${secs} s left" | tee -a "$out/train.log"; return; fi
  local run=/tmp/duorl-mjlab-$2
  rm -rf "$run"
  echo "+ train $1 for ${secs} s (wall, start-up included)" | tee -a "$out/train.log"
  timeout $(( secs + 60 )) python3 -m duorl train --algo sac --task "mjlab:$1" training.devices=[0] \
    training.max_wall_minutes=$(python3 -c "print($secs / 60)") training.log_interval=5 training.progress=false \
    training.log_dir="$run" "${@:4}" >> "$out/train.log" 2>&1
  echo "train $1 rc=$? at $(( $(date +%s) - t0 )) s" | tee -a "$out/train.log"
  [ -f "$run/metrics.jsonl" ] && gzip -c "$run/metrics.jsonl" > "$out/metrics_$2.jsonl.gz"
}
case " $train_tasks " in *" g1 "*)
  train $G1 g1 1.2 sim.mjlab_staged_step=true
  train $G1 g1eager 1.2 sim.mjlab_staged_step=false;; esac
case " $train_tasks " in *" g1reset "*)  # the reset body as a graph per count of done envs (sim.mjlab_reset_graphs)
  train $G1 g1reset "${RESET_MINUTES:-1.2}" sim.mjlab_staged_step=true sim.mjlab_reset_graphs=true;; esac
case " $train_tasks " in *" g1host "*)  # mjlab's Python scalar writes copied from the host, as before (staged_step.SCALAR_WRITES)
  DUORL_MJLAB_SCALAR_WRITES=host train $G1 g1host "${RESET_MINUTES:-1.2}" sim.mjlab_staged_step=true;; esac
case " $train_tasks " in *" go1 "*)
  train $GO1 go1 1.0 sim.mjlab_staged_step=true
  train $GO1 go1eager 1.0 sim.mjlab_staged_step=false;; esac

# DUORL_MJLAB_PYTEST=last: the GPU equality test after the runs (the warp cache warm by then), in what is left
if [ "${DUORL_MJLAB_PYTEST:-0}" = last ] && [ $(left) -gt 80 ]; then
  timeout $(( $(left) - 20 )) python3 -m pytest -m cuda -q -s -p no:cacheprovider \
    tests/envs/mjlab/test_staged_step_cuda.py > "$out/pytest_cuda.log" 2>&1
  echo "pytest rc=$? at $(( $(date +%s) - t0 )) s" | tee -a "$out/pytest_cuda.log"
fi

# 3. the table
python3 - "$out" <<'PY' | tee "$out/summary.txt"
import gzip, json, os, statistics, sys
out = sys.argv[1]
print("mjlab tick on this GPU (benchmarks/scripts/mjlab_tick_h200.sh)")
try:
    prof = json.load(open(os.path.join(out, "profile.json")))
except (OSError, ValueError) as e:
    prof = {"arms": []}
    print(f"no profile: {e}")
timing = prof.get("timing")
if timing:
    print(f"timing: {timing['rounds']} rounds x {timing['ticks_per_round']} ticks per arm, order alternating")
    for name, row in timing["arms"].items():
        ratio = (f"  x eager {row['ratio_to_eager_median']:.3f} ({row['ratio_to_eager_min']:.3f}-{row['ratio_to_eager_max']:.3f})"
                 if "ratio_to_eager_median" in row else "")
        print(f"  {name:20s} median {row['ms_per_tick_median']:8.2f} ms/tick (rounds {row['ms_per_tick_min']:.2f}-"
              f"{row['ms_per_tick_max']:.2f}){ratio}")
print(f"{'arm':8s} {'ms/tick':>8s} {'steps/s':>9s} {'GPU busy ms':>11s} {'kernels':>8s} {'eager ops':>9s} "
      f"{'syncs':>6s} {'sync warns':>10s}")
for arm in prof["arms"]:
    t, c, g = arm["timed"], arm["counts"]["totals"], arm.get("gpu", {})
    warns = sum(s["per_tick"] for s in arm.get("sync_debug", []))
    print(f"{arm['arm']:8s} {t['ms_per_tick']:8.2f} {t['env_steps_per_s']:9.0f} {g.get('gpu_busy_ms_per_tick', 0):11.2f} "
          f"{g.get('kernels_per_tick', 0):8.0f} {c['ops']:9.0f} {c['syncs']:6.1f} {warns:10.1f}")
    if arm.get("staged"):
        eager = [n for n, s in arm["staged"]["stages"].items() if not s.get("graph")]
        runs = arm.get("measured_stage_runs", {})
        print(f"         staged: captures {arm['staged']['captures']}, eager stages {eager}, stage runs while measured "
              f"{runs}, reset bodies {arm['staged']['reset_body']}, notes {arm['staged']['notes']}")
for tag, task in (("g1", "G1 staged"), ("g1eager", "G1 eager"), ("g1reset", "G1 staged, reset graphs"),
                  ("g1host", "G1 staged, host scalar writes"), ("go1", "Go1 staged"), ("go1eager", "Go1 eager")):
    path = os.path.join(out, f"metrics_{tag}.jsonl.gz")
    if not os.path.exists(path):
        if tag in ("g1reset", "g1host"):
            continue  # only asked for by TRAIN_TASKS
        print(f"train {task}: no metrics")
        continue
    rows = [json.loads(l) for l in gzip.open(path, "rt")]
    if not rows:
        print(f"train {task}: no rows")
        continue
    steady = [r for r in rows if r["wall_s"] >= rows[-1]["wall_s"] * 0.4] or rows[-1:]
    med = lambda k: statistics.median(r[k] for r in steady if k in r) if any(k in r for r in steady) else float("nan")  # noqa: E731
    print(f"train {task}: {len(rows)} rows to {rows[-1]['wall_s']:.0f} s, iteration {rows[-1]['iteration']}; steady "
          f"(last 60% of wall time, {len(steady)} rows, medians): env steps/s {med('Perf/env_steps_per_s'):.0f}, "
          f"collector tick {med('Perf/collector_tick_ms'):.2f} ms, iteration {med('Perf/iteration_ms'):.2f} ms, "
          f"learner waits for the collector {med('Perf/learner_collector_wait_ms'):.2f} ms, "
          f"collector waits for weights {med('Perf/collector_learner_wait_ms'):.2f} ms")
PY
echo "total $(( $(date +%s) - t0 )) s"
