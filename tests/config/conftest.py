"""Config tests behave the same on a CPU laptop and on a GPU machine: CUDA is faked explicitly."""

from __future__ import annotations

import pytest

import duorl.config.devices as devices


@pytest.fixture(autouse=True)
def no_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(devices, "cuda_device_count", lambda: 0)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)


@pytest.fixture
def fake_cuda(monkeypatch: pytest.MonkeyPatch):
    """A host with two visible GPUs."""
    monkeypatch.setattr(devices, "cuda_device_count", lambda: 2)
    monkeypatch.setattr(devices, "cuda_uuids", lambda: ["GPU-aaaa", "GPU-bbbb"])
