"""Gradient averaging over ranks: the flat buffers of `algos.grad_buffers`, all-reduced (docs/design.md §4).

Each group's gradients live in one flat fp32 buffer allocated once at attach (every `.grad` is a
view of it, so backward accumulates straight into it and its address never changes: a CUDA graph can
capture the step, and no copy goes in or out). Per optimizer step one extra element carries this
rank's verdict: 0 when its loss is finite, NaN when it is not. The buffer is all-reduced with SUM,
restored to fp32 where it travelled as bf16, and divided by the world size in fp32. A non-finite
loss or gradient on any rank then reaches every rank's sum, so the verdict returned to the learner,
1.0 when the reduced buffer is all finite, is the same everywhere and every rank skips the same
optimizer steps. Optimizer state is never sent.

`training.dp_gradient_wire_dtype=bfloat16` sends fp32 groups of at least WIRE_MIN_ELEMENTS gradient
elements as bf16 (a separate wire buffer): parameters, optimizer state and gradients keep their dtype
and storage. On CUDA the all-reduce runs on a side stream forked from and joined back to the current
stream (inside a capture: the capture stream).
"""

from __future__ import annotations

import time
from typing import Any, Hashable, Mapping, Sequence

import torch
import torch.distributed as dist
from torch import nn

from duorl.algos.grad_buffers import FlatGroup, LocalValidity
from duorl.config.schema import WIRE_DTYPES
from duorl.gpu import torch_internals
from duorl.gpu.graphs import forked_stream
from duorl.runtime.coordination import RankLost

# below this many gradient elements a group always travels in fp32 (bf16 saves nothing worth its error)
WIRE_MIN_ELEMENTS = 1024


def group_layout(groups: Mapping[str, Sequence[nn.Parameter]], wire_dtype: str) -> dict[str, dict[str, Any]]:
    """Per group: its gradient elements and the dtype it travels in (the manifest's record, and what
    every rank must agree on before training)."""
    out = {}
    for name, params in groups.items():
        n = sum(p.numel() for p in params)
        bf16 = wire_dtype == "bfloat16" and n >= WIRE_MIN_ELEMENTS and all(p.dtype == torch.float32 for p in params)
        out[name] = {"elements": n, "wire_dtype": "bfloat16" if bf16 else "float32",
                     "shapes": [list(p.shape) for p in params]}
    return out


class AllReduceSynchronizer(LocalValidity):
    """algos.base.GradientSynchronizer over a process group (NCCL on CUDA, gloo on the CPU)."""

    def __init__(self, group: Any, world_size: int, device: torch.device, wire_dtype: str = "float32",
                 fork_stream: bool = True) -> None:
        if wire_dtype not in WIRE_DTYPES:
            raise ValueError(f"wire dtype must be one of {', '.join(WIRE_DTYPES)}, got {wire_dtype!r}")
        super().__init__(device)
        self.group, self.world_size = group, world_size
        self.wire_dtype = wire_dtype
        # fork_stream=False exists for the test that proves the fork matters (the capture then fails)
        self.fork_stream = fork_stream
        self._side = torch.cuda.Stream(device=self.device) if self.device.type == "cuda" else None
        self._buffers: list[torch.Tensor] = []
        self._buffer_flat = torch.zeros(0, device=self.device)
        self._buffer_views: list[torch.Tensor] = []
        self._timing: list[tuple[Any, Any]] = []
        self._host_ms = 0.0

    # ------------------------------------------------------------------ GradientSynchronizer

    def attach(self, groups: Mapping[str, Sequence[nn.Parameter]], buffers: Sequence[torch.Tensor] = ()) -> None:
        self._buffers = list(buffers)
        n = sum(b.numel() for b in self._buffers)
        # running statistics always travel in fp32 (they are small, and no rounding may drift them)
        self._buffer_flat = torch.zeros(n, dtype=torch.float32, device=self.device)
        self._buffer_views, offset = [], 0
        for b in self._buffers:
            self._buffer_views.append(self._buffer_flat[offset:offset + b.numel()].view_as(b))
            offset += b.numel()
        self._layout = group_layout(groups, self.wire_dtype)
        super().attach(groups, buffers)

    def _wire(self, name: str, flat: torch.Tensor, numel: int, params: list[nn.Parameter]) -> torch.Tensor:
        if self._layout[name]["wire_dtype"] == "float32":
            return flat
        return torch.zeros(numel + 1, dtype=torch.bfloat16, device=self.device)

    def _reduce(self, g: FlatGroup) -> None:
        def reduce() -> None:
            if g.wire is not g.flat:
                g.wire.copy_(g.flat)
            self._all_reduce_tensor(g.wire, f"{self._name_of(g)} gradients")
            if g.wire is not g.flat:
                g.flat.copy_(g.wire)  # back to fp32 before the division

        self._run_collective(reduce)
        if self.world_size > 1:  # x / 1 is x: nothing to do alone
            g.flat[:g.numel].div_(self.world_size)

    def average_buffers(self) -> None:
        if not self._buffers:
            return
        torch_internals.foreach_copy_(self._buffer_views, self._buffers)
        self._run_collective(lambda: self._all_reduce_tensor(self._buffer_flat, "running statistics"))
        self._buffer_flat.div_(self.world_size)
        torch_internals.foreach_copy_(self._buffers, self._buffer_views)

    def gather(self, x: torch.Tensor) -> torch.Tensor:
        parts = [torch.empty_like(x) for _ in range(self.world_size)]
        try:
            dist.all_gather(parts, x.contiguous(), group=self.group)
        except (RuntimeError, ValueError) as e:
            raise RankLost(f"lost a peer rank while gathering running statistics: {e}") from e
        return torch.cat(parts)

    def fingerprint(self) -> Hashable:
        return (super().fingerprint(), self.wire_dtype, self.fork_stream, self._buffer_flat.data_ptr())

    # ------------------------------------------------------------------ the reduction

    def _run_collective(self, fn: Any) -> None:
        """`fn` on the side stream (CUDA; timed when not capturing), else on the host (timed)."""
        if self._side is None:
            t0 = time.perf_counter()
            fn()
            self._host_ms += (time.perf_counter() - t0) * 1e3
            return
        capturing = torch.cuda.is_current_stream_capturing()
        timed = not capturing
        # fork_stream=False (tests only): a side stream that never waits on the current one
        ctx = forked_stream(self._side) if self.fork_stream else torch.cuda.stream(self._side)
        with ctx:
            if capturing and not torch.cuda.is_current_stream_capturing():
                # its work would run eagerly now, outside the graph, and never in a replay
                raise RuntimeError(f"the all-reduce's side stream {self._side} is not part of the capture: it is "
                                   "unjoined (it does not fork from the capture stream)")
            start = end = None
            if timed:
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
            fn()
            if timed:
                end.record()
                self._timing.append((start, end))

    def _all_reduce_tensor(self, t: torch.Tensor, what: str) -> None:
        try:
            dist.all_reduce(t, op=dist.ReduceOp.SUM, group=self.group)
        except (RuntimeError, ValueError) as e:
            raise RankLost(f"lost a peer rank while all-reducing the {what}: {e}") from e

    def _name_of(self, g: FlatGroup) -> str:
        return next((k for k, v in self._groups.items() if v is g), "?")

    # ------------------------------------------------------------------ evidence

    def take_ms(self) -> float | None:
        """Milliseconds spent in eager all-reduces since the last call (after the work is synced);
        None when every reduction ran inside a captured graph (measure_ms then tells)."""
        if not self._timing and self._host_ms == 0.0:
            return None
        ms = self._host_ms + sum(s.elapsed_time(e) for s, e in self._timing)
        self._timing.clear()
        self._host_ms = 0.0
        return ms

    def measure_ms(self, repeats: int = 5) -> float:
        """Milliseconds of one all-reduce of every group's buffer, eagerly (what one optimizer step per
        group costs on the wire); every rank must call it together."""
        sync = torch.cuda.synchronize if self.device.type == "cuda" else (lambda: None)
        sync()
        t0 = time.perf_counter()
        for _ in range(repeats):
            for g in self._groups.values():
                scratch = g.wire.clone()
                dist.all_reduce(scratch, op=dist.ReduceOp.SUM, group=self.group)
        sync()
        return (time.perf_counter() - t0) * 1e3 / repeats
