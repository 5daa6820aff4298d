"""How the `duorl bench` commands run and hand their results over: the `duorl train` command of a
benchmark run, and JSON on stdout and, with --out, in a file."""

from __future__ import annotations

import json
from pathlib import Path
import sys
import tempfile
from typing import Any, Callable


def emit(result: dict[str, Any], out: str | None) -> None:
    """Print `result` as JSON; with `out`, also write it there (creating the folder)."""
    text = json.dumps(result, indent=2)
    print(text)
    if out:
        path = Path(out)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text + "\n", encoding="utf-8")


def train_command(algo: str, task: str, sim: str | None, log_dir: Path, iterations: int, *overrides: str) -> list[str]:
    """A benchmark arm's `duorl train`: every iteration logged, no progress line, no checkpoint before the end."""
    cmd = [sys.executable, "-m", "duorl", "train", "--algo", algo, "--task", task]
    if sim:
        cmd += ["--sim", sim]
    return cmd + [f"training.log_dir={log_dir}", f"algo.max_iterations={iterations}", "training.log_interval=1",
                  "training.progress=false", f"algo.save_interval={iterations}", *overrides]


def run_checked(check: Callable[[], None], run: Callable[[Path], dict[str, Any]], prefix: str,
                out: str | None) -> dict[str, Any] | None:
    """`check()` (a ValueError is one line on stderr and None), then `run(workdir)` in a temporary
    folder, its result emitted."""
    try:
        check()
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return None
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        result = run(Path(tmp))
    emit(result, out)
    return result
