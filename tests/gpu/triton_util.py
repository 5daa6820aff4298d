"""For the tests of duorl's Triton kernels: where they run (a GPU, else the CPU through Triton's
interpreter, which tests/conftest.py turns on), and the relative error they are judged by."""

from __future__ import annotations

import os

import pytest
import torch


def kernels_device() -> torch.device:
    """The device the kernel tests run on: CUDA when visible, else the CPU under Triton's interpreter
    (tests/conftest.py turns it on); skipped when Triton is not installed."""
    if not torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1":
        pytest.skip("no GPU and TRITON_INTERPRET is not 1: the kernels cannot run here")
    pytest.importorskip("triton")
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def relative_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    """||out - ref|| / ||ref|| in float64 (METHOD.md's measure)."""
    out, ref = out.detach().double(), ref.detach().double()
    return float((out - ref).norm() / ref.norm())
