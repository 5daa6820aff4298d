#!/usr/bin/env bash
# Issue #42: how long a run takes from its command to its first logged iteration on one H200, cold (empty
# compile caches) and warm (the same caches again at once), phase by phase (each run's startup.json,
# duorl/startup_phases.py), for g1_walk_flat, g1_motion_tracking and mjlab's G1 velocity task; and a
# `duorl warmup` followed by a run. Run on the GPU machine from the repo root after staging the wheels
# (../shared/tools/device-wheels.sh; for the mjlab arms also device-wheels-mjlab.txt and the imageio_ffmpeg
# stub of ../shared/tools/device-mjlab.md, else those arms are skipped):
#   bash benchmarks/scripts/startup_h200.sh $OUT [ARM ...]
# ARMs, in the default order (a later call can run the ones a budget left out):
#   walk_cold walk_warm mjlab_cold mjlab_warm tracking_cold tracking_warm warmup warm_after_warmup
# and, not by default, any cold/warm arm with a suffix: _serialwarp (Warp's parallel preload off,
# DUORL_WARP_COMPILE_THREADS=0: the first step compiles its modules one by one, as before), _warp8 (the
# preload on 8 compile threads, DUORL_WARP_COMPILE_THREADS=8, instead of its default 4: for the 16-core
# machine) or _eagertick (sim.tick_compile=false: the collector's step is not torch.compiled); each suffix
# has its own caches
# A cold arm points Warp's, Inductor's (Triton's inside it), CUDA's and duorl's caches at a new, empty
# directory of its own under /tmp/duorl-startup-caches (a user's caches are never touched); its warm arm
# uses the same directory right after it; `warmup` fills a fresh directory with `duorl warmup --task
# g1_walk_flat` and `warm_after_warmup` trains with it. Each run: sac defaults, MuJoCo Warp, 4096 envs,
# 20 iterations (the first update at iteration 10), a row every 5. The whole call stops cleanly within
# BUDGET_S (default 470 s): an arm that would not fit is skipped, a run still going at the budget gets
# SIGINT (the clean stop), then SIGKILL 25 s later. Files under $OUT: gpu.txt, commit.txt, runs.jsonl (one
# object per arm: command, seconds to its first row and first update, exit code, its startup.json),
# logs.txt (every arm's console), table.txt (the final table, also printed). STARTUP_DRY_CPU=1 runs the
# harness on a CPU machine instead (tiny MuJoCo C runs of the same arms: a check of the script, not a measurement).
set -uo pipefail
out=${1:?OUT_DIR}
shift
mkdir -p "$out"
py=python3
if [ "${STARTUP_DRY_CPU:-0}" = 1 ]; then  # the harness alone, on a CPU machine: tiny MuJoCo C runs
  export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
  py=.venv/bin/python
else
  source "$(dirname "$0")/device_env.sh"
  test -f /tmp/duorl-site/READY || { echo "stage the wheels first (../shared/tools/device-wheels.sh)" >&2; exit 2; }
  record_device "$out"
fi
arms=("$@")
[ ${#arms[@]} -eq 0 ] && arms=(walk_cold walk_warm mjlab_cold mjlab_warm tracking_cold tracking_warm warmup warm_after_warmup)
"$py" - "$out" "${BUDGET_S:-470}" "${arms[@]}" <<'PY'
import json, os, shutil, signal, subprocess, sys, time
out, budget, arms = sys.argv[1], float(sys.argv[2]), sys.argv[3:]
t_call = time.time()
ROOT = "/tmp/duorl-startup-caches"
TASKS = {"walk": "g1_walk_flat", "tracking": "g1_motion_tracking", "mjlab": "mjlab:Mjlab-Velocity-Flat-Unitree-G1"}
COMMON = ["--algo", "sac", "--sim", "mjwarp", "training.devices=[0]", "algo.max_iterations=20", "training.log_interval=5",
          "training.progress=false"]
if os.environ.get("STARTUP_DRY_CPU") == "1":
    COMMON = ["--algo", "sac", "--sim", "mujoco", "training.devices=[cpu]", "algo.max_iterations=20", "training.log_interval=5",
              "training.progress=false", "training.num_envs=8", "training.torch_threads=1", "sim.nthread=1",
              "algo.batch_size=64", "algo.buffer_size=64", "algo.actor_hidden_dims=[32]", "algo.critic_hidden_dims=[32]"]
have_mjlab = os.environ.get("STARTUP_DRY_CPU") != "1" and subprocess.run(
    [sys.executable, "-c", "import mjlab"], capture_output=True, env=dict(os.environ, MUJOCO_GL="glfw")).returncode == 0
logs = open(os.path.join(out, "logs.txt"), "a")
results = []


def record(r):
    """One arm's result, kept and written at once: a call cut short keeps the arms that finished."""
    results.append(r)
    with open(os.path.join(out, "runs.jsonl"), "a") as f:
        f.write(json.dumps(r) + "\n")


def caches(name, fresh):
    d = os.path.join(ROOT, name)
    if fresh:
        shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d, exist_ok=True)
    env = dict(os.environ, WARP_CACHE_PATH=f"{d}/warp", TORCHINDUCTOR_CACHE_DIR=f"{d}/inductor", CUDA_CACHE_PATH=f"{d}/cuda",
               DUORL_CACHE_DIR=f"{d}/duorl", PYTHONUNBUFFERED="1")
    env.pop("TRITON_CACHE_DIR", None)
    return env


def first_row(path):
    try:
        with open(path) as f:
            return any(line.endswith("\n") for line in f)
    except OSError:
        return False


def run(arm, cmd, env, run_dir):
    left = budget - (time.time() - t_call)
    if left < 45:
        record({"arm": arm, "skipped": f"budget: {left:.0f} s left"})
        print(f"{arm}: skipped ({left:.0f} s of the budget left)", flush=True)
        return None
    logs.write(f"\n===== {arm}: {' '.join(cmd)}\n")
    logs.flush()
    t0 = time.time()
    p = subprocess.Popen(cmd, env=env, stdout=logs, stderr=subprocess.STDOUT, start_new_session=True)
    row = None
    stopped = None
    while p.poll() is None:
        if row is None and run_dir and first_row(os.path.join(run_dir, "metrics.jsonl")):
            row = time.time() - t0
        if stopped is None and time.time() - t_call > budget - 30:
            os.killpg(p.pid, signal.SIGINT)
            stopped = time.time()
        if stopped is not None and time.time() - stopped > 25:
            os.killpg(p.pid, signal.SIGKILL)
        time.sleep(0.1)
    r = {"arm": arm, "command": cmd, "rc": p.returncode, "wall_s": round(time.time() - t0, 2),
         "first_row_s": round(row, 2) if row is not None else None, "stopped_by_budget": stopped is not None}
    path = os.path.join(run_dir, "startup.json") if run_dir else ""
    if path and os.path.exists(path):
        rec = json.load(open(path))
        r["startup"] = rec
        lag = rec["command_start"] - t0  # the learner's start after this script's launch
        up = [x for x in rec["learner"] if x["name"] == "first update"]
        r["first_update_s"] = round(up[0]["end_s"] + lag, 2) if up else None
    record(r)
    print(f"{arm}: rc {p.returncode}, first row {r['first_row_s']} s, first update {r.get('first_update_s')} s, "
          f"wall {r['wall_s']} s", flush=True)
    return r


SUFFIXES = {"_serialwarp": ({"DUORL_WARP_COMPILE_THREADS": "0"}, []), "_warp8": ({"DUORL_WARP_COMPILE_THREADS": "8"}, []),
            "_eagertick": ({}, ["sim.tick_compile=false"])}
for arm in arms:
    suffix = next((x for x in SUFFIXES if arm.endswith(x)), "")
    extra_env, extra_args = SUFFIXES.get(suffix, ({}, []))
    kind, _, temp = arm.removesuffix(suffix).partition("_") if suffix else arm.partition("_")
    if arm == "warmup":
        env = caches("warmup", True)
        run(arm, [sys.executable, "-m", "duorl", "warmup", "--task", TASKS["walk"], *COMMON], env, None)
        continue
    if arm == "warm_after_warmup":
        task, env = TASKS["walk"], caches("warmup", False)
    else:
        if kind not in TASKS or temp not in ("cold", "warm"):
            print(f"{arm}: not an arm (walk|tracking|mjlab _cold|_warm[_serialwarp|_warp8|_eagertick], warmup, "
                  "warm_after_warmup)", flush=True)
            continue
        task, env = TASKS[kind], caches(kind + suffix, temp == "cold")
        env.update(extra_env)
    if task.startswith("mjlab:"):
        if not have_mjlab:
            record({"arm": arm, "skipped": "mjlab is not staged"})
            print(f"{arm}: skipped (mjlab does not import)", flush=True)
            continue
        env["MUJOCO_GL"] = "glfw"
    run_dir = f"/tmp/duorl-startup-runs/{arm}"
    shutil.rmtree(run_dir, ignore_errors=True)
    os.makedirs(os.path.dirname(run_dir), exist_ok=True)
    run(arm, [sys.executable, "-m", "duorl", "train", "--task", task, *COMMON, *extra_args, f"training.log_dir={run_dir}"],
        env, run_dir)


def phase(rec, proc, name, key="seconds"):
    for x in reversed((rec or {}).get(proc, [])):
        if x["name"] == name:
            return x.get(key, 0.0)
    return None


def fmt(v, w=7):
    return f"{v:{w}.1f}" if isinstance(v, (int, float)) else f"{'-':>{w}}"


head = (f"{'arm':22s} {'rc':>3s} {'row':>7s} {'update':>7s} | {'L ready':>7s} {'L cuda':>7s} {'L dyn':>7s} {'L capt':>7s} {'L t.c.':>7s} | "
        f"{'C env@':>7s} {'C up':>7s} {'C env':>7s} {'C tick1':>7s} {'C t.c.':>7s} {'C capt':>7s} {'W pre':>7s} {'W comp':>6s}")
lines = ["seconds: row/update from the command; L = learner, C = collector phases (ready: its spawn's end; cuda, dyn:"
         " its build's CUDA initialisation and torch._dynamo import; env@: its"
         " env build's start; up: its tick built; t.c.: torch.compile inside; W pre: Warp preload wall, W comp: Warp"
         " modules compiled/loaded)", head]
for r in results:
    if "skipped" in r:
        lines.append(f"{r['arm']:22s} skipped: {r['skipped']}")
        continue
    rec = r.get("startup")
    ready = phase(rec, "learner", "spawn", "end_s")
    capt = phase(rec, "learner", "graph capture")
    ltc = phase(rec, "learner", "graph capture", "torch_compile_s")
    lcuda = phase(rec, "learner", "learner", "cuda_device_s")
    ldyn = phase(rec, "learner", "learner", "dynamo_import_s")
    cenv_at = phase(rec, "collector", "env", "start_s")
    cup = phase(rec, "collector", "views and tick", "end_s")  # the tick built around the env and the buffers
    cup = cup if cup is not None else phase(rec, "collector", "actor and reset", "end_s")  # before: all in one
    cenv = phase(rec, "collector", "env")
    tick = phase(rec, "collector", "first tick")
    ctc = phase(rec, "collector", "first tick", "torch_compile_s")
    ccapt = phase(rec, "collector", "tick capture")
    wpre = phase(rec, "collector", "warp modules preloaded")
    tot = (rec or {}).get("collector_totals", {})
    wcomp = f"{tot.get('warp_compiled', 0):.0f}/{tot['warp_modules']:.0f}" if "warp_modules" in tot else "-"
    lines.append(f"{r['arm']:22s} {r['rc'] if r['rc'] is not None else '-':>3} {fmt(r.get('first_row_s'))} {fmt(r.get('first_update_s'))} | "
                 f"{fmt(ready)} {fmt(lcuda)} {fmt(ldyn)} {fmt(capt)} {fmt(ltc)} | {fmt(cenv_at)} {fmt(cup)} {fmt(cenv)} {fmt(tick)} {fmt(ctc)} {fmt(ccapt)} {fmt(wpre)} {wcomp:>6s}")
text = "\n".join(lines)
print(text)
with open(os.path.join(out, "table.txt"), "a") as f:
    f.write(text + "\n")
PY
