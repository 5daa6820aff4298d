"""`training.export_onnx=true`: the deterministic policy as ONNX (observation normalisation folded in)
next to a safetensors copy of the actor's weights."""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn


class DeterministicPolicy(nn.Module):
    """obs_actor [B, obs_dim] -> action [B, action_dim] in [-1, 1]: the actor's `act`, which applies
    the actor's own observation normaliser, so the exported graph needs nothing else."""

    def __init__(self, actor: nn.Module) -> None:
        super().__init__()
        self.actor = actor

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.actor.act(obs)


def export_policy(actor: nn.Module, obs_dim: int, out_dir: Path) -> dict[str, str]:
    """Write out_dir/policy.onnx and out_dir/policy.safetensors from a CPU copy of `actor`."""
    import copy

    from safetensors.torch import save_file

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    cpu_actor = copy.deepcopy(actor).to("cpu").float().eval()
    policy = DeterministicPolicy(cpu_actor).eval()
    onnx_path = out_dir / "policy.onnx"
    import warnings

    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        # the TorchScript-based exporter: needs only `onnx`, and the actor is a plain MLP
        torch.onnx.export(
            policy,
            (torch.zeros(1, obs_dim),),
            str(onnx_path),
            input_names=["obs"],
            output_names=["action"],
            dynamic_axes={"obs": {0: "batch"}, "action": {0: "batch"}},
            dynamo=False,
        )
    st_path = out_dir / "policy.safetensors"
    save_file({k: v.contiguous() for k, v in cpu_actor.state_dict().items()}, str(st_path))
    return {"onnx": str(onnx_path), "safetensors": str(st_path)}
