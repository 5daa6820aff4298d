"""How every `duorl bench` command hands its result over: JSON on stdout and, with --out, in a file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def emit(result: dict[str, Any], out: str | None) -> None:
    """Print `result` as JSON; with `out`, also write it there (creating the folder)."""
    text = json.dumps(result, indent=2)
    print(text)
    if out:
        path = Path(out)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text + "\n", encoding="utf-8")
