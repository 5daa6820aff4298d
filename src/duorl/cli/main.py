"""`duorl train | config | tasks | metrics | plot | ...`: routing only. Work lives in duorl.config, duorl.cli.train and duorl.telemetry."""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from pathlib import Path
from typing import Any, Callable, Sequence

from duorl import __version__
from duorl.config.schema import ALGOS, SIMS
from duorl.envs.tasks.builtin import DEFAULT_TASK  # light: the task table, no torch
from duorl.startup_phases import PHASES

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
    from duorl.envs.task_sources import OTHER_SOURCES, task_names

    algos = ", ".join(ALGOS)
    sims = "; ".join(f"{s} ({_SIM_NOTES.get(s, '')})" for s in SIMS)
    return (
        "Train a policy with one learner/collector duo.\n\n"
        f"algorithms (--algo): {algos}\n"
        f"tasks (--task):      {', '.join(task_names())}\n"
        f"                     or {OTHER_SOURCES} (`duorl tasks` lists them; docs/tasks.md)\n"
        f"sims (--sim):        {sims}\n"
        "                     default: mjwarp when a CUDA device is visible, else mujoco\n\n"
        "Trailing key=value pairs override the configuration (order: schema < algo YAML < task YAML <\n"
        "key=value). `duorl config --keys` lists every key; `duorl config --algo A --task T [key=value ...]`\n"
        "prints the values a run would get and where each comes from. Quote values with brackets in a shell. e.g.\n"
        f"  duorl train --task {DEFAULT_TASK} algo.max_iterations=200 training.num_envs=32\n"
        "  duorl train --algo sac --sim mujoco 'training.devices=[cpu]' 'algo.actor_hidden_dims=[256,256]'"
    )


def _add_run_choice(parser: argparse.ArgumentParser, what: str) -> None:
    """--algo/--task/--sim as `duorl train` takes them (`what`: what the options choose for)."""
    parser.add_argument("--algo", choices=ALGOS, default="sac", help=f"learner {what} (default: sac)")
    parser.add_argument("--task", default=DEFAULT_TASK, help=f"task {what} (default: {DEFAULT_TASK})")
    parser.add_argument("--sim", choices=SIMS, default=None,
                        help="physics backend (default: mjwarp when a CUDA device is visible, else mujoco)")


def _add_config(sub: Any) -> None:
    config = sub.add_parser(
        "config", help="print the resolved configuration (or list every key)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Print the configuration `duorl train` would run with, as YAML, each value followed by its\n"
                    "source: schema (config/schema.py), algo (defaults/algo/ALGO.yaml), task\n"
                    "(envs/tasks/defaults/TASK.yaml), override (key=value), --algo/--task/--sim, or auto (picked for\n"
                    "this machine). The same checks as `duorl train` run first (exit 2 on a bad key or value).\n"
                    f"  duorl config --task {DEFAULT_TASK} training.num_envs=1024\n"
                    "  duorl config --keys",
    )
    _add_run_choice(config, "whose defaults to resolve")
    shown = config.add_mutually_exclusive_group()
    shown.add_argument("--keys", action="store_true", help="list every key with its type, default and meaning")
    shown.add_argument("--reference", action="store_true",
                       help="print docs/configuration.md (the configuration reference, generated from the schema)")
    config.add_argument("overrides", nargs="*", metavar="key=value", help="configuration overrides, as for train")


def _group(sub: Any, name: str, summary: str, description: str, dest: str, metavar: str = "ACTION") -> Any:
    """A command made of sub-commands (`duorl mps start`): its own help page, and the sub-parsers action."""
    group = sub.add_parser(name, help=summary, description=description)
    return group.add_subparsers(dest=dest, metavar=metavar, title=f"{metavar.lower()}s")


def _add_plot(sub: Any) -> None:
    plot = sub.add_parser(
        "plot", help="draw a run's learning curves from its metrics.jsonl",
        description="Draw RUN_DIR/plots/learning_curves.png from RUN_DIR/metrics.jsonl: the page a run draws when it "
                    "ends, for any run, a killed or a running one too. It (re)writes that one file and nothing else.",
    )
    plot.add_argument("run_dir", metavar="RUN_DIR", help="run directory")


def _cmd_plot(args: argparse.Namespace) -> int:
    """`duorl plot RUN_DIR`: refuses a directory without rows to draw (exit 2) before it draws anything."""
    from duorl.cli.preflight import check_output_file
    from duorl.config.errors import InputRefused
    from duorl.telemetry.metrics_file import read_metrics

    run_dir = Path(args.run_dir)
    fix = "give a directory that `duorl train` wrote (it prints 'duorl: run directory ...')"
    if not run_dir.is_dir():
        return _error(f"RUN_DIR={run_dir}: {'is not a directory' if run_dir.exists() else 'does not exist'}. Fix: {fix}")
    metrics = run_dir / "metrics.jsonl"
    if not metrics.is_file():
        return _error(f"RUN_DIR={run_dir}: has no metrics.jsonl (not a run directory, or a run stopped before its "
                      f"first logged iteration). Fix: {fix}")
    notes: list[str] = []
    try:
        rows = read_metrics(metrics, notes)
        check_output_file(str(run_dir / "plots" / "learning_curves.png"), "RUN_DIR/plots/learning_curves.png")
    except InputRefused as e:
        return _error(str(e))
    except (OSError, ValueError) as e:
        return _error(f"{e}. Fix: {fix}")
    if not rows:
        return _error(f"RUN_DIR={run_dir}: metrics.jsonl has no rows yet. Fix: wait for the run's first logged iteration")
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    from duorl.telemetry.plots import plot_learning_curves

    png = plot_learning_curves(run_dir)
    print(f"wrote {png}: {len(rows)} rows, iterations {rows[0].get('iteration', '?')} to {rows[-1].get('iteration', '?')}")
    return 0


def _add_tasks(sub: Any) -> None:
    tasks = sub.add_parser(
        "tasks", help="list every task duorl can train here, with its sizes and source",
        description="Every task --task accepts here: builtin, registered by a `duorl.tasks` entry point, and "
                    "mjlab's when mjlab is installed, each with its actor and critic observation sizes, its action "
                    "size and its source (docs/tasks.md). Sizes come from each task's spec: no simulation is "
                    "built. Any module path package.module:factory is accepted too. Every row has a status: "
                    "trainable, or why not. Exit 1 only if a registered task or package cannot be loaded (its row "
                    "says why).",
    )
    tasks.add_argument("--json", action="store_true", help="print a JSON object instead of a table")
    tasks.add_argument("--refresh", action="store_true",
                       help="rebuild the cached sizes of mjlab's tasks (kept per mjlab version in duorl's cache)")


def _cmd_tasks(args: argparse.Namespace) -> int:
    from duorl.cli.tasks import tasks_main

    return tasks_main(args.json, args.refresh)


def _add_mps(sub: Any) -> None:
    mps_sub = _group(sub, "mps", "manage a CUDA MPS daemon duorl owns",
                     "A CUDA MPS control daemon in directories duorl owns (~/.cache/duorl/mps/NAME, or "
                     "$DUORL_MPS_HOME/NAME), for training.cuda_process_sharing=mps (docs/mps.md). duorl never "
                     "changes GPU settings and stops only daemons it started.", "mps_command")
    actions = {
        "start": ("start a daemon for the visible GPUs",
                  "Start nvidia-cuda-mps-control -d with its pipe and log directories under NAME, wait until it "
                  "answers, and print the CUDA_MPS_PIPE_DIRECTORY to export for duorl train. One daemon serves "
                  "every visible GPU (a data-parallel run's ranks on this host share it); CUDA_VISIBLE_DEVICES=i "
                  "with --name gpu<i> starts one per GPU. Refused with MIG."),
        "status": ("print the daemon's servers and their clients as JSON",
                   "Print whether the daemon recorded under NAME runs, and each MPS server's client PIDs, as JSON."),
        "stop": ("stop the daemon duorl started under NAME",
                 "Stop the daemon recorded under NAME (exit 1 when duorl started none there); never another one, "
                 "and not while it serves clients (other runs) unless --force."),
        "doctor": ("check every prerequisite of training.cuda_process_sharing=mps",
                   "Check, in order, what MPS mode needs for a learner and a collector on cuda:0 (Linux, CUDA, one "
                   "GPU, a live control socket, a daemon that answers) and print the fix for the first unmet one; "
                   "exit 1 if one is unmet. Uses CUDA_MPS_PIPE_DIRECTORY, else NAME's daemon, else /tmp/nvidia-mps."),
    }
    for action, (short, long) in actions.items():
        p = mps_sub.add_parser(action, help=short, description=long)
        p.add_argument("--name", default="default", help="daemon name (default: default)")
        if action == "stop":
            p.add_argument("--force", action="store_true", help="stop it even while it serves clients")


def _add_assets(sub: Any) -> None:
    assets_sub = _group(sub, "assets", "fetch a robot model into the local cache",
                        "Fetch robot models into duorl's cache (they are never vendored).", "robot", "ROBOT")
    g1 = assets_sub.add_parser(
        "g1", help="the Unitree G1 (29 DoF), from the mjlab wheel",
        description="Fetch the Unitree G1 model: `pip download --no-deps` of the mjlab wheel, then only the model "
                    "file and its meshes are extracted into duorl's cache (~/.cache/duorl/assets/g1, or "
                    "$DUORL_CACHE_DIR/assets/g1). Not needed with task.robot_xml, DUORL_G1_XML or an installed mjlab.",
    )
    g1.add_argument("--no-meshes", action="store_true", help="only the model file (training needs no meshes)")
    g1.add_argument("--force", action="store_true", help="fetch again even if the cache is filled")
    g1.add_argument("--wheel", default=None, metavar="PATH", help="extract from this mjlab wheel (default: download it)")
    g1.add_argument("--if-missing", action="store_true",
                    help="do nothing if a model is already found (DUORL_G1_XML, mjlab, or the cache)")


def _add_motion(sub: Any) -> None:
    motion_sub = _group(sub, "motion", "reference motion clips", "Reference motion clips for the G1 motion-tracking task (task.motion_file).",
                        "motion_command")
    synth = motion_sub.add_parser(
        "synth", help="write the synthetic G1 clip",
        description="Write a physically sensible G1 clip (feet planted, joints in range, smooth, consistent "
                    "velocities) in the .npz clip format; it is the G1 motion-tracking task's default clip.",
    )
    synth.add_argument("out", metavar="OUT.npz", help="output file")
    synth.add_argument("--seconds", type=float, default=10.0, help="duration (default: 10)")
    synth.add_argument("--fps", type=float, default=50.0, help="frames per second (default: 50)")
    synth.add_argument("--robot-xml", default=None, metavar="PATH", help="G1 model file (default: the usual lookup)")

    def clip_source(p: argparse.ArgumentParser, metavar: str) -> None:  # what import and inspect read
        p.add_argument("src", metavar=metavar, help="the clip file")
        p.add_argument("--format", default=None, choices=("canonical", "holosoma", "csv"),
                       help="canonical, holosoma, csv (default: detected)")
        p.add_argument("--fps", type=float, default=None,
                       help="the source's frame rate (overrides the file's; a .csv has none: 30 if not given)")
        p.add_argument("--robot-xml", default=None, metavar="PATH", help="G1 model file (default: the usual lookup)")

    imp = motion_sub.add_parser(
        "import", help="convert a retargeted clip to the canonical .npz",
        description="Read a G1 clip (canonical .npz, holosoma .npz, mjlab/LAFAN1 .csv), check it, and write the "
                    "canonical .npz: joints in model order, body arrays by forward kinematics on duorl's G1, "
                    "velocities by finite differences. Errors name the field and the likely cause (docs/motion.md).",
    )
    clip_source(imp, "SRC")
    imp.add_argument("out", metavar="OUT.npz", help="output file")
    imp.add_argument("--out-fps", type=float, default=None, help="resample the output (default: the source's rate)")
    insp = motion_sub.add_parser(
        "inspect", help="report on a clip: ranges, floor contact, consistency, problems",
        description="Frames, fps, duration, joint ranges against the limits, floor penetration and foot heights, "
                    "the consistency of stored arrays with the poses, the action reach and every check's finding; "
                    "exit 2 if the clip cannot be used.",
    )
    clip_source(insp, "CLIP")
    insp.add_argument("--plot", default=None, metavar="OUT.png", help="also draw root path, heights and joints")
    insp.add_argument("--action-range", default="joint_limits", choices=("pd", "joint_limits"),
                      help="warn if this task.action_range cannot reach a frame (default: joint_limits)")


def _add_bench(sub: Any) -> None:
    from duorl.cli.bench.collector import add_arguments as _bench_collector_arguments
    from duorl.cli.bench.corun import add_arguments as _bench_corun_arguments
    from duorl.cli.bench.learner import add_arguments as _bench_learner_arguments
    from duorl.cli.bench.mps_matrix import IGNORE_FIRST, REPORT_LAST

    bench_sub = _group(sub, "bench", "benchmarks", "Benchmarks that print (and write) JSON.", "bench_command",
                       "BENCHMARK")
    bench_learner = bench_sub.add_parser(
        "learner", help="ms per learner iteration, eager vs whole-cycle CUDA graph",
        description="Milliseconds per learner iteration on the current device, eager and (on CUDA) replayed as a "
                    "whole-cycle CUDA graph, with random replay. Options come before key=value overrides.",
    )
    _bench_learner_arguments(bench_learner)
    bench_collector = bench_sub.add_parser(
        "collector", help="collector-only env steps/s, eager ticks vs one CUDA graph per tick",
        description="Runs the collector's tick (policy, noise, physics, rewards, resets, replay write) without a learner "
                    "and reports collector_env_steps_per_s per env count, eager and (CUDA envs) graph-captured. "
                    "Without --sim and --num-envs it picks what fits the machine (with a GPU: mjwarp, 4096 envs; "
                    "without: mujoco, 64 envs) and says so on stderr. Options come before key=value overrides.",
    )
    _bench_collector_arguments(bench_collector)
    bench_corun = bench_sub.add_parser(
        "corun", help="learner and collector alone and at once (without and with MPS): the co-run capacity bound",
        description="Times the learner's iteration and the collector's tick, each in its own process: alone, both at "
                    "once, and both under a CUDA MPS daemon it starts and stops itself (CUDA), over the same window. "
                    "Reports the co-run capacity bound (the alone times' sum over the slower side's co-run time) and "
                    "MPS's gain. Options come before key=value overrides.",
    )
    _bench_corun_arguments(bench_corun)
    bench_mps = bench_sub.add_parser(
        "mps", help="env steps/s with CUDA MPS off vs on (needs a running daemon: duorl mps start)",
        description="Runs identical `duorl train` commands with training.cuda_process_sharing null and mps, "
                    f"interleaved; reports per arm the mean of the last {REPORT_LAST} iterations (the first "
                    f"{IGNORE_FIRST} ignored) and throughput_gain, as JSON.",
    )
    _add_run_choice(bench_mps, "of every run")
    bench_mps.add_argument("--iterations", type=int, default=300, metavar="N",
                           help=f"iterations per run, >= {IGNORE_FIRST + REPORT_LAST} (default: 300)")
    bench_mps.add_argument("--repeats", type=int, default=2, metavar="N", help="runs per arm (default: 2)")
    bench_mps.add_argument("--out", default=None, metavar="FILE.json", help="also write the JSON here")
    bench_mps.add_argument("overrides", nargs="*", metavar="key=value", help="passed to every duorl train run")
    bench_dp = bench_sub.add_parser(
        "dp", help="data-parallel scaling: world size 1 vs N, efficiency (exit 1 below 0.70)",
        description="Runs identical `duorl train` commands at world size 1 (the first device, through the launcher) "
                    "and N (every device of --devices; with one device, the plain run against world size 1), "
                    "interleaved; reports per world size the mean of the last "
                    "--report-last iterations (the first --ignore-first ignored), the per-rank jitter and "
                    "efficiency = throughput_N / (N x throughput_1), as JSON; exits 1 below 0.70.",
    )
    _add_run_choice(bench_dp, "of every run")
    bench_dp.add_argument("--devices", required=True, metavar="D0,D1,...",
                          help="devices to scale over, as training.devices entries (e.g. 0,1 or cpu,cpu)")
    bench_dp.add_argument("--iterations", type=int, default=300, metavar="N", help="iterations per run (default: 300)")
    bench_dp.add_argument("--repeats", type=int, default=1, metavar="N", help="runs per world size (default: 1)")
    bench_dp.add_argument("--ignore-first", type=int, default=IGNORE_FIRST, metavar="N",
                          help=f"iterations ignored at the start of each run (default: {IGNORE_FIRST})")
    bench_dp.add_argument("--report-last", type=int, default=REPORT_LAST, metavar="N",
                          help=f"iterations averaged at the end of each run (default: {REPORT_LAST})")
    bench_dp.add_argument("--out", default=None, metavar="FILE.json", help="also write the JSON here")
    bench_dp.add_argument("overrides", nargs="*", metavar="key=value", help="passed to every duorl train run")


def _add_resume_export(sub: Any) -> None:
    resume = sub.add_parser(
        "resume", help="continue a run into a new run directory",
        description="Continue RUN_DIR from its latest checkpoint: `duorl train` with the run's --algo, --task, "
                    "--sim and every key it set, training.resume=RUN_DIR, then these key=value overrides (a "
                    "resumed run may change only the keys docs/configuration.md marks 'may differ', e.g. "
                    "algo.max_iterations, training.log_dir). The equivalent train command is printed first. "
                    "A run still going (its process alive, a stopped one too) is refused.",
    )
    resume.add_argument("run_dir", metavar="RUN_DIR", help="run directory")
    resume.add_argument("overrides", nargs="*", metavar="key=value", help="configuration overrides, as for train")
    export = sub.add_parser(
        "export", help="write a run's policy as ONNX and safetensors",
        description="Write OUT/policy.onnx (the deterministic policy, observation normalisation folded in) and "
                    "OUT/policy.safetensors from RUN_DIR's final checkpoint (its latest if it has none) or "
                    "--checkpoint: the files training.export_onnx=true writes at the end of training.",
    )
    export.add_argument("run_dir", metavar="RUN_DIR", help="run directory")
    export.add_argument("--checkpoint", default=None, metavar="PATH", help="a checkpoint file (default: final.pt, "
                        "else the latest)")
    export.add_argument("--out", default=None, metavar="DIR", help="output folder (default: RUN_DIR/export)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="duorl", description="Off-policy RL on many MuJoCo environments. "
                                     "Every command has its own --help.")
    parser.add_argument("--version", action="version", version=f"duorl {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", title="commands", parser_class=_LazyHelpParser)

    train = sub.add_parser(
        "train", help="train a policy", formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    assert isinstance(train, _LazyHelpParser)
    train.lazy_description = _train_description
    _add_run_choice(train, "to train")
    train.add_argument("overrides", nargs="*", metavar="key=value", help="configuration overrides")
    warmup = sub.add_parser(
        "warmup", help="fill this machine's compile caches for a task, without training",
        description="Run the start of `duorl train` with these settings (env, Warp kernels, the compiled and\n"
                    "captured collector tick and learner update) and stop before any update, so that the first\n"
                    "run of this task on a new GPU machine starts warm. Nothing is kept but the caches.",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    _add_run_choice(warmup, "to warm up for")
    warmup.add_argument("overrides", nargs="*", metavar="key=value", help="configuration overrides, as for train")
    _add_config(sub)
    _add_tasks(sub)

    metrics = sub.add_parser(
        "metrics", help="mean of the last N logged iterations of a run",
        description="Mean of every numeric field over the last N rows of RUN_DIR/metrics.jsonl.",
    )
    metrics.add_argument("run_dir", metavar="RUN_DIR", help="run directory (or its metrics.jsonl)")
    metrics.add_argument("--last", type=int, default=100, metavar="N", help="rows to average (default: 100)")
    metrics.add_argument("--json", action="store_true", help="print a JSON object instead of a table")

    _add_plot(sub)

    play = sub.add_parser(
        "play", help="evaluate a run's policy deterministically",
        description="Deterministic evaluation of a run's latest (or a chosen) checkpoint: N episodes of its task.",
    )
    play.add_argument("run_dir", metavar="RUN_DIR", help="run directory")
    play.add_argument("--episodes", type=int, default=8, metavar="N", help="episodes (default: 8)")
    play.add_argument("--checkpoint", default=None, metavar="PATH", help="a checkpoint file (default: the latest)")
    play.add_argument("--video", default=None, metavar="OUT.mp4", help="record episode 0 (needs OpenGL; default: none)")
    play.add_argument("--json", action="store_true", help="print a JSON object")

    _add_resume_export(sub)
    _add_mps(sub)
    _add_assets(sub)
    _add_motion(sub)
    _add_bench(sub)
    return parser


def _error(msg: str) -> int:
    print(f"error: {msg}", file=sys.stderr)
    return 2


def _refused_output(path: str, what: str, source: tuple[str, str] | None = None) -> int:
    """2 (after saying why) when a command's output file cannot be written or is its input, else 0."""
    from duorl.cli.preflight import check_output_file
    from duorl.config.errors import InputRefused

    try:
        check_output_file(path, what, source)
    except InputRefused as e:
        return _error(str(e))
    return 0


def _cmd_train(args: argparse.Namespace, overrides: list[str], argv: list[str]) -> int:
    from duorl.cli.configure import load_config
    from duorl.config.errors import InputRefused
    from duorl.distributed.launch import rank_env

    from duorl.runtime.prestart import PrestartedCollector

    renv = rank_env()
    prestarted = None
    try:
        # first: the collector's interpreter and its import of torch go on beside this process's
        # configuration and imports (runtime/prestart.py); it is cancelled wherever no duo takes it
        prestarted = PrestartedCollector()
        if renv is not None:
            return _start_rank(args, overrides, renv, prestarted)
        from duorl.cli.early_stop import StoppedEarly, say_stopped, stops_at_once

        try:
            with stops_at_once():  # a task factory may take a minute: a Ctrl-C meanwhile stops at once
                cfg = load_config(args.algo, args.task, args.sim, overrides)
        except StoppedEarly:
            return say_stopped()
        from duorl.config.switches import data_parallel_enabled
        from duorl.config.validate import check_data_parallel_keys

        data_parallel = data_parallel_enabled(cfg, launched_rank=renv is not None)
        check_data_parallel_keys(cfg, data_parallel)
        if renv is None and data_parallel:
            prestarted.cancel()  # the launcher trains nothing itself: its ranks start their own
            return _launch_data_parallel(cfg, argv)
        PHASES.add_since_last("config")  # parsed, loaded and validated
        with PHASES.phase("imports"):
            from duorl.cli.train import train  # the runtime (torch first), imported only once the config is known good

        return int(train(cfg, prestarted) or 0)
    except InputRefused as e:  # ConfigError, also raised by the runtime's late checks (e.g. resolve_device)
        return _error(str(e))
    except KeyboardInterrupt:  # a second Ctrl-C: stopped at once, as asked (docs/exit_codes.md)
        print("duorl: interrupted", file=sys.stderr)
        return 0
    finally:
        if prestarted is not None:
            prestarted.cancel()  # refused, stopped or failed before a duo took it (else: nothing)


def _start_rank(args: argparse.Namespace, overrides: list[str], renv: Any, prestarted: Any) -> int:
    """A data-parallel rank: its own checks, then the roll call (distributed/roll_call.py), so that a
    refusal on any rank ends every rank at once with its message; then the run."""
    from duorl.cli.configure import load_config
    from duorl.config.errors import InputRefused
    from duorl.config.schema import TrainingConfig
    from duorl.distributed.launch import (check_rank_entry, leave_no_elastic_tree, narrow_visible_devices,
                                          nvml_gpu_count, rank_device_entry, record_rank_failure)
    from duorl.distributed.roll_call import RankRefusal, StoppedBeforeStart, roll_call

    cfg, problem = None, None
    try:
        # every check `duorl train` makes before building (_cmd_train, cli/train.py), here before the roll call
        shape = load_config(args.algo, args.task, args.sim, overrides, probe_devices=False)
        entry = rank_device_entry(shape.training.devices, shape.sim.name, renv, nvml_gpu_count())
        check_rank_entry(shape, entry)
        # narrow the visible devices to this rank's entry before CUDA initialises
        narrow_visible_devices(entry)
        cfg = load_config(args.algo, args.task, args.sim, overrides)
        from duorl.config.switches import data_parallel_enabled
        from duorl.config.validate import check_data_parallel_keys

        check_data_parallel_keys(cfg, data_parallel_enabled(cfg, launched_rank=True))
        if renv.rank == 0:  # the rank that will claim it: an existing run directory refuses every node now
            from duorl.cli.preflight import check_log_dir

            check_log_dir(cfg)
    except InputRefused as e:
        problem = str(e)
    training = cfg.training if cfg is not None else TrainingConfig()
    try:
        roll_call(renv, problem, training.dp_startup_timeout_s, training.wait_report_s)
    except InputRefused as e:
        # one line per node (its first local rank), the refusing rank's message on every node
        if renv.local_rank == 0 or not isinstance(e, RankRefusal):
            print(f"error: {e}", file=sys.stderr, flush=True)
        record_rank_failure(str(e), "input")
        return 2
    except StoppedBeforeStart:
        if renv.rank == 0:
            from duorl.cli.early_stop import say_stopped

            say_stopped()
        leave_no_elastic_tree()
        return 0
    assert cfg is not None
    from duorl.cli.train import train

    code = int(train(cfg, prestarted) or 0)
    if code == 0:  # a clean end leaves none of torchelastic's (empty) folders behind
        leave_no_elastic_tree()
    return code


def _launch_data_parallel(cfg: Any, argv: list[str]) -> int:
    """One rank per entry of training.devices, each running this very command (distributed.launch); the run
    directory is named here so that the launcher can read the run's outcome."""
    from duorl.distributed.launch import launch
    from duorl.telemetry.run_directory import default_run_dir

    from duorl.cli.preflight import check_log_dir

    from duorl.runtime.stop_signals import early_stop_signal

    check_log_dir(cfg)  # an existing or uncreatable run directory is refused before any rank starts
    if early_stop_signal() is not None:
        from duorl.cli.early_stop import say_stopped

        return say_stopped()
    argv = list(argv)
    run_dir = cfg.training.log_dir
    if run_dir is None:
        run_dir = str(default_run_dir(cfg.task.name, cfg.algo.name))
        argv.append(f"training.log_dir={run_dir}")
    return launch(argv, len(cfg.training.devices or [None]), run_dir)


def _cmd_config(args: argparse.Namespace, overrides: list[str]) -> int:
    from duorl.cli.configure import config_listing, keys_listing, reference_page
    from duorl.config.errors import ConfigError

    flag = "--keys" if args.keys else "--reference" if args.reference else None
    if flag and overrides:
        return _error(f"{flag} describes the schema and takes no key=value (got {' '.join(overrides)}): drop them or {flag}")
    try:
        text = keys_listing() if args.keys else reference_page() if args.reference else \
            config_listing(args.algo, args.task, args.sim, overrides)
    except ConfigError as e:
        return _error(str(e))
    print(text, end="")
    return 0


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


def console_main() -> None:
    """The `duorl` command (and `python -m duorl`): main(), then leave at once. By then every file a
    command wrote is closed and its children are gone; the interpreter's teardown of torch and the
    simulators (2 to 10 s on a loaded machine) would only keep the process, its memory and a launcher
    waiting after the run's final summary."""
    try:
        code = main()
    except KeyboardInterrupt:
        from duorl.runtime.stop_signals import STOP_REQUEST

        if STOP_REQUEST.signal is None:
            raise
        # a second Ctrl-C before `train` took over: stopped at once, as asked (docs/exit_codes.md)
        print("duorl: interrupted", file=sys.stderr)
        code = 0
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return _main(argv)
    except BrokenPipeError:
        # the reader went away (`duorl config --keys | head`): not our failure, and no traceback
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def _main(argv: Sequence[str] | None) -> int:
    PHASES.add("interpreter", PHASES.origin)  # the process's start to here: Python and `import duorl.cli.main`
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        # parse_known_args: key=value pairs may come after options (`train --sim mujoco a=1 --algo sac b=2`)
        args, extras = parser.parse_known_args(argv)
        unknown = [x for x in extras if x.startswith("-")
                   or args.command not in ("train", "warmup", "config", "resume")]
        if unknown:
            parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    except SystemExit as e:  # argparse exits for --help, --version and usage errors
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 2)
    code = _route(args, extras, argv)
    if code is None:  # a command group without its action (`duorl mps`, `duorl bench`): that group's help
        _subparser(parser, [args.command] if args.command else []).print_help(sys.stderr)
        return 2
    return code


def _route(args: argparse.Namespace, extras: list[str], argv: list[str]) -> int | None:
    """The command's exit code, or None for a command group given without its action."""
    if args.command == "resume":  # `duorl train` of the run's own command line (cli/resume_command.py)
        from duorl.cli.resume_command import resume_argv, say_command
        from duorl.config.errors import InputRefused

        try:
            argv = resume_argv(args.run_dir, list(args.overrides) + extras)
        except InputRefused as e:
            return _error(str(e))
        say_command(argv)
        args, extras = build_parser().parse_known_args(argv)
    if args.command == "train":
        from duorl.distributed.launch import rank_env
        from duorl.runtime.stop_signals import stop_signals

        # before anything slow: an early Ctrl-C is a stop request too (a rank's second one is the launcher's)
        with stop_signals(escalate=rank_env() is None):
            return _cmd_train(args, list(args.overrides) + extras, argv)
    if args.command == "warmup":
        from duorl.cli.warmup import warmup_main
        from duorl.runtime.stop_signals import stop_signals

        with stop_signals(escalate=True):  # as train's: a Ctrl-C stops it cleanly
            return warmup_main(args.algo, args.task, args.sim, list(args.overrides) + extras)
    if args.command == "config":
        return _cmd_config(args, list(args.overrides) + extras)
    if args.command == "metrics":
        return _cmd_metrics(args)
    if args.command == "plot":
        return _cmd_plot(args)
    if args.command == "tasks":
        return _cmd_tasks(args)
    if args.command == "mps" and args.mps_command:
        from duorl.mps.daemon import mps_main

        return mps_main(args.mps_command, args.name, getattr(args, "force", False))
    if args.command == "export":
        from duorl.cli.export import export_main

        return export_main(args.run_dir, args.checkpoint, args.out)
    if args.command == "play":
        from duorl.cli.play import play_main

        return play_main(args.run_dir, args.episodes, args.checkpoint, args.video, args.json)
    if args.command == "assets" and args.robot:
        from duorl.envs.g1.assets import assets_command

        return assets_command(args.robot, meshes=not args.no_meshes, force=args.force, wheel=args.wheel,
                              if_missing=args.if_missing)
    if args.command == "motion" and args.motion_command:
        return _cmd_motion(args)
    if args.command == "bench" and args.bench_command:
        return _cmd_bench(args, argv)
    return None


def _cmd_motion(args: argparse.Namespace) -> int:
    if args.motion_command == "synth":
        from duorl.envs.motion.synth import synth_command

        # before the clip is computed; nothing is written
        return _refused_output(args.out, "OUT.npz") or synth_command(args.out, args.seconds, args.fps, args.robot_xml)
    if args.motion_command == "import":
        from duorl.envs.motion.commands import import_command

        refused = _refused_output(args.out, "OUT.npz", ("SRC", args.src))  # before the clip is read
        return refused or import_command(args.src, args.out, args.format, args.fps, args.out_fps, args.robot_xml)
    from duorl.envs.motion.commands import inspect_command

    refused = _refused_output(args.plot, "--plot", ("CLIP", args.src)) if args.plot else 0
    return refused or inspect_command(args.src, args.format, args.fps, args.plot, args.robot_xml, args.action_range)


def _cmd_bench(args: argparse.Namespace, argv: list[str]) -> int:
    if getattr(args, "out", None) and _refused_output(args.out, "--out"):
        return 2  # every benchmark writes --out at its end: refused before it starts
    if args.bench_command == "mps":
        from duorl.cli.bench.mps_matrix import bench_mps_main

        return bench_mps_main(args.algo, args.task, args.sim, args.iterations, args.repeats, args.out, list(args.overrides))
    if args.bench_command == "dp":
        from duorl.cli.bench.dp_scaling import bench_dp_main

        return bench_dp_main(args.algo, args.task, args.sim, args.devices, args.iterations, args.repeats,
                             args.ignore_first, args.report_last, args.out, list(args.overrides))
    args.argv = argv
    if args.bench_command == "collector":
        from duorl.cli.bench.collector import main as bench_collector_main

        return bench_collector_main(args)
    if args.bench_command == "corun":
        from duorl.cli.bench.corun import main as bench_corun_main

        return bench_corun_main(args)
    from duorl.cli.bench.learner import main as bench_learner_main

    return bench_learner_main(args)


def _subparser(parser: argparse.ArgumentParser, path: list[str]) -> argparse.ArgumentParser:
    """The parser of `duorl PATH...` (the top-level parser for an empty path)."""
    for name in path:
        parser = subcommands(parser)[name]
    return parser


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """The sub-parsers of `parser` by name (none for a leaf command)."""
    for action in parser._actions:  # noqa: SLF001 - argparse keeps its sub-parsers only here
        if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
            return dict(action.choices)
    return {}
