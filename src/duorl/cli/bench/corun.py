"""`duorl bench corun --algo A --task T`: how much running the learner and the collector at once gains.

Arms (each side in its own process, as in a duo; all sides of an arm timed over the same wall-clock
window once every one of them has compiled, captured and warmed up):

- `learner`: the learner's iteration alone (the whole-cycle graph on CUDA, on a replay ring of random
  transitions as `bench learner` builds it);
- `collector`: the collector's tick alone (the captured, compiled tick on CUDA, as `bench collector`);
- `both`: the two at once, time-sliced by the driver;
- `both_mps`: the two at once under a CUDA MPS daemon this command starts in its own directory and
  stops afterwards (CUDA only).

For each co-run arm it reports the **co-run capacity bound**: the sum of the two sides' alone times over
the slower side's co-run time. 1.0 means running them together is as fast as one after the other; the
bound is the most any sharing of this GPU can gain for this work (a duo iteration cannot be shorter
than the slower side). `mps_gain` is `both`'s slower time over `both_mps`'s.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from duorl.telemetry.summary import write_json_atomic

ARMS = ("learner", "collector", "both", "both_mps")
_SIDES = {"learner": ("learner",), "collector": ("collector",), "both": ("learner", "collector"),
          "both_mps": ("learner", "collector")}
READY_TIMEOUT_S = 1200.0  # a cold G1 start compiles the tick and the learner (minutes)


# ---------------------------------------------------------------------------------------------- worker


def _learner_step(algo: str, task: str | None, overrides: list[str], device: str) -> tuple[Any, Any]:
    """(one learner iteration, sync) as a run takes it: the whole-cycle graph where the switch puts it."""
    from duorl.cli.bench.learner import learner_fixture
    from duorl.config.switches import whole_cycle_graph_enabled

    fx = learner_fixture(algo, task, overrides, device)
    learner, sampler = fx.setup()
    n = fx.num_updates
    if whole_cycle_graph_enabled(fx.cfg, str(fx.device)):
        from duorl.gpu.graphs import WholeCycleGraph

        graph = WholeCycleGraph(learner, extra_generators=[sampler.generator])
        return (lambda: graph.train_iteration(sampler.sample, n)), fx.sync
    return (lambda: learner.train_iteration(sampler.sample, n)), fx.sync


def _collector_step(algo: str, task: str | None, overrides: list[str], device: str, sim: str | None) -> tuple[Any, Any, int]:
    """(one collector tick, sync, envs) as the collector builds it."""
    import torch

    from duorl.cli.bench.collector import build_collector_tick
    from duorl.cli.configure import load_config
    from duorl.config.switches import env_device, solver_early_exit_enabled, tick_compile_enabled, tick_graph_enabled

    from duorl.envs.task_sources import source_of

    cfg = load_config(algo, task, sim, overrides)
    env_dev = env_device(cfg, device)
    graph = tick_graph_enabled(cfg, env_dev, source_of(task).tick_capturable)
    tick = build_collector_tick(cfg, cfg.training.num_envs, device, cuda_graph=graph,
                                compile=tick_compile_enabled(cfg, env_dev, graph),
                                solver_early_exit=solver_early_exit_enabled(cfg, graph))
    counter = itertools.count()
    dev = torch.device(device)
    sync = (lambda: torch.cuda.synchronize(dev)) if dev.type == "cuda" else (lambda: None)
    return (lambda: tick.run(next(counter), 1)), sync, cfg.training.num_envs


def _wait_for(path: Path, timeout_s: float) -> str:
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"no {path.name} from the parent within {timeout_s:.0f} s")
        time.sleep(0.01)
    return path.read_text()


def worker_main(argv: list[str]) -> int:
    """One side: build, warm up, say ready, wait for the window, time every step inside it."""
    p = argparse.ArgumentParser(prog="python -m duorl.cli.bench.corun")
    p.add_argument("side", choices=("learner", "collector"))
    p.add_argument("--dir", required=True)
    p.add_argument("--algo", required=True)
    p.add_argument("--task", default=None)
    p.add_argument("--sim", default=None)
    p.add_argument("--device", required=True)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("overrides", nargs="*")
    a = p.parse_intermixed_args(argv)
    d = Path(a.dir)
    envs = None
    if a.side == "learner":
        step, sync = _learner_step(a.algo, a.task, a.overrides, a.device)
    else:
        step, sync, envs = _collector_step(a.algo, a.task, a.overrides, a.device, a.sim)
    for _ in range(a.warmup):  # compile, capture, first replays
        step()
    sync()
    (d / f"{a.side}.ready").write_text(str(os.getpid()))
    go = json.loads(_wait_for(d / "go.json", READY_TIMEOUT_S))
    start_s, window_s = float(go["start_s"]), float(go["window_s"])
    while time.time() < start_s:
        time.sleep(0.001)
    ms: list[float] = []
    end_s = start_s + window_s
    while True:
        t0 = time.time()
        step()
        sync()
        t1 = time.time()
        if t1 > end_s:
            break
        ms.append((t1 - t0) * 1e3)
    result = {"side": a.side, "pid": os.getpid(), "steps": len(ms), "median_ms": round(statistics.median(ms), 4) if ms else None,
              "mean_ms": round(statistics.fmean(ms), 4) if ms else None}
    if envs is not None and ms:
        result["env_steps_per_s"] = round(envs * 1e3 / statistics.fmean(ms), 1)
    (d / f"{a.side}.json").write_text(json.dumps(result))
    return 0


# ---------------------------------------------------------------------------------------------- parent


def _run_arm(arm: str, args: argparse.Namespace, workdir: Path, env: dict[str, str]) -> dict[str, Any]:
    d = workdir / arm
    d.mkdir(parents=True)
    procs: dict[str, subprocess.Popen] = {}
    try:
        for side in _SIDES[arm]:
            cmd = [sys.executable, "-m", "duorl.cli.bench.corun", side, "--dir", str(d), "--algo", args.algo,
                   "--device", args.device, "--warmup", str(args.warmup),
                   *(["--task", args.task] if args.task else []), *(["--sim", args.sim] if args.sim else []),
                   *args.overrides]
            log = open(d / f"{side}.log", "w")
            procs[side] = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
            log.close()
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not all((d / f"{s}.ready").exists() for s in procs):
            for side, proc in procs.items():
                if proc.poll() is not None and not (d / f"{side}.ready").exists():
                    tail = (d / f"{side}.log").read_text(errors="replace")[-3000:]
                    raise RuntimeError(f"arm {arm}: the {side} process exited with {proc.returncode} before the "
                                       f"window:\n{tail}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"arm {arm}: not every side was ready within {READY_TIMEOUT_S:.0f} s")
            time.sleep(0.05)
        # renamed into place whole: a worker polling for it never reads a half-written file
        write_json_atomic(d / "go.json", {"start_s": time.time() + 1.0, "window_s": args.window_s})
        for side, proc in procs.items():
            rc = proc.wait(timeout=args.window_s + 120.0)
            if rc != 0:
                tail = (d / f"{side}.log").read_text(errors="replace")[-3000:]
                raise RuntimeError(f"arm {arm}: the {side} process failed with exit code {rc}:\n{tail}")
        return {side: json.loads((d / f"{side}.json").read_text()) for side in procs}
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=30)


def capacity_bounds(arms: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The co-run capacity bound of each co-run arm, and MPS's gain over plain time slicing."""
    out: dict[str, Any] = {}
    alone = {s: arms[s][s]["mean_ms"] for s in ("learner", "collector") if s in arms}
    serial = sum(alone.values()) if len(alone) == 2 else None
    slower = {}
    for arm in ("both", "both_mps"):
        if arm in arms:
            slower[arm] = max(arms[arm][s]["mean_ms"] for s in ("learner", "collector"))
            if serial is not None:
                out[f"{arm}_capacity_bound"] = round(serial / slower[arm], 4)
    if serial is not None:
        out["serial_ms"] = round(serial, 4)
    if len(slower) == 2:
        out["mps_gain"] = round(slower["both"] / slower["both_mps"], 4)
    return out


def run_corun(args: argparse.Namespace, command: str) -> dict[str, Any]:
    import torch

    arms: dict[str, dict[str, Any]] = {}
    env = dict(os.environ)
    with tempfile.TemporaryDirectory(prefix="duorl-corun-") as tmp:
        workdir = Path(tmp)
        for arm in args.arms:
            if arm == "both_mps":
                from duorl.mps import daemon

                name = f"corun-{os.getpid()}"
                state = daemon.start(name)
                try:
                    arms[arm] = _run_arm(arm, args, workdir, dict(env, CUDA_MPS_PIPE_DIRECTORY=state["pipe_directory"]))
                finally:
                    daemon.stop(name, force=True)
            else:
                arms[arm] = _run_arm(arm, args, workdir, env)
            print(f"corun {arm}: " + ", ".join(f"{s} {r['mean_ms']} ms" for s, r in arms[arm].items()), file=sys.stderr)
    dev = torch.device(args.device)
    return {
        "command": command,
        "date": _dt.datetime.now().isoformat(timespec="seconds"),
        "device": args.device,
        "gpu": torch.cuda.get_device_name(dev) if dev.type == "cuda" else None,
        "torch": torch.__version__,
        "algo": args.algo, "task": args.task, "sim": args.sim, "overrides": list(args.overrides),
        "window_s": args.window_s,
        "arms": arms,
        **capacity_bounds(arms),
    }


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from duorl.config.schema import ALGOS
    from duorl.envs.tasks.builtin import BENCH_TASK

    parser.add_argument("--algo", choices=ALGOS, default="sac", help="learner and actor (default: sac)")
    parser.add_argument("--task", default=BENCH_TASK, help=f"task (default: {BENCH_TASK})")
    parser.add_argument("--sim", default=None, help="physics backend (default: the task's)")
    parser.add_argument("--device", default=None, help="cuda, cuda:N or cpu (default: cuda when visible)")
    parser.add_argument("--window-s", type=float, default=15.0, metavar="S", help="timed window per arm (default: 15)")
    parser.add_argument("--warmup", type=int, default=5, metavar="N", help="untimed steps per side first (default: 5)")
    parser.add_argument("--arms", default=None, help=f"comma-separated, of {','.join(ARMS)} (default: all; without "
                        "CUDA all but both_mps)")
    parser.add_argument("--out", default=None, metavar="FILE.json", help="also write the JSON here")
    parser.add_argument("overrides", nargs="*", metavar="key=value", help="configuration overrides")


def main(args: argparse.Namespace) -> int:
    from duorl.cli.bench.report import emit
    from duorl.config.devices import check_device_flag
    from duorl.config.errors import ConfigError
    from duorl.cli.configure import load_config

    command = "duorl " + " ".join(getattr(args, "argv", None) or sys.argv[1:])
    try:
        check_device_flag(args.device)
        import torch

        args.device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
        cuda = args.device.startswith("cuda")
        arms = args.arms.split(",") if args.arms else [a for a in ARMS if cuda or a != "both_mps"]
        bad = [a for a in arms if a not in ARMS]
        if bad or not arms:
            raise ConfigError("--arms", args.arms, "not a list of arms", ",".join(ARMS), "e.g. --arms learner,collector,both")
        if "both_mps" in arms and not cuda:
            raise ConfigError("--arms", args.arms, "both_mps needs a CUDA device", "learner,collector,both here",
                              "leave both_mps out on this machine")
        if "both_mps" in arms:  # before the other arms' minutes: can this machine start a daemon at all?
            from duorl.mps.daemon import MpsCommandError, start_prerequisites

            try:
                start_prerequisites()
            except MpsCommandError as e:
                raise ConfigError("--arms", ",".join(arms), f"both_mps starts a CUDA MPS daemon, and {e}",
                                  "learner,collector,both here", "leave both_mps out: --arms learner,collector,both") from None
        if args.window_s <= 0 or args.warmup < 1:
            raise ConfigError("--window-s/--warmup", f"{args.window_s}/{args.warmup}", "out of range",
                              "window > 0 s, warmup >= 1", "e.g. --window-s 15 --warmup 5")
        load_config(args.algo, args.task, args.sim, list(args.overrides))  # every key checked before a process starts
        args.arms = arms
        result = run_corun(args, command)
    except (ConfigError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except RuntimeError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    emit(result, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(worker_main(sys.argv[1:]))
