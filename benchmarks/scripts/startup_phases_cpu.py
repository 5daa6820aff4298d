"""Where the seconds before a run's first iteration go: a timed `python -m duorl train`, phase by phase.

    python benchmarks/scripts/startup_phases_cpu.py OUT.json [--src TREE/src] -- --task g1_walk_flat --sim mujoco key=value ...
    python benchmarks/scripts/startup_phases_cpu.py --table OUT1.json OUT2.json ...   # the steps, a column per run
    python -X importtime -c "import ..." 2> IMPORTS.txt
    python benchmarks/scripts/startup_phases_cpu.py --importtime IMPORTS.txt [N]     # the N heaviest imports

Runs the real command (learner and spawned collector alike) with a `sitecustomize` that times, in every
duorl process, the inclusive import of a few heavy modules and the functions that make up start-up
(config, device, task, preflight, memory check, run directory, learner, collector spawn, env build, tick),
and writes them with the console lines' arrival times (seconds from the command's start) to OUT.json.
`--src` runs another tree's package (a before/after pair: the same script, two trees).
A run is stopped (SIGINT, the clean stop) once its first progress line appeared. The wrappers add a few
microseconds per call; the timed functions run once each.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

TRACE_ENV = "DUORL_STARTUP_TRACE"
# inclusive import time of these modules (the first import in the process)
MODULES = ("torch", "torch._dynamo", "torch._inductor", "numpy", "mujoco", "warp", "mujoco_warp", "omegaconf", "matplotlib", "tensorboard",
           "torch.utils.tensorboard", "duorl.cli.main", "duorl.config.load", "duorl.cli.train",
           "duorl.algos.registry", "duorl.envs.registry", "duorl.runtime.duo", "duorl.runtime.collector",
           "duorl.telemetry.run_directory", "duorl.telemetry.summary", "duorl.envs.tasks.g1_walk")
# (module, attribute path): the start-up steps, in the order they run
FUNCTIONS = (
    ("duorl.cli.main", "main"),
    ("duorl.config.load", "load_config"),
    ("duorl.cli.train", "train"),
    ("duorl.cli.train", "resolve_device"),
    ("duorl.mps.session", "MpsSession.prepare_environment"),
    ("duorl.mps.session", "MpsSession.probe"),
    ("duorl.envs.motion.load", "check_motion_file"),
    ("duorl.cli.train_steps.checks", "resolve_switches"),
    ("duorl.envs.registry", "make_task"),
    ("duorl.envs.registry", "env_spec"),
    ("duorl.cli.preflight", "preflight"),
    ("duorl.cli.preflight", "check_task_fits"),
    ("duorl.cli.preflight", "task_check"),
    ("duorl.cli.preflight", "check_log_dir"),
    ("duorl.runtime.memory", "replay_memory_problem"),
    ("duorl.telemetry.run_dir_claim", "claim_run_dir"),
    ("duorl.algos.registry", "make_learner"),
    ("duorl.telemetry.run_directory", "RunDirectory.__init__"),
    ("duorl.telemetry.summary", "package_versions"),
    ("duorl.telemetry.summary", "device_record"),
    ("duorl.telemetry.summary", "host_record"),
    ("duorl.runtime.duo", "Duo.__init__"),
    ("duorl.runtime.duo", "Duo._allocate"),
    ("duorl.runtime.duo", "Duo._spawn_collector"),
    ("duorl.runtime.collector", "collector_main"),
    ("duorl.envs.registry", "make_vec_env"),
    ("duorl.algos.registry", "make_actor"),
    ("duorl.runtime.tick", "CollectorTick.__init__"),
    ("duorl.runtime.tick", "CollectorTick.run"),
    ("duorl.envs.g1.model", "build_model"),
    # GPU runs: MuJoCo Warp's model, the learner's capture, and each process's phase changes
    ("duorl.envs.backends.mjwarp", "MjWarpBackend.__init__"),
    ("duorl.gpu.graphs", "WholeCycleGraph._capture"),
    ("duorl.runtime.heartbeat", "Heartbeat.phase"),
)
# calls whose first text argument names the event (a phase)
DETAILED = {"duorl.runtime.heartbeat.Heartbeat.phase"}


def _emit(record: dict[str, Any]) -> None:
    record.update(pid=os.getpid(), t=time.time())
    with open(os.environ[TRACE_ENV], "a", encoding="utf-8") as f:
        f.write(json.dumps(record) + "\n")


def _wrap(owner: Any, name: str, label: str) -> None:
    fn = getattr(owner, name, None)
    if fn is None or getattr(fn, "_startup_traced", False):
        return

    def traced(*args: Any, **kwargs: Any) -> Any:
        name = label
        if label in DETAILED:
            name = f"{label} {next((a for a in args if isinstance(a, str)), '')}"
        _emit({"call": name, "edge": "enter"})
        try:
            return fn(*args, **kwargs)
        finally:
            _emit({"call": name, "edge": "exit"})

    traced._startup_traced = True  # type: ignore[attr-defined]
    traced.__wrapped__ = fn  # type: ignore[attr-defined]
    traced.__name__ = getattr(fn, "__name__", name)
    traced.__qualname__ = getattr(fn, "__qualname__", name)
    traced.__module__ = getattr(fn, "__module__", None)
    setattr(owner, name, traced)


def _patch(module: Any) -> None:
    for mod_name, path in FUNCTIONS:
        if mod_name != module.__name__:
            continue
        owner = module
        *parents, leaf = path.split(".")
        for p in parents:
            owner = getattr(owner, p, None)
        if owner is not None:
            _wrap(owner, leaf, f"{mod_name}.{path}")


class _Finder:
    """A meta-path finder that times the modules in MODULES and patches those in FUNCTIONS once loaded."""

    wanted = set(MODULES) | {m for m, _ in FUNCTIONS}

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname not in self.wanted:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None and spec.loader is not None and hasattr(spec.loader, "exec_module"):
                loader = spec.loader
                original = loader.exec_module

                def exec_module(module: Any, _orig: Any = original) -> None:
                    _emit({"import": fullname, "edge": "enter"})
                    try:
                        _orig(module)
                    finally:
                        _emit({"import": fullname, "edge": "exit"})
                    _patch(module)

                loader.exec_module = exec_module  # type: ignore[method-assign]
                return spec
            if spec is not None:
                return spec
        return None


def install() -> None:
    """Called from the generated sitecustomize in every process of the traced command."""
    if os.environ.get(TRACE_ENV):
        _emit({"process": "interpreter up", "argv": sys.argv[:3]})
        sys.meta_path.insert(0, _Finder())


def main(argv: list[str]) -> int:
    out = Path(argv[0])
    duorl_args = argv[argv.index("--") + 1:]
    here = Path(__file__).resolve().parent
    src = Path(argv[argv.index("--src") + 1]) if "--src" in argv[:argv.index("--")] else here.parents[1] / "src"
    with tempfile.TemporaryDirectory(prefix="startup-trace-") as tmp:
        (Path(tmp) / "sitecustomize.py").write_text(
            f"import sys\nsys.path.insert(0, {str(here)!r})\nimport startup_phases_cpu\nstartup_phases_cpu.install()\n",
            encoding="utf-8")
        trace = Path(tmp) / "trace.jsonl"
        env = dict(os.environ, PYTHONPATH=f"{tmp}:{src}", **{TRACE_ENV: str(trace)})
        cmd = [sys.executable, "-m", "duorl", "train", *duorl_args]
        lines: list[dict[str, Any]] = []
        t0 = time.time()
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        assert proc.stdout is not None
        stopped = False
        for line in proc.stdout:
            lines.append({"s": round(time.time() - t0, 3), "line": line.rstrip("\n")})
            if not stopped and line.startswith("[") and "/" in line.split()[0]:
                proc.send_signal(signal.SIGINT)  # the first iteration is logged: stop cleanly
                stopped = True
        proc.wait()
        events = [json.loads(x) for x in trace.read_text(encoding="utf-8").splitlines()]
    for e in events:
        e["s"] = round(e.pop("t") - t0, 3)
    result = {"command": " ".join(["python", "-m", "duorl", "train", *duorl_args]), "src": str(src),
              "exit_code": proc.returncode, "load_average": os.getloadavg(),
              "console": lines, "events": events, "summary": summarize(events, lines)}
    out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(result["summary"], indent=1))
    return 0


def summarize(events: list[dict[str, Any]], lines: list[dict[str, Any]]) -> dict[str, Any]:
    """Per process: interpreter up, and each traced call/import as [start, seconds] (first occurrence)."""
    procs: dict[int, dict[str, Any]] = {}
    open_: dict[tuple[int, str], float] = {}
    for e in events:
        p = procs.setdefault(e["pid"], {})
        if "process" in e:
            p["interpreter up"] = e["s"]
            continue
        key = f"import {e['import']}" if "import" in e else e["call"]
        if e["edge"] == "enter":
            open_.setdefault((e["pid"], key), e["s"])
        else:
            start = open_.pop((e["pid"], key), None)
            if start is not None and key not in p:
                p[key] = [start, round(e["s"] - start, 3)]
    first = lambda pred: next((x["s"] for x in lines if pred(x["line"])), None)  # noqa: E731
    return {
        "run directory line (s)": first(lambda s: s.startswith("duorl: run directory")),
        "first progress line (s)": first(lambda s: s.startswith("[") and "/" in s.split()[0]),
        "processes": {f"pid {pid}": dict(sorted(v.items(), key=lambda kv: kv[1] if isinstance(kv[1], float) else kv[1][0]))
                      for pid, v in procs.items()},
    }


def milestones(result: dict[str, Any]) -> dict[str, float | None]:
    """The start-up's steps in order, seconds from the command's start (or a step's own seconds, `(s)`)."""
    summ = result["summary"]
    procs = list(summ["processes"].values())
    learner = next(p for p in procs if "duorl.cli.main.main" in p)
    collector = next((p for p in procs if "duorl.runtime.collector.collector_main" in p), {})
    at = lambda p, k: p[k][0] if k in p else None  # noqa: E731
    dur = lambda p, k: p[k][1] if k in p else None  # noqa: E731
    end = lambda p, k: round(p[k][0] + p[k][1], 3) if k in p else None  # noqa: E731
    return {
        "learner: interpreter up": learner.get("interpreter up"),
        "learner: duorl's main() entered (imports of the parser)": at(learner, "duorl.cli.main.main"),
        "learner: config loaded": end(learner, "duorl.config.load.load_config"),
        "learner: train() entered": at(learner, "duorl.cli.train.train"),
        "learner: preflight (s)": dur(learner, "duorl.cli.preflight.preflight"),
        "learner: run directory line": summ["run directory line (s)"],
        "learner: make_learner (s)": dur(learner, "duorl.algos.registry.make_learner"),
        "learner: RunDirectory (s)": dur(learner, "duorl.telemetry.run_directory.RunDirectory.__init__"),
        "learner: collector spawned": at(learner, "duorl.runtime.duo.Duo._spawn_collector"),
        "collector: interpreter up": collector.get("interpreter up"),
        "collector: collector_main entered (its imports done)": at(collector, "duorl.runtime.collector.collector_main"),
        "collector: make_vec_env (s)": dur(collector, "duorl.envs.registry.make_vec_env"),
        "collector: first tick": at(collector, "duorl.runtime.tick.CollectorTick.run"),
        "first progress line": summ["first progress line (s)"],
    }


def table(paths: list[str]) -> str:
    """A markdown table of the milestones, one column per OUT.json."""
    runs = [json.loads(Path(p).read_text(encoding="utf-8")) for p in paths]
    rows = [milestones(r) for r in runs]
    head = "| step | " + " | ".join(Path(p).stem for p in paths) + " |"
    lines = [head, "|---" * (len(paths) + 1) + "|"]
    for key in rows[0]:
        lines.append(f"| {key} | " + " | ".join("" if r[key] is None else f"{r[key]:.2f}" for r in rows) + " |")
    lines.append("| load average (1 min) at the end | " + " | ".join(f"{r['load_average'][0]:.1f}" for r in runs) + " |")
    return "\n".join(lines)


def heaviest_imports(path: str, n: int = 12) -> str:
    """From `python -X importtime` output: the top-level packages by their own (self) import time summed
    over all their modules, and the n modules with the largest inclusive time (seconds)."""
    own: dict[str, float] = {}
    inclusive: list[tuple[float, str]] = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        self_us, cum_us, name = line[len("import time:"):].split("|")
        mod = name.strip()
        own[mod.split(".")[0]] = own.get(mod.split(".")[0], 0.0) + int(self_us) / 1e6
        inclusive.append((int(cum_us) / 1e6, mod))
    total = sum(own.values())
    out = [f"{path}: {total:.2f} s of imports in all",
           "by package (own time): " + ", ".join(f"{k} {v:.2f}" for k, v in sorted(own.items(), key=lambda kv: -kv[1])[:n])]
    out.append("largest inclusive: " + ", ".join(f"{m} {c:.2f}" for c, m in sorted(inclusive, reverse=True)[:n]))
    return "\n".join(out)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--importtime"]:
        print(heaviest_imports(sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 12))
        sys.exit(0)
    if sys.argv[1:2] == ["--table"]:
        print(table(sys.argv[2:]))
        sys.exit(0)
    sys.exit(main(sys.argv[1:]))
