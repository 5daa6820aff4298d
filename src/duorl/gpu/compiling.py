"""torch.compile as this package uses it: fixed shapes, compiled on the first (eager) call.

Both CUDA-graph owners use it: the learners compile their networks (config/switches.py says when),
and the envs compile the tensor code of a step (envs/vec_env.py), so that a captured graph replays a
few fused kernels instead of hundreds of small ones. Compilation always happens on an eager call
before any capture; a capture only replays what was compiled then.
"""

from __future__ import annotations

from typing import Any, Callable, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


def maybe_compile(fn: F, enabled: bool) -> F:
    """`torch.compile(fn, dynamic=False)` when enabled, else `fn` itself."""
    if not enabled:
        return fn
    import torch

    from duorl.gpu import torch_internals

    # every learner/env instance, batch shape, and train/eval or frozen/unfrozen call of a network is
    # a variant: keep them all compiled rather than silently falling back to eager at the default 8
    torch_internals.raise_dynamo_cache_limit(64)
    return torch.compile(fn, dynamic=False)  # type: ignore[return-value]
