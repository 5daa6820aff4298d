"""The outcome step of `duorl train`: the duo's result recorded (rank 0's run_summary.json and manifest, the
rank's failure record under data parallel), the post-training steps run (after_training.py), one line on
the console and the exit code (runtime/outcome.py). Also the summary of a run whose duo raised instead of
returning a result.
"""

from __future__ import annotations

import sys
from typing import Any

from duorl.cli.run_context import RunContext
from duorl.cli.train_steps.after_training import after_training
from duorl.distributed.failure_board import name_the_cause, summary_fields
from duorl.distributed.launch import record_rank_failure
from duorl.runtime.outcome import exit_code, outcome_of


def finish(run: RunContext, result: Any) -> int:
    """Record the outcome (rank 0), run the post-training steps and return the exit code."""
    if result.status == "refused":
        return _finish_refused(run, result)
    if result.status == "failed":
        return _finish_failed(run, result)
    digests = _final_state_digests(run.place.ctx, run.learner)
    directory = run.directory
    if directory is None:
        return 0
    extra = _summary_extras(run, result, digests)
    extra.update(after_training(run))
    env_steps = _total_env_steps(directory, result.env_steps)
    directory.finish(result.status, result.iterations, env_steps, result.wall_s, **extra)
    from duorl.telemetry.metrics_file import NO_EPISODE_YET, RETURN_KEY

    ret = result.last_metrics.get(RETURN_KEY)
    msg = f"duorl: {result.status} {result.iterations} iterations, {env_steps:,} env steps in {result.wall_s:.1f} s"
    msg += f"; mean episode return {ret:.2f}" if ret is not None else f"; {NO_EPISODE_YET}"
    if result.wall_limited:
        msg += f" (stopped by training.max_wall_minutes={run.cfg.training.max_wall_minutes})"
    print(msg, flush=True)
    print(f"duorl: run directory {run.run_dir}", flush=True)
    return 0


def finish_abandoned(directory: Any, iterations: int, wall_s: float, error: BaseException) -> None:
    """The summary of a run whose duo raised: a second Ctrl-C (KeyboardInterrupt while the first one's
    stop finished) is `interrupted`, as its exit code 0 says (runtime/outcome.py); anything else `failed`."""
    steps = _total_env_steps(directory, 0)
    outcome = outcome_of(error)
    if outcome is not None and outcome.status == "interrupted":
        directory.finish("interrupted", iterations, steps, wall_s,
                         stopped_by="a second Ctrl-C: stopped at once, without a final checkpoint")
    else:
        directory.finish("failed", iterations, steps, wall_s, error=repr(error))


def _finish_refused(run: RunContext, result: Any) -> int:
    print(f"error: {result.error}", file=sys.stderr, flush=True)
    if run.directory is not None:
        run.directory.finish("refused", result.iterations, 0, result.wall_s, error=result.error)
    if run.place.ctx is not None:
        record_rank_failure(result.error or "refused", "input")
    return exit_code(result.status)


def _finish_failed(run: RunContext, result: Any) -> int:
    ctx, directory = run.place.ctx, run.directory
    where = f"rank {ctx.rank} ({ctx.host}): " if ctx is not None else ""
    fields: dict[str, Any] = {"error": result.error, "failed_part": result.failed_part}
    lost = ctx is not None and result.failed_part == "peer rank"
    if ctx is not None:
        # a peer rank's loss is only the echo of its failure: the peer's record names the cause (else the
        # launcher replaces it with the cause); the failing rank is named
        cause = name_the_cause(ctx.env, ctx.host, f"{where}{result.error}") if lost else None
        # this node's torchrun reports this rank's error file: the cause, where it is known
        record_rank_failure(cause.message if cause is not None else f"{where}{result.error}",
                            result.failed_part or "learner", secondary=lost)
        fields = summary_fields(ctx.env, f"{where}{result.error}", result.failed_part or "learner", cause)
    if not lost:
        print(f"duorl: error: {where}{result.error}", file=sys.stderr, flush=True)
    if directory is not None:
        directory.finish("failed", result.iterations, _total_env_steps(directory, result.env_steps), result.wall_s,
                         **fields)
    if directory is not None:
        kept = f"last checkpoint checkpoints/{directory.checkpoints[-1]} kept" if directory.checkpoints else "no checkpoint"
        print(f"duorl: run directory {run.run_dir} (status failed; {kept})", file=sys.stderr)
    return exit_code(result.status)


def _total_env_steps(directory: Any, this_rank: int) -> int:
    """The env steps a summary records: every rank's, as last logged or checkpointed (the run directory's
    count), else this process's own count (`this_rank`: nothing logged yet)."""
    return directory.total_env_steps if directory.total_env_steps is not None else this_rank


def _final_state_digests(ctx: Any, learner: Any) -> dict[str, Any] | None:
    """Every rank's learner state, hashed (data parallel keeps them bitwise equal); None alone (ctx None)."""
    if ctx is None:
        return None
    from duorl.distributed.agreement import state_digest

    mine = state_digest(learner.state_dict(), tuple(learner.rank_local_state))
    hashes = ctx.all_gather(mine, "comparing the final learner states", group="startup")
    digests = {"sha256": hashes, "equal": len(set(hashes)) == 1}
    if not digests["equal"] and ctx.rank == 0:
        print(f"duorl: warning: the ranks' final learner states differ: {hashes}", file=sys.stderr, flush=True)
    return digests


def _summary_extras(run: RunContext, result: Any, digests: dict[str, Any] | None) -> dict[str, Any]:
    """The run's manifest updates, and what run_summary.json records beside the status."""
    cfg, directory, run_dir = run.cfg, run.directory, run.run_dir
    assert run_dir is not None
    if result.graph is not None:
        directory.manifest["whole_cycle_cuda_graph"].update(result.graph)
    directory.manifest["collector_tick_cuda_graph"]["active"] = result.tick_graph_active
    extra: dict[str, Any] = {}
    if result.wall_limited:
        extra["stopped_by"] = f"training.max_wall_minutes={cfg.training.max_wall_minutes}"
    if (run_dir / "nan_first_state.pt").exists():
        extra["nan_first_state"] = "nan_first_state.pt"
    if cfg.debug.check_replay_window:
        extra["replay_window_check"] = {
            "samples_checked": result.replay_samples_checked,
            "violations": result.replay_window_violations,
        }
    if run.place.ctx is not None:
        extra["dp_learner_state"] = digests
    return extra
