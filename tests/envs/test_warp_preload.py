"""Warp's module loads counted (envs/backends/warp_loads.py) and preloaded ahead of the first MuJoCo Warp step
(envs/backends/warp_preload.py), on warp's CPU device with the pendulum."""

from __future__ import annotations

import pytest
import torch

from duorl.config.schema import SimConfig
from duorl.envs.backends import warp_loads
from duorl.envs.registry import make_vec_env
from duorl.envs.task_sources import task_config

pytestmark = pytest.mark.mjwarp_cpu

N = 3


def _env():
    pytest.importorskip("mujoco_warp")
    return make_vec_env(task_config("pendulum_swingup", max_episode_steps=20), SimConfig(name="mjwarp"), N, "cpu", seed=3)


@pytest.fixture(scope="module")
def preloaded():
    """An env whose TaskVecEnv started the preload (the first build in this module pays warp's imports)."""
    env = _env()
    assert env.backend._preload is not None
    yield env
    env.close()


def test_the_dry_step_lists_modules_and_runs_nothing(preloaded) -> None:
    from duorl.envs.backends.warp_preload import step_modules

    env = _env()
    b = env.backend
    if b._preload is not None:  # the env's own preload, not under test here
        b._preload.wait()
    before = {k: v.clone() for k, v in b._state_views().items()}
    modules = step_modules(lambda: b._mjw.step(b._m, b._d))  # on the real worlds: nothing may move
    assert modules and all(hasattr(m, "load") for m, _ in modules)
    assert len({id(m) for m, _ in modules}) <= len(modules)
    for k, v in b._state_views().items():
        assert torch.equal(v, before[k]), k
    env.close()


def test_a_preloaded_env_steps_as_one_that_loads_on_its_first_step(preloaded, monkeypatch: pytest.MonkeyPatch) -> None:
    pre = preloaded
    monkeypatch.setenv("DUORL_WARP_COMPILE_THREADS", "0")  # the preload off: the first step loads one by one
    plain = _env()
    assert plain.backend._preload is None
    a = torch.linspace(-1, 1, N).unsqueeze(1)
    for env in (pre, plain):
        env.reset()
        for _ in range(3):
            env.step(a)
    assert pre.backend._preload is None  # the first step waited for it
    assert torch.equal(pre.backend.qpos, plain.backend.qpos) and torch.equal(pre.backend.qvel, plain.backend.qvel)
    plain.close()


def test_module_loads_are_counted_and_warnings_pass_on() -> None:
    class Inner:
        def __init__(self) -> None:
            self.seen: list[tuple[str, str]] = []

        def debug(self, m: str) -> None:
            self.seen.append(("debug", m))

        def info(self, m: str) -> None:
            self.seen.append(("info", m))

        def warning(self, m: str, category=None, stacklevel: int = 1) -> None:
            self.seen.append(("warning", m))

        def error(self, m: str) -> None:
            self.seen.append(("error", m))

    inner = Inner()
    logger = warp_loads._CountingLogger(inner)
    before = warp_loads.LOADS.counter()
    logger.info("Module mujoco_warp._src.smooth 1a2b3c4 load on device 'cuda:0' took 1234.50 ms  (compiled)")
    logger.info("    Module _kernel_abc load on device 'cpu' took 0.50 ms  (cached)")
    logger.info("Warp 1.19.0 initialized: ...")  # Warp's banner: dropped
    logger.warning("careful")
    after = warp_loads.LOADS.counter()
    assert after["warp_modules"] - before["warp_modules"] == 2
    assert after["warp_compiled"] - before["warp_compiled"] == 1
    assert abs(after["warp_compile_s"] - before["warp_compile_s"] - 1.2345) < 1e-9
    assert inner.seen == [("warning", "careful")]


def test_a_query_that_needs_the_module_gets_a_real_load_in_the_dry_step() -> None:
    """On CUDA, MuJoCo Warp asks `wp.get_suggested_block_size` of some kernels inside its step: that call
    loads the module and raises on a load that gives nothing, so only `launch`'s loads may be skipped."""
    wp = pytest.importorskip("warp")
    from duorl.envs.backends.warp_preload import step_modules

    @wp.kernel
    def _double(x: wp.array(dtype=float)):  # type: ignore[valid-type]
        i = wp.tid()
        x[i] = 2.0 * x[i]

    x = wp.array([1.0, 2.0], dtype=float, device="cpu")
    got: list = []

    def query_then_launch() -> None:
        got.append(_double.module.load(wp.get_device("cpu")))  # not from launch: a real load
        wp.launch(_double, dim=2, inputs=[x], device="cpu")  # from launch: recorded, not run

    modules = step_modules(query_then_launch)
    assert got and got[0] is not None
    assert [m for m, _ in modules] == [_double.module]
    assert x.numpy().tolist() == [1.0, 2.0]
