"""The runtime's RankCoordinator and Reporter under data parallel (docs/design.md §4).

`DataParallelCoordinator` makes every rank stop at the same iteration boundary (one small gloo
all-reduce per iteration, overlapped with the next iteration). `RankReporter` stands in every rank's loop where the run directory stands
without peers: it reduces each metric row over the ranks and gathers the manifests and checkpoint
states to rank 0, which alone holds the run directory and writes.
"""

from __future__ import annotations

import statistics
from typing import Any

import torch

from duorl.distributed.group import DistContext, PendingFlags
from duorl.runtime.coordination import StopVerdict

# metrics reduced by summing over ranks (everything else is averaged)
SUMMED = ("Perf/env_steps_per_s",)
# metrics whose slowest rank and spread over ranks are kept too (per-rank jitter)
JITTER = ("Perf/iteration_ms", "Perf/learner_train_ms", "Perf/collector_iteration_ms")


class DataParallelCoordinator:
    local_stops = False

    def __init__(self, ctx: DistContext) -> None:
        self.ctx = ctx
        self.rank, self.world_size = ctx.rank, ctx.world_size
        self._pending: PendingFlags | None = None

    def agree_stop(self, stop_requested: bool, wall_limited: bool) -> StopVerdict:
        """With peers, the flags of this boundary travel during the next iteration and decide the boundary
        after it: the exchange then costs the loop no wait (it had a whole iteration to finish), and a
        stop comes one iteration later, on every rank alike. Alone, this rank's flags are the run's."""
        if self.world_size == 1:
            return StopVerdict(stop_requested or wall_limited, wall_limited)
        stop, wall = self._pending.result() if self._pending is not None else (False, False)
        self._pending = None
        if stop or wall:
            return StopVerdict(True, wall)
        self._pending = self.ctx.start_any_true([stop_requested, wall_limited], "agreeing on the next iteration boundary")
        return StopVerdict(False, False)

    def barrier(self, what: str) -> None:
        self.ctx.barrier(f"waiting until {what}")

    def agree_capture(self, problem: str | None) -> None:
        from duorl.distributed.group import RankRefusal
        from duorl.gpu.graphs import GraphCaptureError

        try:
            self.ctx.agree(problem, "agreeing on the whole-cycle graph capture")
        except RankRefusal as e:
            raise GraphCaptureError(f"the data-parallel whole-cycle graph capture failed on {e}") from None


def reduce_rows(rows: list[dict[str, float]], extra: dict[str, float] | None = None) -> dict[str, float]:
    """One metric row from every rank's row: summed throughput, averaged everything else, and for the
    timings the slowest rank (`..._max`) and the spread between slowest and fastest (`..._spread`)."""
    out: dict[str, float] = {}
    keys: list[str] = []
    for row in rows:
        keys += [k for k in row if k not in keys]
    for k in keys:
        values = [row[k] for row in rows if k in row]
        out[k] = sum(values) if k in SUMMED else statistics.fmean(values)
        if k in JITTER:
            out[f"{k}_max"] = max(values)
            out[f"{k}_spread"] = max(values) - min(values)
    out.update(extra or {})
    return out


class RankReporter:
    """A Reporter on every rank; rank 0 forwards to the run directory (`inner`), others to nothing."""

    # in graph mode, how often (log rows) every rank measures one all-reduce round eagerly
    MEASURE_EVERY = 50

    def __init__(self, ctx: DistContext, inner: Any | None, sync: Any, rank_record: dict[str, Any]) -> None:
        if (inner is None) != (ctx.rank != 0):
            raise ValueError("rank 0 and only rank 0 holds the run directory")
        self.ctx, self.inner = ctx, inner
        self.sync = sync  # the gradient synchronizer: its all-reduce timings
        self.rank_record = rank_record  # rank, host, local rank, device UUID
        self._rows = 0
        self._round_ms: float | None = None
        self._last_iteration: int | None = None  # the previous row's iteration (none yet)
        self._layout: tuple[str, ...] | None = None  # the metric keys every rank's rows share (_gather_rows)

    def started(self, manifest: dict[str, Any]) -> None:
        record = {**self.rank_record, "learner_pid": manifest.get("learner_pid"),
                  "collector_pid": manifest.get("collector_pid")}
        manifests = self.ctx.gather_to_zero({**manifest, "rank_record": record}, "gathering every rank's manifest")
        if self.inner is not None:
            assert manifests is not None
            self.inner.started(merge_manifests(manifests))

    def log(self, iteration: int, env_steps: int, wall_s: float, metrics: dict[str, float]) -> None:
        row = dict(metrics)
        ms = self.sync.take_ms()
        if ms is not None:
            # eager iterations: the time this rank spent in gradient all-reduces, per iteration (from the
            # second row on: the first one's span since a start or resume is not known here)
            if self._last_iteration is not None:
                row["Perf/dp_grad_sync_ms"] = ms / max(iteration - self._last_iteration, 1)
        elif "Perf/learner_train_ms" in metrics:
            # the reductions ran inside the captured graph, where they cannot be timed: every rank
            # measures one eager all-reduce round over the same buffers together, now and then
            if self._rows % self.MEASURE_EVERY == 0:
                self._round_ms = self.sync.measure_ms(repeats=3)
            self._rows += 1
            row["Perf/dp_allreduce_round_ms"] = self._round_ms
        self._last_iteration = iteration
        rows = [(row, env_steps)] if self.ctx.world_size == 1 else self._gather_rows(row, env_steps)
        if self.inner is not None:
            total_steps = sum(steps for _, steps in rows)
            self.inner.log(iteration, total_steps, wall_s, reduce_rows([r for r, _ in rows]))

    def _gather_rows(self, row: dict[str, float], env_steps: int) -> list[tuple[dict[str, float], int]]:
        """Every rank's (row, env steps), in rank order. While every rank's row has the agreed keys and
        plain numbers (every row after the first few), as one small float64 tensor all-gather; else
        (the first row, a key that appears later, a value that is not a number) as pickled objects,
        which also agree the next layout. Every rank takes the same path: the tensor carries each
        rank's "fits" flag, and any rank's 0 sends all of them on to the object gather."""
        what = "reducing a metric row"
        if self._layout is not None:
            fits = tuple(row) == self._layout and _plain(row)
            mine = torch.tensor([1.0 if fits else 0.0, float(env_steps),
                                 *((float(row[k]) for k in self._layout) if fits else [0.0] * len(self._layout))],
                                dtype=torch.float64)
            every = self.ctx.all_gather_tensor(mine, what)
            if bool((every[:, 0] == 1.0).all()):
                return [(dict(zip(self._layout, r[2:].tolist())), int(r[1])) for r in every]
        rows = self.ctx.all_gather((row, env_steps), what)
        keys = tuple(rows[0][0])
        self._layout = keys if all(tuple(r) == keys and _plain(r) for r, _ in rows) else None
        return rows

    def checkpoint(self, iteration: int, env_steps: int, final: bool, runtime_state: dict[str, Any]) -> None:
        from duorl.runtime.checkpoint import to_cpu

        # host copies: rank 0 must not receive every rank's replay into its own GPU's memory
        states = self.ctx.gather_to_zero((to_cpu(runtime_state), env_steps),
                                         f"gathering the checkpoint at iteration {iteration}")
        if self.inner is not None:
            assert states is not None
            per_rank = [s for s, _ in states]
            merged = {"world_size": self.ctx.world_size, "ranks": per_rank,
                      "replay_bytes": sum(s["replay_bytes"] for s in per_rank)}
            self.inner.checkpoint(iteration, sum(steps for _, steps in states), final, merged)
        # nobody runs ahead while rank 0 writes (a later collective would count the write against
        # the short in-loop timeout)
        self.ctx.barrier(f"waiting for rank 0 to write the checkpoint at iteration {iteration}")


def _plain(row: dict[str, Any]) -> bool:
    """Every value a plain int or float (a bool or None would not survive the float64 tensor)."""
    return all(type(v) in (int, float) for v in row.values())


def merge_manifests(manifests: list[dict[str, Any]]) -> dict[str, Any]:
    """Rank 0's manifest with `ranks`: one record per rank (host, local rank, device UUID, PIDs)."""
    out = dict(manifests[0])
    out["ranks"] = [m.get("rank_record", {}) for m in manifests]
    out.pop("rank_record", None)
    return out
