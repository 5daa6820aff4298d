"""The checks step of `duorl train`: every check that refuses a run before anything is built, in the order a
user meets them (the task's first check, the ranks' configurations, CUDA MPS, the task's inputs and the run
directory's path, the checkpoint to resume, the memory), and the switches the run resolves once.

It sets run.record (the configuration as data, which the ranks compare, the checkpoint's is checked against
and run_config.json keeps) and run.checked (what the later steps build from).
"""

from __future__ import annotations

import sys
from typing import Any

import torch

from duorl.cli.preflight import preflight
from duorl.cli.run_context import Checked, RunContext
from duorl.cli.train_steps.memory import check_memory
from duorl.cli.train_steps.resume import resume
from duorl.config.load import config_to_dict
from duorl.config.switches import Switches, resolve_switches
from duorl.envs.task_sources import source_of
from duorl.mps.session import MpsVerdict


def check(run: RunContext) -> int | None:
    """Run every check (sets run.record and run.checked); an exit code where the run stops here."""
    cfg, place, tr, ctx = run.cfg, run.place, run.cfg.training, run.place.ctx
    source = source_of(cfg.task.name)
    # the task's first check (a clip that cannot be used) fails here, first (every rank's collector reads it)
    for warning in source.first_check(cfg.task):
        if place.lead:
            print(f"duorl: warning: {warning}", file=sys.stderr, flush=True)
    switches = resolve_switches(cfg, str(run.device), data_parallel=ctx is not None,
                                tick_capturable=source.tick_capturable, steps_in_stages=source.stated.steps_in_stages)
    run.record = config_to_dict(cfg)
    if ctx is not None:
        from duorl.distributed.agreement import config_mismatch

        configs = ctx.all_gather(run.record, "comparing the ranks' configurations", group="startup")
        place.agree(config_mismatch(configs), "comparing configurations")
    verdict = run.mps.probe(str(run.device), str(run.device))  # fails closed before anything is built
    if ctx is None and not verdict.ok:
        print(f"error: {verdict.message}", file=sys.stderr)
        return 2
    place.agree(None if verdict.ok else verdict.message, "probing CUDA MPS")
    if tr.torch_threads > 0:
        torch.set_num_threads(tr.torch_threads)
    run.checked = _check_task(run, source, switches, verdict)
    if tr.resume:  # checked before the learner is built: a checkpoint this run cannot continue fails first
        # what the task starts over when its env starts afresh: asked of the source here, where it is at hand
        resume(run, source.resume_restarts(cfg.task))
    check_memory(run)
    return None


def _check_task(run: RunContext, source: Any, switches: Switches, verdict: MpsVerdict) -> Checked:
    """The task's shapes and inputs, and the run directory's path (duorl/cli/preflight.py)."""
    cfg = run.cfg
    # unbound: shapes and state names, no simulation (None: a whole VecEnv without a Task, mjlab's)
    task = source.checked_task(cfg.task)  # the one the config checks built (a slow factory runs once)
    spec = source.spec(cfg.task) if task is None else task.spec
    found = preflight(cfg, source, spec, task, run.place.lead)
    for warning in found.warnings:
        print(f"duorl: warning: {warning}", file=sys.stderr, flush=True)
    run.place.agree(found.problem, "checking the run's inputs")
    return Checked(switches, verdict, source, task, spec)
