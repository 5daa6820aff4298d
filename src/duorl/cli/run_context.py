"""What the steps of `duorl train` share: one `RunContext` per process, handed from step to step.

cli/train.py runs its steps (cli/train_steps/) in order (checks, run directory, the collector's env, learner,
reporting and duo, outcome); each reads what the steps before it set on the context and sets its own part, so no step takes
more than the context and what it alone computed. A field is None until its step has run (docs/design.md §1
"The run context").
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from duorl.config.errors import InputRefused

if TYPE_CHECKING:  # annotations only: the context holds them, it builds none of them
    import torch

    from duorl.config.schema import Config
    from duorl.config.switches import Switches
    from duorl.mps.session import MpsSession, MpsVerdict


@dataclass
class Place:
    """Where this process sits in the run: its rank and the world's size, and its peers (ctx; None alone)."""

    ctx: Any
    rank: int = 0
    world: int = 1

    @classmethod
    def of(cls, ctx: Any) -> "Place":
        return cls(ctx, ctx.rank, ctx.world_size) if ctx is not None else cls(None)

    @property
    def lead(self) -> bool:
        return self.rank == 0

    @property
    def data_parallel(self) -> bool:
        return self.ctx is not None

    def agree(self, problem: str | None, what: str) -> None:
        """Without peers a problem refuses the run here; with them every rank refuses together."""
        if self.ctx is not None:
            self.ctx.agree(problem, what)
        elif problem is not None:
            raise InputRefused(problem)


@dataclass
class Checked:
    """What the checks before anything is built found and decided."""

    switches: "Switches"
    verdict: "MpsVerdict"
    source: Any  # the task's source (envs/task_sources.TaskSource): its facts and builders
    task: Any  # None: a source that builds a whole VecEnv (mjlab), without a Task
    spec: Any
    resume_state: Any = None
    resumed_from: Any = None
    learner_state: Any = None


@dataclass
class RunContext:
    """One process's run of `duorl train`: what it was given (the configuration, its device, its MPS
    session, its place among the ranks) and what each step adds, in the order the steps run."""

    cfg: "Config"
    device: "torch.device"
    mps: "MpsSession"
    place: Place
    t0: float  # perf_counter at the start of the run: the wall time a failure outside the loop records
    prestarted: Any = None  # the collector's process, started before the config is read (runtime/prestart.PrestartedCollector)
    # the checks: the configuration as data (config.load.config_to_dict), made once: the ranks compare it, a
    # resumed checkpoint's configuration is checked against it, run_config.json keeps it; and their findings
    record: dict[str, Any] | None = None
    checked: Checked | None = None
    # the run directory (every rank knows its path; rank 0 alone writes it)
    run_dir: Path | None = None
    # the collector's env and actor factories (sent to the prestarted collector, which builds from them)
    env_factory: Any = None
    actor_factory: Any = None
    # the learner and its gradient synchronizer (the data-parallel one; None alone)
    learner: Any = None
    sync: Any = None
    # rank 0's RunDirectory (None on other ranks), where the duo's results go, the ranks' coordinator
    directory: Any = None
    reporter: Any = None
    coordinator: Any = None
    # where the collector's snapshots go (rank 0: the run's checkpoints; other ranks: a scratch folder)
    snapshot_dir: Path | None = None
    duo: Any = None
