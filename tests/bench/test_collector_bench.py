"""`duorl bench collector` on the CPU: eager ticks only (graphs need CUDA envs), JSON on stdout and --out."""

import json
import subprocess
import sys


def test_collector_bench_cli_writes_json(tmp_path):
    out = tmp_path / "b" / "collector.json"
    p = subprocess.run(
        [sys.executable, "-m", "duorl", "bench", "collector", "--task", "pendulum_swingup", "--sim", "mujoco",
         "--num-envs", "4", "8", "--ticks", "5", "--warmup", "2", "--out", str(out),
         "sim.nthread=1", "algo.actor_hidden_dims=[16]", "algo.critic_hidden_dims=[16]"],
        capture_output=True, text=True, timeout=120,
    )
    assert p.returncode == 0, p.stderr
    result = json.loads(out.read_text())
    assert json.loads(p.stdout) == result
    assert result["command"].startswith("duorl bench collector --task pendulum_swingup")
    assert result["physics_substeps_per_tick"] == 5 and result["gpu"] is None
    runs = result["runs"]
    assert [(r["num_envs"], r["mode"]) for r in runs] == [(4, "eager"), (8, "eager")]
    for r in runs:
        assert r["collector_env_steps_per_s"] > 0 and r["ticks"] == 5 and r["cuda_graph"] is False
        assert abs(r["collector_env_steps_per_s"] - r["num_envs"] * 5 / r["seconds"]) <= 0.01 * r["collector_env_steps_per_s"] + 1
    assert result["graph_speedup"] == {}


def test_collector_bench_refuses_bad_counts():
    p = subprocess.run([sys.executable, "-m", "duorl", "bench", "collector", "--num-envs", "0"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "--num-envs" in p.stderr
