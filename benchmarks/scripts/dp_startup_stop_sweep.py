"""A SIGINT to the data-parallel launcher at delays of 0.15-1.0 s after its start (tests/distributed/test_dp_faults.py's
command): the exit code, seconds from the signal to the exit, the last stderr line. Run from the repo root."""
import os, signal, sys, time, tempfile, pathlib
sys.path.insert(0, '.')
from tests.distributed.test_dp_faults import launcher_cmd, LONG, start, kill_group
res = []
for d in [0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.5, 0.7, 1.0]:
    tmp = pathlib.Path(tempfile.mkdtemp())
    proc = start(launcher_cmd(tmp / "run", *LONG))
    time.sleep(d); os.kill(proc.pid, signal.SIGINT)
    t0 = time.time()
    try:
        _, err = proc.communicate(timeout=60); out = (proc.returncode, round(time.time() - t0, 1), err.strip().splitlines()[-1][:90])
    except Exception as e:
        out = ("HANG", str(e)[:50]); kill_group(proc)
    print(d, out, flush=True)
