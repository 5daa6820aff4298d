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


def export_main(run_dir: str, checkpoint: str | None, out: str | None) -> int:
    """`duorl export RUN [--checkpoint PATH] [--out DIR]`: the files the end of training writes with
    training.export_onnx=true (OUT/policy.onnx, OUT/policy.safetensors; OUT defaults to RUN/export), from
    the run's final checkpoint, or its latest if it has none (a run stopped without one: said), or
    --checkpoint. 2 for refused input (no run, an unreadable checkpoint, an unwritable OUT), 0 done."""
    import sys

    from duorl.cli.play import PlayError, load_run  # the one reader of a run's config and checkpoint
    from duorl.cli.preflight import check_output_file
    from duorl.config.errors import InputRefused

    run = Path(run_dir)
    out_dir = Path(out) if out else run / "export"
    try:
        check_output_file(str(out_dir / "policy.onnx"), "--out" if out else "RUN/export")
        cfg, path, data = load_run(run, checkpoint)
    except (InputRefused, PlayError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if checkpoint is None and path.name != "final.pt":
        print(f"duorl: note: {run} has no final.pt (the run did not end with a final checkpoint): exporting its "
              f"latest, {path}", file=sys.stderr)
    from duorl.algos.registry import make_actor
    from duorl.envs.registry import env_spec

    spec = env_spec(cfg.task)
    actor = make_actor(cfg.algo, spec, torch.device("cpu"))
    actor.load_state_dict(data["policy"])
    files = export_policy(actor, spec.actor_obs_dim, out_dir)
    print(f"duorl: exported {files['onnx']} and {files['safetensors']} from {path} "
          f"(iteration {int(data['header']['iteration'])})", flush=True)
    return 0
