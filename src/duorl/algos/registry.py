"""Algorithm factories: the only place the runtime learns which concrete learner and actor to build.

Both factories take plain dataclasses and a device, so `functools.partial(make_actor, cfg, spec,
device)` pickles into a spawned collector process.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch import nn

from duorl.algos.base import Learner
from duorl.config.schema import ALGOS

if TYPE_CHECKING:
    from duorl.algos.sizes import NetworkSize
    from duorl.config.schema import AlgoConfig
    from duorl.envs.base import EnvSpec

# WarpSAC is FlashSAC's learner; its age-biased replay sampling is chosen by the runtime from the config
_FLASH = ("flashsac", "warpsac")


def _check_known(name: str) -> None:
    """config.validate refuses other names first; this guards a hand-made AlgoConfig."""
    if name not in ALGOS:
        raise ValueError(f"unknown algo '{name}' (known: {', '.join(ALGOS)})")


def make_learner(algo_cfg: AlgoConfig, spec: EnvSpec, device: torch.device | str, seed: int) -> Learner:
    """The learner for `algo_cfg.name`, with models initialised from `seed` alone."""
    _check_known(algo_cfg.name)
    if algo_cfg.name in _FLASH:
        from duorl.algos.flashsac.learner import FlashSACLearner

        return FlashSACLearner(algo_cfg, spec, torch.device(device), seed)
    from duorl.algos.sac.learner import SACLearner

    return SACLearner(algo_cfg, spec, torch.device(device), seed)


def make_actor(algo_cfg: AlgoConfig, spec: EnvSpec, device: torch.device | str) -> nn.Module:
    """A fresh actor of the learner's architecture (same state_dict keys and shapes), on `device`.

    Its initial weights are irrelevant: the collector loads the learner's published state_dict.
    Built under a forked RNG so the caller's global RNG stream is not consumed.
    """
    _check_known(algo_cfg.name)
    if algo_cfg.name in _FLASH:
        from duorl.algos.flashsac.learner import build_actor
    else:
        from duorl.algos.sac.learner import build_actor

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        actor = build_actor(algo_cfg, spec)
    return actor.to(torch.device(device))


# the keys that shape each network (actor, critic), by algorithm family: what a memory refusal names
_SAC_SHAPE = (("algo.actor_hidden_dims",), ("algo.critic_hidden_dims", "algo.num_atoms"))
_FLASH_SHAPE = (("algo.actor_hidden_dim", "algo.actor_num_blocks", "algo.block_expansion"),
                ("algo.critic_hidden_dim", "algo.critic_num_blocks", "algo.block_expansion", "algo.num_atoms"))


def network_sizes(algo_cfg: AlgoConfig, spec: EnvSpec) -> tuple[NetworkSize, NetworkSize]:
    """The actor's and the critic's sizes for this configuration, counted without building them
    (algos/sizes.py): what the memory check needs before anything is allocated."""
    from duorl.algos.sizes import flashsac_sizes, sac_sizes

    _check_known(algo_cfg.name)
    return flashsac_sizes(algo_cfg, spec) if algo_cfg.name in _FLASH else sac_sizes(algo_cfg, spec)


def network_shape_keys(name: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The configuration keys that shape the actor and the critic of algorithm `name`."""
    _check_known(name)
    return _FLASH_SHAPE if name in _FLASH else _SAC_SHAPE
