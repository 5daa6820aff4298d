"""Atomic checkpoints (runtime/atomic_files.py): a crash, a Ctrl-C or a full disk mid-write leaves the
previous checkpoint intact and no temp file behind."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from duorl.runtime.atomic_files import atomic_write, fsync_dir

FORMAT_VERSION = 1


class CheckpointError(RuntimeError):
    pass


def to_cpu(obj: Any) -> Any:
    """`obj` with every tensor in it (nested dicts, lists, tuples) copied to host memory."""
    if isinstance(obj, torch.Tensor):
        return obj.detach().cpu()
    if isinstance(obj, dict):
        return {k: to_cpu(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(to_cpu(v) for v in obj)
    return obj


def save_checkpoint(
    directory: Path, iteration: int, payload: dict[str, Any], header: dict[str, Any], final: bool = False
) -> Path:
    """Write a checkpoint, then point latest.json at it. A failed write (a full disk) raises WriteFailed
    naming the file and the cause; the temp file is gone and the previous checkpoint stays the latest."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    name = "final.pt" if final else f"iter_{iteration:06d}.pt"
    path = directory / name
    head = {"format_version": FORMAT_VERSION, "iteration": iteration, **header}
    atomic_write(path, lambda f: torch.save({"header": head, **payload}, f), "checkpoint")
    fsync_dir(directory)
    # the pointer is itself replaced atomically, after the file it names exists
    atomic_write(directory / "latest.json", (json.dumps({"file": name, **head}) + "\n").encode(), "checkpoint pointer")
    return path


def latest_checkpoint(run_dir_or_file: Path) -> Path:
    """The checkpoint `latest.json` names (or the file itself); CheckpointError, naming the pointer,
    when it is missing, unreadable, not duorl's, or names a file that is not there."""
    p = Path(run_dir_or_file)
    if p.is_file():
        return p
    directory = p / "checkpoints" if (p / "checkpoints").is_dir() else p
    pointer = directory / "latest.json"
    if not pointer.is_file():
        raise CheckpointError(f"no checkpoint in {p}: {pointer} is missing")
    try:
        name = json.loads(pointer.read_text(encoding="utf-8"))["file"]
    except (OSError, ValueError, KeyError, TypeError) as e:  # ValueError: not UTF-8, not JSON
        raise CheckpointError(f"{pointer} is corrupt ({type(e).__name__}: {e})") from None
    if not isinstance(name, str) or Path(name).name != name:
        raise CheckpointError(f"{pointer} is corrupt (its file entry {name!r} is not a checkpoint name)")
    if not (directory / name).is_file():
        raise CheckpointError(f"{pointer} names {name}, which is missing")
    return directory / name


def checkpoint_files(run_dir_or_file: Path) -> list[str]:
    """The names of the checkpoints next to `run_dir_or_file` (for a fix that names another one)."""
    p = Path(run_dir_or_file)
    folder = p.parent if p.is_file() else (p / "checkpoints" if (p / "checkpoints").is_dir() else p)
    return sorted(x.name for x in folder.glob("*.pt"))


def load_checkpoint(path: Path, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    path = Path(path)
    try:
        data = torch.load(path, map_location=map_location, weights_only=False)
    except Exception as e:  # noqa: BLE001 - any unpickling failure means the file is unusable
        # torch's messages run on for lines: the first sentence says what is wrong
        first = (str(e).strip().splitlines() or [type(e).__name__])[0].split(". ")[0].rstrip(".")
        raise CheckpointError(f"checkpoint {path} is unreadable (truncated or corrupt?): {first}") from e
    if not isinstance(data, dict) or "header" not in data:
        raise CheckpointError(f"checkpoint {path} has no duorl header")
    version = data["header"].get("format_version")
    if version != FORMAT_VERSION:
        raise CheckpointError(f"checkpoint {path} has format version {version}; this duorl reads {FORMAT_VERSION}")
    return data
