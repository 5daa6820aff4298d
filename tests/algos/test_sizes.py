"""algos/sizes.py counts the networks from the configuration; the real networks, built here, are the
oracle: parameters, state (parameters and buffers) and what the linear maps and norms output per sample."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from duorl.algos.flashsac.layers import UnitBatchNorm, UnitLinear, UnitRMSNorm
from duorl.algos.registry import network_sizes
from duorl.algos.sac.networks import EnsembleLayerNorm, EnsembleLinear
from duorl.cli.configure import load_config
from duorl.envs.registry import env_spec


FLASH = ("flashsac", "warpsac")


def _hook_outputs(module: nn.Module) -> tuple[list[int], list]:
    """The oracle of what the linear maps and norms output: a hook on each records its output's size."""
    seen: list[int] = []
    kinds = (nn.Linear, EnsembleLinear, UnitLinear, nn.LayerNorm, EnsembleLayerNorm, UnitBatchNorm, UnitRMSNorm)
    hooks = [m.register_forward_hook(lambda _m, _i, out: seen.append(out.numel()))
             for m in module.modules() if isinstance(m, kinds)]
    return seen, hooks


CASES = [
    ("sac", "pendulum_swingup", ["algo.actor_hidden_dims=[32,16]", "algo.critic_hidden_dims=[24]", "algo.num_atoms=11"]),
    ("sac", "pendulum_swingup", ["algo.actor_hidden_dims=[8]", "algo.obs_normalization=false"]),
    ("sac", "g1_motion_tracking", ["algo.actor_hidden_dims=[64,32,16]", "algo.critic_hidden_dims=[32,32]"]),
    ("flashsac", "pendulum_swingup", ["algo.actor_hidden_dim=16", "algo.critic_hidden_dim=24", "algo.actor_num_blocks=1",
                                      "algo.critic_num_blocks=3", "algo.block_expansion=2", "algo.num_atoms=11"]),
    ("warpsac", "g1_walk_flat", ["algo.actor_hidden_dim=32", "algo.critic_hidden_dim=16", "algo.obs_normalization=false"]),
]


@pytest.mark.parametrize("algo,task,overrides", CASES, ids=[f"{a}-{t}-{i}" for i, (a, t, _) in enumerate(CASES)])
def test_counted_sizes_are_the_built_networks(algo, task, overrides):
    cfg = load_config(algo, task, "mujoco", overrides)
    spec = env_spec(cfg.task)
    if algo in FLASH:
        from duorl.algos.flashsac.learner import build_actor, build_critic
    else:
        from duorl.algos.sac.learner import build_actor, build_critic
    counted = network_sizes(cfg.algo, spec)
    batch = 3
    for (name, net), size in zip((("actor", build_actor(cfg.algo, spec)), ("critic", build_critic(cfg.algo, spec))), counted):
        assert size.params == sum(p.numel() for p in net.parameters()), name
        assert size.state == sum(t.numel() for t in net.state_dict().values()), name
        seen, hooks = _hook_outputs(net)
        with torch.no_grad():
            if name == "actor":
                net(torch.zeros(batch, spec.actor_obs_dim))
            else:
                extra = (True,) if algo in FLASH else ()
                net(torch.zeros(batch, spec.critic_obs_dim), torch.zeros(batch, spec.action_dim), *extra)
        for h in hooks:
            h.remove()
        assert size.outputs_per_sample * batch == sum(seen), name
