"""RankReporter's metric rows (distributed/dp_coordinator.py): the first rows and any change of keys go as
pickled objects and agree the layout, later rows as one float64 tensor, every rank on the same path.
Two scripted ranks (a fake context that plays the other rank) stand in for the process group; the
real two-rank runs of tests/distributed/test_dp_run.py exercise both paths over gloo."""

from __future__ import annotations

from typing import Any

import torch

from duorl.distributed.dp_coordinator import RankReporter


class _Sync:
    def take_ms(self) -> None:
        return None


class _Inner:
    def __init__(self) -> None:
        self.rows: list[tuple[int, int, dict[str, float]]] = []

    def log(self, iteration: int, env_steps: int, wall_s: float, row: dict[str, float]) -> None:
        self.rows.append((iteration, env_steps, row))


class _Ctx:
    """Rank 0 of 2; `other(kind, mine)` gives rank 1's contribution to each collective."""

    rank, world_size = 0, 2

    def __init__(self, other: Any) -> None:
        self.other = other
        self.calls: list[str] = []

    def all_gather(self, obj: Any, what: str) -> list[Any]:
        self.calls.append("objects")
        return [obj, self.other("objects", obj)]

    def all_gather_tensor(self, t: torch.Tensor, what: str) -> torch.Tensor:
        self.calls.append("tensor")
        return torch.stack([t, self.other("tensor", t)])


def _reporter(ctx: _Ctx) -> tuple[RankReporter, _Inner]:
    inner = _Inner()
    return RankReporter(ctx, inner, _Sync(), {}), inner  # type: ignore[arg-type]


def test_rows_go_as_tensors_once_the_layout_is_agreed() -> None:
    def twin(kind: str, mine: Any) -> Any:  # rank 1 logs the same keys, other values
        if kind == "tensor":
            t = mine.clone()
            t[2:] += 1.0
            return t
        row, steps = mine
        return {k: v + 1.0 for k, v in row.items()}, steps
    ctx = _Ctx(twin)
    rep, inner = _reporter(ctx)
    for it in range(4):
        rep.log(it, 100 * (it + 1), 1.0, {"Loss/critic": 2.0 + it, "Perf/env_steps_per_s": 10.0})
    # the first row agrees the layout; the next three are single tensor gathers
    assert ctx.calls == ["objects", "tensor", "tensor", "tensor"]
    for it, (i, steps, row) in enumerate(inner.rows):
        assert i == it and steps == 2 * 100 * (it + 1)
        assert row["Loss/critic"] == 2.5 + it  # the mean of the two ranks
        assert row["Perf/env_steps_per_s"] == 21.0  # summed


def test_a_new_key_on_any_rank_sends_every_rank_to_the_object_gather() -> None:
    state = {"rank1_extra": False}

    def twin(kind: str, mine: Any) -> Any:
        if kind == "tensor":
            t = mine.clone()
            if state["rank1_extra"]:
                t[0] = 0.0  # rank 1's row no longer fits the layout
            return t
        row, steps = mine
        return ({**row, "Perf/dp_grad_sync_ms": 1.5} if state["rank1_extra"] else dict(row)), steps
    ctx = _Ctx(twin)
    rep, inner = _reporter(ctx)
    rep.log(0, 10, 1.0, {"Loss/critic": 1.0})
    rep.log(1, 20, 1.0, {"Loss/critic": 1.0})
    state["rank1_extra"] = True
    rep.log(2, 30, 1.0, {"Loss/critic": 1.0})
    assert ctx.calls == ["objects", "tensor", "tensor", "objects"]
    assert inner.rows[-1][2]["Perf/dp_grad_sync_ms"] == 1.5
    # the ranks' keys differ: no layout, so the next row goes as objects again
    rep.log(3, 40, 1.0, {"Loss/critic": 1.0})
    assert ctx.calls[-1] == "objects"


def test_a_value_that_is_not_a_number_goes_as_objects() -> None:
    ctx = _Ctx(lambda kind, mine: mine.clone() if kind == "tensor" else mine)
    rep, inner = _reporter(ctx)
    rep.log(0, 10, 1.0, {"Train/flag": 1.0})
    rep.log(1, 20, 1.0, {"Train/flag": True})  # a bool is not sent as a float: the row goes as objects
    assert ctx.calls == ["objects", "tensor", "objects"]
    assert inner.rows[-1][2] == {"Train/flag": 1.0}
