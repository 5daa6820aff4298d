"""The one rule for duorl's caches of what mjlab says of its tasks, and their files, read without mjlab.

`duorl tasks`' rows (listing.py), each task's EnvSpec and the registry's ids (spec_cache.py) take mjlab
imported (10-25 s) and often a task built; they are kept under <duorl cache>/tasks/ as JSON files that
each carry the `fingerprint()` they were made under, and are valid while it stays the same: mjlab's
version, duorl's, the modification times of duorl's own modules that read a task (a checkout's edit), and
the entry points of `mjlab.tasks` (their names, values, distributions' versions and the modification
times of their top-level modules). A file that is absent, unreadable, of another format or fingerprint
reads as absent: the caller takes the slow path and writes it again (atomically; a file that cannot be
written is only slower next time).
"""

from __future__ import annotations

import importlib.util
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Optional

from duorl.envs.mjlab.loader import ENTRY_POINT_GROUP

CACHE_FORMAT = 2
# duorl's modules whose code shapes what the caches hold (a row, a spec): an edit in a checkout makes them stale
_DUORL_MODULES = ("actions", "family", "listing", "loader", "metrics", "spec", "vec_env")


def fingerprint() -> dict[str, Any]:
    """What the cached rows and specs depend on, read without importing mjlab (importlib.metadata and
    os.stat: milliseconds)."""
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
        dist = getattr(ep, "dist", None)
        packages.append([ep.name, ep.value, dist.name if dist else "?", dist.version if dist else "?", origin,
                         _mtime(origin)])
    here = Path(__file__).parent
    modules = {m: _mtime(str(here / f"{m}.py")) for m in _DUORL_MODULES}
    return {"format": CACHE_FORMAT, "mjlab": version("mjlab"), "duorl": duorl.__version__, "duorl_modules": modules,
            "packages": sorted(packages)}


def _mtime(path: Optional[str]) -> Optional[float]:
    return os.stat(path).st_mtime if path and os.path.exists(path) else None


def cache_dir() -> Path:
    """<duorl cache>/tasks: where the mjlab caches live (`duorl tasks --refresh` rebuilds them; deleting
    them is always safe)."""
    from duorl.gpu.compiling import duorl_cache_root

    return duorl_cache_root() / "tasks"


def read(path: Path, fp: dict[str, Any]) -> Optional[dict[str, Any]]:
    """The payload of `path` written under `fp`; None when it is absent, unreadable or of another fingerprint."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict) or data.get("fingerprint") != fp or not isinstance(data.get("payload"), dict):
            return None
        return data["payload"]
    except (OSError, ValueError, TypeError):
        return None


def write(path: Path, fp: dict[str, Any], payload: dict[str, Any]) -> None:
    """Atomically (a reader sees the old file or the new one); an OSError is swallowed: a cache that cannot
    be written is only slower next time."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False, suffix=".tmp", encoding="utf-8") as f:
            json.dump({"fingerprint": fp, "payload": payload}, f, indent=1)
        os.replace(f.name, path)
    except OSError:
        pass
