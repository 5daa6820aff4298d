"""The configuration schema: every key a user can set, with its type and default.

Names follow DESIGN.md §2. YAML defaults per algo and task (config/defaults/) and `key=value`
overrides are merged onto these dataclasses by `config.load`, then checked by `config.validate`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

ALGOS = ("sac", "flashsac", "warpsac")
SIMS = ("mujoco", "mjwarp")


@dataclass
class NanGuardConfig:
    enabled: bool = True


@dataclass
class TrainingConfig:
    # GPUs for this run (indices, UUIDs or MIG ids) or ["cpu"]; null picks cuda:0 when the sim can use
    # CUDA and one is present, else the CPU. More than one entry means data parallel.
    devices: Optional[list[Any]] = None
    num_envs: int = 64
    seed: int = 1
    log_dir: Optional[str] = None
    env_steps_per_sync: int = 1
    cuda_process_sharing: Optional[str] = None
    dp_gradient_wire_dtype: str = "float32"
    no_play: bool = True
    export_onnx: bool = False
    nan_guard: NanGuardConfig = field(default_factory=NanGuardConfig)
    resume: Optional[str] = None
    checkpoint_replay: bool = False
    log_interval: int = 1
    progress: bool = True
    # torch CPU threads per process (learner and collector each); 0 = leave torch's default
    torch_threads: int = 0


@dataclass
class AlgoParamsConfig:
    # null = automatic (the graph is used where it is built); true/false force it
    whole_cycle_cuda_graph: Optional[bool] = None
    dp_whole_cycle_cuda_graph: bool = True


@dataclass
class AlgoConfig:
    name: str = "sac"
    max_iterations: int = 1000
    save_interval: int = 500
    batch_size: int = 8192
    updates_per_step: int = 8
    policy_frequency: int = 4
    # collector ticks before the first update (each tick adds num_envs transitions)
    learning_starts: int = 10
    # replay capacity in ticks per env (the ring holds buffer_size * num_envs transitions)
    buffer_size: int = 1024
    gamma: float = 0.97
    tau: float = 0.125
    actor_lr: float = 3e-4
    critic_lr: float = 3e-4
    alpha_lr: float = 3e-4
    weight_decay: float = 0.001
    alpha_init: float = 0.001
    # target entropy = target_entropy_scale * action_dim (negative: the usual -|A| is scale -1.0)
    target_entropy_scale: float = -0.0
    num_atoms: int = 101
    v_min: float = -20.0
    v_max: float = 20.0
    actor_hidden_dims: list[int] = field(default_factory=lambda: [512, 256, 128])
    critic_hidden_dims: list[int] = field(default_factory=lambda: [768, 384, 192])
    log_std_min: float = -5.0
    log_std_max: float = 0.0
    max_grad_norm: float = 0.0
    obs_normalization: bool = True
    # bf16 autocast of forward passes on CUDA (ignored on CPU)
    use_autocast: bool = True
    algo_params: AlgoParamsConfig = field(default_factory=AlgoParamsConfig)


@dataclass
class TaskConfig:
    name: str = "pendulum_swingup"
    # episode length in control steps; null = the task's own default
    max_episode_steps: Optional[int] = None
    # G1 model file (G1 tasks)
    robot_xml: Optional[str] = None
    # reference clip (motion tracking)
    motion_file: Optional[str] = None


@dataclass
class SimConfig:
    name: str = "mujoco"
    # CPU threads for the mujoco backend; 0 = all cores
    nthread: int = 0


@dataclass
class DebugConfig:
    """Test hooks: artificial delays and protocol self-checks. Never needed for training."""

    collector_delay_ms: float = 0.0
    learner_delay_ms: float = 0.0
    # every sampled batch checks its rows' tick stamps against the readable window (host sync)
    check_replay_window: bool = False


@dataclass
class Config:
    training: TrainingConfig = field(default_factory=TrainingConfig)
    algo: AlgoConfig = field(default_factory=AlgoConfig)
    task: TaskConfig = field(default_factory=TaskConfig)
    sim: SimConfig = field(default_factory=SimConfig)
    debug: DebugConfig = field(default_factory=DebugConfig)
