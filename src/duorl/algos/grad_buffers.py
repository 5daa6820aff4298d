"""Gradients in one flat fp32 buffer per optimizer group, and the verdict that skips invalid steps.

`LocalValidity` is the synchronizer of a run without peers: each group's gradients become views of
one flat buffer allocated once at attach (backward accumulates straight into it; its address never
changes, so a CUDA graph can capture the step), and one extra element carries the step's loss
validity (0, or NaN for a non-finite loss). The verdict is the buffer's finiteness: a non-finite loss
or gradient skips that optimizer step (and, for the critic, the target update) by on-device masking,
the same rule data parallel applies to every rank's verdict (`duorl.distributed.grad_sync` reduces the very
same buffers across ranks).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Hashable, Mapping, Sequence

import torch
from torch import nn


@dataclass
class FlatGroup:
    params: list[nn.Parameter]
    flat: torch.Tensor  # [n + 1] fp32: the gradients, then the verdict element
    wire: torch.Tensor  # what travels to other ranks: `flat` itself, or a buffer of another dtype
    views: list[torch.Tensor]  # flat[:n] cut into the parameters' shapes: their .grad
    numel: int

    def layout(self) -> dict[str, Any]:
        return {"elements": self.numel, "wire_dtype": str(self.wire.dtype).removeprefix("torch.")}


class LocalValidity:
    """algos.base.GradientSynchronizer for one process: flat gradients and the local verdict."""

    world_size = 1

    def __init__(self, device: torch.device | str) -> None:
        self.device = torch.device(device)
        self._groups: dict[str, FlatGroup] = {}

    def attach(self, groups: Mapping[str, Sequence[nn.Parameter]], buffers: Sequence[torch.Tensor] = ()) -> None:
        for name, params in groups.items():
            params = list(params)
            n = sum(p.numel() for p in params)
            flat = torch.zeros(n + 1, dtype=torch.float32, device=self.device)
            views, offset = [], 0
            for p in params:
                view = flat[offset:offset + p.numel()].view_as(p)
                if p.grad is not None:
                    view.copy_(p.grad)
                # the gradient is the buffer from now on (before any capture: graphs see one address)
                p.grad = view
                views.append(view)
                offset += p.numel()
            self._groups[name] = FlatGroup(params, flat, self._wire(name, flat, n, params), views, n)

    def _wire(self, name: str, flat: torch.Tensor, numel: int, params: list[nn.Parameter]) -> torch.Tensor:
        """The buffer a group travels in (nowhere, alone: the flat buffer itself)."""
        return flat

    def synchronize(self, group: str, loss: torch.Tensor) -> torch.Tensor:
        g = self._groups[group]
        if any(p.grad is None or p.grad.data_ptr() != v.data_ptr() for p, v in zip(g.params, g.views)):
            raise RuntimeError(f"a gradient of the {group} group was replaced after attach (zero_grad(set_to_none="
                               "True)?): gradients must stay views of the synchronizer's buffer")
        torch.mul(loss.detach().float().reshape(1), 0.0, out=g.flat[g.numel:])  # 0, or NaN for a non-finite loss
        self._reduce(g)
        # NaN or inf anywhere: a loss or a gradient was not finite (with peers: on some rank)
        return torch.isfinite(g.flat).all().float()

    def _reduce(self, g: FlatGroup) -> None:
        """Combine the group's buffer with the other ranks' (nothing to combine alone)."""

    def gather(self, x: torch.Tensor) -> torch.Tensor:
        return x

    def average_buffers(self) -> None:
        return None

    def fingerprint(self) -> Hashable:
        return (type(self).__name__, id(self), tuple((name, g.flat.data_ptr(), g.wire.data_ptr())
                                                      for name, g in self._groups.items()))

    def layout(self) -> dict[str, dict[str, Any]]:
        return {name: g.layout() for name, g in self._groups.items()}
