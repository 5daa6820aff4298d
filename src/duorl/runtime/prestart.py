"""The collector's process, started before its learner reads the configuration: its interpreter and its
import of torch and the runtime (seconds) run beside the learner's own, rather than after them.

`duorl train` starts it first thing (cli/main.py), from the standard library alone: this module imports
nothing heavy, so the start costs the learner milliseconds. The learner then sends it, in order, its
Preparation (`prepare`: the environment the learner set since, e.g. the compile caches and CUDA MPS's pipe
directory, and what to import ahead), its EnvArgs (`build`: the checks passed) and its CollectorArgs
(`hand`: the duo's shared buffers); runtime/collector.py, collector_entry, is the other side. A run that
ends before its duo took the process (refused, failed, stopped, or a data-parallel launcher, which trains
nothing itself) `cancel`s it: it built at most its env, nothing the learner shares.

What it inherits at its start and cannot take back: the variables read when torch is imported (e.g.
OMP_NUM_THREADS), set before the command as always; every variable the learner sets later reaches it
through `prepare`, before anything in it reads them.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
from typing import Any, Callable

from duorl.runtime import orphans
from duorl.runtime.socket_dir import ensure_short_socket_dir


def _entry(conn: Any) -> None:
    """The spawned process's target: its first seconds import torch and the runtime."""
    from duorl.runtime.collector import collector_entry

    collector_entry(conn)


class PrestartedCollector:
    """A collector process started before its learner read its configuration, waiting for its messages;
    started with the protections of a plain spawn (named parent, SIGINT/SIGTERM held until its handlers)."""

    def __init__(self) -> None:
        ensure_short_socket_dir()  # the shared CPU tensors this pipe carries go over a Unix socket
        self.send_error: str | None = None  # why a message could not be sent (None: sent, or the collector gone)
        self._environ_at_start = dict(os.environ)
        ctx = multiprocessing.get_context("spawn")  # torch.multiprocessing's spawn context is this one
        child, self.conn = ctx.Pipe(duplex=False)  # (receiving end, sending end)
        self.process = ctx.Process(target=_entry, args=(child,), name="duorl-collector", daemon=True)
        with orphans.starting_collector():
            self.process.start()
        child.close()
        self.prepared = False
        self.handed = False
        self.env: Any = None  # the EnvArgs it was sent to build (None: nothing yet)

    def prepare(self, preimports: tuple[str, ...]) -> None:
        """Send it the environment's changes since its start and what to import ahead: once the
        configuration is known good and the learner has set what its collector inherits (the compile
        caches, CUDA MPS, a rank's devices). A small message: sent in line."""
        if self.prepared or self.handed:
            raise RuntimeError("a prestarted collector is prepared once, before its env's arguments")
        from duorl.runtime.collector import Preparation

        now = dict(os.environ)
        changed: dict[str, str | None] = {k: v for k, v in now.items() if self._environ_at_start.get(k) != v}
        changed.update({k: None for k in self._environ_at_start if k not in now})
        self.prepared = True
        self._send(Preparation(changed, tuple(preimports)), "its preparation")

    @property
    def control(self) -> Any:
        """The ControlBlock it reports through from its env build on (the duo's), once `build` sent it."""
        return self.env.control if self.env is not None else None

    def build(self, env_factory: Callable[[], Any], actor_factory: Callable[[Any], Any],
              device: str, torch_threads: int, fail_env_build: bool = False) -> None:
        """Send it what its env is built from (and allocate the duo's control block, which it reports its
        phase and a failure through): only once the run's checks passed (nothing is built before) and, with
        peers, every rank agreed on them. A small message: sent in line."""
        if self.env is not None or self.handed or not self.prepared:
            raise RuntimeError("a prestarted collector is sent its env's arguments once, after its preparation "
                               "and before its duo takes it")
        from duorl.runtime.collector import EnvArgs
        from duorl.runtime.control import ControlBlock

        self.env = EnvArgs(env_factory, actor_factory, device, torch_threads, ControlBlock.allocate(), fail_env_build)
        self._send(self.env, "its env's arguments")

    def began_building(self) -> bool:
        """It read its env's arguments (it records its pid then): from here it is the duo's collector, alive
        or not, and its death is the run's failure rather than a reason to spawn another."""
        from duorl.runtime.control import COLLECTOR_PID

        control = self.control
        return control is not None and control.get(COLLECTOR_PID) == self.process.pid

    def hand(self, args: Any) -> Any:
        """Send the collector its CollectorArgs (CUDA tensors as IPC handles, CPU ones as shared memory),
        from a thread: the collector reads them once its env is built, and a message larger than the pipe's
        buffer (a resumed env's state) must not hold the learner, which goes on to capture meanwhile. A
        collector that dies before reading them is the learner's liveness check's to report."""
        def send() -> None:
            try:
                self._send(args, "its arguments")
            finally:
                self.conn.close()

        self._sender = threading.Thread(target=send, name="duorl-collector-args", daemon=True)
        self._sender.start()
        self.handed = True
        return self.process

    def _send(self, message: Any, what: str) -> None:
        try:
            self.conn.send(message)
        except (BrokenPipeError, ConnectionResetError):  # it is gone: the duo's liveness check names it
            pass
        except Exception as e:  # noqa: BLE001 - the message itself failed: the duo names this as the cause
            self.send_error = self.send_error or f"the learner could not send the collector {what}: {e!r}"

    def cancel(self) -> None:
        """End it unless its duo took it (it built at most its env: nothing the learner shares)."""
        if self.handed:
            return
        self.handed = True
        self.conn.close()
        if self.process.is_alive():
            self.process.kill()
        self.process.join(timeout=10)
