"""Time of an mjlab task's pieces on Warp's CPU device: importing mjlab and its registry, duorl's spec
(one env), N envs built, reset and stepped once, and a step of N envs with zero actions.

    PYTHONPATH=src .venv/bin/python benchmarks/2026-12-02_mjlab_cpu/build_time.py Mjlab-Cartpole-Swingup 8
    WARP_CACHE_PATH=$(mktemp -d) ... (the same)   # cold: Warp compiles every kernel
"""
import sys, time
t0 = time.perf_counter()
import torch
from duorl.config.schema import TaskConfig
from duorl.envs import mjlab
task, n = sys.argv[1], int(sys.argv[2])
ids = mjlab.task_ids()
t1 = time.perf_counter()
spec = mjlab.task_spec(task, TaskConfig(name="mjlab:" + task))
t2 = time.perf_counter()
env = mjlab.make_vec_env(task, TaskConfig(name="mjlab:" + task), n, "cpu", 1)
env.reset()
env.step(torch.zeros(n, spec.action_dim))
t3 = time.perf_counter()
for _ in range(20):
    env.step(torch.zeros(n, spec.action_dim))
t4 = time.perf_counter()
print(f"{task} n={n}: import+registry {t1-t0:.1f} s, task_spec (1 env) {t2-t1:.1f} s, {n} envs build+reset+1 step {t3-t2:.1f} s, step {(t4-t3)/20*1e3:.0f} ms")
