"""The process groups of one rank and the host-side collectives the runtime agrees through.

Three groups, all over every rank:
- `data`: the default group, NCCL on CUDA and gloo on the CPU: gradients and running statistics
  (device tensors; captured in the learner's CUDA graph);
- `control`: gloo, host-side agreement inside the loop (stop at this boundary, metric rows), bounded
  by `training.dp_timeout_s`;
- `startup`: gloo, for what may legitimately take long on one rank: building envs, compiling and
  capturing, writing a checkpoint; bounded by `training.dp_startup_timeout_s`.
Every collective that fails because a peer is gone raises `RankLost`, which ends this rank without
further collectives (the launcher has already seen the peer fail and stops everyone).
"""

from __future__ import annotations

import datetime
import platform
import pickle
from dataclasses import dataclass, field
from typing import Any, Callable, NoReturn, TypeVar

import torch
import torch.distributed as dist

from duorl.config.errors import InputRefused
from duorl.distributed.launch import RankEnv
from duorl.distributed.roll_call import RankRefusal
from duorl.runtime.coordination import RankLost

T = TypeVar("T")


@dataclass
class DistContext:
    env: RankEnv
    backend: str
    device: torch.device
    data: Any = None
    control: Any = None
    startup: Any = None
    host: str = field(default_factory=platform.node)
    # how this rank's learner waits in a collective (distributed/collective_wait.py; None: it blocks)
    watch: Any = None

    @property
    def rank(self) -> int:
        return self.env.rank

    @property
    def world_size(self) -> int:
        return self.env.world_size

    @classmethod
    def initialize(cls, env: RankEnv, device: torch.device, timeout_s: float, startup_timeout_s: float) -> "DistContext":
        """Join the run's process groups (env:// rendezvous: torchrun's MASTER_ADDR/PORT). Joining waits
        for every rank: one that fails first (its record on the failure board) ends this one at once, with
        that rank's message; one that cannot join says why and leaves, exit 1 (distributed/failure_board.py)."""
        from duorl.distributed import failure_board

        backend = "nccl" if device.type == "cuda" else "gloo"
        kwargs: dict[str, Any] = {}
        if device.type == "cuda":
            # binds the NCCL communicator to this rank's one GPU up front (no lazy guess later)
            kwargs["device_id"] = device
        watching = failure_board.watch(env, lambda failure: failure_board.leave_for(failure, env))
        try:
            dist.init_process_group(backend, timeout=datetime.timedelta(seconds=startup_timeout_s), **kwargs)
            ctx = cls(env=env, backend=backend, device=device)
            ctx.data = dist.group.WORLD
            ctx.startup = dist.new_group(backend="gloo", timeout=datetime.timedelta(seconds=startup_timeout_s))
            ctx.control = dist.new_group(backend="gloo", timeout=datetime.timedelta(seconds=timeout_s))
        except Exception as e:  # noqa: BLE001 - any backend's error: named, recorded, and this rank leaves
            _cannot_join(env, backend, e)
        finally:
            watching.set()
        return ctx

    def destroy(self) -> None:
        """Leave the process groups (after every CUDA graph holding NCCL work was released)."""
        if dist.is_initialized():
            dist.destroy_process_group()

    # ------------------------------------------------------------------ host-side collectives

    def _call(self, what: str, fn: Callable[[], T]) -> T:
        try:
            if self.watch is None:
                return fn()
            with self.watch.waiting(what):
                return fn()
        except (RuntimeError, OSError, ValueError, pickle.UnpicklingError) as e:
            if isinstance(e, RankLost):
                raise
            text = backend_cause(e)
            # no rank prefix: whoever reports it names this rank once (cli/rank_exit.py)
            raise RankLost(f"lost a peer rank while {what}: {text}") from e

    def all_gather(self, obj: Any, what: str, group: str = "control") -> list[Any]:
        """Every rank's `obj`, in rank order (picklable host data)."""
        out: list[Any] = [None] * self.world_size
        self._call(what, lambda: dist.all_gather_object(out, obj, group=getattr(self, group)))
        return out

    def all_gather_tensor(self, t: torch.Tensor, what: str, group: str = "control") -> torch.Tensor:
        """Every rank's CPU tensor `t` (same shape and dtype on every rank), stacked in rank order."""
        out = [torch.empty_like(t) for _ in range(self.world_size)]
        self._call(what, lambda: dist.all_gather(out, t, group=getattr(self, group)))
        return torch.stack(out)

    def broadcast(self, obj: Any, what: str, src: int = 0, group: str = "startup") -> Any:
        box = [obj if self.rank == src else None]
        self._call(what, lambda: dist.broadcast_object_list(box, src=src, group=getattr(self, group)))
        return box[0]

    def gather_to_zero(self, obj: Any, what: str, group: str = "startup") -> list[Any] | None:
        out: list[Any] | None = [None] * self.world_size if self.rank == 0 else None
        self._call(what, lambda: dist.gather_object(obj, out, dst=0, group=getattr(self, group)))
        return out

    def scatter_from_zero(self, objs: list[Any] | None, what: str, group: str = "startup") -> Any:
        box: list[Any] = [None]
        self._call(what, lambda: dist.scatter_object_list(box, objs if self.rank == 0 else None, src=0,
                                                          group=getattr(self, group)))
        return box[0]

    def start_any_true(self, flags: list[bool], what: str, group: str = "control") -> "PendingFlags":
        """The element-wise OR of boolean flags over every rank (one small gloo all-reduce), begun in
        the background: `.result()` waits for it."""
        t = torch.tensor([1 if f else 0 for f in flags], dtype=torch.int32)
        work = self._call(what, lambda: dist.all_reduce(t, op=dist.ReduceOp.MAX, group=getattr(self, group),
                                                        async_op=True))
        return PendingFlags(self, t, work, what)

    def barrier(self, what: str, group: str = "startup") -> None:
        self._call(what, lambda: dist.barrier(group=getattr(self, group)))

    def agree(self, problem: str | None, what: str) -> None:
        """Every rank reports its problem (None: fine); if any rank has one, every rank raises
        RankRefusal with the first failing rank's message, naming that rank and its host."""
        reports = self.all_gather((problem, self.host), what, group="startup")
        bad = [(r, p, h) for r, (p, h) in enumerate(reports) if p is not None]
        if bad:
            r, p, h = bad[0]
            more = f" (and ranks {', '.join(str(b[0]) for b in bad[1:])})" if len(bad) > 1 else ""
            raise RankRefusal(f"rank {r} ({h}){more}: {p}")


def _cannot_join(env: RankEnv, backend: str, e: BaseException) -> NoReturn:
    """This rank failed to join the process groups: the failure recorded (every node reads it) and said
    once, without a traceback; the rank then leaves with exit code 1."""
    import os
    import sys

    from duorl.distributed.launch import record_rank_failure

    msg = (f"rank {env.rank} ({platform.node()}): the learner (pid {os.getpid()}) could not join the {backend} "
           f"process groups: {type(e).__name__}: {backend_cause(e)}")
    record_rank_failure(msg, "learner")
    print(f"duorl: error: {msg}", file=sys.stderr, flush=True)
    sys.stdout.flush()
    os._exit(1)


def backend_cause(e: BaseException) -> str:
    """A backend error's cause, without its source location and advice ("[.../pair.cc:537] Read error
    [127.0.0.1]:4835: Connection reset by peer. This is typically caused by ... GLHF!" -> "Read error
    [127.0.0.1]:4835: Connection reset by peer")."""
    import re

    text = str(e).strip()
    if not text:
        return type(e).__name__
    text = re.sub(r"^\[[^\]]*\.(?:cc|cpp|h):\d+\]\s*", "", text.splitlines()[0])
    return text.split(" This is typically caused")[0].strip()


@dataclass
class PendingFlags:
    """An element-wise OR over the ranks that is still travelling (DistContext.start_any_true)."""

    ctx: DistContext
    flags: torch.Tensor
    work: Any
    what: str

    def result(self) -> list[bool]:
        self.ctx._call(self.what, self.work.wait)
        return [bool(v) for v in self.flags.tolist()]
