"""The pendulum model and task: physical facts, and that the reward separates swing-up from idling."""

import math

import mujoco
import pytest
import torch

from duorl.envs.tasks.pendulum import PendulumSwingup, model_path

from .conftest import mujoco_env


def test_model_facts():
    m = mujoco.MjModel.from_xml_path(model_path())
    task = PendulumSwingup()
    assert (m.nq, m.nv, m.nu) == (1, 1, 1)
    assert m.opt.timestep == pytest.approx(0.01)
    assert tuple(m.opt.gravity) == pytest.approx((0.0, 0.0, -9.81))
    assert tuple(m.actuator_ctrlrange[0]) == (-2.0, 2.0)
    assert m.body_mass[1] == pytest.approx(1.0)
    assert 0.0 < m.dof_damping[0] <= 0.1
    # a uniform 1 m rod about its end: I = m l^2 / 3, so 1 N m upright at rest gives qacc = 3
    d = mujoco.MjData(m)
    d.ctrl[0] = 1.0
    mujoco.mj_forward(m, d)
    assert d.qacc[0] == pytest.approx(3.0, rel=1e-6)
    assert task.spec.control_dt == pytest.approx(task.substeps * m.opt.timestep)
    assert task.spec.action_dim == m.nu


def test_motor_cannot_hold_horizontal():
    """Gravity torque at horizontal (m g l / 2) exceeds the motor's limit: swinging up is required."""
    m = mujoco.MjModel.from_xml_path(model_path())
    d = mujoco.MjData(m)
    d.qpos[0] = math.pi / 2
    mujoco.mj_forward(m, d)
    assert abs(d.qfrc_bias[0]) == pytest.approx(9.81 * 0.5, rel=1e-6)
    assert abs(d.qfrc_bias[0]) > m.actuator_ctrlrange[0, 1]


def energy_swingup(obs: torch.Tensor) -> torch.Tensor:
    """Pump energy toward the upright level, then balance with PD near the top."""
    c, s, w = obs[:, 0], obs[:, 1], obs[:, 2] * 8.0
    energy = 0.5 * (1.0 / 3.0) * w**2 + 9.81 * 0.5 * c
    pump = ((9.81 * 0.5 - energy) * w).sign()
    balance = (-(20.0 * torch.atan2(s, c) + 3.0 * w) / 2.0).clamp(-1.0, 1.0)
    return torch.where(c > 0.85, balance, pump).unsqueeze(1)


def episode_returns(policy, num_envs: int = 8, seed: int = 0) -> torch.Tensor:
    env = mujoco_env(num_envs, seed)
    obs = env.reset()
    for _ in range(env.spec.max_episode_steps):
        obs, _, _, truncated, info = env.step(policy(obs["actor"]))
    env.close()
    assert bool(truncated.all())
    return info["episode_return"]


def test_returns_separate_swingup_from_idling():
    g = torch.Generator().manual_seed(1)
    swing = episode_returns(energy_swingup)
    zero = episode_returns(lambda o: torch.zeros(o.shape[0], 1))
    rand = episode_returns(lambda o: torch.rand(o.shape[0], 1, generator=g) * 2 - 1)
    assert swing.min() > 150.0
    assert zero.max() < 5.0
    assert rand.mean() < 20.0
