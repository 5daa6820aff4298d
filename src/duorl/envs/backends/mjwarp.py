"""The `mjwarp` backend: MuJoCo Warp, `nworld` worlds in warp arrays on CUDA (or warp's CPU device).

Every state array is exposed as a zero-copy torch view (`wp.to_torch`), so tasks read and reset
the simulation with torch ops and nothing crosses the host. On CUDA, warp kernels are launched on
torch's current stream, so torch writes (ctrl, resets) and warp steps are ordered without a sync,
and a torch CUDA graph captured around `step` by the caller holds the physics too.
"""

from __future__ import annotations

import contextlib
from typing import Any, Optional

import mujoco
import torch

from duorl.envs.backends.warp_conditional import keep_modules_only
from duorl.startup_phases import PHASES


def quiet_warp() -> None:
    """Warp logs one line per kernel module loaded (hundreds for MuJoCo Warp) at its default INFO level:
    count them for the start-up table instead of printing them (warp_loads.py), unless someone asked for
    them (DUORL_WARP_VERBOSE=1)."""
    from duorl.envs.backends import warp_loads

    warp_loads.install()


def warp_device_for(device: torch.device) -> str:
    """The warp device that shares memory with this torch device."""
    if device.type == "cpu":
        return "cpu"
    if device.type == "cuda":
        return f"cuda:{device.index if device.index is not None else torch.cuda.current_device()}"
    raise ValueError(f"the mjwarp backend runs on cuda or cpu devices, not {device}")


class MjWarpBackend:
    """`num_envs` MuJoCo Warp worlds with torch views of their state.

    `step` launches the `substeps` mjw.step calls on torch's current stream. When torch is capturing
    a CUDA graph around it (the collector's tick, runtime/tick.py), warp is told about that capture
    (`external=True`), so warp's own temporary allocations and module bookkeeping join torch's graph:
    the whole tick, physics included, is one graph launch.

    The constraint solver: eagerly it runs a fixed `opt.iterations` (worlds that converged skip the
    rest inside the kernels) instead of MuJoCo Warp's default conditional while-loop, which would read
    its condition back to the host every iteration (a sync per solver iteration). Inside a torch
    capture, `early_exit` (sim.solver_early_exit) makes it the conditional loop, as a while-node of
    torch's graph that stops once every world has converged (warp_conditional.JoinedSolverLoop: warp's
    own way would pause and resume torch's capture). The same worlds do the same iterations either way;
    the early exit only skips the iterations in which every world would skip.
    """

    def __init__(
        self,
        model: mujoco.MjModel,
        num_envs: int,
        substeps: int,
        device: torch.device,
        put_data_kwargs: Optional[dict[str, Any]] = None,
        early_exit: bool = False,
    ) -> None:
        import mujoco_warp as mjw  # imported here: warp is only paid for when this backend is built
        import warp as wp

        if num_envs < 1 or substeps < 1:
            raise ValueError(f"num_envs and substeps must be >= 1, got {num_envs} and {substeps}")
        self._wp, self._mjw = wp, mjw
        quiet_warp()
        self.num_envs = num_envs
        self.substeps = substeps
        self.device = torch.device(device)
        if self.device.type == "cuda" and self.device.index is None:
            self.device = torch.device("cuda", torch.cuda.current_device())
        self._wdev = warp_device_for(self.device)
        self._wstream: Any = None
        self._wstream_key = 0
        # warp graphs of the captures this backend joined: they keep the kernel modules those
        # captures launched alive for as long as the enclosing torch graph may replay
        self._joined_captures: list[Any] = []
        self._solver_loop: Any = None
        if early_exit:
            if self.device.type != "cuda":
                raise ValueError(f"early_exit (sim.solver_early_exit) needs the worlds on CUDA, not {self.device}")
            from duorl.envs.backends.warp_conditional import JoinedSolverLoop

            self._solver_loop = JoinedSolverLoop(wp, wp.get_device(self._wdev))

        mjd = mujoco.MjData(model)
        mujoco.mj_forward(model, mjd)
        with wp.ScopedDevice(self._wdev):
            with PHASES.part("put_model"):  # parts of the start-up phase that builds the env
                self._m = mjw.put_model(model)
            self._m.opt.graph_conditional = False  # see the class docstring
            # put_data_kwargs carries contact/constraint capacities (nconmax, njmax) for contact-rich
            # tasks; the pendulum needs none.
            with PHASES.part("put_data"):
                self._d = mjw.put_data(model, mjd, nworld=num_envs, **(put_data_kwargs or {}))
        # what prepare_kernels' scratch world is made of
        self._scratch_source: Any = (model, mjd, put_data_kwargs or {})
        self._preload: Any = None

        d = self._d
        self.qpos = wp.to_torch(d.qpos)
        self.qvel = wp.to_torch(d.qvel)
        self.ctrl = wp.to_torch(d.ctrl)
        self.time = wp.to_torch(d.time)
        self.sensordata = wp.to_torch(d.sensordata)
        # Fields a reset clears besides qpos/qvel (what mj_resetData would zero and the next step
        # reads): activations, solver warm start, applied forces.
        self._cleared = [wp.to_torch(a) for a in (d.act, d.qacc_warmstart, d.qfrc_applied, d.xfrc_applied)]
        self._cleared = [t for t in self._cleared if t.numel() > 0]
        # MuJoCo Warp lets NaN propagate instead of resetting the world: the NaN guard's finiteness
        # check sees that directly. What it papers over is a capacity overflow: a world with more
        # constraint rows than njmax (or a full contact pool) drops the rest and steps on, so such a
        # world is flagged here (its per-world overflow bits, cleared before each step) and the NaN
        # guard resets it. Its own printf per world and substep is off: the guard counts instead.
        self._m.opt.warn_overflow = False
        self._overflow = wp.to_torch(d.overflow)
        self.diverged = torch.zeros(num_envs, dtype=torch.bool, device=self.device)

    def prepare_kernels(self) -> None:
        """Start compiling the Warp modules the first step launches, in parallel and in the background
        (warp_preload.py): found by a dry step on a scratch world of the same model (launches recorded, none
        run), loaded on a thread pool while the caller goes on; the first step waits for them. Call it once
        the model is final (after set_model_fields); without it the first step loads them one by one."""
        from duorl.envs.backends import warp_preload

        if self._scratch_source is None:
            return
        wp, mjw = self._wp, self._mjw
        model, mjd, kwargs = self._scratch_source
        self._scratch_source = None

        def list_modules() -> list[tuple[Any, Any]]:
            with wp.ScopedDevice(self._wdev):
                scratch = mjw.put_data(model, mjd, nworld=1, **kwargs)
                modules = warp_preload.step_modules(lambda: mjw.step(self._m, scratch))
                wp.synchronize_device(self._wdev)  # the dry step's native work on the scratch arrays is done
            return modules

        self._preload = warp_preload.start(list_modules, wp.get_device(self._wdev), "MuJoCo Warp's step")

    def _wait_for_kernels(self) -> None:
        from duorl.envs.backends.warp_preload import finish

        preload, self._preload = self._preload, None
        finish(preload)

    def _stream(self) -> Any:
        """The warp view of torch's current stream (cached: wrapping registers the stream)."""
        if self.device.type != "cuda":
            return None
        ts = torch.cuda.current_stream(self.device)
        if self._wstream is None or self._wstream_key != ts.cuda_stream:
            self._wstream, self._wstream_key = self._wp.stream_from_torch(ts), ts.cuda_stream
        return self._wstream

    def _substeps(self) -> None:
        for _ in range(self.substeps):
            self._mjw.step(self._m, self._d)

    def step(self, ctrl: torch.Tensor) -> None:
        if self._preload is not None:  # the first step: the modules it launches are being compiled
            self._wait_for_kernels()
        self.ctrl.copy_(ctrl)
        self._overflow.zero_()
        self._step_substeps()
        torch.ne(self._overflow, 0, out=self.diverged)

    def _step_substeps(self) -> None:
        wp = self._wp
        stream = self._stream()
        if stream is None:  # warp's CPU device: kernels run synchronously, in order
            with wp.ScopedDevice(self._wdev):
                self._substeps()
            return
        with wp.ScopedDevice(self._wdev), wp.ScopedStream(stream, sync_enter=False):
            if torch.cuda.is_current_stream_capturing():
                # torch opened this capture (thread-local mode, runtime/tick.py): warp joins it
                loop = self._solver_loop.active(self._m) if self._solver_loop else contextlib.nullcontext()
                with wp.ScopedCapture(device=self._wdev, stream=stream, external=True,
                                      capture_mode=wp.CaptureMode.THREAD_LOCAL) as capture, loop:
                    self._substeps()
                keep_modules_only(capture.graph)  # torch owns the graph; warp must not destroy it
                self._joined_captures.append(capture.graph)
            else:
                self._substeps()

    def set_model_fields(self, fields: dict[str, torch.Tensor]) -> None:
        """Give each world its own values of model fields: {name: [N, *field.shape]}. MuJoCo Warp
        indexes batched model arrays by world modulo their leading size (1 after put_model), so an
        array with one row per world replaces the shared one. Call before the first step (a
        captured graph would keep the old array)."""
        wp = self._wp
        self._field_tensors = getattr(self, "_field_tensors", {})
        for name, values in fields.items():
            old = getattr(self._m, name)
            if values.shape[0] != self.num_envs or tuple(values.shape[1:2]) != tuple(old.shape[1:2]):
                raise ValueError(f"{name}: expected [{self.num_envs}, {old.shape[1]}, ...], got {tuple(values.shape)}")
            t = values.detach().to(self.device, torch.float32).contiguous()
            self._field_tensors[name] = t  # keeps the memory the warp array views alive
            setattr(self._m, name, wp.from_torch(t, dtype=old.dtype))

    def reset_envs(self, mask: torch.Tensor, qpos: torch.Tensor, qvel: torch.Tensor) -> None:
        m = mask.unsqueeze(1)
        self.qpos.copy_(torch.where(m, qpos.to(self.qpos.dtype), self.qpos))
        self.qvel.copy_(torch.where(m, qvel.to(self.qvel.dtype), self.qvel))
        self.time.masked_fill_(mask, 0.0)
        for t in self._cleared:
            t.masked_fill_(mask.view(-1, *([1] * (t.dim() - 1))), 0.0)

    def _state_views(self) -> dict[str, torch.Tensor]:
        views = {"qpos": self.qpos, "qvel": self.qvel, "time": self.time, "ctrl": self.ctrl, "sensordata": self.sensordata}
        views.update({f"cleared_{i}": t for i, t in enumerate(self._cleared)})
        return views

    def state_dict(self) -> dict[str, torch.Tensor]:
        return {k: v.clone() for k, v in self._state_views().items()}

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        for k, v in self._state_views().items():
            v.copy_(state[k])

    def close(self) -> None:
        if self._preload is not None:  # no compile thread outlives the env (nor runs into Warp's teardown)
            self._preload.wait()
            self._preload = None
        self._joined_captures.clear()
        if self._solver_loop is not None:
            self._solver_loop.body_captures.clear()
