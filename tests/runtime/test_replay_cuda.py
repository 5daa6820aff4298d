"""The replay sampler on the GPU (`pytest -m cuda`): moving the window makes no host sync, so a learner that
does not wait for its update (the weight board's event mode) queues the next iteration at once."""

from __future__ import annotations

import pytest
import torch

from duorl.runtime.replay import ReplayLayout, ReplayRing, ReplaySampler

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA"),
]


def test_setting_the_window_does_not_sync_and_lands() -> None:
    device = torch.device("cuda", 0)
    ring = ReplayRing.allocate(ReplayLayout(4, 16, 3, 5, 2), device)
    sampler = ReplaySampler(ring, torch.Generator(device=device).manual_seed(0))
    torch.cuda._sleep(100_000_000)  # work still queued when the window moves
    torch.cuda.set_sync_debug_mode("error")
    try:
        sampler.set_window(3, 11)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert sampler.window.tolist() == [3, 11]


def test_the_sync_check_sees_a_blocking_copy_from_the_host() -> None:
    """The control: the copy set_window made before (from a pageable host tensor) is a sync the check refuses."""
    window = torch.zeros(2, dtype=torch.int64, device="cuda")
    torch.cuda.set_sync_debug_mode("error")
    try:
        with pytest.raises(RuntimeError, match="synchroniz"):
            window.copy_(torch.tensor([3, 11]))
    finally:
        torch.cuda.set_sync_debug_mode("default")
