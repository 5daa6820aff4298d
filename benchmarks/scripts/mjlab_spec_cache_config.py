"""Issue #42 on the CPU: seconds of `load_config` of mjlab's G1 velocity task (duorl's imports included) and
whether it imported mjlab. Run it with PYTHONPATH naming the tree to measure and DUORL_CACHE_DIR the cache
(benchmarks/2026-12-03_mjlab_spec_cache_cpu/README.md has the commands)."""

import sys
import time

t = time.perf_counter()
from duorl.cli.configure import load_config  # noqa: E402

cfg = load_config("sac", "mjlab:Mjlab-Velocity-Flat-Unitree-G1", "mjwarp", ["training.devices=[cpu]"])
dt = time.perf_counter() - t
print(f"load_config {dt:.2f} s (with duorl's imports); mjlab imported: {'mjlab' in sys.modules}")
