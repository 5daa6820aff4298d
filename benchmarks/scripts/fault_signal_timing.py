"""Signal a process of a run after 3 logged rows; times to exit and to all-gone, survivors, summary.
usage (repo root): python benchmarks/scripts/fault_signal_timing.py RUN_DIR SIGNAL TARGET [overrides...]; TARGET: top | rank0 | rank1 | learner | collector | rank0-collector ..."""
import os, sys, subprocess, time, json, signal, threading
sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[2]))
from tests.conftest import TINY
run_dir, sig, target = sys.argv[1], sys.argv[2], sys.argv[3]; extra = sys.argv[4:]
cmd = [sys.executable, "-m", "duorl", "train", "--algo", "sac", "--task", "pendulum_swingup", "--sim", "mujoco",
       f"training.log_dir={run_dir}", *TINY, "algo.max_iterations=100000", "algo.save_interval=5", "training.log_interval=1", *extra]
if os.environ.get("TORCHRUN"):
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes=1", "--nproc-per-node=2", "--rdzv-backend=c10d",
           "--rdzv-endpoint=127.0.0.1:29517", "--max-restarts=0", "-m", "duorl", *cmd[3:]]
t0 = time.time()
p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
lines = []
def rd():
    for line in p.stdout: lines.append((time.time(), line.rstrip()))
threading.Thread(target=rd, daemon=True).start()
pids = set()
def kids(pid):
    out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True).stdout.split()
    r = [int(x) for x in out]
    return r + [k for c in r for k in kids(c)]
def victim():
    if target == "top": return p.pid
    s = json.load(open(os.path.join(run_dir, "run_summary.json")))["runtime_manifest"]
    ranks = s.get("ranks") or [s]
    if target in ("learner", "collector"): return ranks[0][f"{target}_pid"]
    r, _, part = target.partition("-")
    return ranks[int(r[4:])][f"{part or 'learner'}_pid"]
ts = None; last = (None, None)
while p.poll() is None:
    pids.update(kids(p.pid))
    m = os.path.join(run_dir, "metrics.jsonl")
    if ts is None and os.path.exists(m) and len(open(m).read().splitlines()) >= 3:
        v = victim(); pids.update(kids(p.pid)); ts = time.time(); os.kill(v, getattr(signal, sig)); print(f"signalled {sig} to {target} pid {v} at {ts-t0:.2f}")
    try:
        f = os.path.join(run_dir, "run_summary.json"); s = json.load(open(f)); last = (s["status"], os.path.getmtime(f), s.get("error"), s.get("failed_part"))
    except Exception: pass
    time.sleep(0.02)
t_end = time.time()
def alive(q):
    try: return open(f"/proc/{q}/stat").read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError: return False
gone_at = None
for _ in range(600):
    if not any(alive(q) for q in pids): gone_at = time.time(); break
    time.sleep(0.05)
time.sleep(0.5)
try:
    s = json.load(open(os.path.join(run_dir, "run_summary.json"))); last = (s["status"], os.path.getmtime(os.path.join(run_dir, "run_summary.json")), s.get("error"), s.get("failed_part"))
except Exception: pass
for t, l in lines:
    if " W12" not in l and " I12" not in l: print(f"{t - t0:7.2f} {l}")
print(f"RESULT exit {p.returncode}; signal->exit {t_end - ts:.2f}s; all gone after signal {((gone_at or time.time()) - ts):.2f}s; survivors {[q for q in pids if alive(q)]}; status={last[0]} part={last[3]} summary-exit {t_end-(last[1] or t_end):.2f}s; error={str(last[2])[:200]!r}")
for q in pids:
    if alive(q): os.kill(q, signal.SIGKILL)
