"""sim.tick_compile on the CPU: a TaskVecEnv whose step tensor code is compiled (envs/vec_env.py) steps
like the plain one, and the G1 tasks' per-step tensor code traces into single graphs (what lets the
compiler fuse the hundreds of small ops a captured tick would otherwise replay one by one). The
CUDA-graph + compile equality on MuJoCo Warp is in tests/envs/test_cuda.py."""

import pytest
import torch
import torch._dynamo

from duorl.cli.configure import load_config
from duorl.envs.registry import make_vec_env
from tests.envs.compile_util import step_compiled_vs_plain


def _env(task: str, compile: bool, n: int = 8, max_steps: int = 25):
    cfg = load_config("sac", task, "mujoco", ["sim.nthread=1", f"task.max_episode_steps={max_steps}"])
    env = make_vec_env(cfg.task, cfg.sim, n, "cpu", seed=3, compile=compile)
    return env, env.reset()


@pytest.mark.parametrize("task,steps", [("pendulum_swingup", 60),
                                        pytest.param("g1_walk_flat", 30, marks=pytest.mark.slow)])
def test_compiled_step_matches_the_plain_step(task, steps):
    plain, obs0 = _env(task, compile=False)
    fused, obs1 = _env(task, compile=True)
    assert fused.compiled and not plain.compiled
    torch.testing.assert_close(obs0, obs1)
    g = torch.Generator().manual_seed(0)
    dones = 0
    for _ in range(steps):
        a = torch.rand(plain.num_envs, plain.spec.action_dim, generator=g) * 2 - 1
        o0, r0, te0, tr0, i0 = plain.step(a)
        o1, r1, te1, tr1, i1 = fused.step(a)
        torch.testing.assert_close(o1, o0, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(r1, r0, atol=1e-5, rtol=1e-5)
        assert torch.equal(te1, te0) and torch.equal(tr1, tr0)
        torch.testing.assert_close(i1["episode_return"], i0["episode_return"], atol=1e-4, rtol=1e-5)
        dones += int((te0 | tr0).sum())
    assert dones >= plain.num_envs  # auto-resets (time limit 25) ran inside the compiled code
    # the reset draws stayed eager, so both envs consumed the same random stream
    assert torch.equal(plain.generator.get_state(), fused.generator.get_state())


@pytest.mark.slow
@pytest.mark.parametrize("task", ["g1_motion_tracking"])
def test_compiled_step_matches_the_plain_step_from_the_same_state(task):
    """Each step's compiled pieces against the plain ones from one snapshot (tests/envs/compile_util.py):
    the check that does not depend on how contacts amplify rounding along a trajectory."""
    env, _ = _env(task, compile=True, max_steps=5)
    g = torch.Generator().manual_seed(0)
    done = 0
    for _ in range(12):
        a = torch.rand(env.num_envs, env.spec.action_dim, generator=g) * 2 - 1
        done += step_compiled_vs_plain(env, a)[0]
    assert done >= 2 * env.num_envs  # two rounds of auto-resets were compared too


@pytest.mark.slow
@pytest.mark.parametrize("task", ["g1_walk_flat", "g1_motion_tracking"])
def test_g1_step_tensor_code_traces_without_graph_breaks(task):
    env, _ = _env(task, compile=False, n=4)
    t, sim = env.task, env.backend
    fns = [("observe", t.observe), ("metrics", getattr(t, "metrics", None))]
    if getattr(t, "evaluate", None) is not None:
        fns.append(("evaluate", t.evaluate))
    else:
        fns += [("reward", t.reward), ("terminated", t.terminated)]
    for name, fn in fns:
        if fn is None:
            continue
        with torch.no_grad():
            e = torch._dynamo.explain(fn)(sim)
        assert e.graph_count == 1 and e.graph_break_count == 0, (name, [str(r.reason)[:200] for r in e.break_reasons])
        assert e.op_count > 10, name  # the work is inside the one graph


@pytest.mark.parametrize("task", ["pendulum_swingup", *(pytest.param(t, marks=pytest.mark.slow)
                                                         for t in ("g1_walk_flat", "g1_motion_tracking"))])
def test_the_whole_step_tensor_code_is_one_graph(task):
    """Both compiled pieces of a step, the one after the physics with its advance() and resets included,
    trace as single graphs: the step's random numbers come in as one tensor (envs.base.Uniforms), so no
    torch.rand(generator=...) splits them (it did: 32 compiled regions per G1 tick)."""
    env, _ = _env(task, compile=False, n=4)
    actions = torch.zeros(env.num_envs, env.spec.action_dim)
    pieces = [("before physics", env._before_physics_eager, (actions, actions)),
              ("after physics", env._after_physics_eager, (actions, env._draw_uniforms()))]
    for name, fn, args in pieces:
        with torch.no_grad():
            e = torch._dynamo.explain(fn)(*args)
        assert e.graph_count == 1 and e.graph_break_count == 0, (name, [str(r.reason)[:200] for r in e.break_reasons])
