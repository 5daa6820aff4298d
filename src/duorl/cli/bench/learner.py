"""`duorl bench learner --algo A [--task T]`: milliseconds per learner iteration, eager vs whole-cycle graph.

The learner trains on a real replay ring (random transitions) through the runtime's ReplaySampler, as
in a run, with the algorithm's defaults (and the task's, with --task). Without --task the learner
gets the G1 walk dimensions (actor obs 98, critic obs 101, action 29) and no task YAML. On CUDA it
times the eager iteration and the replayed whole-cycle graph and reports their ratio; on the CPU
only the eager path exists.

Timing: every iteration is bracketed by device synchronisations and timed on the host clock
(perf_counter); the report gives median, mean, min and p90 over --iters iterations after warm-up.
The `*_host_ms_per_iteration` figures are the host's part of each iteration (until the call returns),
and `graph_launch_ms` is the bare `CUDAGraph.replay()` call: a whole-cycle graph's host work runs
while the GPU waits, because the runtime synchronises at every weight publish.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as _dt
import functools
import statistics
import sys
import time
from typing import Any, Callable

from duorl.cli.bench.kernel_profile import check_profile_device, gemm_flop_per_iteration, profile_kernels, summarize

# torch and yaml are imported where used: the CLI builds this parser for every command

G1_WALK_DIMS = {"actor_obs_dim": 98, "critic_obs_dim": 101, "action_dim": 29}


def _set_dotted(cfg: Any, key: str, value: Any) -> None:
    node = cfg
    *parents, leaf = key.split(".")
    for part in parents:
        node = getattr(node, part)
    if not dataclasses.is_dataclass(node) or leaf not in {f.name for f in dataclasses.fields(node)}:
        raise ValueError(f"unknown configuration key {key!r}")
    setattr(node, leaf, value)


def _algo_only_config(algo: str, overrides: list[str]) -> Any:
    """schema < algo YAML < overrides, without any task layer (the G1-dimension default)."""
    import yaml

    from duorl.config.load import read_algo_yaml
    from duorl.config.schema import Config
    from duorl.config.tasks import TaskFacts
    from duorl.config.validate import validate

    cfg = Config()
    data = read_algo_yaml(algo)  # with the file its base: names (warpsac.yaml: flashsac.yaml)
    for section, values in data.items():
        for key, value in (values or {}).items():
            _set_dotted(cfg, f"{section}.{key}", value)
    for item in overrides:
        key, sep, raw = item.partition("=")
        if not sep:
            raise ValueError(f"malformed override {item!r} (expected key=value)")
        _set_dotted(cfg, key.strip(), yaml.safe_load(raw))
    cfg.algo.name = algo
    return validate(cfg, TaskFacts(cfg.task.name))


def bench_config(algo: str, task: str | None, overrides: list[str]) -> tuple[Any, Any]:
    """(Config, EnvSpec) for the benchmark."""
    from duorl.envs.base import EnvSpec

    if task is None:
        cfg = _algo_only_config(algo, overrides)
        spec = EnvSpec(task="g1_walk_dims", max_episode_steps=1000, control_dt=0.02, **G1_WALK_DIMS)
        return cfg, spec
    from duorl.cli.configure import load_config
    from duorl.envs.registry import env_spec

    cfg = load_config(algo, task, None, overrides)
    return cfg, env_spec(cfg.task)


def _stats(ms: list[float]) -> dict[str, float]:
    s = sorted(ms)
    return {
        "median": round(statistics.median(s), 4),
        "mean": round(statistics.fmean(s), 4),
        "min": round(s[0], 4),
        "p90": round(s[min(len(s) - 1, int(0.9 * len(s)))], 4),
    }


def _timed(fn: Callable[[], Any], n: int, sync: Callable[[], None]) -> tuple[list[float], list[float]]:
    """Per iteration: the whole time (synchronised on both sides), and the host's part of it, until
    `fn` returns (its launches and checks; on a GPU the device may still be working then)."""
    total, host = [], []
    for _ in range(n):
        sync()
        t0 = time.perf_counter()
        fn()
        t1 = time.perf_counter()
        sync()
        total.append((time.perf_counter() - t0) * 1e3)
        host.append((t1 - t0) * 1e3)
    return total, host


@dataclasses.dataclass
class LearnerFixture:
    """A learner bench's inputs: the config, the spec, a real replay ring of random transitions, and
    `setup()`, which builds a fresh learner (with its synchronizer) and a sampler over the ring."""

    cfg: Any
    spec: Any
    device: Any
    ring: Any
    ticks: int
    setup: Callable[[], tuple[Any, Any]]
    synchronizers: list[Any]
    group: Any

    @property
    def num_updates(self) -> int:
        return self.cfg.algo.updates_per_step

    def sync(self) -> None:
        import torch

        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)


def learner_fixture(algo: str, task: str | None = None, overrides: list[str] | None = None, device: str | None = None,
                    replay_ticks: int = 64, seed: int = 0, data_parallel: bool = False,
                    synchronizer: str = "local") -> LearnerFixture:
    """What `run_learner_bench` times, built once (`bench learner --profile` and `bench corun` use it too)."""
    import torch

    from duorl.algos.registry import make_learner
    from duorl.runtime.replay import AgeBias, ReplayLayout, ReplayRing, ReplaySampler

    cfg, spec = bench_config(algo, task, list(overrides or []))
    dev = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    a, n_envs = cfg.algo, cfg.training.num_envs
    ticks = max(2, replay_ticks)
    layout = ReplayLayout(n_envs, ticks, spec.actor_obs_dim, spec.critic_obs_dim, spec.action_dim)
    ring = ReplayRing.allocate(layout, dev, packed=a.algo_params.packed_replay)
    g = torch.Generator(device=dev).manual_seed(seed)
    with torch.no_grad():
        # drawn contiguous and copied in: the same transitions whatever the ring's layout (packed_replay)
        for key, t in ring.t.items():
            if key == "tick":
                t.copy_(torch.arange(ticks, device=dev))
            elif key == "action":
                t.copy_(torch.rand(t.shape, generator=g, device=dev) * 2.0 - 1.0)
            elif key in ("terminated", "truncated"):
                t.copy_((torch.rand(t.shape, generator=g, device=dev) < 0.01).float())
            else:
                t.copy_(torch.randn(t.shape, generator=g, device=dev))
    group = _world_of_one(dev) if data_parallel else None
    synchronizers: list[Any] = []

    def setup() -> tuple[Any, ReplaySampler]:
        learner = make_learner(a, spec, dev, seed)
        if group is not None:
            from duorl.distributed.grad_sync import AllReduceSynchronizer

            synchronizers.append(AllReduceSynchronizer(group, 1, dev, cfg.training.dp_gradient_wire_dtype))
            learner.set_synchronizer(synchronizers[-1])
        elif synchronizer == "local":
            from duorl.algos.grad_buffers import LocalValidity

            learner.set_synchronizer(LocalValidity(dev))
        sampler = ReplaySampler(ring, torch.Generator(device=dev).manual_seed(seed + 1), age_bias=AgeBias.of(a))
        sampler.set_window(0, ticks)
        obs_a, obs_c = ring.ticks_obs(0, ticks)
        learner.observe(obs_a, obs_c)
        learner.observe_rewards(*ring.ticks_rewards(0, ticks))
        return learner, sampler

    return LearnerFixture(cfg, spec, dev, ring, ticks, setup, synchronizers, group)


def _header(fx: LearnerFixture, algo: str, task: str | None, command: str | None) -> dict[str, Any]:
    """What every `bench learner` result says first: the command, the machine and the learner's shape."""
    import torch

    dev = fx.device
    return {
        "command": command,
        "date": _dt.datetime.now().isoformat(timespec="seconds"),
        "device": str(dev),
        "gpu": torch.cuda.get_device_name(dev) if dev.type == "cuda" else None,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "algo": algo,
        "task": task or "g1_walk_dims",
        "spec": {k: getattr(fx.spec, k) for k in ("actor_obs_dim", "critic_obs_dim", "action_dim")},
        "num_envs": fx.cfg.training.num_envs,
        "replay_ticks": fx.ticks,
        "batch_size": fx.cfg.algo.batch_size,
        "updates_per_step": fx.num_updates,
    }


def run_learner_bench(
    algo: str,
    task: str | None = None,
    overrides: list[str] | None = None,
    iters: int = 30,
    warmup: int = 3,
    device: str | None = None,
    replay_ticks: int = 64,
    seed: int = 0,
    command: str | None = None,
    data_parallel: bool = False,
    synchronizer: str = "local",
    profile_iters: int = 0,
) -> dict[str, Any]:
    """`synchronizer`: "local", as a run on one device (gradients in flat buffers, invalid steps skipped),
    or "null" (the learner alone: what the synchronizer seam costs). `data_parallel`: the learner's
    gradients go through the all-reduce synchronizer of a world-size-1 process group (NCCL on CUDA), as
    under `training.data_parallel=true` on one device: the graph path is then the DP whole-cycle graph
    and the eager path eager DP (training.dp_gradient_wire_dtype applies). `profile_iters` (CUDA): also
    a kernel-level profile of that many replayed graph iterations and compiled eager iterations
    (bench/kernel_profile.py)."""
    import torch

    fx = learner_fixture(algo, task, overrides, device, replay_ticks, seed, data_parallel, synchronizer)
    cfg, dev, a, setup, sync = fx.cfg, fx.device, fx.cfg.algo, fx.setup, fx.sync
    group, synchronizers = fx.group, fx.synchronizers
    from duorl.runtime.replay import AgeBias

    n = fx.num_updates
    profiles: dict[str, Any] = {}
    graph_result: dict[str, Any] = {}
    if dev.type == "cuda":
        # the graph first, in a fresh process: its first iteration pays compilation (torch_compile) and
        # the eager warm-up and capture, as a run's first learner iteration does
        from duorl.gpu.graphs import WholeCycleGraph

        learner, sampler = setup()
        graph = WholeCycleGraph(learner, extra_generators=[sampler.generator])
        sync()
        t0 = time.perf_counter()
        graph.train_iteration(sampler.sample, n)  # compile, warm-up, capture and the first replay
        sync()
        graph_result["first_graph_iteration_s"] = round(time.perf_counter() - t0, 3)
        graph_ms, graph_host_ms = _timed(lambda: graph.train_iteration(sampler.sample, n), iters, sync)
        graph_result["graph_ms_per_iteration"] = _stats(graph_ms)
        graph_result["graph_host_ms_per_iteration"] = _stats(graph_host_ms)
        graph_result["graph"] = graph.state()
        graph_result["torch_compile"] = bool(getattr(learner, "compiled", False))
        if profile_iters:
            profiles["graph"] = profile_kernels(lambda: graph.train_iteration(sampler.sample, n), profile_iters, sync)
        # last, as it leaves the learner's host counters behind: what launching this many nodes costs the host
        graph_result["graph_launch_ms"] = _stats(_timed(graph.launch_unchecked, iters, sync)[1])
        graph.release()
        del graph

    learner, sampler = setup()
    for _ in range(warmup):
        learner.train_iteration(sampler.sample, n)
    eager_ms, eager_host_ms = _timed(lambda: learner.train_iteration(sampler.sample, n), iters, sync)
    if profile_iters and dev.type == "cuda":
        profiles["eager"] = profile_kernels(lambda: learner.train_iteration(sampler.sample, n), profile_iters, sync)

    result: dict[str, Any] = {
        **_header(fx, algo, task, command),
        "policy_frequency": a.policy_frequency,
        "use_autocast": bool(a.use_autocast and dev.type == "cuda"),
        "replay_sampling": "age_biased" if AgeBias.of(a) is not None else "uniform",
        "synchronizer": "all_reduce" if data_parallel else synchronizer,
        "iterations_timed": iters,
        "eager_ms_per_iteration": _stats(eager_ms),
        "eager_host_ms_per_iteration": _stats(eager_host_ms),
        "graph_ms_per_iteration": None,
        "graph_host_ms_per_iteration": None,
        "graph_launch_ms": None,
        "graph_speedup": None,
        "first_graph_iteration_s": None,
        "data_parallel": {"world_size": 1, "backend": "nccl" if dev.type == "cuda" else "gloo",
                          "wire_dtype": cfg.training.dp_gradient_wire_dtype,
                          "groups": synchronizers[-1].layout(),
                          "allreduce_round_ms": round(synchronizers[-1].measure_ms(10), 4)} if synchronizers else None,
    }
    if algo == "sac":
        result["networks"] = {"actor_hidden_dims": list(a.actor_hidden_dims), "critic_hidden_dims": list(a.critic_hidden_dims)}
    else:
        result["networks"] = {"actor": [a.actor_hidden_dim, a.actor_num_blocks], "critic": [a.critic_hidden_dim, a.critic_num_blocks],
                              "block_expansion": a.block_expansion, "num_atoms": a.num_atoms}
    if graph_result:
        result.update(graph_result)
        result["graph_speedup"] = round(
            result["eager_ms_per_iteration"]["median"] / result["graph_ms_per_iteration"]["median"], 3
        )
        result["gpu_memory_max_allocated_gib"] = round(torch.cuda.max_memory_allocated(dev) / 2**30, 3)
    if profiles:
        flop = gemm_flop_per_iteration(fx, n)
        result["profile"] = {arm: _summary_or_reason(kernels, flop) for arm, kernels in profiles.items()}
    if group is not None:
        import torch.distributed as dist

        dist.destroy_process_group()  # the graph that held NCCL work was released above
    return result


@dataclasses.dataclass
class Arm:
    """One variant of the learner in an A/B (`--arm NAME:key=value,...`): its overrides on top of the
    command's, and what was measured of it."""

    name: str
    overrides: list[str]
    setup_s: float | None = None  # building, compiling, the warm-up and the capture, and the first iteration
    ms: list[float] = dataclasses.field(default_factory=list)
    host_ms: list[float] = dataclasses.field(default_factory=list)
    step: Callable[[], Any] | None = None
    graph: Any = None
    profile: dict[str, Any] | None = None


def parse_arm(text: str) -> Arm:
    """`NAME:key=value,key=value` (NAME: alone = the command's own configuration)."""
    name, sep, rest = text.partition(":")
    if not sep or not name or not all(c.isalnum() or c in "_-." for c in name):
        raise ValueError(f"malformed --arm {text!r}: expected NAME:key=value,... (NAME of letters, digits, _ - .)")
    overrides = [item.strip() for item in rest.split(",") if item.strip()]
    for item in overrides:
        if "=" not in item:
            raise ValueError(f"malformed override {item!r} in --arm {text!r} (expected key=value)")
    return Arm(name, overrides)


def run_learner_arms(
    algo: str,
    arms: list[Arm],
    task: str | None = None,
    overrides: list[str] | None = None,
    iters: int = 30,
    warmup: int = 3,
    device: str | None = None,
    replay_ticks: int = 64,
    seed: int = 0,
    command: str | None = None,
    budget_s: float | None = None,
    profile_iters: int = 0,
) -> dict[str, Any]:
    """The learner's variants side by side in one process: each arm is built (and on CUDA compiled and
    captured) in turn, then `iters` rounds time one iteration of every arm, interleaved (ABBA order:
    forward in even rounds, backward in odd ones), so that drift of the machine falls on every arm alike.
    On CUDA an iteration is a graph replay, on the CPU an eager iteration. Every arm's statistics and
    its median over the first arm's. `budget_s`: an arm whose set-up would likely end past the budget
    (the longest set-up so far from now) is skipped, and reported as such. `profile_iters` (CUDA): a
    kernel profile of every arm but the first, while the budget lasts."""
    import torch

    t_start = time.perf_counter()
    names = [arm.name for arm in arms]
    if len(set(names)) != len(names) or not arms:
        raise ValueError(f"--arm names must be distinct and at least one given, got {names}")
    base = list(overrides or [])
    fixtures = [learner_fixture(algo, task, base + arm.overrides, device, replay_ticks, seed) for arm in arms]
    fx0 = fixtures[0]
    cuda = fx0.device.type == "cuda"
    n = fx0.num_updates
    set_up: list[Arm] = []
    skipped: list[str] = []
    longest = 0.0
    for arm, fx in zip(arms, fixtures):
        elapsed = time.perf_counter() - t_start
        if budget_s is not None and set_up and elapsed + longest > budget_s:  # the reference arm always runs
            skipped.append(arm.name)
            continue
        t0 = time.perf_counter()
        learner, sampler = fx.setup()
        if cuda:
            from duorl.gpu.graphs import WholeCycleGraph

            graph = WholeCycleGraph(learner, extra_generators=[sampler.generator])
            arm.graph = graph
            arm.step = functools.partial(graph.train_iteration, sampler.sample, n)
            arm.step()  # compile, warm-up, capture and the first replay
        else:
            arm.step = functools.partial(learner.train_iteration, sampler.sample, n)
            for _ in range(warmup):
                arm.step()
        fx.sync()
        arm.setup_s = round(time.perf_counter() - t0, 3)
        longest = max(longest, arm.setup_s)
        set_up.append(arm)
    for r in range(iters):
        for arm in (set_up if r % 2 == 0 else reversed(set_up)):
            assert arm.step is not None
            total, host = _timed(arm.step, 1, fx0.sync)
            arm.ms += total
            arm.host_ms += host
    if profile_iters and cuda:
        for arm in set_up[1:]:  # the reference arm's kernels are in the earlier rounds' profiles
            if budget_s is not None and time.perf_counter() - t_start > budget_s:
                break
            assert arm.step is not None
            arm.profile = _summary_or_reason(profile_kernels(arm.step, profile_iters, fx0.sync), 0.0)
    first = statistics.median(set_up[0].ms) if set_up and set_up[0].ms else None
    result: dict[str, Any] = {
        **_header(fx0, algo, task, command),
        "path": "graph replay" if cuda else "eager",
        "rounds": iters,
        "order": "ABBA: forward in even rounds, backward in odd rounds",
        "overrides": base,
        "arms": [{
            "name": arm.name,
            "overrides": arm.overrides,
            "setup_s": arm.setup_s,
            "ms_per_iteration": _stats(arm.ms),
            "host_ms_per_iteration": _stats(arm.host_ms),
            "median_ratio_to_first": round(statistics.median(arm.ms) / first, 4) if first else None,
            "ms": [round(x, 4) for x in arm.ms],
            "graph": arm.graph.state() if arm.graph is not None else None,
            **({"profile": arm.profile} if arm.profile is not None else {}),
        } for arm in set_up],
        "arms_skipped": skipped,
        "wall_s": round(time.perf_counter() - t_start, 1),
    }
    if cuda:
        result["gpu_memory_max_allocated_gib"] = round(torch.cuda.max_memory_allocated(fx0.device) / 2**30, 3)
        for arm in set_up:
            arm.graph.release()
    return result


def _summary_or_reason(kernels: Any, flop: float) -> dict[str, Any]:
    """A profile's summary, or why there is none (a profiler that saw no kernels of a graph replay must
    not cost the timings beside it)."""
    try:
        return summarize(kernels, flop)
    except RuntimeError as e:
        return {"error": str(e)}


def _world_of_one(dev: Any) -> Any:
    """A process group of this process alone (NCCL on CUDA, gloo on the CPU) over a file store."""
    import datetime
    import tempfile

    import torch
    import torch.distributed as dist

    store = tempfile.mkdtemp(prefix="duorl-bench-pg-")
    kwargs = {"device_id": torch.device("cuda", dev.index if dev.index is not None else torch.cuda.current_device())} \
        if dev.type == "cuda" else {}
    dist.init_process_group("nccl" if dev.type == "cuda" else "gloo", init_method=f"file://{store}/store", rank=0,
                            world_size=1, timeout=datetime.timedelta(seconds=300), **kwargs)
    return dist.group.WORLD


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from duorl.config.schema import ALGOS

    parser.add_argument("--algo", choices=ALGOS, default="sac", help="learner (default: sac)")
    parser.add_argument("--task", default=None, help="task whose defaults and dimensions to use (default: none, "
                        "the algorithm's defaults with the G1 walk dimensions 98/101/29)")
    parser.add_argument("--iters", type=int, default=30, metavar="N", help="timed iterations per path (default: 30)")
    parser.add_argument("--warmup", type=int, default=3, metavar="N", help="untimed eager iterations first (default: 3)")
    parser.add_argument("--device", default=None, help="cuda, cuda:1 or cpu (default: cuda when visible)")
    parser.add_argument("--replay-ticks", type=int, default=64, metavar="T", help="ticks in the replay ring (default: 64)")
    parser.add_argument("--synchronizer", choices=("local", "null"), default="local",
                        help="local: as a run on one device (flat gradient buffers, invalid steps skipped); null: the "
                             "learner without a synchronizer, what the seam itself costs (default: local)")
    parser.add_argument("--data-parallel", action="store_true",
                        help="gradients through the data-parallel all-reduce of a world-size-1 process group (the DP "
                             "whole-cycle graph and eager DP; training.dp_gradient_wire_dtype applies)")
    parser.add_argument("--profile", type=int, default=0, metavar="N",
                        help="CUDA: also profile N replayed graph iterations and N compiled eager ones kernel by kernel "
                             "(kernels, time by kind, GEMM TFLOP/s, idle gaps; default: 0, no profile)")
    parser.add_argument("--arm", action="append", default=None, metavar="NAME:key=value,...",
                        help="an A/B arm: these overrides on top of the command's (NAME: alone = the command's own); "
                             "with two or more, every arm is built in one process and --iters rounds time one "
                             "iteration of each, interleaved, against the first (no separate eager timing)")
    parser.add_argument("--budget-s", type=float, default=None, metavar="S",
                        help="with --arm: skip an arm whose set-up would likely end past S seconds from the start")
    parser.add_argument("--out", default=None, metavar="FILE.json", help="also write the JSON here")
    parser.add_argument("overrides", nargs="*", metavar="key=value", help="configuration overrides")


def main(args: argparse.Namespace) -> int:
    if args.iters < 1 or args.warmup < 0 or args.profile < 0:
        print("error: --iters must be >= 1, --warmup and --profile >= 0", file=sys.stderr)
        return 2
    from duorl.gpu.compiling import use_persistent_compile_caches

    use_persistent_compile_caches()  # before a learner's optimizer imports torch._dynamo (gpu/compiling.py)
    from duorl.cli.bench.report import emit
    from duorl.config.errors import ConfigError

    from duorl.config.devices import check_device_flag

    command = "duorl " + " ".join(getattr(args, "argv", None) or sys.argv[1:])
    try:
        check_device_flag(args.device)  # before anything is built: a CPU torch has no CUDA
        if args.profile:
            check_profile_device(args.device)
        if args.arm:
            result = run_learner_arms(args.algo, [parse_arm(a) for a in args.arm], args.task, list(args.overrides),
                                      args.iters, args.warmup, args.device, args.replay_ticks, command=command,
                                      budget_s=args.budget_s, profile_iters=args.profile)
            emit(result, args.out)
            return 0
        result = run_learner_bench(args.algo, args.task, list(args.overrides), args.iters, args.warmup, args.device,
                                   args.replay_ticks, command=command, data_parallel=args.data_parallel,
                                   synchronizer=args.synchronizer, profile_iters=args.profile)
    except (ConfigError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    emit(result, args.out)
    return 0
