"""`duorl warmup --task NAME [--algo ALGO] [--sim SIM] [key=value ...]`: fill every compile cache a run of that
task needs, without training, so that the first real run on a new machine starts warm.

It runs the start of the very `duorl train` it is given (the same configuration, so the same shapes,
kernels and graphs): the collector builds its env, its Warp kernel modules compile, its first tick is
compiled (torch.compile: Inductor and Triton) and captured, the learner compiles and captures its first
update cycle (runtime/duo.py captures it while the collector starts), and the run stops after its second
iteration, before any update. Everything compiled lands where a run looks for it (docs/guide.md "Compile
caches"); the run directory it needed is a temporary one, removed at the end. A data-parallel
configuration is warmed on its first device: every rank compiles the same code into the same caches.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from pathlib import Path

# what makes a run a warm-up: two iterations (the collector's first, with its compile and capture, is done
# before the learner's second starts), nothing after training, no resume
WARMUP_OVERRIDES = ("algo.max_iterations=2", "training.no_play=true", "training.export_onnx=false",
                    "training.resume=null", "training.max_wall_minutes=null", "training.data_parallel=null")


def warmup_main(algo: str, task: str, sim: str | None, overrides: list[str]) -> int:
    """Warm this machine's caches for `duorl train --algo ALGO --task TASK [--sim SIM] [overrides]`; the
    exit code of that run (0: the caches are filled)."""
    from duorl.config.errors import InputRefused

    try:
        return _warmup(algo, task, sim, overrides)
    except InputRefused as e:  # a bad key or value, refused before anything is built (exit 2, as train)
        print(f"error: {e}", file=sys.stderr)
        return 2


def _warmup(algo: str, task: str, sim: str | None, overrides: list[str]) -> int:
    from duorl.cli.configure import load_config
    from duorl.gpu.compiling import compile_cache_dirs, use_persistent_compile_caches

    use_persistent_compile_caches()  # before torch._dynamo is imported, as train() does
    scratch = Path(tempfile.mkdtemp(prefix="duorl-warmup-"))
    try:
        forced = [*WARMUP_OVERRIDES, f"training.log_dir={scratch / 'run'}"]
        cfg = load_config(algo, task, sim, [*overrides, *forced])
        devices = cfg.training.devices
        if devices is not None and len(devices) > 1:
            print(f"duorl: warmup on the first of training.devices={devices}: every rank compiles the same code",
                  flush=True)
            cfg = load_config(algo, task, sim, [*overrides, *forced, f"training.devices=[{devices[0]}]"])
        from duorl.cli.train import train

        t0 = time.perf_counter()
        code = int(train(cfg) or 0)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if code == 0:
        caches = compile_cache_dirs()
        print(f"duorl: warmup: {cfg.task.name} ({cfg.algo.name}, {cfg.sim.name}, {cfg.training.num_envs} envs) compiled "
              f"in {time.perf_counter() - t0:.1f} s into {caches['torchinductor']} and {caches['warp']}; "
              f"`duorl train` with the same settings now starts warm on this machine", flush=True)
    else:
        print(f"duorl: warmup failed (exit {code}); the caches hold what was compiled before the failure",
              file=sys.stderr, flush=True)
    return code
