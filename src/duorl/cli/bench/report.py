"""How the `duorl bench` commands run and hand their results over: the `duorl train` command of a
benchmark run, and JSON on stdout and, with --out, in a file."""

from __future__ import annotations

import json
from pathlib import Path
import sys
import tempfile
from typing import Any, Callable


def emit(result: dict[str, Any], out: str | None) -> None:
    """Print `result` as JSON; with `out`, also write it there (creating the folder)."""
    text = json.dumps(result, indent=2)
    print(text)
    if out:
        path = Path(out)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text + "\n", encoding="utf-8")


def arm_overrides(iterations: int, *overrides: str) -> list[str]:
    """A benchmark arm's `duorl train` overrides but its run directory: every iteration logged, no
    progress line, no checkpoint before the end."""
    return [f"algo.max_iterations={iterations}", "training.log_interval=1", "training.progress=false",
            f"algo.save_interval={iterations}", *overrides]


def train_command(algo: str, task: str, sim: str | None, log_dir: Path, iterations: int, *overrides: str) -> list[str]:
    """A benchmark arm's `duorl train` (arm_overrides), writing into log_dir."""
    cmd = [sys.executable, "-m", "duorl", "train", "--algo", algo, "--task", task]
    if sim:
        cmd += ["--sim", sim]
    return cmd + [f"training.log_dir={log_dir}", *arm_overrides(iterations, *overrides)]


def check_arms(algo: str, task: str, sim: str | None, arms: dict[str, list[str]], label: str = "") -> None:
    """Before any run starts: every arm's `duorl train` (name -> arm_overrides) passes the checks the
    run itself would make first (configuration and devices, the task's clip, CUDA MPS's prerequisites
    where the arm asks for MPS), so a benchmark never spends its first arm's minutes to learn that
    another arm cannot run. Raises InputRefused (a ValueError) naming the arm."""
    from duorl.config.devices import resolve_device
    from duorl.config.errors import InputRefused
    from duorl.cli.configure import load_config
    from duorl.envs.task_sources import source_of
    from duorl.mps.probe import MpsUnavailable, RealHost, probe_mps

    for arm, overrides in arms.items():
        prefix = f"{label}: " if label else ""
        try:
            cfg = load_config(algo, task, sim, overrides)
            source_of(task).first_check(cfg.task)  # the task's first check (a reference clip)
            if cfg.training.cuda_process_sharing is not None:
                device = resolve_device(cfg)
                probe_mps(cfg.training.cuda_process_sharing, device, device, RealHost())
        except (InputRefused, MpsUnavailable) as e:
            raise InputRefused(f"{prefix}the {arm} run cannot start: {e}") from None


def run_checked(check: Callable[[], None], run: Callable[[Path], dict[str, Any]], prefix: str,
                out: str | None) -> dict[str, Any] | None:
    """`check()` (a ValueError is one line on stderr and None), then `run(workdir)` in a temporary
    folder, its result emitted."""
    try:
        check()
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return None
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        result = run(Path(tmp))
    emit(result, out)
    return result
