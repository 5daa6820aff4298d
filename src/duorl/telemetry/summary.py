"""run_config.json, run_summary.json and the runtime manifest (docs/design.md §8)."""

from __future__ import annotations

import os
import platform
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

from duorl.runtime.atomic_files import write_json


def write_json_atomic(path: Path, obj: Any) -> None:
    """`obj` as JSON, replacing `path` atomically (runtime/atomic_files.py)."""
    write_json(path, obj, Path(path).name)


def package_versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {"python": platform.python_version()}
    for name in ("duorl", "torch", "numpy", "mujoco", "mujoco-warp", "warp-lang", "omegaconf"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    import torch

    out["cuda"] = torch.version.cuda
    return out


def device_record(device: Any) -> dict[str, Any]:
    import torch

    from duorl.config.devices import gpu_uuid

    rec: dict[str, Any] = {"device": str(device), "type": device.type}
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        rec["name"] = props.name
        rec["uuid"] = gpu_uuid(device)
        rec["total_memory_bytes"] = props.total_memory
    else:
        rec["name"] = platform.processor() or platform.machine()
        rec["cpu_count"] = os.cpu_count()
    return rec


def host_record() -> dict[str, Any]:
    return {"hostname": platform.node(), "platform": sys.platform, "kernel": platform.release()}
