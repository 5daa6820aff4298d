"""The NaN guard keeps the first offending env's state once, with no host sync in step()."""

import math

import torch

from .conftest import mujoco_env

N = 4


def test_first_offending_state_is_kept_once():
    env = mujoco_env(N, seed=0)
    env.reset()
    snap = env.nan_snapshot
    env.step(torch.ones(N, 1))
    assert not bool(snap.taken) and int(snap.env_index) == -1
    before_q = env.backend.qpos.clone()
    env.backend.qvel[2, 0] = float("nan")
    env.backend.qvel[3, 0] = float("inf")
    _, _, _, truncated, info = env.step(torch.full((N, 1), 0.5))
    assert int(info["nan_resets"]) == 2 and truncated[2:].all()
    assert bool(snap.taken) and int(snap.env_index) == 2  # the lowest bad index
    t = snap.tensors()
    assert t["qpos_before"][0] == before_q[2, 0] and math.isnan(float(t["qvel_before"][0]))
    assert t["action"].tolist() == [0.5]
    assert set(t) == {"env_index", "qpos_before", "qvel_before", "action", "qpos", "qvel", "obs_actor",
                      "obs_critic", "reward", "diverged"}
    assert bool(t["diverged"])  # MuJoCo C met the NaN in its state and reset the world itself
    assert all(v.device.type == "cpu" for v in t.values())
    # a later bad env is counted, not recorded
    env.backend.qvel[0, 0] = float("nan")
    _, _, _, _, info = env.step(torch.zeros(N, 1))
    assert int(info["nan_resets"]) == 1 and int(snap.env_index) == 2
    assert snap.tensors()["action"].tolist() == [0.5]
    env.close()


def test_no_snapshot_without_the_guard():
    env = mujoco_env(N, seed=0, nan_guard=False)
    env.reset()
    env.backend.qvel[1, 0] = float("nan")
    env.step(torch.zeros(N, 1))
    assert not bool(env.nan_snapshot.taken)
    env.close()
