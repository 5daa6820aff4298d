"""The rule that ends a run whose task produces NaN or inf (issue #39), in one place with its thresholds.

The NaN guard (envs/vec_env.py) resets an env whose state, observation or reward is not finite and counts
it (Train/nan_resets); the learner skips an update whose loss or gradients are not finite and counts it
(Train/skipped_updates). Both keep the run alive through a rare blow-up, but a task whose observe() or
reward() is NaN most of the time trained nothing and still ended `completed`, exit 0. This check reads
those counts at each log row (host numbers the row already has: no extra device sync) and:

- fails the run (TaskNotFinite: status `failed`, failed_part `task`, exit 1; runtime/outcome.py) when,
  over a window of at least MIN_EPISODE_ENDS finished episodes, more than NAN_RESET_SHARE of them ended
  in a NaN reset, or, over a window of at least MIN_UPDATES updates, more than SKIPPED_SHARE of them were
  skipped; the error names the task's member that was not finite first (observe, reward, the physics
  state, the simulator's divergence flag), the run's step, the env and its episode step;
- warns once when a window had NaN resets but fewer than that share (a few blow-ups: counted, not fatal).

A window is judged at the first row where it is full (a row of one iteration on a few envs holds too few
episodes to tell a broken task from bad luck), then starts anew.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Callable

from duorl.envs.base import NON_FINITE_PARTS

# a window of finished episodes is judged once it holds this many; more than this share of NaN resets fails
MIN_EPISODE_ENDS = 32
NAN_RESET_SHARE = 0.5
# the same for updates skipped for a non-finite loss or gradient
MIN_UPDATES = 32
SKIPPED_SHARE = 0.5

# what each part of envs/base.py NON_FINITE_PARTS is, as a message names it
PART_WORDS = {
    "observe": "the task's observe(sim) returned NaN or inf",
    "reward": "the task's reward(sim) returned NaN or inf",
    "state": "the physics state (qpos/qvel) became NaN or inf (the task's reset() or apply_action(), or an "
             "unstable simulation)",
    "diverged": "the simulator found the world diverged (MuJoCo C reset it: a NaN, inf or huge value in its "
                "controls or state; or MuJoCo Warp overflowed a contact or constraint capacity)",
}
assert set(PART_WORDS) == set(NON_FINITE_PARTS)
# the order of causes: a NaN state makes NaN observations and rewards; a NaN observation makes NaN actions,
# hence a NaN reward (an action cost) and a diverged world; the simulator's own flag alone comes last
_ORDER = ("state", "observe", "reward", "diverged")
# how a message names a part that came with the cause in the same step
_ALSO = {"observe": "observe(sim)", "reward": "reward(sim)", "state": "the state", "diverged": "the simulator's "
         "divergence flag"}


class TaskNotFinite(RuntimeError):
    """The task's values were not finite most of the time: the run fails, naming the member and step."""


@dataclass(frozen=True)
class FirstNonFinite:
    """The NaN guard's first broken env (the collector's nan_first_* stats)."""

    parts: tuple[str, ...]  # NON_FINITE_PARTS that were not finite
    step: int  # the run's step (1-based: each env's step count)
    episode_step: int
    env: int

    @classmethod
    def from_stats(cls, cstats: dict[str, float]) -> "FirstNonFinite | None":
        if "nan_first_mask" not in cstats:
            return None
        mask = int(cstats["nan_first_mask"])
        return cls(tuple(p for p in _ORDER if mask >> NON_FINITE_PARTS.index(p) & 1), int(cstats["nan_first_step"]),
                   int(cstats["nan_first_episode_step"]), int(cstats["nan_first_env"]))

    def words(self) -> str:
        """The cause (the first part in _ORDER), what followed from it in that step, and where."""
        if not self.parts:
            return f"a value was NaN or inf, first at step {self.step} of the run"
        cause, *rest = self.parts
        also = f" (in the same step, following from it: {', '.join(_ALSO[p] for p in rest)})" if rest else ""
        return (f"{PART_WORDS[cause]}{also}, first at step {self.step} of the run (env {self.env}, its episode's "
                f"step {self.episode_step})")

    def fix(self) -> str:
        if self.parts and self.parts[0] in ("observe", "reward"):
            return f"make the task's {self.parts[0]}(sim) return finite values"
        return ("make the task's reset() and apply_action() return finite values, or steady the simulation "
                "(a smaller timestep, more substeps, smaller action_scale)")


@dataclass
class _Window:
    """Bad events among all events, since the window opened."""

    bad: float = 0.0
    total: float = 0.0


class FinitenessCheck:
    """Fed every iteration's collector statistics and update count; judged at each log row (`row`)."""

    def __init__(self, skipped_at_start: float = 0.0, warn: Callable[[str], None] | None = None) -> None:
        self._episodes = _Window()
        self._updates = _Window()
        self._skipped_seen = float(skipped_at_start)  # Train/skipped_updates counts from the run's first update
        self._first: FirstNonFinite | None = None
        self._warned = False
        self._warn = warn if warn is not None else (lambda line: print(line, file=sys.stderr, flush=True))

    def add(self, cstats: dict[str, float] | None, updates: int) -> None:
        """One learner iteration: the collector's statistics it read (None: none yet) and its updates."""
        self._updates.total += updates
        if cstats is None:
            return
        self._episodes.bad += cstats.get("nan_resets", 0.0)
        self._episodes.total += cstats.get("episodes", 0.0) + cstats.get("eval_episodes", 0.0)
        first = FirstNonFinite.from_stats(cstats)
        if first is not None:
            self._first = first

    def row(self, iteration: int, skipped_total: float | None) -> None:
        """At the log row after `iteration` iterations: raise TaskNotFinite, warn once, or pass.
        `skipped_total`: the row's Train/skipped_updates (None where the learner counts none)."""
        if skipped_total is not None:
            self._updates.bad += skipped_total - self._skipped_seen
            self._skipped_seen = skipped_total
        resets, updates = self._episodes, self._updates
        nan_full = resets.total >= MIN_EPISODE_ENDS
        skip_full = updates.total >= MIN_UPDATES
        nan_fails = nan_full and resets.bad > NAN_RESET_SHARE * resets.total
        skip_fails = skip_full and updates.bad > SKIPPED_SHARE * updates.total
        if nan_fails or skip_fails:
            raise TaskNotFinite(self._message(iteration, nan_fails, skip_fails))
        if resets.bad > 0 and not self._warned:
            self._warned = True
            self._warn(f"duorl: warning: {resets.bad:.0f} env(s) reset for a value that was not finite by iteration "
                       f"{iteration} (Train/nan_resets): {self._first_words()}; the run goes on (it fails once more "
                       f"than {NAN_RESET_SHARE:.0%} of {MIN_EPISODE_ENDS} or more finished episodes end so)")
        if nan_full:
            self._episodes = _Window()
        if skip_full:
            self._updates = _Window()

    def _first_words(self) -> str:
        return self._first.words() if self._first is not None else "a state, observation or reward was NaN or inf"

    def _message(self, iteration: int, nan_fails: bool, skip_fails: bool) -> str:
        r, u = self._episodes, self._updates
        counts = []
        if nan_fails or r.bad > 0:
            counts.append(f"{r.bad:.0f} of the last {r.total:.0f} finished episodes ended in a NaN reset "
                          "(Train/nan_resets)")
        if skip_fails or u.bad > 0:
            counts.append(f"{u.bad:.0f} of the last {u.total:.0f} updates were skipped for a loss or gradient "
                          "that was not finite (Train/skipped_updates)")
        if self._first is not None:
            cause, fix = self._first.words(), self._first.fix()
        elif nan_fails:
            cause, fix = self._first_words(), "make the task's state, observations and reward finite"
        else:  # every env stayed finite, the learner's losses did not
            cause = "the task's values stayed finite, the learner's losses did not"
            fix = ("look for huge observations or rewards in the task (a reward scale, an unnormalised "
                   "observation), or lower algo.actor_lr and algo.critic_lr")
        return (f"the task produces values that are not finite: {cause}; by iteration {iteration}, "
                f"{' and '.join(counts)}. Fix: {fix} (the first broken env's state before and after that step "
                "is in the run directory's nan_first_state.pt)")
