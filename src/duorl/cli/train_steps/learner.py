"""The learner step of `duorl train`: the learner (restored on resume) on the run's device and seed, and the
rule it steps by: alone, LocalValidity; as a data-parallel rank, the all-reduce synchronizer it joined its
peers with (distributed/learner_join.py, imported only there: a single run does not pay for it).
"""

from __future__ import annotations

import time

import torch

from duorl.algos.grad_buffers import LocalValidity
from duorl.algos.registry import make_learner
from duorl.cli.run_context import RunContext
from duorl.config.seeding import derive_seed
from duorl.startup_phases import PHASES


def build_learner(run: RunContext) -> None:
    """Build the learner and its gradient synchronizer (sets run.learner and run.sync: None alone). The
    start-up record's "learner" phase gets the seconds of its parts: `cuda_device_s` (CUDA's initialisation
    on the run's GPU), `dynamo_import_s` (torch._dynamo, which torch.optim imports), `networks_s`
    (networks, optimizers, restored state), `ranks_joined_s` (data parallel: the peers' agreement)."""
    tr, device, checked, ctx = run.cfg.training, run.device, run.checked, run.place.ctx
    assert checked is not None
    if device.type == "cuda":
        with PHASES.part("cuda_device"):
            # the learner's CUDA graph captures on the current device's stream and registers its default
            # generator: on any GPU but the first, both must be the run's (the collector sets its own)
            torch.cuda.set_device(device)
    if run.cfg.debug.learner_build_delay_ms > 0:  # start-up tests: the collector's env builds meanwhile
        time.sleep(run.cfg.debug.learner_build_delay_ms / 1e3)
    with PHASES.part("dynamo_import"):
        # torch.optim's constructors import it anyway: timed on its own here; `from torch import` binds no
        # local name `torch` (a plain `import torch._dynamo` would, and shadow the module-level one above)
        from torch import _dynamo  # noqa: F401
    with PHASES.part("networks"):
        torch.manual_seed(derive_seed(tr.seed, "learner"))
        # the same networks and update noise on every rank: the learner streams are rank 0's everywhere
        learner = run.learner = make_learner(run.cfg.algo, checked.spec, device, derive_seed(tr.seed, "learner"))
        if checked.learner_state is not None:
            learner.load_state_dict(checked.learner_state)
    if ctx is not None:
        from duorl.distributed.learner_join import join_ranks

        with PHASES.part("ranks_joined"):
            run.sync = join_ranks(learner, ctx, device, tr.dp_gradient_wire_dtype, tr.wait_report_s)
        return
    # alone, the same rule as under data parallel: a step whose loss or gradients are not finite is
    # skipped (on the device), and counted in Train/skipped_updates
    learner.set_synchronizer(LocalValidity(device))
