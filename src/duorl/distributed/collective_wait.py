"""The right rank blamed when a collective waits (docs/design.md §3 liveness, §4).

A learner blocked in a collective because a peer rank froze (a gradient all-reduce, a checkpoint's
gather) would stop beating, and its own collector would then end it as if it had frozen: the healthy
rank blamed, at the same moment as the frozen one. Instead, once a host-side collective (gloo: the
control and start-up groups, CPU ranks' gradients) lasts `ENTER_S`, a watcher thread puts the learner
in the phase 'waiting for the other ranks' (a long phase for its collector) and beats for it, and
every `report_every_s` says whom it waits for. A frozen process beats for nobody: SIGSTOP stops the
watcher too.

Whom: every rank's learner publishes its phase and heartbeat age into the elastic agent's store once
a second (a thread: nothing on the training loop's path); a waiting rank reads them and names the
rank whose heartbeat stopped, once ("waiting for rank 1 (vm), whose learner (pid 4242) stopped beating
31 s ago while all-reducing the critic gradients"). The frozen rank's own collector names its last
phase and ends it within its stall bound, and the launcher then names that rank first; the waiting
ranks only echo its loss.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import threading
import time
from typing import Any, Iterator

# a collective that takes longer than this is waiting for a peer, not computing
ENTER_S = 0.5
PUBLISH_EVERY_S = 1.0


class RankBeats:
    """This rank's learner heartbeat in the agent's store, and the other ranks' as read from it."""

    def __init__(self, renv: Any, host: str) -> None:
        self.renv, self.host = renv, host
        self._store: Any = None  # read from the main thread
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, beat: Any, timeout_s: float) -> None:
        """Publish `beat` (runtime.heartbeat.Heartbeat: current, age_s()) until the process ends."""
        from duorl.distributed.agent_store import agent_store

        self._store = agent_store(self.renv, timeout_s, "beats")
        if self._store is None or self._thread is not None:
            return
        publisher = agent_store(self.renv, timeout_s, "beats")  # a client of its own: one per thread
        pid = os.getpid()

        def publish() -> None:
            # at once, then every PUBLISH_EVERY_S: a rank frozen within a second of its start (a short run's
            # first iterations) had never published, and its waiting peers could name nobody
            while True:
                try:
                    publisher.set(f"rank{self.renv.rank}", json.dumps({
                        "phase": beat.current, "age_s": beat.age_s(), "wall": time.time(), "pid": pid,
                        "host": self.host}))
                except Exception:  # noqa: BLE001 - the store is gone: the run is ending
                    return
                if self._stop.wait(PUBLISH_EVERY_S):
                    return

        self._thread = threading.Thread(target=publish, name="duorl-rank-beats", daemon=True)
        self._thread.start()

    def late(self) -> tuple[int, str] | None:
        """The rank whose learner's heartbeat is the oldest and more than a few seconds old, and it in words.
        Its phase is not named: the store holds the phase of up to a second before it stopped, while its
        own collector reads the last one and names it (runtime/heartbeat.py)."""
        if self._store is None:
            return None
        now = time.time()
        rows = []
        for r in range(self.renv.world_size):
            if r == self.renv.rank:
                continue
            try:
                if not self._store.check([f"rank{r}"]):
                    continue
                v = json.loads(self._store.get(f"rank{r}"))
            except Exception:  # noqa: BLE001
                continue
            rows.append((now - v["wall"] + v["age_s"], r, v))
        late = sorted((row for row in rows if row[0] > 3 * PUBLISH_EVERY_S), reverse=True)
        if not late:
            return None
        age, r, v = late[0]
        return r, f"rank {r} ({v['host']}), whose learner (pid {v['pid']}) stopped beating {age:.0f} s ago"

    def stop(self) -> None:
        self._stop.set()


class CollectiveWatch:
    """How a rank's learner waits for a host-side collective (see the module docstring): the main
    thread marks the wait (`waiting`), a watcher thread beats for it once it lasts, and reports."""

    def __init__(self, rank: int, host: str, report_every_s: float, beats: RankBeats | None = None) -> None:
        self.rank, self.host = rank, host
        self.report_every_s = report_every_s
        self.beats = beats
        self.beat: Any = None  # the learner's Heartbeat, attached by the duo
        self._lock = threading.Lock()
        self._current: list[Any] | None = None  # [what, start, next report] of the wait in progress
        self._previous: str | None = None  # the phase a lasting wait replaced
        self._named: int | None = None  # the late rank this wait named already (it is named once)
        self._stop = threading.Event()

    def attach(self, beat: Any, timeout_s: float) -> None:
        if self.beat is not None:
            return
        self.beat = beat
        if self.beats is not None:
            self.beats.start(beat, timeout_s)
        threading.Thread(target=self._watch, name="duorl-collective-watch", daemon=True).start()

    @contextlib.contextmanager
    def waiting(self, what: str) -> Iterator[None]:
        """Around a blocking collective (the GIL is released while it waits)."""
        if self.beat is None:
            yield
            return
        now = time.monotonic()
        with self._lock:
            self._current = [what, now, now + self.report_every_s]
        try:
            yield
        finally:
            with self._lock:
                self._current = None
                self._named = None
                if self._previous is not None:
                    self.beat.phase(self._previous)
                    self._previous = None

    def _watch(self) -> None:
        while not self._stop.wait(0.2):
            report = None
            with self._lock:
                if self._current is None:
                    continue
                what, start, next_report = self._current
                now = time.monotonic()
                if now - start < ENTER_S:
                    continue
                if self._previous is None:
                    self._previous = self.beat.current
                    self.beat.phase("waiting for the other ranks")
                self.beat.beat()
                if now >= next_report:
                    self._current[2] = now + self.report_every_s
                    report = (what, now - start)
            if report is not None:
                late = self.beats.late() if self.beats is not None else None
                if late is not None and late[0] == self._named:
                    continue  # that rank was named: its own collector says the rest, once
                self._named = late[0] if late is not None else None
                whom = f"waiting for {late[1]}" if late else "waiting for the other ranks"
                print(f"duorl: rank {self.rank} ({self.host}): the learner (pid {os.getpid()}) is {whom} while "
                      f"{report[0]}, {report[1]:.0f} s so far", file=sys.stderr, flush=True)

    def stop(self) -> None:
        self._stop.set()
        if self.beats is not None:
            self.beats.stop()
