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
    # the last eval_envs of each collector's envs act deterministically (the policy's tanh(mean), no
    # exploration noise) and are logged apart as Eval/* (episode length and return, the task's
    # metrics): how the policy itself does, measured during training. Their transitions still go to
    # replay. 0 = every env explores.
    eval_envs: int = 0
    seed: int = 1
    log_dir: Optional[str] = None
    env_steps_per_sync: int = 1
    cuda_process_sharing: Optional[str] = None
    # data parallel (one duo per device, gradients averaged over ranks): null = automatic (on when
    # training.devices lists more than one entry, or under torchrun), true = also on one device (world
    # size 1 through the launcher), false = never (one entry only)
    data_parallel: Optional[bool] = None
    # data parallel: the gradient all-reduce's wire dtype; bfloat16 sends fp32 groups of >= 1024 elements
    # as bf16 (restored to fp32 before the division by the world size)
    dp_gradient_wire_dtype: str = "float32"
    # data parallel: the longest a rank waits for the others in a collective of the training loop (s)
    dp_timeout_s: float = 600.0
    # data parallel: the same for start-up and checkpoints (building envs, compiling, capturing, writing)
    dp_startup_timeout_s: float = 1800.0
    no_play: bool = True
    export_onnx: bool = False
    nan_guard: NanGuardConfig = field(default_factory=NanGuardConfig)
    resume: Optional[str] = None
    checkpoint_replay: bool = False
    log_interval: int = 1
    progress: bool = True
    # torch CPU threads per process (learner and collector each); 0 = leave torch's default
    torch_threads: int = 0
    # stop at the first iteration boundary after this many minutes of the run (build and compile
    # included), with a final checkpoint, as a completed run; null = run max_iterations
    max_wall_minutes: Optional[float] = None
    # liveness (DESIGN.md §3, runtime/heartbeat.py): a peer process of the duo whose heartbeat is older
    # than this in a steady-state phase ends the run with an error naming it, its phase and its last
    # progress. The bound applied is never below 50x the peer's longest steady-state phase measured so far.
    stall_timeout_s: float = 120.0
    # the same for the long phases: starting a process, building envs, compiling, capturing CUDA graphs,
    # writing checkpoints and waiting for other ranks (a cold compile measured ~100 s on the H200)
    stall_compile_timeout_s: float = 900.0
    # a wait for the peer longer than this says what it awaits, and again every this many seconds
    wait_report_s: float = 30.0


@dataclass
class AlgoParamsConfig:
    # capture each learner iteration as one CUDA graph: null = automatic (on when the learner runs on
    # CUDA, unless debug.check_replay_window), true = required (an error on CPU), false = eager
    whole_cycle_cuda_graph: Optional[bool] = None
    dp_whole_cycle_cuda_graph: bool = True
    # torch.compile the learner's networks (fused kernels; CUDA learners only, the CPU stays eager):
    # null = automatic (on with CUDA), false = off
    torch_compile: Optional[bool] = None


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
    # add each sampled batch's left-right mirror image to it (2 x batch_size transitions per update;
    # the task must describe its mirror, EnvSpec.mirror: g1_walk_flat does)
    use_symmetry: bool = False
    # bf16 autocast of forward passes on CUDA (ignored on CPU)
    use_autocast: bool = True
    # --- FlashSAC / WarpSAC only (sac ignores these) ---
    # inverted-residual trunks: width, blocks, and the blocks' expansion factor
    actor_hidden_dim: int = 128
    actor_num_blocks: int = 2
    critic_hidden_dim: int = 256
    critic_num_blocks: int = 2
    block_expansion: int = 4
    # divide rewards by the running scale of the discounted return, so that normalised returns stay
    # within +-normalized_return_max (set v_min/v_max to that range)
    normalize_reward: bool = True
    normalized_return_max: float = 5.0
    # temperature target: the entropy of a Gaussian with this std per action dimension
    target_entropy_std: float = 0.15
    # exploration noise held for n ~ Zeta(noise_zeta_mu) steps, n in [1, noise_zeta_max]
    noise_zeta_mu: float = 2.0
    noise_zeta_max: int = 16
    # learning rates: linear warm-up over lr_warmup_updates, then cosine decay to lr_end_ratio times
    # the configured rate over lr_decay_updates updates (0 = max_iterations * updates_per_step)
    lr_warmup_updates: int = 0
    lr_decay_updates: int = 0
    lr_end_ratio: float = 0.5
    # --- replay sampling (any algo; WarpSAC turns it on) ---
    # age-biased sampling: decay_step > 0 weights each tick by max(replay_min_weight, 1 - age/decay_step)
    # (age in collector ticks, 0 = newest), evaluated per bucket of ticks (at most replay_num_buckets
    # buckets over the readable window); 0 = uniform over the window
    decay_step: int = 0
    replay_min_weight: float = 0.1
    replay_num_buckets: int = 2000
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
    # G1 tasks: what an action of +-1 means for a joint target. "pd": +-0.25 * effort / kp about the
    # standing pose (mjlab's choice); "joint_limits": +-1 reaches the joint limit farther from the
    # standing pose (the published FastSAC G1 actor's scaling)
    action_range: str = "pd"
    # g1_walk_flat: the penalty curriculum (envs/tasks/g1_walk.py), one of PENALTY_CURRICULA; null = the
    # task's default, ppo (holosoma's PPO G1 schedule, measured best here); fastsac (their FastSAC G1
    # schedule); off
    penalty_curriculum: Optional[str] = None


ACTION_RANGES = ("pd", "joint_limits")  # task.action_range (G1 tasks)
PENALTY_CURRICULA = ("ppo", "fastsac", "off")  # task.penalty_curriculum (g1_walk_flat)


@dataclass
class SimConfig:
    name: str = "mujoco"
    # CPU threads for the mujoco backend; 0 = all cores
    nthread: int = 0
    # capture each collector tick (policy, noise, physics, rewards, resets, replay write) as one CUDA
    # graph: null = automatic (on when the envs run on CUDA: mjwarp on a GPU), true = required (an
    # error otherwise), false = eager ticks
    tick_cuda_graph: Optional[bool] = None
    # torch.compile the tensor code of an env step (observations, rewards, terminations, resets) into
    # a few fused kernels: null = automatic (on with the tick graph), true = on (CUDA envs), false = off
    tick_compile: Optional[bool] = None
    # MuJoCo Warp's constraint solver stops once every world has converged (a conditional node of the
    # tick graph) instead of always running its opt.iterations: true = on (needs the tick graph), false =
    # the fixed iterations. Same worlds, same result. Off by default: on the H200 it gained 0.5% at 4096
    # G1 worlds and nothing at 8192 (benchmarks/2026-11-29_solver_early_exit_h200/): among thousands of
    # worlds one almost always needs every iteration.
    solver_early_exit: bool = False


@dataclass
class DebugConfig:
    """Test hooks: artificial delays and protocol self-checks. Never needed for training."""

    collector_delay_ms: float = 0.0
    learner_delay_ms: float = 0.0
    # every sampled batch checks its rows' tick stamps against the readable window (host sync)
    check_replay_window: bool = False
    # make env 0's velocities NaN just before the collector's env step with this index (0-based;
    # -1 = never): drives the NaN guard end to end (Train/nan_resets, nan_first_state.pt)
    nan_inject_step: int = -1
    # make the first update of this learner iteration invalid (a NaN added to its losses) on rank
    # nan_loss_rank (-1 = never): drives the skip of invalid updates (Train/skipped_updates)
    nan_loss_iteration: int = -1
    nan_loss_rank: int = 0
    # fault tests: each time this process enters this phase ("learner:writing a checkpoint", see
    # runtime/heartbeat.py PHASES) it stays there slow_phase_s longer, alive (beating), so that a test
    # can signal it there
    slow_phase: Optional[str] = None
    slow_phase_s: float = 0.0


@dataclass
class Config:
    training: TrainingConfig = field(default_factory=TrainingConfig)
    algo: AlgoConfig = field(default_factory=AlgoConfig)
    task: TaskConfig = field(default_factory=TaskConfig)
    sim: SimConfig = field(default_factory=SimConfig)
    debug: DebugConfig = field(default_factory=DebugConfig)
