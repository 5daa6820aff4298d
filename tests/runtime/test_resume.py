"""Checkpoint and resume through the real duo: N + M iterations equal N+M uninterrupted ones."""

import json
import shutil

import pytest
import torch

from duorl.runtime.checkpoint import load_checkpoint
from tests.conftest import run_duorl
from tests.runtime.test_duo_protocol import _assert_bitwise_equal

N, M = 6, 6
COMMON = [f"algo.save_interval={N}", "training.log_interval=1", "algo.learning_starts=2", "training.env_steps_per_sync=2", "algo.buffer_size=8"]


def _final(run):
    return load_checkpoint(run / "checkpoints" / "final.pt")


FLASH = ["algo.actor_hidden_dim=16", "algo.critic_hidden_dim=16", "algo.actor_num_blocks=1", "algo.critic_num_blocks=1",
         "algo.block_expansion=2"]


# flashsac adds reward scaling, a learning-rate schedule and held exploration noise (collector-side
# state); warpsac its age-biased sampler
@pytest.mark.slow
@pytest.mark.parametrize("algo", ["sac", "flashsac", "warpsac"])
def test_resume_with_replay_is_bitwise_identical(tmp_path, algo):
    extra = FLASH if algo != "sac" else []
    full, first, resumed = tmp_path / "full", tmp_path / "first", tmp_path / "resumed"
    r = run_duorl(full, f"algo.max_iterations={N + M}", *COMMON, *extra, algo=algo)
    assert r.returncode == 0, r.stderr[-3000:]
    r = run_duorl(first, f"algo.max_iterations={N + M}", *COMMON, *extra, "training.checkpoint_replay=true", algo=algo)
    assert r.returncode == 0, r.stderr[-3000:]
    ckpt = first / "checkpoints" / f"iter_{N:06d}.pt"
    head = load_checkpoint(ckpt)["header"]
    assert head["iteration"] == N and head["collector_state"] and head["replay"]
    r = run_duorl(
        resumed, f"algo.max_iterations={N + M}", *COMMON, *extra, "training.checkpoint_replay=true",
        f"training.resume={ckpt}", algo=algo,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert f"resuming {ckpt} at iteration {N}" in r.stdout
    summary = json.loads((resumed / "run_summary.json").read_text())
    assert summary["iterations"] == N + M and summary["runtime_manifest"]["resumed_from"]["iteration"] == N
    a, b = _final(full), _final(resumed)
    _assert_bitwise_equal(a["learner"], b["learner"])
    # and the training really moved between the checkpoint and the end
    mid = load_checkpoint(ckpt)["learner"]["critic"]
    assert any(not torch.equal(mid[k], a["learner"]["critic"][k]) for k in mid)


@pytest.mark.slow
def test_resume_without_replay_refills_replay_first(tmp_path):
    first, resumed = tmp_path / "first", tmp_path / "resumed"
    r = run_duorl(first, f"algo.max_iterations={N}", *COMMON)
    assert r.returncode == 0, r.stderr[-3000:]
    head = load_checkpoint(first / "checkpoints" / "final.pt")["header"]
    assert head["iteration"] == N and head["collector_state"] and not head["replay"]
    r = run_duorl(resumed, f"algo.max_iterations={N + M}", *COMMON, f"training.resume={first}")
    assert r.returncode == 0, r.stderr[-3000:]
    assert "replay not in the checkpoint" in r.stdout
    rows = [json.loads(x) for x in (resumed / "metrics.jsonl").read_text().splitlines()]
    assert rows[0]["iteration"] == N + 1
    # the documented difference: no update until learning_starts ticks were collected again
    assert "Loss/critic" not in rows[0]
    assert any("Loss/critic" in row for row in rows)


@pytest.mark.slow
def test_incompatible_config_names_the_keys(tmp_path):
    first = tmp_path / "first"
    r = run_duorl(first, "algo.max_iterations=2", *COMMON)
    assert r.returncode == 0, r.stderr[-3000:]
    r = run_duorl(tmp_path / "bad", "algo.max_iterations=4", *COMMON, "algo.gamma=0.9", "algo.batch_size=16", f"training.resume={first}")
    assert r.returncode == 2
    assert "algo.gamma: checkpoint=0.99, now=0.9" in r.stderr and "algo.batch_size" in r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.slow
def test_corrupt_checkpoint_is_a_clear_error_and_keeps_the_previous(tmp_path):
    first = tmp_path / "first"
    r = run_duorl(first, "algo.max_iterations=4", "algo.save_interval=2", *COMMON[2:])
    assert r.returncode == 0, r.stderr[-3000:]
    ck = first / "checkpoints"
    good = ck / "iter_000002.pt"
    before = good.read_bytes()
    final = ck / "final.pt"
    final.write_bytes(final.read_bytes()[: final.stat().st_size // 2])  # truncated
    r = run_duorl(tmp_path / "again", "algo.max_iterations=6", "algo.save_interval=2", *COMMON[2:], f"training.resume={first}")
    assert r.returncode == 2
    assert "unreadable" in r.stderr and "final.pt" in r.stderr and "Traceback" not in r.stderr
    assert good.read_bytes() == before
    shutil.copy(good, tmp_path / "copy.pt")
    assert load_checkpoint(tmp_path / "copy.pt")["header"]["iteration"] == 2


@pytest.mark.slow
def test_a_checkpoint_without_the_tasks_state_is_refused_early(tmp_path):
    """A checkpoint whose task state lacks an entry this version's task restores (written before the
    task kept it) stops the resume with the missing names, before any process is started."""
    first = tmp_path / "first"
    # 2 envs x 8 ticks: a batch of 16 fits the ring
    r = run_duorl(first, "algo.max_iterations=2", "training.num_envs=2", "algo.batch_size=16", *COMMON, task="g1_walk_flat")
    assert r.returncode == 0, r.stderr[-3000:]
    final = first / "checkpoints" / "final.pt"
    data = torch.load(final, weights_only=False)
    task_state = data["runtime"]["collector"]["env"]["task"]
    del task_state["last_policy_action"], task_state["prev_policy_action"]
    old = tmp_path / "old.pt"
    torch.save(data, old)
    r = run_duorl(tmp_path / "again", "algo.max_iterations=4", "training.num_envs=2", "algo.batch_size=16", *COMMON,
                  f"training.resume={old}", task="g1_walk_flat")
    assert r.returncode == 2, r.stderr[-3000:]
    assert "older duorl" in r.stderr and "last_policy_action, prev_policy_action" in r.stderr
    assert "Traceback" not in r.stderr


def test_missing_task_state_names_only_what_is_absent():
    from duorl.cli.resume import missing_task_state

    snap = {"env": {"task": {"a": 1, "b": 2}}}
    assert missing_task_state(snap, ("a", "b", "c")) == ["c"]
    assert missing_task_state(snap, ()) == []
    assert missing_task_state(None, ("a",)) == []  # no collector snapshot: nothing to check
