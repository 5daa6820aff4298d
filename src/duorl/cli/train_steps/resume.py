"""The resume step of `duorl train` (training.resume): rank 0 reads and checks the checkpoint
(duorl/cli/resume.py), every rank gets the learner's state and its own runtime state, and the manifest's
`resumed_from` says what was resumed and what the task starts over; the ranks refuse together.

Replay can be large: no rank receives another's runtime state.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from duorl.cli.run_context import RunContext
from duorl.config.errors import ConfigError


def resume(run: RunContext, restarts: list[str]) -> None:
    """Load the checkpoint into run.checked (resume_state: this rank's runtime state, learner_state: rank 0's,
    resumed_from: the manifest's record); `restarts`: what the task starts over when its env starts afresh
    (its source's resume_restarts), recorded and printed then."""
    from duorl.cli.resume import load_resume

    cfg, lead, ctx, checked = run.cfg, run.place.lead, run.place.ctx, run.checked
    assert checked is not None and run.record is not None
    problem, found = None, None
    if lead:
        try:
            found = load_resume(cfg.training.resume, run.record, _task_state_keys(checked.task), run.place.world,
                                type(cfg.task))
        except ConfigError as e:
            if ctx is None:
                raise
            problem = str(e)
    if ctx is None:
        assert found is not None
        checked.resume_state, checked.learner_state = found[2][0], found[1]
        checked.resumed_from = _resumed_from(found[0], found[2])
    else:
        ctx.agree(problem, "checking the checkpoint to resume")
        head = ctx.broadcast((found[1], _resumed_from(found[0], found[2])) if lead else None,
                             "sharing the checkpoint to resume")
        checked.resume_state = ctx.scatter_from_zero(list(found[2]) if lead else None,
                                                     "handing every rank its runtime state")
        checked.learner_state, checked.resumed_from = head
    if not checked.resumed_from["collector_state"]:  # the env starts afresh: say what of it training loses
        checked.resumed_from["restarts"] = restarts
        for line in restarts if lead else ():
            print(f"duorl: warning: training.resume: {line}", file=sys.stderr, flush=True)


def _task_state_keys(task: Any) -> tuple[str, ...]:
    """The names of the task's resume state (tasks.base: the optional state_keys()), none if it has none."""
    keys = getattr(task, "state_keys", None)
    return tuple(keys()) if keys is not None else ()


def _resumed_from(ckpt_path: Path, states: list[Any]) -> dict[str, Any]:
    """The manifest's record of a resume (and its one line on the console)."""
    first = states[0]
    note = "" if first.replay is not None else " (replay not in the checkpoint: refilling it first)"
    print(f"duorl: resuming {ckpt_path} at iteration {first.iteration}{note}", flush=True)
    return {
        "checkpoint": str(ckpt_path),
        "iteration": first.iteration,
        "collector_state": all(s.collector is not None for s in states),
        "replay": all(s.replay is not None for s in states),
        "world_size": len(states),
    }
