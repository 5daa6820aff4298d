"""The double-buffered weight board: the learner publishes actor weights, the collector loads them.

Version v lives in slot v % 2. The learner writes W_{k+1} into slot (k+1) % 2 while the collector may
still hold slot k % 2; the collector loads a slot once, at the start of an iteration, so the slot the
learner overwrites next (k % 2, at the end of learner iteration k+1) was read long before.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn


@dataclass(frozen=True)
class Entry:
    name: str
    shape: tuple[int, ...]
    offset: int
    numel: int


def layout_of(module: nn.Module) -> list[Entry]:
    entries, offset = [], 0
    for name, t in module.state_dict().items():
        if not t.is_floating_point():
            raise TypeError(f"weight board carries float tensors only; {name} is {t.dtype}")
        entries.append(Entry(name, tuple(t.shape), offset, t.numel()))
        offset += t.numel()
    return entries


class WeightBoard:
    def __init__(self, slots: torch.Tensor, layout: list[Entry]) -> None:
        self.slots = slots  # [2, total] float32
        self.layout = layout

    @classmethod
    def allocate(cls, template: nn.Module, device: torch.device) -> "WeightBoard":
        layout = layout_of(template)
        total = sum(e.numel for e in layout)
        slots = torch.zeros((2, total), dtype=torch.float32, device=device)
        if device.type == "cpu":
            slots.share_memory_()
        return cls(slots, layout)

    def publish(self, module: nn.Module, version: int) -> None:
        """Copy the module's state into slot version % 2 (no host sync; the caller syncs before
        announcing the version)."""
        slot = self.slots[version % 2]
        state = module.state_dict()
        with torch.no_grad():
            for e in self.layout:
                slot[e.offset : e.offset + e.numel].copy_(state[e.name].reshape(-1))

    def load_into(self, module: nn.Module, version: int) -> None:
        slot = self.slots[version % 2]
        state = module.state_dict()
        with torch.no_grad():
            for e in self.layout:
                state[e.name].copy_(slot[e.offset : e.offset + e.numel].view(e.shape))
