"""Both G1 tasks on MuJoCo Warp (warp's CPU device) against the mujoco backend.

One module-scoped build per task, 2 envs, a few steps: MuJoCo Warp compiles its kernels on first
use (the G1's contact kernels add to the pendulum's: about 20 s with a warm ~/.cache/warp, a
minute or more cold) and each CPU step costs ~70 ms.
"""

import pytest
import torch

from duorl.config.schema import SimConfig
from duorl.envs.task_sources import task_config
from duorl.envs.registry import make_vec_env

pytestmark = pytest.mark.mjwarp_cpu

N = 2
TASKS = ("g1_walk_flat", "g1_motion_tracking")


@pytest.fixture(scope="module")
def pairs():
    pytest.importorskip("mujoco_warp")
    out = {}
    for task in TASKS:
        cfg = task_config(task, max_episode_steps=8)
        out[task] = (make_vec_env(cfg, SimConfig(name="mjwarp"), N, "cpu", seed=7),
                     make_vec_env(cfg, SimConfig(name="mujoco", nthread=1), N, "cpu", seed=7))
    yield out
    for w, c in out.values():
        w.close(), c.close()


@pytest.mark.parametrize("task", TASKS)
def test_matches_mujoco_backend(pairs, task):
    """Same seed (same randomised worlds), same actions: float32 MuJoCo Warp follows float64
    MuJoCo C through contacts and an auto-reset."""
    w, c = pairs[task]
    assert w.backend.qpos.dtype == torch.float32
    ow, oc = w.reset(), c.reset()
    torch.testing.assert_close(ow["critic"], oc["critic"], atol=1e-5, rtol=0)
    g = torch.Generator().manual_seed(1)
    truncations = 0
    for _ in range(10):
        a = torch.rand(N, 29, generator=g) * 2 - 1
        ow, rw, tw, uw, iw = w.step(a)
        oc, rc, tc, uc, ic = c.step(a)
        torch.testing.assert_close(w.backend.qpos.double(), c.backend.qpos, atol=1e-4, rtol=0)
        torch.testing.assert_close(ow["critic"], oc["critic"], atol=1e-3, rtol=0)
        torch.testing.assert_close(rw, rc, atol=1e-4, rtol=0)
        assert torch.equal(tw, tc) and torch.equal(uw, uc)
        assert not w.backend.diverged.any()  # the task's capacities hold every constraint row
        truncations += int(uw.sum())
    assert truncations >= 1  # crossed the 8-step time limit (or the clip's end): an auto-reset


def test_randomised_fields_reach_the_warp_model(pairs):
    w, c = pairs["g1_walk_flat"]
    fr = w.backend._m.geom_friction.numpy()
    assert fr.shape[0] == N
    feet = w.task.layout.foot_geoms
    for i in range(N):
        assert abs(fr[i, feet[0], 0] - c.backend.models[i].geom_friction[feet[0], 0]) < 1e-6
    assert fr[0, feet[0], 0] != fr[1, feet[0], 0]


def test_nan_guard_and_snapshot(pairs):
    w, _ = pairs["g1_walk_flat"]
    w.reset()
    w.backend.qvel[1, 7] = float("nan")
    obs, _, te, tr, info = w.step(torch.zeros(N, 29))
    assert int(info["nan_resets"]) == 1 and tr[1] and not te[1]
    assert torch.isfinite(obs["critic"]).all()
    snap = w.nan_snapshot.tensors()
    assert int(snap["env_index"]) == 1 and torch.isnan(snap["qvel_before"][7])
    assert not bool(snap["diverged"])  # non-finite, not flagged by the simulator


def test_capacity_overflow_is_flagged_and_reset(monkeypatch):
    """A world with more constraint rows than njmax: MuJoCo Warp drops the rest and steps on; the
    backend flags it as diverged (its overflow bits) and the NaN guard resets and counts it."""
    pytest.importorskip("mujoco_warp")
    from duorl.envs.tasks.g1_common import G1TaskBase

    # a robot standing on both feet needs about 113 rows (28 foot contacts of 4 rows and joint limits)
    monkeypatch.setattr(G1TaskBase, "mjwarp_put_data_kwargs", {"nconmax": 64, "njmax": 48})
    env = make_vec_env(task_config("g1_walk_flat", max_episode_steps=50), SimConfig(name="mjwarp"), N, "cpu",
                       seed=7)
    env.reset()
    flagged = 0
    for _ in range(12):
        _, reward, terminated, truncated, info = env.step(torch.zeros(N, 29))
        d = env.backend.diverged
        assert torch.equal(d, env.backend._overflow != 0)
        assert int(info["nan_resets"]) == int(d.sum())
        assert truncated[d].all() and not terminated[d].any() and (reward[d] == 0).all()
        flagged += int(d.sum())
    env.close()
    assert flagged >= 2
    assert bool(env.nan_snapshot.taken) and bool(env.nan_snapshot.tensors()["diverged"])
