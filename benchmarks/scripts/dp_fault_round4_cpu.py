"""Issue #39's data-parallel faults, timed on CPU ranks over gloo (tiny pendulum runs, OMP_NUM_THREADS=1):
what each node prints, how long each takes to end, and what rank 0's run_summary.json says.

Cases (each one or several real `duorl train` runs, through the launcher or two loopback torchrun nodes):
  device7        node 1 of two torchrun nodes gets training.devices=[7] (a CPU build of torch)
  kill_collector node 1's collector SIGKILLed after 3 logged iterations (two torchrun nodes)
  launcher_steps rank 1's collector SIGKILLed under the launcher after 6 logged iterations: summary
                 env_steps against the metrics' last row
  sigstop        rank 1's learner SIGSTOPped under the launcher (training.stall_timeout_s=10)
  elastic_dirs   /tmp/torchelastic_* trees left by one clean launcher run and one clean torchrun node pair
Every case also counts the /tmp/torchelastic_* trees it left. Run from the repo root:
    PYTHONPATH=$PWD/src OMP_NUM_THREADS=1 .venv/bin/python benchmarks/scripts/dp_fault_round4_cpu.py OUT_DIR [CASE ...]
"""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tests.distributed.conftest import (free_port, kill_group, launcher_cmd, start, summary,  # noqa: E402
                                        torchrun_cmd, wait_for_ranks)

LONG = ["algo.max_iterations=100000", "algo.save_interval=100000", "training.log_interval=1"]
SUMMARY_KEYS = ("status", "failed_part", "failed_rank", "cause_known", "env_steps", "error")


def elastic_trees() -> set[str]:
    return set(glob.glob(os.path.join(tempfile.gettempdir(), "torchelastic_*")))


def two_nodes(run_dir: Path, node1_devices: str, *overrides: str) -> list:
    port = free_port()

    def node(rank: int, devices: str):
        cmd = [a for a in torchrun_cmd(run_dir, *overrides, nproc=1, nnodes=2, node_rank=rank, port=port)
               if a != "training.devices=[cpu,cpu]"]
        return start(cmd + [f"training.devices={devices}"])

    return [node(0, "[cpu]"), node(1, node1_devices)]


def wait_all(procs: list, t0: float, timeout: float) -> list[tuple[int | None, float, str]]:
    """(exit code, seconds from t0 to its exit, stderr) per process; None/timeout for one still running."""
    out: list[tuple[int | None, float, str] | None] = [None] * len(procs)
    ends = [None] * len(procs)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(e is None for e in ends):
        for i, p in enumerate(procs):
            if ends[i] is None and p.poll() is not None:
                ends[i] = time.monotonic() - t0
        time.sleep(0.05)
    for i, p in enumerate(procs):
        if ends[i] is None:
            kill_group(p)
        _, err = p.communicate(timeout=30)
        out[i] = (p.returncode if ends[i] is not None else None, ends[i] if ends[i] is not None else timeout, err)
    return out  # type: ignore[return-value]


def said(err: str, n: int = 8) -> list[str]:
    """The lines a user reads: duorl's and torch's messages, without traceback frames and log noise."""
    keep = [line for line in err.splitlines()
            if not line.startswith((" ", "\t")) or line.strip().startswith(("exitcode", "traceback :"))]
    keep = [line for line in keep if re.search(r"^(duorl|error)|rank \d|Error|exitcode|traceback :", line)]
    return keep[-n:]


def report(name: str, results: list[tuple[int | None, float, str]], run_dir: Path | None, trees: set[str]) -> None:
    print(f"== {name}")
    for i, (code, secs, err) in enumerate(results):
        if run_dir is not None:  # every word each process said, beside the run
            (run_dir.parent / f"{run_dir.name}.process{i}.stderr").write_text(err)
        print(f"  process {i}: exit {code} after {secs:.1f} s")
        for line in said(err):
            print(f"      {line[:400]}")
    if run_dir is not None and (run_dir / "run_summary.json").exists():
        s = summary(run_dir)
        fields = {k: s.get(k) for k in SUMMARY_KEYS}
        rows = (run_dir / "metrics.jsonl").read_text().splitlines() if (run_dir / "metrics.jsonl").exists() else []
        fields["metrics_last_env_steps"] = json.loads(rows[-1]).get("env_steps") if rows else None
        print(f"  summary: {json.dumps(fields)}")
    elif run_dir is not None:
        print(f"  summary: none ({'no run directory' if not run_dir.exists() else 'no run_summary.json'})")
    left = sorted(elastic_trees() - trees)
    print(f"  /tmp/torchelastic_* trees left: {len(left)}")
    sys.stdout.flush()


def case_device7(out: Path) -> None:
    run_dir, trees = out / "device7", elastic_trees()
    procs = two_nodes(run_dir, "[7]", "algo.max_iterations=5", "training.dp_startup_timeout_s=60")
    report("device7: node 1 training.devices=[7] (dp_startup_timeout_s=60)", wait_all(procs, time.monotonic(), 120),
           run_dir, trees)


def case_kill_collector(out: Path) -> None:
    run_dir, trees = out / "kill_collector", elastic_trees()
    procs = two_nodes(run_dir, "[cpu]", *LONG)
    try:
        s = wait_for_ranks(run_dir, procs[0], 3)
    except AssertionError:
        for p in procs:
            kill_group(p)
        raise
    os.kill(s["runtime_manifest"]["ranks"][1]["collector_pid"], signal.SIGKILL)
    report("kill_collector: node 1's collector SIGKILLed (two torchrun nodes)", wait_all(procs, time.monotonic(), 90),
           run_dir, trees)


def case_launcher_steps(out: Path) -> None:
    run_dir, trees = out / "launcher_steps", elastic_trees()
    proc = start(launcher_cmd(run_dir, *LONG))
    s = wait_for_ranks(run_dir, proc, 6)
    os.kill(s["runtime_manifest"]["ranks"][1]["collector_pid"], signal.SIGKILL)
    report("launcher_steps: rank 1's collector SIGKILLed (launcher)", wait_all([proc], time.monotonic(), 90),
           run_dir, trees)


def case_sigstop(out: Path) -> None:
    run_dir, trees = out / "sigstop", elastic_trees()
    proc = start(launcher_cmd(run_dir, *LONG, "training.stall_timeout_s=10", "training.stall_compile_timeout_s=60",
                              "training.wait_report_s=5"))
    s = wait_for_ranks(run_dir, proc, 20)  # past the first iterations' compile phases: the steady state
    victim = s["runtime_manifest"]["ranks"][1]["learner_pid"]
    os.kill(victim, signal.SIGSTOP)
    print(f"(SIGSTOP of rank 1's learner, pid {victim}; training.stall_timeout_s=10)")
    report("sigstop: rank 1's learner SIGSTOPped (launcher)", wait_all([proc], time.monotonic(), 200), run_dir, trees)


def case_elastic_dirs(out: Path) -> None:
    trees = elastic_trees()
    run_dir = out / "clean_launcher"
    proc = start(launcher_cmd(run_dir, "algo.max_iterations=5"))
    report("elastic_dirs: a clean launcher run", wait_all([proc], time.monotonic(), 240), run_dir, trees)
    trees = elastic_trees()
    run_dir = out / "clean_torchrun"
    procs = two_nodes(run_dir, "[cpu]", "algo.max_iterations=5")
    report("elastic_dirs: a clean pair of torchrun nodes", wait_all(procs, time.monotonic(), 240), run_dir, trees)


CASES = {"device7": case_device7, "kill_collector": case_kill_collector, "launcher_steps": case_launcher_steps,
         "sigstop": case_sigstop, "elastic_dirs": case_elastic_dirs}


def main(out: Path, names: list[str]) -> None:
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    for name in names or list(CASES):
        CASES[name](out)


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2:])
