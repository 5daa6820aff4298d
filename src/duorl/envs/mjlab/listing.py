"""`duorl tasks`' rows of mjlab's registry: each task's sizes and status, cached per mjlab version.

A row's status is `trainable`, or why duorl cannot train the task as it stands: `needs task.<key>` (a
family's required key, e.g. a tracking task's clip: no sizes without it), `camera observations` (or
another NotTrainable reason from the configuration), or, for a package on mjlab's `mjlab.tasks` entry
points that fails to import, its error (the one case a listing calls broken). The sizes need mjlab
imported (10-25 s here) and each task built once with one env (up to seconds each; each build also
leaves the task's spec in spec_cache.py's cache): the rows are kept in <duorl cache>/tasks/mjlab-<version>.json,
valid while cache_files.fingerprint() stays the same; `refresh` rebuilds them (and the specs).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import duorl.envs.mjlab.cache_files as cache_files
from duorl.envs.mjlab.cache_files import cache_dir, fingerprint
from duorl.envs.mjlab.family import PREFIX, NotTrainable, keys_of, needs

TRAINABLE = "trainable"


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


def cache_path(fp: dict[str, Any]) -> Path:
    return cache_dir() / f"mjlab-{fp['mjlab']}.json"


def _read_cache(path: Path, fp: dict[str, Any]) -> Optional[list[MjlabRow]]:
    payload = cache_files.read(path, fp)
    try:
        return None if payload is None else [MjlabRow(**row) for row in payload["rows"]]
    except (TypeError, KeyError):
        return None  # not this format: rebuilt


def _write_cache(path: Path, fp: dict[str, Any], rows: list[MjlabRow]) -> None:
    cache_files.write(path, fp, {"rows": [dataclasses.asdict(r) for r in rows]})


def _row(task_id: str, source: str) -> MjlabRow:
    from duorl.envs.mjlab.spec import task_spec

    name = PREFIX + task_id
    missing = needs(task_id)
    if missing:
        return MjlabRow(name, source, "needs " + ", ".join(f"task.{k}" for k in missing))
    try:
        spec = task_spec(task_id, keys_of(task_id)(name=name), note=False, cached=False)
    except NotTrainable as e:
        return MjlabRow(name, source, e.status)
    except Exception as e:  # noqa: BLE001 - a task that does not build: its row says why (mjlab's, not a package's)
        return MjlabRow(name, source, f"does not build: {_first_line(e)}")
    return MjlabRow(name, source, TRAINABLE, spec.actor_obs_dim, spec.critic_obs_dim, spec.action_dim)


def build_rows() -> list[MjlabRow]:
    """Every task of mjlab's registry, and a row per package whose entry point fails to import."""
    from duorl.envs.mjlab.loader import registry, task_packages
    from duorl.envs.mjlab.quiet import quiet_libraries
    from duorl.envs.mjlab.spec_cache import store_ids

    with quiet_libraries():
        reg = registry()
        packages = task_packages()
        owner = {i: f"mjlab entry point {p.dist}" for p in packages for i in p.task_ids}
        rows = [_row(i, owner.get(i, "mjlab")) for i in reg.list_tasks()]
    store_ids(list(reg.list_tasks()))  # what a run's id check reads without mjlab (spec_cache.py)
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
