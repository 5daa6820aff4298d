# SIGINT N s after `python -m duorl train` starts: python sigint_early.py DELAYS COUNT (from the repo root,
# PYTHONPATH=src, two `python -c "while 1: pass"` burners beside it); prints (delay, rc, traceback?, "stopped before"?) counts
import os, signal, subprocess, sys, time, collections, tempfile
sys.path.insert(0, os.getcwd())
from tests.conftest import TINY
QUICK = ["--algo", "sac", "--task", "pendulum_swingup", "--sim", "mujoco", *TINY]
res = collections.Counter(); samples = {}
for delay in [float(x) for x in sys.argv[1].split(",")]:
    for i in range(int(sys.argv[2])):
        d = tempfile.mkdtemp()
        cmd = [sys.executable, "-m", "duorl", "train", *QUICK, f"training.log_dir={d}/run", "algo.max_iterations=100000"]
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
        time.sleep(delay)
        os.kill(p.pid, signal.SIGINT)
        try:
            _, err = p.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL); _, err = p.communicate()
        key = (delay, p.returncode, "Traceback" in err, "stopped before" in err)
        res[key] += 1
        if p.returncode != 0 or "Traceback" in err:
            samples[key] = err[-1500:]
for k, v in sorted(res.items()): print(k, v)
for k, e in samples.items(): print("=====", k); print(e)
