"""The duo step of `duorl train`: where its results go (reporting.py), its settings, its snapshot folder and
its hooks (duo_hooks.py), handed to runtime/duo.Duo with the collector's env and actor factories that the
collector's env step made (collector_env.py) and the prestarted collector building from them.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

from duorl.cli.learner_stall import gone_recorder, stall_recorder
from duorl.cli.run_context import RunContext
from duorl.cli.train_steps.duo_hooks import check_mps_clients, write_startup
from duorl.cli.train_steps.reporting import report
from duorl.config.seeding import derive_seed
from duorl.distributed.rank_scratch import rank_scratch_dir, remove_dead_rank_scratch
from duorl.mps.session import mps_manifest
from duorl.runtime.duo import Duo
from duorl.runtime.settings import DuoSettings


def build_duo(run: RunContext) -> None:
    """Build the duo and its reporting (sets run.directory, run.reporter, run.coordinator, run.snapshot_dir
    and run.duo)."""
    report(run)
    cfg, checked, place, run_dir = run.cfg, run.checked, run.place, run.run_dir
    assert checked is not None and run_dir is not None
    tr, switches, rank, lead, ctx = cfg.training, checked.switches, place.rank, place.lead, place.ctx
    run.snapshot_dir = run_dir / "checkpoints" if lead else _rank_scratch(rank, ctx.env.run_id)
    settings = DuoSettings(
        config=cfg,
        device=str(run.device),
        explore_seed=derive_seed(tr.seed, "explore", rank),
        replay_seed=derive_seed(tr.seed, "replay", rank),
        whole_cycle_cuda_graph=switches.whole_cycle_cuda_graph,
        tick_cuda_graph=switches.tick_cuda_graph,
        snapshot_dir=str(run.snapshot_dir),
        nan_dump_path=str(run_dir / "nan_first_state.pt") if tr.nan_guard.enabled and lead else None,
        nan_loss_iteration=cfg.debug.nan_loss_iteration if cfg.debug.nan_loss_rank == rank else -1,
        fail_capture=cfg.debug.fail_capture_rank == rank,
        on_learner_stalled=stall_recorder(ctx, run_dir if lead else None),
        on_learner_gone=gone_recorder(run_dir if lead else None),
        snapshot_dir_is_scratch=not lead,
        report_startup=lead,
    )
    assert run.env_factory is not None and run.actor_factory is not None
    if run.directory is not None:
        run.directory.manifest["cuda_process_sharing"] = mps_manifest(tr.cuda_process_sharing,
                                                                      [checked.verdict.evidence])
    run.duo = Duo(settings, checked.spec, run.learner, run.env_factory, run.actor_factory, run.reporter,
                  resume=checked.resume_state,
                  on_collector_ready=functools.partial(check_mps_clients, run.mps, ctx, tr.cuda_process_sharing),
                  coordinator=run.coordinator,
                  on_startup=functools.partial(write_startup, run_dir) if lead else None,
                  prestarted=run.prestarted)


def _rank_scratch(rank: int, run_id: str) -> Path:
    """Where a rank other than 0 (which may run on a host without the run directory) keeps its
    collector's snapshots until they are gathered into rank 0's checkpoint: named by the run, so that
    whoever outlives the rank (its collector, the launcher) can remove it (distributed/launch.py)."""
    remove_dead_rank_scratch()  # those of runs killed at once on this host (nobody else removes them)
    path = rank_scratch_dir(run_id, rank, os.getppid())
    path.mkdir(parents=True, exist_ok=True)
    return path
