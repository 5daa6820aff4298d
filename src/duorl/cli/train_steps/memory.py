"""The memory check of `duorl train`: whether the replay ring, the weight board, the networks and their
activations fit on this device (runtime/memory.py), the networks counted from the configuration, so that
nothing is allocated to learn it. A run that does not fit is refused naming the keys to change; the ranks
refuse together.
"""

from __future__ import annotations

from duorl.algos.registry import network_shape_keys, network_sizes
from duorl.cli.run_context import RunContext
from duorl.config.errors import format_value
from duorl.runtime.memory import MemoryFixes, MemoryNeed, memory_problem
from duorl.runtime.replay import ReplayLayout


def check_memory(run: RunContext) -> None:
    """Refuse the run (every rank together) where what it allocates would not fit on run.device, naming the
    keys to change."""
    cfg, checked = run.cfg, run.checked
    assert checked is not None
    spec = checked.spec
    replay = ReplayLayout(cfg.training.num_envs, cfg.algo.buffer_size, spec.actor_obs_dim, spec.critic_obs_dim,
                          spec.action_dim)
    actor, critic = network_sizes(cfg.algo, spec)
    actor_keys, critic_keys = network_shape_keys(cfg.algo.name)
    larger, keys = ("actor", actor_keys) if actor.state >= critic.state else ("critic", critic_keys)
    shown = " or ".join(f"{k}={format_value(getattr(cfg.algo, k.split('.', 1)[1]))}" for k in keys)
    counts = f"the actor has {actor.params:,} parameters, the critic {critic.params:,}"
    fixes = MemoryFixes(replay="lower algo.buffer_size (ticks kept per env) or training.num_envs",
                        networks=f"shrink the {larger}: lower {shown} ({counts})",
                        activations=f"lower algo.batch_size={cfg.algo.batch_size} or training.num_envs="
                                    f"{cfg.training.num_envs}, or shrink the {larger}: lower {shown}")
    need = MemoryNeed.of(replay.nbytes(), actor, critic, cfg.algo.batch_size, cfg.training.num_envs,
                         run.place.data_parallel)
    run.place.agree(memory_problem(run.device, need, fixes), "checking memory for the replay ring and the networks")
