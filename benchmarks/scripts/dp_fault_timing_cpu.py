"""Seconds from a fault to the data-parallel launcher's exit, two CPU ranks over gloo (the cases of
tests/distributed/test_dp_faults.py, timed): kill -9 of rank 1's collector, of rank 1's learner, SIGINT and
SIGTERM to the launcher. Run from the repo root:
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/scripts/dp_fault_timing_cpu.py OUT_DIR
"""

import os
import shutil
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tests.dist.conftest import assert_all_gone, launcher_cmd, run_pids, start, summary, wait_for_ranks  # noqa: E402


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for case in ("kill_collector", "kill_learner", "sigint", "sigterm"):
        run_dir = out / f"run_{case}"
        shutil.rmtree(run_dir, ignore_errors=True)
        proc = start(launcher_cmd(run_dir, "algo.max_iterations=100000", "algo.save_interval=100000",
                                  "training.log_interval=1"))
        s = wait_for_ranks(run_dir, proc, 3)
        t0 = time.monotonic()
        if case.startswith("kill_"):
            os.kill(s["runtime_manifest"]["ranks"][1][f"{case.removeprefix('kill_')}_pid"], signal.SIGKILL)
        else:
            proc.send_signal(signal.SIGINT if case == "sigint" else signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
        seconds = time.monotonic() - t0
        assert_all_gone(run_pids(s))
        final = summary(run_dir)
        lines = [line for line in err.splitlines() if line.startswith(("duorl", "rank", "("))]
        print(f"{case}: exit {proc.returncode} after {seconds:.2f} s, status {final['status']}, no survivor")
        for line in lines[-3:]:
            print(f"    {line}")
        shutil.rmtree(run_dir, ignore_errors=True)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
