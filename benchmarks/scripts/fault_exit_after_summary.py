"""Time from the final run_summary.json write to the command's exit (single or DP)."""
import os, sys, subprocess, time, json, threading
sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[2]))
from tests.conftest import TINY
run_dir = sys.argv[1]; extra = sys.argv[2:]
cmd = [sys.executable, "-m", "duorl", "train", "--algo", "sac", "--task", "pendulum_swingup", "--sim", "mujoco",
       f"training.log_dir={run_dir}", *TINY, "algo.max_iterations=20", *extra]
t0 = time.time()
p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
last_mtime = None; last_status = None; lines = []
def rd():
    for line in p.stdout: lines.append((time.time(), line.rstrip()))
threading.Thread(target=rd, daemon=True).start()
while p.poll() is None:
    f = os.path.join(run_dir, "run_summary.json")
    try:
        st = json.load(open(f))["status"]; m = os.path.getmtime(f)
        if st != last_status or m != last_mtime: last_status, last_mtime = st, m
    except Exception: pass
    time.sleep(0.02)
t_end = time.time(); time.sleep(0.3)
for t, l in lines: print(f"{t - t0:7.2f} {l}")
print(f"exit {p.returncode} total {t_end - t0:.2f}s; final summary status={last_status} at {last_mtime - t0:.2f}s; exit-summary {t_end - last_mtime:.2f}s")
