"""Graphs of the staged mjlab step's stages: a stretch of mjlab's code recorded once, then only its device
work replayed (envs/mjlab/staged_step.py says which stretches).

`CudaStageGraph` is a `torch.cuda.CUDAGraph` with MuJoCo Warp inside it, as duorl's own backend joins one
(envs/backends/mjwarp.py): warp is told about torch's capture (`ScopedCapture(external=True)`) and launches
on torch's capture stream, mjlab's own warp graphs are set aside for the capture (`sim.use_cuda_graph`:
their kernels are launched one by one into torch's graph instead of as a graph launch inside it), the
solver runs its fixed iteration loop (its conditional while-loop would pause torch's capture; converged
worlds skip the remaining iterations inside the kernels, so the worlds compute the same), and mjlab's
TorchArray writes go to the current stream (mjlab sends them to warp's stream, which is not the one
torch captures), and a Python scalar written into an index set is made on the device (torch would copy
it from the host). The default CUDA generator is registered by torch itself: a replay draws what the
eager stretch would.

`CpuReplayGraph` is the same contract on the CPU, where no CUDA graph exists: it runs the stretch once
while recording every torch op (a dispatch mode) and every warp launch and memory operation, in order,
then replays only those, on the same tensors and arrays, with the Python of the stretch skipped. A
stretch that depends on Python state (a counter, a rebound attribute another stretch reads, a lazily
filled cache) replays differently from its eager run, as a CUDA graph would, so the CPU equality tests
catch it; an op that reads a device value on the host inside a stretch raises `StageCaptureError` (it
would fail a CUDA capture).
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator

import numpy as np
import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from duorl.gpu.graphs import no_gc


class StageCaptureError(RuntimeError):
    """A stretch of mjlab's step cannot be captured; the message names the op or the cause."""


# aten ops that read a device value on the host (or size their output by device values): a CUDA capture
# fails on them, so the CPU replay refuses them too
HOST_READS = frozenset({"_local_scalar_dense", "nonzero", "is_nonzero", "masked_select", "unique", "_unique",
                        "_unique2", "unique_dim", "unique_consecutive", "argwhere", "repeat_interleave",
                        "equal", "allclose", "item"})
_INDEX_OPS = frozenset({"index", "index_put", "index_put_", "_index_put_impl_"})
# ops with no device work of their own (an uninitialised allocation): a replay skips them
_NO_WORK = frozenset({"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided"})


def host_read_of(func: Any, args: tuple, kwargs: dict) -> str | None:
    """The name of the host read `func(*args, **kwargs)` makes, or None."""
    base = func._schema.name.split("::")[-1]
    if base in HOST_READS:
        return base
    if base in _INDEX_OPS:
        indices = args[1] if len(args) > 1 else kwargs.get("indices", ())
        if any(isinstance(i, torch.Tensor) and i.dtype in (torch.bool, torch.uint8) for i in (indices or ())):
            return f"boolean-mask {base}"
    return None


def _caller() -> str:
    """The innermost mjlab or duorl source line on the stack (for error messages)."""
    import os
    import traceback

    for frame in reversed(traceback.extract_stack()[:-2]):
        for root in ("mjlab" + os.sep, "duorl" + os.sep):
            at = frame.filename.rfind(os.sep + root)
            if at >= 0 and "stage_graphs.py" not in frame.filename:
                return f"{frame.filename[at + 1:]}:{frame.lineno} ({frame.name})"
    return "?"


def _device_array(data: Any) -> bool:
    """Whether `data` is an array in device memory (a Warp array: `wp.to_torch` wraps it by as_tensor,
    as mjlab's ray-cast sensor does every sense), which a tensor aliases without a copy."""
    return hasattr(data, "__cuda_array_interface__")


def _raised_at(error: BaseException) -> str:
    """The innermost mjlab or duorl source line of `error`'s traceback (where a capture failed)."""
    import os
    import traceback

    for frame in reversed(traceback.extract_tb(error.__traceback__)):
        for root in ("mjlab" + os.sep, "duorl" + os.sep):
            at = frame.filename.rfind(os.sep + root)
            if at >= 0 and "stage_graphs.py" not in frame.filename:
                return f" at {frame.filename[at + 1:]}:{frame.lineno} ({frame.name})"
    return ""


_HOST_COPIES = (torch.Tensor.cpu, torch.Tensor.numpy, torch.Tensor.tolist, torch.Tensor.item)


def _plain_repr(data: Any) -> str | None:
    """repr of data made only of Python numbers and bools in lists and tuples (None for anything else)."""
    def plain(x: Any) -> bool:
        if isinstance(x, (list, tuple)):
            return all(plain(v) for v in x)
        return isinstance(x, (bool, int, float))
    return repr(data) if plain(data) else None


class CaptureGuard(TorchFunctionMode):
    """The Python of a graph stage, as a capture sees it.

    mjlab indexes tensors with Python lists of ids (`joint_pos[:, asset_cfg.joint_ids]`) and makes small
    constants from Python data every call (`torch.tensor(ranges, device=...)`); on CUDA each is a copy from
    the host (a sync, and a capture error). The guard keeps what the stage's eager run before its capture
    made, in `index_cache`: for a list index, a device tensor of the same ids (a boolean list becomes the
    positions of its True entries, which select the same elements): the same gather, no copy; for a
    constant, the tensor, of which the capture takes a device copy. One first met inside a capture, or a
    copy to the host there, raises StageCaptureError."""

    def __init__(self, name: str, index_cache: dict[Any, torch.Tensor], capturing: bool) -> None:
        super().__init__()
        self.name = name
        self.cache = index_cache
        self.capturing = capturing

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        if func in (torch.Tensor.__getitem__, torch.Tensor.__setitem__) and len(args) > 1:
            index = self._device_index(args[1], args[0].device)
            if index is not args[1]:
                args = (args[0], index, *args[2:])
        elif self.capturing and func in _HOST_COPIES:
            raise StageCaptureError(f"stage '{self.name}' copies a tensor to the host ({func.__name__}) at {_caller()}")
        elif func in (torch.tensor, torch.as_tensor):
            return self._constant(func, args, kwargs)
        return func(*args, **kwargs)

    def _constant(self, func: Any, args: tuple, kwargs: dict) -> Any:
        """A tensor made from Python data (mjlab builds constants such as an event's ranges this way, each
        call): made on the eager run and kept; inside the capture a device copy of the kept one."""
        data = args[0] if args else kwargs.get("data")
        if isinstance(data, (torch.Tensor, np.ndarray)) or _device_array(data):
            return func(*args, **kwargs)  # no host data: as_tensor of numpy shares memory, of a device array too
        key = ("constant", func.__name__, _plain_repr(data), repr(sorted(kwargs.items())), repr(args[1:]))
        if key[2] is None:
            if self.capturing:
                raise StageCaptureError(f"stage '{self.name}' makes a tensor from host data ({func.__name__}) at "
                                        f"{_caller()}: a host-to-device copy on CUDA")
            return func(*args, **kwargs)
        kept = self.cache.get(key)
        if kept is None:
            if self.capturing:
                raise StageCaptureError(f"stage '{self.name}' makes a tensor from host data first met in its capture "
                                        f"({func.__name__}) at {_caller()}: a host-to-device copy on CUDA")
            out = func(*args, **kwargs)
            self.cache[key] = out.clone()
            return out
        return kept.clone()

    def _device_index(self, index: Any, device: torch.device) -> Any:
        parts = index if isinstance(index, tuple) else (index,)
        if not any(isinstance(p, (list, range, np.ndarray)) for p in parts):
            return index
        out = []
        for p in parts:
            if isinstance(p, (list, range, np.ndarray)):
                ids = np.asarray(p)
                if ids.ndim != 1 or not (ids.dtype == bool or np.issubdtype(ids.dtype, np.integer) or ids.size == 0):
                    raise StageCaptureError(f"stage '{self.name}' indexes a tensor with {type(p).__name__} {ids.shape} "
                                            f"at {_caller()}: only flat lists of ids or flags have a device stand-in")
                if ids.dtype == bool:
                    ids = np.flatnonzero(ids)
                ids = ids.astype(np.int64)
                key = (str(device), ids.tobytes())
                t = self.cache.get(key)
                if t is None:
                    if self.capturing:
                        raise StageCaptureError(f"stage '{self.name}' indexes with a list first met in its capture at "
                                                f"{_caller()}: its device copy would be a host-to-device copy")
                    t = self.cache[key] = torch.from_numpy(ids).to(device)
                p = t
            out.append(p)
        return tuple(out) if isinstance(index, tuple) else out[0]


class _Recorder(TorchDispatchMode):
    """Runs every torch op and appends (op, args, kwargs, result) to `trace`."""

    def __init__(self, trace: list[tuple[Any, ...]], name: str) -> None:
        super().__init__()
        self.trace = trace
        self.name = name

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        read = host_read_of(func, args, kwargs)
        if read is not None:
            raise StageCaptureError(f"stage '{self.name}' reads a device value on the host ({read}) at {_caller()}")
        out = func(*args, **kwargs)
        if not func.is_view and func._schema.name.split("::")[-1] not in _NO_WORK:
            self.trace.append(("torch", func, args, kwargs, out))
        return out


@contextlib.contextmanager
def _record_warp(trace: list[tuple[Any, ...]], name: str) -> Iterator[None]:
    """Route warp's launches and memory operations through `trace` (nested calls run unrecorded)."""
    import warp as wp
    import warp.utils as wpu
    from warp._src.types import array

    depth = [0]

    def recorded(kind: str, inner: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            if depth[0] == 0:
                trace.append(("warp", inner, args, kwargs, None))
            depth[0] += 1
            try:
                return inner(*args, **kwargs)
            finally:
                depth[0] -= 1
        call.__name__ = kind
        return call

    def refused(what: str) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            raise StageCaptureError(f"stage '{name}' calls warp's {what} (a host read or sync) at {_caller()}")
        return call

    patches: list[tuple[Any, str, Any]] = [
        (wp, "launch", recorded("launch", wp.launch)),
        (wp, "launch_tiled", recorded("launch_tiled", wp.launch_tiled)),
        (wp, "copy", recorded("copy", wp.copy)),
        (wpu, "array_scan", recorded("array_scan", wpu.array_scan)),
        (wpu, "radix_sort_pairs", recorded("radix_sort_pairs", wpu.radix_sort_pairs)),
        (wpu, "segmented_sort_pairs", recorded("segmented_sort_pairs", wpu.segmented_sort_pairs)),
        (array, "zero_", recorded("zero_", array.zero_)),
        (array, "fill_", recorded("fill_", array.fill_)),
        (array, "numpy", refused("array.numpy()")),
        (wp, "synchronize", refused("synchronize()")),
    ]
    saved = [(obj, attr, getattr(obj, attr)) for obj, attr, _ in patches]
    for obj, attr, new in patches:
        setattr(obj, attr, new)
    try:
        yield
    finally:
        for obj, attr, old in saved:
            setattr(obj, attr, old)


def _copy_into(recorded: Any, fresh: Any) -> None:
    if isinstance(recorded, torch.Tensor):
        if fresh is not recorded:
            recorded.copy_(fresh)
    elif isinstance(recorded, (tuple, list)):
        for r, f in zip(recorded, fresh):
            _copy_into(r, f)


class CpuReplayGraph:
    """A CPU stand-in for a CUDA graph of `fn` (see the module docstring)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._trace: list[tuple[Any, ...]] = []
        self.captured = False

    def capture_and_run(self, fn: Callable[[], None], sim: Any, index_cache: dict[Any, torch.Tensor]) -> None:
        """Run `fn` once, recording its device work (with mjlab's sim set up as a capture sets it)."""
        trace: list[tuple[Any, ...]] = []
        with capture_settings(sim), _record_warp(trace, self.name), CaptureGuard(self.name, index_cache, True), \
                _Recorder(trace, self.name):
            fn()
        self._trace = trace
        self.captured = True

    def replay(self) -> None:
        for kind, func, args, kwargs, out in self._trace:
            result = func(*args, **kwargs)
            if kind == "torch":
                _copy_into(out, result)

    @property
    def ops(self) -> int:
        return len(self._trace)


@contextlib.contextmanager
def _torch_array_writes_on_current_stream() -> Iterator[None]:
    """mjlab's TorchArray writes (`data.ctrl[...] = x`) go to warp's stream; inside torch's capture they must
    go to the capture stream, the current one."""
    from mjlab.sim.sim_data import TorchArray

    saved = TorchArray.__setitem__

    def setitem(self: Any, idx: Any, value: Any) -> None:
        self._tensor[idx] = value

    TorchArray.__setitem__ = setitem
    try:
        yield
    finally:
        TorchArray.__setitem__ = saved


def indexes_by_mask(idx: Any) -> bool:
    """Whether an index (one item or a tuple of them) holds a boolean (or uint8) mask tensor."""
    items = idx if isinstance(idx, tuple) else (idx,)
    return any(isinstance(i, torch.Tensor) and i.dtype in (torch.bool, torch.uint8) for i in items)


@contextlib.contextmanager
def scalar_writes_from_the_device() -> Iterator[None]:
    """mjlab writes Python scalars into index sets (`mask[env_ids] = True`, `buf[env_ids] = 0`): torch makes
    the scalar a host tensor and copies it to the GPU, which a capture refuses (the copy is not pinned) and
    which, run eagerly, waits for the stream. In this block (a capture, the staged step's eager stages on
    CUDA) a scalar written into a CUDA tensor is made on the device first (a fill of the tensor's dtype:
    the same value index_put writes). Not under a boolean mask (`x[mask] = 1.0`): there torch fills through
    the mask with the host scalar as a kernel argument (no copy, no sync), and a device value would turn it
    into an index_put that finds the mask's indices with a sync."""
    base = torch._C.TensorBase.__setitem__
    saved = torch.Tensor.__setitem__

    def setitem(self: torch.Tensor, idx: Any, value: Any) -> None:
        if isinstance(value, (bool, int, float)) and self.is_cuda and not indexes_by_mask(idx):
            value = torch.full((), value, dtype=self.dtype, device=self.device)
        base(self, idx, value)

    torch.Tensor.__setitem__ = setitem  # type: ignore[method-assign]
    try:
        yield
    finally:
        torch.Tensor.__setitem__ = saved  # type: ignore[method-assign]


@contextlib.contextmanager
def capture_settings(sim: Any, solver_loop: Any = None) -> Iterator[None]:
    """mjlab's Simulation as a capture needs it: its warp graphs set aside (kernels launched one by one), and
    MuJoCo Warp's solver loop either a while-node joined to the capture (`solver_loop`, a
    warp_conditional.JoinedSolverLoop: it stops once every world has converged, as mjlab's own graphs do)
    or its fixed iteration loop (model.opt.graph_conditional off: the CPU)."""
    opt = sim.wp_model.opt
    saved = (sim.use_cuda_graph, opt.graph_conditional)
    sim.use_cuda_graph = False
    loop = solver_loop.active(sim.wp_model) if solver_loop is not None else contextlib.nullcontext()
    if solver_loop is None:
        opt.graph_conditional = False
    try:
        with _torch_array_writes_on_current_stream(), scalar_writes_from_the_device(), loop:
            yield
    finally:
        sim.use_cuda_graph, opt.graph_conditional = saved


class CudaStageGraph:
    """`fn` captured as one torch.cuda.CUDAGraph with MuJoCo Warp joined (see the module docstring).

    `capture_and_run` captures `fn` on `stream` and replays the capture once (capture records without
    running). The caller has run `fn` eagerly on that stream before (run_eagerly_on: warp loads its kernel
    modules, cuBLAS makes its workspace, lazy buffers appear, CaptureGuard keeps the device stand-ins)."""

    def __init__(self, name: str, device: torch.device, stream: torch.cuda.Stream, solver_loop: Any = None) -> None:
        self.name = name
        self.device = device
        self.stream = stream
        self.solver_loop = solver_loop
        self.graph: torch.cuda.CUDAGraph | None = None
        self._warp_graphs: list[Any] = []

    @property
    def captured(self) -> bool:
        return self.graph is not None

    def capture_and_run(self, fn: Callable[[], None], sim: Any, index_cache: dict[Any, torch.Tensor]) -> None:
        import warp as wp

        from duorl.envs.backends.warp_conditional import keep_modules_only

        current = torch.cuda.current_stream(self.device)
        stream = self.stream
        wdev = sim.wp_device
        wstream = wp.stream_from_torch(stream)
        graph = torch.cuda.CUDAGraph()
        stream.wait_stream(current)
        try:
            with torch.cuda.stream(stream), capture_settings(sim, self.solver_loop), wp.ScopedDevice(wdev), \
                    wp.ScopedStream(wstream, sync_enter=False):
                with no_gc(), torch.cuda.graph(graph, stream=stream, capture_error_mode="thread_local"):
                    with wp.ScopedCapture(device=wdev, stream=wstream, external=True,
                                          capture_mode=wp.CaptureMode.THREAD_LOCAL) as capture, \
                            CaptureGuard(self.name, index_cache, True):
                        fn()
        except Exception as e:  # noqa: BLE001 - re-raised with the stage named
            current.wait_stream(stream)
            _end_generator_capture()
            if isinstance(e, StageCaptureError):
                raise
            raise StageCaptureError(f"capturing stage '{self.name}' as a CUDA graph failed: "
                                    f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"
                                    f"{_raised_at(e)}") from e
        current.wait_stream(stream)
        keep_modules_only(capture.graph)  # torch owns the graph; warp must not destroy it
        self._warp_graphs.append(capture.graph)
        self.graph = graph
        graph.replay()

    def replay(self) -> None:
        assert self.graph is not None
        self.graph.replay()

    def release(self) -> None:
        self.graph = None
        self._warp_graphs.clear()


def _end_generator_capture() -> None:
    """Best effort after a failed capture: the default CUDA generator it registered can be left in capture
    mode (every later draw would fail); capturing an empty graph ends that mode cleanly."""
    try:
        empty = torch.cuda.CUDAGraph()
        with torch.cuda.graph(empty):
            pass
    except Exception:  # noqa: BLE001 - the capture's own error is what the caller reports
        pass


def run_eagerly_on(stream: torch.cuda.Stream | None, fn: Callable[[], None],
                   guard: CaptureGuard | None = None) -> None:
    """`fn` eagerly; on CUDA on `stream`, forked from and joined back to the current stream (the warm-up
    run before a capture: on the stream the capture will use). `guard`: a CaptureGuard to run it under
    (a graph stage's warm-up makes its device index tensors)."""
    ctx = guard if guard is not None else contextlib.nullcontext()
    if stream is None:
        with ctx:
            fn()
        return
    import warp as wp

    current = torch.cuda.current_stream(stream.device)
    stream.wait_stream(current)
    with torch.cuda.stream(stream), _torch_array_writes_on_current_stream(), \
            wp.ScopedStream(wp.stream_from_torch(stream), sync_enter=False), ctx:
        fn()
    current.wait_stream(stream)


def _mjlab_objects(root: Any, limit: int = 20000) -> list[Any]:
    """mjlab's objects reachable from `root` through attributes, dicts and lists (not its sim data proxies,
    whose arrays never move, nor anything outside mjlab)."""
    from mjlab.sim.sim_data import TorchArray, WarpBridge

    seen: set[int] = set()
    out: list[Any] = []
    stack = [root]
    while stack and len(out) < limit:
        obj = stack.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        if isinstance(obj, dict):
            stack.extend(obj.values())
            continue
        if isinstance(obj, (list, tuple)):
            stack.extend(obj)
            continue
        module = type(obj).__module__ or ""
        if not module.startswith("mjlab.") or isinstance(obj, (WarpBridge, TorchArray)):
            continue
        attrs = getattr(obj, "__dict__", None)
        if attrs is None:
            continue
        out.append(obj)
        stack.extend(v for v in attrs.values() if not isinstance(v, (torch.Tensor, str, int, float, bool, type(None))))
    return out


def _is_tensor_dict(value: Any) -> bool:
    return isinstance(value, dict) and bool(value) and all(isinstance(v, torch.Tensor) for v in value.values())


def _same_memory(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.data_ptr() == b.data_ptr() and a.stride() == b.stride() and a.shape == b.shape


def _compatible(old: torch.Tensor, new: Any) -> bool:
    return (isinstance(new, torch.Tensor) and new.shape == old.shape and new.dtype == old.dtype
            and new.device == old.device)


class RebindWatch:
    """Tensor attributes of mjlab's objects (and the tensors of their dict attributes) as they stand before a
    stage runs.

    mjlab often rebinds an attribute (or a dict entry) to a new tensor instead of writing into the one it
    held (`self.peak_heights = torch.where(...)`, a sensor's hit positions, `env.reset_buf`, a contact
    sensor's `_history_state["force"] = ....roll(1)`). A graph reads the tensors that were bound when it was
    captured, so a rebinding stage would leave later graphs (and the next replay of its own) reading a
    stale tensor. `restore_identity()`, run at the end of the stage (inside the capture: the copies are
    part of the graph), copies each new value into the tensor bound before and binds that one again;
    `undo()` rebinds the old objects without copying (after a failed capture). `rebound` names what was
    restored, `unhandled` what could not be (a new shape, None, another type)."""

    def __init__(self, root: Any) -> None:
        # (container, key, value, label): container is an object (key: attribute name) or a dict
        self._entries: list[tuple[Any, Any, Any, str]] = []
        for obj in _mjlab_objects(root):
            for attr, value in vars(obj).items():
                label = f"{type(obj).__name__}.{attr}"
                if isinstance(value, torch.Tensor) or _is_tensor_dict(value):
                    self._entries.append((obj, attr, value, label))
                if _is_tensor_dict(value):
                    self._entries += [(value, k, v, f"{label}[{k!r}]") for k, v in value.items()]
        self.rebound: list[str] = []
        self.unhandled: list[str] = []

    @staticmethod
    def _get(container: Any, key: Any) -> Any:
        return container.get(key) if isinstance(container, dict) else vars(container).get(key)

    @staticmethod
    def _set(container: Any, key: Any, value: Any) -> None:
        if isinstance(container, dict):
            container[key] = value
        else:
            setattr(container, key, value)

    def restore_identity(self) -> None:
        for container, key, old, label in self._entries:
            new = self._get(container, key)
            if new is old:
                continue
            if isinstance(old, torch.Tensor) and _compatible(old, new):
                if not _same_memory(old, new):
                    try:
                        old.copy_(new)
                    except RuntimeError:
                        self.unhandled.append(label)
                        continue
                self._set(container, key, old)
                self.rebound.append(label)
            elif (isinstance(old, dict) and isinstance(new, dict) and old.keys() == new.keys()
                  and all(_compatible(old[k], new[k]) for k in old)):
                for k in old:
                    if not _same_memory(old[k], new[k]):
                        old[k].copy_(new[k])
                self._set(container, key, old)
                self.rebound.append(label)
            else:
                self.unhandled.append(label)

    def undo(self) -> None:
        for container, key, old, _ in self._entries:
            if self._get(container, key) is not old:
                self._set(container, key, old)
