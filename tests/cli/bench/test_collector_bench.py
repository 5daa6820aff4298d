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
    # never an empty result: no graph ticks ran, so no speedup, and a line saying why
    assert "graph_speedup" not in result and "CUDA device" in result["graph_speedup_skipped"]
    assert "bench collector:" not in p.stderr  # --sim and --num-envs given: nothing picked for the user


def test_collector_bench_defaults_fit_the_machine():
    """Without --sim/--num-envs: the measured GPU workload with a GPU, a few seconds' worth on a CPU,
    and a line saying what was picked and why."""
    from duorl.cli.bench.collector import CPU_NUM_ENVS, GPU_NUM_ENVS, machine_defaults

    sim, envs, note = machine_defaults(None, None, cuda=False)
    assert (sim, envs) == ("mujoco", [CPU_NUM_ENVS]) and "no CUDA device" in note and "--num-envs 64" in note
    sim, envs, note = machine_defaults(None, None, cuda=True)
    assert (sim, envs) == ("mjwarp", [GPU_NUM_ENVS]) and "on the GPU" in note
    sim, envs, note = machine_defaults("mjwarp", None, cuda=False)  # warp's CPU device: few envs too
    assert (sim, envs) == ("mjwarp", [CPU_NUM_ENVS]) and "eager ticks only" in note
    assert machine_defaults("mujoco", [8], cuda=True) == ("mujoco", [8], None)


def test_collector_bench_refuses_bad_counts():
    p = subprocess.run([sys.executable, "-m", "duorl", "bench", "collector", "--num-envs", "0"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "--num-envs" in p.stderr
