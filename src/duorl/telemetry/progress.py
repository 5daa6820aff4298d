"""One live progress line (rich) for long training runs; plain lines when not on a terminal."""

from __future__ import annotations

import sys
import time

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn


class ProgressLine:
    def __init__(self, total: int, enabled: bool = True, description: str = "train") -> None:
        self.total = total
        self.enabled = enabled
        self._tty = sys.stderr.isatty()
        self._last_plain = 0.0
        self._progress: Progress | None = None
        if enabled and self._tty:
            self._progress = Progress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[info]}"),
                TimeElapsedColumn(),
                TimeRemainingColumn(),
                console=Console(stderr=True),
                transient=False,
            )
            self._task = self._progress.add_task(description, total=total, info="")
            self._progress.start()

    def update(self, iteration: int, info: str) -> None:
        if not self.enabled:
            return
        if self._progress is not None:
            self._progress.update(self._task, completed=iteration, info=info)
            return
        # not a terminal (CI, logs): one plain line every few seconds and at the end
        now = time.monotonic()
        if now - self._last_plain >= 5.0 or iteration >= self.total:
            self._last_plain = now
            print(f"[{iteration}/{self.total}] {info}", file=sys.stderr, flush=True)

    def close(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None
