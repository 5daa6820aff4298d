"""Device entries of `training.devices` and the one device a (single-rank) run uses.

Accepted entries: "cpu", a CUDA ordinal (0 or "0"), "cuda:N", a GPU UUID ("GPU-...") or a MIG id
("MIG-..."). CUDA is probed lazily (importing torch costs about a second and `--help` should not).
"""

from __future__ import annotations

import os
import re
import sys
from typing import Any

from duorl.config.errors import ConfigError
from duorl.config.schema import DEVICES_ALLOWED as ALLOWED
from duorl.config.schema import Config

KEY = "training.devices"
# set in a data-parallel rank once it narrowed CUDA_VISIBLE_DEVICES to its entry (distributed.launch): the
# torch device this process uses
RANK_DEVICE_ENV = "DUORL_RANK_DEVICE"
_CUDA_N = re.compile(r"^cuda:(\d+)$")


def cuda_device_count() -> int:
    """Visible CUDA devices (0 without CUDA). Counted through NVML where it can be, so that asking does
    not initialise CUDA (a data-parallel rank still narrows CUDA_VISIBLE_DEVICES afterwards). Tests
    monkeypatch this to fake a GPU host. A Linux host without the NVIDIA driver's device nodes has
    none, and is answered without importing torch (a refused config, `--help`: under a second)."""
    if sys.platform.startswith("linux") and not any(os.path.exists(p) for p in ("/dev/nvidiactl", "/dev/dxg")):
        return 0
    import torch

    return torch.cuda.device_count()


def gpu_uuid(device: Any) -> str | None:
    """'GPU-<uuid>' of a CUDA device (what nvidia-smi -L shows and CUDA_VISIBLE_DEVICES accepts): the
    one name of a physical GPU that every process agrees on, whatever ordinal it sees; None for the CPU."""
    import torch

    d = torch.device(device)
    if d.type != "cuda":
        return None
    uuid = getattr(torch.cuda.get_device_properties(d.index if d.index is not None else 0), "uuid", None)
    return f"GPU-{uuid}" if uuid is not None else None


def cuda_uuids() -> list[str]:
    """'GPU-<uuid>' of each visible device, in ordinal order."""
    return [u for i in range(cuda_device_count()) if (u := gpu_uuid(f"cuda:{i}")) is not None]


def entry_kind(entry: Any) -> str | None:
    """'cpu', 'ordinal', 'uuid' or 'mig'; None for anything else."""
    if isinstance(entry, bool):  # bool is an int subclass; `true` is not a device
        return None
    if isinstance(entry, int):
        return "ordinal" if entry >= 0 else None
    if not isinstance(entry, str):
        return None
    if entry == "cpu":
        return "cpu"
    if entry.isdigit() or _CUDA_N.match(entry):
        return "ordinal"
    if entry.startswith("GPU-") and len(entry) > 4:
        return "uuid"
    if entry.startswith("MIG-") and len(entry) > 4:
        return "mig"
    return None


def _ordinal(entry: int | str) -> int:
    if isinstance(entry, int):
        return entry
    m = _CUDA_N.match(entry)
    return int(m.group(1)) if m else int(entry)


def resolve_device(cfg: Config) -> str:
    """The torch device of this process: 'cpu' or 'cuda:N'.

    A data-parallel rank uses the device it narrowed itself to (RANK_DEVICE_ENV). Otherwise
    `training.devices: null` picks cuda:0 when the sim can use CUDA (mjwarp) and a GPU is visible,
    else the CPU; mujoco alone runs on the CPU, but an explicit CUDA entry with mujoco is honoured
    (learner on the GPU, physics on CPU threads). Raises ConfigError for an entry that names no
    visible device. Assumes `validate` has checked the list's shape.
    """
    ranked = os.environ.get(RANK_DEVICE_ENV)
    if ranked:
        return ranked
    devices = cfg.training.devices
    if devices is None:
        if cfg.sim.name == "mjwarp" and cuda_device_count() > 0:
            return "cuda:0"
        return "cpu"
    return resolve_entry(cfg, devices[0])


def resolve_entry(cfg: Config, entry: Any, count: int | None = None) -> str:
    """The torch device one entry of training.devices names in this process (ConfigError if none).
    `count`: the visible CUDA devices, when the caller counted them (default: cuda_device_count())."""
    devices = cfg.training.devices
    kind = entry_kind(entry)
    if kind == "cpu":
        return "cpu"
    count = cuda_device_count() if count is None else count
    if count == 0:
        raise ConfigError(
            KEY, devices, "no CUDA device visible on this machine", "[cpu] here",
            f"use {KEY}=[cpu] (or run on a GPU machine)",
        )
    if kind == "ordinal":
        n = _ordinal(entry)
        if n >= count:
            raise ConfigError(
                KEY, devices, f"only {count} CUDA device(s) visible (cuda:0..cuda:{count - 1})",
                f"ordinals 0..{count - 1}", f"pick one of them, e.g. {KEY}=[0]",
            )
        return f"cuda:{n}"
    # A UUID or MIG id: once CUDA_VISIBLE_DEVICES is narrowed to it, it is cuda:0 (docs/design.md §4).
    if os.environ.get("CUDA_VISIBLE_DEVICES", "").strip() == entry:
        return "cuda:0"
    if kind == "uuid":
        uuids = cuda_uuids()
        if entry in uuids:
            return f"cuda:{uuids.index(entry)}"
        raise ConfigError(
            KEY, devices, "no visible GPU has this UUID", "UUIDs listed by `nvidia-smi -L`",
            "copy a UUID from `nvidia-smi -L` (and check CUDA_VISIBLE_DEVICES)",
        )
    raise ConfigError(
        KEY, devices, "a MIG instance is only reachable once CUDA_VISIBLE_DEVICES selects it",
        "a MIG id equal to CUDA_VISIBLE_DEVICES",
        f"run with CUDA_VISIBLE_DEVICES={entry} (the id from `nvidia-smi -L`)",
    )


def check_device_flag(value: str | None, flag: str = "--device") -> None:
    """A benchmark's `--device`: cpu, cuda or cuda:N naming a visible device (ConfigError otherwise),
    checked before anything is built (a CPU build of torch has no CUDA at all)."""
    if value is None or value == "cpu":
        return
    allowed = "cpu, cuda, cuda:N"
    if value != "cuda" and not _CUDA_N.match(value):
        raise ConfigError(flag, value, "not a device", allowed, f"e.g. {flag} cuda:0 or {flag} cpu")
    import torch

    count = cuda_device_count()
    if count == 0:
        build = "a CPU build of torch" if torch.version.cuda is None else "no CUDA device visible"
        raise ConfigError(flag, value, f"no CUDA device here ({build}: torch {torch.__version__})", "cpu here",
                          f"use {flag} cpu, or run on a GPU machine with a CUDA build of torch")
    m = _CUDA_N.match(value)
    if m and int(m.group(1)) >= count:
        raise ConfigError(flag, value, f"only {count} CUDA device(s) visible", f"cuda:0..cuda:{count - 1}",
                          f"e.g. {flag} cuda:0")
