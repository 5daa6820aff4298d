"""The host-side half of `duorl.gpu.graphs.GraphCapturable`, shared by the SAC-family learners.

These learners keep one host-side counter, `num_updates`, which picks the updates that include the
actor (`policy_frequency`). An iteration of n updates starting at counter c takes the same Python
path as one starting at c' whenever c = c' (mod policy_frequency): that residue and n are the cycle
key, so a run needs at most policy_frequency captured graphs (one when n is a multiple of it).
"""

from __future__ import annotations

from typing import Any, Hashable

import torch


class CycleCaptureMixin:
    num_updates: int
    generator: torch.Generator
    cfg: Any

    def cycle_key(self, num_updates: int) -> Hashable:
        return (self.num_updates % self.cfg.policy_frequency, num_updates)

    def host_state(self) -> Any:
        return self.num_updates

    def load_host_state(self, state: Any) -> None:
        self.num_updates = int(state)

    def advance_host_state(self, num_updates: int) -> None:
        self.num_updates += num_updates

    def graph_generators(self) -> list[torch.Generator]:
        return [self.generator]
