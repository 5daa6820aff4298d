import functools
import pickle

import pytest

from duorl.config.schema import SimConfig, TaskConfig
from duorl.config.schema import SIMS
from duorl.envs.registry import env_spec, make_vec_env
from duorl.envs.task_sources import task_config
from duorl.envs.tasks.builtin import BUILTIN

PENDULUM = "pendulum_swingup"


def test_env_spec_pendulum():
    spec = env_spec(task_config(PENDULUM))
    assert spec.task == PENDULUM
    assert (spec.actor_obs_dim, spec.critic_obs_dim, spec.action_dim) == (3, 3, 1)
    assert spec.max_episode_steps == 200
    assert spec.control_dt == pytest.approx(0.05)
    assert env_spec(task_config(PENDULUM, max_episode_steps=17)).max_episode_steps == 17


@pytest.mark.parametrize(
    "task,sim,key,value",
    [("cartpole", "mujoco", "task.name", "cartpole"), (PENDULUM, "brax", "sim.name", "brax")],
)
def test_unknown_names_rejected(task, sim, key, value):
    with pytest.raises(ValueError) as e:
        make_vec_env(TaskConfig(name=task), SimConfig(name=sim), 2, "cpu", 0)
    msg = str(e.value)
    # the task name is a ConfigError (task.name=cartpole: ...), the sim's a ValueError (sim.name='brax' ...)
    assert f"{key}={value}" in msg if key == "task.name" else f"{key}={value!r}" in msg
    allowed = BUILTIN if key == "task.name" else SIMS
    assert all(a in msg for a in allowed)


def test_env_spec_unknown_task():
    with pytest.raises(ValueError, match="task.name=nope: unknown task.*pendulum_swingup"):
        env_spec(TaskConfig(name="nope"))


def test_bad_arguments_rejected():
    with pytest.raises(ValueError, match="max_episode_steps"):
        env_spec(task_config(PENDULUM, max_episode_steps=0))
    with pytest.raises(ValueError, match="device must be 'cpu'"):
        make_vec_env(task_config(PENDULUM), SimConfig(name="mujoco"), 2, "cuda:0", 0)
    with pytest.raises(ValueError, match="num_envs"):
        make_vec_env(task_config(PENDULUM), SimConfig(), 0, "cpu", 0)


def test_factory_pickles():
    """The runtime ships functools.partial(make_vec_env, ...) to a spawned collector."""
    factory = functools.partial(make_vec_env, task_config(PENDULUM, max_episode_steps=5), SimConfig(nthread=1), 3,
                                "cpu", 7, True)
    env = pickle.loads(pickle.dumps(factory))()
    try:
        assert env.num_envs == 3 and env.spec.max_episode_steps == 5
        assert env.reset()["actor"].shape == (3, 3)
    finally:
        env.close()
