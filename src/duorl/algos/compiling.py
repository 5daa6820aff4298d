"""torch.compile for the learners' networks, CUDA only.

Compiling fuses the many small elementwise kernels of normalisation layers and activations (and
their backward), which is what a whole-cycle CUDA graph replay is left waiting for once launch
overhead is gone. Compiled callables live on the learner, never on the modules: the modules stay
plain (state_dict, deepcopy, ONNX export, the collector's actor). Compilation happens on the first
eager call (the graph's warm-up), never inside a capture. The CPU path stays eager.
"""

from __future__ import annotations

from typing import Any

import torch


def compile_enabled(cfg: Any, device: torch.device) -> bool:
    """algo.algo_params.torch_compile resolved for a learner on `device` (null = on with CUDA)."""
    setting = cfg.algo_params.torch_compile
    return device.type == "cuda" and setting is not False
