"""What the data-parallel loop's host-side collectives cost per iteration, on gloo over loopback.

Two processes (2 ranks) time each way an iteration can agree with its peers:
- the stop agreement: a blocking all-reduce of two flags, against one begun at the previous boundary
  and only waited for at the next (dist/coordination.py; it had a whole iteration to finish, here
  `--work-ms` of sleep stands in for it);
- the metric row (about 60 values): pickled objects (all_gather_object) against one float64 tensor
  (all_gather), as dist/coordination.RankReporter sends once the layout is agreed.

    OMP_NUM_THREADS=1 python benchmarks/scripts/dp_host_collectives_cpu.py [--reps 300] [--work-ms 5]
"""

from __future__ import annotations

import argparse
import datetime
import os
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def _work(rank: int, world: int, port: int, reps: int, work_ms: float) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=datetime.timedelta(seconds=60))
    row = {f"Perf/metric_{i}": float(i) * 1.5 for i in range(60)}
    flags = torch.zeros(2, dtype=torch.int32)
    values = torch.zeros(62, dtype=torch.float64)
    pending: list = []

    def overlapped() -> None:
        if pending:
            pending.pop().wait()
        pending.append(dist.all_reduce(flags, op=dist.ReduceOp.MAX, async_op=True))

    arms = {
        "stop flags, blocking all-reduce": lambda: dist.all_reduce(flags, op=dist.ReduceOp.MAX),
        "stop flags, begun a boundary earlier": overlapped,
        "metric row, all_gather_object": lambda: dist.all_gather_object([None] * world, (row, 123)),
        "metric row, float64 tensor all_gather": lambda: dist.all_gather([torch.empty_like(values) for _ in range(world)], values),
    }
    for name, fn in arms.items():
        for _ in range(20):
            fn()
        dist.barrier()
        spent = 0.0
        for _ in range(reps):
            time.sleep(work_ms / 1e3)  # the iteration's own work, which an overlapped exchange hides behind
            t0 = time.perf_counter()
            fn()
            spent += time.perf_counter() - t0
        while pending:
            pending.pop().wait()
        if rank == 0:
            print(f"{name}: {spent / reps * 1e3:.3f} ms of the loop's time per iteration", flush=True)
    dist.destroy_process_group()


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--reps", type=int, default=300)
    p.add_argument("--work-ms", type=float, default=5.0)
    a = p.parse_args()
    print(f"torch {torch.__version__}, 2 gloo ranks on loopback, {a.reps} iterations of {a.work_ms} ms work", flush=True)
    mp.spawn(_work, args=(2, 29561, a.reps, a.work_ms), nprocs=2)


if __name__ == "__main__":
    main()
