"""Every private torch attribute this package relies on, read through this one module.

These are not torch's public API: a release may rename or drop one. Read with `getattr(..., None)`, a
missing one would go unnoticed (the whole-cycle graph's staleness fingerprint would stop seeing hook
changes and replay a stale graph without an error). Here a missing one raises `TorchInternalMissing`,
naming the torch version and the attribute. `tests/gpu/test_torch_internals.py` asserts that every one of
them exists on the pinned torch; pyproject.toml bounds torch to the versions tested.
"""

from __future__ import annotations

import functools
import inspect
from types import ModuleType
from typing import Any, Callable

import torch
import torch.nn.modules.module as _module_module
import torch.optim.optimizer as _optimizer_module

# module-level hook registries whose change makes a captured graph stale (gpu/graphs.graph_fingerprint)
GLOBAL_HOOK_DICTS: tuple[tuple[ModuleType, str], ...] = (
    (_module_module, "_global_forward_hooks"),
    (_module_module, "_global_forward_pre_hooks"),
    (_module_module, "_global_backward_hooks"),
    (_module_module, "_global_backward_pre_hooks"),
    (_optimizer_module, "_global_optimizer_pre_hooks"),
    (_optimizer_module, "_global_optimizer_post_hooks"),
)
# per-instance attributes graph_fingerprint reads directly on every replay (a hot host path: no lookups
# through here); verify_instance_attributes() checks them once per process, before the first capture
MODULE_ATTRS = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks",
                "_parameters", "_buffers", "_modules")
PARAMETER_ATTRS = ("_backward_hooks", "_post_accumulate_grad_hooks")
OPTIMIZER_ATTRS = ("_optimizer_step_pre_hooks", "_optimizer_step_post_hooks")
# torch's multi-tensor kernels (one launch for a list of tensors)
FOREACH_OPS = ("_foreach_lerp_", "_foreach_sub", "_foreach_mul_", "_foreach_add_", "_foreach_copy_")
# fused Adam/AdamW read this attribute in step(): nonzero skips the step on the device
FOUND_INF = "found_inf"


class TorchInternalMissing(RuntimeError):
    """This torch lacks a private attribute duorl relies on."""


def _missing(where: str) -> TorchInternalMissing:
    return TorchInternalMissing(
        f"torch {torch.__version__} has no {where}, a torch internal duorl relies on "
        "(src/duorl/gpu/torch_internals.py); install a torch in pyproject.toml's tested range")


def require(owner: Any, name: str, where: str) -> Any:
    """`owner.name`, or TorchInternalMissing naming `where.name` and the torch version."""
    try:
        return getattr(owner, name)
    except AttributeError:
        raise _missing(f"{where}.{name}") from None


def _require_all(owner: Any, names: tuple[str, ...], where: str) -> None:
    for name in names:
        require(owner, name, where)


for _owner, _name in GLOBAL_HOOK_DICTS:
    require(_owner, _name, _owner.__name__)

foreach_lerp_: Callable[..., Any] = require(torch, "_foreach_lerp_", "torch")
foreach_sub: Callable[..., Any] = require(torch, "_foreach_sub", "torch")
foreach_mul_: Callable[..., Any] = require(torch, "_foreach_mul_", "torch")
foreach_add_: Callable[..., Any] = require(torch, "_foreach_add_", "torch")
foreach_copy_: Callable[..., Any] = require(torch, "_foreach_copy_", "torch")


def global_hook_dicts() -> list[Any]:
    """The module-level hook registries, read afresh (torch mutates them in place; reading each call keeps
    a rebinding visible too)."""
    return [getattr(owner, name) for owner, name in GLOBAL_HOOK_DICTS]


@functools.cache
def verify_instance_attributes() -> None:
    """Raise if a module, a parameter or an optimizer of this torch lacks an attribute graph_fingerprint
    reads; once per process (a few microseconds of throwaway objects)."""
    module = torch.nn.Linear(1, 1)
    _require_all(module, MODULE_ATTRS, "torch.nn.Module")
    _require_all(module.weight, PARAMETER_ATTRS, "torch.nn.Parameter")
    _require_all(torch.optim.SGD(module.parameters(), lr=0.1), OPTIMIZER_ATTRS, "torch.optim.Optimizer")


@functools.cache
def _reads_found_inf(optimizer_type: type) -> bool:
    source = inspect.getsource(optimizer_type.step)
    return f'getattr(self, "{FOUND_INF}"' in source


def set_found_inf(optimizer: torch.optim.Optimizer, value: torch.Tensor) -> None:
    """Hand a fused optimizer's step its skip flag (nonzero: the step leaves everything as it was).
    Raises when this torch's step of that optimizer type no longer reads the flag (the skip would be lost
    silently otherwise)."""
    if not _reads_found_inf(type(optimizer)):
        raise _missing(f"a `{FOUND_INF}` read in {type(optimizer).__qualname__}.step")
    setattr(optimizer, FOUND_INF, value)


def device_count_nvml() -> int:
    """torch.cuda._device_count_nvml(): GPUs counted through NVML without initialising CUDA; raises
    whatever NVML raises (no driver), and TorchInternalMissing when this torch lacks the function."""
    return int(require(torch.cuda, "_device_count_nvml", "torch.cuda")())


def raise_dynamo_cache_limit(at_least: int) -> None:
    """torch._dynamo.config.cache_size_limit = max(itself, at_least)."""
    import torch._dynamo

    config = require(torch._dynamo, "config", "torch._dynamo")
    current = require(config, "cache_size_limit", "torch._dynamo.config")
    config.cache_size_limit = max(current, at_least)


def compile_seconds() -> dict[str, float]:
    """The seconds torch.compile spent in this process so far: {"torch_compile_s": Dynamo's whole frame
    compiles, Inductor's included}, read from torch._dynamo.utils.cumulative_time_spent_ns (host-side
    counters; {} before torch._dynamo is imported, which this does not do, or where torch lacks it)."""
    import sys

    utils = sys.modules.get("torch._dynamo.utils")
    spent = getattr(utils, "cumulative_time_spent_ns", None)
    if not isinstance(spent, dict):
        return {}
    return {"torch_compile_s": spent.get("entire_frame_compile", 0) / 1e9}
