"""The mjwarp backend on warp's CPU device, checked against the mujoco backend.

Building MuJoCo Warp compiles its kernels on first use (~45 s on CPU, then cached in ~/.cache/warp),
and each CPU step is slow, so the module shares one small build and keeps episodes short.
"""

import math

import pytest
import torch

from duorl.config.schema import SimConfig
from duorl.envs.task_sources import task_config
from duorl.envs.registry import make_vec_env

from .conftest import fixed_actions, mujoco_env

pytestmark = pytest.mark.mjwarp_cpu

N = 3
T = 8  # short episodes so the parity run crosses auto-resets


@pytest.fixture(scope="module")
def warp_env():
    pytest.importorskip("mujoco_warp")
    env = make_vec_env(task_config("pendulum_swingup", max_episode_steps=T), SimConfig(name="mjwarp"), N, "cpu", seed=11)
    yield env
    env.close()


def test_state_views_are_float32_cpu(warp_env):
    b = warp_env.backend
    assert b.qpos.shape == (N, 1) and b.qvel.shape == (N, 1)
    assert b.qpos.dtype == torch.float32 and b.qpos.device == torch.device("cpu")


@pytest.mark.slow
def test_matches_mujoco_backend(warp_env):
    """Same seed and actions: the two backends follow the same trajectory (float32 vs float64),
    through two auto-resets."""
    ref = mujoco_env(N, seed=11, max_episode_steps=T)
    ow, orf = warp_env.reset(), ref.reset()
    torch.testing.assert_close(ow["actor"], orf["actor"], atol=1e-6, rtol=0)
    # swing hard so the states move far from the start within the run
    acts = fixed_actions(2 * T + 2, N, seed=5).sign()
    for a in acts:
        ow, rw, tw, uw, iw = warp_env.step(a)
        orf, rr, tr, ur, ir = ref.step(a)
        torch.testing.assert_close(warp_env.backend.qpos.double(), ref.backend.qpos, atol=1e-4, rtol=0)
        torch.testing.assert_close(warp_env.backend.qvel.double(), ref.backend.qvel, atol=1e-4, rtol=0)
        torch.testing.assert_close(ow["actor"], orf["actor"], atol=1e-4, rtol=0)
        torch.testing.assert_close(iw["final_obs"]["actor"], ir["final_obs"]["actor"], atol=1e-4, rtol=0)
        torch.testing.assert_close(rw, rr, atol=1e-4, rtol=0)
        assert torch.equal(uw, ur) and torch.equal(tw, tr)
        torch.testing.assert_close(iw["episode_return"], ir["episode_return"], atol=1e-3, rtol=0)
    ref.close()


def test_nan_guard(warp_env):
    warp_env.reset()
    warp_env.step(torch.ones(N, 1))
    warp_env.backend.qvel[2, 0] = float("nan")
    obs, reward, terminated, truncated, info = warp_env.step(torch.ones(N, 1))
    assert int(info["nan_resets"]) == 1
    assert truncated.tolist() == [False, False, True] and not terminated.any()
    assert reward[2] == 0.0 and torch.isfinite(obs["actor"]).all()
    assert torch.equal(info["final_obs"]["actor"][2], obs["actor"][2])
    assert obs["actor"][2, 0] < math.cos(math.pi - 0.11)
    # the reset cleared the world: it steps on finitely
    obs, _, _, truncated, info = warp_env.step(torch.ones(N, 1))
    assert int(info["nan_resets"]) == 0 and torch.isfinite(obs["actor"]).all()
