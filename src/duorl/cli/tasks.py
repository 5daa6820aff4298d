"""`duorl tasks`: every task this installation knows, with its sizes, source and status
(envs/task_sources.py): `trainable`, or why not."""

from __future__ import annotations

import dataclasses
import json
import sys

COLUMNS = ("task", "actor obs", "critic obs", "action", "mirror", "source", "status")


def _size(v: int | None) -> str:
    return "-" if v is None else str(v)


def tasks_main(as_json: bool = False, refresh: bool = False) -> int:
    """Print the table (or JSON); exit 0 whenever the listing works, 1 only where a registered task or a
    package's registration cannot be loaded (its row says why, stderr names them)."""
    from duorl.envs.task_sources import list_tasks

    entries, notes = list_tasks(refresh)
    broken = [e for e in entries if e.error is not None]
    if as_json:
        print(json.dumps({"tasks": [dataclasses.asdict(e) for e in entries], "notes": notes}, indent=2))
    else:
        rows = [COLUMNS] + [
            (e.name, _size(e.actor_obs_dim), _size(e.critic_obs_dim), _size(e.action_dim),
             ("yes" if e.mirror else "no") if e.actor_obs_dim is not None else "-", e.source, e.status)
            for e in entries
        ]
        widths = [max(len(r[i]) for r in rows) for i in range(len(COLUMNS) - 1)]
        for r in rows:
            cells = [c.ljust(w) if i in (0, 5) else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))]
            print("  ".join(cells) + "  " + r[-1])
        for note in notes:
            print(note)
    if broken:
        print(f"error: {len(broken)} registration(s) cannot be loaded: "
              f"{', '.join(f'{e.name} ({e.source})' for e in broken)}", file=sys.stderr)
        return 1
    return 0
