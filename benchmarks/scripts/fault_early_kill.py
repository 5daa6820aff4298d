"""SIGKILL the learner D seconds after its collector process appears; is the collector gone within 10 s?"""
import os, sys, subprocess, time, signal
sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[2]))
from tests.conftest import TINY
d = float(sys.argv[1]); run_dir = sys.argv[2]; extra = sys.argv[3:]
cmd = [sys.executable, "-m", "duorl", "train", "--algo", "sac", "--task", "pendulum_swingup", "--sim", "mujoco",
       f"training.log_dir={run_dir}", *TINY, "algo.max_iterations=100000", *extra]
p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
def kids(pid):
    return [int(x) for x in subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True).stdout.split()]
def alive(q):
    try: return open(f"/proc/{q}/stat").read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError: return False
coll = None
while coll is None and p.poll() is None:
    for k in kids(p.pid):
        try:
            if "multiprocessing-fork" in open(f"/proc/{k}/cmdline").read() and "spawn_main" in open(f"/proc/{k}/cmdline").read():
                coll = k
        except FileNotFoundError: pass
    time.sleep(0.005)
allk = kids(p.pid)
time.sleep(d)
os.kill(p.pid, signal.SIGKILL); t = time.time(); p.wait()
while any(alive(q) for q in allk) and time.time() - t < 15: time.sleep(0.05)
print(f"delay {d}: collector {coll} children {allk} gone after {time.time()-t:.2f}s survivors {[q for q in allk if alive(q)]}")
for q in allk:
    if alive(q): os.kill(q, signal.SIGKILL)
print(p.stderr.read()[-600:])
