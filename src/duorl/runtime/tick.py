"""The collector's tick: act, step the envs, write one replay tick, count finished episodes.

A tick reads and writes only tensors that live as long as the collector (the current observation,
the tick counter, the episode sums, the env's and the actor's state), so on CUDA it is captured once
as a `torch.cuda.CUDAGraph` and every later tick is one graph launch: policy forward, exploration
noise, the physics substeps (MuJoCo Warp joins torch's capture), observations, rewards, terminations,
auto-reset and the replay write, with no host sync. The same code runs uncaptured on the CPU and
wherever the graph is off (`sim.tick_cuda_graph=false`).

The first tick runs eagerly on the capture stream (it is a real tick: warp loads its kernel modules,
cuBLAS makes its workspace, lazy buffers are created); right after it the body is captured (capture
records, it does not run), and every later tick replays the graph. Both exploration and env generators are registered with the graph, so a replay
draws exactly the numbers an eager tick would.
"""

from __future__ import annotations

import contextlib
from typing import Any

import torch
from torch import nn

from duorl.gpu.graphs import no_gc
from duorl.runtime.replay import ReplayRing
from duorl.runtime.timing import PhaseTimer
from duorl.startup_phases import PHASES


class TickCaptureError(RuntimeError):
    """The collector tick could not be captured as a CUDA graph; the message names the fix."""


class EpisodeSums:
    """Sums over finished episodes (and per-tick mean rewards and task metrics), kept on the device
    between syncs. The tensors are allocated once and zeroed in place: a captured tick adds into them.

    eval_envs: the last eval_envs envs act deterministically (training.eval_envs); their episodes and
    metrics are summed apart (the eval_* results) and left out of the exploring envs' sums.
    """

    def __init__(self, device: torch.device, num_envs: int, metric_names: tuple[str, ...] = (),
                 eval_envs: int = 0) -> None:
        z = lambda: torch.zeros((), dtype=torch.float64, device=device)  # noqa: E731
        self.episodes, self.ret, self.length, self.reward, self.nan = z(), z(), z(), z(), z()
        self.eval_episodes, self.eval_ret, self.eval_length = z(), z(), z()
        self.metric_names = tuple(metric_names)
        self.metrics = torch.zeros(len(self.metric_names), dtype=torch.float64, device=device)
        self.eval_metrics = torch.zeros_like(self.metrics)
        self.eval_envs = int(eval_envs)
        # the exploring envs are the first n_explore: each group is a slice (a view, no extra kernel)
        self.n_explore = num_envs - self.eval_envs

    def zero_(self) -> None:
        for t in (self.episodes, self.ret, self.length, self.reward, self.nan, self.metrics,
                  self.eval_episodes, self.eval_ret, self.eval_length, self.eval_metrics):
            t.zero_()

    def add(self, reward: torch.Tensor, done: torch.Tensor, info: dict[str, Any]) -> None:
        dev = self.episodes.device
        n = self.n_explore
        d = done.to(dev, torch.float64)
        ret = info["episode_return"].to(dev, torch.float64) * d
        length = info["episode_length"].to(dev, torch.float64) * d
        per_env = info["metrics"].to(dev, torch.float64) if self.metric_names else None  # [N, M]
        self.episodes += d[:n].sum()
        self.ret += ret[:n].sum()
        self.length += length[:n].sum()
        self.reward += reward.to(dev, torch.float64)[:n].mean()
        if per_env is not None:
            self.metrics += per_env[:n].mean(dim=0)
        if self.eval_envs > 0:
            self.eval_episodes += d[n:].sum()
            self.eval_ret += ret[n:].sum()
            self.eval_length += length[n:].sum()
            if per_env is not None:
                self.eval_metrics += per_env[n:].mean(dim=0)
        if "nan_resets" in info:
            self.nan += info["nan_resets"].to(dev, torch.float64)

    def result(self) -> dict[str, float]:
        """Host values (syncs: call after the iteration's publish sync). Task metrics are sums over the
        iteration's ticks of per-tick means over envs, in slots task_metric_<i> (spec.metric_names[i]);
        with eval envs, also eval_episodes, eval_episode_*_sum and eval_task_metric_<i>."""
        out = {
            "episodes": float(self.episodes),
            "episode_return_sum": float(self.ret),
            "episode_length_sum": float(self.length),
            "reward_sum": float(self.reward),
            "nan_resets": float(self.nan),
        }
        for i, v in enumerate(self.metrics.tolist()):
            out[f"task_metric_{i}"] = v
        if self.eval_envs > 0:
            out["eval_episodes"] = float(self.eval_episodes)
            out["eval_episode_return_sum"] = float(self.eval_ret)
            out["eval_episode_length_sum"] = float(self.eval_length)
            for i, v in enumerate(self.eval_metrics.tolist()):
                out[f"eval_task_metric_{i}"] = v
        return out


class CollectorTick:
    """One collector tick over `env` with `actor`, writing `ring`; see the module docstring.

    obs: the observation the first tick acts on (copied into the tick's own buffers).
    cuda_graph: capture the tick as one CUDA graph (the env's device must be CUDA).
    eval_envs: the last eval_envs envs take the policy's deterministic action (EpisodeSums).
    """

    def __init__(
        self,
        env: Any,
        actor: nn.Module,
        ring: ReplayRing,
        generator: torch.Generator,
        obs: dict[str, torch.Tensor],
        device: torch.device,
        cuda_graph: bool = False,
        timer: PhaseTimer | None = None,
        eval_envs: int = 0,
    ) -> None:
        if cuda_graph and device.type != "cuda":
            raise TickCaptureError(
                f"sim.tick_cuda_graph=true needs the collector on CUDA, it runs on {device}: "
                "set sim.tick_cuda_graph=false (or null) or train on a GPU"
            )
        if cuda_graph and not getattr(env, "tick_capturable", True):  # the env's own word (envs/base.py, optional)
            raise TickCaptureError(f"the env's tick cannot be one CUDA graph: {getattr(env, 'tick_eager_reason', None)}. "
                                   "Set sim.tick_cuda_graph=false to run the tick eagerly.")
        self.env, self.actor, self.ring, self.generator = env, actor, ring, generator
        self.device = device
        self.obs = {k: v.to(device).clone() for k, v in obs.items()}
        self.tick = torch.zeros((), dtype=torch.int64, device=device)
        num_envs = next(iter(self.obs.values())).shape[0]
        if not 0 <= eval_envs < num_envs:
            raise ValueError(f"training.eval_envs={eval_envs}: must be in [0, {num_envs}) "
                             f"(the collector has {num_envs} envs)")
        self.sums = EpisodeSums(device, num_envs, env.spec.metric_names, eval_envs)
        # [N, 1] True where an env acts deterministically; None when all explore
        self._deterministic = ((torch.arange(num_envs, device=device) >= self.sums.n_explore).unsqueeze(1)
                               if eval_envs > 0 else None)
        self.cuda_graph = cuda_graph
        self.timer = timer
        self.graph: torch.cuda.CUDAGraph | None = None
        self._untouched = True  # no tick ran yet (the start-up table times the first)
        self._stream = torch.cuda.Stream(device) if cuda_graph else None
        # the env times its physics as a phase of the eager tick; a captured tick is timed whole
        env.phase_timer = None if cuda_graph else timer

    @property
    def captured(self) -> bool:
        return self.graph is not None

    def begin_iteration(self, first_tick: int) -> None:
        self.tick.fill_(first_tick)
        self.sums.zero_()

    def run(self, first_tick: int, ticks: int) -> None:
        """Ticks [first_tick, first_tick + ticks): no host sync (the caller syncs to publish)."""
        self.begin_iteration(first_tick)
        for _ in range(ticks):
            self.step()

    def step(self) -> None:
        timer = self.timer
        phase = timer.phase("collector_tick_ms") if timer is not None else contextlib.nullcontext()
        with phase:
            if not self.cuda_graph:
                first = self._untouched
                self._untouched = False
                with PHASES.phase("first tick") if first else contextlib.nullcontext():  # compiles (sim.tick_compile)
                    self._body(timed=True)
            elif self.graph is not None:
                self.graph.replay()
            else:
                self._eager_then_capture()

    def _phase(self, name: str, timed: bool) -> Any:
        if timed and self.timer is not None:
            return self.timer.phase(name)
        return contextlib.nullcontext()

    @torch.no_grad()
    def _body(self, timed: bool) -> None:
        env, obs = self.env, self.obs
        with self._phase("collector_inference_ms", timed):
            # the policy's own output too: tasks penalise its changes, not the exploration noise's
            action, policy_action = self.actor.explore_with_mean(obs["actor"], self.generator)
            if self._deterministic is not None:
                action = torch.where(self._deterministic, policy_action, action)
        with self._phase("collector_env_step_ms", timed):
            next_obs, reward, terminated, truncated, info = env.step(action.to(env.device), policy_action.to(env.device))
        dev = self.device
        reward, terminated, truncated = reward.to(dev), terminated.to(dev), truncated.to(dev)
        with self._phase("collector_replay_write_ms", timed):
            final_obs = {k: v.to(dev) for k, v in info["final_obs"].items()}
            self.ring.write(self.tick, obs, action, reward, final_obs, terminated.float(), truncated.float())
        self.sums.add(reward, terminated | truncated, info)
        for k, v in next_obs.items():
            obs[k].copy_(v)
        self.tick += 1

    def _eager_then_capture(self) -> None:
        assert self._stream is not None
        current = torch.cuda.current_stream(self.device)
        self._stream.wait_stream(current)
        with PHASES.phase("first tick"), torch.cuda.stream(self._stream):
            self._body(timed=False)  # the real first tick, on the stream the capture will use
        current.wait_stream(self._stream)
        graph = torch.cuda.CUDAGraph()
        for gen in self._generators():
            graph.register_generator_state(gen)
        try:
            with PHASES.phase("tick capture"), no_gc(), \
                    torch.cuda.graph(graph, stream=self._stream, capture_error_mode="thread_local"):
                self._body(timed=False)
        except Exception as e:  # noqa: BLE001 - re-raised with the fix named
            raise TickCaptureError(
                f"capturing the collector tick as a CUDA graph failed ({type(e).__name__}: {e}). A tick must "
                "not sync with the host, allocate outside torch/warp, or change tensor addresses. "
                "Set sim.tick_cuda_graph=false to run the tick eagerly."
            ) from e
        # capture records the tick without running it: the next tick is the first replay
        self.graph = graph

    def _generators(self) -> list[torch.Generator]:
        gens = [self.generator]
        env_gen = self.env.generator
        if env_gen is not None and env_gen.device.type == "cuda" and env_gen is not self.generator:
            gens.append(env_gen)
        return gens

    def release(self) -> None:
        self.graph = None
