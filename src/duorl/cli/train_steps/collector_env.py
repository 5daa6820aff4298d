"""The collector's env step of `duorl train`: the collector's env and actor factories (plain partials of the
registries, which pickle into the spawned collector: docs/design.md §1), made once from what the checks
found, and sent to the prestarted collector (runtime/prestart.PrestartedCollector.build) so that it builds its env,
its actor and its first observation while the learner is built and captures, instead of after.

It runs once the checks passed (the memory check among them: nothing the env allocates comes before it) and
the run directory is claimed: with peers, every rank has agreed by then on the configuration, the MPS
verdicts, the checkpoint and the memory, so an early env build is as safe under data parallel as alone.
"""

from __future__ import annotations

import functools

from duorl.algos.registry import make_actor
from duorl.cli.run_context import RunContext
from duorl.config.seeding import derive_seed
from duorl.envs.registry import make_vec_env


def start_collector_env(run: RunContext) -> None:
    """Make the collector's factories (sets run.env_factory and run.actor_factory) and send them to the
    prestarted collector, which starts building."""
    cfg, checked, rank = run.cfg, run.checked, run.place.rank
    assert checked is not None
    tr, switches = cfg.training, checked.switches
    run.actor_factory = functools.partial(make_actor, cfg.algo, checked.spec)
    run.env_factory = functools.partial(
        make_vec_env,
        cfg.task,
        cfg.sim,
        tr.num_envs,
        switches.env_device,
        derive_seed(tr.seed, "env", rank),
        tr.nan_guard.enabled,
        cfg.debug.nan_inject_step,
        compile=switches.tick_compile,
        solver_early_exit=switches.solver_early_exit,
    )
    if run.prestarted is not None:
        run.prestarted.build(run.env_factory, run.actor_factory, str(run.device), tr.torch_threads,
                             fail_env_build=cfg.debug.fail_env_build)
