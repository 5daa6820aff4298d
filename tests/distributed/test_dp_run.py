"""Data parallel through the real launcher and torchrun: two CPU ranks over gloo, each with its own
collector, train one policy; every rank's learner state is bitwise equal; the launcher form, the
torchrun form and a resumed run agree bitwise; two "nodes" on loopback train and agree."""

from __future__ import annotations

import json

import pytest
import torch

from duorl.runtime.checkpoint import load_checkpoint
from tests.conftest import TINY
from tests.distributed.conftest import (DP,assert_all_gone, free_port, launcher_cmd, run, run_pids, start, summary,
                                 torchrun_cmd)
from tests.runtime.test_duo_protocol import _assert_bitwise_equal

N, M = 4, 4
# ranks write replay into checkpoints so a resume continues bitwise; every rank logs each iteration
COMMON = [f"algo.max_iterations={N + M}", f"algo.save_interval={N}", "training.log_interval=1",
          "training.checkpoint_replay=true", "algo.learning_starts=2"]


DP_TINY = [*TINY, *DP]


def _final(run_dir):
    return load_checkpoint(run_dir / "checkpoints" / "final.pt")


def _check_agreement(run_dir) -> dict:
    s = summary(run_dir)
    assert s["status"] == "completed" and s["iterations"] == N + M, s.get("error")
    agreement = s["dp_learner_state"]
    assert agreement["equal"] and len(agreement["sha256"]) == 2, agreement
    m = s["runtime_manifest"]
    assert m["world_size"] == 2 and m["data_parallel"] is True
    ranks = m["ranks"]
    assert [r["rank"] for r in ranks] == [0, 1] and len({r["learner_pid"] for r in ranks}) == 2
    assert all(r["host"] and r["collector_pid"] for r in ranks)
    assert set(m["dp_gradient_groups"]) == {"critic", "actor", "alpha"}
    assert_all_gone(run_pids(s))
    return s


@pytest.mark.slow
def test_two_cpu_ranks_train_one_policy_launcher_torchrun_and_resume_agree(tmp_path):
    launched, torchrun, first, resumed = (tmp_path / n for n in ("launcher", "torchrun", "first", "resumed"))
    r = run(launcher_cmd(launched, *COMMON))
    assert r.returncode == 0, r.stderr[-4000:]
    s = _check_agreement(launched)
    rows = [json.loads(line) for line in (launched / "metrics.jsonl").read_text().splitlines()]
    last = rows[-1]
    # both ranks' env steps are counted, the slowest rank and the spread are kept
    assert last["env_steps"] == s["env_steps"] == 2 * (N + M) * 4
    assert last["Perf/iteration_ms_max"] >= last["Perf/iteration_ms"] and last["Perf/iteration_ms_spread"] >= 0
    assert "Perf/dp_grad_sync_ms" in last and "Loss/critic" in last

    # the torchrun form runs the same per-rank code: bitwise the same final state
    r = run(torchrun_cmd(torchrun, *COMMON))
    assert r.returncode == 0, r.stderr[-4000:]
    _check_agreement(torchrun)
    a = _final(launched)
    _assert_bitwise_equal(a["learner"], _final(torchrun)["learner"])

    # N iterations, then a resume to N + M from the checkpoint at N (every rank's replay and collector
    # state in it): bitwise the uninterrupted run
    r = run(launcher_cmd(first, *COMMON[1:], f"algo.max_iterations={N}"))
    assert r.returncode == 0, r.stderr[-4000:]
    ckpt = load_checkpoint(first / "checkpoints" / "final.pt")
    runtime = ckpt["runtime"]
    assert runtime["world_size"] == 2 and len(runtime["ranks"]) == 2
    assert all(x["replay"] is not None and x["collector"] is not None for x in runtime["ranks"])
    assert ckpt["header"]["world_size"] == 2
    r = run(launcher_cmd(resumed, *COMMON, f"training.resume={first}"))
    assert r.returncode == 0, r.stderr[-4000:]
    _check_agreement(resumed)
    _assert_bitwise_equal(a["learner"], _final(resumed)["learner"])
    mid = ckpt["learner"]["critic"]
    assert any(not torch.equal(mid[k], a["learner"]["critic"][k]) for k in mid)  # it trained in between

    # a different world size cannot continue it, and says both sizes
    from duorl.config.errors import ConfigError
    from duorl.cli.configure import load_config
    from duorl.config.load import config_to_dict
    from duorl.cli.resume import load_resume

    cfg = load_config("sac", "pendulum_swingup", "mujoco", [*DP_TINY, *COMMON, f"training.resume={first}"])
    with pytest.raises(ConfigError, match="world size 2, and this run has world size 1"):
        load_resume(str(first), config_to_dict(cfg), (), world_size=1)


@pytest.mark.slow
def test_two_nodes_on_loopback_train_and_agree(tmp_path):
    """Two torchrun processes with c10d rendezvous on 127.0.0.1, one rank each."""
    port = free_port()
    run_dir = tmp_path / "nodes"
    nodes = [start(torchrun_cmd(run_dir, "algo.max_iterations=6", "training.devices=[cpu]", nproc=1, nnodes=2,
                                node_rank=r, port=port)) for r in (0, 1)]
    outs = [p.communicate(timeout=240) for p in nodes]
    for p, (out, err) in zip(nodes, outs):
        assert p.returncode == 0, err[-4000:]
    s = summary(run_dir)
    assert s["status"] == "completed" and s["dp_learner_state"]["equal"]
    assert_all_gone(run_pids(s))


@pytest.mark.slow
def test_ranks_with_different_configs_are_refused_before_any_collector(tmp_path):
    """torchrun with a different override on one node: one clear error, exit 2, no run directory."""
    port = free_port()
    run_dir = tmp_path / "mismatch"
    nodes = [start(torchrun_cmd(run_dir, "algo.max_iterations=6", "training.devices=[cpu]", *extra, nproc=1, nnodes=2,
                                node_rank=r, port=port)) for r, extra in ((0, ()), (1, ("algo.batch_size=16", "training.dp_gradient_wire_dtype=bfloat16")))]
    errs = [p.communicate(timeout=120)[1] for p in nodes]
    assert all(p.returncode != 0 for p in nodes)
    err = errs[0]
    assert "different configurations" in err and "algo.batch_size (rank 0: 32, rank 1: 16)" in err, err[-3000:]
    assert "training.dp_gradient_wire_dtype (rank 0: 'float32', rank 1: 'bfloat16')" in err
    assert not run_dir.exists()  # refused before the run directory, so before any collector
