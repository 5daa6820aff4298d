"""Each mjlab task's EnvSpec and the registry's ids on disk, so that a learner needs no `import mjlab`.

A run's learner asks for its task's id (config validation: is it known?) and spec (the checks: the
replay's widths, the networks' sizes); both take mjlab imported (10-25 s) and the spec one env built, while
its collector imports mjlab and builds the env anyway. Both are kept under <duorl cache>/tasks/, valid
while cache_files.fingerprint() stays the same:

  mjlab-<version>-ids.json             every id of mjlab's registry, written whenever a process imports it;
  mjlab-<version>-specs/<id>-<key>.json  a task's spec (and the logged terms beyond the Task/ rows), keyed
                                       by the task id and the values of its task.* keys (a tracking
                                       task's clip, task.max_episode_steps): written whenever a spec is
                                       built (the learner's checks, `duorl tasks`) and by every env built
                                       for training (the collector's, `confirm`).

No file, another fingerprint, an unreadable file: the caller imports mjlab as it would without a cache.
The collector's env is the truth: `confirm` refuses a run whose learner read a spec the env does not have
(StaleSpecCache, naming the fields and the file) after writing the env's spec in its place.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from pathlib import Path
from typing import Any, Optional

from duorl.config.errors import InputRefused
from duorl.envs.base import EnvSpec, spec_differences, spec_from_dict, spec_to_dict
import duorl.envs.mjlab.cache_files as cache_files

REFRESH = "`duorl tasks --refresh` (or delete the file)"


class StaleSpecCache(InputRefused):
    """The spec the learner read from the cache is not the spec of the env the collector built."""


def _key(task_id: str, task_cfg: Any) -> Optional[dict[str, Any]]:
    """What a task's spec depends on besides the fingerprint: its id and every task.* key's value (None:
    a value JSON cannot hold; such a spec is not cached)."""
    key = {"task_id": task_id, "keys": dataclasses.asdict(task_cfg)}
    try:
        json.dumps(key, sort_keys=True)
    except (TypeError, ValueError):
        return None
    return key


def spec_path(fp: dict[str, Any], task_id: str, key: dict[str, Any]) -> Path:
    """The file of `task_id`'s spec under `key` (the id readable, the keys' values hashed)."""
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
    return cache_files.cache_dir() / f"mjlab-{fp['mjlab']}-specs" / f"{re.sub(r'[^A-Za-z0-9._-]', '_', task_id)}-{digest}.json"


def ids_path(fp: dict[str, Any]) -> Path:
    return cache_files.cache_dir() / f"mjlab-{fp['mjlab']}-ids.json"


def _fingerprint() -> Optional[dict[str, Any]]:
    try:
        return cache_files.fingerprint()
    except Exception:  # noqa: BLE001 - metadata it cannot read (mjlab's missing): no cache, today's path
        return None


def cached_spec(task_id: str, task_cfg: Any) -> Optional[tuple[EnvSpec, tuple[str, ...], Path]]:
    """(the spec, the logged terms beyond the Task/ rows, its file) when a valid cache holds them."""
    fp, key = _fingerprint(), _key(task_id, task_cfg)
    if fp is None or key is None:
        return None
    path = spec_path(fp, task_id, key)
    payload = cache_files.read(path, fp)
    try:
        if payload is None or payload["key"] != key:
            return None
        return spec_from_dict(payload["spec"]), tuple(str(n) for n in payload["dropped"]), path
    except (KeyError, TypeError, ValueError):
        return None  # another format: as absent


def store_spec(task_id: str, task_cfg: Any, spec: EnvSpec, dropped: tuple[str, ...]) -> None:
    """Write the spec a build found (atomically; nothing where the keys or the metadata cannot be read)."""
    fp, key = _fingerprint(), _key(task_id, task_cfg)
    if fp is None or key is None:
        return
    cache_files.write(spec_path(fp, task_id, key), fp, {"key": key, "spec": spec_to_dict(spec), "dropped": list(dropped)})


def confirm(task_id: str, task_cfg: Any, spec: EnvSpec, dropped: tuple[str, ...]) -> None:
    """The spec of an env built for training against the cached one a learner may have read: the env's
    is written in its place either way; StaleSpecCache where they differ (a cache that outlived what its
    fingerprint sees, e.g. an edit of mjlab in place, or a doctored file)."""
    cached = cached_spec(task_id, task_cfg)
    store_spec(task_id, task_cfg, spec, dropped)
    if cached is None or cached[0] == spec:
        return
    differences = "; ".join(spec_differences(cached[0], spec))
    raise StaleSpecCache(f"mjlab:{task_id}: the cached spec {cached[2]} (what the learner sized its networks and replay "
                         f"by) is not the spec of the env built now (cached != built: {differences}); the file now "
                         f"holds the built env's spec. Fix: run again; if it recurs, {REFRESH}")


def cached_ids() -> Optional[list[str]]:
    """The ids of mjlab's registry when a valid cache holds them."""
    fp = _fingerprint()
    if fp is None:
        return None
    payload = cache_files.read(ids_path(fp), fp)
    ids = payload.get("ids") if payload is not None else None
    if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
        return None
    return ids


def store_ids(ids: list[str]) -> None:
    fp = _fingerprint()
    if fp is not None:
        cache_files.write(ids_path(fp), fp, {"ids": list(ids)})
