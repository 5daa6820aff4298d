"""The capture guard of the staged mjlab step (envs/mjlab/stage_graphs.py), without mjlab: what it lets a
capture make from Python data and what it refuses."""

from __future__ import annotations

import pytest
import torch

from duorl.envs.mjlab.stage_graphs import CaptureGuard, StageCaptureError


class _DeviceArray:
    """Stands in for a Warp array on CUDA: memory the device owns, offered by __cuda_array_interface__."""

    __cuda_array_interface__ = {"shape": (2,), "typestr": "<f4", "data": (0, False), "version": 3}


def test_a_tensor_over_device_memory_is_no_host_copy_inside_a_capture() -> None:
    """mjlab's ray-cast sensor wraps its Warp ray buffers by wp.to_torch (torch.as_tensor of the array)
    every sense: no copy, so a capture may make it."""
    guard = CaptureGuard("observe", {}, capturing=True)
    made: list[object] = []

    def as_tensor(data: object, **kwargs: object) -> str:
        made.append(data)
        return "aliased"

    array = _DeviceArray()
    assert guard._constant(as_tensor, (array,), {"device": "cuda:0"}) == "aliased"
    assert made == [array]


def test_a_constant_from_python_data_first_met_inside_a_capture_is_refused() -> None:
    guard = CaptureGuard("reset.k3", {}, capturing=True)
    with pytest.raises(StageCaptureError, match="host data first met in its capture"):
        guard._constant(torch.tensor, ([0.5, 1.5],), {})


def test_a_constant_met_before_the_capture_is_a_copy_of_the_kept_one() -> None:
    cache: dict = {}
    eager = CaptureGuard("reset.k3", cache, capturing=False)._constant(torch.tensor, ([0.5, 1.5],), {})
    captured = CaptureGuard("reset.k3", cache, capturing=True)._constant(torch.tensor, ([0.5, 1.5],), {})
    assert torch.equal(eager, captured) and eager.data_ptr() != captured.data_ptr()


def test_a_boolean_mask_index_keeps_its_host_scalar() -> None:
    """scalar_writes_from_the_device leaves `x[mask] = 1.0` alone (torch fills through a mask without a
    sync; a device value would make it an index_put that syncs to find the mask's indices)."""
    from duorl.envs.mjlab.stage_graphs import indexes_by_mask

    ids = torch.tensor([0, 2])
    mask = torch.tensor([True, False, True])
    assert indexes_by_mask(mask) and indexes_by_mask((slice(None), mask)) and indexes_by_mask(mask.to(torch.uint8))
    assert not indexes_by_mask(ids) and not indexes_by_mask((ids, 1)) and not indexes_by_mask(slice(0, 2))
