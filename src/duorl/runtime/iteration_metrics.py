"""What the learner loop logs: per-iteration timings and collector statistics, accumulated between
log rows and turned into the canonical metrics (docs/design.md §8) at each one.

The loop hands over host numbers it already has (no extra sync); device metrics from the learner are
read once per row, outside the update.
"""

from __future__ import annotations

import collections
import torch

from duorl.runtime.control import STAT_FIELDS


class EpisodeWindow:
    """The most recent iterations' finished episodes, as few iterations as still hold at least
    `min_episodes` of them: the mean episode return and length the log reports."""

    def __init__(self, min_episodes: int) -> None:
        self.min_episodes = min_episodes
        self.rows: collections.deque[tuple[float, float, float]] = collections.deque()

    def add(self, cstats: dict[str, float], prefix: str) -> None:
        """One iteration's collector statistics; `prefix` picks the envs ("" exploring, "eval_")."""
        if f"{prefix}episodes" not in cstats:
            return
        self.rows.append((cstats[f"{prefix}episodes"], cstats[f"{prefix}episode_return_sum"],
                          cstats[f"{prefix}episode_length_sum"]))
        while len(self.rows) > 1 and sum(r[0] for r in self.rows) - self.rows[0][0] >= self.min_episodes:
            self.rows.popleft()

    def means(self) -> tuple[float, float] | None:
        """(mean return, mean length), None before the first finished episode."""
        done = sum(r[0] for r in self.rows)
        if done <= 0:
            return None
        return sum(r[1] for r in self.rows) / done, sum(r[2] for r in self.rows) / done


class IterationMetrics:
    """Accumulates iterations between log rows; `row()` returns the metrics of one row."""

    def __init__(self, num_envs: int, eval_envs: int, env_steps_per_sync: int, metric_names: tuple[str, ...],
                 start_wall: float, start_steps: int = 0) -> None:
        self.sps = env_steps_per_sync
        self.metric_names = metric_names
        self.episodes = EpisodeWindow(num_envs - eval_envs)
        self.eval_episodes = EpisodeWindow(eval_envs)
        self.nan_resets = 0.0
        self.cstats: dict[str, float] | None = None
        self.last_wall, self.last_steps = start_wall, start_steps
        self._sums = {"iteration_ms": 0.0, "learner_collector_wait_ms": 0.0, "weight_publish_ms": 0.0}
        self._iterations = 0

    def add(self, iteration_ms: float, wait_ms: float, publish_ms: float, cstats: dict[str, float] | None) -> None:
        """One finished learner iteration: its host timings and the collector's statistics of the
        iteration before it (None when there are none yet)."""
        self._sums["iteration_ms"] += iteration_ms
        self._sums["learner_collector_wait_ms"] += wait_ms
        self._sums["weight_publish_ms"] += publish_ms
        self._iterations += 1
        if cstats is not None:
            self.cstats = cstats
            self.episodes.add(cstats, "")
            self.eval_episodes.add(cstats, "eval_")
            self.nan_resets += cstats["nan_resets"]

    def row(self, env_steps: int, now: float, train_ms: float | None,
            learner_metrics: dict[str, torch.Tensor]) -> dict[str, float]:
        """The metrics since the last row; resets the timing sums. Reads the learner's metrics (a sync)."""
        return self.host_row(env_steps, now).finish(train_ms, {k: float(v) for k, v in learner_metrics.items()})

    def host_row(self, env_steps: int, now: float) -> "HostRow":
        """The part of the row the host has now (timings, collector statistics, episodes); resets the
        timing sums. The learner's part (`HostRow.finish`) may come later, once its values are read."""
        n = max(self._iterations, 1)
        m: dict[str, float] = {f"Perf/{k}": v / n for k, v in self._sums.items()}
        m["Perf/env_steps_per_s"] = (env_steps - self.last_steps) / max(now - self.last_wall, 1e-9)
        c = self.cstats
        if c is not None:
            for key in STAT_FIELDS:
                if key.startswith("collector_") and key in c:
                    m[f"Perf/{key}"] = c[key]
            m["Train/mean_reward"] = c["reward_sum"] / self.sps
            for i, name in enumerate(self.metric_names):
                if f"task_metric_{i}" in c:
                    m[f"Task/{name}"] = c[f"task_metric_{i}"] / self.sps
                if f"eval_task_metric_{i}" in c:
                    m[f"Eval/{name}"] = c[f"eval_task_metric_{i}"] / self.sps
            m["Train/nan_resets"] = self.nan_resets
        for prefix, window in (("Train", self.episodes), ("Eval", self.eval_episodes)):
            means = window.means()
            if means is not None:
                m[f"{prefix}/mean_episode_return"], m[f"{prefix}/mean_episode_length"] = means
        self.last_wall, self.last_steps = now, env_steps
        self._sums = dict.fromkeys(self._sums, 0.0)
        self._iterations = 0
        return HostRow(m, n)


class HostRow:
    """A row's host part (`IterationMetrics.host_row`) over `iterations` iterations, waiting for the learner's."""

    def __init__(self, metrics: dict[str, float], iterations: int) -> None:
        self.metrics, self.iterations = metrics, iterations

    def finish(self, train_ms: float | None, learner_values: dict[str, float]) -> dict[str, float]:
        """The whole row: the learner's train time (summed over the row's iterations) and its metrics."""
        m = dict(self.metrics)
        if train_ms is not None:
            m["Perf/learner_train_ms"] = train_ms / self.iterations
        m.update(learner_values)
        return m
