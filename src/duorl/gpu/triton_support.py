"""Where duorl's own Triton kernels (gpu/fused_norm.py, gpu/column_stats.py) run, and importing them.

They run on CUDA tensors, and on CPU tensors while Triton's interpreter is on (`TRITON_INTERPRET=1`,
read by Triton when a kernel module is imported: the CPU tests check the kernels that way). This module
imports no Triton, so the CPU path never needs it.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

import torch


def interpreting() -> bool:
    """Triton's interpreter is on: kernels run on the CPU (slowly), for tests."""
    return os.environ.get("TRITON_INTERPRET") == "1"


def kernels_run_on(device: torch.device | str) -> bool:
    """Whether duorl's Triton kernels can take tensors on `device`."""
    return torch.device(device).type == "cuda" or interpreting()


def import_kernels(module: str, key: str) -> ModuleType:
    """duorl.gpu.<module>, or an error that names the configuration key that asked for it."""
    try:
        return importlib.import_module(f"duorl.gpu.{module}")
    except ImportError as e:
        raise RuntimeError(f"{key} needs Triton ({e}); torch's CUDA wheels ship it: install a CUDA torch, or set "
                           f"{key} back to its default") from e
