"""The double-buffered weight board: the learner publishes actor weights, the collector loads them.

Version v lives in slot v % 2. The learner writes W_{k+1} into slot (k+1) % 2 while the collector may
still hold slot k % 2; the collector loads a slot once, at the start of an iteration, so the slot the
learner overwrites next (k % 2, at the end of learner iteration k+1) was read long before.

When the copy is finished is the publisher's to make known. By default (`DUORL_WEIGHT_PUBLISH=sync`) the
learner waits for its stream before it announces a version: its host then idles while the update it
queued runs, and queues the next iteration only afterwards. With `event` (CUDA only) each slot has an
interprocess CUDA event, recorded after the slot's copy: the learner announces the version at once and
goes on queueing, and the collector's stream waits for the slot's event on the GPU before it reads the
slot. One event a slot, not one for the board: the learner records slot v % 2's event again only for
version v + 2, after the collector finished iteration v + 1 (the learner waits for its ticks), so the
collector's wait for version v always finds v's record, never a later one. The learner's metrics rows
are then read one row late (runtime/deferred_rows.py), so that no iteration waits for its update.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
from torch import nn

PUBLISH_MODES = ("sync", "event")
PUBLISH_ENV = "DUORL_WEIGHT_PUBLISH"


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


def publish_mode(device: torch.device) -> str:
    """How this run's learner makes a published version known (DUORL_WEIGHT_PUBLISH, default sync): "event"
    on a CUDA device when asked for, else "sync". A value outside PUBLISH_MODES is refused."""
    mode = os.environ.get(PUBLISH_ENV, "sync")
    if mode not in PUBLISH_MODES:
        raise ValueError(f"{PUBLISH_ENV}={mode!r} is not one of {', '.join(PUBLISH_MODES)}: unset it (sync, the "
                         f"default) or set {PUBLISH_ENV}=event (CUDA: the collector's stream waits for the copy)")
    return mode if device.type == "cuda" else "sync"


class WeightBoard:
    def __init__(self, slots: torch.Tensor, layout: list[Entry],
                 ready: tuple[torch.cuda.Event, torch.cuda.Event] | None = None) -> None:
        self.slots = slots  # [2, total] float32
        self.layout = layout
        self.ready = ready  # per slot, recorded after its copy (mode "event"); None: the publisher syncs

    @classmethod
    def allocate(cls, template: nn.Module, device: torch.device, mode: str = "sync") -> "WeightBoard":
        layout = layout_of(template)
        total = sum(e.numel for e in layout)
        slots = torch.zeros((2, total), dtype=torch.float32, device=device)
        if device.type == "cpu":
            slots.share_memory_()
        ready = None
        if mode == "event":
            if device.type != "cuda":
                raise ValueError(f"weight board mode 'event' needs a CUDA device, not {device}")
            ready = (torch.cuda.Event(interprocess=True), torch.cuda.Event(interprocess=True))
            for event in ready:
                # created now, on the board's device: torch creates an event at its first record or export,
                # and an export on another thread (the prestarted collector's hand-over) would make it on
                # that thread's current device, cuda:0, where a later record on cuda:N fails
                event.record(torch.cuda.current_stream(device))
        return cls(slots, layout, ready)

    @property
    def publisher_syncs(self) -> bool:
        """Whether the publisher must wait for its stream before it announces a version."""
        return self.ready is None

    def publish(self, module: nn.Module, version: int) -> None:
        """Copy the module's state into slot version % 2, queued on the current stream (no host sync). Then
        either the caller syncs before announcing the version (`publisher_syncs`), or the slot's event
        marks the copy's end for the reader's stream."""
        slot = self.slots[version % 2]
        state = module.state_dict()
        with torch.no_grad():
            for e in self.layout:
                slot[e.offset : e.offset + e.numel].copy_(state[e.name].reshape(-1))
        if self.ready is not None:
            self.ready[version % 2].record(torch.cuda.current_stream(self.slots.device))

    def load_into(self, module: nn.Module, version: int) -> None:
        """Copy slot version % 2 into the module; with events, the current stream first waits (on the GPU)
        for that slot's copy to end."""
        if self.ready is not None:
            torch.cuda.current_stream(self.slots.device).wait_event(self.ready[version % 2])
        slot = self.slots[version % 2]
        state = module.state_dict()
        with torch.no_grad():
            for e in self.layout:
                state[e.name].copy_(slot[e.offset : e.offset + e.numel].view(e.shape))
