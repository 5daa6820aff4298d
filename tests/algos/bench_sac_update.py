"""Time SACLearner updates: `python tests/algos/bench_sac_update.py --device cpu --batch 256 --dims 256 256`.

Prints ms per critic update (an iteration of --updates updates, actor every policy_frequency-th),
eager and, on CUDA, replayed from a captured CUDA graph of the whole iteration.
"""

from __future__ import annotations

import argparse
import json
import time

import torch

from duorl.algos.base import Batch
from duorl.algos.sac.learner import SACLearner
from duorl.config.schema import AlgoConfig
from duorl.envs.base import EnvSpec


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--dims", type=int, nargs="*", default=None, help="hidden dims for actor and critic")
    ap.add_argument("--updates", type=int, default=8)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--no-autocast", action="store_true")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    spec = EnvSpec("g1_like", actor_obs_dim=98, critic_obs_dim=101, action_dim=29, max_episode_steps=1000, control_dt=0.02)
    cfg = AlgoConfig(batch_size=args.batch, updates_per_step=args.updates, use_autocast=not args.no_autocast)
    if args.dims is not None:
        cfg.actor_hidden_dims = list(args.dims)
        cfg.critic_hidden_dims = list(args.dims)
    learner = SACLearner(cfg, spec, device, seed=0)

    size = 65536
    g = torch.Generator(device=device).manual_seed(0)
    data = [torch.randn(size, d, generator=g, device=device) for d in (98, 101)]
    data += [torch.rand(size, 29, generator=g, device=device) * 2 - 1, torch.randn(size, generator=g, device=device)]
    data += [torch.randn(size, d, generator=g, device=device) for d in (98, 101)]
    data += [(torch.rand(size, generator=g, device=device) < 0.02).float()]

    def sample(b: int) -> Batch:
        idx = torch.randint(0, size, (b,), generator=g, device=device)
        return Batch(*(d[idx] for d in data))

    learner.observe(data[0], data[1])
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)

    def timed(fn) -> float:
        times = []
        for _ in range(args.iters):
            sync()
            t0 = time.perf_counter()
            fn()
            sync()
            times.append((time.perf_counter() - t0) * 1e3 / args.updates)
        times.sort()
        return times[len(times) // 2]

    for _ in range(3):
        learner.train_iteration(sample, args.updates)
    result = {"device": str(device), "batch": args.batch, "actor_dims": cfg.actor_hidden_dims,
              "critic_dims": cfg.critic_hidden_dims, "updates": args.updates,
              "autocast": cfg.use_autocast and device.type == "cuda", "threads": torch.get_num_threads(),
              "eager_ms_per_update": timed(lambda: learner.train_iteration(sample, args.updates))}
    if device.type == "cuda":
        graph = torch.cuda.CUDAGraph()
        graph.register_generator_state(learner.generator)
        graph.register_generator_state(g)
        with torch.cuda.graph(graph):
            learner.train_iteration(sample, args.updates)
        result["graph_ms_per_update"] = timed(graph.replay)
        result["gpu"] = torch.cuda.get_device_name()
    result["torch"] = torch.__version__
    print(json.dumps(result))


if __name__ == "__main__":
    main()
