"""MuJoCo Warp's early-exit solver loop inside a CUDA graph that torch captures.

With `opt.graph_conditional` MuJoCo Warp runs its constraint solver as `wp.capture_while(nsolving,
body)`: inside a capture, a CUDA conditional while-node that repeats the solver iteration until every
world has converged (or `opt.iterations` have run), instead of always running `opt.iterations`.

Warp builds that node's body by pausing the enclosing capture (cudaStreamEndCapture) and resuming it
into the body graph and back (cudaStreamBeginCaptureToGraph). Each resume gives the stream a new
capture id, and torch routes a capture's allocations to the graph's private memory pool by the id it
saw at capture begin: after warp's first loop torch's own allocations in the tick would miss the pool,
and the capture fails.

`JoinedSolverLoop` builds the same node without touching the enclosing capture. Warp inserts the
while-node into it (`wp_cuda_graph_insert_while` adds the node and moves the stream's dependencies onto
it, nothing more), and the body is captured on a side stream straight into the node's body graph
(cuStreamBeginCaptureToGraph), followed by warp's kernel that sets the loop condition. The capture torch
opened never pauses, so its id, memory pool and generator bookkeeping stay as they are.

Only the CUDA path exists: on warp's CPU device and outside a capture the backend keeps the fixed
iteration loop (eagerly the conditional loop reads its condition back to the host every iteration).
"""

from __future__ import annotations

import contextlib
import ctypes
from typing import Any, Callable, Iterator

_CU_STREAM_CAPTURE_MODE_THREAD_LOCAL = 1  # CUstreamCaptureMode, as torch's tick capture uses
_libcuda: Any = None


def _driver() -> Any:
    """The CUDA driver library (ctypes), with the two capture calls warp does not expose for another
    stream's capture."""
    global _libcuda
    if _libcuda is None:
        lib = ctypes.CDLL("libcuda.so.1")
        # CUresult cuStreamBeginCaptureToGraph(CUstream, CUgraph, const CUgraphNode*, const CUgraphEdgeData*,
        #                                      size_t, CUstreamCaptureMode)  (CUDA 12.3+)
        lib.cuStreamBeginCaptureToGraph.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                                                    ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        lib.cuStreamBeginCaptureToGraph.restype = ctypes.c_int
        lib.cuStreamEndCapture.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)]
        lib.cuStreamEndCapture.restype = ctypes.c_int
        _libcuda = lib
    return _libcuda


def _check(result: int, what: str) -> None:
    if result != 0:
        raise RuntimeError(f"{what} failed with CUresult {result}; set sim.solver_early_exit=false to run the "
                           "solver's fixed iterations instead")


class JoinedSolverLoop:
    """Turns MuJoCo Warp's solver loop into a conditional while-node of the capture in progress on the
    current warp stream (the backend's view of torch's capture stream), building each body on a side
    stream of `device`.

    Use `with loop.active(model):` around the physics while the stream captures. The warp graphs of
    the bodies are kept: they hold the kernel modules the loop launches for as long as the enclosing
    torch graph may replay."""

    def __init__(self, wp: Any, device: Any) -> None:
        if not wp.is_conditional_graph_supported():
            raise RuntimeError("sim.solver_early_exit needs CUDA graph conditional nodes (a CUDA 12.4+ driver "
                               "and warp built with toolkit 12.4+), which this machine lacks: set "
                               "sim.solver_early_exit=false")
        self._wp = wp
        self._device = device
        self._side = wp.Stream(device)
        self.body_captures: list[Any] = []

    @contextlib.contextmanager
    def active(self, model: Any) -> Iterator[None]:
        """MuJoCo Warp's solver loop conditional (model.opt.graph_conditional) and built here, for the
        duration of the block; both restored after it."""
        wp = self._wp
        saved_loop, saved_flag = wp.capture_while, model.opt.graph_conditional
        wp.capture_while = self.capture_while
        model.opt.graph_conditional = True
        try:
            yield
        finally:
            wp.capture_while = saved_loop
            model.opt.graph_conditional = saved_flag

    def capture_while(self, condition: Any, while_body: Callable[..., None], stream: Any = None,
                      **kwargs: Any) -> None:
        """`wp.capture_while`'s contract (repeat `while_body(**kwargs)` while `condition[0]` != 0), as a
        while-node of the capture in progress on the current warp stream, which stays unpaused."""
        wp = self._wp
        from warp._src.context import runtime  # the native calls warp's own capture_while makes

        device = self._device
        main = stream if stream is not None else device.stream
        if not main.is_capturing:
            raise RuntimeError("the joined solver loop runs inside a capture only (sim.solver_early_exit)")
        arch, ptx = device.get_cuda_compile_arch(), device.get_cuda_output_format() == "ptx"
        cond_ptr = ctypes.cast(condition.ptr, ctypes.POINTER(ctypes.c_int32))
        body_graph, handle = ctypes.c_void_p(), ctypes.c_uint64()
        if not runtime.core.wp_cuda_graph_insert_while(device.context, main.cuda_stream, arch, ptx, cond_ptr,
                                                       ctypes.byref(body_graph), ctypes.byref(handle)):
            raise RuntimeError(f"inserting the solver's while-node failed: {runtime.get_error_string()}")
        side = self._side
        driver = _driver()
        _check(driver.cuStreamBeginCaptureToGraph(side.cuda_stream, body_graph, None, None, 0,
                                                  _CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
               "capturing the solver loop's body (cuStreamBeginCaptureToGraph)")
        try:
            with wp.ScopedStream(side, sync_enter=False), \
                    wp.ScopedCapture(device=device, stream=side, external=True,
                                     capture_mode=wp.CaptureMode.THREAD_LOCAL) as capture:
                while_body(**kwargs)
                if not runtime.core.wp_cuda_graph_set_condition(device.context, side.cuda_stream, arch, ptx,
                                                                cond_ptr, handle):
                    raise RuntimeError(f"setting the loop condition failed: {runtime.get_error_string()}")
        finally:
            ended = ctypes.c_void_p()
            _check(driver.cuStreamEndCapture(side.cuda_stream, ctypes.byref(ended)),
                   "ending the solver loop body's capture (cuStreamEndCapture)")
        if not runtime.core.wp_cuda_graph_check_conditional_body(body_graph):
            raise RuntimeError(f"the solver loop's body cannot be a conditional body: {runtime.get_error_string()}")
        keep_modules_only(capture.graph)
        self.body_captures.append(capture.graph)


def keep_modules_only(graph: Any) -> None:
    """A warp Graph of a capture someone else owns (torch's tick graph, a conditional node's body):
    keep the object, which holds the kernel modules the capture launched, but drop its CUDA graph
    handle, so that warp never destroys a graph it does not own when the object goes."""
    graph.graph = None
    graph.graph_exec = None
