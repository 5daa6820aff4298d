"""The gradient synchronizer over two real gloo processes, against plain references.

- Two ranks training the real learners on different data hold bitwise-equal state, equal to a
  single-process reference that runs both replicas in lockstep and applies the averaged gradients.
- The bf16 wire: groups of 1023 elements travel in fp32, 1024 in bf16; the sum is restored to fp32
  before the division by the world size; parameter, gradient and optimizer dtypes and storage stay.
- A NaN in rank 1's loss makes both ranks skip that update: parameters, targets and optimizer state
  (step counts, both moments) stay bitwise as they were, Train/skipped_updates counts 1.
"""

from __future__ import annotations

import os
import sys
import threading
from dataclasses import replace
from pathlib import Path

import pytest
import torch
import torch.multiprocessing as mp

from duorl.algos.base import NullSynchronizer
from duorl.algos.flashsac.learner import FlashSACLearner
from duorl.algos.sac.learner import SACLearner
from duorl.config.schema import AlgoConfig
from duorl.envs.base import EnvSpec
from tests.algos.conftest import ToySampler

SPEC = EnvSpec(task="toy", actor_obs_dim=5, critic_obs_dim=7, action_dim=3, max_episode_steps=10, control_dt=0.02)
CONFIGS = {
    "sac": AlgoConfig(batch_size=32, actor_hidden_dims=[32], critic_hidden_dims=[32], num_atoms=21, v_min=-10.0,
                      v_max=10.0, policy_frequency=2),
    "flashsac": AlgoConfig(name="flashsac", batch_size=32, num_atoms=21, v_min=-5.0, v_max=5.0, policy_frequency=2,
                           actor_hidden_dim=16, actor_num_blocks=1, critic_hidden_dim=16, critic_num_blocks=1,
                           block_expansion=2, max_iterations=20),
}
ITERATIONS = 5
WORLD = 2


def _learner(kind: str, updates: int = 2):
    cls = SACLearner if kind == "sac" else FlashSACLearner
    return cls(replace(CONFIGS[kind], updates_per_step=updates), SPEC, "cpu", 0)


def _observations(rank: int, k: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1000 * rank + k)
    obs_a = torch.randn(4, SPEC.actor_obs_dim, generator=g) * 2 + rank
    obs_c = torch.randn(4, SPEC.critic_obs_dim, generator=g) * 3 - rank
    reward = torch.randn(2, 4, generator=g)
    done = (torch.rand(2, 4, generator=g) < 0.3).float()
    return obs_a, obs_c, reward, done


def _train(learner, rank: int, updates: int = 2) -> None:
    sampler = ToySampler(SPEC, seed=100 + rank)
    for k in range(ITERATIONS):
        obs_a, obs_c, reward, done = _observations(rank, k)
        learner.observe(obs_a, obs_c)
        if hasattr(learner, "observe_rewards"):
            learner.observe_rewards(reward, done)
        learner.train_iteration(sampler, updates)


def _shared_state(learner) -> dict:
    state = learner.state_dict()
    for key in getattr(learner, "rank_local_state", ()):
        state.pop(key)
    return state


def _assert_equal(a, b, path="state"):
    if isinstance(a, torch.Tensor):
        assert a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b), path
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), path
        for k in a:
            _assert_equal(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, (list, tuple)):
        for i, (x, y) in enumerate(zip(a, b)):
            _assert_equal(x, y, f"{path}[{i}]")
    else:
        assert a == b, path


# ------------------------------------------------------------------------------ the two processes


def _init(rank: int, init_file: str) -> None:
    import datetime

    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=WORLD,
                            timeout=datetime.timedelta(seconds=60))


def _worker(rank: int, scenario: str, init_file: str, out: str) -> None:
    import torch.distributed as dist

    from duorl.distributed.grad_sync import AllReduceSynchronizer

    _init(rank, init_file)
    try:
        if scenario in CONFIGS:
            learner = _learner(scenario)
            learner.set_synchronizer(AllReduceSynchronizer(dist.group.WORLD, WORLD, torch.device("cpu")))
            _train(learner, rank)
            torch.save(_shared_state(learner), os.path.join(out, f"rank{rank}.pt"))
        elif scenario == "wire":
            _wire_worker(rank, out)
        elif scenario.startswith("skip-"):
            _skip_worker(rank, scenario.removeprefix("skip-"), out)
    finally:
        dist.destroy_process_group()
    # the results are saved and the group is gone: leave without the interpreter's teardown, as duorl's own
    # processes do (cli/main.console_main, the collector's _leave). There a C++ thread still joinable at exit
    # aborted a worker at times (std::terminate, "terminate called without an active exception", SIGABRT, after
    # both ranks had passed destroy_process_group): the bf16 wire test failed 3 of 40 runs so, 0 of 40 with this
    # (benchmarks/2026-12-04_cpu_probes/)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _spawn(scenario: str, tmp_path: Path) -> Path:
    out = tmp_path / scenario
    out.mkdir()
    mp.start_processes(_worker, args=(scenario, str(tmp_path / f"{scenario}.init"), str(out)), nprocs=WORLD,
                       start_method="spawn", join=True)
    return out


# ------------------------------------------------------------------------------ the reference


class LockstepPair(NullSynchronizer):
    """Two learner replicas in two threads of one process, meeting at every optimizer step: the
    gradients are averaged ((a + b) / 2 in fp32), and the running statistics gathered in rank order."""

    world_size = WORLD

    def __init__(self, rank: int, shared: dict) -> None:
        self.rank, self.shared = rank, shared

    def attach(self, groups, buffers=()):
        self.groups = {k: list(v) for k, v in groups.items()}
        self.buffers = list(buffers)

    def _exchange(self, x: torch.Tensor) -> list[torch.Tensor]:
        barrier = self.shared["barrier"]
        self.shared[self.rank] = x.clone()
        barrier.wait()
        both = [self.shared[0], self.shared[1]]
        barrier.wait()
        return both

    def synchronize(self, group, loss):
        grads = [p.grad for p in self.groups[group]]
        flat = torch.cat([g.reshape(-1) for g in grads])
        invalid = (~(torch.isfinite(loss.detach()).all() & torch.isfinite(flat).all())).float().reshape(1)
        a, b = self._exchange(torch.cat([flat, invalid]))
        avg = (a + b)[:-1] / WORLD
        offset = 0
        for g in grads:
            g.copy_(avg[offset:offset + g.numel()].view_as(g))
            offset += g.numel()
        return ((a + b)[-1] == 0).float()

    def gather(self, x):
        return torch.cat(self._exchange(x))

    def average_buffers(self):
        if not self.buffers:
            return
        a, b = self._exchange(torch.cat([t.reshape(-1) for t in self.buffers]))
        avg = (a + b) / WORLD
        offset = 0
        for t in self.buffers:
            t.copy_(avg[offset:offset + t.numel()].view_as(t))
            offset += t.numel()

    def fingerprint(self):
        return ("lockstep", self.rank)


def _lockstep_reference(kind: str) -> list:
    torch.set_num_threads(1)
    shared: dict = {"barrier": threading.Barrier(WORLD)}
    learners = [_learner(kind) for _ in range(WORLD)]
    for r, learner in enumerate(learners):
        learner.set_synchronizer(LockstepPair(r, shared))
    errors: list[BaseException] = []

    def run(r: int) -> None:
        try:
            _train(learners[r], r)
        except BaseException as e:  # noqa: BLE001 - reported by the test
            errors.append(e)
            shared["barrier"].abort()

    threads = [threading.Thread(target=run, args=(r,)) for r in range(WORLD)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors and not any(t.is_alive() for t in threads), errors
    return learners


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["sac", "flashsac"])
def test_ranks_agree_with_each_other_and_with_the_lockstep_reference(tmp_path, kind):
    out = _spawn(kind, tmp_path)
    ranks = [torch.load(out / f"rank{r}.pt", weights_only=False) for r in range(WORLD)]
    _assert_equal(ranks[0], ranks[1])
    reference = _lockstep_reference(kind)
    _assert_equal(ranks[0], _shared_state(reference[0]))
    # data really differed per rank: a learner trained alone on rank 0's data ends elsewhere
    alone = _learner(kind)
    _train(alone, 0)
    name, param = next(iter(alone.critic.named_parameters()))
    assert not torch.equal(param.detach(), ranks[0]["critic"][name])


# ------------------------------------------------------------------------------ the bf16 wire

SMALL, BIG = 1023, 1024
TINY_NORMAL = 2.0 ** -126 * (1 + 2.0 ** -7)  # a bf16 normal whose half is a subnormal bf16 cannot hold


def _wire_grads(rank: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(7 + rank)
    small, big = torch.randn(SMALL, generator=g), torch.randn(BIG, generator=g)
    if rank == 0:
        big[0] = TINY_NORMAL
    else:
        big[0] = 0.0
    return {"small": small, "big": big}


def _wire_worker(rank: int, out: str) -> None:
    import torch.distributed as dist

    from duorl.distributed.grad_sync import AllReduceSynchronizer

    params = {name: torch.nn.Parameter(torch.zeros_like(v)) for name, v in _wire_grads(rank).items()}
    for name, p in params.items():
        p.grad = _wire_grads(rank)[name].clone()
    opt = torch.optim.AdamW(list(params.values()), lr=torch.tensor(1e-3), fused=True)
    opt.step()  # optimizer state exists: its storage must not move either
    sync = AllReduceSynchronizer(dist.group.WORLD, WORLD, torch.device("cpu"), wire_dtype="bfloat16")
    sync.attach({n: [p] for n, p in params.items()})  # from here on the gradients live in fp32 buffers
    ptrs = {n: (p.data_ptr(), p.grad.data_ptr(), opt.state[p]["exp_avg"].data_ptr(), p.dtype, p.grad.dtype)
            for n, p in params.items()}
    for name, p in params.items():
        p.grad.copy_(_wire_grads(rank)[name])
    verdicts = {n: sync.synchronize(n, torch.zeros(())) for n in params}
    after = {n: (p.data_ptr(), p.grad.data_ptr(), opt.state[p]["exp_avg"].data_ptr(), p.dtype, p.grad.dtype)
             for n, p in params.items()}
    torch.save({"grads": {n: p.grad.clone() for n, p in params.items()}, "verdicts": verdicts, "ptrs": (ptrs, after),
                "layout": sync.layout()}, os.path.join(out, f"rank{rank}.pt"))


@pytest.mark.slow
def test_bf16_wire_math_against_a_plain_reference(tmp_path):
    out = _spawn("wire", tmp_path)
    results = [torch.load(out / f"rank{r}.pt", weights_only=False) for r in range(WORLD)]
    g0, g1 = _wire_grads(0), _wire_grads(1)
    assert results[0]["layout"] == {"small": {"elements": SMALL, "wire_dtype": "float32"},
                                    "big": {"elements": BIG, "wire_dtype": "bfloat16"}}
    small_ref = (g0["small"] + g1["small"]) / WORLD  # fp32 all the way
    wire_sum = g0["big"].bfloat16() + g1["big"].bfloat16()  # what travels, summed in bf16
    big_ref = wire_sum.float() / WORLD  # restored to fp32, then divided
    for r in results:
        assert torch.equal(r["grads"]["small"], small_ref)
        assert torch.equal(r["grads"]["big"], big_ref)
        assert all(float(v) == 1.0 for v in r["verdicts"].values())
        before, after = r["ptrs"]
        assert before == after  # parameters, gradients, optimizer state: same storage and dtypes
        assert all(p[3] == torch.float32 and p[4] == torch.float32 for p in after.values())
    # the constructed element: dividing in bf16 would round it (its half is a subnormal bf16 lacks)
    divided_in_bf16 = (wire_sum / WORLD).float()
    assert big_ref[0] == TINY_NORMAL / 2 and divided_in_bf16[0] != big_ref[0]
    assert results[0]["grads"]["big"][0] == TINY_NORMAL / 2


# ------------------------------------------------------------------------------ skipping together

SKIP_AT = 2  # the iteration whose (single) update rank 1 poisons


def _skip_worker(rank: int, kind: str, out: str) -> None:
    import torch.distributed as dist

    from duorl.distributed.grad_sync import AllReduceSynchronizer

    learner = _learner(kind, updates=1)
    learner.set_synchronizer(AllReduceSynchronizer(dist.group.WORLD, WORLD, torch.device("cpu")))
    poison = learner.poison_losses(1)
    sampler = ToySampler(SPEC, seed=100 + rank)
    snapshots = []
    for k in range(ITERATIONS):
        obs_a, obs_c, reward, done = _observations(rank, k)
        learner.observe(obs_a, obs_c)
        if hasattr(learner, "observe_rewards"):
            learner.observe_rewards(reward, done)
        if k == SKIP_AT and rank == 1:
            poison[0] = float("nan")
        learner.train_iteration(sampler, 1)
        poison.zero_()
        snapshots.append(_trained_state(learner))
    torch.save({"snapshots": snapshots, "state": _shared_state(learner)}, os.path.join(out, f"rank{rank}.pt"))


def _trained_state(learner) -> dict:
    """What a skipped update must leave bitwise unchanged: parameters, targets, the temperature and every
    optimizer's state (step counts, both moments), and the skip counter."""
    return {
        "actor": {k: v.clone() for k, v in learner.actor.named_parameters()},
        "critic": {k: v.clone() for k, v in learner.critic.named_parameters()},
        "target": {k: v.clone() for k, v in learner.critic_target.named_parameters()},
        "log_alpha": learner.log_alpha.detach().clone(),
        "optimizers": [{i: {k: v.clone() for k, v in s.items()} for i, s in enumerate(opt.state.values())}
                       for opt in learner.graph_optimizers()],
        "skipped": learner.skipped_updates.clone(),
    }


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["sac", "flashsac"])
def test_a_nan_on_rank_1_skips_the_update_on_every_rank(tmp_path, kind):
    out = _spawn(f"skip-{kind}", tmp_path)
    ranks = [torch.load(out / f"rank{r}.pt", weights_only=False) for r in range(WORLD)]
    _assert_equal(ranks[0]["state"], ranks[1]["state"])
    for r in ranks:
        before, skipped, after = (r["snapshots"][k] for k in (SKIP_AT - 1, SKIP_AT, SKIP_AT + 1))
        counts = {k: v for k, v in skipped.items() if k != "skipped"}
        _assert_equal({k: v for k, v in before.items() if k != "skipped"}, counts)  # nothing moved
        assert float(before["skipped"]) == 0.0 and float(skipped["skipped"]) == 1.0
        assert float(r["state"]["skipped_updates"]) == 1.0
        # step counts did not advance in the skipped update, and training went on after it
        steps = [float(s["step"]) for opt in skipped["optimizers"] for s in opt.values()]
        assert steps == [float(s["step"]) for opt in before["optimizers"] for s in opt.values()]
        assert not torch.equal(after["critic"][next(iter(after["critic"]))], skipped["critic"][next(iter(skipped["critic"]))])
