"""A data-parallel rank's learner joins the others before training (docs/design.md §4): rank 0's initial
learner state on every rank (the same networks everywhere), the gradient layout agreed, and the learner's
groups handed to the all-reduce synchronizer, which beats for the learner while it waits for a peer.
"""

from __future__ import annotations

from typing import Any

from duorl.distributed.agreement import layout_mismatch
from duorl.distributed.collective_wait import CollectiveWatch, RankBeats
from duorl.distributed.grad_sync import AllReduceSynchronizer, group_layout
from duorl.runtime.checkpoint import to_cpu


def join_ranks(learner: Any, ctx: Any, device: Any, wire_dtype: str, wait_report_s: float) -> AllReduceSynchronizer:
    """Synchronize `learner` (its state, `sync_groups` and `set_synchronizer`) with its peers through `ctx` (distributed/group.DistContext); the synchronizer
    it now steps through (`wire_dtype`: training.dp_gradient_wire_dtype; `wait_report_s`: how often a wait
    for a peer says whom it waits for)."""
    state = ctx.broadcast(to_cpu(learner.state_dict()) if ctx.rank == 0 else None,
                          "broadcasting rank 0's initial learner state")
    if ctx.rank != 0:
        learner.load_state_dict(state)
    layouts = ctx.all_gather(group_layout(learner.sync_groups, wire_dtype), "comparing gradient layouts",
                             group="startup")
    ctx.agree(layout_mismatch(layouts), "comparing gradient layouts")
    sync = AllReduceSynchronizer(ctx.data, ctx.world_size, device, wire_dtype)
    # the learner beats while it waits for a peer rank, and names the one it waits for
    ctx.watch = sync.watch = CollectiveWatch(ctx.rank, ctx.host, wait_report_s, RankBeats(ctx.env, ctx.host))
    learner.set_synchronizer(sync)
    return sync
