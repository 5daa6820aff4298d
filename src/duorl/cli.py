"""`duorl train | metrics`: routing only. Work lives in duorl.config, duorl.train and duorl.telemetry."""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any, Callable, Sequence

from duorl import __version__
from duorl.config.schema import ALGOS, SIMS

_SIM_NOTES = {
    "mujoco": "MuJoCo's C library on CPU threads",
    "mjwarp": "MuJoCo Warp: CUDA, or warp's CPU device",
}


class _LazyHelpParser(argparse.ArgumentParser):
    """An ArgumentParser whose description is computed only when help is shown: listing tasks imports
    the envs registry (torch, simulators), which `train` pays for anyway but `metrics` should not."""

    lazy_description: Callable[[], str] | None = None

    def format_help(self) -> str:
        if self.lazy_description is not None:
            self.description = self.lazy_description()
            self.lazy_description = None
        return super().format_help()


def _train_description() -> str:
    from duorl.config.catalog import available_tasks
    from duorl.config.validate import BUILT_ALGOS

    algos = ", ".join(a if a in BUILT_ALGOS else f"{a} (not built yet)" for a in ALGOS)
    sims = "; ".join(f"{s} ({_SIM_NOTES.get(s, '')})" for s in SIMS)
    return (
        "Train a policy with one learner/collector duo.\n\n"
        f"algorithms (--algo): {algos}\n"
        f"tasks (--task):      {', '.join(available_tasks())}\n"
        f"sims (--sim):        {sims}\n"
        "                     default: mjwarp when a CUDA device is visible, else mujoco\n\n"
        "Trailing key=value pairs override the configuration (dotted keys of duorl/config/schema.py;\n"
        "order: schema < algo YAML < task YAML < key=value). Quote values with brackets in a shell. e.g.\n"
        "  duorl train --task pendulum_swingup algo.max_iterations=200 training.num_envs=32\n"
        "  duorl train --algo sac --sim mujoco 'training.devices=[cpu]' 'algo.actor_hidden_dims=[256,256]'"
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="duorl", description="Off-policy RL on many MuJoCo environments.")
    parser.add_argument("--version", action="version", version=f"duorl {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="{train,metrics,play,mps,assets,motion,bench}", parser_class=_LazyHelpParser)

    train = sub.add_parser(
        "train", help="train a policy", formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    assert isinstance(train, _LazyHelpParser)
    train.lazy_description = _train_description
    train.add_argument("--algo", choices=ALGOS, default="sac", help="learner (default: sac)")
    train.add_argument("--task", default="pendulum_swingup", help="task name (default: pendulum_swingup)")
    train.add_argument("--sim", choices=SIMS, default=None, help="physics backend (default: best available)")
    train.add_argument("overrides", nargs="*", metavar="key=value", help="configuration overrides")

    metrics = sub.add_parser(
        "metrics", help="mean of the last N logged iterations of a run",
        description="Mean of every numeric field over the last N rows of RUN_DIR/metrics.jsonl.",
    )
    metrics.add_argument("run_dir", metavar="RUN_DIR", help="run directory (or its metrics.jsonl)")
    metrics.add_argument("--last", type=int, default=100, metavar="N", help="rows to average (default: 100)")
    metrics.add_argument("--json", action="store_true", help="print a JSON object instead of a table")

    play = sub.add_parser(
        "play", help="evaluate a run's policy deterministically",
        description="Deterministic evaluation of a run's latest (or a chosen) checkpoint: N episodes of its task.",
    )
    play.add_argument("run_dir", metavar="RUN_DIR", help="run directory")
    play.add_argument("--episodes", type=int, default=8, metavar="N", help="episodes (default: 8)")
    play.add_argument("--checkpoint", default=None, metavar="PATH", help="a checkpoint file (default: the latest)")
    play.add_argument("--video", default=None, metavar="OUT.mp4", help="record episode 0 (needs OpenGL)")
    play.add_argument("--json", action="store_true", help="print a JSON object")

    mps = sub.add_parser(
        "mps", help="manage a CUDA MPS daemon duorl owns",
        description="start/stop a CUDA MPS control daemon in ~/.cache/duorl/mps/NAME, show its servers and "
        "clients, or check every prerequisite of training.cuda_process_sharing=mps (doctor).",
    )
    mps.add_argument("action", choices=("start", "status", "stop", "doctor"))
    mps.add_argument("--name", default="default", help="daemon name (default: default)")

    assets = sub.add_parser(
        "assets", help="fetch a robot model into the local cache",
        description="Fetch the Unitree G1 model: `pip download --no-deps` of the mjlab wheel, then only the "
                    "model file and its meshes are extracted into duorl's cache (~/.cache/duorl/assets/g1).",
    )
    assets.add_argument("robot", choices=["g1"], help="the robot (g1: Unitree G1, 29 DoF)")
    assets.add_argument("--no-meshes", action="store_true", help="only the model file (training needs no meshes)")
    assets.add_argument("--force", action="store_true", help="fetch again even if the cache is filled")
    assets.add_argument("--wheel", default=None, metavar="PATH", help="extract from this mjlab wheel (no download)")
    assets.add_argument("--if-missing", action="store_true",
                        help="do nothing if a model is already found (DUORL_G1_XML, mjlab, or the cache)")

    motion = sub.add_parser("motion", help="reference motion clips",
                            description="Reference motion clips for g1_motion_tracking.")
    motion_sub = motion.add_subparsers(dest="motion_command", metavar="{synth}")
    synth = motion_sub.add_parser(
        "synth", help="write the synthetic G1 clip",
        description="Write a physically sensible G1 clip (feet planted, joints in range, smooth, consistent "
                    "velocities) in the .npz clip format; it is g1_motion_tracking's default clip.",
    )
    synth.add_argument("out", metavar="OUT.npz", help="output file")
    synth.add_argument("--seconds", type=float, default=10.0, help="duration (default: 10)")
    synth.add_argument("--fps", type=float, default=50.0, help="frames per second (default: 50)")
    synth.add_argument("--robot-xml", default=None, metavar="PATH", help="G1 model file (default: the usual lookup)")

    bench = sub.add_parser("bench", help="benchmarks", description="Benchmarks that print (and write) JSON.")
    bench_sub = bench.add_subparsers(dest="bench_command", metavar="{learner,collector,mps}")
    bench_learner = bench_sub.add_parser(
        "learner", help="ms per learner iteration, eager vs whole-cycle CUDA graph",
        description="Milliseconds per learner iteration on the current device, eager and (on CUDA) replayed as a "
                    "whole-cycle CUDA graph, with random replay. Options come before key=value overrides.",
    )
    from duorl.bench.learner import add_arguments as _bench_learner_arguments

    _bench_learner_arguments(bench_learner)
    bench_collector = bench_sub.add_parser(
        "collector", help="collector-only env steps/s, eager ticks vs one CUDA graph per tick",
        description="Runs the collector's tick (policy, noise, physics, rewards, resets, replay write) without a learner "
                    "and reports collector_env_steps_per_s per env count, eager and (CUDA envs) graph-captured. "
                    "Options come before key=value overrides.",
    )
    from duorl.bench.collector import add_arguments as _bench_collector_arguments

    _bench_collector_arguments(bench_collector)
    bench_mps = bench_sub.add_parser(
        "mps", help="env steps/s with CUDA MPS off vs on (needs a running daemon: duorl mps start)",
        description="Runs identical `duorl train` commands with training.cuda_process_sharing null and mps, "
                    "interleaved, >= 300 iterations each; reports the mean of the last 100 (first 50 ignored) per arm "
                    "and throughput_gain, as JSON.",
    )
    bench_mps.add_argument("--algo", default="sac")
    bench_mps.add_argument("--task", default="pendulum_swingup")
    bench_mps.add_argument("--sim", default=None)
    bench_mps.add_argument("--iterations", type=int, default=300)
    bench_mps.add_argument("--repeats", type=int, default=2)
    bench_mps.add_argument("--out", default=None, metavar="FILE.json")
    bench_mps.add_argument("overrides", nargs="*", metavar="key=value", help="passed to every duorl train run")
    return parser


def _error(msg: str) -> int:
    print(f"error: {msg}", file=sys.stderr)
    return 2


def _cmd_train(args: argparse.Namespace, overrides: list[str], argv: list[str]) -> int:
    from duorl.config.errors import InputRefused
    from duorl.config.load import load_config
    from duorl.dist.launch import rank_env

    renv = rank_env()
    try:
        if renv is not None:
            # a data-parallel rank: narrow the visible devices to its own entry before CUDA initialises
            from duorl.dist.launch import narrow_visible_devices, nvml_gpu_count, rank_device_entry

            shape = load_config(args.algo, args.task, args.sim, overrides, probe_devices=False)
            narrow_visible_devices(rank_device_entry(shape.training.devices, shape.sim.name, renv, nvml_gpu_count()))
        cfg = load_config(args.algo, args.task, args.sim, overrides)
        from duorl.config.switches import data_parallel_enabled

        if renv is None and data_parallel_enabled(cfg, launched_rank=False):
            return _launch_data_parallel(cfg, argv)
        from duorl.train import train  # the runtime, imported only once the config is known good

        return int(train(cfg) or 0)
    except InputRefused as e:  # ConfigError, also raised by the runtime's late checks (e.g. resolve_device)
        return _error(str(e))
    except KeyboardInterrupt:  # a second Ctrl-C: stopped at once, as asked (docs/exit_codes.md)
        print("duorl: interrupted", file=sys.stderr)
        return 0


def _launch_data_parallel(cfg: Any, argv: list[str]) -> int:
    """One rank per entry of training.devices, each running this very command (dist.launch); the run
    directory is named here so that the launcher can read the run's outcome."""
    from duorl.dist.launch import launch
    from duorl.telemetry.run_directory import default_run_dir

    from duorl.preflight import check_log_dir

    check_log_dir(cfg)  # an existing or uncreatable run directory is refused before any rank starts
    argv = list(argv)
    run_dir = cfg.training.log_dir
    if run_dir is None:
        run_dir = str(default_run_dir(cfg))
        argv.append(f"training.log_dir={run_dir}")
    return launch(argv, len(cfg.training.devices or [None]), run_dir)


def _fmt(v: float) -> str:
    if math.isnan(v) or math.isinf(v):
        return str(v)
    return f"{v:.0f}" if abs(v) >= 1e6 else f"{v:.6g}"


def _cmd_metrics(args: argparse.Namespace) -> int:
    from duorl.telemetry.metrics_file import read_metrics, summary_of_last

    run_dir = Path(args.run_dir)
    path = run_dir if run_dir.is_file() else run_dir / "metrics.jsonl"
    if args.last < 1:
        return _error(f"--last={args.last}: must be >= 1. Fix: e.g. --last 100")
    if not run_dir.exists():
        return _error(f"run directory {run_dir} does not exist. Fix: give the directory `duorl train` printed")
    if not path.is_file():
        return _error(f"{path} not found. Fix: wait for the run's first logged iteration, or give the run's directory")
    notes: list[str] = []
    try:
        rows = read_metrics(path, notes)
    except (OSError, ValueError) as e:
        return _error(f"{e}. Fix: give a run directory or its metrics.jsonl")
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    if not rows:
        return _error(f"{path} has no rows yet. Fix: wait for the run's first logged iteration")
    summary: dict[str, Any] = {"run_dir": str(run_dir), **summary_of_last(rows, args.last)}

    if args.json:
        # NaN/Infinity are not JSON: a mean that is not finite becomes null
        summary["mean"] = {k: (v if math.isfinite(v) else None) for k, v in summary["mean"].items()}
        print(json.dumps(summary, indent=2))
        return 0
    first, last = summary["iterations"]
    print(f"{run_dir}: mean of the last {summary['n']} logged iterations ({first}..{last})")
    means: dict[str, float] = summary["mean"]
    if means:
        width = max(len(k) for k in means)
        values = {k: _fmt(v) for k, v in means.items()}
        vwidth = max(len(s) for s in values.values())
        for k, s in values.items():
            print(f"  {k.ljust(width)}  {s.rjust(vwidth)}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        # parse_known_args: key=value pairs may come after options (`train --sim mujoco a=1 --algo sac b=2`)
        args, extras = parser.parse_known_args(argv)
        unknown = [x for x in extras if x.startswith("-") or args.command != "train"]
        if unknown:
            parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    except SystemExit as e:  # argparse exits for --help, --version and usage errors
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 2)
    if args.command == "train":
        from duorl.dist.launch import rank_env
        from duorl.runtime.stop_signals import stop_signals

        # before anything slow: an early Ctrl-C is a stop request too (a rank's second one is the launcher's)
        with stop_signals(escalate=rank_env() is None):
            return _cmd_train(args, list(args.overrides) + extras, argv)
    if args.command == "metrics":
        return _cmd_metrics(args)
    if args.command == "mps":
        from duorl.mps.daemon import mps_main

        return mps_main(args.action, args.name)
    if args.command == "play":
        from duorl.play import play_main

        return play_main(args.run_dir, args.episodes, args.checkpoint, args.video, args.json)
    if args.command == "assets":
        from duorl.envs.g1.assets import assets_command

        return assets_command(args.robot, meshes=not args.no_meshes, force=args.force, wheel=args.wheel,
                              if_missing=args.if_missing)
    if args.command == "motion" and args.motion_command == "synth":
        from duorl.config.errors import InputRefused
        from duorl.envs.motion.synth import synth_command
        from duorl.preflight import check_output_file

        try:
            check_output_file(args.out, "OUT.npz")  # before the clip is computed; nothing is written
        except InputRefused as e:
            return _error(str(e))
        return synth_command(args.out, args.seconds, args.fps, args.robot_xml)
    if args.command == "bench" and args.bench_command == "mps":
        from duorl.bench.mps_matrix import bench_mps_main

        return bench_mps_main(args.algo, args.task, args.sim, args.iterations, args.repeats, args.out, list(args.overrides))
    if args.command == "bench" and args.bench_command == "collector":
        from duorl.bench.collector import main as bench_collector_main

        args.argv = argv
        return bench_collector_main(args)
    if args.command == "bench" and args.bench_command == "learner":
        from duorl.bench.learner import main as bench_learner_main

        args.argv = argv
        return bench_learner_main(args)
    parser.print_help(sys.stderr)
    return 2
