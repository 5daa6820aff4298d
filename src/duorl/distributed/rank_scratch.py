"""Where a rank other than 0 keeps its collector's states on its host until rank 0's checkpoint gathers
them (`TMPDIR/duorl-<run id>-<starter pid>-rank<N>`), and their removal: by the launcher after its ranks
ended, by the rank's collector when its learner died, and, for a run of which every process was killed
at once (nobody left to remove anything), by the next `duorl train` or resume on that host, which
removes every such folder whose starter (the launcher or torchrun agent) is gone (issue #39)."""

from __future__ import annotations

import os
import platform
import re
import shutil
import tempfile
from pathlib import Path

from duorl.runtime.process_record import is_alive

PREFIX = "duorl-"
# duorl-<run id>-<starter pid>-rank<N>, and the launcher's elastic log folder beside them
# (duorl-<run id>-<launcher pid>-elastic-<random>, distributed/launch.py elastic_log_dir): both go when
# their starter is gone; the run id itself may start with duorl- (the launcher's did)
_NAME = re.compile(r"^duorl-(?P<run>.+)-(?P<pid>\d+)-(rank\d+|elastic-[A-Za-z0-9_]+)$")


def rank_scratch_dir(run_id: str, rank: int, starter_pid: int) -> Path:
    """The folder where rank `rank` (not 0) of run `run_id` keeps its collector's states on its host;
    `starter_pid`, the launcher or torchrun agent that started the rank, keeps two runs on one host
    apart (torchrun's run id defaults to "none")."""
    run = run_id.removeprefix(PREFIX) or "run"  # the launcher's ids are duorl-<hex>: not duorl-duorl-<hex>
    return Path(tempfile.gettempdir()) / f"{PREFIX}{run}-{starter_pid}-rank{rank}"


def remove_rank_scratch(run_id: str, ranks: range) -> None:
    """The launcher, after its ranks ended however they ended: their scratch folders go too."""
    for rank in ranks:
        shutil.rmtree(rank_scratch_dir(run_id, rank, os.getpid()), ignore_errors=True)


def _gone(pid: int) -> bool:
    return is_alive({"pid": pid, "host": platform.node()}) is False


def remove_dead_rank_scratch() -> list[Path]:
    """Remove this user's rank scratch folders (and launchers' elastic log folders) whose starter process
    is gone; the folders removed. A
    starter still alive (a run going on) keeps its folders."""
    root = Path(tempfile.gettempdir())
    removed: list[Path] = []
    try:
        entries = [e for e in os.scandir(root) if e.name.startswith(PREFIX)]
    except OSError:
        return removed
    for entry in entries:
        m = _NAME.match(entry.name)
        try:
            mine = entry.is_dir(follow_symlinks=False) and entry.stat(follow_symlinks=False).st_uid == os.getuid()
        except OSError:
            continue
        if m is None or not mine or not _gone(int(m["pid"])):
            continue
        shutil.rmtree(entry.path, ignore_errors=True)
        removed.append(Path(entry.path))
    return removed


__all__ = ["rank_scratch_dir", "remove_dead_rank_scratch", "remove_rank_scratch"]
