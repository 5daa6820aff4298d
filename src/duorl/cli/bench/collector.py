"""`duorl bench collector --task T --num-envs N [N ...]`: collector-only env steps per second.

It builds what a collector builds (the task's VecEnv on the run's sim, the algorithm's actor, a replay
ring, the exploration generator) and runs the collector's own tick (runtime/tick.py): eager ticks and,
on CUDA, ticks replayed as one CUDA graph each. No learner runs; the actor keeps its initial weights.

Timing: after `--warmup` ticks (the first captured tick pays the capture), `--ticks` ticks run back to
back with one device synchronisation at the end, as a collector iteration does before it publishes;
`collector_env_steps_per_s = num_envs * ticks / seconds`.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import sys
import time
from typing import Any


def build_collector_tick(cfg: Any, num_envs: int, device: str, cuda_graph: bool, seed: int = 0,
                         replay_ticks: int = 16, compile: bool = False, solver_early_exit: bool = False,
                         eval_envs: int = 0) -> Any:
    """A CollectorTick as the collector builds it (runtime/collector.py), for `cfg`'s task and algo;
    `compile`: the env's step tensor code compiled (sim.tick_compile resolved); `solver_early_exit`:
    sim.solver_early_exit resolved; `eval_envs`: how many envs act deterministically."""
    import torch

    from duorl.algos.registry import make_actor
    from duorl.envs.registry import make_vec_env
    from duorl.runtime.replay import ReplayLayout, ReplayRing
    from duorl.runtime.tick import CollectorTick

    dev = torch.device(device)
    if dev.type == "cuda" and dev.index is None:
        dev = torch.device("cuda", torch.cuda.current_device())
    env = make_vec_env(cfg.task, cfg.sim, num_envs, str(dev) if cfg.sim.name == "mjwarp" else "cpu", seed,
                       nan_guard=cfg.training.nan_guard.enabled, compile=compile, solver_early_exit=solver_early_exit)
    spec = env.spec
    actor = make_actor(cfg.algo, spec, dev)
    actor.eval()
    layout = ReplayLayout(num_envs, replay_ticks, spec.actor_obs_dim, spec.critic_obs_dim, spec.action_dim)
    ring = ReplayRing.allocate(layout, dev)
    gen = torch.Generator(device=dev).manual_seed(seed + 1)
    obs = {k: v.to(dev) for k, v in env.reset().items()}
    return CollectorTick(env, actor, ring, gen, obs, dev, cuda_graph=cuda_graph, eval_envs=eval_envs)


def _measure(tick: Any, warmup: int, ticks: int) -> dict[str, Any]:
    import torch

    cuda = tick.device.type == "cuda"
    sync = (lambda: torch.cuda.synchronize(tick.device)) if cuda else (lambda: None)
    n = tick.env.num_envs
    t0 = time.perf_counter()
    tick.run(0, warmup)
    sync()
    warmup_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    tick.run(warmup, ticks)
    sync()
    seconds = time.perf_counter() - t0
    return {
        "num_envs": n,
        "cuda_graph": tick.captured,
        "warmup_ticks": warmup,
        "warmup_s": round(warmup_s, 3),
        "ticks": ticks,
        "seconds": round(seconds, 6),
        "ms_per_tick": round(seconds * 1e3 / ticks, 4),
        "collector_env_steps_per_s": round(n * ticks / seconds, 1),
    }


def run_collector_bench(algo: str, task: str, sim: str | None, num_envs: list[int], ticks: int = 200, warmup: int = 10,
                        device: str | None = None, overrides: list[str] | None = None, modes: tuple[str, ...] = ("graph", "eager"),
                        command: str | None = None) -> dict[str, Any]:
    import torch

    from duorl.cli.configure import load_config
    from duorl.config.switches import solver_early_exit_enabled, tick_compile_enabled
    from duorl.config.validate import env_device_type

    cfg = load_config(algo, task, sim, list(overrides or []))
    dev = device or ("cuda" if torch.cuda.is_available() else "cpu")
    on_cuda = env_device_type(cfg) == "cuda" and torch.device(dev).type == "cuda"
    runs = []
    substeps = None
    for n in num_envs:
        for mode in modes:
            if mode == "graph" and not on_cuda:
                continue  # CUDA graphs need the envs on a GPU (mjwarp); the CPU has eager ticks only
            graph = mode == "graph"
            compiled = tick_compile_enabled(cfg, dev if on_cuda else "cpu", graph)
            early_exit = solver_early_exit_enabled(cfg, graph)
            tick = build_collector_tick(cfg, n, dev, cuda_graph=graph, compile=compiled, solver_early_exit=early_exit)
            substeps = getattr(tick.env.task, "substeps", None)
            runs.append({"mode": mode, "compiled": compiled, "solver_early_exit": early_exit,
                         **_measure(tick, warmup, ticks)})
            tick.release()
            del tick
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
    by = {(r["num_envs"], r["mode"]): r for r in runs}
    speedup = {
        str(n): round(by[(n, "graph")]["collector_env_steps_per_s"] / by[(n, "eager")]["collector_env_steps_per_s"], 3)
        for n in num_envs if (n, "graph") in by and (n, "eager") in by
    }
    dev_t = torch.device(dev)
    # only what was measured: no empty graph_speedup, but a line saying why it is missing
    compared: dict[str, Any] = {"graph_speedup": speedup} if speedup else {"graph_speedup_skipped": (
        "graph ticks need the envs on a CUDA device (--sim mjwarp on a GPU); these envs step on the cpu" if not on_cuda
        else "needs both --modes graph and eager")}
    return {
        "command": command,
        "date": _dt.datetime.now().isoformat(timespec="seconds"),
        "device": dev,
        "gpu": torch.cuda.get_device_name(dev_t) if dev_t.type == "cuda" else None,
        "torch": torch.__version__,
        "algo": algo,
        "task": task,
        "sim": cfg.sim.name,
        "physics_substeps_per_tick": substeps,
        "runs": runs,
        **compared,
    }


# Defaults that fit the machine: 4096 G1 envs are the measured GPU workload (benchmarks/); on CPU threads
# (or warp's CPU device) 64 envs x 200 ticks of the G1 walking task take about 7 s on 2 cores instead of minutes.
GPU_NUM_ENVS, CPU_NUM_ENVS = 4096, 64


def machine_defaults(sim: str | None, num_envs: list[int] | None, cuda: bool) -> tuple[str, list[int], str | None]:
    """--sim and --num-envs where not given: what fits a machine with (`cuda`) or without a GPU, and a
    line saying what was picked and why (None when the user chose both)."""
    picked_sim = sim or ("mjwarp" if cuda else "mujoco")
    envs_on_gpu = cuda and picked_sim == "mjwarp"
    picked_envs = num_envs or [GPU_NUM_ENVS if envs_on_gpu else CPU_NUM_ENVS]
    if sim is not None and num_envs is not None:
        return picked_sim, picked_envs, None
    why = "a CUDA device is visible" if cuda else "no CUDA device is visible"
    where = "on the GPU" if envs_on_gpu else "on the CPU (eager ticks only; CUDA graphs need mjwarp on a GPU)"
    note = (f"bench collector: {why}: --sim {picked_sim} --num-envs {' '.join(map(str, picked_envs))}, envs {where}; "
            "pass --sim and --num-envs to choose")
    return picked_sim, picked_envs, note


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from duorl.config.schema import ALGOS, SIMS
    from duorl.envs.tasks.builtin import BENCH_TASK

    parser.add_argument("--algo", choices=ALGOS, default="sac", help="whose actor acts (default: sac)")
    parser.add_argument("--task", default=BENCH_TASK, help=f"task (default: {BENCH_TASK})")
    parser.add_argument("--sim", choices=SIMS, default=None,
                        help="simulator (default: mjwarp with a visible GPU, else mujoco)")
    parser.add_argument("--num-envs", type=int, nargs="+", default=None, metavar="N",
                        help=f"env counts (default: {GPU_NUM_ENVS} for envs on a GPU, else {CPU_NUM_ENVS})")
    parser.add_argument("--ticks", type=int, default=200, metavar="T", help="timed ticks per run (default: 200)")
    parser.add_argument("--warmup", type=int, default=10, metavar="T", help="untimed ticks first (default: 10)")
    parser.add_argument("--modes", nargs="+", choices=("graph", "eager"), default=["graph", "eager"],
                        help="tick modes to time (default: graph eager; graph needs CUDA envs)")
    parser.add_argument("--device", default=None, help="cuda, cuda:1 or cpu (default: cuda when visible)")
    parser.add_argument("--out", default=None, metavar="FILE.json", help="also write the JSON here")
    parser.add_argument("overrides", nargs="*", metavar="key=value", help="configuration overrides")


def main(args: argparse.Namespace) -> int:
    if args.ticks < 1 or args.warmup < 1 or any(n < 1 for n in args.num_envs or []):
        print("error: --ticks, --warmup and every --num-envs must be >= 1", file=sys.stderr)
        return 2
    from duorl.gpu.compiling import use_persistent_compile_caches

    use_persistent_compile_caches()  # before anything imports torch._dynamo (gpu/compiling.py)
    from duorl.cli.bench.report import emit
    from duorl.config.devices import check_device_flag, cuda_device_count
    from duorl.config.errors import ConfigError

    try:
        check_device_flag(args.device)  # before anything is built: a CPU torch has no CUDA
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    cuda = cuda_device_count() > 0 and (args.device is None or not args.device.startswith("cpu"))
    args.sim, args.num_envs, note = machine_defaults(args.sim, args.num_envs, cuda)
    if note:
        print(note, file=sys.stderr, flush=True)

    command = "duorl " + " ".join(getattr(args, "argv", None) or sys.argv[1:])
    try:
        result = run_collector_bench(args.algo, args.task, args.sim, args.num_envs, args.ticks, args.warmup, args.device,
                                     list(args.overrides), tuple(args.modes), command=command)
    except (ConfigError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    emit(result, args.out)
    return 0
