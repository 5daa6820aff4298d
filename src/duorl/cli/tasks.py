"""`duorl tasks`: every task this installation can train, with its sizes and source (envs/task_sources.py)."""

from __future__ import annotations

import dataclasses
import json
import sys

COLUMNS = ("task", "actor obs", "critic obs", "action", "mirror", "source")


def tasks_main(as_json: bool = False) -> int:
    """Print the table (or JSON); exit 1 if some task cannot be loaded (its row says why)."""
    from duorl.envs.task_sources import list_tasks

    entries, notes = list_tasks()
    broken = [e for e in entries if e.error is not None]
    if as_json:
        print(json.dumps({"tasks": [dataclasses.asdict(e) for e in entries], "notes": notes}, indent=2))
        return 1 if broken else 0
    rows = [COLUMNS] + [
        (e.name, str(e.actor_obs_dim), str(e.critic_obs_dim), str(e.action_dim), "yes" if e.mirror else "no", e.source)
        if e.error is None else (e.name, "-", "-", "-", "-", f"{e.source}: cannot be loaded: {e.error}")
        for e in entries
    ]
    widths = [max(len(r[i]) for r in rows) for i in range(len(COLUMNS) - 1)]
    for r in rows:
        print("  ".join(c.ljust(w) if i < 1 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))) + "  " + r[-1])
    for note in notes:
        print(note)
    if broken:
        print(f"error: {len(broken)} task(s) cannot be loaded: {', '.join(e.name for e in broken)}", file=sys.stderr)
        return 1
    return 0
