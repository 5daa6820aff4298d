"""`duorl bench dp`: the commands of each arm, the efficiency and its verdict (runs faked: the real
launcher is tested in tests/dist)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from duorl.cli.bench.dp_scaling import ScalingSpec, run_scaling, verdict


def _fake_run(steps_per_s: dict[str, float], seen: list[list[str]]):
    def run(cmd: list[str]) -> int:
        seen.append(cmd)
        log_dir = Path(next(a.split("=", 1)[1] for a in cmd if a.startswith("training.log_dir=")))
        devices = next(a for a in cmd if a.startswith("training.devices="))
        dp = next(a for a in cmd if a.startswith("training.data_parallel="))
        arm = "plain" if dp.endswith("false") else f"world_size_{devices.count(',') + 1}"
        log_dir.mkdir(parents=True)
        rows = [{"iteration": i, "Perf/env_steps_per_s": steps_per_s[arm], "Perf/iteration_ms": 10.0,
                 "Perf/iteration_ms_max": 11.0, "Perf/iteration_ms_spread": 0.5} for i in range(1, 31)]
        (log_dir / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        (log_dir / "run_summary.json").write_text(json.dumps({"status": "completed", "runtime_manifest": {}}))
        return 0

    return run


@pytest.mark.parametrize(("throughputs", "efficiency", "code"), [
    ({"world_size_1": 100.0, "world_size_2": 190.0}, 0.95, 0),
    ({"world_size_1": 100.0, "world_size_2": 130.0}, 0.65, 1),
])
def test_efficiency_and_verdict(tmp_path, throughputs, efficiency, code):
    seen: list[list[str]] = []
    spec = ScalingSpec("sac", "pendulum_swingup", "mujoco", ("cpu", "cpu"), iterations=30, ignore_first=5,
                       report_last=20, overrides=("training.num_envs=4",))
    result = run_scaling(spec, tmp_path, _fake_run(throughputs, seen))
    assert result["efficiency"] == pytest.approx(efficiency)
    assert verdict(result) == code
    assert result["arms"]["world_size_2"]["iteration_ms_slowest_rank"] == 11.0
    assert any("training.devices=[cpu]" in c for c in seen) and any("training.devices=[cpu,cpu]" in c for c in seen)
    assert all("training.data_parallel=true" in c and "training.num_envs=4" in c for c in seen)


def test_one_device_prices_data_parallel_against_the_plain_run(tmp_path):
    seen: list[list[str]] = []
    spec = ScalingSpec("sac", "pendulum_swingup", "mujoco", ("0",), iterations=30, ignore_first=5, report_last=20)
    result = run_scaling(spec, tmp_path, _fake_run({"plain": 100.0, "world_size_1": 98.0}, seen))
    assert set(result["arms"]) == {"plain", "world_size_1"} and result["efficiency"] == pytest.approx(0.98)
    assert sum("training.data_parallel=false" in c for c in seen) == 1


def test_the_benchmark_sets_the_devices_itself():
    with pytest.raises(ValueError, match="sets the devices itself"):
        ScalingSpec("sac", "t", None, ("0", "1"), overrides=("training.devices=[3]",)).check()


def test_the_plain_arm_drops_the_data_parallel_keys():
    """A one-device run refuses data-parallel keys (config.validate.check_data_parallel_keys): the plain arm
    runs without them, the world-size-1 arm with them."""
    spec = ScalingSpec("sac", "pendulum_swingup", "mujoco", ("0",), overrides=(
        "training.dp_gradient_wire_dtype=bfloat16", "training.num_envs=4"))
    plain, dp = spec.command("plain", Path("p")), spec.command("world_size_1", Path("w"))
    assert "training.num_envs=4" in plain and "training.dp_gradient_wire_dtype=bfloat16" not in plain
    assert "training.dp_gradient_wire_dtype=bfloat16" in dp
