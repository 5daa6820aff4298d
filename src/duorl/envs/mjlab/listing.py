"""`duorl tasks`' rows of mjlab's registry: each task's sizes and status, cached per mjlab version.

A row's status is `trainable`, or why duorl cannot train the task as it stands: `needs task.<key>` (a
family's required key, e.g. a tracking task's clip: no sizes without it), `camera observations` (or
another NotTrainable reason from the configuration), or, for a package on mjlab's `mjlab.tasks` entry
points that fails to import, its error (the one case a listing calls broken). The sizes need mjlab
imported (10-25 s here) and each task built once with one env (up to seconds each): the rows are kept
in <duorl cache>/tasks/mjlab-<version>.json, valid while mjlab's version, duorl's, and the entry points
of `mjlab.tasks` (their names, values, distributions' versions and the modification times of their
top-level modules) stay the same; `refresh` rebuilds them.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from duorl.envs.mjlab.family import PREFIX, NotTrainable, keys_of, needs
from duorl.envs.mjlab.loader import ENTRY_POINT_GROUP

TRAINABLE = "trainable"
CACHE_FORMAT = 1


@dataclass(frozen=True)
class MjlabRow:
    """One mjlab row of `duorl tasks`: `error` set only where a package's registration is broken."""

    name: str
    source: str
    status: str
    actor_obs_dim: Optional[int] = None
    critic_obs_dim: Optional[int] = None
    action_dim: Optional[int] = None
    error: Optional[str] = None


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return f"{type(e).__name__}: {text.splitlines()[0] if text else '(no message)'}"


def fingerprint() -> dict[str, Any]:
    """What the cached rows depend on, read without importing mjlab (importlib.metadata: milliseconds)."""
    from importlib.metadata import entry_points, version

    import duorl

    packages = []
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        top = ep.value.split(":")[0].split(".")[0]
        try:
            spec = importlib.util.find_spec(top)
            origin = spec.origin if spec is not None else None
        except (ImportError, ValueError):
            origin = None
        mtime = os.stat(origin).st_mtime if origin and os.path.exists(origin) else None
        dist = getattr(ep, "dist", None)
        packages.append([ep.name, ep.value, dist.name if dist else "?", dist.version if dist else "?", origin, mtime])
    return {"format": CACHE_FORMAT, "mjlab": version("mjlab"), "duorl": duorl.__version__, "packages": sorted(packages)}


def cache_path(fp: dict[str, Any]) -> Path:
    from duorl.gpu.compiling import duorl_cache_root

    return duorl_cache_root() / "tasks" / f"mjlab-{fp['mjlab']}.json"


def _read_cache(path: Path, fp: dict[str, Any]) -> Optional[list[MjlabRow]]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("fingerprint") != fp:
            return None
        return [MjlabRow(**row) for row in data["rows"]]
    except (OSError, ValueError, TypeError, KeyError):
        return None  # absent, or not this format: rebuilt


def _write_cache(path: Path, fp: dict[str, Any], rows: list[MjlabRow]) -> None:
    """Atomically; a cache that cannot be written is only slower next time."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False, suffix=".tmp", encoding="utf-8") as f:
            json.dump({"fingerprint": fp, "rows": [dataclasses.asdict(r) for r in rows]}, f, indent=1)
        os.replace(f.name, path)
    except OSError:
        pass


def _row(task_id: str, source: str) -> MjlabRow:
    from duorl.envs.mjlab.spec import task_spec

    name = PREFIX + task_id
    missing = needs(task_id)
    if missing:
        return MjlabRow(name, source, "needs " + ", ".join(f"task.{k}" for k in missing))
    try:
        spec = task_spec(task_id, keys_of(task_id)(name=name), note=False)
    except NotTrainable as e:
        return MjlabRow(name, source, e.status)
    except Exception as e:  # noqa: BLE001 - a task that does not build: its row says why (mjlab's, not a package's)
        return MjlabRow(name, source, f"does not build: {_first_line(e)}")
    return MjlabRow(name, source, TRAINABLE, spec.actor_obs_dim, spec.critic_obs_dim, spec.action_dim)


def build_rows() -> list[MjlabRow]:
    """Every task of mjlab's registry, and a row per package whose entry point fails to import."""
    from duorl.envs.mjlab.loader import registry, task_packages
    from duorl.envs.mjlab.quiet import quiet_libraries

    with quiet_libraries():
        reg = registry()
        packages = task_packages()
        owner = {i: f"mjlab entry point {p.dist}" for p in packages for i in p.task_ids}
        rows = [_row(i, owner.get(i, "mjlab")) for i in reg.list_tasks()]
    for p in packages:
        if p.error is not None:
            problem = f"the mjlab.tasks entry point {p.name} = {p.value} fails to import: {p.error}"
            rows.append(MjlabRow(f"{PREFIX}{p.name}", f"mjlab entry point {p.dist}", problem, error=problem))
    return rows


def mjlab_rows(refresh: bool = False) -> tuple[list[MjlabRow], str]:
    """(the rows, where they came from: "cache <path>" or "built"); InputRefused when mjlab is missing."""
    fp = fingerprint()
    path = cache_path(fp)
    if not refresh:
        cached = _read_cache(path, fp)
        if cached is not None:
            return cached, f"cache {path}"
    rows = build_rows()
    _write_cache(path, fp, rows)
    return rows, "built"
