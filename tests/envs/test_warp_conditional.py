"""The joined solver loop's CPU-checkable contract (envs/backends/warp_conditional.py): it turns MuJoCo
Warp's solver loop conditional only inside its block and restores warp and the model after it, also
after an error; it refuses to run outside a capture; and a machine without conditional graph nodes is
refused naming the key. Its CUDA path is checked on the GPU (tests/runtime/test_tick_cuda.py)."""

from types import SimpleNamespace

import pytest

from duorl.envs.backends.warp_conditional import JoinedSolverLoop, keep_modules_only


def _original_loop(*args, **kwargs):
    raise AssertionError("warp's own capture_while must not run inside the block")


class _StandInWarp(SimpleNamespace):
    def __init__(self, conditional: bool = True) -> None:
        super().__init__(capture_while=_original_loop, Stream=lambda device: SimpleNamespace(device=device),
                         is_conditional_graph_supported=lambda: conditional)


def _model() -> SimpleNamespace:
    return SimpleNamespace(opt=SimpleNamespace(graph_conditional=False))


def test_the_loop_is_conditional_and_joined_only_inside_the_block():
    wp, model = _StandInWarp(), _model()
    loop = JoinedSolverLoop(wp, device="cuda:0")
    with loop.active(model):
        assert model.opt.graph_conditional is True
        assert wp.capture_while == loop.capture_while
    assert model.opt.graph_conditional is False and wp.capture_while is _original_loop


def test_warp_and_the_model_are_restored_after_an_error():
    wp, model = _StandInWarp(), _model()
    loop = JoinedSolverLoop(wp, device="cuda:0")
    with pytest.raises(KeyError):
        with loop.active(model):
            raise KeyError("physics failed")
    assert model.opt.graph_conditional is False and wp.capture_while is _original_loop


def test_outside_a_capture_the_joined_loop_refuses():
    wp = _StandInWarp()
    device = SimpleNamespace(stream=SimpleNamespace(is_capturing=False))
    loop = JoinedSolverLoop(wp, device=device)
    with pytest.raises(RuntimeError, match="inside a capture only"):
        loop.capture_while(condition=None, while_body=lambda: None)


def test_a_machine_without_conditional_nodes_is_refused_naming_the_key():
    with pytest.raises(RuntimeError, match="sim.solver_early_exit=false"):
        JoinedSolverLoop(_StandInWarp(conditional=False), device="cuda:0")


def test_a_graph_warp_does_not_own_keeps_its_modules_and_loses_its_handle():
    """On warp's own Graph: without the handle its finaliser destroys nothing, and the module set
    (what keeps the captured kernels loaded) stays."""
    wp = pytest.importorskip("warp")
    graph = wp.Graph(wp.get_device("cpu"))
    graph.graph = 0x1234  # stands for a handle torch or a conditional node owns
    graph.module_execs.add("module")
    keep_modules_only(graph)
    assert graph.graph is None and graph.graph_exec is None
    assert graph.module_execs == {"module"}
    del graph  # the finaliser returns before any destroy call (a bogus handle would otherwise be freed)
