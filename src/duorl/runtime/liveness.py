"""The learner's side of liveness (docs/design.md §3): its phase follows its calls into the other ranks and
into the run directory, and a collector is never left behind.

The wrappers only mark phases (runtime/heartbeat.py): a call into the other ranks may wait for a slow
peer rank for minutes, a checkpoint may write gigabytes, so both are long phases for the collector
that watches this learner.
"""

from __future__ import annotations

from typing import Any

from duorl.runtime.heartbeat import Heartbeat


class PhasedCoordinator:
    """A RankCoordinator whose calls run in the learner phase 'waiting for the other ranks'."""

    def __init__(self, inner: Any, beat: Heartbeat) -> None:
        self.inner = inner
        self._beat = beat

    def __getattr__(self, name: str) -> Any:  # rank, world_size, local_stops, anything else
        return getattr(self.inner, name)

    def agree_stop(self, stop_requested: bool, wall_limited: bool) -> Any:
        self._beat.phase("waiting for the other ranks")
        return self.inner.agree_stop(stop_requested, wall_limited)

    def barrier(self, what: str) -> None:
        self._beat.phase("waiting for the other ranks")
        self.inner.barrier(what)


class PhasedReporter:
    """A Reporter whose checkpoints run in the phase 'writing a checkpoint' and the rest in 'logging'
    (under data parallel both are collectives with the other ranks)."""

    def __init__(self, inner: Any, beat: Heartbeat) -> None:
        self.inner = inner
        self._beat = beat

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def started(self, manifest: dict[str, Any]) -> None:
        self._beat.phase("logging")
        self.inner.started(manifest)

    def log(self, iteration: int, env_steps: int, wall_s: float, metrics: dict[str, float]) -> None:
        self._beat.phase("logging")
        self.inner.log(iteration, env_steps, wall_s, metrics)

    def checkpoint(self, iteration: int, env_steps: int, final: bool, runtime_state: dict[str, Any]) -> None:
        self._beat.phase("writing a checkpoint")
        self.inner.checkpoint(iteration, env_steps, final, runtime_state)


def shutdown_collector(process: Any, stalled: bool, grace_s: float = 30.0) -> None:
    """Wait for a collector told to stop (it leaves its state first), then make sure it is gone. A
    stalled one (its heartbeat stopped: SIGSTOP, a deadlock, a hung GPU) is killed at once: it would
    never leave by itself, and SIGKILL is the one signal a stopped process obeys."""
    if stalled:
        process.kill()
        process.join(timeout=5)
        return
    process.join(timeout=grace_s)
    if process.is_alive():
        process.terminate()
        process.join(timeout=5)
    if process.is_alive():
        process.kill()
        process.join(timeout=5)
