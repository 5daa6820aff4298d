"""Two torchrun 'nodes' on loopback (1 rank each); SIGKILL node N's agent after 3 logged rows; time until every process is gone."""
import os, sys, subprocess, time, json, signal
sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[2]))
from tests.distributed.conftest import torchrun_cmd, free_port, dp_env
from pathlib import Path
run_dir = Path(sys.argv[1]); victim_node = int(sys.argv[2]); sig = getattr(signal, sys.argv[3] if len(sys.argv) > 3 else "SIGKILL")
port = free_port()
def cmd(node):
    return [a for a in torchrun_cmd(run_dir, "algo.max_iterations=100000", "training.log_interval=1", "algo.save_interval=5", nproc=1, nnodes=2, node_rank=node, port=port)
            if a != "training.devices=[cpu,cpu]"] + ["training.devices=[cpu]"]
ps = [subprocess.Popen(cmd(n), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=dp_env(), start_new_session=True) for n in (0, 1)]
def kids(pid):
    r = [int(x) for x in subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True).stdout.split()]
    return r + [k for c in r for k in kids(c)]
def alive(q):
    try: return open(f"/proc/{q}/stat").read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError: return False
t0 = time.time(); pids = set()
m = run_dir / "metrics.jsonl"
while time.time() - t0 < 200:
    for p in ps: pids.update(kids(p.pid))
    if m.exists() and len(m.read_text().splitlines()) >= 3: break
    time.sleep(0.1)
for p in ps: pids.update(kids(p.pid))
pids.update(p.pid for p in ps)
ts = time.time(); os.kill(ps[victim_node].pid, sig)
while any(alive(q) for q in pids) and time.time() - ts < 120: time.sleep(0.05)
gone = time.time() - ts
outs = []
for p in ps:
    try: o, _ = p.communicate(timeout=5)
    except Exception: o = ""
    outs.append(o)
for n, o in enumerate(outs):
    print(f"--- node{n} rc={ps[n].returncode}"); print("\n".join(l for l in o.splitlines() if "duorl" in l and "waits for" not in l)[-1200:])
s = json.loads((run_dir / "run_summary.json").read_text())
print(f"RESULT agent of node {victim_node} {sys.argv[3] if len(sys.argv)>3 else 'SIGKILL'}: all gone after {gone:.2f}s; survivors {[q for q in pids if alive(q)]}; status={s['status']} part={s.get('failed_part')} error={str(s.get('error'))[:160]!r}")
for q in pids:
    if alive(q): os.kill(q, 9)
