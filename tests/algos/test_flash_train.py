"""FlashSAC and WarpSAC through the real duo on the CPU (tiny settings): reward scaling is fed from the
collector's ticks, WarpSAC's age-biased sampler stays inside the readable window, and the manifest
says the whole-cycle graph is off on the CPU."""

from __future__ import annotations

import json

import pytest

from tests.conftest import run_duorl

FLASH_TINY = [
    "algo.actor_hidden_dim=16", "algo.critic_hidden_dim=16", "algo.actor_num_blocks=1", "algo.critic_num_blocks=1",
    "algo.block_expansion=2", "algo.max_iterations=12", "algo.save_interval=100", "debug.check_replay_window=true",
]


@pytest.mark.slow
@pytest.mark.parametrize("algo", ["flashsac", "warpsac"])
def test_flash_algorithms_train_in_the_duo(tmp_path, monkeypatch, algo: str) -> None:
    run = tmp_path / algo
    monkeypatch.setenv("DUORL_WEIGHT_PUBLISH", "event")  # CUDA only: a CPU duo publishes with a sync
    r = run_duorl(run, *FLASH_TINY, algo=algo)
    assert r.returncode == 0, r.stderr[-3000:]
    summary = json.loads((run / "run_summary.json").read_text())
    assert summary["status"] == "completed" and summary["iterations"] == 12
    manifest = summary["runtime_manifest"]
    assert manifest["whole_cycle_cuda_graph"] == {"configured": None, "dp_configured": True, "enabled": False,
                                                  "dp_graph": False, "active": False}
    assert manifest["weight_publish"] == "sync"
    check = summary["replay_window_check"]
    assert check["samples_checked"] > 0 and check["violations"] == 0
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    last = rows[-1]
    for key in ("Loss/critic", "Loss/actor", "Policy/alpha", "Policy/reward_scale", "Policy/learning_rate"):
        assert key in last, key
    # the return tracker saw the rewards: the scale moved off its initial 1
    assert last["Policy/reward_scale"] != pytest.approx(1.0)
    config = json.loads((run / "run_config.json").read_text())
    assert (config["algo"]["decay_step"] > 0) == (algo == "warpsac")
