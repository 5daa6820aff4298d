"""The configuration schema: every key a user can set, with its type, default and one-line meaning.

Names follow docs/design.md §2. YAML defaults per algo and task (config/defaults/) and `key=value`
overrides are merged onto these dataclasses by `config.load`, then checked by `config.validate`.

Every leaf is declared with `setting(default, "one-line meaning")`: that line is what `duorl config
--keys` prints and what docs/configuration.md is generated from (a test fails on a key without it).
Comments above a key say why a default is what it is; the meaning itself lives in the help text only.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Optional

ALGOS = ("sac", "flashsac", "warpsac")
SIMS = ("mujoco", "mjwarp")
ACTION_RANGES = ("pd", "joint_limits")  # task.action_range (G1 tasks)
PENALTY_CURRICULA = ("ppo", "fastsac", "off")  # task.penalty_curriculum (g1_walk_flat)
WANDB_MODES = ("online", "offline")  # training.wandb_mode


def setting(default: Any, help: str, allowed: str | tuple[str, ...] | None = None) -> Any:
    """A schema key: its default, its one-line meaning and, where the type and the validator's range
    tables say too little, its allowed values (a tuple of choices or a short text).

    A list default becomes a default_factory (a fresh copy per Config)."""
    metadata: dict[str, Any] = {"help": help}
    if allowed is not None:
        metadata["allowed"] = allowed
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda: copy.deepcopy(default), metadata=metadata)
    return field(default=default, metadata=metadata)


@dataclass
class NanGuardConfig:
    enabled: bool = setting(True, "reset and count (Train/nan_resets) envs whose state, observation or reward is "
                                  "not finite, or whose physics overflowed MuJoCo Warp's contact/constraint capacity")


@dataclass
class TrainingConfig:
    devices: Optional[list[Any]] = setting(
        None, "GPUs for this run (0, cuda:0, GPU-<uuid>, MIG-<id>) or [cpu]; null = cuda:0 for mjwarp when a GPU "
              "is visible, else the CPU; more than one = data parallel")
    num_envs: int = setting(64, "environments per rank")
    eval_envs: int = setting(
        0, "the last N envs of each rank act deterministically (tanh(mean), no noise) and are logged apart as "
           "Eval/*; their transitions still go to replay", "0 .. training.num_envs - 1")
    seed: int = setting(1, "base seed; learner, env, exploration and replay streams (and ranks) derive from it",
                        "0 .. 2**32 - 1")
    log_dir: Optional[str] = setting(None, "run directory (must not exist yet); null = runs/<task>-<algo>-<timestamp>",
                                    "null or a path")
    env_steps_per_sync: int = setting(1, "collector ticks per learner iteration (training semantics)")
    cuda_process_sharing: Optional[str] = setting(
        None, "run the duo under a CUDA MPS daemon (fails closed; docs/mps.md)", "null, mps")
    data_parallel: Optional[bool] = setting(
        None, "data parallel: null = on when training.devices lists several entries or under torchrun; true = also "
              "one device (world size 1 through the launcher); false = never", "null, true, false")
    dp_gradient_wire_dtype: str = setting(
        "float32", "data parallel: the gradient all-reduce's dtype; bfloat16 sends fp32 groups of >= 1024 elements as "
                   "bf16, restored to fp32 before the division by the world size", ("float32", "bfloat16"))
    dp_timeout_s: float = setting(300.0, "data parallel: the longest a rank waits for the others in a collective of "
                                         "the training loop (s)")
    dp_startup_timeout_s: float = setting(1800.0, "data parallel: the same for start-up and checkpoints (building "
                                                  "envs, compiling, capturing, writing) (s)")
    no_play: bool = setting(True, "skip the post-train play (8 deterministic episodes)")
    export_onnx: bool = setting(False, "export the policy to export/policy.onnx and export/policy.safetensors at the end")
    nan_guard: NanGuardConfig = field(default_factory=NanGuardConfig)
    resume: Optional[str] = setting(
        None, "continue from a run directory (its latest checkpoint) or a checkpoint file, into a new run directory",
        "null or a path")
    checkpoint_replay: bool = setting(False, "also store the replay ring in checkpoints (bitwise-exact resume)")
    log_interval: int = setting(1, "iterations per metrics row and progress update")
    progress: bool = setting(True, "show the live progress line")
    torch_threads: int = setting(0, "torch CPU threads per process, learner and collector each (0 = torch's default)")
    max_wall_minutes: Optional[float] = setting(
        None, "stop at the first iteration boundary after this many minutes (build and compile included), with a "
              "final checkpoint, as a completed run; null = run algo.max_iterations", "null or a number > 0")
    wandb: bool = setting(False, "also log metrics to Weights & Biases (needs `pip install duorl[wandb]`; rank 0 only)")
    wandb_project: str = setting("duorl", "the Weights & Biases project (with training.wandb=true)")
    # offline needs no network or account: the run lands in RUN_DIR/wandb/ and `wandb sync` uploads it later
    wandb_mode: str = setting("online", "online (needs `wandb login`) or offline (RUN_DIR/wandb/, upload later "
                                        "with `wandb sync`)", WANDB_MODES)
    stall_timeout_s: float = setting(
        120.0, "liveness (docs/exit_codes.md): a duo process whose heartbeat is older than this in a steady-state "
               "phase ends the run, named with its phase and last progress; never below 50x its longest "
               "steady phase measured so far (s)")
    stall_compile_timeout_s: float = setting(
        900.0, "the same for the long phases: starting a process, building envs, compiling, capturing CUDA graphs, "
               "writing checkpoints, waiting for other ranks (s; >= training.stall_timeout_s)")
    wait_report_s: float = setting(30.0, "a wait for the other process of the duo says what it awaits after this "
                                         "many seconds, and again at this interval")


@dataclass
class AlgoParamsConfig:
    whole_cycle_cuda_graph: Optional[bool] = setting(
        None, "each learner iteration as one CUDA graph: null = on when the learner runs on CUDA (off with "
              "debug.check_replay_window), true = required, false = eager")
    dp_whole_cycle_cuda_graph: bool = setting(True, "the same under data parallel")
    torch_compile: Optional[bool] = setting(
        None, "torch.compile the learner's networks (CUDA only; the first iteration compiles): null = on with "
              "CUDA, false = off")


@dataclass
class AlgoConfig:
    name: str = setting("sac", "the learner; chosen by --algo", ALGOS)
    max_iterations: int = setting(1000, "learner iterations")
    save_interval: int = setting(500, "iterations between checkpoints (a final one is always written)")
    batch_size: int = setting(8192, "minibatch per update")
    updates_per_step: int = setting(8, "gradient updates per learner iteration")
    policy_frequency: int = setting(4, "actor and temperature update every N critic updates")
    learning_starts: int = setting(10, "collector ticks in replay before the first update (each adds num_envs "
                                       "transitions)")
    buffer_size: int = setting(1024, "replay capacity in ticks per env (the ring holds buffer_size * num_envs "
                                     "transitions)", ">= 2 * training.env_steps_per_sync")
    gamma: float = setting(0.97, "discount", "0 < gamma < 1")
    tau: float = setting(0.125, "Polyak rate of the target critics", "0 < tau <= 1")
    actor_lr: float = setting(3e-4, "actor AdamW learning rate")
    critic_lr: float = setting(3e-4, "critic AdamW learning rate")
    alpha_lr: float = setting(3e-4, "temperature AdamW learning rate")
    weight_decay: float = setting(0.001, "AdamW weight decay (not on the temperature)")
    alpha_init: float = setting(0.001, "initial temperature")
    target_entropy_scale: float = setting(
        -0.0, "target entropy = scale * action_dim (sac; the usual -|A| is -1.0)")
    num_atoms: int = setting(101, "atoms of the C51 support of the distributional critics")
    v_min: float = setting(-20.0, "lower end of the critic support", "< algo.v_max")
    v_max: float = setting(20.0, "upper end of the critic support")
    actor_hidden_dims: list[int] = setting([512, 256, 128], "sac: actor MLP widths (LayerNorm + SiLU)",
                                           "non-empty list of ints > 0")
    critic_hidden_dims: list[int] = setting([768, 384, 192], "sac: critic MLP widths (LayerNorm + SiLU)",
                                            "non-empty list of ints > 0")
    log_std_min: float = setting(-5.0, "lower bound of the actor's log-std", "< algo.log_std_max")
    log_std_max: float = setting(0.0, "upper bound of the actor's log-std")
    max_grad_norm: float = setting(0.0, "gradient clipping norm (0 = off)")
    obs_normalization: bool = setting(True, "running observation normalisers (folded into the published actor)")
    use_symmetry: bool = setting(
        False, "add each sampled batch's left-right mirror image (2 x batch_size per update); the task must "
               "describe its mirror (g1_walk_flat does)")
    use_autocast: bool = setting(True, "bf16 autocast of forward passes on CUDA (ignored on the CPU)")
    # --- FlashSAC / WarpSAC only (sac ignores these) ---
    actor_hidden_dim: int = setting(128, "flashsac/warpsac: actor trunk width")
    actor_num_blocks: int = setting(2, "flashsac/warpsac: actor inverted-residual blocks")
    critic_hidden_dim: int = setting(256, "flashsac/warpsac: critic trunk width")
    critic_num_blocks: int = setting(2, "flashsac/warpsac: critic inverted-residual blocks")
    block_expansion: int = setting(4, "flashsac/warpsac: expansion factor of the inverted-residual blocks")
    normalize_reward: bool = setting(
        True, "flashsac/warpsac: divide rewards by the running scale of the discounted return")
    # set v_min/v_max to +-normalized_return_max (flashsac.yaml does)
    normalized_return_max: float = setting(5.0, "flashsac/warpsac: bound of the normalised return")
    target_entropy_std: float = setting(
        0.15, "flashsac/warpsac: temperature target = entropy of a Gaussian with this std per action dim")
    noise_zeta_mu: float = setting(2.0, "flashsac/warpsac: exploration noise held for n ~ Zeta(mu) steps "
                                        "(0 = uniform on [1, noise_zeta_max])")
    noise_zeta_max: int = setting(16, "flashsac/warpsac: longest hold of the exploration noise, in steps")
    lr_warmup_updates: int = setting(0, "flashsac/warpsac: linear learning-rate warm-up, in updates")
    lr_decay_updates: int = setting(0, "flashsac/warpsac: cosine decay length in updates (0 = max_iterations * "
                                       "updates_per_step)")
    lr_end_ratio: float = setting(0.5, "flashsac/warpsac: learning rate at the end of the decay, times the rate")
    # --- replay sampling (any algo; WarpSAC turns it on) ---
    decay_step: int = setting(
        0, "age-biased replay: a tick of age a weighs max(replay_min_weight, 1 - a/decay_step); 0 = uniform")
    replay_min_weight: float = setting(0.1, "age-biased replay: the oldest ticks' weight", "0 < value <= 1")
    replay_num_buckets: int = setting(2000, "age-biased replay: at most this many buckets of ticks over the window")
    algo_params: AlgoParamsConfig = field(default_factory=AlgoParamsConfig)


@dataclass
class TaskConfig:
    name: str = setting("pendulum_swingup", "the task; chosen by --task")
    max_episode_steps: Optional[int] = setting(
        None, "episode length in control steps (time-limit truncation); null = the task's own", "null or >= 1")
    robot_xml: Optional[str] = setting(
        None, "G1 tasks: the model file; null = DUORL_G1_XML, an installed mjlab, or the cache of duorl assets g1",
        "null or a path")
    motion_file: Optional[str] = setting(None, "g1_motion_tracking: reference clip (.npz or .csv, docs/motion.md); null = the synthetic clip",
                                           "null or a path")
    # "pd" is mjlab's choice; "joint_limits" the published FastSAC G1 actor's scaling
    action_range: str = setting(
        "pd", "G1 tasks: what an action of +-1 means: pd = +-0.25 * effort / kp about the standing pose, "
              "joint_limits = up to the joint limit farther from the pose", ACTION_RANGES)
    # the task's default, ppo, is holosoma's PPO G1 schedule and measured best here (envs/tasks/g1_walk.py)
    penalty_curriculum: Optional[str] = setting(
        None, "g1_walk_flat: penalty curriculum, ppo (holosoma's PPO G1 schedule), fastsac (their FastSAC G1 "
              "schedule) or off; null = the task's default (ppo)", PENALTY_CURRICULA)


@dataclass
class SimConfig:
    name: str = setting("mujoco", "the physics backend; chosen by --sim (default: mjwarp with a GPU, else mujoco)",
                        SIMS)
    nthread: int = setting(0, "CPU threads of the mujoco backend (0 = all cores)")
    tick_cuda_graph: Optional[bool] = setting(
        None, "each collector tick (policy, noise, physics, rewards, resets, replay write) as one CUDA graph: "
              "null = on when the envs run on CUDA, true = required, false = eager ticks")
    tick_compile: Optional[bool] = setting(
        None, "torch.compile an env step's tensor code (observations, rewards, terminations, resets): null = on "
              "with the tick graph, true = on (CUDA envs), false = off")
    # Same worlds, same result. Off by default: among thousands of worlds one almost always needs every
    # iteration, so the early exit gains nothing measurable (docs/benchmarks.md).
    solver_early_exit: bool = setting(
        False, "MuJoCo Warp's solver stops once every world has converged (a conditional node of the tick "
               "graph; needs it) instead of running its fixed opt.iterations")


@dataclass
class DebugConfig:
    """Test hooks: artificial delays and protocol self-checks. Never needed for training."""

    collector_delay_ms: float = setting(0.0, "artificial delay per collector iteration (protocol tests)")
    learner_delay_ms: float = setting(0.0, "artificial delay per learner iteration (protocol tests)")
    check_replay_window: bool = setting(
        False, "check every sampled row's tick stamp against the readable window (host sync; tests)")
    nan_inject_step: int = setting(
        -1, "make env 0's state NaN before this collector env step (0-based; -1 = never): the NaN guard end to end")
    nan_loss_iteration: int = setting(
        -1, "make the first update of this learner iteration invalid (a NaN added to its losses) on rank "
            "debug.nan_loss_rank (-1 = never): the skip of invalid updates end to end")
    nan_loss_rank: int = setting(0, "the rank whose losses debug.nan_loss_iteration poisons")
    fail_capture_rank: int = setting(-1, "make this rank's whole-cycle graph capture fail (-1 = never): a capture "
                                         "error reaching every rank")
    slow_phase: Optional[str] = setting(
        None, "fault tests: each time this process enters this phase it stays there debug.slow_phase_s longer, "
              "alive, so that a test can signal it there (runtime/heartbeat.py PHASES)",
        "null, learner:<phase>, collector:<phase>")
    slow_phase_s: float = setting(0.0, "how long debug.slow_phase holds its phase open (s)")


@dataclass
class Config:
    training: TrainingConfig = field(default_factory=TrainingConfig)
    algo: AlgoConfig = field(default_factory=AlgoConfig)
    task: TaskConfig = field(default_factory=TaskConfig)
    sim: SimConfig = field(default_factory=SimConfig)
    debug: DebugConfig = field(default_factory=DebugConfig)
