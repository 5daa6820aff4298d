"""envs.base.Uniforms: a step's random numbers, drawn once and handed out in order; each task declares
exactly how many one step's advance() and reset() take (uniforms_per_step)."""

import pytest
import torch

from duorl.config.schema import SimConfig
from duorl.envs.task_sources import task_config
from duorl.envs.base import Uniforms
from duorl.envs.registry import make_vec_env


def test_uniforms_hand_out_columns_in_order_and_refuse_more_than_declared():
    block = torch.arange(12, dtype=torch.float32).reshape(2, 6)
    u = Uniforms(block)
    assert torch.equal(u.rand(2), torch.tensor([0.0, 6.0]))
    assert torch.equal(u.rand(2, 2, 2), block[:, 1:5].reshape(2, 2, 2))
    assert torch.equal(u.rand(2, 1), block[:, 5:6])
    with pytest.raises(ValueError, match="uniforms_per_step"):
        u.rand(2, 1)
    with pytest.raises(ValueError, match="uniforms_per_step"):
        Uniforms(block).rand(3)  # another batch size than the block's


@pytest.mark.parametrize("task", ["pendulum_swingup", "g1_walk_flat", "g1_motion_tracking"])
def test_a_step_uses_exactly_the_declared_uniforms(task):
    env = make_vec_env(task_config(task), SimConfig(name="mujoco"), 3, "cpu", seed=0)
    env.reset()
    k = env.task.uniforms_per_step
    rng = Uniforms(torch.rand(3, k))
    advance = getattr(env.task, "advance", None)
    if advance is not None:
        advance(env.backend, rng)
    env.task.reset(torch.ones(3, dtype=torch.bool), rng)
    assert rng.used == k  # all of them, and (the refusal above) never more
