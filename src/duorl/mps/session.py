"""One run's CUDA MPS mode as a session object: prepare, probe, verify, report (docs/design.md §6).

The probe and the client check return `MpsVerdict`s instead of raising, so the caller decides what a
failure ends (one rank refuses its run; under data parallel the verdicts of every rank are gathered
first, and the first failing rank is named). `null` mode is a session that touches nothing.
"""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass, field, replace
from typing import Any

from duorl.mps import probe as _probe
from duorl.mps.probe import (MpsEvidence, MpsHost, MpsUnavailable, pipe_directory, probe_mps, verify_clients,
                             verify_same_gpu)

# CUDA_MPS_PIPE_DIRECTORY / CUDA_MPS_LOG_DIRECTORY may name per-rank directories (one daemon per rank)
RANK_FIELDS = ("{rank}", "{local_rank}")


@dataclass(frozen=True)
class MpsVerdict:
    """What one check found: `ok`, else the first unmet prerequisite and the message with its fix."""

    evidence: MpsEvidence
    ok: bool = True
    prerequisite: str | None = None
    message: str | None = None
    host: str = field(default_factory=platform.node)

    @classmethod
    def failed(cls, evidence: MpsEvidence, error: MpsUnavailable) -> "MpsVerdict":
        return cls(evidence, ok=False, prerequisite=error.prerequisite,
                   message=f"unmet prerequisite '{error.prerequisite}': {error}")


class MpsSession:
    """training.cuda_process_sharing for one rank: `configured` is null or "mps"."""

    def __init__(self, configured: str | None, host: MpsHost | None = None, rank: int = 0, world_size: int = 1,
                 local_rank: int = 0) -> None:
        self.configured = configured
        self.host = host if host is not None else _probe.RealHost()  # looked up late: tests fake the host
        self.rank, self.world_size, self.local_rank = rank, world_size, local_rank
        self.per_rank_daemon = False  # set by prepare_environment
        self.evidence = MpsEvidence(configured=configured, effective=None, validated=False, rank=rank,
                                    world_size=world_size)

    @property
    def requested(self) -> bool:
        return self.configured is not None

    def prepare_environment(self) -> None:
        """Before CUDA initialises: the pipe (and log) directory every process of this rank talks to
        (the spawned collector inherits them). By default one daemon serves the host's ranks; a
        directory naming {rank} or {local_rank} selects a daemon per rank. An explicit directory is
        used as given: nothing looks into another user's default MPS root."""
        if not self.requested:
            return
        for var in ("CUDA_MPS_PIPE_DIRECTORY", "CUDA_MPS_LOG_DIRECTORY"):
            value = os.environ.get(var)
            if value and any(f in value for f in RANK_FIELDS):
                os.environ[var] = value.replace("{rank}", str(self.rank)).replace("{local_rank}", str(self.local_rank))
                self.per_rank_daemon = True
        os.environ.setdefault("CUDA_MPS_PIPE_DIRECTORY", pipe_directory())

    def probe(self, learner_device: str, collector_device: str) -> MpsVerdict:
        """Every prerequisite before anything is built; null mode answers at once, touching nothing."""
        if not self.requested:
            return MpsVerdict(self.evidence)
        # host level (the daemon) once per host: by the host's first rank, unless each rank has its own
        host_checks = self.per_rank_daemon or self.local_rank == 0
        try:
            self.evidence = probe_mps(self.configured, learner_device, collector_device, self.host,
                                      rank=self.rank, world_size=self.world_size, host_checks=host_checks)
        except MpsUnavailable as e:
            return MpsVerdict.failed(self.evidence, e)
        return MpsVerdict(self.evidence)

    def verify(self, learner_pid: int, collector_pid: int, collector_opened: str) -> MpsVerdict:
        """After both processes hold a CUDA context: the collector opened the learner's GPU (its UUID as
        the collector reports it), and both are clients of one MPS server (MPS fails open, so a run that
        was not seen as a client did not share the GPU)."""
        if not self.requested:
            return MpsVerdict(self.evidence)
        try:
            self.evidence = verify_same_gpu(self.evidence, collector_opened)
            self.evidence = verify_clients(self.evidence, learner_pid, collector_pid, self.host)
        except MpsUnavailable as e:
            self.evidence = replace(self.evidence, learner_pid=learner_pid, collector_pid=collector_pid)
            return MpsVerdict.failed(self.evidence, e)
        return MpsVerdict(self.evidence)


def mps_manifest(configured: str | None, ranks: list[MpsEvidence], hosts: list[str] | None = None) -> dict[str, Any]:
    """runtime_manifest.cuda_process_sharing: one entry per rank plus one server record per host (the
    same shape at any world size: data parallel adds ranks, not fields)."""
    hosts = hosts or [platform.node()] * len(ranks)
    servers: dict[str, dict[str, Any]] = {}
    if configured is not None:
        for host, ev in zip(hosts, ranks):
            servers.setdefault(host, {"host": host, "server_pid": ev.server_pid, "control_pipe": ev.control_pipe})
    effective = {ev.effective for ev in ranks}
    return {
        "configured": configured,
        "effective": effective.pop() if len(effective) == 1 else None,
        "validated": bool(ranks) and all(ev.validated for ev in ranks),
        "ranks": [ev.to_dict() for ev in ranks],
        "servers": list(servers.values()),
        # single-host runs keep reading one record here
        "server": next(iter(servers.values()), None),
    }
