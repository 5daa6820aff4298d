"""How a rank of a data-parallel `duorl train` leaves when its run raised: a refusal, a lost peer or a failed
write is recorded for the launcher (distributed/launch.record_rank_failure, distributed/failure_board.py) and
the rank leaves at once with its exit code, without the teardown that could wait on a lost peer; anything
else is recorded as the learner's failure and raised on.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from duorl.config.errors import InputRefused
from duorl.distributed.failure_board import name_the_cause
from duorl.distributed.launch import record_rank_failure
from duorl.runtime.atomic_files import WriteFailed
from duorl.runtime.coordination import RankLost
from duorl.runtime.outcome import exit_code, outcome_of


def leave_rank(e: BaseException, renv: Any, ctx: Any) -> None:
    """Record `e`, raised by the run of rank `renv` (distributed/launch.rank_env) with peers `ctx`, and
    leave (exit_now) unless it is the learner's own failure, which the caller raises on."""
    from duorl.distributed.group import RankRefusal

    if isinstance(e, InputRefused):
        # every rank refuses together (RankRefusal) or this rank found its input wrong
        msg = str(e)
        if renv.rank == 0 or not isinstance(e, RankRefusal):
            print(f"error: {msg}", file=sys.stderr, flush=True)
        record_rank_failure(msg, "input")
        exit_now(exit_code("refused"))
    elif isinstance(e, (RankLost, WriteFailed)):
        outcome = outcome_of(e)
        assert outcome is not None and outcome.failed_part is not None
        msg = f"rank {renv.rank} ({ctx.host}): {e}"
        if outcome.secondary:  # the peer's own record names the cause, on every node (failure_board.py)
            cause = name_the_cause(renv, ctx.host, msg)
            # this node's torchrun reports this rank's error file: the cause, where it is known
            record_rank_failure(cause.message if cause is not None else msg, outcome.failed_part, secondary=True)
            exit_now(cause.exit_code if cause is not None else outcome.exit_code)
        record_rank_failure(msg, outcome.failed_part)
        print(f"duorl: error: {msg}", file=sys.stderr, flush=True)
        exit_now(outcome.exit_code)
    else:
        msg = f"rank {renv.rank} ({renv.host}): the learner (pid {os.getpid()}) failed: {type(e).__name__}: {e}"
        record_rank_failure(msg, "learner")


def exit_now(code: int) -> None:
    """Leave a rank at once, skipping teardown that could wait on a lost peer (NCCL, gloo)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
