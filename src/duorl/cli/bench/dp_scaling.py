"""`duorl bench dp --algo A --task T --devices 0,1,...`: data-parallel scaling (seed 004's benchmark).

Runs world size 1 (the first device, through the launcher) and world size N (every device) with
otherwise identical `duorl train` commands, arms interleaved over the repeats (with one device: the
plain single-GPU run against world size 1 through the launcher, which prices data parallel itself); each run's first
iterations are ignored and the mean of its last ones reported (mps_matrix.summarize_run). Throughput
is the env steps/s summed over ranks; efficiency = throughput_N / (N x throughput_1). Per-rank jitter
(the slowest rank's iteration time and the spread between ranks) and the all-reduce time come from
the runs' own metrics. Exit code 1 when the efficiency is below MIN_EFFICIENCY (or a run failed).
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from duorl.cli.bench.mps_matrix import FIELDS, IGNORE_FIRST, REPORT_LAST, mean_of, summarize_run
from duorl.cli.bench.report import arm_overrides, check_arms, run_checked, train_command

MIN_EFFICIENCY = 0.70  # seed 004: below this the scaling is a failure to investigate
TARGET_EFFICIENCY = 0.90


@dataclass(frozen=True)
class ScalingSpec:
    algo: str
    task: str
    sim: str | None
    devices: tuple[str, ...]
    iterations: int = 300
    repeats: int = 1
    ignore_first: int = IGNORE_FIRST
    report_last: int = REPORT_LAST
    overrides: tuple[str, ...] = ()

    def check(self) -> None:
        if len(self.devices) < 1:
            raise ValueError("--devices must list at least one device")
        if self.iterations < self.ignore_first + self.report_last:
            raise ValueError(f"--iterations must be >= {self.ignore_first + self.report_last} (first "
                             f"{self.ignore_first} ignored, last {self.report_last} reported)")
        if self.repeats < 1:
            raise ValueError("--repeats must be >= 1")
        own = ("training.devices", "training.data_parallel")
        bad = [o for o in self.overrides if o.split("=", 1)[0].strip() in own]
        if bad:
            raise ValueError(f"{bad[0]}: the benchmark sets the devices itself (--devices)")

    @property
    def arms(self) -> tuple[str, str]:
        """(baseline, scaled): world size 1 and N, or with one device the plain run and world size 1."""
        n = len(self.devices)
        return ("plain", "world_size_1") if n == 1 else ("world_size_1", f"world_size_{n}")

    def arm_settings(self, arm: str) -> tuple[str, ...]:
        """What the arm sets beside the user's overrides: its devices and data parallel on or off (a
        one-device run refuses the data-parallel keys: they apply to the other arms only)."""
        from duorl.config.keys import data_parallel_only

        world = 1 if arm in ("plain", "world_size_1") else len(self.devices)
        overrides = self.overrides
        if arm == "plain":
            overrides = tuple(o for o in overrides if o.split("=", 1)[0].strip() not in data_parallel_only())
        return (f"training.devices=[{','.join(self.devices[:world])}]",
                f"training.data_parallel={'false' if arm == 'plain' else 'true'}", *overrides)

    def command(self, arm: str, log_dir: Path) -> list[str]:
        return train_command(self.algo, self.task, self.sim, log_dir, self.iterations, *self.arm_settings(arm))

    def preflight(self) -> None:
        """The arguments (check), then every arm's run as `duorl train` would check it (devices that
        exist, the configuration, MPS): before the first run, so that a machine without these devices is
        refused at once, not after the first arm's run."""
        self.check()
        check_arms(self.algo, self.task, self.sim,
                   {arm: arm_overrides(self.iterations, *self.arm_settings(arm)) for arm in self.arms},
                   f"--devices={','.join(self.devices)}")


def run_scaling(spec: ScalingSpec, workdir: Path, run: Callable[[list[str]], int] | None = None) -> dict[str, Any]:
    spec.check()
    run = run or (lambda cmd: subprocess.run(cmd).returncode)
    n = len(spec.devices)
    base_arm, scaled_arm = spec.arms
    runs: dict[str, list[dict[str, Any]]] = {base_arm: [], scaled_arm: []}
    commands: dict[str, str] = {}
    for r in range(spec.repeats):
        for arm in (base_arm, scaled_arm):
            d = workdir / f"{arm}_{r}"
            cmd = spec.command(arm, d)
            commands.setdefault(arm, " ".join(cmd[1:]).replace(str(d), "RUN_DIR"))
            print(f"[bench dp] {arm}, repeat {r + 1}/{spec.repeats}", file=sys.stderr, flush=True)
            rc = run(cmd)
            result = summarize_run(d, spec.ignore_first, spec.report_last) if (d / "metrics.jsonl").exists() else \
                {"status": "failed"}
            result.pop("cuda_process_sharing", None)
            result["returncode"] = rc
            runs[arm].append(result)
    arms = {}
    for name, rs in runs.items():
        arm = {field: mean_of([x.get(field) for x in rs]) for field in FIELDS}
        arm["completed"] = all(x.get("status") == "completed" for x in rs)
        arms[name] = arm
    one, many = arms[base_arm]["env_steps_per_s"], arms[scaled_arm]["env_steps_per_s"]
    # with one device the "scaled" arm is the same single GPU through the launcher: N = 1
    efficiency = many / (n * one) if one and many else None
    return {
        "algo": spec.algo,
        "task": spec.task,
        "sim": spec.sim,
        "devices": list(spec.devices),
        "world_size": n,
        "iterations": spec.iterations,
        "repeats": spec.repeats,
        "ignore_first": spec.ignore_first,
        "report_last": spec.report_last,
        "commands": commands,
        "arms": arms,
        "runs": runs,
        "efficiency": efficiency,
        "min_efficiency": MIN_EFFICIENCY,
        "target_efficiency": TARGET_EFFICIENCY,
    }


def verdict(result: dict[str, Any]) -> int:
    """0 when every run completed and the efficiency reaches MIN_EFFICIENCY, else 1."""
    completed = all(arm["completed"] for arm in result["arms"].values())
    eff = result["efficiency"]
    return 0 if completed and eff is not None and eff >= MIN_EFFICIENCY else 1


def bench_dp_main(algo: str, task: str, sim: str | None, devices: str, iterations: int, repeats: int,
                  ignore_first: int, report_last: int, out: str | None, overrides: list[str]) -> int:
    spec = ScalingSpec(algo, task, sim, tuple(d.strip() for d in devices.split(",") if d.strip()), iterations, repeats,
                       ignore_first, report_last, tuple(overrides))
    result = run_checked(spec.preflight, lambda workdir: run_scaling(spec, workdir), "duorl-bench-dp-", out)
    if result is None:
        return 2
    code = verdict(result)
    if code:
        eff = result["efficiency"]
        print(f"duorl bench dp: efficiency {eff if eff is None else round(eff, 3)} is below {MIN_EFFICIENCY} or a run "
              "failed", file=sys.stderr)
    return code
