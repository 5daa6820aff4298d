"""run_config.json, run_summary.json and the runtime manifest (docs/design.md §8)."""

from __future__ import annotations

import json
import os
import platform
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

import torch

from duorl.config.devices import gpu_uuid


def write_json_atomic(path: Path, obj: Any) -> None:
    """Temp file in the same folder, fsync, rename: a reader sees the old or the new file, never half."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=2, sort_keys=False, default=str)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def mark_failed(path: Path, message: str, part: str) -> None:
    """Record in a run summary that the run failed (`part` named), for a process that ends a run its
    owner cannot end itself (a collector ending its frozen learner). Leaves a missing or unreadable
    summary alone: the message is on stderr too."""
    try:
        summary = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    summary.update(status="failed", error=message, failed_part=part)
    write_json_atomic(path, summary)


def package_versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {"python": platform.python_version()}
    for name in ("duorl", "torch", "numpy", "mujoco", "mujoco-warp", "warp-lang", "omegaconf"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    out["cuda"] = torch.version.cuda
    return out


def device_record(device: torch.device) -> dict[str, Any]:
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
