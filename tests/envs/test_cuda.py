"""GPU-only checks of the mjwarp backend (run with `pytest -m cuda` on the GPU machine)."""

import pytest
import torch

from duorl.config.schema import SimConfig
from duorl.envs.task_sources import task_config
from duorl.envs.backends.mjwarp import MjWarpBackend
from duorl.envs.registry import make_task, make_vec_env
from duorl.envs.vec_env import TaskVecEnv

from .conftest import fixed_actions, mujoco_env

pytestmark = pytest.mark.cuda
N = 64


def _cuda_env(seed: int = 3, max_steps: int = 10) -> TaskVecEnv:
    task = make_task(task_config("pendulum_swingup", max_episode_steps=max_steps))
    backend = MjWarpBackend(task.mj_model(), N, task.substeps, torch.device("cuda:0"))
    return TaskVecEnv(task, backend, seed=seed)


def test_cuda_matches_mujoco():
    env = make_vec_env(task_config("pendulum_swingup", max_episode_steps=10), SimConfig(name="mjwarp"), N, "cuda", 3)
    ref = mujoco_env(N, seed=3, max_episode_steps=10)
    assert env.reset()["actor"].device.type == "cuda"
    ref.reset()
    # CUDA and CPU generators draw different numbers: start both from the same state
    ref.backend.reset_envs(torch.ones(N, dtype=torch.bool), env.backend.qpos.cpu(), env.backend.qvel.cpu())
    for a in fixed_actions(9, N).sign():
        env.step(a.cuda())
        ref.step(a)
        torch.testing.assert_close(env.backend.qpos.cpu().double(), ref.backend.qpos, atol=1e-4, rtol=0)


def test_step_has_no_host_sync():
    env = _cuda_env()
    env.reset()
    acts = fixed_actions(12, N).cuda()
    env.step(acts[0])  # warm-up (module loads)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for a in acts[1:]:
            env.step(a)  # crosses an auto-reset at step 10
    finally:
        torch.cuda.set_sync_debug_mode("default")


def test_step_captures_into_a_torch_cuda_graph():
    """The collector wants a whole tick as one CUDA graph: env.step must be capturable.
    Episodes are long enough that no reset happens, so the comparison does not depend on how the
    captured generator draws."""
    eager, graphed = _cuda_env(max_steps=1000), _cuda_env(max_steps=1000)
    eager.reset(), graphed.reset()
    acts = fixed_actions(23, N).cuda()
    static_a = acts[0].clone()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up off the capture stream, as torch recommends
        for a in acts[:3]:
            static_a.copy_(a)
            graphed.step(static_a)
            eager.step(a)
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    g.register_generator_state(graphed.generator)
    with torch.cuda.graph(g, stream=side, capture_error_mode="thread_local"):
        out_obs, out_r, *_ = graphed.step(static_a)
    for a in acts[3:]:
        static_a.copy_(a)
        g.replay()
        oe, re, *_ = eager.step(a)
        torch.testing.assert_close(out_obs["actor"], oe["actor"], atol=1e-6, rtol=0)
        torch.testing.assert_close(out_r, re, atol=1e-6, rtol=0)


def test_g1_step_has_no_host_sync():
    """Contacts and the constraint solver: the backend's fixed solver iterations read nothing back."""
    env = make_vec_env(task_config("g1_walk_flat"), SimConfig(name="mjwarp"), 32, "cuda", 3)
    env.reset()
    a = torch.zeros(32, env.spec.action_dim, device="cuda")
    env.step(a)  # warm-up (module loads)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for _ in range(3):
            env.step(a)
    finally:
        torch.cuda.set_sync_debug_mode("default")
