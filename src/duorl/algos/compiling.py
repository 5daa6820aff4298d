"""torch.compile for the learners' networks, CUDA only.

Compiling fuses the many small elementwise kernels of normalisation layers and activations (and
their backward), which is what a whole-cycle CUDA graph replay is left waiting for once launch
overhead is gone. Compiled callables live on the learner, never on the modules: the modules stay
plain (state_dict, deepcopy, ONNX export, the collector's actor). Compilation happens on the first
eager call (the graph's warm-up), never inside a capture. The CPU path stays eager.
"""

from __future__ import annotations

from typing import Any, Callable, TypeVar

import torch

F = TypeVar("F", bound=Callable[..., Any])


def compile_enabled(cfg: Any, device: torch.device) -> bool:
    """algo.algo_params.torch_compile resolved for a learner on `device` (null = on with CUDA)."""
    setting = cfg.algo_params.torch_compile
    return device.type == "cuda" and setting is not False


def maybe_compile(fn: F, enabled: bool) -> F:
    if not enabled:
        return fn
    import torch._dynamo

    # every learner instance, batch shape, and train/eval or frozen/unfrozen call of a network is a
    # variant: keep them all compiled rather than silently falling back to eager at the default 8
    torch._dynamo.config.cache_size_limit = max(torch._dynamo.config.cache_size_limit, 64)
    return torch.compile(fn, dynamic=False)  # type: ignore[return-value]
