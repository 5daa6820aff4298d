"""Every "null means automatic" switch of the configuration, resolved in one place.

A switch is `null` (automatic), `true` (required: `config.validate` has already refused it where it
cannot hold) or `false` (off). The rules below are the single source of truth for what "automatic"
means; the application resolves them once per run into a `Switches` record, which the manifest shows.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from duorl.config.schema import Config


def _on_cuda(device: str) -> bool:
    return str(device).split(":")[0] == "cuda"


def whole_cycle_graph_enabled(cfg: Config, learner_device: str) -> bool:
    """algo.algo_params.whole_cycle_cuda_graph: null = on for a CUDA learner unless the replay window is
    checked per batch (host reads); true was validated to have CUDA."""
    configured = cfg.algo.algo_params.whole_cycle_cuda_graph
    if configured is None:
        return _on_cuda(learner_device) and not cfg.debug.check_replay_window
    return bool(configured) and _on_cuda(learner_device)


def dp_graph_enabled(cfg: Config, learner_device: str) -> bool:
    """algo.algo_params.dp_whole_cycle_cuda_graph (data parallel): true (the default) follows the
    single-GPU switch, false opts out (eager DP)."""
    return bool(cfg.algo.algo_params.dp_whole_cycle_cuda_graph) and whole_cycle_graph_enabled(cfg, learner_device)


def compile_enabled(algo: Any, device: Any) -> bool:
    """algo.algo_params.torch_compile for a learner on `device` (null = on with CUDA; the CPU stays
    eager). `algo` is the AlgoConfig: learners resolve it themselves."""
    return _on_cuda(str(device)) and algo.algo_params.torch_compile is not False


def tick_graph_enabled(cfg: Config, env_device: str, tick_capturable: bool = True) -> bool:
    """sim.tick_cuda_graph for envs on `env_device`: null = on when they step on CUDA. `tick_capturable`:
    the task's fact (config/tasks.TaskFacts): a task whose step syncs the host runs its ticks eagerly."""
    configured = cfg.sim.tick_cuda_graph
    if not tick_capturable:
        return False
    return _on_cuda(env_device) if configured is None else bool(configured) and _on_cuda(env_device)


def tick_compile_enabled(cfg: Config, env_device: str, tick_graph: bool) -> bool:
    """sim.tick_compile for envs on `env_device`: null = on exactly when the tick is a graph
    (`tick_graph`, resolved), where fusing pays; true = on for CUDA envs."""
    configured = cfg.sim.tick_compile
    if configured is None:
        return bool(tick_graph)
    return bool(configured) and _on_cuda(env_device)


def solver_early_exit_enabled(cfg: Config, tick_graph: bool) -> bool:
    """sim.solver_early_exit: on only when asked for and inside a captured tick (`tick_graph`, resolved)."""
    return bool(tick_graph) and cfg.sim.solver_early_exit is True


def mjlab_staged_step_enabled(steps_in_stages: bool, configured: bool | None, env_device: str) -> bool:
    """sim.mjlab_staged_step for an mjlab task's envs on `env_device` (envs/mjlab/staged_step.py): null = on
    when they step on CUDA (its stages are CUDA graphs there); true = on (the CPU runs the stages eagerly:
    the equality tests); false = mjlab's own env.step. Off for a task whose facts do not say it steps in
    stages (`steps_in_stages`; validated: true needs one)."""
    if not steps_in_stages:
        return False
    return _on_cuda(env_device) if configured is None else bool(configured)


def data_parallel_enabled(cfg: Config, launched_rank: bool) -> bool:
    """training.data_parallel: null = on when training.devices lists more than one entry or the process
    is a rank started by torchrun / the elastic launcher; true = always (world size 1 too)."""
    configured = cfg.training.data_parallel
    if configured is None:
        return launched_rank or len(cfg.training.devices or ()) > 1
    return bool(configured)


def env_device(cfg: Config, learner_device: str) -> str:
    """Where the envs step: mjwarp on the duo's device, the mujoco backend on CPU threads."""
    return str(learner_device) if cfg.sim.name == "mjwarp" else "cpu"


@dataclass(frozen=True)
class Switches:
    """One run's resolved switches (docs/design.md §2 keys), for the runtime and the manifest."""

    whole_cycle_cuda_graph: bool
    dp_whole_cycle_cuda_graph: bool
    torch_compile: bool
    tick_cuda_graph: bool
    tick_compile: bool
    solver_early_exit: bool
    mjlab_staged_step: bool
    env_device: str

    def record(self) -> dict[str, Any]:
        return asdict(self)


def resolve_switches(cfg: Config, learner_device: str, data_parallel: bool = False,
                     tick_capturable: bool = True, steps_in_stages: bool = False) -> Switches:
    """Every switch for a learner on `learner_device` (envs placed by `env_device`). Under data parallel
    the learner's graph follows dp_whole_cycle_cuda_graph; `tick_capturable`, `steps_in_stages`: the task's facts."""
    envs = env_device(cfg, learner_device)
    tick_graph = tick_graph_enabled(cfg, envs, tick_capturable)
    dp_graph = dp_graph_enabled(cfg, learner_device)
    return Switches(
        whole_cycle_cuda_graph=dp_graph if data_parallel else whole_cycle_graph_enabled(cfg, learner_device),
        dp_whole_cycle_cuda_graph=dp_graph and data_parallel,
        torch_compile=compile_enabled(cfg.algo, learner_device),
        tick_cuda_graph=tick_graph,
        tick_compile=tick_compile_enabled(cfg, envs, tick_graph),
        solver_early_exit=solver_early_exit_enabled(cfg, tick_graph),
        mjlab_staged_step=mjlab_staged_step_enabled(steps_in_stages, cfg.sim.mjlab_staged_step, envs),
        env_device=envs,
    )
