"""A task that produces NaN or inf fails its run, naming the member and the step (issue #39): the rule
(runtime/task_finiteness.py) on its own, then real runs of tests/envs/bad_tasks.py's tasks that turn NaN
after some steps (NaN from the first step is refused before the run: tests/envs/test_task_probe.py)."""

from __future__ import annotations

import json

import pytest

from duorl.envs.base import NON_FINITE_PARTS
from duorl.runtime.outcome import outcome_of
from duorl.runtime.task_finiteness import (MIN_EPISODE_ENDS, MIN_UPDATES, FinitenessCheck, FirstNonFinite,
                                           TaskNotFinite)
from tests.conftest import run_duorl


def _stats(nan: float, episodes: float, parts: tuple[str, ...] = (), step: int = 51) -> dict[str, float]:
    out = {"nan_resets": nan, "episodes": episodes}
    if parts:
        mask = sum(1 << NON_FINITE_PARTS.index(p) for p in parts)
        out.update(nan_first_mask=mask, nan_first_step=step, nan_first_episode_step=step, nan_first_env=0)
    return out


def test_most_episodes_ending_in_nan_resets_fail_naming_the_member_and_step():
    lines: list[str] = []
    check = FinitenessCheck(warn=lines.append)
    check.add(_stats(MIN_EPISODE_ENDS, MIN_EPISODE_ENDS, ("reward",)), updates=2)
    with pytest.raises(TaskNotFinite) as e:
        check.row(10, 0.0)
    msg = str(e.value)
    assert "reward(sim) returned NaN or inf" in msg and "first at step 51 of the run" in msg, msg
    assert f"{MIN_EPISODE_ENDS} of the last {MIN_EPISODE_ENDS} finished episodes" in msg
    assert "Fix: make the task's reward(sim) return finite values" in msg and "\n" not in msg
    assert outcome_of(e.value).status == "failed" and outcome_of(e.value).failed_part == "task"
    assert outcome_of(e.value).exit_code == 1 and not lines


def test_the_cause_is_named_first_and_what_followed_from_it_after():
    """A NaN observation makes NaN actions, a NaN reward and a diverged world in the same step."""
    first = FirstNonFinite.from_stats(_stats(1, 1, ("diverged", "reward", "observe")))
    assert first is not None and first.parts == ("observe", "reward", "diverged")
    assert first.words().startswith("the task's observe(sim) returned NaN or inf (in the same step, following from it")
    state = FirstNonFinite.from_stats(_stats(1, 1, ("observe", "state")))
    assert state is not None and state.parts[0] == "state" and "apply_action" in state.fix()


def test_a_few_nan_resets_are_warned_once_and_the_run_goes_on():
    lines: list[str] = []
    check = FinitenessCheck(warn=lines.append)
    for k in range(1, 6):
        check.add(_stats(1.0 if k == 2 else 0.0, 10.0, ("reward",) if k >= 2 else (), step=30), updates=2)
        check.row(k, 0.0)
    assert len(lines) == 1, lines
    assert "1 env(s) reset" in lines[0] and "reward(sim) returned NaN or inf, first at step 30" in lines[0]


def test_a_window_too_small_to_judge_is_carried_to_the_next_row():
    """One iteration on 4 envs holds too few episodes to tell a broken task from bad luck."""
    check = FinitenessCheck(warn=lambda _: None)
    for k in range(1, MIN_EPISODE_ENDS // 4):
        check.add(_stats(4, 4, ("observe",)), updates=0)
        check.row(k, None)  # 4 of 4 NaN resets per row, but fewer than MIN_EPISODE_ENDS so far
    check.add(_stats(4, 4, ("observe",)), updates=0)
    with pytest.raises(TaskNotFinite, match="observe"):
        check.row(MIN_EPISODE_ENDS // 4, None)


def test_healthy_episodes_dilute_nan_resets_below_the_share():
    check = FinitenessCheck(warn=lambda _: None)
    for k in range(1, 20):
        check.add(_stats(MIN_EPISODE_ENDS // 4, MIN_EPISODE_ENDS, ("state",)), updates=2)
        check.row(k, 0.0)


def test_mostly_skipped_updates_fail_even_with_finite_envs():
    check = FinitenessCheck(warn=lambda _: None)
    check.add(_stats(0, 0), updates=MIN_UPDATES)
    with pytest.raises(TaskNotFinite) as e:
        check.row(5, float(MIN_UPDATES))
    msg = str(e.value)
    assert f"{MIN_UPDATES} of the last {MIN_UPDATES} updates were skipped" in msg, msg
    assert "losses did not" in msg and "algo.critic_lr" in msg


def test_a_resumed_runs_earlier_skips_do_not_count_and_one_skip_never_fails():
    """Train/skipped_updates counts from the run's first update: a resume starts from its count; a
    single invalid update (debug.nan_loss_iteration) is skipped, not fatal."""
    check = FinitenessCheck(skipped_at_start=100.0, warn=lambda _: None)
    for k in range(1, 40):
        check.add(_stats(0, 0), updates=2)
        check.row(k, 100.0 + (1.0 if k >= 3 else 0.0))


def _run(tmp_path, task: str):
    run = tmp_path / "run"
    p = run_duorl(run, "algo.max_iterations=100", "training.log_interval=10", "training.no_play=true",
                  task=f"tests.envs.bad_tasks:{task}")
    summary = json.loads((run / "run_summary.json").read_text())
    return p, summary


@pytest.mark.slow
@pytest.mark.parametrize("task,member,step", [("nan_reward_late", "reward(sim)", 51), ("nan_obs_late", "observe(sim)", 61)])
def test_a_task_that_turns_nan_fails_the_run(tmp_path, task, member, step):
    """Before: `completed`, exit 0 (every env NaN-reset from that step on, no word)."""
    p, summary = _run(tmp_path, task)
    assert p.returncode == 1, p.stderr[-3000:]
    assert summary["status"] == "failed" and summary["failed_part"] == "task", summary
    errors = [line for line in p.stderr.splitlines() if line.startswith("duorl: error:")]
    assert len(errors) == 1 and "Traceback" not in p.stderr, p.stderr[-3000:]
    for said in (errors[0], summary["error"]):
        assert f"the task's {member} returned NaN or inf" in said and f"first at step {step} of the run" in said, said
    assert summary["iterations"] < 100  # stopped at the row that found it, not at the end


@pytest.mark.slow
def test_one_nan_reward_is_counted_warned_once_and_the_run_completes(tmp_path):
    p, summary = _run(tmp_path, "nan_reward_once")
    assert p.returncode == 0, p.stderr[-3000:]
    assert summary["status"] == "completed"
    warnings = [line for line in p.stderr.splitlines() if "reset for a value that was not finite" in line]
    assert len(warnings) == 1, p.stderr[-3000:]
    assert "reward(sim) returned NaN or inf, first at step 30 of the run (env 0" in warnings[0]
