"""Comparing an env's compiled step tensor code with the plain one *from the same state*.

Trajectories of a compiled and a plain env drift apart in contact-rich tasks: float rounding differs
in the last bit, and a foot touching down one substep earlier turns that into a different velocity
(measured with MuJoCo Warp's float32 physics on the CPU: g1_motion_tracking, one env of 32 differed by
0.14 in its final joint-velocity observation after 5 steps, with all states at most 4e-5 apart before
that step: benchmarks/scripts/compile_divergence_cpu.py). So
correctness of the compiled code is checked step by step: snapshot the env, run the compiled pieces,
restore the snapshot, run the plain pieces, compare outputs and resulting states, and continue from the
plain result. Nothing accumulates; each comparison is one step's tensor code from one state.
"""

from __future__ import annotations

from typing import Any

import torch

from duorl.envs.vec_env import TaskVecEnv


def _clone(x: Any) -> Any:
    if isinstance(x, torch.Tensor):
        return x.clone()
    if isinstance(x, dict):
        return {k: _clone(v) for k, v in x.items()}
    if isinstance(x, (tuple, list)):
        return type(x)(_clone(v) for v in x)
    return x


def assert_close_tree(a: Any, b: Any, path: str = "", atol: float = 1e-4, rtol: float = 1e-4) -> None:
    if isinstance(a, dict):
        assert a.keys() == b.keys(), path
        for k in a:
            assert_close_tree(a[k], b[k], f"{path}.{k}", atol, rtol)
    elif isinstance(a, (tuple, list)):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            assert_close_tree(x, y, f"{path}[{i}]", atol, rtol)
    elif isinstance(a, torch.Tensor) and not a.is_floating_point():  # flags, counters, generator states
        assert torch.equal(a, b), path
    elif isinstance(a, torch.Tensor):
        torch.testing.assert_close(a, b, atol=atol, rtol=rtol, msg=lambda m: f"{path}: {m}")
    else:
        assert a == b, path


def step_compiled_vs_plain(compiled: TaskVecEnv, actions: torch.Tensor) -> tuple[int, int]:
    """One env step of `compiled` (an env built with compile=True), checked piece by piece against its
    plain code from the same state; the env continues from the plain result. Returns (envs done,
    comparisons made)."""
    assert compiled.compiled
    done = 0
    for fn_c, fn_p, is_after in ((compiled._before_physics, compiled._before_physics_eager, False),
                                 (compiled._after_physics, compiled._after_physics_eager, True)):
        # the step's random numbers are drawn eagerly, once, and handed to both versions
        args = (actions, compiled._draw_uniforms()) if is_after else (actions,)
        state = _clone(compiled.state_dict())
        out_c = _clone(fn_c(*args))
        state_c = _clone(compiled.state_dict())
        compiled.load_state_dict(state)
        out_p = _clone(fn_p(*args))
        state_p = _clone(compiled.state_dict())
        assert_close_tree(out_c, out_p, "after_physics" if is_after else "before_physics")
        assert_close_tree(state_c, state_p, "state")
        if is_after:
            done = int((out_p[2] | out_p[3]).sum())
        else:
            compiled.backend.step(out_p)
    return done, 2
