"""`duorl bench learner` on the CPU: the eager path, the JSON it writes, and its errors."""

from __future__ import annotations

import json

import pytest

from duorl.cli.main import main

SMALL = ["training.num_envs=8", "algo.batch_size=32", "algo.actor_hidden_dim=16", "algo.critic_hidden_dim=16",
         "algo.actor_num_blocks=1", "algo.critic_num_blocks=1", "algo.num_atoms=11"]


@pytest.mark.parametrize("algo", ["flashsac", "warpsac"])
def test_bench_learner_writes_json(tmp_path, capsys: pytest.CaptureFixture[str], algo: str) -> None:
    out = tmp_path / "bench.json"
    argv = ["bench", "learner", "--algo", algo, "--iters", "3", "--warmup", "1", "--replay-ticks", "8", "--out", str(out), *SMALL]
    assert main(argv) == 0
    result = json.loads(out.read_text())
    assert json.loads(capsys.readouterr().out) == result
    assert result["command"].startswith("duorl bench learner --algo " + algo)
    assert result["algo"] == algo and result["task"] == "g1_walk_dims"
    assert result["spec"] == {"actor_obs_dim": 98, "critic_obs_dim": 101, "action_dim": 29}
    assert (result["batch_size"], result["updates_per_step"], result["num_envs"]) == (32, 2, 8)
    assert result["replay_sampling"] == ("age_biased" if algo == "warpsac" else "uniform")
    eager = result["eager_ms_per_iteration"]
    assert result["iterations_timed"] == 3 and 0 < eager["min"] <= eager["median"] <= eager["p90"]
    # the host's part of an iteration: on the CPU, where nothing runs asynchronously, about all of it
    host = result["eager_host_ms_per_iteration"]
    assert 0 < host["min"] <= eager["min"] and host["median"] > 0.9 * eager["median"]
    # the CPU has no CUDA graph: the graph fields are present and empty
    assert result["device"] == "cpu" and result["graph_ms_per_iteration"] is None and result["graph_speedup"] is None
    assert result["graph_host_ms_per_iteration"] is None and result["graph_launch_ms"] is None


def test_bench_learner_sac_with_a_task(tmp_path) -> None:
    out = tmp_path / "sac.json"
    argv = ["bench", "learner", "--algo", "sac", "--task", "pendulum_swingup", "--iters", "2", "--warmup", "0",
            "--replay-ticks", "4", "--out", str(out), "training.num_envs=4", "algo.batch_size=16",
            "algo.updates_per_step=2", "algo.actor_hidden_dims=[16]", "algo.critic_hidden_dims=[16]"]
    assert main(argv) == 0
    result = json.loads(out.read_text())
    assert result["task"] == "pendulum_swingup" and result["spec"]["action_dim"] == 1
    assert result["networks"]["critic_hidden_dims"] == [16]


def test_bench_learner_rejects_bad_settings(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "learner", "--algo", "flashsac", "algo.replay_min_weight=0"]) == 2
    assert "algo.replay_min_weight" in capsys.readouterr().err
    assert main(["bench", "learner", "algo.no_such_key=1"]) == 2
    assert main(["bench", "learner", "--iters", "0"]) == 2


def test_bench_learner_arms_interleave_in_one_process(tmp_path) -> None:
    """--arm: every arm built in one process, timed in interleaved rounds, as ratios to the first."""
    out = tmp_path / "arms.json"
    argv = ["bench", "learner", "--algo", "flashsac", "--iters", "3", "--warmup", "1", "--replay-ticks", "8",
            "--out", str(out), *SMALL, "--arm", "before:",
            "--arm", "moved:algo.algo_params.gradients_by_copy=true,algo.algo_params.packed_replay=true"]
    assert main(argv) == 0
    result = json.loads(out.read_text())
    assert result["path"] == "eager" and result["rounds"] == 3 and result["arms_skipped"] == []
    before, moved = result["arms"]
    assert (before["name"], before["overrides"], before["median_ratio_to_first"]) == ("before", [], 1.0)
    assert moved["overrides"] == ["algo.algo_params.gradients_by_copy=true", "algo.algo_params.packed_replay=true"]
    assert len(before["ms"]) == len(moved["ms"]) == 3 and moved["median_ratio_to_first"] > 0
    assert moved["setup_s"] >= 0 and moved["ms_per_iteration"]["min"] > 0


def test_bench_learner_arms_budget_and_errors(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "arms.json"
    argv = ["bench", "learner", "--algo", "flashsac", "--iters", "1", "--warmup", "0", "--replay-ticks", "8",
            "--out", str(out), *SMALL, "--arm", "before:", "--arm", "late:algo.algo_params.packed_replay=true",
            "--budget-s", "0"]
    assert main(argv) == 0
    result = json.loads(out.read_text())
    assert [a["name"] for a in result["arms"]] == ["before"] and result["arms_skipped"] == ["late"]
    capsys.readouterr()
    assert main(["bench", "learner", "--arm", "no colon"]) == 2
    assert "--arm" in capsys.readouterr().err
    assert main(["bench", "learner", "--arm", "a:", "--arm", "a:"]) == 2
    assert main(["bench", "learner", "--arm", "a:algo.no_such_key=1"]) == 2
