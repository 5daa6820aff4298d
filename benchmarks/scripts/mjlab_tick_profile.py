"""Where the collector tick of an mjlab task goes: torch ops per stage and every host sync with its line.

    python3 benchmarks/scripts/mjlab_tick_profile.py [--task Mjlab-Velocity-Flat-Unitree-G1] [--num-envs 8]
        [--device cpu|cuda] [--arms eager staged staged_reset_graphs] [--ticks 40] [--warmup 10]
        [--rounds R] [--round-ticks T] [--out FILE.json] [key=value ...]

Env vars: MJLAB_TICK_ROUNDS (R, default 5) and MJLAB_TICK_ROUND_TICKS (T, default 30) are the defaults of
--rounds and --round-ticks. CPU dry run (tiny):
    MJLAB_TICK_ROUNDS=2 MJLAB_TICK_ROUND_TICKS=2 python3 benchmarks/scripts/mjlab_tick_profile.py --num-envs 2 \
        --arms eager staged --ticks 2 --warmup 2

It builds the collector's tick as `duorl bench collector` does (runtime/tick.py over MjlabVecEnv, sac's
actor) once per arm: `eager` (sim.mjlab_staged_step=false: mjlab's own env.step, then duorl's reset of the
done envs), `staged` (sim.mjlab_staged_step=true: envs/mjlab/staged_step.py) and `staged_reset_graphs` (the
same with the reset body as a graph per number of done envs, `StagedStep(reset_graphs=True)`). After `--warmup` ticks it
times the arms in rounds, then records `--ticks` ticks of each:

  timing           every arm is built and warmed first and stays alive; then R rounds, each timing T ticks
                   of every arm, the order alternating (ABC, CBA, ABC, ...: no arm always first or after the
                   same one). Per arm: the median and the min-max of its round values (ms per tick over the
                   round's T ticks), and its ratio to eager within each round (median, min-max). The arms
                   of one sequential pass each were not comparable to 10% (issue #40, 2026-12-03).

  ops per stage    every aten op (views apart: they launch no kernel) and every warp launch, counted in the
                   stage that ran it. Stages are the tick's parts (actor, env step, replay write, sums), mjlab's
                   managers inside its step and reset (process_action, the decimation loop's apply_action,
                   write_data_to_sim, sim.step, scene.update, termination, reward, events, commands, sense,
                   observations, _reset_idx and its managers) and duorl's wrapper around them (observation
                   concatenation, metric rows; the rest of MjlabVecEnv.step: finiteness checks, episode sums,
                   the done.nonzero() reset path). On CUDA the ops inside a replayed graph are not dispatched:
                   the counts are the eager (host-launched) ops only.
  host syncs       every op that reads a device value on the host (aten::_local_scalar_dense: item, bool,
                   int, float; nonzero; is_nonzero; a boolean-mask index or index_put; masked_select; unique;
                   tolist/numpy/cpu), with the innermost mjlab or duorl source line that made it. On the CPU
                   they cost nothing; on CUDA each one waits for the GPU.
  host ms          per stage, perf_counter around it (on CUDA: launch time plus the sync waits inside).

With `--device cuda` it also runs torch.profiler over the ticks (GPU busy time, the union of kernel and
memcpy intervals, against wall time; kernels per tick) and torch.cuda.set_sync_debug_mode("warn"), whose
warnings name each sync that torch sees, with the Python line that made it (each arm once, after the rounds).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import os
import sys
import time
import traceback
import warnings
from typing import Any, Callable, Iterator

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from duorl.envs.mjlab.stage_graphs import host_read_of

HERE = os.path.abspath(__file__)
# frames inside these are not the "source line" of a sync: torch itself, this script, mjlab's TorchArray shim
_SKIP = (os.sep + "torch" + os.sep, HERE, os.path.join("mjlab", "sim", "sim_data.py"), "contextlib.py")
_ROOTS = ("mjlab" + os.sep, "duorl" + os.sep, "mujoco_warp" + os.sep, "warp" + os.sep)

# python-level Tensor methods that read device values (their aten op, if any, is counted under this name)
_PY_SYNCS = {"item": "Tensor.item", "tolist": "Tensor.tolist", "numpy": "Tensor.numpy", "__bool__": "Tensor.__bool__",
             "__int__": "Tensor.__int__", "__float__": "Tensor.__float__", "__index__": "Tensor.__index__",
             "cpu": "Tensor.cpu"}
_NO_KERNEL = {"empty", "empty_like", "empty_strided", "lift_fresh", "sym_size", "sym_stride", "sym_numel",
              "sym_storage_offset", "is_same_size", "_has_compatible_shallow_copy_type", "result_type", "set_"}


def source_line() -> str:
    """The innermost stack frame in mjlab, duorl, mujoco_warp or warp (not torch, not this script)."""
    for frame in reversed(traceback.extract_stack()[:-1]):
        name = frame.filename
        if any(s in name for s in _SKIP):
            continue
        found = [at for root in _ROOTS if (at := name.rfind(os.sep + root)) >= 0]
        if found:  # the outermost package: duorl/envs/mjlab/... is duorl's, site-packages/mjlab/... mjlab's
            at = min(found)
            return f"{name[at + 1:]}:{frame.lineno} {frame.name}"
    return "?"


class Stages:
    """A stack of stage names; `wrap` makes a bound method push its stage while it runs."""

    def __init__(self) -> None:
        self.stack: list[str] = []
        self.host_s: dict[str, float] = collections.defaultdict(float)
        self.calls: dict[str, int] = collections.defaultdict(int)
        self.enabled = False

    @property
    def current(self) -> str:
        return "/".join(self.stack) if self.stack else "(outside)"

    @contextlib.contextmanager
    def stage(self, name: str) -> Iterator[None]:
        self.stack.append(name)
        key = self.current
        t0 = time.perf_counter()
        try:
            yield
        finally:
            if self.enabled:
                self.host_s[key] += time.perf_counter() - t0
                self.calls[key] += 1
            self.stack.pop()

    def wrap(self, obj: Any, attr: str, name: str | Callable[..., str]) -> None:
        if obj is None or not hasattr(obj, attr):
            return
        inner = getattr(obj, attr)
        stages = self

        def wrapped(*args: Any, **kwargs: Any) -> Any:
            label = name(*args, **kwargs) if callable(name) else name
            with stages.stage(label):
                return inner(*args, **kwargs)

        setattr(obj, attr, wrapped)


class Counts:
    def __init__(self, stages: Stages) -> None:
        self.stages = stages
        self.ops: dict[str, int] = collections.defaultdict(int)
        self.views: dict[str, int] = collections.defaultdict(int)
        self.warp: dict[str, int] = collections.defaultdict(int)
        self.op_names: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
        self.syncs: dict[tuple[str, str, str], int] = collections.defaultdict(int)
        self.py_api: list[str] = []
        self.enabled = False

    def sync(self, kind: str) -> None:
        if self.enabled:
            self.syncs[(self.stages.current, kind, source_line())] += 1


class _FunctionMode(TorchFunctionMode):
    def __init__(self, counts: Counts) -> None:
        super().__init__()
        self.counts = counts

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        api = _PY_SYNCS.get(name) if isinstance(args[0] if args else None, torch.Tensor) else None
        if api is not None:
            t = args[0]
            if api == "Tensor.cpu" and t.device.type == "cpu":
                api = None  # no transfer
            elif api in ("Tensor.tolist", "Tensor.numpy", "Tensor.cpu"):
                self.counts.sync(api)  # no aten op of their own reads the value
                api = None
        if api is None:
            return func(*args, **kwargs)
        self.counts.py_api.append(api)
        try:
            return func(*args, **kwargs)
        finally:
            self.counts.py_api.pop()


class _DispatchMode(TorchDispatchMode):
    def __init__(self, counts: Counts) -> None:
        super().__init__()
        self.counts = counts

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        c = self.counts
        if c.enabled:
            base = func._schema.name.split("::")[-1]
            stage = c.stages.current
            if func.is_view or base in _NO_KERNEL:
                c.views[stage] += 1
            else:
                c.ops[stage] += 1
                c.op_names[stage][base] += 1
            read = host_read_of(func, args, kwargs)
            if read is not None:
                api = c.py_api[-1] if c.py_api else None
                c.sync(f"{api} ({read})" if api else read)
            elif base in ("copy_", "_to_copy") and _crosses_to_host(args, kwargs):
                c.sync(f"device-to-host {base}")
        return func(*args, **kwargs)


def _crosses_to_host(args: Any, kwargs: Any) -> bool:
    """A copy from a CUDA tensor into host memory (copy_(cpu_dst, cuda_src) or _to_copy(cuda, device=cpu))."""
    if not args or not isinstance(args[0], torch.Tensor):
        return False
    if len(args) > 1 and isinstance(args[1], torch.Tensor):  # copy_(dst, src)
        return args[0].device.type == "cpu" and args[1].device.type == "cuda"
    dev = kwargs.get("device")
    return args[0].device.type == "cuda" and dev is not None and torch.device(dev).type == "cpu"


@contextlib.contextmanager
def warp_launch_counts(counts: Counts) -> Iterator[None]:
    """Count warp kernel launches (wp.launch, wp.launch_tiled) and warp graph launches per stage."""
    import warp as wp

    saved = {n: getattr(wp, n) for n in ("launch", "launch_tiled", "capture_launch")}

    def counting(name: str, inner: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            if counts.enabled:
                counts.warp[f"{counts.stages.current}|{name}"] += 1
            return inner(*args, **kwargs)
        return call

    for n, f in saved.items():
        setattr(wp, n, counting(n, f))
    try:
        yield
    finally:
        for n, f in saved.items():
            setattr(wp, n, f)


def instrument(tick: Any, stages: Stages) -> None:
    """Wrap the tick's parts, MjlabVecEnv's and mjlab's managers' methods with their stage names."""
    vec = tick.env
    env = vec.env
    stages.wrap(tick.actor, "explore_with_mean", "tick.actor")
    stages.wrap(tick.ring, "write", "tick.replay_write")
    stages.wrap(tick.sums, "add", "tick.episode_sums")
    stages.wrap(vec, "step", "env.step")
    stages.wrap(vec, "_obs", "duorl.obs_concat")
    stages.wrap(vec, "_read_metrics", "duorl.metric_rows")
    stages.wrap(env, "step", "mjlab.step")
    stages.wrap(env, "reset", "mjlab.reset")
    stages.wrap(env, "_reset_idx", "_reset_idx")
    staged = getattr(vec, "staged", None)
    if staged is not None:
        stages.wrap(staged, "run_stage", lambda name, *a, **k: f"stage:{name}")
    am, sim, scene = env.action_manager, env.sim, env.scene
    stages.wrap(am, "process_action", "action_process")
    stages.wrap(am, "apply_action", "apply_action")
    stages.wrap(am, "reset", "action_manager.reset")
    stages.wrap(scene, "write_data_to_sim", "write_data_to_sim")
    stages.wrap(scene, "update", "scene.update")
    stages.wrap(scene, "reset", "scene.reset")
    stages.wrap(sim, "step", "sim.step")
    stages.wrap(sim, "forward", "sim.forward")
    stages.wrap(sim, "sense", "sim.sense")
    stages.wrap(sim, "reset", "sim.reset")
    mm = env.metrics_manager
    stages.wrap(mm, "compute_substep", "metrics.compute_substep")
    stages.wrap(mm, "compute", "metrics.compute")
    stages.wrap(mm, "reset", "metrics.reset")
    for name in ("termination_manager", "reward_manager", "observation_manager", "command_manager",
                 "curriculum_manager"):
        manager = getattr(env, name)
        short = name.replace("_manager", "")
        stages.wrap(manager, "compute", f"{short}.compute")
        stages.wrap(manager, "reset", f"{short}.reset")
    em = env.event_manager
    stages.wrap(em, "apply", lambda mode, *a, **k: f"events.{mode}")
    stages.wrap(em, "reset", "events.reset")


def build_tick(task: str, num_envs: int, device: str, staged: bool, overrides: list[str], cpu_replay: bool,
               reset_graphs: bool | None = None) -> Any:
    from duorl.cli.bench.collector import build_collector_tick
    from duorl.cli.configure import load_config
    from duorl.envs.mjlab.vec_env import attach_staged_step

    dev = ["training.devices=[0]"] if device.startswith("cuda") else ["training.devices=[cpu]"]
    cfg = load_config("sac", f"mjlab:{task}", "mjwarp",
                      [*dev, f"sim.mjlab_staged_step={'true' if staged else 'false'}", *overrides])
    tick = build_collector_tick(cfg, num_envs, device, cuda_graph=False)
    if staged and cpu_replay and not device.startswith("cuda"):
        # the CPU stand-in for the CUDA graphs: the ops of a replayed stage show as that stage's
        attach_staged_step(tick.env, required=True, graphs="cpu-replay", reset_graphs=reset_graphs)
    elif staged and reset_graphs is not None:
        tick.env.staged.release()
        attach_staged_step(tick.env, required=True, reset_graphs=reset_graphs)
    return tick


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def count_pass(tick: Any, ticks: int, first: int, device: str) -> dict[str, Any]:
    """Ops, views, warp launches and host syncs per stage over `ticks` ticks (modes on)."""
    stages = Stages()
    instrument(tick, stages)
    counts = Counts(stages)
    with warp_launch_counts(counts), _FunctionMode(counts), _DispatchMode(counts):
        stages.enabled = counts.enabled = True
        tick.run(first, ticks)
        _sync(device)
        stages.enabled = counts.enabled = False
    per = lambda d: {k: round(v / ticks, 2) for k, v in sorted(d.items())}  # noqa: E731
    syncs = [{"stage": s, "kind": k, "source": src, "per_tick": round(n / ticks, 3)}
             for (s, k, src), n in sorted(counts.syncs.items(), key=lambda kv: -kv[1])]
    return {
        "ops_per_tick": per(counts.ops),
        "views_per_tick": per(counts.views),
        "warp_launches_per_tick": per(counts.warp),
        "host_ms_per_tick": {k: round(v * 1e3 / ticks, 3) for k, v in sorted(stages.host_s.items())},
        "calls_per_tick": per(stages.calls),
        "top_ops": {k: dict(v.most_common(8)) for k, v in counts.op_names.items()},
        "syncs": syncs,
        "totals": {
            "ops": round(sum(counts.ops.values()) / ticks, 1),
            "warp_launches": round(sum(counts.warp.values()) / ticks, 1),
            "syncs": round(sum(counts.syncs.values()) / ticks, 2),
        },
    }


def time_pass(tick: Any, ticks: int, first: int, device: str) -> dict[str, float]:
    _sync(device)
    t0 = time.perf_counter()
    tick.run(first, ticks)
    _sync(device)
    s = time.perf_counter() - t0
    return {"ms_per_tick": round(s * 1e3 / ticks, 3), "env_steps_per_s": round(tick.env.num_envs * ticks / s, 1)}


def gpu_profile_pass(tick: Any, ticks: int, first: int) -> dict[str, Any]:
    """torch.profiler over `ticks` ticks: kernels per tick, GPU busy (union of device intervals) vs wall."""
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    t0 = time.perf_counter()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        tick.run(first, ticks)
        torch.cuda.synchronize()
    wall = time.perf_counter() - t0
    intervals, kernels, memcpys = [], 0, 0
    by_name: dict[str, list[float]] = collections.defaultdict(lambda: [0, 0.0])
    for ev in prof.events():
        if ev.device_type != torch.autograd.DeviceType.CUDA:
            continue
        start = ev.time_range.start
        end = ev.time_range.end
        intervals.append((start, end))
        name = ev.name
        if "memcpy" in name.lower() or "memset" in name.lower():
            memcpys += 1
        else:
            kernels += 1
        row = by_name[name[:90]]
        row[0] += 1
        row[1] += end - start
    intervals.sort()
    busy, cur_s, cur_e = 0.0, None, None
    for s, e in intervals:
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                busy += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None:
        busy += cur_e - cur_s
    top = sorted(by_name.items(), key=lambda kv: -kv[1][1])[:25]
    return {
        "wall_ms_per_tick_profiled": round(wall * 1e3 / ticks, 3),
        "gpu_busy_ms_per_tick": round(busy / 1e3 / ticks, 3),
        "kernels_per_tick": round(kernels / ticks, 1),
        "memcpy_memset_per_tick": round(memcpys / ticks, 1),
        "top_kernels": [{"name": n, "per_tick": round(c / ticks, 2), "us_per_tick": round(us / ticks, 1)}
                        for n, (c, us) in top],
    }


def sync_debug_pass(tick: Any, ticks: int, first: int) -> list[dict[str, Any]]:
    """torch.cuda.set_sync_debug_mode('warn') over `ticks` ticks: each warned sync with its source line."""
    seen: dict[tuple[str, str], int] = collections.defaultdict(int)
    saved = warnings.showwarning

    def record(message: Any, category: Any, filename: str, lineno: int, file: Any = None, line: Any = None) -> None:
        seen[(str(message).splitlines()[0][:80], source_line())] += 1

    warnings.showwarning = record
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("always")
            warnings.showwarning = record
            torch.cuda.set_sync_debug_mode("warn")
            try:
                tick.run(first, ticks)
            finally:
                torch.cuda.set_sync_debug_mode(0)
            torch.cuda.synchronize()
    finally:
        warnings.showwarning = saved
    return [{"warning": w, "source": s, "per_tick": round(n / ticks, 3)}
            for (w, s), n in sorted(seen.items(), key=lambda kv: -kv[1])]


class Arm:
    """One arm's collector tick, built and warmed once, kept while the timing rounds alternate the arms;
    `first` is the next tick's index."""

    def __init__(self, args: argparse.Namespace, arm: str) -> None:
        t0 = time.perf_counter()
        self.name = arm
        self.tick = build_tick(args.task, args.num_envs, args.device, arm != "eager", args.overrides, args.cpu_replay,
                               True if arm == "staged_reset_graphs" else None)
        self.build_s = time.perf_counter() - t0
        self.tick.run(0, args.warmup)
        self.first = args.warmup
        # the staged step captures a graph stage on its second run: warm on until every one is captured (the
        # reset path's first needs two ticks with done envs), so that no pass below records a capture
        self.staged = getattr(self.tick.env, "staged", None)
        extra = 0
        while self.staged is not None and not _all_captured(self.staged) and extra < args.max_extra_warmup:
            self.tick.run(self.first, 1)
            self.first += 1
            extra += 1
        _sync(args.device)
        self.runs_before: dict[str, int] = {}
        if self.staged is not None:
            # no capture inside the measured ticks (a reset body for a count of done envs not seen yet runs
            # eagerly): they measure the captured step, and no profiler records a capture
            self.staged.capture_enabled = False
            self.runs_before = dict(self.staged.stage_runs)
        self.out: dict[str, Any] = {"arm": arm, "build_s": round(self.build_s, 1), "warmup_ticks": self.first}

    def time(self, ticks: int, device: str) -> dict[str, float]:
        r = time_pass(self.tick, ticks, self.first, device)
        self.first += ticks
        return r

    def profile(self, args: argparse.Namespace) -> dict[str, Any]:
        """The op counts and, on CUDA, torch.profiler and the sync-debug pass (after the timing rounds), then
        the staged step's state; the env is released."""
        out = self.out
        out["counts"] = count_pass(self.tick, args.ticks, self.first, args.device)
        self.first += args.ticks
        if args.device.startswith("cuda"):
            out["gpu"] = gpu_profile_pass(self.tick, args.ticks, self.first)
            self.first += args.ticks
            out["sync_debug"] = sync_debug_pass(self.tick, args.ticks, self.first)
            self.first += args.ticks
        if self.staged is not None:
            out["staged"] = self.staged.describe()
            out["measured_stage_runs"] = {k: v - self.runs_before[k] for k, v in self.staged.stage_runs.items()}
            out["graph_stages"] = [f"stage:{n}" for n in out["staged"]["graphs_now"]]
        self.tick.release()
        self.tick.env.close()
        return out


def round_order(arms: list[str], rounds: int) -> list[list[str]]:
    """The arms' order in each timing round: forward, then backward (ABC CBA ABC ...), so that no arm always
    runs first or last after another."""
    return [list(arms) if r % 2 == 0 else list(reversed(arms)) for r in range(rounds)]


def summarize_rounds(per_round: list[dict[str, float]], reference: str = "eager") -> dict[str, dict[str, Any]]:
    """Per arm, from each round's ms per tick: the median and min-max over the rounds, and the ratio to
    `reference` of the same round (its median and min-max; ratio > 1: slower than the reference)."""
    import statistics

    out: dict[str, dict[str, Any]] = {}
    for arm in per_round[0] if per_round else {}:
        ms = [r[arm] for r in per_round]
        row: dict[str, Any] = {"ms_per_tick_rounds": ms, "ms_per_tick_median": round(statistics.median(ms), 3),
                               "ms_per_tick_min": round(min(ms), 3), "ms_per_tick_max": round(max(ms), 3)}
        if reference in per_round[0] and arm != reference:
            ratios = [r[arm] / r[reference] for r in per_round]
            row.update(ratio_to_eager_median=round(statistics.median(ratios), 4),
                       ratio_to_eager_min=round(min(ratios), 4), ratio_to_eager_max=round(max(ratios), 4))
        out[arm] = row
    return out


def timing_rounds(arms: list[Arm], args: argparse.Namespace) -> dict[str, Any]:
    """`args.rounds` rounds, each timing `args.round_ticks` ticks of every arm, the arms alternating."""
    per_round: list[dict[str, float]] = []
    by_name = {a.name: a for a in arms}
    for order in round_order([a.name for a in arms], args.rounds):
        per_round.append({name: by_name[name].time(args.round_ticks, args.device)["ms_per_tick"] for name in order})
    summary = summarize_rounds(per_round)
    for a in arms:
        row = summary[a.name]
        med = row["ms_per_tick_median"]
        a.out["timed"] = {"ms_per_tick": med, "env_steps_per_s": round(a.tick.env.num_envs * 1e3 / med, 1), **row}
    return {"rounds": args.rounds, "ticks_per_round": args.round_ticks,
            "order": round_order([a.name for a in arms], args.rounds), "per_round_ms": per_round, "arms": summary}


def _all_captured(staged: Any) -> bool:
    """Every graph stage captured, and the reset body for at least one count of done envs."""
    if staged.graphs == "none":
        return True
    state = staged.describe()
    body = state["reset_body"]
    return (all(s.get("graph", True) for s in state["stages"].values() if "runs" in s)
            and (not body["graph_per_count"] or body["captured"] >= 1))


def print_arm(r: dict[str, Any]) -> None:
    c = r["counts"]
    print(f"\n== {r['arm']}: {r['timed']['ms_per_tick']} ms per tick ({r['timed']['env_steps_per_s']} env steps/s), "
          f"{c['totals']['ops']} ops, {c['totals']['warp_launches']} warp launches, {c['totals']['syncs']} host syncs "
          f"per tick (built in {r['build_s']} s)")
    if "gpu" in r:
        g = r["gpu"]
        print(f"   GPU busy {g['gpu_busy_ms_per_tick']} ms of {g['wall_ms_per_tick_profiled']} ms wall per tick; "
              f"{g['kernels_per_tick']} kernels + {g['memcpy_memset_per_tick']} memcpy/memset per tick")
    print(f"   {'stage':70s} {'ops':>8s} {'warp':>6s} {'host ms':>8s} {'calls':>6s}")
    warp_by_stage: dict[str, float] = collections.defaultdict(float)
    for k, v in c["warp_launches_per_tick"].items():
        warp_by_stage[k.split("|")[0]] += v
    keys = sorted(set(c["ops_per_tick"]) | set(warp_by_stage) | set(c["host_ms_per_tick"]))
    graphs = set(r.get("graph_stages", []))
    in_graph = lambda k: any(k.endswith(g) or f"{g}/" in k for g in graphs)  # noqa: E731
    for k in keys:
        label = k + ("  [graph]" if in_graph(k) else "")
        print(f"   {label[-70:]:70s} {c['ops_per_tick'].get(k, 0):8.1f} {warp_by_stage.get(k, 0):6.1f} "
              f"{c['host_ms_per_tick'].get(k, 0):8.2f} {c['calls_per_tick'].get(k, 0):6.2f}")
    if graphs:
        inside = sum(v for k, v in c["ops_per_tick"].items() if in_graph(k))
        print(f"   ops per tick inside graph stages: {inside:.1f} (one graph launch each on CUDA; on the CPU the "
              f"replay also copies each result into place); eager: {c['totals']['ops'] - inside:.1f}")
    print("   host syncs (per tick, stage, kind, source):")
    for s in c["syncs"]:
        print(f"   {s['per_tick']:6.2f}  {s['stage'][-45:]:45s} {s['kind'][:34]:34s} {s['source']}")
    for s in r.get("sync_debug", []):
        print(f"   sync_debug {s['per_tick']:6.2f}  {s['warning'][:50]:50s} {s['source']}")


def print_rounds(t: dict[str, Any]) -> None:
    print(f"timing: {t['rounds']} rounds of {t['ticks_per_round']} ticks per arm, orders {t['order'][:2]}...")
    for arm, row in t["arms"].items():
        ratio = (f", ratio to eager {row['ratio_to_eager_median']} ({row['ratio_to_eager_min']}-"
                 f"{row['ratio_to_eager_max']})" if "ratio_to_eager_median" in row else "")
        print(f"   {arm:20s} {row['ms_per_tick_median']} ms per tick (rounds {row['ms_per_tick_min']}-"
              f"{row['ms_per_tick_max']}){ratio}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--task", default="Mjlab-Velocity-Flat-Unitree-G1")
    p.add_argument("--num-envs", type=int, default=8)
    p.add_argument("--device", default="cpu")
    p.add_argument("--arms", nargs="+", choices=("eager", "staged", "staged_reset_graphs"), default=["eager", "staged"])
    p.add_argument("--ticks", type=int, default=40)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--rounds", type=int, default=int(os.environ.get("MJLAB_TICK_ROUNDS", "5")),
                   help="timing rounds, the arms alternating (ABC CBA ...); env MJLAB_TICK_ROUNDS")
    p.add_argument("--round-ticks", type=int, default=int(os.environ.get("MJLAB_TICK_ROUND_TICKS", "30")),
                   help="ticks timed per arm per round; env MJLAB_TICK_ROUND_TICKS")
    p.add_argument("--max-extra-warmup", type=int, default=200,
                   help="more warm-up ticks, at most, until the staged step has captured every graph stage")
    p.add_argument("--out", default=None)
    p.add_argument("--no-cpu-replay", dest="cpu_replay", action="store_false",
                   help="on the CPU run the staged arm's stages eagerly (sim.mjlab_staged_step=true as is) instead of "
                        "replaying its graph stages as CpuReplayGraph (whose ops then show under stage:<name>)")
    p.add_argument("overrides", nargs="*")
    args = p.parse_args()
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("error: --device cuda needs a CUDA device", file=sys.stderr)
        return 2
    results = {"task": args.task, "num_envs": args.num_envs, "device": args.device, "ticks": args.ticks,
               "warmup": args.warmup, "torch": torch.__version__, "overrides": args.overrides,
               "gpu": torch.cuda.get_device_name(0) if args.device.startswith("cuda") else None, "arms": []}
    built = [Arm(args, arm) for arm in args.arms]  # every arm's env alive at once (three G1 4096s fit an H200)
    results["timing"] = timing_rounds(built, args)
    print_rounds(results["timing"])
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            json.dump(results, f, indent=1)
    for arm in built:
        r = arm.profile(args)
        results["arms"].append(r)
        print_arm(r)
        if args.out:  # after each arm: a later arm's failure keeps the earlier one's result
            with open(args.out, "w", encoding="utf-8") as f:
                json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
