"""The VecEnv contract (envs/base.py) on the mujoco backend."""

import math

import pytest
import torch

from .conftest import fixed_actions, mujoco_env

N = 4


def test_shapes_and_dtypes():
    env = mujoco_env(N)
    assert env.device == torch.device("cpu") and env.num_envs == N
    obs = env.reset()
    assert set(obs) == {"actor", "critic"}
    assert obs["actor"].shape == (N, env.spec.actor_obs_dim) and obs["actor"].dtype == torch.float32
    assert obs["critic"].shape == (N, env.spec.critic_obs_dim) and obs["critic"].dtype == torch.float32
    obs, reward, terminated, truncated, info = env.step(torch.zeros(N, 1))
    assert reward.shape == (N,) and reward.dtype == torch.float32
    assert terminated.shape == (N,) and terminated.dtype == torch.bool
    assert truncated.shape == (N,) and truncated.dtype == torch.bool
    assert set(info) == {"final_obs", "episode_return", "episode_length", "nan_resets"}
    assert {k: v.shape for k, v in info["final_obs"].items()} == {k: v.shape for k, v in obs.items()}
    assert info["episode_return"].shape == (N,) and info["episode_return"].dtype == torch.float32
    assert info["episode_length"].shape == (N,) and info["episode_length"].dtype == torch.int64
    assert info["nan_resets"].shape == () and info["nan_resets"].dtype == torch.int64
    for t in (reward, terminated, truncated, info["nan_resets"], *obs.values()):
        assert t.device == env.device
    env.close()


def test_reset_hangs_down_with_small_noise():
    obs = mujoco_env(64, seed=3).reset()["actor"]
    assert torch.all(obs[:, 0] < math.cos(math.pi - 0.11))  # cos(theta) near -1
    assert torch.all(obs[:, 2].abs() <= 0.1 / 8 + 1e-6)
    assert obs[:, 1].std() > 0  # the noise differs per env


def rollout(env, actions):
    out = [env.reset()["actor"]]
    for a in actions:
        obs, r, te, tr, info = env.step(a)
        out += [obs["actor"], r, te.float(), tr.float(), info["final_obs"]["actor"]]
    env.close()
    return out


def test_same_seed_same_rollout_and_other_seed_differs():
    acts = fixed_actions(30, N)
    a = rollout(mujoco_env(N, seed=5, max_episode_steps=12), acts)
    b = rollout(mujoco_env(N, seed=5, max_episode_steps=12, nthread=1), acts)  # thread count irrelevant
    c = rollout(mujoco_env(N, seed=6, max_episode_steps=12), acts)
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    assert not torch.equal(a[0], c[0])


def test_truncation_auto_reset_and_episode_bookkeeping():
    T = 7
    env = mujoco_env(N, seed=1, max_episode_steps=T)
    env.reset()
    acts = fixed_actions(2 * T + 3, N)
    rewards = []
    for t, a in enumerate(acts):
        prev_state = (env.backend.qpos.clone(), env.backend.qvel.clone())
        obs, reward, terminated, truncated, info = env.step(a)
        rewards.append(reward)
        assert not terminated.any()  # the pendulum never terminates
        done = (t + 1) % T == 0
        assert bool(truncated.all()) == done and bool(truncated.any()) == done
        final = info["final_obs"]["actor"]
        if not done:
            assert torch.equal(final, obs["actor"])
            assert torch.equal(info["final_obs"]["critic"], obs["critic"])
            continue
        # episode totals
        ep = torch.stack(rewards[-T:])
        torch.testing.assert_close(info["episode_return"], ep.sum(0))
        assert torch.equal(info["episode_length"], torch.full((N,), T))
        # final_obs is the state the step reached; obs is a fresh episode's first obs
        assert not torch.equal(final, obs["actor"])
        assert torch.all(obs["actor"][:, 0] < math.cos(math.pi - 0.11))
        # final_obs agrees with stepping the pre-step state by hand
        ref = mujoco_env(N, seed=1, max_episode_steps=T)
        ref.reset()
        ref.backend.reset_envs(torch.ones(N, dtype=torch.bool), *prev_state)
        ref_obs, *_ = ref.step(a)
        torch.testing.assert_close(final, ref_obs["actor"])
        ref.close()
    # mid-episode totals restart after a reset: next episode has 3 steps so far
    assert env._ep_length.tolist() == [3] * N
    torch.testing.assert_close(env._ep_return, torch.stack(rewards[-3:]).sum(0))
    env.close()


def test_episode_return_sums_rewards_over_a_full_episode():
    env = mujoco_env(N, seed=2)
    env.reset()
    total = torch.zeros(N)
    for a in fixed_actions(env.spec.max_episode_steps, N):
        _, reward, _, truncated, info = env.step(a)
        total += reward
    assert bool(truncated.all())
    torch.testing.assert_close(info["episode_return"], total)
    assert info["episode_length"].tolist() == [200] * N
    env.close()


@pytest.mark.parametrize("field,value", [("qpos", float("nan")), ("qvel", float("inf"))])
def test_nan_guard_resets_and_counts(field, value):
    env = mujoco_env(N, seed=4)
    env.reset()
    for a in fixed_actions(3, N):
        env.step(a)
    getattr(env.backend, field)[1, 0] = value  # poison env 1
    obs, reward, terminated, truncated, info = env.step(torch.zeros(N, 1))
    assert int(info["nan_resets"]) == 1
    assert truncated.tolist() == [False, True, False, False]
    assert not terminated.any()
    assert reward[1] == 0.0 and torch.isfinite(reward).all()
    assert torch.isfinite(obs["actor"]).all()
    assert torch.equal(info["final_obs"]["actor"][1], obs["actor"][1])  # reset obs stands in
    assert info["episode_length"][1] == 4
    assert obs["actor"][1, 0] < math.cos(math.pi - 0.11)  # env 1 restarted hanging down
    _, _, _, truncated, info = env.step(torch.zeros(N, 1))
    assert int(info["nan_resets"]) == 0 and not truncated.any()
    env.close()


def test_nan_guard_off_counts_nothing():
    env = mujoco_env(N, seed=4, nan_guard=False)
    env.reset()
    env.backend.qpos[2, 0] = float("nan")
    _, _, _, truncated, info = env.step(torch.zeros(N, 1))
    assert int(info["nan_resets"]) == 0 and not truncated.any()
    env.close()


def test_actions_are_clipped():
    a, b = mujoco_env(N, seed=9), mujoco_env(N, seed=9)
    a.reset(), b.reset()
    oa, ra, *_ = a.step(torch.full((N, 1), 5.0))
    ob, rb, *_ = b.step(torch.ones(N, 1))
    assert torch.equal(oa["actor"], ob["actor"]) and torch.equal(ra, rb)
