"""Two torchrun 'nodes' on loopback; node 1 refuses training.devices; time until both agents exit."""
import os, sys, subprocess, time
sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[2]))
from tests.distributed.conftest import torchrun_cmd, free_port, dp_env
from pathlib import Path
port = free_port(); run_dir = Path(sys.argv[1])
ok = [a for a in torchrun_cmd(run_dir, "algo.max_iterations=5", nproc=1, nnodes=2, node_rank=0, port=port) if a != "training.devices=[cpu,cpu]"] + ["training.devices=[cpu]"]
bad = [a for a in torchrun_cmd(run_dir, "algo.max_iterations=5", nproc=1, nnodes=2, node_rank=1, port=port) if a != "training.devices=[cpu,cpu]"] + ["training.devices=[cpu,cpu]"]
t0 = time.time()
p0 = subprocess.Popen(ok, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=dp_env(), start_new_session=True)
time.sleep(float(sys.argv[2]) if len(sys.argv) > 2 else 0)
p1 = subprocess.Popen(bad, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=dp_env(), start_new_session=True)
try:
    o1, _ = p1.communicate(timeout=120); t1 = time.time() - t0
    o0, _ = p0.communicate(timeout=120); t0e = time.time() - t0
except subprocess.TimeoutExpired:
    for p in (p0, p1):
        try: os.killpg(p.pid, 9)
        except Exception: pass
    print("TIMEOUT"); sys.exit(1)
for name, o in (("node0", o0), ("node1", o1)):
    print(f"--- {name}"); print("\n".join(l for l in o.splitlines() if "error" in l.lower() or "duorl" in l)[-1500:])
print(f"RESULT node0 exit {p0.returncode} at {t0e:.1f}s; node1 exit {p1.returncode} at {t1:.1f}s; run dir exists: {run_dir.exists()}")
