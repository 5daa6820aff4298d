"""The contract probe (envs/task_probe.py): each way a package's task breaks the Task contract is refused in
one line naming the member, what it returned and what duorl expects (issue #39); a task that keeps the
contract passes. The same factories end to end through `duorl train`: tests/test_bad_input.py."""

from __future__ import annotations

import pytest

from duorl.config.errors import ConfigError
from duorl.envs.task_sources import source_of, task_config

FAKE, BAD = "tests.envs.fake_tasks", "tests.envs.bad_tasks"

# (factory, what the message must say: the member, what it returned, what is expected)
BROKEN = [
    (f"{FAKE}:int_obs", ("observe(sim) returned obs['actor'] as a int64 tensor of shape (2, 3)",
                         "a float32 tensor of shape (2, 3)")),
    (f"{FAKE}:wide_obs", ("observe(sim) returned obs['actor'] as a float32 tensor of shape (2, 4)",
                          "a float32 tensor of shape (2, 3)")),
    (f"{BAD}:wide_qpos", ("reset(mask, rng) returned qpos as a float32 tensor of shape (2, 2)",
                          "a float tensor of shape (2, 1)", "nq=1")),
    (f"{BAD}:float_reward", ("reward(sim) returned a float (0.5)", "a float32 tensor of shape (2,)")),
    (f"{BAD}:column_reward", ("reward(sim) returned a float32 tensor of shape (2, 1)", "a float32 tensor of shape (2,)")),
    (f"{BAD}:float_terminated", ("terminated(sim) returned a float32 tensor of shape (2,)", "a bool tensor of shape (2,)")),
    (f"{BAD}:column_terminated", ("terminated(sim) returned a bool tensor of shape (2, 1)", "a bool tensor of shape (2,)")),
    (f"{BAD}:wide_ctrl", ("apply_action(actions) returned a float32 tensor of shape (2, 2)", "a float tensor of shape (2, 1)",
                          "nu=1")),
    (f"{BAD}:no_actuators", ("mj_model() has no actuators (nu=0)", "add an <actuator>")),
    (f"{BAD}:tuple_obs", ("observe(sim) after reset returned a tuple of 2", "a dict with the keys 'actor' and 'critic'")),
    (f"{BAD}:wrong_control_dt", ("control_dt=0.02 s contradicts substeps * timestep = 5 * 0.01 s = 0.05 s",
                                 "set control_dt=0.05")),
    # values that are NaN or inf from the first step (issue #39): a run would only train on NaN
    (f"{BAD}:nan_obs", ("observe(sim) after reset returned obs['actor'] with 6 of 6 values NaN or inf",
                        "finite values", "make observe(sim) return finite values")),
    (f"{BAD}:inf_reward", ("reward(sim) after a step returned 2 of 2 values NaN or inf", "finite values")),
]


def test_a_task_that_turns_nan_only_later_passes_the_probe() -> None:
    """The probe steps once: NaN after 50 steps is the run's to find (tests/runtime/test_task_nan.py)."""
    for late in (f"{BAD}:nan_reward_late", f"{BAD}:nan_obs_late"):
        assert source_of(late).preflight(task_config(late), None) == []


@pytest.mark.parametrize("name,says", BROKEN, ids=[n.split(":")[1] for n, _ in BROKEN])
def test_a_contract_break_is_one_line_naming_the_member(name: str, says: tuple[str, ...]) -> None:
    source = source_of(name)
    with pytest.raises(ConfigError) as e:
        source.preflight(task_config(name), None)
    msg = str(e.value)
    assert e.value.key == "task.name" and e.value.value == name and "\n" not in msg
    assert "broadcast" not in msg and "Traceback" not in msg, msg
    for s in says:
        assert s in msg, (s, msg)


def test_a_task_that_keeps_the_contract_passes() -> None:
    ok = f"{FAKE}:pendulum"
    assert source_of(ok).preflight(task_config(ok), None) == []
