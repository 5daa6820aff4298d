"""Memory preflight: before the replay ring is allocated, check that it fits (fail closed).

On CUDA the ring, the weight board and the learner's working set share the GPU with the collector;
on the CPU the ring lives in shared memory (/dev/shm), which is often far smaller than RAM. Each check
returns a problem (with the sizes and the fix) or None; the caller refuses the run, on every rank.
"""

from __future__ import annotations

import os

import torch

# fraction of what is free that the ring may take: the rest is for the learner, the collector's env,
# compiled kernels and graph pools
HEADROOM = 0.8


def _gib(n: float) -> str:
    return f"{n / 2**30:.2f} GiB"


def shared_memory_free(path: str = "/dev/shm") -> int | None:
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


def replay_memory_problem(device: torch.device, needed_bytes: int, fix: str) -> str | None:
    """None when `needed_bytes` (replay ring and weight board) fits on `device` with headroom."""
    if device.type == "cuda":
        free, total = torch.cuda.mem_get_info(device)
        where = f"GPU {device} has {_gib(free)} free of {_gib(total)}"
    else:
        shm = shared_memory_free()
        if shm is None:
            return None
        free, where = shm, f"/dev/shm has {_gib(shm)} free (the CPU replay ring is shared memory)"
    if needed_bytes <= HEADROOM * free:
        return None
    return (f"the replay ring and weight board need {_gib(needed_bytes)}, and {where}; at most "
            f"{HEADROOM:.0%} of it may go to replay. Fix: {fix}")
