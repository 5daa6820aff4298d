"""mjlab's logged terms as duorl's Task/ rows: per-env values of every step, [N, M] (envs/base.py).

mjlab logs its terms per finished episode (`extras["log"]`, averaged over the envs that reset). duorl's
task metrics are per step (a row is the mean over the iteration's steps and envs), which also shows them
in iterations where no episode ends. Each row reads the per-step quantity behind one logged term, so that
its mean over an episode that runs to the time limit equals mjlab's logged value:
  Episode_Reward/<term>       the term's weighted reward of the step before mjlab's dt scaling (mjlab
                              logs the episode sum over the episode's length in seconds); zero-weight
                              terms are left out
  Episode_Termination/<term>  1 where this (non-time-out) term ended the env's episode at this step: the
                              fraction of episodes per step it ends (mjlab logs the count per reset)
  Curriculum/<term>/mean      a terrain curriculum's level of each env (its terrain row; mjlab's term,
                              e.g. terrain_levels_vel, logs their mean at each reset); other curriculum
                              terms (the velocity stages: ranges) are not per env and stay unlogged
  Metrics/<command>/<metric>  the command's metric as it stands after the step (mjlab logs it at the
                              reset; a command that accumulates over the episode, the velocity command's
                              error_vel_*, shows its running sum)
  Episode_Metrics/<term>      the metrics manager's value of the step
At most MAX_TASK_METRICS rows, taken in the order rewards, terminations, curriculum, commands, metrics;
task_spec names the rest on stderr.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import torch

from duorl.envs.base import MAX_TASK_METRICS


@dataclass(frozen=True)
class MetricRow:
    name: str
    read: Callable[[Any], torch.Tensor]  # env -> [N] float, after the step, before any reset


def _reward(index: int) -> Callable[[Any], torch.Tensor]:
    return lambda env: env.reward_manager._step_reward[:, index]


def _termination(term: str) -> Callable[[Any], torch.Tensor]:
    return lambda env: env.termination_manager.get_term(term).float()


def _command(command: str, metric: str) -> Callable[[Any], torch.Tensor]:
    return lambda env: env.command_manager.get_term(command).metrics[metric].float()


def _terrain_level(env: Any) -> torch.Tensor:
    return env.scene.terrain.terrain_levels


def terrain_curriculum(env: Any) -> str | None:
    """The curriculum term that moves envs between terrain levels (mjlab's terrain_levels_* functions), when
    the terrain is generated with a curriculum; None otherwise."""
    terrain = getattr(env.scene, "terrain", None)
    generator = getattr(getattr(terrain, "cfg", None), "terrain_generator", None)
    if getattr(terrain, "terrain_levels", None) is None or not getattr(generator, "curriculum", False):
        return None
    cm = env.curriculum_manager
    return next((n for n in getattr(cm, "active_terms", []) or []
                 if getattr(cm.get_term_cfg(n).func, "__name__", "").startswith("terrain_levels")), None)


def _metric(index: int) -> Callable[[Any], torch.Tensor]:
    return lambda env: env.metrics_manager._step_values[:, index]


def metric_rows(env: Any) -> tuple[list[MetricRow], tuple[str, ...]]:
    """(the rows duorl logs, the names of those beyond MAX_TASK_METRICS) for a built env."""
    rows: list[MetricRow] = []
    rm = env.reward_manager
    for i, name in enumerate(rm.active_terms):
        if rm.get_term_cfg(name).weight != 0.0:
            rows.append(MetricRow(f"Episode_Reward/{name}", _reward(i)))
    tm = env.termination_manager
    for name in tm.active_terms:
        if not tm.get_term_cfg(name).time_out:
            rows.append(MetricRow(f"Episode_Termination/{name}", _termination(name)))
    term = terrain_curriculum(env)
    if term is not None:
        rows.append(MetricRow(f"Curriculum/{term}/mean", _terrain_level))
    cm = env.command_manager
    for command in getattr(cm, "active_terms", []) or []:
        for metric in cm.get_term(command).metrics:
            rows.append(MetricRow(f"Metrics/{command}/{metric}", _command(command, metric)))
    mm = env.metrics_manager
    for i, name in enumerate(getattr(mm, "active_terms", []) or []):
        rows.append(MetricRow(f"Episode_Metrics/{name}", _metric(i)))
    return rows[:MAX_TASK_METRICS], tuple(r.name for r in rows[MAX_TASK_METRICS:])


def read_metrics(env: Any, rows: list[MetricRow]) -> torch.Tensor:
    """[N, len(rows)] float32 of the step mjlab just took."""
    return torch.stack([r.read(env).float() for r in rows], dim=1)
