"""Whole-cycle CUDA graphs: one learner iteration captured as one `torch.cuda.CUDAGraph` (docs/design.md §5).

`WholeCycleGraph(learner, extra_generators=[sampler.generator]).train_iteration(sample, n)` is a
drop-in for `learner.train_iteration(sample, n)`. Per distinct cycle (the learner's `cycle_key`:
the Python control flow an iteration takes, e.g. which updates include the actor) it

1. checks what capture needs (CUDA, capturable optimizers, gradients allocated) and materialises
   optimizer state, so no tensor is first created inside the capture;
2. runs `warmup_iterations` eager iterations on a side stream (cuBLAS handles, autocast, lazy init),
   then restores every tensor, RNG and host counter to what it was, in place: addresses never
   change, so graphs captured earlier stay valid;
3. captures one iteration (registering every RNG stream it draws from) and replays it; the capture
   itself advanced only host-side counters, which are put back, and every replay advances them as an
   eager iteration would.

Static inputs (the replay window, normaliser statistics, learning-rate tensors) are refilled in place
between replays by their owners. A change of hooks (module, tensor or optimizer hooks), of the
gradient synchronizer or what it launches, scalar optimizer hyper-parameters, tensor addresses (e.g.
an optimizer's load_state_dict) or the learner's `state_generation` (bumped by a checkpoint load)
releases every graph: the next iteration recaptures. Capture failures raise `GraphCaptureError` naming the likely cause and the fix.

Any side stream used inside an iteration must fork from and join the capture stream: use
`forked_stream(stream)`.
"""

from __future__ import annotations

import contextlib
import gc
import time
from dataclasses import dataclass
from typing import Any, Callable, Hashable, Iterator, Protocol, Sequence

import torch
from torch import nn

from duorl.gpu import torch_internals

__all__ = [
    "GraphCapturable",
    "GraphCaptureError",
    "WholeCycleGraph",
    "forked_stream",
    "graph_fingerprint",
    "materialize_optimizer_state",
    "no_gc",
]

_OFF_FIX = "or set algo.algo_params.whole_cycle_cuda_graph=false to train eagerly"


class GraphCaptureError(RuntimeError):
    """The whole-cycle graph cannot be (re)captured; the message names the cause and the fix."""


class GraphCapturable(Protocol):
    """What a learner offers the graph machinery on top of `duorl.algos.base.Learner`."""

    # bumped by load_state_dict (a checkpoint): captured graphs are stale
    state_generation: int
    # sees every optimizer group between backward and step (algos.base.GradientSynchronizer; under data
    # parallel its all-reduces are captured with the cycle)
    grad_sync: Any

    def train_iteration(self, sample: Callable[[int], Any], num_updates: int) -> dict[str, torch.Tensor]: ...

    def state_dict(self) -> dict: ...

    def graph_generators(self) -> Sequence[torch.Generator]:
        """Every torch.Generator an iteration draws from."""

    def graph_optimizers(self) -> Sequence[torch.optim.Optimizer]: ...

    def graph_modules(self) -> Sequence[nn.Module]:
        """Every module an iteration runs or updates (their hooks, parameters and buffers)."""

    def cycle_key(self, num_updates: int) -> Hashable:
        """Equal keys: the next train_iteration(num_updates) launches the same kernels."""

    def host_state(self) -> Any:
        """Host-side (Python) state an iteration changes, e.g. the update counter."""

    def load_host_state(self, state: Any) -> None: ...

    def advance_host_state(self, num_updates: int) -> None:
        """Change the host-side state exactly as train_iteration(num_updates) would."""


@contextlib.contextmanager
def no_gc() -> Iterator[None]:
    """The garbage collector off for the block: a collection during a capture could run destructors (warp
    graphs, tensors) whose frees would be recorded into the new graph."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


@contextlib.contextmanager
def forked_stream(stream: torch.cuda.Stream) -> Iterator[torch.cuda.Stream]:
    """Run the block on `stream`, forked from the current stream and joined back afterwards.

    Inside a capture this puts the side stream's work into the graph (a stream that never waits on
    the capture stream is outside it, and its first allocation fails the capture); eagerly it orders
    the side work after what precedes it and before what follows.
    """
    current = torch.cuda.current_stream(stream.device)
    stream.wait_stream(current)
    with torch.cuda.stream(stream):
        yield stream
    current.wait_stream(stream)


def materialize_optimizer_state(optimizer: torch.optim.Optimizer) -> None:
    """Create Adam/AdamW state as the first step would, so it exists before any capture.

    The values equal a fresh optimizer's (zero moments, step 0, same dtypes and devices), so a run
    with materialised state is bitwise identical to one that initialises lazily. State created inside
    a capture would be re-zeroed by every replay.
    """
    if not isinstance(optimizer, (torch.optim.Adam, torch.optim.AdamW)):
        if any(len(optimizer.state.get(p, {})) == 0 for g in optimizer.param_groups for p in g["params"]):
            raise GraphCaptureError(
                f"{type(optimizer).__name__} has no state before its first step and duorl cannot create it: "
                f"take one eager optimizer step before capturing, use Adam/AdamW, {_OFF_FIX}"
            )
        return
    for group in optimizer.param_groups:
        for p in group["params"]:
            state = optimizer.state[p]
            if len(state) > 0:
                continue
            on_device = group.get("capturable", False) or group.get("fused", False)
            # torch.optim.adam._init_group: a float32 step on the parameter's device when fused or
            # capturable, else a CPU scalar
            state["step"] = (
                torch.zeros((), dtype=torch.float32, device=p.device) if on_device else torch.tensor(0.0, dtype=torch.float32)
            )
            state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
            state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
            if group.get("amsgrad", False):
                state["max_exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)


def _tensors_in(obj: Any, out: dict[int, torch.Tensor]) -> None:
    if isinstance(obj, torch.Tensor):
        out.setdefault(id(obj), obj)
    elif isinstance(obj, dict):
        for v in obj.values():
            _tensors_in(v, out)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            _tensors_in(v, out)


class _Snapshot:
    """Values of every tensor an iteration may change, RNG states and host state, restored in place."""

    def __init__(self, learner: GraphCapturable, generators: Sequence[torch.Generator]) -> None:
        live: dict[int, torch.Tensor] = {}
        for m in learner.graph_modules():
            for t in list(m.parameters()) + list(m.buffers()):
                live.setdefault(id(t), t)
                if isinstance(t, nn.Parameter) and t.grad is not None:
                    live.setdefault(id(t.grad), t.grad)
        for opt in learner.graph_optimizers():
            _tensors_in(opt.state, live)
            for g in opt.param_groups:
                _tensors_in({k: v for k, v in g.items() if k != "params"}, live)
                for p in g["params"]:
                    live.setdefault(id(p), p)
                    if p.grad is not None:
                        live.setdefault(id(p.grad), p.grad)
        # whatever else the learner keeps (its state_dict aliases live tensors: running statistics,
        # schedule counters, metric buffers); copies it returns are harmless to "restore"
        _tensors_in(learner.state_dict(), live)
        self.tensors = [(t, t.detach().clone()) for t in live.values()]
        self.generators = [(g, g.get_state()) for g in generators]
        self.host = learner.host_state()
        self.learner = learner

    @torch.no_grad()
    def restore(self) -> None:
        for live, saved in self.tensors:
            live.copy_(saved)
        for g, state in self.generators:
            g.set_state(state)
        self.learner.load_host_state(self.host)


def _keys(hooks: Any) -> tuple:
    return tuple(hooks.keys()) if hooks else ()


def _scalar(v: Any) -> Any:
    if isinstance(v, torch.Tensor):
        return ("tensor", v.data_ptr(), v.is_cuda)  # is_cuda: .device builds a new object per call
    if isinstance(v, (int, float, bool, str, type(None))):
        return v
    if isinstance(v, (tuple, list)):
        return tuple(_scalar(x) for x in v)
    return ("obj", id(v))


def _callable_id(fn: Callable) -> tuple:
    # bound methods are new objects at every attribute access: key on the object and the function
    owner = getattr(fn, "__self__", None)
    func = getattr(fn, "__func__", None)
    return (id(owner), id(func)) if owner is not None and func is not None else (id(fn),)


@dataclass
class _Captured:
    graph: torch.cuda.CUDAGraph
    outputs: dict[str, torch.Tensor]
    sample: Callable  # keeps the sample function (and so its id) alive while the graph uses it


class WholeCycleGraph:
    """Replays captured learner iterations; see the module docstring for the contract."""

    def __init__(
        self,
        learner: GraphCapturable,
        extra_generators: Sequence[torch.Generator] = (),
        warmup_iterations: int = 3,
        agree: Callable[[str | None], None] | None = None,
        inject_capture_failure: bool = False,
    ) -> None:
        if not torch.cuda.is_available():
            raise GraphCaptureError(f"the whole-cycle CUDA graph needs a CUDA device and none is visible: train on a GPU, {_OFF_FIX}")
        for name in ("graph_generators", "graph_optimizers", "graph_modules", "cycle_key", "host_state",
                     "load_host_state", "advance_host_state"):
            if not callable(getattr(learner, name, None)):
                raise GraphCaptureError(f"{type(learner).__name__} does not support whole-cycle graphs (no {name}()): {_OFF_FIX}")
        if warmup_iterations < 1:
            raise ValueError("warmup_iterations must be >= 1")
        self.learner = learner
        self.extra_generators = list(extra_generators)
        self.warmup_iterations = warmup_iterations
        # data parallel: called by every rank before and after each capture with this rank's problem
        # (None: fine); raises GraphCaptureError on every rank when any rank has one, so that no rank
        # replays (or falls back to eager) alone
        self.agree = agree
        self.inject_capture_failure = inject_capture_failure  # tests: this rank's capture fails
        self._graphs: dict[Hashable, _Captured] = {}
        self._fingerprint: tuple | None = None
        self.captures = 0
        self.replays = 0
        self.capture_s: list[float] = []
        self.last_invalidation: str | None = None
        self._cycles: set[Hashable] = set()  # distinct cycle keys ever captured

    # ---------------------------------------------------------------------------------- public

    @property
    def active(self) -> bool:
        """A captured graph ran at least once."""
        return self.replays > 0

    def state(self) -> dict[str, Any]:
        """For the run manifest."""
        return {
            "active": self.active,
            "captures": self.captures,
            "replays": self.replays,
            "capture_s": [round(s, 3) for s in self.capture_s],
            "cycles": len(self._cycles),
        }

    def train_iteration(self, sample: Callable[[int], Any], num_updates: int) -> dict[str, torch.Tensor]:
        """One learner iteration by graph replay (capturing first where needed).

        The returned tensors are the graph's static outputs: the next replay overwrites them.
        """
        entry, _ = self._entry(sample, num_updates)
        entry.graph.replay()
        self.learner.advance_host_state(num_updates)
        self.replays += 1
        return dict(entry.outputs)

    def prepare(self, sample: Callable[[int], Any], num_updates: int) -> bool:
        """Capture the cycle that the next train_iteration(sample, num_updates) replays, without running it:
        its compile, warm-up and capture happen now, and the learner's state is left as it was (the duo
        calls it while its collector starts, runtime/duo.py). False when that cycle was captured already."""
        return self._entry(sample, num_updates)[1]

    def _entry(self, sample: Callable[[int], Any], num_updates: int) -> tuple[_Captured, bool]:
        """The captured graph of this cycle (captured now where needed, and then True)."""
        if self._graphs and graph_fingerprint(self.learner) != self._fingerprint:
            self.invalidate("hooks, the gradient synchronizer, optimizer settings or tensor addresses changed")
        key = (self.learner.cycle_key(num_updates), num_updates, _callable_id(sample))
        entry = self._graphs.get(key)
        if entry is not None:
            return entry, False
        entry = self._capture(sample, num_updates)
        self._graphs[key] = entry
        self._cycles.add(key[:2])
        self._fingerprint = graph_fingerprint(self.learner)
        return entry, True

    def launch_unchecked(self) -> None:
        """Replay a captured graph with neither the staleness check nor the host counters' advance: what
        the launch alone costs the host, for benchmarks. The learner's host counters then lag its
        device state, so this learner must not train on afterwards."""
        if not self._graphs:
            raise RuntimeError("launch_unchecked: nothing is captured yet; run train_iteration first")
        next(iter(self._graphs.values())).graph.replay()

    def invalidate(self, reason: str = "invalidated") -> None:
        """Release every graph; the next iteration recaptures."""
        self.last_invalidation = reason
        self.release()

    def release(self) -> None:
        if self._graphs:
            torch.cuda.synchronize()  # no replay may still read memory the pools give back
        self._graphs.clear()
        self._fingerprint = None

    # ---------------------------------------------------------------------------------- capture

    def _generators(self) -> list[torch.Generator]:
        seen: dict[int, torch.Generator] = {}
        for g in list(self.learner.graph_generators()) + self.extra_generators:
            if g.device.type != "cuda":
                raise GraphCaptureError(f"a random generator on {g.device} feeds the iteration: CUDA graphs replay only CUDA generators; {_OFF_FIX}")
            seen.setdefault(id(g), g)
        return list(seen.values())

    def _precheck(self) -> None:
        name = type(self.learner).__name__
        for opt in self.learner.graph_optimizers():
            for group in opt.param_groups:
                if "capturable" in group and not group["capturable"]:
                    raise GraphCaptureError(
                        f"{name}: {type(opt).__name__} is not capturable (its step counters would be read on the host): "
                        f"build it with capturable=True (fused=True, capturable=True for Adam/AdamW), {_OFF_FIX}"
                    )
                for p in group["params"]:
                    if p.device.type != "cuda":
                        raise GraphCaptureError(f"{name}: a parameter lives on {p.device}; the graph needs every tensor on CUDA, {_OFF_FIX}")
                    if p.requires_grad and p.grad is None:
                        raise GraphCaptureError(
                            f"{name}: a parameter of shape {tuple(p.shape)} has no .grad before capture. Allocate gradients "
                            f"once (p.grad = torch.zeros_like(p)) and zero them in place (zero_grad(set_to_none=False)) so "
                            f"their addresses survive replays, {_OFF_FIX}"
                        )

    def _capture(self, sample: Callable[[int], Any], num_updates: int) -> _Captured:
        t0 = time.perf_counter()
        learner = self.learner
        self._precheck()
        for opt in learner.graph_optimizers():
            materialize_optimizer_state(opt)
        generators = self._generators()
        snapshot = _Snapshot(learner, generators)

        # eager warm-up on a side stream, then back to the state before it
        side = torch.cuda.Stream()
        try:
            with forked_stream(side):
                for _ in range(self.warmup_iterations):
                    learner.train_iteration(sample, num_updates)
        except Exception as e:
            snapshot.restore()
            problem = f"the eager warm-up before capture failed: {e}"
            self._agree(problem)
            raise GraphCaptureError(problem) from e
        snapshot.restore()
        grads = self._grad_ptrs()
        self._agree(None)  # every rank reached its capture (no host sync since the warm-up's collectives)

        graph = torch.cuda.CUDAGraph()
        for g in generators:
            graph.register_generator_state(g)
        host = learner.host_state()
        try:
            with torch.cuda.graph(graph):
                if self.inject_capture_failure:
                    raise RuntimeError("a failure injected for a test (debug.fail_capture_rank)")
                outputs = learner.train_iteration(sample, num_updates)
        except Exception as e:
            _reset_generators(generators)
            problem = _explain(type(learner).__name__, e)
            learner.load_host_state(host)
            self._agree(problem)
            raise GraphCaptureError(problem) from e
        # the capture ran Python, not kernels: only host-side state moved
        learner.load_host_state(host)
        self._agree(None)
        if self._grad_ptrs() != grads:
            raise GraphCaptureError(
                f"{type(learner).__name__}.train_iteration replaced parameter gradients while being captured "
                f"(zero_grad() sets them to None by default): zero them in place with zero_grad(set_to_none=False), {_OFF_FIX}"
            )
        if not isinstance(outputs, dict) or not all(isinstance(v, torch.Tensor) for v in outputs.values()):
            raise GraphCaptureError(f"{type(learner).__name__}.train_iteration must return a dict of tensors to be captured")
        self.captures += 1
        self.capture_s.append(time.perf_counter() - t0)
        return _Captured(graph, outputs, sample)

    def _agree(self, problem: str | None) -> None:
        if self.agree is not None:
            self.agree(problem)

    def _grad_ptrs(self) -> list[int | None]:
        return [
            p.grad.data_ptr() if p.grad is not None else None
            for opt in self.learner.graph_optimizers()
            for g in opt.param_groups
            for p in g["params"]
        ]


def graph_fingerprint(learner: GraphCapturable) -> tuple:
    """Everything whose change makes a captured graph stale (host reads only, no device sync)."""
    torch_internals.verify_instance_attributes()  # the private attributes read below (cached: once)
    items: list[Any] = [
        learner.state_generation,
        (id(learner.grad_sync), _sync_fingerprint(learner)),
    ]
    items += [_keys(hooks) for hooks in torch_internals.global_hook_dicts()]
    # it runs before every replay, on the host ahead of the launch: one walk of each module tree, reading
    # each module's own parameters and buffers (module.parameters() and .buffers() would walk it again)
    for module in learner.graph_modules():
        buffers = []
        for m in _module_tree(module):
            items.append((id(m), m.training, _keys(m._forward_hooks), _keys(m._forward_pre_hooks),
                          _keys(m._backward_hooks), _keys(m._backward_pre_hooks)))
            for p in m._parameters.values():
                if p is not None:
                    g = p.grad
                    items.append((p.data_ptr(), p.requires_grad, g.data_ptr() if g is not None else None,
                                  _keys(p._backward_hooks), _keys(p._post_accumulate_grad_hooks)))
            buffers += [b.data_ptr() for b in m._buffers.values() if b is not None]
        items.append(tuple(buffers))
    for opt in learner.graph_optimizers():
        items.append((id(opt), _keys(opt._optimizer_step_pre_hooks), _keys(opt._optimizer_step_post_hooks)))
        for g in opt.param_groups:
            items.append(tuple((k, _scalar(v)) for k, v in g.items() if k != "params"))
            for p in g["params"]:
                items.append(tuple((k, _scalar(v)) for k, v in opt.state.get(p, {}).items()))
    return tuple(items)


def _module_tree(root: nn.Module) -> list[nn.Module]:
    """`root.modules()` in the same order, without the dotted names `named_modules` builds for each one."""
    out: list[nn.Module] = []
    seen: set[int] = set()
    stack = [root]
    while stack:
        m = stack.pop()
        if id(m) in seen:
            continue
        seen.add(id(m))
        out.append(m)
        stack.extend(reversed([c for c in m._modules.values() if c is not None]))
    return out


def _sync_fingerprint(learner: GraphCapturable) -> Any:
    return learner.grad_sync.fingerprint() if learner.grad_sync is not None else None


def _reset_generators(generators: Sequence[torch.Generator]) -> None:
    """Best effort after a failed capture: a generator registered with it can be left in capture mode
    (every later draw then fails); capturing an empty graph with it ends that mode cleanly."""
    try:
        empty = torch.cuda.CUDAGraph()
        for g in generators:
            empty.register_generator_state(g)
        with torch.cuda.graph(empty):
            pass
    except Exception:  # noqa: BLE001 - the original capture error is what the caller reports
        pass


def _explain(name: str, e: BaseException) -> str:
    text = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    low = str(e).lower()
    # "invalidated" / "previous error during capture": an earlier operation broke the capture without
    # raising, and the one that raised names no cause; a host read is the usual one, so both are named
    if "unjoined" in low or "isolated" in low:
        cause = (
            "a side stream used inside the cycle that does not fork from the capture stream and join back (its "
            "work is outside the capture): run it in `with duorl.gpu.graphs.forked_stream(stream):`"
        )
    elif "capturing" in low or "capture" in low or "not permitted" in low or "synchroniz" in low:
        cause = (
            "a host synchronisation inside train_iteration: .item(), float()/int()/bool() of a CUDA tensor, "
            "printing a tensor, torch.nonzero/masked_select or another data-dependent shape, a CPU<->GPU copy, "
            "or debug.check_replay_window=true; or work (e.g. a collective) on a side stream that does not fork "
            "from the capture stream: run it in `with duorl.gpu.graphs.forked_stream(stream):`"
        )
    elif "generator" in low:
        cause = "a random generator the graph does not know: list it in graph_generators() (or extra_generators)"
    elif "out of memory" in low:
        cause = "not enough GPU memory for the graph's private pool"
    else:
        cause = "an operation that cannot be captured"
    return f"capturing {name}.train_iteration as a whole-cycle CUDA graph failed: {text}. Likely cause: {cause}. Fix it, {_OFF_FIX}."
