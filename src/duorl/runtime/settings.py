"""DuoSettings: what one duo (learner and collector) runs with, as one picklable object.

It holds the run's resolved Config itself plus what a rank derives from it (device, seeds, resolved
switches, paths): the learner loop and the spawned collector read the same object, so no setting is
copied field by field on its way down.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from duorl.config.schema import Config
from duorl.runtime.heartbeat import StallBounds
from duorl.runtime.replay import AgeBias


@dataclass(frozen=True)
class DuoSettings:
    """What one duo runs with: the resolved Config itself, and what this rank derives from it (its
    device, seeds, resolved switches and paths). Picklable: the collector gets this same object. A
    setting is read from `config` (`settings.config.training.log_interval`); the properties below are
    the duo's shape, read on every iteration, and the values derived from several settings."""

    config: Config
    device: str
    explore_seed: int
    replay_seed: int
    # learner iterations as whole-cycle CUDA graphs (duorl.gpu.graphs; CUDA only), resolved for this rank
    whole_cycle_cuda_graph: bool = False
    # collector ticks as one CUDA graph each (runtime/tick.py; CUDA envs only), resolved
    tick_cuda_graph: bool = False
    # where the collector leaves its state for checkpoints (None: no exact-resume state is kept)
    snapshot_dir: str | None = None
    # where the first non-finite env state the NaN guard met is saved, once (None: not saved)
    nan_dump_path: str | None = None
    # this rank's debug.nan_loss_iteration (-1 on every rank but debug.nan_loss_rank)
    nan_loss_iteration: int = -1
    # this rank's whole-cycle graph capture fails (debug.fail_capture_rank)
    fail_capture: bool = False
    # the collector calls this (pickled: a module-level function) before it ends a frozen learner
    on_learner_stalled: Callable[[str], None] | None = None
    # ... and this when the learner died without a word (SIGKILL, the OOM killer)
    on_learner_gone: Callable[[str], None] | None = None
    # snapshot_dir is a scratch folder of this rank (removed by the collector if the learner dies)
    snapshot_dir_is_scratch: bool = False
    # print the start-up lines (duorl/startup_phases.py): rank 0's learner and collector
    report_startup: bool = False

    @property
    def num_envs(self) -> int:
        return self.config.training.num_envs

    @property
    def env_steps_per_sync(self) -> int:
        return self.config.training.env_steps_per_sync

    @property
    def buffer_size(self) -> int:  # ring capacity in ticks
        return self.config.algo.buffer_size

    @property
    def max_iterations(self) -> int:
        return self.config.algo.max_iterations

    @property
    def updates_per_step(self) -> int:
        return self.config.algo.updates_per_step

    @property
    def max_wall_s(self) -> float | None:  # stop at the first iteration boundary after this (None: no limit)
        minutes = self.config.training.max_wall_minutes
        return minutes * 60.0 if minutes is not None else None

    @property
    def replay_age_bias(self) -> AgeBias | None:  # age-biased replay sampling (WarpSAC); None = uniform
        return AgeBias.of(self.config.algo)

    @property
    def stall(self) -> StallBounds:  # liveness: stall bounds of both processes (runtime/heartbeat.py)
        return StallBounds.of(self.config)
