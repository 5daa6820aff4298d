"""CUDA MPS as an explicit runtime mode (docs/design.md §6): the fail-closed probe and its evidence.

`probe_mps` runs before any env, learner or collector is built and raises `MpsUnavailable` naming the
first unmet prerequisite, in a fixed order, with the command that fixes it. MPS fails open (a process
that cannot reach the daemon silently runs without it), so `verify_clients` checks afterwards that the
learner and the collector are both clients of the daemon's server. All host access goes through a
`MpsHost`, so every host state can be tested without a GPU.
"""

from __future__ import annotations

import errno
import os
import socket
import stat
import subprocess
import sys
from dataclasses import asdict, dataclass, replace
from typing import Any, Protocol

DEFAULT_PIPE_DIRECTORY = "/tmp/nvidia-mps"
START_HINT = "duorl mps start   (or: CUDA_MPS_PIPE_DIRECTORY={pipe} nvidia-cuda-mps-control -d)"

# the prerequisites, in the order they are checked
PREREQUISITES = ("linux", "cuda", "cuda_devices", "same_gpu", "control_socket", "daemon", "clients")


class MpsUnavailable(RuntimeError):
    def __init__(self, prerequisite: str, message: str, remedy: str) -> None:
        super().__init__(f"CUDA MPS requested (training.cuda_process_sharing=mps) but {message}. Fix: {remedy}")
        self.prerequisite = prerequisite
        self.remedy = remedy


class MpsHost(Protocol):
    def platform(self) -> str: ...

    def cuda_available(self) -> bool: ...

    def device_uuid(self, device: str) -> str | None: ...

    def path_kind(self, path: str) -> str:
        """'missing', 'socket', 'fifo', 'file', 'dir' or 'other'."""

    def socket_accepts(self, path: str) -> bool:
        """Whether something listens on this UNIX socket."""

    def control(self, pipe_dir: str, command: str) -> tuple[int, str]:
        """Send one command to nvidia-cuda-mps-control of this pipe directory: (exit code, output)."""


@dataclass(frozen=True)
class MpsEvidence:
    """What one rank's run knows about CUDA MPS (runtime_manifest.cuda_process_sharing.ranks[r])."""

    configured: str | None
    effective: str | None
    validated: bool
    rank: int = 0
    world_size: int = 1
    server_pid: int | None = None
    control_pipe: str | None = None
    learner_device: str | None = None
    collector_device: str | None = None
    learner_uuid: str | None = None
    collector_uuid: str | None = None
    learner_pid: int | None = None
    collector_pid: int | None = None
    client_pids: tuple[int, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["client_pids"] = list(self.client_pids)
        return d


def pipe_directory() -> str:
    return os.environ.get("CUDA_MPS_PIPE_DIRECTORY") or DEFAULT_PIPE_DIRECTORY


def probe_mps(
    configured: str | None,
    learner_device: str,
    collector_device: str,
    host: MpsHost,
    pipe_dir: str | None = None,
    rank: int = 0,
    world_size: int = 1,
    host_checks: bool = True,
) -> MpsEvidence:
    """Check every prerequisite of MPS mode in order; null mode returns at once without touching the
    host. `host_checks=False` leaves out the host-level ones (pipe directory, control socket, daemon),
    which another rank of this host checks for the daemon they share."""
    if configured is None:
        return MpsEvidence(configured=None, effective=None, validated=False, rank=rank, world_size=world_size)
    pipe = pipe_dir or pipe_directory()
    if host.platform() != "linux":
        raise MpsUnavailable("linux", f"this is {host.platform()}, and MPS exists on Linux only",
                             "run on Linux, or set training.cuda_process_sharing=null")
    if not host.cuda_available():
        raise MpsUnavailable("cuda", "no CUDA device is visible",
                             "run on a machine with an NVIDIA GPU (check nvidia-smi), or set training.cuda_process_sharing=null")
    for role, dev in (("learner", learner_device), ("collector", collector_device)):
        if not str(dev).startswith("cuda"):
            raise MpsUnavailable("cuda_devices", f"the {role} runs on {dev}, not on a CUDA device",
                                 "put learner and collector on one GPU (e.g. training.devices=[0] with --sim mjwarp)")
    learner_uuid, collector_uuid = host.device_uuid(learner_device), host.device_uuid(collector_device)
    if learner_uuid is None or learner_uuid != collector_uuid:
        raise MpsUnavailable(
            "same_gpu",
            f"learner ({learner_device}, {learner_uuid}) and collector ({collector_device}, {collector_uuid}) "
            "are not on the same physical GPU",
            "give learner and collector the same GPU (one entry in training.devices)",
        )
    control = os.path.join(pipe, "control")
    if not host_checks:
        return MpsEvidence(configured=configured, effective=None, validated=False, rank=rank, world_size=world_size,
                           control_pipe=control, learner_device=str(learner_device),
                           collector_device=str(collector_device), learner_uuid=learner_uuid,
                           collector_uuid=collector_uuid)
    kind = host.path_kind(pipe)
    if kind != "dir":
        raise MpsUnavailable("control_socket", f"the MPS pipe directory {pipe} does not exist",
                             "start a daemon: " + START_HINT.format(pipe=pipe))
    kind = host.path_kind(control)
    if kind not in ("socket", "fifo"):
        what = "is missing" if kind == "missing" else f"is a {kind}, not a socket"
        raise MpsUnavailable("control_socket", f"the MPS control socket {control} {what}",
                             "start a daemon: " + START_HINT.format(pipe=pipe)
                             + (f"; remove the stale {control} first" if kind != "missing" else ""))
    # a socket can be probed without the daemon's help; a named pipe only through the daemon below
    if kind == "socket" and not host.socket_accepts(control):
        raise MpsUnavailable("control_socket", f"no MPS daemon listens on {control} (a stale socket)",
                             f"remove {control} and start a daemon: " + START_HINT.format(pipe=pipe))
    code, out = host.control(pipe, "get_server_list")
    if code != 0:
        raise MpsUnavailable("daemon", f"the MPS daemon at {pipe} did not answer get_server_list "
                             f"(exit {code}: {out.strip()[:200]})",
                             "restart it: duorl mps stop && " + START_HINT.format(pipe=pipe))
    servers = pids_in(out)
    return MpsEvidence(
        configured=configured,
        effective=None,  # set once the processes are seen as clients
        validated=False,
        rank=rank,
        world_size=world_size,
        server_pid=servers[0] if servers else None,
        control_pipe=control,
        learner_device=str(learner_device),
        collector_device=str(collector_device),
        learner_uuid=learner_uuid,
        collector_uuid=collector_uuid,
    )


def verify_same_gpu(evidence: MpsEvidence, collector_opened: str) -> MpsEvidence:
    """Once the collector runs: the device it reports having opened must be the learner's GPU (UUIDs:
    under data parallel every process says cuda:0, so only UUIDs prove one physical GPU)."""
    if evidence.configured is None:
        return evidence
    if evidence.learner_uuid is None or collector_opened != evidence.learner_uuid:
        raise MpsUnavailable(
            "same_gpu",
            f"the collector opened {collector_opened or 'no device'}, and the learner runs on {evidence.learner_uuid} "
            "(not the same physical GPU)",
            "give learner and collector one GPU (one entry of training.devices per rank; do not change "
            "CUDA_VISIBLE_DEVICES between them)",
        )
    return replace(evidence, collector_uuid=collector_opened)


def verify_clients(evidence: MpsEvidence, learner_pid: int, collector_pid: int, host: MpsHost) -> MpsEvidence:
    """After both processes have a CUDA context: both PIDs must be clients of one MPS server."""
    if evidence.configured is None:
        return evidence
    pipe = os.path.dirname(evidence.control_pipe or os.path.join(pipe_directory(), "control"))
    code, out = host.control(pipe, "get_server_list")
    servers = pids_in(out) if code == 0 else []
    seen: dict[int, list[int]] = {}
    for server in servers:
        c, clients = host.control(pipe, f"get_client_list {server}")
        seen[server] = pids_in(clients) if c == 0 else []
        if learner_pid in seen[server] and collector_pid in seen[server]:
            return replace(
                evidence,
                effective="mps",
                validated=True,
                server_pid=server,
                learner_pid=learner_pid,
                collector_pid=collector_pid,
                client_pids=tuple(seen[server]),
            )
    raise MpsUnavailable(
        "clients",
        f"the learner (pid {learner_pid}) and the collector (pid {collector_pid}) are not both clients of one "
        f"MPS server (servers and their clients seen: {seen or 'none'}); MPS fails open, so they ran without it",
        "make sure CUDA_MPS_PIPE_DIRECTORY is the daemon's pipe directory in the environment that starts duorl, "
        "and that no other user's daemon owns the GPU (duorl mps doctor)",
    )


def pids_in(text: str) -> list[int]:
    """The process ids in an MPS control answer (`get_server_list`, `get_client_list`): its numeric tokens."""
    return [int(tok) for tok in text.split() if tok.isdigit()]


class RealHost:
    """The machine we run on."""

    def platform(self) -> str:
        return "linux" if sys.platform.startswith("linux") else sys.platform

    def cuda_available(self) -> bool:
        import torch

        return torch.cuda.is_available()

    def device_uuid(self, device: str) -> str | None:
        from duorl.config.devices import gpu_uuid

        return gpu_uuid(device)

    def path_kind(self, path: str) -> str:
        try:
            mode = os.stat(path).st_mode
        except FileNotFoundError:
            return "missing"
        if stat.S_ISSOCK(mode):
            return "socket"
        if stat.S_ISFIFO(mode):
            return "fifo"
        if stat.S_ISDIR(mode):
            return "dir"
        if stat.S_ISREG(mode):
            return "file"
        return "other"

    def socket_accepts(self, path: str) -> bool:
        # Only "connection refused" proves that nobody listens (a daemon that died leaves its socket
        # file behind). The daemon listens on a SOCK_SEQPACKET socket (seen on the H200, driver 580:
        # stream and datagram connects fail with EPROTOTYPE); any error other than "refused" is left to
        # get_server_list to judge.
        for kind in (socket.SOCK_SEQPACKET, socket.SOCK_STREAM):
            s = socket.socket(socket.AF_UNIX, kind)
            s.settimeout(2.0)
            try:
                s.connect(path)
                return True
            except OSError as e:
                if e.errno not in (errno.ECONNREFUSED, errno.ENOENT):
                    return True
            finally:
                s.close()
        return False

    def control(self, pipe_dir: str, command: str) -> tuple[int, str]:
        env = dict(os.environ, CUDA_MPS_PIPE_DIRECTORY=pipe_dir)
        try:
            r = subprocess.run(
                ["nvidia-cuda-mps-control"], input=command + "\n", capture_output=True, text=True, timeout=10, env=env
            )
        except FileNotFoundError:
            return 127, "nvidia-cuda-mps-control not found on PATH"
        except subprocess.TimeoutExpired:
            return 124, "nvidia-cuda-mps-control did not answer within 10 s"
        return r.returncode, r.stdout + r.stderr
