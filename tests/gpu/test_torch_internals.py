"""Every private torch attribute duorl relies on exists on the installed (pinned) torch, and a missing one
fails loud, naming the torch version and the attribute (duorl.gpu.torch_internals)."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest
import torch
import torch._dynamo
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from duorl.gpu import torch_internals as ti


def test_every_internal_exists_on_this_torch() -> None:
    for owner, name in ti.GLOBAL_HOOK_DICTS:
        assert isinstance(getattr(owner, name), dict), f"{owner.__name__}.{name}"
    for name in ti.FOREACH_OPS:
        assert callable(getattr(torch, name)), name
    assert callable(torch.cuda._device_count_nvml)
    assert isinstance(torch._dynamo.config.cache_size_limit, int)
    module = torch.nn.Linear(2, 2)
    for name in ti.MODULE_ATTRS:
        assert hasattr(module, name), name
    for name in ti.PARAMETER_ATTRS:
        assert hasattr(module.weight, name), name
    for name in ti.OPTIMIZER_ATTRS:
        assert hasattr(torch.optim.AdamW(module.parameters()), name), name
    ti.verify_instance_attributes()


def test_fused_adamw_reads_found_inf_and_skips_on_it() -> None:
    """The learners' optimizer (fused AdamW) reads `found_inf` in step(): a flag of 1 leaves the
    parameters as they were, 0 steps."""
    for optimizer_type in (torch.optim.Adam, torch.optim.AdamW):
        assert f'getattr(self, "{ti.FOUND_INF}"' in inspect.getsource(optimizer_type.step)
    p = torch.nn.Parameter(torch.ones(3))
    opt = torch.optim.AdamW([p], lr=0.1, fused=True)
    p.grad = torch.ones(3)
    ti.set_found_inf(opt, torch.ones(()))
    opt.step()
    assert torch.equal(p.detach(), torch.ones(3))
    ti.set_found_inf(opt, torch.zeros(()))
    opt.step()
    assert not torch.equal(p.detach(), torch.ones(3))


def test_a_missing_internal_names_the_torch_version_and_the_attribute() -> None:
    with pytest.raises(ti.TorchInternalMissing, match=re.escape(f"torch {torch.__version__} has no torch.cuda._no_such")):
        ti.require(torch.cuda, "_no_such", "torch.cuda")

    class Plain(torch.optim.SGD):
        def step(self, closure=None):  # type: ignore[override]  # a step that ignores found_inf
            return None

    opt = Plain([torch.nn.Parameter(torch.ones(1))], lr=0.1)
    with pytest.raises(ti.TorchInternalMissing, match=r"found_inf.*Plain\.step"):
        ti.set_found_inf(opt, torch.zeros(()))


def test_the_tested_torch_is_inside_the_bound_the_makefile_and_pyproject_share() -> None:
    """The upper bound is the newest torch these internals were checked on: this one must lie inside it,
    and the Makefile's GPU install uses the same range as pyproject.toml."""
    root = Path(__file__).resolve().parents[2]
    spec = re.search(r'^\s*"torch([<>=!~][^"]*)",$', (root / "pyproject.toml").read_text(encoding="utf-8"),
                     re.MULTILINE).group(1)
    assert "<" in spec, "torch needs an upper bound: the newest version tested"
    assert Version(torch.__version__.split("+")[0]) in SpecifierSet(spec)
    makefile = (root / "Makefile").read_text(encoding="utf-8")
    assert f"torch{spec.replace(',', '$(comma)')}" in makefile
