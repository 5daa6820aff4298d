"""Memory preflight: before anything is allocated, check that what a duo allocates fits (fail closed).

What a duo allocates, by part (MemoryNeed): the replay ring and the weight board (shared between the
learner and its collector), the learner's networks with everything that scales with them (the target
critic, gradients, AdamW's two moments, data parallel's flat gradient buffers), the collector's copy
of the actor, and the activations of an update and of a collector tick. Network sizes are counted
from the configuration (duorl.algos.registry.network_sizes, nothing built), so a width of 10^8 is
refused at once instead of being allocated. On CUDA all of it shares the GPU; on the CPU the ring and
board live in shared memory (/dev/shm, often far smaller than RAM, and RAM itself) and the rest in
process memory. Compiled code, graph pools and the simulator are not counted: HEADROOM leaves room
for them. `memory_problem` returns a problem (one line with the sizes and the fix) or None; the
caller refuses the run, on every rank.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from duorl.algos.sizes import NetworkSize

# fraction of what is free that these allocations may take: the rest is for the collector's
# env, compiled kernels and graph pools
HEADROOM = 0.8
FLOAT_BYTES = 4  # every network, optimizer state and board slot is float32


@dataclass(frozen=True)
class MemoryNeed:
    """Bytes a duo allocates before and while it trains, by part."""

    replay: int  # the replay ring
    board: int  # the weight board: two slots of the actor's state
    learner: int  # networks, target critic, gradients, optimizer moments (+ data parallel's gradient buffers)
    collector: int  # the collector's actor
    activations: int  # the layer outputs of one update and of one collector tick (see of)

    @classmethod
    def of(cls, replay_bytes: int, actor: NetworkSize, critic: NetworkSize, batch: int, envs: int,
           data_parallel: bool = False) -> "MemoryNeed":
        """From the networks' sizes (algos.registry.network_sizes), the learner's batch and the
        collector's envs. Activations: twice what the layers output per sample for a forward pass (each
        layer's output and the activation function's beside it); an update keeps its forward outputs for
        backward, makes a gradient of each and runs the target critic beside them, three passes of both
        networks over the batch; the collector's tick is one pass of the actor over its envs."""
        trained = actor.params + critic.params
        learner = (actor.state + 2 * critic.state  # the networks and the target critic
                   + trained  # gradients, allocated once
                   + 2 * trained  # AdamW's first and second moments
                   + (trained if data_parallel else 0))  # the all-reduce's flat gradient buffers
        per_pass = 2
        activations = per_pass * (3 * batch * (actor.outputs_per_sample + critic.outputs_per_sample)
                                  + envs * actor.outputs_per_sample)
        return cls(replay_bytes, FLOAT_BYTES * 2 * actor.state, FLOAT_BYTES * learner, FLOAT_BYTES * actor.state,
                   FLOAT_BYTES * activations)

    @property
    def shared(self) -> int:
        """The replay ring and the weight board: shared memory (/dev/shm) on the CPU."""
        return self.replay + self.board

    @property
    def networks(self) -> int:
        return self.learner + self.collector + self.activations

    @property
    def total(self) -> int:
        return self.shared + self.networks

    def parts(self) -> str:
        acts = f", their activations {_gib(self.activations)}"
        return (f"the replay ring {_gib(self.replay)}, the weight board {_gib(self.board)}, the networks "
                f"{_gib(self.learner + self.collector)} (weights, target critic, gradients, AdamW moments, the "
                f"collector's actor){acts}")


def _gib(n: float) -> str:
    return f"{n / 2**30:.2f} GiB"


def shared_memory_free(path: str = "/dev/shm") -> int | None:
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


def host_memory_available(meminfo: str = "/proc/meminfo", cgroup: str = "/sys/fs/cgroup") -> int | None:
    """Bytes this process can still allocate: the kernel's MemAvailable, capped by a cgroup v2 limit
    (a container's); None where neither is known."""
    avail: int | None = None
    try:
        for line in Path(meminfo).read_text().splitlines():
            if line.startswith("MemAvailable:"):
                avail = int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        limit = Path(cgroup, "memory.max").read_text().strip()
        if limit != "max":
            room = int(limit) - int(Path(cgroup, "memory.current").read_text())
            avail = room if avail is None else min(avail, room)
    except (OSError, ValueError):
        pass
    return avail


@dataclass(frozen=True)
class MemoryFixes:
    """What to change when a part does not fit (each names its keys and values)."""

    replay: str
    networks: str
    activations: str


def memory_problem(device: torch.device, need: MemoryNeed, fixes: MemoryFixes) -> str | None:
    """None when `need` fits on `device` with headroom; else the problem (one line: every part's size,
    what is free, and the fix: the activations' when the rest fits without them, else the larger part's)."""
    def fix(budget: float) -> str:
        if need.total - need.activations <= budget:
            return fixes.activations
        return fixes.replay if need.shared >= need.learner + need.collector else fixes.networks

    limit = f"at most {HEADROOM:.0%} of it may go to them"
    if device.type == "cuda":
        free, total = torch.cuda.mem_get_info(device)
        if need.total <= HEADROOM * free:
            return None
        return (f"{need.parts()}: {_gib(need.total)} in all, and GPU {device} has {_gib(free)} free of "
                f"{_gib(total)}; {limit}. Fix: {fix(HEADROOM * free)}")
    shm = shared_memory_free()
    if shm is not None and need.shared > HEADROOM * shm:
        return (f"the replay ring and weight board need {_gib(need.shared)}, and /dev/shm has {_gib(shm)} free (the "
                f"CPU replay ring is shared memory); at most {HEADROOM:.0%} of it may go to replay. Fix: {fixes.replay}")
    ram = host_memory_available()  # shared memory is memory too: everything counts against it
    if ram is not None and need.total > HEADROOM * ram:
        return (f"{need.parts()}: {_gib(need.total)} in all, and this host has {_gib(ram)} available; {limit}. "
                f"Fix: {fix(HEADROOM * ram)}")
    return None
