"""`duorl mps start|status|stop|doctor`: a CUDA MPS control daemon in directories duorl owns.

start writes what it started to ~/.cache/duorl/mps/<name>/state.json; stop stops only a daemon recorded
there, and not while it still serves clients (another run's learners and collectors) unless forced.
One daemon serves every GPU visible to it, so a data-parallel run on several GPUs of a host shares one;
`CUDA_VISIBLE_DEVICES=i duorl mps start --name gpu<i>` starts one per GPU instead. Nothing here
changes GPU settings (compute mode, clocks, MIG): set-ups that would need that (MIG) are refused.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from duorl.mps.probe import MpsHost, MpsUnavailable, RealHost, pids_in, pipe_directory, probe_mps
from duorl.telemetry.summary import write_json_atomic


def state_root() -> Path:
    return Path(os.environ.get("DUORL_MPS_HOME") or Path.home() / ".cache" / "duorl" / "mps")


def daemon_dirs(name: str) -> tuple[Path, Path, Path]:
    base = state_root() / name
    return base / "pipe", base / "log", base / "state.json"


class MpsCommandError(RuntimeError):
    pass


def _nvidia_smi(args: list[str]) -> str:
    try:
        r = subprocess.run(["nvidia-smi", *args], capture_output=True, text=True, timeout=20)
    except FileNotFoundError as e:
        raise MpsCommandError("nvidia-smi not found: CUDA MPS needs an NVIDIA driver on this machine") from e
    if r.returncode != 0:
        raise MpsCommandError(f"nvidia-smi {' '.join(args)} failed: {r.stderr.strip() or r.stdout.strip()}")
    return r.stdout


def visible_gpus() -> list[str]:
    """GPU UUIDs this process may use (nvidia-smi's list narrowed by CUDA_VISIBLE_DEVICES)."""
    rows = [line.split(",") for line in _nvidia_smi(["--query-gpu=index,uuid", "--format=csv,noheader"]).splitlines() if line.strip()]
    gpus = [(i.strip(), u.strip()) for i, u in rows]
    cvd = os.environ.get("CUDA_VISIBLE_DEVICES")
    if cvd is None:
        return [u for _, u in gpus]
    picked = []
    for entry in (e.strip() for e in cvd.split(",") if e.strip()):
        for idx, uuid in gpus:
            if entry == idx or uuid.startswith(entry):
                picked.append(uuid)
    return picked


def _mig_enabled() -> bool:
    out = _nvidia_smi(["--query-gpu=mig.mode.current", "--format=csv,noheader"])
    return any(line.strip().lower() == "enabled" for line in out.splitlines())


_NO_CONTROL = "nvidia-cuda-mps-control not found on PATH (it ships with the NVIDIA driver)"


def _usable_gpus() -> list[str]:
    gpus = visible_gpus()
    if not gpus:
        raise MpsCommandError("no GPU is visible (nvidia-smi / CUDA_VISIBLE_DEVICES)")
    if _mig_enabled():
        raise MpsCommandError("MIG is enabled on this GPU; duorl does not run MPS on MIG instances (and never changes MIG mode)")
    return gpus


def start_prerequisites() -> list[str]:
    """What `start` needs of the machine, checked without touching anything: visible GPUs (returned), no
    MIG, the control binary on PATH. MpsCommandError names the first one missing (a benchmark asks
    before it runs)."""
    gpus = _usable_gpus()
    if shutil.which("nvidia-cuda-mps-control") is None:
        raise MpsCommandError(_NO_CONTROL)
    return gpus


def start(name: str = "default") -> dict[str, Any]:
    pipe, log, state_file = daemon_dirs(name)
    if state_file.exists():
        state = json.loads(state_file.read_text())
        if RealHost().path_kind(str(pipe / "control")) in ("socket", "fifo") and _answers(str(pipe)):
            raise MpsCommandError(f"duorl's MPS daemon '{name}' is already running (pipe {pipe}); stop it with: duorl mps stop --name {name}")
    gpus = _usable_gpus()
    pipe.mkdir(parents=True, exist_ok=True)
    log.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, CUDA_MPS_PIPE_DIRECTORY=str(pipe), CUDA_MPS_LOG_DIRECTORY=str(log))
    try:
        r = subprocess.run(["nvidia-cuda-mps-control", "-d"], env=env, capture_output=True, text=True, timeout=20)
    except FileNotFoundError as e:
        raise MpsCommandError(_NO_CONTROL) from e
    if r.returncode != 0:
        raise MpsCommandError(f"nvidia-cuda-mps-control -d failed: {r.stderr.strip() or r.stdout.strip()}")
    deadline = time.monotonic() + 10
    while not _answers(str(pipe)):
        if time.monotonic() > deadline:
            raise MpsCommandError(f"the daemon did not answer on {pipe} within 10 s; see {log}/control.log")
        time.sleep(0.1)
    state = {"name": name, "pipe_directory": str(pipe), "log_directory": str(log), "gpu": gpus[0], "gpus": gpus,
             "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES")}
    write_json_atomic(state_file, state)  # `duorl mps status` in another shell never reads half a file
    return state


def _answers(pipe_dir: str) -> bool:
    code, _ = RealHost().control(pipe_dir, "get_server_list")
    return code == 0


def status(name: str = "default", host: MpsHost | None = None) -> dict[str, Any]:
    host = host or RealHost()
    pipe, _, state_file = daemon_dirs(name)
    out: dict[str, Any] = {"name": name, "recorded": state_file.exists(), "pipe_directory": str(pipe), "running": False}
    if not state_file.exists():
        return out
    code, servers = host.control(str(pipe), "get_server_list")
    out["running"] = code == 0
    if code == 0:
        out["servers"] = {}
        for pid in pids_in(servers):
            c, clients = host.control(str(pipe), f"get_client_list {pid}")
            out["servers"][pid] = [{"pid": cp, "command": _command_of(cp)} for cp in (pids_in(clients) if c == 0 else [])]
    return out


def _command_of(pid: int) -> str | None:
    """A client's command line (which run it belongs to), where /proc shows it."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip() or None
    except OSError:
        return None


def clients_of(name: str, host: MpsHost | None = None) -> list[int]:
    """Every client PID of every server of the daemon recorded under `name`."""
    servers = status(name, host).get("servers") or {}
    return [c["pid"] for clients in servers.values() for c in clients]


def stop(name: str = "default", force: bool = False, host: MpsHost | None = None) -> bool:
    """Stop the daemon duorl started under `name`; returns False when there was none. Refused while it
    serves clients (runs that share it would lose their MPS server) unless `force`."""
    pipe, _, state_file = daemon_dirs(name)
    if not state_file.exists():
        return False
    clients = clients_of(name, host)
    if clients and not force:
        raise MpsCommandError(
            f"duorl's MPS daemon '{name}' still serves {len(clients)} client process(es) ({', '.join(map(str, clients))}; "
            f"see duorl mps status --name {name}): stopping it would take their MPS server away. Stop those runs "
            f"first, or force it: duorl mps stop --name {name} --force"
        )
    if _answers(str(pipe)):
        RealHost().control(str(pipe), "quit")
        deadline = time.monotonic() + 10
        while _answers(str(pipe)) and time.monotonic() < deadline:
            time.sleep(0.1)
    state_file.unlink()
    return True


def doctor(host: MpsHost | None = None, pipe_dir: str | None = None) -> tuple[bool, list[str]]:
    """Each prerequisite of MPS mode for a learner and collector on cuda:0, with the remedy of the
    first unmet one, and the servers and clients the daemon reports."""
    host = host or RealHost()
    pipe = pipe_dir or pipe_directory()
    lines = [f"CUDA_MPS_PIPE_DIRECTORY = {pipe}" + ("" if os.environ.get("CUDA_MPS_PIPE_DIRECTORY") else " (default)")]
    try:
        ev = probe_mps("mps", "cuda:0", "cuda:0", host, pipe_dir=pipe)
    except MpsUnavailable as e:
        lines.append(f"FAIL {e.prerequisite}: {e}")
        return False, lines
    lines.append(f"ok   Linux, CUDA, learner and collector on one GPU ({ev.learner_uuid})")
    lines.append(f"ok   control socket {ev.control_pipe}; the daemon answers get_server_list")
    code, servers = host.control(pipe, "get_server_list")
    pids = pids_in(servers) if code == 0 else []
    if not pids:
        lines.append("ok   no MPS server yet (the daemon starts one when the first CUDA client connects)")
    for pid in pids:
        c, clients = host.control(pipe, f"get_client_list {pid}")
        lines.append(f"ok   server {pid}: clients {pids_in(clients) if c == 0 else 'unknown'}")
    return True, lines


def mps_main(action: str, name: str, force: bool = False) -> int:
    try:
        if action == "start":
            st = start(name)
            print(f"started MPS daemon '{name}' for {', '.join(st['gpus'])}")
            print(f"  pipe {st['pipe_directory']}\n  log  {st['log_directory']}")
            print("Run duorl in an environment with:")
            print(f"  export CUDA_MPS_PIPE_DIRECTORY={st['pipe_directory']}")
            return 0
        if action == "status":
            print(json.dumps(status(name), indent=2))
            return 0
        if action == "stop":
            if stop(name, force=force):
                print(f"stopped duorl's MPS daemon '{name}'")
                return 0
            print(f"no MPS daemon started by duorl under the name '{name}' (nothing stopped)", file=sys.stderr)
            return 1
        if action == "doctor":
            pipe = os.environ.get("CUDA_MPS_PIPE_DIRECTORY")
            if not pipe and daemon_dirs(name)[2].exists():
                pipe = str(daemon_dirs(name)[0])  # the daemon `duorl mps start --name` recorded
            ok, lines = doctor(pipe_dir=pipe)
            print("\n".join(lines))
            return 0 if ok else 1
    except MpsCommandError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"error: unknown action {action!r}: start, status, stop or doctor", file=sys.stderr)
    return 2
