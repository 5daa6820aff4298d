"""MjlabVecEnv in process, on Warp's CPU device: spec, time-outs (final_obs is the state the step reached),
the Task/ rows against mjlab's own logged values, the action mapping per term type, and the refusals."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch

from duorl.config.errors import InputRefused
from duorl.config.schema import TaskConfig

CARTPOLE = "Mjlab-Cartpole-Swingup"


def _task_cfg(task_id: str = CARTPOLE, steps: int | None = None) -> TaskConfig:
    return TaskConfig(name=f"mjlab:{task_id}", max_episode_steps=steps)


def test_spec_of_cartpole():
    from duorl.envs import mjlab

    assert CARTPOLE in mjlab.task_ids()
    spec = mjlab.task_spec(CARTPOLE, _task_cfg())
    # cart position, cos/sin of the pole angle, both velocities; one effort on the cart
    assert (spec.actor_obs_dim, spec.critic_obs_dim, spec.action_dim) == (5, 5, 1)
    assert spec.control_dt == pytest.approx(0.05)  # 0.01 s physics, decimation 5
    assert spec.max_episode_steps == 1000  # 50 s episodes
    assert spec.metric_names == ("Episode_Reward/smooth_reward",)
    assert spec.mirror is None
    assert mjlab.task_spec(CARTPOLE, _task_cfg(steps=7)).max_episode_steps == 7


def _rollout(steps_limit: int, actions: list[torch.Tensor]):
    """Build, reset and step a 2-env swing-up; the outputs of the last step and the env."""
    from duorl.envs import mjlab

    env = mjlab.make_vec_env(CARTPOLE, _task_cfg(steps=steps_limit), 2, "cpu", seed=5)
    env.reset()
    rewards, rows = [], []
    for a in actions:
        obs, reward, terminated, truncated, info = env.step(a)
        rewards.append(reward)
        rows.append(info["metrics"])
    return env, obs, terminated, truncated, info, torch.stack(rewards), torch.stack(rows)


def test_time_out_bootstraps_from_the_state_the_step_reached():
    """At the time limit, final_obs is the observation of the state the step reached (the same as an env
    with a longer limit sees at that step), obs is the next episode's first; truncated, not terminated."""
    gen = torch.Generator().manual_seed(0)
    actions = [torch.rand(2, 1, generator=gen) * 2 - 1 for _ in range(5)]
    env, obs, terminated, truncated, info, rewards, rows = _rollout(5, actions)
    log = dict(env.last_log)
    env.close()
    _, longer_obs, longer_term, longer_trunc, _, _, _ = _rollout(6, actions)

    assert truncated.all() and not terminated.any()
    assert not longer_trunc.any() and not longer_term.any()
    # the critic group carries no observation noise: the same state gives the same vector
    torch.testing.assert_close(info["final_obs"]["critic"], longer_obs["critic"])
    assert not torch.allclose(obs["critic"], info["final_obs"]["critic"])
    # the next episode starts hanging down, at rest (swing-up: hinge at pi, cos = -1)
    assert torch.allclose(obs["critic"][:, 1], torch.full((2,), -1.0), atol=0.01)
    assert info["episode_length"].tolist() == [5, 5]
    torch.testing.assert_close(info["episode_return"], rewards.sum(dim=0))
    # the Task/ row's mean over an episode run to its time limit is what mjlab logs for it at the reset
    torch.testing.assert_close(rows[:, :, 0].mean(), log["Episode_Reward/smooth_reward"].float(), rtol=1e-4, atol=1e-7)


def test_step_keeps_obs_where_no_episode_ended():
    from duorl.envs import mjlab

    env = mjlab.make_vec_env(CARTPOLE, _task_cfg(steps=50), 3, "cpu", seed=1)
    first = env.reset()
    assert {k: tuple(v.shape) for k, v in first.items()} == {"actor": (3, 5), "critic": (3, 5)}
    assert all(v.dtype == torch.float32 for v in first.values())
    obs, reward, terminated, truncated, info = env.step(torch.zeros(3, 1))
    env.close()
    assert not (terminated | truncated).any()
    for k in obs:
        assert torch.equal(obs[k], info["final_obs"][k])
    assert reward.shape == (3,) and reward.dtype == torch.float32
    assert info["metrics"].shape == (3, 1)
    assert int(info["nan_resets"]) == 0


# --- actions: duorl's a in [-1, 1] is mjlab's raw action; the term applies its own scale and offset ---

def _cartpole_with(action_cfg):
    """A 2-env swing-up whose cart is driven by `action_cfg`, behind MjlabVecEnv."""
    from duorl.envs.mjlab.loader import build_env, env_cfg
    from duorl.envs.mjlab.spec import task_spec
    from duorl.envs.mjlab.vec_env import MjlabVecEnv

    cfg = env_cfg(CARTPOLE, _task_cfg(steps=20), 2, 0)
    cfg.actions = {"cart": action_cfg}
    env = build_env(cfg, "cpu")
    return MjlabVecEnv(env, task_spec(CARTPOLE, _task_cfg(steps=20)), ("actor",), ("critic",), [])


def _processed(vec, a: torch.Tensor) -> torch.Tensor:
    vec.reset()
    vec.step(a)
    return vec.env.action_manager.get_term("cart")._processed_actions.clone()


A = torch.tensor([[-1.0], [0.5]])


def _default(name: str):
    return lambda vec: getattr(vec.env.scene["cartpole"].data, name)[:, :1]


def _zero(vec):
    return 0.0


@pytest.mark.parametrize("kind,scale,base", [
    ("JointEffortActionCfg", 1.0, _zero),  # the cartpole: a spans the motor's ctrlrange [-1, 1]
    ("JointPositionActionCfg", 0.3, _default("default_joint_pos")),
    ("RelativeJointPositionActionCfg", 0.2, _zero),  # added to the current position when applied
    ("JointVelocityActionCfg", 2.0, _default("default_joint_vel")),
])
def test_an_action_in_the_unit_box_is_the_terms_raw_action(kind, scale, base):
    """duorl hands its action over unchanged; the term maps it: its offset (or default) + scale * a."""
    import mjlab.envs.mdp.actions as actions

    vec = _cartpole_with(getattr(actions, kind)(entity_name="cartpole", actuator_names=("slider",), scale=scale))
    expected = base(vec) + scale * A
    torch.testing.assert_close(_processed(vec, A), expected)
    vec.close()


def test_every_mapped_action_type_exists_in_mjlab():
    import mjlab.envs.mdp.actions as actions

    from duorl.envs.mjlab.actions import ACTION_MAPPINGS

    assert all(hasattr(actions, name) for name in ACTION_MAPPINGS)


def test_an_action_term_without_a_mapping_is_refused():
    from duorl.envs.mjlab.actions import check_action_terms

    @dataclass
    class MyArmActionCfg:
        scale: float = 1.0

    @dataclass
    class Cfg:
        actions: dict

    with pytest.raises(InputRefused, match=r"action term 'arm' is a MyArmActionCfg.*JointPositionActionCfg"):
        check_action_terms("Mine", Cfg({"arm": MyArmActionCfg()}))


@pytest.mark.parametrize("task_id", ["Mjlab-Lift-Cube-Yam-Depth", "Mjlab-Lift-Cube-Yam-Rgb", "Mjlab-Multi-Cube-Seg-Yam"])
def test_camera_tasks_are_refused_before_building(task_id, monkeypatch):
    from duorl.envs import mjlab
    from duorl.envs.mjlab import loader

    def no_build(*a, **k):
        raise AssertionError("a refused task must not be built")

    monkeypatch.setattr(loader, "build_env", no_build)
    with pytest.raises(InputRefused, match="camera images"):
        mjlab.task_spec(task_id, _task_cfg(task_id))


def test_a_video_env_is_built_with_mjlabs_offscreen_renderer(monkeypatch):
    """`duorl play --video` of an mjlab task builds the env with render_mode='rgb_array' (mjlab's own
    offscreen renderer, which needs OpenGL: this machine has none, so the env class is stood in for) and
    takes its frames from env.render(); without --video no renderer is made."""
    import mjlab.envs

    from duorl.envs import mjlab as duorl_mjlab

    made = []

    class Built(Exception):
        pass

    def stand_in(cfg, device, render_mode=None):
        made.append(render_mode)
        raise Built

    monkeypatch.setattr(mjlab.envs, "ManagerBasedRlEnv", stand_in)
    for render, expect in ((True, "rgb_array"), (False, None)):
        with pytest.raises(Built):
            duorl_mjlab.make_vec_env(CARTPOLE, _task_cfg(), 1, "cpu", 0, play=True, render=render)
        assert made[-1] == expect
