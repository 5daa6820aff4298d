"""GPU-only: the staged mjlab step with its graph stages captured as CUDA graphs, against mjlab's own eager
step (`pytest -m cuda`; about 3 minutes on an H200 with a cold warp cache: mjlab builds four envs).

Two envs from the same seed step side by side as on the CPU (tests/envs/mjlab/test_staged_step.py), but
MuJoCo Warp adds contact forces with atomics, in any order, so two G1 trajectories part by float rounding
that contacts amplify within a few ticks. Each tick therefore starts both envs from the same state: after
comparing, every tensor and warp array of the eager env (mjlab's objects, the simulation's data and model,
duorl's episode sums) is copied into the staged one, and the CUDA generator is set to where the eager
tick left it. What is compared is one tick from one state, 300 times, episodes ending inside them.

Tolerances: the swing-up has no contacts and compares to 1e-5; the G1 to CONTACT_TOL (the same bound as
the captured duorl tick's test: MuJoCo Warp's contact atomics moved a G1 reward by 2.2e-4 between a
captured and an eager tick). Done flags must agree in every env and tick but a few, where an atomic sum
lands on the other side of a termination threshold; a stale buffer or a generator out of step would move
whole rows every tick.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

from tests.envs.mjlab.test_staged_step import CARTPOLE, G1, _pair_on

pytestmark = pytest.mark.cuda

CONTACT_TOL = 1e-3


def _arrays(root: Any) -> dict[str, Any]:
    """Every tensor and warp array reachable from `root` through mjlab's and MuJoCo Warp's objects, by path."""
    import warp as wp

    out: dict[str, Any] = {}
    seen: set[int] = set()

    def walk(obj: Any, path: str, depth: int) -> None:
        if id(obj) in seen or depth > 12:
            return
        seen.add(id(obj))
        if isinstance(obj, torch.Tensor):
            out[path] = obj
            return
        if isinstance(obj, wp.array):
            if obj.size > 0:
                try:
                    out[path] = wp.to_torch(obj)
                except TypeError:  # an array of a warp struct (no torch dtype): constants of the model
                    pass
            return
        if isinstance(obj, dict):
            for k, v in obj.items():
                walk(v, f"{path}[{k!r}]", depth + 1)
            return
        if isinstance(obj, (list, tuple)):
            for i, v in enumerate(obj):
                walk(v, f"{path}[{i}]", depth + 1)
            return
        module = type(obj).__module__ or ""
        if not (module.startswith("mjlab.") or module.startswith("mujoco_warp.")) or not hasattr(obj, "__dict__"):
            return
        if type(obj).__name__ == "WarpBridge":  # a view of the sim's own data and model, walked below
            return
        for k, v in vars(obj).items():
            walk(v, f"{path}.{k}", depth + 1)

    walk(root.env, "env", 0)
    walk(root.env.sim.wp_data, "wp_data", 0)
    walk(root.env.sim.wp_model, "wp_model", 0)
    out["vec._ep_return"], out["vec._ep_length"] = root._ep_return, root._ep_length
    return out


def _copy_state(src: Any, dst: Any) -> int:
    a, b = _arrays(src), _arrays(dst)
    n = 0
    for path, t in a.items():
        u = b.get(path)
        if u is not None and u.shape == t.shape and u.dtype == t.dtype and u.data_ptr() != t.data_ptr():
            try:
                u.copy_(t)
            except RuntimeError:  # an expanded view (one element behind many): its source is copied elsewhere
                continue
            n += 1
    return n


def _term_at(vec: Any, key: str, column: int) -> str:
    """The mjlab observation term behind column `column` of duorl's `key` ("actor"/"critic") observation."""
    import math

    manager = vec.env.observation_manager
    groups = vec._actor_groups if key == "actor" else vec._critic_groups
    at = 0
    for group in groups:
        for name, dims in zip(manager.active_terms[group], manager.group_obs_term_dim[group]):
            width = math.prod(dims)
            if column < at + width:
                return f"{group}.{name}[{column - at}]"
            at += width
    return f"column {column}"


def _resynced_lockstep(eager: Any, staged: Any, steps: int, tol: float) -> dict[str, float]:
    gen = torch.cuda.default_generators[torch.cuda.current_device()]
    torch.manual_seed(11)
    eager.reset()
    torch.manual_seed(11)
    staged.reset()
    _copy_state(eager, staged)
    actions = torch.Generator(device="cuda").manual_seed(5)
    n, a = eager.num_envs, eager.spec.action_dim
    worst = {"obs": 0.0, "reward": 0.0, "metrics": 0.0, "flag_mismatches": 0, "resets": 0, "rng_mismatches": 0}
    for step in range(steps):
        act = torch.rand(n, a, generator=actions, device="cuda") * 2 - 1
        start = gen.get_state()
        out_e = eager.step(act)
        after_e = gen.get_state()
        gen.set_state(start)
        out_s = staged.step(act)
        torch.cuda.synchronize()
        flags_e, flags_s = out_e[2] | out_e[3], out_s[2] | out_s[3]
        agree = (out_e[2] == out_s[2]) & (out_e[3] == out_s[3])
        worst["flag_mismatches"] += int((~agree).sum())
        worst["resets"] += int(flags_e.sum())
        rows = agree.unsqueeze(1)
        for key in out_e[0]:
            for which, e, s in (("obs", out_e[0][key], out_s[0][key]),
                                ("final_obs", out_e[4]["final_obs"][key], out_s[4]["final_obs"][key])):
                diff = torch.where(rows, (e - s).abs() / (1 + e.abs()), torch.zeros_like(e))
                d = diff.max().item()
                if d > worst["obs"]:
                    worst["obs"] = d
                    env, col = divmod(int(diff.argmax()), diff.shape[1])
                    worst["obs_at"] = (f"{which} {key} {_term_at(eager, key, col)} env {env}: eager {e[env, col].item():.4g} "
                                       f"staged {s[env, col].item():.4g}, {int((diff > tol).sum())} elements over tol "
                                       f"in columns {sorted({_term_at(eager, key, c) for c in (diff > tol).nonzero()[:, 1].tolist()})[:12]}")
        d = torch.where(agree, (out_e[1] - out_s[1]).abs() / (1 + out_e[1].abs()), torch.zeros_like(out_e[1]))
        worst["reward"] = max(worst["reward"], d.max().item())
        m_e, m_s = out_e[4]["metrics"], out_s[4]["metrics"]
        worst["metrics"] = max(worst["metrics"], ((m_e - m_s).abs() / (1 + m_e.abs())).max().item())
        if bool(torch.equal(flags_e, flags_s)) and not torch.equal(gen.get_state(), after_e):
            worst["rng_mismatches"] += 1
        assert worst["obs"] <= tol and worst["reward"] <= tol and worst["metrics"] <= tol, (step, worst)
        gen.set_state(after_e)
        _copy_state(eager, staged)
    print(f"staged vs eager, {steps} ticks from the same state each: {worst}")
    return worst


@pytest.mark.parametrize("task_id,num_envs,episode,tol", [(CARTPOLE, 64, 25, 1e-5), (G1, 128, 40, CONTACT_TOL)])
def test_captured_staged_step_equals_mjlabs_own_step_from_the_same_state(task_id, num_envs, episode, tol):
    # the reset bodies as graphs too (off on CUDA by default: staged_step.RESET_GRAPHS_BY_MODE), so that
    # every stage's capture is checked
    eager, staged = _pair_on("cuda:0", task_id, num_envs, episode, "cuda", reset_graphs=True)
    try:
        worst = _resynced_lockstep(eager, staged, 300, tol)
        state = staged.staged.describe()
    finally:
        eager.close()
        staged.close()
    captured = {name: s["graph"] for name, s in state["stages"].items() if "runs" in s}
    assert captured and all(captured.values()), state
    assert not state["notes"], state["notes"]
    assert state["reset_body"]["graph_per_count"] and state["reset_body"]["captured"] >= 1, state["reset_body"]
    assert worst["resets"] >= 300 // episode * num_envs
    assert worst["flag_mismatches"] <= max(2, worst["resets"] // 100), worst
    assert worst["rng_mismatches"] == 0, worst
