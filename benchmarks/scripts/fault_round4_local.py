"""Issue #39's local fault cases (faults 4, 5, 7, double Ctrl-C, resuming a live run, the resume and
export commands), each with real processes on this CPU machine; prints one Markdown section per case.

    PYTHONPATH=$PWD/src .venv/bin/python benchmarks/scripts/fault_round4_local.py [CASE ...] > OUT.md

CASE: early_kill, all_killed, interleave, double_ctrl_c, resume_alive, commands (default: all). Every
moment is found by polling a file or a line, never by a guessed sleep. Runs are tiny pendulum runs
(tests/conftest.py's TINY) under a private TMPDIR, so that scratch folders can be counted.
Results: benchmarks/2026-12-02_fault_round4_cpu/local_faults.md.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

TINY = ["training.num_envs=4", "training.progress=false", "training.torch_threads=1", "sim.nthread=1",
        "algo.batch_size=32", "algo.updates_per_step=2", "algo.policy_frequency=2", "algo.learning_starts=4",
        "algo.buffer_size=64", "algo.actor_hidden_dims=[32,32]", "algo.critic_hidden_dims=[32,32]",
        "algo.num_atoms=11", "training.no_play=true"]
RUN = ["--algo", "sac", "--task", "pendulum_swingup", "--sim", "mujoco", *TINY]
DP = ["training.devices=[cpu,cpu]", "training.dp_timeout_s=60", "training.dp_startup_timeout_s=120"]
WORK = Path(tempfile.mkdtemp(prefix="fault-round4-"))
TMP = WORK / "tmp"
TMP.mkdir()
ENV = dict(os.environ, PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1", TMPDIR=str(TMP))


def duorl(*args: str) -> list[str]:
    return [sys.executable, "-m", "duorl", *args]


class Proc:
    """A command in its own session, stderr read line by line into `lines`."""

    def __init__(self, cmd: list[str]) -> None:
        self.t0 = time.monotonic()
        self.p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=ENV,
                                  start_new_session=True)
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.p.stderr is not None
        for line in self.p.stderr:
            self.lines.append(line.rstrip("\n"))

    def until(self, cond, timeout: float = 120.0, poll: float = 0.01) -> float:
        deadline = time.monotonic() + timeout
        while not cond():
            if time.monotonic() > deadline:
                raise TimeoutError(f"condition not met in {timeout} s; stderr: {self.lines[-5:]}")
            if self.p.poll() is not None and not cond():
                raise RuntimeError(f"ended ({self.p.returncode}) first; stderr: {self.lines[-5:]}")
            time.sleep(poll)
        return time.monotonic() - self.t0

    def group(self, sig: int) -> None:
        try:
            os.killpg(self.p.pid, sig)
        except ProcessLookupError:
            pass

    def wait(self, timeout: float = 120.0) -> int:
        code = self.p.wait(timeout=timeout)
        self._reader.join(timeout=5)
        return code


def summary(d: Path) -> dict:
    try:
        return json.loads((d / "run_summary.json").read_text())
    except (OSError, ValueError):
        return {}


def status(d: Path) -> str | None:
    return summary(d).get("status")


def quick(cmd: list[str], timeout: float = 300) -> tuple[int, list[str], float]:
    t0 = time.monotonic()
    r = subprocess.run(cmd, capture_output=True, text=True, env=ENV, timeout=timeout)
    return r.returncode, [x for x in r.stderr.splitlines() if x.strip()], time.monotonic() - t0


def scratch() -> list[str]:
    return sorted(p.name for p in TMP.iterdir() if p.name.startswith("duorl-"))


def show(title: str, rows: list[tuple[str, object]]) -> None:
    print(f"\n### {title}\n\n| | |\n|---|---|")
    for k, v in rows:
        print(f"| {k} | {str(v).replace('|', '/')} |")
    sys.stdout.flush()


def early_kill() -> None:
    # the claim's summary, the configuration beside it, the run directory's writers (the learner built)
    for marker in ("run_summary.json", "run_config.json", "metrics.jsonl"):
        d = WORK / f"early-{marker.split('.')[0]}"
        p = Proc(duorl("train", *RUN, f"training.log_dir={d}", "algo.max_iterations=200"))
        at = p.until(lambda: (d / marker).exists(), poll=0.002)
        p.group(signal.SIGKILL)
        code = p.wait()
        left = sorted(x.name for x in d.iterdir())
        s = summary(d)
        again, err, wall = quick(duorl("train", *RUN, f"training.log_dir={d}", "algo.max_iterations=10"))
        show(f"early_kill: kill -9 of the process group once {marker} exists", [
            ("killed at (s after start)", f"{at:.2f}"), ("exit", code), ("left in the run directory", left),
            ("summary status", s.get("status")), ("summary pid", (s.get("process") or {}).get("pid")),
            ("same training.log_dir again: exit", again), ("its first line", err[0] if err else ""),
            ("its status", status(d)), ("wall s", f"{wall:.1f}")])


def all_killed() -> None:
    d = WORK / "all-killed"
    p = Proc(duorl("train", *RUN, *DP, f"training.log_dir={d}", "algo.max_iterations=100000",
                   "algo.save_interval=5"))
    p.until(lambda: len(summary(d).get("runtime_manifest", {}).get("ranks", [])) == 2
            and (d / "checkpoints" / "latest.json").exists(), timeout=240, poll=0.05)
    ranks = summary(d)["runtime_manifest"]["ranks"]
    # every process at once, those that would record the death first (kill -9 of each; the ranks are in
    # sessions of their own, so a kill of the launcher's process group alone reaches only the launcher)
    for pid in [r["collector_pid"] for r in ranks] + [r["learner_pid"] for r in ranks] + [p.p.pid]:
        os.kill(pid, signal.SIGKILL)
    code = p.wait()
    time.sleep(1.0)  # nothing left to write: the summary and /tmp are as they stay
    before = scratch()
    s = summary(d)
    r = WORK / "all-killed-resumed"
    again, err, wall = quick(duorl("train", *RUN, *DP, f"training.resume={d}", f"training.log_dir={r}",
                                   "algo.max_iterations=12"))
    show("all_killed: kill -9 of every process of a 2-rank run, then its resume", [
        ("exit", code), ("summary status after the kill", s.get("status")),
        ("scratch folders after the kill", before), ("resume: exit", again),
        ("resume: lines naming the dead run", [x for x in err if "dead" in x or "gone" in x or "died" in x][:2]),
        ("killed run's status after the resume", status(d)), ("scratch folders after the resume", scratch()),
        ("resume wall s", f"{wall:.1f}")])


def interleave() -> None:
    """strace counts the write(2) calls of each line: a line written in two (its text, then its newline)
    is what another process's line can land between ("...publishedduorl: the collector waits...")."""
    n = 50
    child = ("import duorl\nfrom duorl.runtime.heartbeat import _to_stderr\n"
             f"for i in range({n}): _to_stderr('duorl: the collector waits for weights > ' + str(i))")
    cases = {
        # a torchrun rank's environment: the child path of duorl's first import (a collector's is the same)
        "a child process (rank, collector): the wait report": (
            [sys.executable, "-c", child], dict(ENV, TORCHELASTIC_RUN_ID="x", RANK="0", LOCAL_RANK="0")),
        "the duorl command: a refusal's line": (duorl("train", *RUN, "training.num_envs=0"), ENV),
    }
    rows: list[tuple[str, object]] = []
    for what, (cmd, env) in cases.items():
        trace = WORK / "strace.txt"
        subprocess.run(["strace", "-f", "-qq", "-e", "trace=write", "-o", str(trace), *cmd], env=env,
                       capture_output=True, timeout=120)
        writes = [x for x in trace.read_text().splitlines() if " write(2, " in x]
        lone = [x for x in writes if 'write(2, "\\n", 1)' in x]
        rows += [(f"{what}: writes to stderr", len(writes)), (f"{what}: of them a lone newline", len(lone))]
    show("interleave: write calls per stderr line (PYTHONUNBUFFERED=1, strace -f -e trace=write)", rows)


def double_ctrl_c() -> None:
    d = Path(tempfile.mkdtemp(prefix="double-ctrl-c-", dir=WORK)) / "run"
    p = Proc(duorl("train", *RUN, f"training.log_dir={d}", "algo.max_iterations=100000"))
    p.until(lambda: status(d) == "running", poll=0.05)
    p.group(signal.SIGINT)
    p.until(lambda: any("stopping at the next safe point" in x for x in p.lines), timeout=30, poll=0.001)
    p.group(signal.SIGINT)
    stopping = next(i for i, x in enumerate(p.lines) if "stopping at the next safe point" in x)
    code = p.wait()
    s = summary(d)
    show("double_ctrl_c: SIGINT to the process group, and again once it says it is stopping", [
        ("exit", code), ("summary status", s.get("status")), ("summary error", s.get("error")),
        ("summary stopped_by", s.get("stopped_by")), ("stderr after the second SIGINT", p.lines[stopping + 1:])])


def resume_alive() -> None:
    d = WORK / "alive"
    p = Proc(duorl("train", *RUN, f"training.log_dir={d}", "algo.max_iterations=100000", "algo.save_interval=5"))
    p.until(lambda: (d / "checkpoints" / "latest.json").exists(), poll=0.05)
    p.group(signal.SIGSTOP)
    try:
        code, err, wall = quick(duorl("train", *RUN, f"training.resume={d}", f"training.log_dir={WORK / 'alive-2'}",
                                      "algo.max_iterations=20"), timeout=120)
    finally:
        p.group(signal.SIGKILL)
        p.group(signal.SIGCONT)
        p.wait()
    show("resume_alive: training.resume of a run whose processes are stopped (SIGSTOP), alive", [
        ("exit", code), ("first line", err[0] if err else ""), ("wall s", f"{wall:.1f}"),
        ("a second run directory made", (WORK / "alive-2").exists())])


def commands() -> None:
    d = WORK / "done"
    quick(duorl("train", *RUN, f"training.log_dir={d}", "algo.max_iterations=10"))
    rows: list[tuple[str, object]] = []
    for cmd in (["resume", str(d), "algo.max_iterations=20", f"training.log_dir={WORK / 'done-resumed'}"],
                ["export", str(d)]):
        code, err, wall = quick(duorl(*cmd))
        rows += [(f"duorl {cmd[0]}: exit", code), (f"duorl {cmd[0]}: last line", err[-1] if err else ""),
                 (f"duorl {cmd[0]}: wall s", f"{wall:.1f}")]
    rows.append(("export files", sorted(x.name for x in (d / "export").iterdir()) if (d / "export").exists() else []))
    show("commands: duorl resume RUN, duorl export RUN", rows)


CASES = {f.__name__: f for f in (early_kill, all_killed, interleave, double_ctrl_c, resume_alive, commands)}

if __name__ == "__main__":
    print(f"commit {subprocess.run(['git', 'rev-parse', '--short', 'HEAD'], capture_output=True, text=True).stdout.strip()}"
          f", duorl from {__import__('duorl').__file__}")
    for name in sys.argv[1:] or list(CASES):
        try:
            CASES[name]()
        except Exception as e:  # noqa: BLE001 - a case that cannot run says why, the others go on
            show(f"{name}: could not run", [("error", f"{type(e).__name__}: {e}")])
